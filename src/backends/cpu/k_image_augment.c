/*
 * CPU kernels of the image conversions and stateless random augmentations (graph/ops_image.c; weft.h
 * spells out the arithmetic and the draws, which tests/ops replicate in numpy). Each image of a batch
 * draws from its own key, so the kernels loop over images and then over pixels.
 */
/* Each operation is rounded on its own, as the documented formulas (and the numpy replica) do: no
 * contraction of x * scale + delta into a fused multiply-add. */
#pragma GCC optimize("fp-contract=off")

#include <math.h>

#include "backends/cpu/k_image.h"
#include "device/kernel.h"
#include "ops/kutil_image.h"

/* TensorFlow's scales: u8 to float multiplies by 1/255 (rounded to f32), float to u8 by 255.5 */
#define U8_TO_F32 ((float)(1.0 / 255.0))
#define F32_TO_U8 255.5f

static inline uint8_t sat_u8(float v)
{
    if (!(v > 0)) return 0; /* NaN too */
    return v >= 255.0f ? 255 : (uint8_t)v;
}

static inline uint8_t sat_u8_d(double v)
{
    if (!(v > 0)) return 0;
    return v >= 255.0 ? 255 : (uint8_t)v;
}

/* ---- ConvertImageDtype --------------------------------------------------------------------------- */

void wf__cpu_image_from_u8(const uint8_t *a, void *y, wf_dtype to, int64_t n)
{
    if (to == WF_U8) {
        if (n) memcpy(y, a, (size_t)n);
    } else if (to == WF_F64) {
        for (int64_t i = 0; i < n; i++) ((double *)y)[i] = (double)a[i] * (1.0 / 255.0);
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v = (float)a[i] * U8_TO_F32;
            if (to == WF_F32) ((float *)y)[i] = v;
            else ((uint16_t *)y)[i] = to == WF_F16 ? wf__f2h(v) : wf__f2bf(v);
        }
    }
}

static wf_status *k_convert_image_dtype(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype to = (wf_dtype)wf__attr_i(k->op, k->attrs, "dtype");
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, to, x->rank, x->dims, &y));
    int64_t n = x->size;
    if (x->dtype == to) {
        if (x->bytes) memcpy(y->data, x->data, x->bytes);
    } else if (x->dtype == WF_U8) {
        wf__cpu_image_from_u8(x->data, y->data, to, n);
    } else if (to == WF_U8) {
        uint8_t *b = y->data;
        for (int64_t i = 0; i < n; i++) {
            switch (x->dtype) {
            case WF_F64: b[i] = sat_u8_d(((const double *)x->data)[i] * 255.5); break;
            case WF_F32: b[i] = sat_u8(((const float *)x->data)[i] * F32_TO_U8); break;
            case WF_F16: b[i] = sat_u8(wf__h2f(((const uint16_t *)x->data)[i]) * F32_TO_U8); break;
            default: b[i] = sat_u8(wf__bf2f(((const uint16_t *)x->data)[i]) * F32_TO_U8); break;
            }
        }
    } else {
        wf__convert(x->data, x->dtype, y->data, to, n); /* float to float: Cast's rounding */
    }
    return NULL;
}

/* ---- the random ops' common part ------------------------------------------------------------------ */

typedef wf__ki_geom img_geom; /* ops/kutil_image.h */

static wf_status *image_and_seed(const wf__kctx *k, img_geom *g)
{
    const wf_tensor *x = k->in[0], *sd = k->in[1];
    char s1[160];
    if (x->rank != 3 && x->rank != 4)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input 'image' %s%s must be [height, width, channels] or "
                             "[batch, height, width, channels]", wf_dtype_name(x->dtype),
                             wf__shape_str(x->rank, x->dims, s1));
    if (sd->dtype != WF_I64 || sd->size != 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input 'seed' %s%s must be an i64 [2] tensor {seed, counter}",
                             wf_dtype_name(sd->dtype), wf__shape_str(sd->rank, sd->dims, s1));
    *g = wf__ki_geom_of(x->dims, x->rank, (const int64_t *)sd->data);
    return NULL;
}


/* ---- StatelessRandomBrightness -------------------------------------------------------------------- */

/* o = a + d over n floats (o may be a: the kernel runs in place when it can). */
WF__VEC static void add_scalar_f32(const float *a, float *o, int64_t n, float d)
{
#pragma omp simd
    for (int64_t e = 0; e < n; e++) o[e] = a[e] + d;
}

static wf_status *k_brightness(wf__kctx *k)
{
    img_geom g;
    WF__TRY(image_and_seed(k, &g));
    const wf_tensor *x = k->in[0];
    double max_delta = wf__attr_f(k->op, k->attrs, "max_delta");
    wf_tensor *y;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, NULL));
    int64_t per = g.h * g.w * g.c;
    for (int64_t i = 0; i < g.n; i++) {
        double delta = wf__ki_delta(&g, i, max_delta);
        int64_t b = i * per;
        if (x->dtype == WF_F64) {
            const double *a = (const double *)x->data + b;
            double *o = (double *)y->data + b;
            for (int64_t e = 0; e < per; e++) o[e] = a[e] + delta;
        } else if (x->dtype == WF_F32) {
            add_scalar_f32((const float *)x->data + b, (float *)y->data + b, per, (float)delta);
        } else {
            const uint8_t *a = (const uint8_t *)x->data + b;
            uint8_t *o = (uint8_t *)y->data + b;
            float df = (float)delta;
            for (int64_t e = 0; e < per; e++) {
                float v = (float)a[e] * U8_TO_F32;
                v = v + df;
                o[e] = sat_u8(v * F32_TO_U8);
            }
        }
    }
    return NULL;
}

/* ---- StatelessRandomContrast ---------------------------------------------------------------------- */

/* Element e of image data p (dtype dt) as the float the arithmetic uses: u8 in [0, 1] units. */
static inline double load_px(const void *p, wf_dtype dt, int64_t e)
{
    switch (dt) {
    case WF_F64: return ((const double *)p)[e];
    case WF_F32: return ((const float *)p)[e];
    default: return (float)((const uint8_t *)p)[e] * U8_TO_F32;
    }
}

static wf_status *k_contrast(wf__kctx *k)
{
    img_geom g;
    WF__TRY(image_and_seed(k, &g));
    const wf_tensor *x = k->in[0];
    double lo = wf__attr_f(k->op, k->attrs, "lower"), hi = wf__attr_f(k->op, k->attrs, "upper");
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    int64_t hw = g.h * g.w, per = hw * g.c;
    for (int64_t i = 0; i < g.n; i++) {
        double factor = wf__ki_factor(&g, i, lo, hi);
        int64_t b = i * per;
        for (int64_t ch = 0; ch < g.c; ch++) {
            double sum = 0;
            for (int64_t p = 0; p < hw; p++) sum += load_px(x->data, x->dtype, b + p * g.c + ch);
            double mean = hw ? sum / (double)hw : 0;
            if (x->dtype == WF_F64) {
                for (int64_t p = 0; p < hw; p++) {
                    int64_t e = b + p * g.c + ch;
                    ((double *)y->data)[e] = (((const double *)x->data)[e] - mean) * factor + mean;
                }
                continue;
            }
            float mf = (float)mean, ff = (float)factor;
            for (int64_t p = 0; p < hw; p++) {
                int64_t e = b + p * g.c + ch;
                float v = (float)load_px(x->data, x->dtype, e);
                v = (v - mf) * ff;
                v = v + mf;
                if (x->dtype == WF_F32) ((float *)y->data)[e] = v;
                else ((uint8_t *)y->data)[e] = sat_u8(v * F32_TO_U8);
            }
        }
    }
    return NULL;
}

/* ---- StatelessRandomFlipLeftRight ----------------------------------------------------------------- */

static wf_status *k_flip(wf__kctx *k)
{
    img_geom g;
    WF__TRY(image_and_seed(k, &g));
    const wf_tensor *x = k->in[0];
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    size_t es = wf_dtype_size(x->dtype), px = es * (size_t)g.c, row = px * (size_t)g.w;
    for (int64_t i = 0; i < g.n; i++) {
        bool flip = wf__ki_flip(&g, i);
        for (int64_t r = 0; r < g.h; r++) {
            const char *a = (const char *)x->data + ((size_t)i * (size_t)g.h + (size_t)r) * row;
            char *o = (char *)y->data + ((size_t)i * (size_t)g.h + (size_t)r) * row;
            if (!flip) {
                if (row) memcpy(o, a, row);
                continue;
            }
            for (int64_t c = 0; c < g.w; c++) memcpy(o + (size_t)c * px, a + (size_t)(g.w - 1 - c) * px, px);
        }
    }
    return NULL;
}

/* ---- StatelessRandomCrop -------------------------------------------------------------------------- */

static wf_status *k_crop(wf__kctx *k)
{
    img_geom g;
    WF__TRY(image_and_seed(k, &g));
    const wf_tensor *x = k->in[0];
    const wf__attr *sz = wf__attr_get(k->op, k->attrs, "size");
    int64_t h = sz->ints[0], w = sz->ints[1], c = sz->ints[2];
    char s1[160];
    if (h > g.h || w > g.w || c > g.c)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "crop size [%lld,%lld,%lld] is larger than the image %s%s",
                             (long long)h, (long long)w, (long long)c, wf_dtype_name(x->dtype),
                             wf__shape_str(x->rank, x->dims, s1));
    int64_t dims[4] = {g.n, h, w, c};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->rank == 4 ? dims : dims + 1, &y));
    size_t es = wf_dtype_size(x->dtype);
    for (int64_t i = 0; i < g.n; i++) {
        int64_t o3[3];
        wf__ki_crop(&g, i, h, w, c, o3);
        int64_t oh = o3[0], ow = o3[1], oc = o3[2];
        for (int64_t r = 0; r < h; r++)
            for (int64_t q = 0; q < w; q++) {
                size_t src = (size_t)(((i * g.h + oh + r) * g.w + ow + q) * g.c + oc);
                size_t dst = (size_t)(((i * h + r) * w + q) * c);
                if (c) memcpy((char *)y->data + dst * es, (const char *)x->data + src * es, (size_t)c * es);
            }
    }
    return NULL;
}

#define IMG_RANDOM (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64))

const wf__kernel_def wf__cpu_kernels_image_augment[] = {
    {"ConvertImageDtype", "CPU", WF__DT_BIT(WF_U8) | WF__DT_FLOATS, 0, k_convert_image_dtype},
    {"StatelessRandomBrightness", "CPU", IMG_RANDOM, 0, k_brightness, NULL, WF__K_INPLACE},
    {"StatelessRandomContrast", "CPU", IMG_RANDOM, 0, k_contrast},
    {"StatelessRandomFlipLeftRight", "CPU", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0, k_flip},
    {"StatelessRandomCrop", "CPU", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0, k_crop},
    {0},
};
