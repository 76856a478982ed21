/*
 * The Sequential model's loops: fit (epochs of shuffled batches, validation, callbacks, Keras-style
 * progress), evaluate, predict and single training steps.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"

#define T(x) WF__TRY(x)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void wf_fit_options_init(wf_fit_options *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->batch_size = 32;
    o->shuffle = 1;
    o->seed = 1;
    o->verbose = 1;
}

static wf_status *need_compiled(const wf_model *m, const char *fn)
{
    if (!m) return wf__status(WF_INVALID_ARGUMENT, "%s: model is NULL", fn);
    if (!m->compiled) return wf__status(WF_FAILED_PRECONDITION, "%s: compile the model first (wf_model_compile)", fn);
    return NULL;
}

/* The batch must match the model's input; features and labels must agree on the batch size. */
static wf_status *check_batch(const wf_model *m, const wf_tensor *x, const wf_tensor *y)
{
    int r = wf_tensor_rank(x);
    const int64_t *d = wf_tensor_dims(x);
    bool ok = r == m->in_rank && wf_tensor_dtype(x) == m->in_dtype;
    for (int i = 1; ok && i < r; i++) ok = d[i] == m->in_dims[i];
    if (!ok) {
        char want[160], got[160];
        size_t k = (size_t)snprintf(want, sizeof want, "%s[N", wf_dtype_name(m->in_dtype));
        for (int i = 1; i < m->in_rank && k + 24 < sizeof want; i++)
            k += (size_t)snprintf(want + k, sizeof want - k, ", %lld", (long long)m->in_dims[i]);
        snprintf(want + k, sizeof want - k, "]");
        k = (size_t)snprintf(got, sizeof got, "%s[", wf_dtype_name(wf_tensor_dtype(x)));
        for (int i = 0; i < r && k + 24 < sizeof got; i++)
            k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", i ? ", " : "", (long long)d[i]);
        snprintf(got + k, sizeof got - k, "]");
        return wf__status(WF_INVALID_ARGUMENT, "the batch's features are %s; the model's input is %s", got, want);
    }
    if (y && (wf_tensor_rank(y) < 1 || wf_tensor_dims(y)[0] != d[0]))
        return wf__status(WF_INVALID_ARGUMENT, "the batch has %lld samples of features but %lld of labels",
                          (long long)d[0], wf_tensor_rank(y) < 1 ? 0LL : (long long)wf_tensor_dims(y)[0]);
    return NULL;
}

static double scalar_of(const wf_tensor *t)
{
    if (!t || wf_tensor_size(t) < 1) return NAN;
    switch (wf_tensor_dtype(t)) {
    case WF_F32: return *(const float *)wf_tensor_data(t);
    case WF_F64: return *(const double *)wf_tensor_data(t);
    case WF_F16: return wf_f16_to_f32(*(const uint16_t *)wf_tensor_data(t));
    case WF_BF16: return wf_bf16_to_f32(*(const uint16_t *)wf_tensor_data(t));
    default: return NAN;
    }
}

/* One step; *loss and *acc (may be NULL) get the batch's values. */
static wf_status *step(wf_model *m, const wf_tensor *x, const wf_tensor *y, double *loss, double *acc,
                       wf_trace **trace)
{
    T(check_batch(m, x, y));
    wf_feed f[2] = {{m->input, x}, {m->labels, y}};
    wf_output fetch[2] = {m->train_loss, m->train_acc};
    wf_tensor *out[2] = {NULL, NULL};
    wf_run_options ro = {.trace = trace, .targets = m->targets, .n_targets = m->n_step_targets};
    int nf = m->has_acc ? 2 : 1;
    T(wf_session_run(m->sess, f, 2, fetch, nf, out, &ro));
    if (loss) *loss = scalar_of(out[0]);
    if (acc) *acc = m->has_acc ? scalar_of(out[1]) : NAN;
    wf_tensor_free(out[0]);
    wf_tensor_free(out[1]);
    return NULL;
}

wf_status *wf_model_train_step(wf_model *m, const wf_tensor *x, const wf_tensor *y, double *loss, wf_trace **trace)
{
    T(need_compiled(m, "wf_model_train_step"));
    if (!x || !y) return wf__status(WF_INVALID_ARGUMENT, "wf_model_train_step: x and y are required");
    return step(m, x, y, loss, NULL, trace);
}

/* ---- progress ---------------------------------------------------------------------------------------- */

static void fmt_time(char *b, size_t cap, double s)
{
    if (s >= 3600) snprintf(b, cap, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else if (s >= 60) snprintf(b, cap, "%d:%02d", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(b, cap, "%.0fs", s);
}

static void fmt_per_step(char *b, size_t cap, double s)
{
    if (s >= 1) snprintf(b, cap, "%.0fs/step", s);
    else if (s >= 1e-3) snprintf(b, cap, "%.0fms/step", s * 1e3);
    else snprintf(b, cap, "%.0fus/step", s * 1e6);
}

typedef struct progress {
    int verbose;
    bool tty;
    int64_t total;
    double t0, last_draw;
    int width; /* digits of total */
    double input_share; /* of the elapsed time, waiting for the next batch */
} progress;

static void metrics(char *b, size_t cap, double loss, double acc, bool has_acc)
{
    if (has_acc) snprintf(b, cap, " - accuracy: %.4f - loss: %.4f", acc, loss);
    else snprintf(b, cap, " - loss: %.4f", loss);
}

/* Keras's bar: " 123/1875 [===>..........................] - ETA: 2s - accuracy: 0.7 - loss: 0.6" */
static void draw(progress *p, int64_t done, double loss, double acc, bool has_acc, bool final)
{
    if (p->verbose != 1 || (!p->tty && !final)) return;
    double t = now_s();
    if (!final && t - p->last_draw < 0.1) return;
    p->last_draw = t;
    char bar[40], tm[32], per[32], mt[128];
    int w = 30, fill = p->total ? (int)(w * done / p->total) : w;
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '=' : '.';
    if (fill > 0 && fill < w) bar[fill - 1] = '>';
    bar[w] = 0;
    double el = t - p->t0, per_step = done ? el / (double)done : 0;
    metrics(mt, sizeof mt, loss, acc, has_acc);
    if (p->input_share > 0.2) {
        size_t k = strlen(mt);
        snprintf(mt + k, sizeof mt - k, " - input: %.0f%%", 100 * p->input_share);
    }
    if (final) {
        fmt_time(tm, sizeof tm, el);
        fmt_per_step(per, sizeof per, per_step);
        printf("%s%*lld/%lld [%s] - %s %s%s", p->tty ? "\r" : "", p->width, (long long)done, (long long)p->total, bar,
               tm, per, mt);
    } else if (!p->total) {
        printf("\r%lld/Unknown%s\033[K", (long long)done, mt); /* Keras's bar for a dataset of unknown length */
        fflush(stdout);
    } else {
        fmt_time(tm, sizeof tm, per_step * (double)(p->total - done));
        printf("\r%*lld/%lld [%s] - ETA: %s%s\033[K", p->width, (long long)done, (long long)p->total, bar, tm, mt);
        fflush(stdout);
    }
}

/* ---- evaluate ------------------------------------------------------------------------------------------ */

/* One evaluation batch: adds its loss and accuracy, weighted by its rows, to *sl and *sa. */
static wf_status *eval_batch(wf_model *m, wf_tensor *x, wf_tensor *y, double *sl, double *sa, double *rows)
{
    wf_output fetch[2] = {m->eval_loss, m->eval_acc};
    wf_tensor *out[2] = {NULL, NULL};
    wf_status *s = y ? NULL : wf__status(WF_INVALID_ARGUMENT, "the dataset has no labels to evaluate against");
    if (!s) s = check_batch(m, x, y);
    if (!s) {
        wf_feed f[2] = {{m->input, x}, {m->labels, y}};
        s = wf_session_run(m->sess, f, 2, fetch, m->has_acc ? 2 : 1, out, NULL);
    }
    if (!s) {
        double c = (double)wf_tensor_dims(x)[0];
        *sl += scalar_of(out[0]) * c;
        if (m->has_acc) *sa += scalar_of(out[1]) * c;
        *rows += c;
    }
    wf_tensor_free(out[0]);
    wf_tensor_free(out[1]);
    return s;
}

/* An array dataset in stored order, `batch` rows at a time; a pipeline as its batches come (one
 * iteration: wf_dataset_next_batch to the end, then wf_dataset_reset for the next evaluation). */
static wf_status *eval_loop(wf_model *m, wf_dataset *ds, int64_t batch, double *loss, double *acc)
{
    double sl = 0, sa = 0, rows = 0;
    wf_status *s = NULL;
    if (wf_dataset_is_pipeline(ds)) {
        for (;;) {
            wf_tensor *x = NULL, *y = NULL;
            s = wf_dataset_next_batch(ds, &x, &y);
            if (!s && x) s = eval_batch(m, x, y, &sl, &sa, &rows);
            bool end = !s && !x;
            wf_tensor_free(x);
            wf_tensor_free(y);
            if (s || end) break;
        }
        wf_dataset_reset(ds);
    } else {
        int64_t n = wf_dataset_num_samples(ds);
        for (int64_t i = 0; i < n && !s; i += batch) {
            wf_tensor *x = NULL, *y = NULL;
            s = wf_dataset_rows(ds, i, n - i < batch ? n - i : batch, &x, &y);
            if (!s) s = eval_batch(m, x, y, &sl, &sa, &rows);
            wf_tensor_free(x);
            wf_tensor_free(y);
        }
    }
    if (s) return s;
    *loss = rows ? sl / rows : NAN;
    *acc = rows && m->has_acc ? sa / rows : NAN;
    return NULL;
}

wf_status *wf_model_evaluate(wf_model *m, wf_dataset *ds, int64_t batch_size, double *loss, double *accuracy)
{
    T(need_compiled(m, "wf_model_evaluate"));
    if (!ds) return wf__status(WF_INVALID_ARGUMENT, "wf_model_evaluate: dataset is NULL");
    if (batch_size < 1) return wf__status(WF_INVALID_ARGUMENT, "wf_model_evaluate: batch_size must be >= 1");
    double l, a;
    T(eval_loop(m, ds, batch_size, &l, &a));
    if (loss) *loss = l;
    if (accuracy) *accuracy = a;
    return NULL;
}

/* ---- predict ------------------------------------------------------------------------------------------- */

wf_status *wf_model_predict(wf_model *m, const wf_tensor *x, int64_t batch_size, wf_tensor **out)
{
    T(need_compiled(m, "wf_model_predict"));
    if (!x || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_model_predict: NULL argument");
    if (batch_size < 1) return wf__status(WF_INVALID_ARGUMENT, "wf_model_predict: batch_size must be >= 1");
    *out = NULL;
    T(check_batch(m, x, NULL));
    int r = wf_tensor_rank(x);
    int64_t n = wf_tensor_dims(x)[0], d[WF_MAX_RANK];
    memcpy(d, wf_tensor_dims(x), sizeof(int64_t) * (size_t)r);
    size_t row = n ? wf_tensor_bytes(x) / (size_t)n : 0;
    wf_tensor *res = NULL;
    size_t orow = 0;
    for (int64_t i = 0; i < n || (n == 0 && i == 0); i += batch_size) {
        int64_t c = n - i < batch_size ? n - i : batch_size;
        d[0] = c;
        wf_tensor *xb = NULL, *yb = NULL;
        wf_status *s = wf_tensor_new(wf_tensor_dtype(x), r, d, (const char *)wf_tensor_data(x) + (size_t)i * row, &xb);
        if (!s) {
            wf_feed f = {m->input, xb};
            s = wf_session_run(m->sess, &f, 1, &m->output, 1, &yb, NULL);
        }
        if (!s && !res) {
            int64_t od[WF_MAX_RANK];
            int orank = wf_tensor_rank(yb);
            memcpy(od, wf_tensor_dims(yb), sizeof(int64_t) * (size_t)orank);
            od[0] = n;
            s = wf_tensor_new(wf_tensor_dtype(yb), orank, od, NULL, &res);
            orow = c ? wf_tensor_bytes(yb) / (size_t)c : 0;
        }
        if (!s && c) memcpy((char *)wf_tensor_data(res) + (size_t)i * orow, wf_tensor_data(yb), orow * (size_t)c);
        wf_tensor_free(xb);
        wf_tensor_free(yb);
        if (s) {
            wf_tensor_free(res);
            return s;
        }
        if (n == 0) break;
    }
    *out = res;
    return NULL;
}

/* ---- fit ----------------------------------------------------------------------------------------------- */

/* fit's running metrics (model.c's build_metric_sums): zeroed at each epoch's start, read back when
 * the bar redraws, every steps_per_execution steps and at the epoch's end. */
static wf_status *metrics_reset(wf_model *m)
{
    int64_t one = 1;
    wf_tensor *z;
    T(wf_tensor_new(WF_F32, 1, &one, NULL, &z));
    wf_status *s = NULL;
    for (int i = 0; i < 3 && !s; i++) s = wf_session_set_variable(m->sess, wf_node_name(m->metric_sum[i].node), z);
    wf_tensor_free(z);
    return s;
}

static wf_status *metrics_read(wf_model *m, double *loss, double *acc, double *samples)
{
    double v[3];
    for (int i = 0; i < 3; i++) {
        wf_tensor *t = NULL;
        T(wf_session_get_variable(m->sess, wf_node_name(m->metric_sum[i].node), &t));
        v[i] = scalar_of(t);
        wf_tensor_free(t);
    }
    *samples = v[2];
    *loss = v[2] > 0 ? v[0] / v[2] : NAN;
    *acc = v[2] > 0 && m->has_acc ? v[1] / v[2] : NAN;
    return NULL;
}

/* The input pipeline's stages after an epoch: "input pipeline: map(parallel, autotune) x2 tuned
 * 812/s, prefetch(autotune) buffer 3 tuned, ...; peak buffers 12.0 MiB; waited 35% of the epoch". */
static void print_pipeline(wf_dataset *ds, double input_s, double epoch_s)
{
    wf_iterator *it = wf_dataset_current_iterator(ds);
    if (!it) return;
    wf_dataset_stage_stats st[16];
    int64_t peak = 0;
    int n = wf_dataset_stats(it, st, 16, &peak);
    printf("input pipeline:");
    for (int i = 0; i < n && i < 16; i++) {
        printf("%s %s", i ? "," : "", st[i].name);
        if (st[i].knob_kind == 1) printf(" x%d%s", st[i].knob, st[i].tuned ? " tuned" : "");
        if (st[i].knob_kind == 2) printf(" buffer %d%s", st[i].knob, st[i].tuned ? " tuned" : "");
        if (st[i].busy_s > 0) printf(" %.0f/s", st[i].elements_per_s);
    }
    printf("; peak buffers %.1f MiB; waited %.0f%% of the epoch\n", (double)peak / (1 << 20),
           epoch_s > 0 ? 100 * input_s / epoch_s : 0);
}

/* fit's input trace (wf_fit_options.input_trace): per step the wait for its batch and its run, and the
 * pipeline's device copies, in CLOCK_MONOTONIC ns; written as a Chrome trace at the end. */
typedef struct itrace {
    int64_t *v;        /* 4 per step: wait start, wait end (= run start), run end, epoch */
    int64_t n, cap;
    wf_dataset_event *cp;
    int64_t ncp, capcp;
} itrace;

static void itrace_step(itrace *t, int64_t w0, int64_t r0, int64_t r1, int epoch)
{
    if (t->n + 4 > t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 4096;
        int64_t *v = wf__realloc(t->v, sizeof *v * (size_t)t->cap, sizeof *v * (size_t)cap);
        if (!v) return; /* the trace is best effort: a full memory drops steps, never the training */
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = w0;
    t->v[t->n++] = r0;
    t->v[t->n++] = r1;
    t->v[t->n++] = epoch;
}

static void itrace_copies(itrace *t, wf_dataset *ds)
{
    wf_iterator *it = wf_dataset_current_iterator(ds);
    int n = it ? wf_iterator_copy_events(it, NULL, 0) : 0;
    if (n <= 0) return;
    if (t->ncp + n > t->capcp) {
        int64_t cap = t->ncp + n + 1024;
        wf_dataset_event *v = wf__realloc(t->cp, sizeof *v * (size_t)t->capcp, sizeof *v * (size_t)cap);
        if (!v) return;
        t->cp = v;
        t->capcp = cap;
    }
    t->ncp += wf_iterator_copy_events(it, t->cp + t->ncp, n);
}

static wf_status *itrace_write(const itrace *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return wf__status(WF_IO_ERROR, "input trace: cannot write %s", path);
    int64_t t0 = t->n ? t->v[0] : 0;
    for (int64_t i = 0; i < t->ncp; i++)
        if (t->cp[i].start_ns < t0) t0 = t->cp[i].start_ns;
    fprintf(f, "{\"traceEvents\":[\n"
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"training loop\"}},\n"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"steps\"}},\n"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"waiting for input\"}},\n"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":3,\"args\":{\"name\":\"prefetch_to_device copies\"}}");
    for (int64_t i = 0; i + 3 < t->n; i += 4) {
        double w0 = (double)(t->v[i] - t0) / 1e3, r0 = (double)(t->v[i + 1] - t0) / 1e3, r1 = (double)(t->v[i + 2] - t0) / 1e3;
        fprintf(f, ",\n{\"name\":\"step %lld\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"epoch\":%lld}}",
                (long long)(i / 4), r0, r1 - r0, (long long)t->v[i + 3] + 1);
        fprintf(f, ",\n{\"name\":\"wait %lld\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":%.3f,\"dur\":%.3f}",
                (long long)(i / 4), w0, r0 - w0);
    }
    for (int64_t i = 0; i < t->ncp; i++)
        fprintf(f, ",\n{\"name\":\"copy element %lld\",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":%.3f,\"dur\":%.3f}",
                (long long)t->cp[i].element, (double)(t->cp[i].start_ns - t0) / 1e3,
                (double)(t->cp[i].end_ns - t->cp[i].start_ns) / 1e3);
    fprintf(f, "\n]}\n");
    if (fclose(f)) return wf__status(WF_IO_ERROR, "input trace: writing %s failed", path);
    return NULL;
}

static wf_status *fit_loop(wf_model *m, wf_dataset *tr, wf_dataset *val, const wf_fit_options *o,
                           wf_epoch_logs *last, itrace *trc);

static wf_status *fit(wf_model *m, wf_dataset *tr, wf_dataset *val, const wf_fit_options *o, wf_epoch_logs *last)
{
    itrace t = {0};
    wf_status *s = fit_loop(m, tr, val, o, last, o->input_trace ? &t : NULL);
    if (!s && o->input_trace) s = itrace_write(&t, o->input_trace);
    wf__free(t.v);
    wf__free(t.cp);
    return s;
}

static wf_status *fit_loop(wf_model *m, wf_dataset *tr, wf_dataset *val, const wf_fit_options *o,
                           wf_epoch_logs *last, itrace *trc)
{
    bool pipeline = wf_dataset_is_pipeline(tr);
    if (!pipeline) T(wf_dataset_set_batch(tr, o->batch_size, 0));
    int64_t steps;
    if (pipeline) {
        int64_t c = wf_dataset_cardinality(tr);
        steps = c >= 0 ? c : 0; /* 0: unknown (the bar says so) */
    } else {
        if (o->shuffle) wf_dataset_set_shuffle(tr, o->seed);
        int64_t n = wf_dataset_num_samples(tr);
        steps = (n + o->batch_size - 1) / o->batch_size;
    }
    while (wf_dataset_epoch(tr) < o->initial_epoch) wf_dataset_reset(tr);
    bool tty = isatty(fileno(stdout));
    wf_epoch_logs lg = {0};
    for (int e = o->initial_epoch; e < o->epochs; e++) {
        progress p = {.verbose = o->verbose, .tty = tty, .total = steps, .t0 = now_s()};
        for (int64_t k = steps; k; k /= 10) p.width++;
        if (o->verbose == 1) printf("Epoch %d/%d\n", e + 1, o->epochs);
        T(metrics_reset(m));
        double loss = NAN, acc = NAN, samples = 0, input_s = 0;
        int64_t done = 0;
        for (;;) {
            wf_tensor *x = NULL, *y = NULL;
            int64_t w0 = wf__now_ns();
            wf_status *s = wf_dataset_next_batch(tr, &x, &y);
            int64_t r0 = wf__now_ns();
            input_s += (double)(r0 - w0) * 1e-9;
            if (!s && !x) break;
            if (!s && !y) s = wf__status(WF_INVALID_ARGUMENT, "the training dataset has no labels");
            if (!s) s = check_batch(m, x, y);
            if (!s) {
                wf_feed f[2] = {{m->input, x}, {m->labels, y}};
                wf_run_options ro = {.targets = m->targets, .n_targets = m->n_targets};
                s = wf_session_run(m->sess, f, 2, NULL, 0, NULL, &ro);
                if (!s && trc) itrace_step(trc, w0, r0, wf__now_ns(), e);
            }
            wf_tensor_free(x);
            wf_tensor_free(y);
            if (s) {
                if (o->verbose == 1 && tty) printf("\n");
                wf_status *w = wf__status(wf_status_code(s), "epoch %d, step %lld: %s", e + 1, (long long)done + 1,
                                          wf_status_message(s));
                wf_status_free(s);
                return w;
            }
            done++;
            bool redraw = o->verbose == 1 && tty && now_s() - p.last_draw >= 0.1;
            if (redraw || (o->steps_per_execution > 0 && done % o->steps_per_execution == 0)) {
                T(metrics_read(m, &loss, &acc, &samples));
                double el = now_s() - p.t0;
                p.input_share = el > 0 ? input_s / el : 0;
                draw(&p, done, loss, acc, m->has_acc, false);
            }
        }
        T(metrics_read(m, &loss, &acc, &samples));
        double el = now_s() - p.t0;
        p.input_share = el > 0 ? input_s / el : 0;
        if (o->verbose && pipeline && !steps) p.total = done; /* the unknown count is known now */
        lg = (wf_epoch_logs){.epoch = e, .epochs = o->epochs, .steps = done, .samples = (int64_t)samples,
                             .loss = loss, .accuracy = acc, .seconds = el, .val_loss = NAN, .val_accuracy = NAN};
        draw(&p, done, lg.loss, lg.accuracy, m->has_acc, true);
        if (o->verbose && pipeline) {
            if (o->verbose == 1) printf("\n");
            print_pipeline(tr, input_s, el);
        }
        if (trc) itrace_copies(trc, tr);
        wf_dataset_reset(tr);
        if (val) {
            T(eval_loop(m, val, o->batch_size, &lg.val_loss, &lg.val_accuracy));
            lg.has_validation = 1;
        }
        if (o->verbose == 2) {
            char mt[96], tm[32], per[32];
            metrics(mt, sizeof mt, lg.loss, lg.accuracy, m->has_acc);
            fmt_time(tm, sizeof tm, lg.seconds);
            fmt_per_step(per, sizeof per, done ? lg.seconds / (double)done : 0);
            printf("Epoch %d/%d - %lld/%lld - %s - %s%s", e + 1, o->epochs, (long long)done, (long long)steps, tm, per, mt);
        }
        if (o->verbose && !(o->verbose == 1 && pipeline)) {
            if (lg.has_validation && m->has_acc)
                printf(" - val_accuracy: %.4f - val_loss: %.4f", lg.val_accuracy, lg.val_loss);
            else if (lg.has_validation)
                printf(" - val_loss: %.4f", lg.val_loss);
            printf("\n");
        } else if (o->verbose && lg.has_validation) {
            if (m->has_acc) printf("val_accuracy: %.4f - val_loss: %.4f\n", lg.val_accuracy, lg.val_loss);
            else printf("val_loss: %.4f\n", lg.val_loss);
        }
        fflush(stdout);
        if (last) *last = lg;
        if (o->on_epoch_end && o->on_epoch_end(o->user, &lg)) break;
    }
    return NULL;
}

wf_status *wf_model_fit(wf_model *m, wf_dataset *train, const wf_fit_options *o, wf_epoch_logs *last)
{
    T(need_compiled(m, "wf_model_fit"));
    if (!train) return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: training dataset is NULL");
    wf_fit_options d;
    if (!o) {
        wf_fit_options_init(&d);
        o = &d;
    }
    if (o->epochs < 0 || o->initial_epoch < 0)
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: epochs %d and initial_epoch %d must be >= 0", o->epochs,
                          o->initial_epoch);
    if (o->batch_size < 1)
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: batch_size is %lld; must be >= 1", (long long)o->batch_size);
    if (!(o->validation_split >= 0 && o->validation_split < 1))
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: validation_split is %g; must be in [0, 1)",
                          o->validation_split);
    if (o->verbose < 0 || o->verbose > 2)
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: verbose is %d; must be 0, 1 or 2", o->verbose);
    if (o->validation_data || o->validation_split == 0) return fit(m, train, o->validation_data, o, last);
    if (wf_dataset_is_pipeline(train))
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_fit: validation_split needs an array dataset; pass a "
                                               "pipeline's validation set as validation_data");
    wf_dataset *tr = NULL, *val = NULL;
    T(wf_dataset_split(train, o->validation_split, &tr, &val));
    wf_status *s = fit(m, tr, val, o, last);
    wf_dataset_free(tr);
    wf_dataset_free(val);
    return s;
}
