/*
 * libFuzzer target for the CSV and text-line readers. The first two bytes of an input pick the CSV
 * options (header, delimiter, column count and types, defaults, a selection, a small row limit); the
 * rest is the file. Every failure must be a one-line status naming the file; a row's position saved and
 * restored in a new reader must read the same row; the text-line reader must read the same file's
 * lines again from a saved position. Built and run by scripts/fuzz.sh.
 */
#include "fuzz_file.h"
#include "io/records.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("input.csv");
    return 0;
}

static uint32_t row_hash(const wf__csv_field *f, int n)
{
    uint32_t h = 0;
    for (int i = 0; i < n; i++) {
        h = wf_crc32c(f[i].text, f[i].len, h);
        h = wf_crc32c(&f[i].v, sizeof f[i].v, h);
    }
    return h;
}

static void csv(const uint8_t *data, size_t size, uint8_t a, uint8_t b)
{
    static const wf_dtype types[5] = {WF_F32, WF_F64, WF_I32, WF_I64, WF__CSV_STRING};
    static const char delims[4] = {',', ';', '\t', '|'};
    wf__csv_column cols[4];
    int n = 1 + (b & 3), sel[4];
    for (int i = 0; i < n; i++) {
        uint8_t t = (uint8_t)(b >> 2) + (uint8_t)(i * 3);
        cols[i] = (wf__csv_column){.dtype = types[t % 5], .has_default = (a >> (4 + i)) & 1, .default_f = 1.5,
                                   .default_i = 7, .default_s = "dflt"};
        sel[i] = 2 * i;
    }
    wf__csv_options o = {.delimiter = delims[(a >> 1) & 3], .header = a & 1, .columns = cols, .n_columns = n,
                         .max_row = (a & 8) ? 64 : 0};
    if (b & 0x80) {
        o.select = sel;
        o.n_file_columns = (b & 0x40) ? 0 : 2 * n;
    }
    wf__csv_reader *r = NULL;
    wf_status *s = wf__csv_open(g_fuzz_path, &o, &r);
    if (s) {
        if (r) abort();
        fuzz_check_status(s, "input.csv", true, data, size);
        return;
    }
    int64_t off = -1, line = -1;
    uint32_t hash = 0;
    for (int rows = 0; rows < 100000; rows++) {
        int64_t at = wf__csv_tell(r), ln = wf__csv_line(r);
        const wf__csv_field *f;
        int end;
        s = wf__csv_next(r, &f, &end);
        if (s) {
            fuzz_check_status(s, "input.csv", true, data, size);
            if (wf__csv_tell(r) == at) break; /* an error that stays at the row ends the file */
            continue;
        }
        if (end) break;
        if (off < 0 || rows % 7 == 3) {
            off = at;
            line = ln;
            hash = row_hash(f, n);
        }
    }
    wf__csv_close(r);
    if (off < 0) return;
    if (wf__csv_open(g_fuzz_path, &o, &r)) abort();
    const wf__csv_field *f;
    int end;
    if (wf__csv_seek(r, off, line) || wf__csv_next(r, &f, &end) || end || row_hash(f, n) != hash) abort();
    wf__csv_close(r);
}

static void lines(const uint8_t *data, size_t size, uint8_t a)
{
    wf__textline_reader *r = NULL;
    wf_status *s = wf__textline_open(g_fuzz_path, (a & 8) ? 32 : 0, &r);
    if (s) {
        fuzz_check_status(s, "input.csv", true, data, size);
        return;
    }
    int64_t off = -1, ln = -1;
    uint32_t hash = 0;
    for (int i = 0;; i++) {
        int64_t at = wf__textline_tell(r), l0 = wf__textline_line(r);
        const char *l;
        size_t n;
        int end;
        s = wf__textline_next(r, &l, &n, &end);
        if (s) {
            fuzz_check_status(s, "input.csv", true, data, size);
            break;
        }
        if (end) break;
        if (l[n] || memchr(l, '\n', n)) abort();
        if (off < 0 || i % 5 == 2) {
            off = at;
            ln = l0;
            hash = wf_crc32c(l, n, 0);
        }
    }
    if (off >= 0) {
        const char *l;
        size_t n;
        int end;
        if (wf__textline_seek(r, off, ln) || wf__textline_next(r, &l, &n, &end) || end || wf_crc32c(l, n, 0) != hash)
            abort();
    }
    wf__textline_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    fuzz_write(data + 2, size - 2);
    csv(data + 2, size - 2, data[0], data[1]);
    lines(data + 2, size - 2, data[0]);
    return 0;
}
