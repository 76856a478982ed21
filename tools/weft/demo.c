/*
 * `weft demo`: TensorFlow's beginner tutorial, trained. Flatten 784 -> Dense 128 relu -> Dense 10
 * softmax on Fashion-MNIST, Adam (lr 1e-3), batch 32, 5 epochs, through the Sequential model API:
 * the devices, the model summary, where a training step runs, Keras-style progress, the test accuracy,
 * the throughput and a Chrome trace of one training step.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct demo_opts {
    const char *device, *data, *trace, *export_onnx, *save;
    int strict, epochs, threads, quiet, time_steps, cnn, print_losses;
    long batch;
    const char *save_init, *input_trace;
    int no_prefetch, steps_per_execution;
    double lr;
    uint64_t seed;
    wf_dtype_policy policy;
} demo_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: weft demo [--device SPEC] [--strict] [--epochs N] [--batch N] [--threads N]\n"
               "                 [--lr X] [--seed N] [--data DIR] [--trace FILE.json] [--export-onnx FILE]\n"
               "                 [--save FILE.safetensors] [--quiet] [--time-steps N] [--model mlp|cnn]\n"
               "                 [--save-initial FILE.safetensors] [--print-losses N]\n"
               "                 [--policy float32|mixed_float16|mixed_bfloat16] [--no-prefetch]\n"
               "                 [--input-trace FILE.json] [--steps-per-execution N]\n"
               "Trains Flatten -> Dense(128, relu) -> Dense(10, softmax) on Fashion-MNIST (default: 5 epochs,\n"
               "batch 32, Adam lr 1e-3, data in " DEFAULT_DATA ").\n"
               "--model cnn trains Conv2D(32, 3x3, relu) -> MaxPool(2) -> Conv2D(64, 3x3, relu) -> MaxPool(2)\n"
               "-> Flatten -> Dense(128, relu) -> Dense(10, softmax) instead (valid padding, NCHW).\n"
               "--policy sets Keras's dtype policy (default float32): mixed_bfloat16 and mixed_float16 compute\n"
               "in bf16 / f16 with f32 variables, loss and metrics; mixed_float16 adds dynamic loss scaling.\n"
               "--save-initial writes the initial weights before any step; --print-losses N trains N steps on\n"
               "the first N batches in file order (no shuffle) and prints each step's loss, then exits.\n"
               "The input is an input pipeline (wf_dataset_*): the IDX files, shuffle (a buffer of the whole\n"
               "set, reshuffled each epoch), batch, then prefetch_to_device(SPEC, 2) onto --device when it is\n"
               "not the CPU, else prefetch(AUTOTUNE); --no-prefetch leaves the prefetch out (to compare).\n"
               "--input-trace writes a Chrome trace of every step's run and input wait beside the prefetch\n"
               "copies; --steps-per-execution N reads the running metrics back every N steps (default: only\n"
               "when the progress bar redraws and at each epoch's end).\n"
               "--device runs every node on SPEC (soft placement: nodes it cannot run fall back, with the\n"
               "reason; --strict makes that an error). --time-steps N times N training steps and exits (with an\n"
               "explicit --trace, it then traces one more step and prints its summary).\n"
               "  --epochs N 1 to 100000; --batch N 1 to 65536; --threads N 0 to 1024 (0, the default: one\n"
               "  per core); --lr X a positive finite number; --seed N 0 to 2^64-1; --time-steps N 1 to\n"
               "  1000000. --trace (default weft-demo-trace.json; '' writes none), --save and --export-onnx are\n"
               "  checked writable before the training starts.\n"
               "Exit status: 0 done, 1 the data, a file or the training failed, 2 a usage error.\n");
}

/* Reads the IDX pair "<dir>/<split>-images-idx3-ubyte.gz", "<dir>/<split>-labels-idx1-ubyte.gz". */
static wf_status *load(const char *dir, const char *split, wf_dataset **ds)
{
    char im[1024], lb[1024];
    snprintf(im, sizeof im, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(lb, sizeof lb, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    wf_dataset_options o;
    wf_dataset_options_init(&o);
    o.scale = 1;
    o.label_dtype = WF_I64;
    return wf_dataset_from_idx(im, lb, &o, ds);
}

/* The training input, built with the input-pipeline API as the seeds describe it: the IDX arrays,
 * shuffle over the whole set (a new order each epoch from the seed), batch, and a prefetch: onto the
 * training device when it is not the CPU (its copies overlap the running step), else on the host. */
static wf_status *input_pipeline(wf_context *ctx, wf_dataset *train, const demo_opts *o, wf_dataset **out)
{
    wf_dataset *sh = NULL, *b = NULL;
    wf_status *s = wf_dataset_shuffle(train, wf_dataset_num_samples(train), o->seed, 1, &sh);
    if (!s) s = wf_dataset_batch(sh, o->batch, 0, &b);
    wf_dataset_free(sh);
    if (s || o->no_prefetch) {
        *out = b;
        return s;
    }
    int cpu = !o->device || !strncmp(o->device, "CPU", 3) || strstr(o->device, "device:CPU");
    s = cpu ? wf_dataset_prefetch(b, WF_AUTOTUNE, out) : wf_dataset_prefetch_to_device(b, ctx, o->device, 2, out);
    wf_dataset_free(b);
    return s;
}

/* One line per device of where a training step runs, and every node that left the requested
 * device with its reason. */
static void placement_summary(wf_model *m, wf_context *ctx, long batch, const char *device)
{
    wf_placement *p = NULL;
    wf_status *s = wf_model_placement(m, batch, &p);
    if (s) {
        printf("placement: %s\n", wf_status_message(s));
        wf_status_free(s);
        return;
    }
    int n = wf_placement_num_entries(p), nd = wf_context_num_devices(ctx);
    printf("\nplacement of one training step (batch %ld): %d nodes, estimated %.3f ms\n", batch, n,
           wf_placement_est_makespan_ms(p));
    for (int d = 0; d < nd; d++) {
        int nodes = 0, copies = 0;
        double est = 0;
        for (int i = 0; i < n; i++) {
            wf_placement_entry e = wf_placement_entry_at(p, i);
            if (e.device_index != d) continue;
            if (e.is_copy) copies++;
            else nodes++;
            if (e.est_ms > 0) est += e.est_ms;
        }
        if (!nodes && !copies) continue;
        wf_device_info info;
        if (wf_context_device(ctx, d, &info)) continue;
        const char *shortn = strstr(info.name, "device:");
        printf("  %-10s %4d nodes, %3d copies in, compute estimate %.3f ms\n", shortn ? shortn + 7 : info.name, nodes,
               copies, est);
    }
    if (device) {
        int shown = 0;
        for (int i = 0; i < n; i++) {
            wf_placement_entry e = wf_placement_entry_at(p, i);
            if (e.is_copy || !e.reason || !strstr(e.reason, "soft placement")) continue;
            if (shown++ < 8) printf("  %s (%s): %s\n", e.node, e.op, e.reason);
        }
        if (shown > 8) printf("  ... and %d more nodes placed elsewhere\n", shown - 8);
    }
    wf_placement_free(p);
}

typedef struct demo_epochs {
    double *seconds;
    int64_t samples;
} demo_epochs;

static int on_epoch(void *user, const wf_epoch_logs *lg)
{
    demo_epochs *d = user;
    d->seconds[lg->epoch] = lg->seconds;
    d->samples += lg->samples;
    return 0;
}

/* --time-steps: the median time of n training steps on real batches, after 20 warm-up steps. */
static wf_status *time_steps(wf_model *m, wf_dataset *train, long batch, int n)
{
    wf_status *s = wf_dataset_set_batch(train, batch, 1);
    if (s) return s;
    wf_dataset_set_shuffle(train, 1);
    double *t = malloc(sizeof(double) * (size_t)n);
    if (!t) return NULL;
    for (int i = -20; i < n && !s; i++) {
        wf_tensor *x = NULL, *y = NULL;
        s = wf_dataset_next_batch(train, &x, &y);
        if (!s && !x) {
            wf_dataset_reset(train);
            s = wf_dataset_next_batch(train, &x, &y);
        }
        if (s) break;
        double t0 = now_s();
        s = wf_model_train_step(m, x, y, NULL, NULL);
        if (i >= 0) t[i] = (now_s() - t0) * 1e3;
        wf_tensor_free(x);
        wf_tensor_free(y);
    }
    if (!s) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        printf("train step: batch %ld, %d steps, median %.3f ms, p10 %.3f ms, p90 %.3f ms\n", batch, n, t[n / 2],
               t[n / 10], t[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1]);
    }
    free(t);
    return s;
}

/* The layers: the tutorial's MLP, or (cnn) the small CNN of issue 14's training benchmark. */
static wf_status *add_layers(wf_model *m, int cnn)
{
    wf_layer l;
    wf_status *s;
    if (cnn) {
        wf_layer_init(&l, WF_LAYER_RESHAPE);
        l.target_rank = 3;
        l.target[0] = 1, l.target[1] = 28, l.target[2] = 28;
        if ((s = wf_model_add(m, &l))) return s;
        for (int i = 0; i < 2; i++) {
            wf_layer_init(&l, WF_LAYER_CONV2D);
            l.filters = i ? 64 : 32;
            l.kernel[0] = l.kernel[1] = 3;
            l.activation = WF_ACT_RELU;
            if ((s = wf_model_add(m, &l))) return s;
            wf_layer_init(&l, WF_LAYER_MAXPOOL2D);
            if ((s = wf_model_add(m, &l))) return s;
        }
    }
    wf_layer_init(&l, WF_LAYER_FLATTEN);
    if ((s = wf_model_add(m, &l))) return s;
    wf_layer_init(&l, WF_LAYER_DENSE);
    l.units = 128;
    l.activation = WF_ACT_RELU;
    if ((s = wf_model_add(m, &l))) return s;
    wf_layer_init(&l, WF_LAYER_DENSE);
    l.units = 10;
    l.activation = WF_ACT_SOFTMAX;
    return wf_model_add(m, &l);
}

/* --print-losses: n steps on batches 0..n-1 of the file's order, each step's loss on one line. */
static wf_status *print_losses(wf_model *m, wf_dataset *train, long batch, int n)
{
    wf_status *s = NULL;
    for (int i = 0; i < n && !s; i++) {
        wf_tensor *x = NULL, *y = NULL;
        double loss = 0;
        s = wf_dataset_rows(train, (int64_t)i * batch, batch, &x, &y);
        if (!s) s = wf_model_train_step(m, x, y, &loss, NULL);
        if (!s) printf("step %d loss %.9g\n", i, loss);
        wf_tensor_free(x);
        wf_tensor_free(y);
    }
    return s;
}

static const char default_trace[] = "weft-demo-trace.json";

/* -1: run with *o; otherwise the exit code (0 after --help). */
static int parse(int argc, char **argv, demo_opts *o)
{
    *o = (demo_opts){.data = DEFAULT_DATA, .trace = default_trace, .epochs = 5, .batch = 32, .lr = 1e-3,
                     .seed = 42, .policy = WF_POLICY_FLOAT32};
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
#define VALUE(META) if (!(v = cli_value("demo", argc, argv, &i, META))) return CLI_USAGE
#define INT(LO, HI, DST)                                                                                      \
    do {                                                                                                      \
        VALUE("N");                                                                                           \
        if (cli_int("demo", a, v, LO, HI, &n)) return CLI_USAGE;                                              \
        DST = n;                                                                                              \
    } while (0)
        if (!strcmp(a, "--device")) { VALUE("SPEC"); o->device = v; }
        else if (!strcmp(a, "--strict")) o->strict = 1;
        else if (!strcmp(a, "--epochs")) INT(1, 100000, o->epochs);
        else if (!strcmp(a, "--batch")) INT(1, 65536, o->batch);
        else if (!strcmp(a, "--threads")) INT(0, 1024, o->threads);
        else if (!strcmp(a, "--time-steps")) INT(1, 1000000, o->time_steps);
        else if (!strcmp(a, "--print-losses")) INT(1, 1000000, o->print_losses);
        else if (!strcmp(a, "--save-initial")) { VALUE("FILE.safetensors"); o->save_init = v; }
        else if (!strcmp(a, "--model")) {
            VALUE("mlp|cnn");
            if (!strcmp(v, "cnn")) o->cnn = 1;
            else if (strcmp(v, "mlp"))
                return cli_usage_error("demo", "--model must be mlp or cnn, not '%s'", v);
        }
        else if (!strcmp(a, "--policy")) {
            VALUE("float32|mixed_float16|mixed_bfloat16");
            wf_status *ps = wf_policy_from_name(v, &o->policy);
            if (ps) {
                int rc = cli_usage_error("demo", "--policy: %s", wf_status_message(ps));
                wf_status_free(ps);
                return rc;
            }
        }
        else if (!strcmp(a, "--lr")) {
            VALUE("X");
            if (cli_positive("demo", a, v, &o->lr)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed")) {
            VALUE("N");
            if (cli_u64("demo", a, v, &o->seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--data")) { VALUE("DIR"); o->data = v; }
        else if (!strcmp(a, "--trace")) {
            /* --trace '' turns the trace off, so an empty value is a value here */
            if (i + 1 < argc && !argv[i + 1][0]) o->trace = argv[++i];
            else { VALUE("FILE.json"); o->trace = v; }
        } else if (!strcmp(a, "--export-onnx")) { VALUE("FILE"); o->export_onnx = v; }
        else if (!strcmp(a, "--save")) { VALUE("FILE.safetensors"); o->save = v; }
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--no-prefetch")) o->no_prefetch = 1;
        else if (!strcmp(a, "--input-trace")) { VALUE("FILE.json"); o->input_trace = v; }
        else if (!strcmp(a, "--steps-per-execution")) INT(0, 1000000, o->steps_per_execution);
        else return cli_usage_error("demo", "unknown option '%s' (see 'weft demo --help')", a);
#undef INT
#undef VALUE
    }
    if (o->save_init && cli_check_writable("demo", "--save-initial", o->save_init, "")) return 1;
    /* the files written after the training, checked before it; --time-steps writes none */
    if (!o->time_steps && !o->print_losses) {
        if (o->save && cli_check_writable("demo", "--save", o->save, "")) return 1;
        if (o->export_onnx && cli_check_writable("demo", "--export-onnx", o->export_onnx, "")) return 1;
        if (o->input_trace && cli_check_writable("demo", "--input-trace", o->input_trace, "")) return 1;
        /* the default trace goes to the current folder, which may be read-only: say how to skip it */
        if (o->trace && *o->trace &&
            cli_check_writable("demo", "--trace", o->trace,
                               o->trace == default_trace ? " (the default trace; --trace '' writes none)" : ""))
            return 1;
    }
    return -1;
}

int cmd_demo(int argc, char **argv)
{
    demo_opts o;
    int prc = parse(argc, argv, &o);
    if (prc >= 0) return prc;
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = co.intra_op_threads = o.threads;
    wf_context *ctx = NULL;
    wf_model *m = NULL;
    wf_dataset *train = NULL, *test = NULL, *pipe = NULL;
    wf_trace *trace = NULL;
    char *text = NULL;
    wf_tensor *x = NULL, *y = NULL;
    int rc = 1;
    wf_status *s = wf_context_new(&co, &ctx);
    if (!s) s = load(o.data, "train", &train);
    if (!s) s = load(o.data, "t10k", &test);
    if (s) goto out;

    if (!o.quiet && !o.time_steps && !o.print_losses) {
        printf("devices:\n");
        for (int i = 0; i < wf_context_num_devices(ctx); i++) {
            wf_device_info d;
            if (!wf_context_device(ctx, i, &d)) printf("  %s (%s, %d threads)\n", d.name, d.description, d.threads);
        }
        printf("\nFashion-MNIST (%s): %lld training and %lld test images\n", o.data,
               (long long)wf_dataset_num_samples(train), (long long)wf_dataset_num_samples(test));
    }
    int64_t in_shape[2] = {28, 28};
    if ((s = wf_model_new(WF_F32, 2, in_shape, o.seed, &m)) || (s = wf_model_set_policy(m, o.policy)) ||
        (s = add_layers(m, o.cnn)))
        goto out;
    wf_compile_options cpo;
    wf_compile_options_init(&cpo);
    cpo.optimizer.learning_rate = o.lr;
    cpo.device = o.device;
    cpo.strict_placement = o.strict;
    if ((s = wf_model_compile(m, ctx, &cpo))) goto out;

    if (o.save_init && (s = wf_session_save(wf_model_session(m), o.save_init))) goto out;
    if (o.print_losses) {
        s = print_losses(m, train, o.batch, o.print_losses);
        rc = s ? 1 : 0;
        goto out;
    }
    if (o.time_steps) {
        s = time_steps(m, train, o.batch, o.time_steps);
        if (!s) cli_print_memory(ctx);
        /* an explicit --trace: one more step, traced, and its summary */
        if (!s && o.trace != default_trace && *o.trace && !(s = wf_dataset_rows(train, 0, o.batch, &x, &y)) &&
            !(s = wf_model_train_step(m, x, y, NULL, &trace)) && !(s = wf_trace_write_chrome(trace, ctx, o.trace)) &&
            !(s = wf_trace_summary_text(trace, ctx, &text)))
            printf("one training step, traced (%s):\n%s", o.trace, text);
        rc = s ? 1 : 0;
        goto out;
    }
    if (!o.quiet) {
        if ((s = wf_model_summary(m, &text))) goto out;
        printf("\nModel: \"sequential\"\n%s", text);
        wf_free(text);
        text = NULL;
        placement_summary(m, ctx, o.batch, o.device);
        printf("\ntraining: Adam (lr %g), sparse categorical cross-entropy, batch %ld, %d epochs, policy %s\n", o.lr,
               o.batch, o.epochs, wf_policy_name(o.policy));
    }
    if ((s = input_pipeline(ctx, train, &o, &pipe))) goto out;
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.epochs = o.epochs;
    fo.verbose = o.quiet ? 0 : 1;
    fo.input_trace = o.input_trace;
    fo.steps_per_execution = o.steps_per_execution;
    double *ep = calloc((size_t)o.epochs, sizeof *ep);
    if (!ep) goto out;
    double t0 = now_s();
    demo_epochs de = {ep, 0};
    fo.on_epoch_end = on_epoch;
    fo.user = &de;
    s = wf_model_fit(m, pipe, &fo, NULL);
    double train_s = now_s() - t0;
    if (s) {
        free(ep);
        goto out;
    }
    double loss, acc;
    if ((s = wf_model_evaluate(m, test, 1000, &loss, &acc))) {
        free(ep);
        goto out;
    }
    qsort(ep, (size_t)o.epochs, sizeof *ep, cmp_double);
    printf("\ntest accuracy: %.4f (loss %.4f)\n", acc, loss);
    printf("training time: %.2f s (%.0f samples/s)\n", train_s, (double)de.samples / train_s);
    printf("epoch time: median %.2f s\n", ep[o.epochs / 2]);
    free(ep);
    double scale;
    int64_t good;
    if (o.policy == WF_POLICY_MIXED_FLOAT16 && !(s = wf_model_loss_scale(m, &scale, &good)))
        printf("loss scale: %g (%lld finite steps since it last changed)\n", scale, (long long)good);
    if (s) goto out;
    if (o.save) {
        if ((s = wf_session_save(wf_model_session(m), o.save))) goto out;
        printf("checkpoint: %s\n", o.save);
    }
    if (o.export_onnx) {
        if ((s = wf_model_export_onnx(m, o.export_onnx))) goto out;
        printf("ONNX model: %s\n", o.export_onnx);
    }
    if (o.trace && *o.trace) {
        /* one more step, traced, after the evaluation so the accuracy above is that of the 5 epochs */
        if ((s = wf_dataset_rows(train, 0, o.batch, &x, &y))) goto out;
        if ((s = wf_model_train_step(m, x, y, NULL, &trace))) goto out;
        if ((s = wf_trace_write_chrome(trace, ctx, o.trace))) goto out;
        if (!o.quiet && !(s = wf_trace_summary_text(trace, ctx, &text))) printf("\none training step, traced:\n%s", text);
        if (s) goto out;
        printf("trace of one training step: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", o.trace);
    }
    rc = 0;
out:
    if (s) rc = cli_fail(s);
    wf_free(text);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_trace_free(trace);
    wf_model_free(m);
    wf_dataset_free(pipe);
    wf_dataset_free(train);
    wf_dataset_free(test);
    wf_context_free(ctx);
    return rc;
}
