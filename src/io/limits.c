/*
 * Limits of what a file may make the library allocate (see io.h): the host allocator's limit (the
 * machine's memory, src/core/alloc.c), so that a claim larger than memory is refused up front; and the
 * writers' shared commit (flush, fsync, rename).
 */
#include "io/io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

wf_status *wf__io_check_memory(const char *path, const char *what, uint64_t bytes)
{
    uint64_t mem = wf__host_alloc_limit();
    if (bytes <= mem) return NULL;
    return wf__status(WF_OUT_OF_MEMORY, "%s: %s needs %llu bytes (%.1f GiB), more than this machine's memory "
                      "(%.1f GiB)", path, what, (unsigned long long)bytes, (double)bytes / (1u << 30),
                      (double)mem / (1u << 30));
}

const char *wf__io_quote(const char *s, size_t n, char *buf, size_t cap)
{
    if (!cap) return buf;
    bool cut = n > cap - 1 && cap >= 4;
    size_t m = cut ? cap - 4 : n < cap - 1 ? n : cap - 1, o = 0;
    for (size_t i = 0; i < m; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (cut) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = 0;
    return buf;
}

wf_status *wf__io_commit(FILE *f, bool ok, const char *tmp, const char *path)
{
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (ok) return NULL;
    unlink(tmp);
    return wf__status(WF_IO_ERROR, "%s: write failed: %s", path, strerror(err ? err : EIO));
}
