/*
 * Checkpoints in the safetensors format: an 8-byte little-endian header size, a JSON header giving each
 * tensor's dtype, shape and [begin, end) byte range in the data section (plus an optional "__metadata__"
 * map of strings), then the raw little-endian data. Written atomically; read as untrusted input, as
 * strictly as the reference package reads it: the header is UTF-8, and the tensors tile the data
 * section exactly, with no gaps, overlaps or bytes after the last one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

/* Headers beyond this are refused before anything is allocated (the reference reader's limit too). */
#define ST_MAX_HEADER (100u << 20)
#define JSON_MAX_DEPTH 64

static const struct {
    const char *name;
    wf_dtype dtype;
} g_st_dtypes[] = {
    {"F64", WF_F64}, {"F32", WF_F32}, {"F16", WF_F16}, {"BF16", WF_BF16}, {"I64", WF_I64},
    {"I32", WF_I32}, {"I16", WF_I16}, {"I8", WF_I8},   {"U8", WF_U8},     {"BOOL", WF_BOOL},
};

static const char *st_dtype_name(wf_dtype t)
{
    for (size_t i = 0; i < sizeof g_st_dtypes / sizeof g_st_dtypes[0]; i++)
        if (g_st_dtypes[i].dtype == t) return g_st_dtypes[i].name;
    return NULL;
}

/* ---- a small JSON reader: enough for a header, strict about the grammar ------------------------ */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    char *str;          /* J_STR: decoded UTF-8; J_NUM: the number's text */
    int n;              /* J_ARR, J_OBJ: items */
    struct jval *items;
    char **keys;        /* J_OBJ */
} jval;

typedef struct jparser {
    const char *p, *end, *start;
    int depth;
    char err[128];
    bool oom;
} jparser;

static void jfree(jval *v)
{
    if (!v) return;
    wf__free(v->str);
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) wf__free(v->keys[i]);
    }
    wf__free(v->items);
    wf__free(v->keys);
    memset(v, 0, sizeof *v);
}

static bool jfail(jparser *js, const char *what)
{
    if (!js->err[0]) snprintf(js->err, sizeof js->err, "%s at byte %td", what, js->p - js->start);
    return false;
}

static void jspace(jparser *js)
{
    while (js->p < js->end && (*js->p == ' ' || *js->p == '\t' || *js->p == '\n' || *js->p == '\r')) js->p++;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static bool jstring(jparser *js, char **out)
{
    js->p++; /* opening quote */
    /* decoded text is never longer than the source */
    const char *q = js->p;
    while (q < js->end && *q != '"') q += (*q == '\\' && q + 1 < js->end) ? 2 : 1;
    if (q >= js->end) return jfail(js, "unterminated string");
    char *s = wf__malloc((size_t)(q - js->p) + 1), *d = s;
    if (!s) {
        js->oom = true;
        return jfail(js, "out of memory");
    }
    while (*js->p != '"') {
        unsigned char c = (unsigned char)*js->p++;
        if (c < 0x20) {
            wf__free(s);
            return jfail(js, "control character in a string");
        }
        if (c != '\\') {
            *d++ = (char)c;
            continue;
        }
        char e = *js->p++;
        switch (e) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '/': *d++ = '/'; break;
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            long cp = js->end - js->p >= 4 ? hex4(js->p) : -1;
            if (cp < 0) goto bad_escape;
            js->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair encodes one code point */
                long lo = js->end - js->p >= 6 && js->p[0] == '\\' && js->p[1] == 'u' ? hex4(js->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) goto bad_escape;
                js->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if ((cp >= 0xDC00 && cp <= 0xDFFF) || cp == 0) {
                goto bad_escape; /* a lone low surrogate, or a NUL a C string cannot hold */
            }
            /* UTF-8 of cp is at most 4 bytes; the escape took 6 or 12, so it fits */
            if (cp < 0x80) *d++ = (char)cp;
            else if (cp < 0x800) { *d++ = (char)(0xC0 | cp >> 6); *d++ = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                *d++ = (char)(0xE0 | cp >> 12); *d++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *d++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *d++ = (char)(0xF0 | cp >> 18); *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *d++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *d++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
        bad_escape:
            wf__free(s);
            return jfail(js, "bad escape in a string");
        }
    }
    js->p++;
    *d = 0;
    *out = s;
    return true;
}

static bool jvalue(jparser *js, jval *v);

static bool jpush(jparser *js, jval *v, int *cap, char *key)
{
    if (v->n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        jval *items = wf__realloc(v->items, (size_t)*cap * sizeof *items, (size_t)nc * sizeof *items);
        if (!items) goto oom;
        v->items = items;
        if (v->type == J_OBJ) {
            char **keys = wf__realloc(v->keys, (size_t)*cap * sizeof *keys, (size_t)nc * sizeof *keys);
            if (!keys) goto oom;
            v->keys = keys;
        }
        *cap = nc;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (v->type == J_OBJ) v->keys[v->n] = key;
    v->n++;
    if (!jvalue(js, &v->items[v->n - 1])) return false;
    return true;
oom:
    wf__free(key);
    js->oom = true;
    return jfail(js, "out of memory");
}

static bool jvalue(jparser *js, jval *v)
{
    jspace(js);
    if (js->p >= js->end) return jfail(js, "unexpected end");
    char c = *js->p;
    if (c == '{' || c == '[') {
        if (++js->depth > JSON_MAX_DEPTH) return jfail(js, "nesting too deep");
        v->type = c == '{' ? J_OBJ : J_ARR;
        char close = c == '{' ? '}' : ']';
        int cap = 0;
        js->p++;
        jspace(js);
        if (js->p < js->end && *js->p == close) {
            js->p++;
            js->depth--;
            return true;
        }
        for (;;) {
            char *key = NULL;
            if (v->type == J_OBJ) {
                jspace(js);
                if (js->p >= js->end || *js->p != '"') return jfail(js, "expected a string key");
                if (!jstring(js, &key)) return false;
                jspace(js);
                if (js->p >= js->end || *js->p != ':') {
                    wf__free(key);
                    return jfail(js, "expected ':'");
                }
                js->p++;
            }
            if (!jpush(js, v, &cap, key)) return false;
            jspace(js);
            if (js->p < js->end && *js->p == ',') {
                js->p++;
                continue;
            }
            if (js->p < js->end && *js->p == close) {
                js->p++;
                js->depth--;
                return true;
            }
            return jfail(js, v->type == J_OBJ ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '"') {
        v->type = J_STR;
        return jstring(js, &v->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *s = js->p;
        if (*js->p == '-') js->p++;
        if (js->p >= js->end || *js->p < '0' || *js->p > '9') return jfail(js, "bad number");
        if (*js->p == '0' && js->p + 1 < js->end && js->p[1] >= '0' && js->p[1] <= '9')
            return jfail(js, "leading zero in a number");
        /* -?int(.digits)?([eE][+-]?digits)? */
        while (js->p < js->end && *js->p >= '0' && *js->p <= '9') js->p++;
        if (js->p < js->end && *js->p == '.') {
            js->p++;
            if (js->p >= js->end || *js->p < '0' || *js->p > '9') return jfail(js, "bad number");
            while (js->p < js->end && *js->p >= '0' && *js->p <= '9') js->p++;
        }
        if (js->p < js->end && (*js->p == 'e' || *js->p == 'E')) {
            js->p++;
            if (js->p < js->end && (*js->p == '+' || *js->p == '-')) js->p++;
            if (js->p >= js->end || *js->p < '0' || *js->p > '9') return jfail(js, "bad number");
            while (js->p < js->end && *js->p >= '0' && *js->p <= '9') js->p++;
        }
        v->type = J_NUM;
        v->str = wf__strndup(s, (size_t)(js->p - s));
        if (!v->str) {
            js->oom = true;
            return jfail(js, "out of memory");
        }
        return true;
    }
    static const struct { const char *word; jtype t; } words[] = {{"true", J_BOOL}, {"false", J_BOOL}, {"null", J_NULL}};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(words[i].word);
        if ((size_t)(js->end - js->p) >= l && !memcmp(js->p, words[i].word, l)) {
            js->p += l;
            v->type = words[i].t;
            return true;
        }
    }
    return jfail(js, "unexpected character");
}

/* Offset of the first byte of text[0..n) that is not part of well-formed UTF-8 (RFC 3629: no overlong
 * forms, surrogates or code points past U+10FFFF), or n. */
static size_t utf8_invalid_at(const unsigned char *t, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = t[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || len > n - i) return i;
        unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (size_t k = 1; k < len; k++) {
            if ((t[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (t[i + k] & 0x3F);
        }
        static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return n;
}

/* Parses the whole of text[0..n) as one JSON value; trailing spaces are allowed (the header's padding). */
static wf_status *jparse(const char *path, const char *what, const char *text, size_t n, jval *out)
{
    jparser js = {text, text + n, text, 0, "", false};
    memset(out, 0, sizeof *out);
    size_t bad = utf8_invalid_at((const unsigned char *)text, n);
    if (bad < n) return wf__status(WF_INVALID_ARGUMENT, "%s: %s is not valid UTF-8 at byte %zu", path, what, bad);
    bool ok = jvalue(&js, out);
    if (ok) {
        jspace(&js);
        if (js.p != js.end) ok = jfail(&js, "trailing characters");
    }
    if (ok) return NULL;
    jfree(out);
    if (js.oom) return wf__oom(path, n);
    return wf__status(WF_INVALID_ARGUMENT, "%s: %s is not valid JSON: %s", path, what, js.err);
}

static const jval *jget(const jval *obj, const char *key)
{
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

/* A JSON integer in [0, 2^63). */
static bool jint(const jval *v, int64_t *out)
{
    if (v->type != J_NUM || v->str[0] == '-' || strpbrk(v->str, ".eE+")) return false;
    errno = 0;
    char *end;
    long long x = strtoll(v->str, &end, 10);
    if (errno || *end) return false;
    *out = x;
    return true;
}

static void json_escape(wf__str *s, const char *text)
{
    wf__str_append(s, "\"");
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') wf__str_appendf(s, "\\%c", *c);
        else if (*c < 0x20) wf__str_appendf(s, "\\u%04x", *c);
        else wf__str_appendf(s, "%c", *c);
    }
    wf__str_append(s, "\"");
}

/* ---- writing -------------------------------------------------------------------------------------- */

static wf_status *check_metadata(const char *path, const jval *m)
{
    if (m->type != J_OBJ) return wf__status(WF_INVALID_ARGUMENT, "%s: __metadata__ must be a JSON object", path);
    for (int i = 0; i < m->n; i++)
        if (m->items[i].type != J_STR)
            return wf__status(WF_INVALID_ARGUMENT, "%s: __metadata__ value of '%s' must be a string", path, m->keys[i]);
    return NULL;
}

static wf_status *build_header(const char *path, int n, const char *const *names, wf_tensor *const *tensors,
                               const char *metadata_json, wf__str *h)
{
    wf__str_append(h, "{");
    if (metadata_json) {
        jval m;
        WF__TRY(jparse(path, "the metadata", metadata_json, strlen(metadata_json), &m));
        wf_status *s = check_metadata(path, &m);
        if (s) {
            jfree(&m);
            return s;
        }
        wf__str_append(h, "\"__metadata__\":{");
        for (int i = 0; i < m.n; i++) {
            if (i) wf__str_append(h, ",");
            json_escape(h, m.keys[i]);
            wf__str_append(h, ":");
            json_escape(h, m.items[i].str);
        }
        wf__str_append(h, "}");
        jfree(&m);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const wf_tensor *t = tensors[i];
        if (metadata_json || i) wf__str_append(h, ",");
        json_escape(h, names[i]);
        wf__str_appendf(h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->rank; d++) wf__str_appendf(h, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        wf__str_appendf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                        (unsigned long long)(off + t->bytes));
        off += t->bytes;
    }
    wf__str_append(h, "}");
    /* The data section starts 8-aligned, as the reference writer pads it, so readers can map it. */
    static const char spaces[] = "       "; /* 7: the most padding needed */
    size_t pad = (8 - h->len % 8) % 8;
    if (!h->failed) wf__str_append(h, spaces + 7 - pad);
    if (h->failed) return wf__oom(path, h->len);
    return NULL;
}

wf_status *wf_safetensors_write(const char *path, int n, const char *const *names, wf_tensor *const *tensors,
                                const char *metadata_json)
{
    if (!path || n < 0 || (n && (!names || !tensors)))
        return wf__status(WF_INVALID_ARGUMENT, "wf_safetensors_write: NULL path, names or tensors");
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i])
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensor %d has a NULL name or tensor", path, i);
        if (!strcmp(names[i], "__metadata__"))
            return wf__status(WF_INVALID_ARGUMENT, "%s: '__metadata__' is reserved and cannot name a tensor", path);
        if (!st_dtype_name(tensors[i]->dtype))
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' has dtype %s, which safetensors cannot hold",
                              path, names[i], wf_dtype_name(tensors[i]->dtype));
        if (!tensors[i]->data)
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' is not in host memory", path, names[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return wf__status(WF_INVALID_ARGUMENT, "%s: tensor name '%s' appears twice", path, names[i]);
    }
    wf__str h = {0}, tmp = {0};
    wf_status *s = build_header(path, n, names, tensors, metadata_json, &h);
    if (s) goto done;
    wf__str_appendf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.failed) {
        s = wf__oom(path, tmp.len);
        goto done;
    }
    FILE *f = fopen(tmp.p, "wb");
    if (!f) {
        s = wf__status(WF_IO_ERROR, "%s: cannot create %s: %s", path, tmp.p, strerror(errno));
        goto done;
    }
    unsigned char size[8];
    for (int i = 0; i < 8; i++) size[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    bool ok = fwrite(size, 1, 8, f) == 8 && fwrite(h.p, 1, h.len, f) == h.len;
    for (int i = 0; ok && i < n; i++) ok = fwrite(tensors[i]->data, 1, tensors[i]->bytes, f) == tensors[i]->bytes;
    s = wf__io_commit(f, ok, tmp.p, path);
done:
    wf__str_free(&h);
    wf__str_free(&tmp);
    return s;
}

/* ---- reading -------------------------------------------------------------------------------------- */

typedef struct st_entry {
    const char *name;   /* owned by the parsed header */
    wf_dtype dtype;
    int rank;
    int64_t dims[WF_MAX_RANK];
    uint64_t begin, end;
} st_entry;

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b) { return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name); }

/* Opens path and parses its header. *data_size is the size of the data section. */
static wf_status *read_header(const char *path, FILE **fp, jval *hdr, uint64_t *data_start, uint64_t *data_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
    struct stat st;
    wf_status *s = NULL;
    char *text = NULL;
    unsigned char b[8];
    if (fstat(fileno(f), &st) != 0) {
        s = wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    if (fsize < 8 || fread(b, 1, 8, f) != 8) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: not a safetensors file: %llu bytes, shorter than the 8-byte header size",
                       path, (unsigned long long)fsize);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)b[i] << (8 * i);
    if (hlen > fsize - 8) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: header size %llu is larger than the file (%llu bytes): truncated or "
                       "not a safetensors file", path, (unsigned long long)hlen, (unsigned long long)fsize);
        goto fail;
    }
    if (hlen > ST_MAX_HEADER) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: header size %llu is over the %u-byte limit", path,
                       (unsigned long long)hlen, ST_MAX_HEADER);
        goto fail;
    }
    text = wf__malloc(hlen + 1);
    if (!text) {
        s = wf__oom(path, hlen + 1);
        goto fail;
    }
    if (fread(text, 1, hlen, f) != hlen) {
        s = wf__status(WF_IO_ERROR, "%s: reading the header failed", path);
        goto fail;
    }
    if ((s = jparse(path, "the header", text, hlen, hdr))) goto fail;
    if (hdr->type != J_OBJ) {
        jfree(hdr);
        s = wf__status(WF_INVALID_ARGUMENT, "%s: the header is not a JSON object", path);
        goto fail;
    }
    wf__free(text);
    *fp = f;
    *data_start = 8 + hlen;
    *data_size = fsize - 8 - hlen;
    return NULL;
fail:
    wf__free(text);
    fclose(f);
    return s;
}

static wf_status *parse_entry(const char *path, const char *name, const jval *v, uint64_t data_size, st_entry *e)
{
    if (v->type != J_OBJ) return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': entry is not a JSON object", path, name);
    const jval *dt = jget(v, "dtype"), *sh = jget(v, "shape"), *off = jget(v, "data_offsets");
    if (!dt || dt->type != J_STR)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' has no \"dtype\" string", path, name);
    e->name = name;
    e->dtype = WF_DTYPE_INVALID;
    for (size_t i = 0; i < sizeof g_st_dtypes / sizeof g_st_dtypes[0]; i++)
        if (!strcmp(dt->str, g_st_dtypes[i].name)) e->dtype = g_st_dtypes[i].dtype;
    if (!e->dtype)
        return wf__status(WF_UNIMPLEMENTED, "%s: tensor '%s' has dtype '%s', which weft does not support (F64 F32 F16 "
                          "BF16 I64 I32 I16 I8 U8 BOOL)", path, name, dt->str);
    if (!sh || sh->type != J_ARR)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' has no \"shape\" array", path, name);
    if (sh->n > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' has rank %d; weft supports up to %d", path, name,
                          sh->n, WF_MAX_RANK);
    e->rank = sh->n;
    for (int i = 0; i < sh->n; i++)
        if (!jint(&sh->items[i], &e->dims[i]))
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': shape entry %d is not a non-negative integer",
                              path, name, i);
    int64_t need = 0;
    bool overflow = !wf__shape_bytes_checked(sh->n, e->dims, wf_dtype_size(e->dtype), NULL, &need);
    int64_t b, en;
    if (!off || off->type != J_ARR || off->n != 2 || !jint(&off->items[0], &b) || !jint(&off->items[1], &en))
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' has no \"data_offsets\" pair of non-negative integers",
                          path, name);
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    char shape[160];
    if (e->begin > e->end)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': data_offsets [%llu, %llu) end before they begin", path,
                          name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (overflow)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': %s %s is too large (2^62 bytes or more)", path, name,
                          dt->str, wf__shape_str(e->rank, e->dims, shape));
    if ((uint64_t)need != e->end - e->begin)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': %s %s needs %llu bytes but data_offsets [%llu, %llu) "
                          "hold %llu", path, name, dt->str, wf__shape_str(e->rank, e->dims, shape),
                          (unsigned long long)need,
                          (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)(e->end - e->begin));
    if (e->end > data_size)
        return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s': data_offsets [%llu, %llu) run past the end of the data "
                          "(%llu bytes): the file is truncated or the offsets are out of range", path, name,
                          (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_size);
    return NULL;
}

static wf_status *parse_entries(const char *path, const jval *hdr, uint64_t data_size, st_entry *ents, int *n)
{
    *n = 0;
    bool metadata = false;
    for (int i = 0; i < hdr->n; i++) {
        const char *name = hdr->keys[i];
        if (!strcmp(name, "__metadata__")) {
            if (metadata) return wf__status(WF_INVALID_ARGUMENT, "%s: '__metadata__' appears twice in the header", path);
            metadata = true;
            WF__TRY(check_metadata(path, &hdr->items[i]));
            continue;
        }
        WF__TRY(parse_entry(path, name, &hdr->items[i], data_size, &ents[*n]));
        (*n)++;
    }
    /* sorted, so that a header of a million names is not checked pair by pair */
    qsort(ents, (size_t)*n, sizeof *ents, by_name);
    for (int i = 1; i < *n; i++)
        if (!strcmp(ents[i - 1].name, ents[i].name))
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' appears twice in the header", path, ents[i].name);
    qsort(ents, (size_t)*n, sizeof *ents, by_begin);
    uint64_t pos = 0;
    const st_entry *prev = NULL;
    for (int i = 0; i < *n; i++) {
        const st_entry *e = &ents[i];
        if (e->begin < pos)
            return wf__status(WF_INVALID_ARGUMENT, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", path,
                              prev->name, (unsigned long long)prev->begin, (unsigned long long)prev->end,
                              e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->begin > pos) {
            if (!prev)
                return wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' starts at data offset %llu: the %llu bytes "
                                  "before it belong to no tensor", path, e->name, (unsigned long long)e->begin,
                                  (unsigned long long)e->begin);
            return wf__status(WF_INVALID_ARGUMENT, "%s: a gap of %llu bytes between tensors '%s' [%llu, %llu) and "
                              "'%s' [%llu, %llu)", path, (unsigned long long)(e->begin - pos), prev->name,
                              (unsigned long long)prev->begin, (unsigned long long)prev->end, e->name,
                              (unsigned long long)e->begin, (unsigned long long)e->end);
        }
        pos = e->end;
        if (e->end > e->begin || !prev) prev = e;
    }
    if (pos < data_size) {
        if (prev)
            return wf__status(WF_INVALID_ARGUMENT, "%s: %llu bytes after the data (the last tensor, '%s', ends at data "
                              "offset %llu)", path, (unsigned long long)(data_size - pos), prev->name,
                              (unsigned long long)pos);
        return wf__status(WF_INVALID_ARGUMENT, "%s: %llu bytes after the header, which lists no tensors", path,
                          (unsigned long long)data_size);
    }
    /* The file really holds this much (it may be sparse): refuse it here rather than be OOM-killed. */
    return wf__io_check_memory(path, "its tensors' data", data_size);
}

void wf_safetensors_free(int n, char **names, wf_tensor **tensors)
{
    for (int i = 0; i < n; i++) {
        if (names) wf__free(names[i]);
        if (tensors) wf_tensor_free(tensors[i]);
    }
    wf__free(names);
    wf__free(tensors);
}

wf_status *wf_safetensors_read(const char *path, int *n_out, char ***names_out, wf_tensor ***tensors_out)
{
    if (!path || !n_out || !names_out || !tensors_out)
        return wf__status(WF_INVALID_ARGUMENT, "wf_safetensors_read: NULL argument");
    FILE *f;
    jval hdr;
    uint64_t data_start, data_size;
    WF__TRY(read_header(path, &f, &hdr, &data_start, &data_size));
    wf_status *s = NULL;
    int n = 0, done = 0;
    char **names = NULL;
    wf_tensor **tensors = NULL;
    st_entry *ents = wf__calloc((size_t)(hdr.n ? hdr.n : 1), sizeof *ents);
    if (!ents) {
        s = wf__oom(path, (size_t)hdr.n * sizeof *ents);
        goto done;
    }
    if ((s = parse_entries(path, &hdr, data_size, ents, &n))) goto done;
    names = wf__calloc((size_t)(n ? n : 1), sizeof *names);
    tensors = wf__calloc((size_t)(n ? n : 1), sizeof *tensors);
    if (!names || !tensors) {
        s = wf__oom(path, (size_t)n * (sizeof *names + sizeof *tensors));
        goto done;
    }
    for (; done < n; done++) {
        const st_entry *e = &ents[done];
        if (!(names[done] = wf__strdup(e->name))) {
            s = wf__oom(path, strlen(e->name) + 1);
            goto done;
        }
        if ((s = wf__tensor_alloc(e->dtype, e->rank, e->dims, path, &tensors[done]))) {
            s = wf__status_wrap(s, "%s: tensor '%s'", path, e->name);
            goto done;
        }
        wf_tensor *t = tensors[done];
        if (t->bytes && (fseeko(f, (off_t)(data_start + e->begin), SEEK_SET) != 0 ||
                         fread(t->data, 1, t->bytes, f) != t->bytes)) {
            s = wf__status(WF_IO_ERROR, "%s: tensor '%s': reading %zu bytes failed", path, e->name, t->bytes);
            goto done;
        }
        if (e->dtype == WF_BOOL)
            for (int64_t k = 0; k < t->size; k++) ((uint8_t *)t->data)[k] = ((uint8_t *)t->data)[k] != 0;
    }
done:
    fclose(f);
    wf__free(ents);
    jfree(&hdr);
    if (s) {
        wf_safetensors_free(n, names, tensors);
        return s;
    }
    *n_out = n;
    *names_out = names;
    *tensors_out = tensors;
    return NULL;
}

wf_status *wf_safetensors_metadata(const char *path, char **json)
{
    if (!path || !json) return wf__status(WF_INVALID_ARGUMENT, "wf_safetensors_metadata: NULL argument");
    FILE *f;
    jval hdr;
    uint64_t data_start, data_size;
    WF__TRY(read_header(path, &f, &hdr, &data_start, &data_size));
    fclose(f);
    const jval *m = jget(&hdr, "__metadata__");
    wf_status *s = m ? check_metadata(path, m) : NULL;
    wf__str out = {0};
    if (!s && m) {
        wf__str_append(&out, "{");
        for (int i = 0; i < m->n; i++) {
            if (i) wf__str_append(&out, ",");
            json_escape(&out, m->keys[i]);
            wf__str_append(&out, ":");
            json_escape(&out, m->items[i].str);
        }
        wf__str_append(&out, "}");
        if (out.failed) s = wf__oom(path, out.len);
    }
    jfree(&hdr);
    if (s) {
        wf__str_free(&out);
        return s;
    }
    *json = out.p;
    return NULL;
}
