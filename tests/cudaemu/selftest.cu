/*
 * Self-test of weft's CUDA emulator (tests/cudaemu), built through the same rewrite as the plugin: barrier
 * and warp-collective semantics (results that are wrong unless threads really wait for each other),
 * dynamic shared memory, atomics, float <-> half rounding against the compiler's _Float16, the cuBLAS
 * GEMM against a double reference, and the error paths the plugin relies on (out of memory, bad launch
 * configurations, host pointers passed as device pointers, host code touching device memory, deadlock),
 * and the stream-ordered host work and event times of the plugin's streams and events.
 */
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_fp16.h>
#include <cublas_v2.h>

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

int main(void)
{
    setenv("WEFT_CUDAEMU_MEM", "64M", 1);
    setenv("WEFT_CUDAEMU_QUIET", "1", 1);
    test_barriers();
    test_half();
    test_gemm();
    test_errors();
    test_events();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
