/*
 * CPU kernels of ONNX Attention (opsets 23-25: 3-D or 4-D Q/K/V, masks, KV cache, causal and sliding
 * windows, GQA, softcap, the qk_matmul_output modes) and RotaryEmbedding. Arithmetic is in f64 with
 * each step rounded to the input's dtype where ONNX's reference computes in it, so f16 and bf16
 * results agree with the reference to the last bit or two; f32 Attention without a cache, softcap,
 * causality, window or padded lengths (what passes/attention.c makes of a model's attention, and most
 * encoders' own) takes a fast path instead: per head and block of queries, oneDNN's sgemm for Q K^T
 * and for P V, reading Q, K and V where they lie (3-D or 4-D, no transposed copies) and writing Y in
 * place, with the Softmax node's own row loop between them.
 *
 * A row whose keys the mask, causality, window or lengths all forbid is zero in Y (ONNX's rule); a
 * row whose scores are all -inf from Q and K themselves (infinite inputs) is NaN, as Softmax gives it,
 * so the fused attention keeps the unfused chain's NaN. With weft's mask_replaces (a Where-masked
 * attention, passes/attention.c) a forbidden key's score becomes -inf instead of having -inf added, so a
 * NaN or +inf score there drops out as it does behind Where(allowed, scores, -inf).
 */
#include "backends/cpu/k_dnnl.h" /* dnnl_sgemm, wf__softmax_row_f32 */
#include "backends/cpu/k_onnx.h"
#include "ops/kutil_attn.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB WF__KO_SB

/* ---- Attention ---------------------------------------------------------------------------------------- */

typedef struct {
    int64_t B, Hq, Hkv, Sq, Skv, P, T, Dk, Dv; /* T = P + Skv: keys after the cache is appended */
    wf_dtype dt, sp;                          /* input dtype, softmax dtype */
    double *q, *kk, *vv;                      /* Q * sqrt(scale), present K * sqrt(scale), present V */
    double *qk;                               /* B x Hq x Sq x T: the qk_matmul_output */
    double *x;                                /* B x Hq x Sq x T: softmax scratch */
    double *y;                                /* B x Hq x Sq x Dv */
    const wf_tensor *mask, *nonpad;
    int64_t ms[4], mlen;                      /* mask strides over (B, Hq, Sq, key), its key length */
    bool causal, replace;                     /* replace: mask_replaces (a forbidden key's score is -inf) */
    int64_t left, right;
    double softcap;
    int mode;
} attn_job;

/* The additive bias of query i and key j of batch b, head h: the mask (padded with -inf past its
 * length), then -inf where causality, the window or the batch's valid length forbid the key. */
static double attn_bias(const attn_job *j, int64_t b, int64_t h, int64_t i, int64_t kj)
{
    double v = 0.0;
    if (j->mask) {
        if (kj >= j->mlen) return -INFINITY;
        int64_t off = b * j->ms[0] + h * j->ms[1] + i * j->ms[2] + kj * j->ms[3];
        if (j->mask->dtype == WF_BOOL) {
            if (!((const uint8_t *)j->mask->data)[off]) return -INFINITY;
        } else {
            v = wf__load_f64(j->mask->data, j->mask->dtype, off);
        }
    }
    int64_t nonpad = j->nonpad ? wf__load_i64(j->nonpad->data, j->nonpad->dtype, b) : -1;
    /* The query block ends where the valid keys end: past length, or nonpad length minus the block. */
    int64_t offset = j->P > 0 ? j->P : (j->nonpad ? nonpad - j->Sq : 0);
    int64_t diff = i + offset - kj;
    if (j->causal && diff < 0) return -INFINITY;
    if (j->left >= 0 && diff > j->left) return -INFINITY;
    if (j->right >= 0 && -diff > j->right) return -INFINITY;
    if (j->nonpad && kj >= nonpad) return -INFINITY;
    return v;
}

static void attn_range(void *arg, int64_t begin, int64_t end)
{
    const attn_job *j = arg;
    wf_dtype dt = j->dt, sp = j->sp;
    int64_t rep = j->Hq / j->Hkv;
    for (int64_t row = begin; row < end; row++) {
        int64_t i = row % j->Sq, h = (row / j->Sq) % j->Hq, b = row / (j->Sq * j->Hq), hk = h / rep;
        const double *q = j->q + row * j->Dk;
        const double *kb = j->kk + (b * j->Hkv + hk) * j->T * j->Dk, *vb = j->vv + (b * j->Hkv + hk) * j->T * j->Dv;
        double *qk = j->qk + row * j->T, *x = j->x + row * j->T, *y = j->y + row * j->Dv;
        double mx = -INFINITY, sum = 0.0;
        bool open = false; /* some key's bias is not -inf (NaN included, which then spreads) */
        for (int64_t kj = 0; kj < j->T; kj++) {
            double acc = 0.0;
            for (int64_t d = 0; d < j->Dk; d++) acc += q[d] * kb[kj * j->Dk + d];
            double s = wf__ko_round(acc, dt);
            /* softcap comes before the bias, so masked scores stay -inf */
            if (j->softcap > 0)
                s = wf__ko_round(wf__ko_round(tanh(wf__ko_round(s / j->softcap, dt)), dt) * j->softcap, dt);
            double bias = attn_bias(j, b, h, i, kj);
            open |= bias != -INFINITY;
            double v = j->replace && bias == -INFINITY ? -INFINITY : wf__ko_round(s + bias, dt);
            qk[kj] = j->mode == 2 ? v : s;
            x[kj] = wf__ko_round(v, sp);
            if (isnan(x[kj]) || x[kj] > mx) mx = x[kj]; /* NaN propagates, as numpy's max does */
        }
        for (int64_t d = 0; d < j->Dv; d++) y[d] = 0.0;
        /* A row no key may attend (its bias is all -inf) is zero, in Y and in mode 3's output; scores that
         * are all -inf by themselves give NaN below (exp(-inf - -inf)), as Softmax does. */
        if (!open) {
            if (j->mode == 3)
                for (int64_t kj = 0; kj < j->T; kj++) qk[kj] = 0.0;
            continue;
        }
        /* numpy sums built-in floats pairwise in a wider type but bf16 (an ml_dtypes type) one rounded
         * addition at a time; the reference's results depend on it. */
        for (int64_t kj = 0; kj < j->T; kj++) {
            x[kj] = wf__ko_round(exp(wf__ko_round(x[kj] - mx, sp)), sp);
            sum = sp == WF_BF16 ? wf__ko_round(sum + x[kj], sp) : sum + x[kj];
        }
        sum = wf__ko_round(sum, sp);
        if (sum == 0.0) sum = 1.0;
        for (int64_t kj = 0; kj < j->T; kj++) {
            double pr = wf__ko_round(x[kj] / sum, sp);
            if (j->mode == 3) qk[kj] = pr;
            pr = wf__ko_round(pr, dt);
            const double *v = vb + kj * j->Dv;
            for (int64_t d = 0; d < j->Dv; d++) y[d] += pr * v[d];
        }
    }
}

/* The mask's strides over (B, Hq, Sq, keys) = full, right-aligned (0 where it broadcasts), and its key
 * length, which may be shorter than full[3]: the reference pads it with -inf rather than broadcast it
 * (even a length of 1). False when it does not fit. */
static bool mask_strides(const wf_tensor *mask, const int64_t *full, int64_t *ms, int64_t *mlen)
{
    int r = mask->rank;
    int64_t st[WF_MAX_RANK];
    if (r < 1 || r > 4) return false;
    wf__strides(r, mask->dims, st);
    for (int a = 0; a < 4; a++) {
        int md = a - (4 - r);
        ms[a] = 0;
        if (md < 0) continue;
        int64_t d = mask->dims[md];
        if (a == 3 ? d > full[3] : (d != 1 && d != full[a])) return false;
        ms[a] = d == 1 && a != 3 ? 0 : st[md];
    }
    *mlen = mask->dims[r - 1];
    return true;
}

/* Attention's scale: the attribute, else 1 / sqrt(head size). */
static double attn_scale(const wf__kctx *k, int64_t Dk)
{
    return wf__attr_get(k->op, k->attrs, "scale")->set ? wf__attr_f(k->op, k->attrs, "scale") : 1.0 / sqrt((double)Dk);
}

/* ---- the f32 fast path ------------------------------------------------------------------------------- */

#define ATTN_ROWS 32 /* queries per task: a task's scores (32 x keys) stay in L1/L2 */
/* Keys up to this many keep a task's scores on its thread's stack (64 KiB); longer ones use one buffer
 * allocated per call. A fresh 256 KiB buffer per call cost BERT's attention (4 x 128 x 128 scores)
 * as much as its arithmetic: glibc maps allocations that large afresh, and every page faults. */
#define ATTN_STACK_KEYS 512

typedef struct {
    const float *q, *k, *v, *mask;
    const uint8_t *bmask;
    float *y, *s;                         /* s: scores, ATTN_ROWS x T per task */
    wf__ku_attn_view vq, vk, vv;
    int64_t Hq, rep, Sq, T, Dk, Dv, yb, yh, ys; /* ys: Y's row stride; yb, yh: batch and head offsets */
    int64_t ms[4], mlen;
    int64_t blocks;                       /* query blocks per head */
    float scale;
    bool replace;                         /* mask_replaces: a forbidden key's score is -inf, not plus -inf */
} attn_fast;

static void attn_fast_range(void *arg, int64_t begin, int64_t end)
{
    const attn_fast *j = arg;
    float stack[ATTN_ROWS * ATTN_STACK_KEYS];
    for (int64_t t = begin; t < end; t++) {
        int64_t blk = t % j->blocks, bh = t / j->blocks, h = bh % j->Hq, b = bh / j->Hq, hk = h / j->rep;
        int64_t i0 = blk * ATTN_ROWS, rows = j->Sq - i0 < ATTN_ROWS ? j->Sq - i0 : ATTN_ROWS;
        const float *q = j->q + b * j->vq.bs + h * j->vq.hs + i0 * j->vq.ss;
        const float *kk = j->k + b * j->vk.bs + hk * j->vk.hs, *vv = j->v + b * j->vv.bs + hk * j->vv.hs;
        float *s = j->s ? j->s + t * ATTN_ROWS * j->T : stack, *y = j->y + b * j->yb + h * j->yh + i0 * j->ys;
        /* S = scale * Q K^T, row-major: Q rows ss apart, K rows (keys) ss apart */
        (void)dnnl_sgemm('N', 'T', rows, j->T, j->Dk, j->scale, q, j->vq.ss, kk, j->vk.ss, 0.0f, s, j->T);
        for (int64_t r = 0; r < rows; r++) {
            float *sr = s + r * j->T;
            int64_t i = i0 + r;
            bool open = !j->mask && !j->bmask;
            if (j->mask || j->bmask) {
                /* the mask's keys, then -inf past its length (added, as the reference adds it: +inf - inf
                 * is NaN there too) */
                int64_t off = b * j->ms[0] + h * j->ms[1] + i * j->ms[2], ks = j->ms[3];
                int64_t lim = j->mlen < j->T ? j->mlen : j->T;
                for (int64_t kj = 0; kj < lim; kj++) {
                    float bias = j->bmask ? (j->bmask[off + kj * ks] ? 0.0f : -INFINITY) : j->mask[off + kj * ks];
                    open |= bias != -INFINITY;
                    sr[kj] = j->replace && bias == -INFINITY ? -INFINITY : sr[kj] + bias;
                }
                for (int64_t kj = lim; kj < j->T; kj++) sr[kj] = j->replace ? -INFINITY : sr[kj] - INFINITY;
            }
            if (open) wf__softmax_row_f32(sr, sr, j->T);
            else memset(sr, 0, sizeof *sr * (size_t)j->T); /* no key allowed: a zero row, as ONNX says */
        }
        /* Y rows = P V, written where Y keeps them */
        (void)dnnl_sgemm('N', 'N', rows, j->Dv, j->T, 1.0f, s, j->T, vv, j->vv.ss, 0.0f, y, j->ys);
    }
}

/* Whether Attention's arguments are the fast path's (see the header); then it runs and *done is set. */
static wf_status *attention_fast(wf__kctx *k, const wf__ku_attn_view *vq, const wf__ku_attn_view *vk,
                                 const wf__ku_attn_view *vv, bool *done)
{
    const wf_tensor *Q = k->in[0], *K = k->in[1], *V = k->in[2];
    const wf_tensor *mask = wf__ko_has(k, 3) ? k->in[3] : NULL;
    *done = false;
#define A_I(nm) wf__attr_i(k->op, k->attrs, nm)
    wf_dtype sp = (wf_dtype)A_I("softmax_precision");
    if (Q->dtype != WF_F32 || K->dtype != WF_F32 || V->dtype != WF_F32 || wf__ko_has(k, 4) || wf__ko_has(k, 5) ||
        wf__ko_has(k, 6) || A_I("is_causal") || A_I("left_window_size") >= 0 || A_I("right_window_size") >= 0 ||
        wf__attr_f(k->op, k->attrs, "softcap") != 0.0 || (sp != WF_DTYPE_INVALID && sp != WF_F32) ||
        (mask && mask->dtype != WF_F32 && mask->dtype != WF_BOOL))
        return NULL;
    /* outputs 1-3 (present key and value, the scores) only where nothing reads them */
    if ((k->out_unused & 0xe) != 0xe) return NULL;
#undef A_I
    attn_fast j = {.q = Q->data, .k = K->data, .v = V->data, .vq = *vq, .vk = *vk, .vv = *vv, .Hq = vq->H,
                   .rep = vq->H / vk->H, .Sq = vq->S, .T = vk->S, .Dk = vk->D, .Dv = vv->D,
                   .replace = wf__attr_i(k->op, k->attrs, "mask_replaces") != 0};
    if (j.Sq <= 0 || j.T <= 0 || j.Dk <= 0 || j.Dv <= 0 || j.T > INT32_MAX / ATTN_ROWS || j.Dk > INT32_MAX)
        return NULL; /* empty or huge: the reference loop handles those */
    if (mask) {
        int64_t full[4] = {vq->B, vq->H, j.Sq, j.T};
        if (!mask_strides(mask, full, j.ms, &j.mlen)) return NULL; /* the reference loop reports it */
        if (mask->dtype == WF_BOOL) j.bmask = mask->data;
        else j.mask = mask->data;
    }
    j.scale = (float)attn_scale(k, j.Dk);
    wf_tensor *y, *o1, *o2, *o3;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    wf__ku_attn_out_dims(Q->rank, vq->B, vq->H, vk->H, j.Sq, j.T, j.Dk, j.Dv, yd, pkd, pvd, qkd);
    WF__TRY(wf__kctx_output(k, 0, WF_F32, Q->rank, yd, &y));
    WF__TRY(wf__kctx_output(k, 1, WF_F32, 4, pkd, &o1));
    WF__TRY(wf__kctx_output(k, 2, WF_F32, 4, pvd, &o2));
    WF__TRY(wf__kctx_output(k, 3, WF_F32, 4, qkd, &o3));
    *done = true;
    j.y = y->data;
    /* Y: 4-D (B, H, S, Dv), or 3-D (B, S, H * Dv) */
    j.ys = Q->rank == 4 ? j.Dv : vq->H * j.Dv;
    j.yh = Q->rank == 4 ? j.Sq * j.Dv : j.Dv;
    j.yb = vq->H * j.Sq * j.Dv;
    if (y->size == 0) return NULL;
    j.blocks = (j.Sq + ATTN_ROWS - 1) / ATTN_ROWS;
    int64_t tasks = vq->B * vq->H * j.blocks;
    size_t bytes = sizeof(float) * (size_t)tasks * ATTN_ROWS * (size_t)j.T;
    if (j.T > ATTN_STACK_KEYS && !(j.s = wf__malloc(bytes)))
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for Attention's scores (%zu bytes)", bytes);
    wf__parallel_for(k, tasks, 1, attn_fast_range, &j);
    wf__free(j.s);
    return NULL;
}

static wf_status *view_of(const wf__kctx *k, const wf_tensor *t, int64_t heads, const char *what, wf__ku_attn_view *v)
{
    char b[SB];
    if (!wf__ku_attn_view_of(t->rank, t->dims, heads, v))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 4-D, or 3-D with a hidden size that %" PRId64
                             " heads divide", what, wf__shape_str(t->rank, t->dims, b), heads);
    return NULL;
}

/* present (B, H, P + S, D) = past ++ cur along the sequence, written to out (dtype) and, scaled by
 * `scale` and rounded to dtype, to buf. */
static void append_cache(const wf_tensor *past, const wf_tensor *cur, const wf__ku_attn_view *v, int64_t P, double scale,
                         wf_dtype dt, void *out, double *buf)
{
    int64_t T = P + v->S, n = 0;
    for (int64_t b = 0; b < v->B; b++)
        for (int64_t h = 0; h < v->H; h++)
            for (int64_t s = 0; s < T; s++)
                for (int64_t d = 0; d < v->D; d++, n++) {
                    double x = s < P ? wf__load_f64(past->data, past->dtype, ((b * v->H + h) * P + s) * v->D + d)
                                     : wf__load_f64(cur->data, cur->dtype, b * v->bs + h * v->hs + (s - P) * v->ss + d);
                    wf__store_f64(out, dt, n, x);
                    buf[n] = scale == 1.0 ? x : wf__ko_round(x * scale, dt);
                }
}

wf_status *wf__k_attention(wf__kctx *k)
{
    char b0[SB], b1[SB];
    const wf_tensor *Q = k->in[0], *K = k->in[1], *V = k->in[2];
    const wf_tensor *mask = wf__ko_has(k, 3) ? k->in[3] : NULL, *pk = wf__ko_has(k, 4) ? k->in[4] : NULL,
                    *pv = wf__ko_has(k, 5) ? k->in[5] : NULL, *np = wf__ko_has(k, 6) ? k->in[6] : NULL;
#define A_I(nm) wf__attr_i(k->op, k->attrs, nm)
    wf__ku_attn_view vq, vk, vv;
    WF__TRY(view_of(k, Q, A_I("q_num_heads"), "Q", &vq));
    WF__TRY(view_of(k, K, A_I("kv_num_heads"), "K", &vk));
    WF__TRY(view_of(k, V, A_I("kv_num_heads"), "V", &vv));
    if (!wf__ku_attn_fit(Q->rank, K->rank, V->rank, &vq, &vk, &vv))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "Q %s, K %s and V do not fit (batch, heads, head sizes)",
                             wf__shape_str(Q->rank, Q->dims, b0), wf__shape_str(K->rank, K->dims, b1));
    bool done;
    WF__TRY(attention_fast(k, &vq, &vk, &vv, &done));
    if (done) return NULL;
    attn_job j = {.B = vq.B, .Hq = vq.H, .Hkv = vk.H, .Sq = vq.S, .Skv = vk.S, .Dk = vk.D, .Dv = vv.D, .dt = Q->dtype,
                  .mask = mask, .nonpad = np, .causal = A_I("is_causal") != 0, .left = A_I("left_window_size"),
                  .right = A_I("right_window_size"), .softcap = wf__attr_f(k->op, k->attrs, "softcap"),
                  .mode = (int)A_I("qk_matmul_output_mode"), .replace = A_I("mask_replaces") != 0};
    j.sp = (wf_dtype)A_I("softmax_precision");
    if (j.sp == WF_DTYPE_INVALID) j.sp = j.dt;
    if (!wf__dtype_is_float(j.sp))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "softmax_precision %s must be a float dtype", wf_dtype_name(j.sp));
    if ((pk != NULL) != (pv != NULL)) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "past_key needs past_value");
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != j.B || pk->dims[1] != j.Hkv || pk->dims[3] != j.Dk ||
            pv->dims[0] != j.B || pv->dims[1] != j.Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != j.Dv)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "past_key %s and past_value %s must be (%" PRId64 ", %" PRId64
                                 ", past, head size)", wf__shape_str(pk->rank, pk->dims, b0),
                                 wf__shape_str(pv->rank, pv->dims, b1), j.B, j.Hkv);
        j.P = pk->dims[2];
    }
    j.T = j.P + j.Skv;
    if (np && (np->rank != 1 || np->dims[0] != j.B))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "nonpad_kv_seqlen %s must have one length per batch (%" PRId64 ")",
                             wf__shape_str(np->rank, np->dims, b0), j.B);
    int64_t full[4] = {j.B, j.Hq, j.Sq, j.T};
    if (mask && !mask_strides(mask, full, j.ms, &j.mlen))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "attn_mask %s does not broadcast to (%" PRId64 ", %" PRId64
                             ", %" PRId64 ", <= %" PRId64 ")", wf__shape_str(mask->rank, mask->dims, b0), j.B, j.Hq,
                             j.Sq, j.T);
    double scale = attn_scale(k, j.Dk);
    /* The reference scales Q and K each by sqrt(scale), rounded to the input dtype. */
    double rs = wf__ko_round(sqrt(scale), j.dt);
    wf_tensor *y, *opk, *opv, *oqk;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    wf__ku_attn_out_dims(Q->rank, j.B, j.Hq, j.Hkv, j.Sq, j.T, j.Dk, j.Dv, yd, pkd, pvd, qkd);
    WF__TRY(wf__kctx_output(k, 0, j.dt, Q->rank, yd, &y));
    WF__TRY(wf__kctx_output(k, 1, j.dt, 4, pkd, &opk));
    WF__TRY(wf__kctx_output(k, 2, j.dt, 4, pvd, &opv));
    WF__TRY(wf__kctx_output(k, 3, j.dt, 4, qkd, &oqk));
    int64_t nq = j.B * j.Hq * j.Sq;
    wf_status *s = wf__ko_alloc(k, nq * j.Dk, "Attention's scaled Q", &j.q);
    if (!s) s = wf__ko_alloc(k, opk->size, "Attention's scaled K", &j.kk);
    if (!s) s = wf__ko_alloc(k, opv->size, "Attention's V", &j.vv);
    if (!s) s = wf__ko_alloc(k, oqk->size, "Attention's scores", &j.qk);
    if (!s) s = wf__ko_alloc(k, oqk->size, "Attention's softmax", &j.x);
    if (!s) s = wf__ko_alloc(k, nq * j.Dv, "Attention's output", &j.y);
    if (!s) {
        for (int64_t b = 0, n = 0; b < j.B; b++)
            for (int64_t h = 0; h < j.Hq; h++)
                for (int64_t i = 0; i < j.Sq; i++)
                    for (int64_t d = 0; d < j.Dk; d++, n++)
                        j.q[n] = wf__ko_round(wf__load_f64(Q->data, Q->dtype, b * vq.bs + h * vq.hs + i * vq.ss + d) * rs,
                                              j.dt);
        append_cache(pk, K, &vk, j.P, rs, j.dt, opk->data, j.kk);
        append_cache(pv, V, &vv, j.P, 1.0, j.dt, opv->data, j.vv);
        int64_t grain = 65536 / (j.T * (j.Dk + j.Dv) + 1);
        wf__parallel_for(k, nq, grain > 0 ? grain : 1, attn_range, &j);
        wf__convert(j.qk, WF_F64, oqk->data, j.dt, oqk->size);
        /* Y back to Q's layout */
        for (int64_t b = 0, n = 0; b < j.B; b++)
            for (int64_t h = 0; h < j.Hq; h++)
                for (int64_t i = 0; i < j.Sq; i++)
                    for (int64_t d = 0; d < j.Dv; d++, n++) {
                        int64_t o = Q->rank == 4 ? n : (b * j.Sq + i) * j.Hq * j.Dv + h * j.Dv + d;
                        wf__store_f64(y->data, j.dt, o, j.y[n]);
                    }
    }
    wf__free(j.q);
    wf__free(j.kk);
    wf__free(j.vv);
    wf__free(j.qk);
    wf__free(j.x);
    wf__free(j.y);
    return s;
#undef A_I
}

/* ---- RotaryEmbedding -------------------------------------------------------------------------------- */

wf_status *wf__k_rotary_embedding(wf__kctx *k)
{
    char b0[SB], b1[SB];
    const wf_tensor *x = k->in[0], *cc = k->in[1], *sc = k->in[2], *pos = wf__ko_has(k, 3) ? k->in[3] : NULL;
    wf__ku_attn_view v;
    WF__TRY(view_of(k, x, wf__attr_i(k->op, k->attrs, "num_heads"), "input", &v));
    int64_t rd = wf__attr_i(k->op, k->attrs, "rotary_embedding_dim");
    if (rd == 0) rd = v.D;
    bool inter = wf__attr_i(k->op, k->attrs, "interleaved") != 0;
    int64_t half = rd / 2;
    if (rd < 0 || rd > v.D || rd % 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "rotary_embedding_dim %" PRId64 " must be even and <= head size %" PRId64,
                             rd, v.D);
    /* caches: (max_position, half) indexed by position_ids (B, S), or (B, S, half) without them */
    bool ok = cc->rank == sc->rank && cc->dims[cc->rank - 1] == half && sc->dims[sc->rank - 1] == half;
    if (pos) ok = ok && cc->rank == 2 && sc->dims[0] == cc->dims[0] && pos->rank == 2 && pos->dims[0] == v.B &&
                  pos->dims[1] == v.S;
    else ok = ok && cc->rank == 3 && cc->dims[0] == v.B && cc->dims[1] == v.S && sc->dims[0] == v.B && sc->dims[1] == v.S;
    if (!ok)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cos_cache %s and sin_cache %s do not fit input %s (%s, %" PRId64
                             " rotated dims)", wf__shape_str(cc->rank, cc->dims, b0), wf__shape_str(sc->rank, sc->dims, b1),
                             wf__shape_str(x->rank, x->dims, b1), pos ? "with position_ids" : "without position_ids", rd);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    wf_dtype dt = x->dtype;
    for (int64_t b = 0; b < v.B; b++)
        for (int64_t s = 0; s < v.S; s++) {
            int64_t row;
            if (pos) {
                row = wf__load_i64(pos->data, pos->dtype, b * v.S + s);
                if (row < 0 || row >= cc->dims[0])
                    return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "position id %" PRId64 " is outside the caches' %" PRId64
                                         " positions", row, cc->dims[0]);
            } else {
                row = b * v.S + s;
            }
            for (int64_t h = 0; h < v.H; h++) {
                int64_t base = b * v.bs + h * v.hs + s * v.ss;
                for (int64_t d = rd; d < v.D; d++)
                    wf__store_f64(y->data, dt, base + d, wf__load_f64(x->data, dt, base + d));
                for (int64_t i = 0; i < half; i++) {
                    int64_t i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half;
                    double c = wf__load_f64(cc->data, cc->dtype, row * half + i);
                    double sn = wf__load_f64(sc->data, sc->dtype, row * half + i);
                    double x1 = wf__load_f64(x->data, dt, base + i1), x2 = wf__load_f64(x->data, dt, base + i2);
                    double re = wf__ko_round(wf__ko_round(c * x1, dt) - wf__ko_round(sn * x2, dt), dt);
                    double im = wf__ko_round(wf__ko_round(sn * x1, dt) + wf__ko_round(c * x2, dt), dt);
                    wf__store_f64(y->data, dt, base + i1, re);
                    wf__store_f64(y->data, dt, base + i2, im);
                }
            }
        }
    return NULL;
}
