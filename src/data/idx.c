/*
 * IDX files, the format MNIST and Fashion-MNIST ship in: a magic with the element type and the rank,
 * big-endian 32-bit dims, then the big-endian elements. Read through zlib, so a .gz file and a plain one
 * take the same path (gzread passes an uncompressed file through unchanged).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>

#include "core/core.h"

static wf_dtype idx_dtype(unsigned code)
{
    switch (code) {
    case 0x08: return WF_U8;
    case 0x09: return WF_I8;
    case 0x0B: return WF_I16;
    case 0x0C: return WF_I32;
    case 0x0D: return WF_F32;
    case 0x0E: return WF_F64;
    default: return WF_DTYPE_INVALID;
    }
}

/* Reads up to n bytes; returns how many arrived. A gzip stream that is corrupt or ends early is an error
 * (zlib reports a premature end only through gzerror, with a short count). */
static wf_status *gz_read_all(gzFile gz, const char *path, void *buf, size_t n, size_t *got)
{
    size_t done = 0;
    while (done < n) {
        unsigned want = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
        int r = gzread(gz, (char *)buf + done, want);
        if (r <= 0) break;
        done += (size_t)r;
    }
    *got = done;
    int err = Z_OK;
    const char *msg = gzerror(gz, &err);
    if (err == Z_BUF_ERROR) return wf__status(WF_INVALID_ARGUMENT, "%s: gzip stream is truncated (%s)", path, msg);
    if (err == Z_DATA_ERROR) return wf__status(WF_INVALID_ARGUMENT, "%s: gzip stream is corrupt (%s)", path, msg);
    if (err == Z_MEM_ERROR) return wf__status(WF_OUT_OF_MEMORY, "%s: out of memory in zlib", path);
    if (err == Z_ERRNO) return wf__status(WF_IO_ERROR, "%s: read failed: %s", path, strerror(errno));
    if (err != Z_OK) return wf__status(WF_IO_ERROR, "%s: gzip error (%s)", path, msg);
    return NULL;
}

/* IDX is big-endian; converts in place to the host's order. */
static void swap_bytes(void *data, int64_t count, size_t elem)
{
    unsigned char *p = data;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return;
#endif
    if (elem == 1) return;
    for (int64_t i = 0; i < count; i++, p += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            unsigned char c = p[a];
            p[a] = p[b];
            p[b] = c;
        }
}

wf_status *wf_idx_read(const char *path, wf_tensor **out)
{
    if (!path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_idx_read: NULL path or out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return wf__status(WF_OUT_OF_MEMORY, "%s: out of memory opening the file", path);
    }
    wf_status *s = NULL;
    wf_tensor *t = NULL;
    unsigned char head[4 + 4 * 255];
    size_t got;
    if ((s = gz_read_all(gz, path, head, 4, &got))) goto done;
    if (got < 4 || head[0] || head[1]) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: not an IDX file (%s)", path,
                       got == 0 ? "empty" : got < 4 ? "shorter than the 4-byte magic" : "bad magic: the first two bytes must be 0");
        goto done;
    }
    wf_dtype dt = idx_dtype(head[2]);
    int rank = head[3];
    if (!dt) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: IDX element type 0x%02x is unknown (0x08 u8, 0x09 i8, 0x0B i16, "
                       "0x0C i32, 0x0D f32, 0x0E f64)", path, head[2]);
        goto done;
    }
    if (rank < 1 || rank > WF_MAX_RANK) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: IDX rank %d is not supported (1 to %d)", path, rank, WF_MAX_RANK);
        goto done;
    }
    if ((s = gz_read_all(gz, path, head + 4, 4 * (size_t)rank, &got))) goto done;
    if (got < 4 * (size_t)rank) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: truncated IDX header: %d dims need %d bytes, found %zu", path,
                       rank, 4 * rank, got);
        goto done;
    }
    int64_t dims[WF_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        const unsigned char *d = head + 4 + 4 * i;
        dims[i] = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
    }
    if ((s = wf__tensor_alloc(dt, rank, dims, path, &t))) {
        s = wf__status_wrap(s, "%s", path);
        goto done;
    }
    if ((s = gz_read_all(gz, path, t->data, t->bytes, &got))) goto done;
    char shape[160];
    if (got < t->bytes) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: truncated IDX data: %s %s needs %zu bytes, the file holds %zu",
                       path, wf_dtype_name(dt), wf__shape_str(rank, dims, shape), t->bytes, got);
        goto done;
    }
    /* Bytes past the data mean the dims do not describe the file: count them for the message. */
    size_t extra = 0;
    for (;;) {
        unsigned char sink[4096];
        if ((s = gz_read_all(gz, path, sink, sizeof sink, &got))) goto done;
        extra += got;
        if (got < sizeof sink) break;
    }
    if (extra) {
        s = wf__status(WF_INVALID_ARGUMENT, "%s: IDX dims %s of %s need %zu bytes of data, but the file holds %zu "
                       "(%zu extra)", path, wf__shape_str(rank, dims, shape), wf_dtype_name(dt), t->bytes,
                       t->bytes + extra, extra);
        goto done;
    }
    swap_bytes(t->data, t->size, wf_dtype_size(dt));
done:
    gzclose(gz); /* closes fd too */
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    *out = t;
    return NULL;
}
