/*
 * CPU kernels of the training ops (graph/ops_train.c): ApplyAdam as one fused, vectorised pass (blocked
 * around a scalar sqrt, see below) in f32 and f64, and StatelessRandomUniform through the shared counter
 * hash of ops/kutil_random.h. Both split large tensors over the intra-op pool in contiguous ranges,
 * like the elementwise kernels.
 */
/* ApplyAdam must equal the composite graph (one rounding per operation), and gnu11 lets GCC contract
 * a * b + c into an FMA, which would round once: keep every operation separate in this file. */
#pragma GCC optimize("fp-contract=off")

#include <math.h>

#include "backends/cpu/k_elementwise.h"
#include "ops/kutil_random.h"
#include "ops/kutil_train.h"

/* ---- ApplyAdam ------------------------------------------------------------------------------------- */

typedef struct adam_job {
    const void *w, *m, *v, *g;
    void *wn, *mn, *vn;
    double lr, b1, b2, eps;
} adam_job;

/* The outputs may be the inputs' own buffers (element i is read before it is written, and no other
 * element is touched), so the loop is safe to vectorise as it is; with -fno-math-errno (CMakeLists)
 * the square root vectorises too. */
#define ADAM_BODY(T, SQRT)                                                                         \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                          \
        T gi = g[i], mi = m[i] + (gi - m[i]) * b1, vi = v[i] + (gi * gi - v[i]) * b2;              \
        mn[i] = mi;                                                                                \
        vn[i] = vi;                                                                                \
        wn[i] = w[i] - (mi * lr) / (SQRT(vi) + eps);                                               \
    }

WF__VEC static void adam_f32(const float *w, const float *m, const float *v, const float *g, float *wn, float *mn,
                             float *vn, float lr, float b1, float b2, float eps, int64_t n)
{
    ADAM_BODY(float, sqrtf)
}

WF__VEC static void adam_f64(const double *w, const double *m, const double *v, const double *g, double *wn,
                             double *mn, double *vn, double lr, double b1, double b2, double eps, int64_t n)
{
    ADAM_BODY(double, sqrt)
}

static void adam_f32_range(void *arg, int64_t b, int64_t e)
{
    const adam_job *j = arg;
    adam_f32((const float *)j->w + b, (const float *)j->m + b, (const float *)j->v + b, (const float *)j->g + b,
             (float *)j->wn + b, (float *)j->mn + b, (float *)j->vn + b, (float)j->lr, (float)j->b1, (float)j->b2,
             (float)j->eps, e - b);
}

static void adam_f64_range(void *arg, int64_t b, int64_t e)
{
    const adam_job *j = arg;
    adam_f64((const double *)j->w + b, (const double *)j->m + b, (const double *)j->v + b, (const double *)j->g + b,
             (double *)j->wn + b, (double *)j->mn + b, (double *)j->vn + b, j->lr, j->b1, j->b2, j->eps, e - b);
}

static wf_status *k_apply_adam(wf__kctx *k)
{
    const wf_tensor *w = k->in[0];
    char s1[160], s2[160];
    if (w->dtype != WF_F32 && w->dtype != WF_F64)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input 'w' is %s; the CPU kernel takes f32 or f64",
                             wf_dtype_name(w->dtype));
    int i = wf__ku_adam_bad_input(k->in);
    if (i >= 0) {
        const wf_tensor *t = k->in[i];
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s%s must be %s%s", wf__ku_adam_inputs[i],
                             wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, s1), wf_dtype_name(w->dtype),
                             i < 4 ? wf__shape_str(w->rank, w->dims, s2) : " with one element");
    }
    wf_tensor *wn, *mn, *vn;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, w->dtype, w->rank, w->dims, &wn, NULL));
    WF__TRY(wf__kctx_output_reuse(k, 1, 1, w->dtype, w->rank, w->dims, &mn, NULL));
    WF__TRY(wf__kctx_output_reuse(k, 2, 2, w->dtype, w->rank, w->dims, &vn, NULL));
    if (!w->size) return NULL;
    adam_job j = {w->data, k->in[1]->data, k->in[2]->data, k->in[3]->data, wn->data, mn->data, vn->data,
                  wf__load_f64(k->in[4]->data, w->dtype, 0), wf__load_f64(k->in[5]->data, w->dtype, 0),
                  wf__load_f64(k->in[6]->data, w->dtype, 0), wf__load_f64(k->in[7]->data, w->dtype, 0)};
    wf__range_fn fn = w->dtype == WF_F32 ? adam_f32_range : adam_f64_range;
    /* a sqrt and a division per element: the transcendental grain */
    if (w->size >= 2 * WF__EW_GRAIN_HEAVY)
        wf__parallel_for(k, w->size, WF__EW_GRAIN_HEAVY, fn, &j);
    else
        fn(&j, 0, w->size);
    return NULL;
}

/* ---- StatelessRandomUniform ---------------------------------------------------------------------- */

typedef struct rng_job {
    void *y;
    wf_dtype dt;
    uint64_t key;
} rng_job;

WF__VEC static void rng_f32(float *y, uint64_t key, int64_t b, int64_t e)
{
    for (int64_t i = b; i < e; i++) y[i - b] = wf__rng_f32(wf__rng_bits(key, (uint64_t)i));
}

WF__VEC static void rng_f64(double *y, uint64_t key, int64_t b, int64_t e)
{
    for (int64_t i = b; i < e; i++) y[i - b] = wf__rng_f64(wf__rng_bits(key, (uint64_t)i));
}

static void rng_range(void *arg, int64_t b, int64_t e)
{
    const rng_job *j = arg;
    switch (j->dt) {
    case WF_F32: rng_f32((float *)j->y + b, j->key, b, e); break;
    case WF_F64: rng_f64((double *)j->y + b, j->key, b, e); break;
    case WF_F16:
        for (int64_t i = b; i < e; i++) ((uint16_t *)j->y)[i] = wf__rng_f16(wf__rng_f32(wf__rng_bits(j->key, (uint64_t)i)));
        break;
    default:
        for (int64_t i = b; i < e; i++) ((uint16_t *)j->y)[i] = wf__rng_bf16(wf__rng_f32(wf__rng_bits(j->key, (uint64_t)i)));
        break;
    }
}

static wf_status *k_random_uniform(wf__kctx *k)
{
    const wf_tensor *like = k->in[0], *c = k->in[1];
    char s1[160];
    if (c->dtype != WF_I64 || c->size != 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input 'counter' %s%s must be an i64 scalar",
                             wf_dtype_name(c->dtype), wf__shape_str(c->rank, c->dims, s1));
    if (!wf__dtype_is_float(like->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input 'like' is %s; expected a float dtype",
                             wf_dtype_name(like->dtype));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, like->dtype, like->rank, like->dims, &y));
    if (!y->size) return NULL;
    rng_job j = {y->data, like->dtype,
                 wf__rng_key(wf__attr_i(k->op, k->attrs, "seed"), ((const int64_t *)c->data)[0])};
    if (y->size >= 2 * WF__EW_GRAIN_HEAVY)
        wf__parallel_for(k, y->size, WF__EW_GRAIN_HEAVY, rng_range, &j);
    else
        rng_range(&j, 0, y->size);
    return NULL;
}

const wf__kernel_def wf__cpu_kernels_train[] = {
    {"ApplyAdam", "CPU", WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64), 0, k_apply_adam, NULL, WF__K_INPLACE},
    {"StatelessRandomUniform", "CPU", WF__DT_FLOATS, 0, k_random_uniform, NULL, 0},
    {0},
};
