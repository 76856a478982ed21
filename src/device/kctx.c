/* What a kernel may ask of the executor: outputs (fresh, reused in place, or views), errors that
 * name the node, and serialised lazy state. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#include "device/device.h"
#include "device/arena.h"

wf_status *wf__kctx_fail(const wf__kctx *k, wf_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wf__status(code, "node '%s' (%s): %s", k->node, k->op->name, msg);
}

static wf_status *set_output(wf__kctx *k, int idx, wf_tensor *t)
{
    if (idx < 0 || idx >= k->n_out) {
        wf_tensor_free(t);
        return wf__kctx_fail(k, WF_INTERNAL, "kernel wrote output %d of %d", idx, k->n_out);
    }
    wf_tensor_free(k->out[idx]);
    k->out[idx] = t;
    return NULL;
}

/* A counted host output going back: its bytes leave the CPU device's accounting. */
static void host_release(wf_tensor *t) { wf__memacct_release(t->dev_priv, t->bytes); }

/* The caller's tensor output idx is to be written in, when it has one of that dtype and shape (and the
 * kernel does not hold it already: a second request is scratch, as in wf__kctx_output). */
static wf_tensor *output_into(const wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims)
{
    wf_tensor *t = k->out_into && !k->device && idx >= 0 && idx < k->n_out ? k->out_into[idx] : NULL;
    if (!t || k->out[idx] == t || t->dtype != dtype || t->rank != rank ||
        (rank && memcmp(t->dims, dims, sizeof(int64_t) * (size_t)rank)))
        return NULL;
    return t;
}

wf_status *wf__kctx_output(wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims,
                           wf_tensor **out)
{
    wf_tensor *t = output_into(k, idx, dtype, rank, dims);
    if (t) {
        t->version = 0; /* about to be written */
        WF__TRY(set_output(k, idx, wf_tensor_ref(t)));
        if (out) *out = t;
        return NULL;
    }
    if (k->mem && idx >= 0 && idx < k->n_out) {
        /* the plan's slot in the run's arena, when the output fits there */
        const wf__kmem *m = k->mem;
        int sl = m->out_slot[idx];
        int64_t e = -1;
        /* a second request for the same output while the kernel still holds the first (used as scratch,
         * as low-precision MatMul does) must not get the same bytes: it goes to the allocator */
        bool again = k->out[idx] && wf__tensor_in_arena(k->out[idx]);
        if (!again && m->slot_off[sl] >= 0 && wf__shape_bytes_checked(rank, dims, wf_dtype_size(dtype), NULL, &e) && e >= 0 &&
            (size_t)e <= m->slot_cap[sl]) {
            wf_status *s = wf__arena_tensor(k->device, m->arena, m->slot_off[sl], dtype, rank, dims, &t);
            if (s) return wf__status_wrap(s, "node '%s' (%s): output %d", k->node, k->op->name, idx);
            WF__TRY(set_output(k, idx, t));
            if (out) *out = t;
            return NULL;
        }
        if (m->slot_off[sl] != WF__SLOT_OWN) atomic_fetch_add_explicit(m->fallbacks, 1, memory_order_relaxed);
    }
    if (k->device) {
        wf_status *s = wf__device_tensor_alloc(k->device, dtype, rank, dims, &t);
        if (s) return wf__status_wrap(s, "node '%s' (%s): output %d", k->node, k->op->name, idx);
        WF__TRY(set_output(k, idx, t));
        if (out) *out = t;
        return NULL;
    }
    /* the limit is checked before allocating: a size from data (a decoded image's header) may be
     * hostile, and must fail without ever being requested from the system */
    wf__memacct *a = k->host_acct;
    bool dims_ok = rank >= 0 && rank <= WF_MAX_RANK;
    for (int d = 0; dims_ok && d < rank; d++) dims_ok = dims[d] >= 0;
    int64_t want = 0;
    bool reserved = false;
    if (a && dims_ok && wf__shape_bytes_checked(rank, dims, wf_dtype_size(dtype), NULL, &want)) {
        if (!wf__memacct_reserve(a, (uint64_t)want)) {
            char sh[160];
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY,
                                 "out of memory allocating output %d (%s%s, %lld bytes) on CPU:0: %llu bytes in "
                                 "use of its %llu-byte limit",
                                 idx, wf_dtype_name(dtype), wf__shape_str(rank, dims, sh), (long long)want,
                                 (unsigned long long)atomic_load(&a->in_use), (unsigned long long)atomic_load(&a->limit));
        }
        reserved = true;
    }
    wf_status *s = wf__tensor_alloc(dtype, rank, dims, "a kernel output", &t);
    if (reserved && (s || t->bytes != (uint64_t)want)) {
        wf__memacct_release(a, (uint64_t)want);
        reserved = false;
    }
    if (!s && a && !reserved && !wf__memacct_reserve(a, t->bytes)) {
        wf_tensor_free(t);
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating output %d on CPU:0", idx);
    }
    if (!s && a) {
        t->dev_priv = a;
        t->dev_release = host_release;
    }
    if (s) {
        if (wf_status_code(s) == WF_OUT_OF_MEMORY) {
            char sh[160];
            int64_t bytes = 0;
            wf_status_free(s);
            wf__shape_bytes_checked(rank, dims, wf_dtype_size(dtype), NULL, &bytes);
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY,
                                 "out of memory allocating output %d (%s%s, %" PRId64 " bytes) on CPU:0", idx,
                                 wf_dtype_name(dtype), wf__shape_str(rank, dims, sh), bytes);
        }
        return wf__status_wrap(s, "node '%s' (%s): output %d", k->node, k->op->name, idx);
    }
    WF__TRY(set_output(k, idx, t));
    if (out) *out = t;
    return NULL;
}

wf_status *wf__kctx_output_strings(wf__kctx *k, int idx, int rank, const int64_t *dims, size_t payload,
                                   wf_tensor **out)
{
    wf_tensor *t;
    wf_status *s = wf__tensor_alloc_strings(rank, dims, payload, "a string output", &t);
    if (s) return wf__status_wrap(s, "node '%s' (%s): output %d", k->node, k->op->name, idx);
    if (k->host_acct) {
        if (!wf__memacct_reserve(k->host_acct, t->bytes)) {
            size_t bytes = t->bytes;
            wf_tensor_free(t);
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating string output %d (%zu bytes) on CPU:0: "
                                 "%llu bytes in use of its %llu-byte limit", idx, bytes,
                                 (unsigned long long)atomic_load(&k->host_acct->in_use),
                                 (unsigned long long)atomic_load(&k->host_acct->limit));
        }
        t->dev_priv = k->host_acct;
        t->dev_release = host_release;
    }
    WF__TRY(set_output(k, idx, t));
    if (out) *out = t;
    return NULL;
}

wf_status *wf__kctx_output_reuse(wf__kctx *k, int idx, int in_idx, wf_dtype dtype, int rank,
                                 const int64_t *dims, wf_tensor **out, bool *reused)
{
    wf_tensor *in = in_idx >= 0 && in_idx < k->n_in ? k->in[in_idx] : NULL;
    /* Only when this node holds the last use of the slot and nobody else (a feed, a Const attribute,
     * a view) shares the tensor: then writing into it is invisible to everyone else. */
    /* A tensor that is also another input of this node is read after the output is written. */
    bool twice = false;
    for (int i = 0; in && i < k->n_in && !twice; i++) twice = i != in_idx && k->in[i] == in;
    /* In a run with arenas the plan decides where outputs go: an input's arena bytes are the plan's
     * to reuse, and an output with a slot of its own is written there. */
    bool planned = k->mem && idx >= 0 && idx < k->n_out && k->mem->slot_off[k->mem->out_slot[idx]] >= 0;
    /* and never when the output goes to the caller's tensor (wf_run_options.into) */
    if (in && !twice && !planned && !output_into(k, idx, dtype, rank, dims) && !wf__tensor_in_arena(in) &&
        (k->in_owned & (1u << in_idx)) && !in->base && wf__tensor_refs(in) == 1 && in->dtype == dtype &&
        in->rank == rank &&
        (rank == 0 || !memcmp(in->dims, dims, sizeof(int64_t) * (size_t)rank))) {
        WF__TRY(set_output(k, idx, wf_tensor_ref(in)));
        in->version = 0; /* about to be written: no longer the content any stamp named */
        if (out) *out = in;
        if (reused) *reused = true;
        return NULL;
    }
    if (reused) *reused = false;
    wf_tensor *t;
    WF__TRY(wf__kctx_output(k, idx, dtype, rank, dims, &t));
    /* the memory plan put the output in the input's bytes (WF__K_INPLACE): the kernel works in place, as
     * when it reuses the input itself (and must not copy the input over itself first) */
    if (reused && in && planned && in->bytes == t->bytes &&
        (t->device ? in->device == t->device && in->dev_chunk == t->dev_chunk && in->dev_offset == t->dev_offset
                   : !in->device && in->data == t->data))
        *reused = true;
    if (out) *out = t;
    return NULL;
}

wf_status *wf__kctx_output_view(wf__kctx *k, int idx, int in_idx, int rank, const int64_t *dims)
{
    wf_tensor *t;
    wf_status *s = wf__tensor_view(k->in[in_idx], rank, dims, &t);
    if (s) return wf__status_wrap(s, "node '%s' (%s)", k->node, k->op->name);
    return set_output(k, idx, t);
}

void wf__kctx_lock_state(wf__kctx *k) { pthread_mutex_lock((pthread_mutex_t *)k->state_lock); }
void wf__kctx_unlock_state(wf__kctx *k) { pthread_mutex_unlock((pthread_mutex_t *)k->state_lock); }
