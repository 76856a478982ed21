/*
 * The CUDA backend plugin: every CUDA device becomes a GPU device. The CUDA runtime is linked statically
 * and loads the driver (libcuda.so.1) itself, and cuBLAS is loaded only once a device is found
 * (cuda_blas.c), so the plugin loads cheaply on any machine and reports a missing driver or device as
 * a diagnostic ("unavailable"). Memory is cudaMalloc chunks that the core carves up; kernels, cuBLAS
 * and cuDNN run on one compute stream per device, transfers on a copy stream through pinned staging
 * buffers, ordered against compute with events both ways.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_elementwise.h"

const wf_host_api *cu_host;

typedef struct cu_backend {
    int n;
} cu_backend;

/* ---- helpers shared by the op files ------------------------------------------------------------------- */

const char *cu_dtype_name(wf_dtype t)
{
    static const char *const names[] = {"invalid", "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

const char *cu_tstr(const wf_tensor *t, char *buf)
{
    size_t n = (size_t)snprintf(buf, 160, "%s[", cu_dtype_name(t->dtype));
    for (int d = 0; d < t->rank && n < 140; d++)
        n += (size_t)snprintf(buf + n, 160 - n, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    snprintf(buf + n, 160 - n, "]");
    return buf;
}

wf_status *cu_check(const wf__kctx *k, int rc, const char *what)
{
    if (!rc) return NULL;
    cudaError_t e = (cudaError_t)rc;
    return cu_host->kctx_fail(k, e == cudaErrorMemoryAllocation ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                              "CUDA %s failed on %s: %s (%s, %d)", what, k->device->short_name, cudaGetErrorString(e),
                              cudaGetErrorName(e), rc);
}

wf_status *cu_enter(const wf__kctx *k) { return cu_check(k, (int)cudaSetDevice(cu_of(k)->ordinal), "cudaSetDevice"); }

wf_status *cu_read(wf__kctx *k, const wf_tensor *t, void *dst, size_t bytes)
{
    if (!bytes) return NULL;
    if (t->data) { /* a host tensor (an attribute's value, a host-memory argument) */
        memcpy(dst, t->data, bytes);
        return NULL;
    }
    cu_dev *d = cu_of(k);
    cudaError_t e = cudaMemcpyAsync(dst, cu_ptr(t), bytes, cudaMemcpyDeviceToHost, d->compute);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->compute);
    return cu_check(k, (int)e, "read-back of an operand");
}

wf_status *cu_write(wf__kctx *k, wf_tensor *t, const void *src, size_t bytes)
{
    if (!bytes) return NULL;
    /* from pageable memory the call returns once src is staged, so the caller may free it at once */
    return cu_check(k, (int)cudaMemcpyAsync(cu_ptr(t), src, bytes, cudaMemcpyHostToDevice, cu_of(k)->compute),
                    "upload of a small output");
}

int64_t cu_int_at(const void *p, wf_dtype t, int64_t i)
{
    int64_t v;
    return wf__ku_load_int(p, t, i, &v) ? v : 0;
}

wf_status *cu_read_ints(wf__kctx *k, const wf_tensor *t, int64_t *vals, int max, int *n, const char *what)
{
    char b[160];
    if ((t->dtype != WF_I64 && t->dtype != WF_I32) || t->rank > 1 || t->size > max)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be a 1-D i64 or i32 tensor of at most %d values, got %s",
                                  what, max, cu_tstr(t, b));
    int64_t raw[64];
    wf_status *s = cu_read(k, t, raw, (size_t)t->size * cu_size(t->dtype));
    if (s) return s;
    for (int64_t i = 0; i < t->size; i++) vals[i] = cu_int_at(raw, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

void cu_bcast_shape(int n, const int *ranks, const int64_t *const *dims, int *rank, int64_t *out)
{
    (void)wf__ku_bcast_dims(n, ranks, dims, rank, out); /* inference has checked the shapes */
}

void cu_walk_bcast(cuk_walk *w, int n, const int *ranks, const int64_t *const *idims, int orank, const int64_t *odims)
{
    int64_t dims[WF_MAX_RANK], st[3][WF_MAX_RANK];
    int r = wf__ku_bcast_walk(n, ranks, idims, orank, odims, dims, st);
    memset(w, 0, sizeof *w);
    w->rank = r;
    int64_t total = 1;
    for (int d = 0; d < r; d++) {
        w->dims[d] = dims[d];
        total *= dims[d];
        for (int i = 0; i < n; i++) w->st[i][d] = st[i][d];
    }
    w->small = total <= (int64_t)UINT32_MAX;
}

/* ---- the vtable ------------------------------------------------------------------------------------- */

static wf_status *rt_fail(wf_code code, const char *what, int ordinal, cudaError_t e)
{
    return cu_host->status(code, "CUDA %s failed on GPU %d: %s (%s)", what, ordinal, cudaGetErrorString(e),
                           cudaGetErrorName(e));
}

static int device_count(void *b) { return ((cu_backend *)b)->n; }

/* f32 lanes per SM by compute capability; a first guess for placement until calibration measures it. */
static int cores_per_sm(int major, int minor)
{
    if (major == 7 || (major == 8 && minor == 0)) return 64;
    return 128;
}

static wf_status *device_info(void *b, int i, wf_backend_device_info *out)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) return rt_fail(WF_UNAVAILABLE, "cudaGetDeviceProperties", i, e);
    int clock_khz = 0, mem_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, i);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    int drv = 0;
    cudaDriverGetVersion(&drv);
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "GPU");
    char dnn[120], desc[400];
    snprintf(desc, sizeof desc, "%.100s (sm_%d%d, CUDA driver %d.%d, %s)", p.name, p.major, p.minor, drv / 1000,
             drv % 1000 / 10, cu_cudnn_describe(dnn, sizeof dnn));
    size_t dl = strlen(desc);
    if (dl >= sizeof out->description) dl = sizeof out->description - 1; /* cut, not refused */
    memcpy(out->description, desc, dl);
    out->description[dl] = 0;
    out->compute_units = p.multiProcessorCount;
    out->memory_bytes = p.totalGlobalMem;
    out->peak_gflops = p.multiProcessorCount * cores_per_sm(p.major, p.minor) * 2.0 * (clock_khz ? clock_khz : 1500000) / 1e6;
    out->mem_gbps = mem_khz && bus_bits ? 2.0 * mem_khz * (bus_bits / 8.0) / 1e6 : 500;
    out->link_gbps = 20;
    out->link_latency_us = 10;
    out->alignment = 256;
    return NULL;
}

static void dev_release(cu_dev *d)
{
    cu_cudnn_release(d);
    cu_err_release(d);
    for (int i = 0; i < 2; i++) {
        if (d->stage_free[i]) cudaEventDestroy(d->stage_free[i]);
        if (d->stage[i]) cudaFreeHost(d->stage[i]);
    }
    if (d->copied) cudaEventDestroy(d->copied);
    if (d->blas) cu_blas.destroy(d->blas);
    if (d->done) cudaEventDestroy(d->done);
    if (d->copy) cudaStreamDestroy(d->copy);
    if (d->compute) cudaStreamDestroy(d->compute);
    cu_host->free(d);
}

static wf_status *device_open(void *b, int i, void **out)
{
    cu_dev *d = cu_host->malloc(sizeof *d);
    if (!d) return cu_host->status(WF_OUT_OF_MEMORY, "out of memory opening CUDA device %d", i);
    memset(d, 0, sizeof *d);
    d->ordinal = i;
    cudaError_t e;
    const char *what = "cudaSetDevice";
    if ((e = cudaSetDevice(i)) != cudaSuccess) goto fail;
    what = "stream creation";
    if ((e = cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
    if ((e = cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
    what = "event creation";
    if ((e = cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming)) != cudaSuccess) goto fail;
    if ((e = cudaEventCreateWithFlags(&d->copied, cudaEventDisableTiming)) != cudaSuccess) goto fail;
    for (int j = 0; j < 2; j++)
        if ((e = cudaEventCreateWithFlags(&d->stage_free[j], cudaEventDisableTiming)) != cudaSuccess) goto fail;
    cublasStatus_t bs = cu_blas.create(&d->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cu_blas.set_stream(d->blas, d->compute);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        wf_status *s = cu_host->status(WF_UNAVAILABLE, "cuBLAS initialisation failed on GPU %d: %s", i,
                                       cu_blas.status_string(bs));
        dev_release(d);
        return s;
    }
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess) {
        snprintf(d->name, sizeof d->name, "%.150s", p.name);
        d->cc_major = p.major;
        d->cc_minor = p.minor;
    }
    pthread_mutex_init(&d->copy_mu, NULL);
    pthread_mutex_init(&d->blas_mu, NULL);
    pthread_mutex_init(&d->dnn_mu, NULL);
    pthread_mutex_init(&d->err_mu, NULL);
    *out = d;
    return NULL;
fail:;
    wf_status *s = rt_fail(WF_UNAVAILABLE, what, i, e);
    dev_release(d);
    return s;
}

static void device_close(void *dev)
{
    cu_dev *d = dev;
    cudaSetDevice(d->ordinal);
    cudaStreamSynchronize(d->compute);
    cudaStreamSynchronize(d->copy);
    pthread_mutex_destroy(&d->copy_mu);
    pthread_mutex_destroy(&d->blas_mu);
    pthread_mutex_destroy(&d->dnn_mu);
    pthread_mutex_destroy(&d->err_mu);
    dev_release(d);
}

static void *chunk_alloc(void *dev, size_t bytes)
{
    cu_dev *d = dev;
    void *p = NULL;
    if (cudaSetDevice(d->ordinal) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the allocator's to report, not the next kernel's */
        return NULL;
    }
    return p;
}

static void chunk_free(void *dev, void *chunk)
{
    cu_dev *d = dev;
    cudaSetDevice(d->ordinal);
    /* no queued kernel or upload may still use it (compute waits for uploads, but say so plainly) */
    cudaStreamSynchronize(d->compute);
    cudaStreamSynchronize(d->copy);
    cudaFree(chunk);
}

/* Each half of the pinned staging buffer: large enough to keep the DMA engine busy, small enough that
 * two per device cost little locked memory. */
#define CU_STAGE_BYTES ((size_t)8 << 20)

/* Pins the staging halves on first use (under copy_mu); false when pinning fails, and it is not retried. */
static bool stage_ready(cu_dev *d)
{
    if (d->stage_tried) return d->stage[0] != NULL;
    d->stage_tried = true;
    for (int i = 0; i < 2; i++)
        if (cudaHostAlloc(&d->stage[i], CU_STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError(); /* not the next kernel's error */
            d->stage[i] = NULL;
        }
    if (!d->stage[0] || !d->stage[1]) {
        for (int i = 0; i < 2; i++) {
            if (d->stage[i]) cudaFreeHost(d->stage[i]);
            d->stage[i] = NULL;
        }
        return false;
    }
    d->stage_size = CU_STAGE_BYTES;
    return true;
}

/* Upload through the pinned halves: each chunk is copied into a half whose previous DMA has finished,
 * then sent on the copy stream. Returns once the data is staged, not delivered: the compute stream waits
 * for `copied`, so every later kernel, read-back or chunk_free sees the data; the caller's buffer is
 * free at return. */
static cudaError_t upload_staged(cu_dev *d, char *dst, const char *src, size_t n)
{
    cudaError_t e = cudaSuccess;
    for (size_t off = 0, j = 0; off < n && e == cudaSuccess; j++) {
        int i = (int)(j & 1);
        size_t len = n - off < d->stage_size ? n - off : d->stage_size;
        e = cudaEventSynchronize(d->stage_free[i]); /* returns at once if never recorded */
        if (e != cudaSuccess) break;
        memcpy(d->stage[i], src + off, len);
        e = cudaMemcpyAsync(dst + off, d->stage[i], len, cudaMemcpyHostToDevice, d->copy);
        if (e == cudaSuccess) e = cudaEventRecord(d->stage_free[i], d->copy);
        off += len;
    }
    if (e == cudaSuccess) e = cudaEventRecord(d->copied, d->copy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(d->compute, d->copied, 0);
    return e;
}

/* Download through the pinned halves: chunk j's DMA runs while chunk j-1 is copied out to the caller. */
static cudaError_t download_staged(cu_dev *d, char *dst, const char *src, size_t n)
{
    cudaError_t e = cudaSuccess;
    size_t prev_off = 0, prev_len = 0;
    int prev = -1;
    for (size_t off = 0, j = 0; off < n && e == cudaSuccess; j++) {
        int i = (int)(j & 1);
        size_t len = n - off < d->stage_size ? n - off : d->stage_size;
        /* half i last held chunk j-2, already copied out in the previous round */
        e = cudaMemcpyAsync(d->stage[i], src + off, len, cudaMemcpyDeviceToHost, d->copy);
        if (e == cudaSuccess) e = cudaEventRecord(d->stage_free[i], d->copy);
        if (e == cudaSuccess && prev >= 0 && (e = cudaEventSynchronize(d->stage_free[prev])) == cudaSuccess)
            memcpy(dst + prev_off, d->stage[prev], prev_len);
        prev = i;
        prev_off = off;
        prev_len = len;
        off += len;
    }
    if (e == cudaSuccess && prev >= 0 && (e = cudaEventSynchronize(d->stage_free[prev])) == cudaSuccess)
        memcpy(dst + prev_off, d->stage[prev], prev_len);
    return e;
}

/* One transfer on the copy stream, after everything queued on compute so far (the kernels that produce
 * a value being read, or that still read a block being overwritten). Downloads finish before returning;
 * staged uploads only need the caller's buffer until they return. Without pinned memory, both are plain
 * pageable copies finished before returning. */
static wf_status *transfer(cu_dev *d, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    if (!n) return NULL;
    cudaError_t e = cudaSetDevice(d->ordinal);
    pthread_mutex_lock(&d->copy_mu);
    if (e == cudaSuccess) e = cudaEventRecord(d->done, d->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(d->copy, d->done, 0);
    if (e == cudaSuccess && stage_ready(d)) {
        e = kind == cudaMemcpyHostToDevice ? upload_staged(d, dst, src, n) : download_staged(d, dst, src, n);
    } else if (e == cudaSuccess) {
        e = cudaMemcpyAsync(dst, src, n, kind, d->copy);
        if (e == cudaSuccess) e = cudaStreamSynchronize(d->copy);
    }
    pthread_mutex_unlock(&d->copy_mu);
    if (e == cudaSuccess) return NULL;
    return cu_host->status(e == cudaErrorMemoryAllocation ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                           "CUDA copy of %zu bytes %s GPU %d (%s) failed: %s (%s)", n,
                           kind == cudaMemcpyHostToDevice ? "to" : "from", d->ordinal, d->name, cudaGetErrorString(e),
                           cudaGetErrorName(e));
}

static wf_status *copy_to_device(void *dev, void *chunk, size_t off, const void *src, size_t n)
{
    return transfer(dev, (char *)chunk + off, src, n, cudaMemcpyHostToDevice);
}

/* A download waits for the compute stream: the point where the kernels' index checks are read
 * (cu_err_take), so a bad index fails the run that reads its results. */
static wf_status *copy_to_host(void *dev, void *dst, const void *chunk, size_t off, size_t n)
{
    wf_status *s = transfer(dev, dst, (const char *)chunk + off, n, cudaMemcpyDeviceToHost);
    return s ? s : cu_err_take(dev);
}

static wf_status *copy_on_device(void *dev, void *dst, size_t doff, const void *src, size_t soff, size_t n)
{
    cu_dev *d = dev;
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e == cudaSuccess && n)
        e = cudaMemcpyAsync((char *)dst + doff, (const char *)src + soff, n, cudaMemcpyDeviceToDevice, d->compute);
    return e == cudaSuccess ? NULL : rt_fail(WF_INTERNAL, "device-to-device copy", d->ordinal, e);
}

static const wf__kernel_def *const g_tables[] = {cu_kernels_elementwise, cu_kernels_reduce, cu_kernels_nn,
                                                 cu_kernels_shape, cu_kernels_conv, cu_kernels_train,
                                                 cu_kernels_grad, cu_kernels_index, cu_kernels_norm,
                                                 cu_kernels_image, cu_kernels_seq};

static const wf__kernel_def *find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    for (size_t t = 0; t < sizeof g_tables / sizeof g_tables[0]; t++)
        for (const wf__kernel_def *k = g_tables[t]; k->op; k++) {
            if (strcmp(k->op, op) != 0) continue;
            wf_dtype key = k->key_input >= 0 ? (k->key_input < n_in ? in[k->key_input].dtype : WF_DTYPE_INVALID)
                                             : out[0].dtype;
            if (key && (k->dtypes & WF__DT_BIT(key))) return k;
        }
    return NULL;
}

static wf_status *synchronize(void *dev)
{
    cu_dev *d = dev;
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->compute);
    return e == cudaSuccess ? cu_err_take(d) : rt_fail(WF_INTERNAL, "stream synchronisation", d->ordinal, e);
}

static void destroy(void *b) { cu_host->free(b); }

static const wf_backend_vtable g_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = sizeof(wf_backend_vtable), .name = "cuda",
    .device_count = device_count, .device_info = device_info, .device_open = device_open,
    .device_close = device_close, .chunk_alloc = chunk_alloc, .chunk_free = chunk_free,
    .copy_to_device = copy_to_device, .copy_to_host = copy_to_host, .copy_on_device = copy_on_device,
    .find_kernel = find_kernel, .synchronize = synchronize, .destroy = destroy,
};

__attribute__((visibility("default"))) wf_status *wf_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt,
                                                                  void **backend)
{
    if (host->abi_version != WF_BACKEND_ABI_VERSION || host->size < sizeof(wf_host_api))
        return host->status(WF_FAILED_PRECONDITION, "the CUDA backend needs host ABI version %d", WF_BACKEND_ABI_VERSION);
    cu_host = host;
#ifndef WEFT_CUDA_EMU /* the CPU emulator (tests/cudaemu) has no driver to look for */
    /* The runtime would report a missing driver as "CUDA driver version is insufficient"; look first, so
     * that the diagnostic says what is really missing. */
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        const char *why = dlerror();
        if (!why || strstr(why, "No such file"))
            return host->status(WF_UNAVAILABLE, "no CUDA driver (libcuda.so.1 not found)");
        return host->status(WF_UNAVAILABLE, "no usable CUDA driver (libcuda.so.1 failed to load: %s)", why);
    }
    dlclose(drv); /* the runtime opens its own reference */
#endif
    int n = 0, drv_version = 0, rt_version = 0;
    cudaDriverGetVersion(&drv_version);
    cudaRuntimeGetVersion(&rt_version);
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
        return host->status(WF_UNAVAILABLE, "no CUDA device (driver %d.%d found)", drv_version / 1000,
                            drv_version % 1000 / 10);
    if (e != cudaSuccess)
        return host->status(WF_UNAVAILABLE, "the CUDA driver %d.%d cannot serve runtime %d.%d: %s (%s)", drv_version / 1000,
                            drv_version % 1000 / 10, rt_version / 1000, rt_version % 1000 / 10, cudaGetErrorString(e),
                            cudaGetErrorName(e));
    /* only now, with a device to use it on (cuda_blas.c says why); a GPU without cuBLAS is a broken
     * install, not a missing device, so "failed" rather than "unavailable" */
    const char *blas_why = cu_blas_load();
    if (blas_why) return host->status(WF_FAILED_PRECONDITION, "%s; the CUDA backend needs it for MatMul and Gemm", blas_why);
    cu_backend *be = host->malloc(sizeof *be);
    if (!be) return host->status(WF_OUT_OF_MEMORY, "out of memory loading the CUDA backend");
    be->n = n;
    *vt = &g_vt;
    *backend = be;
    return NULL;
}
