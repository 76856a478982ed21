/*
 * Host-side shape logic of Attention shared by the CPU kernel and the OpenCL plugin: the (batch, heads,
 * sequence, head size) view of a 3-D or 4-D Q/K/V and whether the three fit together. Header-only and
 * free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_ATTN_H
#define WF_DEVICE_KUTIL_ATTN_H

#include <stdbool.h>
#include <stdint.h>

/* Heads, sequence and head size of a 3-D (B, S, H * D) or 4-D (B, H, S, D) input; element (b, h, s, d)
 * is at b * bs + h * hs + s * ss + d. */
typedef struct wf__ku_attn_view {
    int64_t B, H, S, D, bs, hs, ss;
} wf__ku_attn_view;

/* The view of dims with `heads` heads (3-D only); false when the input is neither 4-D nor 3-D with a
 * hidden size the heads divide. */
static inline bool wf__ku_attn_view_of(int rank, const int64_t *dims, int64_t heads, wf__ku_attn_view *v)
{
    if (rank == 4) {
        *v = (wf__ku_attn_view){dims[0], dims[1], dims[2], dims[3], 0, 0, 0};
        v->ss = v->D;
        v->hs = v->S * v->D;
        v->bs = v->H * v->hs;
        return true;
    }
    if (rank != 3 || heads <= 0 || dims[2] % heads) return false;
    *v = (wf__ku_attn_view){dims[0], heads, dims[1], dims[2] / heads, 0, 0, 0};
    v->hs = v->D;
    v->ss = heads * v->D;
    v->bs = v->S * v->ss;
    return true;
}

/* Whether Q, K and V (ranks and views) agree on batch, heads (K/V heads dividing Q's), key/value
 * sequence and the Q.K head size. */
static inline bool wf__ku_attn_fit(int qr, int kr, int vr, const wf__ku_attn_view *q, const wf__ku_attn_view *k,
                                   const wf__ku_attn_view *v)
{
    return k->H != 0 && qr == kr && qr == vr && k->B == q->B && v->B == q->B && k->H == v->H && k->S == v->S &&
           q->D == k->D && q->H % k->H == 0;
}

/* Output dims: Y (3-D like a 3-D Q, else 4-D), present_key, present_value (T = past + new keys) and
 * the qk_matmul_output. */
static inline void wf__ku_attn_out_dims(int qrank, int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t T,
                                        int64_t Dk, int64_t Dv, int64_t *yd, int64_t *pkd, int64_t *pvd, int64_t *qkd)
{
    if (qrank == 3) {
        yd[0] = B, yd[1] = Sq, yd[2] = Hq * Dv;
    } else {
        yd[0] = B, yd[1] = Hq, yd[2] = Sq, yd[3] = Dv;
    }
    pkd[0] = pvd[0] = qkd[0] = B;
    pkd[1] = pvd[1] = Hkv;
    pkd[2] = pvd[2] = T;
    pkd[3] = Dk;
    pvd[3] = Dv;
    qkd[1] = Hq, qkd[2] = Sq, qkd[3] = T;
}

/* Element strides ms of an attn_mask (rank r, dims md) over (B, Hq, Sq, T), right-aligned: 0 where it
 * broadcasts; its last dim may be shorter than T (the rest is masked). False when it does not fit. */
static inline bool wf__ku_attn_mask_strides(int r, const int64_t *md, int64_t B, int64_t Hq, int64_t Sq, int64_t T,
                                            int64_t *ms)
{
    int64_t full[4] = {B, Hq, Sq, T}, st[8];
    if (r < 1 || r > 4) return false;
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--) st[d] = acc, acc *= md[d];
    for (int x = 0; x < 4; x++) {
        int m = x - (4 - r);
        ms[x] = 0;
        if (m < 0) continue;
        int64_t d = md[m];
        if (x == 3 ? d > T : (d != 1 && d != full[x])) return false;
        ms[x] = d == 1 && x != 3 ? 0 : st[m];
    }
    return true;
}

#endif
