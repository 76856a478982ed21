/*
 * CSV files (RFC 4180) for the pipelines' CSV source: rows split into fields on the buffered window of
 * linebuf.h, quoted fields unescaped, and the columns read converted to their types, with defaults for
 * empty fields. Numbers are parsed in the C locale, whatever the application's LC_NUMERIC says.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/io.h"
#include "io/linebuf.h"

typedef struct span {
    size_t start, len; /* from the row's first byte; a quoted field's bytes without its quotes */
    bool quoted;
} span;

struct wf__csv_reader {
    wf__linebuf b;
    char delim;
    size_t max_row;
    int n_cols;             /* columns read */
    int n_file;             /* fields in each row */
    wf__csv_column *cols;   /* n_cols, default_s owned */
    int *file_col;          /* n_cols: the file column of each column read */
    char **header;          /* n_header names, owned */
    int n_header;
    int64_t header_end;     /* byte offset after the header row; 0 without one */
    span *spans;
    size_t spans_cap;
    char *scratch;
    size_t scratch_cap;
    wf__csv_field *fields;  /* n_cols */
    /* the row just scanned */
    size_t row;             /* index in the window of its first byte */
    int64_t row_off, row_line;
    int n_fields;
};

/* ---- numbers ------------------------------------------------------------------------------------------ */

static locale_t g_c_locale;
static pthread_once_t g_c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void) { g_c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* s is NUL-terminated. Spaces and tabs around the number are allowed; hexadecimal is not (Python's
 * float() and TensorFlow's parser refuse it too); overflow is an error, underflow rounds. */
static bool parse_float(const char *s, wf_dtype t, double *d, float *f)
{
    while (is_space(*s)) s++;
    if (!*s || is_space(*s) || strpbrk(s, "xX")) return false;
    pthread_once(&g_c_locale_once, make_c_locale);
    locale_t old = g_c_locale ? uselocale(g_c_locale) : (locale_t)0;
    char *e;
    errno = 0;
    if (t == WF_F32) *f = strtof(s, &e);
    else *d = strtod(s, &e);
    int err = errno;
    if (g_c_locale) uselocale(old);
    if (e == s) return false;
    while (is_space(*e)) e++;
    if (*e) return false;
    if (err == ERANGE && (t == WF_F32 ? isinf(*f) : isinf(*d))) return false;
    return true;
}

static bool parse_int(const char *s, wf_dtype t, int64_t *v)
{
    while (is_space(*s)) s++;
    const char *d = s + (*s == '+' || *s == '-');
    if (*d < '0' || *d > '9') return false;
    char *e;
    errno = 0;
    long long x = strtoll(s, &e, 10);
    if (errno == ERANGE) return false;
    while (is_space(*e)) e++;
    if (*e) return false;
    if (t == WF_I32 && (x < INT32_MIN || x > INT32_MAX)) return false;
    *v = x;
    return true;
}

/* ---- rows ---------------------------------------------------------------------------------------------- */

static const char *col_label(const wf__csv_reader *r, int fc, char *buf, size_t cap)
{
    if (fc < r->n_header) {
        char q[72];
        snprintf(buf, cap, "column %d ('%s')", fc + 1, wf__io_quote(r->header[fc], strlen(r->header[fc]), q, sizeof q));
    } else {
        snprintf(buf, cap, "column %d", fc + 1);
    }
    return buf;
}

static wf_status *row_error(const wf__csv_reader *r, const char *fmt, ...) WF__PRINTF(2, 3);
static wf_status *row_error(const wf__csv_reader *r, const char *fmt, ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return wf__status(WF_INVALID_ARGUMENT, "%s: line %lld: %s", r->b.path, (long long)r->row_line, detail);
}

static wf_status *add_span(wf__csv_reader *r, int i, size_t start, size_t len, bool quoted)
{
    if ((size_t)i >= r->spans_cap) {
        size_t cap = r->spans_cap ? r->spans_cap * 2 : 16;
        span *s = wf__realloc(r->spans, r->spans_cap * sizeof *s, cap * sizeof *s);
        if (!s) return wf__oom(r->b.path, cap * sizeof *s);
        r->spans = s;
        r->spans_cap = cap;
    }
    r->spans[i] = (span){start, len, quoted};
    return NULL;
}

static int64_t count_nl(const char *p, size_t n)
{
    int64_t k = 0;
    const char *e = p + n;
    while ((p = memchr(p, '\n', (size_t)(e - p)))) {
        k++;
        p++;
    }
    return k;
}

enum { SCAN_ROW, SCAN_MORE, SCAN_OPEN_QUOTE };

/* Splits the row at pos into spans. SCAN_MORE: the window ends inside the row (and the file goes on).
 * *used: the row's bytes with its line end; *lines: the '\n's among them; *stray: the first field
 * (0-based) with a quote out of place, or -1, and *stray_after whether it is text after a closing quote. */
static wf_status *scan_row(wf__csv_reader *r, int *result, size_t *used, int64_t *lines, int *stray,
                           bool *stray_after)
{
    const wf__linebuf *b = &r->b;
    const char *buf = b->buf;
    const size_t e = b->end, p0 = b->pos;
    const char dl = r->delim;
    size_t i = p0;
    int64_t nl = 0;
    int nf = 0;
    *stray = -1;
    for (;;) {
        size_t start, len;
        bool quoted = i < e && buf[i] == '"';
        if (quoted) {
            size_t j = i + 1;
            for (;;) {
                const char *q = memchr(buf + j, '"', e - j);
                if (!q) {
                    *result = b->eof ? SCAN_OPEN_QUOTE : SCAN_MORE;
                    return NULL;
                }
                size_t k = (size_t)(q - buf);
                if (k + 1 == e && !b->eof) {
                    *result = SCAN_MORE;
                    return NULL;
                }
                if (k + 1 < e && buf[k + 1] == '"') {
                    j = k + 2;
                    continue;
                }
                nl += count_nl(buf + i + 1, k - i - 1);
                start = i + 1 - p0;
                len = k - i - 1;
                i = k + 1;
                break;
            }
            /* after the closing quote: a delimiter, a line end, or the end of the file */
            bool ok = i == e || buf[i] == dl || buf[i] == '\n';
            if (!ok && buf[i] == '\r') {
                if (i + 1 == e && !b->eof) {
                    *result = SCAN_MORE;
                    return NULL;
                }
                ok = i + 1 == e || buf[i + 1] == '\n';
                if (ok) i++;
            }
            if (!ok) {
                if (*stray < 0) {
                    *stray = nf;
                    *stray_after = true;
                }
                while (i < e && buf[i] != dl && buf[i] != '\n') i++;
                if (i == e && !b->eof) {
                    *result = SCAN_MORE;
                    return NULL;
                }
            }
        } else {
            size_t j = i;
            while (j < e && buf[j] != dl && buf[j] != '\n') {
                if (buf[j] == '"' && *stray < 0) {
                    *stray = nf;
                    *stray_after = false;
                }
                j++;
            }
            if (j == e && !b->eof) {
                *result = SCAN_MORE;
                return NULL;
            }
            start = i - p0;
            len = j - i;
            if (len && (j == e || buf[j] == '\n') && buf[j - 1] == '\r') len--;
            i = j;
        }
        WF__TRY(add_span(r, nf++, start, len, quoted));
        if (i < e && buf[i] == dl) {
            i++;
            continue;
        }
        if (i < e) { /* '\n' */
            i++;
            nl++;
        }
        break;
    }
    r->n_fields = nf;
    *used = i - p0;
    *lines = nl;
    *result = SCAN_ROW;
    return NULL;
}

/* The next row's spans (r->row, r->n_fields) with the reader moved past it; *end at the end of the file. */
static wf_status *read_row(wf__csv_reader *r, int *end)
{
    wf__linebuf *b = &r->b;
    *end = 0;
    for (;;) {
        /* empty lines */
        while (b->pos < b->end) {
            char c = b->buf[b->pos];
            if (c == '\n') {
                b->pos++;
                b->line++;
            } else if (c == '\r' && b->pos + 1 < b->end && b->buf[b->pos + 1] == '\n') {
                b->pos += 2;
                b->line++;
            } else if (c == '\r' && b->pos + 1 == b->end && b->eof) {
                b->pos++;
            } else {
                break;
            }
        }
        r->row_off = wf__linebuf_tell(b);
        r->row_line = b->line;
        int result = SCAN_MORE;
        size_t used = 0;
        int64_t lines = 0;
        int stray = -1;
        bool after = false;
        bool at_cr = b->pos + 1 == b->end && b->buf[b->pos] == '\r' && !b->eof;
        if (b->pos < b->end && !at_cr) WF__TRY(scan_row(r, &result, &used, &lines, &stray, &after));
        else if (b->eof) {
            *end = 1;
            return NULL;
        }
        if (result == SCAN_OPEN_QUOTE)
            return wf__status(WF_INVALID_ARGUMENT, "%s: line %lld (byte %lld): a quoted field is still open at the "
                              "end of the file", b->path, (long long)r->row_line, (long long)r->row_off);
        if (result == SCAN_ROW) {
            size_t content = used; /* without the line end */
            if (content && b->buf[b->pos + content - 1] == '\n') content--;
            if (content && b->buf[b->pos + content - 1] == '\r') content--;
            if (content > r->max_row) result = -1;
        }
        if (result == SCAN_MORE) {
            bool full = false;
            if (b->end - b->pos > r->max_row + 2) full = true;
            else WF__TRY(wf__linebuf_more(b, &full));
            if (!full) continue;
            result = -1;
        }
        if (result < 0)
            return wf__status(WF_INVALID_ARGUMENT, "%s: line %lld (byte %lld): the row is longer than the limit of "
                              "%zu bytes", b->path, (long long)r->row_line, (long long)r->row_off, r->max_row);
        r->row = b->pos;
        b->pos += used;
        b->line += lines;
        if (stray >= 0) {
            char lab[120];
            return row_error(r, "%s: %s", col_label(r, stray, lab, sizeof lab),
                             after ? "text after the closing quote of a quoted field"
                                   : "a quote inside an unquoted field (quote the whole field and write \"\" for a quote)");
        }
        return NULL;
    }
}

/* Copies field i of the row just read, unquoted, into dst (len + 1 bytes); returns its length. */
static size_t copy_field(const wf__csv_reader *r, int i, char *dst)
{
    const span *s = &r->spans[i];
    const char *src = r->b.buf + r->row + s->start;
    size_t n = 0;
    if (!s->quoted) {
        memcpy(dst, src, s->len);
        n = s->len;
    } else {
        for (size_t k = 0; k < s->len; k++) {
            dst[n++] = src[k];
            if (src[k] == '"') k++; /* "" is one quote */
        }
    }
    dst[n] = 0;
    return n;
}

wf_status *wf__csv_next(wf__csv_reader *r, const wf__csv_field **fields, int *end)
{
    *fields = NULL;
    WF__TRY(read_row(r, end));
    if (*end) return NULL;
    if (r->n_fields != r->n_file)
        return row_error(r, "expected %d fields, found %d", r->n_file, r->n_fields);
    size_t need = 0;
    for (int c = 0; c < r->n_cols; c++) need += r->spans[r->file_col[c]].len + 1;
    if (need > r->scratch_cap) {
        size_t cap = need > 2 * r->scratch_cap ? need : 2 * r->scratch_cap;
        char *s = wf__realloc(r->scratch, r->scratch_cap, cap);
        if (!s) return wf__oom(r->b.path, cap);
        r->scratch = s;
        r->scratch_cap = cap;
    }
    char *out = r->scratch;
    for (int c = 0; c < r->n_cols; c++) {
        const wf__csv_column *col = &r->cols[c];
        wf__csv_field *f = &r->fields[c];
        int fc = r->file_col[c];
        memset(f, 0, sizeof *f);
        f->text = out;
        f->len = copy_field(r, fc, out);
        out += f->len + 1;
        char lab[120];
        if (!f->len) {
            if (!col->has_default)
                return row_error(r, "%s: the field is empty and the column has no default", col_label(r, fc, lab, sizeof lab));
            f->defaulted = 1;
            switch ((int)col->dtype) {
            case WF_F32: f->v.f32 = (float)col->default_f; break;
            case WF_F64: f->v.f64 = col->default_f; break;
            case WF_I32: f->v.i32 = (int32_t)col->default_i; break;
            case WF_I64: f->v.i64 = col->default_i; break;
            default:
                f->text = col->default_s;
                f->len = strlen(col->default_s);
            }
            continue;
        }
        bool ok = true;
        int64_t iv = 0;
        switch ((int)col->dtype) {
        case WF_F32: ok = parse_float(f->text, WF_F32, NULL, &f->v.f32); break;
        case WF_F64: ok = parse_float(f->text, WF_F64, &f->v.f64, NULL); break;
        case WF_I32: ok = parse_int(f->text, WF_I32, &iv); f->v.i32 = (int32_t)iv; break;
        case WF_I64: ok = parse_int(f->text, WF_I64, &iv); f->v.i64 = iv; break;
        default: break;
        }
        if (!ok) {
            char q[72];
            const char *why = col->dtype == WF_I32 || col->dtype == WF_I64 ? "a base-10 integer that fits" : "a number that fits";
            return row_error(r, "%s: '%s' is not %s %s", col_label(r, fc, lab, sizeof lab),
                             wf__io_quote(f->text, f->len, q, sizeof q), why, wf_dtype_name(col->dtype));
        }
    }
    *fields = r->fields;
    return NULL;
}

/* ---- open, position -------------------------------------------------------------------------------------- */

void wf__csv_close(wf__csv_reader *r)
{
    if (!r) return;
    wf__linebuf_close(&r->b);
    for (int i = 0; r->cols && i < r->n_cols; i++) wf__free((char *)r->cols[i].default_s);
    for (int i = 0; r->header && i < r->n_header; i++) wf__free(r->header[i]);
    wf__free(r->cols);
    wf__free(r->file_col);
    wf__free(r->header);
    wf__free(r->spans);
    wf__free(r->scratch);
    wf__free(r->fields);
    wf__free(r);
}

static wf_status *check_options(const char *path, const wf__csv_options *o)
{
    if (o->delimiter == '"' || o->delimiter == '\r' || o->delimiter == '\n')
        return wf__status(WF_INVALID_ARGUMENT, "%s: the CSV delimiter cannot be a quote, CR or LF", path);
    if (o->n_columns < 1 || !o->columns)
        return wf__status(WF_INVALID_ARGUMENT, "%s: a CSV reader needs at least one column (n_columns %d)", path,
                          o->n_columns);
    for (int i = 0; i < o->n_columns; i++) {
        wf_dtype t = o->columns[i].dtype;
        if (t != WF_F32 && t != WF_F64 && t != WF_I32 && t != WF_I64 && t != WF__CSV_STRING)
            return wf__status(WF_INVALID_ARGUMENT, "%s: CSV column %d has type %s; the types are f32, f64, i32, i64 "
                              "and string", path, i, wf_dtype_name(t));
    }
    if (o->n_file_columns < 0 || (!o->select && o->n_file_columns && o->n_file_columns != o->n_columns))
        return wf__status(WF_INVALID_ARGUMENT, "%s: n_file_columns %d with %d columns and no selection", path,
                          o->n_file_columns, o->n_columns);
    if (o->select) {
        if (!o->n_file_columns && !o->header)
            return wf__status(WF_INVALID_ARGUMENT, "%s: selecting CSV columns needs n_file_columns or a header", path);
        for (int i = 0; i < o->n_columns; i++)
            if (o->select[i] < 0 || (i && o->select[i] <= o->select[i - 1]) ||
                (o->n_file_columns && o->select[i] >= o->n_file_columns))
                return wf__status(WF_INVALID_ARGUMENT, "%s: CSV column selection [%d] = %d: the selection must be "
                                  "increasing file columns (0-based) below %d", path, i, o->select[i],
                                  o->n_file_columns ? o->n_file_columns : INT32_MAX);
    }
    return NULL;
}

static wf_status *read_header(wf__csv_reader *r)
{
    int end;
    WF__TRY(read_row(r, &end));
    if (end) return wf__status(WF_INVALID_ARGUMENT, "%s: the file is empty, but a header row was expected", r->b.path);
    if (!(r->header = wf__calloc((size_t)r->n_fields, sizeof *r->header))) return wf__oom(r->b.path, sizeof(char *));
    for (int i = 0; i < r->n_fields; i++) {
        char *h = wf__malloc(r->spans[i].len + 1);
        if (!h) return wf__oom(r->b.path, r->spans[i].len + 1);
        copy_field(r, i, h);
        r->header[r->n_header++] = h;
    }
    r->header_end = wf__linebuf_tell(&r->b);
    return NULL;
}

wf_status *wf__csv_open(const char *path, const wf__csv_options *opts, wf__csv_reader **out)
{
    if (!path || !opts || !out) return wf__status(WF_INVALID_ARGUMENT, "wf__csv_open: NULL path, options or out");
    *out = NULL;
    WF__TRY(check_options(path, opts));
    wf__csv_reader *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom(path, sizeof *r);
    wf_status *s = NULL;
    r->b.fd = -1;
    r->delim = opts->delimiter ? opts->delimiter : ',';
    r->max_row = opts->max_row ? opts->max_row : WF__TEXT_MAX_LINE;
    r->n_cols = opts->n_columns;
    r->n_file = opts->select ? opts->n_file_columns : opts->n_columns;
    size_t n = (size_t)r->n_cols;
    r->cols = wf__calloc(n, sizeof *r->cols);
    r->file_col = wf__calloc(n, sizeof *r->file_col);
    r->fields = wf__calloc(n, sizeof *r->fields);
    if (!r->cols || !r->file_col || !r->fields) {
        s = wf__oom(path, n * sizeof *r->cols);
        goto fail;
    }
    for (int i = 0; i < r->n_cols; i++) {
        r->file_col[i] = opts->select ? opts->select[i] : i;
        r->cols[i] = opts->columns[i];
        r->cols[i].default_s = wf__strdup(opts->columns[i].default_s ? opts->columns[i].default_s : "");
        if (!r->cols[i].default_s) {
            s = wf__oom(path, 1);
            goto fail;
        }
    }
    if ((s = wf__linebuf_open(&r->b, path, r->max_row))) goto fail;
    if (opts->header) {
        if ((s = read_header(r))) goto fail;
        if (!r->n_file) r->n_file = r->n_header;
        if (r->n_header != r->n_file) {
            s = wf__status(WF_INVALID_ARGUMENT, "%s: line %lld: the header has %d fields, expected %d", path,
                           (long long)r->row_line, r->n_header, r->n_file);
            goto fail;
        }
        for (int i = 0; i < r->n_cols; i++)
            if (r->file_col[i] >= r->n_file) {
                s = wf__status(WF_INVALID_ARGUMENT, "%s: column %d is selected, but the header has %d fields", path,
                               r->file_col[i] + 1, r->n_header);
                goto fail;
            }
    }
    *out = r;
    return NULL;
fail:
    wf__csv_close(r);
    return s;
}

int64_t wf__csv_tell(const wf__csv_reader *r) { return wf__linebuf_tell(&r->b); }
int64_t wf__csv_line(const wf__csv_reader *r) { return r->b.line; }
int wf__csv_header_count(const wf__csv_reader *r) { return r->n_header; }
const char *wf__csv_header_name(const wf__csv_reader *r, int i)
{
    return i >= 0 && i < r->n_header ? r->header[i] : NULL;
}

wf_status *wf__csv_seek(wf__csv_reader *r, int64_t offset, int64_t line)
{
    if (offset < r->header_end)
        return wf__status(WF_INVALID_ARGUMENT, "%s: cannot seek to byte %lld: the header runs to byte %lld", r->b.path,
                          (long long)offset, (long long)r->header_end);
    return wf__linebuf_seek(&r->b, offset, line);
}
