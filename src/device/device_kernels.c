/*
 * Kernels the core provides on every device: Copy between host and device memory (or between two
 * devices through the host), and Const uploaded to a device once per plan. Also the device half of
 * output allocation: tensors in a backend's memory, carved from its chunks by the BFC allocator.
 */
#include <stdio.h>

#include "device/device.h"
#include "device/arena.h"

static _Thread_local wf__defer *tl_defer;

void wf__defer_begin(wf__defer *df, const struct wf__device *dev)
{
    df->dev = dev;
    tl_defer = df;
}

void wf__defer_end(void) { tl_defer = NULL; }

void wf__defer_release(wf__defer *df)
{
    for (int i = 0; i < df->n; i++) wf__bfc_release(df->dev->bfc, &df->v[i]);
    wf__free(df->v);
    df->v = NULL;
    df->n = df->cap = 0;
}

static void device_release(wf_tensor *t)
{
    wf__bfc_block b = {t->dev_chunk, t->dev_offset, 0, t->dev_priv};
    wf__defer *df = tl_defer;
    if (df && df->dev == t->device) {
        if (df->n == df->cap) {
            int cap = df->cap ? df->cap * 2 : 8;
            wf__bfc_block *v = wf__realloc(df->v, sizeof *v * (size_t)df->cap, sizeof *v * (size_t)cap);
            if (v) {
                df->v = v;
                df->cap = cap;
            }
        }
        if (df->n < df->cap) {
            df->v[df->n++] = b;
            return;
        }
        /* nowhere to hold it: wait until the device has done what is queued, then it is free */
        df->lost = true;
        wf_status_free(t->device->vt->synchronize ? t->device->vt->synchronize(t->device->dev) : NULL);
    }
    wf__bfc_release(t->device->bfc, &b);
}

wf_status *wf__device_tensor_alloc(const struct wf__device *d, wf_dtype dtype, int rank, const int64_t *dims,
                                   wf_tensor **out)
{
    wf_tensor *t;
    WF__TRY(wf__tensor_alloc_header(dtype, rank, dims, &t));
    wf__bfc_block b;
    wf_status *s = wf__bfc_alloc(d->bfc, t->bytes, &b);
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    t->dev_chunk = b.chunk;
    t->dev_offset = b.offset;
    t->dev_priv = b.priv;
    t->device = d;
    t->dev_release = device_release;
    *out = t;
    return NULL;
}

static wf_status *to_host(const wf_tensor *src, void *dst)
{
    const struct wf__device *d = src->device;
    return d->vt->copy_to_host(d->dev, dst, src->dev_chunk, src->dev_offset, src->bytes);
}

/* Copies src's bytes into dst (same dtype and shape), wherever each lives: host, a device, or two
 * devices (through a host buffer unless it is one device with an on-device copy). */
static wf_status *copy_data(wf_tensor *dst, const wf_tensor *src)
{
    if (!src->bytes) return NULL;
    if (!src->device && !dst->device) {
        memcpy(dst->data, src->data, src->bytes);
        return NULL;
    }
    if (!src->device)
        return dst->device->vt->copy_to_device(dst->device->dev, dst->dev_chunk, dst->dev_offset, src->data,
                                               src->bytes);
    if (!dst->device) return to_host(src, dst->data);
    if (src->device == dst->device && src->device->vt->copy_on_device)
        return src->device->vt->copy_on_device(src->device->dev, dst->dev_chunk, dst->dev_offset, src->dev_chunk,
                                               src->dev_offset, src->bytes);
    void *tmp = wf__aligned_alloc(src->bytes, WF__ALIGN);
    if (!tmp) return wf__oom("staging a copy between devices on the host", src->bytes);
    wf_status *s = to_host(src, tmp);
    if (!s) s = dst->device->vt->copy_to_device(dst->device->dev, dst->dev_chunk, dst->dev_offset, tmp, src->bytes);
    wf__aligned_free(tmp);
    return s;
}

wf_status *wf__tensor_copy_into(wf_tensor *dst, const wf_tensor *src) { return copy_data(dst, src); }

wf_status *wf__tensor_move(const struct wf__device *dst, const wf_tensor *src, wf_tensor **out)
{
    if (src->device == dst) {
        *out = wf_tensor_ref((wf_tensor *)src);
        return NULL;
    }
    wf_tensor *t;
    if (dst) WF__TRY(wf__device_tensor_alloc(dst, src->dtype, src->rank, src->dims, &t));
    else WF__TRY(wf__tensor_alloc(src->dtype, src->rank, src->dims, "a copy to host memory", &t));
    wf_status *s = copy_data(t, src);
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    *out = t;
    return NULL;
}

static wf_status *k_copy(wf__kctx *k)
{
    const wf_tensor *src = k->in[0];
    wf_tensor *dst;
    WF__TRY(wf__kctx_output(k, 0, src->dtype, src->rank, src->dims, &dst));
    wf_status *s = copy_data(dst, src);
    return s ? wf__status_wrap(s, "node '%s' (Copy)", k->node) : NULL;
}

const wf__kernel_def wf__copy_kernel = {"Copy", "*", WF__DT_ALL, 0, k_copy};

/* The constant's device copy lives in the plan node's state: uploaded by the first run. */
static wf_status *k_const_device(wf__kctx *k)
{
    wf__kctx_lock_state(k);
    wf_tensor *t = *k->state;
    wf_status *s = NULL;
    if (!t && k->weights) {
        /* the session's one copy on this device, shared by all of its plans */
        const wf__attr *v = wf__attr_get(k->op, k->attrs, "value");
        if (!(s = wf__weights_get(k->weights, k->device, v->t, &t))) *k->state = t;
    } else if (!t) {
        const wf__attr *v = wf__attr_get(k->op, k->attrs, "value");
        s = wf__device_tensor_alloc(k->device, v->t->dtype, v->t->rank, v->t->dims, &t);
        if (!s && v->t->bytes)
            s = k->device->vt->copy_to_device(k->device->dev, t->dev_chunk, t->dev_offset, v->t->data, v->t->bytes);
        if (s) {
            wf_tensor_free(t);
            t = NULL;
        } else {
            *k->state = t;
        }
    }
    wf__kctx_unlock_state(k);
    if (s) return wf__status_wrap(s, "node '%s' (Const)", k->node);
    wf_tensor_free(k->out[0]);
    k->out[0] = wf_tensor_ref(t);
    return NULL;
}

static void free_tensor_state(void *state) { wf_tensor_free(state); }

const wf__kernel_def wf__device_const_kernel = {"Const", "*", WF__DT_ALL, -1, k_const_device, free_tensor_state};
