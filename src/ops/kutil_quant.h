/*
 * Host-side planning of the ONNX quantisation ops shared by the CPU kernels and the device plugins:
 * where each element of x finds its scale / zero point (per tensor, per axis or blocked), the range of a
 * quantised dtype, and the window geometry of ConvInteger / QLinearConv. Header-only and free of
 * libweft calls because the plugins cannot link libweft; messages go to a caller's buffer.
 */
#ifndef WF_DEVICE_KUTIL_QUANT_H
#define WF_DEVICE_KUTIL_QUANT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/kutil_conv.h"
#include "ops/attr.h"

/* Where element i of x finds its parameter: kind 0 per tensor, 1 per axis, 2 blocked. The sizes are
 * at least 1 (an empty x reads nothing; this keeps the divisions of an index map defined). */
typedef struct wf__ku_qmap {
    int kind;
    int64_t alen, inner, block, nb;
} wf__ku_qmap;

/* The map of parameter p (rank prank, dims pdims, psize values; `what` names it, pstr / xstr describe p
 * and x) for block_size bs and axis. Returns false with a message in err. */
static inline bool wf__ku_qmap_plan(int xrank, const int64_t *xdims, const char *xstr, int prank, const int64_t *pdims,
                                    int64_t psize, const char *what, const char *pstr, int64_t axis, int64_t bs,
                                    wf__ku_qmap *m, char *err, size_t en)
{
    memset(m, 0, sizeof *m);
    m->alen = m->inner = m->block = m->nb = 1;
    if (prank == 0 || (psize == 1 && prank == 1 && bs == 0)) return true;
    int64_t a = axis < 0 ? axis + xrank : axis;
    if (a < 0 || a >= xrank) {
        snprintf(err, en, "axis %" PRId64 " is out of range for input %s", axis, xstr);
        return false;
    }
    m->alen = xdims[a];
    m->inner = 1;
    for (int d = (int)a + 1; d < xrank; d++) m->inner *= xdims[d];
    bool ok;
    if (bs <= 0) {
        m->kind = 1;
        ok = prank == 1 && pdims[0] == xdims[a];
    } else {
        m->kind = 2;
        m->block = bs;
        m->nb = (xdims[a] + bs - 1) / bs;
        ok = prank == xrank;
        for (int d = 0; ok && d < xrank; d++) ok = pdims[d] == (d == a ? m->nb : xdims[d]);
    }
    if (!ok) {
        snprintf(err, en, "%s %s does not fit input %s (axis %" PRId64 ", block_size %" PRId64 ")", what, pstr, xstr, a,
                 bs);
        return false;
    }
    if (m->inner == 0) m->inner = 1;
    if (m->alen == 0) m->alen = 1;
    if (m->nb == 0) m->nb = 1;
    return true;
}

/* The parameter index of element i of x under map m. */
static inline int64_t wf__ku_qmap_index(const wf__ku_qmap *m, int64_t i)
{
    if (m->kind == 0) return 0;
    int64_t a = (i / m->inner) % m->alen;
    if (m->kind == 1) return a;
    int64_t outer = i / (m->inner * m->alen), in = i % m->inner;
    return (outer * m->nb + a / m->block) * m->inner + in;
}

/* The range of quantised dtype t (u8, i8, i16; anything else is i32's). */
static inline void wf__ku_qrange(wf_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case WF_U8: *lo = 0, *hi = 255; break;
    case WF_I8: *lo = -128, *hi = 127; break;
    case WF_I16: *lo = -32768, *hi = 32767; break;
    default: *lo = INT32_MIN, *hi = INT32_MAX; break;
    }
}

/* ConvInteger / QLinearConv geometry: x (N, C, in...) and w (M, C/G, k...), up to WF__KU_ICONV_MAX_NS
 * spatial dims; dims gets the output shape (rank of x). */
#define WF__KU_ICONV_MAX_NS 6
typedef struct wf__ku_iconv {
    int ns;
    int64_t N, C, M, G;
    int64_t in[WF__KU_ICONV_MAX_NS], out[WF__KU_ICONV_MAX_NS], k[WF__KU_ICONV_MAX_NS], s[WF__KU_ICONV_MAX_NS],
        d[WF__KU_ICONV_MAX_NS], pb[WF__KU_ICONV_MAX_NS];
} wf__ku_iconv;

/* ks, st, dl, pd: the kernel_shape, strides, dilations and pads attributes (NULL or empty when unset);
 * auto_pad NULL means NOTSET. Returns false with a message in err. */
static inline bool wf__ku_iconv_plan(int xrank, const int64_t *xdims, const char *xstr, int wrank, const int64_t *wdims,
                                     const char *wstr, int64_t group, const wf__attr *ks, const wf__attr *st,
                                     const wf__attr *dl, const wf__attr *pd, const char *auto_pad, wf__ku_iconv *p,
                                     int64_t *dims, char *err, size_t en)
{
    const char *ap = auto_pad ? auto_pad : "NOTSET";
    memset(p, 0, sizeof *p);
    p->ns = xrank - 2;
    p->G = group;
    int ns = p->ns;
    int64_t oc;
    if (ns < 1 || ns > WF__KU_ICONV_MAX_NS || wrank != xrank || !wf__ku_conv_channels(xdims[1], wdims, group, false, &oc)) {
        snprintf(err, en, "input %s and weight %s do not fit: their channels and group %" PRId64 " disagree", xstr, wstr,
                 group);
        return false;
    }
    if ((ks && ks->n && ks->n != ns) || (pd && pd->n && pd->n != 2 * ns) || (st && st->n && st->n != ns) ||
        (dl && dl->n && dl->n != ns)) {
        snprintf(err, en, "kernel_shape, strides, dilations or pads do not fit %d spatial dims of input %s", ns, xstr);
        return false;
    }
    p->N = xdims[0];
    p->C = xdims[1];
    p->M = wdims[0];
    dims[0] = p->N;
    dims[1] = p->M;
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    bool has_pads = pd && pd->n;
    for (int i = 0; i < ns; i++) {
        p->in[i] = xdims[i + 2];
        p->k[i] = wdims[i + 2];
        p->s[i] = st && st->n ? st->ints[i] : 1;
        p->d[i] = dl && dl->n ? dl->ints[i] : 1;
        if (p->s[i] < 1 || p->d[i] < 1) {
            snprintf(err, en, "strides and dilations must be >= 1");
            return false;
        }
        int64_t ext = (p->k[i] - 1) * p->d[i] + 1;
        if (same) {
            p->out[i] = (p->in[i] + p->s[i] - 1) / p->s[i];
            int64_t tot = (p->out[i] - 1) * p->s[i] + ext - p->in[i];
            if (tot < 0) tot = 0;
            p->pb[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
        } else {
            p->pb[i] = valid || !has_pads ? 0 : pd->ints[i];
            int64_t span = p->in[i] + (valid || !has_pads ? 0 : pd->ints[i] + pd->ints[i + ns]) - ext;
            if (span < 0) {
                snprintf(err, en, "kernel is larger than padded input %s", xstr);
                return false;
            }
            p->out[i] = span / p->s[i] + 1;
        }
        dims[i + 2] = p->out[i];
    }
    return true;
}

#endif
