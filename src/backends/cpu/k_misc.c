/*
 * CPU kernels of ops_misc.c that move elements rather than compute with them (GatherElements,
 * ScatterElements, Trilu, EyeLike, DepthToSpace, SpaceToDepth, NonZero, Compress, ReverseSequence),
 * the helpers the k_misc*.c files share, and the group's kernel table. Indices are validated before any
 * element moves, so a bad index is a status and never a stray access.
 */
#include "backends/cpu/k_misc.h"
#include "ops/kutil_shape.h"

#include <inttypes.h>
#include <stdio.h>

#define SB WF__KM_SB

/* ---- shared helpers ---------------------------------------------------------------------------- */

wf_status *wf__km_alloc8(const wf__kctx *k, int64_t n, const char *what, void **buf)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * 8;
    *buf = wf__malloc(bytes);
    if (!*buf) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return NULL;
}

wf_status *wf__km_widen(const wf__kctx *k, const wf_tensor *t, bool as_int, void **buf)
{
    WF__TRY(wf__km_alloc8(k, t->size, "a widened copy of an input", buf));
    wf__convert(t->data, t->dtype, *buf, as_int ? WF_I64 : WF_F64, t->size);
    return NULL;
}

wf_status *wf__km_scalar_int(const wf__kctx *k, int idx, const char *what, int64_t *v)
{
    const wf_tensor *t = k->in[idx];
    char b[SB];
    if ((t->dtype != WF_I32 && t->dtype != WF_I64) || t->rank > 1 || t->size != 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be one i32 or i64 value", what,
                             wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, b));
    *v = wf__load_i64(t->data, t->dtype, 0);
    return NULL;
}

wf_status *wf__km_offsets(const wf__kctx *k, int rank, const int64_t *dims, unsigned mask, int64_t **off,
                          int64_t *n)
{
    int64_t st[WF_MAX_RANK], sd[WF_MAX_RANK], ss[WF_MAX_RANK];
    int m = 0;
    wf__strides(rank, dims, st);
    *n = 1;
    for (int d = 0; d < rank; d++)
        if (mask & (1u << d)) {
            sd[m] = dims[d];
            ss[m++] = st[d];
            *n *= dims[d];
        }
    WF__TRY(wf__km_alloc8(k, *n, "reduction offsets", (void **)off));
    int64_t idx[WF_MAX_RANK] = {0}, o = 0;
    for (int64_t i = 0; i < *n; i++) {
        (*off)[i] = o;
        for (int d = m - 1; d >= 0; d--) {
            o += ss[d];
            if (++idx[d] < sd[d]) break;
            o -= ss[d] * sd[d];
            idx[d] = 0;
        }
    }
    return NULL;
}

static inline void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

static wf_status *check_index_tensor(const wf__kctx *k, const wf_tensor *ix, const char *what)
{
    if (ix->dtype != WF_I32 && ix->dtype != WF_I64)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be i32 or i64, got %s", what, wf_dtype_name(ix->dtype));
    return NULL;
}

/* ---- GatherElements / ScatterElements ---------------------------------------------------------------- */

/* Checks indices against data on `axis` and the other dims. */
static wf_status *check_elements(const wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int *ax)
{
    char b0[SB], b1[SB];
    WF__TRY(check_index_tensor(k, ix, "indices"));
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    if (!wf__norm_axis(axis, x->rank, ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                             wf__shape_str(x->rank, x->dims, b0));
    if (ix->rank != x->rank)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s must have the rank of data %s",
                             wf__shape_str(ix->rank, ix->dims, b1), wf__shape_str(x->rank, x->dims, b0));
    for (int d = 0; d < x->rank; d++)
        if (d != *ax && ix->dims[d] > x->dims[d])
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s is larger than data %s in dim %d",
                                 wf__shape_str(ix->rank, ix->dims, b1), wf__shape_str(x->rank, x->dims, b0), d);
    int64_t D = x->dims[*ax];
    for (int64_t i = 0; i < ix->size; i++) {
        int64_t v = wf__load_i64(ix->data, ix->dtype, i);
        if (v < -D || v >= D)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                 "index %" PRId64 " (at position %" PRId64 ") is out of range for axis %d of data %s", v,
                                 i, *ax, wf__shape_str(x->rank, x->dims, b0));
    }
    return NULL;
}

/* Element offset in data of position i of indices, with the axis coordinate replaced by the index. */
static inline int64_t elem_offset(int rank, const int64_t *idims, const int64_t *xst, int ax, int64_t D,
                                  int64_t i, int64_t v)
{
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t c = i % idims[d];
        i /= idims[d];
        off += (d == ax ? (v < 0 ? v + D : v) : c) * xst[d];
    }
    return off;
}

typedef struct {
    const wf_tensor *x, *ix;
    char *y;
    int ax;
    int64_t xst[WF_MAX_RANK];
    size_t es;
} ge_job;

static void ge_range(void *arg, int64_t b, int64_t e)
{
    const ge_job *j = arg;
    const wf_tensor *x = j->x, *ix = j->ix;
    for (int64_t i = b; i < e; i++) {
        int64_t off = elem_offset(ix->rank, ix->dims, j->xst, j->ax, x->dims[j->ax], i,
                                  wf__load_i64(ix->data, ix->dtype, i));
        copy_elem(j->y + (size_t)i * j->es, (const char *)x->data + (size_t)off * j->es, j->es);
    }
}

static wf_status *k_gather_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    ge_job j = {.x = x, .ix = ix, .es = wf_dtype_size(x->dtype)};
    WF__TRY(check_elements(k, x, ix, &j.ax));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, ix->rank, ix->dims, &y));
    j.y = y->data;
    wf__strides(x->rank, x->dims, j.xst);
    wf__parallel_for(k, ix->size, WF__KM_GRAIN, ge_range, &j);
    return NULL;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static void store_int(void *p, wf_dtype t, int64_t i, int64_t v)
{
    switch (t) {
    case WF_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case WF_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case WF_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case WF_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

/* dst[o] = dst[o] (red) src[i], floats computed in f64 (exact for one f32 add or multiply before
 * rounding), integers wrapping like numpy. */
static void combine(void *dst, int64_t o, const void *src, int64_t i, wf_dtype dt, int red)
{
    if (wf__dtype_is_float(dt)) {
        double a = wf__load_f64(dst, dt, o), b = wf__load_f64(src, dt, i), r;
        switch (red) {
        case RED_ADD: r = a + b; break;
        case RED_MUL: r = a * b; break;
        case RED_MAX: r = (b > a || b != b) ? b : a; break;
        default: r = (b < a || b != b) ? b : a; break;
        }
        wf__store_f64(dst, dt, o, r);
    } else {
        int64_t a = wf__load_i64(dst, dt, o), b = wf__load_i64(src, dt, i), r;
        switch (red) {
        case RED_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case RED_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case RED_MAX: r = b > a ? b : a; break;
        default: r = b < a ? b : a; break;
        }
        store_int(dst, dt, o, r);
    }
}

static wf_status *k_scatter_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[SB], b2[SB];
    int ax;
    WF__TRY(check_elements(k, x, ix, &ax));
    if (u->rank != ix->rank || memcmp(u->dims, ix->dims, sizeof(int64_t) * (size_t)ix->rank))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "updates %s must have the shape of indices %s",
                             wf__shape_str(u->rank, u->dims, b2), wf__shape_str(ix->rank, ix->dims, b1));
    const char *rs = wf__attr_s(k->op, k->attrs, "reduction");
    int red = !strcmp(rs, "add") ? RED_ADD : !strcmp(rs, "mul") ? RED_MUL : !strcmp(rs, "max") ? RED_MAX
            : !strcmp(rs, "min") ? RED_MIN : RED_NONE;
    wf_tensor *y;
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    if (!reused && x->bytes) memcpy(y->data, x->data, x->bytes);
    int64_t xst[WF_MAX_RANK];
    wf__strides(x->rank, x->dims, xst);
    size_t es = wf_dtype_size(x->dtype);
    /* Sequential: with duplicate indices the updates apply in order (the last one wins for "none"). */
    for (int64_t i = 0; i < ix->size; i++) {
        int64_t o = elem_offset(ix->rank, ix->dims, xst, ax, x->dims[ax], i, wf__load_i64(ix->data, ix->dtype, i));
        if (red == RED_NONE) copy_elem((char *)y->data + (size_t)o * es, (const char *)u->data + (size_t)i * es, es);
        else combine(y->data, o, u->data, i, x->dtype, red);
    }
    return NULL;
}

/* ---- Trilu, EyeLike ---------------------------------------------------------------------------------- */

typedef struct {
    const char *x;
    char *y;
    int64_t R, C, kk;
    size_t es;
    bool upper;
} trilu_job;

static void trilu_range(void *arg, int64_t b, int64_t e)
{
    const trilu_job *j = arg;
    for (int64_t row = b; row < e; row++) {
        int64_t i = row % j->R;
        /* kept columns: upper j >= i + k, lower j <= i + k */
        int64_t lo = j->upper ? i + j->kk : 0, hi = j->upper ? j->C : i + j->kk + 1;
        lo = lo < 0 ? 0 : lo > j->C ? j->C : lo;
        hi = hi < 0 ? 0 : hi > j->C ? j->C : hi;
        if (hi < lo) hi = lo;
        size_t rb = (size_t)j->C * j->es, base = (size_t)row * rb;
        memset(j->y + base, 0, (size_t)lo * j->es);
        if (j->y != j->x) memcpy(j->y + base + (size_t)lo * j->es, j->x + base + (size_t)lo * j->es, (size_t)(hi - lo) * j->es);
        memset(j->y + base + (size_t)hi * j->es, 0, (size_t)(j->C - hi) * j->es);
    }
}

static wf_status *k_trilu(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank < 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 2", wf__shape_str(x->rank, x->dims, b));
    trilu_job j = {.x = x->data, .R = x->dims[x->rank - 2], .C = x->dims[x->rank - 1], .es = wf_dtype_size(x->dtype),
                   .upper = wf__attr_i(k->op, k->attrs, "upper") != 0};
    if (wf__km_has(k, 1)) WF__TRY(wf__km_scalar_int(k, 1, "k", &j.kk));
    /* Clamp so i + k cannot overflow; beyond +-C the answer no longer changes. */
    int64_t lim = j.R + j.C + 1;
    j.kk = j.kk > lim ? lim : j.kk < -lim ? -lim : j.kk;
    wf_tensor *y;
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    j.y = y->data;
    if (!y->size) return NULL;
    int64_t grain = WF__KM_GRAIN / (j.C ? j.C : 1);
    wf__parallel_for(k, x->size / j.C, grain > 0 ? grain : 1, trilu_range, &j);
    return NULL;
}

static wf_status *k_eyelike(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank != 2) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 2-D", wf__shape_str(x->rank, x->dims, b));
    const wf__attr *dta = wf__attr_get(k->op, k->attrs, "dtype");
    wf_dtype dt = dta->set ? (wf_dtype)dta->i : x->dtype;
    int64_t kk = wf__attr_i(k->op, k->attrs, "k");
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dt, 2, x->dims, &y));
    if (y->bytes) memset(y->data, 0, y->bytes);
    for (int64_t i = 0; i < x->dims[0]; i++) {
        if (kk > x->dims[1] || kk < -x->dims[0]) break;
        int64_t c = i + kk;
        if (c >= 0 && c < x->dims[1]) wf__store_f64(y->data, dt, i * x->dims[1] + c, 1.0);
    }
    return NULL;
}

/* ---- DepthToSpace / SpaceToDepth: a 6-D transpose ------------------------------------------------------ */

typedef struct {
    const char *x;
    char *y;
    int64_t od[6], st[6]; /* output dims and the source byte strides along them */
    size_t es;
} perm_job;

/* One task is one run of the two innermost output dims under a fixed outer index. */
static void perm_range(void *arg, int64_t b, int64_t e)
{
    const perm_job *j = arg;
    for (int64_t o = b; o < e; o++) {
        int64_t r = o, src = 0;
        for (int d = 3; d >= 0; d--) {
            src += (r % j->od[d]) * j->st[d];
            r /= j->od[d];
        }
        char *dst = j->y + (size_t)o * (size_t)(j->od[4] * j->od[5]) * j->es;
        for (int64_t a = 0; a < j->od[4]; a++)
            for (int64_t c = 0; c < j->od[5]; c++, dst += j->es)
                copy_elem(dst, j->x + src + a * j->st[4] + c * j->st[5], j->es);
    }
}

static wf_status *k_d2s(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    bool d2s = !strcmp(k->op->name, "DepthToSpace");
    int64_t bs = wf__attr_i(k->op, k->attrs, "blocksize");
    if (x->rank != 4) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 4-D", wf__shape_str(x->rank, x->dims, b));
    bool dcr = !strcmp(wf__attr_s(k->op, k->attrs, "mode"), "DCR");
    int64_t st[6], yd[4];
    perm_job j = {.x = x->data, .es = wf_dtype_size(x->dtype)};
    if (!wf__ku_d2s_plan(d2s, dcr, bs, x->dims, j.od, st, yd))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s does not divide into blocks of %" PRId64,
                             wf__shape_str(4, x->dims, b), bs);
    for (int d = 0; d < 6; d++) j.st[d] = st[d] * (int64_t)j.es;
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, 4, yd, &y));
    j.y = y->data;
    if (!y->size) return NULL;
    int64_t outer = j.od[0] * j.od[1] * j.od[2] * j.od[3], grain = WF__KM_GRAIN / (j.od[4] * j.od[5]);
    wf__parallel_for(k, outer, grain > 0 ? grain : 1, perm_range, &j);
    return NULL;
}

/* ---- NonZero, Compress, ReverseSequence ------------------------------------------------------------------ */

static wf_status *k_nonzero(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t nnz = 0;
    for (int64_t i = 0; i < x->size; i++) nnz += wf__load_f64(x->data, x->dtype, i) != 0;
    int64_t d[2] = {x->rank, nnz};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_I64, 2, d, &y));
    int64_t *out = y->data, idx[WF_MAX_RANK] = {0}, q = 0;
    if (!x->rank) return NULL;
    for (int64_t i = 0; i < x->size; i++) {
        if (wf__load_f64(x->data, x->dtype, i) != 0) {
            for (int r = 0; r < x->rank; r++) out[r * nnz + q] = idx[r];
            q++;
        }
        for (int r = x->rank - 1; r >= 0; r--) {
            if (++idx[r] < x->dims[r]) break;
            idx[r] = 0;
        }
    }
    return NULL;
}

static wf_status *k_compress(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *cond = k->in[1];
    char b0[SB], b1[SB];
    if (cond->dtype != WF_BOOL || cond->rank != 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "condition must be a 1-D bool tensor");
    const wf__attr *axa = wf__attr_get(k->op, k->attrs, "axis");
    int ax = -1;
    if (axa->set && !wf__norm_axis(axa->i, x->rank, &ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axa->i,
                             wf__shape_str(x->rank, x->dims, b0));
    int64_t D = ax >= 0 ? x->dims[ax] : x->size;
    int64_t outer = ax >= 0 ? wf__numel(ax, x->dims) : 1, inner = ax >= 0 ? wf__numel(x->rank - ax - 1, x->dims + ax + 1) : 1;
    if (cond->size > D)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "condition %s is longer than the %" PRId64 " entries of input %s it selects from",
                             wf__shape_str(1, cond->dims, b1), D, wf__shape_str(x->rank, x->dims, b0));
    const uint8_t *cv = cond->data;
    int64_t nnz = 0;
    for (int64_t i = 0; i < cond->size; i++) nnz += cv[i] != 0;
    int64_t d[WF_MAX_RANK];
    int r = wf__ku_compress_dims(x->rank, x->dims, ax, nnz, d);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    size_t blk = (size_t)inner * wf_dtype_size(x->dtype);
    char *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < cond->size; i++)
            if (cv[i]) {
                memcpy(dst, (const char *)x->data + ((size_t)o * (size_t)D + (size_t)i) * blk, blk);
                dst += blk;
            }
    return NULL;
}

static wf_status *k_reverse_sequence(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *l = k->in[1];
    char b0[SB], b1[SB];
    int ba = (int)wf__attr_i(k->op, k->attrs, "batch_axis"), ta = (int)wf__attr_i(k->op, k->attrs, "time_axis");
    WF__TRY(check_index_tensor(k, l, "sequence_lens"));
    if (x->rank < 2 || l->rank != 1 || l->dims[0] != x->dims[ba])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens %s must hold one length per batch of input %s",
                             wf__shape_str(l->rank, l->dims, b1), wf__shape_str(x->rank, x->dims, b0));
    int64_t B = x->dims[ba], T = x->dims[ta];
    for (int64_t b = 0; b < B; b++) {
        int64_t v = wf__load_i64(l->data, l->dtype, b);
        if (v < 0 || v > T)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sequence length %" PRId64 " of batch %" PRId64
                                 " is outside [0, %" PRId64 "] for input %s", v, b, T, wf__shape_str(x->rank, x->dims, b0));
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    size_t blk = (size_t)wf__numel(x->rank - 2, x->dims + 2) * wf_dtype_size(x->dtype);
    size_t sb = ba == 0 ? (size_t)T * blk : blk, st = ta == 0 ? (size_t)B * blk : blk;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = wf__load_i64(l->data, l->dtype, b);
        for (int64_t t = 0; t < T; t++) {
            int64_t s = t < len ? len - 1 - t : t;
            memcpy((char *)y->data + (size_t)b * sb + (size_t)t * st, (const char *)x->data + (size_t)b * sb + (size_t)s * st, blk);
        }
    }
    return NULL;
}

/* ---- the table -------------------------------------------------------------------------------------------- */

const wf__kernel_def wf__cpu_kernels_misc[] = {
    {"GatherElements", "CPU", WF__DT_ALL, 0, k_gather_elements, NULL, 0},
    {"ScatterElements", "CPU", WF__DT_ALL, 0, k_scatter_elements, NULL, WF__K_INPLACE},
    {"Trilu", "CPU", WF__DT_ALL, 0, k_trilu, NULL, WF__K_INPLACE},
    {"CumSum", "CPU", WF__DT_NUMERIC, 0, wf__k_cumsum, NULL, 0},
    {"CumProd", "CPU", WF__DT_NUMERIC, 0, wf__k_cumsum, NULL, 0},
    {"TopK", "CPU", WF__DT_NUMERIC, 0, wf__k_topk, NULL, 0},
    {"EyeLike", "CPU", WF__DT_ALL, -1, k_eyelike, NULL, 0},
    {"DepthToSpace", "CPU", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {"SpaceToDepth", "CPU", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {"InstanceNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_instancenorm, NULL, 0},
    {"GroupNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_groupnorm, NULL, 0},
    {"LRN", "CPU", WF__DT_FLOATS, 0, wf__k_lrn, NULL, 0},
    {"MeanVarianceNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_mvn, NULL, 0},
    {"RMSNormalization", "CPU", WF__DT_FLOATS, 0, wf__k_rmsnorm, NULL, 0},
    {"ReduceL1", "CPU", WF__DT_NUMERIC, 0, wf__k_reduce_misc, NULL, 0},
    {"ReduceSumSquare", "CPU", WF__DT_NUMERIC, 0, wf__k_reduce_misc, NULL, 0},
    {"ReduceLogSum", "CPU", WF__DT_NUMERIC, 0, wf__k_reduce_misc, NULL, 0},
    {"ReduceLogSumExp", "CPU", WF__DT_NUMERIC, 0, wf__k_reduce_misc, NULL, 0},
    {"GlobalMaxPool", "CPU", WF__DT_FLOATS, 0, wf__k_global_max_pool, NULL, 0},
    {"NonZero", "CPU", WF__DT_ALL, 0, k_nonzero, NULL, 0},
    {"Compress", "CPU", WF__DT_ALL, 0, k_compress, NULL, 0},
    {"ReverseSequence", "CPU", WF__DT_ALL, 0, k_reverse_sequence, NULL, 0},
    {"Einsum", "CPU", WF__DT_NUMERIC, 0, wf__k_einsum, NULL, 0},
    {"Resize", "CPU", WF__DT_NUMERIC, 0, wf__k_resize, NULL, 0},
    {NULL, NULL, 0, 0, NULL, NULL, 0},
};
