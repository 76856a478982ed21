/*
 * CPU kernels for the broadcasting elementwise ops (arithmetic, comparisons, logic, Where) and the
 * elementwise kernel table. Broadcasting coalesces dims so the loops always run over the innermost
 * contiguous stretch with each input either advancing (stride 1) or held (stride 0).
 */
#include "backends/cpu/k_dnnl.h"
#include "backends/cpu/k_elementwise.h"
#include "ops/kutil_elementwise.h"

#include <math.h>

/* See k_elementwise_unary.c: lets selects with floating-point arms (Maximum's NaN rule, Mod's sign
 * fix-up) if-convert so the AVX2 loops vectorise. No floating-point traps are ever unmasked. */
#pragma GCC optimize("no-trapping-math")

#define UNUSED_ __attribute__((unused))

/* Inner loop of a binary op: n outputs, a and b advance by sa, sb in {0, 1} elements. */
typedef void (*bin_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n);

enum { CHECK_NONE, CHECK_ZERO, CHECK_NEG };

typedef struct binop {
    bin_fn fn[WF_NUM_DTYPES]; /* f16/bf16 left NULL: they use fn[WF_F32] on converted blocks */
    bool out_bool;
    int check;                /* a run-time check of b for integer dtypes */
    int64_t grain;
} binop;

/* ---- loops ------------------------------------------------------------------------------------- */

/* All four stride patterns get their own loop so the common ones (same shape, one scalar side) carry
 * no index arithmetic. T_ is the element type, U_ an unsigned type at least as wide as unsigned int
 * (wrapping integer arithmetic without UB), TO_ the output type. */
#define BIN_BODY_(PRAGMA, EXPR)                                                                   \
    const T_ *a = av, *b = bv;                                                                   \
    TO_ *o = ov;                                                                                 \
    if (sa && sb) {                                                                              \
        PRAGMA for (int64_t i = 0; i < n; i++) { T_ x = a[i], y = b[i]; o[i] = (TO_)(EXPR); }    \
    } else if (sa) {                                                                             \
        const T_ y = b[0];                                                                       \
        PRAGMA for (int64_t i = 0; i < n; i++) { T_ x = a[i]; o[i] = (TO_)(EXPR); }              \
    } else if (sb) {                                                                             \
        const T_ x = a[0];                                                                       \
        PRAGMA for (int64_t i = 0; i < n; i++) { T_ y = b[i]; o[i] = (TO_)(EXPR); }              \
    } else {                                                                                     \
        const T_ x = a[0], y = b[0];                                                             \
        const TO_ r = (TO_)(EXPR);                                                               \
        for (int64_t i = 0; i < n; i++) o[i] = r;                                                \
    }

#define BIN_V(name, T, U, TO, EXPR)                                                               \
    WF__VEC static void name(const void *av, int64_t sa, const void *bv, int64_t sb, void *ov,   \
                             int64_t n)                                                          \
    {                                                                                            \
        typedef T T_;                                                                            \
        typedef U U_ UNUSED_;                                                                    \
        typedef TO TO_;                                                                          \
        BIN_BODY_(_Pragma("omp simd"), EXPR)                                                     \
    }
/* For bodies that do not vectorise (libm calls, integer division): one copy, no clones. */
#define BIN_S(name, T, U, TO, EXPR)                                                               \
    static void name(const void *av, int64_t sa, const void *bv, int64_t sb, void *ov, int64_t n) \
    {                                                                                            \
        typedef T T_;                                                                            \
        typedef U U_ UNUSED_;                                                                    \
        typedef TO TO_;                                                                          \
        BIN_BODY_(, EXPR)                                                                        \
    }

/* One body over every integer dtype; mac is BIN_V or BIN_S. OUT(T) names the output type. */
#define SAME_(T) T
#define BOOL_(T) uint8_t
#define BIN_SINTS(mac, base, OUT, EXPR)                                                           \
    mac(base##_i8, int8_t, uint32_t, OUT(int8_t), EXPR)                                          \
    mac(base##_i16, int16_t, uint32_t, OUT(int16_t), EXPR)                                       \
    mac(base##_i32, int32_t, uint32_t, OUT(int32_t), EXPR)                                       \
    mac(base##_i64, int64_t, uint64_t, OUT(int64_t), EXPR)
#define BIN_INTS(mac, base, OUT, EXPR)                                                            \
    BIN_SINTS(mac, base, OUT, EXPR) mac(base##_u8, uint8_t, uint32_t, OUT(uint8_t), EXPR)
#define BIN_FLTS(mac, base, OUT, EXPR)                                                            \
    mac(base##_f32, float, uint32_t, OUT(float), EXPR) mac(base##_f64, double, uint64_t, OUT(double), EXPR)

#define FLT_FNS(b) [WF_F32] = b##_f32, [WF_F64] = b##_f64
#define SINT_FNS(b) [WF_I8] = b##_i8, [WF_I16] = b##_i16, [WF_I32] = b##_i32, [WF_I64] = b##_i64
#define INT_FNS(b) SINT_FNS(b), [WF_U8] = b##_u8
#define NUM_FNS(b) FLT_FNS(b), INT_FNS(b)

BIN_FLTS(BIN_V, add, SAME_, x + y)
BIN_INTS(BIN_V, add, SAME_, (U_)x + (U_)y)
static const binop op_add = {{NUM_FNS(add)}, false, CHECK_NONE, WF__EW_GRAIN};

BIN_FLTS(BIN_V, sub, SAME_, x - y)
BIN_INTS(BIN_V, sub, SAME_, (U_)x - (U_)y)
static const binop op_sub = {{NUM_FNS(sub)}, false, CHECK_NONE, WF__EW_GRAIN};

BIN_FLTS(BIN_V, mul, SAME_, x * y)
BIN_INTS(BIN_V, mul, SAME_, (U_)x * (U_)y)
static const binop op_mul = {{NUM_FNS(mul)}, false, CHECK_NONE, WF__EW_GRAIN};

/* Integer division truncates toward zero (C, ONNX); zero divisors are rejected before the loop, and
 * x / -1 is negation so that MIN / -1 wraps instead of trapping. */
BIN_FLTS(BIN_V, div, SAME_, x / y)
BIN_SINTS(BIN_S, div, SAME_, y == -1 ? (U_)0 - (U_)x : (U_)(x / y))
BIN_S(div_u8, uint8_t, uint32_t, uint8_t, x / y)
static const binop op_div = {{NUM_FNS(div)}, false, CHECK_ZERO, WF__EW_GRAIN_HEAVY};

/* Integer powers by squaring in 64-bit unsigned arithmetic: wraps like numpy. A negative exponent is
 * a run-time error (CHECK_NEG), as numpy raises "Integers to negative integer powers are not
 * allowed": a silently truncated 0 would hide a bug in the graph. */
static inline uint64_t ipow(uint64_t base, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
BIN_S(pow_f32, float, uint32_t, float, powf(x, y))
BIN_S(pow_f64, double, uint64_t, double, pow(x, y))
BIN_INTS(BIN_S, pow, SAME_, ipow((uint64_t)(int64_t)x, (uint64_t)(int64_t)y))
static const binop op_pow = {{NUM_FNS(pow)}, false, CHECK_NEG, WF__EW_GRAIN_HEAVY};
/* x ** 2 is common (variance, squared error) and exactly x * x; only used with a scalar b. */
#define POW2_(name, T)                                                                            \
    WF__VEC static void name(const void *av, int64_t sa, const void *bv, int64_t sb, void *ov,   \
                             int64_t n)                                                          \
    {                                                                                            \
        const T *a = av;                                                                         \
        T *o = ov;                                                                               \
        const T a0 = a[0];                                                                       \
        if (sa) {                                                                                \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i];              \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = a0 * a0;                                      \
        }                                                                                        \
    }
POW2_(pow2_f32, float)
POW2_(pow2_f64, double)
static const binop op_pow2 = {{FLT_FNS(pow2)}, false, CHECK_NONE, WF__EW_GRAIN};

/* NaN wins, as in numpy.maximum / numpy.minimum. */
BIN_FLTS(BIN_V, max, SAME_, (x >= y || x != x) ? x : y)
BIN_INTS(BIN_V, max, SAME_, x > y ? x : y)
static const binop op_max = {{NUM_FNS(max)}, false, CHECK_NONE, WF__EW_GRAIN};

BIN_FLTS(BIN_V, min, SAME_, (x <= y || x != x) ? x : y)
BIN_INTS(BIN_V, min, SAME_, x < y ? x : y)
static const binop op_min = {{NUM_FNS(min)}, false, CHECK_NONE, WF__EW_GRAIN};

/* Mod, fmod=0: the result takes the divisor's sign (Python, numpy.mod; for floats ONNX requires
 * fmod=1, we accept 0 with numpy's meaning). fmod=1: the dividend's sign (C fmod / %). x % -1 is 0
 * and is never evaluated, since MIN % -1 traps on x86. */
static inline float pymod_f(float x, float y)
{
    float r = fmodf(x, y);
    return r != 0 ? (((r < 0) != (y < 0)) ? r + y : r) : copysignf(0.0f, y);
}
static inline double pymod_d(double x, double y)
{
    double r = fmod(x, y);
    return r != 0 ? (((r < 0) != (y < 0)) ? r + y : r) : copysign(0.0, y);
}
#define PYMOD_INT_(x, y)                                                                          \
    ((y) == -1 ? 0 : ((x) % (y) != 0 && (((x) % (y) < 0) != ((y) < 0))) ? (x) % (y) + (y) : (x) % (y))
BIN_S(mod_f32, float, uint32_t, float, pymod_f(x, y))
BIN_S(mod_f64, double, uint64_t, double, pymod_d(x, y))
BIN_SINTS(BIN_S, mod, SAME_, PYMOD_INT_(x, y))
BIN_S(mod_u8, uint8_t, uint32_t, uint8_t, x % y)
static const binop op_mod = {{NUM_FNS(mod)}, false, CHECK_ZERO, WF__EW_GRAIN_HEAVY};

BIN_S(fmod_f32, float, uint32_t, float, fmodf(x, y))
BIN_S(fmod_f64, double, uint64_t, double, fmod(x, y))
BIN_SINTS(BIN_S, fmod, SAME_, y == -1 ? 0 : x % y)
BIN_S(fmod_u8, uint8_t, uint32_t, uint8_t, x % y)
static const binop op_fmod = {{NUM_FNS(fmod)}, false, CHECK_ZERO, WF__EW_GRAIN_HEAVY};

/* Comparisons write bool; bool inputs compare as 0/1 through the u8 loops. */
#define CMP_(base, OPER)                                                                          \
    BIN_FLTS(BIN_V, base, BOOL_, x OPER y)                                                       \
    BIN_INTS(BIN_V, base, BOOL_, x OPER y)                                                       \
    static const binop op_##base = {{NUM_FNS(base), [WF_BOOL] = base##_u8}, true, CHECK_NONE, WF__EW_GRAIN};
CMP_(eq, ==)
CMP_(ne, !=)
CMP_(lt, <)
CMP_(le, <=)
CMP_(gt, >)
CMP_(ge, >=)

BIN_V(and_b, uint8_t, uint32_t, uint8_t, (x != 0) & (y != 0))
BIN_V(or_b, uint8_t, uint32_t, uint8_t, (x != 0) | (y != 0))
BIN_V(xor_b, uint8_t, uint32_t, uint8_t, (x != 0) ^ (y != 0))
static const binop op_and = {{[WF_BOOL] = and_b}, true, CHECK_NONE, WF__EW_GRAIN};
static const binop op_or = {{[WF_BOOL] = or_b}, true, CHECK_NONE, WF__EW_GRAIN};
static const binop op_xor = {{[WF_BOOL] = xor_b}, true, CHECK_NONE, WF__EW_GRAIN};

/* Where: pure data movement, so one loop per element size serves every dtype. */
typedef void (*where_fn)(const uint8_t *c, int64_t sc, const void *x, int64_t sx, const void *y,
                         int64_t sy, void *o, int64_t n);
/* The selects are written with masks, not ?: on a bool: GCC turned the 16-bit form into a scalar loop
 * with a branch per element, which a random condition (a Relu gradient's) mispredicts half the time:
 * bf16 Where(x > 0, dy, 0) ran 10x slower than f32's. m is all ones where c is true. */
#define WF__SEL(T, cv, a, b) ((T)(((a) & (T)(0 - (T)((cv) != 0))) | ((b) & (T) ~(T)(0 - (T)((cv) != 0)))))
#define WHERE_(name, T)                                                                           \
    WF__VEC static void name(const uint8_t *c, int64_t sc, const void *xv, int64_t sx,           \
                             const void *yv, int64_t sy, void *ov, int64_t n)                    \
    {                                                                                            \
        const T *x = xv, *y = yv;                                                                \
        T *o = ov;                                                                               \
        if (sc && sx && sy) {                                                                    \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = WF__SEL(T, c[i], x[i], y[i]); \
        } else if (sc && !sx && !sy) {                                                           \
            const T xs = x[0], ys = y[0];                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = WF__SEL(T, c[i], xs, ys); \
        } else if (sc && sx && !sy) { /* a masked gradient: Where(x > 0, dy, 0) */               \
            const T ys = y[0];                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = WF__SEL(T, c[i], x[i], ys); \
        } else if (sc && !sx && sy) {                                                            \
            const T xs = x[0];                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = WF__SEL(T, c[i], xs, y[i]); \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];            \
        }                                                                                        \
    }
WHERE_(where_1, uint8_t)
WHERE_(where_2, uint16_t)
WHERE_(where_4, uint32_t)
WHERE_(where_8, uint64_t)

/* ---- broadcasting plan ------------------------------------------------------------------------ */

/* The output shape with dims of 1 dropped and neighbours merged wherever every input walks them as
 * one: dims[rank-1] is the innermost run, st[i][d] input i's stride in elements (0 = broadcast). */
typedef struct bplan {
    int rank;
    int64_t dims[WF_MAX_RANK];
    int64_t st[3][WF_MAX_RANK];
} bplan;

/* numpy broadcasting of the actual input shapes; false when they are incompatible. */
static bool bcast_shape(int nin, const wf_tensor *const *in, int *rank, int64_t *dims)
{
    int ranks[3];
    const int64_t *d[3];
    for (int i = 0; i < nin; i++) ranks[i] = in[i]->rank, d[i] = in[i]->dims;
    return wf__ku_bcast_dims(nin, ranks, d, rank, dims);
}

static void bplan_make(bplan *p, int nin, const wf_tensor *const *in, int orank, const int64_t *odims)
{
    int ranks[3];
    const int64_t *d[3];
    for (int i = 0; i < nin; i++) ranks[i] = in[i]->rank, d[i] = in[i]->dims;
    p->rank = wf__ku_bcast_walk(nin, ranks, d, orank, odims, p->dims, p->st);
}

/* ---- execution ---------------------------------------------------------------------------------- */

typedef struct ew_job ew_job;
/* Runs one innermost stretch: p[i] and s[i] are input i's start and stride, o the output start. */
typedef void (*run_fn)(const ew_job *j, const char *const *p, const int64_t *s, char *o, int64_t n);

struct ew_job {
    bplan p;
    int nin;
    const char *in[3];
    size_t es[3];
    char *o;
    size_t eo;
    run_fn run;
    bin_fn bfn;
    wf_dtype half;   /* WF_F16 / WF_BF16 when bfn is the f32 loop; else WF_DTYPE_INVALID */
    bool out_half;   /* convert bfn's f32 output back (false for comparisons) */
    where_fn wfn;
};

#define HALF_BLOCK 512

static void run_binary_half(const ew_job *j, const char *const *p, const int64_t *s, char *o, int64_t n)
{
    float ta[HALF_BLOCK], tb[HALF_BLOCK], to[HALF_BLOCK];
    const uint16_t *a = (const uint16_t *)p[0], *b = (const uint16_t *)p[1];
    if (!s[0]) wf__ew_half_to_f32(a, ta, 1, j->half);
    if (!s[1]) wf__ew_half_to_f32(b, tb, 1, j->half);
    for (int64_t i = 0; i < n; i += HALF_BLOCK) {
        int64_t m = n - i < HALF_BLOCK ? n - i : HALF_BLOCK;
        if (s[0]) wf__ew_half_to_f32(a + i, ta, m, j->half);
        if (s[1]) wf__ew_half_to_f32(b + i, tb, m, j->half);
        if (j->out_half) {
            j->bfn(ta, s[0], tb, s[1], to, m);
            wf__ew_f32_to_half(to, (uint16_t *)o + i, m, j->half);
        } else {
            j->bfn(ta, s[0], tb, s[1], o + i * (int64_t)j->eo, m);
        }
    }
}

static void run_binary(const ew_job *j, const char *const *p, const int64_t *s, char *o, int64_t n)
{
    j->bfn(p[0], s[0], p[1], s[1], o, n);
}

static void run_where(const ew_job *j, const char *const *p, const int64_t *s, char *o, int64_t n)
{
    j->wfn((const uint8_t *)p[0], s[0], p[1], s[1], p[2], s[2], o, n);
}

/* Rank-1 plans (same shapes, scalars, anything that coalesced fully): split by elements. */
static void job_flat(void *arg, int64_t b, int64_t e)
{
    const ew_job *j = arg;
    const char *p[3];
    int64_t s[3];
    for (int i = 0; i < j->nin; i++) {
        s[i] = j->p.st[i][0];
        p[i] = j->in[i] + (size_t)(b * s[i]) * j->es[i];
    }
    j->run(j, p, s, j->o + (size_t)b * j->eo, e - b);
}

/* Higher ranks: split by rows of the innermost run; an odometer over the outer dims gives each row's
 * input offsets without per-element index math. */
static void job_rows(void *arg, int64_t r0, int64_t r1)
{
    const ew_job *j = arg;
    const bplan *pl = &j->p;
    int R = pl->rank - 1;
    int64_t inner = pl->dims[R];
    int64_t idx[WF_MAX_RANK], off[3] = {0, 0, 0}, s[3];
    int64_t rem = r0;
    for (int d = R - 1; d >= 0; d--) {
        idx[d] = rem % pl->dims[d];
        rem /= pl->dims[d];
        for (int i = 0; i < j->nin; i++) off[i] += idx[d] * pl->st[i][d];
    }
    for (int i = 0; i < j->nin; i++) s[i] = pl->st[i][R];
    for (int64_t r = r0; r < r1; r++) {
        const char *p[3];
        for (int i = 0; i < j->nin; i++) p[i] = j->in[i] + (size_t)off[i] * j->es[i];
        j->run(j, p, s, j->o + (size_t)(r * inner) * j->eo, inner);
        for (int d = R - 1; d >= 0; d--) {
            for (int i = 0; i < j->nin; i++) off[i] += pl->st[i][d];
            if (++idx[d] < pl->dims[d]) break;
            for (int i = 0; i < j->nin; i++) off[i] -= pl->st[i][d] * pl->dims[d];
            idx[d] = 0;
        }
    }
}

static void job_go(wf__kctx *k, ew_job *j, int64_t grain)
{
    const bplan *pl = &j->p;
    int64_t inner = pl->dims[pl->rank - 1];
    int64_t total = 1;
    for (int d = 0; d < pl->rank; d++) total *= pl->dims[d];
    if (total == 0) return;
    if (pl->rank == 1) {
        if (total >= 2 * grain)
            wf__parallel_for(k, total, grain, job_flat, j);
        else
            job_flat(j, 0, total);
        return;
    }
    int64_t rows = total / inner;
    if (total >= 2 * grain)
        wf__parallel_for(k, rows, grain / inner > 0 ? grain / inner : 1, job_rows, j);
    else
        job_rows(j, 0, rows);
}

static bool same_shape(const wf_tensor *a, const wf_tensor *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

/* Output shape, a plan, and an in-place candidate: the first input that already has the output's
 * shape and dtype and dies here (wf__kctx_output_reuse makes the final call). */
static wf_status *setup(wf__kctx *k, ew_job *j, int nin, wf_dtype out_dt, int first_reusable)
{
    const wf_tensor *const *in = (const wf_tensor *const *)k->in;
    int rank;
    int64_t dims[WF_MAX_RANK];
    bool flat_same = nin == 2 && same_shape(in[0], in[1]);
    if (flat_same) {
        rank = in[0]->rank;
        memcpy(dims, in[0]->dims, sizeof(int64_t) * (size_t)rank);
        j->p.rank = 1;
        j->p.dims[0] = in[0]->size;
        j->p.st[0][0] = j->p.st[1][0] = 1;
    } else {
        if (!bcast_shape(nin, in, &rank, dims)) {
            char s0[160], s1[160], s2[160];
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shapes %s, %s%s%s cannot be broadcast together",
                                 wf__shape_str(in[0]->rank, in[0]->dims, s0),
                                 wf__shape_str(in[1]->rank, in[1]->dims, s1), nin > 2 ? ", " : "",
                                 nin > 2 ? wf__shape_str(in[2]->rank, in[2]->dims, s2) : "");
        }
        bplan_make(&j->p, nin, in, rank, dims);
    }
    int reuse = -1;
    for (int i = first_reusable; i < nin && reuse < 0; i++)
        if ((k->in_owned & (1u << i)) && in[i]->dtype == out_dt && in[i]->rank == rank &&
            !memcmp(in[i]->dims, dims, sizeof(int64_t) * (size_t)rank))
            reuse = i;
    wf_tensor *out;
    WF__TRY(wf__kctx_output_reuse(k, 0, reuse, out_dt, rank, dims, &out, NULL));
    j->nin = nin;
    for (int i = 0; i < nin; i++) {
        j->in[i] = in[i]->data;
        j->es[i] = wf_dtype_size(in[i]->dtype);
    }
    j->o = out->data;
    j->eo = wf_dtype_size(out_dt);
    return NULL;
}

/* Scans the divisor / exponent before anything is written, so a bad value fails the node cleanly. */
static wf_status *check_b(wf__kctx *k, int check, const wf_tensor *b)
{
    if (check == CHECK_NONE || !wf__dtype_is_int(b->dtype)) return NULL;
    if (check == CHECK_NEG && b->dtype == WF_U8) return NULL;
    for (int64_t i = 0; i < b->size; i++) {
        int64_t v = wf__load_i64(b->data, b->dtype, i);
        if (check == CHECK_ZERO && v == 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "integer division by zero (%s divisor, element %lld)",
                                 wf_dtype_name(b->dtype), (long long)i);
        if (check == CHECK_NEG && v < 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                 "integers to negative integer powers are not allowed (exponent %lld at "
                                 "element %lld)", (long long)v, (long long)i);
    }
    return NULL;
}

/* Level 3 (lower/layout.c): one operand is 4-D in the CPU's blocked layout (k_dnnl.c's
 * wf__dn_blocked_tag), the other per channel, [N or 1, C, 1, 1] (a squeeze-and-excitation scale, a
 * per-channel bias), whose bytes are the same in every layout. Rows of the blocked operand meet a run
 * of the per-channel values: C of them per pixel in nhwc, a block of them per pixel in nChw8c/16c. */
typedef struct pc_job {
    bin_fn fn;
    const float *x, *s;
    float *o;
    int64_t c, hw, blk; /* blk 0: nhwc */
    bool s_batch;       /* the per-channel operand has the input's N (else 1) */
    bool s_first;       /* the per-channel operand is the op's first input */
    char kind;          /* '+', '-', '*', '/': the op, for the fixed-block loops */
} pc_job;

/* nChw8c / nChw16c with the block's values held in registers, plane by plane (one image's block of
 * channels over its pixels): a call of fn per pixel cost about as much as the arithmetic (EfficientNet-B0's
 * 16 squeeze-and-excitation Muls, 1.3 ms traced against ONNX Runtime's 0.84). The same IEEE operation as
 * fn, element by element. */
#define PC_LOOP(VV, EXPR)                                                                                     \
    for (int64_t p = 0; p < m; p++) _Pragma("omp simd") for (int c = 0; c < VV; c++) {                          \
            float xv = x[p * VV + c];                                                                          \
            o[p * VV + c] = (EXPR);                                                                            \
        }
#define PC_BLOCKED(NAME, VV)                                                                                   \
    WF__VEC static void NAME(void *arg, int64_t r0, int64_t r1)                                                \
    {                                                                                                          \
        const pc_job *j = arg;                                                                                 \
        int64_t cb = j->c / VV;                                                                                \
        for (int64_t r = r0; r < r1;) {                                                                        \
            int64_t plane = r / j->hw, end = (plane + 1) * j->hw < r1 ? (plane + 1) * j->hw : r1, m = end - r; \
            const float *sp = j->s + (j->s_batch ? plane / cb * j->c : 0) + plane % cb * VV;                   \
            float s[VV];                                                                                       \
            for (int c = 0; c < VV; c++) s[c] = sp[c];                                                         \
            const float *x = j->x + r * VV;                                                                    \
            float *o = j->o + r * VV;                                                                          \
            switch (j->kind) {                                                                                 \
            case '+': PC_LOOP(VV, j->s_first ? s[c] + xv : xv + s[c]) break;                                       \
            case '-': if (j->s_first) { PC_LOOP(VV, s[c] - xv) } else { PC_LOOP(VV, xv - s[c]) } break;                \
            case '*': PC_LOOP(VV, j->s_first ? s[c] * xv : xv * s[c]) break;                                       \
            default: if (j->s_first) { PC_LOOP(VV, s[c] / xv) } else { PC_LOOP(VV, xv / s[c]) } break;                 \
            }                                                                                                  \
            r = end;                                                                                           \
        }                                                                                                      \
    }
PC_BLOCKED(pc_blocked8, 8)
PC_BLOCKED(pc_blocked16, 16)

static void pc_range(void *arg, int64_t r0, int64_t r1)
{
    const pc_job *j = arg;
    int64_t len = j->blk ? j->blk : j->c, cb = j->blk ? j->c / j->blk : 1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / (cb * j->hw), cblk = r / j->hw % cb;
        const float *s = j->s + (j->s_batch ? n * j->c : 0) + cblk * len, *x = j->x + r * len;
        if (j->s_first) j->fn(s, 1, x, 1, j->o + r * len, len);
        else j->fn(x, 1, s, 1, j->o + r * len, len);
    }
}

static wf_status *per_channel(wf__kctx *k, const binop *op)
{
    int bi = k->in[0]->size >= k->in[1]->size ? 0 : 1;
    const wf_tensor *x = k->in[bi], *s = k->in[1 - bi];
    char sx[160], ss[160];
    if (x->rank != 4 || s->rank != 4 || s->dims[1] != x->dims[1] || s->dims[2] != 1 || s->dims[3] != 1 ||
        (s->dims[0] != 1 && s->dims[0] != x->dims[0]) || !(k->in_blocked >> bi & 1) || !op->fn[WF_F32])
        return wf__kctx_fail(k, WF_INTERNAL, "layout planning gave a blocked %s with %s, not one value per channel",
                             wf__shape_str(x->rank, x->dims, sx), wf__shape_str(s->rank, s->dims, ss));
    wf_tensor *out;
    WF__TRY(wf__kctx_output_reuse(k, 0, bi, WF_F32, 4, x->dims, &out, NULL));
    int64_t blk = wf__dn_blocked_tag() == dnnl_acdb ? 0 : wf__dn_channel_block(), hw = x->dims[2] * x->dims[3];
    if (!x->size) return NULL;
    if (blk && x->dims[1] % blk)
        return wf__kctx_fail(k, WF_INTERNAL, "blocked %s: %lld channels are not whole blocks of %lld",
                             wf__shape_str(x->rank, x->dims, sx), (long long)x->dims[1], (long long)blk);
    char kind = op == &op_add ? '+' : op == &op_sub ? '-' : op == &op_mul ? '*' : op == &op_div ? '/' : 0;
    pc_job j = {op->fn[WF_F32], x->data, s->data, out->data, x->dims[1], hw, blk, s->dims[0] != 1, bi == 1, kind};
    int64_t rows = x->dims[0] * hw * (blk ? x->dims[1] / blk : 1), len = blk ? blk : x->dims[1];
    wf__parallel_for(k, rows, op->grain / len + 1,
                     kind && blk == 8 ? pc_blocked8 : kind && blk == 16 ? pc_blocked16 : pc_range, &j);
    return NULL;
}

static wf_status *binary(wf__kctx *k, const binop *op)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    wf_dtype t = a->dtype;
    if (b->dtype != t)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ: %s and %s", wf_dtype_name(t),
                             wf_dtype_name(b->dtype));
    bool half = t == WF_F16 || t == WF_BF16;
    if (op == &op_pow && wf__dtype_is_float(t) && b->size == 1 && a->rank >= b->rank &&
        wf__load_f64(b->data, t, 0) == 2.0)
        op = &op_pow2;
    bin_fn fn = wf__dtype_valid(t) ? op->fn[half ? WF_F32 : t] : NULL;
    if (!fn) return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no CPU kernel for dtype %s", wf_dtype_name(t));
    WF__TRY(check_b(k, op->check, b));
    if ((k->in_blocked & 3) && t == WF_F32 && !same_shape(a, b)) return per_channel(k, op);
    wf_dtype out_dt = op->out_bool ? WF_BOOL : t;
    /* Same shapes below the parallel threshold (the executor's scalar chains, small activations):
     * straight to the loop, no plan. */
    if (!half && a->size < 2 * op->grain && same_shape(a, b)) {
        int reuse = (k->in_owned & 1u) && t == out_dt ? 0 : 1;
        wf_tensor *out;
        WF__TRY(wf__kctx_output_reuse(k, 0, reuse, out_dt, a->rank, a->dims, &out, NULL));
        if (a->size) fn(a->data, 1, b->data, 1, out->data, a->size);
        return NULL;
    }
    ew_job j;
    WF__TRY(setup(k, &j, 2, out_dt, 0));
    j.bfn = fn;
    j.half = half ? t : WF_DTYPE_INVALID;
    j.out_half = half && !op->out_bool;
    j.run = half ? run_binary_half : run_binary;
    job_go(k, &j, op->grain);
    return NULL;
}

#define BINK_(Op, tbl) static wf_status *k_##Op(wf__kctx *k) { return binary(k, &tbl); }
BINK_(Add, op_add)
BINK_(Sub, op_sub)
BINK_(Mul, op_mul)
BINK_(Div, op_div)
BINK_(Pow, op_pow)
BINK_(Maximum, op_max)
BINK_(Minimum, op_min)
BINK_(Equal, op_eq)
BINK_(NotEqual, op_ne)
BINK_(Less, op_lt)
BINK_(LessEqual, op_le)
BINK_(Greater, op_gt)
BINK_(GreaterEqual, op_ge)
BINK_(And, op_and)
BINK_(Or, op_or)
BINK_(Xor, op_xor)
#undef BINK_

static wf_status *k_Mod(wf__kctx *k)
{
    return binary(k, wf__attr_i(k->op, k->attrs, "fmod") ? &op_fmod : &op_mod);
}

static wf_status *k_Where(wf__kctx *k)
{
    const wf_tensor *c = k->in[0], *x = k->in[1], *y = k->in[2];
    if (c->dtype != WF_BOOL || x->dtype != y->dtype)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "expects (bool, T, T), got (%s, %s, %s)",
                             wf_dtype_name(c->dtype), wf_dtype_name(x->dtype), wf_dtype_name(y->dtype));
    ew_job j;
    /* The condition is never a candidate for in place: its dtype is bool, the output's is T unless
     * T is bool, and then x or y serves as well. */
    WF__TRY(setup(k, &j, 3, x->dtype, 1));
    switch (wf_dtype_size(x->dtype)) {
    case 1: j.wfn = where_1; break;
    case 2: j.wfn = where_2; break;
    case 4: j.wfn = where_4; break;
    default: j.wfn = where_8; break;
    }
    j.run = run_where;
    job_go(k, &j, WF__EW_GRAIN);
    return NULL;
}

wf__ew_bin_fn wf__ew_binary_f32(const char *op)
{
    static const struct {
        const char *op;
        const binop *b;
    } t[] = {{"Add", &op_add}, {"Sub", &op_sub}, {"Mul", &op_mul}, {"Div", &op_div}, {"Maximum", &op_max},
             {"Minimum", &op_min}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(op, t[i].op)) return t[i].b->fn[WF_F32];
    return NULL;
}

/* ---- table ---------------------------------------------------------------------------------------- */

#define KB_(Op, mask) {#Op, "CPU", mask, 0, k_##Op, NULL, WF__K_INPLACE},
#define KU_(Op, mask) {#Op, "CPU", mask, 0, wf__ew_k_##Op, NULL, WF__K_INPLACE},
/* the four that take a blocked operand with a per-channel one (per_channel above) */
#define KP_(Op, mask) {#Op, "CPU", mask, 0, k_##Op, NULL, WF__K_INPLACE | WF__K_BLOCKED},

const wf__kernel_def wf__cpu_kernels_elementwise[] = {
    KP_(Add, WF__DT_NUMERIC)
    KP_(Sub, WF__DT_NUMERIC)
    KP_(Mul, WF__DT_NUMERIC)
    KP_(Div, WF__DT_NUMERIC)
    KB_(Pow, WF__DT_NUMERIC)
    KB_(Maximum, WF__DT_NUMERIC)
    KB_(Minimum, WF__DT_NUMERIC)
    KB_(Mod, WF__DT_NUMERIC)
    KB_(Equal, WF__DT_ALL)
    KB_(NotEqual, WF__DT_ALL)
    KB_(Less, WF__DT_ALL)
    KB_(LessEqual, WF__DT_ALL)
    KB_(Greater, WF__DT_ALL)
    KB_(GreaterEqual, WF__DT_ALL)
    KB_(And, WF__DT_BIT(WF_BOOL))
    KB_(Or, WF__DT_BIT(WF_BOOL))
    KB_(Xor, WF__DT_BIT(WF_BOOL))
    WF__EW_UNARY_OPS(KU_)
    {"Where", "CPU", WF__DT_ALL, 1, k_Where, NULL, WF__K_INPLACE},
    {"Cast", "CPU", WF__DT_ALL, 0, wf__ew_k_Cast, NULL, 0},
    {0},
};
