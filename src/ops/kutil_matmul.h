/*
 * Host-side MatMul / Gemm geometry (numpy batch broadcasting, optional transposes) shared by the CPU
 * kernels and the device plugins: one plan, batch strides and per-batch offsets. Header-only and free of
 * libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_MATMUL_H
#define WF_DEVICE_KUTIL_MATMUL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "weft/weft.h"

typedef struct wf__ku_mm {
    int64_t m, n, kdim;
    int nb; /* broadcast batch rank */
    int64_t bat[WF_MAX_RANK], abat[WF_MAX_RANK], bbat[WF_MAX_RANK];
    int64_t batch; /* product of bat */
    int ta, tb;
    int out_rank;
    int64_t out_dims[WF_MAX_RANK];
    int64_t ka, kb; /* the inner dims of A and B as found (they differ on failure) */
} wf__ku_mm;

enum { WF__KU_MM_OK, WF__KU_MM_INNER, WF__KU_MM_BATCH };

/* Plans A (ra, ad) x B (rb, bd), both of rank >= 1, transposed when ta / tb (ignored for rank 1).
 * Returns WF__KU_MM_INNER when the inner dims differ, WF__KU_MM_BATCH when the batch dims do not
 * broadcast. */
static inline int wf__ku_mm_plan(int ra, const int64_t *ad, int rb, const int64_t *bd, int ta, int tb, wf__ku_mm *g)
{
    memset(g, 0, sizeof *g);
    g->ta = ra > 1 && ta;
    g->tb = rb > 1 && tb;
    if (ra == 1) g->m = 1, g->ka = ad[0];
    else g->m = ad[ra - (g->ta ? 1 : 2)], g->ka = ad[ra - (g->ta ? 2 : 1)];
    if (rb == 1) g->kb = bd[0], g->n = 1;
    else g->kb = bd[rb - (g->tb ? 1 : 2)], g->n = bd[rb - (g->tb ? 2 : 1)];
    if (g->ka != g->kb) return WF__KU_MM_INNER;
    g->kdim = g->ka;
    int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0;
    g->nb = na > nb ? na : nb;
    g->batch = 1;
    for (int i = 0; i < g->nb; i++) {
        int ia = i - (g->nb - na), ib = i - (g->nb - nb);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if (da != db && da != 1 && db != 1) return WF__KU_MM_BATCH;
        g->abat[i] = da;
        g->bbat[i] = db;
        g->bat[i] = da == 1 ? db : da;
        g->batch *= g->bat[i];
    }
    for (int i = 0; i < g->nb; i++) g->out_dims[g->out_rank++] = g->bat[i];
    if (ra > 1) g->out_dims[g->out_rank++] = g->m;
    if (rb > 1) g->out_dims[g->out_rank++] = g->n;
    return WF__KU_MM_OK;
}

/* The element stride between consecutive batch entries of one operand whose batch dims obat are either
 * the full broadcast batch or all 1 (0: shared); -1 when they mix (the caller loops over the batch). */
static inline int64_t wf__ku_mm_batch_stride(const wf__ku_mm *g, const int64_t *obat, int64_t mat)
{
    bool full = true, none = true;
    for (int i = 0; i < g->nb; i++) {
        full &= obat[i] == g->bat[i];
        none &= obat[i] == 1;
    }
    return none ? 0 : full ? mat : -1;
}

/* Element offsets of batch entry bi in A and B (broadcast dims contribute nothing). */
static inline void wf__ku_mm_batch_offsets(const wf__ku_mm *g, int64_t bi, int64_t *ao, int64_t *bo)
{
    int64_t sa = g->m * g->kdim, sb = g->kdim * g->n, oa = 0, ob = 0;
    for (int i = g->nb - 1; i >= 0; i--) {
        int64_t idx = bi % g->bat[i];
        bi /= g->bat[i];
        if (g->abat[i] != 1) oa += idx * sa;
        if (g->bbat[i] != 1) ob += idx * sb;
        sa *= g->abat[i];
        sb *= g->bbat[i];
    }
    *ao = oa;
    *bo = ob;
}

#endif
