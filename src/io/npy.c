/*
 * .npy files (format 1.0 to 3.0): little-endian, C-order arrays of every weft dtype. bfloat16 has no
 * numpy dtype; weft reads and writes it with descr '<bf16', its own convention (numpy cannot load it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"

static const struct {
    const char *descr;
    wf_dtype dtype;
} g_descr[] = {
    {"<f4", WF_F32}, {"<f8", WF_F64}, {"<f2", WF_F16}, {"<bf16", WF_BF16}, {"|i1", WF_I8},
    {"|u1", WF_U8},  {"<i2", WF_I16}, {"<i4", WF_I32}, {"<i8", WF_I64},   {"|b1", WF_BOOL},
    {"<i1", WF_I8},  {"<u1", WF_U8},  {"<b1", WF_BOOL}, {"|i2", WF_I16},
};

static wf_status *bad(const char *path, const char *fmt, const char *detail)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, detail);
    return wf__status(WF_INVALID_ARGUMENT, "%s: %s", path, msg);
}

/* Finds 'key': in the header dict and returns a pointer just past the colon and spaces. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':') p++;
    return p;
}

static wf_status *parse_header(const char *path, const char *h, wf_dtype *dtype, int *rank, int64_t *dims)
{
    const char *d = dict_value(h, "descr");
    if (!d || (*d != '\'' && *d != '"')) return bad(path, "npy header has no 'descr'%s", "");
    char descr[32];
    size_t n = strcspn(d + 1, "'\"");
    if (n >= sizeof descr) return bad(path, "npy descr is too long%s", "");
    memcpy(descr, d + 1, n);
    descr[n] = 0;
    if (descr[0] == '>' && strcmp(descr, ">i1") && strcmp(descr, ">u1") && strcmp(descr, ">b1"))
        return bad(path, "big-endian arrays (descr '%s') are not supported; save with '<' byte order", descr);
    *dtype = WF_DTYPE_INVALID;
    for (size_t i = 0; i < sizeof g_descr / sizeof g_descr[0]; i++)
        if (!strcmp(descr, g_descr[i].descr)) *dtype = g_descr[i].dtype;
    if (descr[0] == '>' && !*dtype) *dtype = descr[1] == 'i' ? WF_I8 : descr[1] == 'u' ? WF_U8 : WF_BOOL;
    if (!*dtype) return bad(path, "npy dtype '%s' is not a weft dtype", descr);
    const char *f = dict_value(h, "fortran_order");
    if (!f) return bad(path, "npy header has no 'fortran_order'%s", "");
    if (!strncmp(f, "True", 4)) return bad(path, "Fortran-order arrays are not supported; save a C-order array%s", "");
    if (strncmp(f, "False", 5)) return bad(path, "npy 'fortran_order' is neither True nor False%s", "");
    const char *s = dict_value(h, "shape");
    if (!s || *s != '(') return bad(path, "npy header has no 'shape' tuple%s", "");
    s++;
    *rank = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || errno) return bad(path, "npy shape is malformed%s", "");
        if (*rank >= WF_MAX_RANK) return bad(path, "npy array has more than 8 dims%s", "");
        dims[(*rank)++] = v;
        s = end;
        while (*s == 'L') s++;
    }
    return NULL;
}

wf_status *wf_npy_read(const char *path, wf_tensor **out)
{
    if (!path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_npy_read: NULL path or out");
    FILE *f = fopen(path, "rb");
    if (!f) return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
    wf_status *s = NULL;
    char *header = NULL;
    wf_tensor *t = NULL;
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6)) {
        s = bad(path, "not a .npy file (%s)", got == 0 ? "empty" : "bad magic");
        goto done;
    }
    unsigned major = pre[6];
    size_t hlen;
    if (major == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            s = bad(path, "truncated npy header%s", "");
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        char v[16];
        snprintf(v, sizeof v, "%u.%u", major, pre[7]);
        s = bad(path, "npy format version %s is not supported (1.0 to 3.0 are)", v);
        goto done;
    }
    if (hlen > (1u << 24)) {
        s = bad(path, "npy header is implausibly long%s", "");
        goto done;
    }
    header = wf__malloc(hlen + 1);
    if (!header) {
        s = wf__oom(path, hlen);
        goto done;
    }
    if (fread(header, 1, hlen, f) != hlen) {
        s = bad(path, "truncated npy header%s", "");
        goto done;
    }
    header[hlen] = 0;
    wf_dtype dtype = WF_DTYPE_INVALID;
    int rank = 0;
    int64_t dims[WF_MAX_RANK];
    if ((s = parse_header(path, header, &dtype, &rank, dims))) goto done;
    if ((s = wf__tensor_alloc(dtype, rank, dims, path, &t))) {
        s = wf__status_wrap(s, "%s", path);
        goto done;
    }
    if (fread(t->data, 1, t->bytes, f) != t->bytes) {
        char sz[64];
        snprintf(sz, sizeof sz, "%zu", t->bytes);
        s = bad(path, "truncated npy data: expected %s bytes", sz);
        goto done;
    }
    if (dtype == WF_BOOL)
        for (int64_t i = 0; i < t->size; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
done:
    fclose(f);
    wf__free(header);
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    *out = t;
    return NULL;
}

wf_status *wf_npy_write(const char *path, const wf_tensor *t)
{
    if (!path || !t) return wf__status(WF_INVALID_ARGUMENT, "wf_npy_write: NULL path or tensor");
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof g_descr / sizeof g_descr[0] && !descr; i++)
        if (g_descr[i].dtype == t->dtype) descr = g_descr[i].descr;
    char dict[512], shape[256] = "";
    size_t off = 0;
    for (int i = 0; i < t->rank; i++)
        off += (size_t)snprintf(shape + off, sizeof shape - off, "%lld,%s", (long long)t->dims[i],
                                i + 1 < t->rank ? " " : "");
    if (t->rank > 1) shape[off - 1] = 0; /* numpy writes (2, 3) but (5,) */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = (size_t)n + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(t->data, 1, t->bytes, f) == t->bytes;
    ok = (fclose(f) == 0) && ok;
    return ok ? NULL : wf__status(WF_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
}
