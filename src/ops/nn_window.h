/*
 * Window geometry of Conv2D, ConvTranspose2D and the 2-D pools: kernel, strides, dilations, pads
 * (auto_pad included) and output size, from the op's attributes. Header-only because shape
 * inference, the CPU kernels and the device plugins (which cannot link libweft) must all resolve it by
 * the same rules; `get` is wf__attr_get in the core and the host table's attr_get in a plugin.
 */
#ifndef WF_OPS_NN_WINDOW_H
#define WF_OPS_NN_WINDOW_H

#include <stdio.h>
#include <string.h>

#include "ops/op.h"

typedef const wf__attr *(*wf__nn_attr_get_fn)(const wf__op_def *op, const wf__attr *attrs, const char *name);


typedef struct wf__nn_window {
    int64_t k[2], s[2], d[2];
    int64_t pb[2], pe[2];  /* padding at the begin and end of H and W (may be negative for ConvTranspose) */
    int64_t opad[2];       /* ConvTranspose output_padding */
    int64_t out[2];        /* output H and W; -1 when the input's are unknown */
} wf__nn_window;

enum { WF__WIN_CONV = 0, WF__WIN_POOL = 1, WF__WIN_CONVT = 2 };

static inline int wf__nn_get_pair(const wf__attr *a, const char *name, int64_t def, int64_t lo, int64_t *v, char *err,
                    size_t en)
{
    if (!a->n) {
        v[0] = v[1] = def;
        return 0;
    }
    if (a->n != 2) {
        snprintf(err, en, "%s has %d values; expected 2", name, a->n);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (a->ints[i] < lo) {
            snprintf(err, en, "%s[%d] is %lld; must be >= %lld", name, i, (long long)a->ints[i], (long long)lo);
            return -1;
        }
        v[i] = a->ints[i];
    }
    return 0;
}

/* Resolves kernel, strides, dilations, pads (auto_pad included) and the output size for the spatial
 * dims in_hw. wk: the kernel size from the weights (-1 when unknown or a pool). Returns 0, or -1
 * with a message in err. */
static inline int wf__nn_window_resolve_with(wf__nn_attr_get_fn get, const wf__op_def *op, const wf__attr *attrs,
                                             int kind, const int64_t *in_hw, const int64_t *wk, wf__nn_window *w,
                                             char *err, size_t en)
{
    memset(w, 0, sizeof *w);
    const wf__attr *ks = get(op, attrs, "kernel_shape");
    if (kind == WF__WIN_POOL && ks->n == 0) {
        snprintf(err, en, "kernel_shape is required");
        return -1;
    }
    if (wf__nn_get_pair(ks, "kernel_shape", -1, 1, w->k, err, en)) return -1;
    for (int i = 0; i < 2 && wk; i++) {
        if (w->k[i] < 0) w->k[i] = wk[i];
        else if (wk[i] >= 0 && wk[i] != w->k[i]) {
            snprintf(err, en, "kernel_shape [%lld,%lld] does not match the weights' spatial dims [%lld,%lld]",
                     (long long)w->k[0], (long long)w->k[1], (long long)wk[0], (long long)wk[1]);
            return -1;
        }
    }
    if (wf__nn_get_pair(get(op, attrs, "strides"), "strides", 1, 1, w->s, err, en)) return -1;
    bool has_dil = false;
    for (int a = 0; a < WF__MAX_ATTRS && op->attrs[a].name; a++)
        if (!strcmp(op->attrs[a].name, "dilations")) has_dil = true;
    w->d[0] = w->d[1] = 1;
    if (has_dil && wf__nn_get_pair(get(op, attrs, "dilations"), "dilations", 1, 1, w->d, err, en)) return -1;
    const wf__attr *pads = get(op, attrs, "pads");
    if (pads->n != 0 && pads->n != 4) {
        snprintf(err, en, "pads has %d values; expected 4 [top,left,bottom,right]", pads->n);
        return -1;
    }
    for (int i = 0; i < 4 && pads->n; i++)
        if (pads->ints[i] < 0) {
            snprintf(err, en, "pads[%d] is %lld; must be >= 0", i, (long long)pads->ints[i]);
            return -1;
        }
    const char *ap = get(op, attrs, "auto_pad")->s;
    if (!ap) ap = "";
    int mode; /* 0 NOTSET, 1 SAME_UPPER, 2 SAME_LOWER, 3 VALID */
    if (!strcmp(ap, "NOTSET") || !*ap) mode = 0;
    else if (!strcmp(ap, "SAME_UPPER")) mode = 1;
    else if (!strcmp(ap, "SAME_LOWER")) mode = 2;
    else if (!strcmp(ap, "VALID")) mode = 3;
    else {
        snprintf(err, en, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
        return -1;
    }
    int ceil_mode = kind == WF__WIN_POOL ? (int)get(op, attrs, "ceil_mode")->i : 0;
    const wf__attr *oshape = NULL;
    if (kind == WF__WIN_CONVT) {
        if (wf__nn_get_pair(get(op, attrs, "output_padding"), "output_padding", 0, 0, w->opad, err, en))
            return -1;
        for (int i = 0; i < 2; i++)
            if (w->opad[i] >= w->s[i] && w->opad[i] >= w->d[i]) {
                snprintf(err, en, "output_padding[%d] = %lld must be smaller than the stride or the dilation", i,
                         (long long)w->opad[i]);
                return -1;
            }
        oshape = get(op, attrs, "output_shape");
        if (oshape->n != 0 && oshape->n != 2 && oshape->n != 4) {
            snprintf(err, en, "output_shape has %d values; expected 2 (or 4 with N and C)", oshape->n);
            return -1;
        }
        if (!oshape->n) oshape = NULL;
    }
    for (int i = 0; i < 2; i++) {
        int64_t eff = -1, in = in_hw[i], s = w->s[i], t1, t2;
        /* attributes come from the file: every sum and product below is checked */
        if (w->k[i] >= 0 && (wf__mul_overflow_i64(w->k[i] - 1, w->d[i], &eff) || wf__add_overflow_i64(eff, 1, &eff))) {
            snprintf(err, en, "kernel extent (%lld - 1) x dilation %lld + 1 along spatial dim %d overflows int64",
                     (long long)w->k[i], (long long)w->d[i], i);
            return -1;
        }
        w->pb[i] = pads->n ? pads->ints[i] : 0;
        w->pe[i] = pads->n ? pads->ints[i + 2] : 0;
        w->out[i] = -1;
        if (kind == WF__WIN_CONVT) {
            int64_t want = -1;
            if (oshape) want = oshape->ints[oshape->n - 2 + i];
            else if ((mode == 1 || mode == 2) && in >= 0 && wf__mul_overflow_i64(in, s, &want)) goto overflow;
            if (mode == 3) w->pb[i] = w->pe[i] = 0;
            if (want >= 0 || oshape || mode == 1 || mode == 2) {
                if (in < 0 || eff < 0) continue;
                int64_t total;
                if (wf__mul_overflow_i64(s, in - 1, &total) || wf__add_overflow_i64(total, w->opad[i], &total) ||
                    wf__add_overflow_i64(total, eff, &total) || wf__sub_overflow_i64(total, want, &total))
                    goto overflow;
                /* floor division, as ONNX's reference does, when output_shape asks for more than the
                 * natural size (negative total padding) */
                int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
                if (mode == 1) w->pb[i] = half, w->pe[i] = total - half;
                else w->pb[i] = total - half, w->pe[i] = half;
            }
            if (in >= 0 && eff >= 0) {
                if (wf__mul_overflow_i64(s, in - 1, &t1) || wf__add_overflow_i64(t1, w->opad[i], &t1) ||
                    wf__add_overflow_i64(t1, eff, &t1) || wf__sub_overflow_i64(t1, w->pb[i], &t1) ||
                    wf__sub_overflow_i64(t1, w->pe[i], &t1))
                    goto overflow;
                w->out[i] = t1;
                if (w->out[i] < 0) {
                    snprintf(err, en, "output size %lld along spatial dim %d is negative", (long long)w->out[i], i);
                    return -1;
                }
            }
            continue;
        }
        if (mode == 3) w->pb[i] = w->pe[i] = 0;
        if (in < 0 || eff < 0) continue;
        if (mode == 1 || mode == 2) {
            int64_t out = in == 0 ? 0 : (in - 1) / s + 1, total;
            if (wf__mul_overflow_i64(out - 1, s, &total) || wf__add_overflow_i64(total, eff, &total)) goto overflow;
            total -= in;
            if (total < 0) total = 0;
            if (mode == 1) w->pb[i] = total / 2, w->pe[i] = total - total / 2;
            else w->pb[i] = total - total / 2, w->pe[i] = total / 2;
            w->out[i] = out;
            continue;
        }
        if (wf__add_overflow_i64(in, w->pb[i], &t1) || wf__add_overflow_i64(t1, w->pe[i], &t1)) goto overflow;
        int64_t span = t1 - eff;
        if (span < 0) {
            snprintf(err, en, "kernel extent %lld along spatial dim %d exceeds the padded input %lld", (long long)eff,
                     i, (long long)t1);
            return -1;
        }
        int64_t out = (ceil_mode ? (span == 0 ? 0 : (span - 1) / s + 1) : span / s) + 1;
        /* a window that would start inside the end padding is dropped (ONNX, PyTorch); a start past int64
         * is past the padding too */
        if (ceil_mode && (wf__mul_overflow_i64(out - 1, s, &t2) || t2 >= in + w->pb[i])) out--;
        w->out[i] = out;
    }
    return 0;
overflow:
    snprintf(err, en, "the output size along a spatial dim overflows int64 (input [%lld,%lld], strides [%lld,%lld], "
             "dilations [%lld,%lld], pads [%lld,%lld,%lld,%lld])", (long long)in_hw[0], (long long)in_hw[1],
             (long long)w->s[0], (long long)w->s[1], (long long)w->d[0], (long long)w->d[1], (long long)w->pb[0],
             (long long)w->pb[1], (long long)w->pe[0], (long long)w->pe[1]);
    return -1;
}

/* Output length of one N-D window dim (QLinearConv, ConvInteger, LpPool): k taps dilated by d, stride s
 * (all >= 1) over in elements padded by p in total (pb at the begin); SAME: ceil(in / s). Returns -1 when
 * the kernel extent exceeds the padded input, -2 when a size overflows int64. */
static inline int64_t wf__nn_window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t p, bool same,
                                        bool ceil_mode)
{
    if (same) return in == 0 ? 0 : (in - 1) / s + 1;
    int64_t ext, padded, t;
    if (wf__mul_overflow_i64(k - 1, d, &ext) || wf__add_overflow_i64(ext, 1, &ext) ||
        wf__add_overflow_i64(in, p, &padded))
        return -2;
    int64_t span = padded - ext;
    if (span < 0) return -1;
    int64_t o = (ceil_mode ? (span == 0 ? 0 : (span - 1) / s + 1) : span / s) + 1;
    /* the last window must start inside the input or its begin padding */
    if (ceil_mode && (wf__mul_overflow_i64(o - 1, s, &t) || wf__add_overflow_i64(in, pb, &padded) || t >= padded)) o--;
    return o;
}

/* ---- the backward ops (ops_nn_grad.c): checks every backend makes the same way ----------------------- */

/* Whether a size input (input_sizes, filter_sizes) has the accepted form: 1-D i32/i64, min_n..max_n values. */
static inline bool wf__nn_sizes_form_ok(const wf_tensor *t, int min_n, int max_n)
{
    return (t->dtype == WF_I64 || t->dtype == WF_I32) && t->rank == 1 && t->dims[0] >= min_n && t->dims[0] <= max_n;
}

/* The index of the first negative of n sizes, or -1. */
static inline int wf__nn_sizes_negative(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] < 0) return i;
    return -1;
}

/* Resolves the forward window over in_hw and checks that it produces dy's spatial dims dy_hw. Returns 0, or
 * -1 with the whole message in err. */
static inline int wf__nn_grad_window(wf__nn_attr_get_fn get, const wf__op_def *op, const wf__attr *attrs, int kind,
                                     const int64_t *in_hw, const int64_t *wk, const int64_t *dy_hw, wf__nn_window *w,
                                     char *err, size_t en)
{
    char why[192];
    if (wf__nn_window_resolve_with(get, op, attrs, kind, in_hw, wk, w, why, sizeof why)) {
        snprintf(err, en, "forward input spatial [%lld,%lld]: %s", (long long)in_hw[0], (long long)in_hw[1], why);
        return -1;
    }
    if (w->out[0] != dy_hw[0] || w->out[1] != dy_hw[1]) {
        snprintf(err, en, "dy spatial [%lld,%lld] does not match the forward output [%lld,%lld] of input spatial [%lld,%lld]",
                 (long long)dy_hw[0], (long long)dy_hw[1], (long long)w->out[0], (long long)w->out[1],
                 (long long)in_hw[0], (long long)in_hw[1]);
        return -1;
    }
    return 0;
}

#endif
