/* Record-file readers (src/io/records.h): CRC32C against the standard check value, both paths; TFRecord
 * against files framed by tests/data/make_records.py (its own CRC32C), plain and gzip, and the writer's
 * bytes against them; CSV against what Python's csv module reads from the same file; text lines; file
 * patterns; saving and restoring positions; every malformed-file error (naming the file and the offset
 * or line); and out-of-memory on every allocation of each reader. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "testutil.h"
#include "core/core.h"
#include "io/records.h"

static char g_root[512];
static int g_have_ref; /* make_records.py ran */

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

/* ---- CRC32C ---------------------------------------------------------------------------------------------- */

static void test_crc32c(void)
{
    CHECK_INT(wf_crc32c("123456789", 9, 0), 0xE3069283u);
    CHECK_INT(wf__crc32c_portable("123456789", 9, 0), 0xE3069283u);
    CHECK_INT(wf_crc32c("", 0, 0), 0);
    /* 32 zero bytes and 32 0xff bytes: RFC 3720 B.4's vectors */
    unsigned char z[32] = {0}, ff[32];
    memset(ff, 0xff, sizeof ff);
    CHECK_INT(wf_crc32c(z, 32, 0), 0x8A9136AAu);
    CHECK_INT(wf_crc32c(ff, 32, 0), 0x62A8AB43u);
    /* every length and alignment, both paths, and chaining */
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 37 + 11);
    for (int off = 0; off < 8; off++)
        for (int n = 0; n + off <= 300; n += 7) {
            uint32_t a = wf__crc32c_portable(buf + off, (size_t)n, 0);
            CHECK_INT(wf_crc32c(buf + off, (size_t)n, 0), a);
            uint32_t b = wf_crc32c(buf + off + n / 3, (size_t)(n - n / 3), wf_crc32c(buf + off, (size_t)(n / 3), 0));
            CHECK_INT(b, a);
        }
    fprintf(stderr, "  crc32c: %s\n", wf__crc32c_hw_available() ? "SSE4.2 and tables" : "tables only (no SSE4.2)");
}

/* ---- TFRecord -------------------------------------------------------------------------------------------- */

/* known_tfrecord.txt's records */
static int load_known(unsigned char recs[][1400], size_t *lens, int cap)
{
    FILE *f = fopen(path_in("known_tfrecord.txt"), "r");
    if (!f) return 0;
    char line[4000];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        size_t k = 0;
        for (const char *p = line; p[0] && p[0] != '\n' && p[0] != '-'; p += 2) {
            unsigned v;
            sscanf(p, "%2x", &v);
            recs[n][k++] = (unsigned char)v;
        }
        lens[n++] = k;
    }
    fclose(f);
    return n;
}

static void read_all_records(const char *path, const wf__tfrecord_options *o, unsigned char recs[][1400],
                             const size_t *lens, int n)
{
    wf__tfrecord_reader *r = NULL;
    CHECK_OK(wf__tfrecord_open_with(path, o, &r));
    if (!r) return;
    for (int i = 0; i <= n; i++) {
        const uint8_t *d;
        size_t len;
        int end;
        CHECK_OK(wf__tfrecord_next(r, &d, &len, &end));
        CHECK_INT(end, i == n);
        if (i < n) {
            CHECK_INT(len, lens[i]);
            if (len == lens[i] && len && memcmp(d, recs[i], len)) CHECK_FAIL_("%s: record %d differs", path, i);
        }
    }
    CHECK_INT(wf__tfrecord_index(r), n);
    wf__tfrecord_close(r);
}

static void test_tfrecord_known(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_tfrecord_known", "/usr/bin/python3 is not available");
        return;
    }
    static unsigned char recs[8][1400];
    size_t lens[8];
    int n = load_known(recs, lens, 8);
    CHECK_INT(n, 6);
    read_all_records(path_in("known.tfrecord"), NULL, recs, lens, n);
    wf__tfrecord_options gz = {.compression = WF__COMPRESSION_GZIP};
    read_all_records(path_in("known.tfrecord.gz"), &gz, recs, lens, n);
    /* the writer makes the same bytes as the Python framing */
    const void *ptrs[8];
    for (int i = 0; i < n; i++) ptrs[i] = recs[i];
    CHECK_OK(wf_tfrecord_write(path_in("written.tfrecord"), ptrs, lens, n));
    size_t na = 0, nb = 0;
    unsigned char *a = slurp(path_in("known.tfrecord"), &na), *b = slurp(path_in("written.tfrecord"), &nb);
    CHECK(a && b && na == nb && !memcmp(a, b, na));
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path_in("written.tfrecord"), (long)getpid());
    CHECK(access(tmp, F_OK) != 0); /* renamed into place */
    free(a);
    free(b);
}

/* Records of every size around the buffer's growth, and positions saved and restored. */
static void test_tfrecord_seek(void)
{
    enum { N = 200 };
    static unsigned char data[N][600];
    const void *ptrs[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)(i * 3 % 600);
        for (size_t k = 0; k < lens[i]; k++) data[i][k] = (unsigned char)(i + k * 7);
        ptrs[i] = data[i];
    }
    const char *p = path_in("seek.tfrecord");
    CHECK_OK(wf_tfrecord_write(p, ptrs, lens, N));
    /* a gzip copy of it */
    size_t nraw;
    unsigned char *raw = slurp(p, &nraw);
    const char *pz = path_in("seek.tfrecord.gz");
    gzFile gz = gzopen(pz, "wb");
    gzwrite(gz, raw, (unsigned)nraw);
    gzclose(gz);
    free(raw);
    for (int mode = 0; mode < 2; mode++) {
        wf__tfrecord_options o = {.compression = mode ? WF__COMPRESSION_GZIP : WF__COMPRESSION_NONE};
        wf__tfrecord_reader *r = NULL;
        CHECK_OK(wf__tfrecord_open_with(mode ? pz : p, &o, &r));
        if (!r) return;
        int64_t off[N + 1], idx[N + 1];
        const uint8_t *d;
        size_t len;
        int end;
        for (int i = 0; i < N; i++) {
            off[i] = wf__tfrecord_tell(r);
            idx[i] = wf__tfrecord_index(r);
            CHECK_OK(wf__tfrecord_next(r, &d, &len, &end));
        }
        off[N] = wf__tfrecord_tell(r);
        idx[N] = wf__tfrecord_index(r);
        /* restore, forwards and backwards, in this reader and in a new one (a resumed checkpoint) */
        int order[] = {150, 3, 0, 199, 77, 200, 1};
        for (int j = 0; j < 7; j++) {
            int i = order[j];
            wf__tfrecord_reader *q = NULL;
            if (j & 1) CHECK_OK(wf__tfrecord_open_with(mode ? pz : p, &o, &q));
            wf__tfrecord_reader *u = q ? q : r;
            CHECK_OK(wf__tfrecord_seek(u, off[i], idx[i]));
            CHECK_OK(wf__tfrecord_next(u, &d, &len, &end));
            CHECK_INT(end, i == N);
            if (i < N) {
                CHECK_INT(len, lens[i]);
                CHECK(len != lens[i] || !len || !memcmp(d, data[i], len));
                CHECK_INT(wf__tfrecord_index(u), idx[i] + 1);
                CHECK_INT(wf__tfrecord_tell(u), off[i + 1]);
            }
            wf__tfrecord_close(q);
        }
        CHECK_ERR(wf__tfrecord_seek(r, -1, 0), WF_INVALID_ARGUMENT, "seek.tfrecord");
        if (!mode) CHECK_ERR(wf__tfrecord_seek(r, off[N] + 1, 0), WF_INVALID_ARGUMENT, "cannot seek to byte");
        wf__tfrecord_close(r);
    }
}

/* Reads until an error, which must be `code` with `text` and the file's name. Returns the records read. */
static int read_until_error(const char *path, const wf__tfrecord_options *o, wf_code code, const char *text)
{
    wf__tfrecord_reader *r = NULL;
    wf_status *s = wf__tfrecord_open_with(path, o, &r);
    int n = 0;
    for (int guard = 0; !s && guard < 100; guard++) {
        const uint8_t *d;
        size_t len;
        int end;
        s = wf__tfrecord_next(r, &d, &len, &end);
        if (!s && end) break;
        if (!s) n++;
    }
    if (!s) {
        CHECK_FAIL_("%s: read to the end, expected %s '%s'", path, wf_code_name(code), text);
    } else {
        const char *m = wf_status_message(s);
        if (wf_status_code(s) != code) CHECK_FAIL_("%s: %s, expected %s", m, wf_code_name(wf_status_code(s)), wf_code_name(code));
        CHECK_STR_CONTAINS(m, text);
        CHECK_STR_CONTAINS(m, path);
        fprintf(stderr, "  %s\n", m);
        wf_status_free(s);
        if (r) { /* the reader stays at the record at fault */
            const uint8_t *d;
            size_t len;
            int end;
            wf_status *again = wf__tfrecord_next(r, &d, &len, &end);
            CHECK(again != NULL);
            wf_status_free(again);
        }
    }
    wf__tfrecord_close(r);
    return n;
}

static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }

static void test_tfrecord_errors(void)
{
    const char *recs[] = {"first", "second record", "third"};
    size_t lens[] = {5, 13, 5};
    char p[400]; /* path_in's buffers rotate */
    snprintf(p, sizeof p, "%s", path_in("good.tfrecord"));
    CHECK_OK(wf_tfrecord_write(p, (const void *const *)recs, lens, 3));
    size_t n;
    unsigned char *b = slurp(p, &n);
    CHECK_INT(n, 3 * 16 + 23);
    /* record 1 starts at byte 21 (16 + 5) */
    b[21 + 12 + 4] ^= 0x01; /* a data byte */
    CHECK_INT(read_until_error(write_file("flip_data.tfrecord", b, n), NULL, WF_DATA_LOSS,
                               "record 1 at byte 21: bad data CRC"), 1);
    b[21 + 12 + 4] ^= 0x01;
    b[21 + 12 + 13] ^= 0x80; /* the data CRC itself */
    read_until_error(write_file("flip_crc.tfrecord", b, n), NULL, WF_DATA_LOSS, "record 1 at byte 21: bad data CRC");
    b[21 + 12 + 13] ^= 0x80;
    b[21 + 2] ^= 0x10; /* the length */
    read_until_error(write_file("flip_len.tfrecord", b, n), NULL, WF_DATA_LOSS, "record 1 at byte 21: bad length CRC");
    b[21 + 2] ^= 0x10;
    /* truncated: inside the last record's data, inside its CRC, inside a header */
    CHECK_INT(read_until_error(write_file("cut1.tfrecord", b, n - 6), NULL, WF_DATA_LOSS,
                               "record 2 at byte 50: truncated record"), 2);
    read_until_error(write_file("cut2.tfrecord", b, n - 2), NULL, WF_DATA_LOSS, "record 2 at byte 50: truncated");
    read_until_error(write_file("cut3.tfrecord", b, 21 + 7), NULL, WF_DATA_LOSS,
                     "record 1 at byte 21: truncated record: 7 of the header's 12 bytes");
    /* a hostile length with a valid length CRC: larger than the file, larger than the limit */
    unsigned char h[16 + 12];
    memcpy(h, b, 16);
    put_u64(h + 16, (uint64_t)1 << 60);
    put_u32(h + 24, wf__crc32c_mask(wf_crc32c(h + 16, 8, 0)));
    put_u64(h + 0, 0);
    put_u32(h + 8, wf__crc32c_mask(wf_crc32c(h, 8, 0)));
    put_u32(h + 12, wf__crc32c_mask(wf_crc32c("", 0, 0)));
    read_until_error(write_file("huge.tfrecord", h, sizeof h), NULL, WF_DATA_LOSS,
                     "record 1 at byte 16: truncated record: its length is 1152921504606846976 bytes");
    wf__tfrecord_options lim = {.max_record = 8};
    read_until_error(p, &lim, WF_DATA_LOSS, "record 1 at byte 21: record length 13 is over the limit of 8 bytes");
    /* gzip: a hostile length costs only what the stream holds */
    gzFile gz = gzopen(path_in("huge.tfrecord.gz"), "wb");
    gzwrite(gz, h, sizeof h);
    gzclose(gz);
    wf__tfrecord_options gzo = {.compression = WF__COMPRESSION_GZIP, .max_record = (uint64_t)1 << 62};
    read_until_error(path_in("huge.tfrecord.gz"), &gzo, WF_DATA_LOSS, "record 1 at byte 16: truncated record");
    /* a gzip stream cut short, and a corrupt one */
    gz = gzopen(path_in("good.tfrecord.gz"), "wb");
    gzwrite(gz, b, (unsigned)n);
    gzclose(gz);
    size_t nz;
    unsigned char *z = slurp(path_in("good.tfrecord.gz"), &nz);
    read_until_error(write_file("cut.tfrecord.gz", z, nz - 12), &gzo, WF_DATA_LOSS, "truncated record");
    z[nz / 2] ^= 0xff;
    read_until_error(write_file("bad.tfrecord.gz", z, nz), &gzo, WF_DATA_LOSS, "bad.tfrecord.gz");
    free(z);
    free(b);
    wf__tfrecord_reader *r = NULL;
    CHECK_ERR(wf__tfrecord_open_with(p, &gzo, &r), WF_INVALID_ARGUMENT, "good.tfrecord: not a gzip file");
    CHECK(r == NULL);
    CHECK_ERR(wf__tfrecord_open(path_in("missing.tfrecord"), &r), WF_NOT_FOUND, "missing.tfrecord");
    CHECK(r == NULL);
    CHECK_ERR(wf__tfrecord_open(g_dir, &r), WF_INVALID_ARGUMENT, "is a directory");
    /* an empty file is an empty list of records */
    CHECK_OK(wf__tfrecord_open(write_file("empty.tfrecord", "", 0), &r));
    const uint8_t *d;
    size_t len;
    int end = 0;
    CHECK_OK(wf__tfrecord_next(r, &d, &len, &end));
    CHECK_INT(end, 1);
    wf__tfrecord_close(r);
    CHECK_ERR(wf_tfrecord_write(path_in("x.tfrecord"), NULL, lens, 1), WF_INVALID_ARGUMENT, "NULL");
    CHECK_ERR(wf_tfrecord_write(path_in("nodir/x.tfrecord"), (const void *const *)recs, lens, 3), WF_IO_ERROR,
              "nodir/x.tfrecord");
}

/* ---- text lines ------------------------------------------------------------------------------------------ */

static void test_textline(void)
{
    const char text[] = "first\r\nsecond\n\n\r\nlast without newline";
    const char *p = write_file("lines.txt", text, sizeof text - 1);
    const char *want[] = {"first", "second", "", "", "last without newline"};
    wf__textline_reader *r = NULL;
    CHECK_OK(wf__textline_open(p, 0, &r));
    if (!r) return;
    int64_t off[6], ln[6];
    for (int i = 0; i < 6; i++) {
        off[i] = wf__textline_tell(r);
        ln[i] = wf__textline_line(r);
        const char *l;
        size_t n;
        int end;
        CHECK_OK(wf__textline_next(r, &l, &n, &end));
        CHECK_INT(end, i == 5);
        if (i < 5 && l) {
            CHECK_INT(n, strlen(want[i]));
            CHECK(!strcmp(l, want[i]));
        }
    }
    CHECK_INT(ln[4], 5);
    CHECK_INT(off[1], 7);
    /* back to "second" */
    CHECK_OK(wf__textline_seek(r, off[1], ln[1]));
    const char *l;
    size_t n;
    int end;
    CHECK_OK(wf__textline_next(r, &l, &n, &end));
    CHECK(l && !strcmp(l, "second"));
    CHECK_INT(wf__textline_line(r), 3);
    CHECK_ERR(wf__textline_seek(r, 1000, 1), WF_INVALID_ARGUMENT, "lines.txt");
    wf__textline_close(r);

    /* a line over the limit: an error naming the line, and the buffer does not grow for it */
    const char longer[] = "ok\nthis line is long\nok\n";
    CHECK_OK(wf__textline_open(write_file("long.txt", longer, sizeof longer - 1), 8, &r));
    CHECK_OK(wf__textline_next(r, &l, &n, &end));
    CHECK_ERR(wf__textline_next(r, &l, &n, &end), WF_INVALID_ARGUMENT, "long.txt: line 2 (at byte 3) is longer than the limit of 8 bytes");
    wf__textline_close(r);
    /* exactly at the limit, with CRLF */
    CHECK_OK(wf__textline_open(write_file("limit.txt", "12345678\r\n", 10), 8, &r));
    CHECK_OK(wf__textline_next(r, &l, &n, &end));
    CHECK_INT(n, 8);
    wf__textline_close(r);
    CHECK_ERR(wf__textline_open(path_in("missing.txt"), 0, &r), WF_NOT_FOUND, "missing.txt");

    /* many lines across the 64 KiB blocks, with checkpoints every 997 lines resumed by a new reader */
    const char *big = path_in("big.txt");
    FILE *f = fopen(big, "wb");
    enum { N = 30000 };
    for (int i = 0; i < N; i++) {
        fprintf(f, "line %d ", i);
        for (int k = 0; k < i % 50; k++) fputc('a' + k % 26, f);
        fputs(i % 3 ? "\n" : "\r\n", f);
    }
    fclose(f);
    static int64_t boff[N], bline[N];
    CHECK_OK(wf__textline_open(big, 0, &r));
    char expect[100];
    int bad = 0;
    for (int i = 0; i < N; i++) {
        boff[i] = wf__textline_tell(r);
        bline[i] = wf__textline_line(r);
        CHECK_OK(wf__textline_next(r, &l, &n, &end));
        int m = snprintf(expect, sizeof expect, "line %d ", i);
        for (int k = 0; k < i % 50; k++) expect[m++] = (char)('a' + k % 26);
        expect[m] = 0;
        if (!l || strcmp(l, expect) || n != (size_t)m) bad++;
    }
    CHECK_INT(bad, 0);
    CHECK_OK(wf__textline_next(r, &l, &n, &end));
    CHECK_INT(end, 1);
    wf__textline_close(r);
    for (int i = 5; i < N; i += 997) {
        CHECK_OK(wf__textline_open(big, 0, &r));
        CHECK_OK(wf__textline_seek(r, boff[i], bline[i]));
        CHECK_OK(wf__textline_next(r, &l, &n, &end));
        snprintf(expect, sizeof expect, "line %d ", i);
        CHECK(l && !strncmp(l, expect, strlen(expect)));
        CHECK_INT(wf__textline_line(r), i + 2);
        wf__textline_close(r);
    }
}

/* ---- CSV ------------------------------------------------------------------------------------------------- */

static const wf__csv_column g_quote_cols[5] = {
    {.dtype = WF_I64},
    {.dtype = WF__CSV_STRING, .has_default = 1, .default_s = "N/A"},
    {.dtype = WF_F32, .has_default = 1, .default_f = -1.5},
    {.dtype = WF_I32, .has_default = 1, .default_i = 42},
    {.dtype = WF_F64, .has_default = 1, .default_f = 0.5},
};

static void test_csv_python(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_csv_python", "/usr/bin/python3 is not available");
        return;
    }
    wf__csv_options o = {.header = 1, .columns = g_quote_cols, .n_columns = 5};
    wf__csv_reader *r = NULL;
    CHECK_OK(wf__csv_open(path_in("quotes.csv"), &o, &r));
    if (!r) return;
    CHECK_INT(wf__csv_header_count(r), 5);
    CHECK(!strcmp(wf__csv_header_name(r, 3), "qty"));
    CHECK(wf__csv_header_name(r, 5) == NULL);
    FILE *f = fopen(path_in("quotes_expected.txt"), "r");
    char line[1000];
    int rows = 0;
    int64_t off3 = -1, line3 = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (rows == 2) {
            off3 = wf__csv_tell(r);
            line3 = wf__csv_line(r);
        }
        const wf__csv_field *fl;
        int end;
        CHECK_OK(wf__csv_next(r, &fl, &end));
        if (!fl || end) break;
        char *save, *tok = strtok_r(line, "\t\n", &save);
        long py_line = strtol(tok, NULL, 10);
        for (int c = 0; c < 5; c++) {
            tok = strtok_r(NULL, "\t\n", &save);
            size_t tl = strlen(tok);
            int dflt = tok[tl - 1] == '*';
            if (dflt) tok[--tl] = 0;
            CHECK_INT(fl[c].defaulted, dflt);
            if (c == 1) {
                char hex[400] = "";
                for (size_t k = 0; k < fl[c].len; k++) sprintf(hex + 2 * k, "%02x", (unsigned char)fl[c].text[k]);
                if (strcmp(hex[0] ? hex : "-", tok)) CHECK_FAIL_("row %d name: %s, python %s", rows + 1, hex, tok);
            } else if (c == 2) {
                double w = strtod(tok, NULL);
                if (!((double)fl[c].v.f32 == w)) CHECK_FAIL_("row %d price: %.9g, python %s", rows + 1, fl[c].v.f32, tok);
                if (!signbit(fl[c].v.f32) != !signbit(w)) CHECK_FAIL_("row %d price: sign of %g, python %s", rows + 1, fl[c].v.f32, tok);
            } else if (c == 4) {
                double w = strtod(tok, NULL);
                if (!(fl[c].v.f64 == w) || !signbit(fl[c].v.f64) != !signbit(w))
                    CHECK_FAIL_("row %d weight: %.17g, python %s", rows + 1, fl[c].v.f64, tok);
            } else if (c == 0) {
                CHECK_INT(fl[c].v.i64, strtoll(tok, NULL, 10));
            } else {
                CHECK_INT(fl[c].v.i32, strtol(tok, NULL, 10));
            }
        }
        rows++;
        /* Python's line_num counts the lines read, which is the next row's line less one, except after
         * the last row, which has no newline */
        if (rows < 7) CHECK_INT(wf__csv_line(r) - 1, py_line);
    }
    if (f) fclose(f);
    CHECK_INT(rows, 7);
    const wf__csv_field *fl;
    int end;
    CHECK_OK(wf__csv_next(r, &fl, &end));
    CHECK_INT(end, 1);
    /* resume at row 3 (the one with the quoted newlines) */
    wf__csv_reader *q = NULL;
    CHECK_OK(wf__csv_open(path_in("quotes.csv"), &o, &q));
    CHECK_INT(line3, 4); /* the empty line before the row */
    CHECK_OK(wf__csv_seek(q, off3, line3));
    CHECK_OK(wf__csv_next(q, &fl, &end));
    CHECK(fl && fl[0].v.i64 == 3 && !strcmp(fl[1].text, "multi\nline\r\nfield"));
    CHECK_INT(wf__csv_line(q), 8);
    CHECK_ERR(wf__csv_seek(q, 3, 1), WF_INVALID_ARGUMENT, "the header runs to byte 26");
    wf__csv_close(q);
    wf__csv_close(r);

    /* a selection by file column: name and qty, counted from the header */
    int sel[] = {1, 3};
    wf__csv_column sc[2] = {g_quote_cols[1], g_quote_cols[3]};
    wf__csv_options so = {.header = 1, .columns = sc, .n_columns = 2, .select = sel};
    CHECK_OK(wf__csv_open(path_in("quotes.csv"), &so, &r));
    CHECK_OK(wf__csv_next(r, &fl, &end));
    CHECK(fl && !strcmp(fl[0].text, "Smith, John") && fl[1].v.i32 == 10);
    CHECK_OK(wf__csv_next(r, &fl, &end));
    CHECK(fl && !strcmp(fl[0].text, "say \"hi\"") && fl[1].v.i32 == -7);
    wf__csv_close(r);
}

static const char *csv_err(const char *name, const char *text, const wf__csv_options *o, int good_rows)
{
    static char msg[600];
    msg[0] = 0;
    wf__csv_reader *r = NULL;
    wf_status *s = wf__csv_open(write_file(name, text, strlen(text)), o, &r);
    int rows = 0;
    while (!s) {
        const wf__csv_field *fl;
        int end;
        s = wf__csv_next(r, &fl, &end);
        if (!s && end) break;
        if (!s) rows++;
    }
    if (good_rows >= 0) CHECK_INT(rows, good_rows);
    if (s) {
        snprintf(msg, sizeof msg, "%s", wf_status_message(s));
        CHECK_STR_CONTAINS(msg, name);
        CHECK(!strchr(msg, '\n'));
        fprintf(stderr, "  %s\n", msg);
        wf_status_free(s);
    } else {
        CHECK_FAIL_("%s: read without an error", name);
    }
    wf__csv_close(r);
    return msg;
}

static void test_csv_errors(void)
{
    wf__csv_column num[3] = {{.dtype = WF_I32}, {.dtype = WF_F32}, {.dtype = WF__CSV_STRING}};
    wf__csv_options o = {.columns = num, .n_columns = 3};
    CHECK_STR_CONTAINS(csv_err("count.csv", "1,2,a\n3,4,b\n5,6\n7,8,c\n", &o, 2),
                       "count.csv: line 3: expected 3 fields, found 2");
    CHECK_STR_CONTAINS(csv_err("count2.csv", "1,2,a\n\n\"x\ny\",4,b,9\n", &o, 1),
                       "count2.csv: line 3: expected 3 fields, found 4");
    CHECK_STR_CONTAINS(csv_err("nan.csv", "1,2,a\n3,4.5x,b\n", &o, 1),
                       "nan.csv: line 2: column 2: '4.5x' is not a number that fits f32");
    CHECK_STR_CONTAINS(csv_err("int.csv", "1.5,2,a\n", &o, 0),
                       "int.csv: line 1: column 1: '1.5' is not a base-10 integer that fits i32");
    CHECK_STR_CONTAINS(csv_err("i32.csv", "2147483648,2,a\n", &o, 0), "'2147483648' is not a base-10 integer that fits i32");
    CHECK_STR_CONTAINS(csv_err("f32big.csv", "1,1e39,a\n", &o, 0), "'1e39' is not a number that fits f32");
    CHECK_STR_CONTAINS(csv_err("hex.csv", "1,0x10,a\n", &o, 0), "'0x10' is not a number");
    CHECK_STR_CONTAINS(csv_err("empty.csv", "1,,a\n", &o, 0), "empty.csv: line 1: column 2: the field is empty and the column has no default");
    CHECK_STR_CONTAINS(csv_err("open.csv", "1,2,a\n3,4,\"never\nclosed\n", &o, 1),
                       "open.csv: line 2 (byte 6): a quoted field is still open at the end of the file");
    CHECK_STR_CONTAINS(csv_err("stray.csv", "1,2,a\"b\n", &o, 0), "stray.csv: line 1: column 3: a quote inside an unquoted field");
    CHECK_STR_CONTAINS(csv_err("after.csv", "1,2,\"a\"b\n", &o, 0), "after.csv: line 1: column 3: text after the closing quote");
    /* the header's names in messages, quoted safely */
    wf__csv_options h = o;
    h.header = 1;
    CHECK_STR_CONTAINS(csv_err("named.csv", "a,\"b\nc\",s\n1,x,y\n", &h, 0), "named.csv: line 3: column 2 ('b?c'): 'x' is not");
    CHECK_STR_CONTAINS(csv_err("hdr.csv", "a,b\n1,2,x\n", &h, -1), "hdr.csv: line 1: the header has 2 fields, expected 3");
    CHECK_STR_CONTAINS(csv_err("nohdr.csv", "\n\n", &h, -1), "nohdr.csv: the file is empty, but a header row was expected");
    /* a row over the limit */
    wf__csv_options lim = o;
    lim.max_row = 10;
    CHECK_STR_CONTAINS(csv_err("long.csv", "1,2,abc\n1,2,abcdefgh\n", &lim, 1),
                       "long.csv: line 2 (byte 8): the row is longer than the limit of 10 bytes");
    CHECK_STR_CONTAINS(csv_err("longq.csv", "1,2,\"abc\n\n\n\n\n\n\n\n\n\n\nx\"\n", &lim, 0), "longq.csv: line 1 (byte 0): the row is longer");
    /* after a row error the reader goes on with the next row */
    wf__csv_reader *r = NULL;
    CHECK_OK(wf__csv_open(path_in("count.csv"), &o, &r));
    const wf__csv_field *fl;
    int end, errors = 0, rows = 0;
    for (int guard = 0; guard < 10; guard++) {
        wf_status *s = wf__csv_next(r, &fl, &end);
        if (s) errors++;
        else if (end) break;
        else rows++;
        wf_status_free(s);
    }
    CHECK_INT(rows, 3);
    CHECK_INT(errors, 1);
    wf__csv_close(r);
    /* bad options */
    wf__csv_options bad = o;
    bad.delimiter = '"';
    CHECK_ERR(wf__csv_open(path_in("count.csv"), &bad, &r), WF_INVALID_ARGUMENT, "delimiter");
    bad = o;
    int sel[] = {2, 1};
    bad.select = sel;
    bad.n_columns = 2;
    bad.n_file_columns = 3;
    CHECK_ERR(wf__csv_open(path_in("count.csv"), &bad, &r), WF_INVALID_ARGUMENT, "increasing");
    bad.n_file_columns = 0;
    CHECK_ERR(wf__csv_open(path_in("count.csv"), &bad, &r), WF_INVALID_ARGUMENT, "needs n_file_columns or a header");
    wf__csv_column badcol = {.dtype = WF_BOOL};
    bad = o;
    bad.columns = &badcol;
    bad.n_columns = 1;
    CHECK_ERR(wf__csv_open(path_in("count.csv"), &bad, &r), WF_INVALID_ARGUMENT, "CSV column 0 has type bool");
    CHECK_ERR(wf__csv_open(path_in("missing.csv"), &o, &r), WF_NOT_FOUND, "missing.csv");
    CHECK(r == NULL);
}

/* Tabs, CRLF, a missing final newline, and many rows across the window's blocks with quoted newlines,
 * resumed from checkpoints. */
static void test_csv_big(void)
{
    const char *p = path_in("big.csv");
    FILE *f = fopen(p, "wb");
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        if (i % 5 == 0) fprintf(f, "%d\t\"q\t%d\n\"\"x\"\"\"\t%.3f\r\n", i, i, i * 0.5);
        else fprintf(f, "%d\tplain%d\t%.3f%s", i, i, i * 0.5, i + 1 == N ? "" : "\n");
    }
    fclose(f);
    wf__csv_column cols[3] = {{.dtype = WF_I64}, {.dtype = WF__CSV_STRING}, {.dtype = WF_F64}};
    wf__csv_options o = {.delimiter = '\t', .columns = cols, .n_columns = 3};
    wf__csv_reader *r = NULL;
    CHECK_OK(wf__csv_open(p, &o, &r));
    if (!r) return;
    static int64_t off[N], line[N];
    char want[100];
    int bad = 0;
    const wf__csv_field *fl;
    int end;
    for (int i = 0; i < N; i++) {
        off[i] = wf__csv_tell(r);
        line[i] = wf__csv_line(r);
        CHECK_OK(wf__csv_next(r, &fl, &end));
        if (!fl) break;
        if (i % 5 == 0) snprintf(want, sizeof want, "q\t%d\n\"x\"", i);
        else snprintf(want, sizeof want, "plain%d", i);
        if (fl[0].v.i64 != i || strcmp(fl[1].text, want) || fl[1].len != strlen(want) || fl[2].v.f64 != i * 0.5) bad++;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(line[N - 1], 1 + (N - 1) + (N - 1 + 4) / 5); /* every fifth row spans two lines */
    CHECK_OK(wf__csv_next(r, &fl, &end));
    CHECK_INT(end, 1);
    wf__csv_close(r);
    for (int i = 3; i < N; i += 1999) {
        CHECK_OK(wf__csv_open(p, &o, &r));
        CHECK_OK(wf__csv_seek(r, off[i], line[i]));
        CHECK_OK(wf__csv_next(r, &fl, &end));
        CHECK(fl && fl[0].v.i64 == i);
        if (i + 1 < N) CHECK_INT(wf__csv_line(r), line[i + 1]);
        wf__csv_close(r);
    }
}

/* ---- file patterns ---------------------------------------------------------------------------------------- */

static void test_list_files(void)
{
    char d[300];
    snprintf(d, sizeof d, "%s/shards", g_dir);
    mkdir(d, 0700);
    const char *names[] = {"b-00001.csv", "B-00000.csv", "a-00002.csv", "_x.csv", "z.txt"};
    for (int i = 0; i < 5; i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        fclose(fopen(p, "w"));
    }
    char pat[400], pat2[400];
    snprintf(pat, sizeof pat, "%s/*.csv", d);
    char **paths = NULL;
    int64_t n = 0;
    CHECK_OK(wf__list_files(pat, &paths, &n));
    CHECK_INT(n, 4);
    const char *order[] = {"B-00000.csv", "_x.csv", "a-00002.csv", "b-00001.csv"}; /* bytewise */
    for (int i = 0; i < n && i < 4; i++) CHECK_STR_CONTAINS(paths[i], order[i]);
    wf__list_files_free(paths, n);
    /* several patterns: the union, sorted, each file once */
    snprintf(pat2, sizeof pat2, "%s/[ab]*", d);
    const char *pats[] = {pat2, pat};
    CHECK_OK(wf__list_files_multi(pats, 2, &paths, &n));
    CHECK_INT(n, 4);
    wf__list_files_free(paths, n);
    snprintf(pat, sizeof pat, "%s/*.tfrecord", d);
    CHECK_ERR(wf__list_files(pat, &paths, &n), WF_NOT_FOUND, "No files matched pattern: ");
    CHECK_ERR(wf__list_files(pat, &paths, &n), WF_NOT_FOUND, "/shards/*.tfrecord");
    CHECK(paths == NULL && n == 0);
    wf__list_files_free(NULL, 0);
}

/* ---- out of memory ------------------------------------------------------------------------------------------- */

/* Every allocation of opening and reading each format fails once in turn: the call fails with
 * OUT_OF_MEMORY (no crash, no leak: the ASan build checks) or reads everything. */
static void test_oom(void)
{
    const char *recs[] = {"x", "yy"};
    size_t lens[] = {1, 2};
    const char *tp = path_in("oom.tfrecord");
    CHECK_OK(wf_tfrecord_write(tp, (const void *const *)recs, lens, 2));
    const char *cp = write_file("oom.csv", "h1,h2\n1,\"a\"\n2,b\n", 16);
    wf__csv_column cols[2] = {{.dtype = WF_I32}, {.dtype = WF__CSV_STRING, .has_default = 1, .default_s = "d"}};
    wf__csv_options co = {.header = 1, .columns = cols, .n_columns = 2};
    for (int fmt = 0; fmt < 4; fmt++) {
        int failures = 0, done = 0;
        for (long k = 1; k < 60 && !done; k++) {
            wf__fault_inject(k);
            wf_status *s = NULL;
            int count = 0;
            if (fmt == 0) {
                wf__tfrecord_reader *r = NULL;
                s = wf__tfrecord_open(tp, &r);
                for (int end = 0; !s && !end;) {
                    const uint8_t *d;
                    size_t l;
                    s = wf__tfrecord_next(r, &d, &l, &end);
                    if (!s && !end) count++;
                }
                wf__tfrecord_close(r);
                done = !s && count == 2;
            } else if (fmt == 1) {
                wf__csv_reader *r = NULL;
                s = wf__csv_open(cp, &co, &r);
                for (int end = 0; !s && !end;) {
                    const wf__csv_field *fl;
                    s = wf__csv_next(r, &fl, &end);
                    if (!s && !end) count++;
                }
                wf__csv_close(r);
                done = !s && count == 2;
            } else if (fmt == 2) {
                wf__textline_reader *r = NULL;
                s = wf__textline_open(cp, 0, &r);
                for (int end = 0; !s && !end;) {
                    const char *l;
                    size_t n;
                    s = wf__textline_next(r, &l, &n, &end);
                    if (!s && !end) count++;
                }
                wf__textline_close(r);
                done = !s && count == 3;
            } else {
                char pat[400], **paths = NULL;
                int64_t n = 0;
                snprintf(pat, sizeof pat, "%s/oom.*", g_dir);
                s = wf__list_files(pat, &paths, &n);
                wf__list_files_free(paths, n);
                done = !s && n == 2;
            }
            wf__fault_inject(0);
            if (s) {
                failures++;
                if (wf_status_code(s) != WF_OUT_OF_MEMORY)
                    CHECK_FAIL_("format %d, fault %ld: %s: %s", fmt, k, wf_code_name(wf_status_code(s)), wf_status_message(s));
                wf_status_free(s);
            } else if (!done) {
                CHECK_FAIL_("format %d, fault %ld: succeeded with a wrong count %d", fmt, k, count);
            }
        }
        CHECK(done);
        CHECK(failures >= 1 + (fmt < 3));
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/weft_test_records_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) {
        perror(g_dir);
        return 1;
    }
    snprintf(g_root, sizeof g_root, "%s", __FILE__);
    char *cut = strstr(g_root, "/tests/test_records.c");
    if (cut) *cut = 0;
    else snprintf(g_root, sizeof g_root, ".");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/data/make_records.py %s", g_root, g_dir);
    g_have_ref = access("/usr/bin/python3", X_OK) == 0 && sh(cmd) == 0;

    RUN_TEST(test_crc32c);
    RUN_TEST(test_tfrecord_known);
    RUN_TEST(test_tfrecord_seek);
    RUN_TEST(test_tfrecord_errors);
    RUN_TEST(test_textline);
    RUN_TEST(test_csv_python);
    RUN_TEST(test_csv_errors);
    RUN_TEST(test_csv_big);
    RUN_TEST(test_list_files);
    RUN_TEST(test_oom);

    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    sh(cmd);
    return check_summary();
}
