/*
 * The on-disk cache of compiled device programs, shared by the device plugins that build code at run
 * time (OpenCL programs, CUDA modules from NVRTC). Header-only and free of libweft calls because the
 * plugins cannot link libweft.
 *
 * Files live in $WEFT_CACHE_DIR (default ~/.cache/weft, /tmp/.cache/weft without a HOME) as
 * PREFIX-KEY.EXT, KEY a 64-bit FNV-1a hash of everything the binary depends on (the caller's choice:
 * source, options, device, driver and compiler versions). A file is written under a temporary name and
 * renamed into place, so that a concurrent process never reads half of one. What a caller reads back
 * may still be stale or foreign (another build, a hash collision, a truncated disk): it must check the
 * contents and rebuild from source when they do not load.
 */
#ifndef WF_OPS_KUTIL_CACHE_H
#define WF_OPS_KUTIL_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define WF__FNV_SEED 1469598103934665603ull

static inline uint64_t wf__ku_fnv(uint64_t h, const char *s)
{
    while (s && *s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static inline uint64_t wf__ku_fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The path of cache entry KEY; creates the folder (one level) if it is missing. */
static inline void wf__ku_cache_path(char *buf, size_t n, const char *prefix, uint64_t key, const char *ext)
{
    const char *dir = getenv("WEFT_CACHE_DIR");
    char def[512];
    if (!dir || !*dir) {
        const char *home = getenv("HOME");
        snprintf(def, sizeof def, "%s/.cache/weft", home && *home ? home : "/tmp");
        dir = def;
    }
    mkdir(dir, 0777);
    snprintf(buf, n, "%s/%s-%016llx.%s", dir, prefix, (unsigned long long)key, ext);
}

/* The whole file in a buffer from alloc, released with release on failure (NULL: missing, empty, larger
 * than max or unreadable). */
static inline void *wf__ku_cache_read(const char *path, void *(*alloc)(size_t), void (*release)(void *), size_t max,
                                      size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    long l = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (l > 0 && (size_t)l <= max && fseek(f, 0, SEEK_SET) == 0 && (buf = alloc((size_t)l))) {
        if (fread(buf, 1, (size_t)l, f) == (size_t)l) *len = (size_t)l;
        else {
            release(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* Writes nh + nb bytes (head, then body) as the file at path, atomically; false if it could not. */
static inline bool wf__ku_cache_write(const char *path, const void *head, size_t nh, const void *body, size_t nb)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = (!nh || fwrite(head, 1, nh, f) == nh) && (!nb || fwrite(body, 1, nb, f) == nb);
    if (fclose(f) != 0) ok = false;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) remove(tmp);
    return ok;
}

#endif
