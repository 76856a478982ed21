/*
 * CPU kernels for the shape ops: views (Reshape, Flatten, Squeeze, Unsqueeze, Expand without
 * broadcasting) and copies (Transpose, Concat, Split, Slice, Tile, Expand) built on one strided byte
 * copier. Indexing ops and constant producers are in k_shape_index.c.
 */
#include <inttypes.h>
#include <stdio.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "backends/cpu/k_dnnl.h"
#include "backends/cpu/k_shape.h"
#include "ops/kutil_shape.h"

#define SB 160
#define MAXR (2 * WF_MAX_RANK)

/* ---- shared helpers ----------------------------------------------------------------------------- */

wf_status *wf__k_read_ints(const wf__kctx *k, int idx, const char *what, int64_t *v, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    char b[SB];
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                             wf_dtype_name(t->dtype));
    if (t->rank > 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be 1-D, got shape %s", what,
                             wf__shape_str(t->rank, t->dims, b));
    if (t->size > max)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' has %" PRId64 " values, at most %d allowed", what,
                             t->size, max);
    for (int64_t i = 0; i < t->size; i++)
        v[i] = t->dtype == WF_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *n = (int)t->size;
    return NULL;
}

/* Fixed-size memcpy compiles to one move and keeps unaligned blocks (i16 pairs seen as 4 bytes) legal. */
WF__VEC void wf__k_copy_strided(char *dst, const char *src, int64_t n, int64_t s, size_t eb)
{
    switch (eb) {
    case 1:
        for (int64_t i = 0; i < n; i++) dst[i] = src[i * s];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 2 * i, src + i * s, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 4 * i, src + i * s, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 8 * i, src + i * s, 8);
        break;
    case 16:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 16 * i, src + i * s, 16);
        break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * eb, src + i * s, eb);
    }
}

typedef struct {
    char *dst;
    const char *src;
    size_t bytes;
} pcopy_job;

#define PCOPY_CHUNK ((int64_t)64 * 1024)

static void pcopy_range(void *arg, int64_t b, int64_t e)
{
    const pcopy_job *j = arg;
    size_t lo = (size_t)(b * PCOPY_CHUNK), hi = (size_t)(e * PCOPY_CHUNK);
    if (hi > j->bytes) hi = j->bytes;
    if (hi > lo) memcpy(j->dst + lo, j->src + lo, hi - lo);
}

void wf__k_pcopy(wf__kctx *k, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    pcopy_job j = {dst, src, bytes};
    wf__parallel_for(k, ((int64_t)bytes + PCOPY_CHUNK - 1) / PCOPY_CHUNK, 4, pcopy_range, &j);
}

typedef struct {
    char *dst;
    int64_t n;
    size_t eb;
    unsigned char pat[16];
} pfill_job;

WF__VEC static void pfill_range(void *arg, int64_t b, int64_t e)
{
    const pfill_job *j = arg;
    switch (j->eb) {
    case 2: {
        uint16_t v;
        memcpy(&v, j->pat, 2);
        uint16_t *d = (uint16_t *)j->dst;
        for (int64_t i = b; i < e; i++) d[i] = v;
        break;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, j->pat, 4);
        uint32_t *d = (uint32_t *)j->dst;
        for (int64_t i = b; i < e; i++) d[i] = v;
        break;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, j->pat, 8);
        uint64_t *d = (uint64_t *)j->dst;
        for (int64_t i = b; i < e; i++) d[i] = v;
        break;
    }
    default:
        for (int64_t i = b; i < e; i++) memcpy(j->dst + (size_t)i * j->eb, j->pat, j->eb);
    }
}

static void memset_range(void *arg, int64_t b, int64_t e)
{
    const pfill_job *j = arg;
    memset(j->dst + (size_t)b * j->eb, j->pat[0], (size_t)(e - b) * j->eb);
}

void wf__k_pfill(wf__kctx *k, void *dst, int64_t n, size_t eb, const void *pattern)
{
    if (n <= 0) return;
    pfill_job j = {.dst = dst, .n = n, .eb = eb};
    memcpy(j.pat, pattern, eb <= 16 ? eb : 16);
    bool same = true;
    for (size_t i = 1; i < eb; i++) same = same && j.pat[i] == j.pat[0];
    int64_t grain = WF__SHAPE_GRAIN_BYTES / (int64_t)eb;
    /* Every dtype's 0 (and bool) is a byte pattern memset writes fastest. */
    wf__parallel_for(k, n, grain, same ? memset_range : pfill_range, &j);
}

/* ---- the strided copier ------------------------------------------------------------------------- */

typedef struct {
    int rank;           /* >= 1 after folding */
    int64_t dims[MAXR];
    int64_t st[MAXR];   /* source byte stride of each output axis */
    size_t eb;          /* contiguous block size */
    const char *src;
    char *dst;
} sc_job;

/* Drops size-1 axes and merges axes that are contiguous with each other in the source, and absorbs a
 * contiguous innermost axis into the block size, so slices and transposes of big tensors run as few
 * long memcpys. False when the output is empty. */
static bool sc_fold(sc_job *j, int rank, const int64_t *dims, const int64_t *st, size_t eb)
{
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) return false;
        if (dims[i] == 1) continue;
        if (r > 0 && j->st[r - 1] == st[i] * dims[i]) {
            j->dims[r - 1] *= dims[i];
            j->st[r - 1] = st[i];
            continue;
        }
        j->dims[r] = dims[i];
        j->st[r] = st[i];
        r++;
    }
    if (r > 0 && j->st[r - 1] == (int64_t)eb) {
        eb *= (size_t)j->dims[r - 1];
        r--;
    }
    if (r == 0) {
        j->dims[0] = 1;
        j->st[0] = 0;
        r = 1;
    }
    j->rank = r;
    j->eb = eb;
    return true;
}

static void sc_rows(void *arg, int64_t r0, int64_t r1)
{
    const sc_job *j = arg;
    int last = j->rank - 1;
    int64_t idx[MAXR], off = 0, rem = r0;
    for (int i = last - 1; i >= 0; i--) {
        idx[i] = rem % j->dims[i];
        rem /= j->dims[i];
        off += idx[i] * j->st[i];
    }
    int64_t n = j->dims[last], s = j->st[last];
    size_t row_bytes = (size_t)n * j->eb;
    char *d = j->dst + (size_t)r0 * row_bytes;
    const char *src = j->src;
    /* Short rows copy inline for the common block sizes: rows of a few blocks (a 3x3 filter cropped to
     * 2x2 gives rows of one 8-byte block) spent most of their time in the call and the switch. Longer
     * rows keep the call: wf__k_copy_strided is built for each ISA (WF__VEC), and inlined here it ran a
     * transpose's 256-element rows 5-20% slower. */
#define SC_ROWS(COPY)                                                                                             \
    for (int64_t row = r0; row < r1; row++) {                                                                    \
        COPY;                                                                                                    \
        d += row_bytes;                                                                                          \
        for (int i = last - 1; i >= 0; i--) {                                                                    \
            off += j->st[i];                                                                                     \
            if (++idx[i] < j->dims[i]) break;                                                                    \
            off -= j->st[i] * j->dims[i];                                                                        \
            idx[i] = 0;                                                                                          \
        }                                                                                                        \
    }
#define SC_BLOCKS(EB) for (int64_t e = 0; e < n; e++) memcpy(d + (EB) * e, src + off + e * s, (EB))
    switch (n <= 4 ? j->eb : 0) {
    case 4: SC_ROWS(SC_BLOCKS(4)); break;
    case 8: SC_ROWS(SC_BLOCKS(8)); break;
    case 16: SC_ROWS(SC_BLOCKS(16)); break;
    default: SC_ROWS(wf__k_copy_strided(d, src + off, n, s, j->eb));
    }
#undef SC_BLOCKS
#undef SC_ROWS
}

/* A single strided row (a stepped 1-D slice): split it by elements instead of rows. */
static void sc_elems(void *arg, int64_t e0, int64_t e1)
{
    const sc_job *j = arg;
    wf__k_copy_strided(j->dst + (size_t)e0 * j->eb, j->src + e0 * j->st[0], e1 - e0, j->st[0], j->eb);
}

static void sc_run(wf__kctx *k, sc_job *j)
{
    if (j->rank == 1 && j->dims[0] > 1) {
        int64_t grain = WF__SHAPE_GRAIN_BYTES / (int64_t)j->eb;
        wf__parallel_for(k, j->dims[0], grain > 0 ? grain : 1, sc_elems, j);
        return;
    }
    int64_t rows = 1;
    for (int i = 0; i < j->rank - 1; i++) rows *= j->dims[i];
    int64_t row_bytes = j->dims[j->rank - 1] * (int64_t)j->eb;
    if (rows == 1 && j->dims[0] == 1) {
        wf__k_pcopy(k, j->dst, j->src, j->eb);
        return;
    }
    int64_t grain = WF__SHAPE_GRAIN_BYTES / (row_bytes > 0 ? row_bytes : 1);
    wf__parallel_for(k, rows, grain > 0 ? grain : 1, sc_rows, j);
}

void wf__k_strided_copy(wf__kctx *k, void *dst, const void *src, int rank, const int64_t *dims,
                        const int64_t *st, size_t eb)
{
    sc_job j;
    if (!sc_fold(&j, rank, dims, st, eb)) return;
    j.src = src;
    j.dst = dst;
    sc_run(k, &j);
}

/* ---- views -------------------------------------------------------------------------------------- */

static wf_status *k_reshape(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(wf__k_read_ints(k, 1, "shape", v, WF_MAX_RANK, &n));
    bool allowzero = wf__attr_i(k->op, k->attrs, "allowzero") != 0;
    int64_t d[WF_MAX_RANK], prod;
    int bad = 0;
    switch (wf__ku_reshape_dims(x->rank, x->dims, x->size, n, v, allowzero, d, &prod, &bad)) {
    case WF__KU_RESHAPE_TWO_NEG:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has more than one -1", wf__shape_str(n, v, b1));
    case WF__KU_RESHAPE_NEG_DIM:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has a negative dim", wf__shape_str(n, v, b1));
    case WF__KU_RESHAPE_COPY_OOR:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s copies dim %d from input %s of rank %d",
                             wf__shape_str(n, v, b1), bad, wf__shape_str(x->rank, x->dims, b2), x->rank);
    case WF__KU_RESHAPE_ZERO_NEG:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has both 0 and -1 with allowzero=1",
                             wf__shape_str(n, v, b1));
    case WF__KU_RESHAPE_INFER:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape %s (%" PRId64 " elements) to shape %s",
                             wf__shape_str(x->rank, x->dims, b1), x->size, wf__shape_str(n, v, b2));
    case WF__KU_RESHAPE_COUNT:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "cannot reshape %s (%" PRId64 " elements) to shape %s (%" PRId64 " elements)",
                             wf__shape_str(x->rank, x->dims, b1), x->size, wf__shape_str(n, d, b2), prod);
    default: break;
    }
    return wf__kctx_output_view(k, 0, 0, n, d);
}

static wf_status *k_flatten(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    if (axis < -x->rank || axis > x->rank)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for rank %d", axis, x->rank);
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    int64_t d[2] = {wf__numel(a, x->dims), wf__numel(x->rank - a, x->dims + a)};
    return wf__kctx_output_view(k, 0, 0, 2, d);
}

static wf_status *k_squeeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB], b2[SB];
    int64_t v[WF_MAX_RANK], d[WF_MAX_RANK];
    int n = 0, r, bad = 0;
    if (wf__k_has(k, 1)) WF__TRY(wf__k_read_ints(k, 1, "axes", v, WF_MAX_RANK, &n));
    switch (wf__ku_squeeze_dims(x->rank, x->dims, n, wf__k_has(k, 1) ? v : NULL, d, &r, &bad)) {
    case 1:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes %s are invalid for input %s", wf__shape_str(n, v, b),
                             wf__shape_str(x->rank, x->dims, b2));
    case 2:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot squeeze axis %d of input %s: its size is not 1", bad,
                             wf__shape_str(x->rank, x->dims, b));
    default: break;
    }
    return wf__kctx_output_view(k, 0, 0, r, d);
}

static wf_status *k_unsqueeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(wf__k_read_ints(k, 1, "axes", v, WF_MAX_RANK, &n));
    int r = x->rank + n;
    if (r > WF_MAX_RANK)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "unsqueezing rank %d by %d axes exceeds rank %d", x->rank, n,
                             WF_MAX_RANK);
    int64_t d[WF_MAX_RANK];
    if (wf__ku_unsqueeze_dims(x->rank, x->dims, n, v, d) >= 0)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes %s are invalid for an output of rank %d",
                             wf__shape_str(n, v, b), r);
    return wf__kctx_output_view(k, 0, 0, r, d);
}

/* ---- Transpose ---------------------------------------------------------------------------------- */

#define TILE 32

typedef struct {
    char *dst;
    const char *src;
    int64_t B, R, C; /* src is [B][R][C] blocks, dst [B][C][R] */
    size_t eb;
} tt_job;

/* One task = one band of TILE output rows; the tile keeps both sides' cache lines hot. */
WF__VEC static void tt_range(void *arg, int64_t u0, int64_t u1)
{
    const tt_job *j = arg;
    int64_t bands = (j->C + TILE - 1) / TILE;
    size_t eb = j->eb;
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / bands, c0 = (u % bands) * TILE, c1 = c0 + TILE < j->C ? c0 + TILE : j->C;
        const char *s = j->src + (size_t)(b * j->R * j->C) * eb;
        char *d = j->dst + (size_t)(b * j->R * j->C) * eb;
        for (int64_t r0 = 0; r0 < j->R; r0 += TILE) {
            int64_t r1 = r0 + TILE < j->R ? r0 + TILE : j->R;
            for (int64_t c = c0; c < c1; c++) {
                char *dr = d + (size_t)(c * j->R) * eb;
                const char *sc = s + (size_t)c * eb;
                switch (eb) {
                case 1:
                    for (int64_t r = r0; r < r1; r++) dr[r] = sc[r * j->C];
                    break;
                case 2:
                    for (int64_t r = r0; r < r1; r++) memcpy(dr + 2 * r, sc + 2 * r * j->C, 2);
                    break;
                case 4:
                    for (int64_t r = r0; r < r1; r++) memcpy(dr + 4 * r, sc + 4 * r * j->C, 4);
                    break;
                case 8:
                    for (int64_t r = r0; r < r1; r++) memcpy(dr + 8 * r, sc + 8 * r * j->C, 8);
                    break;
                default:
                    for (int64_t r = r0; r < r1; r++) memcpy(dr + (size_t)r * eb, sc + (size_t)(r * j->C) * eb, eb);
                }
            }
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* 4-byte elements in 8 x 8 blocks through AVX2 registers (unpack, shuffle, lane swap), the rest of a band
 * element by element: the element loop moved 256 x 1024 f32 in 0.76 ms on 2 Zen 3 threads (ONNX Runtime
 * 0.26). d = s^T for the 8 x 8 block at s (rows ss floats apart) into d (rows ds apart). */
__attribute__((target("avx2"))) static inline void tt8x8(const float *s, int64_t ss, float *d, int64_t ds)
{
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss), r2 = _mm256_loadu_ps(s + 2 * ss),
           r3 = _mm256_loadu_ps(s + 3 * ss), r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss),
           r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* tt_range for 4-byte elements (bit patterns moved as floats: loads and stores of registers keep every bit) */
__attribute__((target("avx2"))) static void tt_range4(void *arg, int64_t u0, int64_t u1)
{
    const tt_job *j = arg;
    int64_t bands = (j->C + TILE - 1) / TILE, R = j->R, C = j->C;
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / bands, c0 = (u % bands) * TILE, c1 = c0 + TILE < C ? c0 + TILE : C;
        const float *s = (const float *)j->src + b * R * C;
        float *d = (float *)j->dst + b * R * C;
        for (int64_t r0 = 0; r0 < R; r0 += TILE) {
            int64_t r1 = r0 + TILE < R ? r0 + TILE : R, r8 = r0 + (r1 - r0) / 8 * 8, c8 = c0 + (c1 - c0) / 8 * 8;
            for (int64_t c = c0; c < c8; c += 8)
                for (int64_t r = r0; r < r8; r += 8) tt8x8(s + r * C + c, C, d + c * R + r, R);
            for (int64_t c = c0; c < c1; c++) /* the band's last columns, and every column's last rows */
                for (int64_t r = c < c8 ? r8 : r0; r < r1; r++) memcpy(d + c * R + r, s + r * C + c, 4);
        }
    }
}
#define TT_HAVE_AVX2 1
#endif

static wf_status *k_transpose(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *pa = wf__attr_get(k->op, k->attrs, "perm");
    int r = x->rank;
    int perm[WF_MAX_RANK];
    switch (wf__ku_perm(pa->n, pa->ints, r, perm)) {
    case 1: return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "perm has %d entries for an input of rank %d", pa->n, r);
    case 2: return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "perm is not a permutation of 0..%d", r - 1);
    default: break;
    }
    size_t eb = wf_dtype_size(x->dtype);
    int64_t in_st[WF_MAX_RANK], d[WF_MAX_RANK], st[WF_MAX_RANK];
    wf__strides(r, x->dims, in_st);
    for (int i = 0; i < r; i++) {
        d[i] = x->dims[perm[i]];
        st[i] = in_st[perm[i]] * (int64_t)eb;
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    sc_job j;
    if (!sc_fold(&j, r, d, st, eb)) return NULL;
    j.src = x->data;
    j.dst = y->data;
    /* After folding, a 2-D transpose (or a batch of them) of small blocks: copy it by tiles so both the
     * strided reads and the writes stay in cache. Blocks of a cache line or more are fine row by row. */
    int n = j.rank;
    if (n >= 2 && n <= 3 && j.eb < 64 && j.st[n - 2] == (int64_t)j.eb && j.st[n - 1] == j.dims[n - 2] * (int64_t)j.eb &&
        (n == 2 || j.st[0] == j.dims[1] * j.dims[2] * (int64_t)j.eb)) {
        tt_job t = {.dst = y->data, .src = x->data, .B = n == 3 ? j.dims[0] : 1, .R = j.dims[n - 1],
                    .C = j.dims[n - 2], .eb = j.eb};
        int64_t units = t.B * ((t.C + TILE - 1) / TILE);
        int64_t per_unit = TILE * t.R * (int64_t)t.eb;
        int64_t grain = WF__SHAPE_GRAIN_BYTES / (per_unit > 0 ? per_unit : 1);
        wf__range_fn fn = tt_range;
#ifdef TT_HAVE_AVX2
        if (t.eb == 4 && __builtin_cpu_supports("avx2")) fn = tt_range4;
#endif
        wf__parallel_for(k, units, grain > 0 ? grain : 1, fn, &t);
        return NULL;
    }
    sc_run(k, &j);
    return NULL;
}

/* ---- Concat / Split ----------------------------------------------------------------------------- */

typedef struct {
    int n;
    char **parts;         /* per input (Concat) or output (Split) */
    const size_t *part_row; /* bytes of one outer row of that part */
    char *whole;
    size_t whole_row;
    bool split;
} cs_job;

static void cs_range(void *arg, int64_t o0, int64_t o1)
{
    const cs_job *j = arg;
    for (int64_t o = o0; o < o1; o++) {
        char *w = j->whole + (size_t)o * j->whole_row;
        for (int i = 0; i < j->n; i++) {
            char *p = j->parts[i] + (size_t)o * j->part_row[i];
            if (j->split) memcpy(p, w, j->part_row[i]);
            else memcpy(w, p, j->part_row[i]);
            w += j->part_row[i];
        }
    }
}

/* Moves between one tensor and n parts along an axis: outer rows of the whole interleave the parts. */
static void cs_run(wf__kctx *k, cs_job *j, int64_t outer)
{
    if (outer == 1) {
        char *w = j->whole;
        for (int i = 0; i < j->n; i++) {
            /* a part already in its place (the memory plan laid a Concat's inputs out in its output,
             * WF__K_PARTS_IN_PLACE) is not copied */
            if (j->parts[i] != w) {
                if (j->split) wf__k_pcopy(k, j->parts[i], w, j->part_row[i]);
                else wf__k_pcopy(k, w, j->parts[i], j->part_row[i]);
            }
            w += j->part_row[i];
        }
        return;
    }
    int64_t grain = WF__SHAPE_GRAIN_BYTES / (j->whole_row > 0 ? (int64_t)j->whole_row : 1);
    wf__parallel_for(k, outer, grain > 0 ? grain : 1, cs_range, j);
}

static wf_status *k_concat(wf__kctx *k)
{
    const wf_tensor *x0 = k->in[0];
    char b1[SB], b2[SB];
    int r = x0->rank;
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    int ax;
    if (!wf__norm_axis(axis, r, &ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for inputs of rank %d", axis,
                             r);
    int64_t d[WF_MAX_RANK];
    memcpy(d, x0->dims, sizeof(int64_t) * (size_t)r);
    d[ax] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const wf_tensor *t = k->in[i];
        bool ok = t->rank == r && t->dtype == x0->dtype;
        for (int a = 0; ok && a < r; a++) ok = a == ax || t->dims[a] == x0->dims[a];
        if (!ok)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %d %s%s does not match input 0 %s%s off axis %d", i,
                                 wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, b1),
                                 wf_dtype_name(x0->dtype), wf__shape_str(r, x0->dims, b2), ax);
        if (wf__add_overflow_i64(d[ax], t->dims[ax], &d[ax]))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the sizes of axis %d sum past int64 at input %d %s", ax, i,
                                 wf__shape_str(t->rank, t->dims, b1));
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x0->dtype, r, d, &y));
    size_t eb = wf_dtype_size(x0->dtype);
    int64_t outer = wf__numel(ax, d), inner = wf__numel(r - ax - 1, d + ax + 1);
    if (y->size == 0) return NULL;
    char **parts = wf__malloc(sizeof(char *) * (size_t)k->n_in);
    size_t *rows = wf__malloc(sizeof(size_t) * (size_t)k->n_in);
    if (!parts || !rows) {
        wf__free(parts);
        wf__free(rows);
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %d inputs", k->n_in);
    }
    /* Level 3 (lower/layout.c) may keep a 4-D f32 channel Concat in the CPU's blocked layout, every input
     * and the result alike. nChw8c / nChw16c with whole blocks per input lay the channels out as plain
     * NCHW does, block by block, so the plain rows are right; nhwc interleaves the inputs' channel vectors
     * at every pixel: rows of C_i floats under N x H x W. */
    if (k->in_blocked) {
        uint32_t all = k->n_in >= 32 ? 0xffffffffu : (1u << k->n_in) - 1;
        if (r != 4 || ax != 1 || x0->dtype != WF_F32 || (k->in_blocked & all) != all || !(k->out_blocked & 1)) {
            wf__free(parts);
            wf__free(rows);
            return wf__kctx_fail(k, WF_INTERNAL, "a blocked Concat needs every input and the result blocked, "
                                 "4-D f32 along axis 1");
        }
        if (wf__dn_blocked_tag() == dnnl_acdb) outer = d[0] * d[2] * d[3], inner = 1;
    }
    for (int i = 0; i < k->n_in; i++) {
        parts[i] = k->in[i]->data;
        rows[i] = (size_t)(k->in[i]->dims[ax] * inner) * eb;
    }
    cs_job j = {.n = k->n_in, .parts = parts, .part_row = rows, .whole = y->data,
                .whole_row = (size_t)(d[ax] * inner) * eb, .split = false};
    cs_run(k, &j, outer);
    wf__free(parts);
    wf__free(rows);
    return NULL;
}

static wf_status *k_split(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    int ax, n = k->n_out;
    if (!wf__norm_axis(axis, x->rank, &ax))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                             wf__shape_str(x->rank, x->dims, b));
    int64_t *sizes = wf__malloc(sizeof(int64_t) * (size_t)n);
    char **parts = wf__malloc(sizeof(char *) * (size_t)n);
    size_t *rows = wf__malloc(sizeof(size_t) * (size_t)n);
    wf_status *s = NULL;
    if (!sizes || !parts || !rows) {
        s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %d outputs", n);
        goto done;
    }
    int64_t dim = x->dims[ax];
    if (wf__k_has(k, 1)) {
        int m;
        if ((s = wf__k_read_ints(k, 1, "split", sizes, n, &m))) goto done;
        int64_t sum = 0;
        bool neg = false;
        for (int i = 0; i < m; i++) {
            neg = neg || sizes[i] < 0;
            sum += sizes[i];
        }
        if (m != n || neg || sum != dim) {
            s = wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                              "split sizes (%d values) must be %d non-negative sizes summing to %" PRId64
                              ", axis %d of input %s",
                              m, n, dim, ax, wf__shape_str(x->rank, x->dims, b));
            goto done;
        }
    } else {
        if (!wf__ku_split_even(dim, n, sizes)) {
            s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot split axis %d of input %s into %d outputs", ax,
                              wf__shape_str(x->rank, x->dims, b), n);
            goto done;
        }
    }
    size_t eb = wf_dtype_size(x->dtype);
    int64_t outer = wf__numel(ax, x->dims), inner = wf__numel(x->rank - ax - 1, x->dims + ax + 1);
    for (int i = 0; i < n; i++) {
        int64_t d[WF_MAX_RANK];
        memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
        d[ax] = sizes[i];
        wf_tensor *y;
        if ((s = wf__kctx_output(k, i, x->dtype, x->rank, d, &y))) goto done;
        parts[i] = y->data;
        rows[i] = (size_t)(sizes[i] * inner) * eb;
    }
    if (x->size > 0) {
        cs_job j = {.n = n, .parts = parts, .part_row = rows, .whole = x->data,
                    .whole_row = (size_t)(dim * inner) * eb, .split = true};
        cs_run(k, &j, outer);
    }
done:
    wf__free(sizes);
    wf__free(parts);
    wf__free(rows);
    return s;
}

/* ---- Slice -------------------------------------------------------------------------------------- */

static wf_status *k_slice(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int r = x->rank;
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK], sp[WF_MAX_RANK];
    int ns, ne;
    WF__TRY(wf__k_read_ints(k, 1, "starts", st, WF_MAX_RANK, &ns));
    WF__TRY(wf__k_read_ints(k, 2, "ends", en, WF_MAX_RANK, &ne));
    int na = 0, nsp = 0;
    if (wf__k_has(k, 3)) WF__TRY(wf__k_read_ints(k, 3, "axes", ax, WF_MAX_RANK, &na));
    if (wf__k_has(k, 4)) WF__TRY(wf__k_read_ints(k, 4, "steps", sp, WF_MAX_RANK, &nsp));
    if (!wf__ku_slice_defaults(ns, ne, wf__k_has(k, 3), ax, &na, wf__k_has(k, 4), sp, &nsp))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "starts, ends, axes and steps have %d, %d, %d and %d values", ns,
                             ne, na, nsp);
    int64_t d[WF_MAX_RANK], so[WF_MAX_RANK], off;
    size_t eb = wf_dtype_size(x->dtype);
    wf__strides(r, x->dims, so);
    for (int i = 0; i < r; i++) so[i] *= (int64_t)eb;
    int bad = 0;
    switch (wf__ku_slice_plan(r, x->dims, ns, st, en, ax, sp, d, so, &off, &bad)) {
    case 1:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for input %s",
                             ax[bad], wf__shape_str(r, x->dims, b));
    case 2: return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "step %d is 0", bad);
    default: break;
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    if (y->size) wf__k_strided_copy(k, y->data, (const char *)x->data + off, r, d, so, eb);
    return NULL;
}

/* ---- Tile / Expand ------------------------------------------------------------------------------ */

static wf_status *k_tile(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t rep[WF_MAX_RANK];
    int n, r = x->rank;
    WF__TRY(wf__k_read_ints(k, 1, "repeats", rep, WF_MAX_RANK, &n));
    if (n != r)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "repeats has %d values but data %s has rank %d", n,
                             wf__shape_str(r, x->dims, b), r);
    size_t eb = wf_dtype_size(x->dtype);
    int64_t in_st[WF_MAX_RANK], d[WF_MAX_RANK], ed[MAXR], es[MAXR];
    wf__strides(r, x->dims, in_st);
    /* Output axis i splits into (repeat, dim): the repeat index reads the same source again. */
    int bad = 0;
    char b2[SB];
    switch (wf__ku_tile_dims(r, x->dims, rep, d, &bad)) {
    case 1: return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "repeats %s has a negative value", wf__shape_str(n, rep, b));
    case 2:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "output dim %d (%" PRId64 " x %" PRId64 ") overflows int64: input %s, repeats %s", bad,
                             x->dims[bad], rep[bad], wf__shape_str(r, x->dims, b2), wf__shape_str(n, rep, b));
    default: break;
    }
    for (int i = 0; i < r; i++) {
        ed[2 * i] = rep[i];
        es[2 * i] = 0;
        ed[2 * i + 1] = x->dims[i];
        es[2 * i + 1] = in_st[i] * (int64_t)eb;
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    if (y->size) wf__k_strided_copy(k, y->data, x->data, 2 * r, ed, es, eb);
    return NULL;
}

static wf_status *k_expand(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(wf__k_read_ints(k, 1, "shape", v, WF_MAX_RANK, &n));
    int64_t d[WF_MAX_RANK], st[WF_MAX_RANK], in_st[WF_MAX_RANK];
    size_t eb = wf_dtype_size(x->dtype);
    wf__strides(x->rank, x->dims, in_st);
    for (int i = 0; i < x->rank; i++) in_st[i] *= (int64_t)eb;
    bool same;
    int r = wf__ku_expand_dims(x->rank, x->dims, in_st, n, v, d, st, &same);
    if (r < 0)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot broadcast input %s to shape %s",
                             wf__shape_str(x->rank, x->dims, b1), wf__shape_str(n, v, b2));
    if (same) return wf__kctx_output_view(k, 0, 0, r, d);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, r, d, &y));
    if (y->size) wf__k_strided_copy(k, y->data, x->data, r, d, st, eb);
    return NULL;
}

/* ---- the table ---------------------------------------------------------------------------------- */

/* Reshape, Flatten, Squeeze and Unsqueeze return a view of their input: WF__K_INPLACE lets the memory plan
 * give their output the input's buffer when they are its last reader, so the view needs no bytes of its own
 * (before, the executor copied every view of an arena value into the view's own slot: ShuffleNetV2's 16
 * channel shuffles, 14 us each). */
const wf__kernel_def wf__cpu_kernels_shape[] = {
    {"Reshape", "CPU", WF__DT_ALL, 0, k_reshape, NULL, WF__K_INPLACE},
    {"Flatten", "CPU", WF__DT_ALL, 0, k_flatten, NULL, WF__K_INPLACE},
    {"Squeeze", "CPU", WF__DT_ALL, 0, k_squeeze, NULL, WF__K_INPLACE},
    {"Unsqueeze", "CPU", WF__DT_ALL, 0, k_unsqueeze, NULL, WF__K_INPLACE},
    {"Transpose", "CPU", WF__DT_ALL, 0, k_transpose, NULL, 0},
    {"Concat", "CPU", WF__DT_ALL, 0, k_concat, NULL, WF__K_BLOCKED | WF__K_PARTS_IN_PLACE},
    {"Split", "CPU", WF__DT_ALL, 0, k_split, NULL, 0},
    {"Slice", "CPU", WF__DT_ALL, 0, k_slice, NULL, 0},
    {"Tile", "CPU", WF__DT_ALL, 0, k_tile, NULL, 0},
    {"Expand", "CPU", WF__DT_ALL, 0, k_expand, NULL, 0},
    {"Gather", "CPU", WF__DT_ALL, 0, wf__k_gather, NULL, 0},
    {"GatherND", "CPU", WF__DT_ALL, 0, wf__k_gathernd, NULL, 0},
    {"ScatterND", "CPU", WF__DT_ALL, 0, wf__k_scatternd, NULL, WF__K_INPLACE},
    {"Pad", "CPU", WF__DT_ALL, 0, wf__k_pad, NULL, 0},
    {"OneHot", "CPU", WF__DT_ALL, 2, wf__k_onehot, NULL, 0},
    {"Range", "CPU", WF__DT_NUMERIC, 0, wf__k_range, NULL, 0},
    {"Shape", "CPU", WF__DT_ALL, 0, wf__k_shape, NULL, 0},
    {"Size", "CPU", WF__DT_ALL, 0, wf__k_size, NULL, 0},
    {"Fill", "CPU", WF__DT_ALL, 1, wf__k_fill, NULL, 0},
    {"ConstantOfShape", "CPU", WF__DT_ALL, -1, wf__k_constant_of_shape, NULL, 0},
    {NULL, NULL, 0, 0, NULL, NULL, 0},
};
