/*
 * Text files line by line (TextLineDataset's reader), on the buffered window of linebuf.h, which the CSV
 * reader shares.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"
#include "io/linebuf.h"

/* ---- the buffered window ------------------------------------------------------------------------------ */

wf_status *wf__linebuf_open(wf__linebuf *b, const char *path, size_t limit)
{
    memset(b, 0, sizeof *b);
    b->fd = -1;
    b->line = 1;
    b->size = UINT64_MAX;
    if (!(b->path = wf__strdup(path))) return wf__oom(path, strlen(path) + 1);
    b->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (b->fd < 0) return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(b->fd, &st) != 0) return wf__status(WF_IO_ERROR, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return wf__status(WF_INVALID_ARGUMENT, "%s: is a directory", path);
    if (S_ISREG(st.st_mode)) b->size = (uint64_t)st.st_size;
    /* an element of `limit` bytes, its line end ("\r\n"), and the rest of the block it arrived in */
    b->max_cap = limit > SIZE_MAX - 2 * WF__LINEBUF_BLOCK ? SIZE_MAX - 1 : limit + 2 * WF__LINEBUF_BLOCK;
    b->cap = WF__LINEBUF_BLOCK;
    if (!(b->buf = wf__malloc(b->cap + 1))) return wf__oom(path, b->cap + 1);
    return NULL;
}

void wf__linebuf_close(wf__linebuf *b)
{
    if (b->fd >= 0) close(b->fd);
    b->fd = -1;
    wf__free(b->buf);
    wf__free(b->path);
    b->buf = b->path = NULL;
}

wf_status *wf__linebuf_more(wf__linebuf *b, bool *full)
{
    *full = false;
    if (b->eof) return NULL;
    if (b->pos) {
        memmove(b->buf, b->buf + b->pos, b->end - b->pos);
        b->base += (int64_t)b->pos;
        b->end -= b->pos;
        b->pos = 0;
    }
    if (b->end == b->cap) {
        if (b->cap >= b->max_cap) {
            *full = true;
            return NULL;
        }
        size_t cap = b->cap > b->max_cap / 2 ? b->max_cap : b->cap * 2;
        WF__TRY(wf__io_check_memory(b->path, "a line", cap));
        char *nb = wf__realloc(b->buf, b->cap + 1, cap + 1);
        if (!nb) return wf__oom(b->path, cap + 1);
        b->buf = nb;
        b->cap = cap;
    }
    for (;;) {
        ssize_t k = read(b->fd, b->buf + b->end, b->cap - b->end);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            return wf__status(WF_IO_ERROR, "%s: read failed at byte %lld: %s", b->path,
                              (long long)(b->base + (int64_t)b->end), strerror(errno));
        if (k == 0) b->eof = true;
        b->end += (size_t)k;
        return NULL;
    }
}

wf_status *wf__linebuf_seek(wf__linebuf *b, int64_t offset, int64_t line)
{
    if (offset < 0 || line < 1 || (b->size != UINT64_MAX && (uint64_t)offset > b->size))
        return wf__status(WF_INVALID_ARGUMENT, "%s: cannot seek to byte %lld, line %lld (the file has %llu bytes)",
                          b->path, (long long)offset, (long long)line, (unsigned long long)b->size);
    /* ahead in the window: no read. Not behind pos: the readers may have written over what they
     * consumed (a NUL over a line end). */
    if (offset >= b->base + (int64_t)b->pos && offset <= b->base + (int64_t)b->end) {
        b->pos = (size_t)(offset - b->base);
        b->line = line;
        return NULL;
    }
    if (lseek(b->fd, (off_t)offset, SEEK_SET) < 0)
        return wf__status(WF_IO_ERROR, "%s: seek to byte %lld failed: %s", b->path, (long long)offset, strerror(errno));
    b->base = offset;
    b->pos = b->end = 0;
    b->eof = false;
    b->line = line;
    return NULL;
}

/* ---- text lines ---------------------------------------------------------------------------------------- */

struct wf__textline_reader {
    wf__linebuf b;
    size_t max_line;
    size_t scanned; /* bytes after pos known to hold no '\n' */
};

wf_status *wf__textline_open(const char *path, size_t max_line, wf__textline_reader **out)
{
    if (!path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf__textline_open: NULL path or out");
    *out = NULL;
    wf__textline_reader *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom(path, sizeof *r);
    r->max_line = max_line ? max_line : WF__TEXT_MAX_LINE;
    wf_status *s = wf__linebuf_open(&r->b, path, r->max_line);
    if (s) {
        wf__textline_close(r);
        return s;
    }
    *out = r;
    return NULL;
}

void wf__textline_close(wf__textline_reader *r)
{
    if (!r) return;
    wf__linebuf_close(&r->b);
    wf__free(r);
}

int64_t wf__textline_tell(const wf__textline_reader *r) { return wf__linebuf_tell(&r->b); }
int64_t wf__textline_line(const wf__textline_reader *r) { return r->b.line; }

wf_status *wf__textline_seek(wf__textline_reader *r, int64_t offset, int64_t line)
{
    r->scanned = 0;
    return wf__linebuf_seek(&r->b, offset, line);
}

static wf_status *too_long(const wf__textline_reader *r)
{
    return wf__status(WF_INVALID_ARGUMENT, "%s: line %lld (at byte %lld) is longer than the limit of %zu bytes",
                      r->b.path, (long long)r->b.line, (long long)wf__linebuf_tell(&r->b), r->max_line);
}

wf_status *wf__textline_next(wf__textline_reader *r, const char **line, size_t *len, int *end)
{
    wf__linebuf *b = &r->b;
    *line = NULL;
    *len = 0;
    *end = 0;
    for (;;) {
        char *p = b->buf + b->pos;
        size_t have = b->end - b->pos;
        char *nl = r->scanned < have ? memchr(p + r->scanned, '\n', have - r->scanned) : NULL;
        if (nl || (b->eof && have)) {
            size_t n = nl ? (size_t)(nl - p) : have;
            b->pos += nl ? n + 1 : n;
            if (n && p[n - 1] == '\r') n--;
            if (n > r->max_line) {
                b->pos = (size_t)(p - b->buf);
                return too_long(r);
            }
            p[n] = 0; /* over the '\r' or '\n', or the spare byte after the window */
            r->scanned = 0;
            b->line++;
            *line = p;
            *len = n;
            return NULL;
        }
        if (b->eof) {
            *end = 1;
            return NULL;
        }
        r->scanned = have;
        if (have > r->max_line + 1) return too_long(r);
        bool full;
        WF__TRY(wf__linebuf_more(b, &full));
        if (full) return too_long(r);
    }
}
