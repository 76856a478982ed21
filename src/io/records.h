/*
 * Readers of record files for the input pipelines' sources (src/data/): TFRecord, CSV, text lines, and
 * file-pattern listing. Each reader can report its position (the byte offset of the next element and
 * its record or line number) and go back to one, so an iterator checkpoint resumes at the same element.
 * Every error names the file and the byte offset and/or line number at fault. Files are untrusted: a
 * length or a line larger than the file or a limit is an error, never an allocation of that size.
 */
#ifndef WF_IO_RECORDS_H
#define WF_IO_RECORDS_H

#include "core/core.h"

/* ---- CRC32C (crc32c.c) ------------------------------------------------------------------------------
 * wf_crc32c (weft.h) picks the SSE4.2 instruction when the CPU has it, at run time; these two let the
 * tests compare both paths. */
uint32_t wf__crc32c_portable(const void *data, size_t n, uint32_t crc); /* slicing-by-8 tables */
bool wf__crc32c_hw_available(void);
/* TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
static inline uint32_t wf__crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- TFRecord (tfrecord.c) ----------------------------------------------------------------------------
 * Each record: u64 length (little-endian), u32 masked CRC32C of those 8 bytes, the data, u32 masked CRC32C
 * of the data. Positions are byte offsets in the (uncompressed) record stream and 0-based record indices. */
typedef struct wf__tfrecord_reader wf__tfrecord_reader;

typedef enum wf__compression { WF__COMPRESSION_NONE = 0, WF__COMPRESSION_GZIP = 1 } wf__compression;

typedef struct wf__tfrecord_options {
    wf__compression compression; /* GZIP: a gzip stream of TFRecords (TF's compression_type="GZIP") */
    uint64_t max_record;         /* largest record accepted; 0: WF__TFRECORD_MAX_RECORD */
} wf__tfrecord_options;
#define WF__TFRECORD_MAX_RECORD ((uint64_t)1 << 30)

/* NOT_FOUND naming the path when it does not exist, IO_ERROR for other open failures. Caller closes *out. */
wf_status *wf__tfrecord_open(const char *path, wf__tfrecord_reader **out);
/* opts may be NULL (the defaults: uncompressed, 1 GiB records). */
wf_status *wf__tfrecord_open_with(const char *path, const wf__tfrecord_options *opts, wf__tfrecord_reader **out);
/* The next record: *data and *len stay valid until the next call on r (next, seek, close). At a clean end
 * of the file: NULL status, *end = 1, *data = NULL, *len = 0. A truncated record, a bad length CRC or a bad
 * data CRC is DATA_LOSS "PATH: record N at byte OFF: ..."; a length over the file's remainder or the
 * limit is DATA_LOSS too, found before anything of that size is allocated. After an error the reader
 * stays at the record at fault (next fails again); seek moves it. */
wf_status *wf__tfrecord_next(wf__tfrecord_reader *r, const uint8_t **data, size_t *len, int *end);
int64_t wf__tfrecord_tell(const wf__tfrecord_reader *r);  /* byte offset of the next record */
int64_t wf__tfrecord_index(const wf__tfrecord_reader *r); /* 0-based index of the next record */
/* Goes to a position that tell/index reported (record_index is only for numbering and messages: the
 * offset is what is read next). An offset past the end of the file or negative values are
 * INVALID_ARGUMENT; an offset that is not a record boundary shows as DATA_LOSS at the next read.
 * With GZIP, seeking back decompresses again from the start. */
wf_status *wf__tfrecord_seek(wf__tfrecord_reader *r, int64_t offset, int64_t record_index);
void wf__tfrecord_close(wf__tfrecord_reader *r); /* accepts NULL */

/* ---- Text lines (textline.c) ---------------------------------------------------------------------------
 * A buffered reader (64 KiB blocks) shared by the text-line and the CSV readers: lines end with '\n'; a
 * trailing '\r' is dropped (CRLF files); the last line may lack its '\n'. Lines are numbered from 1. */
#define WF__TEXT_MAX_LINE ((size_t)16 << 20)

typedef struct wf__textline_reader wf__textline_reader;

/* max_line: the longest line accepted, in bytes without its line end; 0: WF__TEXT_MAX_LINE. A longer line
 * is INVALID_ARGUMENT naming the file and line, and the buffer never grows past it. */
wf_status *wf__textline_open(const char *path, size_t max_line, wf__textline_reader **out);
/* The next line without its '\n' (and '\r'); *line is NUL-terminated and valid until the next call on r.
 * At the end of the file: NULL status and *end = 1. */
wf_status *wf__textline_next(wf__textline_reader *r, const char **line, size_t *len, int *end);
int64_t wf__textline_tell(const wf__textline_reader *r); /* byte offset of the next line */
int64_t wf__textline_line(const wf__textline_reader *r); /* 1-based number of the next line */
/* Goes to a position that tell/line reported; INVALID_ARGUMENT for one outside the file. */
wf_status *wf__textline_seek(wf__textline_reader *r, int64_t offset, int64_t line);
void wf__textline_close(wf__textline_reader *r); /* accepts NULL */

/* ---- CSV (csv.c) ------------------------------------------------------------------------------------------
 * RFC 4180: fields separated by a one-byte delimiter; a field may be quoted with '"', and inside quotes
 * "" is a quote and the delimiter, CR and LF are data. A quote inside an unquoted field or text after a
 * closing quote is an error (as in TensorFlow's decode_csv). Rows end with LF or CRLF; the last may lack
 * it; empty lines are skipped. Numbers are parsed in the C locale and may have spaces around them. */

/* The column type that hands out the field's bytes, until weft has a string dtype (WF_STRING). */
#define WF__CSV_STRING ((wf_dtype)0x100)

typedef struct wf__csv_column {
    wf_dtype dtype;       /* WF_F32, WF_F64, WF_I32, WF_I64 or WF__CSV_STRING */
    int has_default;      /* 1: an empty field takes the default; 0: an empty field is an error */
    double default_f;     /* WF_F32, WF_F64 */
    int64_t default_i;    /* WF_I32, WF_I64 */
    const char *default_s;/* WF__CSV_STRING (copied at open; NULL is "") */
} wf__csv_column;

typedef struct wf__csv_options {
    char delimiter;        /* 0: ',' (the quote, CR and LF cannot be delimiters) */
    int header;            /* 1: the first row names the columns and is not data */
    const wf__csv_column *columns; /* the types of the columns read, n_columns of them */
    int n_columns;
    /* NULL: every column of the file is read, so each row has n_columns fields. Otherwise the file's
     * columns read, in increasing order, n_columns of them (columns[i] types file column select[i]). */
    const int *select;
    /* How many fields each row has: 0 with select NULL: n_columns; 0 with select: the header's count
     * (a header is then required). */
    int n_file_columns;
    size_t max_row;        /* the longest row in bytes (quoted newlines included); 0: WF__TEXT_MAX_LINE */
} wf__csv_options;

/* One field of a row, for a column read. */
typedef struct wf__csv_field {
    const char *text;      /* the field's bytes after unquoting, NUL-terminated (the default's for an */
    size_t len;            /* empty field that took it): valid until the next call on the reader */
    int defaulted;         /* the field was empty and took the column's default */
    union {
        float f32;
        double f64;
        int32_t i32;
        int64_t i64;
    } v;                   /* the value of a numeric column */
} wf__csv_field;

typedef struct wf__csv_reader wf__csv_reader;

/* Checks the options (INVALID_ARGUMENT naming what is wrong), opens the file (NOT_FOUND naming it) and
 * reads the header when there is one. Caller closes *out. */
wf_status *wf__csv_open(const char *path, const wf__csv_options *opts, wf__csv_reader **out);
/* The next row: *fields points to n_columns fields owned by r, valid until the next call on r. At the end:
 * NULL status and *end = 1. Errors (INVALID_ARGUMENT) name the file and the line the row starts on:
 * a wrong number of fields, a field that is not a number of its column's type (with the column's number
 * and header name, and the text), an empty field without a default, a stray quote, a quoted field still
 * open at the end of the file, a row longer than max_row. After an error in a row's fields (their count,
 * a value, a stray quote) the reader is past that row, so a caller may skip it; after a row too long or a
 * quote still open at the end it stays there (next fails again). */
wf_status *wf__csv_next(wf__csv_reader *r, const wf__csv_field **fields, int *end);
int64_t wf__csv_tell(const wf__csv_reader *r); /* byte offset of the next row */
int64_t wf__csv_line(const wf__csv_reader *r); /* 1-based line number the next row starts on */
/* Goes to a position that tell/line reported; INVALID_ARGUMENT for one outside the file or inside the
 * header. */
wf_status *wf__csv_seek(wf__csv_reader *r, int64_t offset, int64_t line);
/* The header's fields (after unquoting), n of them; 0 and NULL without a header. Owned by r. */
int wf__csv_header_count(const wf__csv_reader *r);
const char *wf__csv_header_name(const wf__csv_reader *r, int i);
void wf__csv_close(wf__csv_reader *r); /* accepts NULL */

/* ---- File patterns (glob.c) ---------------------------------------------------------------------------
 * The files matching glob(3) patterns, sorted bytewise (strcmp) so the order is the same on every machine
 * and locale, without duplicates. A set of patterns matching nothing is NOT_FOUND "No files matched
 * pattern: P" (TensorFlow's wording). Caller frees with wf__list_files_free. */
wf_status *wf__list_files(const char *pattern, char ***paths, int64_t *n);
wf_status *wf__list_files_multi(const char *const *patterns, int n_patterns, char ***paths, int64_t *n);
void wf__list_files_free(char **paths, int64_t n); /* accepts NULL */

#endif
