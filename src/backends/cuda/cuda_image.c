/*
 * Host side of the CUDA resampling, signal and contraction ops: Resize, GridSample, AffineGrid, RoiAlign,
 * Col2Im, CenterCropPad, DFT, the Hann / Hamming / Blackman windows and Einsum, with the kernel table.
 * Follows the OpenCL port (src/backends/opencl/ocl_image.c, ocl_quant_signal.c, ocl_seq.c) of the CPU kernels:
 * small operands (sizes, scales, batch indices) are read back and checked on the host, Resize tap tables,
 * DFT twiddles and the Einsum plan are built on the host and uploaded to stream-ordered scratch memory
 * (cudaMallocAsync on the compute stream, freed behind the kernels that use it).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_image.h"
#include "ops/kutil_einsum.h"
#include "ops/kutil_half.h"
#include "ops/kutil_resize.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MAXSP 3 /* spatial dims GridSample handles */

/* ---- helpers ------------------------------------------------------------------------------------------ */

static int64_t numel(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

static bool has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }
static int64_t attr_i(const wf__kctx *k, const char *name) { return cu_host->attr_get(k->op, k->attrs, name)->i; }
static double attr_f(const wf__kctx *k, const char *name) { return cu_host->attr_get(k->op, k->attrs, name)->f; }
static const char *attr_s(const wf__kctx *k, const char *name)
{
    const char *s = cu_host->attr_get(k->op, k->attrs, name)->s;
    return s ? s : "";
}

static wf_status *oom(wf__kctx *k, const char *what)
{
    return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of host memory for %s", what);
}

/* Device scratch ordered on the compute stream: usable by kernels queued after it, released behind them. */
static wf_status *scratch(wf__kctx *k, size_t bytes, void **p)
{
    *p = NULL;
    wf_status *s = cu_check(k, (int)cudaMallocAsync(p, bytes ? bytes : 1, cu_of(k)->compute), "scratch allocation");
    if (s) *p = NULL;
    return s;
}

static void scratch_free(wf__kctx *k, void *p)
{
    if (p) (void)cudaFreeAsync(p, cu_of(k)->compute);
}

/* Scratch holding a copy of `bytes` host bytes (which may be freed on return: pageable uploads are
 * staged before the call returns). */
static wf_status *upload(wf__kctx *k, const void *src, size_t bytes, void **p)
{
    wf_status *s = scratch(k, bytes, p);
    if (s || !bytes) return s;
    s = cu_check(k, (int)cudaMemcpyAsync(*p, src, bytes, cudaMemcpyHostToDevice, cu_of(k)->compute), "scratch upload");
    if (s) {
        scratch_free(k, *p);
        *p = NULL;
    }
    return s;
}

/* Up to max (<= 16) values of a small 1-D float input, as doubles. */
static wf_status *read_floats(wf__kctx *k, int idx, const char *what, double *v, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    char b[160];
    if (!cu_is_float(t->dtype) || t->rank > 1 || t->size > max)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s (input %d) must be a 1-D float tensor of at most %d values, got %s",
                                  what, idx, max, cu_tstr(t, b));
    uint64_t raw[16]; /* aligned for any dtype */
    wf_status *s = cu_read(k, t, raw, (size_t)t->size * cu_size(t->dtype));
    if (s) return s;
    for (int64_t i = 0; i < t->size; i++) v[i] = wf__ku_load_f64(raw, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

/* ---- Resize ------------------------------------------------------------------------------------------- */

/* One pass over axis d: *cur (dims cd, doubles) -> a new buffer with cd[d] = out_len. */
static wf_status *resize_pass(wf__kctx *k, const wf__ku_rs_params *P, int rank, int64_t *cd, int d, int64_t out_len,
                              double scale, double r0, double r1, double **cur)
{
    int n = wf__ku_rs_tap_count(P, scale);
    size_t nt = (size_t)out_len * (size_t)n;
    /* one block: idx (i64), w (f64), ext (u8) */
    size_t bytes = 16 * nt + (size_t)out_len;
    unsigned char *tab = cu_host->malloc(bytes ? bytes : 1);
    if (!tab) return oom(k, "the resize taps");
    int64_t *idx = (int64_t *)tab;
    double *w = (double *)(tab + 8 * nt);
    uint8_t *ext = tab + 16 * nt;
    wf__ku_rs_axis_taps(P, n, cd[d], out_len, scale, r0, r1, idx, w, ext);
    void *dt = NULL;
    double *next = NULL;
    int64_t outer = numel(d, cd), inner = numel(rank - d - 1, cd + d + 1), total = outer * out_len * inner;
    wf_status *s = upload(k, tab, bytes, &dt);
    cu_host->free(tab);
    if (!s) s = scratch(k, sizeof(double) * (size_t)total, (void **)&next);
    if (!s) {
        unsigned char *db = dt;
        s = cu_check(k,
                     cuki_resize_pass(cu_of(k)->compute, *cur, next, (const int64_t *)db, (const double *)(db + 8 * nt),
                                      db + 16 * nt, cd[d], out_len, inner, n, P->extrap, total),
                     "Resize pass");
    }
    scratch_free(k, dt);
    if (s) {
        scratch_free(k, next);
        return s;
    }
    scratch_free(k, *cur);
    *cur = next;
    cd[d] = out_len;
    return NULL;
}

static wf_status *k_resize(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf__ku_rs_params P = {.mode = attr_s(k, "mode"),
                          .ctm = attr_s(k, "coordinate_transformation_mode"),
                          .nearest = attr_s(k, "nearest_mode"),
                          .cubic_a = attr_f(k, "cubic_coeff_a"),
                          .extrap = attr_f(k, "extrapolation_value"),
                          .exclude = attr_i(k, "exclude_outside") != 0};
    P.antialias = attr_i(k, "antialias") != 0 && strcmp(P.mode, "nearest");
    const wf__attr *axa = cu_host->attr_get(k->op, k->attrs, "axes");
    int axes[WF_MAX_RANK], na = axa->n, rank = x->rank;
    char b[160], err[256];
    if (!wf__ku_resize_axes(rank, na, axa->ints, cu_tstr(x, b), axes, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    wf_status *s = cu_enter(k);
    if (s) return s;
    int want = na ? na : rank, all[WF_MAX_RANK];
    for (int i = 0; i < rank; i++) all[i] = i;
    double sc[WF_MAX_RANK], roi[2 * WF_MAX_RANK], scale[WF_MAX_RANK];
    int64_t sz[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nsc = 0, nsz = 0, nroi = 0;
    if (has(k, 2) && k->in[2]->size && (s = read_floats(k, 2, "scales", sc, WF_MAX_RANK, &nsc))) return s;
    if (has(k, 3) && k->in[3]->size) {
        if (k->in[3]->dtype != WF_I64)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sizes must be a 1-D i64 tensor, got %s",
                                      cu_tstr(k->in[3], b));
        if ((s = cu_read_ints(k, k->in[3], sz, WF_MAX_RANK, &nsz, "sizes"))) return s;
    }
    if (!nsc == !nsz)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "give exactly one of scales (input 2) and sizes (input 3)");
    if (!wf__ku_resize_shape(rank, x->dims, na ? axes : all, want, sc, nsc, sz, nsz, attr_s(k, "keep_aspect_ratio_policy"),
                             yd, scale, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    bool crop = !strcmp(P.ctm, "tf_crop_and_resize");
    double r0[WF_MAX_RANK], r1[WF_MAX_RANK];
    if (crop) {
        if (!has(k, 1)) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "tf_crop_and_resize needs roi (input 1)");
        if ((s = read_floats(k, 1, "roi", roi, 2 * WF_MAX_RANK, &nroi))) return s;
    }
    if (!wf__ku_resize_roi(rank, x->dims, yd, na, axes, want, crop, roi, nroi, b, r0, r1, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, rank, yd, &y)) || !y->size) return s;
    bool pass[WF_MAX_RANK], any = false;
    for (int d = 0; d < rank; d++) {
        pass[d] = !(yd[d] == x->dims[d] && fabs(scale[d] - 1.0) < 1e-12 && (!crop || (r0[d] == 0 && r1[d] == 1)));
        any |= pass[d];
    }
    cudaStream_t st = cu_of(k)->compute;
    if (!any && x->dtype != WF_I64) /* the CPU's round trip through double is exact here */
        return cu_check(k, (int)cudaMemcpyAsync(cu_ptr(y), cu_ptr(x), (size_t)x->bytes, cudaMemcpyDeviceToDevice, st),
                        "Resize copy");
    double *cur = NULL;
    if ((s = scratch(k, sizeof(double) * (size_t)x->size, (void **)&cur))) return s;
    s = cu_check(k, cuki_widen(st, x->dtype, cu_ptr(x), cur, x->size), "Resize widening");
    int64_t cd[WF_MAX_RANK];
    memcpy(cd, x->dims, sizeof(int64_t) * (size_t)rank);
    for (int d = 0; d < rank && !s; d++)
        if (pass[d]) s = resize_pass(k, &P, rank, cd, d, yd[d], scale[d], r0[d], r1[d], &cur);
    if (!s) s = cu_check(k, cuki_narrow(st, y->dtype, cur, cu_ptr(y), y->size), "Resize narrowing");
    scratch_free(k, cur);
    return s;
}

/* ---- GridSample, AffineGrid ----------------------------------------------------------------------------- */

static wf_status *k_grid_sample(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *G = k->in[1];
    char b0[160], b1[160];
    int nsp = X->rank - 2;
    if (nsp < 1 || nsp > MAXSP || G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != nsp ||
        !cu_is_float(G->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "grid %s must be float [N, out spatial..., %d] for X %s (1 to 3 spatial dims)",
                                  cu_tstr(G, b1), nsp, cu_tstr(X, b0));
    const char *mode = attr_s(k, "mode"), *pad = attr_s(k, "padding_mode");
    cuki_gs g = {.C = X->dims[1], .npts = numel(nsp, G->dims + 1), .nsp = nsp};
    g.mode = !strcmp(mode, "nearest") ? 0 : (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) ? 2 : 1;
    g.pad = !strcmp(pad, "border") ? 1 : !strcmp(pad, "reflection") ? 2 : 0;
    g.ac = attr_i(k, "align_corners") != 0;
    g.single = G->dtype != WF_F64;
    int64_t odims[WF_MAX_RANK] = {X->dims[0], X->dims[1]};
    for (int i = 0; i < 3; i++) g.dims[i] = 1;
    for (int i = 0; i < nsp; i++) odims[2 + i] = G->dims[1 + i], g.dims[i] = X->dims[2 + i];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, X->dtype, X->rank, odims, &y)) || !y->size) return s;
    cudaStream_t st = cu_of(k)->compute;
    double *gr = NULL;
    if ((s = scratch(k, sizeof(double) * (size_t)G->size, (void **)&gr))) return s;
    s = cu_check(k, cuki_widen(st, G->dtype, cu_ptr(G), gr, G->size), "GridSample grid widening");
    if (!s) s = cu_check(k, cuki_grid_sample(st, X->dtype, cu_ptr(X), gr, cu_ptr(y), y->size, &g), "GridSample kernel");
    scratch_free(k, gr);
    return s;
}

static wf_status *k_affine_grid(wf__kctx *k)
{
    const wf_tensor *T = k->in[0];
    char b[160];
    int64_t sz[5];
    int n = 0;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], sz, 5, &n, "size"))) return s;
    int nsp = n - 2;
    if ((nsp != 2 && nsp != 3) || T->rank != 3 || T->dims[0] != sz[0] || T->dims[1] != nsp || T->dims[2] != nsp + 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "theta %s must be [N, 2, 3] with a size of 4 values or [N, 3, 4] with 5 (got %d)",
                                  cu_tstr(T, b), n);
    for (int i = 0; i < n; i++)
        if (sz[i] < 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size holds a negative value %" PRId64, sz[i]);
    int64_t odims[5] = {sz[0]}, npts = 1, sp[3] = {1, 1, 1};
    for (int i = 0; i < nsp; i++) odims[1 + i] = sz[2 + i], npts *= sz[2 + i], sp[i] = sz[2 + i];
    odims[nsp + 1] = nsp;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, T->dtype, nsp + 2, odims, &y)) || !y->size) return s;
    return cu_check(k,
                    cuki_affine_grid(cu_of(k)->compute, T->dtype, cu_ptr(T), cu_ptr(y), y->size, npts, nsp, sp,
                                     attr_i(k, "align_corners") != 0),
                    "AffineGrid kernel");
}

/* ---- RoiAlign ------------------------------------------------------------------------------------------- */

static wf_status *k_roi_align(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *rois = k->in[1], *bi = k->in[2];
    char b0[160], b1[160];
    if (X->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0] ||
        rois->dtype != X->dtype || (bi->dtype != WF_I64 && bi->dtype != WF_I32))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "X %s, rois %s and batch_indices must be [N,C,H,W], [R,4] (X's dtype) and [R] (i32/i64)",
                                  cu_tstr(X, b0), cu_tstr(rois, b1));
    int64_t N = X->dims[0], R = rois->dims[0];
    cuki_roi p = {.C = X->dims[1], .H = X->dims[2], .W = X->dims[3], .oh = attr_i(k, "output_height"),
                  .ow = attr_i(k, "output_width"), .sr = attr_i(k, "sampling_ratio"),
                  .scale = attr_f(k, "spatial_scale")};
    p.half = !strcmp(attr_s(k, "coordinate_transformation_mode"), "half_pixel");
    p.is_max = !strcmp(attr_s(k, "mode"), "max");
    wf_status *s = cu_enter(k);
    if (s) return s;
    p.N = N;
    int64_t odims[4] = {R, p.C, p.oh, p.ow};
    wf_tensor *y = NULL;
    if ((s = cu_host->kctx_output(k, 0, X->dtype, 4, odims, &y))) return s;
    /* a batch index outside [0, N) fails the run, as on the CPU: a check kernel reports it (the op kernel
     * clamps it) */
    cuk_err *err;
    unsigned long long site;
    if (!R || (s = cu_err_site(k, CU_SITE_ROI_BATCH, 0, bi, X, &err, &site))) return s;
    if ((s = cu_check(k, cuk_range_check(cu_of(k)->compute, cu_ptr(bi), bi->dtype == WF_I64, R, 0, N, N, err, site),
                      "batch index check")) ||
        !y->size)
        return s;
    return cu_check(k, cuki_roi_align(cu_of(k)->compute, X->dtype, cu_ptr(X), cu_ptr(rois), cu_ptr(bi),
                                      bi->dtype == WF_I64, cu_ptr(y), y->size, &p),
                    "RoiAlign kernel");
}

/* ---- Col2Im --------------------------------------------------------------------------------------------- */

static wf_status *k_col2im(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    char b[160];
    int64_t img[WF_MAX_RANK], blk[WF_MAX_RANK];
    int ni = 0, nb = 0;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], img, WF_MAX_RANK - 2, &ni, "image_shape")) ||
        (s = cu_read_ints(k, k->in[2], blk, WF_MAX_RANK - 2, &nb, "block_shape")))
        return s;
    const wf__attr *da = cu_host->attr_get(k->op, k->attrs, "dilations"),
                   *pa = cu_host->attr_get(k->op, k->attrs, "pads"),
                   *sa = cu_host->attr_get(k->op, k->attrs, "strides");
    int n = ni;
    if (ni != nb || ni < 1 || (da->n && da->n != n) || (sa->n && sa->n != n) || (pa->n && pa->n != 2 * n))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "image_shape (%d values), block_shape (%d), dilations (%d), strides (%d) and pads "
                                  "(%d) disagree", ni, nb, da->n, sa->n, pa->n);
    cuki_c2i P;
    memset(&P, 0, sizeof P);
    P.n = n;
    P.bsz = P.L = P.isz = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = da->n ? da->ints[i] : 1, st = sa->n ? sa->ints[i] : 1;
        int64_t p = pa->n ? pa->ints[i] + pa->ints[n + i] : 0;
        if (blk[i] < 1 || d < 1 || st < 1 || img[i] < 0)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "block_shape, dilations and strides must be positive");
        P.img[i] = img[i], P.blk[i] = blk[i], P.nblk[i] = (img[i] + p - d * (blk[i] - 1) - 1) / st + 1;
        P.st[i] = st, P.pad[i] = pa->n ? pa->ints[i] : 0, P.dil[i] = d;
        P.bsz *= blk[i], P.L *= P.nblk[i], P.isz *= img[i];
    }
    if (X->rank != 3 || X->dims[1] % P.bsz || X->dims[2] != P.L)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "input %s must be [N, C * %" PRId64 ", %" PRId64 "] for these image and block shapes",
                                  cu_tstr(X, b), P.bsz, P.L);
    int64_t odims[WF_MAX_RANK] = {X->dims[0], X->dims[1] / P.bsz};
    for (int i = 0; i < n; i++) odims[2 + i] = img[i];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, X->dtype, n + 2, odims, &y)) || !y->size) return s;
    return cu_check(k, cuki_col2im(cu_of(k)->compute, X->dtype, cu_ptr(X), cu_ptr(y), y->size, &P), "Col2Im kernel");
}

/* ---- CenterCropPad -------------------------------------------------------------------------------------- */

static wf_status *k_center_crop_pad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sh = k->in[1];
    const wf__attr *ax = cu_host->attr_get(k->op, k->attrs, "axes");
    int na = ax->n ? ax->n : x->rank, rank = x->rank;
    char b0[160], b1[160];
    if (sh->rank != 1 || sh->dims[0] != na)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s must have one value per axis (%d) of input %s",
                                  cu_tstr(sh, b1), na, cu_tstr(x, b0));
    int64_t v[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nv = 0;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, sh, v, WF_MAX_RANK, &nv, "shape"))) return s;
    cuki_ccp P;
    memset(&P, 0, sizeof P);
    P.rank = rank;
    for (int d = 0; d < rank; d++) yd[d] = x->dims[d];
    for (int i = 0; i < na; i++) {
        int64_t a = !ax->n ? i : ax->ints[i] < 0 ? ax->ints[i] + rank : ax->ints[i];
        if (a < 0 || a >= rank)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s",
                                      ax->n ? ax->ints[i] : i, cu_tstr(x, b0));
        if (v[i] < 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape value %" PRId64 " must be >= 0", v[i]);
        /* cropping takes the centre, padding centres the input; an odd difference goes to the end */
        P.shift[a] = v[i] <= x->dims[a] ? (x->dims[a] - v[i]) / 2 : -((v[i] - x->dims[a]) / 2);
        yd[a] = v[i];
    }
    int64_t str = 1;
    for (int d = rank - 1; d >= 0; d--) P.od[d] = yd[d], P.id[d] = x->dims[d], P.ist[d] = str, str *= x->dims[d];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, rank, yd, &y)) || !y->size) return s;
    return cu_check(k, cuki_center_crop_pad(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), y->size, &P),
                    "CenterCropPad kernel");
}

/* ---- DFT ---------------------------------------------------------------------------------------------- */

static wf_status *k_dft(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    char b[160];
    int r = X->rank;
    if (r < 2 || (X->dims[r - 1] != 1 && X->dims[r - 1] != 2))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be [..., 1] (real) or [..., 2] (complex)",
                                  cu_tstr(X, b));
    bool inv = attr_i(k, "inverse") != 0, one = attr_i(k, "onesided") != 0;
    const wf__attr *axa = cu_host->attr_get(k->op, k->attrs, "axis");
    int64_t axis = axa->set ? axa->i : -2, v[1];
    int nv = 0;
    wf_status *s = cu_enter(k);
    if (s) return s;
    if (has(k, 2)) {
        if ((s = cu_read_ints(k, k->in[2], v, 1, &nv, "axis"))) return s;
        if (nv == 1) axis = v[0];
    }
    int64_t ax = axis < 0 ? axis + r : axis;
    if (ax < 0 || ax >= r - 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is not a signal axis of input %s", axis,
                                  cu_tstr(X, b));
    int64_t nin = X->dims[ax], L = inv && one ? 2 * (nin - 1) : nin;
    if (has(k, 1)) {
        if ((s = cu_read_ints(k, k->in[1], v, 1, &nv, "dft_length"))) return s;
        if (nv == 1) L = v[0];
    }
    if (L < 1) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the DFT length %" PRId64 " must be positive", L);
    int64_t oc = inv && one ? 1 : 2, olen = one && !inv ? L / 2 + 1 : L;
    int64_t od[WF_MAX_RANK];
    memcpy(od, X->dims, sizeof(int64_t) * (size_t)r);
    od[ax] = olen;
    od[r - 1] = oc;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, X->dtype, r, od, &y)) || !y->size) return s;
    /* twiddles e^{i 2 pi m / L} from the host's libm, as on the CPU: (k * t) mod L indexes them exactly */
    double *tw = cu_host->malloc(sizeof(double) * (size_t)(2 * L));
    if (!tw) return oom(k, "the DFT twiddles");
    for (int64_t m = 0; m < L; m++)
        tw[2 * m] = cos(2 * M_PI * (double)m / (double)L), tw[2 * m + 1] = sin(2 * M_PI * (double)m / (double)L);
    void *td = NULL;
    s = upload(k, tw, sizeof(double) * (size_t)(2 * L), &td);
    cu_host->free(tw);
    if (s) return s;
    int64_t inner = numel(r - 2 - (int)ax, X->dims + ax + 1);
    s = cu_check(k,
                 cuki_dft(cu_of(k)->compute, X->dtype, cu_ptr(X), td, cu_ptr(y), y->size / oc, nin, L, olen, inner,
                          X->dims[r - 1], inv, one),
                 "DFT kernel");
    scratch_free(k, td);
    return s;
}

/* ---- windows ------------------------------------------------------------------------------------------ */

static wf_status *window(wf__kctx *k, int kind)
{
    const wf_tensor *sz = k->in[0];
    char b[160];
    if (sz->size != 1 || sz->rank > 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size %s must be a scalar", cu_tstr(sz, b));
    int64_t n;
    int nv = 0;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, sz, &n, 1, &nv, "size"))) return s;
    if (n < 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size %" PRId64 " must be >= 0", n);
    wf_dtype dt = (wf_dtype)attr_i(k, "output_datatype");
    double N1 = (double)(attr_i(k, "periodic") ? n : n - 1);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dt, 1, &n, &y)) || !y->size) return s;
    return cu_check(k, cuki_window(cu_of(k)->compute, dt, cu_ptr(y), n, N1, kind), "window kernel");
}

static wf_status *k_hann(wf__kctx *k) { return window(k, 0); }
static wf_status *k_hamming(wf__kctx *k) { return window(k, 1); }
static wf_status *k_blackman(wf__kctx *k) { return window(k, 2); }

/* ---- Einsum ------------------------------------------------------------------------------------------- */

static wf_status *k_einsum(wf__kctx *k)
{
    int n = k->n_in;
    const char *eq = attr_s(k, "equation");
    wf_dtype t = k->in[0]->dtype;
    for (int i = 0; i < n; i++)
        if (k->in[i]->dtype != t)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %d is %s but input 0 is %s", i,
                                      cu_dtype_name(k->in[i]->dtype), cu_dtype_name(t));
    wf__einsum *e = cu_host->malloc(sizeof *e);
    if (!e) return oom(k, "the Einsum plan");
    char err[256];
    if (!wf__einsum_parse_tensors(eq, n, k->in, e, err, sizeof err)) {
        cu_host->free(e);
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "equation '%s': %s", eq, err);
    }
    int64_t st[WF__EINSUM_MAX_IN][WF__EINSUM_LABELS];
    int sum_label[WF__EINSUM_LABELS], orank = e->out_rank, ns = wf__einsum_walk(e, n, k->in, st, sum_label);
    int64_t yd[WF_MAX_RANK], ny = 1;
    for (int d = 0; d < orank; d++) ny *= yd[d] = e->label_dim[e->out_label[d]];
    wf_tensor *y;
    wf_status *s = cu_enter(k);
    if (!s) s = cu_host->kctx_output(k, 0, t, orank, yd, &y);
    if (s || ny == 0) {
        cu_host->free(e);
        return s;
    }
    size_t np = wf__einsum_plan_len(e, n, ns) + (size_t)n; /* then the operands' addresses */
    int64_t *pl = cu_host->malloc(np * sizeof(int64_t));
    if (!pl) {
        cu_host->free(e);
        return oom(k, "the Einsum plan");
    }
    int64_t *q = wf__einsum_plan(e, n, (const int64_t(*)[WF__EINSUM_LABELS])st, sum_label, ns, pl);
    for (int i = 0; i < n; i++) *q++ = (int64_t)(intptr_t)cu_ptr(k->in[i]);
    cu_host->free(e);
    void *pd = NULL;
    s = upload(k, pl, np * sizeof(int64_t), &pd);
    cu_host->free(pl);
    if (s) return s;
    s = cu_check(k, cuki_einsum(cu_of(k)->compute, t, pd, (int64_t)np, cu_ptr(y), ny), "Einsum kernel");
    scratch_free(k, pd);
    return s;
}

/* ---- table -------------------------------------------------------------------------------------------- */

const wf__kernel_def cu_kernels_image[] = {
    {"Resize", "GPU", WF__DT_NUMERIC, 0, k_resize, NULL, 0},
    {"GridSample", "GPU", WF__DT_FLOATS, 0, k_grid_sample, NULL, 0},
    {"AffineGrid", "GPU", WF__DT_FLOATS, 0, k_affine_grid, NULL, 0},
    {"RoiAlign", "GPU", WF__DT_FLOATS, 0, k_roi_align, NULL, 0},
    {"Col2Im", "GPU", WF__DT_NUMERIC, 0, k_col2im, NULL, 0},
    {"CenterCropPad", "GPU", WF__DT_ALL, 0, k_center_crop_pad, NULL, 0},
    {"DFT", "GPU", WF__DT_FLOATS, 0, k_dft, NULL, 0},
    {"HannWindow", "GPU", WF__DT_NUMERIC, -1, k_hann, NULL, 0},
    {"HammingWindow", "GPU", WF__DT_NUMERIC, -1, k_hamming, NULL, 0},
    {"BlackmanWindow", "GPU", WF__DT_NUMERIC, -1, k_blackman, NULL, 0},
    {"Einsum", "GPU", WF__DT_NUMERIC, 0, k_einsum, NULL, 0},
    {0},
};
