/*
 * weft's CUDA emulator (tests/cudaemu): the CUDA runtime, the kernel scheduler and the cuBLAS calls that
 * the CUDA plugin uses, on the CPU, linked into the emulated plugin instead of libcudart and cuBLAS.
 * Device memory is one reserved region of WEFT_CUDAEMU_MEM bytes (out of memory is reproducible), kept
 * PROT_NONE outside emulated device work so that host code touching a device pointer crashes with a
 * diagnostic. Every operation runs synchronously, in issue order, under one lock; a kernel's blocks run
 * one after the other and a block's threads are coroutines that switch only at barriers and warp
 * collectives, which gives CUDA's barrier semantics without real concurrency.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "cudaemu_impl.h"

/* ---- the built-in variables and dynamic shared memory that device code sees ---- */
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
alignas(64) unsigned char __cuemu_dynsmem[CUEMU_DYNSMEM_MAX];

namespace {

/* ---- state ------------------------------------------------------------------------------------------- */

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* every emulated operation holds it */
pthread_once_t g_once = PTHREAD_ONCE_INIT;

char *g_base;          /* the device region */
size_t g_cap;          /* its bytes (WEFT_CUDAEMU_MEM) */
size_t g_used;         /* bytes allocated */
size_t g_high;         /* end offset of the highest allocation ever made: what a window opens */
bool g_protect = true; /* WEFT_CUDAEMU_PROTECT */
bool g_poison = true;  /* WEFT_CUDAEMU_POISON: fresh allocations hold 0xff bytes (NaN, -1), as a GPU holds garbage */
bool g_quiet;          /* WEFT_CUDAEMU_QUIET: no diagnostics on stderr */
int g_ndev = 1;        /* WEFT_CUDAEMU_DEVICES: 0 or 1 */
int g_window;          /* nesting of open windows (device memory readable) */
std::map<char *, size_t> g_live, g_free; /* device allocations (bytes asked for; pages taken) and free ranges */
std::map<char *, size_t> g_pinned;       /* cudaHostAlloc blocks */
std::set<void *> g_streams, g_events, g_blas;
std::map<const void *, int> g_func_smem; /* cudaFuncAttributeMaxDynamicSharedMemorySize per kernel */
cudaError_t g_sticky;                    /* a failed kernel poisons the context, as on a GPU */
thread_local cudaError_t t_last;
thread_local int t_dev;
struct sigaction g_old_segv;
const size_t PAGE = 4096;

struct CUstream_impl {
    unsigned flags;
};
struct CUevent_impl {
    unsigned flags;
    bool recorded;
    long long t_ns; /* when it was last recorded (the work before it has run then): CLOCK_MONOTONIC */
};
long long g_last_event_ns; /* under the lock: events recorded one after another get increasing times */

void vdiag(const char *fmt, va_list ap)
{
    if (g_quiet) return;
    char buf[600];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "cudaemu: %s\n", buf);
}
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdiag(fmt, ap);
    va_end(ap);
}

size_t env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

void segv_handler(int sig, siginfo_t *si, void *uc)
{
    char *a = (char *)si->si_addr;
    if (g_base && a >= g_base && a < g_base + g_cap) {
        char msg[300];
        int n;
        if (!g_window)
            n = snprintf(msg, sizeof msg,
                         "cudaemu: host code dereferenced device address %p (device region offset %zu): a device "
                         "pointer used as a host pointer\n",
                         (void *)a, (size_t)(a - g_base));
        else
            n = snprintf(msg, sizeof msg,
                         "cudaemu: device code or a copy touched %p, beyond every device allocation (region offset "
                         "%zu, allocated extent %zu)\n",
                         (void *)a, (size_t)(a - g_base), g_high);
        if (n > 0) {
            ssize_t w = write(2, msg, (size_t)n);
            (void)w;
        }
    }
    /* the previous handler (or the default action) takes the re-executed fault */
    sigaction(SIGSEGV, &g_old_segv, NULL);
    (void)sig;
    (void)uc;
}

/* cuemu_reverse_order or WEFT_CUDAEMU_REVERSE=1: blocks (along x) and the threads of a block start in
 * reverse order, so a kernel whose result depends on the order its threads run in (two threads writing
 * one element) shows it. */
std::atomic<int> g_reverse;

void init_once(void)
{
    g_cap = env_size("WEFT_CUDAEMU_MEM", (size_t)2 << 30);
    g_cap = (g_cap + PAGE - 1) / PAGE * PAGE;
    const char *p = getenv("WEFT_CUDAEMU_PROTECT");
    if (p && *p == '0') g_protect = false;
    p = getenv("WEFT_CUDAEMU_POISON");
    if (p && *p == '0') g_poison = false;
    p = getenv("WEFT_CUDAEMU_QUIET");
    g_quiet = p && *p == '1';
    p = getenv("WEFT_CUDAEMU_DEVICES");
    if (p && *p) g_ndev = atoi(p) > 0 ? 1 : 0;
    p = getenv("WEFT_CUDAEMU_REVERSE");
    if (p && *p == '1') g_reverse = 1;
    if (g_cap) {
        void *m = mmap(NULL, g_cap, g_protect ? PROT_NONE : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            diag("cannot reserve %zu bytes of emulated device memory", g_cap);
            g_cap = 0;
        } else {
            g_base = (char *)m;
            g_free[g_base] = g_cap;
        }
    }
    if (g_protect && g_base) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_old_segv);
    }
}

struct Lock {
    Lock()
    {
        pthread_once(&g_once, init_once);
        pthread_mutex_lock(&g_mu);
    }
    ~Lock() { pthread_mutex_unlock(&g_mu); }
};

/* Device memory is readable and writable only inside a window (under the lock). */
void window_open(void)
{
    if (g_window++ == 0 && g_protect && g_high) mprotect(g_base, g_high, PROT_READ | PROT_WRITE);
}
void window_close(void)
{
    if (--g_window == 0 && g_protect && g_high) mprotect(g_base, g_high, PROT_NONE);
}
struct Window {
    Window() { window_open(); }
    ~Window() { window_close(); }
};

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess) t_last = e;
    return e;
}

bool in_region(const void *p) { return g_base && (const char *)p >= g_base && (const char *)p < g_base + g_cap; }

/* The live allocation holding [p, p + n), or NULL. */
char *alloc_of(const void *p, size_t n)
{
    const char *c = (const char *)p;
    auto it = g_live.upper_bound((char *)c);
    if (it == g_live.begin()) return NULL;
    --it;
    if (c >= it->first && c + n <= it->first + it->second && c + n >= c) return it->first;
    return NULL;
}

bool pinned_holds(const void *p, size_t n)
{
    const char *c = (const char *)p;
    auto it = g_pinned.upper_bound((char *)c);
    if (it == g_pinned.begin()) return false;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
}

bool stream_ok(cudaStream_t s)
{
    uintptr_t v = (uintptr_t)s;
    return v <= 2 /* legacy, per-thread defaults */ || g_streams.count((void *)s);
}

/* ---- coroutines ----------------------------------------------------------------------------------------- */

const size_t STACK = 64 * 1024;
std::vector<char *> g_stack_pool;

char *stack_get(void)
{
    if (!g_stack_pool.empty()) {
        char *s = g_stack_pool.back();
        g_stack_pool.pop_back();
        return s;
    }
    /* a guard page below each stack turns an overflow into a crash, not a corruption */
    char *m = (char *)mmap(NULL, STACK + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    mprotect(m, PAGE, PROT_NONE);
    return m + PAGE;
}
void stack_put(char *s) { g_stack_pool.push_back(s); }

} // namespace

extern "C" {
__attribute__((visibility("hidden"))) void cuemu_swap_ctx(void **save, void *to);
__attribute__((visibility("hidden"))) void cuemu_tramp(void);
__attribute__((visibility("hidden"), used, noreturn)) void cuemu_thread_main(void);
}

#if defined(__x86_64__)
/* Saves the callee-saved registers on the current stack, stores its pointer in *save and continues on
 * `to`; a new coroutine's stack holds zeroed registers and cuemu_tramp as the return address. */
asm(".text\n"
    ".globl cuemu_swap_ctx\n.hidden cuemu_swap_ctx\n.type cuemu_swap_ctx,@function\n"
    "cuemu_swap_ctx:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuemu_swap_ctx, .-cuemu_swap_ctx\n"
    ".globl cuemu_tramp\n.hidden cuemu_tramp\n.type cuemu_tramp,@function\n"
    "cuemu_tramp:\n"
    "  andq $-16, %rsp\n  call cuemu_thread_main\n  ud2\n"
    ".size cuemu_tramp, .-cuemu_tramp\n");

static void *coro_init(char *stack)
{
    uint64_t *sp = (uint64_t *)(stack + STACK);
    *--sp = 0;
    *--sp = (uint64_t)(uintptr_t)cuemu_tramp;
    for (int i = 0; i < 6; i++) *--sp = 0;
    return sp;
}
#define CORO_SWAP(save, to) cuemu_swap_ctx((save), (to))
#else
#error "cudaemu: the coroutine switch is written for x86-64 only"
#endif

namespace {

enum { T_NEW, T_READY, T_BAR, T_WARP, T_DONE };

struct Th {
    void *sp;
    char *stack;
    int state;
    int pred;
    unsigned char xv[16];
};

Th g_th[1024];
int g_nth, g_cur;
void *g_sched_sp;
dim3 g_bdim;
bool g_in_kernel;
void (*g_thunk)(void *);
void *g_thunk_ctx;
unsigned char g_snap[1024][16]; /* lanes' values at their warp's last release */
int g_snap_pred[1024];
bool g_snap_alive[1024];
int g_bar_count, g_bar_and, g_bar_or; /* predicates at the last block barrier */

/* launch being issued (under g_mu between __cuemu_launch_begin and __cuemu_run) */
cudaError_t g_launch_err;
const char *g_launch_name, *g_launch_file;
int g_launch_line;
dim3 g_launch_grid, g_launch_block;
size_t g_launch_shmem;

void *sched_slot(void) { return &g_sched_sp; }
void *th_slot(int i) { return &g_th[i].sp; }
void *th_target(int i) { return g_th[i].sp; }
void *sched_target(void) { return g_sched_sp; }

void resume(int i)
{
    unsigned lin = (unsigned)i;
    g_cur = i;
    threadIdx.x = lin % g_bdim.x;
    threadIdx.y = lin / g_bdim.x % g_bdim.y;
    threadIdx.z = lin / (g_bdim.x * g_bdim.y);
    CORO_SWAP((void **)sched_slot(), th_target(i));
    if (g_th[i].state == T_DONE) {
        stack_put(g_th[i].stack);
        g_th[i].stack = NULL;
    }
}

/* From a device thread: wait in `state` until the scheduler releases it. */
void yield_as(int state)
{
    Th &t = g_th[g_cur];
    t.state = state;
    CORO_SWAP((void **)th_slot(g_cur), sched_target());
}

/* Runs one block to completion; false when its threads deadlock (a barrier some live thread never reaches). */
bool run_block(void)
{
    int n = g_nth;
    for (int i = 0; i < n; i++) g_th[i].state = T_NEW;
    for (;;) {
        for (int j = 0; j < n; j++) {
            int i = g_reverse ? n - 1 - j : j;
            Th &t = g_th[i];
            if (t.state == T_NEW) {
                t.stack = stack_get();
                if (!t.stack) {
                    diag("out of host memory for thread stacks");
                    return false;
                }
                t.sp = coro_init(t.stack);
                t.state = T_READY;
                resume(i);
            } else if (t.state == T_READY) {
                resume(i);
            }
        }
        int done = 0, bar = 0;
        for (int i = 0; i < n; i++) {
            done += g_th[i].state == T_DONE;
            bar += g_th[i].state == T_BAR;
        }
        if (done == n) return true;
        bool released = false;
        if (bar == n - done) {
            g_bar_count = 0;
            g_bar_and = 1;
            g_bar_or = 0;
            for (int i = 0; i < n; i++)
                if (g_th[i].state == T_BAR) {
                    g_bar_count += g_th[i].pred != 0;
                    g_bar_and &= g_th[i].pred != 0;
                    g_bar_or |= g_th[i].pred != 0;
                    g_th[i].state = T_READY;
                }
            released = true;
        } else {
            for (int w = 0; w * 32 < n; w++) {
                int lo = w * 32, hi = lo + 32 < n ? lo + 32 : n, alive = 0, waiting = 0;
                for (int i = lo; i < hi; i++) {
                    alive += g_th[i].state != T_DONE;
                    waiting += g_th[i].state == T_WARP;
                }
                if (!alive || waiting != alive) continue;
                for (int i = lo; i < hi; i++) {
                    g_snap_alive[i] = g_th[i].state == T_WARP;
                    if (!g_snap_alive[i]) continue;
                    memcpy(g_snap[i], g_th[i].xv, 16);
                    g_snap_pred[i] = g_th[i].pred;
                    g_th[i].state = T_READY;
                }
                released = true;
            }
        }
        if (!released) {
            for (int i = 0; i < n; i++)
                if (g_th[i].stack) {
                    stack_put(g_th[i].stack);
                    g_th[i].stack = NULL;
                }
            return false;
        }
    }
}

} // namespace

extern "C" void cuemu_thread_main(void)
{
    g_thunk(g_thunk_ctx);
    g_th[g_cur].state = T_DONE;
    CORO_SWAP((void **)th_slot(g_cur), sched_target());
    __builtin_unreachable();
}

/* ---- device-side entry points ---------------------------------------------------------------------------- */

void __syncthreads(void)
{
    if (!g_in_kernel) return;
    g_th[g_cur].pred = 0;
    yield_as(T_BAR);
}
int __syncthreads_count(int pred)
{
    if (!g_in_kernel) return pred != 0;
    g_th[g_cur].pred = pred;
    yield_as(T_BAR);
    return g_bar_count;
}
int __syncthreads_and(int pred)
{
    if (!g_in_kernel) return pred != 0;
    g_th[g_cur].pred = pred;
    yield_as(T_BAR);
    return g_bar_and;
}
int __syncthreads_or(int pred)
{
    if (!g_in_kernel) return pred != 0;
    g_th[g_cur].pred = pred;
    yield_as(T_BAR);
    return g_bar_or;
}
void __syncwarp(unsigned mask)
{
    (void)mask;
    if (g_in_kernel) yield_as(T_WARP);
}
unsigned __activemask(void)
{
    if (!g_in_kernel) return 1;
    int lo = g_cur / 32 * 32;
    unsigned m = 0;
    for (int i = lo; i < lo + 32 && i < g_nth; i++)
        if (g_th[i].state != T_DONE) m |= 1u << (i - lo);
    return m;
}
unsigned __ballot_sync(unsigned mask, int pred)
{
    (void)mask;
    if (!g_in_kernel) return pred ? 1u : 0u;
    g_th[g_cur].pred = pred;
    yield_as(T_WARP);
    int lo = g_cur / 32 * 32;
    unsigned r = 0;
    for (int i = lo; i < lo + 32 && i < g_nth; i++)
        if (g_snap_alive[i] && g_snap_pred[i]) r |= 1u << (i - lo);
    return r;
}
void __cuemu_shfl(const void *in, void *out, size_t size, int mode, int arg, int width)
{
    if (!g_in_kernel) {
        memcpy(out, in, size);
        return;
    }
    memcpy(g_th[g_cur].xv, in, size);
    yield_as(T_WARP);
    int lane = g_cur % 32, base = g_cur - lane;
    if (width < 1 || width > 32 || (width & (width - 1))) width = 32;
    int seg = lane / width * width, src = lane;
    switch (mode) {
    case 0: src = seg + (arg & (width - 1)); break;
    case 1: src = lane - arg >= seg ? lane - arg : lane; break;
    case 2: src = lane + arg < seg + width ? lane + arg : lane; break;
    default: src = (lane ^ arg) < seg + width && (lane ^ arg) >= seg ? lane ^ arg : lane; break;
    }
    int s = base + src;
    /* an exited or absent source lane gives an undefined value on a GPU: the caller's own here */
    if (s >= g_nth || !g_snap_alive[s]) s = g_cur;
    memcpy(out, g_snap[s], size);
}
void __cuemu_trap(const char *why)
{
    fprintf(stderr, "cudaemu: %s in kernel %s (%s:%d), block (%u,%u,%u) thread (%u,%u,%u)\n", why,
            g_launch_name ? g_launch_name : "?", g_launch_file ? g_launch_file : "?", g_launch_line, blockIdx.x,
            blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    abort();
}

int __cuemu_launch_begin(const char *kernel, const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                         cudaStream_t stream)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu); /* released by __cuemu_run */
    g_launch_name = kernel;
    g_launch_file = file;
    g_launch_line = line;
    g_launch_grid = grid;
    g_launch_block = block;
    g_launch_shmem = shmem;
    g_launch_err = cudaSuccess;
    unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (g_sticky) {
        g_launch_err = g_sticky;
    } else if (g_ndev == 0) {
        g_launch_err = cudaErrorNoDevice;
    } else if (!nt || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || !grid.x || !grid.y ||
               !grid.z || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        diag("kernel %s (%s:%d): invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)", kernel, file, line,
             grid.x, grid.y, grid.z, block.x, block.y, block.z);
        g_launch_err = cudaErrorInvalidConfiguration;
    } else if (!stream_ok(stream)) {
        diag("kernel %s (%s:%d): launched on a stream that does not exist", kernel, file, line);
        g_launch_err = cudaErrorInvalidResourceHandle;
    } else if (shmem > 48 * 1024) {
        /* above 48 KiB a kernel must opt in with cudaFuncSetAttribute (checked in __cuemu_run) */
        if (shmem > CUEMU_DYNSMEM_MAX) g_launch_err = cudaErrorInvalidValue;
    }
    return g_launch_err == cudaSuccess;
}

void __cuemu_check_arg(int launch_ok, const char *kernel, int index, const void *p)
{
    if (!launch_ok || !p || g_launch_err) return;
    const char *c = (const char *)p;
    if (g_base && c >= g_base && c <= g_base + g_cap) return;
    if (pinned_holds(p, 0)) return; /* mapped pinned memory is device-accessible */
    diag("kernel %s (%s:%d): pointer argument %d (%p) is neither device nor pinned host memory", kernel,
         g_launch_file, g_launch_line, index, p);
    g_launch_err = cudaErrorInvalidValue;
}

void __cuemu_launch_fail(const char *why, cudaError_t e)
{
    if (g_launch_err) return;
    diag("kernel %s (%s:%d): %s", g_launch_name, g_launch_file, g_launch_line, why);
    g_launch_err = e;
}

cudaError_t __cuemu_run(void (*thunk)(void *), void *ctx)
{
    cudaError_t e = g_launch_err;
    if (!e && g_launch_shmem > 48 * 1024) {
        /* the opt-in is keyed by the kernel's address, which the launch does not pass: accept any opt-in */
        bool opted = false;
        for (auto &f : g_func_smem) opted |= (size_t)f.second >= g_launch_shmem;
        if (!opted) {
            diag("kernel %s (%s:%d): %zu bytes of dynamic shared memory without cudaFuncSetAttribute", g_launch_name,
                 g_launch_file, g_launch_line, g_launch_shmem);
            e = cudaErrorInvalidValue;
        }
    }
    if (!e) {
        Window w;
        g_thunk = thunk;
        g_thunk_ctx = ctx;
        g_bdim = g_launch_block;
        blockDim = g_launch_block;
        gridDim = g_launch_grid;
        g_nth = (int)(g_launch_block.x * g_launch_block.y * g_launch_block.z);
        g_in_kernel = true;
        for (unsigned z = 0; z < g_launch_grid.z && !e; z++)
            for (unsigned y = 0; y < g_launch_grid.y && !e; y++)
                for (unsigned x = 0; x < g_launch_grid.x && !e; x++) {
                    blockIdx.x = g_reverse ? g_launch_grid.x - 1 - x : x;
                    blockIdx.y = y;
                    blockIdx.z = z;
                    /* shared memory starts as garbage on a GPU */
                    if (g_launch_shmem) memset(__cuemu_dynsmem, 0xff, g_launch_shmem);
                    if (!run_block()) {
                        diag("kernel %s (%s:%d) deadlocked in block (%u,%u,%u): a barrier or warp collective that "
                             "not every live thread of the block (warp) reaches",
                             g_launch_name, g_launch_file, g_launch_line, x, y, z);
                        e = g_sticky = cudaErrorLaunchFailure;
                    }
                }
        g_in_kernel = false;
    }
    if (e) t_last = e;
    pthread_mutex_unlock(&g_mu);
    return e;
}

/* ---- the runtime API ----------------------------------------------------------------------------------- */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    Lock l;
    if (!count) return fail(cudaErrorInvalidValue);
    *count = g_ndev;
    return g_ndev ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    Lock l;
    if (!g_ndev) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= g_ndev) return fail(cudaErrorInvalidDevice);
    t_dev = device;
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    Lock l;
    if (!device) return fail(cudaErrorInvalidValue);
    *device = t_dev;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    Lock l;
    if (!p) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= g_ndev) return fail(g_ndev ? cudaErrorInvalidDevice : cudaErrorNoDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "weft CUDA emulator (CPU)");
    p->totalGlobalMem = g_cap;
    p->sharedMemPerBlock = 48 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = (size_t)1 << 31;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 1; /* one CPU thread runs every block */
    p->canMapHostMemory = 1;
    p->memoryBusWidth = 64;
    p->l2CacheSize = 1 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->unifiedAddressing = 1;
    p->sharedMemPerMultiprocessor = CUEMU_DYNSMEM_MAX;
    p->sharedMemPerBlockOptin = CUEMU_DYNSMEM_MAX;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e) return e;
    if (!value) return fail(cudaErrorInvalidValue);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrClockRate: *value = 1000000; break; /* kHz: a nominal 1 GHz */
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMemoryClockRate: *value = 1000000; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    default: return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* No driver: version 0 says so honestly; the runtime API emulated is CUDA 13.0's. */
cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v) return fail(cudaErrorInvalidValue);
    *v = 0;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    Lock l;
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

cudaError_t cudaDeviceReset(void)
{
    Lock l;
    g_sticky = cudaSuccess;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    Lock l;
    if (free_bytes) *free_bytes = g_cap - g_used;
    if (total_bytes) *total_bytes = g_cap;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e ? e : g_sticky;
}

cudaError_t cudaPeekAtLastError(void) { return t_last ? t_last : g_sticky; }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define N(x) case x: return #x;
    N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation) N(cudaErrorInitializationError)
    N(cudaErrorCudartUnloading) N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidPitchValue)
    N(cudaErrorInvalidSymbol) N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection)
    N(cudaErrorInsufficientDriver) N(cudaErrorMissingConfiguration) N(cudaErrorInvalidDeviceFunction)
    N(cudaErrorNoDevice) N(cudaErrorInvalidDevice) N(cudaErrorInvalidKernelImage) N(cudaErrorInvalidResourceHandle)
    N(cudaErrorSymbolNotFound) N(cudaErrorNotReady)
    N(cudaErrorIllegalAddress) N(cudaErrorLaunchOutOfResources) N(cudaErrorLaunchTimeout) N(cudaErrorAssert)
    N(cudaErrorIllegalInstruction) N(cudaErrorLaunchFailure) N(cudaErrorNotPermitted) N(cudaErrorNotSupported)
    N(cudaErrorUnknown)
#undef N
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidKernelImage: return "device kernel image is invalid";
    case cudaErrorSymbolNotFound: return "named symbol not found";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
    }
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    Lock l;
    if (!ptr) return fail(cudaErrorInvalidValue);
    *ptr = NULL;
    if (g_sticky) return fail(g_sticky);
    if (!g_ndev) return fail(cudaErrorNoDevice);
    if (!size) return cudaSuccess;
    size_t need = (size + PAGE - 1) / PAGE * PAGE;
    if (need < size || g_used + need > g_cap) return fail(cudaErrorMemoryAllocation);
    for (auto it = g_free.begin(); it != g_free.end(); ++it) {
        if (it->second < need) continue;
        char *p = it->first;
        size_t rest = it->second - need;
        g_free.erase(it);
        if (rest) g_free[p + need] = rest;
        g_live[p] = size; /* the size asked for: copies and cuBLAS are checked against it */
        g_used += need;
        size_t end = (size_t)(p + need - g_base);
        if (end > g_high) {
            if (g_window && g_protect) mprotect(g_base + g_high, end - g_high, PROT_READ | PROT_WRITE);
            g_high = end;
        }
        if (g_poison) {
            Window w;
            memset(p, 0xff, need);
        }
        *ptr = p;
        return cudaSuccess;
    }
    return fail(cudaErrorMemoryAllocation); /* fragmented */
}

cudaError_t cudaFree(void *ptr)
{
    Lock l;
    if (!ptr) return cudaSuccess;
    auto it = g_live.find((char *)ptr);
    if (it == g_live.end()) {
        diag("cudaFree(%p): not a device allocation", ptr);
        return fail(cudaErrorInvalidValue);
    }
    char *p = it->first;
    size_t n = (it->second + PAGE - 1) / PAGE * PAGE;
    g_live.erase(it);
    g_used -= n;
    madvise(p, n, MADV_DONTNEED); /* give the host its memory back */
    auto nx = g_free.lower_bound(p);
    if (nx != g_free.end() && nx->first == p + n) {
        n += nx->second;
        g_free.erase(nx);
    }
    auto pv = g_free.lower_bound(p);
    if (pv != g_free.begin()) {
        --pv;
        if (pv->first + pv->second == p) {
            pv->second += n;
            return g_sticky ? fail(g_sticky) : cudaSuccess;
        }
    }
    g_free[p] = n;
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

/* Stream-ordered allocation: every operation has already run at issue, so the order is kept. */
cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    {
        Lock l;
        if (!stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
    }
    return cudaMalloc(ptr, size);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    {
        Lock l;
        if (!stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
    }
    return cudaFree(ptr);
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    Lock l;
    if (!ptr) return fail(cudaErrorInvalidValue);
    *ptr = NULL;
    if (flags & ~0xfu) return fail(cudaErrorInvalidValue);
    if (!size) return cudaSuccess;
    void *p = NULL;
    if (posix_memalign(&p, PAGE, size) != 0) return fail(cudaErrorMemoryAllocation);
    g_pinned[(char *)p] = size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void *ptr)
{
    Lock l;
    if (!ptr) return cudaSuccess;
    auto it = g_pinned.find((char *)ptr);
    if (it == g_pinned.end()) {
        diag("cudaFreeHost(%p): not a pinned allocation", ptr);
        return fail(cudaErrorInvalidValue);
    }
    g_pinned.erase(it);
    free(ptr);
    return cudaSuccess;
}

} // extern "C"

namespace {

unsigned long long g_d2h_calls, g_d2h_bytes; /* under the lock */

/* A copy's direction checked against where its pointers really are (cudaMemcpyDefault infers it). */
cudaError_t do_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, const char *what)
{
    if (g_sticky) return fail(g_sticky);
    if (!stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    if ((unsigned)kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
    if (!n) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue);
    bool dd = in_region(dst), sd = in_region(src);
    if (kind == cudaMemcpyDefault)
        kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                  : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    static const char *const kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
    if (want_dd != dd || want_sd != sd) {
        diag("%s(%s, %zu bytes): destination %p is %s memory, source %p is %s memory", what, kinds[kind], n, dst,
             dd ? "device" : "host", src, sd ? "device" : "host");
        return fail(cudaErrorInvalidValue);
    }
    if ((dd && !alloc_of(dst, n)) || (sd && !alloc_of(src, n))) {
        diag("%s(%s, %zu bytes): the %s range %p + %zu is not inside one device allocation", what, kinds[kind], n,
             dd && !alloc_of(dst, n) ? "destination" : "source", dd && !alloc_of(dst, n) ? dst : src, n);
        return fail(cudaErrorInvalidValue);
    }
    if (kind == cudaMemcpyDeviceToHost) {
        g_d2h_calls++;
        g_d2h_bytes += n;
    }
    Window w;
    memmove(dst, src, n);
    return cudaSuccess;
}

} // namespace

/* Tests' switch of the launch order (see g_reverse): 1 reversed, 0 the natural order. */
extern "C" __attribute__((visibility("default"))) void cuemu_reverse_order(int on)
{
    g_reverse = on;
}

/* Tests' view of the device-to-host copies so far (a test finds it with dlsym in the loaded plugin): the
 * number of copies, and their bytes in *bytes. */
extern "C" __attribute__((visibility("default"))) unsigned long long cuemu_d2h_copies(unsigned long long *bytes)
{
    Lock l;
    if (bytes) *bytes = g_d2h_bytes;
    return g_d2h_calls;
}

extern "C" {

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    Lock l;
    return do_copy(dst, src, n, kind, s, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    Lock l;
    return do_copy(dst, src, n, kind, NULL, "cudaMemcpy");
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t n, cudaStream_t s)
{
    Lock l;
    if (g_sticky) return fail(g_sticky);
    if (!stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    if (!alloc_of(ptr, n)) {
        diag("cudaMemsetAsync(%p, %zu bytes): not inside one device allocation", ptr, n);
        return fail(cudaErrorInvalidValue);
    }
    Window w;
    memset(ptr, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t n) { return cudaMemsetAsync(ptr, value, n, NULL); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    Lock l;
    if (!stream || (flags & ~1u)) return fail(cudaErrorInvalidValue);
    if (g_sticky) return fail(g_sticky);
    CUstream_impl *s = new CUstream_impl{flags};
    g_streams.insert(s);
    *stream = (cudaStream_t)(void *)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    Lock l;
    if (!g_streams.erase((void *)stream)) return fail(cudaErrorInvalidResourceHandle);
    delete (CUstream_impl *)(void *)stream;
    return cudaSuccess;
}

/* Everything already ran at issue: synchronising only reports the context's state. */
cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    Lock l;
    if (!stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    Lock l;
    if (!stream_ok(stream) || !g_events.count((void *)event)) return fail(cudaErrorInvalidResourceHandle);
    if (flags) return fail(cudaErrorInvalidValue);
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    Lock l;
    if (!event || (flags & ~0xfu)) return fail(cudaErrorInvalidValue);
    if (g_sticky) return fail(g_sticky);
    CUevent_impl *e = new CUevent_impl{flags, false, 0};
    g_events.insert(e);
    *event = (cudaEvent_t)(void *)e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    Lock l;
    if (!g_events.erase((void *)event)) return fail(cudaErrorInvalidResourceHandle);
    delete (CUevent_impl *)(void *)event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    Lock l;
    if (!g_events.count((void *)event) || !stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
    if (g_sticky) return fail(g_sticky);
    /* everything before it on the stream has run: the event completes now, at a time after every
     * event recorded before it (strictly, so that an interval around work is never empty) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (now <= g_last_event_ns) now = g_last_event_ns + 1;
    g_last_event_ns = now;
    CUevent_impl *e = (CUevent_impl *)(void *)event;
    e->recorded = true;
    e->t_ns = now;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    Lock l;
    if (!g_events.count((void *)event)) return fail(cudaErrorInvalidResourceHandle);
    return g_sticky ? fail(g_sticky) : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    Lock l;
    if (!ms) return fail(cudaErrorInvalidValue);
    if (!g_events.count((void *)start) || !g_events.count((void *)end)) return fail(cudaErrorInvalidResourceHandle);
    CUevent_impl *a = (CUevent_impl *)(void *)start, *b = (CUevent_impl *)(void *)end;
    if ((a->flags | b->flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
    /* never recorded (the runtime's documented answer; recorded events have all completed here) */
    if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
    if (g_sticky) return fail(g_sticky);
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
    return cudaSuccess;
}

/* Streams run at issue, so the stream has reached the callback: it runs now, on this thread, outside
 * the emulator's lock (it must not call the runtime, as on a GPU, but it may take the caller's locks
 * that are not held here). A callback is told the context's error; a host function is not run once
 * the context has failed (as the runtime documents), and the launch reports the error. */
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags)
{
    cudaError_t st;
    {
        Lock l;
        if (!stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
        if (!callback || flags) return fail(cudaErrorInvalidValue);
        st = g_sticky;
    }
    callback(stream, st, userData);
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    {
        Lock l;
        if (!stream_ok(stream)) return fail(cudaErrorInvalidResourceHandle);
        if (!fn) return fail(cudaErrorInvalidValue);
        if (g_sticky) return fail(g_sticky);
    }
    fn(userData);
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    Lock l;
    if (!func) return fail(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > CUEMU_DYNSMEM_MAX) return fail(cudaErrorInvalidValue);
        g_func_smem[func] = value;
    }
    return cudaSuccess;
}

/* ---- cuBLAS ------------------------------------------------------------------------------------------- */

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    Lock l;
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    if (!g_ndev || g_sticky) return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasContext *c = new cublasContext{NULL};
    g_blas.insert(c);
    *handle = c;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    Lock l;
    if (!g_blas.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    Lock l;
    if (!g_blas.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream_ok(stream)) return CUBLAS_STATUS_INVALID_VALUE;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream)
{
    Lock l;
    if (!g_blas.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (stream) *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode)
{
    Lock l;
    if (!g_blas.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* only host scalars are emulated */
    return mode == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
#define N(x) case x: return #x;
    N(CUBLAS_STATUS_SUCCESS) N(CUBLAS_STATUS_NOT_INITIALIZED) N(CUBLAS_STATUS_ALLOC_FAILED)
    N(CUBLAS_STATUS_INVALID_VALUE) N(CUBLAS_STATUS_ARCH_MISMATCH) N(CUBLAS_STATUS_MAPPING_ERROR)
    N(CUBLAS_STATUS_EXECUTION_FAILED) N(CUBLAS_STATUS_INTERNAL_ERROR) N(CUBLAS_STATUS_NOT_SUPPORTED)
    N(CUBLAS_STATUS_LICENSE_ERROR)
#undef N
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an internal operation failed";
    }
}

} // extern "C"

namespace {

float ld_elem(const void *p, cudaDataType t, long long i)
{
    switch (t) {
    case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

void st_elem(void *p, cudaDataType t, long long i, float v)
{
    switch (t) {
    case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn(v); break;
    case CUDA_R_16BF: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

size_t dt_size(cudaDataType t) { return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2; }

/* Is the strided batch of rows x cols column-major matrices (leading dim ld) inside one allocation? */
bool extent_ok(const char *what, const void *p, cudaDataType t, long long rows, long long cols, long long ld,
               long long stride, int batch)
{
    if (rows <= 0 || cols <= 0 || batch <= 0) return true;
    long long lo = stride < 0 ? (long long)(batch - 1) * stride : 0;
    long long hi = (rows - 1) + (cols - 1) * ld + (stride > 0 ? (long long)(batch - 1) * stride : 0);
    size_t es = dt_size(t);
    const char *first = (const char *)p + lo * (long long)es;
    size_t bytes = (size_t)(hi - lo + 1) * es;
    if (p && alloc_of(first, bytes)) return true;
    diag("cublasGemmStridedBatchedEx: %s = %p (%lld x %lld, ld %lld, stride %lld, batch %d: %zu bytes) is not inside "
         "one device allocation",
         what, p, rows, cols, ld, stride, batch, bytes);
    return false;
}

template <typename A>
void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, A alpha, const void *Ap, cudaDataType at,
              int lda, long long sa, const void *Bp, int ldb, long long sb, A beta, void *Cp, int ldc, long long sc,
              int batch)
{
    std::vector<A> acc((size_t)m);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) acc[i] = 0;
            for (int l = 0; l < k; l++) {
                long long bi = tb == CUBLAS_OP_N ? l + (long long)j * ldb : j + (long long)l * ldb;
                A bv;
                if constexpr (std::is_same<A, double>::value)
                    bv = ((const double *)Bp)[b * sb + bi];
                else
                    bv = ld_elem(Bp, at, b * sb + bi);
                for (int i = 0; i < m; i++) {
                    long long ai = ta == CUBLAS_OP_N ? i + (long long)l * lda : l + (long long)i * lda;
                    A av;
                    if constexpr (std::is_same<A, double>::value)
                        av = ((const double *)Ap)[b * sa + ai];
                    else
                        av = ld_elem(Ap, at, b * sa + ai);
                    acc[i] += av * bv;
                }
            }
            for (int i = 0; i < m; i++) {
                long long ci = b * sc + i + (long long)j * ldc;
                A v = alpha * acc[i];
                /* beta == 0: C is not read (it may hold NaN) */
                if constexpr (std::is_same<A, double>::value) {
                    if (beta != 0) v += beta * ((double *)Cp)[ci];
                    ((double *)Cp)[ci] = v;
                } else {
                    if (beta != 0) v += beta * ld_elem(Cp, at, ci);
                    st_elem(Cp, at, ci, v);
                }
            }
        }
}

} // namespace

extern "C" {

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    Lock l;
    if (!g_blas.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g_sticky) return CUBLAS_STATUS_EXECUTION_FAILED;
    if ((unsigned)transa > CUBLAS_OP_C || (unsigned)transb > CUBLAS_OP_C || m < 0 || n < 0 || k < 0 ||
        batchCount < 0 || !alpha || !beta) {
        diag("cublasGemmStridedBatchedEx: invalid op, dims or scalars (m=%d n=%d k=%d batch=%d)", m, n, k, batchCount);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    int rows_a = transa == CUBLAS_OP_N ? m : k, cols_a = transa == CUBLAS_OP_N ? k : m;
    int rows_b = transb == CUBLAS_OP_N ? k : n, cols_b = transb == CUBLAS_OP_N ? n : k;
    if (lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1)) {
        diag("cublasGemmStridedBatchedEx: leading dims too small: lda=%d (op(A) %dx%d, %s), ldb=%d (op(B) %dx%d, %s), "
             "ldc=%d (m=%d)",
             lda, m, k, transa == CUBLAS_OP_N ? "N" : "T", ldb, k, n, transb == CUBLAS_OP_N ? "N" : "T", ldc, m);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    bool f64 = computeType == CUBLAS_COMPUTE_64F || computeType == CUBLAS_COMPUTE_64F_PEDANTIC;
    bool f32 = computeType == CUBLAS_COMPUTE_32F || computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
               computeType == CUBLAS_COMPUTE_32F_FAST_16F || computeType == CUBLAS_COMPUTE_32F_FAST_16BF ||
               computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
    bool types_ok = Atype == Btype && Btype == Ctype &&
                    ((f64 && Atype == CUDA_R_64F) ||
                     (f32 && (Atype == CUDA_R_32F || Atype == CUDA_R_16F || Atype == CUDA_R_16BF)));
    if (!types_ok) {
        diag("cublasGemmStridedBatchedEx: unsupported type combination A %d B %d C %d compute %d", (int)Atype,
             (int)Btype, (int)Ctype, (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!stream_ok(handle->stream)) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!m || !n || !batchCount) return CUBLAS_STATUS_SUCCESS;
    if (in_region(alpha) || in_region(beta)) {
        diag("cublasGemmStridedBatchedEx: alpha / beta are device pointers but the pointer mode is host");
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (!extent_ok("C", C, Ctype, m, n, ldc, strideC, batchCount) ||
        (k && !extent_ok("A", A, Atype, rows_a, cols_a, lda, strideA, batchCount)) ||
        (k && !extent_ok("B", B, Btype, rows_b, cols_b, ldb, strideB, batchCount)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (strideC != 0 && batchCount > 1 && (strideC < (long long)ldc * n && strideC > -(long long)ldc * n))
        diag("cublasGemmStridedBatchedEx: the %d outputs overlap (strideC %lld < ldc * n = %lld): the result depends "
             "on execution order",
             batchCount, strideC, (long long)ldc * n);
    Window w;
    if (f64)
        gemm_run<double>(transa, transb, m, n, k, *(const double *)alpha, A, Atype, lda, strideA, B, ldb, strideB,
                         *(const double *)beta, C, ldc, strideC, batchCount);
    else
        gemm_run<float>(transa, transb, m, n, k, *(const float *)alpha, A, Atype, lda, strideA, B, ldb, strideB,
                        *(const float *)beta, C, ldc, strideC, batchCount);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta,
                                      C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc)
{
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb,
                                      0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc)
{
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_64F, lda, 0, B, CUDA_R_64F, ldb,
                                      0, beta, C, CUDA_R_64F, ldc, 0, 1, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb, long long int strideB,
                                         const float *beta, float *C, int ldc, long long int strideC, int batchCount)
{
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, strideA, B,
                                      CUDA_R_32F, ldb, strideB, beta, C, CUDA_R_32F, ldc, strideC, batchCount,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const double *alpha, const double *A, int lda,
                                         long long int strideA, const double *B, int ldb, long long int strideB,
                                         const double *beta, double *C, int ldc, long long int strideC, int batchCount)
{
    return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_64F, lda, strideA, B,
                                      CUDA_R_64F, ldb, strideB, beta, C, CUDA_R_64F, ldc, strideC, batchCount,
                                      CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
}

} // extern "C"

/* ---- no cuDNN, no driver ----------------------------------------------------------------------------------
 * cuDNN may well be installed on the host, but it cannot run on emulated device memory: the plugin's
 * dlopen of it (cuda_conv.c) fails here as on a GPU machine without cuDNN, so that its direct-kernel
 * fallback runs. The plugin's own dlopen calls bind to this definition (it is linked into the plugin,
 * hidden); every other name goes to the real dlopen, which the emulator's own loads of run-time compiled
 * modules (cudaemu_nvrtc.cc) call directly, whatever their temporary path says. */
#include <dlfcn.h>

void *cuemu__real_dlopen(const char *file, int mode)
{
    static std::atomic<void *> real;
    void *p = real.load();
    if (!p) {
        p = dlsym(RTLD_NEXT, "dlopen");
        real.store(p);
    }
    void *(*fn)(const char *, int);
    memcpy(&fn, &p, sizeof p);
    return fn ? fn(file, mode) : NULL;
}

extern "C" __attribute__((visibility("hidden"))) void *dlopen(const char *file, int mode)
{
    if (file && (strstr(file, "libcudnn") || strstr(file, "libcuda.so") || strstr(file, "libcublas"))) return NULL;
    return cuemu__real_dlopen(file, mode);
}

/* ---- what cudaemu_nvrtc.cc borrows (cudaemu_impl.h) ------------------------------------------------------- */

void cuemu__lock(void)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
}

void cuemu__unlock(void) { pthread_mutex_unlock(&g_mu); }

cudaError_t cuemu__fail(cudaError_t e) { return fail(e); }

cudaError_t cuemu__context_error(void) { return g_sticky ? g_sticky : g_ndev ? cudaSuccess : cudaErrorNoDevice; }

void cuemu__diag(const char *fmt, ...)
{
    pthread_once(&g_once, init_once); /* WEFT_CUDAEMU_QUIET read */
    va_list ap;
    va_start(ap, fmt);
    vdiag(fmt, ap);
    va_end(ap);
}
