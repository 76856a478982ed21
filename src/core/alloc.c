/*
 * The host allocation funnel. Every host allocation of the library passes through here so an
 * application can replace the allocator and tests can make the Nth allocation fail (SQLite-style
 * fault simulation) to prove that every error path frees what it took.
 */
#include "core/core.h"
#include "core/alloc_hooks.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

/* malloc plus a manual alignment step: glibc's memalign path is several times slower than malloc for
 * the small blocks tensors need. The raw pointer sits just below the aligned one. */
static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (align < 16) align = 16;
    if (size > SIZE_MAX - align) return NULL;
    char *raw = malloc(size + align);
    if (!raw) return NULL;
    char *p = (char *)(((uintptr_t)raw + align) & ~(uintptr_t)(align - 1));
    ((void **)p)[-1] = raw;
    return p;
}

static void default_dealloc(void *user, void *p)
{
    (void)user;
    free(((void **)p)[-1]);
}

static wf_alloc_fn g_alloc = default_alloc;
static wf_dealloc_fn g_dealloc = default_dealloc;
static void *g_user;
static atomic_long g_fault_at;   /* countdown to an injected failure; 0 = off */
static atomic_long g_count;
static atomic_long g_live;       /* blocks handed out and not yet freed */
static atomic_long g_fired;      /* injected failures so far */

void wf_set_allocator(wf_alloc_fn alloc, wf_dealloc_fn dealloc, void *user)
{
    wf__tensor_large_cache_flush(); /* its blocks belong to the allocator being replaced */
    if (alloc && dealloc) {
        g_alloc = alloc;
        g_dealloc = dealloc;
        g_user = user;
    } else {
        g_alloc = default_alloc;
        g_dealloc = default_dealloc;
        g_user = NULL;
    }
}

void wf__fault_inject(long nth) { atomic_store(&g_fault_at, nth); }
long wf__alloc_count(void) { return atomic_load(&g_count); }
long wf__alloc_live(void) { return atomic_load(&g_live); }
long wf__faults_fired(void) { return atomic_load(&g_fired); }

static bool inject_fault(void)
{
    long f = atomic_load_explicit(&g_fault_at, memory_order_relaxed);
    if (WF__LIKELY(f == 0)) return false;
    /* Fails exactly once, when the countdown reaches 1. */
    long now = atomic_fetch_sub(&g_fault_at, 1);
    if (now == 1) {
        atomic_fetch_add(&g_fired, 1);
        return true;
    }
    if (now <= 0) atomic_store(&g_fault_at, 0);
    return false;
}

/* The most one allocation may ask for: the machine's RAM and swap. With overcommit a larger malloc can
 * succeed, and the first pass over the pages then gets the process killed; a sanitizer's allocator
 * aborts on such requests instead of returning NULL. Refusing them here turns a hostile or mistaken
 * size into an out-of-memory status. */
/* The cgroup v2 limit of this process ("max" or absent: none). Only the root-level file is read: in a
 * container that is the container's own limit. */
static unsigned long long cgroup_limit(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f) return ULLONG_MAX;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || buf[0] < '0' || buf[0] > '9') return ULLONG_MAX;
    unsigned long long v = strtoull(buf, NULL, 10);
    return v ? v : ULLONG_MAX;
}

static size_t host_alloc_limit(void)
{
    static atomic_size_t limit; /* 0: not measured yet */
    size_t l = atomic_load_explicit(&limit, memory_order_relaxed);
    if (WF__LIKELY(l)) return l;
    struct sysinfo si;
    unsigned long long total = 0, unit, ram, swap, cg = cgroup_limit();
    if (sysinfo(&si) == 0) {
        unit = si.mem_unit ? si.mem_unit : 1;
        if (!__builtin_mul_overflow((unsigned long long)si.totalram, unit, &ram) &&
            !__builtin_mul_overflow((unsigned long long)si.totalswap, unit, &swap) &&
            !__builtin_add_overflow(ram, swap, &total) && cg < total)
            total = cg;
    }
    l = total && total < SIZE_MAX / 2 ? (size_t)total : SIZE_MAX / 2;
    atomic_store_explicit(&limit, l, memory_order_relaxed);
    return l;
}

size_t wf__host_alloc_limit(void) { return host_alloc_limit(); }

void *wf__aligned_alloc(size_t n, size_t align)
{
    atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed);
    if (inject_fault()) return NULL;
    if (WF__UNLIKELY(n > host_alloc_limit())) return NULL;
    void *p = g_alloc(g_user, n, align);
    if (p) atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    return p;
}

void wf__aligned_free(void *p)
{
    if (!p) return;
    atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
    g_dealloc(g_user, p);
}

void *wf__malloc(size_t n) { return wf__aligned_alloc(n, 16); }
void wf__free(void *p) { wf__aligned_free(p); }

void *wf__calloc(size_t count, size_t n)
{
    if (n && count > SIZE_MAX / n) return NULL;
    void *p = wf__malloc(count * n);
    if (p) memset(p, 0, count * n);
    return p;
}

void *wf__realloc(void *p, size_t old_n, size_t new_n)
{
    void *q = wf__malloc(new_n);
    if (!q) return NULL;
    if (p) {
        memcpy(q, p, old_n < new_n ? old_n : new_n);
        wf__free(p);
    }
    return q;
}

char *wf__strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = wf__malloc(len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

char *wf__strdup(const char *s) { return wf__strndup(s, strlen(s)); }

void wf_free(void *p) { wf__free(p); }
