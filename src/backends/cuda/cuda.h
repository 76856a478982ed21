/*
 * The CUDA backend's internals, shared by its host files: per-device state (one compute stream, one copy
 * stream with pinned staging, a cuBLAS handle, a lazily created cuDNN handle), device pointers of tensors, read-back of small operands, error statuses, and
 * the kernel tables of each op family. The backend is a plugin (libweft-cuda.so): it calls the core only
 * through the host table `cu_host`; the device code lives in cuda_kernels.cu behind cuda_kern.h.
 */
#ifndef WF_CUDA_H
#define WF_CUDA_H

#include <pthread.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_kern.h"
#include "device/device.h"

extern const wf_host_api *cu_host;

typedef struct cu_jit cu_jit;

typedef struct cu_dev {
    int ordinal;
    cudaStream_t compute;    /* every kernel, in enqueue order: a block the core frees may be reused by a
                                later kernel without a wait */
    cudaStream_t copy;       /* host <-> device transfers: the synchronous ones ordered after compute
                                through `done`, the asynchronous ones (WF_STREAM_COPY) by the core's events */
    cudaEvent_t done;        /* recorded on compute before each transfer (under copy_mu) */
    pthread_mutex_t copy_mu;
    /* Pinned staging for transfers (under copy_mu), two halves used in turn so that a memcpy into one
     * overlaps the DMA of the other; stage[0] NULL when pinning failed (pageable copies then). */
    void *stage[2];
    size_t stage_size;       /* bytes of each half */
    bool stage_tried;
    cudaEvent_t stage_free[2]; /* recorded on copy after the DMA that uses stage[i] */
    cudaEvent_t copied;      /* recorded on copy after an upload; compute waits for it */
    cublasHandle_t blas;     /* bound to `compute`; calls serialised by blas_mu */
    pthread_mutex_t blas_mu;
    void *dnn;               /* cudnnHandle_t, created on first use (cuda_conv.c); calls under dnn_mu */
    void *ws;                /* cuDNN workspace (cudaMalloc), grown on demand, under dnn_mu */
    size_t ws_size;
    pthread_mutex_t dnn_mu;
    char name[160];
    int cc_major, cc_minor;
    /* Index checks on the device (cuda_index.c): the device's error record (cuk_err, device memory), the
     * host's ring of the launch sites that may write it (which node, which check, the shapes for the
     * message), and how many checking launches were enqueued since the record was last read. */
    cuk_err *err;
    void *err_sites;
    unsigned long long err_next;
    _Atomic long long err_armed;
    pthread_mutex_t err_mu;
    pthread_mutex_t site_mu;   /* the ring's records only (taken on callback threads; no CUDA call under it) */
    bool err_any, err_one;     /* under err_mu: a checking launch since the last read; all of err_node's */
    char err_node[192];
    cuk_err *err_pin;          /* pinned slots for the reads events carry (cuda_index.c), NULL if unpinned */
    unsigned long long err_pin_used; /* bit i: slot i is taken (under err_mu) */
    bool err_pin_tried;
    struct cu_errbuf *err_orphans; /* reads whose event was released unseen (under err_mu) */
    /* Streams and events (device contract v2, cuda_backend.c): host callbacks of event_notify go on
     * their own stream, each after a wait for its event, so that neither stream of work is held up by
     * them; event times are ns after t_ref, recorded on compute when the device opened. Asynchronous
     * transfers stage through a pool of pinned buffers (under copy_mu). */
    cudaStream_t notify;
    pthread_mutex_t notify_mu;
    cudaEvent_t t_ref;
    struct cu_pin *pins;
    size_t pin_bytes;
    /* Generated kernels (cuda_fused.c): the libraries loaded for this device, by key, under jit_mu. */
    cu_jit *jit;
    pthread_mutex_t jit_mu;
} cu_dev;

static inline cu_dev *cu_of(const wf__kctx *k) { return (cu_dev *)k->device->dev; }
/* A device tensor's address: its chunk is a cudaMalloc'ed pointer. */
static inline void *cu_ptr(const wf_tensor *t) { return (char *)t->dev_chunk + t->dev_offset; }
static inline size_t cu_size(wf_dtype t)
{
    /* the plugin links nothing of libweft, so no wf_dtype_size */
    switch (t) {
    case WF_F64: case WF_I64: return 8;
    case WF_F32: case WF_I32: return 4;
    case WF_F16: case WF_BF16: case WF_I16: return 2;
    default: return 1;
    }
}
static inline bool cu_is_float(wf_dtype t) { return t == WF_F32 || t == WF_F64 || t == WF_F16 || t == WF_BF16; }
static inline bool cu_is_int(wf_dtype t) { return t >= WF_I8 && t <= WF_I64; }
const char *cu_dtype_name(wf_dtype t);
/* "f32[2,3]"; buf holds 160 bytes. */
const char *cu_tstr(const wf_tensor *t, char *buf);

/* "node 'X' (Op): CUDA <what> failed on GPU:0: <cudaGetErrorString> (code)"; NULL when rc is 0. */
wf_status *cu_check(const wf__kctx *k, int rc, const char *what);
/* Makes the kernel's device current on the calling thread (executor threads serve every device). */
wf_status *cu_enter(const wf__kctx *k);
/* Copies a tensor's first `bytes` bytes to host memory: a device tensor after the kernels queued before
 * it, a host tensor (data set) directly. */
wf_status *cu_read(wf__kctx *k, const wf_tensor *t, void *dst, size_t bytes);
/* Queues an upload of `bytes` host bytes into device tensor t on the compute stream; src may be freed
 * on return. */
wf_status *cu_write(wf__kctx *k, wf_tensor *t, const void *src, size_t bytes);
/* Element i of a host buffer of an integer dtype as an int64. */
int64_t cu_int_at(const void *p, wf_dtype t, int64_t i);
/* Reads an integer tensor (i32/i64, at most `max` values) from the device into vals. */
wf_status *cu_read_ints(wf__kctx *k, const wf_tensor *t, int64_t *vals, int max, int *n, const char *what);

/* A reduction's axes (attribute or input 1, read back from the device) as flags in red[]; *none when
 * none were given (cuda_reduce.c). */
wf_status *cu_read_axes(wf__kctx *k, const wf_tensor *x, bool *red, bool *none);
/* A walk over the numpy broadcast of n (<= 3) input shapes to the output shape; dims coalesced. */
void cu_walk_bcast(cuk_walk *w, int n, const int *ranks, const int64_t *const *dims, int orank, const int64_t *odims);
/* numpy broadcasting of n shapes (inference has checked them). */
void cu_bcast_shape(int n, const int *ranks, const int64_t *const *dims, int *rank, int64_t *out);

/* Kernel tables of the op families (terminated by op == NULL); each file exports one. */
extern const wf__kernel_def cu_kernels_elementwise[]; /* cuda_elementwise.c */
extern const wf__kernel_def cu_kernels_reduce[];      /* cuda_reduce.c: reductions, softmax */
extern const wf__kernel_def cu_kernels_nn[];          /* cuda_nn.c: MatMul/Gemm (cuBLAS), BiasAdd */
extern const wf__kernel_def cu_kernels_shape[];       /* cuda_shape.c: views, Transpose, Concat, Slice, Gather, Pad.. */
extern const wf__kernel_def cu_kernels_conv[];        /* cuda_conv.c: Conv2D (cuDNN), ConvTranspose2D, pools */
extern const wf__kernel_def cu_kernels_train[];       /* cuda_train.c: ApplyAdam, StatelessRandomUniform */
extern const wf__kernel_def cu_kernels_grad[];        /* cuda_grad.c: conv / pool backward, NLL / SCE losses */
extern const wf__kernel_def cu_kernels_index[];       /* cuda_index.c: Shape, Size, OneHot, NonZero, scatters.. */
extern const wf__kernel_def cu_kernels_norm[];        /* cuda_norm.c: normalizations, TopK, Hardmax, LpPool, Unique.. */
extern const wf__kernel_def cu_kernels_image[];       /* cuda_image.c: Resize, GridSample, RoiAlign, DFT, Einsum.. */
extern const wf__kernel_def cu_kernels_image_augment[]; /* cuda_image_augment.c: ConvertImageDtype, random augmentations */
extern const wf__kernel_def cu_kernels_seq[];         /* cuda_seq.c: RNN/GRU/LSTM, Attention, quantization.. */
extern const wf__kernel_def cu_kernels_fused[];       /* cuda_fused.c: FusedElementwise (lower/jit.c), NVRTC */

/* NVRTC (cuda_fused.c), loaded on first use: NULL when it can compile generated kernels, else why not
 * (static storage). describe: "NVRTC 13.0" or "no NVRTC: ..." for the device description. release:
 * unloads the device's generated kernels (device close). */
const char *cu_nvrtc_load(void);
const char *cu_nvrtc_describe(char *buf, size_t n);
void cu_jit_release(cu_dev *d);

/* cuBLAS (cuda_blas.c), called only through this table: the plugin does not link it, because loading
 * libcublas.so with its libcublasLt costs every weft process about 210 MB and 0.1 s even on a machine
 * without a GPU; cu_blas_load() fills it once the driver probe has found a device. The emulator
 * (tests/cudaemu) fills it with its own functions. Fields are named after the cuBLAS calls they hold. */
#define CU_BLAS_FUNCS(X)                                                                                           \
    X(create, cublasCreate) X(destroy, cublasDestroy) X(set_stream, cublasSetStream)                               \
    X(gemm_strided_batched_ex, cublasGemmStridedBatchedEx) X(status_string, cublasGetStatusString)
typedef struct cu_blas_api {
#define X(field, fn) __typeof__(&fn) field;
    CU_BLAS_FUNCS(X)
#undef X
} cu_blas_api;
extern cu_blas_api cu_blas;
/* Loads cuBLAS once per process (thread-safe): NULL when the table is filled, else why not ("libcublas.so.13
 * not found", ...), static storage. */
const char *cu_blas_load(void);

/* cuDNN (cuda_conv.c): "cuDNN 9.x.y" or why it is unusable, for the device description (loads it once);
 * and the release of a device's cuDNN handle and workspace. */
const char *cu_cudnn_describe(char *buf, size_t n);
/* Index checks that run on the device. cu_err_site registers a checking launch of node k (kind
 * CU_SITE_*, the axis or batch dims and the shapes its message names) and gives the record and site id to
 * pass to the kernel; cu_err_take, after the compute stream has drained (a download, a synchronisation),
 * reads the record if any checking launch ran since the last read and returns the first bad index as the
 * status the host check used to return, naming the node. */
enum { CU_SITE_GATHER, CU_SITE_ELEMENTS, CU_SITE_ND, CU_SITE_SEQLEN, CU_SITE_TARGET, CU_SITE_UNPOOL, CU_SITE_ROI_BATCH,
       CU_SITE_RNN_LENS, CU_SITE_POSITION, CU_SITE_DIV_ZERO, CU_SITE_NEG_POW };
wf_status *cu_err_site(wf__kctx *k, int kind, int axis, const wf_tensor *ix, const wf_tensor *x, cuk_err **err,
                       unsigned long long *site);
wf_status *cu_err_take(cu_dev *d);
void cu_err_release(cu_dev *d);
/* Reads of the record carried by events on the compute stream (cuda_index.c, "reads of the record
 * carried by events"): cu_err_enqueue_read, just before an event is recorded on compute, enqueues a read
 * and reset of the record if a checking launch ran since the last read, and hands back that read and
 * the orphaned ones in *list (NULL if none); cu_err_check, once the event has completed, returns the
 * first bad index of the list (calls no CUDA function: safe on a callback thread); cu_err_free frees a
 * list, handing the reads no completion looked at to the next event. */
typedef struct cu_errbuf cu_errbuf;
wf_status *cu_err_enqueue_read(cu_dev *d, cu_errbuf **list);
wf_status *cu_err_check(cu_dev *d, cu_errbuf *list);
void cu_err_free(cu_dev *d, cu_errbuf *list);
void cu_cudnn_release(cu_dev *d);

#endif
