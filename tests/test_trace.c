/*
 * Traced runs and their Chrome trace: every plan node (copies included) has an event, each on its
 * stream (copies on the copy stream of their destination, or of their source when going to the
 * host) with the events it waited for (the producers of its inputs, finished before it started), the
 * file is valid JSON with one named track per (device, stream) and a flow per dependency, the
 * summary adds up (busy <= wall), the HTML report escapes node names, and a bad path is an error
 * naming it. Runs on the CPU, on the TESTDEV plugin (streams and events: device
 * times from its events; and loaded as a plugin of before streams, without a synchronize entry: its
 * times are enqueue times) and on OPENCL:0 when the OpenCL plugin finds a device.
 */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static wf_context *ctx;

#define CHECK_STR_EQ(a, b)                                                                     \
    do { const char *a_ = (a), *b_ = (b);                                                      \
         if (strcmp(a_, b_)) CHECK_FAIL_("%s == %s: '%s' vs '%s'", #a, #b, a_, b_); } while (0)

/* ---- a minimal JSON checker: the whole text must be one value ---------------------------------- */

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}

static const char *value(const char *p, int depth);

static const char *string(const char *p)
{
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *number(const char *p)
{
    const char *s = p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p > s ? p : NULL;
}

static const char *value(const char *p, int depth)
{
    if (depth > 64 || !(p = ws(p))) return NULL;
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = string(ws(p)))) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = value(p, depth + 1))) return NULL;
            p = ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return number(p);
}

static int json_valid(const char *text)
{
    const char *end = value(text, 0);
    return end && !*ws(end);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* The integer after "key": inside the complete event of `node` (the writer prints name before pid/tid). */
static long event_field(const char *json, const char *node, const char *key)
{
    char pat[512];
    snprintf(pat, sizeof pat, "{\"ph\":\"X\",\"name\":\"%s\"", node);
    const char *e = strstr(json, pat);
    if (!e) return -1;
    const char *end = strchr(e, '}');
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *k = strstr(e, pat);
    return k && k < end ? strtol(k + strlen(pat), NULL, 10) : -1;
}

static double other_number(const char *json, const char *from, const char *key)
{
    const char *o = strstr(json, from);
    if (!o) return -1;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *k = strstr(o, pat);
    return k ? strtod(k + strlen(pat), NULL) : -1;
}

/* The name of track (pid, tid) from its thread_name metadata, into buf; NULL when there is none. */
static const char *track_name(const char *json, long pid, long tid, char *buf, size_t n)
{
    char pat[160];
    snprintf(pat, sizeof pat, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":\"",
             pid, tid);
    const char *m = strstr(json, pat);
    if (!m) return NULL;
    m += strlen(pat);
    size_t k = 0;
    while (m[k] && m[k] != '"' && k + 1 < n) {
        buf[k] = m[k];
        k++;
    }
    buf[k] = 0;
    return buf;
}

static int count_of(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

static int event_named(const wf_trace *t, const char *node)
{
    for (int i = 0; i < wf_trace_num_events(t); i++)
        if (!strcmp(wf_trace_event_at(t, i).node, node)) return i;
    return -1;
}

/* The graph nodes behind event i's dependencies (through the planner's copies), as names where relu
 * counts as mm and sig as mm2 (so that fused and unfused plans compare alike), sorted, "a,b,". */
static const char *dep_origins_sorted(const wf_trace *t, int i, char *buf, size_t n)
{
    const char *v[16];
    int k = 0;
    wf_trace_event e = wf_trace_event_at(t, i);
    for (int j = 0; j < e.n_deps && k < 16; j++) {
        int d = e.deps[j];
        while (wf_trace_event_at(t, d).is_copy && wf_trace_event_at(t, d).n_deps == 1) d = wf_trace_event_at(t, d).deps[0];
        const char *name = wf_trace_event_at(t, d).node;
        v[k++] = !strcmp(name, "relu") ? "mm" : !strcmp(name, "sig") ? "mm2" : name;
    }
    for (int a = 1; a < k; a++)
        for (int b = a; b > 0 && strcmp(v[b - 1], v[b]) > 0; b--) {
            const char *x = v[b];
            v[b] = v[b - 1];
            v[b - 1] = x;
        }
    buf[0] = 0;
    for (int a = 0; a < k; a++) snprintf(buf + strlen(buf), n - strlen(buf), "%s,", v[a]);
    return buf;
}

static int find_device(const char *type_id)
{
    for (int d = 0; d < wf_context_num_devices(ctx); d++) {
        wf_device_info di;
        CHECK_OK(wf_context_device(ctx, d, &di));
        size_t n = strlen(di.name), m = strlen(type_id);
        if (n > m && !strcmp(di.name + n - m, type_id) && di.name[n - m - 1] == ':') return d;
    }
    return -1;
}

/* x[16,32] -> mm (MatMul w) -> relu -> add (+ sigmoid(x @ w)); mm on `mm_device` when given. Checks
 * the values against a plain C reference, then the trace, the file and the summary. */
static void traced_run(const char *mm_device, int expect_copies, int expect_enqueue)
{
    enum { M = 16, K = 32, N = 8 };
    float xv[M * K], wv[K * N];
    for (int i = 0; i < M * K; i++) xv[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    wf_graph *g;
    wf_tensor *xt, *wt, *out = NULL;
    wf_output x, w, mm, relu, mm2, sig, add;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){M, K}, xv, &xt));
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){K, N}, wv, &wt));
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, (int64_t[]){M, K}, &x));
    CHECK_OK(wf_const(g, "w", wt, &w));
    CHECK_OK(wf_matmul(g, "mm", x, w, 0, 0, &mm));
    CHECK_OK(wf_relu(g, "relu", mm, &relu));
    CHECK_OK(wf_matmul(g, "mm2", x, w, 0, 0, &mm2));
    CHECK_OK(wf_unary(g, "Sigmoid", "sig", mm2, &sig));
    CHECK_OK(wf_add(g, "add", relu, sig, &add));
    if (mm_device) CHECK_OK(wf_node_set_device(mm.node, mm_device));
    wf_session_options so;
    wf_session_options_init(&so);
    so.strict_placement = 1; /* a forced device that cannot take mm must fail the test, not fall back */
    so.opt_level = 0;        /* mm and mm2 are the same MatMul on purpose: no cse */
    if (!mm_device) so.device = "CPU:0"; /* the cost model would otherwise use TESTDEV's fast device */
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    wf_feed f = {x, xt};
    char *placement = NULL;
    CHECK_OK(wf_session_placement(s, &f, 1, &add, 1, &placement));
    wf_trace *trace = NULL;
    wf_run_options ro = {&trace};
    CHECK_OK(wf_session_run(s, &f, 1, &add, 1, &out, &ro));
    if (!out || !trace || !placement) goto done;

    /* the values */
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)xv[i * K + k] * wv[k * N + j];
            double ref = (acc > 0 ? acc : 0) + 1 / (1 + exp(-acc));
            if (fabs(((float *)wf_tensor_data(out))[i * N + j] - ref) > 1e-4) bad++;
        }
    CHECK_INT(bad, 0);

    /* every plan node (each placement line) has exactly one event, with its device and reason */
    int n_ev = wf_trace_num_events(trace), lines = 0, copies = 0, enq = 0, add_dev = -1;
    for (const char *l = placement; *l; l = strchr(l, '\n') + 1) lines++;
    CHECK_INT(n_ev, lines);
    int64_t wall = wf_trace_wall_ns(trace);
    CHECK(wall > 0);
    for (int i = 0; i < n_ev; i++) {
        wf_trace_event e = wf_trace_event_at(trace, i);
        char want[1024];
        snprintf(want, sizeof want, "%s: (%s): %s  # %s\n", e.node, e.op, e.device, e.reason);
        CHECK_STR_CONTAINS(placement, want);
        CHECK(e.start_ns >= 0 && e.end_ns >= e.start_ns && e.end_ns <= wall);
        CHECK(e.shapes[0] == 'f' && strchr(e.shapes, '['));
        CHECK(e.bytes > 0);
        CHECK(strstr(e.device, e.device_short) != NULL);
        if (e.is_copy) {
            copies++;
            CHECK_STR_CONTAINS(e.node, "/Copy_to_");
            CHECK_STR_CONTAINS(e.node, e.device_short); /* on its destination */
            long d0 = 0, d1 = 0;
            CHECK(sscanf(e.shapes, "f32[%ld,%ld]", &d0, &d1) == 2);
            CHECK_INT(e.bytes, d0 * d1 * 4);
        }
        /* only the backend without a synchronize entry is timed by enqueueing (TESTDEV when loaded as
         * the plugin of before streams, WEFT_TESTDEV_V1=1) */
        CHECK_INT(e.enqueue_only, expect_enqueue && !strncmp(e.device_short, "TESTDEV", 7));
        enq += e.enqueue_only;
        /* with streams and events (TESTDEV, its copies to and from the host): device times from the
         * events, copies on the copy stream */
        if (!expect_enqueue && mm_device &&
            ((!strcmp(mm_device, "TESTDEV:0") && !strncmp(e.device_short, "TESTDEV", 7)) ||
             (!strcmp(mm_device, "GPU:0") && !strncmp(e.device_short, "GPU", 3)))) {
            CHECK(e.device_start_ns > 0 && e.device_end_ns >= e.device_start_ns);
            CHECK_INT(e.stream, e.is_copy ? 1 : 0);
        }
        if (!strcmp(e.node, "add")) add_dev = e.device_index;
        /* the stream: copies on the copy stream of their destination, or of their source to the host */
        CHECK_INT(e.stream, e.is_copy ? WF_STREAM_COPY : WF_STREAM_COMPUTE);
        CHECK(e.n_deps >= 0 && (e.n_deps == 0 || e.deps));
        for (int k = 0; k < e.n_deps; k++) {
            CHECK(e.deps[k] >= 0 && e.deps[k] < n_ev && e.deps[k] != i);
            if (e.deps[k] < 0 || e.deps[k] >= n_ev) continue;
            /* a producer ends before its consumer starts: on the device's clock where both ran on one
             * device with streams (a kernel is enqueued once its producer there is enqueued, so its
             * host start may precede the producer's completion), on the host's otherwise */
            wf_trace_event d = wf_trace_event_at(trace, e.deps[k]);
            if (e.device_start_ns && d.device_end_ns && d.stream_device == e.stream_device)
                CHECK(d.device_end_ns <= e.device_start_ns);
            else if (!e.device_start_ns)
                CHECK(d.end_ns <= e.start_ns);
            else
                CHECK(d.start_ns <= e.start_ns);
        }
        if (e.is_copy) {
            CHECK_INT(e.n_deps, 1);
            int src = e.n_deps == 1 ? wf_trace_event_at(trace, e.deps[0]).device_index : -1;
            CHECK(src != e.device_index);
            CHECK_INT(e.stream_device, strncmp(e.device_short, "CPU", 3) ? e.device_index : src);
            CHECK_INT(e.out_bytes, e.bytes);
        } else {
            CHECK_INT(e.stream_device, e.device_index);
        }
        /* values live until their last reader ends; fetched, fed and constant ones outlive the run */
        int fetched = !strncmp(e.node, "add:0/Copy_to_", 14) || (!strcmp(e.node, "add") && !strncmp(e.device_short, "CPU", 3));
        if (fetched || !strcmp(e.node, "x") || !strcmp(e.node, "w")) CHECK_INT(e.release_ns, -1);
        else CHECK(e.release_ns >= e.end_ns);
        if (!strcmp(e.node, "mm")) {
            CHECK_STR_CONTAINS(e.shapes, "f32[16,8]");
            CHECK_INT(e.bytes, (M * K + K * N + M * N) * 4);
            if (mm_device) CHECK_STR_CONTAINS(e.device, mm_device);
            CHECK_INT(e.out_bytes, M * N * 4);
        }
    }
    /* the dependencies are the graph's edges (through copies), hand-listed from the graph above; a
     * fused node (mm with op MatMul+Relu) stands for relu too, so each side lists both names */
    struct { const char *node, *deps; } want_deps[] = {
        {"x", ""}, {"w", ""}, {"mm", "w,x,"}, {"mm2", "w,x,"}, {"relu", "mm,"}, {"sig", "mm2,"},
        {"add", "mm,mm2,"},
    };
    char ob[256];
    for (size_t k = 0; k < sizeof want_deps / sizeof want_deps[0]; k++) {
        int i = event_named(trace, want_deps[k].node);
        if (i < 0) {
            /* fused into its producer */
            CHECK(!strcmp(want_deps[k].node, "relu") || !strcmp(want_deps[k].node, "sig"));
            continue;
        }
        CHECK_STR_EQ(dep_origins_sorted(trace, i, ob, sizeof ob), want_deps[k].deps);
    }
    /* mm's value is released when its only reader (relu, unless fused) ends on its device, and never
     * before mm itself ends: on a device with streams relu is enqueued behind mm and both complete from
     * event callbacks, which two executor threads may process in either order, so relu's host end can
     * come first (seen in CI: release 4996257 ns, relu's end 4703908 ns) */
    int mi = event_named(trace, "mm"), ri = event_named(trace, "relu");
    if (mi >= 0 && ri >= 0 && wf_trace_event_at(trace, ri).device_index == wf_trace_event_at(trace, mi).device_index) {
        int64_t me = wf_trace_event_at(trace, mi).end_ns, re = wf_trace_event_at(trace, ri).end_ns;
        CHECK_INT(wf_trace_event_at(trace, mi).release_ns, me > re ? me : re);
    }
    CHECK(expect_copies ? copies > 0 : copies == 0);
    CHECK(!expect_enqueue || enq > 0);

    /* the summary */
    wf_trace_device_summary sm[8];
    int nd = wf_trace_summary(trace, ctx, sm, 8);
    CHECK(nd >= 1 && nd <= 8);
    int counted = 0;
    for (int k = 0; k < nd && k < 8; k++) {
        CHECK(sm[k].busy_ns >= 0 && sm[k].busy_ns <= wall);
        CHECK(sm[k].copy_ns >= 0 && sm[k].copy_ns <= wall);
        CHECK(sm[k].utilisation >= 0 && sm[k].utilisation <= 1.0);
        CHECK_NEAR(sm[k].utilisation, (double)sm[k].busy_ns / (double)wall, 1e-9);
        CHECK(sm[k].n_copies == 0 || sm[k].copy_bytes > 0);
        if (sm[k].device_index == add_dev) CHECK(sm[k].peak_memory > 0); /* it produced the result */
        counted += sm[k].n_nodes + sm[k].n_copies;
    }
    CHECK_INT(counted, n_ev);
    char *text = NULL;
    CHECK_OK(wf_trace_summary_text(trace, ctx, &text));
    CHECK_STR_CONTAINS(text, "profile: wall");
    CHECK_STR_CONTAINS(text, "CPU:0:");
    wf_free(text);

    /* the Chrome trace */
    char path[] = "/tmp/weft-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK_OK(wf_trace_write_chrome(trace, ctx, path));
    char *json = slurp(path);
    unlink(path);
    CHECK(json != NULL);
    if (json) {
        CHECK(json_valid(json));
        CHECK_STR_CONTAINS(json, "\"traceEvents\":[");
        CHECK_STR_CONTAINS(json, "\"otherData\":{");
        CHECK_STR_CONTAINS(json, "{\"ph\":\"M\",\"name\":\"thread_name\"");
        for (int i = 0; i < n_ev; i++) {
            wf_trace_event e = wf_trace_event_at(trace, i);
            long tid = event_field(json, e.node, "tid"), pid = event_field(json, e.node, "pid");
            CHECK_INT(pid, e.stream_device);
            if (e.is_copy) CHECK(tid >= 1001);
            else CHECK(tid >= 1 && tid < 1001);
            CHECK_INT(event_field(json, e.node, "bytes"), e.bytes);
            /* its track is named after its stream: "OPENCL:0 copy", "CPU:0 compute" (#2.. for lanes) */
            char tn[128], want[128];
            const char *sd = NULL;
            for (int j = 0; j < n_ev && !sd; j++)
                if (wf_trace_event_at(trace, j).device_index == e.stream_device) sd = wf_trace_event_at(trace, j).device_short;
            snprintf(want, sizeof want, "%s %s", sd ? sd : "?", e.is_copy ? "copy" : "compute");
            const char *got = track_name(json, pid, tid, tn, sizeof tn);
            CHECK(got != NULL);
            if (got) {
                CHECK(!strncmp(got, want, strlen(want)));
                CHECK(!got[strlen(want)] || !strncmp(got + strlen(want), " #", 2));
            }
        }
        /* both streams of every device with events have a track */
        for (int k = 0; k < nd && k < 8; k++) {
            char want[128];
            snprintf(want, sizeof want, "\"args\":{\"name\":\"%s compute\"}", sm[k].device);
            CHECK_STR_CONTAINS(json, want);
            snprintf(want, sizeof want, "\"args\":{\"name\":\"%s copy\"}", sm[k].device);
            CHECK_STR_CONTAINS(json, want);
        }
        /* a flow (start and finish with one id) per dependency */
        int n_deps = 0;
        for (int i = 0; i < n_ev; i++) n_deps += wf_trace_event_at(trace, i).n_deps;
        CHECK(n_deps >= 5);
        CHECK_INT(count_of(json, "{\"ph\":\"s\",\"name\":\"dep\""), n_deps);
        CHECK_INT(count_of(json, "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"dep\""), n_deps);
        for (int id = 1; id <= n_deps; id++) {
            char a[64], b[64];
            snprintf(a, sizeof a, "\"cat\":\"dep\",\"id\":%d,", id);
            CHECK_INT(count_of(json, a), 2);
            snprintf(b, sizeof b, "\"ph\":\"f\",\"bp\":\"e\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%d,", id);
            CHECK_INT(count_of(json, b), 1);
        }
        CHECK(!enq == !strstr(json, "\"timing\":\"enqueue\""));
        double wall_us = other_number(json, "\"otherData\"", "wall_us");
        CHECK_NEAR(wall_us, (double)wall / 1e3, 1e-3);
        for (const char *o = strstr(json, "\"otherData\""); o && (o = strstr(o, "\"busy_us\":")); o++)
            CHECK(strtod(o + 10, NULL) <= wall_us + 1e-3);
        free(json);
    }
done:
    wf_free(placement);
    wf_trace_free(trace);
    wf_tensor_free(out);
    wf_session_free(s);
    wf_graph_free(g);
    wf_tensor_free(xt);
    wf_tensor_free(wt);
}

static void test_cpu(void) { traced_run(NULL, 0, 0); }

static void test_testdev(void)
{
    /* TESTDEV has streams and events: its nodes are timed on its streams */
    CHECK(find_device("TESTDEV:0") >= 0);
    traced_run("TESTDEV:0", 1, 0);
}

static void test_testdev_v1(void)
{
    /* TESTDEV loaded as a plugin of before streams (no synchronize entry): its nodes can only be timed
     * as enqueued */
    wf_context *saved = ctx;
    setenv("WEFT_TESTDEV_V1", "1", 1);
    wf_status *s = wf_context_new(NULL, &ctx);
    unsetenv("WEFT_TESTDEV_V1");
    CHECK_OK(s);
    if (s) {
        ctx = saved;
        return;
    }
    CHECK(find_device("TESTDEV:0") >= 0);
    traced_run("TESTDEV:0", 1, 1);
    wf_context_free(ctx);
    ctx = saved;
}

static void test_opencl(void)
{
    if (find_device("OPENCL:0") < 0) {
        CHECK_SKIP("test_opencl", "no OPENCL:0 device");
        return;
    }
    traced_run("OPENCL:0", 1, 0);
}

/* The CUDA plugin (on a machine without a GPU its emulator, found through the caller's
 * WEFT_PLUGIN_PATH) has streams and events: its nodes are timed by its events (the emulator's clock:
 * each operation runs when it is issued). */
static void test_gpu(void)
{
    if (find_device("GPU:0") < 0) {
        CHECK_SKIP("test_gpu", "no GPU:0 (emulator plugin not on WEFT_PLUGIN_PATH)");
        return;
    }
    traced_run("GPU:0", 1, 0);
}

static void test_bad_path(void)
{
    wf_graph *g;
    wf_output a, r;
    wf_tensor *t, *out = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_placeholder(g, "a", WF_F32, 1, (int64_t[]){4}, &a));
    CHECK_OK(wf_relu(g, "r", a, &r));
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){4}, NULL, &t));
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_trace *trace = NULL;
    wf_run_options ro = {&trace};
    wf_feed f = {a, t};
    CHECK_OK(wf_session_run(s, &f, 1, &r, 1, &out, &ro));
    CHECK_INT(wf_trace_num_events(trace), 2);
    CHECK_ERR(wf_trace_write_chrome(trace, ctx, "/nonexistent-weft-dir/p.json"), WF_IO_ERROR,
              "/nonexistent-weft-dir/p.json");
    CHECK_ERR(wf_trace_write_chrome(NULL, ctx, "/tmp/x.json"), WF_INVALID_ARGUMENT, "NULL");
    /* no context: the summary leaves memory out */
    wf_trace_device_summary sm;
    CHECK_INT(wf_trace_summary(trace, NULL, &sm, 1), 1);
    CHECK_INT(sm.peak_memory, 0);
    CHECK_INT(sm.n_nodes, 2);
    wf_trace_free(trace);
    wf_tensor_free(out);
    wf_tensor_free(t);
    wf_session_free(s);
    wf_graph_free(g);
}

/* The HTML report of a graph whose node names are markup: they reach the page only escaped, the
 * tables hold the ops with their counts, and a bad path is an error naming it. */
static void test_report(void)
{
    static const char evil[] = "<script>alert(1)</script>";
    wf_graph *g;
    wf_output a, r, r2, m;
    wf_tensor *t, *out = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_placeholder(g, "a", WF_F32, 2, (int64_t[]){4, 4}, &a));
    CHECK_OK(wf_relu(g, evil, a, &r));
    CHECK_OK(wf_relu(g, "r2\"&'", r, &r2));
    CHECK_OK(wf_matmul(g, "mm", r2, r, 0, 0, &m));
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = (float)i - 7.5f;
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){4, 4}, v, &t));
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "CPU:0";
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    wf_trace *trace = NULL;
    wf_run_options ro = {&trace};
    wf_feed f = {a, t};
    CHECK_OK(wf_session_run(s, &f, 1, &m, 1, &out, &ro));
    char path[] = "/tmp/weft-report-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK_OK(wf_trace_write_report(trace, ctx, path));
    char *html = slurp(path);
    unlink(path);
    CHECK(html != NULL);
    if (html) {
        CHECK(!strstr(html, evil));
        CHECK(!strstr(html, "alert(1)</"));
        CHECK(!strstr(html, "r2\"&'"));
        /* two script elements: the data and the code, nothing from the graph */
        CHECK_INT(count_of(html, "<script"), 2);
        CHECK_INT(count_of(html, "</script>"), 2);
        CHECK_STR_CONTAINS(html, "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e");
        CHECK_STR_CONTAINS(html, "\"n\":\"r2\\\"\\u0026'\"");
        CHECK_STR_CONTAINS(html, "<!DOCTYPE html>");
        for (const char *id = "utilisation\0timeline\0top-ops\0copies\0memory\0graph\0weft-data\0"; *id;
             id += strlen(id) + 1) {
            char want[64];
            snprintf(want, sizeof want, "id=\"%s\"", id);
            CHECK_STR_CONTAINS(html, want);
        }
        /* both Relus in one row, the MatMul in another; nothing fetched from a network */
        CHECK_STR_CONTAINS(html, "data-device=\"CPU:0\" data-op=\"Relu\"><td class=\"l\">Relu</td><td class=\"count\">2</td>");
        CHECK_STR_CONTAINS(html, "data-op=\"MatMul\"><td class=\"l\">MatMul</td><td class=\"count\">1</td>");
        CHECK_STR_CONTAINS(html, "No copies");
        CHECK_INT(count_of(html, "http"), count_of(html, "http://www.w3.org/2000/svg")); /* the SVG namespace */
        CHECK(!strstr(html, " src="));
        free(html);
    }
    CHECK_ERR(wf_trace_write_report(trace, ctx, "/nonexistent-weft-dir/r.html"), WF_IO_ERROR,
              "/nonexistent-weft-dir/r.html");
    CHECK_ERR(wf_trace_write_report(NULL, ctx, "/tmp/x.html"), WF_INVALID_ARGUMENT, "NULL");
    wf_trace_free(trace);
    wf_tensor_free(out);
    wf_tensor_free(t);
    wf_session_free(s);
    wf_graph_free(g);
}

int main(void)
{
    /* the test backend, and the OpenCL plugin beside the weft binary two folders up */
    /* the test backend, then what the caller names (build/cudaemu for the emulated GPU:0), then the
     * build's plugins: the caller's come first, since a build with nvcc has a real libweft-cuda.so of
     * its own, which finds no driver here and would hide the emulator's */
    const char *given = getenv("WEFT_PLUGIN_PATH");
    char path[8192];
    snprintf(path, sizeof path, "%s:%s%s%s", WEFT_TEST_PLUGIN_DIR, given && *given ? given : "",
             given && *given ? ":" : "", WEFT_TEST_PLUGIN_DIR "/../..");
    setenv("WEFT_PLUGIN_PATH", path, 1);
    CHECK_OK(wf_context_new(NULL, &ctx));
    RUN_TEST(test_cpu);
    RUN_TEST(test_testdev);
    RUN_TEST(test_testdev_v1);
    RUN_TEST(test_opencl);
    RUN_TEST(test_gpu);
    RUN_TEST(test_bad_path);
    RUN_TEST(test_report);
    wf_context_free(ctx);
    return check_summary();
}
