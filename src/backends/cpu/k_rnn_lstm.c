/*
 * weft's own f32 LSTM on the CPU, for the shapes where a step is small (k_rnn.c sends an LSTM here when
 * wf__lstm_own_takes says so; it computes what the oneDNN path computes, with the same conditions).
 *
 * Why not oneDNN's RNN primitive there: bench_lstm's classifier (batch 8, input 64, hidden 128, 32 steps)
 * took 0.60 ms a layer in oneDNN 2.x's brgemm LSTM on 1 or 2 threads, ONNX Runtime 0.68 ms for both layers.
 * A step is an [N x (I + H)] x [(I + H) x 4H] product of about a MFLOP, too little for the primitive's
 * per-step set-up and work split. Here:
 *  - W, R, the summed biases and the peepholes are packed once per content version (k_rnn.c's versioned
 *    weight cache) into panels of V hidden units (V = one vector: 16 with AVX-512, 8 with AVX2) whose four
 *    gates sit side by side, P[chunk][k][gate][V], zero-padded to whole chunks;
 *  - each thread first computes bias + x_t W^T for its rows and chunks of 64 steps (no step depends on
 *    another: a chunk's W panel stays in L1 across 256 rows), then runs those steps, each adding h_{t-1} R^T
 *    for a tile of batch rows and one chunk in registers and applying the cell there, so the gates'
 *    pre-activations go to memory once (the projection) and only R's panels are read at every step.
 *    The projection inside the steps (one pass over W and R a step) had left a step's panels at 24 KB a
 *    chunk (past L1 with its rows) and every multiply-add in the lock-step part: in the host's noisy
 *    spells bench_lstm's classifier ran 1.2-1.6 ms against ONNX
 *    Runtime's 1.0-1.3 (which projects first too); projecting first, 2 threads, 10 interleaved rounds:
 *    geometric mean of the medians 1.31 -> 1.21 ms (ORT 1.16), best p10 (a quiet spell) 0.78 ms (ORT 0.79);
 *  - the intra-op threads split the batch rows, independent sequences that need no barrier; a batch under
 *    4 rows a thread splits the chunks instead, and the threads meet at a spinning barrier after each step
 *    (an OpenMP barrier with the passive wait policy weft sets costs tens of microseconds; a step a few).
 *    In that split each thread owns a range of chunks but claims them one at a time, and a thread done with
 *    its own takes what is left of the others' (ls_claim): on this project's shared 2-core host one core
 *    often runs slower than the other for a while, and a static split made every step wait for it.
 *    bench_lstm's classifier, 2 threads, 4 interleaved pairs of 300 runs in such a spell: the time threads
 *    spent at the step barriers fell from 4-8% of the kernel's to about 2%, medians 1.15-1.27 ms against
 *    1.19-1.57 without; over 10 pairs, medians 2.7% lower (geometric mean), quiet pairs' p10 level (0.79).
 * Padded hidden units have zero weights, bias and initial state, so their h stays exactly 0 and the padded
 * columns of h never change a real unit. The kernel is chosen at run time from the CPU (cpuid);
 * WEFT_CPU_LSTM=dnnl (oneDNN's primitive), avx2 (this kernel's AVX2 form) or emu16 (the AVX-512 form's
 * code compiled for AVX2) forces a path (tests).
 */
#include "backends/cpu/k_dnnl.h"
#include "backends/cpu/k_isa.h"
#include "backends/cpu/k_rnn_image.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Lets the cell's selects (tanh's two ranges) vectorise, as in k_elementwise_unary.c. */
#pragma GCC optimize("no-trapping-math")
/* The emu16 form's 64-byte vectors pass only between always-inline functions (GCC warns at the file's end). */
#pragma GCC diagnostic ignored "-Wpsabi"

#include "backends/cpu/k_vmath.h" /* after the pragma, or its functions would not inline */

/* One direction's packed weights (pointers into the weight buffer). */
typedef struct ls_dir {
    int64_t in, hs;
    const float *wp, *rp, *bias, *peep; /* [nc][I][4][V], [nc][H][4][V], [nc][4][V], [nc][3][V] (i, o, f) */
} ls_dir;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* Keeps a k step's weight vectors in registers: left alone, GCC folds them into memory operands of the
 * FMAs and loads each once per batch row (10 loads for 8 FMAs in the AVX2 tile of 2 rows, load-port
 * bound; 6 with this; bench_lstm's classifier 10-15% faster on Zen 3). */
#define LS_V 16
#define LS_ROWS 4
#define LS_GP 4
#define LS_KEEP(w) __asm__("" : "+x"(w[0]), "+x"(w[1]), "+x"(w[2]), "+x"(w[3]))
#define LS_TARGET "avx512f,fma"
#define LS_NAME(x) x##_avx512
#define LS_MIN(a, b) ((vf)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define LS_MAX(a, b) ((vf)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define LS_RCP(a) ((LS_NAME(vf))_mm512_rcp14_ps((__m512)(a)))
#define LS_ATTR
#include "backends/cpu/k_rnn_lstm_isa.h"
#define LS_V 8
#define LS_ROWS 4
#define LS_GP 2
#define LS_KEEP(w) __asm__("" : "+x"(w[0]), "+x"(w[1]))
#define LS_TARGET "avx2,fma"
#define LS_NAME(x) x##_avx2
#define LS_MIN(a, b) ((vf)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define LS_MAX(a, b) ((vf)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define LS_RCP(a) ((LS_NAME(vf))_mm256_rcp_ps((__m256)(a)))
#define LS_ATTR
#include "backends/cpu/k_rnn_lstm_isa.h"
/* The AVX-512 form's code (16 lanes, four gates a pass) compiled for AVX2, each 16-lane vector two ymm
 * registers (so slow: its accumulators spill): WEFT_CPU_LSTM=emu16 runs it, so that an AVX2 machine tests
 * what the AVX-512 form computes, its 16-lane panels, chunks and tails, on every run of the test suite.
 * min and max keep minps's rule (the second operand when either is NaN); the reciprocal is a division. */
#define LS_V 16
#define LS_ROWS 4
#define LS_GP 4
#define LS_KEEP(w) ((void)(w))
#define LS_TARGET "avx2,fma"
#define LS_NAME(x) x##_emu16
#define LS_SEL(m, a, b) ((vf)(((m) & (LS_NAME(vi))(a)) | (~(m) & (LS_NAME(vi))(b))))
#define LS_MIN(a, b) ({ vf a_ = (a), b_ = (b); LS_SEL(a_ < b_, a_, b_); })
#define LS_MAX(a, b) ({ vf a_ = (a), b_ = (b); LS_SEL(a_ > b_, a_, b_); })
#define LS_RCP(a) (1.0f / (a))
#define LS_ATTR , cold /* a test's form: compiled for size */
#include "backends/cpu/k_rnn_lstm_isa.h"
#undef LS_SEL
#define LS_HAVE_ISA 1

/* One form's entry points. */
typedef struct ls_isa {
    int64_t V;
    void (*xstep)(const ls_dir *D, int64_t c0, int64_t c1, int64_t nq, const float *const *xr, float *const *xo);
    void (*step)(const ls_dir *D, int64_t c0, int64_t c1, int64_t b0, int64_t b1, const float *const *xr,
                 const float *hp, float *cs, float *hn, int64_t Hp);
} ls_isa;
static const ls_isa ls_avx512 = {16, xstep_avx512, step_avx512}, ls_avx2 = {8, xstep_avx2, step_avx2},
                    ls_emu16 = {16, xstep_emu16, step_emu16};
#endif

/* The node's cache entry holds no primitive: only the packed weights and the run contexts. */
static wf_status *ls_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    (void)k, (void)arg, (void)eng, (void)p;
    return NULL;
}

#ifdef LS_HAVE_ISA
/* The form of the kernel this process runs, or NULL (none: oneDNN or the f64 loop). */
static const ls_isa *ls_form(void)
{
    static atomic_int v = -1;
    int f = wf__cpu_form(&v, "WEFT_CPU_LSTM", "dnnl");
    const char *e = getenv("WEFT_CPU_LSTM");
    bool fma = f >= WF__FORM_AVX2 && __builtin_cpu_supports("fma");
    if (e && !strcmp(e, "emu16")) return fma ? &ls_emu16 : NULL;
    return f == WF__FORM_AVX512 ? &ls_avx512 : fma ? &ls_avx2 : NULL;
}
#endif

/* Lanes of the kernel this process runs: 16, 8, or 0 (none: oneDNN or the f64 loop). */
static int ls_lanes(void)
{
#ifdef LS_HAVE_ISA
    const ls_isa *f = ls_form();
    return f ? (int)f->V : 0;
#else
    return 0;
#endif
}

/*
 * Where this kernel beats oneDNN's (2 threads, Sapphire Rapids with AVX-512, 2-layer LSTMs of 32 steps,
 * `weft run` medians against WEFT_CPU_LSTM=dnnl): batch 1, input 64, hidden 128: 0.28 against 0.42 ms; batch
 * 8, 64, 128 (bench_lstm): 0.60-0.66 against 1.16 ms; batch 64, 64, 128: 4.5 against 5.0 ms. It loses once a
 * direction's packed weights outgrow a core's L2, since every step streams them: batch 8, 256, 512 (6 MB):
 * 13.9 against 10.7 ms; batch 32, 128, 256 (1.5 MB): 9.2 against 8.0 ms. And beyond a batch of 64 oneDNN's
 * large input GEMM pays for its per-step cost.
 */
#define LS_MAX_BATCH 64
/* rows of x a thread projects at a time (pointers on its stack), and the steps whose projections are
 * kept at a time (a window's: up to 64 x 64 rows of 4 Hp floats, 8 MB at hidden 128) */
#define LS_XBLOCK 256
#define LS_WINDOW 64
#define LS_MAX_WEIGHT_BYTES (1 << 20)

/* Packed floats of one direction: nc chunks of V lanes. */
static int64_t ls_dir_floats(const wf__lstm_dims *d, int64_t V)
{
    int64_t nc = (d->hs + V - 1) / V;
    return nc * V * (4 * d->in + 4 * d->hs + 4 + 3);
}

bool wf__lstm_own_takes(const wf__lstm_dims *d)
{
    int64_t V = ls_lanes();
    return V > 0 && d->batch <= LS_MAX_BATCH && ls_dir_floats(d, V) * (int64_t)sizeof(float) <= LS_MAX_WEIGHT_BYTES;
}

typedef struct ls_pack_arg {
    const wf__lstm_dims *d;
    int64_t V;
} ls_pack_arg;

/* ONNX W or R [4H][K] (gates i, o, f, c) to [nc][K][4][V], zero past H: a chunk's panel */
static void ls_panels(const float *M, float *out, int64_t H, int64_t K, int64_t V)
{
    int64_t nc = (H + V - 1) / V;
    for (int64_t c = 0; c < nc; c++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t g = 0; g < 4; g++) {
                float *o = out + ((c * K + k) * 4 + g) * V;
                for (int64_t j = 0; j < V; j++) {
                    int64_t u = c * V + j;
                    o[j] = u < H ? M[(g * H + u) * K + k] : 0.0f;
                }
            }
}

static wf_status *ls_pack(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const void *arg, const float *const w[4], char *buf)
{
    (void)k, (void)p, (void)r;
    const ls_pack_arg *a = arg;
    const wf__lstm_dims *d = a->d;
    int64_t V = a->V, H = d->hs, I = d->in, nc = (H + V - 1) / V, per = ls_dir_floats(d, V);
    const float *W = w[0], *R = w[1], *B = w[2], *P = w[3];
    for (int64_t dir = 0; dir < d->nd; dir++) {
        float *o = (float *)buf + dir * per;
        ls_panels(W + dir * 4 * H * I, o, H, I, V);
        ls_panels(R + dir * 4 * H * H, o + nc * V * 4 * I, H, H, V);
        float *bias = o + nc * V * 4 * (I + H), *peep = bias + nc * 4 * V;
        for (int64_t c = 0; c < nc; c++)
            for (int64_t j = 0; j < V; j++) {
                int64_t u = c * V + j;
                for (int64_t g = 0; g < 4; g++) {
                    const float *wb = B ? B + dir * 8 * H : NULL;
                    bias[(c * 4 + g) * V + j] = u < H && wb ? wb[g * H + u] + wb[4 * H + g * H + u] : 0.0f;
                }
                for (int64_t g = 0; g < 3; g++)
                    peep[(c * 3 + g) * V + j] = u < H && P ? P[dir * 3 * H + g * H + u] : 0.0f;
            }
    }
    wf__dn_count_wpack();
    return NULL;
}

static atomic_int_least64_t g_runs, g_rows, g_chunks, g_steals;

void wf__lstm_stats(int64_t *runs, int64_t *rows, int64_t *chunks, int64_t *steals)
{
    *runs = atomic_load(&g_runs);
    *rows = atomic_load(&g_rows);
    *chunks = atomic_load(&g_chunks);
    *steals = atomic_load(&g_steals);
}

/* A barrier for the region's threads that spins briefly, then yields (a preempted partner). */
typedef struct ls_bar {
    atomic_int arrived, phase;
} ls_bar;

static void ls_wait(ls_bar *b, int T, int *phase)
{
    if (T <= 1) return;
    int ph = *phase;
    *phase = ph + 1;
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == T - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->phase, ph + 1, memory_order_release);
        return;
    }
    for (unsigned spin = 0; atomic_load_explicit(&b->phase, memory_order_acquire) == ph; spin++) {
        if (spin < 512) __builtin_ia32_pause();
        else sched_yield();
    }
}

/* A thread's range of chunks in a step, claimed one chunk at a time (ls_claim); a line of its own. */
typedef struct ls_cursor {
    _Alignas(64) atomic_int_least64_t next;
} ls_cursor;

/* Chunk offset within a range of len chunks claimed for global step g, or -1 once the range is taken. The
 * range's cursor counts claims over all steps: it is g len when step g starts (the barrier after step g - 1
 * comes only once every range is taken) and never passes (g + 1) len within the step. Relaxed: the barriers
 * order the data. */
static int64_t ls_claim(ls_cursor *cu, int64_t g, int64_t len)
{
    int64_t v = atomic_load_explicit(&cu->next, memory_order_relaxed);
    while (v < (g + 1) * len)
        if (atomic_compare_exchange_weak_explicit(&cu->next, &v, v + 1, memory_order_relaxed, memory_order_relaxed))
            return v - g * len;
    return -1;
}

#define LS_MAX_TEAM 64

typedef struct ls_run {
    const wf__lstm_dims *d;
    const struct ls_isa *isa;
    int64_t V, Hp, nc;
    bool by_rows;                     /* threads split the batch (no barrier), else the chunks */
    const char *wbuf;
    const float *X, *h0, *c0;
    float *Y, *Yh, *Yc, *hbuf, *cbuf; /* hbuf [2][N][Hp], cbuf [N][Hp] */
    float *xp;                        /* [LS_WINDOW][N][nc][4][V]: bias + x_t W^T of a window's steps */
    const float **xr;                 /* [threads][N] row pointers */
    ls_bar bar;
    ls_cursor *cur;                   /* [threads]: each thread's range of chunks, when they split the chunks */
    int lag_us;                       /* tests: the last thread sleeps this long before each step's claims */
    int team;                         /* the threads that ran it */
} ls_run;

/* offsets of [t][d][b] in Y and [d][b] in the states, for the layout */
static int64_t ls_y(const wf__lstm_dims *d, int64_t t, int64_t dir, int64_t b)
{
    return (d->layout ? (b * d->seq + t) * d->nd + dir : (t * d->nd + dir) * d->batch + b) * d->hs;
}
static int64_t ls_s(const wf__lstm_dims *d, int64_t dir, int64_t b) { return (d->layout ? b * d->nd + dir : dir * d->batch + b) * d->hs; }

#ifdef LS_HAVE_ISA
/* Thread tid of T: every direction and step, for its batch rows [b0, b1) and chunks [c0, c1), neither empty
 * (wf__lstm_own asks for at most N / 4 threads by rows, at most nc by chunks). The rows of a
 * batch are independent sequences, so a split of the rows needs no barrier; a split of the chunks (batches
 * too small to share) meets at one after every step, since a step reads every unit of h_{t-1}. */
static void ls_thread(void *arg, int tid, int T)
{
    ls_run *u = arg;
    const wf__lstm_dims *d = u->d;
    int64_t V = u->V, Hp = u->Hp, N = d->batch, H = d->hs, S = d->seq, I = d->in, nc = u->nc;
    int64_t b0 = 0, b1 = N, c0 = 0, c1 = nc;
    if (u->by_rows) b0 = N * tid / T, b1 = N * (tid + 1) / T;
    else c0 = nc * tid / T, c1 = nc * (tid + 1) / T;
    int64_t j0 = c0 * V, j1 = c1 * V < H ? c1 * V : H;
    int B = u->by_rows ? 1 : T; /* threads that meet at the barrier */
    const float **xr = u->xr + tid * N, *xq[LS_XBLOCK];
    float *xo[LS_XBLOCK];
    int phase = 0;
    int64_t steals = 0;
    if (tid == 0) u->team = T;
    for (int64_t dir = 0; dir < d->nd; dir++) {
        const float *o = (const float *)u->wbuf + dir * ls_dir_floats(d, V);
        ls_dir D = {I, H, o, o + nc * V * 4 * I, o + nc * V * 4 * (I + H), o + nc * V * 4 * (I + H) + nc * 4 * V};
        bool rev = d->nd == 2 ? dir == 1 : d->reverse;
        /* this thread's part of the initial state; the padding is zero */
        for (int64_t b = b0; b < b1; b++) {
            float *h = u->hbuf + b * Hp, *c = u->cbuf + b * Hp;
            memset(h + j0, 0, sizeof(float) * (size_t)(c1 * V - j0));
            memset(c + j0, 0, sizeof(float) * (size_t)(c1 * V - j0));
            if (u->h0) memcpy(h + j0, u->h0 + ls_s(d, dir, b) + j0, sizeof(float) * (size_t)(j1 - j0));
            if (u->c0) memcpy(c + j0, u->c0 + ls_s(d, dir, b) + j0, sizeof(float) * (size_t)(j1 - j0));
        }
        for (int64_t s = 0; s < S; s++) {
            int64_t t = rev ? S - 1 - s : s;
            if (s % LS_WINDOW == 0) {
                /* bias + x_t W^T of this thread's rows and chunks for the window's steps first (no step
                 * depends on another; the steps read only these), LS_XBLOCK rows at a time so that a
                 * chunk's W panel stays in L1 across them */
                int64_t nw = S - s < LS_WINDOW ? S - s : LS_WINDOW, rows = nw * (b1 - b0);
                for (int64_t q0 = 0; q0 < rows; q0 += LS_XBLOCK) {
                    int64_t nq = rows - q0 < LS_XBLOCK ? rows - q0 : LS_XBLOCK;
                    for (int64_t q = 0; q < nq; q++) {
                        int64_t w = (q0 + q) / (b1 - b0), b = b0 + (q0 + q) % (b1 - b0), tw = rev ? t - w : t + w;
                        xq[q] = u->X + (d->layout ? b * S + tw : tw * N + b) * I;
                        xo[q] = u->xp + (w * N + b) * Hp * 4;
                    }
                    u->isa->xstep(&D, c0, c1, nq, xq, xo);
                }
                /* every thread's projections (another thread may take a chunk of this range) and, before
                 * the first step, every thread's part of the initial state */
                ls_wait(&u->bar, B, &phase);
            }
            const float *hp = u->hbuf + (s & 1) * N * Hp;
            float *hn = u->hbuf + ((s + 1) & 1) * N * Hp;
            for (int64_t b = b0; b < b1; b++) xr[b] = u->xp + (s % LS_WINDOW * N + b) * Hp * 4;
            if (B == 1) {
                u->isa->step(&D, c0, c1, b0, b1, xr, hp, u->cbuf, hn, Hp);
            } else {
                /* this thread's own chunks first (their panels are in its L2), then whatever is left of the
                 * others' ranges: a thread that a busy host slows for a while hands its chunks to the other
                 * instead of holding up every step */
                if (u->lag_us && tid == T - 1) usleep((useconds_t)u->lag_us);
                int64_t g = dir * S + s;
                for (int q = 0; q < T; q++) {
                    int rg = (tid + q) % T;
                    int64_t r0 = nc * rg / T, len = nc * (rg + 1) / T - r0;
                    for (int64_t o; (o = ls_claim(&u->cur[rg], g, len)) >= 0;) {
                        u->isa->step(&D, r0 + o, r0 + o + 1, b0, b1, xr, hp, u->cbuf, hn, Hp);
                        steals += q > 0;
                    }
                }
            }
            ls_wait(&u->bar, B, &phase);
            /* after the barrier, the range's units whichever thread computed them */
            for (int64_t b = b0; b < b1; b++)
                memcpy(u->Y + ls_y(d, t, dir, b) + j0, hn + b * Hp + j0, sizeof(float) * (size_t)(j1 - j0));
        }
        const float *hl = u->hbuf + (S & 1) * N * Hp;
        for (int64_t b = b0; b < b1; b++) {
            if (u->Yh) memcpy(u->Yh + ls_s(d, dir, b) + j0, hl + b * Hp + j0, sizeof(float) * (size_t)(j1 - j0));
            if (u->Yc) memcpy(u->Yc + ls_s(d, dir, b) + j0, u->cbuf + b * Hp + j0, sizeof(float) * (size_t)(j1 - j0));
        }
    }
    if (steals) atomic_fetch_add_explicit(&g_steals, steals, memory_order_relaxed);
}

#endif

/*
 * Whether threads may split the batch rows (no barrier; every thread streams all of a direction's R panels
 * each step) rather than the chunks (each its share of them, a barrier a step). By rows while the panels
 * stay in a core's L2 with room to spare; past that each step reads them from L3 on every core at once,
 * and splitting the chunks keeps each thread's share in its own L2. bench_lstm's classifier (batch 8, then
 * 393 and 524 KB of W and R a layer, the projection inside the steps) on Zen 3 (512 KB L2), 2 threads,
 * interleaved: rows 1.07-1.36 ms (medians), best p10 0.92; chunks 1.09-1.32, best p10 0.84. With the
 * projection first (260 KB of R panels a layer, just past half the L2): chunks 1.21 ms (geometric mean of
 * 10 noisy medians), best p10 0.776; rows 1.23, 0.782. WEFT_CPU_LSTM_SPLIT=rows or chunks forces one (tests).
 */
static bool ls_split_rows(int64_t weight_bytes)
{
    static atomic_long l2 = -1;
    const char *e = getenv("WEFT_CPU_LSTM_SPLIT");
    if (e && !strcmp(e, "rows")) return true;
    if (e && !strcmp(e, "chunks")) return false;
    long c = atomic_load_explicit(&l2, memory_order_relaxed);
    if (c < 0) {
        c = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (c <= 0) c = 512 * 1024; /* unknown: the smallest L2 of the x86 cores with AVX2 we target */
        atomic_store_explicit(&l2, c, memory_order_relaxed);
    }
    return weight_bytes <= c / 2;
}

wf_status *wf__lstm_own(wf__kctx *k, const wf__lstm_dims *d)
{
#ifndef LS_HAVE_ISA
    (void)d;
    return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no vector LSTM kernel for this CPU");
#else
    const ls_isa *isa = ls_form();
    if (!isa) return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no vector LSTM kernel for this CPU");
    int64_t V = isa->V, H = d->hs, N = d->batch, D = d->nd, nc = (H + V - 1) / V, Hp = nc * V;
    int64_t key[8] = {'L', V, d->in, H, D, 0, 0, 0};
    wf__dn_prim *p = NULL;
    wf__dn_run *r = NULL;
    char *wbuf = NULL;
    bool wcached = false;
    wf_tensor *Y = NULL, *Yh = NULL, *Yc = NULL;
    int64_t sd[3] = {D, N, H}, sdl[3] = {N, D, H}, yd[4] = {d->seq, D, N, H}, ydl[4] = {N, d->seq, D, H};
    wf_status *s = wf__dn_acquire(k, key, 5, ls_build, NULL, &p);
    if (s) return s;
    if ((s = wf__kctx_output(k, 0, WF_F32, 4, d->layout ? ydl : yd, &Y))) goto done;
    if (k->n_out > 1 && (s = wf__kctx_output(k, 1, WF_F32, 3, d->layout ? sdl : sd, &Yh))) goto done;
    if (k->n_out > 2 && (s = wf__kctx_output(k, 2, WF_F32, 3, d->layout ? sdl : sd, &Yc))) goto done;
    const wf_tensor *wt[4] = {k->in[1], k->in[2], wf__ko2_has(k, 3) ? k->in[3] : NULL, wf__ko2_has(k, 7) ? k->in[7] : NULL};
    ls_pack_arg pa = {d, V};
    if ((s = wf__dn_run_get(k, p, &r)) ||
        (s = wf__rnn_weights(k, p, r, wt, sizeof(float) * (size_t)(D * ls_dir_floats(d, V)), ls_pack, &pa, &wbuf,
                             &wcached)))
        goto done;
    /* each thread's share of the batch at least a register tile's rows, and a direction's R panels (with its
     * bias and peepholes: what every step reads) within half a core's L2: split the batch, else the chunks
     * (ls_split_rows) */
    int threads = wf__kctx_threads(k);
    bool by_rows = N >= (int64_t)threads * 4 && ls_split_rows(sizeof(float) * nc * V * (4 * H + 7));
    if (!by_rows && threads > nc) threads = (int)nc;
    if (threads > LS_MAX_TEAM) threads = LS_MAX_TEAM;
    if (threads < 1) threads = 1;
    ls_cursor cur[LS_MAX_TEAM];
    for (int i = 0; i < threads; i++) atomic_init(&cur[i].next, 0);
    const char *lag = getenv("WEFT_CPU_LSTM_LAG_US");
    float *abuf = NULL;
    int64_t win = d->seq < LS_WINDOW ? d->seq : LS_WINDOW;
    size_t fl = (size_t)(3 * N * Hp + win * N * 4 * Hp), rows = (size_t)(threads * N);
    if ((s = wf__dn_run_buf(k, r, WF__DN_BUF_ACT, sizeof(float) * fl + sizeof(float *) * rows, (void **)&abuf))) goto done;
    ls_run u = {d, isa, V, Hp, nc, by_rows, wbuf, k->in[0]->data, wf__ko2_has(k, 5) ? k->in[5]->data : NULL,
                wf__ko2_has(k, 6) ? k->in[6]->data : NULL, Y->data, Yh ? Yh->data : NULL, Yc ? Yc->data : NULL,
                abuf, abuf + 2 * N * Hp, abuf + 3 * N * Hp, (const float **)(void *)(abuf + fl), {0, 0}, cur,
                lag ? atoi(lag) : 0, 1};
    if (threads == 1) {
        ls_thread(&u, 0, 1);
    } else {
        int tok = wf__intra_begin(k);
        wf__omp_team(threads, ls_thread, &u);
        wf__intra_end(k, tok);
    }
    atomic_fetch_add(&g_runs, 1);
    if (u.team > 1) atomic_fetch_add(by_rows ? &g_rows : &g_chunks, 1);
done:
    if (wbuf) wf__rnn_weights_done(p, wcached);
    wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
#endif
}
