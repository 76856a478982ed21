/*
 * CPU kernels that bring files and encoded images into a graph (graph/ops_image.c): ReadFile, and
 * DecodeJpeg / DecodePng through libjpeg-turbo and libpng.
 *
 * Both libraries report errors by calling a handler that must not return; their defaults print and
 * exit(). Each decoder installs its own handler, which keeps the library's message and longjmps back
 * to the kernel, where the library's state is destroyed and a status naming the node is returned. The
 * output tensor belongs to the kernel context from the moment it is allocated (the executor frees it
 * on error); the only other resource, PNG's row pointers, is freed on both paths.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>

#include "backends/cpu/k_image.h"
#include "device/kernel.h"

/* The bytes of input idx, a string scalar. */
static wf_status *string_scalar(const wf__kctx *k, int idx, const char *what, const unsigned char **p, size_t *n)
{
    const wf_tensor *t = k->in[idx];
    char s1[160];
    const char *s = t->dtype == WF_STRING && t->size == 1 ? wf_tensor_string(t, 0, n) : NULL;
    if (!s)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s%s must be a string scalar", what,
                             wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, s1));
    *p = (const unsigned char *)s;
    return NULL;
}

/* ---- ReadFile ------------------------------------------------------------------------------------ */

static wf_status *too_big(const wf__kctx *k, const char *path, uint64_t bytes)
{
    return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "'%s' holds %llu bytes, more than this machine's memory (%zu bytes)", path,
                         (unsigned long long)bytes, wf__host_alloc_limit());
}

/* A file whose size stat cannot tell (a pipe, /proc): read in growing chunks, then copied out. */
static wf_status *read_stream(wf__kctx *k, FILE *f, const char *path)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = wf__malloc(cap);
    if (!buf) return wf__oom(path, cap);
    for (;;) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap > wf__host_alloc_limit() / 2) {
            wf__free(buf);
            return too_big(k, path, (uint64_t)cap * 2);
        }
        char *nb = wf__realloc(buf, cap, cap * 2);
        if (!nb) {
            wf__free(buf);
            return wf__oom(path, cap * 2);
        }
        buf = nb;
        cap *= 2;
    }
    wf_status *s = NULL;
    if (ferror(f)) s = wf__kctx_fail(k, WF_IO_ERROR, "reading '%s': %s", path, strerror(errno));
    wf_tensor *y;
    if (!s) s = wf__kctx_output_strings(k, 0, 0, NULL, n, &y);
    if (!s) {
        if (n) memcpy((char *)y->data + 16, buf, n);
        wf__tensor_string_set(y, 0, 0, n);
    }
    wf__free(buf);
    return s;
}

static wf_status *k_read_file(wf__kctx *k)
{
    const unsigned char *p;
    size_t n;
    WF__TRY(string_scalar(k, 0, "path", &p, &n));
    if (memchr(p, 0, n)) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the path contains a NUL byte");
    char *path = wf__strndup((const char *)p, n);
    if (!path) return wf__oom("a path", n);
    wf_status *s = NULL;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) {
        s = wf__kctx_fail(k, errno == ENOENT || errno == ENOTDIR ? WF_NOT_FOUND : WF_IO_ERROR, "cannot open '%s': %s", path,
                          strerror(errno));
    } else if (fstat(fileno(f), &st) != 0) {
        s = wf__kctx_fail(k, WF_IO_ERROR, "cannot stat '%s': %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        s = wf__kctx_fail(k, WF_IO_ERROR, "'%s' is a directory", path);
    } else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        s = read_stream(k, f, path);
    } else if ((uint64_t)st.st_size > wf__host_alloc_limit()) {
        s = too_big(k, path, (uint64_t)st.st_size);
    } else {
        /* the size stat gave: a file growing meanwhile is read as it was, one shrinking as it is */
        wf_tensor *y;
        size_t want = (size_t)st.st_size;
        if (!(s = wf__kctx_output_strings(k, 0, 0, NULL, want, &y))) {
            size_t got = fread((char *)y->data + 16, 1, want, f);
            if (got < want && ferror(f)) s = wf__kctx_fail(k, WF_IO_ERROR, "reading '%s': %s", path, strerror(errno));
            if (got < want) memset((char *)y->data + 16 + got, 0, want - got);
            wf__tensor_string_set(y, 0, 0, got);
        }
    }
    if (f) fclose(f);
    wf__free(path);
    return s;
}

/* ---- DecodeJpeg ---------------------------------------------------------------------------------- */

typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void jpeg_fail_exit(j_common_ptr c)
{
    jpeg_fail *e = (jpeg_fail *)c->err;
    e->mgr.format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* libjpeg reports damaged data it can skip over (a truncated file: "Premature end of JPEG file", then
 * gray rows) as warnings, level -1. A damaged image is an error here, as in TensorFlow without
 * try_recover_truncated and in Pillow; trace messages (level >= 0) are ignored. */
static void jpeg_fail_message(j_common_ptr c, int level)
{
    if (level < 0) jpeg_fail_exit(c);
}

static wf_status *k_decode_jpeg(wf__kctx *k)
{
    const unsigned char *p;
    size_t n;
    WF__TRY(string_scalar(k, 0, "contents", &p, &n));
    int want = (int)wf__attr_i(k->op, k->attrs, "channels");
    struct jpeg_decompress_struct cinfo;
    jpeg_fail err;
    wf_dtype to = (wf_dtype)wf__attr_i(k->op, k->attrs, "dtype");
    wf_status *volatile s = NULL;
    unsigned char *volatile tmp = NULL; /* the 8-bit image when the output is a float dtype */
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail_exit;
    err.mgr.emit_message = jpeg_fail_message;
    err.msg[0] = 0;
    if (setjmp(err.jb)) {
        jpeg_destroy_decompress(&cinfo);
        wf__free(tmp);
        if (s) return s;
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "not a valid JPEG image (%zu bytes): libjpeg: %s", n, err.msg);
    }
    jpeg_create_decompress(&cinfo);
    if (n > ULONG_MAX) longjmp(err.jb, 1);
    jpeg_mem_src(&cinfo, p, (unsigned long)n);
    jpeg_read_header(&cinfo, TRUE);
    /* libjpeg's defaults, spelled out: the accurate integer IDCT and fancy upsampling, which is what
     * Pillow decodes with (TensorFlow's own default is the fast IDCT: see weft.h) */
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    if (want == 1 || (want == 0 && cinfo.num_components == 1)) cinfo.out_color_space = JCS_GRAYSCALE;
    else cinfo.out_color_space = JCS_RGB; /* from YCbCr or gray; CMYK cannot be converted and fails */
    jpeg_start_decompress(&cinfo);
    int64_t dims[3] = {cinfo.output_height, cinfo.output_width, cinfo.output_components};
    wf_tensor *y;
    wf_status *as = wf__kctx_output(k, 0, to, 3, dims, &y);
    size_t px = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
    if (!as && to != WF_U8 && !(tmp = wf__malloc(px ? px : 1))) as = wf__oom("a decoded JPEG", px);
    if (as) {
        s = as;
        longjmp(err.jb, 1);
    }
    unsigned char *img = to == WF_U8 ? (unsigned char *)y->data : tmp;
    size_t row = (size_t)dims[1] * (size_t)dims[2];
    /* several rows a call, straight into the output: one at a time made libjpeg upsample 4:2:0
     * chroma into a spare row and copy it out (a memcpy of every row, 15% of the seeds' map) */
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW rows[16];
        JDIMENSION left = cinfo.output_height - cinfo.output_scanline, want = left < 16 ? left : 16;
        for (JDIMENSION i = 0; i < want; i++)
            rows[i] = (JSAMPROW)(img + row * (cinfo.output_scanline + i));
        if (!jpeg_read_scanlines(&cinfo, rows, want)) break; /* suspension cannot happen with a memory source */
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (to != WF_U8) wf__cpu_image_from_u8(img, y->data, to, (int64_t)px);
    wf__free(tmp);
    return NULL;
}

/* ---- DecodePng ----------------------------------------------------------------------------------- */

typedef struct png_src {
    const unsigned char *p;
    size_t n, off;
    char msg[256];
} png_src;

static void png_fail(png_structp png, png_const_charp msg)
{
    png_src *src = png_get_error_ptr(png);
    snprintf(src->msg, sizeof src->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg) {}

static void png_read(png_structp png, png_bytep out, png_size_t len)
{
    png_src *src = png_get_io_ptr(png);
    if (len > src->n - src->off) png_error(png, "the data ends early (truncated)");
    memcpy(out, src->p + src->off, len);
    src->off += len;
}

static wf_status *k_decode_png(wf__kctx *k)
{
    const unsigned char *p;
    size_t n;
    WF__TRY(string_scalar(k, 0, "contents", &p, &n));
    int want = (int)wf__attr_i(k->op, k->attrs, "channels");
    png_src src = {p, n, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_warn);
    if (!png) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "libpng could not allocate its state");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "libpng could not allocate its state");
    }
    wf_dtype to = (wf_dtype)wf__attr_i(k->op, k->attrs, "dtype");
    png_bytep *volatile rows = NULL;
    unsigned char *volatile rgb = NULL; /* RGB rows of an image converted to gray */
    unsigned char *volatile tmp = NULL; /* the 8-bit image when the output is a float dtype */
    wf_status *volatile s = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        wf__free(rows);
        wf__free(rgb);
        wf__free(tmp);
        if (s) return s;
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "not a valid PNG image (%zu bytes): libpng: %s", n, src.msg);
    }
    png_set_read_fn(png, &src, png_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, type;
    png_get_IHDR(png, info, &w, &h, &depth, &type, NULL, NULL, NULL);
    /* everything to 8-bit gray, gray+alpha, RGB or RGBA first */
    if (depth == 16) png_set_strip_16(png);
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    bool alpha = (type & PNG_COLOR_MASK_ALPHA) != 0;
    if (png_get_valid(png, info, PNG_INFO_tRNS)) {
        png_set_tRNS_to_alpha(png);
        alpha = true;
    }
    bool color = (type & PNG_COLOR_MASK_COLOR) != 0;
    /* then to the channels asked for */
    if (want == 1 || want == 3) {
        if (alpha) png_set_strip_alpha(png);
        /* RGB to gray is done below on the RGB rows: libpng's own conversion works in linear light
         * when it assumes a gamma, and differed from Pillow's convert("L") in half the pixels */
        if (want == 3 && !color) png_set_gray_to_rgb(png);
    } else if (want == 4) {
        if (!color) png_set_gray_to_rgb(png);
        if (!alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int c = png_get_channels(png, info);
    bool to_gray = want == 1 && color;
    if ((want && c != (to_gray ? 3 : want)) || png_get_rowbytes(png, info) != (size_t)w * (size_t)c) {
        snprintf(src.msg, sizeof src.msg, "unexpected layout after conversion: %d channels, %zu bytes a row", c,
                 (size_t)png_get_rowbytes(png, info));
        png_longjmp(png, 1);
    }
    int64_t dims[3] = {h, w, to_gray ? 1 : c};
    wf_tensor *y;
    wf_status *as = wf__kctx_output(k, 0, to, 3, dims, &y);
    size_t px = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
    if (!as && to != WF_U8 && !(tmp = wf__malloc(px ? px : 1))) as = wf__oom("a decoded PNG", px);
    size_t rgb_bytes = to_gray ? (size_t)h * w * 3 : 0;
    if (!as && !(rows = wf__malloc(sizeof(png_bytep) * (h ? h : 1)))) as = wf__oom("a PNG's row pointers", sizeof(png_bytep) * h);
    if (!as && to_gray && !(rgb = wf__malloc(rgb_bytes ? rgb_bytes : 1))) as = wf__oom("a PNG's RGB rows", rgb_bytes);
    if (as) {
        s = as;
        png_longjmp(png, 1);
    }
    unsigned char *img = to == WF_U8 ? (unsigned char *)y->data : tmp;
    unsigned char *dst = to_gray ? rgb : img;
    for (png_uint_32 r = 0; r < h; r++) rows[r] = (png_bytep)dst + (size_t)r * w * (size_t)c;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    if (to_gray) {
        /* ITU-R 601 luma in 16-bit fixed point, rounded: libjpeg's weights, and Pillow's convert("L") */
        uint8_t *o = img;
        for (size_t i = 0; i < (size_t)h * w; i++)
            o[i] = (uint8_t)((rgb[3 * i] * 19595u + rgb[3 * i + 1] * 38470u + rgb[3 * i + 2] * 7471u + 0x8000u) >> 16);
    }
    if (to != WF_U8) wf__cpu_image_from_u8(img, y->data, to, (int64_t)px);
    wf__free(rows);
    wf__free(rgb);
    wf__free(tmp);
    return NULL;
}

const wf__kernel_def wf__cpu_kernels_image_io[] = {
    {"ReadFile", "CPU", WF__DT_STRING, 0, k_read_file},
    {"DecodeJpeg", "CPU", WF__DT_STRING, 0, k_decode_jpeg},
    {"DecodePng", "CPU", WF__DT_STRING, 0, k_decode_png},
    {0},
};
