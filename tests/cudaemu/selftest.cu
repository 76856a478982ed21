/*
 * Self-test of weft's CUDA emulator (tests/cudaemu), built through the same rewrite as the plugin: barrier
 * and warp-collective semantics (results that are wrong unless threads really wait for each other),
 * dynamic shared memory, atomics, float <-> half rounding against the compiler's _Float16, the cuBLAS
 * GEMM against a double reference, and the error paths the plugin relies on (out of memory, bad launch
 * configurations, host pointers passed as device pointers, host code touching device memory, deadlock),
 * the stream-ordered host work and event times of the plugin's streams and events, and run-time compiled
 * kernels (NVRTC, the library API, cudaLaunchKernel).
 */
#include <dirent.h>
#include <pthread.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <nvrtc.h>

static int g_pass, g_fail;
#define EXPECT(cond, ...)                                                                                          \
    do {                                                                                                           \
        if (cond) {                                                                                                \
            g_pass++;                                                                                              \
        } else {                                                                                                   \
            g_fail++;                                                                                              \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                 \
            printf(__VA_ARGS__);                                                                                   \
            printf("\n");                                                                                          \
        }                                                                                                          \
    } while (0)

/* tree sum in shared memory: every step reads what other threads wrote before the barrier */
__global__ void k_block_sum(const int *x, int *out)
{
    __shared__ int buf[256];
    buf[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

__global__ void k_warp(const int *x, int *sum, unsigned *ballot, int *count)
{
    int v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    unsigned b = __ballot_sync(0xffffffffu, x[threadIdx.x] & 1);
    int c = __syncthreads_count(x[threadIdx.x] > 10);
    int lane0 = __shfl_sync(0xffffffffu, (int)threadIdx.x * 3, 0);
    if (threadIdx.x % 32 == 0) {
        sum[threadIdx.x / 32] = v;
        ballot[threadIdx.x / 32] = b;
    }
    if (threadIdx.x == 33) *count = c + lane0 * 1000; /* lane0 of warp 1 is thread 32: 96000 */
}

__global__ void k_reverse(float *y, int n)
{
    extern __shared__ float sm[];
    sm[threadIdx.x] = y[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = sm[n - 1 - threadIdx.x];
}

__global__ void k_hist(const int *x, int n, int *h)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&h[x[i] % 8], 1);
}

__global__ void k_touch(int *p) { p[threadIdx.x] = 1; }

__global__ void k_deadlock(int *p)
{
    if (threadIdx.x == 0)
        __syncthreads();
    else
        p[0] = __shfl_sync(0xffffffffu, 1, 0);
}

static void test_barriers(void)
{
    const int B = 3, T = 256;
    int hx[B * T], *dx, *dout, hout[B];
    for (int i = 0; i < B * T; i++) hx[i] = i;
    EXPECT(cudaMalloc((void **)&dx, sizeof hx) == cudaSuccess, "malloc");
    EXPECT(cudaMalloc((void **)&dout, sizeof hout) == cudaSuccess, "malloc");
    cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
    k_block_sum<<<B, T>>>(dx, dout);
    EXPECT(cudaGetLastError() == cudaSuccess, "launch");
    cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
    for (int b = 0; b < B; b++) {
        int want = 0;
        for (int i = 0; i < T; i++) want += b * T + i;
        EXPECT(hout[b] == want, "block %d sum %d, want %d", b, hout[b], want);
    }
    int *dsum, *dcount;
    unsigned *dballot;
    cudaMalloc((void **)&dsum, 8 * sizeof(int));
    cudaMalloc((void **)&dballot, 8 * sizeof(unsigned));
    cudaMalloc((void **)&dcount, sizeof(int));
    k_warp<<<1, 64>>>(dx, dsum, dballot, dcount);
    int hs[2], hc;
    unsigned hb[2];
    cudaMemcpy(hs, dsum, sizeof hs, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, dballot, sizeof hb, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hc, dcount, sizeof hc, cudaMemcpyDeviceToHost);
    EXPECT(hs[0] == 31 * 32 / 2 && hs[1] == (32 + 63) * 32 / 2, "warp sums %d %d", hs[0], hs[1]);
    EXPECT(hb[0] == 0xaaaaaaaau && hb[1] == 0xaaaaaaaau, "ballots %x %x", hb[0], hb[1]);
    EXPECT(hc == 53 + 96000, "syncthreads_count + shfl %d", hc);
    float hy[100], *dy;
    for (int i = 0; i < 100; i++) hy[i] = (float)i;
    cudaMalloc((void **)&dy, sizeof hy);
    cudaMemcpy(dy, hy, sizeof hy, cudaMemcpyHostToDevice);
    k_reverse<<<1, 100, 100 * sizeof(float)>>>(dy, 100);
    EXPECT(cudaGetLastError() == cudaSuccess, "launch with dynamic shared memory");
    cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
    EXPECT(hy[0] == 99 && hy[99] == 0 && hy[40] == 59, "reverse %g %g %g", hy[0], hy[99], hy[40]);
    int *dh, hh[8];
    cudaMalloc((void **)&dh, sizeof hh);
    cudaMemset(dh, 0, sizeof hh);
    k_hist<<<2, 128>>>(dx, B * T, dh);
    cudaMemcpy(hh, dh, sizeof hh, cudaMemcpyDeviceToHost);
    EXPECT(hh[0] == B * T / 8 && hh[7] == B * T / 8, "histogram %d %d", hh[0], hh[7]);
    cudaFree(dx);
    cudaFree(dout);
    cudaFree(dsum);
    cudaFree(dballot);
    cudaFree(dcount);
    cudaFree(dy);
    cudaFree(dh);
}

static void test_half(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every half through float and back */
        _Float16 r;
        uint16_t hb = (uint16_t)h;
        memcpy(&r, &hb, 2);
        float want = (float)r, got = __half2float(__ushort_as_half(hb));
        if (memcmp(&want, &got, 4) && !(want != want && got != got)) bad++;
        if (want == want && __half_as_ushort(__float2half_rn(got)) != hb) bad++;
    }
    EXPECT(bad == 0, "%d half values do not round-trip", bad);
    bad = 0;
    uint32_t s = 12345;
    for (int i = 0; i < 2000000; i++) { /* floats of every exponent, ties included */
        s = s * 1664525u + 1013904223u;
        uint32_t u = (s & 0x8000ffffu) | ((uint32_t)(i % 64 + 96) << 23) | (i & 1 ? 0x1000u : 0);
        float f;
        memcpy(&f, &u, 4);
        _Float16 w = (_Float16)f;
        uint16_t wb;
        memcpy(&wb, &w, 2);
        if (__half_as_ushort(__float2half_rn(f)) != wb) bad++;
    }
    EXPECT(bad == 0, "%d floats round differently from _Float16", bad);
}

static void test_gemm(void)
{
    /* row-major C[m,n] = A[m,k] B[k,n] as the plugin calls it: column-major C^T = B^T A^T, B transposed */
    const int m = 5, n = 7, k = 3, batch = 2;
    float ha[batch * m * k], hbt[batch * n * k], hc[batch * m * n];
    for (int i = 0; i < batch * m * k; i++) ha[i] = (float)(i % 7) - 3;
    for (int i = 0; i < batch * n * k; i++) hbt[i] = (float)(i % 5) * 0.5f;
    float *da, *db, *dc;
    cudaMalloc((void **)&da, sizeof ha);
    cudaMalloc((void **)&db, sizeof hbt);
    cudaMalloc((void **)&dc, sizeof hc);
    cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hbt, sizeof hbt, cudaMemcpyHostToDevice);
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "create");
    float alpha = 2, beta = 0;
    /* B^T stored [n, k] row-major is B [k, n] column-major with ld k: op T gives B^T... use op N on the
     * row-major B^T: column-major [k, n] with ld k, transposed -> [n, k] */
    cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, db, CUDA_R_32F, k,
                                                   (long long)n * k, da, CUDA_R_32F, k, (long long)m * k, &beta, dc,
                                                   CUDA_R_32F, n, (long long)m * n, batch, CUBLAS_COMPUTE_32F,
                                                   CUBLAS_GEMM_DEFAULT);
    EXPECT(st == CUBLAS_STATUS_SUCCESS, "gemm status %d", (int)st);
    cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double want = 0;
                for (int l = 0; l < k; l++) want += (double)ha[b * m * k + i * k + l] * hbt[b * n * k + j * k + l];
                if (fabs(2 * want - hc[b * m * n + i * n + j]) > 1e-4) bad++;
            }
    EXPECT(bad == 0, "%d wrong GEMM outputs", bad);
    st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, db, CUDA_R_32F, k - 1, 0, da,
                                    CUDA_R_32F, k, 0, &beta, dc, CUDA_R_32F, n, 0, 1, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    EXPECT(st == CUBLAS_STATUS_INVALID_VALUE, "short lda: status %d", (int)st);
    st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, db, CUDA_R_32F, k, (long long)n * k,
                                    da, CUDA_R_32F, k, (long long)m * k, &beta, dc, CUDA_R_32F, n, (long long)m * n,
                                    batch + 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    EXPECT(st == CUBLAS_STATUS_EXECUTION_FAILED, "batch past the allocations: status %d", (int)st);
    cublasDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

static void test_errors(void)
{
    void *p = NULL, *q = NULL;
    EXPECT(cudaMalloc(&p, (size_t)65 << 20) == cudaErrorMemoryAllocation, "65 MiB of 64 MiB");
    EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation && cudaGetLastError() == cudaSuccess, "last error");
    EXPECT(cudaMalloc(&p, (size_t)40 << 20) == cudaSuccess, "40 MiB");
    EXPECT(cudaMalloc(&q, (size_t)40 << 20) == cudaErrorMemoryAllocation, "80 MiB of 64 MiB");
    cudaGetLastError();
    EXPECT(cudaFree(p) == cudaSuccess && cudaMalloc(&q, (size_t)40 << 20) == cudaSuccess, "freed memory is reused");
    int host[4];
    EXPECT(cudaMemcpy(host, host + 1, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "H2D into host memory");
    EXPECT(cudaMemcpy(q, host, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "D2H from host memory");
    EXPECT(cudaMemcpy((char *)q + ((size_t)40 << 20) - 8, host, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "copy past the end of an allocation");
    EXPECT(cudaFree(host) == cudaErrorInvalidValue, "cudaFree of a host pointer");
    cudaGetLastError();
    k_touch<<<1, 2048>>>((int *)q);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads per block");
    k_touch<<<0, 32>>>((int *)q);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "empty grid");
    k_touch<<<1, 4>>>(host);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "host pointer as a kernel argument");
    k_touch<<<1, 4>>>((int *)q);
    EXPECT(cudaGetLastError() == cudaSuccess, "valid launch after the failed ones (not sticky)");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        volatile int v = *(int *)q; /* host code reading device memory */
        (void)v;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "host dereference of a device pointer: status %x",
           status);
    pid = fork();
    if (pid == 0) {
        k_deadlock<<<1, 32>>>((int *)q);
        cudaError_t e1 = cudaGetLastError(), e2 = cudaDeviceSynchronize();
        _exit(e1 == cudaErrorLaunchFailure && e2 == cudaErrorLaunchFailure ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "deadlock reported, sticky: status %x", status);
    cudaFree(q);
}

static void CUDART_CB cb_count(cudaStream_t s, cudaError_t status, void *user)
{
    (void)s;
    int *n = (int *)user;
    n[0]++;
    n[1] = (int)status;
}

static void host_fn(void *user) { ++*(int *)user; }

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Events: elapsed time between two records is the host time between them (work runs at issue), not
 * available from an event without timing or one never recorded; stream callbacks and host functions
 * run at once (the stream has reached them), a callback with the context's error and a host function
 * not at all after a failure (checked in a child, the failure being sticky). */
static void test_events(void)
{
    cudaStream_t s;
    cudaEvent_t a, b, nt, never;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    EXPECT(cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess && cudaEventCreate(&never) == cudaSuccess,
           "events");
    EXPECT(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming) == cudaSuccess, "event without timing");
    /* h0 is read before a is recorded and ha after it, so 20 ms from ha put at least 20 ms between the
     * two records and at most h1 - h0 (the bound was once counted from h0, and a record after h0 then
     * measured 19.99 ms) */
    double h0 = mono_ms();
    EXPECT(cudaEventRecord(a, s) == cudaSuccess, "record a");
    double ha = mono_ms();
    while (mono_ms() - ha < 20) {
    }
    EXPECT(cudaEventRecord(b, s) == cudaSuccess && cudaEventRecord(nt, s) == cudaSuccess, "record b");
    double h1 = mono_ms();
    float ms = -1;
    EXPECT(cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms >= 20 - 0.001 && ms <= h1 - h0 + 0.01, "elapsed %g ms of %g",
           ms, h1 - h0);
    EXPECT(cudaEventElapsedTime(&ms, b, a) == cudaSuccess && ms < 0, "backwards: %g ms", ms);
    EXPECT(cudaEventElapsedTime(&ms, a, nt) == cudaErrorInvalidResourceHandle, "no timing");
    EXPECT(cudaEventElapsedTime(&ms, a, never) == cudaErrorInvalidResourceHandle, "never recorded");
    cudaGetLastError();
    EXPECT(cudaEventQuery(b) == cudaSuccess && cudaEventQuery(never) == cudaSuccess, "queries");
    cudaEvent_t c, d;
    cudaEventCreate(&c);
    cudaEventCreate(&d);
    cudaEventRecord(c, s);
    cudaEventRecord(d, s);
    EXPECT(cudaEventElapsedTime(&ms, c, d) == cudaSuccess && ms > 0, "back-to-back records are apart: %g ms", ms);
    int n[2] = {0, -1}, h = 0;
    EXPECT(cudaStreamWaitEvent(s, b, 0) == cudaSuccess, "wait");
    EXPECT(cudaStreamAddCallback(s, cb_count, n, 0) == cudaSuccess && n[0] == 1 && n[1] == cudaSuccess, "callback ran");
    EXPECT(cudaLaunchHostFunc(s, host_fn, &h) == cudaSuccess && h == 1, "host function ran");
    EXPECT(cudaStreamAddCallback(s, cb_count, n, 1) == cudaErrorInvalidValue && n[0] == 1, "flags must be 0");
    cudaGetLastError();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *q = NULL;
        cudaMalloc(&q, 256);
        k_deadlock<<<1, 32>>>((int *)q); /* the context fails */
        int m[2] = {0, -1}, g = 0;
        cudaError_t e1 = cudaStreamAddCallback(s, cb_count, m, 0), e2 = cudaLaunchHostFunc(s, host_fn, &g);
        _exit(e1 == cudaSuccess && m[0] == 1 && m[1] == cudaErrorLaunchFailure && e2 == cudaErrorLaunchFailure && g == 0
                  ? 0
                  : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after a failure: callback told, host function not run: %x",
           status);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaEventDestroy(c);
    cudaEventDestroy(d);
    cudaEventDestroy(nt);
    cudaEventDestroy(never);
    cudaStreamDestroy(s);
}


/* ---- run-time compiled kernels ---------------------------------------------------------------------------- */

extern "C" void cuemu_reverse_order(int on); /* the test hook (cudaemu_runtime.cc) */

/* what the plugin's fused elementwise kernels look like: a grid-stride loop, a broadcast input, float
 * math; k_last and k_rev show that module launches go through the scheduler (thread order, barriers) */
static const char k_module_src[] =
    "/* extern \"C\" __global__ void k_ghost(int *p) in a comment is no kernel */\n"
    "__device__ static float act(float v) { return v > 0.f ? v : expm1f(v); }\n"
    "extern \"C\" __global__ void k_fused(const float *__restrict__ p0, unsigned long long n0, unsigned long long r0,\n"
    "                                     const float *p1, float *py, unsigned long long n)\n"
    "{\n"
    "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "    float v0 = p0[(i / n0) % r0], v1 = p1[i];\n"
    "    float t0 = fmaxf(v0, 0.f) * tanhf(v1) + erff(v1) - logf(fabsf(v1) + 1.f);\n"
    "    float t1 = act(t0) + sqrtf(fabsf(t0)) + floorf(v1) * ceilf(v0) + rintf(v1 * 3.f) + log1pf(fabsf(v0));\n"
    "    float t2 = __int_as_float(__float_as_int(t1) & 0x7fffffff) + erfcf(v0) + expf(-fabsf(v1));\n"
    "    py[i] = v1 == 0.f ? INFINITY : v0 < -1e30f ? NAN : t2;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(128) k_last(int *out) { out[0] = (int)threadIdx.x; }\n"
    "extern \"C\" __global__ void k_rev(float *y)\n"
    "{\n"
    "  __shared__ float buf[128];\n"
    "  buf[threadIdx.x] = y[threadIdx.x];\n"
    "  __syncthreads();\n"
    "  y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];\n"
    "}\n";

static float fused_ref(float v0, float v1)
{
    float t0 = fmaxf(v0, 0.f) * tanhf(v1) + erff(v1) - logf(fabsf(v1) + 1.f);
    float a = t0 > 0.f ? t0 : expm1f(t0);
    float t1 = a + sqrtf(fabsf(t0)) + floorf(v1) * ceilf(v0) + rintf(v1 * 3.f) + log1pf(fabsf(v0));
    float t2 = fabsf(t1) + erfcf(v0) + expf(-fabsf(v1));
    return v1 == 0.f ? INFINITY : t2;
}

static std::string prog_log(nvrtcProgram p)
{
    size_t n = 0;
    if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || !n) return "<no log>";
    std::string s(n, '\0');
    nvrtcGetProgramLog(p, &s[0]);
    s.resize(n - 1);
    return s;
}

/* Compiles src with opts; the CUBIN (or, if cubin is false, the PTX) in *bin. */
static nvrtcResult compile_src(const char *src, const char *name, std::vector<const char *> opts, bool cubin,
                               std::vector<char> *bin, std::string *log)
{
    nvrtcProgram p = NULL;
    nvrtcResult r = nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
    if (r) return r;
    r = nvrtcCompileProgram(p, (int)opts.size(), opts.data());
    if (log) *log = prog_log(p);
    size_t n = 0;
    if (!r) r = cubin ? nvrtcGetCUBINSize(p, &n) : nvrtcGetPTXSize(p, &n);
    if (!r && bin) {
        bin->resize(n);
        r = cubin ? nvrtcGetCUBIN(p, bin->data()) : nvrtcGetPTX(p, bin->data());
    }
    nvrtcDestroyProgram(&p);
    return r;
}

/* Launches k_fused over n elements and counts the outputs that differ from the host loop. */
static int run_fused(cudaKernel_t k, cudaError_t *err)
{
    const unsigned long long n = 1000, n0 = 10, r0 = 7;
    float h0[r0], h1[n], hy[n];
    for (unsigned i = 0; i < r0; i++) h0[i] = (float)i * 0.75f - 2.f;
    for (unsigned i = 0; i < n; i++) h1[i] = i % 97 == 0 ? 0.f : ((float)(i % 41) - 20.f) * 0.13f;
    float *d0, *d1, *dy;
    cudaMalloc((void **)&d0, sizeof h0);
    cudaMalloc((void **)&d1, sizeof h1);
    cudaMalloc((void **)&dy, sizeof hy);
    cudaMemcpy(d0, h0, sizeof h0, cudaMemcpyHostToDevice);
    cudaMemcpy(d1, h1, sizeof h1, cudaMemcpyHostToDevice);
    cudaMemset(dy, 0xff, sizeof hy);
    void *args[] = {&d0, (void *)&n0, (void *)&r0, &d1, &dy, (void *)&n};
    *err = cudaLaunchKernel((const void *)k, dim3(3), dim3(128), args, 0, NULL); /* 384 threads for 1000 */
    cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (unsigned i = 0; i < n; i++) {
        float want = fused_ref(h0[(i / n0) % r0], h1[i]);
        bool ok = std::isinf(want) ? hy[i] == want : fabsf(hy[i] - want) <= 1e-5f * fmaxf(1.f, fabsf(want));
        if (!ok && bad++ < 3) printf("  k_fused[%u] = %.9g, want %.9g\n", i, hy[i], want);
    }
    cudaFree(d0);
    cudaFree(d1);
    cudaFree(dy);
    return bad;
}

/* k_last on 128 threads: the thread that ran last */
static int run_last(cudaKernel_t k, cudaError_t *err)
{
    int *d, h = -1;
    cudaMalloc((void **)&d, sizeof h);
    void *args[] = {&d};
    *err = cudaLaunchKernel((const void *)k, dim3(1), dim3(128), args, 0, NULL);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    return h;
}

struct CompileJob {
    const char *arch;
    bool cubin;
    nvrtcResult r;
    std::vector<char> bin;
    std::string log;
};

static void *compile_thread(void *p)
{
    CompileJob *j = (CompileJob *)p;
    j->r = compile_src(k_module_src, "thread.cu", {j->arch, "--fmad=false"}, j->cubin, &j->bin, &j->log);
    return NULL;
}

static bool dir_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return false;
    int n = 0;
    while (struct dirent *e = readdir(d)) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

/* NVRTC (options, logs, CUBIN and PTX, WEFT_CUDAEMU_NVRTC=0), the library API, and cudaLaunchKernel's
 * checks as a <<<>>> launch makes them; the temporary files all go (TMPDIR is a fresh directory here). */
static void test_nvrtc(void)
{
    char tmp[] = "/tmp/cuemu-selftest-XXXXXX";
    EXPECT(mkdtemp(tmp) != NULL, "temporary directory");
    setenv("TMPDIR", tmp, 1);
    int major = -1, minor = -1, na = 0, archs[16];
    EXPECT(nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && major == 13 && minor == 0, "version %d.%d", major, minor);
    EXPECT(nvrtcGetNumSupportedArchs(&na) == NVRTC_SUCCESS && na == 7 && nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS &&
               archs[0] == 75 && archs[4] == 90 && archs[6] == 120,
           "%d archs", na);
    setenv("WEFT_CUDAEMU_NVRTC", "0", 1);
    nvrtcProgram p = NULL;
    EXPECT(nvrtcVersion(&major, &minor) == NVRTC_ERROR_INTERNAL_ERROR, "WEFT_CUDAEMU_NVRTC=0: no NVRTC");
    EXPECT(nvrtcCreateProgram(&p, "", "x.cu", 0, NULL, NULL) == NVRTC_ERROR_INTERNAL_ERROR && !p,
           "WEFT_CUDAEMU_NVRTC=0: no program");
    unsetenv("WEFT_CUDAEMU_NVRTC");
    EXPECT(strcmp(nvrtcGetErrorString(NVRTC_ERROR_COMPILATION), "NVRTC_ERROR_COMPILATION") == 0, "error string");

    /* compile, load, launch */
    EXPECT(nvrtcCreateProgram(&p, k_module_src, "fused.cu", 0, NULL, NULL) == NVRTC_SUCCESS, "create");
    const char *opts[] = {"--gpu-architecture=sm_90", "--fmad=false", "--std=c++17", "-default-device"};
    nvrtcResult r = nvrtcCompileProgram(p, 4, opts);
    EXPECT(r == NVRTC_SUCCESS, "compile: %s\n%s", nvrtcGetErrorString(r), prog_log(p).c_str());
    size_t n_cubin = 0, n_ptx = 0, n_log = 0;
    EXPECT(nvrtcGetProgramLogSize(p, &n_log) == NVRTC_SUCCESS && n_log >= 1, "log size %zu", n_log);
    EXPECT(nvrtcGetCUBINSize(p, &n_cubin) == NVRTC_SUCCESS && n_cubin > 64, "CUBIN size %zu", n_cubin);
    EXPECT(nvrtcGetPTXSize(p, &n_ptx) == NVRTC_SUCCESS && n_ptx == n_cubin + 1, "PTX size %zu", n_ptx);
    std::vector<char> cubin(n_cubin);
    EXPECT(nvrtcGetCUBIN(p, cubin.data()) == NVRTC_SUCCESS, "CUBIN");
    cudaLibrary_t lib = NULL;
    EXPECT(cudaLibraryLoadData(&lib, cubin.data(), NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess && lib, "load");
    cudaKernel_t kf = NULL, kl = NULL, kr = NULL, kx = NULL, kf2 = NULL;
    EXPECT(cudaLibraryGetKernel(&kf, lib, "k_fused") == cudaSuccess && cudaLibraryGetKernel(&kl, lib, "k_last") == cudaSuccess &&
               cudaLibraryGetKernel(&kr, lib, "k_rev") == cudaSuccess && cudaLibraryGetKernel(&kf2, lib, "k_fused") == cudaSuccess &&
               kf2 == kf,
           "kernels");
    EXPECT(cudaLibraryGetKernel(&kx, lib, "k_nope") == cudaErrorSymbolNotFound, "unknown kernel name");
    EXPECT(cudaGetLastError() == cudaErrorSymbolNotFound && cudaGetLastError() == cudaSuccess, "last error");
    EXPECT(cudaLibraryGetKernel(&kx, lib, "k_ghost") == cudaErrorSymbolNotFound, "a kernel in a comment");
    cudaGetLastError();
    cudaError_t e = cudaErrorUnknown;
    int bad = run_fused(kf, &e);
    EXPECT(e == cudaSuccess && bad == 0, "k_fused: %s, %d wrong", cudaGetErrorName(e), bad);
    cuemu_reverse_order(0); /* whatever WEFT_CUDAEMU_REVERSE says */
    int last = run_last(kl, &e);
    EXPECT(e == cudaSuccess && last == 127, "k_last: %s, thread %d ran last", cudaGetErrorName(e), last);
    cuemu_reverse_order(1);
    last = run_last(kl, &e);
    cuemu_reverse_order(0);
    EXPECT(e == cudaSuccess && last == 0, "k_last reversed: thread %d ran last", last);
    float hy[128], *dy;
    for (int i = 0; i < 128; i++) hy[i] = (float)i;
    cudaMalloc((void **)&dy, sizeof hy);
    cudaMemcpy(dy, hy, sizeof hy, cudaMemcpyHostToDevice);
    void *rargs[] = {&dy};
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(128), rargs, 0, NULL) == cudaSuccess, "k_rev");
    cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
    EXPECT(hy[0] == 127 && hy[127] == 0 && hy[40] == 87, "k_rev through the barrier: %g %g %g", hy[0], hy[127], hy[40]);

    /* the launch errors a <<<>>> launch gives, returned by cudaLaunchKernel (and its last error) */
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(1025), rargs, 0, NULL) == cudaErrorInvalidConfiguration,
           "1025 threads per block");
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess, "last error");
    float host[128];
    float *hp = host;
    void *hargs[] = {&hp};
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(128), hargs, 0, NULL) == cudaErrorInvalidValue,
           "host pointer as a kernel argument");
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(128), NULL, 0, NULL) == cudaErrorInvalidValue, "no args");
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(128), rargs, 0, (cudaStream_t)(void *)host) ==
               cudaErrorInvalidResourceHandle,
           "a stream that does not exist");
    EXPECT(cudaLaunchKernel((const void *)k_touch, dim3(1), dim3(4), rargs, 0, NULL) == cudaErrorInvalidDeviceFunction,
           "a <<<>>> kernel through cudaLaunchKernel");
    cudaGetLastError();
    EXPECT(cudaLaunchKernel((const void *)kr, dim3(1), dim3(128), rargs, 0, NULL) == cudaSuccess,
           "valid launch after the failed ones (not sticky)");
    cudaFree(dy);

    /* the disk-cache path: the bytes outlive the program and the library */
    EXPECT(nvrtcDestroyProgram(&p) == NVRTC_SUCCESS && !p, "destroy");
    EXPECT(nvrtcDestroyProgram(&p) == NVRTC_ERROR_INVALID_PROGRAM, "destroy twice");
    EXPECT(cudaLibraryUnload(lib) == cudaSuccess, "unload");
    EXPECT(cudaLaunchKernel((const void *)kf, dim3(1), dim3(32), NULL, 0, NULL) == cudaErrorInvalidDeviceFunction,
           "kernel of an unloaded library");
    EXPECT(cudaLibraryUnload(lib) == cudaErrorInvalidResourceHandle, "unload twice");
    cudaGetLastError();
    lib = NULL;
    EXPECT(cudaLibraryLoadData(&lib, cubin.data(), NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess, "load again");
    kf = NULL;
    EXPECT(cudaLibraryGetKernel(&kf, lib, "k_fused") == cudaSuccess, "kernel again");
    bad = run_fused(kf, &e);
    EXPECT(e == cudaSuccess && bad == 0, "k_fused from the stored bytes: %s, %d wrong", cudaGetErrorName(e), bad);
    EXPECT(cudaLibraryUnload(lib) == cudaSuccess, "unload");

    /* bad images */
    char garbage[256];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (char)(i * 37 + 11);
    lib = NULL;
    EXPECT(cudaLibraryLoadData(&lib, garbage, NULL, NULL, 0, NULL, NULL, 0) == cudaErrorInvalidKernelImage && !lib,
           "garbage bytes");
    std::vector<char> other = cubin;
    other[8] ^= 0x40; /* the module API version */
    EXPECT(cudaLibraryLoadData(&lib, other.data(), NULL, NULL, 0, NULL, NULL, 0) == cudaErrorInvalidKernelImage,
           "a module of another emulator version");
    other = cubin;
    memset(other.data() + 24, 0, 64); /* the shared object's ELF header */
    EXPECT(cudaLibraryLoadData(&lib, other.data(), NULL, NULL, 0, NULL, NULL, 0) == cudaErrorInvalidKernelImage,
           "a damaged module");
    EXPECT(cudaGetLastError() == cudaErrorInvalidKernelImage, "last error");

    /* a compilation error, an unknown option, a bad architecture */
    std::string log;
    r = compile_src("extern \"C\" __global__ void k_bad(float *y)\n{\n  y[0] = 1.f +;\n}\n", "bad.cu", {"-arch=sm_90"},
                    true, NULL, &log);
    EXPECT(r == NVRTC_ERROR_COMPILATION && log.find("error") != std::string::npos && log.find("bad.cu:3") != std::string::npos,
           "syntax error: %s, log:\n%s", nvrtcGetErrorString(r), log.c_str());
    r = compile_src(k_module_src, "opt.cu", {"-arch=sm_90", "--no-such-option"}, true, NULL, &log);
    EXPECT(r == NVRTC_ERROR_INVALID_OPTION && log.find("--no-such-option") != std::string::npos,
           "unknown option: %s, log: %s", nvrtcGetErrorString(r), log.c_str());
    r = compile_src(k_module_src, "opt.cu", {"--gpu-architecture=sm_x"}, true, NULL, &log);
    EXPECT(r == NVRTC_ERROR_INVALID_OPTION && log.find("sm_x") != std::string::npos, "bad architecture: %s",
           nvrtcGetErrorString(r));
    EXPECT(nvrtcCreateProgram(&p, k_module_src, "h.cu", 1, opts, opts) == NVRTC_ERROR_INVALID_INPUT, "headers");
    EXPECT(nvrtcCompileProgram(NULL, 0, NULL) == NVRTC_ERROR_INVALID_PROGRAM, "no program");

    /* two programs compiled at once, one for a virtual architecture (no CUBIN: its PTX is loaded) */
    CompileJob jobs[2] = {{"-arch=sm_80", true, NVRTC_SUCCESS, {}, {}},
                          {"--gpu-architecture=compute_90", false, NVRTC_SUCCESS, {}, {}}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, compile_thread, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CompileJob &j = jobs[i];
        EXPECT(j.r == NVRTC_SUCCESS && !j.bin.empty(), "%s in a thread: %s\n%s", j.arch, nvrtcGetErrorString(j.r),
               j.log.c_str());
        lib = NULL;
        kl = NULL;
        if (j.bin.empty()) continue;
        EXPECT(cudaLibraryLoadData(&lib, j.bin.data(), NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess &&
                   cudaLibraryGetKernel(&kl, lib, "k_last") == cudaSuccess,
               "%s: load", j.arch);
        last = kl ? run_last(kl, &e) : -1;
        EXPECT(e == cudaSuccess && last == 127, "%s: k_last %d", j.arch, last);
        if (lib) cudaLibraryUnload(lib);
    }
    nvrtcProgram pv = NULL;
    size_t nv = 1;
    const char *vopt[] = {"-arch=compute_75"};
    EXPECT(nvrtcCreateProgram(&pv, "", NULL, 0, NULL, NULL) == NVRTC_SUCCESS && nvrtcCompileProgram(pv, 1, vopt) == NVRTC_SUCCESS &&
               nvrtcGetCUBINSize(pv, &nv) == NVRTC_SUCCESS && nv == 0,
           "compute_75: CUBIN of %zu bytes", nv);
    nvrtcDestroyProgram(&pv);

    EXPECT(dir_empty(tmp), "temporary files left in %s", tmp);
    rmdir(tmp);
    unsetenv("TMPDIR");
}

int main(void)
{
    setenv("WEFT_CUDAEMU_MEM", "64M", 1);
    setenv("WEFT_CUDAEMU_QUIET", "1", 1);
    test_barriers();
    test_half();
    test_gemm();
    test_errors();
    test_events();
    test_nvrtc();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
