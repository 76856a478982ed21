/*
 * CPU kernels for the broadcasting ops of ops_math.c: PRelu, BitShift, BitwiseAnd/Or/Xor and the
 * variadic Sum, Mean, Max and Min. Inputs are folded left to right, each step one binary loop over a
 * broadcast walk whose innermost stretch has every operand either advancing or held.
 */
#include "backends/cpu/k_math.h"

#include <math.h>

/* Lets the NaN-propagating max/min selects if-convert so the AVX2 loops vectorise; no floating-point
 * traps are ever unmasked. */
#pragma GCC optimize("no-trapping-math")

#define SB 160

/* n outputs from a and b, which advance by sa, sb in {0, 1} elements. */
typedef void (*mb_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n);

/* One loop per stride pattern, so that the frequent ones (same shapes, a scalar side) carry no index
 * arithmetic and vectorise. U is an unsigned type for wrapping arithmetic and shifts. */
#define MB_LOOP(name, T, U, EXPR)                                                                 \
    WF__VEC static void name(const void *av, int64_t sa, const void *bv, int64_t sb, void *ov,   \
                             int64_t n)                                                          \
    {                                                                                            \
        typedef U U_ __attribute__((unused));                                                    \
        typedef T T_ __attribute__((unused));                                                    \
        const T *a = av, *b = bv;                                                                \
        T *o = ov;                                                                               \
        if (sa && sb) {                                                                          \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { T x = a[i], y = b[i]; o[i] = (T)(EXPR); } \
        } else if (sa) {                                                                         \
            const T y = b[0];                                                                    \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { T x = a[i]; o[i] = (T)(EXPR); } \
        } else if (sb) {                                                                         \
            const T x = a[0];                                                                    \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { T y = b[i]; o[i] = (T)(EXPR); } \
        } else {                                                                                 \
            const T x = a[0], y = b[0];                                                          \
            const T r = (T)(EXPR);                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                            \
        }                                                                                        \
    }

/* U is at least unsigned int wide: narrower unsigned types promote to int, where a product overflows. */
#define MB_INTS(base, EXPR)                                                                       \
    MB_LOOP(base##_i8, int8_t, uint32_t, EXPR)                                                   \
    MB_LOOP(base##_u8, uint8_t, uint32_t, EXPR)                                                  \
    MB_LOOP(base##_i16, int16_t, uint32_t, EXPR)                                                 \
    MB_LOOP(base##_i32, int32_t, uint32_t, EXPR)                                                 \
    MB_LOOP(base##_i64, int64_t, uint64_t, EXPR)
#define MB_FLTS(base, EXPR)                                                                       \
    MB_LOOP(base##_f32, float, uint32_t, EXPR)                                                   \
    MB_LOOP(base##_f64, double, uint64_t, EXPR)
#define INT_FNS(base)                                                                             \
    [WF_I8] = base##_i8, [WF_U8] = base##_u8, [WF_I16] = base##_i16, [WF_I32] = base##_i32,      \
    [WF_I64] = base##_i64
#define FLT_FNS(base) [WF_F32] = base##_f32, [WF_F64] = base##_f64

typedef struct mb_op {
    mb_fn fn[WF_NUM_DTYPES]; /* f16/bf16 stay NULL: they run fn[WF_F32] on converted copies */
} mb_op;

MB_FLTS(sum, x + y)
static const mb_op op_sum = {{FLT_FNS(sum)}};

/* NaN wins, as numpy.maximum / numpy.minimum in ONNX's reference. */
MB_FLTS(max, (x >= y || x != x) ? x : y)
MB_INTS(max, x > y ? x : y)
static const mb_op op_max = {{FLT_FNS(max), INT_FNS(max)}};
MB_FLTS(min, (x <= y || x != x) ? x : y)
MB_INTS(min, x < y ? x : y)
static const mb_op op_min = {{FLT_FNS(min), INT_FNS(min)}};

/* np.where(x > 0, x, x * slope): NaN takes the product and stays NaN; integers wrap. */
MB_FLTS(prelu, x > 0 ? x : x * y)
MB_INTS(prelu, x > 0 ? x : (T_)((U_)x * (U_)y))
static const mb_op op_prelu = {{FLT_FNS(prelu), INT_FNS(prelu)}};

/* Bitwise logic only sees bit patterns: one loop per element size. */
MB_LOOP(band_1, uint8_t, uint8_t, x & y)
MB_LOOP(band_2, uint16_t, uint16_t, x & y)
MB_LOOP(band_4, uint32_t, uint32_t, x & y)
MB_LOOP(band_8, uint64_t, uint64_t, x & y)
MB_LOOP(bor_1, uint8_t, uint8_t, x | y)
MB_LOOP(bor_2, uint16_t, uint16_t, x | y)
MB_LOOP(bor_4, uint32_t, uint32_t, x | y)
MB_LOOP(bor_8, uint64_t, uint64_t, x | y)
MB_LOOP(bxor_1, uint8_t, uint8_t, x ^ y)
MB_LOOP(bxor_2, uint16_t, uint16_t, x ^ y)
MB_LOOP(bxor_4, uint32_t, uint32_t, x ^ y)
MB_LOOP(bxor_8, uint64_t, uint64_t, x ^ y)
#define SIZE_FNS(base)                                                                            \
    [WF_I8] = base##_1, [WF_U8] = base##_1, [WF_I16] = base##_2, [WF_I32] = base##_4, [WF_I64] = base##_8
static const mb_op op_band = {{SIZE_FNS(band)}};
static const mb_op op_bor = {{SIZE_FNS(bor)}};
static const mb_op op_bxor = {{SIZE_FNS(bxor)}};

/* BitShift as ONNX opset 28 defines it: u8 shifts logically; signed types shift left through the sign
 * bit (bits pushed past it are lost) and right arithmetically. A shift amount that is negative or at
 * least the bit width leaves only the sign fill: -1 for a right shift of a negative x, else 0.
 * Comparing (U_)y against the width catches both cases at once. */
#define BITS_(v) ((U_)(sizeof(v) * 8))
MB_INTS(shl, (U_)y >= BITS_(x) ? 0 : (U_)((U_)x << (U_)y))
MB_LOOP(shr_u8, uint8_t, uint8_t, y >= 8 ? 0 : x >> y)
#define SHR_S_(name, T, U)                                                                        \
    MB_LOOP(name, T, U, (U_)y >= BITS_(x) ? (x < 0 ? -1 : 0) : x >> y)
SHR_S_(shr_i8, int8_t, uint32_t)
SHR_S_(shr_i16, int16_t, uint32_t)
SHR_S_(shr_i32, int32_t, uint32_t)
SHR_S_(shr_i64, int64_t, uint64_t)
static const mb_op op_shl = {{INT_FNS(shl)}};
static const mb_op op_shr = {{INT_FNS(shr)}};

/* ---- broadcast walk ------------------------------------------------------------------------------ */

/* The output's dims with 1s dropped and neighbours merged wherever both operands walk them as one
 * stretch; st[i][d] is operand i's stride in elements over dims[d] (0 = held). */
typedef struct mb_plan {
    int rank;
    int64_t dims[WF_MAX_RANK];
    int64_t st[2][WF_MAX_RANK];
} mb_plan;

typedef struct mb_shape {
    int rank;
    const int64_t *dims;
} mb_shape;

static void plan_make(mb_plan *p, const mb_shape *in, int orank, const int64_t *odims)
{
    int64_t al[2][WF_MAX_RANK]; /* operand strides aligned to the output's dims */
    for (int i = 0; i < 2; i++) {
        int64_t s = 1;
        for (int d = orank - 1; d >= 0; d--) {
            int k = d - (orank - in[i].rank);
            int64_t v = k >= 0 ? in[i].dims[k] : 1;
            al[i][d] = v == 1 ? 0 : s;
            s *= v;
        }
    }
    int r = 0;
    for (int d = 0; d < orank; d++) {
        if (odims[d] == 1) continue;
        /* d continues the previous kept dim when each operand's stride over that dim is its stride
         * here times this dim's length (0 == 0 for held operands). */
        if (r > 0 && al[0][d] * odims[d] == p->st[0][r - 1] &&
            al[1][d] * odims[d] == p->st[1][r - 1]) {
            p->dims[r - 1] *= odims[d];
            p->st[0][r - 1] = al[0][d];
            p->st[1][r - 1] = al[1][d];
            continue;
        }
        p->dims[r] = odims[d];
        p->st[0][r] = al[0][d];
        p->st[1][r] = al[1][d];
        r++;
    }
    if (r == 0) {
        p->dims[0] = 1;
        p->st[0][0] = p->st[1][0] = 0;
        r = 1;
    }
    p->rank = r;
}

typedef struct mb_job {
    mb_plan pl;
    mb_fn fn;
    const char *a, *b;
    char *o;
    size_t es;
} mb_job;

/* Rank-1 plans split by elements. */
static void walk_flat(void *arg, int64_t b, int64_t e)
{
    const mb_job *j = arg;
    int64_t sa = j->pl.st[0][0], sb = j->pl.st[1][0];
    j->fn(j->a + (size_t)(b * sa) * j->es, sa, j->b + (size_t)(b * sb) * j->es, sb, j->o + (size_t)b * j->es, e - b);
}

/* Higher ranks split by rows of the innermost stretch; an odometer over the outer dims moves the
 * operand offsets from row to row. */
static void walk_rows(void *arg, int64_t r0, int64_t r1)
{
    const mb_job *j = arg;
    const mb_plan *p = &j->pl;
    int R = p->rank - 1;
    int64_t inner = p->dims[R], idx[WF_MAX_RANK], off[2] = {0, 0};
    int64_t rest = r0;
    for (int d = R - 1; d >= 0; d--) {
        idx[d] = rest % p->dims[d];
        rest /= p->dims[d];
        off[0] += idx[d] * p->st[0][d];
        off[1] += idx[d] * p->st[1][d];
    }
    for (int64_t r = r0; r < r1; r++) {
        j->fn(j->a + (size_t)off[0] * j->es, p->st[0][R], j->b + (size_t)off[1] * j->es, p->st[1][R],
              j->o + (size_t)(r * inner) * j->es, inner);
        for (int d = R - 1; d >= 0; d--) {
            off[0] += p->st[0][d];
            off[1] += p->st[1][d];
            if (++idx[d] < p->dims[d]) break;
            off[0] -= p->st[0][d] * p->dims[d];
            off[1] -= p->st[1][d] * p->dims[d];
            idx[d] = 0;
        }
    }
}

/* o = fn(a, b) over the output shape (orank, odims), which both operands broadcast to. */
static void apply(wf__kctx *k, mb_fn fn, const void *a, mb_shape sa, const void *b, mb_shape sb, void *o,
                  int orank, const int64_t *odims, size_t es)
{
    mb_job j = {.fn = fn, .a = a, .b = b, .o = o, .es = es};
    mb_shape in[2] = {sa, sb};
    plan_make(&j.pl, in, orank, odims);
    int64_t total = wf__numel(orank, odims);
    if (total == 0) return;
    if (j.pl.rank == 1) {
        if (total >= 2 * WF__EW_GRAIN)
            wf__parallel_for(k, total, WF__EW_GRAIN, walk_flat, &j);
        else
            walk_flat(&j, 0, total);
        return;
    }
    int64_t inner = j.pl.dims[j.pl.rank - 1], rows = total / inner;
    if (total >= 2 * WF__EW_GRAIN)
        wf__parallel_for(k, rows, WF__EW_GRAIN / inner > 0 ? WF__EW_GRAIN / inner : 1, walk_rows, &j);
    else
        walk_rows(&j, 0, rows);
}

/* ---- driver -------------------------------------------------------------------------------------- */

static bool bcast_all(wf__kctx *k, int *rank, int64_t *dims)
{
    int r = 0;
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i]->rank > r) r = k->in[i]->rank;
    for (int d = 0; d < r; d++) {
        int64_t v = 1;
        for (int i = 0; i < k->n_in; i++) {
            const wf_tensor *t = k->in[i];
            int64_t e = d - (r - t->rank) >= 0 ? t->dims[d - (r - t->rank)] : 1;
            if (e == 1) continue;
            if (v != 1 && v != e) return false;
            v = e;
        }
        dims[d] = v;
    }
    *rank = r;
    return true;
}

static wf_status *bcast_fail(wf__kctx *k)
{
    wf__str s = {0};
    char b[SB];
    for (int i = 0; i < k->n_in; i++)
        wf__str_appendf(&s, "%s%s", i ? ", " : "", wf__shape_str(k->in[i]->rank, k->in[i]->dims, b));
    wf_status *st = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shapes %s cannot be broadcast together", s.p ? s.p : "");
    wf__str_free(&s);
    return st;
}

static mb_shape shape_of(const wf_tensor *t) { return (mb_shape){t->rank, t->dims}; }

/* An f32 copy of a f16/bf16 tensor's elements. */
static wf_status *to_f32(wf__kctx *k, const wf_tensor *t, float **out)
{
    size_t n = (size_t)(t->size > 0 ? t->size : 1);
    float *f = wf__malloc(n * sizeof(float));
    if (!f) return wf__status_wrap(wf__oom("an f32 copy of a half input", n * sizeof(float)), "node '%s' (%s)",
                                   k->node, k->op->name);
    wf__ew_half_to_f32(t->data, f, t->size, t->dtype);
    *out = f;
    return NULL;
}

/* Mean's last step: a division by n, as ONNX's reference does, rather than a multiply by a rounded 1/n. */
WF__VEC static void div_f32(float *o, int64_t n, float c)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] /= c;
}
WF__VEC static void div_f64(double *o, int64_t n, double c)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] /= c;
}

/* Folds fn over all inputs, left to right: out = fn(...fn(fn(in0, in1), in2)..., inN). mean divides by
 * the count at the end. xshape: PRelu's rule that the output has input 0's shape. */
static wf_status *fold(wf__kctx *k, const mb_op *op, bool mean, bool xshape)
{
    wf_dtype t = k->in[0]->dtype;
    for (int i = 1; i < k->n_in; i++)
        if (k->in[i]->dtype != t)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ: %s and %s (inputs 0 and %d)",
                                 wf_dtype_name(t), wf_dtype_name(k->in[i]->dtype), i);
    bool half = t == WF_F16 || t == WF_BF16;
    mb_fn fn = wf__dtype_valid(t) ? op->fn[half ? WF_F32 : t] : NULL;
    if (!fn) return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no CPU kernel for dtype %s", wf_dtype_name(t));
    int rank;
    int64_t dims[WF_MAX_RANK];
    if (!bcast_all(k, &rank, dims)) return bcast_fail(k);
    if (xshape && (rank != k->in[0]->rank || memcmp(dims, k->in[0]->dims, sizeof(int64_t) * (size_t)rank))) {
        char a[SB], b[SB];
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "slope of shape %s does not broadcast to X of shape %s",
                             wf__shape_str(k->in[1]->rank, k->in[1]->dims, b),
                             wf__shape_str(k->in[0]->rank, k->in[0]->dims, a));
    }
    int64_t n = wf__numel(rank, dims);
    mb_shape os = {rank, dims};

    if (!half) {
        /* In place into input 0 or 1 only, which the first step reads element by element as it writes;
         * and not when the same tensor is also a later input (Sum(a, b, a)), which must still be
         * intact when its step reads it. */
        int reuse = -1;
        for (int i = 0; i < 2 && i < k->n_in && reuse < 0; i++) {
            bool later = false;
            for (int j = 2; j < k->n_in; j++) later |= k->in[j]->data == k->in[i]->data;
            if (!later && (k->in_owned & (1u << i)) && k->in[i]->rank == rank &&
                !memcmp(k->in[i]->dims, dims, sizeof(int64_t) * (size_t)rank))
                reuse = i;
        }
        wf_tensor *out;
        bool reused = false;
        WF__TRY(wf__kctx_output_reuse(k, 0, reuse, t, rank, dims, &out, &reused));
        size_t es = wf_dtype_size(t);
        if (k->n_in == 1) {
            if (!reused && n) memcpy(out->data, k->in[0]->data, (size_t)n * es);
        } else {
            apply(k, fn, k->in[0]->data, shape_of(k->in[0]), k->in[1]->data, shape_of(k->in[1]), out->data, rank,
                  dims, es);
            for (int i = 2; i < k->n_in; i++)
                apply(k, fn, out->data, os, k->in[i]->data, shape_of(k->in[i]), out->data, rank, dims, es);
        }
        if (mean && k->n_in > 1) {
            if (t == WF_F32)
                div_f32(out->data, n, (float)k->n_in);
            else
                div_f64(out->data, n, (double)k->n_in);
        }
        return NULL;
    }

    /* f16/bf16: fold in f32 and round once at the end, which is at least as accurate as rounding each
     * step. */
    wf_tensor *out;
    WF__TRY(wf__kctx_output(k, 0, t, rank, dims, &out));
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    float *acc = wf__malloc(bytes);
    if (!acc) return wf__status_wrap(wf__oom("an f32 accumulator", bytes), "node '%s' (%s)", k->node, k->op->name);
    wf_status *st = NULL;
    float *x0 = NULL, *xi = NULL;
    if ((st = to_f32(k, k->in[0], &x0))) goto done;
    if (k->n_in == 1) {
        if (n) memcpy(acc, x0, (size_t)n * sizeof(float));
    } else {
        if ((st = to_f32(k, k->in[1], &xi))) goto done;
        apply(k, fn, x0, shape_of(k->in[0]), xi, shape_of(k->in[1]), acc, rank, dims, sizeof(float));
        for (int i = 2; i < k->n_in; i++) {
            wf__free(xi);
            xi = NULL;
            if ((st = to_f32(k, k->in[i], &xi))) goto done;
            apply(k, fn, acc, os, xi, shape_of(k->in[i]), acc, rank, dims, sizeof(float));
        }
    }
    if (mean && k->n_in > 1) div_f32(acc, n, (float)k->n_in);
    wf__ew_f32_to_half(acc, out->data, n, t);
done:
    wf__free(x0);
    wf__free(xi);
    wf__free(acc);
    return st;
}

wf_status *wf__km_k_Sum(wf__kctx *k) { return fold(k, &op_sum, false, false); }
wf_status *wf__km_k_Mean(wf__kctx *k) { return fold(k, &op_sum, true, false); }
wf_status *wf__km_k_Max(wf__kctx *k) { return fold(k, &op_max, false, false); }
wf_status *wf__km_k_Min(wf__kctx *k) { return fold(k, &op_min, false, false); }
wf_status *wf__km_k_PRelu(wf__kctx *k) { return fold(k, &op_prelu, false, true); }
wf_status *wf__km_k_BitwiseAnd(wf__kctx *k) { return fold(k, &op_band, false, false); }
wf_status *wf__km_k_BitwiseOr(wf__kctx *k) { return fold(k, &op_bor, false, false); }
wf_status *wf__km_k_BitwiseXor(wf__kctx *k) { return fold(k, &op_bxor, false, false); }

wf_status *wf__km_k_BitShift(wf__kctx *k)
{
    bool left = !strcmp(wf__attr_s(k->op, k->attrs, "direction"), "LEFT");
    return fold(k, left ? &op_shl : &op_shr, false, false);
}
