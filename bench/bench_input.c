/*
 * weft's half of the input-pipeline benchmark (issue 16; bench/bench_input.py runs it beside tf.data):
 * the seeds' pipeline over a folder of JPEGs (bench/make_jpegs.py makes one), built with the public
 * tf.data-style API, timed per epoch, with the stages' statistics and the process's peak RSS.
 *
 *   list_files(DIR/ *.jpg, not shuffled: bytewise sorted) -> map(ReadFile -> DecodeJpeg(channels 3) -> Cast f32 ->
 *   Resize to 224x224 (bilinear, half-pixel centres: tf.image.resize's default) ->
 *   StatelessRandomBrightness(max_delta 0.2) -> Div 255, num_parallel_calls P, deterministic, seed S)
 *   -> batch(32) -> prefetch(F)
 *
 * Brightness follows the seed text literally, as tf.image.random_brightness(image, 0.2) would run in
 * that place: the delta, in [-0.2, 0.2), is added to the resized float image in 0..255 units and the
 * division by 255 comes after, so it moves values by less than 0.001. It is drawn from the map's
 * {seed, counter} input (weft.h documents the draw), so bench_input.py can replicate it exactly.
 *
 * Threads: --threads T is the iterator's cpu_budget (the map's threads; AUTOTUNE tunes up to it). The
 * map's session runs on its own context with one inter-op and one intra-op thread: each call is one
 * image whose kernels are too small to split well, and T parallel calls each splitting over T cores
 * would oversubscribe the machine (the tf.data peer sets max_intra_op_parallelism 1 for the same
 * reason). --intra-op N changes that for experiments; on 2 cores, 0 (the cores) made no difference.
 *
 * usage: bench_input --dir DIR [--threads T] [--parallel N|autotune] [--prefetch N|autotune]
 *                    [--epochs E] [--warmup B] [--ram-budget MB] [--files N] [--batch B] [--size S]
 *                    [--brightness D] [--seed S] [--intra-op N] [--nondeterministic]
 *                    [--stall-every N --stall-ms M] [--dump DIR --dump-batches K]
 * Iteration 0 is a warm-up of B batches (default 4), or, with --dump, writes its first K batches
 * (default 2) as DIR/batch_000.npy ... (f32 [B, S, S, 3]); then E (default 2) full epochs are timed,
 * each from creating its iterator to its last batch, in images/s and in CPU time of the whole process
 * per image (the steadier figure on a shared machine). Prints one line per epoch, the last iterator's
 * stage statistics, the peak RSS (VmHWM: the whole process, warm-up included), and a RESULT line of
 * JSON for the driver.
 *
 * --stall-every N --stall-ms M: in the timed epochs the consumer sleeps M ms after every N batches (a
 * training step that is sometimes slow), so that AUTOTUNE, having grown the prefetch buffer while the
 * consumer waited, then sees it fill: the bounded-memory run uses it to hold the RAM budget to account.
 */
#define _GNU_SOURCE /* clock_gettime, nanosleep under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "weft/weft.h"

typedef struct opts {
    const char *dir, *dump;
    int threads, parallel, prefetch, epochs, warmup, batch, size, seed, intra_op, deterministic, dump_batches;
    int stall_every, stall_ms;
    int64_t files;
    double brightness, ram_budget_mb;
} opts;

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* Peak and current resident set in MB from /proc/self/status; getrusage's peak where that is missing. */
static void rss_mb(double *peak, double *now)
{
    *peak = *now = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) *peak = kb / 1024.0;
            if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) *now = kb / 1024.0;
        }
        fclose(f);
    }
    if (*peak < 0) {
        struct rusage ru;
        if (!getrusage(RUSAGE_SELF, &ru)) *peak = ru.ru_maxrss / 1024.0;
    }
}

typedef struct map_graph {
    wf_graph *g;
    wf_context *ctx;
    wf_output path, seed, out;
} map_graph;

#define T(x)                                                                                               \
    do {                                                                                                   \
        if ((s = (x))) return s;                                                                           \
    } while (0)

static wf_status *build_map(const opts *o, map_graph *m)
{
    wf_status *s;
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = 1;
    co.intra_op_threads = o->intra_op;
    T(wf_context_new(&co, &m->ctx));
    T(wf_graph_new(&m->g));
    wf_graph *g = m->g;
    int64_t two = 2;
    wf_output bytes, img, f, sizes, r, b, k255;
    T(wf_placeholder(g, "path", WF_STRING, 0, NULL, &m->path));
    T(wf_placeholder(g, "seed", WF_I64, 1, &two, &m->seed));
    T(wf_read_file(g, "read", m->path, &bytes));
    T(wf_decode_jpeg(g, "decode", bytes, 3, &img));
    wf_attr to = wf_attr_dtype("to", WF_F32);
    T(wf_op(g, "Cast", "cast", &img, 1, &to, 1, &f.node));
    f.index = 0;
    int64_t hw[2] = {o->size, o->size}, axes[2] = {0, 1};
    wf_tensor *sz = NULL;
    T(wf_tensor_new(WF_I64, 1, &two, hw, &sz));
    s = wf_const(g, "sizes", sz, &sizes);
    wf_tensor_free(sz);
    if (s) return s;
    /* ONNX Resize: X, roi (absent), scales (absent), sizes; over H and W of [H, W, C] */
    wf_output rin[4] = {f, {0}, {0}, sizes};
    wf_attr ra[3] = {wf_attr_string("mode", "linear"), wf_attr_string("coordinate_transformation_mode", "half_pixel"),
                     wf_attr_ints("axes", axes, 2)};
    T(wf_op(g, "Resize", "resize", rin, 4, ra, 3, &r.node));
    r.index = 0;
    T(wf_random_brightness(g, "brightness", r, m->seed, o->brightness, &b));
    T(wf_const_scalar(g, "k255", WF_F32, 255.0, &k255));
    T(wf_binary(g, "Div", "scale", b, k255, &m->out));
    return NULL;
}

static wf_status *build_pipeline(const opts *o, map_graph *m, wf_dataset **out, int64_t *n_files)
{
    wf_status *s;
    wf_dataset *listed = NULL, *taken = NULL, *mapped = NULL, *batched = NULL;
    char pat[4096];
    *out = NULL;
    snprintf(pat, sizeof pat, "%s/*.jpg", o->dir);
    s = wf_dataset_list_files(pat, 0, 0, &listed);
    if (!s && o->files > 0) s = wf_dataset_take(listed, o->files, &taken);
    wf_dataset *files = taken ? taken : listed;
    if (!s) *n_files = wf_dataset_cardinality(files);
    if (!s) s = build_map(o, m);
    if (!s) {
        wf_map_fn fn = {0};
        fn.graph = m->g;
        fn.inputs = &m->path;
        fn.n_inputs = 1;
        fn.outputs = &m->out;
        fn.n_outputs = 1;
        fn.seed_input = m->seed;
        fn.ctx = m->ctx;
        fn.device = "CPU:0";
        wf_map_options mo;
        wf_map_options_init(&mo);
        mo.num_parallel_calls = o->parallel;
        mo.deterministic = o->deterministic;
        mo.seed = (uint64_t)o->seed;
        s = wf_dataset_map(files, &fn, &mo, &mapped);
    }
    if (!s) s = wf_dataset_batch(mapped, o->batch, 0, &batched);
    if (!s) s = wf_dataset_prefetch(batched, o->prefetch, out);
    wf_dataset_free(listed);
    wf_dataset_free(taken);
    wf_dataset_free(mapped);
    wf_dataset_free(batched);
    return s;
}

/* Runs one iteration: all of it (max_batches < 0) or its first max_batches batches; dump_dir writes them. */
static wf_status *run_iteration(const opts *o, wf_dataset *ds, int max_batches, const char *dump_dir, int stall,
                                int64_t *images, int64_t *batches, wf_iterator **keep)
{
    wf_status *s;
    wf_iterator_options io;
    wf_iterator_options_init(&io);
    io.cpu_budget = o->threads;
    io.ram_budget = (uint64_t)(o->ram_budget_mb * 1048576.0);
    io.autotune = 1;
    wf_iterator *it = NULL;
    T(wf_dataset_iterator(ds, &io, &it));
    *images = *batches = 0;
    while (max_batches < 0 || *batches < max_batches) {
        wf_tensor *t = NULL;
        int n = 0;
        if ((s = wf_iterator_next(it, &t, 1, &n))) break;
        if (!n) break;
        const int64_t *d = wf_tensor_dims(t);
        if (wf_tensor_dtype(t) != WF_F32 || wf_tensor_rank(t) != 4 || d[1] != o->size || d[2] != o->size || d[3] != 3) {
            fprintf(stderr, "bench_input: batch %lld is %s rank %d, not f32 [N, %d, %d, 3]\n", (long long)*batches,
                    wf_dtype_name(wf_tensor_dtype(t)), wf_tensor_rank(t), o->size, o->size);
            s = wf_status_new(WF_INTERNAL, "unexpected batch shape");
        }
        if (!s && dump_dir) {
            char p[4096];
            snprintf(p, sizeof p, "%s/batch_%03lld.npy", dump_dir, (long long)*batches);
            s = wf_npy_write(p, t);
        }
        if (!s) *images += d[0];
        wf_tensor_free(t);
        if (s) break;
        ++*batches;
        if (stall && o->stall_every > 0 && *batches % o->stall_every == 0) {
            struct timespec ts = {o->stall_ms / 1000, (long)(o->stall_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (keep && !s) *keep = it;
    else wf_iterator_free(it);
    return s;
}

static void json_str(const char *v)
{
    putchar('"');
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') printf("\\%c", *v);
        else if ((unsigned char)*v < 0x20) printf("\\u%04x", *v);
        else putchar(*v);
    }
    putchar('"');
}

static int knob_arg(const char *v, int *out)
{
    if (!strcmp(v, "autotune")) {
        *out = WF_AUTOTUNE;
        return 1;
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > 1024) return 0;
    *out = (int)n;
    return 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_input --dir DIR [--threads T] [--parallel N|autotune] [--prefetch N|autotune]\n"
                    "                   [--epochs E] [--warmup B] [--ram-budget MB] [--files N] [--batch B]\n"
                    "                   [--size S] [--brightness D] [--seed S] [--intra-op N] [--nondeterministic]\n"
                    "                   [--stall-every N --stall-ms M] [--dump DIR [--dump-batches K]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    opts o = {.threads = ncpu > 0 ? (int)ncpu : 1, .parallel = WF_AUTOTUNE, .prefetch = WF_AUTOTUNE, .epochs = 2,
              .warmup = 4, .batch = 32, .size = 224, .seed = 42, .intra_op = 1, .deterministic = 1,
              .dump_batches = 2, .brightness = 0.2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--nondeterministic")) {
            o.deterministic = 0;
            continue;
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--dir")) o.dir = v;
        else if (!strcmp(a, "--dump")) o.dump = v;
        else if (!strcmp(a, "--threads")) ok = (o.threads = atoi(v)) >= 1;
        else if (!strcmp(a, "--parallel")) ok = knob_arg(v, &o.parallel);
        else if (!strcmp(a, "--prefetch")) ok = knob_arg(v, &o.prefetch);
        else if (!strcmp(a, "--epochs")) ok = (o.epochs = atoi(v)) >= 0;
        else if (!strcmp(a, "--warmup")) ok = (o.warmup = atoi(v)) >= 0;
        else if (!strcmp(a, "--batch")) ok = (o.batch = atoi(v)) >= 1;
        else if (!strcmp(a, "--size")) ok = (o.size = atoi(v)) >= 1;
        else if (!strcmp(a, "--seed")) o.seed = atoi(v);
        else if (!strcmp(a, "--intra-op")) ok = (o.intra_op = atoi(v)) >= 0;
        else if (!strcmp(a, "--files")) ok = (o.files = atoll(v)) >= 0;
        else if (!strcmp(a, "--dump-batches")) ok = (o.dump_batches = atoi(v)) >= 1;
        else if (!strcmp(a, "--brightness")) ok = (o.brightness = atof(v)) >= 0;
        else if (!strcmp(a, "--stall-every")) ok = (o.stall_every = atoi(v)) >= 0;
        else if (!strcmp(a, "--stall-ms")) ok = (o.stall_ms = atoi(v)) >= 0;
        else if (!strcmp(a, "--ram-budget")) ok = (o.ram_budget_mb = atof(v)) >= 0;
        else usage();
        if (!ok) {
            fprintf(stderr, "bench_input: bad value %s for %s\n", v, a);
            return 2;
        }
    }
    if (!o.dir) usage();

    map_graph m = {0};
    wf_dataset *ds = NULL;
    int64_t n_files = 0;
    wf_status *s = build_pipeline(&o, &m, &ds, &n_files);
    char knob[2][16];
    for (int k = 0; k < 2; k++) {
        int v = k ? o.prefetch : o.parallel;
        if (v == WF_AUTOTUNE) snprintf(knob[k], sizeof knob[k], "autotune");
        else snprintf(knob[k], sizeof knob[k], "%d", v);
    }
    char budget[48];
    if (o.ram_budget_mb > 0) snprintf(budget, sizeof budget, "%.0f MB", o.ram_budget_mb);
    else snprintf(budget, sizeof budget, "the default (half the RAM)");
    if (!s)
        printf("input pipeline (weft): %lld files in %s, batch %d, %dx%d, threads %d (cpu_budget), map parallel %s, "
               "prefetch %s, ram budget %s, intra-op %d, %s\n",
               (long long)n_files, o.dir, o.batch, o.size, o.size, o.threads, knob[0], knob[1],
               budget, o.intra_op,
               o.deterministic ? "deterministic" : "nondeterministic");
    int64_t images = 0, batches = 0;
    if (!s && (o.dump || o.warmup > 0)) {
        double t0 = now_s();
        s = run_iteration(&o, ds, o.dump ? o.dump_batches : o.warmup, o.dump, 0, &images, &batches, NULL);
        if (!s)
            printf("%s: %lld batches, %lld images in %.3f s%s%s\n", o.dump ? "dump" : "warm-up", (long long)batches,
                   (long long)images, now_s() - t0, o.dump ? " to " : "", o.dump ? o.dump : "");
    }
    double *rate = calloc(2 * (size_t)o.epochs + 1, sizeof *rate), *cpu_ms = rate + o.epochs;
    wf_iterator *last = NULL;
    for (int e = 0; !s && e < o.epochs; e++) {
        wf_iterator_free(last);
        last = NULL;
        double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        s = run_iteration(&o, ds, -1, NULL, 1, &images, &batches, &last);
        double dt = now_s() - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (s) break;
        rate[e] = (double)images / dt;
        cpu_ms[e] = images ? dc * 1e3 / (double)images : 0;
        double peak, cur;
        rss_mb(&peak, &cur);
        printf("epoch %d: %lld batches, %lld images in %.3f s, %.1f images/s, %.3f ms CPU per image (RSS %.0f MB, "
               "peak %.0f MB)\n", e + 1, (long long)batches, (long long)images, dt, rate[e], cpu_ms[e], cur, peak);
        fflush(stdout);
    }
    wf_dataset_stage_stats st[16];
    int nst = 0;
    int64_t peak_buf = 0;
    if (!s && last) {
        nst = wf_dataset_stats(last, st, 16, &peak_buf);
        if (nst > 16) nst = 16;
        printf("stages of the last epoch (depth 0 is what the consumer reads):\n");
        printf("  %-28s %5s %9s %9s %9s %11s %6s %6s %10s\n", "stage", "depth", "elements", "busy s", "wait s",
               "elements/s", "knob", "tuned", "peak MB");
        for (int i = 0; i < nst; i++) {
            char kb[16] = "-";
            if (st[i].knob_kind) snprintf(kb, sizeof kb, "%s%d", st[i].knob_kind == 1 ? "p" : "b", st[i].knob);
            printf("  %-28s %5d %9lld %9.3f %9.3f %11.1f %6s %6s %10.1f\n", st[i].name, st[i].depth,
                   (long long)st[i].elements, st[i].busy_s, st[i].wait_s, st[i].elements_per_s, kb,
                   st[i].tuned ? "yes" : "no", st[i].peak_buffered_bytes / 1048576.0);
        }
        printf("  (knob: p = parallel calls, b = buffered elements)\n");
        printf("peak buffered: %.1f MB\n", peak_buf / 1048576.0);
    }
    wf_iterator_free(last);
    double peak, cur;
    rss_mb(&peak, &cur);
    if (!s) {
        printf("peak RSS: %.1f MB (VmHWM, whole process)\n", peak);
        printf("RESULT {\"files\": %lld, \"threads\": %d, \"parallel\": \"%s\", \"prefetch\": \"%s\", "
               "\"ram_budget_mb\": %.0f, \"peak_rss_mb\": %.1f, \"peak_buffered_mb\": %.2f, \"images_per_s\": [",
               (long long)n_files, o.threads, knob[0], knob[1], o.ram_budget_mb, peak, peak_buf / 1048576.0);
        for (int e = 0; e < o.epochs; e++) printf("%s%.3f", e ? ", " : "", rate[e]);
        printf("], \"cpu_ms_per_image\": [");
        for (int e = 0; e < o.epochs; e++) printf("%s%.4f", e ? ", " : "", cpu_ms[e]);
        printf("], \"stages\": [");
        for (int i = 0; i < nst; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(st[i].name);
            printf(", \"depth\": %d, \"elements\": %lld, \"busy_s\": %.4f, \"wait_s\": %.4f, \"elements_per_s\": %.2f, "
                   "\"knob_kind\": %d, \"knob\": %d, \"tuned\": %d, \"peak_buffered_mb\": %.2f}",
                   st[i].depth, (long long)st[i].elements, st[i].busy_s, st[i].wait_s, st[i].elements_per_s,
                   st[i].knob_kind, st[i].knob, st[i].tuned, st[i].peak_buffered_bytes / 1048576.0);
        }
        printf("]}\n");
    }
    free(rate);
    wf_dataset_free(ds);
    wf_graph_free(m.g);
    wf_context_free(m.ctx);
    if (s) {
        fprintf(stderr, "bench_input: %s\n", wf_status_message(s));
        wf_status_free(s);
        return 1;
    }
    return 0;
}
