/*
 * CPU kernel for Einsum: the equation is parsed by ops_misc.c's parser with the actual shapes. An f32
 * Einsum of two operands is a batched matrix product (ein_gemm, below); anything else sums, for each
 * output element, the product of its operands over an odometer of the contracted labels in f64: general
 * (repeated labels, broadcast "..." dims, any number of operands) rather than fast.
 */
#include "backends/cpu/k_dnnl.h" /* dnnl_sgemm */
#include "backends/cpu/k_misc.h"
#include "backends/cpu/k_shape.h" /* wf__k_strided_copy */
#include "ops/kutil_einsum.h"

#include <inttypes.h>
#include <stdio.h>

/* ---- two f32 operands as a batched GEMM ------------------------------------------------------------------ */

/*
 * Every label of C = einsum(A, B) is one of: batch (in A, B and the output), M (A and the output), N (B
 * and the output) or K (not in the output: summed). With wf__einsum_walk's strides (0 where an operand
 * lacks a label or broadcasts it, the sum of its axes' strides where a label repeats: a diagonal) A reads
 * as [batch][M][K] and B as [batch][K][N]: a label that only one operand has and the output lacks is a K
 * label the other operand repeats along, which sums that operand first, as the equation says. So C is one
 * GEMM a batch: an operand already laid out so ([batch][M][K] or [batch][K][M], the same for B) is read
 * where it lies, with sgemm's transpose flags; otherwise it is copied into that layout first, and C is
 * copied into the output's label order unless that is [batch][M][N]. The f64 loop took 409 ms for
 * ij,jk->ik of 256 x 1024 x 256 (2 threads, Zen 3; ONNX Runtime 1.3 ms).
 */
#define EIN_SMALL 4096 /* multiply-adds a batch under which a plain loop beats sgemm's call */

typedef struct {
    int nl[4];             /* labels of each class: batch, M, N, K */
    int lab[4][WF__EINSUM_LABELS];
    int64_t dim[4];        /* product of each class's dims */
} ein_classes;

/* Whether operand i's labels of classes c0 then c1 (within each, in the order ein_classes lists them) are
 * laid out contiguously in that order after the batch labels: its strides are those of a packed
 * [batch][c0][c1] array. */
static bool ein_packed(const ein_classes *c, const int64_t *st, const int64_t *dims, int c0, int c1)
{
    int order[3] = {0, c0, c1};
    int64_t want = 1;
    for (int q = 2; q >= 0; q--)
        for (int i = c->nl[order[q]] - 1; i >= 0; i--) {
            int l = c->lab[order[q]][i];
            if (dims[l] != 1 && st[l] != want) return false;
            want *= dims[l];
        }
    return true;
}

/* The strided copy of operand x into the packed [batch][c0][c1] layout */
static void ein_pack(wf__kctx *k, float *dst, const float *x, const ein_classes *c, const int64_t *st,
                     const int64_t *dims, int c0, int c1)
{
    int order[3] = {0, c0, c1}, r = 0;
    int64_t d[WF__EINSUM_LABELS], sb[WF__EINSUM_LABELS];
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < c->nl[order[q]]; i++) {
            int l = c->lab[order[q]][i];
            d[r] = dims[l];
            sb[r++] = st[l] * (int64_t)sizeof(float);
        }
    if (r == 0) {
        dst[0] = x[0];
        return;
    }
    wf__k_strided_copy(k, dst, x, r, d, sb, sizeof(float));
}

typedef struct {
    const float *a, *b;
    float *c;
    int64_t M, N, K, bsa, bsb, bsc; /* batch strides (floats); bsa or bsb 0: the operand is shared */
    int64_t lda, ldb;
    char ta, tb;                    /* 'T': the operand is stored [K][M] (A) or [N][K] (B) */
    int64_t mblocks, mb;            /* each batch's rows in mblocks tasks of mb rows */
} ein_gemm_job;

static void ein_gemm_range(void *arg, int64_t t0, int64_t t1)
{
    const ein_gemm_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        int64_t bt = t / j->mblocks, m0 = t % j->mblocks * j->mb, m1 = m0 + j->mb < j->M ? m0 + j->mb : j->M;
        const float *a = j->a + bt * j->bsa + (j->ta == 'T' ? m0 : m0 * j->lda), *b = j->b + bt * j->bsb;
        float *c = j->c + bt * j->bsc + m0 * j->N;
        if (j->M * j->N * j->K < EIN_SMALL) {
            for (int64_t m = 0; m < m1 - m0; m++)
                for (int64_t n = 0; n < j->N; n++) {
                    float acc = 0;
                    for (int64_t q = 0; q < j->K; q++)
                        acc += a[j->ta == 'T' ? q * j->lda + m : m * j->lda + q] *
                               b[j->tb == 'T' ? n * j->ldb + q : q * j->ldb + n];
                    c[m * j->N + n] = acc;
                }
        } else {
            (void)dnnl_sgemm(j->ta, j->tb, m1 - m0, j->N, j->K, 1.0f, a, j->lda, b, j->ldb, 0.0f, c, j->N);
        }
    }
}

/* Runs the Einsum when it is two f32 operands (then *done), else leaves it to the f64 loop. */
static wf_status *ein_gemm(wf__kctx *k, const wf__einsum *e, const int64_t (*st)[WF__EINSUM_LABELS], bool *done)
{
    *done = false;
    if (k->n_in != 2 || k->in[0]->dtype != WF_F32 || k->in[1]->dtype != WF_F32) return NULL;
    ein_classes c = {{0}};
    const int64_t *dims = e->label_dim;
    for (int q = 0; q < 4; q++) c.dim[q] = 1;
    /* batch, M and N in the output's order; K in A's (then B's, for labels A lacks) */
    bool seen[WF__EINSUM_LABELS] = {false};
    for (int d = 0; d < e->out_rank; d++) {
        int l = e->out_label[d];
        bool ina = false, inb = false;
        for (int a = 0; a < e->in_rank[0]; a++) ina |= e->in_label[0][a] == l;
        for (int a = 0; a < e->in_rank[1]; a++) inb |= e->in_label[1][a] == l;
        int cl = ina && inb ? 0 : ina ? 1 : inb ? 2 : -1;
        if (cl < 0 || seen[l]) return NULL;
        seen[l] = true;
        c.lab[cl][c.nl[cl]++] = l;
        c.dim[cl] *= dims[l];
    }
    for (int i = 0; i < 2; i++)
        for (int a = 0; a < e->in_rank[i]; a++) {
            int l = e->in_label[i][a];
            if (seen[l]) continue;
            seen[l] = true;
            c.lab[3][c.nl[3]++] = l;
            c.dim[3] *= dims[l];
        }
    int64_t Bt = c.dim[0], M = c.dim[1], N = c.dim[2], K = c.dim[3];
    /* A as [batch][M][K] or [batch][K][M] where it lies, B as [batch][K][N] or [batch][N][K]; else copies */
    bool a_mk = ein_packed(&c, st[0], dims, 1, 3), a_km = !a_mk && ein_packed(&c, st[0], dims, 3, 1);
    bool b_kn = ein_packed(&c, st[1], dims, 3, 2), b_nk = !b_kn && ein_packed(&c, st[1], dims, 2, 3);
    /* A copy that repeats an operand far past its size (labels of the other operand only, summed, as in
     * i,j->: the product of both lengths) would need that memory; the f64 loop needs none */
    int64_t ca = 0, cb = 0;
    if ((!a_mk && !a_km && (__builtin_mul_overflow(Bt, M, &ca) || __builtin_mul_overflow(ca, K, &ca) ||
                            ca > 2 * k->in[0]->size + 65536)) ||
        (!b_kn && !b_nk && (__builtin_mul_overflow(Bt, K, &cb) || __builtin_mul_overflow(cb, N, &cb) ||
                            cb > 2 * k->in[1]->size + 65536)))
        return NULL;
    int64_t yd[WF_MAX_RANK];
    for (int d = 0; d < e->out_rank; d++) yd[d] = dims[e->out_label[d]];
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_F32, e->out_rank, yd, &y));
    *done = true;
    if (y->size == 0) return NULL;
    if (K == 0) {
        memset(y->data, 0, y->bytes); /* a sum over nothing */
        return NULL;
    }
    const float *x0 = k->in[0]->data, *x1 = k->in[1]->data;
    /* C in the output where the output is [batch][M][N] */
    int64_t ost[WF__EINSUM_LABELS] = {0}, s = 1;
    for (int q = 2; q >= 0; q--)
        for (int i = c.nl[q] - 1; i >= 0; i--) ost[c.lab[q][i]] = s, s *= dims[c.lab[q][i]];
    bool direct = true;
    for (int d = 0, q = 0, i = 0; d < e->out_rank; d++) {
        while (q < 3 && i >= c.nl[q]) q++, i = 0;
        direct &= q < 3 && c.lab[q][i++] == e->out_label[d];
    }
    size_t na = a_mk || a_km ? 0 : (size_t)(Bt * M * K), nb = b_kn || b_nk ? 0 : (size_t)(Bt * K * N),
           nc = direct ? 0 : (size_t)(Bt * M * N);
    float *buf = na + nb + nc ? wf__malloc(sizeof(float) * (na + nb + nc)) : NULL;
    if (na + nb + nc && !buf)
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for Einsum's packed operands (%zu bytes)",
                             sizeof(float) * (na + nb + nc));
    float *pa = buf, *pb = buf + na, *pc = direct ? y->data : buf + na + nb;
    if (na) ein_pack(k, pa, x0, &c, st[0], dims, 1, 3);
    if (nb) ein_pack(k, pb, x1, &c, st[1], dims, 3, 2);
    /* a shared operand (no batch label of its own: stride 0 over every batch label) is not repeated */
    bool a_shared = true, b_shared = true;
    for (int i = 0; i < c.nl[0]; i++) {
        a_shared &= st[0][c.lab[0][i]] == 0 || dims[c.lab[0][i]] == 1;
        b_shared &= st[1][c.lab[0][i]] == 0 || dims[c.lab[0][i]] == 1;
    }
    ein_gemm_job j = {.a = na ? pa : x0, .b = nb ? pb : x1, .c = pc, .M = M, .N = N, .K = K,
                      .bsa = a_shared && !na ? 0 : M * K, .bsb = b_shared && !nb ? 0 : K * N, .bsc = M * N,
                      .lda = a_km ? M : K, .ldb = b_nk ? K : N, .ta = a_km ? 'T' : 'N', .tb = b_nk ? 'T' : 'N'};
    /* each batch's rows split so that every thread has work when the batches are fewer than the threads */
    int threads = wf__intra_threads(k);
    j.mblocks = Bt >= threads || M * N * K < EIN_SMALL ? 1 : (threads + Bt - 1) / Bt;
    if (j.mblocks > M) j.mblocks = M;
    j.mb = (M + j.mblocks - 1) / j.mblocks;
    j.mblocks = (M + j.mb - 1) / j.mb;
    int64_t per = M * N * K / j.mblocks, grain = per >= WF__KM_GRAIN ? 1 : WF__KM_GRAIN / (per > 0 ? per : 1);
    wf__parallel_for(k, Bt * j.mblocks, grain, ein_gemm_range, &j);
    if (!direct) {
        int64_t sb[WF_MAX_RANK];
        for (int d = 0; d < e->out_rank; d++) sb[d] = ost[e->out_label[d]] * (int64_t)sizeof(float);
        wf__k_strided_copy(k, y->data, pc, e->out_rank, yd, sb, sizeof(float));
    }
    wf__free(buf);
    return NULL;
}

typedef struct {
    const wf__einsum *e;
    int n_in;
    const void *const *x;   /* widened operands */
    bool is_int;
    void *y;
    int64_t st[WF__EINSUM_MAX_IN][WF__EINSUM_LABELS]; /* element stride of each label in each operand */
    int n_sum;
    int sum_label[WF__EINSUM_LABELS];
} ein_job;

static void ein_range(void *arg, int64_t b, int64_t e)
{
    const ein_job *j = arg;
    const wf__einsum *E = j->e;
    int n = j->n_in;
    for (int64_t o = b; o < e; o++) {
        int64_t base[WF__EINSUM_MAX_IN] = {0}, r = o;
        for (int d = E->out_rank - 1; d >= 0; d--) {
            int l = E->out_label[d];
            int64_t c = r % E->label_dim[l];
            r /= E->label_dim[l];
            for (int i = 0; i < n; i++) base[i] += c * j->st[i][l];
        }
        int64_t idx[WF__EINSUM_LABELS] = {0}, off[WF__EINSUM_MAX_IN];
        memcpy(off, base, sizeof(int64_t) * (size_t)n);
        double accf = 0;
        uint64_t acci = 0;
        bool empty = false;
        for (int s = 0; s < j->n_sum; s++)
            if (E->label_dim[j->sum_label[s]] == 0) empty = true;
        while (!empty) {
            if (j->is_int) {
                uint64_t p = 1;
                for (int i = 0; i < n; i++) p *= (uint64_t)((const int64_t *)j->x[i])[off[i]];
                acci += p;
            } else {
                double p = 1;
                for (int i = 0; i < n; i++) p *= ((const double *)j->x[i])[off[i]];
                accf += p;
            }
            int s = j->n_sum - 1;
            for (; s >= 0; s--) {
                int l = j->sum_label[s];
                for (int i = 0; i < n; i++) off[i] += j->st[i][l];
                if (++idx[s] < E->label_dim[l]) break;
                for (int i = 0; i < n; i++) off[i] -= j->st[i][l] * E->label_dim[l];
                idx[s] = 0;
            }
            if (s < 0) break;
        }
        if (j->is_int) ((int64_t *)j->y)[o] = (int64_t)acci;
        else ((double *)j->y)[o] = accf;
    }
}

wf_status *wf__k_einsum(wf__kctx *k)
{
    char err[256];
    int n = k->n_in;
    for (int i = 0; i < n; i++)
        if (k->in[i]->dtype != k->in[0]->dtype)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %d is %s but input 0 is %s", i,
                                 wf_dtype_name(k->in[i]->dtype), wf_dtype_name(k->in[0]->dtype));
    wf__einsum e;
    const char *eq = wf__attr_s(k->op, k->attrs, "equation");
    if (!wf__einsum_parse_tensors(eq, n, k->in, &e, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "equation '%s': %s", eq, err);
    if (n == 2) {
        int64_t st2[2][WF__EINSUM_LABELS];
        int sum2[WF__EINSUM_LABELS];
        (void)wf__einsum_walk(&e, n, k->in, st2, sum2);
        bool done;
        WF__TRY(ein_gemm(k, &e, (const int64_t(*)[WF__EINSUM_LABELS])st2, &done));
        if (done) return NULL;
    }
    ein_job *j = wf__calloc(1, sizeof *j);
    void *x[WF__EINSUM_MAX_IN] = {0};
    if (!j) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the Einsum plan");
    j->e = &e;
    j->n_in = n;
    j->is_int = !wf__dtype_is_float(k->in[0]->dtype);
    wf_status *s = NULL;
    for (int i = 0; i < n && !s; i++) s = wf__km_widen(k, k->in[i], j->is_int, &x[i]);
    j->x = (const void *const *)x;
    j->n_sum = wf__einsum_walk(&e, n, k->in, j->st, j->sum_label);
    int64_t yd[WF_MAX_RANK];
    for (int d = 0; d < e.out_rank; d++) yd[d] = e.label_dim[e.out_label[d]];
    int64_t ny = wf__numel(e.out_rank, yd);
    if (!s) s = wf__km_alloc8(k, ny, "the Einsum output", &j->y);
    if (!s) {
        int64_t work = 1;
        for (int q = 0; q < j->n_sum; q++) work *= e.label_dim[j->sum_label[q]] ? e.label_dim[j->sum_label[q]] : 1;
        int64_t grain = WF__KM_GRAIN / (work * n);
        wf__parallel_for(k, ny, grain > 0 ? grain : 1, ein_range, j);
        wf_tensor *y;
        s = wf__kctx_output(k, 0, k->in[0]->dtype, e.out_rank, yd, &y);
        if (!s) wf__convert(j->y, j->is_int ? WF_I64 : WF_F64, y->data, y->dtype, ny);
    }
    for (int i = 0; i < n; i++) wf__free(x[i]);
    wf__free(j->y);
    wf__free(j);
    return s;
}
