/*
 * Initializers (wf_init_tensor): constant fills and seeded random fills for weights, Keras's Glorot and
 * He variants included. The generator is our own (splitmix64) and every value is computed in double
 * with IEEE arithmetic, sqrt and log only, so a seed means the same tensor on every machine.
 */
#include <math.h>

#include "core/core.h"

/* The stddev of a unit normal truncated to [-2, 2]: dividing by it gives the truncated draws the
 * variance asked for (Keras's VarianceScaling constant). */
#define TRUNC_STDDEV 0.87962566103423978

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* [0, 1) with 53 random bits */
static double uniform01(rng *r) { return (double)(splitmix64(&r->state) >> 11) * 0x1.0p-53; }

/* Marsaglia's polar method, one value per call (the second of each pair is dropped, so a value never
 * depends on whether the caller asked for an odd or even count). */
static double normal01(rng *r)
{
    for (;;) {
        double u = 2 * uniform01(r) - 1, v = 2 * uniform01(r) - 1, s = u * u + v * v;
        if (s > 0 && s < 1) return u * sqrt(-2 * log(s) / s);
    }
}

static double truncated01(rng *r)
{
    for (;;) {
        double z = normal01(r);
        if (fabs(z) <= 2) return z;
    }
}

static void fans(int rank, const int64_t *dims, double *fan_in, double *fan_out)
{
    if (rank == 0) {
        *fan_in = *fan_out = 1;
    } else if (rank == 1) {
        *fan_in = *fan_out = (double)dims[0];
    } else if (rank == 2) {
        *fan_in = (double)dims[0];
        *fan_out = (double)dims[1];
    } else { /* OIHW: [out, in, k...] */
        double rf = 1;
        for (int i = 2; i < rank; i++) rf *= (double)dims[i];
        *fan_in = (double)dims[1] * rf;
        *fan_out = (double)dims[0] * rf;
    }
}

static const char *kind_name(wf_init_kind k)
{
    static const char *const names[] = {"?",       "zeros",          "ones",           "constant",
                                        "uniform", "normal",         "truncated_normal", "glorot_uniform",
                                        "glorot_normal", "he_uniform", "he_normal"};
    return k >= WF_INIT_ZEROS && k <= WF_INIT_HE_NORMAL ? names[k] : "?";
}

wf_status *wf_init_tensor(const wf_init *spec, wf_dtype dtype, int rank, const int64_t *dims, wf_tensor **out)
{
    if (!spec || !out || (rank > 0 && !dims))
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor: NULL spec, dims or out");
    wf_init_kind k = spec->kind;
    if (k < WF_INIT_ZEROS || k > WF_INIT_HE_NORMAL)
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor: kind %d is not an initializer kind", (int)k);
    const char *kn = kind_name(k);
    if (!wf__dtype_valid(dtype))
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor (%s): dtype %d is not a dtype", kn, (int)dtype);
    if (rank < 0 || rank > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor (%s): rank %d is not in [0, %d]", kn, rank, WF_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor (%s): dim %d is %lld, negative", kn, i,
                              (long long)dims[i]);
    bool random = k >= WF_INIT_UNIFORM;
    if (random && !wf__dtype_is_float(dtype))
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_init_tensor (%s): random initializers fill f32, f64, f16 or bf16, not %s", kn,
                          wf_dtype_name(dtype));
    if (k == WF_INIT_CONSTANT && isnan(spec->value) && !wf__dtype_is_float(dtype))
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor (constant): value NaN for %s", wf_dtype_name(dtype));
    if (k == WF_INIT_UNIFORM && (!isfinite(spec->minval) || !isfinite(spec->maxval) || spec->minval > spec->maxval))
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_init_tensor (uniform): minval %g and maxval %g must be finite with minval <= maxval",
                          spec->minval, spec->maxval);
    if ((k == WF_INIT_NORMAL || k == WF_INIT_TRUNCATED_NORMAL) &&
        (!isfinite(spec->mean) || !isfinite(spec->stddev) || spec->stddev < 0))
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_init_tensor (%s): mean %g and stddev %g must be finite with stddev >= 0", kn,
                          spec->mean, spec->stddev);
    double fi, fo;
    fans(rank, dims, &fi, &fo);
    if (k >= WF_INIT_GLOROT_UNIFORM && (k <= WF_INIT_GLOROT_NORMAL ? fi + fo : fi) <= 0) {
        char b[160];
        return wf__status(WF_INVALID_ARGUMENT, "wf_init_tensor (%s): shape %s has fan_in %g and fan_out %g", kn,
                          wf__shape_str(rank, dims, b), fi, fo);
    }
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dtype, rank, dims, NULL, &t));
    int64_t n = wf_tensor_size(t);
    void *d = wf_tensor_data(t);
    rng r = {spec->seed};
    r.state = splitmix64(&r.state);
    double lo = 0, hi = 0, mean = 0, sd = 0;
    switch (k) {
    case WF_INIT_UNIFORM: lo = spec->minval, hi = spec->maxval; break;
    case WF_INIT_GLOROT_UNIFORM: hi = sqrt(6 / (fi + fo)), lo = -hi; break;
    case WF_INIT_HE_UNIFORM: hi = sqrt(6 / fi), lo = -hi; break;
    case WF_INIT_NORMAL:
    case WF_INIT_TRUNCATED_NORMAL: mean = spec->mean, sd = spec->stddev; break;
    case WF_INIT_GLOROT_NORMAL: sd = sqrt(2 / (fi + fo)) / TRUNC_STDDEV; break;
    case WF_INIT_HE_NORMAL: sd = sqrt(2 / fi) / TRUNC_STDDEV; break;
    default: break;
    }
    for (int64_t i = 0; i < n; i++) {
        double v;
        switch (k) {
        case WF_INIT_ZEROS: v = 0; break;
        case WF_INIT_ONES: v = 1; break;
        case WF_INIT_CONSTANT: v = spec->value; break;
        case WF_INIT_UNIFORM:
        case WF_INIT_GLOROT_UNIFORM:
        case WF_INIT_HE_UNIFORM: v = lo + (hi - lo) * uniform01(&r); break;
        case WF_INIT_NORMAL: v = mean + sd * normal01(&r); break;
        default: v = mean + sd * truncated01(&r); break;
        }
        wf__store_f64(d, dtype, i, v);
    }
    *out = t;
    return NULL;
}
