/*
 * A growing string for the device plugins that write program source at run time (OpenCL C, CUDA C++ for
 * NVRTC). Header-only and free of libweft calls because the plugins cannot link libweft: the caller
 * gives the allocator (its host table's malloc and free). An allocation failure sets `failed`, after
 * which wf__ku_put does nothing, so a writer checks once at the end.
 */
#ifndef WF_OPS_KUTIL_SBUF_H
#define WF_OPS_KUTIL_SBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct wf__ku_sbuf {
    char *p; /* NUL-terminated once anything was put; NULL before */
    size_t len, cap;
    bool failed;
    void *(*alloc)(size_t);
    void (*release)(void *);
} wf__ku_sbuf;

static inline void wf__ku_put(wf__ku_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void wf__ku_put(wf__ku_sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->failed = true;
            return;
        }
        if (b->p && b->len + (size_t)w < b->cap) {
            b->len += (size_t)w;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 4096) + (size_t)w;
        char *np = b->alloc(nc);
        if (!np) {
            b->failed = true;
            return;
        }
        if (b->p) memcpy(np, b->p, b->len + 1);
        else np[0] = 0;
        b->release(b->p);
        b->p = np;
        b->cap = nc;
    }
}

#endif
