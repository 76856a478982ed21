/*
 * CPU kernels for the indexing shape ops (Gather, GatherND, ScatterND, OneHot), Pad, and the ops that
 * produce tensors from shapes and scalars (Range, Shape, Size, Fill, ConstantOfShape). Indices are
 * validated before any copy starts, so a bad index is a status and never a stray read.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "backends/cpu/k_shape.h"
#include "ops/kutil_shape.h"

#define SB 160

static inline int64_t load_index(const wf_tensor *t, int64_t i)
{
    return t->dtype == WF_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static wf_status *check_index_dtype(const wf__kctx *k, const wf_tensor *t, const char *what)
{
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                             wf_dtype_name(t->dtype));
    return NULL;
}

/* Copies one block of b bytes; small blocks (the common gather of single elements) avoid a call. */
static inline void copy_block(char *dst, const char *src, size_t b)
{
    switch (b) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, b);
    }
}

/* ---- Gather ------------------------------------------------------------------------------------- */

typedef struct {
    char *dst;
    const char *src;
    const wf_tensor *idx;
    int64_t n, D;   /* indices, size of the gathered axis */
    size_t block;   /* bytes of one inner block */
} gather_job;

static void gather_range(void *arg, int64_t u0, int64_t u1)
{
    const gather_job *j = arg;
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->n, v = load_index(j->idx, u % j->n);
        if (v < 0) v += j->D;
        copy_block(j->dst + (size_t)u * j->block, j->src + (size_t)(o * j->D + v) * j->block, j->block);
    }
}

wf_status *wf__k_gather(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    char b[SB];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    int ax;
    if (!wf__norm_axis(axis, x->rank, &ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                             wf__shape_str(x->rank, x->dims, b));
    int r = x->rank - 1 + ix->rank;
    if (r > WF_MAX_RANK) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t D = x->dims[ax];
    for (int64_t i = 0; i < ix->size; i++) {
        int64_t v = load_index(ix, i);
        if (v < -D || v >= D)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                 "index %" PRId64 " (at position %" PRId64 ") is out of range for axis %d of data %s",
                                 v, i, ax, wf__shape_str(x->rank, x->dims, b));
    }
    int64_t d[WF_MAX_RANK];
    int q = 0;
    for (int i = 0; i < ax; i++) d[q++] = x->dims[i];
    for (int i = 0; i < ix->rank; i++) d[q++] = ix->dims[i];
    for (int i = ax + 1; i < x->rank; i++) d[q++] = x->dims[i];
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    int64_t outer = wf__numel(ax, x->dims), inner = wf__numel(x->rank - ax - 1, x->dims + ax + 1);
    gather_job j = {.dst = y->data, .src = x->data, .idx = ix, .n = ix->size, .D = D,
                    .block = (size_t)inner * wf_dtype_size(x->dtype)};
    int64_t grain = WF__SHAPE_GRAIN_BYTES / (int64_t)j.block;
    wf__parallel_for(k, outer * ix->size, grain > 0 ? grain : 1, gather_range, &j);
    return NULL;
}

/* ---- GatherND / ScatterND ----------------------------------------------------------------------- */

/* Byte offsets (within a batch of data) of every index tuple, validated. indices [..., last] address the
 * dims [bd, bd + last) of data; negative entries wrap. *off is caller-freed. */
static wf_status *nd_offsets(const wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int bd, int64_t **off,
                             int64_t *count, size_t *slice)
{
    char b1[SB], b2[SB];
    int q = ix->rank;
    if (q < 1 || x->rank < 1 || bd >= q || bd >= x->rank)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "data %s and indices %s need rank >= 1 and above batch_dims %d",
                             wf__shape_str(x->rank, x->dims, b1), wf__shape_str(q, ix->dims, b2), bd);
    int64_t last = ix->dims[q - 1];
    if (last < 1 || last > x->rank - bd)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the last dim of indices %s must be in [1, %d] for data %s",
                             wf__shape_str(q, ix->dims, b1), x->rank - bd, wf__shape_str(x->rank, x->dims, b2));
    for (int i = 0; i < bd; i++)
        if (x->dims[i] != ix->dims[i])
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "batch dim %d differs between data %s and indices %s", i,
                                 wf__shape_str(x->rank, x->dims, b1), wf__shape_str(q, ix->dims, b2));
    int64_t st[WF_MAX_RANK];
    wf__strides(x->rank, x->dims, st);
    size_t eb = wf_dtype_size(x->dtype);
    *slice = (size_t)wf__numel(x->rank - bd - (int)last, x->dims + bd + last) * eb;
    int64_t n = ix->size / last;
    *count = n;
    *off = wf__malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!*off) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " index tuples", n);
    for (int64_t t = 0; t < n; t++) {
        int64_t o = 0;
        for (int c = 0; c < last; c++) {
            int64_t v = load_index(ix, t * last + c), dim = x->dims[bd + c];
            if (v < -dim || v >= dim) {
                wf__free(*off);
                *off = NULL;
                return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                     "index %" PRId64 " (tuple %" PRId64 ", entry %d) is out of range for dim %d of data %s",
                                     v, t, c, bd + c, wf__shape_str(x->rank, x->dims, b1));
            }
            o += (v < 0 ? v + dim : v) * st[bd + c];
        }
        (*off)[t] = o * (int64_t)eb;
    }
    return NULL;
}

typedef struct {
    char *dst;
    const char *src;
    const int64_t *off;
    int64_t per_batch;  /* tuples per batch */
    size_t batch_bytes; /* bytes of one batch of data */
    size_t slice;
} gnd_job;

static void gnd_range(void *arg, int64_t t0, int64_t t1)
{
    const gnd_job *j = arg;
    for (int64_t t = t0; t < t1; t++)
        copy_block(j->dst + (size_t)t * j->slice,
                   j->src + (size_t)(t / j->per_batch) * j->batch_bytes + j->off[t], j->slice);
}

wf_status *wf__k_gathernd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int64_t bd = wf__attr_i(k->op, k->attrs, "batch_dims");
    if (bd < 0 || bd >= WF_MAX_RANK)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "batch_dims %" PRId64 " is out of range", bd);
    int64_t *off, n;
    size_t slice;
    WF__TRY(nd_offsets(k, x, ix, (int)bd, &off, &n, &slice));
    int q = ix->rank, last = (int)ix->dims[q - 1];
    int64_t d[WF_MAX_RANK];
    int r = 0;
    for (int i = 0; i < q - 1; i++) d[r++] = ix->dims[i];
    for (int i = (int)bd + last; i < x->rank; i++) d[r++] = x->dims[i];
    wf_tensor *y;
    wf_status *s = wf__kctx_output(k, 0, x->dtype, r, d, &y);
    if (!s && y->size) {
        int64_t batches = wf__numel((int)bd, x->dims);
        gnd_job j = {.dst = y->data, .src = x->data, .off = off, .per_batch = batches ? n / batches : 1,
                     .batch_bytes = (size_t)wf__numel(x->rank - (int)bd, x->dims + bd) * wf_dtype_size(x->dtype),
                     .slice = slice};
        int64_t grain = WF__SHAPE_GRAIN_BYTES / (int64_t)(slice ? slice : 1);
        wf__parallel_for(k, n, grain > 0 ? grain : 1, gnd_range, &j);
    }
    wf__free(off);
    return s;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

/* Integer add/mul wrap like numpy, through unsigned arithmetic. */
#define SCATTER_INT(T, UT)                                                                         \
    static void scat_##T(T *d, const T *u, int64_t n, int red)                                     \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = d[i], b = u[i];                                                                  \
            switch (red) {                                                                         \
            case RED_ADD: d[i] = (T)(UT)((UT)a + (UT)b); break;                                    \
            case RED_MUL: d[i] = (T)(UT)((UT)a * (UT)b); break;                                    \
            case RED_MAX: d[i] = a > b ? a : b; break;                                             \
            default: d[i] = a < b ? a : b;                                                         \
            }                                                                                      \
        }                                                                                          \
    }
SCATTER_INT(int8_t, uint8_t)
SCATTER_INT(uint8_t, uint32_t)
SCATTER_INT(int16_t, uint16_t)
SCATTER_INT(int32_t, uint32_t)
SCATTER_INT(int64_t, uint64_t)

/* Floats (f16/bf16 through f64, exact for them) and bool (add = or, mul = and, like numpy). */
static void scat_generic(void *d, const void *u, wf_dtype dt, int64_t n, int red)
{
    for (int64_t i = 0; i < n; i++) {
        double a = wf__load_f64(d, dt, i), b = wf__load_f64(u, dt, i), v;
        switch (red) {
        case RED_ADD: v = dt == WF_BOOL ? (double)(a != 0 || b != 0) : a + b; break;
        case RED_MUL: v = dt == WF_BOOL ? (double)(a != 0 && b != 0) : a * b; break;
        case RED_MAX: v = (a > b || isnan(a)) ? a : b; break;
        default: v = (a < b || isnan(a)) ? a : b;
        }
        if (isnan(b) && red >= RED_MAX) v = b;
        wf__store_f64(d, dt, i, v);
    }
}

static void scat_f32(float *d, const float *u, int64_t n, int red)
{
    for (int64_t i = 0; i < n; i++) {
        float a = d[i], b = u[i];
        switch (red) {
        case RED_ADD: d[i] = a + b; break;
        case RED_MUL: d[i] = a * b; break;
        case RED_MAX: d[i] = (isnan(a) || isnan(b)) ? a + b : a > b ? a : b; break;
        default: d[i] = (isnan(a) || isnan(b)) ? a + b : a < b ? a : b;
        }
    }
}

static void scatter_apply(void *d, const void *u, wf_dtype dt, int64_t n, int red)
{
    switch (dt) {
    case WF_F32: scat_f32(d, u, n, red); break;
    case WF_I8: scat_int8_t(d, u, n, red); break;
    case WF_U8: scat_uint8_t(d, u, n, red); break;
    case WF_I16: scat_int16_t(d, u, n, red); break;
    case WF_I32: scat_int32_t(d, u, n, red); break;
    case WF_I64: scat_int64_t(d, u, n, red); break;
    default: scat_generic(d, u, dt, n, red);
    }
}

wf_status *wf__k_scatternd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[SB], b2[SB], b3[SB];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    const char *rs = wf__attr_s(k->op, k->attrs, "reduction");
    int red = !strcmp(rs, "add") ? RED_ADD : !strcmp(rs, "mul") ? RED_MUL : !strcmp(rs, "max") ? RED_MAX
            : !strcmp(rs, "min") ? RED_MIN : RED_NONE;
    if (u->dtype != x->dtype)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "updates are %s but data is %s", wf_dtype_name(u->dtype),
                             wf_dtype_name(x->dtype));
    int q = ix->rank;
    int64_t last = q >= 1 ? ix->dims[q - 1] : -1;
    bool ok = q >= 1 && last >= 1 && last <= x->rank && u->rank == q - 1 + x->rank - last;
    for (int i = 0; ok && i < u->rank; i++)
        ok = u->dims[i] == (i < q - 1 ? ix->dims[i] : x->dims[last + i - (q - 1)]);
    if (!ok)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "updates %s do not match indices %s and data %s (want indices.shape[:-1] + "
                             "data.shape[indices.shape[-1]:])",
                             wf__shape_str(u->rank, u->dims, b1), wf__shape_str(q, ix->dims, b2),
                             wf__shape_str(x->rank, x->dims, b3));
    int64_t *off, n;
    size_t slice;
    WF__TRY(nd_offsets(k, x, ix, 0, &off, &n, &slice));
    wf_tensor *y;
    bool reused;
    wf_status *s = wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused);
    if (s) {
        wf__free(off);
        return s;
    }
    if (!reused) wf__k_pcopy(k, y->data, x->data, x->bytes);
    size_t eb = wf_dtype_size(x->dtype);
    /* Sequential: with duplicate indices the updates apply in order, as ONNX's reference does. */
    for (int64_t t = 0; t < n; t++) {
        char *d = (char *)y->data + off[t];
        const char *p = (const char *)u->data + (size_t)t * slice;
        if (red == RED_NONE) memcpy(d, p, slice);
        else scatter_apply(d, p, x->dtype, (int64_t)(slice / eb), red);
    }
    wf__free(off);
    return NULL;
}

/* ---- Pad ---------------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Source index for output position i - pad_begin = i on an axis of size n; -1 is "padding value". */
static inline int64_t pad_map(int64_t i, int64_t n, int mode)
{
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_WRAP: return ((i % n) + n) % n;
    case PAD_REFLECT: {
        if (n == 1) return 0;
        int64_t p = 2 * (n - 1), m = ((i % p) + p) % p;
        return m >= n ? p - m : m;
    }
    default: return -1;
    }
}

typedef struct {
    char *dst;
    const char *src;
    int rank, mode;
    int64_t od[WF_MAX_RANK], id[WF_MAX_RANK], pb[WF_MAX_RANK], ist[WF_MAX_RANK];
    size_t eb;
    unsigned char pat[8];
} pad_job;

static void pad_fill(char *d, int64_t n, const pad_job *j)
{
    for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * j->eb, j->pat, j->eb);
}

static void pad_rows(void *arg, int64_t r0, int64_t r1)
{
    const pad_job *j = arg;
    int last = j->rank - 1;
    int64_t on = j->od[last], in = j->id[last], pb = j->pb[last];
    size_t eb = j->eb;
    int64_t lo = pb > 0 ? pb : 0, hi = pb + in < on ? pb + in : on;
    if (hi < lo) hi = lo;
    for (int64_t row = r0; row < r1; row++) {
        char *d = j->dst + (size_t)(row * on) * eb;
        int64_t rem = row, off = 0;
        bool pad_row = false;
        for (int i = last - 1; i >= 0; i--) {
            int64_t o = rem % j->od[i];
            rem /= j->od[i];
            int64_t m = pad_map(o - j->pb[i], j->id[i], j->mode);
            if (m < 0) pad_row = true;
            else off += m * j->ist[i];
        }
        if (pad_row) {
            pad_fill(d, on, j);
            continue;
        }
        const char *s = j->src + (size_t)off * eb;
        if (hi > lo) memcpy(d + (size_t)lo * eb, s + (size_t)(lo - pb) * eb, (size_t)(hi - lo) * eb);
        if (j->mode == PAD_CONSTANT) {
            pad_fill(d, lo, j);
            pad_fill(d + (size_t)hi * eb, on - hi, j);
            continue;
        }
        for (int64_t c = 0; c < lo; c++) memcpy(d + (size_t)c * eb, s + (size_t)pad_map(c - pb, in, j->mode) * eb, eb);
        for (int64_t c = hi; c < on; c++) memcpy(d + (size_t)c * eb, s + (size_t)pad_map(c - pb, in, j->mode) * eb, eb);
    }
}

/* Constant padding that crops nothing, by input rows: the output is filled first (pad_fill_range), then
 * each input row lands at its place with one memcpy. Rows are walked as an odometer, so a tensor of
 * many short rows (a 1x1 weight gradient padded to 3x3: one element a row) costs a copy and a few adds
 * a row instead of a division per dim a row, and the fill is a memset when the value is all zero bytes. */
static void pad_fill_range(void *arg, int64_t c0, int64_t c1)
{
    const pad_job *j = arg;
    int64_t n = j->od[0];
    for (int i = 1; i < j->rank; i++) n *= j->od[i];
    const int64_t chunk = 16384;
    int64_t e0 = c0 * chunk, e1 = c1 * chunk < n ? c1 * chunk : n;
    bool zero = true;
    for (size_t b = 0; b < j->eb; b++) zero &= j->pat[b] == 0;
    if (zero) memset(j->dst + (size_t)e0 * j->eb, 0, (size_t)(e1 - e0) * j->eb);
    else pad_fill(j->dst + (size_t)e0 * j->eb, e1 - e0, j);
}

static void pad_place_rows(void *arg, int64_t r0, int64_t r1)
{
    const pad_job *j = arg;
    int last = j->rank - 1;
    int64_t idx[WF_MAX_RANK], ost[WF_MAX_RANK], rem = r0, off = 0;
    ost[last] = 1;
    for (int i = last - 1; i >= 0; i--) ost[i] = ost[i + 1] * j->od[i + 1];
    for (int i = last - 1; i >= 0; i--) idx[i] = rem % j->id[i], rem /= j->id[i];
    for (int i = 0; i < last; i++) off += (idx[i] + j->pb[i]) * ost[i];
    off += j->pb[last];
    size_t row = (size_t)j->id[last] * j->eb;
    for (int64_t r = r0; r < r1; r++) {
        char *d = j->dst + (size_t)off * j->eb;
        const char *sp = j->src + (size_t)r * row;
        if (row == 4) memcpy(d, sp, 4); /* sizes the compiler inlines: rows of one element */
        else if (row == 8) memcpy(d, sp, 8);
        else if (row == 2) memcpy(d, sp, 2);
        else memcpy(d, sp, row);
        for (int i = last - 1; i >= 0; i--) { /* the next row: carry through the dims */
            off += ost[i];
            if (++idx[i] < j->id[i]) break;
            off -= ost[i] * j->id[i];
            idx[i] = 0;
        }
    }
}

wf_status *wf__k_pad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    const char *ms = wf__attr_s(k->op, k->attrs, "mode");
    int mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE : !strcmp(ms, "wrap") ? PAD_WRAP
             : PAD_CONSTANT;
    int r = x->rank;
    int64_t p[2 * WF_MAX_RANK], ax[WF_MAX_RANK];
    int np_, na;
    WF__TRY(wf__k_read_ints(k, 1, "pads", p, 2 * WF_MAX_RANK, &np_));
    if (wf__k_has(k, 3)) {
        WF__TRY(wf__k_read_ints(k, 3, "axes", ax, WF_MAX_RANK, &na));
    } else {
        na = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    }
    if (np_ != 2 * na)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "pads has %d values; data %s with %d padded axes needs %d", np_,
                             wf__shape_str(r, x->dims, b1), na, 2 * na);
    pad_job j = {.dst = NULL, .src = x->data, .rank = r > 0 ? r : 1, .mode = mode, .eb = wf_dtype_size(x->dtype)};
    memset(j.pat, 0, sizeof j.pat);
    if (wf__k_has(k, 2) && mode == PAD_CONSTANT) {
        const wf_tensor *cv = k->in[2];
        if (cv->dtype != x->dtype || cv->size > 1)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "constant_value %s%s must be a scalar of data's dtype %s",
                                 wf_dtype_name(cv->dtype), wf__shape_str(cv->rank, cv->dims, b1),
                                 wf_dtype_name(x->dtype));
        if (cv->size == 1) memcpy(j.pat, cv->data, j.eb);
    }
    int64_t st[WF_MAX_RANK], d[WF_MAX_RANK];
    wf__strides(r, x->dims, st);
    int bad = 0;
    switch (wf__ku_pad_plan(r, x->dims, na, ax, p, mode == PAD_CONSTANT, d, j.pb, &bad)) {
    case 1:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for data %s",
                             ax[bad], wf__shape_str(r, x->dims, b1));
    case 2:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "pads %s crop axis %d of data %s below zero",
                             wf__shape_str(np_ <= WF_MAX_RANK ? np_ : WF_MAX_RANK, p, b1), bad,
                             wf__shape_str(r, x->dims, b2));
    case 3:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "mode '%s' cannot pad the empty axis %d of data %s", ms, bad,
                             wf__shape_str(r, x->dims, b1));
    case 4:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "pads %s: padding axis %d of data %s overflows int64",
                             wf__shape_str(np_ <= WF_MAX_RANK ? np_ : WF_MAX_RANK, p, b1), bad,
                             wf__shape_str(r, x->dims, b2));
    default: break;
    }
    for (int i = 0; i < r; i++) {
        j.id[i] = x->dims[i];
        j.ist[i] = st[i];
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    j.dst = y->data;
    if (r == 0) {
        memcpy(y->data, x->data, j.eb);
        return NULL;
    }
    for (int i = 0; i < r; i++) j.od[i] = d[i];
    bool grows = mode == PAD_CONSTANT && x->size > 0;
    for (int i = 0; i < r; i++) grows &= j.pb[i] >= 0 && d[i] - j.pb[i] - x->dims[i] >= 0;
    if (grows) {
        wf__parallel_for(k, (y->size + 16383) / 16384, 16, pad_fill_range, &j);
        int64_t in_rows = wf__numel(r - 1, x->dims), in_row_bytes = x->dims[r - 1] * (int64_t)j.eb;
        int64_t g = WF__SHAPE_GRAIN_BYTES / (in_row_bytes + 64);
        wf__parallel_for(k, in_rows, g > 0 ? g : 1, pad_place_rows, &j);
        return NULL;
    }
    int64_t rows = wf__numel(r - 1, d), row_bytes = d[r - 1] * (int64_t)j.eb;
    int64_t grain = WF__SHAPE_GRAIN_BYTES / (row_bytes > 0 ? row_bytes : 1);
    wf__parallel_for(k, rows, grain > 0 ? grain : 1, pad_rows, &j);
    return NULL;
}

/* ---- OneHot ------------------------------------------------------------------------------------- */

wf_status *wf__k_onehot(wf__kctx *k)
{
    const wf_tensor *ix = k->in[0], *dp = k->in[1], *vals = k->in[2];
    char b[SB];
    if (!(WF__DT_BIT(ix->dtype) & WF__DT_NUMERIC) || !(WF__DT_BIT(dp->dtype) & WF__DT_NUMERIC) || dp->size != 1 ||
        vals->size != 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "needs numeric indices, a numeric depth with one value and two values, got %s, %s and %s",
                             wf_dtype_name(ix->dtype), wf_dtype_name(dp->dtype), wf__shape_str(vals->rank, vals->dims, b));
    double depth_f = wf__load_f64(dp->data, dp->dtype, 0);
    if (!(depth_f >= 1) || depth_f > 1e15)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "depth must be positive, got %g", depth_f);
    int64_t depth = (int64_t)depth_f;
    int r = ix->rank + 1;
    if (r > WF_MAX_RANK) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    int ax;
    if (!wf__norm_axis(axis, r, &ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for indices %s", axis,
                             wf__shape_str(ix->rank, ix->dims, b));
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = i == ax ? depth : ix->dims[j++];
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, vals->dtype, r, d, &y));
    if (!y->size) return NULL;
    size_t eb = wf_dtype_size(vals->dtype);
    const char *off = vals->data, *on = (const char *)vals->data + eb;
    wf__k_pfill(k, y->data, y->size, eb, off);
    int64_t outer = wf__numel(ax, ix->dims), inner = wf__numel(ix->rank - ax, ix->dims + ax);
    bool is_int = wf__dtype_is_int(ix->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t e = o * inner + i;
            /* Float indices truncate toward zero, as a cast to an integer does. */
            int64_t v = is_int ? wf__load_i64(ix->data, ix->dtype, e) : (int64_t)wf__load_f64(ix->data, ix->dtype, e);
            if (v < 0) v += depth;
            if (v < 0 || v >= depth) continue;
            memcpy((char *)y->data + (size_t)((o * depth + v) * inner + i) * eb, on, eb);
        }
    return NULL;
}

/* ---- Range -------------------------------------------------------------------------------------- */

wf_status *wf__k_range(wf__kctx *k)
{
    wf_dtype dt = k->in[0]->dtype;
    for (int i = 0; i < 3; i++)
        if (k->in[i]->dtype != dt || k->in[i]->size != 1)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "start, limit and delta must be scalars of one dtype");
    int64_t n;
    wf_tensor *y;
    if (wf__dtype_is_int(dt)) {
        int64_t s = wf__load_i64(k->in[0]->data, dt, 0), l = wf__load_i64(k->in[1]->data, dt, 0),
                dl = wf__load_i64(k->in[2]->data, dt, 0);
        if (dl == 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
        if (!wf__ku_range_count_i64(s, l, dl, &n))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                 "range(%" PRId64 ", %" PRId64 ", %" PRId64 ") has more elements than int64 holds", s, l, dl);
        WF__TRY(wf__kctx_output(k, 0, dt, 1, &n, &y));
        for (int64_t i = 0; i < n; i++) {
            int64_t v = wf__ku_range_at_i64(s, dl, i);
            switch (dt) {
            case WF_I8: ((int8_t *)y->data)[i] = (int8_t)v; break;
            case WF_U8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
            case WF_I16: ((int16_t *)y->data)[i] = (int16_t)v; break;
            case WF_I32: ((int32_t *)y->data)[i] = (int32_t)v; break;
            default: ((int64_t *)y->data)[i] = v;
            }
        }
        return NULL;
    }
    double s = wf__load_f64(k->in[0]->data, dt, 0), l = wf__load_f64(k->in[1]->data, dt, 0),
           dl = wf__load_f64(k->in[2]->data, dt, 0);
    if (dl == 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
    if (!wf__ku_range_count_f64(s, l, dl, &n))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "range(%g, %g, %g) is too long", s, l, dl);
    WF__TRY(wf__kctx_output(k, 0, dt, 1, &n, &y));
    for (int64_t i = 0; i < n; i++) wf__store_f64(y->data, dt, i, s + (double)i * dl);
    return NULL;
}

/* ---- Shape / Size / Fill / ConstantOfShape ------------------------------------------------------ */

wf_status *wf__k_shape(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t start = wf__attr_i(k->op, k->attrs, "start"), end = wf__attr_i(k->op, k->attrs, "end"), r = x->rank;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_I64, 1, &n, &y));
    if (n) memcpy(y->data, x->dims + start, sizeof(int64_t) * (size_t)n);
    return NULL;
}

wf_status *wf__k_size(wf__kctx *k)
{
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_I64, 0, NULL, &y));
    *(int64_t *)y->data = k->in[0]->size;
    return NULL;
}

static wf_status *fill_from_dims(wf__kctx *k, wf_dtype dt, const void *pattern)
{
    char b[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(wf__k_read_ints(k, 0, "shape", v, WF_MAX_RANK, &n));
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has a negative dim", wf__shape_str(n, v, b));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dt, n, v, &y));
    wf__k_pfill(k, y->data, y->size, wf_dtype_size(dt), pattern);
    return NULL;
}

wf_status *wf__k_fill(wf__kctx *k)
{
    const wf_tensor *v = k->in[1];
    if (v->size != 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "value must hold one element, got %" PRId64, v->size);
    return fill_from_dims(k, v->dtype, v->data);
}

wf_status *wf__k_constant_of_shape(wf__kctx *k)
{
    const wf__attr *a = wf__attr_get(k->op, k->attrs, "value");
    static const unsigned char zero[8] = {0};
    if (a->set && a->t) {
        if (a->t->size != 1)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'value' must hold one element");
        return fill_from_dims(k, a->t->dtype, a->t->data);
    }
    return fill_from_dims(k, WF_F32, zero);
}
