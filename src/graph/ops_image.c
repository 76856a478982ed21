/*
 * Ops of input pipelines: ReadFile (a path to the file's bytes), DecodeJpeg and DecodePng (bytes to a u8
 * [H, W, C] image), ConvertImageDtype, and the stateless random augmentations (brightness, contrast,
 * left-right flip, crop). weft.h documents their semantics and the random draws; the CPU kernels are in
 * backends/cpu/k_image_io.c and k_image_augment.c. None has a gradient: they sit before a model's input.
 */
#include "graph/op.h"

#include <math.h>

/* A string scalar (or a string of unknown shape, checked again by the kernel). */
static wf_status *check_string_scalar(const wf__infer_ctx *ctx, int idx, const char *what)
{
    const wf__tinfo *t = &ctx->in[idx];
    char s1[160];
    if (t->dtype != WF_STRING || t->rank > 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input '%s' %s must be a string scalar", what, wf__tinfo_str(t, s1));
    return NULL;
}

static wf_status *infer_read_file(wf__infer_ctx *ctx)
{
    WF__TRY(check_string_scalar(ctx, 0, "path"));
    ctx->out[0].dtype = WF_STRING;
    ctx->out[0].rank = 0;
    return NULL;
}

static wf_status *infer_decode(wf__infer_ctx *ctx, bool png)
{
    WF__TRY(check_string_scalar(ctx, 0, "contents"));
    int64_t c = WF__IC_I(ctx, "channels");
    if (!(c == 0 || c == 1 || c == 3 || (png && c == 4)))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'channels' is %lld; expected %s", (long long)c,
                              png ? "0 (as stored), 1, 3 or 4" : "0 (as stored), 1 or 3");
    wf_dtype to = (wf_dtype)WF__IC_I(ctx, "dtype");
    if (!wf__dtype_valid(to) || !(WF__DT_BIT(to) & (WF__DT_BIT(WF_U8) | WF__DT_FLOATS)))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'dtype' is %s; expected u8, f32, f64, f16 or bf16",
                              wf_dtype_name(to));
    ctx->out[0].dtype = to;
    ctx->out[0].rank = 3;
    ctx->out[0].dims[0] = ctx->out[0].dims[1] = -1; /* known when the image is decoded */
    ctx->out[0].dims[2] = c ? c : -1;
    return NULL;
}

static wf_status *infer_decode_jpeg(wf__infer_ctx *ctx) { return infer_decode(ctx, false); }
static wf_status *infer_decode_png(wf__infer_ctx *ctx) { return infer_decode(ctx, true); }

#define IMAGE_DTYPES (WF__DT_BIT(WF_U8) | WF__DT_FLOATS)

static wf_status *infer_convert_image_dtype(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, IMAGE_DTYPES));
    wf_dtype to = (wf_dtype)WF__IC_I(ctx, "dtype");
    if (!wf__dtype_valid(to) || !(WF__DT_BIT(to) & IMAGE_DTYPES))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'dtype' is %s; expected u8, f32, f64, f16 or bf16",
                              wf_dtype_name(to));
    ctx->out[0] = ctx->in[0];
    ctx->out[0].dtype = to;
    return NULL;
}

/* The image [H, W, C] or [N, H, W, C] of `mask` dtypes and the seed, an i64 [2]. */
static wf_status *check_image_seed(const wf__infer_ctx *ctx, uint32_t mask)
{
    const wf__tinfo *x = &ctx->in[0], *sd = &ctx->in[1];
    char s1[160];
    WF__TRY(wf__infer_check_dtype(ctx, 0, mask));
    if (x->rank >= 0 && x->rank != 3 && x->rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input 'image' %s must be [height, width, channels] or "
                              "[batch, height, width, channels]", wf__tinfo_str(x, s1));
    if (sd->dtype != WF_I64 || (sd->rank >= 0 && (sd->rank != 1 || (sd->dims[0] >= 0 && sd->dims[0] != 2))))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input 'seed' %s must be an i64 [2] tensor {seed, counter}",
                              wf__tinfo_str(sd, s1));
    return NULL;
}

static bool finite_nonneg(double v) { return isfinite(v) && v >= 0; }

static wf_status *infer_brightness(wf__infer_ctx *ctx)
{
    WF__TRY(check_image_seed(ctx, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64)));
    double d = WF__IC_F(ctx, "max_delta");
    if (!finite_nonneg(d))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'max_delta' is %g; expected a finite value >= 0", d);
    ctx->out[0] = ctx->in[0];
    return NULL;
}

static wf_status *infer_contrast(wf__infer_ctx *ctx)
{
    WF__TRY(check_image_seed(ctx, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64)));
    double lo = WF__IC_F(ctx, "lower"), hi = WF__IC_F(ctx, "upper");
    if (!finite_nonneg(lo) || !isfinite(hi) || hi < lo)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attributes 'lower' %g and 'upper' %g must be finite with "
                              "0 <= lower <= upper", lo, hi);
    ctx->out[0] = ctx->in[0];
    return NULL;
}

static wf_status *infer_flip(wf__infer_ctx *ctx)
{
    WF__TRY(check_image_seed(ctx, WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL)));
    ctx->out[0] = ctx->in[0];
    return NULL;
}

static wf_status *infer_crop(wf__infer_ctx *ctx)
{
    WF__TRY(check_image_seed(ctx, WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL)));
    const wf__attr *sz = WF__IC_A(ctx, "size");
    const wf__tinfo *x = &ctx->in[0];
    char s1[160];
    if (sz->n != 3)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'size' has %d values; expected 3 (height, width, "
                              "channels)", sz->n);
    for (int i = 0; i < 3; i++) {
        if (sz->ints[i] < 0)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "attribute 'size' [%lld,%lld,%lld] has a negative value",
                                  (long long)sz->ints[0], (long long)sz->ints[1], (long long)sz->ints[2]);
        int64_t have = x->rank >= 3 ? x->dims[x->rank - 3 + i] : -1;
        if (have >= 0 && sz->ints[i] > have)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "crop size [%lld,%lld,%lld] is larger than the image %s",
                                  (long long)sz->ints[0], (long long)sz->ints[1], (long long)sz->ints[2],
                                  wf__tinfo_str(x, s1));
    }
    ctx->out[0].dtype = x->dtype;
    ctx->out[0].rank = x->rank;
    if (x->rank >= 3) {
        for (int d = 0; d < x->rank - 3; d++) ctx->out[0].dims[d] = x->dims[d];
        for (int i = 0; i < 3; i++) ctx->out[0].dims[x->rank - 3 + i] = sz->ints[i];
    }
    return NULL;
}

const wf__op_def wf__ops_image[] = {
    /* stateful: the file is read at every run (it may change), never folded into a constant */
    {.name = "ReadFile", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_read_file,
     .flags = WF__OP_STATEFUL | WF__OP_STRINGS},
    /* dtype: u8 (default), or a float dtype with the pixels scaled to [0, 1] (TensorFlow's decode_image) */
    {.name = "DecodeJpeg", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"channels", WF_ATTR_INT, .i = 0}, {"dtype", WF_ATTR_DTYPE, .i = WF_U8}},
     .infer = infer_decode_jpeg, .flags = WF__OP_STRINGS},
    {.name = "DecodePng", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"channels", WF_ATTR_INT, .i = 0}, {"dtype", WF_ATTR_DTYPE, .i = WF_U8}},
     .infer = infer_decode_png, .flags = WF__OP_STRINGS},
    {.name = "ConvertImageDtype", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"dtype", WF_ATTR_DTYPE, .required = true}}, .infer = infer_convert_image_dtype},
    {.name = "StatelessRandomBrightness", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"max_delta", WF_ATTR_FLOAT, .required = true}}, .infer = infer_brightness, .host_in = 1u << 1},
    {.name = "StatelessRandomContrast", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"lower", WF_ATTR_FLOAT, .required = true}, {"upper", WF_ATTR_FLOAT, .required = true}},
     .infer = infer_contrast, .host_in = 1u << 1},
    {.name = "StatelessRandomFlipLeftRight", .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_flip,
     .host_in = 1u << 1},
    {.name = "StatelessRandomCrop", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"size", WF_ATTR_INTS, .required = true}}, .infer = infer_crop, .host_in = 1u << 1},
    {0},
};
