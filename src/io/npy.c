/*
 * .npy files (format 1.0 to 3.0): little-endian, C-order arrays of every weft dtype. bfloat16 has no
 * numpy dtype; weft reads and writes it with descr '<bf16', its own convention (numpy cannot load it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "io/io.h"

static const struct {
    const char *descr;
    wf_dtype dtype;
} g_descr[] = {
    {"<f4", WF_F32}, {"<f8", WF_F64}, {"<f2", WF_F16}, {"<bf16", WF_BF16}, {"|i1", WF_I8},
    {"|u1", WF_U8},  {"<i2", WF_I16}, {"<i4", WF_I32}, {"<i8", WF_I64},   {"|b1", WF_BOOL},
    {"<i1", WF_I8},  {"<u1", WF_U8},  {"<b1", WF_BOOL}, {"|i2", WF_I16},
};

/* The header is a Python dict literal, {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
 * padded with spaces and a newline. It is parsed strictly, as untrusted input: every key once, nothing
 * else, the shape a real tuple of non-negative integers. */
typedef struct hparser {
    const char *path;
    const char *p, *start, *end;
    size_t base;   /* file offset of start, for messages */
} hparser;

static wf_status *hfail(const hparser *h, const char *what)
{
    return wf__status(WF_INVALID_ARGUMENT, "%s: npy header: %s at byte %zu", h->path, what,
                      h->base + (size_t)(h->p - h->start));
}

static void hspace(hparser *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool hpeek(const hparser *h, char c) { return h->p < h->end && *h->p == c; }

/* A quoted string without escapes (numpy writes none): sets *s and *n to its contents. */
static wf_status *hstring(hparser *h, const char **s, size_t *n)
{
    if (!hpeek(h, '\'') && !hpeek(h, '"')) return hfail(h, "expected a quoted string");
    char q = *h->p++;
    const char *b = h->p;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || *h->p == '\n' || *h->p == 0) return hfail(h, "unsupported character in a string");
        h->p++;
    }
    if (h->p >= h->end) return hfail(h, "unterminated string");
    *s = b;
    *n = (size_t)(h->p - b);
    h->p++;
    return NULL;
}

static bool hword(hparser *h, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, w, n)) return false;
    const char *after = h->p + n;
    if (after < h->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                           (*after >= '0' && *after <= '9') || *after == '_'))
        return false;
    h->p = after;
    return true;
}

static wf_status *hshape(hparser *h, int *rank, int64_t *dims)
{
    if (!hpeek(h, '(')) return hfail(h, "'shape' is not a tuple");
    h->p++;
    hspace(h);
    *rank = 0;
    if (hpeek(h, ')')) {
        h->p++;
        return NULL;
    }
    for (;;) {
        if (hpeek(h, '-')) return hfail(h, "negative dim in 'shape'");
        if (!(h->p < h->end && *h->p >= '0' && *h->p <= '9')) return hfail(h, "malformed 'shape': expected a dim");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9')
            if (wf__mul_overflow_i64(v, 10, &v) || wf__add_overflow_i64(v, *h->p++ - '0', &v))
                return hfail(h, "dim in 'shape' is too large");
        if (hpeek(h, 'L')) h->p++; /* Python 2 long literals, in files numpy wrote long ago */
        if (*rank >= WF_MAX_RANK) return hfail(h, "'shape' has more than 8 dims (weft's limit)");
        dims[(*rank)++] = (int64_t)v;
        hspace(h);
        if (hpeek(h, ',')) {
            h->p++;
            hspace(h);
            if (hpeek(h, ')')) break;
            continue;
        }
        if (hpeek(h, ')')) {
            if (*rank == 1) return hfail(h, "'shape' (N) is a number, not a tuple: write (N,)");
            break;
        }
        return hfail(h, "malformed 'shape': expected ',' or ')'");
    }
    h->p++;
    return NULL;
}

static wf_status *parse_header(hparser *h, wf_dtype *dtype, char *descr, int *rank, int64_t *dims)
{
    bool seen[3] = {false, false, false};
    char q[64];
    hspace(h);
    if (!hpeek(h, '{')) return hfail(h, "expected '{'");
    h->p++;
    for (;;) {
        hspace(h);
        if (hpeek(h, '}')) break;
        const char *k;
        size_t kn;
        WF__TRY(hstring(h, &k, &kn));
        int key = kn == 5 && !memcmp(k, "descr", 5) ? 0 : kn == 13 && !memcmp(k, "fortran_order", 13) ? 1
                : kn == 5 && !memcmp(k, "shape", 5) ? 2 : -1;
        if (key < 0) {
            char msg[128];
            snprintf(msg, sizeof msg, "unknown key '%s'", wf__io_quote(k, kn, q, sizeof q));
            return hfail(h, msg);
        }
        if (seen[key]) return hfail(h, "a key appears twice");
        seen[key] = true;
        hspace(h);
        if (!hpeek(h, ':')) return hfail(h, "expected ':'");
        h->p++;
        hspace(h);
        if (key == 0) {
            if (hpeek(h, '[')) return hfail(h, "structured dtypes are not supported");
            const char *d;
            size_t dn;
            WF__TRY(hstring(h, &d, &dn));
            wf__io_quote(d, dn, descr, 32);
            *dtype = WF_DTYPE_INVALID;
            for (size_t i = 0; i < sizeof g_descr / sizeof g_descr[0]; i++)
                if (strlen(g_descr[i].descr) == dn && !memcmp(d, g_descr[i].descr, dn)) *dtype = g_descr[i].dtype;
            /* one-byte types have no byte order */
            if (dn == 3 && d[0] == '>' && d[2] == '1' && (d[1] == 'i' || d[1] == 'u' || d[1] == 'b'))
                *dtype = d[1] == 'i' ? WF_I8 : d[1] == 'u' ? WF_U8 : WF_BOOL;
            if (!*dtype && dn && d[0] == '>')
                return wf__status(WF_INVALID_ARGUMENT, "%s: big-endian arrays (descr '%s') are not supported; save "
                                  "with '<' byte order", h->path, descr);
            if (!*dtype) return wf__status(WF_INVALID_ARGUMENT, "%s: npy dtype '%s' is not a weft dtype", h->path, descr);
        } else if (key == 1) {
            if (hword(h, "True"))
                return wf__status(WF_INVALID_ARGUMENT, "%s: Fortran-order arrays are not supported; save a C-order "
                                  "array", h->path);
            if (!hword(h, "False")) return hfail(h, "'fortran_order' is neither True nor False");
        } else {
            WF__TRY(hshape(h, rank, dims));
        }
        hspace(h);
        if (hpeek(h, ',')) {
            h->p++;
            continue;
        }
        if (hpeek(h, '}')) break;
        return hfail(h, "expected ',' or '}'");
    }
    h->p++;
    hspace(h);
    if (h->p != h->end) return hfail(h, "unexpected text after the header dict");
    static const char *const names[3] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; i++)
        if (!seen[i]) return wf__status(WF_INVALID_ARGUMENT, "%s: npy header has no '%s'", h->path, names[i]);
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
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        s = wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* Sizes are checked against the file's length, which only a regular file has. */
    if (!S_ISREG(st.st_mode)) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: not a regular file", path);
        goto done;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    size_t got = fread(pre, 1, 10, f);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6)) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: not a .npy file (%s)", path,
                       got == 0 ? "empty" : got < 10 ? "shorter than the 10-byte preamble" : "bad magic");
        goto done;
    }
    unsigned major = pre[6], minor = pre[7];
    size_t hlen, pre_len = 10;
    if (minor != 0 || major < 1 || major > 3) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: npy format version %u.%u is not supported (1.0, 2.0 and 3.0 are)",
                       path, major, minor);
        goto done;
    }
    if (major == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else {
        pre_len = 12;
        if (fread(pre + 10, 1, 2, f) != 2) {
            s = wf__status(WF_INVALID_ARGUMENT, "%s: truncated npy header: the file ends inside the preamble", path);
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > fsize - pre_len) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: npy header length %zu runs past the end of the file (%llu bytes)",
                       path, hlen, (unsigned long long)fsize);
        goto done;
    }
    if (hlen > (1u << 24)) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: npy header length %zu is implausibly long", path, hlen);
        goto done;
    }
    header = wf__malloc(hlen + 1);
    if (!header) {
        s = wf__oom(path, hlen + 1);
        goto done;
    }
    if (fread(header, 1, hlen, f) != hlen) {
        s = wf__status(WF_IO_ERROR, "%s: reading the npy header failed", path);
        goto done;
    }
    header[hlen] = 0;
    wf_dtype dtype = WF_DTYPE_INVALID;
    int rank = 0;
    int64_t dims[WF_MAX_RANK];
    char descr[32] = "";
    hparser hp = {path, header, header, header + hlen, pre_len};
    if ((s = parse_header(&hp, &dtype, descr, &rank, dims))) goto done;
    /* What the header claims, against what the file holds, before allocating anything of that size. */
    uint64_t have = fsize - pre_len - hlen;
    int64_t nbytes;
    char shape[160];
    wf__shape_str(rank, dims, shape);
    if (!wf__shape_bytes_checked(rank, dims, wf_dtype_size(dtype), NULL, &nbytes)) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: npy shape %s of '%s' is too large (2^62 bytes or more)", path, shape,
                       descr);
        goto done;
    }
    uint64_t bytes = (uint64_t)nbytes;
    if (bytes > have) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: truncated npy data: shape %s of '%s' needs %llu bytes but %llu "
                       "follow the header", path, shape, descr, (unsigned long long)bytes, (unsigned long long)have);
        goto done;
    }
    if (bytes < have) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: %llu bytes after the data (shape %s of '%s' is %llu bytes)", path,
                       (unsigned long long)(have - bytes), shape, descr, (unsigned long long)bytes);
        goto done;
    }
    if ((s = wf__io_check_memory(path, "the array", bytes))) goto done;
    if ((s = wf__tensor_alloc(dtype, rank, dims, path, &t))) goto done;
    if (fread(t->data, 1, t->bytes, f) != t->bytes) {
        s = wf__status(WF_IO_ERROR, "%s: reading %zu bytes of npy data failed", path, t->bytes);
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
    if (!descr)
        return wf__status(WF_INVALID_ARGUMENT, "%s: a %s tensor cannot be written as .npy (weft's strings are records "
                          "and a payload, not a numpy dtype)", path, wf_dtype_name(t->dtype));
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
