/*
 * The CUDA backend plugin: every CUDA device becomes a GPU device. The CUDA runtime is linked statically
 * and loads the driver (libcuda.so.1) itself, and cuBLAS is loaded only once a device is found
 * (cuda_blas.c), so the plugin loads cheaply on any machine and reports a missing driver or device as
 * a diagnostic ("unavailable"). Memory is cudaMalloc chunks that the core carves up; kernels, cuBLAS
 * and cuDNN run on one compute stream per device, transfers on a copy stream through pinned staging
 * buffers, ordered against compute with events both ways. The device has the contract's streams and
 * events (device_impl.h, "Streams and events"; "streams and events" below): WF_STREAM_COMPUTE is the
 * compute stream, WF_STREAM_COPY the copy stream, events are cudaEvent_t with timing.
 */
#include <math.h>
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
    char dnn[120], rtc[120], desc[400];
    snprintf(desc, sizeof desc, "%.100s (sm_%d%d, CUDA driver %d.%d, %s, %s)", p.name, p.major, p.minor, drv / 1000,
             drv % 1000 / 10, cu_cudnn_describe(dnn, sizeof dnn), cu_nvrtc_describe(rtc, sizeof rtc));
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
    /* Tensor Cores: f16 from sm_70 (cuBLAS GemmEx, cuDNN's TENSOR_OP math). bf16 is not claimed: cuBLAS
     * multiplies it on Tensor Cores from sm_80, but weft's bf16 convolutions are its direct kernel
     * (cuda_conv.c leaves cuDNN to f32, f64 and f16), so mixed precision in bf16 would slow a CNN down */
    if (p.major >= 7) out->fast_dtypes |= 1u << WF_F16;
    snprintf(out->precision_note, sizeof out->precision_note, "%s",
             p.major >= 7 ? "f16: Tensor Cores; bf16 not native here (convolutions in a direct kernel)"
                          : "no Tensor Cores (before sm_70): no native f16 or bf16");
    return NULL;
}

static void pins_release(cu_dev *d);

static void dev_release(cu_dev *d)
{
    cu_jit_release(d);
    cu_cudnn_release(d);
    cu_err_release(d);
    pins_release(d);
    if (d->t_ref) cudaEventDestroy(d->t_ref);
    if (d->notify) cudaStreamDestroy(d->notify);
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
    if ((e = cudaStreamCreateWithFlags(&d->notify, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
    what = "event creation";
    /* the origin of event_times: recorded now and waited for, so every later event is after it */
    if ((e = cudaEventCreateWithFlags(&d->t_ref, cudaEventDefault)) != cudaSuccess) goto fail;
    if ((e = cudaEventRecord(d->t_ref, d->compute)) != cudaSuccess) goto fail;
    if ((e = cudaEventSynchronize(d->t_ref)) != cudaSuccess) goto fail;
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
    pthread_mutex_init(&d->site_mu, NULL);
    pthread_mutex_init(&d->notify_mu, NULL);
    pthread_mutex_init(&d->jit_mu, NULL);
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
    cudaStreamSynchronize(d->notify); /* the callbacks of events that completed */
    pthread_mutex_destroy(&d->copy_mu);
    pthread_mutex_destroy(&d->blas_mu);
    pthread_mutex_destroy(&d->dnn_mu);
    pthread_mutex_destroy(&d->err_mu);
    pthread_mutex_destroy(&d->site_mu);
    pthread_mutex_destroy(&d->notify_mu);
    pthread_mutex_destroy(&d->jit_mu);
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
                                                 cu_kernels_image, cu_kernels_image_augment, cu_kernels_seq,
                                                 cu_kernels_fused};

static const wf__kernel_def *find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    for (size_t t = 0; t < sizeof g_tables / sizeof g_tables[0]; t++)
        for (const wf__kernel_def *k = g_tables[t]; k->op; k++) {
            if (strcmp(k->op, op) != 0) continue;
            /* generated kernels need NVRTC: without it lowering keeps the ops unfused */
            if (g_tables[t] == cu_kernels_fused && cu_nvrtc_load()) continue;
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

/* ---- streams and events ------------------------------------------------------------------------------
 * An event is a cudaEvent_t with timing, recorded on the stream (a copy's event also has one recorded
 * before its transfer, for the transfer's start). An event on compute carries the reads of the
 * index-error record enqueued just before it (cu_err_enqueue_read), so its completion reports a bad
 * index of the work it marks. event_notify waits for the event on the device's notify stream and adds
 * a stream callback there (cudaStreamAddCallback, which, unlike cudaLaunchHostFunc, is still called,
 * with the error, once the context has failed: the callback comes exactly once). event_times are ns
 * after t_ref (cudaEventElapsedTime, float ms: steps of under 0.5 us for the first 8 s after the device
 * opened, 0.25 ms an hour later; a copy's start is its own start event's). The
 * asynchronous transfers take no wait on compute and leave none on it: the core orders them. */

typedef struct cu_ev {
    cudaEvent_t e;     /* completion */
    cudaEvent_t start; /* a transfer's: recorded before it; NULL for a recorded event */
    cu_errbuf *errs;   /* reads of the record this event carries (compute only) */
} cu_ev;

/* A pinned staging buffer of asynchronous transfers, reused once `busy` (recorded on the copy stream
 * after its last transfer, and after the copy out of a download) has completed. */
struct cu_pin {
    struct cu_pin *next;
    void *ptr;
    size_t bytes;
    cudaEvent_t busy;
    bool used;         /* busy has been recorded */
};

#define CU_PIN_MAX ((size_t)256 << 20) /* pinned bytes a device keeps for asynchronous transfers */

static cudaStream_t stream_of(cu_dev *d, int stream) { return stream == WF_STREAM_COPY ? d->copy : d->compute; }

static wf_status *ev_fail(cu_dev *d, const char *what, cudaError_t e)
{
    return cu_host->status(e == cudaErrorMemoryAllocation ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                           "CUDA %s on GPU %d (%s) failed: %s (%s)", what, d->ordinal, d->name, cudaGetErrorString(e),
                           cudaGetErrorName(e));
}

/* The error of work that failed while running (a kernel's fault: the context's sticky error). */
static wf_status *exec_error(cu_dev *d, cudaError_t e)
{
    return cu_host->status(WF_INTERNAL, "CUDA work failed while running on GPU %d (%s): %s (%s)", d->ordinal, d->name,
                           cudaGetErrorString(e), cudaGetErrorName(e));
}

static wf_status *ev_new(cu_dev *d, cudaEvent_t *out)
{
    cudaError_t e = cudaEventCreateWithFlags(out, cudaEventDefault);
    if (e == cudaSuccess) return NULL;
    *out = NULL;
    return ev_fail(d, "event creation", e);
}

static void ev_free(cu_dev *d, cu_ev *w)
{
    if (!w) return;
    cu_err_free(d, w->errs); /* reads nobody looked at go to the next event */
    if (w->e) cudaEventDestroy(w->e);
    if (w->start) cudaEventDestroy(w->start);
    cu_host->free(w);
}

static wf_status *event_record(void *dev, int stream, wf_event **ev)
{
    cu_dev *d = dev;
    *ev = NULL;
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e != cudaSuccess) return ev_fail(d, "cudaSetDevice", e);
    cu_ev *w = cu_host->malloc(sizeof *w);
    if (!w) return cu_host->status(WF_OUT_OF_MEMORY, "out of memory for a CUDA event");
    memset(w, 0, sizeof *w);
    wf_status *s = ev_new(d, &w->e);
    if (!s && stream != WF_STREAM_COPY) s = cu_err_enqueue_read(d, &w->errs);
    if (!s && (e = cudaEventRecord(w->e, stream_of(d, stream))) != cudaSuccess) s = ev_fail(d, "event record", e);
    if (s) {
        if (w->errs) cudaStreamSynchronize(d->compute); /* a read may have been enqueued: let it land */
        ev_free(d, w);
        return s;
    }
    *ev = (wf_event *)w;
    return NULL;
}

static wf_status *stream_wait(void *dev, int stream, wf_event *ev)
{
    cu_dev *d = dev;
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_of(d, stream), ((cu_ev *)ev)->e, 0);
    return e == cudaSuccess ? NULL : ev_fail(d, "stream wait", e);
}

/* The error of a completed event (e: what the runtime said of it): a fault, else a bad index its reads
 * of the record found. Calls no CUDA function. */
static wf_status *ev_error(cu_dev *d, cu_ev *w, cudaError_t e)
{
    if (e != cudaSuccess) return exec_error(d, e);
    return cu_err_check(d, w->errs);
}

static wf_status *event_query(void *dev, wf_event *ev, int *done)
{
    cu_dev *d = dev;
    cu_ev *w = (cu_ev *)ev;
    cudaError_t e = cudaEventQuery(w->e);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error of anything */
        *done = 0;
        return NULL;
    }
    *done = 1;
    return ev_error(d, w, e);
}

static wf_status *event_sync(void *dev, wf_event *ev)
{
    cu_dev *d = dev;
    cu_ev *w = (cu_ev *)ev;
    return ev_error(d, w, cudaEventSynchronize(w->e));
}

typedef struct cu_notify {
    cu_dev *d;
    cu_ev *w;
    void (*fn)(void *, wf_status *);
    void *arg;
} cu_notify;

/* On the runtime's callback thread, once the notify stream has passed its wait for the event. */
static void CUDART_CB notify_tramp(cudaStream_t stream, cudaError_t status, void *user)
{
    (void)stream;
    cu_notify *n = user;
    wf_status *err = ev_error(n->d, n->w, status);
    void (*fn)(void *, wf_status *) = n->fn;
    void *arg = n->arg;
    cu_host->free(n);
    fn(arg, err);
}

static wf_status *event_notify(void *dev, wf_event *ev, void (*fn)(void *, wf_status *), void *arg)
{
    cu_dev *d = dev;
    cu_ev *w = (cu_ev *)ev;
    cu_notify *n = cu_host->malloc(sizeof *n);
    if (!n) return cu_host->status(WF_OUT_OF_MEMORY, "out of memory for a CUDA event callback");
    *n = (cu_notify){d, w, fn, arg};
    cudaError_t e = cudaSetDevice(d->ordinal);
    pthread_mutex_lock(&d->notify_mu); /* each callback right after its own wait */
    if (e == cudaSuccess) e = cudaStreamWaitEvent(d->notify, w->e, 0);
    if (e == cudaSuccess) e = cudaStreamAddCallback(d->notify, notify_tramp, n, 0);
    pthread_mutex_unlock(&d->notify_mu);
    if (e != cudaSuccess) {
        cu_host->free(n); /* not queued: the caller waits instead */
        return ev_fail(d, "event callback", e);
    }
    return NULL;
}

/* ns from one completed event to another. */
static cudaError_t ev_ns(cudaEvent_t from, cudaEvent_t to, int64_t *ns)
{
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, from, to);
    *ns = (int64_t)llround((double)ms * 1e6);
    return e;
}

/* Both times from t_ref, so that they are in the order of the events on any stream (the elapsed time
 * is a difference of the device's ns counters rounded to float ms: monotonic), not a start plus a
 * duration, which could put a copy's end after a kernel that waited for it. */
static wf_status *event_times(void *dev, wf_event *ev, int64_t *t0, int64_t *t1)
{
    cu_dev *d = dev;
    cu_ev *w = (cu_ev *)ev;
    int64_t a = 0, b = 0;
    cudaError_t e = ev_ns(d->t_ref, w->e, &b);
    if (e == cudaSuccess) a = b;
    if (e == cudaSuccess && w->start) e = ev_ns(d->t_ref, w->start, &a);
    if (e != cudaSuccess) return ev_fail(d, "event timing", e);
    *t0 = a;
    *t1 = b;
    return NULL;
}

static void event_release(void *dev, wf_event *ev) { ev_free(dev, (cu_ev *)ev); }

static void pins_release(cu_dev *d)
{
    for (struct cu_pin *p = d->pins, *pn; p; p = pn) {
        pn = p->next;
        if (p->busy) cudaEventDestroy(p->busy);
        cudaFreeHost(p->ptr);
        cu_host->free(p);
    }
    d->pins = NULL;
    d->pin_bytes = 0;
}

/* Under copy_mu: the smallest pinned buffer of at least n bytes whose last transfer has completed, or
 * a new one while the device keeps under CU_PIN_MAX; NULL otherwise (the transfer then goes direct). */
static struct cu_pin *pin_take(cu_dev *d, size_t n)
{
    struct cu_pin *best = NULL;
    for (struct cu_pin *p = d->pins; p; p = p->next) {
        if (p->bytes < n || (best && best->bytes <= p->bytes)) continue;
        cudaError_t e = p->used ? cudaEventQuery(p->busy) : cudaSuccess;
        if (e == cudaSuccess) best = p;
        else cudaGetLastError(); /* not ready (or failed: not reused) */
    }
    size_t bytes = (n + 65535) & ~(size_t)65535;
    if (best || d->pin_bytes + bytes > CU_PIN_MAX) return best;
    struct cu_pin *p = cu_host->malloc(sizeof *p);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    if (cudaHostAlloc(&p->ptr, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        cu_host->free(p);
        return NULL;
    }
    if (cudaEventCreateWithFlags(&p->busy, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(p->ptr);
        cu_host->free(p);
        return NULL;
    }
    p->bytes = bytes;
    p->next = d->pins;
    d->pins = p;
    d->pin_bytes += bytes;
    return p;
}

/* A staged download's last step, on the runtime's callback thread once the DMA into pinned memory is
 * done: the bytes go to the caller's memory. The copy stream (and so the event after it) goes on only
 * once this returns. */
typedef struct cu_copyout {
    void *dst;
    const void *src;
    size_t n;
} cu_copyout;

static void CUDART_CB copy_out(cudaStream_t stream, cudaError_t status, void *user)
{
    (void)stream;
    cu_copyout *c = user;
    if (status == cudaSuccess) memcpy(c->dst, c->src, c->n);
    cu_host->free(c);
}

/* An asynchronous transfer on the copy stream, between the start and completion events. Through a
 * pinned buffer when one can be had: an upload copies the caller's bytes into it first (the caller's
 * buffer is free at return), a download's DMA lands in it and a stream callback copies it out before
 * the event. Else straight from or to the caller's memory (pageable: the runtime stages an upload, and
 * a download returns once done). */
static wf_status *transfer_async(cu_dev *d, bool up, char *dptr, void *host, size_t n, wf_event **ev)
{
    *ev = NULL;
    cudaError_t e = cudaSetDevice(d->ordinal);
    if (e != cudaSuccess) return ev_fail(d, "cudaSetDevice", e);
    cu_ev *w = cu_host->malloc(sizeof *w);
    if (!w) return cu_host->status(WF_OUT_OF_MEMORY, "out of memory for a CUDA event");
    memset(w, 0, sizeof *w);
    wf_status *s = ev_new(d, &w->start);
    if (!s) s = ev_new(d, &w->e);
    if (s) {
        ev_free(d, w);
        return s;
    }
    pthread_mutex_lock(&d->copy_mu);
    e = cudaEventRecord(w->start, d->copy);
    struct cu_pin *p = e == cudaSuccess && n ? pin_take(d, n) : NULL;
    cu_copyout *c = p && !up ? cu_host->malloc(sizeof *c) : NULL;
    if (p && !up && !c) p = NULL;
    if (e == cudaSuccess && n) {
        if (p && up) {
            memcpy(p->ptr, host, n);
            e = cudaMemcpyAsync(dptr, p->ptr, n, cudaMemcpyHostToDevice, d->copy);
        } else if (p) {
            e = cudaMemcpyAsync(p->ptr, dptr, n, cudaMemcpyDeviceToHost, d->copy);
            if (e == cudaSuccess) {
                *c = (cu_copyout){host, p->ptr, n};
                e = cudaStreamAddCallback(d->copy, copy_out, c, 0);
                if (e == cudaSuccess) c = NULL; /* the callback's */
            }
        } else {
            e = up ? cudaMemcpyAsync(dptr, host, n, cudaMemcpyHostToDevice, d->copy)
                   : cudaMemcpyAsync(host, dptr, n, cudaMemcpyDeviceToHost, d->copy);
        }
        if (e == cudaSuccess && p && (e = cudaEventRecord(p->busy, d->copy)) == cudaSuccess) p->used = true;
    }
    if (e == cudaSuccess) e = cudaEventRecord(w->e, d->copy);
    if (e != cudaSuccess) cudaStreamSynchronize(d->copy); /* nothing of it left in flight */
    pthread_mutex_unlock(&d->copy_mu);
    cu_host->free(c);
    if (e != cudaSuccess) {
        ev_free(d, w);
        return cu_host->status(e == cudaErrorMemoryAllocation ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                               "CUDA asynchronous copy of %zu bytes %s GPU %d (%s) failed: %s (%s)", n,
                               up ? "to" : "from", d->ordinal, d->name, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    *ev = (wf_event *)w;
    return NULL;
}

static wf_status *copy_to_device_async(void *dev, void *chunk, size_t off, const void *src, size_t n, wf_event **ev)
{
    return transfer_async(dev, true, (char *)chunk + off, (void *)src, n, ev);
}

static wf_status *copy_to_host_async(void *dev, void *dst, const void *chunk, size_t off, size_t n, wf_event **ev)
{
    return transfer_async(dev, false, (char *)chunk + off, dst, n, ev);
}

static void destroy(void *b) { cu_host->free(b); }

static const wf_backend_vtable g_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = sizeof(wf_backend_vtable), .name = "cuda",
    .device_count = device_count, .device_info = device_info, .device_open = device_open,
    .device_close = device_close, .chunk_alloc = chunk_alloc, .chunk_free = chunk_free,
    .copy_to_device = copy_to_device, .copy_to_host = copy_to_host, .copy_on_device = copy_on_device,
    .find_kernel = find_kernel, .synchronize = synchronize, .destroy = destroy,
    .event_record = event_record, .stream_wait = stream_wait, .event_query = event_query, .event_sync = event_sync,
    .event_notify = event_notify, .event_times = event_times, .event_release = event_release,
    .copy_to_device_async = copy_to_device_async, .copy_to_host_async = copy_to_host_async,
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
