/*
 * CPU kernels for Reduce{Sum,Mean,Max,Min,Prod,L2} and ArgMax/ArgMin, plus the group's kernel table
 * (softmax and the normalisations live in k_norm.c). A reduction merges adjacent axes into alternating
 * kept/reduced groups: a reduced innermost group is reduced horizontally along contiguous memory, a kept
 * innermost group is reduced vertically into a tile of accumulators, one per output element.
 */
#include "device/kernel.h"
#include "k_misc.h"
#include "k_tmp.h"

#include <float.h>
#include <math.h>
#include <string.h>


/* Kernels from k_norm.c, listed in this group's table. */
wf_status *wf__k_softmax(wf__kctx *k);
wf_status *wf__k_log_softmax(wf__kctx *k);
wf_status *wf__k_batchnorm(wf__kctx *k);
wf_status *wf__k_fused_batchnorm(wf__kctx *k);
wf_status *wf__k_fused_batchnorm_grad(wf__kctx *k);
wf_status *wf__k_layernorm(wf__kctx *k);
wf_status *wf__k_dropout(wf__kctx *k);

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L2 };
/* Compute classes: f16/bf16 are widened to f32 and small ints to i64 up front, so the loops exist once
 * per class instead of once per dtype. */
enum { C_F32, C_F64, C_I64 };

#define LANES 32      /* independent accumulators per horizontal step: 2 AVX-512 / 4 AVX2 registers */
#define HBLOCK 4096   /* f32 terms summed in f32 lanes before joining the f64 total (error stays ~1e-7) */
#define TW 256        /* vertical tile: output elements accumulated together */
#define VBLOCK 64     /* rows summed into f32 tile accumulators before folding them into f64 */
#define GRAIN 32768   /* elements per parallel task */
#define SHORT_RUN 32  /* horizontal runs this short skip the vectorised loop (h_unit) */
#define MID_RUN 256   /* f32 runs up to this long take 8 lanes (hsum8_f32): one vector register, whose
                       * set-up and tree of 7 adds cost little next to LANES' 31 (a global average pool's
                       * 49-element runs: ShuffleNetV2's ReduceMean of 1024 x 7 x 7, 52 -> 36 us traced) */

/* ---- horizontal loops: reduce one contiguous run ------------------------------------------------- */

/* The lanes are explicit vectors of 32 bytes, NV of them (LANES lanes, 8 for hsum8_*): written as arrays
 * of scalars (acc[LANES], element i + j into lane j), GCC kept them in memory, a load and a store around
 * every vector add (`rep stos` to zero them, 4-5 cycles of store forwarding a step) and the tree a scalar
 * loop: ReduceSum of 256 x 1024 f32 on one Zen 3 core took 69 us. Element i + j still goes to lane j
 * (vector j / VL, lane j % VL), and the lanes fold in the same tree (vector halves first, then within
 * the vector), so the sums are the bits the scalar form gave, on every ISA clone. */
typedef float rv8f __attribute__((vector_size(32)));
typedef double rv4d __attribute__((vector_size(32)));
typedef float rv8f_u __attribute__((vector_size(32), aligned(4)));
typedef double rv4d_u __attribute__((vector_size(32), aligned(8)));
typedef uint16_t rv8h_u __attribute__((vector_size(16), aligned(2)));
typedef uint32_t rv8u __attribute__((vector_size(32)));
typedef int32_t rv8i __attribute__((vector_size(32)));
typedef int64_t rv4l __attribute__((vector_size(32)));

#define VLD_F32(q) (*(const rv8f_u *)(q))
#define VLD_F64(q) (*(const rv4d_u *)(q))
/* 8 bf16 values widened to f32 (exact) */
#define VLD_BF16(q) ((rv8f)(__builtin_convertvector(*(const rv8h_u *)(q), rv8u) << 16))

/* S: the stored element; T: the accumulators' type, VT its vector (VL lanes), NV vectors; LD(s) an element
 * as T, VLD(q) VL elements at q as VT; EXPR of v (a T or a VT) the term */
#define DEF_HSUM_N(NAME, S, T, VT, LD, VLD, EXPR, NV)                                                  \
    WF__VEC static double NAME(const S *p, int64_t n)                                                  \
    {                                                                                                  \
        enum { VL = sizeof(VT) / sizeof(T), L = (NV) * VL };                                           \
        double total = 0;                                                                              \
        for (int64_t b = 0; b < n; b += HBLOCK) {                                                      \
            int64_t e = n - b > HBLOCK ? b + HBLOCK : n;                                               \
            VT acc[NV];                                                                                \
            _Pragma("GCC unroll 8") for (int k = 0; k < (NV); k++) acc[k] = (VT){0};                   \
            int64_t i = b;                                                                             \
            for (; i + L <= e; i += L)                                                                 \
                _Pragma("GCC unroll 8") for (int k = 0; k < (NV); k++) {                               \
                    VT v = VLD(p + i + k * VL);                                                        \
                    acc[k] += EXPR;                                                                    \
                }                                                                                      \
            for (; i < e; i++) {                                                                       \
                T v = LD(p[i]);                                                                        \
                total += EXPR;                                                                         \
            }                                                                                          \
            /* tree-combine the lanes: cheap for short rows, where this dominates */                    \
            _Pragma("GCC unroll 8") for (int w = (NV) / 2; w > 0; w /= 2)                              \
                _Pragma("GCC unroll 8") for (int k = 0; k < w; k++) acc[k] += acc[k + w];              \
            T a[VL];                                                                                   \
            memcpy(a, &acc[0], sizeof a);                                                              \
            _Pragma("GCC unroll 8") for (int w = VL / 2; w > 0; w /= 2)                                \
                _Pragma("GCC unroll 8") for (int j = 0; j < w; j++) a[j] += a[j + w];                  \
            total += a[0];                                                                             \
        }                                                                                              \
        return total;                                                                                  \
    }
#define LD_AS_IS(v) (v)
DEF_HSUM_N(hsum8_f32, float, float, rv8f, LD_AS_IS, VLD_F32, v, 1)
DEF_HSUM_N(hsumsq8_f32, float, float, rv8f, LD_AS_IS, VLD_F32, v * v, 1)
DEF_HSUM_N(hsum_f32, float, float, rv8f, LD_AS_IS, VLD_F32, v, LANES / 8)
DEF_HSUM_N(hsumsq_f32, float, float, rv8f, LD_AS_IS, VLD_F32, v * v, LANES / 8)
DEF_HSUM_N(hsum_f64, double, double, rv4d, LD_AS_IS, VLD_F64, v, LANES / 4)
DEF_HSUM_N(hsumsq_f64, double, double, rv4d, LD_AS_IS, VLD_F64, v * v, LANES / 4)
/* bf16 read in place, widened in the loop (exact): the same sums in the same order as over an f32 copy,
 * without writing and reading that copy (a bf16 convolution's bias gradient took twice f32's time) */
DEF_HSUM_N(hsum_bf16, uint16_t, float, rv8f, wf__bf2f, VLD_BF16, v, LANES / 8)
DEF_HSUM_N(hsumsq_bf16, uint16_t, float, rv8f, wf__bf2f, VLD_BF16, v * v, LANES / 8)

WF__VEC static uint64_t hsum_u64(const uint64_t *p, int64_t n)
{
    uint64_t acc[16] = {0}, s = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += p[i + j];
    for (; i < n; i++) s += p[i];
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
}

/* Max/min propagate NaN like numpy: a NaN operand always wins. */
#define GT_NAN(v, a) ((v) > (a) || (v) != (v))
#define LT_NAN(v, a) ((v) < (a) || (v) != (v))
#define GT_INT(v, a) ((v) > (a))
#define LT_INT(v, a) ((v) < (a))

/* The float forms in explicit vectors as the sums above (lane j % VL of vector j / VL), the lanes then
 * folded one by one in lane order as before: which NaN or which zero's sign comes out stays the same.
 * VI: VT's integer vector, for the select. */
#define DEF_HEXT_V(NAME, T, VT, VI, VLD, INIT, BETTER)                                                 \
    WF__VEC static T NAME(const T *p, int64_t n)                                                       \
    {                                                                                                  \
        enum { VL = sizeof(VT) / sizeof(T), NV = LANES / VL };                                         \
        VT acc[NV];                                                                                    \
        T m = INIT;                                                                                    \
        _Pragma("GCC unroll 8") for (int k = 0; k < NV; k++) acc[k] = (VT){0} + INIT;                  \
        int64_t i = 0;                                                                                 \
        for (; i + LANES <= n; i += LANES)                                                             \
            _Pragma("GCC unroll 8") for (int k = 0; k < NV; k++) {                                     \
                VT v = VLD(p + i + k * VL);                                                            \
                VI t = (VI)BETTER(v, acc[k]);                                                          \
                acc[k] = (VT)((t & (VI)v) | (~t & (VI)acc[k]));                                        \
            }                                                                                          \
        for (; i < n; i++) m = BETTER(p[i], m) ? p[i] : m;                                             \
        T a[LANES];                                                                                    \
        memcpy(a, acc, sizeof a);                                                                      \
        for (int j = 0; j < LANES; j++) m = BETTER(a[j], m) ? a[j] : m;                                \
        return m;                                                                                      \
    }
#define DEF_HEXT(NAME, T, INIT, BETTER)                                                                \
    WF__VEC static T NAME(const T *p, int64_t n)                                                       \
    {                                                                                                  \
        T acc[LANES], m = INIT;                                                                        \
        for (int j = 0; j < LANES; j++) acc[j] = INIT;                                                 \
        int64_t i = 0;                                                                                 \
        for (; i + LANES <= n; i += LANES)                                                             \
            for (int j = 0; j < LANES; j++) {                                                          \
                T v = p[i + j];                                                                        \
                acc[j] = BETTER(v, acc[j]) ? v : acc[j];                                               \
            }                                                                                          \
        for (; i < n; i++) m = BETTER(p[i], m) ? p[i] : m;                                             \
        for (int j = 0; j < LANES; j++) m = BETTER(acc[j], m) ? acc[j] : m;                            \
        return m;                                                                                      \
    }
/* vector forms of GT_NAN / LT_NAN: a lane mask (the compares of GCC's vectors give -1 or 0) */
#define GT_NAN_V(v, a) (((v) > (a)) | ((v) != (v)))
#define LT_NAN_V(v, a) (((v) < (a)) | ((v) != (v)))
DEF_HEXT_V(hmax_f32, float, rv8f, rv8i, VLD_F32, -INFINITY, GT_NAN_V)
DEF_HEXT_V(hmin_f32, float, rv8f, rv8i, VLD_F32, INFINITY, LT_NAN_V)
DEF_HEXT_V(hmax_f64, double, rv4d, rv4l, VLD_F64, -INFINITY, GT_NAN_V)
DEF_HEXT_V(hmin_f64, double, rv4d, rv4l, VLD_F64, INFINITY, LT_NAN_V)
DEF_HEXT(hmax_i64, int64_t, INT64_MIN, GT_INT)
DEF_HEXT(hmin_i64, int64_t, INT64_MAX, LT_INT)

/* ---- vertical loops: acc[0..tw) op= rows of a tile, `rows` rows `stride` elements apart ----------- */

#define DEF_VLOOP(NAME, T, STEP)                                                                       \
    WF__VEC static void NAME(T *restrict acc, const T *restrict p, int64_t tw, int64_t rows,          \
                             int64_t stride)                                                           \
    {                                                                                                  \
        for (int64_t r = 0; r < rows; r++, p += stride) {                                              \
            int64_t i = 0;                                                                             \
            for (; i + 16 <= tw; i += 16)                                                              \
                for (int j = 0; j < 16; j++) {                                                         \
                    T v = p[i + j], a = acc[i + j];                                                    \
                    acc[i + j] = STEP;                                                                 \
                }                                                                                      \
            for (; i < tw; i++) {                                                                      \
                T v = p[i], a = acc[i];                                                                \
                acc[i] = STEP;                                                                         \
            }                                                                                          \
        }                                                                                              \
    }
DEF_VLOOP(vsum_f32, float, a + v)
DEF_VLOOP(vsumsq_f32, float, a + v * v)
DEF_VLOOP(vmax_f32, float, GT_NAN(v, a) ? v : a)
DEF_VLOOP(vmin_f32, float, LT_NAN(v, a) ? v : a)
DEF_VLOOP(vsum_f64, double, a + v)
DEF_VLOOP(vsumsq_f64, double, a + v * v)
DEF_VLOOP(vmax_f64, double, GT_NAN(v, a) ? v : a)
DEF_VLOOP(vmin_f64, double, LT_NAN(v, a) ? v : a)
DEF_VLOOP(vsum_u64, uint64_t, a + v)
DEF_VLOOP(vmax_i64, int64_t, GT_INT(v, a) ? v : a)
DEF_VLOOP(vmin_i64, int64_t, LT_INT(v, a) ? v : a)

/* ---- accumulators ----------------------------------------------------------------------------------- */

/* One partial result: d for float classes (and int L2), i/u for integer classes (u wraps like numpy). */
typedef union acc_t {
    double d;
    int64_t i;
    uint64_t u;
} acc_t;

static bool acc_is_double(int op, int cls) { return cls != C_I64 || op == R_L2; }

static acc_t acc_init(int op, int cls)
{
    acc_t a;
    if (acc_is_double(op, cls)) {
        a.d = op == R_PROD ? 1.0 : op == R_MAX ? -INFINITY : op == R_MIN ? INFINITY : 0.0;
    } else {
        a.i = op == R_PROD ? 1 : op == R_MAX ? INT64_MIN : op == R_MIN ? INT64_MAX : 0;
    }
    return a;
}

static acc_t acc_combine(int op, int cls, acc_t a, acc_t b)
{
    if (acc_is_double(op, cls)) {
        switch (op) {
        case R_PROD: a.d *= b.d; break;
        case R_MAX: a.d = GT_NAN(b.d, a.d) ? b.d : a.d; break;
        case R_MIN: a.d = LT_NAN(b.d, a.d) ? b.d : a.d; break;
        default: a.d += b.d; break;
        }
    } else {
        switch (op) {
        case R_PROD: a.u *= b.u; break;
        case R_MAX: a.i = b.i > a.i ? b.i : a.i; break;
        case R_MIN: a.i = b.i < a.i ? b.i : a.i; break;
        default: a.u += b.u; break;
        }
    }
    return a;
}

/* Folds a contiguous run of n elements (of the class's element type) into a. */
static acc_t acc_run(int op, int cls, acc_t a, const void *p, int64_t n)
{
    acc_t b;
    switch (cls) {
    case C_F32: {
        const float *x = p;
        switch (op) {
        case R_MAX: b.d = hmax_f32(x, n); break;
        case R_MIN: b.d = hmin_f32(x, n); break;
        case R_L2: b.d = n <= MID_RUN ? hsumsq8_f32(x, n) : hsumsq_f32(x, n); break;
        case R_PROD:
            b.d = 1;
            for (int64_t i = 0; i < n; i++) b.d *= x[i];
            break;
        default: b.d = n <= MID_RUN ? hsum8_f32(x, n) : hsum_f32(x, n); break;
        }
        break;
    }
    case C_F64: {
        const double *x = p;
        switch (op) {
        case R_MAX: b.d = hmax_f64(x, n); break;
        case R_MIN: b.d = hmin_f64(x, n); break;
        case R_L2: b.d = hsumsq_f64(x, n); break;
        case R_PROD:
            b.d = 1;
            for (int64_t i = 0; i < n; i++) b.d *= x[i];
            break;
        default: b.d = hsum_f64(x, n); break;
        }
        break;
    }
    default: {
        const int64_t *x = p;
        switch (op) {
        case R_MAX: b.i = hmax_i64(x, n); break;
        case R_MIN: b.i = hmin_i64(x, n); break;
        case R_L2:
            b.d = 0;
            for (int64_t i = 0; i < n; i++) b.d += (double)x[i] * (double)x[i];
            break;
        case R_PROD:
            b.u = 1;
            for (int64_t i = 0; i < n; i++) b.u *= (uint64_t)x[i];
            break;
        default: b.u = hsum_u64((const uint64_t *)x, n); break;
        }
        break;
    }
    }
    return acc_combine(op, cls, a, b);
}

static void store_int(void *y, wf_dtype dt, int64_t idx, int64_t v)
{
    switch (dt) {
    case WF_I8: ((int8_t *)y)[idx] = (int8_t)v; break;
    case WF_U8: ((uint8_t *)y)[idx] = (uint8_t)v; break;
    case WF_I16: ((int16_t *)y)[idx] = (int16_t)v; break;
    case WF_I32: ((int32_t *)y)[idx] = (int32_t)v; break;
    default: ((int64_t *)y)[idx] = v; break;
    }
}

static void store_float(void *y, wf_dtype dt, int64_t idx, double v)
{
    switch (dt) {
    case WF_F32: ((float *)y)[idx] = (float)v; break;
    case WF_F16: ((uint16_t *)y)[idx] = wf__f2h((float)v); break;
    case WF_BF16: ((uint16_t *)y)[idx] = wf__f2bf((float)v); break;
    default: ((double *)y)[idx] = v; break;
    }
}

/* The identity of max/min over nothing is the dtype's lowest/highest value (ONNX), not int64's. */
static int64_t int_limit(wf_dtype dt, bool lowest)
{
    switch (dt) {
    case WF_I8: return lowest ? INT8_MIN : INT8_MAX;
    case WF_U8: return lowest ? 0 : UINT8_MAX;
    case WF_I16: return lowest ? INT16_MIN : INT16_MAX;
    case WF_I32: return lowest ? INT32_MIN : INT32_MAX;
    default: return lowest ? INT64_MIN : INT64_MAX;
    }
}

/* How a float reduction's result is finished: as its op says (Mean divides, L2 takes the root), or
 * ReduceSumSquare's (L2's sum, no root) and ReduceLogSum's (Sum's, then its log). */
enum { FIN_OP, FIN_NONE, FIN_LOG };

static void acc_store(int op, int cls, int fin, acc_t a, int64_t count, void *y, wf_dtype dt, int64_t idx)
{
    if (cls != C_I64) {
        double v = a.d;
        if (fin == FIN_LOG) v = log(v); /* log 0 = -inf over an empty set, as ONNX's reference */
        else if (fin == FIN_NONE) {
        } else if (op == R_MEAN) v = v / (double)count; /* 0/0 = NaN over an empty set, as numpy */
        else if (op == R_L2) v = sqrt(v);
        store_float(y, dt, idx, v);
        return;
    }
    int64_t v;
    switch (op) {
    /* ONNX computes the mean of ints in floating point and casts back: truncation toward zero. */
    case R_MEAN: v = count ? (int64_t)a.u / count : 0; break;
    case R_L2: v = (int64_t)sqrt(a.d); break;
    case R_MAX: v = count ? a.i : int_limit(dt, true); break;
    case R_MIN: v = count ? a.i : int_limit(dt, false); break;
    default: v = a.i; break;
    }
    store_int(y, dt, idx, v);
}

/* ---- the reduction plan --------------------------------------------------------------------------- */

typedef struct rplan {
    int op, cls, fin;
    const char *x;          /* input in the class's element type */
    size_t es;              /* its element size */
    void *y;
    wf_dtype ydt;
    int64_t count;          /* elements reduced into each output */
    bool vertical;          /* innermost group is kept */
    /* Kept groups enumerate outputs (vertical: without the innermost one, whose length is inner). */
    int nk;
    int64_t kdim[WF_MAX_RANK], kstride[WF_MAX_RANK];
    /* Reduced groups; horizontal: the last one is contiguous with length inner. */
    int nr;
    int64_t rdim[WF_MAX_RANK], rstride[WF_MAX_RANK];
    int64_t inner;
    bool bf16;              /* x is the bf16 input itself (horizontal sums over long runs) */
    int64_t n_outer;        /* horizontal: outputs; vertical: output rows of `inner` */
    int64_t ntiles;         /* vertical: tiles per row */
    int64_t parts;          /* splits of each reduction (for few, large reductions) */
    acc_t *partial;         /* [unit] (horizontal) or [unit][TW] (vertical) when parts > 1 */
} rplan;

/* Offset of flat index g over dims[0..n) with strides. */
static int64_t group_offset(int n, const int64_t *dims, const int64_t *strides, int64_t g)
{
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (g % dims[d]) * strides[d];
        g /= dims[d];
    }
    return off;
}

static void h_unit(const rplan *P, int64_t u)
{
    int64_t o = u / P->parts, p = u % P->parts;
    int64_t base = group_offset(P->nk, P->kdim, P->kstride, o);
    int64_t L = P->inner;
    int64_t b = P->count * p / P->parts, e = P->count * (p + 1) / P->parts;
    acc_t a = acc_init(P->op, P->cls);
    if (L <= SHORT_RUN && P->cls == C_F32 && (P->op == R_SUM || P->op == R_MEAN)) {
        /* Short runs (a BatchNorm gradient's sum over N, H, W of a 2x2 or 4x4 map): the vectorised
         * horizontal loop's set-up cost dozens of cycles per run of 4 (0.45 ms for 32K elements); a plain
         * loop per run, each run summed in f32 and the runs in f64, as the long loop does per block. */
        while (b < e) {
            int64_t g = b / L, l = b % L;
            int64_t len = L - l < e - b ? L - l : e - b;
            const float *q = (const float *)P->x + base + group_offset(P->nr - 1, P->rdim, P->rstride, g) + l;
            float run = 0;
            for (int64_t j = 0; j < len; j++) run += q[j];
            a.d += run;
            b += len;
        }
    }
    while (b < e) {
        int64_t g = b / L, l = b % L;
        int64_t len = L - l < e - b ? L - l : e - b;
        int64_t off = base + group_offset(P->nr - 1, P->rdim, P->rstride, g) + l;
        if (P->bf16) {
            const uint16_t *q = (const uint16_t *)P->x + off;
            a.d += P->op == R_L2 ? hsumsq_bf16(q, len) : hsum_bf16(q, len);
        } else {
            a = acc_run(P->op, P->cls, a, P->x + off * (int64_t)P->es, len);
        }
        b += len;
    }
    if (P->parts == 1) acc_store(P->op, P->cls, P->fin, a, P->count, P->y, P->ydt, o);
    else P->partial[u] = a;
}

/* Accumulates `rows` rows of a tile into class-typed accumulators t (f32 sums fold into wide). */
static void v_rows(const rplan *P, void *t, double *wide, const char *p, int64_t tw, int64_t rows,
                   int64_t stride)
{
    int op = P->op;
    switch (P->cls) {
    case C_F32:
        if (op == R_MAX) vmax_f32(t, (const float *)p, tw, rows, stride);
        else if (op == R_MIN) vmin_f32(t, (const float *)p, tw, rows, stride);
        else {
            float *acc = t;
            for (int64_t r0 = 0; r0 < rows; r0 += VBLOCK) {
                int64_t n = rows - r0 < VBLOCK ? rows - r0 : VBLOCK;
                const float *q = (const float *)p + r0 * stride;
                if (op == R_L2) vsumsq_f32(acc, q, tw, n, stride);
                else vsum_f32(acc, q, tw, n, stride);
                for (int64_t i = 0; i < tw; i++) {
                    wide[i] += acc[i];
                    acc[i] = 0;
                }
            }
        }
        break;
    case C_F64:
        if (op == R_MAX) vmax_f64(t, (const double *)p, tw, rows, stride);
        else if (op == R_MIN) vmin_f64(t, (const double *)p, tw, rows, stride);
        else if (op == R_L2) vsumsq_f64(t, (const double *)p, tw, rows, stride);
        else vsum_f64(t, (const double *)p, tw, rows, stride);
        break;
    default:
        if (op == R_MAX) vmax_i64(t, (const int64_t *)p, tw, rows, stride);
        else if (op == R_MIN) vmin_i64(t, (const int64_t *)p, tw, rows, stride);
        else vsum_u64(t, (const uint64_t *)p, tw, rows, stride);
        break;
    }
}

/* A float ReduceProd's rows into pv (f64 products, the operations acc_run does one element at a time, so the
 * same bits): ReduceProd of 256 x 1024 f32 along axis 0 took 0.75 ms through acc_run on 2 Zen 5 threads
 * (ONNX Runtime 0.40). */
WF__VEC static void vprod_rows(double *restrict pv, const char *src, int64_t tw, int64_t run, int64_t sr, bool f32)
{
    for (int64_t r = 0; r < run; r++) {
        if (f32) {
            const float *q = (const float *)(const void *)src + r * sr;
            _Pragma("omp simd") for (int64_t i = 0; i < tw; i++) pv[i] *= (double)q[i];
        } else {
            const double *q = (const double *)(const void *)src + r * sr;
            _Pragma("omp simd") for (int64_t i = 0; i < tw; i++) pv[i] *= q[i];
        }
    }
}

static void v_unit(const rplan *P, int64_t u)
{
    int64_t p = u % P->parts, rt = u / P->parts;
    int64_t row = rt / P->ntiles, tile = rt % P->ntiles;
    int64_t i0 = tile * TW, tw = P->inner - i0 < TW ? P->inner - i0 : TW;
    int64_t base = group_offset(P->nk, P->kdim, P->kstride, row) + i0;
    int64_t b = P->count * p / P->parts, e = P->count * (p + 1) / P->parts;
    int op = P->op, cls = P->cls;
    /* Prod and integer L2 are rare: they take the per-run path, one row at a time (float Prod a row of the
     * tile at a time through vprod_rows). */
    bool generic = op == R_PROD || (cls == C_I64 && op == R_L2);
    acc_t out[TW];
    union {
        float f[TW];
        double d[TW];
        int64_t i[TW];
    } t;
    double wide[TW];
    acc_t init = acc_init(op, cls);
    for (int64_t i = 0; i < tw; i++) {
        out[i] = init;
        wide[i] = 0;
        if (cls == C_F32) t.f[i] = op == R_MAX ? -INFINITY : op == R_MIN ? INFINITY : 0.f;
        else if (cls == C_F64) t.d[i] = init.d;
        else t.i[i] = init.i;
    }
    int64_t Lr = P->rdim[P->nr - 1], sr = P->rstride[P->nr - 1];
    while (b < e) {
        int64_t g = b / Lr, l = b % Lr;
        int64_t run = Lr - l < e - b ? Lr - l : e - b;
        int64_t off = base + group_offset(P->nr - 1, P->rdim, P->rstride, g) + l * sr;
        const char *src = P->x + off * (int64_t)P->es;
        if (op == R_PROD && cls != C_I64) {
            double pv[TW];
            for (int64_t i = 0; i < tw; i++) pv[i] = out[i].d;
            vprod_rows(pv, src, tw, run, sr, cls == C_F32);
            for (int64_t i = 0; i < tw; i++) out[i].d = pv[i];
        } else if (generic) {
            for (int64_t r = 0; r < run; r++)
                for (int64_t i = 0; i < tw; i++)
                    out[i] = acc_run(op, cls, out[i], src + (r * sr + i) * (int64_t)P->es, 1);
        } else {
            v_rows(P, &t, wide, src, tw, run, sr);
        }
        b += run;
    }
    if (!generic) {
        for (int64_t i = 0; i < tw; i++) {
            if (cls == C_F32) out[i].d = (op == R_MAX || op == R_MIN) ? t.f[i] : wide[i];
            else if (cls == C_F64) out[i].d = t.d[i];
            else out[i].i = t.i[i];
        }
    }
    if (P->parts == 1) {
        for (int64_t i = 0; i < tw; i++)
            acc_store(op, cls, P->fin, out[i], P->count, P->y, P->ydt, row * P->inner + i0 + i);
    } else {
        memcpy(P->partial + u * TW, out, (size_t)tw * sizeof(acc_t));
    }
}

static void reduce_range(void *arg, int64_t b, int64_t e)
{
    const rplan *P = arg;
    for (int64_t u = b; u < e; u++) {
        if (P->vertical) v_unit(P, u);
        else h_unit(P, u);
    }
}

/* Widens f16/bf16 to f32 and small ints to i64 so the loops above see one type per class. */
static wf_status *to_class(wf__kctx *k, const wf_tensor *x, int cls, const void **data, void **owned)
{
    wf_dtype want = cls == C_F32 ? WF_F32 : cls == C_F64 ? WF_F64 : WF_I64;
    *owned = NULL;
    *data = x->data;
    if (x->dtype == want || x->size == 0) return NULL;
    if (want == WF_F32) { /* f16, bf16: the cached scratch (free with owned_free), converted on the threads */
        float *f;
        WF__TRY(wf__dn_to_f32(k, x->data, x->dtype, x->size, &f));
        *owned = f;
        *data = f;
        return NULL;
    }
    size_t bytes = (size_t)x->size * wf_dtype_size(want);
    void *buf = wf__malloc(bytes);
    if (!buf) return wf__status_wrap(wf__oom("reduction input", bytes), "node '%s' (%s)", k->node, k->op->name);
    wf__convert(x->data, x->dtype, buf, want, x->size);
    *owned = buf;
    *data = buf;
    return NULL;
}

/* Frees to_class's buffer for class cls. */
static void owned_free(int cls, void *owned)
{
    if (cls == C_F32) wf__dn_tmp_free(owned);
    else wf__free(owned);
}

static int class_of(wf_dtype dt)
{
    if (dt == WF_F64) return C_F64;
    if (wf__dtype_is_float(dt)) return C_F32;
    return C_I64;
}

/* Reads the node's axes (attribute or input 1) into red[]; *all_empty when none were given. */
static wf_status *read_axes(wf__kctx *k, const wf_tensor *x, bool *red, bool *none)
{
    const wf__attr *attr = wf__attr_get(k->op, k->attrs, "axes");
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    const wf_tensor *at = k->n_in > 1 ? k->in[1] : NULL;
    char b0[160];
    if (attr->set) {
        if (attr->n > WF_MAX_RANK) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "too many axes (%d)", attr->n);
        n = attr->n;
        memcpy(axes, attr->ints, (size_t)n * sizeof *axes);
    } else if (at) {
        if ((at->dtype != WF_I64 && at->dtype != WF_I32) || at->rank > 1 || at->size > WF_MAX_RANK)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes must be a 1-D i64 tensor of at most %d values, got %s%s",
                                 WF_MAX_RANK, wf_dtype_name(at->dtype), wf__shape_str(at->rank, at->dims, b0));
        n = (int)at->size;
        for (int i = 0; i < n; i++) axes[i] = wf__load_i64(at->data, at->dtype, i);
    }
    for (int i = 0; i < x->rank; i++) red[i] = false;
    *none = n == 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!wf__norm_axis(axes[i], x->rank, &a))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s%s",
                                 (long long)axes[i], wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
        if (red[a])
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes", (long long)axes[i]);
        red[a] = true;
    }
    return NULL;
}

static wf_status *reduce_axes(wf__kctx *k, int op, int fin, const bool *red, bool keepdims);

static wf_status *reduce_kernel_fin(wf__kctx *k, int op, int fin)
{
    const wf_tensor *x = k->in[0];
    bool red[WF_MAX_RANK], none = true;
    WF__TRY(read_axes(k, x, red, &none));
    bool keepdims = wf__attr_i(k->op, k->attrs, "keepdims") != 0;
    if (none) {
        if (wf__attr_i(k->op, k->attrs, "noop_with_empty_axes"))
            return wf__kctx_output_view(k, 0, 0, x->rank, x->dims);
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    return reduce_axes(k, op, fin, red, keepdims);
}

/* GlobalMaxPool of a float tensor (k_misc_norm.c's kernel hands it over): ReduceMax over the spatial axes,
 * kept as 1s. Its f64 loop took 4.1 ms for 8 x 64 x 32 x 32 f32 (ONNX Runtime 0.16). */
wf_status *wf__k_global_max_pool_float(wf__kctx *k)
{
    bool red[WF_MAX_RANK];
    for (int i = 0; i < k->in[0]->rank; i++) red[i] = i >= 2;
    return reduce_axes(k, R_MAX, FIN_OP, red, true);
}

/* Output 0 of x reduced by op over the axes red[] says (kept as 1s when keepdims), finished by fin. */
static wf_status *reduce_axes(wf__kctx *k, int op, int fin, const bool *red, bool keepdims)
{
    const wf_tensor *x = k->in[0];
    int64_t ydims[WF_MAX_RANK];
    int yr = 0;
    int64_t count = 1;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) ydims[yr++] = x->dims[i];
        else {
            count *= x->dims[i];
            if (keepdims) ydims[yr++] = 1;
        }
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, yr, ydims, &y));
    if (y->size == 0) return NULL;

    rplan P;
    memset(&P, 0, sizeof P);
    P.op = op;
    P.fin = fin;
    P.cls = class_of(x->dtype);
    P.y = y->data;
    P.ydt = y->dtype;
    P.count = count;
    if (count == 0) {
        acc_t a = acc_init(op, P.cls);
        for (int64_t i = 0; i < y->size; i++) acc_store(op, P.cls, fin, a, 0, P.y, P.ydt, i);
        return NULL;
    }

    /* Merge adjacent axes with the same role; size-1 axes play no part. */
    int64_t strides[WF_MAX_RANK];
    wf__strides(x->rank, x->dims, strides);
    int ng = 0;
    int64_t gdim[WF_MAX_RANK], gstride[WF_MAX_RANK];
    bool gred[WF_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[i] == 1) continue;
        if (ng > 0 && gred[ng - 1] == red[i]) {
            gdim[ng - 1] *= x->dims[i];
            gstride[ng - 1] = strides[i];
        } else {
            gdim[ng] = x->dims[i];
            gstride[ng] = strides[i];
            gred[ng] = red[i];
            ng++;
        }
    }
    /* When only size-1 axes are reduced, each output reduces one element (still finalised: mean, L2). */
    bool any_red = false;
    for (int g = 0; g < ng; g++) any_red |= gred[g];
    if (!any_red) {
        gdim[ng] = 1;
        gstride[ng] = 1;
        gred[ng] = true;
        ng++;
    }
    for (int g = 0; g < ng; g++) {
        if (gred[g]) {
            P.rdim[P.nr] = gdim[g];
            P.rstride[P.nr++] = gstride[g];
        } else {
            P.kdim[P.nk] = gdim[g];
            P.kstride[P.nk++] = gstride[g];
        }
    }
    P.vertical = !gred[ng - 1];
    int64_t units, work;
    if (P.vertical) {
        P.inner = P.kdim[--P.nk];
        P.n_outer = y->size / P.inner;
        P.ntiles = (P.inner + TW - 1) / TW;
        units = P.n_outer * P.ntiles;
        work = count * (P.inner < TW ? P.inner : TW);
    } else {
        P.inner = P.rdim[P.nr - 1];
        P.n_outer = y->size;
        units = P.n_outer;
        work = count;
    }

    const void *xd = x->data;
    void *owned = NULL;
    P.bf16 = x->dtype == WF_BF16 && !P.vertical && P.inner > SHORT_RUN && (op == R_SUM || op == R_MEAN || op == R_L2);
    if (!P.bf16) WF__TRY(to_class(k, x, P.cls, &xd, &owned));
    P.x = xd;
    P.es = P.bf16 ? 2 : P.cls == C_F32 ? 4 : 8;

    /* Few large reductions split each one into parts combined afterwards, so all threads take part. */
    P.parts = 1;
    int threads = wf__kctx_threads(k);
    if (x->size >= 2 * GRAIN && units < 2 * threads) {
        int64_t want = (4 * threads + units - 1) / units;
        int64_t most = P.vertical ? count / 16 : count / 4096;
        P.parts = want < most ? want : most;
        if (P.parts < 1) P.parts = 1;
    }
    if (P.parts > 1) {
        size_t n = (size_t)(units * P.parts) * (P.vertical ? TW : 1);
        P.partial = wf__malloc(n * sizeof(acc_t));
        if (!P.partial) {
            owned_free(P.cls, owned);
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for partial sums",
                                 n * sizeof(acc_t));
        }
    }
    int64_t per = work / P.parts;
    int64_t grain = per >= GRAIN ? 1 : GRAIN / (per > 0 ? per : 1);
    wf__parallel_for(k, units * P.parts, grain, reduce_range, &P);

    if (P.parts > 1) {
        for (int64_t u = 0; u < units; u++) {
            if (!P.vertical) {
                acc_t a = P.partial[u * P.parts];
                for (int64_t p = 1; p < P.parts; p++) a = acc_combine(op, P.cls, a, P.partial[u * P.parts + p]);
                acc_store(op, P.cls, fin, a, count, P.y, P.ydt, u);
                continue;
            }
            int64_t row = u / P.ntiles, i0 = (u % P.ntiles) * TW;
            int64_t tw = P.inner - i0 < TW ? P.inner - i0 : TW;
            for (int64_t i = 0; i < tw; i++) {
                acc_t a = P.partial[(u * P.parts) * TW + i];
                for (int64_t p = 1; p < P.parts; p++)
                    a = acc_combine(op, P.cls, a, P.partial[(u * P.parts + p) * TW + i]);
                acc_store(op, P.cls, fin, a, count, P.y, P.ydt, row * P.inner + i0 + i);
            }
        }
        wf__free(P.partial);
    }
    owned_free(P.cls, owned);
    return NULL;
}

static wf_status *reduce_kernel(wf__kctx *k, int op) { return reduce_kernel_fin(k, op, FIN_OP); }

/* ReduceSumSquare and ReduceLogSum of a float tensor (k_misc_norm.c's kernel hands them over; it keeps the
 * integer ones, whose squares wrap as numpy's do): L2's and Sum's loops, finished without the root or with
 * the log. Through k_misc_norm.c's f64 loop over element offsets ReduceSumSquare of 256 x 1024 f32 took
 * 1.6 ms on one Zen 3 core. */
wf_status *wf__k_reduce_sum_square_float(wf__kctx *k) { return reduce_kernel_fin(k, R_L2, FIN_NONE); }
wf_status *wf__k_reduce_log_sum_float(wf__kctx *k) { return reduce_kernel_fin(k, R_SUM, FIN_LOG); }

static wf_status *k_reduce_sum(wf__kctx *k) { return reduce_kernel(k, R_SUM); }
static wf_status *k_reduce_mean(wf__kctx *k) { return reduce_kernel(k, R_MEAN); }
/* bool max / min are any / all: reduce the bytes as u8 (the input as a u8 view, never written), then
 * call the result bool again; over an empty set min gives u8's 255, so squash to 0/1. */
static wf_status *reduce_bool(wf__kctx *k, int op)
{
    wf_tensor xu = *k->in[0];
    xu.dtype = WF_U8;
    wf_tensor *in[2] = {&xu, k->n_in > 1 ? k->in[1] : NULL};
    wf__kctx k2 = *k;
    k2.in = in;
    k2.in_owned = 0;
    WF__TRY(reduce_kernel(&k2, op));
    wf_tensor *y = k->out[0];
    y->dtype = WF_BOOL;
    for (int64_t i = 0; i < y->size; i++) ((uint8_t *)y->data)[i] = ((uint8_t *)y->data)[i] != 0;
    return NULL;
}

static wf_status *k_reduce_max(wf__kctx *k)
{
    return k->in[0]->dtype == WF_BOOL ? reduce_bool(k, R_MAX) : reduce_kernel(k, R_MAX);
}
static wf_status *k_reduce_min(wf__kctx *k)
{
    return k->in[0]->dtype == WF_BOOL ? reduce_bool(k, R_MIN) : reduce_kernel(k, R_MIN);
}
static wf_status *k_reduce_prod(wf__kctx *k) { return reduce_kernel(k, R_PROD); }
static wf_status *k_reduce_l2(wf__kctx *k) { return reduce_kernel(k, R_L2); }

/* ---- ArgMax / ArgMin -------------------------------------------------------------------------------- */

typedef struct aplan {
    int cls;
    bool is_max, last;
    const char *x;
    int64_t *y;
    int64_t outer, R, inner, ntiles;
} aplan;

/* Whether v replaces the current best b. NaN counts as the extreme (numpy returns the first NaN). */
#define ARG_TAKE(v, b, is_max, last, isnan_v, isnan_b)                                                  \
    ((isnan_v) ? ((last) || !(isnan_b))                                                                 \
               : (!(isnan_b) && ((is_max) ? ((last) ? (v) >= (b) : (v) > (b))                           \
                                          : ((last) ? (v) <= (b) : (v) < (b)))))

#define DEF_ARG(NAME, T, ISNAN)                                                                        \
    static void NAME(const aplan *A, int64_t row, int64_t i0, int64_t tw)                             \
    {                                                                                                  \
        const T *x = (const T *)A->x + row * A->R * A->inner + i0;                                     \
        T best[TW];                                                                                    \
        int64_t idx[TW];                                                                               \
        for (int64_t i = 0; i < tw; i++) {                                                             \
            best[i] = x[i];                                                                            \
            idx[i] = 0;                                                                                \
        }                                                                                              \
        for (int64_t r = 1; r < A->R; r++) {                                                           \
            const T *q = x + r * A->inner;                                                             \
            for (int64_t i = 0; i < tw; i++) {                                                         \
                T v = q[i], b = best[i];                                                               \
                if (ARG_TAKE(v, b, A->is_max, A->last, ISNAN(v), ISNAN(b))) {                          \
                    best[i] = v;                                                                       \
                    idx[i] = r;                                                                        \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        memcpy(A->y + row * A->inner + i0, idx, (size_t)tw * sizeof(int64_t));                        \
    }
#define FNAN(v) ((v) != (v))
#define INAN(v) false
DEF_ARG(arg_tile_f32, float, FNAN)
DEF_ARG(arg_tile_f64, double, FNAN)
DEF_ARG(arg_tile_i64, int64_t, INAN)

/* A contiguous row: find the extreme with the vectorised loops, then its first (or last) position. */
#define DEF_ARG_ROW(NAME, T, HMAX, HMIN, ISNAN)                                                        \
    static int64_t NAME(const aplan *A, const T *x)                                                   \
    {                                                                                                  \
        T m = A->is_max ? HMAX(x, A->R) : HMIN(x, A->R);                                               \
        bool mnan = ISNAN(m);                                                                          \
        if (A->last) {                                                                                 \
            for (int64_t r = A->R - 1; r >= 0; r--)                                                    \
                if (mnan ? ISNAN(x[r]) : x[r] == m) return r;                                          \
        } else {                                                                                       \
            for (int64_t r = 0; r < A->R; r++)                                                         \
                if (mnan ? ISNAN(x[r]) : x[r] == m) return r;                                          \
        }                                                                                              \
        return 0;                                                                                      \
    }
DEF_ARG_ROW(arg_row_f32, float, hmax_f32, hmin_f32, FNAN)
DEF_ARG_ROW(arg_row_f64, double, hmax_f64, hmin_f64, FNAN)
DEF_ARG_ROW(arg_row_i64, int64_t, hmax_i64, hmin_i64, INAN)

static void arg_range(void *arg, int64_t b, int64_t e)
{
    const aplan *A = arg;
    for (int64_t u = b; u < e; u++) {
        if (A->inner == 1) {
            switch (A->cls) {
            case C_F32: A->y[u] = arg_row_f32(A, (const float *)A->x + u * A->R); break;
            case C_F64: A->y[u] = arg_row_f64(A, (const double *)A->x + u * A->R); break;
            default: A->y[u] = arg_row_i64(A, (const int64_t *)A->x + u * A->R); break;
            }
            continue;
        }
        int64_t row = u / A->ntiles, i0 = (u % A->ntiles) * TW;
        int64_t tw = A->inner - i0 < TW ? A->inner - i0 : TW;
        switch (A->cls) {
        case C_F32: arg_tile_f32(A, row, i0, tw); break;
        case C_F64: arg_tile_f64(A, row, i0, tw); break;
        default: arg_tile_i64(A, row, i0, tw); break;
        }
    }
}

static wf_status *arg_kernel(wf__kctx *k, bool is_max)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a;
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s%s", (long long)axis,
                             wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
    bool keepdims = wf__attr_i(k->op, k->attrs, "keepdims") != 0;
    int64_t ydims[WF_MAX_RANK];
    int yr = 0;
    aplan A = {.cls = class_of(x->dtype), .is_max = is_max, .outer = 1, .inner = 1};
    A.last = wf__attr_i(k->op, k->attrs, "select_last_index") != 0;
    A.R = x->dims[a];
    for (int i = 0; i < x->rank; i++) {
        if (i < a) A.outer *= x->dims[i];
        if (i > a) A.inner *= x->dims[i];
        if (i != a) ydims[yr++] = x->dims[i];
        else if (keepdims) ydims[yr++] = 1;
    }
    wf_tensor *y;
    if (A.R == 0 && A.outer * A.inner > 0)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot take %s over the empty axis %d of input %s%s",
                             k->op->name, a, wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
    WF__TRY(wf__kctx_output(k, 0, WF_I64, yr, ydims, &y));
    if (y->size == 0) return NULL;
    const void *xd;
    void *owned;
    WF__TRY(to_class(k, x, A.cls, &xd, &owned));
    A.x = xd;
    A.y = y->data;
    A.ntiles = (A.inner + TW - 1) / TW;
    int64_t units = A.inner == 1 ? A.outer : A.outer * A.ntiles;
    int64_t per = A.R * (A.inner < TW ? A.inner : TW);
    wf__parallel_for(k, units, per >= GRAIN ? 1 : GRAIN / (per > 0 ? per : 1), arg_range, &A);
    owned_free(A.cls, owned);
    return NULL;
}

static wf_status *k_argmax(wf__kctx *k) { return arg_kernel(k, true); }
static wf_status *k_argmin(wf__kctx *k) { return arg_kernel(k, false); }

/* ---- the table ---------------------------------------------------------------------------------------- */

const wf__kernel_def wf__cpu_kernels_reduce[] = {
    {"ReduceSum", "CPU", WF__DT_NUMERIC, 0, k_reduce_sum},
    {"ReduceMean", "CPU", WF__DT_NUMERIC, 0, k_reduce_mean},
    {"ReduceMax", "CPU", WF__DT_ALL, 0, k_reduce_max},
    {"ReduceMin", "CPU", WF__DT_ALL, 0, k_reduce_min},
    {"ReduceProd", "CPU", WF__DT_NUMERIC, 0, k_reduce_prod},
    {"ReduceL2", "CPU", WF__DT_NUMERIC, 0, k_reduce_l2},
    {"ArgMax", "CPU", WF__DT_NUMERIC, 0, k_argmax},
    {"ArgMin", "CPU", WF__DT_NUMERIC, 0, k_argmin},
    {"Softmax", "CPU", WF__DT_FLOATS, 0, wf__k_softmax},
    {"LogSoftmax", "CPU", WF__DT_FLOATS, 0, wf__k_log_softmax},
    {"BatchNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_batchnorm, NULL, WF__K_BLOCKED},
    {"FusedBatchNorm", "CPU", WF__DT_FLOATS, 0, wf__k_fused_batchnorm},
    {"FusedBatchNormGrad", "CPU", WF__DT_FLOATS, 0, wf__k_fused_batchnorm_grad},
    {"LayerNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_layernorm},
    {"Dropout", "CPU", WF__DT_NUMERIC, 0, wf__k_dropout},
    {0},
};
