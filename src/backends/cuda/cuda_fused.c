/*
 * FusedElementwise on CUDA: the program of a cluster of elementwise ops (lowering's "jit",
 * src/lower/jit.c) written out as CUDA C++, compiled at run time by NVRTC, loaded with the runtime's
 * library API (cudaLibraryLoadData) and launched on the device's compute stream. One thread per output
 * element in a grid-stride loop: the inputs are read once and the output written once.
 *
 * - The source depends only on the ops, their wiring, their attributes, what kind each input is (the
 *   output's size, a scalar, or a broadcast run) and whether the output has under 2^31 elements (the
 *   index is then 32-bit: a 64-bit division per broadcast input costs more than the load it feeds).
 *   Element counts and the broadcast runs' inner and period are kernel arguments, so a new batch size
 *   reuses the compiled kernel.
 * - Each op's expression is the single-op kernel's (cuda_kernels.cu, k_binary / k_unary) in f32, so the
 *   two agree, NaN and Inf included. The program is compiled with --fmad=false: NVRTC would otherwise
 *   contract one op's multiply with the next op's add, rounding once where the unfused chain rounds twice.
 * - Compiled code is cached per device in memory (for the life of the device) and on disk
 *   ($WEFT_CACHE_DIR/cuda-KEY.bin, ops/kutil_cache.h), keyed by the source, the options, the target
 *   architecture, NVRTC's version and the driver's. A file that does not load (stale, foreign, cut
 *   short) is rebuilt from source and rewritten.
 * - The target is the device's own sm_XY as a CUBIN when NVRTC knows it; a newer GPU gets PTX for the
 *   newest architecture NVRTC has, which the driver compiles on load.
 * - NVRTC is loaded with dlopen on first use, like cuBLAS (cuda_blas.c). Without it the device offers
 *   no FusedElementwise kernel (cuda_backend.c's find_kernel), so lowering keeps the ops unfused, and
 *   the device's description says why ("no NVRTC: libnvrtc.so.13 not found"). The emulator
 *   (tests/cudaemu) has its own NVRTC, which compiles the source for the CPU.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <nvrtc.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_cache.h"
#include "ops/kutil_sbuf.h"

/* ---- NVRTC at run time -------------------------------------------------------------------------------- */

#define CU_RTC_FUNCS(X)                                                                                            \
    X(version, nvrtcVersion) X(error_string, nvrtcGetErrorString) X(create, nvrtcCreateProgram)                    \
    X(destroy, nvrtcDestroyProgram) X(compile, nvrtcCompileProgram) X(log_size, nvrtcGetProgramLogSize)             \
    X(log, nvrtcGetProgramLog) X(cubin_size, nvrtcGetCUBINSize) X(cubin, nvrtcGetCUBIN) X(ptx_size, nvrtcGetPTXSize) \
    X(ptx, nvrtcGetPTX) X(num_archs, nvrtcGetNumSupportedArchs) X(archs, nvrtcGetSupportedArchs)

typedef struct cu_rtc_api {
#define X(field, fn) __typeof__(&fn) field;
    CU_RTC_FUNCS(X)
#undef X
} cu_rtc_api;

static cu_rtc_api g_rtc;
static pthread_once_t g_rtc_once = PTHREAD_ONCE_INIT;
static const char *g_rtc_why = "NVRTC was not loaded";
static char g_rtc_why_buf[300];
static int g_rtc_major, g_rtc_minor;

static void rtc_load(void)
{
    cu_rtc_api t;
#ifdef WEFT_CUDA_EMU
    /* the emulator's NVRTC is part of its runtime, linked into the plugin */
#define X(field, fn) t.field = fn;
    CU_RTC_FUNCS(X)
#undef X
    const char *so = "the emulator's NVRTC";
#else
    char so[64];
    snprintf(so, sizeof so, "libnvrtc.so.%d", CUDART_VERSION / 1000); /* the major version the headers declare */
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (!e || strstr(e, "No such file")) snprintf(g_rtc_why_buf, sizeof g_rtc_why_buf, "%s not found", so);
        else snprintf(g_rtc_why_buf, sizeof g_rtc_why_buf, "%s failed to load: %.200s", so, e);
        g_rtc_why = g_rtc_why_buf;
        return;
    }
#define X(field, fn)                                                                                               \
    {                                                                                                              \
        void *p = dlsym(h, #fn);                                                                                   \
        if (!p) {                                                                                                  \
            snprintf(g_rtc_why_buf, sizeof g_rtc_why_buf, "%s lacks %s", so, #fn);                                  \
            g_rtc_why = g_rtc_why_buf;                                                                             \
            dlclose(h);                                                                                            \
            return;                                                                                                \
        }                                                                                                          \
        memcpy(&t.field, &p, sizeof p);                                                                            \
    }
    CU_RTC_FUNCS(X)
#undef X
    /* kept loaded for the life of the process, like cuBLAS */
#endif
    if (t.version(&g_rtc_major, &g_rtc_minor) != NVRTC_SUCCESS) {
        snprintf(g_rtc_why_buf, sizeof g_rtc_why_buf, "%s does not answer nvrtcVersion", so);
        g_rtc_why = g_rtc_why_buf;
        return;
    }
    g_rtc = t;
    g_rtc_why = NULL;
}

const char *cu_nvrtc_load(void)
{
    pthread_once(&g_rtc_once, rtc_load);
    return g_rtc_why;
}

const char *cu_nvrtc_describe(char *buf, size_t n)
{
    const char *why = cu_nvrtc_load();
    if (why) snprintf(buf, n, "no NVRTC: %s", why);
    else snprintf(buf, n, "NVRTC %d.%d", g_rtc_major, g_rtc_minor);
    return buf;
}

/* ---- the device's compiled kernels ---------------------------------------------------------------------- */

struct cu_jit {
    uint64_t key;
    cudaLibrary_t lib;
    cudaKernel_t kern;
    struct cu_jit *next;
};

void cu_jit_release(cu_dev *d)
{
    for (cu_jit *j = d->jit, *jn; j; j = jn) {
        jn = j->next;
        cudaLibraryUnload(j->lib);
        cu_host->free(j);
    }
    d->jit = NULL;
}

/* The disk cache's file: this header, then the CUBIN or PTX. */
typedef struct cu_jit_file {
    char magic[8]; /* "WFCUJIT1" */
    uint64_t key, bytes;
} cu_jit_file;

static const char k_magic[8] = {'W', 'F', 'C', 'U', 'J', 'I', 'T', '1'};

/* A library from the disk cache, or NULL (no file, or one that does not load). */
static cudaLibrary_t load_cached(uint64_t key, const char *path)
{
    size_t len = 0;
    unsigned char *buf = wf__ku_cache_read(path, cu_host->malloc, cu_host->free, (size_t)1 << 30, &len);
    if (!buf) return NULL;
    cudaLibrary_t lib = NULL;
    cu_jit_file h;
    if (len > sizeof h) memcpy(&h, buf, sizeof h);
    if (len > sizeof h && !memcmp(h.magic, k_magic, sizeof k_magic) && h.key == key && h.bytes == len - sizeof h &&
        cudaLibraryLoadData(&lib, buf + sizeof h, NULL, NULL, 0, NULL, NULL, 0) != cudaSuccess) {
        cudaGetLastError(); /* not the next kernel's error: the source is compiled instead */
        lib = NULL;
    }
    cu_host->free(buf);
    return lib;
}

/* The architecture to compile for: *cubin when NVRTC knows the device's own, else PTX for the newest
 * one NVRTC has below it; 0 when NVRTC has none that the device can run. */
static int target_arch(const cu_dev *d, bool *cubin)
{
    int want = d->cc_major * 10 + d->cc_minor, n = 0, best = 0;
    int archs[64];
    *cubin = false;
    if (g_rtc.num_archs(&n) != NVRTC_SUCCESS || n < 1 || n > 64 || g_rtc.archs(archs) != NVRTC_SUCCESS) return 0;
    for (int i = 0; i < n; i++) {
        if (archs[i] == want) {
            *cubin = true;
            return want;
        }
        if (archs[i] < want && archs[i] > best) best = archs[i];
    }
    return best;
}

static wf_status *rtc_fail(wf__kctx *k, nvrtcResult r, const char *what, nvrtcProgram p)
{
    char log[1600] = "";
    size_t n = 0;
    if (p && g_rtc.log_size(p, &n) == NVRTC_SUCCESS && n > 1) {
        char *l = cu_host->malloc(n);
        if (l && g_rtc.log(p, l) == NVRTC_SUCCESS) snprintf(log, sizeof log, ": %.1500s", l);
        cu_host->free(l);
    }
    return cu_host->kctx_fail(k, WF_INTERNAL, "generated kernel: NVRTC %d.%d %s failed on %s: %s (%d)%s", g_rtc_major,
                              g_rtc_minor, what, k->device->short_name, g_rtc.error_string(r), (int)r, log);
}

/* NVRTC's options after the architecture: no contraction across ops (see the top of the file) */
#define K_OPTS "--fmad=false", "--std=c++17", "-default-device"
#define K_OPTS_KEY "--fmad=false --std=c++17 -default-device"

/* Compiles src into a loaded library; under d->jit_mu. */
static wf_status *compile(wf__kctx *k, cu_dev *d, const char *src, const char *arch_opt, bool cubin, uint64_t key,
                          const char *path, cudaLibrary_t *lib)
{
    nvrtcProgram p = NULL;
    nvrtcResult r = g_rtc.create(&p, src, "weft_fused.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return rtc_fail(k, r, "program creation", NULL);
    const char *opts[] = {arch_opt, K_OPTS};
    wf_status *s = NULL;
    size_t len = 0;
    char *bin = NULL;
    r = g_rtc.compile(p, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r != NVRTC_SUCCESS) {
        s = rtc_fail(k, r, "compilation", p);
        goto done;
    }
    r = cubin ? g_rtc.cubin_size(p, &len) : g_rtc.ptx_size(p, &len);
    if (r == NVRTC_SUCCESS && !(bin = cu_host->malloc(len ? len : 1))) {
        s = cu_host->status(WF_OUT_OF_MEMORY, "out of memory for a generated CUDA kernel's %zu bytes", len);
        goto done;
    }
    if (r == NVRTC_SUCCESS) r = cubin ? g_rtc.cubin(p, bin) : g_rtc.ptx(p, bin);
    if (r != NVRTC_SUCCESS) {
        s = rtc_fail(k, r, cubin ? "CUBIN output" : "PTX output", p);
        goto done;
    }
    if ((s = cu_check(k, cudaLibraryLoadData(lib, bin, NULL, NULL, 0, NULL, NULL, 0), "load of a generated kernel")))
        goto done;
    cu_jit_file h;
    memcpy(h.magic, k_magic, sizeof k_magic);
    h.key = key;
    h.bytes = len;
    wf__ku_cache_write(path, &h, sizeof h, bin, len); /* a cache that cannot be written is only slower */
done:
    cu_host->free(bin);
    g_rtc.destroy(&p);
    return s;
}

/* The kernel for src on k's device: from the device's cache, the disk cache, or compiled now. */
static wf_status *kernel_for(wf__kctx *k, const char *src, cu_jit **out)
{
    cu_dev *d = cu_of(k);
    bool cubin;
    int arch = target_arch(d, &cubin);
    if (!arch)
        return cu_host->kctx_fail(k, WF_UNIMPLEMENTED,
                                  "generated kernel: NVRTC %d.%d has no target that %s (sm_%d%d) can run", g_rtc_major,
                                  g_rtc_minor, k->device->short_name, d->cc_major, d->cc_minor);
    char arch_opt[48], ver[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(ver, sizeof ver, "nvrtc %d.%d driver %d runtime %d", g_rtc_major, g_rtc_minor, drv, rt);
    uint64_t key = wf__ku_fnv(wf__ku_fnv(wf__ku_fnv(wf__ku_fnv(WF__FNV_SEED, src), arch_opt), K_OPTS_KEY), ver);
    wf_status *s = NULL;
    pthread_mutex_lock(&d->jit_mu);
    cu_jit *j;
    for (j = d->jit; j && j->key != key; j = j->next) {}
    if (!j) {
        char path[1024];
        wf__ku_cache_path(path, sizeof path, "cuda", key, "bin");
        cudaLibrary_t lib = load_cached(key, path);
        if (!lib && (s = compile(k, d, src, arch_opt, cubin, key, path, &lib))) goto done;
        cudaKernel_t kern;
        if ((s = cu_check(k, cudaLibraryGetKernel(&kern, lib, "k_fused"), "lookup of a generated kernel"))) {
            cudaLibraryUnload(lib);
            goto done;
        }
        if (!(j = cu_host->malloc(sizeof *j))) {
            cudaLibraryUnload(lib);
            s = cu_host->status(WF_OUT_OF_MEMORY, "out of memory caching a generated CUDA kernel");
            goto done;
        }
        *j = (cu_jit){key, lib, kern, d->jit};
        d->jit = j;
    }
    *out = j;
done:
    pthread_mutex_unlock(&d->jit_mu);
    return s;
}

/* ---- the source --------------------------------------------------------------------------------------- */

typedef struct expr {
    const char *op, *e; /* graph op ("" for Gelu's tanh form), expression over x, y (binary) or v, pa, pb */
    bool bin;
} expr;

/* cuda_kernels.cu's bin_op and k_unary in f32 (C = float there), op for op */
static const expr g_exprs[] = {
    {"Add", "x + y", true},
    {"Sub", "x - y", true},
    {"Mul", "x * y", true},
    {"Div", "x / y", true},
    {"Maximum", "(x >= y || x != x) ? x : y", true}, /* NaN wins, as numpy.maximum */
    {"Minimum", "(x <= y || x != x) ? x : y", true},
    {"Neg", "-v", false},
    {"Abs", "fabsf(v)", false},
    {"Sign", "v > 0.f ? 1.f : v < 0.f ? -1.f : v", false},
    {"Square", "v * v", false},
    {"Relu", "v < 0.f ? 0.f : v", false}, /* NaN passes */
    {"Clip", "(v < pa ? pa : v) > pb ? pb : (v < pa ? pa : v)", false},
    {"Exp", "expf(v)", false},
    {"Log", "logf(v)", false},
    {"Sqrt", "sqrtf(v)", false},
    {"Rsqrt", "1.f / sqrtf(v)", false},
    {"Reciprocal", "1.f / v", false},
    {"Tanh", "tanhf(v)", false},
    {"Sigmoid", "v >= 0.f ? 1.f / (1.f + expf(-v)) : expf(v) / (1.f + expf(v))", false}, /* as cuda_kernels.cu */
    {"LeakyRelu", "v < 0.f ? pa * v : v", false},
    {"Elu", "v < 0.f ? pa * expm1f(v) : v", false},
    {"Gelu", "0.5f * v * erfcf(-v * 0.70710678118654752f)", false},
    {"", "v / (1.f + expf(-2.f * (0.7978845608028654f * (v + 0.044715f * v * v * v))))", false},
    {"Erf", "erff(v)", false},
    {"Softplus", "(v > 0.f ? v : 0.f) + log1pf(expf(-fabsf(v)))", false},
    {"Floor", "floorf(v)", false},
    {"Ceil", "ceilf(v)", false},
    {"Round", "rintf(v)", false}, /* ties to even */
    {"HardSigmoid", "wf_clamp01(pa * v + pb)", false},
    {"HardSwish", "v * wf_clamp01(v * (1.f / 6.f) + 0.5f)", false},
    {"Swish", "v * (pa * v >= 0.f ? 1.f / (1.f + expf(-pa * v)) : expf(pa * v) / (1.f + expf(pa * v)))", false},
    {NULL, NULL, false},
};

static const expr *expr_of(const wf__ew_insn *in)
{
    const char *op = !strcmp(in->op, "Gelu") && in->alpha != 0 ? "" : in->op;
    for (int i = 0; g_exprs[i].op; i++)
        if (!strcmp(g_exprs[i].op, op) && g_exprs[i].bin == (in->b >= 0)) return &g_exprs[i];
    return NULL;
}

/* A float parameter as an exact CUDA expression. */
static void literal(char *buf, size_t n, double v)
{
    float f = (float)v;
    if (isnan(f)) snprintf(buf, n, "__int_as_float(0x7fc00000)");
    else if (isinf(f)) snprintf(buf, n, "__int_as_float((int)0x%08x)", f > 0 ? 0x7f800000u : 0xff800000u);
    else snprintf(buf, n, "%af", (double)f);
}


/* 32-bit indices when i + the grid's stride (at most 2^31 threads) cannot wrap */
static bool small_index(const wf__ew_program *pg) { return pg->n < ((int64_t)1 << 31); }

/* The program as CUDA C++ in b; NULL, or the op that has no expression. */
static const char *source(const wf__ew_program *pg, wf__ku_sbuf *b)
{
    wf__ku_put(b, "typedef %s IT;\n", small_index(pg) ? "unsigned int" : "unsigned long long");
    wf__ku_put(b, "__device__ __forceinline__ float wf_clamp01(float t) { t = t > 1.f ? 1.f : t; return t < 0.f ? 0.f : t; }\n");
    wf__ku_put(b, "extern \"C\" __global__ void k_fused(");
    for (int i = 0; i < pg->n_in; i++) {
        wf__ku_put(b, "const float *p%d, ", i);
        if (wf__ew_kind(pg, i) == WF__EW_BCAST) wf__ku_put(b, "IT n%d, IT r%d, ", i, i);
    }
    wf__ku_put(b, "float *py, IT n)\n{\n");
    /* scalars once per thread: py may alias an input (the output reuses its buffer), so the compiler
     * could not hoist their loads out of the loop itself */
    for (int i = 0; i < pg->n_in; i++)
        if (wf__ew_kind(pg, i) == WF__EW_SCALAR) wf__ku_put(b, "  const float s%d = p%d[0];\n", i, i);
    wf__ku_put(b, "  for (IT i = (IT)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (IT)gridDim.x * blockDim.x) {\n");
    for (int i = 0; i < pg->n_in; i++) {
        switch (wf__ew_kind(pg, i)) {
        case WF__EW_FULL: wf__ku_put(b, "    const float v%d = p%d[i];\n", i, i); break;
        case WF__EW_SCALAR: wf__ku_put(b, "    const float v%d = s%d;\n", i, i); break;
        default: wf__ku_put(b, "    const float v%d = p%d[(i / n%d) %% r%d];\n", i, i, i, i); break;
        }
    }
    for (int j = 0; j < pg->n_insn; j++) {
        const wf__ew_insn *in = &pg->insn[j];
        const expr *e = expr_of(in);
        if (!e) return in->op;
        char a[64], bb[64], va[16], vb[16] = "";
        literal(a, sizeof a, in->alpha);
        literal(bb, sizeof bb, in->beta);
        snprintf(va, sizeof va, in->a < pg->n_in ? "v%d" : "t%d", in->a < pg->n_in ? in->a : in->a - pg->n_in);
        if (in->b >= 0)
            snprintf(vb, sizeof vb, in->b < pg->n_in ? "v%d" : "t%d", in->b < pg->n_in ? in->b : in->b - pg->n_in);
        if (e->bin) wf__ku_put(b, "    float t%d; { const float x = %s, y = %s; t%d = %s; }\n", j, va, vb, j, e->e);
        else
            wf__ku_put(b, "    float t%d; { const float v = %s, pa = %s, pb = %s; (void)pa; (void)pb; t%d = %s; }\n", j, va, a,
                bb, j, e->e);
    }
    wf__ku_put(b, "    py[i] = t%d;\n  }\n}\n", pg->n_insn - 1);
    return NULL;
}

/* ---- the kernel --------------------------------------------------------------------------------------- */

static wf_status *k_FusedElementwise(wf__kctx *k)
{
    const wf__ew_program *pg = k->ewprog;
    const wf__tinfo *oi = &k->out_info[0];
    int64_t n;
    char msg[200];
    wf_code bad = wf__ew_check(k, &n, msg, sizeof msg);
    if (bad) return cu_host->kctx_fail(k, bad, "%s", msg);
    wf_status *s = cu_enter(k);
    if (s) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output_reuse(k, 0, 0, WF_F32, oi->rank, oi->dims, &y, NULL)) || n == 0) return s;
    /* the compiled kernel, found once per plan node */
    cu_host->kctx_lock_state(k);
    cu_jit *j = *k->state;
    if (!j) {
        wf__ku_sbuf src = {.alloc = cu_host->malloc, .release = cu_host->free};
        const char *op = source(pg, &src);
        if (op) s = cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "generated kernel: no CUDA expression for %s", op);
        else if (src.failed) s = cu_host->status(WF_OUT_OF_MEMORY, "out of memory writing a generated CUDA kernel");
        else if (!(s = kernel_for(k, src.p, &j))) *k->state = j;
        cu_host->free(src.p);
    }
    cu_host->kctx_unlock_state(k);
    if (s) return s;
    /* the arguments, in the source's order: each input's pointer (and a broadcast's inner and period),
     * then y and n, 32- or 64-bit as the source's IT */
    bool small = small_index(pg);
    void *ptr[2 * WF__EW_MAX_REGS + 1];
    uint64_t u64[4 * WF__EW_MAX_REGS + 1];
    uint32_t u32[4 * WF__EW_MAX_REGS + 1];
    void *args[6 * WF__EW_MAX_REGS + 2];
    int na = 0, nu = 0;
#define INT_ARG(v)                                                                                                 \
    do {                                                                                                           \
        u64[nu] = (uint64_t)(v);                                                                                   \
        u32[nu] = (uint32_t)(v);                                                                                   \
        args[na++] = small ? (void *)&u32[nu] : (void *)&u64[nu];                                                  \
        nu++;                                                                                                      \
    } while (0)
    for (int i = 0; i < pg->n_in; i++) {
        ptr[i] = cu_ptr(k->in[i]);
        args[na++] = &ptr[i];
        if (wf__ew_kind(pg, i) == WF__EW_BCAST) {
            INT_ARG(pg->in[i].inner);
            INT_ARG(pg->in[i].period);
        }
    }
    ptr[pg->n_in] = cu_ptr(y);
    args[na++] = &ptr[pg->n_in];
    INT_ARG(n);
#undef INT_ARG
    int64_t blocks = (n + 255) / 256;
    dim3 grid = {(unsigned)(blocks > 8192 ? 8192 : blocks), 1, 1}, block = {256, 1, 1};
    return cu_check(k, cudaLaunchKernel((const void *)j->kern, grid, block, args, 0, cu_of(k)->compute),
                    "generated kernel launch");
}

/* Test hook (tests/test_nvrtc.c), in the plugin built by nvcc: compiles program pg's source with the
 * NVRTC the plugin loads, with the kernel's options, to a CUBIN for sm_<arch>, without a device. 0 when
 * it compiled; else -1 and why (the NVRTC log, or what is missing) in log. */
__attribute__((visibility("default"))) int wf_cuda_jit_selftest(const wf__ew_program *pg, int arch, char *log,
                                                                size_t n)
{
    const char *why = cu_nvrtc_load();
    if (why) {
        snprintf(log, n, "%s", why);
        return -1;
    }
    wf__ku_sbuf src = {.alloc = malloc, .release = free};
    const char *op = source(pg, &src);
    if (op || src.failed) {
        snprintf(log, n, op ? "no CUDA expression for %s" : "out of memory", op);
        free(src.p);
        return -1;
    }
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    const char *opts[] = {arch_opt, K_OPTS};
    nvrtcProgram p = NULL;
    nvrtcResult r = g_rtc.create(&p, src.p, "weft_fused.cu", 0, NULL, NULL);
    size_t len = 0;
    if (r == NVRTC_SUCCESS) r = g_rtc.compile(p, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r == NVRTC_SUCCESS) r = g_rtc.cubin_size(p, &len);
    log[0] = 0;
    if (r != NVRTC_SUCCESS || !len) {
        size_t ln = 0;
        int w = snprintf(log, n, "%s (%d)\n", g_rtc.error_string(r), (int)r);
        if (p && w > 0 && (size_t)w < n && g_rtc.log_size(p, &ln) == NVRTC_SUCCESS && ln > 1 && ln <= n - (size_t)w)
            g_rtc.log(p, log + w);
        if (w > 0 && (size_t)w < n) snprintf(log + strlen(log), n - strlen(log), "--- source ---\n%s", src.p);
    }
    if (p) g_rtc.destroy(&p);
    free(src.p);
    return r == NVRTC_SUCCESS && len ? 0 : -1;
}

const wf__kernel_def cu_kernels_fused[] = {
    {"FusedElementwise", "GPU", WF__DT_BIT(WF_F32), -1, k_FusedElementwise, NULL, WF__K_INPLACE},
    {0},
};
