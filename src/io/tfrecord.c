/*
 * TFRecord files, TensorFlow's record container: per record a u64 little-endian length, the masked
 * CRC32C of those 8 bytes, the data, the masked CRC32C of the data. Read record by record (plain or
 * gzip-compressed) with the position kept for checkpoints; written whole by wf_tfrecord_write.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io.h"
#include "io/records.h"

struct wf__tfrecord_reader {
    char *path;
    FILE *f;            /* uncompressed */
    gzFile gz;          /* GZIP */
    uint64_t size;      /* uncompressed: the file's size (regular files), else UINT64_MAX */
    uint64_t max_record;
    int64_t offset;     /* of the next record, in the record stream */
    int64_t index;      /* of the next record */
    uint8_t *buf;
    size_t cap;
};

static wf_status *open_error(const char *path)
{
    return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
}

wf_status *wf__tfrecord_open_with(const char *path, const wf__tfrecord_options *opts, wf__tfrecord_reader **out)
{
    if (!path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf__tfrecord_open: NULL path or out");
    *out = NULL;
    wf__tfrecord_options o = opts ? *opts : (wf__tfrecord_options){0};
    if (o.compression != WF__COMPRESSION_NONE && o.compression != WF__COMPRESSION_GZIP)
        return wf__status(WF_INVALID_ARGUMENT, "%s: unknown TFRecord compression %d", path, (int)o.compression);
    wf__tfrecord_reader *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom(path, sizeof *r);
    wf_status *s = NULL;
    r->max_record = o.max_record ? o.max_record : WF__TFRECORD_MAX_RECORD;
    r->size = UINT64_MAX;
    if (!(r->path = wf__strdup(path))) {
        s = wf__oom(path, strlen(path) + 1);
        goto fail;
    }
    if (!(r->f = fopen(path, "rb"))) {
        s = open_error(path);
        goto fail;
    }
    struct stat st;
    if (fstat(fileno(r->f), &st) != 0) {
        s = wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: is a directory", path);
        goto fail;
    }
    if (o.compression == WF__COMPRESSION_GZIP) {
        int fd = dup(fileno(r->f));
        if (fd < 0) {
            s = wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
            goto fail;
        }
        if (!(r->gz = gzdopen(fd, "rb"))) {
            close(fd);
            s = wf__status(WF_OUT_OF_MEMORY, "%s: out of memory opening the gzip stream", path);
            goto fail;
        }
        fclose(r->f);
        r->f = NULL;
        /* zlib would pass a plain file through; TensorFlow refuses one, and so does this */
        if (st.st_size > 0 && gzdirect(r->gz)) {
            s = wf__status(WF_INVALID_ARGUMENT, "%s: not a gzip file (the reader was opened for GZIP compression)",
                           path);
            goto fail;
        }
    } else if (S_ISREG(st.st_mode)) {
        r->size = (uint64_t)st.st_size;
    }
    *out = r;
    return NULL;
fail:
    wf__tfrecord_close(r);
    return s;
}

wf_status *wf__tfrecord_open(const char *path, wf__tfrecord_reader **out)
{
    return wf__tfrecord_open_with(path, NULL, out);
}

void wf__tfrecord_close(wf__tfrecord_reader *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    if (r->gz) gzclose(r->gz);
    wf__free(r->buf);
    wf__free(r->path);
    wf__free(r);
}

int64_t wf__tfrecord_tell(const wf__tfrecord_reader *r) { return r->offset; }
int64_t wf__tfrecord_index(const wf__tfrecord_reader *r) { return r->index; }

/* Reads up to n bytes at the current position; *got is how many came (short only at the end). */
static wf_status *rd(wf__tfrecord_reader *r, void *buf, size_t n, size_t *got)
{
    size_t done = 0;
    if (r->f) {
        done = fread(buf, 1, n, r->f);
        if (done < n && ferror(r->f))
            return wf__status(WF_IO_ERROR, "%s: read failed at byte %lld: %s", r->path, (long long)r->offset,
                              strerror(errno));
    } else {
        while (done < n) {
            unsigned want = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
            int k = gzread(r->gz, (char *)buf + done, want);
            if (k <= 0) break;
            done += (size_t)k;
        }
        int err = Z_OK;
        const char *msg = gzerror(r->gz, &err);
        if (err == Z_DATA_ERROR)
            return wf__status(WF_DATA_LOSS, "%s: gzip stream is corrupt (%s) near record %lld at byte %lld of the "
                              "uncompressed stream", r->path, msg, (long long)r->index, (long long)r->offset);
        if (err == Z_MEM_ERROR) return wf__status(WF_OUT_OF_MEMORY, "%s: out of memory in zlib", r->path);
        if (err == Z_ERRNO) return wf__status(WF_IO_ERROR, "%s: read failed: %s", r->path, strerror(errno));
        /* Z_BUF_ERROR: the stream ends early; the short count says so below, as a truncated record */
        if (err != Z_OK && err != Z_BUF_ERROR) return wf__status(WF_IO_ERROR, "%s: gzip error (%s)", r->path, msg);
    }
    *got = done;
    return NULL;
}

static wf_status *loss(wf__tfrecord_reader *r, const char *fmt, ...) WF__PRINTF(2, 3);
static wf_status *loss(wf__tfrecord_reader *r, const char *fmt, ...)
{
    char detail[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return wf__status(WF_DATA_LOSS, "%s: record %lld at byte %lld: %s", r->path, (long long)r->index,
                      (long long)r->offset, detail);
}

static wf_status *grow(wf__tfrecord_reader *r, size_t need)
{
    if (need <= r->cap) return NULL;
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *b = wf__realloc(r->buf, r->cap, cap);
    if (!b) return wf__oom(r->path, cap);
    r->buf = b;
    r->cap = cap;
    return NULL;
}

static wf_status *next_record(wf__tfrecord_reader *r, const uint8_t **data, size_t *len, int *end)
{
    uint8_t head[12];
    size_t got;
    WF__TRY(rd(r, head, 12, &got));
    if (got == 0) {
        *end = 1;
        return NULL;
    }
    if (got < 12)
        return loss(r, "truncated record: %zu of the header's 12 bytes, then the end of the file", got);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)head[i] << (8 * i);
    uint32_t want = (uint32_t)head[8] | (uint32_t)head[9] << 8 | (uint32_t)head[10] << 16 | (uint32_t)head[11] << 24;
    uint32_t have = wf__crc32c_mask(wf_crc32c(head, 8, 0));
    if (want != have)
        return loss(r, "bad length CRC (stored 0x%08x, computed 0x%08x): the file is corrupt", want, have);
    /* The length passed its CRC, but a file can still be cut, or made to claim a huge record. */
    if (r->size != UINT64_MAX) {
        uint64_t rest = r->size >= (uint64_t)r->offset + 12 ? r->size - (uint64_t)r->offset - 12 : 0;
        if (n > rest || rest - n < 4)
            return loss(r, "truncated record: its length is %llu bytes, but %llu bytes (with the data CRC) remain "
                        "in the file", (unsigned long long)n, (unsigned long long)rest);
    }
    if (n > r->max_record)
        return loss(r, "record length %llu is over the limit of %llu bytes", (unsigned long long)n,
                    (unsigned long long)r->max_record);
    /* With gzip the uncompressed size is unknown: the buffer grows as the data arrives, so a false
     * length costs only what the stream really holds. */
    size_t total = (size_t)n + 4, done = 0;
    if (r->f) {
        WF__TRY(wf__io_check_memory(r->path, "a TFRecord record", total));
        WF__TRY(grow(r, total));
        WF__TRY(rd(r, r->buf, total, &done));
    } else {
        while (done < total) {
            size_t chunk = total - done < ((size_t)1 << 20) ? total - done : (size_t)1 << 20;
            WF__TRY(grow(r, done + chunk));
            size_t k;
            WF__TRY(rd(r, r->buf + done, chunk, &k));
            done += k;
            if (k < chunk) break;
        }
    }
    if (done < total)
        return loss(r, "truncated record: %zu data and CRC bytes, then the end of the file (the length says %zu)",
                    done, total);
    uint8_t *c = r->buf + n;
    want = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
    have = wf__crc32c_mask(wf_crc32c(r->buf, (size_t)n, 0));
    if (want != have)
        return loss(r, "bad data CRC (stored 0x%08x, computed 0x%08x): the file is corrupt", want, have);
    r->offset += 12 + (int64_t)total;
    r->index++;
    *data = r->buf;
    *len = (size_t)n;
    return NULL;
}

wf_status *wf__tfrecord_next(wf__tfrecord_reader *r, const uint8_t **data, size_t *len, int *end)
{
    *data = NULL;
    *len = 0;
    *end = 0;
    wf_status *s = next_record(r, data, len, end);
    if (s) {
        /* back to the start of the record at fault, so that next reports it again rather than reading
         * on from the middle of it */
        *data = NULL;
        *len = 0;
        wf_status_free(wf__tfrecord_seek(r, r->offset, r->index));
    }
    return s;
}

wf_status *wf__tfrecord_seek(wf__tfrecord_reader *r, int64_t offset, int64_t record_index)
{
    if (offset < 0 || record_index < 0)
        return wf__status(WF_INVALID_ARGUMENT, "%s: cannot seek to byte %lld, record %lld", r->path,
                          (long long)offset, (long long)record_index);
    if (r->size != UINT64_MAX && (uint64_t)offset > r->size)
        return wf__status(WF_INVALID_ARGUMENT, "%s: cannot seek to byte %lld: the file has %llu bytes", r->path,
                          (long long)offset, (unsigned long long)r->size);
    if (r->f) {
        if (fseeko(r->f, (off_t)offset, SEEK_SET) != 0)
            return wf__status(WF_IO_ERROR, "%s: seek to byte %lld failed: %s", r->path, (long long)offset,
                              strerror(errno));
    } else {
        gzclearerr(r->gz);
        z_off_t at = gzseek(r->gz, (z_off_t)offset, SEEK_SET);
        if (at != (z_off_t)offset)
            return wf__status(WF_INVALID_ARGUMENT, "%s: cannot seek to byte %lld of the uncompressed stream",
                              r->path, (long long)offset);
    }
    r->offset = offset;
    r->index = record_index;
    return NULL;
}

wf_status *wf_tfrecord_write(const char *path, const void *const *records, const size_t *lens, int64_t n)
{
    if (!path || n < 0 || (n && (!records || !lens)))
        return wf__status(WF_INVALID_ARGUMENT, "wf_tfrecord_write: NULL path, records or lens, or n < 0");
    for (int64_t i = 0; i < n; i++)
        if (!records[i] && lens[i])
            return wf__status(WF_INVALID_ARGUMENT, "%s: record %lld is NULL with length %zu", path, (long long)i,
                              lens[i]);
    wf__str tmp = {0};
    wf_status *s = NULL;
    wf__str_appendf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.failed) return wf__oom(path, tmp.len);
    FILE *f = fopen(tmp.p, "wb");
    if (!f) {
        s = wf__status(WF_IO_ERROR, "%s: cannot create %s: %s", path, tmp.p, strerror(errno));
        goto done;
    }
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) {
        uint8_t head[12], tail[4];
        uint64_t len = lens[i];
        for (int k = 0; k < 8; k++) head[k] = (uint8_t)(len >> (8 * k));
        uint32_t c = wf__crc32c_mask(wf_crc32c(head, 8, 0));
        for (int k = 0; k < 4; k++) head[8 + k] = (uint8_t)(c >> (8 * k));
        c = wf__crc32c_mask(wf_crc32c(records[i], lens[i], 0));
        for (int k = 0; k < 4; k++) tail[k] = (uint8_t)(c >> (8 * k));
        ok = fwrite(head, 1, 12, f) == 12 && (!lens[i] || fwrite(records[i], 1, lens[i], f) == lens[i]) &&
             fwrite(tail, 1, 4, f) == 4;
    }
    s = wf__io_commit(f, ok, tmp.p, path);
done:
    wf__str_free(&tmp);
    return s;
}
