/*
 * Calibration of the placer's cost model: each device's figures (wf_device_perf) measured by running
 * small graphs on it through the public session API, so every backend is timed the same way, and a
 * text cache of them that wf_context_new reads back.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"

/* ---- timing ------------------------------------------------------------------------------------- */

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One run whose fetched result is dropped at once; returns its wall time. */
static wf_status *timed_run(wf_session *s, const wf_feed *feeds, int n_feeds, wf_output fetch, double *secs)
{
    wf_tensor *out = NULL;
    double t0 = now_s();
    wf_status *st = wf_session_run(s, feeds, n_feeds, &fetch, 1, &out, NULL);
    *secs = now_s() - t0;
    wf_tensor_free(out);
    return st;
}

#define MAX_REPS 101

/*
 * The time one extra step of a chain costs: the medians of runs fetching the chain's first step and its
 * last (k steps later), interleaved so both see the same load, differenced so the run's fixed costs
 * (scheduling, the copies of feeds and fetches) cancel. The first run of each is a warm-up: it plans
 * and, on OpenCL, compiles the kernels. reps adapts to `budget` seconds, within [3, max_reps]; a slow
 * device takes longer than the budget rather than fewer than 3.
 */
static wf_status *step_time(wf_session *s, const wf_feed *feeds_a, int nf_a, wf_output fetch_a,
                            const wf_feed *feeds_b, int nf_b, wf_output fetch_b, int k, double budget,
                            int max_reps, double *step)
{
    double ta[MAX_REPS], tb[MAX_REPS];
    /* the short run compiles what the long one needs; the long one, already warm, sizes the repetitions */
    WF__TRY(timed_run(s, feeds_a, nf_a, fetch_a, &ta[0]));
    WF__TRY(timed_run(s, feeds_b, nf_b, fetch_b, &tb[0]));
    int reps = tb[0] > 0 ? (int)(budget / (tb[0] * (k + 2) / (k + 1))) : max_reps;
    if (reps < 3) reps = 3;
    if (reps > max_reps) reps = max_reps;
    for (int r = 0; r < reps; r++) {
        WF__TRY(timed_run(s, feeds_a, nf_a, fetch_a, &ta[r]));
        WF__TRY(timed_run(s, feeds_b, nf_b, fetch_b, &tb[r]));
    }
    double ma = median(ta, reps), mb = median(tb, reps);
    double d = (mb - ma) / k;
    /* noise can swamp a small difference: then an even share of the long run is the safer figure */
    if (!(d > 0)) d = mb / (k + 1);
    *step = d;
    return NULL;
}

/* ---- graphs ------------------------------------------------------------------------------------- */

/* Deterministic values in [-1, 1), so runs on every device see the same data. */
static wf_status *random_tensor(int rank, const int64_t *dims, float scale, uint32_t seed, wf_tensor **out)
{
    WF__TRY(wf_tensor_new(WF_F32, rank, dims, NULL, out));
    float *p = wf_tensor_data(*out);
    int64_t n = wf_tensor_size(*out);
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = scale * ((float)(x >> 8) / 8388608.0f - 1.0f);
    }
    return NULL;
}

typedef struct bench {
    wf_graph *g;
    wf_session *s;
    wf_tensor *t[10];
    int nt;
} bench;

static void bench_free(bench *b)
{
    wf_session_free(b->s);
    wf_graph_free(b->g);
    for (int i = 0; i < b->nt; i++) wf_tensor_free(b->t[i]);
    memset(b, 0, sizeof *b);
}

static wf_status *bench_session(wf_context *c, const struct wf__device *d, bench *b)
{
    wf_session_options o;
    wf_session_options_init(&o);
    o.device = d->name;
    o.strict_placement = 1;
    return wf_session_new(c, b->g, &o, &b->s);
}

#define CHAIN 2        /* steps between the short and the long run of a large op */
#define LAUNCH_CHAIN 16
#define DENSE_N 512
#define VEC_N (4 << 20) /* Add and the link: 16 MB, more than most caches */
#define TANH_N (4 << 20) /* large enough that a parallel region's start-up is amortised */

/* x @ B repeated: B scaled so the values keep their size along the chain (no overflow, no denormals). */
static wf_status *measure_dense(wf_context *c, const struct wf__device *d, double *step)
{
    bench b = {0};
    wf_status *s = NULL;
    int64_t dims[2] = {DENSE_N, DENSE_N};
    wf_output x, w, y[CHAIN + 1];
    if ((s = wf_graph_new(&b.g))) goto out;
    if ((s = random_tensor(2, dims, 1.0f, 1, &b.t[b.nt++]))) goto out;
    if ((s = random_tensor(2, dims, sqrtf(3.0f / DENSE_N), 2, &b.t[b.nt++]))) goto out;
    if ((s = wf_placeholder(b.g, "x", WF_F32, 2, dims, &x))) goto out;
    if ((s = wf_const(b.g, "w", b.t[1], &w))) goto out;
    for (int i = 0; i <= CHAIN; i++)
        if ((s = wf_matmul(b.g, NULL, i ? y[i - 1] : x, w, 0, 0, &y[i]))) goto out;
    if ((s = bench_session(c, d, &b))) goto out;
    wf_feed f = {x, b.t[0]};
    s = step_time(b.s, &f, 1, y[0], &f, 1, y[CHAIN], CHAIN, 1.0, 9, step);
out:
    bench_free(&b);
    return s;
}

/* op "Tanh": y = Tanh(y) repeated; op "Add": y = y + x repeated. */
static wf_status *measure_vector(wf_context *c, const struct wf__device *d, const char *op, int64_t n,
                                 double *step)
{
    bench b = {0};
    wf_status *s = NULL;
    int64_t dims[1] = {n};
    wf_output x, y[CHAIN + 1];
    if ((s = wf_graph_new(&b.g))) goto out;
    if ((s = random_tensor(1, dims, 1.0f, 3, &b.t[b.nt++]))) goto out;
    if ((s = wf_placeholder(b.g, "x", WF_F32, 1, dims, &x))) goto out;
    for (int i = 0; i <= CHAIN; i++) {
        wf_output prev = i ? y[i - 1] : x;
        s = !strcmp(op, "Add") ? wf_add(b.g, NULL, prev, x, &y[i]) : wf_unary(b.g, op, NULL, prev, &y[i]);
        if (s) goto out;
    }
    if ((s = bench_session(c, d, &b))) goto out;
    wf_feed f = {x, b.t[0]};
    s = step_time(b.s, &f, 1, y[0], &f, 1, y[CHAIN], CHAIN, 0.8, 9, step);
out:
    bench_free(&b);
    return s;
}

/* A chain of Adds on scalars: what a step costs is the node's fixed cost. */
static wf_status *measure_launch(wf_context *c, const struct wf__device *d, double *step)
{
    bench b = {0};
    wf_status *s = NULL;
    wf_output x, y[LAUNCH_CHAIN + 1];
    if ((s = wf_graph_new(&b.g))) goto out;
    float one = 1.0f;
    if ((s = wf_tensor_new(WF_F32, 0, NULL, &one, &b.t[b.nt++]))) goto out;
    if ((s = wf_placeholder(b.g, "x", WF_F32, 0, NULL, &x))) goto out;
    for (int i = 0; i <= LAUNCH_CHAIN; i++)
        if ((s = wf_add(b.g, NULL, i ? y[i - 1] : x, x, &y[i]))) goto out;
    if ((s = bench_session(c, d, &b))) goto out;
    wf_feed f = {x, b.t[0]};
    s = step_time(b.s, &f, 1, y[0], &f, 1, y[LAUNCH_CHAIN], LAUNCH_CHAIN, 0.4, MAX_REPS, step);
out:
    bench_free(&b);
    return s;
}

#define LAT_FEEDS 8

/* Link latency: a sum of 2 scalar feeds against one of LAT_FEEDS, each feed a copy to the device;
 * a step is one copy and one Add. */
static wf_status *measure_link_latency(wf_context *c, const struct wf__device *d, double *step)
{
    bench b = {0};
    wf_status *s = NULL;
    wf_output p[LAT_FEEDS], y[LAT_FEEDS];
    wf_feed f[LAT_FEEDS];
    if ((s = wf_graph_new(&b.g))) goto out;
    for (int i = 0; i < LAT_FEEDS; i++) {
        float v = (float)i;
        char nm[16];
        snprintf(nm, sizeof nm, "p%d", i);
        if ((s = wf_tensor_new(WF_F32, 0, NULL, &v, &b.t[b.nt++]))) goto out;
        if ((s = wf_placeholder(b.g, nm, WF_F32, 0, NULL, &p[i]))) goto out;
        f[i] = (wf_feed){p[i], b.t[i]};
        if (i && (s = wf_add(b.g, NULL, i == 1 ? p[0] : y[i - 1], p[i], &y[i]))) goto out;
    }
    if ((s = bench_session(c, d, &b))) goto out;
    s = step_time(b.s, f, 2, y[1], f, LAT_FEEDS, y[LAT_FEEDS - 1], LAT_FEEDS - 2, 0.4, MAX_REPS, step);
out:
    bench_free(&b);
    return s;
}

/* Link bandwidth: one float against VEC_N, each copied in and back out. Identity is the op that adds
 * least of its own (a view where the backend can make one). */
static wf_status *measure_link_bw(wf_context *c, const struct wf__device *d, double *extra)
{
    bench b = {0};
    wf_status *s = NULL;
    int64_t any[1] = {-1}, small[1] = {1}, large[1] = {VEC_N};
    wf_output x, y;
    if ((s = wf_graph_new(&b.g))) goto out;
    if ((s = random_tensor(1, small, 1.0f, 4, &b.t[b.nt++]))) goto out;
    if ((s = random_tensor(1, large, 1.0f, 5, &b.t[b.nt++]))) goto out;
    if ((s = wf_placeholder(b.g, "x", WF_F32, 1, any, &x))) goto out;
    if ((s = wf_unary(b.g, "Identity", NULL, x, &y))) goto out;
    if ((s = bench_session(c, d, &b))) goto out;
    wf_feed fs = {x, b.t[0]}, fl = {x, b.t[1]};
    s = step_time(b.s, &fs, 1, y, &fl, 1, y, 1, 0.6, 9, extra);
out:
    bench_free(&b);
    return s;
}

/* The net time of an op once the node's fixed cost is taken off; never below a tenth of the step, so a
 * launch estimate that noise made too large cannot make a rate absurd. */
static double net(double step, double launch)
{
    double t = step - launch;
    return t > 0.1 * step ? t : 0.1 * step;
}

static wf_status *calibrate_device(wf_context *c, const struct wf__device *d, wf_device_perf *out)
{
    double t_launch, t_dense, t_tanh, t_add;
    WF__TRY(measure_launch(c, d, &t_launch));
    WF__TRY(measure_dense(c, d, &t_dense));
    WF__TRY(measure_vector(c, d, "Tanh", TANH_N, &t_tanh));
    WF__TRY(measure_vector(c, d, "Add", VEC_N, &t_add));
    wf_device_perf p = d->perf;
    /* the counts the cost model charges these ops (ops_nn.c cost_matmul, ops_elementwise.c) */
    p.launch_us = t_launch * 1e6;
    p.dense_gflops = 2.0 * DENSE_N * DENSE_N * DENSE_N / net(t_dense, t_launch) * 1e-9;
    p.vector_gflops = 10.0 * TANH_N / net(t_tanh, t_launch) * 1e-9;
    double mem_bytes = 12.0 * VEC_N; /* two inputs and one output */
    p.mem_gbps = mem_bytes / net(t_add, t_launch) * 1e-9;
    if (!d->info.host_memory) {
        double t_lat, t_bw;
        WF__TRY(measure_link_latency(c, d, &t_lat));
        WF__TRY(measure_link_bw(c, d, &t_bw));
        p.link_latency_us = (t_lat > t_launch ? t_lat - t_launch : 0.1 * t_lat) * 1e6;
        /* the large run moved 4 * VEC_N bytes more each way */
        p.link_gbps = 2 * 4.0 * VEC_N / t_bw * 1e-9;
    }
    p.measured = 1;
    *out = p;
    return NULL;
}

/* ---- the cache file ----------------------------------------------------------------------------- */

/*
 * One line per device: full name, hardware and backend separated by tabs, then the six figures:
 *   NAME<TAB>HARDWARE<TAB>BACKEND<TAB>dense vector mem launch link_gbps link_latency_us
 * Tabs and line breaks inside a key are written as spaces, and compared that way.
 */
#define CACHE_HEADER                                                                                      \
    "# weft device performance (weft devices --calibrate). One line per device:\n"                        \
    "# name<TAB>hardware<TAB>backend<TAB>dense_gflops vector_gflops mem_gbps launch_us link_gbps "        \
    "link_latency_us\n"

static char *default_cache_path(char **dir_out)
{
    const char *v;
    char *dir;
    wf__str s = {0};
    if ((v = getenv("WEFT_CACHE_DIR")) && *v) wf__str_appendf(&s, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) wf__str_appendf(&s, "%s/weft", v);
    else if ((v = getenv("HOME")) && *v) wf__str_appendf(&s, "%s/.cache/weft", v);
    else return NULL;
    if (s.failed || !s.p) {
        wf__str_free(&s);
        return NULL;
    }
    dir = s.p;
    wf__str p = {0};
    wf__str_appendf(&p, "%s/perf.txt", dir);
    if (p.failed) {
        wf__str_free(&p);
        wf__free(dir);
        return NULL;
    }
    if (dir_out) *dir_out = dir;
    else wf__free(dir);
    return p.p;
}

static bool key_char_eq(char a, char b)
{
    if (a == '\t' || a == '\n' || a == '\r') a = ' ';
    if (b == '\t' || b == '\n' || b == '\r') b = ' ';
    return a == b;
}

/* field[0..n) against s, as written (tabs and line breaks turned into spaces). */
static bool key_eq(const char *field, size_t n, const char *s)
{
    size_t i = 0;
    for (; i < n && s[i]; i++)
        if (!key_char_eq(field[i], s[i])) return false;
    return i == n && !s[i];
}

typedef struct cache_line {
    const char *f[3]; /* name, hardware, backend (not NUL-terminated) */
    size_t n[3];
    wf_device_perf p;
} cache_line;

/* Parses one line (without its '\n'); false for comments, blanks and anything malformed. */
static bool parse_line(const char *line, cache_line *out)
{
    const char *c = line;
    for (int i = 0; i < 3; i++) {
        const char *tab = strchr(c, '\t');
        if (!tab || tab == c) return false;
        out->f[i] = c;
        out->n[i] = (size_t)(tab - c);
        c = tab + 1;
    }
    if (line[0] == '#') return false;
    double v[6];
    for (int i = 0; i < 6; i++) {
        char *end;
        errno = 0;
        v[i] = strtod(c, &end);
        if (end == c || errno || !isfinite(v[i])) return false;
        c = end;
    }
    while (*c == ' ' || *c == '\t' || *c == '\r') c++;
    if (*c) return false;
    if (!(v[0] > 0 && v[1] > 0 && v[2] > 0 && v[3] >= 0 && v[4] >= 0 && v[5] >= 0)) return false;
    out->p = (wf_device_perf){.dense_gflops = v[0], .vector_gflops = v[1], .mem_gbps = v[2], .launch_us = v[3],
                              .link_gbps = v[4], .link_latency_us = v[5], .measured = 1};
    return true;
}

static bool line_is_device(const cache_line *l, const struct wf__device *d)
{
    return key_eq(l->f[0], l->n[0], d->name) && key_eq(l->f[1], l->n[1], d->description) &&
           key_eq(l->f[2], l->n[2], d->backend);
}

/* Calls fn for every well-formed line of an open file; over-long lines are skipped whole. */
static void each_line(FILE *f, void (*fn)(void *, const char *, const cache_line *), void *user)
{
    char buf[4096];
    bool skipping = false;
    while (fgets(buf, sizeof buf, f)) {
        size_t n = strlen(buf);
        bool whole = n > 0 && buf[n - 1] == '\n';
        if (skipping) {
            skipping = !whole;
            continue;
        }
        if (!whole && !feof(f)) {
            skipping = true;
            continue;
        }
        if (whole) buf[n - 1] = 0;
        cache_line l;
        if (parse_line(buf, &l)) fn(user, buf, &l);
    }
}

static void apply_line(void *user, const char *text, const cache_line *l)
{
    wf_context *c = user;
    for (int i = 0; i < c->n_devices; i++) {
        struct wf__device *d = &c->devices[i];
        /* a backend device needs a link to be costed at all */
        if (line_is_device(l, d) && (d->info.host_memory || l->p.link_gbps > 0)) d->perf = l->p;
    }
}

wf_status *wf_context_load_calibration(wf_context *c, const char *cache_path)
{
    if (!c) return wf__status(WF_INVALID_ARGUMENT, "wf_context_load_calibration: context is NULL");
    char *own = NULL;
    if (!cache_path) {
        if (!(own = default_cache_path(NULL))) return NULL;
        cache_path = own;
    }
    FILE *f = fopen(cache_path, "r");
    if (!f) {
        int e = errno;
        wf_status *s = e == ENOENT || e == ENOTDIR
                           ? NULL
                           : wf__status(WF_IO_ERROR, "cannot read device performance cache '%s': %s", cache_path,
                                        strerror(e));
        wf__free(own);
        return s;
    }
    each_line(f, apply_line, c);
    fclose(f);
    wf__free(own);
    return NULL;
}

/* Keeps the old cache's lines of devices not calibrated now (other machines' devices included). */
typedef struct merge {
    wf__str *out;
    const struct wf__device *const *fresh;
    int n_fresh;
} merge;

static void keep_line(void *user, const char *text, const cache_line *l)
{
    merge *m = user;
    for (int i = 0; i < m->n_fresh; i++)
        if (line_is_device(l, m->fresh[i])) return;
    wf__str_appendf(m->out, "%s\n", text);
}

static void append_key(wf__str *s, const char *k)
{
    for (; *k; k++) {
        char ch = *k == '\t' || *k == '\n' || *k == '\r' ? ' ' : *k;
        wf__str_appendf(s, "%c", ch);
    }
    wf__str_append(s, "\t");
}

/* mkdir -p of a default cache folder. */
static void make_dirs(const char *dir)
{
    char *p = wf__strdup(dir);
    if (!p) return;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        mkdir(p, 0755);
        *q = '/';
    }
    mkdir(p, 0755);
    wf__free(p);
}

/* Writes the cache with the fresh devices' figures, through a temporary file renamed over the old one
 * so a reader never sees half a file. */
static wf_status *write_cache(const char *path, const struct wf__device *const *fresh, int n_fresh)
{
    wf__str s = {0};
    wf__str_append(&s, CACHE_HEADER);
    FILE *old = fopen(path, "r");
    if (old) {
        merge m = {&s, fresh, n_fresh};
        each_line(old, keep_line, &m);
        fclose(old);
    }
    for (int i = 0; i < n_fresh; i++) {
        const struct wf__device *d = fresh[i];
        const wf_device_perf *p = &d->perf;
        append_key(&s, d->name);
        append_key(&s, d->description);
        append_key(&s, d->backend);
        wf__str_appendf(&s, "%.9g %.9g %.9g %.9g %.9g %.9g\n", p->dense_gflops, p->vector_gflops, p->mem_gbps,
                        p->launch_us, p->link_gbps, p->link_latency_us);
    }
    if (s.failed) {
        wf__str_free(&s);
        return wf__oom("the device performance cache", 4096);
    }
    wf__str tmp = {0};
    wf__str_appendf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.failed) {
        wf__str_free(&s);
        wf__str_free(&tmp);
        return wf__oom("the device performance cache", 4096);
    }
    wf_status *st = NULL;
    FILE *f = fopen(tmp.p, "w");
    if (!f) {
        st = wf__status(WF_IO_ERROR, "cannot write device performance cache '%s': %s", path, strerror(errno));
    } else {
        bool ok = fwrite(s.p, 1, s.len, f) == s.len;
        ok = fflush(f) == 0 && ok;
        int e = errno;
        ok = fclose(f) == 0 && ok;
        if (!ok || rename(tmp.p, path) != 0) {
            if (ok) e = errno;
            st = wf__status(WF_IO_ERROR, "cannot write device performance cache '%s': %s", path, strerror(e));
            unlink(tmp.p);
        }
    }
    wf__str_free(&s);
    wf__str_free(&tmp);
    return st;
}

/* ---- the entry point ---------------------------------------------------------------------------- */

/* Fails before seconds of measuring are spent when the cache cannot be written at all. */
static wf_status *probe_writable(const char *path)
{
    wf__str tmp = {0};
    wf__str_appendf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.failed) {
        wf__str_free(&tmp);
        return wf__oom("the device performance cache", 4096);
    }
    FILE *f = fopen(tmp.p, "w");
    wf_status *s = NULL;
    if (!f) s = wf__status(WF_IO_ERROR, "cannot write device performance cache '%s': %s", path, strerror(errno));
    else {
        fclose(f);
        unlink(tmp.p);
    }
    wf__str_free(&tmp);
    return s;
}

wf_status *wf_context_calibrate(wf_context *c, const char *device_spec, const char *cache_path)
{
    if (!c) return wf__status(WF_INVALID_ARGUMENT, "wf_context_calibrate: context is NULL");
    uint64_t mask;
    WF__TRY(wf__context_match(c, device_spec, &mask));
    if (!mask)
        return wf__status(WF_NOT_FOUND, "calibration: device spec '%s' matches no device",
                          device_spec ? device_spec : "");
    char *dir = NULL, *own = NULL;
    if (!cache_path) {
        if (!(own = default_cache_path(&dir)))
            return wf__status(WF_IO_ERROR, "calibration: no folder for the device performance cache (set "
                                           "WEFT_CACHE_DIR, XDG_CACHE_HOME or HOME)");
        make_dirs(dir);
        wf__free(dir);
        cache_path = own;
    }
    wf_status *first = probe_writable(cache_path);
    const struct wf__device **fresh = first ? NULL : wf__calloc((size_t)c->n_devices, sizeof *fresh);
    if (!first && !fresh) first = wf__oom("calibration", sizeof *fresh * (size_t)c->n_devices);
    int n_fresh = 0;
    bool go = first == NULL;
    for (int i = 0; go && i < c->n_devices; i++) {
        struct wf__device *d = &c->devices[i];
        if (!(mask >> i & 1)) continue;
        wf_device_perf p;
        /* one device failing (an op it lacks) leaves it at its old figures and the others go on */
        wf_status *s = calibrate_device(c, d, &p);
        if (s) {
            s = wf__status_wrap(s, "calibrating %s", d->short_name);
            if (!first) first = s;
            else wf_status_free(s);
            continue;
        }
        d->perf = p;
        fresh[n_fresh++] = d;
    }
    if (n_fresh) {
        wf_status *s = write_cache(cache_path, fresh, n_fresh);
        if (s && !first) first = s;
        else wf_status_free(s);
    }
    wf__free(fresh);
    wf__free(own);
    return first;
}
