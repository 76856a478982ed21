/*
 * What a traced run becomes for people: per device totals (busy time as the union of a device's
 * events, copies counted on their destination) and a Chrome trace file for Perfetto/chrome://tracing,
 * with a track per device stream and a flow per dependency (the HTML report is in report.c).
 * Works only through the public trace accessors, so the executor's record stays its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"

typedef struct span {
    int64_t a, b;
    int ev;
} span;

static int cmp_span(const void *x, const void *y)
{
    const span *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    return (p->ev > q->ev) - (p->ev < q->ev);
}

/* Length of the union of sorted spans: overlapping events of one device count once. */
static int64_t union_ns(const span *v, int n)
{
    int64_t total = 0, cur_a = 0, cur_b = 0;
    bool open = false;
    for (int i = 0; i < n; i++) {
        if (open && v[i].a <= cur_b) {
            if (v[i].b > cur_b) cur_b = v[i].b;
            continue;
        }
        if (open) total += cur_b - cur_a;
        cur_a = v[i].a;
        cur_b = v[i].b;
        open = true;
    }
    if (open) total += cur_b - cur_a;
    return total;
}

/* The events of device d of one kind (compute or copies), sorted by start. Caller frees. */
static span *spans_of(const wf_trace *t, int d, int copies, int *n_out)
{
    int n = wf_trace_num_events(t), k = 0;
    span *v = wf__malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) return NULL;
    for (int i = 0; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (e.device_index != d || !e.is_copy != !copies) continue;
        v[k++] = (span){e.start_ns, e.end_ns < e.start_ns ? e.start_ns : e.end_ns, i};
    }
    qsort(v, (size_t)k, sizeof *v, cmp_span);
    *n_out = k;
    return v;
}

static int max_device(const wf_trace *t)
{
    int m = -1;
    for (int i = 0; i < wf_trace_num_events(t); i++) {
        int d = wf_trace_event_at(t, i).device_index;
        if (d > m) m = d;
    }
    return m;
}

static bool device_summary(const wf_trace *t, const wf_context *ctx, int d, wf_trace_device_summary *o)
{
    memset(o, 0, sizeof *o);
    o->device_index = d;
    for (int i = 0; i < wf_trace_num_events(t); i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (e.device_index != d) continue;
        o->device = e.device_short;
        if (e.is_copy) {
            o->n_copies++;
            o->copy_bytes += e.bytes;
        } else {
            o->n_nodes++;
        }
    }
    if (!o->device) return false;
    int n;
    span *v = spans_of(t, d, 0, &n);
    if (v) o->busy_ns = union_ns(v, n);
    wf__free(v);
    v = spans_of(t, d, 1, &n);
    if (v) o->copy_ns = union_ns(v, n);
    wf__free(v);
    int64_t wall = wf_trace_wall_ns(t);
    o->utilisation = wall > 0 ? (double)o->busy_ns / (double)wall : 0;
    wf_memory_stats ms;
    wf_status *s = ctx ? wf_context_memory_stats(ctx, d, &ms) : NULL;
    if (ctx && !s) o->peak_memory = ms.peak;
    wf_status_free(s);
    return true;
}

int wf_trace_summary(const wf_trace *t, const wf_context *ctx, wf_trace_device_summary *out, int cap)
{
    if (!t) return 0;
    int k = 0, md = max_device(t);
    for (int d = 0; d <= md; d++) {
        wf_trace_device_summary sm;
        if (!device_summary(t, ctx, d, &sm)) continue;
        if (out && k < cap) out[k] = sm;
        k++;
    }
    return k;
}

static void human_bytes(double b, char *buf, size_t n)
{
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(buf, n, "%.2f KiB", b / 1024.0);
    else snprintf(buf, n, "%.0f B", b);
}

wf_status *wf_trace_summary_text(const wf_trace *t, const wf_context *ctx, char **text)
{
    if (!t || !text) return wf__status(WF_INVALID_ARGUMENT, "wf_trace_summary_text: NULL trace or text");
    wf__str b = {0};
    wf__str_appendf(&b, "profile: wall %.3f ms\n", (double)wf_trace_wall_ns(t) / 1e6);
    int md = max_device(t);
    for (int d = 0; d <= md; d++) {
        wf_trace_device_summary sm;
        if (!device_summary(t, ctx, d, &sm)) continue;
        char cb[32], pk[32];
        human_bytes((double)sm.copy_bytes, cb, sizeof cb);
        human_bytes((double)sm.peak_memory, pk, sizeof pk);
        wf__str_appendf(&b, "  %s: %d nodes, busy %.3f ms (%.1f%% of wall); %d copies to it, %s in %.3f ms",
                        sm.device, sm.n_nodes, (double)sm.busy_ns / 1e6, sm.utilisation * 100, sm.n_copies, cb,
                        (double)sm.copy_ns / 1e6);
        if (ctx) wf__str_appendf(&b, "; peak memory %s", pk);
        wf__str_appendf(&b, "\n");
    }
    if (b.failed || !b.p) {
        wf__str_free(&b);
        return wf__oom("the trace summary", 256);
    }
    *text = b.p;
    return NULL;
}

/* ---- Chrome trace ------------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* The events on stream `stream` of device d (the device whose stream it is), sorted by start. */
static span *spans_of_stream(const wf_trace *t, int d, int stream, int *n_out)
{
    int n = wf_trace_num_events(t), k = 0;
    span *v = wf__malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) return NULL;
    for (int i = 0; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (e.stream_device != d || (e.stream == WF_STREAM_COPY) != (stream == WF_STREAM_COPY)) continue;
        v[k++] = (span){e.start_ns, e.end_ns < e.start_ns ? e.start_ns : e.end_ns, i};
    }
    qsort(v, (size_t)k, sizeof *v, cmp_span);
    *n_out = k;
    return v;
}

/* One track per (device, stream): pid = the device, tid 1 its compute stream and 1001 its copy
 * stream, named "OPENCL:0 compute" and "OPENCL:0 copy". Complete events on one track must nest, so
 * where events of one stream overlap (CPU nodes run at once on several executor threads) the stream
 * gets extra lanes, tids 2.. and 1002.., named "CPU:0 compute #2". */
#define COPY_TID0 1001

/* Gives each event of one (device, kind) its lane; returns the number of lanes, -1 out of memory. */
static int assign_lanes(const span *v, int n, int *lane_of)
{
    int64_t *lane_end = wf__malloc(sizeof *lane_end * (size_t)(n ? n : 1));
    if (!lane_end) return -1;
    int lanes = 0;
    for (int i = 0; i < n; i++) {
        int l = 0;
        while (l < lanes && lane_end[l] > v[i].a) l++;
        if (l == lanes) lanes++;
        lane_end[l] = v[i].b;
        lane_of[v[i].ev] = l;
    }
    wf__free(lane_end);
    return lanes;
}

static void write_summary_object(FILE *f, const wf_trace_device_summary *sm)
{
    fprintf(f, "{\"device\":");
    json_str(f, sm->device);
    fprintf(f,
            ",\"device_index\":%d,\"nodes\":%d,\"copies\":%d,\"busy_us\":%.3f,\"utilisation\":%.6f,"
            "\"copy_bytes\":%lld,\"copy_us\":%.3f,\"peak_memory_bytes\":%llu}",
            sm->device_index, sm->n_nodes, sm->n_copies, (double)sm->busy_ns / 1e3, sm->utilisation,
            (long long)sm->copy_bytes, (double)sm->copy_ns / 1e3, (unsigned long long)sm->peak_memory);
}

wf_status *wf_trace_write_chrome(const wf_trace *t, const wf_context *ctx, const char *path)
{
    if (!t || !path) return wf__status(WF_INVALID_ARGUMENT, "wf_trace_write_chrome: NULL trace or path");
    int n = wf_trace_num_events(t), md = max_device(t);
    int *lane_of = wf__calloc((size_t)(n ? n : 1), sizeof *lane_of);
    int *lanes = wf__calloc((size_t)(md + 1) * 2 + 1, sizeof *lanes); /* [d*2 + copies] */
    wf_trace_device_summary *sums = wf__calloc((size_t)(md + 1) + 1, sizeof *sums);
    bool oom = !lane_of || !lanes || !sums;
    for (int d = 0; d <= md && !oom; d++)
        for (int c = 0; c < 2 && !oom; c++) {
            int k;
            span *v = spans_of_stream(t, d, c, &k);
            int l = v ? assign_lanes(v, k, lane_of) : -1;
            wf__free(v);
            if (l < 0) oom = true;
            else lanes[d * 2 + c] = l;
        }
    int n_sums = oom ? 0 : wf_trace_summary(t, ctx, sums, md + 1);
    FILE *f = oom ? NULL : fopen(path, "w");
    if (!f) {
        wf__free(lane_of);
        wf__free(lanes);
        wf__free(sums);
        if (oom) return wf__oom("the Chrome trace", sizeof(span) * (size_t)n);
        return wf__status(WF_IO_ERROR, "%s: cannot write the Chrome trace: %s", path, strerror(errno));
    }
    int64_t wall = wf_trace_wall_ns(t);
#define TID_OF(e, i) (((e).stream == WF_STREAM_COPY ? COPY_TID0 : 1) + lane_of[(i)])
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    bool first = true;
#define SEP() (fputs(first ? "" : ",\n", f), first = false)
    /* the tracks: a process per device, a track per stream (and its extra lanes) */
    for (int d = 0; d <= md; d++) {
        const char *dev = NULL;
        for (int i = 0; i < n && !dev; i++) {
            wf_trace_event e = wf_trace_event_at(t, i);
            if (e.device_index == d) dev = e.device_short;
        }
        if (!dev && !lanes[d * 2] && !lanes[d * 2 + 1]) continue;
        SEP();
        fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", d);
        json_str(f, dev);
        fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}", d, d);
        for (int c = 0; c < 2; c++)
            for (int l = 0; l < (lanes[d * 2 + c] ? lanes[d * 2 + c] : 1); l++) {
                int tid = (c ? COPY_TID0 : 1) + l;
                char name[160];
                snprintf(name, sizeof name, "%s %s", dev ? dev : "?", c ? "copy" : "compute");
                if (l) snprintf(name + strlen(name), sizeof name - strlen(name), " #%d", l + 1);
                fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", d, tid);
                json_str(f, name);
                fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                           "\"args\":{\"sort_index\":%d}}", d, tid, tid);
            }
    }
    /* one complete event per node and per copy */
    for (int i = 0; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        int64_t end = e.end_ns < e.start_ns ? e.start_ns : e.end_ns;
        SEP();
        fprintf(f, "{\"ph\":\"X\",\"name\":");
        json_str(f, e.node);
        fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":",
                e.is_copy ? "copy" : "op", e.stream_device, TID_OF(e, i),
                (double)e.start_ns / 1e3, (double)(end - e.start_ns) / 1e3);
        json_str(f, e.op);
        fprintf(f, ",\"shapes\":");
        json_str(f, e.shapes);
        fprintf(f, ",\"bytes\":%lld,\"device\":", (long long)e.bytes);
        json_str(f, e.device);
        fprintf(f, ",\"reason\":");
        json_str(f, e.reason);
        fprintf(f, ",\"thread\":%d", e.thread);
        if (e.enqueue_only) fprintf(f, ",\"timing\":\"enqueue\"");
        fprintf(f, ",\"event\":%d,\"deps\":[", i);
        for (int k = 0; k < e.n_deps; k++) fprintf(f, "%s%d", k ? "," : "", e.deps[k]);
        fprintf(f, "]}}");
    }
    /* a flow arrow per dependency: from inside the producer's slice to the consumer's start */
    for (int i = 0, id = 1; i < n; i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        for (int k = 0; k < e.n_deps; k++, id++) {
            wf_trace_event p = wf_trace_event_at(t, e.deps[k]);
            int64_t p_end = p.end_ns < p.start_ns ? p.start_ns : p.end_ns;
            SEP();
            fprintf(f, "{\"ph\":\"s\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%d,\"pid\":%d,\"tid\":%d,"
                       "\"ts\":%.3f},\n", id, p.stream_device, TID_OF(p, e.deps[k]),
                    (double)(p.start_ns + (p_end - p.start_ns) / 2) / 1e3);
            fprintf(f, "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%d,\"pid\":%d,"
                       "\"tid\":%d,\"ts\":%.3f}", id, e.stream_device, TID_OF(e, i), (double)e.start_ns / 1e3);
        }
    }
    /* the summary at the end of each device's compute track */
    for (int k = 0; k < n_sums; k++) {
        SEP();
        fprintf(f, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"summary\",\"cat\":\"summary\",\"pid\":%d,\"tid\":1,"
                   "\"ts\":%.3f,\"args\":", sums[k].device_index, (double)wall / 1e3);
        write_summary_object(f, &sums[k]);
        fprintf(f, "}");
    }
#undef SEP
#undef TID_OF
    fprintf(f, "\n],\n\"otherData\":{\"producer\":\"weft %s\",\"wall_us\":%.3f,\"devices\":[", wf_version(),
            (double)wall / 1e3);
    for (int k = 0; k < n_sums; k++) {
        fputs(k ? ",\n" : "\n", f);
        write_summary_object(f, &sums[k]);
    }
    fprintf(f, "]}}\n");
    wf__free(lane_of);
    wf__free(lanes);
    wf__free(sums);
    bool werr = ferror(f) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !werr) {
        werr = true;
        saved = errno;
    }
    if (werr) return wf__status(WF_IO_ERROR, "%s: writing the Chrome trace failed: %s", path, strerror(saved));
    return NULL;
}
