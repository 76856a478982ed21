/*
 * CPU kernel for Einsum: the equation is parsed by ops_misc.c's parser with the actual shapes, then each
 * output element sums the product of its operands over an odometer of the contracted labels. General
 * (repeated labels, broadcast "..." dims, any number of operands) rather than fast.
 */
#include "backends/cpu/k_misc.h"
#include "ops/kutil_einsum.h"

#include <inttypes.h>
#include <stdio.h>

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
