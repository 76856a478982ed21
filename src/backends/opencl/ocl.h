/*
 * The OpenCL backend's internals, shared by its files: per-device state, program building with a
 * per-device and on-disk cache, kernel launches, and the kernel tables of each op family. The backend
 * is a plugin (libweft-opencl.so): it calls the core only through the host table `ocl_host`.
 */
#ifndef WF_OCL_H
#define WF_OCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "device/device.h"

extern const wf_host_api *ocl_host;

typedef struct ocl_prog ocl_prog;

typedef struct ocl_dev {
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue q;       /* the compute queue, in order: kernels run in enqueue order, so a buffer
                                 released by the core may be reused by a later kernel without a wait.
                                 Every upload leaves a barrier on it, so whatever is enqueued on it after
                                 copy_to_device returns (kernels, CLBlast, fills, read-backs) sees the data */
    cl_command_queue copy_q;  /* host<->device copies, in order, so they overlap compute on q; each one
                                 first waits for a marker of q (see ocl_backend.c) */
    pthread_mutex_t copy_mu;  /* copy_q's marker/transfer/barrier sequences and the staging slots */
    int staging;              /* -1 undecided, 0 direct transfers, 1 through the pinned slots below */
    size_t stage_bytes;
    unsigned stage_next;      /* the next slot to use: consecutive transfers alternate */
    cl_mem stage_mem[2];      /* CL_MEM_ALLOC_HOST_PTR buffers, mapped once at stage_ptr */
    void *stage_ptr[2];
    cl_event stage_ev[2];     /* the last transfer through each slot, NULL if none pending */
    /* streams and events (device contract v2): q is WF_STREAM_COMPUTE, copy_q WF_STREAM_COPY, both
     * with profiling on (event timestamps); a wf_event is a cl_event. Asynchronous uploads stage
     * through pinned buffers of their own (pins, under copy_mu), each reused once its transfer has
     * completed; aux_q only maps new ones, so that mapping never waits behind queued copies. */
    cl_command_queue aux_q;
    struct ocl_pin *pins;
    size_t pin_bytes;         /* pinned bytes held by pins */
    char name[160];
    char version[160];        /* driver version, part of the binary cache key */
    bool fp16, fp64;
    size_t max_wg;
    cl_uint mem_align;        /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes */
    pthread_mutex_t mu;       /* program cache and kernel argument setting */
    ocl_prog *progs;
    struct ocl_notice *notice; /* the first-run "compiling OpenCL kernels" line (ocl_backend.c); NULL: off */
    /* index checks on the device ("index errors" in ocl_backend.c): the error record, the ring of
     * checking launches (sites) under err_mu, how many checking launches were enqueued on q since the
     * record was last read (changed under mu, with the enqueues), and reads no event has examined */
    pthread_mutex_t err_mu;
    cl_mem err_mem;
    struct ocl_err_site *err_sites;
    unsigned err_next;
    atomic_int err_armed;
    struct ocl_errbuf *err_orphans;
    /* under err_mu: the node of the checking launches registered since the record was last read, and
     * whether they all were that one node's (err_one: then the event recorded right after them is that
     * node's, and the executor's wrapper names it, so the index error does not) */
    char err_node[192];
    bool err_any, err_one;
    bool no_readback;         /* WEFT_OCL_NO_READBACK set: kernels' read-backs (ocl_shp_read, oclew_read,
                               * ocl_nnr_read) fail */
} ocl_dev;

/* The device state of a kernel's context. */
static inline ocl_dev *ocl_of(const wf__kctx *k) { return (ocl_dev *)k->device->dev; }
/* A device tensor's buffer, and its offset in elements of its dtype. */
static inline cl_mem ocl_mem(const wf_tensor *t) { return (cl_mem)t->dev_chunk; }
static inline size_t ocl_size(wf_dtype t)
{
    /* the plugin links nothing of libweft, so no wf_dtype_size */
    switch (t) {
    case WF_F64: case WF_I64: return 8;
    case WF_F32: case WF_I32: return 4;
    case WF_F16: case WF_BF16: case WF_I16: return 2;
    default: return 1;
    }
}
static inline cl_ulong ocl_off(const wf_tensor *t) { return (cl_ulong)(t->dev_offset / ocl_size(t->dtype)); }

const char *ocl_err(cl_int e);
/* "node 'X' (Op): OpenCL <what> failed: CL_..." */
wf_status *ocl_fail(const wf__kctx *k, cl_int e, const char *what);

/* The kernel `kernel` of program `prog_name` (source src, build options opts) on k's device, built on
 * first use and cached per device and on disk. Not thread-safe to set arguments on: use ocl_launch. */
wf_status *ocl_kernel(wf__kctx *k, const char *prog_name, const char *src, const char *opts, const char *kernel,
                      cl_kernel *out);

typedef struct ocl_arg {
    size_t size;
    const void *value;
} ocl_arg;
#define OCL_ARG(v) ((ocl_arg){sizeof(v), &(v)})

/* Sets the arguments and enqueues over a global size (1-3 dims; local NULL lets the driver choose). */
wf_status *ocl_launch(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, int dims, const size_t *global,
                      const size_t *local);

/* Index checks that run on the device. ocl_err_site registers a checking launch of node k (kind
 * OCL_SITE_*, the axis or batch dims, and data's shape as its message names it) and gives the record
 * buffer and the site id to pass to the kernel, which sets the record's site word from 0 to the id by
 * atomic_cmpxchg (the first bad index wins) and then writes the index, its position and its entry (see
 * ocl_shape_index.c). The launch goes through ocl_launch_checked, which arms the record: the next event
 * recorded on the compute queue reads it back without blocking and reports the index as its error; a
 * synchronisation or a synchronous download reads what no event has. */
enum {
    OCL_SITE_GATHER,
    OCL_SITE_ELEMENTS,
    OCL_SITE_ND,
    OCL_SITE_SEQLEN,     /* ReverseSequence: data_shape is the input's shape, entry the time steps */
    OCL_SITE_DIV_ZERO,   /* Div / Mod: data_shape is the divisor's dtype name */
    OCL_SITE_NEG_POW,    /* Pow: an integer exponent below zero */
    OCL_SITE_TARGET,     /* the losses: entry is the class count */
    OCL_SITE_ROI_BATCH,  /* RoiAlign: entry is the batch size */
    OCL_SITE_POSITION,   /* RotaryEmbedding: entry is the caches' positions */
    OCL_SITE_RNN_LENS,   /* RNN, GRU, LSTM: sequence_lens; entry is the time steps */
    OCL_SITE_UNPOOL      /* MaxUnpool: entry is the unpooled elements (the default output's size) */
};
wf_status *ocl_err_site(wf__kctx *k, int kind, int axis, const char *data_shape, cl_mem *err, cl_uint *site);
wf_status *ocl_launch_checked(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, int dims,
                              const size_t *global);
/* Checks every value of integer tensor t (i8, u8, i16, i32 or i64) on the device, so nothing is read
 * back: a value inside [lo, hi] when bad_inside, else one outside it, that is not *skip (NULL: none),
 * fails the run through the record as a site of `kind` (data_shape: the text its message names); the
 * record holds the value, its element number in t and `entry`. */
wf_status *ocl_check_ints(wf__kctx *k, const wf_tensor *t, int kind, int64_t lo, int64_t hi, bool bad_inside,
                          const int64_t *skip, int64_t entry, const char *data_shape);
/* The code of an integer dtype that ocl_check_ints's kernel (and others that load any integer dtype)
 * switches on: 0 i8, 1 u8, 2 i16, 3 i32, 4 i64; -1 for other dtypes. */
static inline int ocl_int_code(wf_dtype t)
{
    return t == WF_I8 ? 0 : t == WF_U8 ? 1 : t == WF_I16 ? 2 : t == WF_I32 ? 3 : t == WF_I64 ? 4 : -1;
}

/* The OpenCL type name of a dtype inside kernel source ("float", "half", "int", "uchar" for bool...). */
const char *ocl_type(wf_dtype t);

/* Kernel tables of the op families (terminated by op == NULL); each file exports one. */
extern const wf__kernel_def ocl_kernels_elementwise[]; /* ocl_elementwise.c */
extern const wf__kernel_def ocl_kernels_shape[];       /* ocl_shape.c */
extern const wf__kernel_def ocl_kernels_nn[];          /* ocl_nn.c: MatMul/Gemm (CLBlast), conv, pools */
extern const wf__kernel_def ocl_kernels_reduce[];      /* ocl_reduce.c: reductions, softmax, norms */
extern const wf__kernel_def ocl_kernels_norm[];        /* ocl_norm.c: more reductions, norms, losses, TopK */
extern const wf__kernel_def ocl_kernels_image[];       /* ocl_image.c: Resize, sampling, signal, quantisation */
extern const wf__kernel_def ocl_kernels_image_augment[]; /* ocl_image_augment.c: ConvertImageDtype, random augmentations */
extern const wf__kernel_def ocl_kernels_seq[];         /* ocl_seq.c: Einsum, data-dependent ops, RNNs, Attention */
extern const wf__kernel_def ocl_kernels_nngrad[];      /* ocl_nngrad.c: conv and pool backward ops */
extern const wf__kernel_def ocl_kernels_train[];       /* ocl_train.c: ApplyAdam, StatelessRandomUniform */
extern const wf__kernel_def ocl_kernels_fused[];       /* ocl_fused.c: FusedElementwise (src/lower/jit.c) */

#endif
