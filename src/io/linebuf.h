/*
 * The buffered reader under the text-line and CSV readers (textline.c, csv.c): the file is read in 64 KiB
 * blocks into a window that grows, up to a limit, only while one element (a line, a row) does not fit.
 */
#ifndef WF_IO_LINEBUF_H
#define WF_IO_LINEBUF_H

#include "io/records.h"

#define WF__LINEBUF_BLOCK ((size_t)64 << 10)

typedef struct wf__linebuf {
    char *path;
    int fd;
    char *buf;       /* cap + 1 bytes: room for a NUL after the last byte read */
    size_t cap, max_cap;
    size_t pos, end; /* the unread bytes are buf[pos..end) */
    int64_t base;    /* file offset of buf[0] */
    int64_t line;    /* 1-based number of the line at pos */
    bool eof;        /* nothing is left to read after buf[end) */
    uint64_t size;   /* the file's size (a regular file), else UINT64_MAX */
} wf__linebuf;

/* Opens path for elements up to `limit` bytes. NOT_FOUND naming the path when it does not exist. */
wf_status *wf__linebuf_open(wf__linebuf *b, const char *path, size_t limit);
void wf__linebuf_close(wf__linebuf *b); /* also on a zeroed or half-opened one */
/* Reads more after buf[end): moves the unread bytes to the front of the window first, and grows the
 * window when they fill it. *full: the window is at its limit and holds only unread bytes (the element
 * in it is too long); nothing was read. Sets eof at the end of the file. */
wf_status *wf__linebuf_more(wf__linebuf *b, bool *full);
static inline int64_t wf__linebuf_tell(const wf__linebuf *b) { return b->base + (int64_t)b->pos; }
/* INVALID_ARGUMENT for a position outside the file. */
wf_status *wf__linebuf_seek(wf__linebuf *b, int64_t offset, int64_t line);

#endif
