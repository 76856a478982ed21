/*
 * Host side of the CUDA elementwise ops: broadcasting binary arithmetic and comparisons, logic, Where,
 * the unary math and activations, Cast, and the kernel table. Semantics follow src/backends/cpu/
 * k_elementwise*.c; integer division by zero and negative integer exponents are found by a checking
 * kernel that reports to the device's error record (cu_err_site), which fails the run naming the node.
 */
#include <math.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_elementwise.h"

/* ---- binary ------------------------------------------------------------------------------------------ */

enum { CHECK_NONE, CHECK_ZERO, CHECK_NEG };

/* A zero integer divisor or a negative integer exponent fails the run, as on the CPU: a kernel reports it
 * to the device's error record (nothing is read back). */
static wf_status *check_b(wf__kctx *k, int check, const wf_tensor *b, const wf_tensor *a)
{
    if (check == CHECK_NONE || !cu_is_int(b->dtype) || (check == CHECK_NEG && b->dtype == WF_U8) || !b->size) return NULL;
    cuk_err *err;
    unsigned long long site;
    wf_status *s = cu_err_site(k, check == CHECK_ZERO ? CU_SITE_DIV_ZERO : CU_SITE_NEG_POW, 0, b, a, &err, &site);
    if (s) return s;
    int mode = check == CHECK_ZERO ? 1 : 2;
    return cu_check(k, cuk_int_check(cu_of(k)->compute, b->dtype, cu_ptr(b), b->size, mode, err, site),
                    "integer operand check");
}

static wf_status *binary(wf__kctx *k, int op, bool out_bool, int check)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    wf_dtype t = a->dtype;
    if (b->dtype != t)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ (%s and %s)", cu_dtype_name(t),
                                  cu_dtype_name(b->dtype));
    wf_status *s = cu_enter(k);
    if (s || (s = check_b(k, check, b, a))) return s;
    int ranks[2] = {a->rank, b->rank};
    const int64_t *dims[2] = {a->dims, b->dims};
    int rank;
    int64_t od[WF_MAX_RANK];
    cu_bcast_shape(2, ranks, dims, &rank, od);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, out_bool ? WF_BOOL : t, rank, od, &y)) || !y->size) return s;
    cuk_walk w;
    cu_walk_bcast(&w, 2, ranks, dims, rank, od);
    return cu_check(k, cuk_binary(cu_of(k)->compute, t, op, cu_ptr(a), cu_ptr(b), cu_ptr(y), &w, y->size), "binary kernel");
}

#define BINK_(Op, code, out_bool, check)                                                                           \
    static wf_status *k_##Op(wf__kctx *k) { return binary(k, code, out_bool, check); }
BINK_(Add, CUK_ADD, false, CHECK_NONE)
BINK_(Sub, CUK_SUB, false, CHECK_NONE)
BINK_(Mul, CUK_MUL, false, CHECK_NONE)
BINK_(Div, CUK_DIV, false, CHECK_ZERO)
BINK_(Pow, CUK_POW, false, CHECK_NEG)
BINK_(Maximum, CUK_MAX, false, CHECK_NONE)
BINK_(Minimum, CUK_MIN, false, CHECK_NONE)
BINK_(Equal, CUK_EQ, true, CHECK_NONE)
BINK_(NotEqual, CUK_NE, true, CHECK_NONE)
BINK_(Less, CUK_LT, true, CHECK_NONE)
BINK_(LessEqual, CUK_LE, true, CHECK_NONE)
BINK_(Greater, CUK_GT, true, CHECK_NONE)
BINK_(GreaterEqual, CUK_GE, true, CHECK_NONE)
BINK_(And, CUK_AND, false, CHECK_NONE)
BINK_(Or, CUK_OR, false, CHECK_NONE)
BINK_(Xor, CUK_XOR, false, CHECK_NONE)
BINK_(PRelu, CUK_PRELU, false, CHECK_NONE)
BINK_(BitwiseAnd, CUK_BAND, false, CHECK_NONE)
BINK_(BitwiseOr, CUK_BOR, false, CHECK_NONE)
BINK_(BitwiseXor, CUK_BXOR, false, CHECK_NONE)
#undef BINK_

static wf_status *k_BitShift(wf__kctx *k)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "direction");
    return binary(k, a && a->s && !strcmp(a->s, "LEFT") ? CUK_SHL : CUK_SHR, false, CHECK_NONE);
}

/* ---- variadic Sum, Mean, Max, Min -------------------------------------------------------------------- */

/* f16/bf16 Sum and Mean as the CPU computes them: every input widened to f32 and added left to right
 * into an f32 accumulator (stream-ordered scratch), Mean's division in f32, one rounding at the end. */
static wf_status *fold_half(wf__kctx *k, const wf_tensor *y, const int *ranks, const int64_t *const *dims, int rank,
                            const int64_t *od, bool mean)
{
    cudaStream_t st = cu_of(k)->compute;
    void *mem = NULL;
    wf_status *s = cu_check(k, (int)cudaMallocAsync(&mem, (size_t)y->size * sizeof(float), st), "f32 accumulator allocation");
    if (s) return s;
    float *acc = mem;
    for (int i = 0; i < k->n_in && !s; i++) {
        cuk_walk w;
        cu_walk_bcast(&w, 1, &ranks[i], &dims[i], rank, od);
        s = cu_check(k, cuk_fold_f32(st, y->dtype, cu_ptr(k->in[i]), acc, &w, y->size, i == 0), "f32 fold kernel");
    }
    if (!s && mean && k->n_in > 1) {
        cuk_upar p = {(double)k->n_in, 0, {0, 0, 0, 0}};
        s = cu_check(k, cuk_unary(st, WF_F32, CUK_MDIV, acc, acc, y->size, &p), "Mean kernel");
    }
    if (!s) s = cu_check(k, cuk_cast(st, WF_F32, y->dtype, acc, cu_ptr(y), y->size), "f32 rounding kernel");
    (void)cudaFreeAsync(mem, st);
    return s;
}

/* Folds op over the inputs left to right into the output; Mean then divides by the count. Reading and
 * writing the output in one step is safe: each thread reads its own element before writing it. f16/bf16
 * Sum and Mean take fold_half, since the CPU adds them in f32 (a pairwise fold would round each step). */
static wf_status *fold(wf__kctx *k, int op, bool mean)
{
    wf_dtype t = k->in[0]->dtype;
    int n_in = k->n_in;
    if (n_in > 64) return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "more than 64 inputs on CUDA");
    int ranks[64];
    const int64_t *dims[64];
    for (int i = 0; i < n_in; i++) {
        if (k->in[i]->dtype != t)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ: %s and %s (inputs 0 and %d)",
                                      cu_dtype_name(t), cu_dtype_name(k->in[i]->dtype), i);
        ranks[i] = k->in[i]->rank;
        dims[i] = k->in[i]->dims;
    }
    int rank;
    int64_t od[WF_MAX_RANK];
    cu_bcast_shape(n_in, ranks, dims, &rank, od);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, t, rank, od, &y)) || !y->size) return s;
    if (op == CUK_ADD && (t == WF_F16 || t == WF_BF16)) return fold_half(k, y, ranks, dims, rank, od, mean);
    cudaStream_t st = cu_of(k)->compute;
    cuk_walk w;
    if (n_in == 1) { /* a broadcast of one input is the input itself: same shape */
        if (cu_ptr(y) == cu_ptr(k->in[0])) return NULL; /* in place: nothing to copy onto itself */
        return cu_check(k, (int)cudaMemcpyAsync(cu_ptr(y), cu_ptr(k->in[0]), (size_t)y->size * cu_size(t),
                                                cudaMemcpyDeviceToDevice, st),
                        "device copy");
    }
    for (int i = 1; i < n_in && !s; i++) {
        /* the first step reads input 0, later ones the running result, which has the output's shape */
        int r2[2] = {i == 1 ? ranks[0] : rank, ranks[i]};
        const int64_t *d2[2] = {i == 1 ? dims[0] : od, dims[i]};
        cu_walk_bcast(&w, 2, r2, d2, rank, od);
        s = cu_check(k, cuk_binary(st, t, op, i == 1 ? cu_ptr(k->in[0]) : cu_ptr(y), cu_ptr(k->in[i]), cu_ptr(y), &w,
                                   y->size),
                     "fold kernel");
    }
    if (s || !mean) return s;
    cuk_upar p = {(double)n_in, 0, {0, 0, 0, 0}};
    return cu_check(k, cuk_unary(st, t, CUK_MDIV, cu_ptr(y), cu_ptr(y), y->size, &p), "Mean kernel");
}

static wf_status *k_Sum(wf__kctx *k) { return fold(k, CUK_ADD, false); }
static wf_status *k_Mean(wf__kctx *k) { return fold(k, CUK_ADD, true); }
static wf_status *k_Max(wf__kctx *k) { return fold(k, CUK_MAX, false); }
static wf_status *k_Min(wf__kctx *k) { return fold(k, CUK_MIN, false); }

static wf_status *k_Mod(wf__kctx *k)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "fmod");
    return binary(k, a && a->i ? CUK_FMOD : CUK_MOD, false, CHECK_ZERO);
}

/* ---- Where ----------------------------------------------------------------------------------------- */

static wf_status *k_Where(wf__kctx *k)
{
    const wf_tensor *c = k->in[0], *x = k->in[1], *yv = k->in[2];
    if (c->dtype != WF_BOOL || x->dtype != yv->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "expects (bool, T, T) inputs, got (%s, %s, %s)",
                                  cu_dtype_name(c->dtype), cu_dtype_name(x->dtype), cu_dtype_name(yv->dtype));
    wf_status *s = cu_enter(k);
    if (s) return s;
    int ranks[3] = {c->rank, x->rank, yv->rank};
    const int64_t *dims[3] = {c->dims, x->dims, yv->dims};
    int rank;
    int64_t od[WF_MAX_RANK];
    cu_bcast_shape(3, ranks, dims, &rank, od);
    wf_tensor *z;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, rank, od, &z)) || !z->size) return s;
    cuk_walk w;
    cu_walk_bcast(&w, 3, ranks, dims, rank, od);
    return cu_check(k, cuk_where(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(c), cu_ptr(x), cu_ptr(yv), cu_ptr(z), &w,
                                 z->size),
                    "Where kernel");
}

/* ---- unary ------------------------------------------------------------------------------------------ */

static wf_status *unary_p(wf__kctx *k, int op, const cuk_upar *p)
{
    const wf_tensor *x = k->in[0];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_unary(cu_of(k)->compute, x->dtype, op, cu_ptr(x), cu_ptr(y), y->size, p), "unary kernel");
}

static wf_status *unary(wf__kctx *k, int op, double pa, double pb, int64_t ia, int64_t ib)
{
    cuk_upar p = {pa, pb, {ia, ib, 0, 0}};
    return unary_p(k, op, &p);
}

#define UNK_(Op, code)                                                                                             \
    static wf_status *k_##Op(wf__kctx *k) { return unary(k, code, 0, 0, 0, 0); }
UNK_(Neg, CUK_NEG)
UNK_(Abs, CUK_ABS)
UNK_(Sign, CUK_SIGN)
UNK_(Square, CUK_SQUARE)
UNK_(Relu, CUK_RELU)
UNK_(Not, CUK_NOT)
UNK_(Exp, CUK_EXP)
UNK_(Log, CUK_LOG)
UNK_(Sqrt, CUK_SQRT)
UNK_(Rsqrt, CUK_RSQRT)
UNK_(Reciprocal, CUK_RECIP)
UNK_(Tanh, CUK_TANH)
UNK_(Sigmoid, CUK_SIGMOID)
UNK_(Erf, CUK_ERF)
UNK_(Softplus, CUK_SOFTPLUS)
UNK_(Floor, CUK_FLOOR)
UNK_(Ceil, CUK_CEIL)
UNK_(Round, CUK_ROUND)
UNK_(Sin, CUK_SIN)
UNK_(Cos, CUK_COS)
UNK_(Tan, CUK_TAN)
UNK_(Asin, CUK_ASIN)
UNK_(Acos, CUK_ACOS)
UNK_(Atan, CUK_ATAN)
UNK_(Sinh, CUK_SINH)
UNK_(Cosh, CUK_COSH)
UNK_(Asinh, CUK_ASINH)
UNK_(Acosh, CUK_ACOSH)
UNK_(Atanh, CUK_ATANH)
UNK_(HardSwish, CUK_HSWISH)
UNK_(Mish, CUK_MISH)
UNK_(Softsign, CUK_SOFTSIGN)
UNK_(BitwiseNot, CUK_BNOT)
#undef UNK_

static double attr_f(wf__kctx *k, const char *name)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, name);
    return a ? a->f : 0;
}

static int64_t attr_i(wf__kctx *k, const char *name)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, name);
    return a ? a->i : 0;
}

static wf_status *k_LeakyRelu(wf__kctx *k) { return unary(k, CUK_LEAKY, attr_f(k, "alpha"), 0, 0, 0); }
static wf_status *k_Elu(wf__kctx *k) { return unary(k, CUK_ELU, attr_f(k, "alpha"), 0, 0, 0); }
static wf_status *k_Celu(wf__kctx *k) { return unary(k, CUK_CELU, attr_f(k, "alpha"), 0, 0, 0); }
static wf_status *k_ThresholdedRelu(wf__kctx *k) { return unary(k, CUK_THRELU, attr_f(k, "alpha"), 0, 0, 0); }
static wf_status *k_Swish(wf__kctx *k) { return unary(k, CUK_SWISH, attr_f(k, "alpha"), 0, 0, 0); }
static wf_status *k_HardSigmoid(wf__kctx *k) { return unary(k, CUK_HSIG, attr_f(k, "alpha"), attr_f(k, "beta"), 0, 0); }

static wf_status *k_Selu(wf__kctx *k)
{
    /* gamma * alpha rounded once, in double, as on the CPU */
    double alpha = attr_f(k, "alpha"), gamma = attr_f(k, "gamma");
    return unary(k, CUK_SELU, gamma, gamma * alpha, 0, 0);
}

static wf_status *k_Shrink(wf__kctx *k)
{
    double l = attr_f(k, "lambd"), b = attr_f(k, "bias");
    cuk_upar p = {l, b, {0, 0, 0, 0}};
    if (cu_is_int(k->in[0]->dtype)) wf__ku_shrink_int(l, b, p.i);
    return unary_p(k, CUK_SHRINK, &p);
}

static wf_status *unary_bool(wf__kctx *k, int op, const cuk_upar *p)
{
    const wf_tensor *x = k->in[0];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, WF_BOOL, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_unary_bool(cu_of(k)->compute, x->dtype, op, cu_ptr(x), cu_ptr(y), y->size, p),
                    "unary kernel");
}

static wf_status *k_IsNaN(wf__kctx *k) { return unary_bool(k, CUK_ISNAN, NULL); }

static wf_status *k_IsInf(wf__kctx *k)
{
    cuk_upar p = {0, 0, {attr_i(k, "detect_positive") != 0, attr_i(k, "detect_negative") != 0, 0, 0}};
    return unary_bool(k, CUK_ISINF, &p);
}

static wf_status *k_Gelu(wf__kctx *k)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "approximate");
    bool tanh_form = a && a->s && !strcmp(a->s, "tanh");
    return unary(k, tanh_form ? CUK_GELU_TANH : CUK_GELU, 0, 0, 0, 0);
}

/* Clip's bounds: optional scalar inputs 1 and 2 (read back), else the dtype's whole range. */
static wf_status *k_Clip(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype t = x->dtype;
    double lo = -INFINITY, hi = INFINITY;
    int64_t ilo = INT64_MIN, ihi = INT64_MAX;
    wf_status *s = cu_enter(k);
    if (s) return s;
    for (int i = 1; i < 3 && i < k->n_in; i++) {
        const wf_tensor *b = k->in[i];
        if (!b) continue;
        char sb[160];
        if (b->dtype != t || b->size != 1)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be a scalar of the input's dtype %s",
                                      i == 1 ? "min" : "max", cu_tstr(b, sb), cu_dtype_name(t));
        uint64_t raw = 0;
        if ((s = cu_read(k, b, &raw, cu_size(t)))) return s;
        double v;
        int64_t iv = cu_int_at(&raw, t, 0);
        switch (t) {
        case WF_F32: { float f; memcpy(&f, &raw, 4); v = f; break; }
        case WF_F64: memcpy(&v, &raw, 8); break;
        case WF_BF16: { uint32_t u = (uint32_t)(uint16_t)raw << 16; float f; memcpy(&f, &u, 4); v = f; break; }
        case WF_F16: {
            uint32_t h = (uint16_t)raw, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
            v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m | 0x400u), (int)e - 25);
            if (h & 0x8000u) v = -v;
            break;
        }
        default: v = (double)iv; break;
        }
        if (i == 1) lo = v, ilo = iv;
        else hi = v, ihi = iv;
    }
    return unary(k, CUK_CLIP, lo, hi, ilo, ihi);
}

/* ---- Cast ------------------------------------------------------------------------------------------------ */

static wf_status *k_Cast(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "to");
    wf_dtype to = a ? (wf_dtype)a->i : WF_DTYPE_INVALID;
    if (to < WF_F32 || to > WF_BOOL)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot cast %s to dtype %d", cu_dtype_name(x->dtype), (int)to);
    if (to == x->dtype) return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, to, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_cast(cu_of(k)->compute, x->dtype, to, cu_ptr(x), cu_ptr(y), y->size), "Cast kernel");
}

/* ---- table ---------------------------------------------------------------------------------------------- */

/* Every kernel here but Cast works in place (WF__K_INPLACE): thread i reads element i of input 0 (an
 * input of the output's size is not broadcast) before it writes element i of the output, the kernels'
 * pointers are not __restrict__, and no later launch reads input 0 again. Cast is not marked: its
 * output has another dtype except when it is a view. */
#define K_(Op, mask) {#Op, "GPU", mask, 0, k_##Op, NULL, WF__K_INPLACE},
#define KC_(Op, mask) {#Op, "GPU", mask, 0, k_##Op, NULL, 0},
#define FLT WF__DT_FLOATS
#define NUM WF__DT_NUMERIC
#define BOOL_ WF__DT_BIT(WF_BOOL)

const wf__kernel_def cu_kernels_elementwise[] = {
    K_(Add, NUM) K_(Sub, NUM) K_(Mul, NUM) K_(Div, NUM) K_(Pow, NUM) K_(Maximum, NUM) K_(Minimum, NUM) K_(Mod, NUM)
    K_(Equal, WF__DT_ALL) K_(NotEqual, WF__DT_ALL) K_(Less, WF__DT_ALL) K_(LessEqual, WF__DT_ALL)
    K_(Greater, WF__DT_ALL) K_(GreaterEqual, WF__DT_ALL)
    K_(And, BOOL_) K_(Or, BOOL_) K_(Xor, BOOL_) K_(Not, BOOL_)
    {"Where", "GPU", WF__DT_ALL, 1, k_Where, NULL, WF__K_INPLACE},
    KC_(Cast, WF__DT_ALL)
    K_(Neg, NUM) K_(Abs, NUM) K_(Sign, NUM) K_(Square, NUM) K_(Relu, NUM) K_(Clip, NUM)
    K_(Exp, FLT) K_(Log, FLT) K_(Sqrt, FLT) K_(Rsqrt, FLT) K_(Reciprocal, FLT) K_(Tanh, FLT) K_(Sigmoid, FLT)
    K_(LeakyRelu, FLT) K_(Elu, FLT) K_(Gelu, FLT) K_(Erf, FLT) K_(Softplus, FLT) K_(Floor, FLT) K_(Ceil, FLT)
    K_(Round, FLT) K_(Sin, FLT) K_(Cos, FLT)
    K_(Tan, FLT) K_(Asin, FLT) K_(Acos, FLT) K_(Atan, FLT) K_(Sinh, FLT) K_(Cosh, FLT) K_(Asinh, FLT)
    K_(Acosh, FLT) K_(Atanh, FLT) K_(IsNaN, FLT) K_(IsInf, FLT) K_(HardSigmoid, FLT) K_(HardSwish, FLT)
    K_(Selu, FLT) K_(Celu, FLT) K_(Mish, FLT) K_(Softsign, FLT) K_(ThresholdedRelu, FLT) K_(Shrink, NUM)
    K_(Swish, FLT) K_(BitwiseNot, WF__DT_INTS)
    K_(PRelu, NUM) K_(BitShift, WF__DT_INTS) K_(BitwiseAnd, WF__DT_INTS) K_(BitwiseOr, WF__DT_INTS)
    K_(BitwiseXor, WF__DT_INTS)
    K_(Sum, FLT) K_(Mean, FLT) K_(Max, NUM) K_(Min, NUM)
    {0},
};
