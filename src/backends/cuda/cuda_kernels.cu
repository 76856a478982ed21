/*
 * The CUDA backend's device code: elementwise, Cast, Where, BiasAdd, strided copy, Gather, softmax and
 * reductions, one kernel template per storage type with the op chosen at run time (one compiled kernel
 * serves every op of a family, which keeps the build short). Semantics follow src/backends/cpu/ and the
 * OpenCL kernels: f16/bf16 compute in f32, integers wrap, NaN propagates through Max/Min.
 */
#include "cuda_dev.cuh"

namespace {

/* ---- binary ------------------------------------------------------------------------------------------- */

__device__ __forceinline__ uint64_t ipow(uint64_t b, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

template <typename S> __device__ __forceinline__ typename tr<S>::C bin_op(int op, typename tr<S>::C x, typename tr<S>::C y)
{
    typedef typename tr<S>::C C;
    if constexpr (tr<S>::kind == K_FLT) {
        switch (op) {
        case CUK_ADD: return x + y;
        case CUK_SUB: return x - y;
        case CUK_MUL: return x * y;
        case CUK_DIV: return x / y;
        case CUK_POW: return pow(x, y);
        /* NaN wins, as numpy.maximum / minimum */
        case CUK_MAX: return (x >= y || is_nan(x)) ? x : y;
        case CUK_MIN: return (x <= y || is_nan(x)) ? x : y;
        case CUK_MOD: { /* Python's %: the result takes the divisor's sign */
            C r = fmod(x, y);
            return r != 0 ? (((r < 0) != (y < 0)) ? r + y : r) : copysign((C)0, y);
        }
        case CUK_FMOD: return fmod(x, y);
        case CUK_PRELU: return x > 0 ? x : x * y;
        default: return 0;
        }
    } else if constexpr (tr<S>::kind == K_BOOL) {
        switch (op) {
        case CUK_AND: return (x != 0) & (y != 0);
        case CUK_OR: return (x != 0) | (y != 0);
        case CUK_XOR: return (x != 0) ^ (y != 0);
        default: return 0;
        }
    } else {
        /* wrapping arithmetic in 64-bit unsigned; zero divisors and negative exponents are reported by
         * cuk_int_check (a zero divisor gives 0 here), and -1 divisors take their own path so that
         * MIN / -1 cannot trap */
        uint64_t ux = (uint64_t)(int64_t)x, uy = (uint64_t)(int64_t)y;
        switch (op) {
        case CUK_ADD: return (C)(ux + uy);
        case CUK_SUB: return (C)(ux - uy);
        case CUK_MUL: return (C)(ux * uy);
        case CUK_POW: return (C)ipow(ux, uy);
        case CUK_MAX: return x > y ? x : y;
        case CUK_MIN: return x < y ? x : y;
        case CUK_PRELU: return x > 0 ? x : (C)(ux * uy);
        case CUK_BAND: return (C)(ux & uy);
        case CUK_BOR: return (C)(ux | uy);
        case CUK_BXOR: return (C)(ux ^ uy);
        /* BitShift: an amount < 0 or >= the width leaves only the sign fill (the CPU's rule) */
        case CUK_SHL: return uy >= sizeof(S) * 8 ? (C)0 : (C)(ux << uy);
        case CUK_SHR:
            if (uy >= sizeof(S) * 8) return (tr<S>::kind == K_SINT && (int64_t)x < 0) ? (C)-1 : (C)0;
            return (C)(x >> y); /* arithmetic for signed types */
        default: break;
        }
        if (y == 0) return 0;
        if constexpr (tr<S>::kind == K_SINT) {
            if (y == -1) return op == CUK_DIV ? (C)(0 - ux) : (C)0;
            switch (op) {
            case CUK_DIV: return x / y;
            case CUK_MOD: {
                C r = x % y;
                return (r != 0 && ((r < 0) != (y < 0))) ? (C)(r + y) : r;
            }
            case CUK_FMOD: return x % y;
            default: return 0;
            }
        } else {
            switch (op) {
            case CUK_DIV: return x / y;
            case CUK_MOD: case CUK_FMOD: return x % y;
            default: return 0;
            }
        }
    }
}

/* mode 1: a zero, 2: a negative value is reported in err as (site, value, element) */
template <typename S>
__global__ void k_int_check(const S *b, int64_t n, int mode, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(i, n) {
        int64_t v = (int64_t)tr<S>::ld(b, i);
        if (mode == 1 ? v == 0 : v < 0) cuk_flag(err, site, v, i, 0);
    }
}

template <typename S> __global__ void k_binary(int op, const S *a, const S *b, void *yv, cuk_walk w, int64_t n)
{
    typedef typename tr<S>::C C;
    bool cmp = op >= CUK_EQ && op <= CUK_GE;
    GRID_LOOP(i, n) {
        int64_t o[3];
        walk_offs(w, i, 2, o);
        C x = tr<S>::ld(a, o[0]), y = tr<S>::ld(b, o[1]);
        if (cmp) {
            bool r;
            switch (op) {
            case CUK_EQ: r = x == y; break;
            case CUK_NE: r = x != y; break;
            case CUK_LT: r = x < y; break;
            case CUK_LE: r = x <= y; break;
            case CUK_GT: r = x > y; break;
            default: r = x >= y; break;
            }
            ((uint8_t *)yv)[i] = r;
        } else {
            tr<S>::st((S *)yv, i, bin_op<S>(op, x, y));
        }
    }
}

/* One step of f16/bf16 Sum / Mean, folded in f32 as the CPU does: acc[i] = x[walk] (first) or
 * acc[i] + x[walk]; the output is rounded once at the end. */
template <typename S> __global__ void k_fold_f32(const S *x, float *acc, cuk_walk w, int64_t n, int first)
{
    GRID_LOOP(i, n) {
        int64_t o[3];
        walk_offs(w, i, 1, o);
        float v = tr<S>::ld(x, o[0]);
        acc[i] = first ? v : acc[i] + v;
    }
}

/* ---- unary -------------------------------------------------------------------------------------------- */

/* a clamp as selects, so that NaN passes (HardSigmoid, HardSwish) */
template <typename C> __device__ __forceinline__ C clamp01(C t)
{
    t = t > (C)1 ? (C)1 : t;
    return t < (C)0 ? (C)0 : t;
}

/* Integer Shrink: trunc(v - b) exactly, with b = bi + f split on the host into its integer part and the
 * sign s of its fraction (the OpenCL kernel's method); saturating like the CPU's conversion. */
__device__ __forceinline__ int64_t sub_sat(int64_t v, int64_t b)
{
    if (b < 0 && v > INT64_MAX + b) return INT64_MAX;
    if (b > 0 && v < INT64_MIN + b) return INT64_MIN;
    return v - b;
}
__device__ __forceinline__ int64_t sub_frac(int64_t v, int64_t bi, int64_t s)
{
    int64_t w = sub_sat(v, bi);
    if (s > 0 && w > 0) w -= 1;
    if (s < 0 && w < 0) w += 1;
    return w;
}

template <typename S> __global__ void k_unary(int op, const S *x, S *y, int64_t n, cuk_upar p)
{
    typedef typename tr<S>::C C;
    const double pa = p.a, pb = p.b;
    const int64_t ia = p.i[0], ib = p.i[1];
    GRID_LOOP(i, n) {
        C v = tr<S>::ld(x, i), r = 0;
        if constexpr (tr<S>::kind == K_FLT) {
            C a = (C)pa, b = (C)pb;
            switch (op) {
            case CUK_NEG: r = -v; break;
            case CUK_ABS: r = fabs(v); break;
            case CUK_SIGN: r = v > 0 ? (C)1 : v < 0 ? (C)-1 : v; break;
            case CUK_SQUARE: r = v * v; break;
            case CUK_RELU: r = v < 0 ? (C)0 : v; break; /* NaN passes */
            case CUK_CLIP: { /* numpy.clip: max with lo, then min with hi; NaN passes */
                C t = v < a ? a : v;
                r = t > b ? b : t;
                break;
            }
            case CUK_EXP: r = exp(v); break;
            case CUK_LOG: r = log(v); break;
            case CUK_SQRT: r = sqrt(v); break;
            case CUK_RSQRT: r = (C)1 / sqrt(v); break;
            case CUK_RECIP: r = (C)1 / v; break;
            case CUK_TANH: r = tanh(v); break;
            /* exp of a non-positive value only, e/(1+e) below 0, as the CPU's (k_vmath.h): the negative
             * tail's tiny values are not flushed to 0 by exp(-v) overflowing */
            case CUK_SIGMOID: r = v >= 0 ? (C)1 / ((C)1 + exp(-v)) : exp(v) / ((C)1 + exp(v)); break;
            case CUK_LEAKY: r = v < 0 ? a * v : v; break;
            case CUK_ELU: r = v < 0 ? a * expm1(v) : v; break;
            /* erfc keeps precision for large negative x, where 1 + erf cancels */
            case CUK_GELU: r = (C)0.5 * v * erfc(-v * (C)0.70710678118654752); break;
            case CUK_GELU_TANH:
                r = v / ((C)1 + exp((C)-2 * ((C)0.7978845608028654 * (v + (C)0.044715 * v * v * v))));
                break;
            case CUK_ERF: r = erf(v); break;
            case CUK_SOFTPLUS: r = (v > 0 ? v : (C)0) + log1p(exp(-fabs(v))); break;
            case CUK_FLOOR: r = floor(v); break;
            case CUK_CEIL: r = ceil(v); break;
            case CUK_ROUND: r = rint(v); break; /* ties to even, like numpy.round */
            case CUK_SIN: r = sin(v); break;
            case CUK_COS: r = cos(v); break;
            case CUK_TAN: r = tan(v); break;
            case CUK_ASIN: r = asin(v); break;
            case CUK_ACOS: r = acos(v); break;
            case CUK_ATAN: r = atan(v); break;
            case CUK_SINH: r = sinh(v); break;
            case CUK_COSH: r = cosh(v); break;
            case CUK_ASINH: r = asinh(v); break;
            case CUK_ACOSH: r = acosh(v); break;
            case CUK_ATANH: r = atanh(v); break;
            case CUK_HSIG: r = clamp01(a * v + b); break;
            case CUK_HSWISH: r = v * clamp01(v * ((C)1 / (C)6) + (C)0.5); break;
            case CUK_SELU: r = v > 0 ? a * v : b * expm1(v); break; /* a = gamma, b = gamma * alpha */
            case CUK_CELU: r = v > 0 ? v : a * expm1(v / a); break;
            case CUK_MISH: r = v * tanh((v > 0 ? v : (C)0) + log1p(exp(-fabs(v)))); break;
            case CUK_SOFTSIGN: r = v / ((C)1 + fabs(v)); break;
            case CUK_THRELU: r = v > a ? v : (C)0; break; /* NaN fails the comparison and gives 0 */
            case CUK_SWISH: {
                C t = a * v;
                r = v * (t >= 0 ? (C)1 / ((C)1 + exp(-t)) : exp(t) / ((C)1 + exp(t)));
                break;
            }
            case CUK_SHRINK: r = v < -a ? v + b : v > a ? v - b : (C)0; break;
            case CUK_MDIV: r = v / a; break;
            default: break;
            }
        } else if constexpr (tr<S>::kind == K_BOOL) {
            r = op == CUK_NOT ? (C)(v == 0) : v;
        } else {
            uint64_t u = (uint64_t)(int64_t)v;
            switch (op) {
            case CUK_NEG: r = (C)(0 - u); break;
            case CUK_ABS: r = (tr<S>::kind == K_SINT && (int64_t)v < 0) ? (C)(0 - u) : v; break;
            case CUK_SIGN: r = (C)((v > 0) - (tr<S>::kind == K_SINT && (int64_t)v < 0)); break;
            case CUK_SQUARE: r = (C)(u * u); break;
            case CUK_RELU: r = (tr<S>::kind == K_SINT && (int64_t)v < 0) ? (C)0 : v; break;
            case CUK_CLIP: {
                int64_t t = (int64_t)v < ia ? ia : (int64_t)v;
                r = (C)(t > ib ? ib : t);
                break;
            }
            case CUK_BNOT: r = (C)~u; break;
            case CUK_SHRINK: { /* i[0]: v < -lambd iff v < i[0]; i[1]: v > lambd iff v > i[1] */
                int64_t sv = (int64_t)v;
                int64_t w = sv < p.i[0] ? sub_frac(sv, -p.i[2], -p.i[3]) : sv > p.i[1] ? sub_frac(sv, p.i[2], p.i[3]) : 0;
                r = (C)(w < (int64_t)lim<C>::lo ? (int64_t)lim<C>::lo : w > (int64_t)lim<C>::hi ? (int64_t)lim<C>::hi : w);
                break;
            }
            default: break;
            }
        }
        tr<S>::st(y, i, r);
    }
}

template <typename S> __global__ void k_unary_bool(int op, const S *x, uint8_t *y, int64_t n, cuk_upar p)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, n) {
        C v = tr<S>::ld(x, i);
        if (op == CUK_ISNAN) y[i] = v != v;
        else y[i] = (p.i[0] && v == (C)INFINITY) || (p.i[1] && v == -(C)INFINITY);
    }
}

/* ---- Cast ---------------------------------------------------------------------------------------------- */

/* float to integer: NaN gives 0, the rest truncates toward zero and saturates (the CPU's rule) */
template <typename T, typename C> __device__ __forceinline__ T to_int(C v)
{
    const C mn = (C)lim<T>::lo, mx = (C)lim<T>::hi;
    return v != v ? (T)0 : v <= mn ? lim<T>::lo : v >= mx ? lim<T>::hi : (T)v;
}

template <typename S> __global__ void k_cast(const S *x, int to, void *y, int64_t n)
{
    GRID_LOOP(i, n) {
        if constexpr (tr<S>::kind == K_FLT) {
            typename tr<S>::C v = tr<S>::ld(x, i);
            switch (to) {
            case 1: ((float *)y)[i] = (float)v; break;
            case 2: ((double *)y)[i] = (double)v; break;
            case 3: ((__half *)y)[i] = __float2half_rn((float)v); break; /* through f32, as the CPU */
            case 4: ((uint16_t *)y)[i] = bf_round((float)v); break;
            case 5: ((int8_t *)y)[i] = to_int<int8_t>(v); break;
            case 6: ((uint8_t *)y)[i] = to_int<uint8_t>(v); break;
            case 7: ((int16_t *)y)[i] = to_int<int16_t>(v); break;
            case 8: ((int32_t *)y)[i] = to_int<int32_t>(v); break;
            case 9: ((int64_t *)y)[i] = to_int<int64_t>(v); break;
            default: ((uint8_t *)y)[i] = v != 0; break;
            }
        } else {
            int64_t v = (int64_t)tr<S>::ld(x, i);
            switch (to) { /* integers wrap */
            case 1: ((float *)y)[i] = (float)v; break;
            case 2: ((double *)y)[i] = (double)v; break;
            case 3: ((__half *)y)[i] = __float2half_rn((float)v); break;
            case 4: ((uint16_t *)y)[i] = bf_round((float)v); break;
            case 5: ((int8_t *)y)[i] = (int8_t)v; break;
            case 6: ((uint8_t *)y)[i] = (uint8_t)v; break;
            case 7: ((int16_t *)y)[i] = (int16_t)v; break;
            case 8: ((int32_t *)y)[i] = (int32_t)v; break;
            case 9: ((int64_t *)y)[i] = v; break;
            default: ((uint8_t *)y)[i] = v != 0; break;
            }
        }
    }
}

/* ---- data movement -------------------------------------------------------------------------------------- */

template <typename E> __global__ void k_where(const uint8_t *c, const E *x, const E *y, E *z, cuk_walk w, int64_t n)
{
    GRID_LOOP(i, n) {
        int64_t o[3];
        walk_offs(w, i, 3, o);
        z[i] = c[o[0]] ? x[o[1]] : y[o[2]];
    }
}

template <typename E> __global__ void k_copy(const E *x, E *y, cuk_walk w, int64_t n)
{
    GRID_LOOP(i, n) {
        int64_t o[3];
        walk_offs(w, i, 2, o);
        y[o[0]] = x[o[1]];
    }
}

template <typename E>
__global__ void k_gather(const E *x, const void *idx, int idx_i64, E *y, int64_t n, int64_t n_idx, int64_t inner,
                         int64_t axis_len, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(i, n) {
        int64_t in = i % inner, t = i / inner, j = t % n_idx, o = t / n_idx;
        int64_t ix = idx_i64 ? ((const int64_t *)idx)[j] : (int64_t)((const int32_t *)idx)[j];
        if (ix < -axis_len || ix >= axis_len) {
            cuk_flag(err, site, ix, j, 0);
            y[i] = E();
        } else {
            if (ix < 0) ix += axis_len;
            y[i] = x[(o * axis_len + ix) * inner + in];
        }
    }
}

template <typename S> __global__ void k_bias_add(const S *x, const S *b, S *y, int64_t n, int64_t C, int64_t inner)
{
    GRID_LOOP(i, n) {
        tr<S>::st(y, i, bin_op<S>(CUK_ADD, tr<S>::ld(x, i), tr<S>::ld(b, (i / inner) % C)));
    }
}

template <typename S>
__global__ void k_gemm_fill(S *y, const S *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1, double scale)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, m * n) {
        int64_t r = i / n, col = i % n;
        tr<S>::st(y, i, (C)scale * tr<S>::ld(c, r * cs0 + col * cs1));
    }
}

/* ---- softmax and reductions ------------------------------------------------------------------------------- */


/* One block per vector of R contiguous elements (the last-axis case): the sum of exp in double, as the CPU. */
template <typename S> __global__ void k_softmax_rows(const S *x, S *y, int64_t rows, int64_t R, int is_log)
{
    typedef typename tr<S>::C C;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const S *px = x + row * R;
        S *py = y + row * R;
        C m = -INFINITY;
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) m = max_nan(m, tr<S>::ld(px, r));
        m = block_reduce(m, [](C a, C b) { return max_nan(a, b); });
        double s = 0;
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) s += (double)exp(tr<S>::ld(px, r) - m);
        s = block_reduce(s, [](double a, double b) { return a + b; });
        if (is_log) {
            C ls = (C)log(s);
            for (int64_t r = threadIdx.x; r < R; r += blockDim.x) tr<S>::st(py, r, (tr<S>::ld(px, r) - m) - ls);
        } else {
            C inv = (C)(1 / s);
            for (int64_t r = threadIdx.x; r < R; r += blockDim.x) tr<S>::st(py, r, exp(tr<S>::ld(px, r) - m) * inv);
        }
    }
}

/* One thread per vector of R elements `inner` apart (softmax over an inner axis). */
template <typename S>
__global__ void k_softmax_strided(const S *x, S *y, int64_t outer, int64_t R, int64_t inner, int is_log)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(g, outer * inner) {
        int64_t o = g / inner, in = g % inner, base = o * R * inner + in;
        const S *px = x + base;
        S *py = y + base;
        C m = -INFINITY;
        for (int64_t r = 0; r < R; r++) m = max_nan(m, tr<S>::ld(px, r * inner));
        double s = 0;
        for (int64_t r = 0; r < R; r++) s += (double)exp(tr<S>::ld(px, r * inner) - m);
        if (is_log) {
            C ls = (C)log(s);
            for (int64_t r = 0; r < R; r++) tr<S>::st(py, r * inner, (tr<S>::ld(px, r * inner) - m) - ls);
        } else {
            C inv = (C)(1 / s);
            for (int64_t r = 0; r < R; r++) tr<S>::st(py, r * inner, exp(tr<S>::ld(px, r * inner) - m) * inv);
        }
    }
}

struct red_geom {
    int64_t kd[CUK_MAX_RANK], ks[CUK_MAX_RANK], rd[CUK_MAX_RANK], rs[CUK_MAX_RANK];
    int nk, nr;
    int64_t count;
};

__device__ __forceinline__ int64_t geom_off(int64_t i, int n, const int64_t *d, const int64_t *st)
{
    int64_t off = 0;
    for (int k = n - 1; k >= 0; k--) {
        off += (i % d[k]) * st[k];
        i /= d[k];
    }
    return off;
}

/* The accumulator of a reduction: double for floats (max/min in the compute type), wrapping u64 for
 * integer sums and products, i64 for integer max/min. */
template <typename S, int OP> struct racc {
    typedef typename tr<S>::C C;
    static const bool flt = tr<S>::kind == K_FLT;
    typedef typename std::conditional<OP == CUK_RMAX || OP == CUK_RMIN, typename std::conditional<flt, C, int64_t>::type,
                                      typename std::conditional<flt, double, uint64_t>::type>::type A;
    static __device__ __forceinline__ A init()
    {
        if constexpr (OP == CUK_RMAX) {
            if constexpr (flt) return (A)-INFINITY;
            else return lim<int64_t>::lo;
        } else if constexpr (OP == CUK_RMIN) {
            if constexpr (flt) return (A)INFINITY;
            else return lim<int64_t>::hi;
        } else if constexpr (OP == CUK_RPROD) {
            return (A)1;
        } else {
            return (A)0;
        }
    }
    static __device__ __forceinline__ A add(A a, C v)
    {
        if constexpr (OP == CUK_RMAX) return max_nan(a, (A)v);
        else if constexpr (OP == CUK_RMIN) return min_nan(a, (A)v);
        else if constexpr (OP == CUK_RPROD) return flt ? a * (A)v : (A)(a * (uint64_t)(int64_t)v);
        else if constexpr (flt) return a + (A)v;
        else return a + (uint64_t)(int64_t)v;
    }
    static __device__ __forceinline__ A combine(A a, A b)
    {
        if constexpr (OP == CUK_RMAX) return max_nan(a, b);
        else if constexpr (OP == CUK_RMIN) return min_nan(a, b);
        else if constexpr (OP == CUK_RPROD) return a * b;
        else return a + b;
    }
    static __device__ __forceinline__ void fin(S *y, int64_t i, A a, int64_t count)
    {
        if constexpr (flt) {
            if constexpr (OP == CUK_RMEAN) tr<S>::st(y, i, (C)((double)a / (double)count));
            else tr<S>::st(y, i, (C)a);
        } else if constexpr (OP == CUK_RMEAN) {
            tr<S>::st(y, i, (C)(count ? (int64_t)a / count : 0));
        } else if constexpr (OP == CUK_RMAX || OP == CUK_RMIN) {
            C edge = OP == CUK_RMAX ? lim<C>::lo : lim<C>::hi;
            tr<S>::st(y, i, count ? (C)a : edge);
        } else {
            tr<S>::st(y, i, (C)a);
        }
    }
};

template <typename S, int OP> __global__ void k_reduce_thread(const S *x, S *y, int64_t n_out, red_geom g)
{
    typedef racc<S, OP> R;
    GRID_LOOP(o, n_out) {
        const S *p = x + geom_off(o, g.nk, g.kd, g.ks);
        typename R::A a = R::init();
        for (int64_t r = 0; r < g.count; r++) a = R::add(a, tr<S>::ld(p, geom_off(r, g.nr, g.rd, g.rs)));
        R::fin(y, o, a, g.count);
    }
}

template <typename S, int OP> __global__ void k_reduce_block(const S *x, S *y, int64_t n_out, red_geom g)
{
    typedef racc<S, OP> R;
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        const S *p = x + geom_off(o, g.nk, g.kd, g.ks);
        typename R::A a = R::init();
        if (g.nr == 1 && g.rs[0] == 1)
            for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) a = R::add(a, tr<S>::ld(p, r));
        else
            for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) a = R::add(a, tr<S>::ld(p, geom_off(r, g.nr, g.rd, g.rs)));
        a = block_reduce(a, [](typename R::A u, typename R::A v) { return R::combine(u, v); });
        if (threadIdx.x == 0) R::fin(y, o, a, g.count);
    }
}


template <typename S, int OP>
void reduce_launch(cudaStream_t s, const void *x, void *y, int64_t n_out, const red_geom &g)
{
    /* a block per output when each output folds many values, else a thread per output */
    if (g.count >= 128)
        k_reduce_block<S, OP><<<(unsigned)(n_out < (1 << 20) ? n_out : (1 << 20)), THREADS, 0, s>>>((const S *)x, (S *)y,
                                                                                                   n_out, g);
    else
        k_reduce_thread<S, OP><<<blocks_for(n_out), THREADS, 0, s>>>((const S *)x, (S *)y, n_out, g);
}

template <typename S> int reduce_op(cudaStream_t s, int op, const void *x, void *y, int64_t n_out, const red_geom &g)
{
    switch (op) {
    case CUK_RSUM: reduce_launch<S, CUK_RSUM>(s, x, y, n_out, g); break;
    case CUK_RMEAN: reduce_launch<S, CUK_RMEAN>(s, x, y, n_out, g); break;
    case CUK_RMAX: reduce_launch<S, CUK_RMAX>(s, x, y, n_out, g); break;
    case CUK_RMIN: reduce_launch<S, CUK_RMIN>(s, x, y, n_out, g); break;
    case CUK_RPROD: reduce_launch<S, CUK_RPROD>(s, x, y, n_out, g); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return 0;
}

} // namespace

extern "C" {

int cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b, void *y, const cuk_walk *w, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH(dtype, (k_binary<T><<<blocks_for(n), THREADS, 0, s>>>(op, (const T *)a, (const T *)b, y, *w, n)));
    return last_error();
}

int cuk_int_check(cudaStream_t s, int dtype, const void *b, int64_t n, int mode, cuk_err *err, unsigned long long site)
{
    if (n <= 0) return 0;
    DISPATCH(dtype, (k_int_check<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)b, n, mode, err, site)));
    return last_error();
}

int cuk_fold_f32(cudaStream_t s, int dtype, const void *x, float *acc, const cuk_walk *w, int64_t n, int first)
{
    if (n <= 0) return 0;
    if (dtype == 3) k_fold_f32<__half><<<blocks_for(n), THREADS, 0, s>>>((const __half *)x, acc, *w, n, first);
    else if (dtype == 4) k_fold_f32<bf16s><<<blocks_for(n), THREADS, 0, s>>>((const bf16s *)x, acc, *w, n, first);
    else return (int)cudaErrorInvalidValue;
    return last_error();
}

int cuk_unary(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n, const cuk_upar *p)
{
    if (n <= 0) return 0;
    cuk_upar par = {0, 0, {0, 0, 0, 0}};
    if (p) par = *p;
    DISPATCH(dtype, (k_unary<T><<<blocks_for(n), THREADS, 0, s>>>(op, (const T *)x, (T *)y, n, par)));
    return last_error();
}

int cuk_unary_bool(cudaStream_t s, int dtype, int op, const void *x, uint8_t *y, int64_t n, const cuk_upar *p)
{
    if (n <= 0) return 0;
    cuk_upar par = {0, 0, {0, 0, 0, 0}};
    if (p) par = *p;
    DISPATCH_FLT(dtype, (k_unary_bool<T><<<blocks_for(n), THREADS, 0, s>>>(op, (const T *)x, y, n, par)));
    return last_error();
}

int cuk_cast(cudaStream_t s, int from, int to, const void *x, void *y, int64_t n)
{
    if (n <= 0) return 0;
    if (to < 1 || to > 10) return (int)cudaErrorInvalidValue;
    DISPATCH(from, (k_cast<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, to, y, n)));
    return last_error();
}

int cuk_where(cudaStream_t s, int esize, const uint8_t *c, const void *x, const void *y, void *z, const cuk_walk *w,
              int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_where<T><<<blocks_for(n), THREADS, 0, s>>>(c, (const T *)x, (const T *)y, (T *)z, *w, n)));
    return last_error();
}

int cuk_bias_add(cudaStream_t s, int dtype, const void *x, const void *b, void *y, int64_t n, int64_t C, int64_t inner)
{
    if (n <= 0) return 0;
    DISPATCH(dtype, (k_bias_add<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (const T *)b, (T *)y, n, C, inner)));
    return last_error();
}

int cuk_gemm_fill(cudaStream_t s, int dtype, void *y, const void *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1,
                  double scale)
{
    if (m * n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_gemm_fill<T><<<blocks_for(m * n), THREADS, 0, s>>>((T *)y, (const T *)c, m, n, cs0, cs1, scale)));
    return last_error();
}

int cuk_copy(cudaStream_t s, int esize, const void *x, void *y, const cuk_walk *w, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_copy<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, *w, n)));
    return last_error();
}

int cuk_gather(cudaStream_t s, int esize, const void *x, const void *idx, int idx_i64, void *y, int64_t outer,
               int64_t n_idx, int64_t inner, int64_t axis_len, cuk_err *err, unsigned long long site)
{
    int64_t n = outer * n_idx * inner;
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_gather<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, idx, idx_i64, (T *)y, n, n_idx,
                                                                        inner, axis_len, err, site)));
    return last_error();
}

int cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer, int64_t R, int64_t inner, int is_log)
{
    if (outer * R * inner <= 0) return 0;
    if (inner == 1 && R >= 64) { /* a block per row pays off once a row spans a few warps */
        unsigned grid = (unsigned)(outer < (1 << 20) ? outer : (1 << 20));
        DISPATCH_FLT(dtype, (k_softmax_rows<T><<<grid, THREADS, 0, s>>>((const T *)x, (T *)y, outer, R, is_log)));
    } else {
        DISPATCH_FLT(dtype, (k_softmax_strided<T><<<blocks_for(outer * inner), THREADS, 0, s>>>((const T *)x, (T *)y,
                                                                                                 outer, R, inner, is_log)));
    }
    return last_error();
}

int cuk_reduce(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n_out, int nk, const int64_t *kd,
               const int64_t *ks, int nr, const int64_t *rd, const int64_t *rs, int64_t count)
{
    if (n_out <= 0) return 0;
    if (nk > CUK_MAX_RANK || nr > CUK_MAX_RANK) return (int)cudaErrorInvalidValue;
    red_geom g;
    g.nk = nk;
    g.nr = nr;
    g.count = count;
    for (int i = 0; i < CUK_MAX_RANK; i++) {
        g.kd[i] = i < nk ? kd[i] : 1;
        g.ks[i] = i < nk ? ks[i] : 0;
        g.rd[i] = i < nr ? rd[i] : 1;
        g.rs[i] = i < nr ? rs[i] : 0;
    }
    int rc = 0;
    switch (dtype) {
    case 1: rc = reduce_op<float>(s, op, x, y, n_out, g); break;
    case 2: rc = reduce_op<double>(s, op, x, y, n_out, g); break;
    case 3: rc = reduce_op<__half>(s, op, x, y, n_out, g); break;
    case 4: rc = reduce_op<bf16s>(s, op, x, y, n_out, g); break;
    case 5: rc = reduce_op<int8_t>(s, op, x, y, n_out, g); break;
    case 6: rc = reduce_op<uint8_t>(s, op, x, y, n_out, g); break;
    case 7: rc = reduce_op<int16_t>(s, op, x, y, n_out, g); break;
    case 8: rc = reduce_op<int32_t>(s, op, x, y, n_out, g); break;
    case 9: rc = reduce_op<int64_t>(s, op, x, y, n_out, g); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return rc ? rc : last_error();
}

} // extern "C"
