/*
 * Host side of the CUDA training ops (graph/ops_train.c): ApplyAdam in f32 and f64 and
 * StatelessRandomUniform in every float dtype, with the kernel table. Semantics are
 * src/backends/cpu/k_train.c's; the device code is cuda_train.cu.
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_train.h"
#include "ops/kutil_random.h"
#include "ops/kutil_train.h"

static wf_status *k_apply_adam(wf__kctx *k)
{
    const wf_tensor *w = k->in[0];
    char s1[160], s2[160];
    int i = wf__ku_adam_bad_input(k->in);
    if (i >= 0) {
        const wf_tensor *t = k->in[i];
        return i < 4 ? cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s must match w %s", wf__ku_adam_inputs[i],
                                          cu_tstr(t, s1), cu_tstr(w, s2))
                     : cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s must be a %s scalar", wf__ku_adam_inputs[i],
                                          cu_tstr(t, s1), cu_dtype_name(w->dtype));
    }
    wf_status *s = cu_enter(k);
    if (s) return s;
    wf_tensor *o[3];
    for (int j = 0; j < 3; j++)
        if ((s = cu_host->kctx_output(k, j, w->dtype, w->rank, w->dims, &o[j]))) return s;
    if (!w->size) return NULL;
    wf_tensor *const *in = k->in;
    return cu_check(k,
                    cuk_apply_adam(cu_of(k)->compute, w->dtype, cu_ptr(in[0]), cu_ptr(in[1]), cu_ptr(in[2]),
                                   cu_ptr(in[3]), cu_ptr(in[4]), cu_ptr(in[5]), cu_ptr(in[6]), cu_ptr(in[7]),
                                   cu_ptr(o[0]), cu_ptr(o[1]), cu_ptr(o[2]), w->size),
                    "ApplyAdam kernel");
}

static wf_status *k_random_uniform(wf__kctx *k)
{
    const wf_tensor *like = k->in[0], *c = k->in[1];
    char s1[160];
    if (c->dtype != WF_I64 || c->size != 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'counter' %s must be an i64 scalar", cu_tstr(c, s1));
    wf_status *s = cu_enter(k);
    if (s) return s;
    /* counter is a host-memory input: normally on the host already */
    int64_t counter;
    if (c->data) memcpy(&counter, c->data, sizeof counter);
    else if ((s = cu_read(k, c, &counter, sizeof counter))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, like->dtype, like->rank, like->dims, &y)) || !y->size) return s;
    uint64_t key = wf__rng_key(cu_host->attr_get(k->op, k->attrs, "seed")->i, counter);
    return cu_check(k, cuk_random_uniform(cu_of(k)->compute, like->dtype, cu_ptr(y), y->size, key),
                    "StatelessRandomUniform kernel");
}

const wf__kernel_def cu_kernels_train[] = {
    {"ApplyAdam", "GPU", WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64), 0, k_apply_adam, NULL, 0},
    {"StatelessRandomUniform", "GPU", WF__DT_FLOATS, 0, k_random_uniform, NULL, 0},
    {0},
};
