/*
 * Limits of what a file may make the library allocate (see io.h): the machine's memory, read from
 * sysinfo and the cgroup, so that a claim larger than memory is refused instead of overcommitted.
 */
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

/* The cgroup v2 limit of this process ("max" or absent: none). Only the root-level file is read: in a
 * container that is the container's own limit. */
static uint64_t cgroup_limit(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f) return UINT64_MAX;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || buf[0] < '0' || buf[0] > '9') return UINT64_MAX;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return v ? (uint64_t)v : UINT64_MAX;
}

uint64_t wf__io_host_memory(void)
{
    struct sysinfo si;
    uint64_t total = UINT64_MAX;
    if (sysinfo(&si) == 0) {
        uint64_t unit = si.mem_unit ? si.mem_unit : 1, ram, swap;
        if (wf__io_mul(si.totalram, unit, &ram) && wf__io_mul(si.totalswap, unit, &swap) && ram + swap >= ram)
            total = ram + swap;
    }
    uint64_t cg = cgroup_limit();
    return cg < total ? cg : total;
}

wf_status *wf__io_check_memory(const char *path, const char *what, uint64_t bytes)
{
    uint64_t mem = wf__io_host_memory();
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
