/* The context: its devices (the built-in CPU backend's, then the plugins') and thread pools. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

#include "device/device.h"

void wf_context_options_init(wf_context_options *o)
{
    memset(o, 0, sizeof *o);
}

wf_status *wf_context_new(const wf_context_options *opts, wf_context **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_context_new: out is NULL");
    wf_context_options o;
    wf_context_options_init(&o);
    if (opts) o = *opts;
    if (o.inter_op_threads < 0 || o.intra_op_threads < 0)
        return wf__status(WF_INVALID_ARGUMENT, "thread counts must be >= 0 (inter %d, intra %d)",
                          o.inter_op_threads, o.intra_op_threads);
    int cores = wf__num_cores();
    wf_context *c = wf__calloc(1, sizeof *c);
    if (!c) return wf__oom("a context", sizeof *c);
    wf_status *s = NULL;
    c->inter_op_threads = o.inter_op_threads ? o.inter_op_threads : cores;
    c->intra.threads = o.intra_op_threads ? o.intra_op_threads : cores;
    atomic_flag_clear(&c->intra.busy);
    /* the CPU first, through the same table as every backend */
    if ((s = wf__plugins_add_builtin(c))) goto fail;
    if ((s = wf__pool_new(c->inter_op_threads, &c->pool))) goto fail;
    if ((s = wf__plugins_load(c))) goto fail;
    /* measured figures from an earlier calibration; an unreadable cache leaves the defaults */
    wf_status_free(wf_context_load_calibration(c, NULL));
    *out = c;
    return NULL;
fail:
    wf_context_free(c);
    return s;
}

int wf__host_device(const wf_context *c)
{
    for (int i = 0; i < c->n_devices; i++)
        if (c->devices[i].info.host_memory) return i;
    return 0;
}

void wf_context_free(wf_context *c)
{
    if (!c) return;
    wf__pool_free(c->pool);
    for (int i = 0; c->devices && i < c->n_devices; i++) {
        struct wf__device *d = &c->devices[i];
        wf__bfc_free(d->bfc);
        if (d->dev) d->vt->device_close(d->dev);
        if (d->enqueue_mu) {
            pthread_mutex_destroy(d->enqueue_mu);
            wf__free(d->enqueue_mu);
        }
        wf__free(c->devices[i].name);
        wf__free(c->devices[i].short_name);
        wf__free(c->devices[i].description);
        if (d->host_acct) wf__memacct_unref(d->host_acct);
    }
    wf__free(c->devices);
    wf__plugins_unload(c);
    wf__free(c);
    /* Tensors that outlive the context keep their blocks; the cached free ones go back now. */
    wf__tensor_large_cache_flush();
}

int wf_context_num_devices(const wf_context *c) { return c ? c->n_devices : 0; }

wf_status *wf_context_device(const wf_context *c, int i, wf_device_info *out)
{
    if (!c || i < 0 || i >= c->n_devices)
        return wf__status(WF_NOT_FOUND, "device index %d is out of range (the context has %d devices)", i,
                          c ? c->n_devices : 0);
    const struct wf__device *d = &c->devices[i];
    out->name = d->name;
    out->type = d->type;
    out->description = d->description;
    out->compute_units = d->compute_units;
    out->threads = d->threads;
    out->memory_bytes = d->memory_bytes;
    out->backend = d->backend;
    out->fast_dtypes = d->info.fast_dtypes;
    out->precision = d->info.precision_note;
    return NULL;
}

int wf_context_num_plugins(const wf_context *c) { return c ? c->n_plugins : 0; }

wf_status *wf_context_plugin(const wf_context *c, int i, wf_plugin_info *out)
{
    if (!c || i < 0 || i >= c->n_plugins)
        return wf__status(WF_NOT_FOUND, "plugin index %d is out of range (the context has %d)", i, c ? c->n_plugins : 0);
    const wf__plugin *p = &c->plugins[i];
    out->name = p->name;
    out->path = p->path;
    out->status = p->status;
    out->reason = p->reason;
    out->n_devices = p->n_devices;
    return NULL;
}

wf_status *wf__context_match(const wf_context *c, const char *text, uint64_t *mask)
{
    wf_device_spec spec;
    WF__TRY(wf_device_spec_parse(text, &spec));
    uint64_t m = 0;
    for (int d = 0; d < c->n_devices && d < 64; d++) {
        wf_device_spec ds;
        wf_status *e = wf_device_spec_parse(c->devices[d].name, &ds); /* weft made the name: it parses */
        if (e) {
            wf_status_free(e);
            continue;
        }
        if (wf_device_spec_matches(&spec, &ds)) m |= (uint64_t)1 << d;
    }
    *mask = m;
    return NULL;
}

wf_status *wf_context_set_memory_limit(wf_context *c, const char *device_spec, uint64_t bytes)
{
    if (!c) return wf__status(WF_INVALID_ARGUMENT, "wf_context_set_memory_limit: context is NULL");
    uint64_t mask;
    WF__TRY(wf__context_match(c, device_spec, &mask));
    int matched = 0;
    for (int i = 0; i < c->n_devices; i++) {
        if (!(mask >> i & 1)) continue;
        matched++;
        c->devices[i].limit = bytes;
        if (c->devices[i].bfc) wf__bfc_set_limit(c->devices[i].bfc, (size_t)bytes);
        if (c->devices[i].host_acct) atomic_store(&c->devices[i].host_acct->limit, bytes);
    }
    if (!matched) return wf__status(WF_NOT_FOUND, "memory limit: device spec '%s' matches no device", device_spec);
    return NULL;
}

wf_status *wf_context_memory_stats(const wf_context *c, int i, wf_memory_stats *out)
{
    if (!c || i < 0 || i >= c->n_devices)
        return wf__status(WF_NOT_FOUND, "device index %d is out of range (the context has %d devices)", i,
                          c ? c->n_devices : 0);
    memset(out, 0, sizeof *out);
    const wf__memacct *a = c->devices[i].host_acct;
    if (a) {
        /* host memory goes back to the allocator at once, so what is reserved is what is in use */
        out->in_use = out->reserved = atomic_load(&a->in_use);
        out->peak = atomic_load(&a->peak);
        out->limit = atomic_load(&a->limit);
        out->n_allocs = atomic_load(&a->n_allocs);
        out->total_allocs = out->chunk_allocs = atomic_load(&a->total);
        out->arena_bytes = atomic_load(&c->devices[i].arena_bytes);
        out->fallback_allocs = atomic_load(&c->devices[i].fallback_allocs);
        return NULL;
    }
    if (!c->devices[i].bfc)
        return wf__status(WF_UNIMPLEMENTED, "%s has no memory statistics", c->devices[i].short_name);
    wf__bfc_stats st = wf__bfc_get_stats(c->devices[i].bfc);
    out->in_use = st.in_use;
    out->peak = st.peak_in_use;
    out->reserved = st.reserved;
    out->limit = st.limit;
    out->n_allocs = st.n_allocs;
    out->total_allocs = st.total_allocs;
    out->chunk_allocs = st.chunk_allocs;
    out->arena_bytes = atomic_load(&c->devices[i].arena_bytes);
    out->fallback_allocs = atomic_load(&c->devices[i].fallback_allocs);
    return NULL;
}

wf__memacct *wf__memacct_new(void)
{
    wf__memacct *a = wf__calloc(1, sizeof *a);
    if (a) atomic_init(&a->refs, 1);
    return a;
}

void wf__memacct_unref(wf__memacct *a)
{
    if (atomic_fetch_sub(&a->refs, 1) == 1) wf__free(a);
}

bool wf__memacct_reserve(wf__memacct *a, uint64_t bytes)
{
    uint64_t limit = atomic_load_explicit(&a->limit, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&a->in_use, memory_order_relaxed), next;
    do {
        next = cur + bytes;
        if (limit && next > limit) return false;
    } while (!atomic_compare_exchange_weak_explicit(&a->in_use, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    uint64_t pk = atomic_load_explicit(&a->peak, memory_order_relaxed);
    while (pk < next &&
           !atomic_compare_exchange_weak_explicit(&a->peak, &pk, next, memory_order_relaxed, memory_order_relaxed))
        ;
    atomic_fetch_add_explicit(&a->n_allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return true;
}

void wf__memacct_release(wf__memacct *a, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&a->in_use, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&a->n_allocs, 1, memory_order_relaxed);
    wf__memacct_unref(a);
}

/* fp32 peak of the cores from /proc/cpuinfo: two FMA pipes, 16 lanes with AVX-512, 8 with AVX2, 4
 * without, at the clock the kernel reports. Dense ops reach most of it through oneDNN; other ops are
 * memory or latency bound and reach about a tenth. */
void wf__perf_default_cpu(struct wf__device *d)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    double mhz = 0;
    int lanes = 4;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu MHz", 7) && mhz == 0) {
            const char *c = strchr(line, ':');
            if (c) mhz = atof(c + 1);
        } else if (!strncmp(line, "flags", 5)) {
            if (strstr(line, " avx512f")) lanes = 16;
            else if (strstr(line, " avx2") && lanes < 8) lanes = 8;
        }
    }
    if (f) fclose(f);
    if (mhz <= 0) mhz = 2000;
    double peak = d->compute_units * mhz / 1e3 * 2 * 2 * lanes;
    d->perf = (wf_device_perf){.dense_gflops = peak * 0.8, .vector_gflops = peak * 0.1, .mem_gbps = 20,
                               .launch_us = 2, .link_gbps = 0, .link_latency_us = 0, .measured = 0};
}

void wf__perf_default_backend(struct wf__device *d)
{
    const wf_backend_device_info *i = &d->info;
    double peak = i->peak_gflops > 0 ? i->peak_gflops : 10;
    d->perf = (wf_device_perf){.dense_gflops = peak * 0.5, .vector_gflops = peak * 0.1,
                               .mem_gbps = i->mem_gbps > 0 ? i->mem_gbps : 10, .launch_us = 10,
                               .link_gbps = i->link_gbps > 0 ? i->link_gbps : 5,
                               .link_latency_us = i->link_latency_us > 0 ? i->link_latency_us : 20, .measured = 0};
}

wf_status *wf_context_device_perf(const wf_context *c, int i, wf_device_perf *out)
{
    if (!c || !out || i < 0 || i >= c->n_devices)
        return wf__status(WF_NOT_FOUND, "device index %d is out of range (the context has %d devices)", i,
                          c ? c->n_devices : 0);
    *out = c->devices[i].perf;
    return NULL;
}

wf_status *wf_context_set_device_perf(wf_context *c, const char *device_spec, const wf_device_perf *perf)
{
    if (!c || !perf) return wf__status(WF_INVALID_ARGUMENT, "wf_context_set_device_perf: NULL argument");
    if (!(perf->dense_gflops > 0) || !(perf->vector_gflops > 0) || !(perf->mem_gbps > 0) || !(perf->launch_us >= 0) ||
        !(perf->link_gbps >= 0) || !(perf->link_latency_us >= 0))
        return wf__status(WF_INVALID_ARGUMENT,
                          "device performance for '%s': rates must be > 0 and times >= 0 (dense %g, vector %g, "
                          "memory %g GB/s, launch %g us, link %g GB/s, latency %g us)",
                          device_spec ? device_spec : "", perf->dense_gflops, perf->vector_gflops, perf->mem_gbps,
                          perf->launch_us, perf->link_gbps, perf->link_latency_us);
    uint64_t mask;
    WF__TRY(wf__context_match(c, device_spec, &mask));
    int matched = 0;
    for (int i = 0; i < c->n_devices; i++) {
        if (!(mask >> i & 1)) continue;
        matched++;
        c->devices[i].perf = *perf;
        if (!c->devices[i].info.host_memory && !(perf->link_gbps > 0)) c->devices[i].perf.link_gbps = 5;
    }
    if (!matched) return wf__status(WF_NOT_FOUND, "device performance: spec '%s' matches no device", device_spec);
    return NULL;
}
