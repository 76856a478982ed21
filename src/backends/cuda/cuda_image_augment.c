/*
 * Host side of the CUDA image conversions and stateless random augmentations (graph/ops_image.c):
 * ConvertImageDtype, StatelessRandomBrightness, StatelessRandomContrast, StatelessRandomFlipLeftRight and
 * StatelessRandomCrop, with the kernel table. Semantics are src/backends/cpu/k_image_augment.c's,
 * documented in weft.h; the device code is cuda_image_augment.cu.
 */
/* The seed is a host-memory input, so each image's draws (ops/kutil_image.h) are made here, in the CPU
 * kernel's arithmetic, and uploaded as one small table per launch to stream-ordered scratch memory
 * (freed behind the kernels that read it): flips, crop offsets and every output are the CPU's bit for
 * bit. The host arithmetic rounds each operation, as the CPU kernel's does. */
#pragma GCC optimize("fp-contract=off")

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_image_augment.h"
#include "ops/kutil_image.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

/* Scratch on the compute stream holding a copy of `bytes` host bytes (src may be freed on return:
 * pageable uploads are staged before the call returns). */
static wf_status *upload(wf__kctx *k, const void *src, size_t bytes, void **p)
{
    *p = NULL;
    wf_status *s = cu_check(k, (int)cudaMallocAsync(p, bytes ? bytes : 1, cu_of(k)->compute), "scratch allocation");
    if (s) {
        *p = NULL;
        return s;
    }
    if (!src || !bytes) return NULL;
    s = cu_check(k, (int)cudaMemcpyAsync(*p, src, bytes, cudaMemcpyHostToDevice, cu_of(k)->compute), "scratch upload");
    if (s) {
        (void)cudaFreeAsync(*p, cu_of(k)->compute);
        *p = NULL;
    }
    return s;
}

static void scratch_free(wf__kctx *k, void *p)
{
    if (p) (void)cudaFreeAsync(p, cu_of(k)->compute);
}

static wf_status *host_table(wf__kctx *k, size_t bytes, void **out)
{
    *out = cu_host->malloc(bytes ? bytes : 1);
    return *out ? NULL : cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of host memory for %zu bytes of draws", bytes);
}

/* ---- ConvertImageDtype --------------------------------------------------------------------------- */

static wf_status *k_convert_image_dtype(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype to = (wf_dtype)cu_host->attr_get(k->op, k->attrs, "dtype")->i;
    if (to == x->dtype) return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
    if (!cu_is_float(to) && to != WF_U8)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot convert an image from %s to %s",
                                  cu_dtype_name(x->dtype), cu_dtype_name(to));
    wf_status *s = cu_enter(k);
    if (s) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, to, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuia_convert(cu_of(k)->compute, x->dtype, to, cu_ptr(x), cu_ptr(y), y->size),
                    "ConvertImageDtype kernel");
}

/* ---- the random ops' common part ------------------------------------------------------------------ */

typedef wf__ki_geom img_geom; /* ops/kutil_image.h */

/* The image's geometry and the seed, checked as the CPU kernel does; makes the device current. */
static wf_status *image_and_seed(wf__kctx *k, img_geom *g)
{
    const wf_tensor *x = k->in[0], *sd = k->in[1];
    char s1[160];
    if (x->rank != 3 && x->rank != 4)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'image' %s must be [height, width, channels] or "
                                  "[batch, height, width, channels]", cu_tstr(x, s1));
    if (sd->dtype != WF_I64 || sd->size != 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'seed' %s must be an i64 [2] tensor {seed, counter}",
                                  cu_tstr(sd, s1));
    wf_status *s = cu_enter(k);
    if (s) return s;
    int64_t v[2];
    if ((s = cu_read(k, sd, v, sizeof v))) return s; /* a host-memory input: normally on the host already */
    *g = wf__ki_geom_of(x->dims, x->rank, v);
    return NULL;
}


/* Each image's brightness delta (max_delta a) or contrast factor (lower a, upper b) in double, drawn by
 * ops/kutil_image.h as the CPU draws it, uploaded; the kernels round it to f32 for u8 and f32 images, as
 * the CPU does. */
static wf_status *image_params(wf__kctx *k, const img_geom *g, bool bright, double a, double b, void **out)
{
    double *p;
    wf_status *s = host_table(k, sizeof(double) * (size_t)g->n, (void **)&p);
    if (s) return s;
    for (int64_t i = 0; i < g->n; i++) {
        p[i] = bright ? wf__ki_delta(g, i, a) : wf__ki_factor(g, i, a, b);
    }
    s = upload(k, p, sizeof(double) * (size_t)g->n, out);
    cu_host->free(p);
    return s;
}

/* ---- StatelessRandomBrightness, StatelessRandomContrast ------------------------------------------- */

static wf_status *k_brightness(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    void *delta;
    if ((s = image_params(k, &g, true, cu_host->attr_get(k->op, k->attrs, "max_delta")->f, 0, &delta))) return s;
    s = cu_check(k, cuia_brightness(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), delta, g.h * g.w * g.c, y->size),
                 "StatelessRandomBrightness kernel");
    scratch_free(k, delta);
    return s;
}

static wf_status *k_contrast(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    double lo = cu_host->attr_get(k->op, k->attrs, "lower")->f, hi = cu_host->attr_get(k->op, k->attrs, "upper")->f;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    void *factor, *mean;
    if ((s = image_params(k, &g, false, lo, hi, &factor))) return s;
    if (!(s = upload(k, NULL, sizeof(double) * (size_t)(g.n * g.c), &mean))) {
        s = cu_check(k, cuia_contrast(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), mean, factor, g.h * g.w, g.c,
                                      g.n),
                     "StatelessRandomContrast kernel");
        scratch_free(k, mean);
    }
    scratch_free(k, factor);
    return s;
}

/* ---- StatelessRandomFlipLeftRight, StatelessRandomCrop -------------------------------------------- */

static wf_status *k_flip(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    uint8_t *flip;
    if ((s = host_table(k, (size_t)g.n, (void **)&flip))) return s;
    for (int64_t i = 0; i < g.n; i++) flip[i] = wf__ki_flip(&g, i);
    void *dflip;
    s = upload(k, flip, (size_t)g.n, &dflip);
    cu_host->free(flip);
    if (s) return s;
    s = cu_check(k, cuia_flip(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), dflip, g.h, g.w, g.c,
                              y->size),
                 "StatelessRandomFlipLeftRight kernel");
    scratch_free(k, dflip);
    return s;
}

static wf_status *k_crop(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    const wf__attr *sz = cu_host->attr_get(k->op, k->attrs, "size");
    int64_t h = sz->ints[0], w = sz->ints[1], c = sz->ints[2];
    char s1[160];
    if (h > g.h || w > g.w || c > g.c)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "crop size [%lld,%lld,%lld] is larger than the image %s",
                                  (long long)h, (long long)w, (long long)c, cu_tstr(x, s1));
    int64_t dims[4] = {g.n, h, w, c};
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->rank == 4 ? dims : dims + 1, &y)) || !y->size) return s;
    int64_t *off;
    if ((s = host_table(k, sizeof(int64_t) * 3 * (size_t)g.n, (void **)&off))) return s;
    for (int64_t i = 0; i < g.n; i++) {
        wf__ki_crop(&g, i, h, w, c, off + 3 * i);
    }
    void *doff;
    s = upload(k, off, sizeof(int64_t) * 3 * (size_t)g.n, &doff);
    cu_host->free(off);
    if (s) return s;
    cuia_crop_geom geom = {g.h, g.w, g.c, h, w, c};
    s = cu_check(k, cuia_crop(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), doff, geom, y->size),
                 "StatelessRandomCrop kernel");
    scratch_free(k, doff);
    return s;
}

#define IMG_RANDOM (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64))

const wf__kernel_def cu_kernels_image_augment[] = {
    {"ConvertImageDtype", "GPU", WF__DT_BIT(WF_U8) | WF__DT_FLOATS, 0, k_convert_image_dtype, NULL, 0},
    {"StatelessRandomBrightness", "GPU", IMG_RANDOM, 0, k_brightness, NULL, 0},
    {"StatelessRandomContrast", "GPU", IMG_RANDOM, 0, k_contrast, NULL, 0},
    {"StatelessRandomFlipLeftRight", "GPU", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0, k_flip, NULL, 0},
    {"StatelessRandomCrop", "GPU", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0, k_crop, NULL, 0},
    {0},
};
