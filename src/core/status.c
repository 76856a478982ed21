/*
 * Status objects and a small growable string. A status is a code plus a heap message; NULL means OK.
 * Building a status must not itself fail silently, so an allocation failure here returns a static
 * out-of-memory status that wf_status_free ignores.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/core.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

struct wf_status {
    wf_code code;
    bool is_static;
    char *msg;
};

static wf_status g_oom_status = {WF_OUT_OF_MEMORY, true,
                                 (char *)"out of memory while reporting an error"};

wf_status *wf__vstatus(wf_code code, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    wf_status *s = wf__malloc(sizeof *s);
    char *msg = s && n >= 0 ? wf__malloc((size_t)n + 1) : NULL;
    if (!s || !msg) {
        wf__free(s);
        return &g_oom_status;
    }
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    s->code = code == WF_OK ? WF_INTERNAL : code;
    s->is_static = false;
    s->msg = msg;
    return s;
}

wf_status *wf__status(wf_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wf_status *s = wf__vstatus(code, fmt, ap);
    va_end(ap);
    return s;
}

wf_status *wf_status_new(wf_code code, const char *fmt, ...)
{
    if (code == WF_OK) code = WF_INTERNAL; /* a status is an error: NULL is success */
    va_list ap;
    va_start(ap, fmt);
    wf_status *s = wf__vstatus(code, fmt ? fmt : "", ap);
    va_end(ap);
    return s;
}

wf_status *wf__status_wrap(wf_status *old, const char *fmt, ...)
{
    if (!old) return NULL;
    va_list ap;
    va_start(ap, fmt);
    char head[512];
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    wf_status *s = wf__status(old->code, "%s: %s", head, old->msg);
    wf_status_free(old);
    return s;
}

wf_status *wf__oom(const char *what, size_t bytes)
{
    return wf__status(WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s on host", bytes,
                      what ? what : "an object");
}

wf_code wf_status_code(const wf_status *s) { return s ? s->code : WF_OK; }
const char *wf_status_message(const wf_status *s) { return s ? s->msg : ""; }

void wf_status_free(wf_status *s)
{
    if (!s || s->is_static) return;
    wf__free(s->msg);
    wf__free(s);
}

const char *wf_code_name(wf_code code)
{
    static const char *const names[] = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS",
                                        "OUT_OF_MEMORY", "UNIMPLEMENTED", "FAILED_PRECONDITION",
                                        "INTERNAL", "UNAVAILABLE", "CANCELLED", "IO_ERROR", "DATA_LOSS"};
    if ((unsigned)code < sizeof names / sizeof names[0]) return names[code];
    return "UNKNOWN";
}

const char *wf_version(void) { return "0.1.0"; }

void wf__str_appendf(wf__str *s, const char *fmt, ...)
{
    if (s->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (s->len + (size_t)n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < s->len + (size_t)n + 1) cap *= 2;
        char *p = wf__realloc(s->p, s->cap, cap);
        if (!p) {
            s->failed = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
}

void wf__str_append(wf__str *s, const char *text) { wf__str_appendf(s, "%s", text); }

void wf__str_free(wf__str *s)
{
    wf__free(s->p);
    memset(s, 0, sizeof *s);
}

int64_t wf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The cores this process may use: its affinity mask (taskset, a container's cpuset), capped by a
 * cgroup v2 CPU quota (cpu.max "QUOTA PERIOD", rounded up). Threads beyond that only wait for a core. */
int wf__num_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        long long quota, period;
        if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
            long q = (long)((quota + period - 1) / period);
            if (q < n) n = q;
        }
        fclose(f);
    }
    return n > 0 ? (int)n : 1;
}
