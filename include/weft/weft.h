/*
 * weft — run dataflow graphs of tensor operations on every device a machine has.
 *
 * This header is the whole published C API. Anything not declared here is private and may change.
 *
 * Conventions
 *  - Every call that can fail returns a `wf_status *`. NULL means success. A non-NULL status carries a
 *    code and a message naming the node, op, device, shape or file at fault; the caller owns it and
 *    releases it with wf_status_free(). On failure no output parameter is written and no operation is
 *    performed unless the function says otherwise.
 *  - Objects are opaque handles with paired lifetimes: every *_new has a *_free that accepts NULL.
 *  - "Caller owns" means the caller must release the object with its *_free function.
 *  - Thread safety: a wf_context and a wf_session may be used from several threads at once
 *    (wf_session_run is re-entrant). A wf_graph must not be modified while another thread builds on it
 *    or runs a session over it.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WF_API __attribute__((visibility("default")))
#else
#define WF_API
#endif

#define WF_VERSION_MAJOR 0
#define WF_VERSION_MINOR 1
#define WF_VERSION_PATCH 0

/* Returns the library's version as "MAJOR.MINOR.PATCH". Static storage. */
WF_API const char *wf_version(void);

/* ------------------------------------------------------------------------------------------------ */
/* Status                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

/* Codes only grow at the end. */
typedef enum wf_code {
    WF_OK = 0,
    WF_INVALID_ARGUMENT = 1,   /* bad shape, dtype, attribute, name, file content */
    WF_NOT_FOUND = 2,          /* unknown op, node, device, file */
    WF_ALREADY_EXISTS = 3,     /* duplicate node name */
    WF_OUT_OF_MEMORY = 4,      /* an allocation failed; the message names the device and size */
    WF_UNIMPLEMENTED = 5,      /* no kernel for this op/dtype/device */
    WF_FAILED_PRECONDITION = 6,/* e.g. a placeholder that was not fed */
    WF_INTERNAL = 7,           /* a bug in weft or a backend library */
    WF_UNAVAILABLE = 8,        /* a driver or device is missing */
    WF_CANCELLED = 9,          /* the run was stopped by another node's error */
    WF_IO_ERROR = 10,          /* reading or writing a file failed */
    WF_DATA_LOSS = 11          /* a file's content is corrupt: a checksum does not match, a record is cut */
} wf_code;

typedef struct wf_status wf_status;

/* NULL is success: wf_status_code(NULL) == WF_OK and wf_status_message(NULL) == "". */
WF_API wf_code wf_status_code(const wf_status *s);
/* Owned by the status; valid until wf_status_free(s). */
WF_API const char *wf_status_message(const wf_status *s);
WF_API void wf_status_free(wf_status *s);
/* An error status with a printf-style message, for callbacks that report to weft (a dataset map
 * callback, ...). WF_OK is turned into WF_INTERNAL; NULL when out of memory (which reads as success:
 * callers that must fail should check). */
WF_API wf_status *wf_status_new(wf_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* "OK", "INVALID_ARGUMENT", ... Static storage. */
WF_API const char *wf_code_name(wf_code code);

/* ------------------------------------------------------------------------------------------------ */
/* Data types                                                                                       */
/* ------------------------------------------------------------------------------------------------ */

typedef enum wf_dtype {
    WF_DTYPE_INVALID = 0,
    WF_F32 = 1,
    WF_F64 = 2,
    WF_F16 = 3,
    WF_BF16 = 4,
    WF_I8 = 5,
    WF_U8 = 6,
    WF_I16 = 7,
    WF_I32 = 8,
    WF_I64 = 9,
    WF_BOOL = 10, /* one byte, 0 or 1 */
    /* Byte strings (file contents, encoded images), host memory only. A string tensor's data is `size`
     * records {uint64_t offset; uint64_t length} followed by the payload bytes; offsets count from the
     * start of the data, and wf_tensor_bytes covers records and payload, so copying that many bytes is a
     * deep copy. Only ops that say so take or make strings (Identity, ReadFile, DecodeJpeg, DecodePng);
     * every other op refuses them when the graph is built, and they never go to a device other than the
     * CPU. Make them with wf_tensor_new_strings; wf_tensor_new refuses WF_STRING. */
    WF_STRING = 11
} wf_dtype;

#define WF_NUM_DTYPES 12
#define WF_MAX_RANK 8

/* Element size in bytes (16 for WF_STRING: its record); 0 for an invalid dtype. */
WF_API size_t wf_dtype_size(wf_dtype t);
/* "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool", "string"; "invalid" otherwise. */
WF_API const char *wf_dtype_name(wf_dtype t);
/* Accepts the names above and numpy's ("float32", "int64", "bool", ...). */
WF_API wf_status *wf_dtype_from_name(const char *name, wf_dtype *out);

/* IEEE half and bfloat16 conversions with round-to-nearest-even; NaN stays NaN. */
WF_API uint16_t wf_f32_to_f16(float x);
WF_API float wf_f16_to_f32(uint16_t h);
WF_API uint16_t wf_f32_to_bf16(float x);
WF_API float wf_bf16_to_f32(uint16_t h);

/* ------------------------------------------------------------------------------------------------ */
/* Tensors (host memory, row-major, reference counted)                                              */
/* ------------------------------------------------------------------------------------------------ */

typedef struct wf_tensor wf_tensor;

/* Creates a tensor of `dtype` and shape dims[0..rank). `data`, when not NULL, holds
 * product(dims) * wf_dtype_size(dtype) bytes and is copied; NULL zero-fills. rank 0 is a scalar.
 * Caller owns *out. */
WF_API wf_status *wf_tensor_new(wf_dtype dtype, int rank, const int64_t *dims, const void *data,
                                wf_tensor **out);
/* Creates a WF_STRING tensor of shape dims[0..rank) whose element i holds the bytes ptrs[i][0..lens[i])
 * (any bytes, NUL included), copied; lens NULL: each ptrs[i] is NUL-terminated. ptrs may be NULL only
 * when the tensor has no elements. Caller owns *out. */
WF_API wf_status *wf_tensor_new_strings(int rank, const int64_t *dims, const char *const *ptrs,
                                        const size_t *lens, wf_tensor **out);
/* Element i (flat, row-major) of a WF_STRING tensor: a pointer into the tensor's data, valid while the
 * tensor lives, with its length in *len (len may be NULL). Not NUL-terminated. NULL when t is not a
 * string tensor or i is out of range. */
WF_API const char *wf_tensor_string(const wf_tensor *t, int64_t i, size_t *len);
/* A tensor over host memory the caller lends (no copy: numpy's arrays in the Python package): `data`
 * holds product(dims) * wf_dtype_size(dtype) bytes, aligned to the element size (not necessarily to 64
 * bytes, which only tensors weft allocates promise), and must stay valid and unwritten by others until
 * weft calls release(user, data) (release may be NULL), which it does, from whatever thread drops the
 * last reference, once no tensor uses the memory any more (views included). Not WF_STRING. On error
 * release is not called. Caller owns *out. */
WF_API wf_status *wf_tensor_wrap(wf_dtype dtype, int rank, const int64_t *dims, void *data,
                                 void (*release)(void *user, void *data), void *user, wf_tensor **out);
/* Adds a reference; returns t. */
WF_API wf_tensor *wf_tensor_ref(wf_tensor *t);
/* Drops a reference; the memory goes when the last one does. Accepts NULL. */
WF_API void wf_tensor_free(wf_tensor *t);

WF_API wf_dtype wf_tensor_dtype(const wf_tensor *t);
WF_API int wf_tensor_rank(const wf_tensor *t);
/* rank entries, owned by the tensor. */
WF_API const int64_t *wf_tensor_dims(const wf_tensor *t);
WF_API int64_t wf_tensor_size(const wf_tensor *t);   /* number of elements */
WF_API size_t wf_tensor_bytes(const wf_tensor *t);
/* Host pointer to the elements, 64-byte aligned (a wf_tensor_wrap tensor: the caller's pointer). Do not
 * write to a tensor that was fed to or returned by a run while another reference to it may be in use. */
WF_API void *wf_tensor_data(const wf_tensor *t);

/* ------------------------------------------------------------------------------------------------ */
/* Context: devices and thread pools                                                                */
/* ------------------------------------------------------------------------------------------------ */

typedef struct wf_context wf_context;

typedef struct wf_context_options {
    int inter_op_threads; /* threads that run independent nodes; 0 = number of cores */
    int intra_op_threads; /* threads inside one large kernel; 0 = number of cores */
} wf_context_options;

/* Fills o with the defaults. */
WF_API void wf_context_options_init(wf_context_options *o);
/* opts may be NULL for defaults. Caller owns *out. */
WF_API wf_status *wf_context_new(const wf_context_options *opts, wf_context **out);
WF_API void wf_context_free(wf_context *ctx);

typedef struct wf_device_info {
    const char *name;        /* full name: /job:localhost/replica:0/task:0/device:CPU:0 */
    const char *type;        /* "CPU", "GPU", "OPENCL" */
    const char *description; /* hardware name */
    int compute_units;       /* cores or SMs */
    int threads;             /* threads weft uses on it */
    uint64_t memory_bytes;   /* memory available to the device */
    const char *backend;     /* "builtin" for the CPU, else the plugin's name ("opencl", "cuda") */
    /* appended fields */
    uint32_t fast_dtypes;    /* bit (1u << dtype) per 16-bit float dtype the device computes natively
                                (MatMul, convolution): what the mixed-precision pass converts to there */
    const char *precision;   /* the device's own words on it: "bf16: AVX512_BF16, AMX", or why not */
} wf_device_info;

WF_API int wf_context_num_devices(const wf_context *ctx);
/* Strings in *out are owned by the context. */
WF_API wf_status *wf_context_device(const wf_context *ctx, int index, wf_device_info *out);

/* ---- Device names, as TensorFlow writes them: /job:J/replica:R/task:T/device:TYPE:N --------------- */
/* ------------------------------------------------------------------------------------------------ */
/* Device names and specs                                                                           */
/* ------------------------------------------------------------------------------------------------ */

#define WF_DEVICE_JOB_MAX 64   /* bytes of a job name, NUL included */
#define WF_DEVICE_TYPE_MAX 32  /* bytes of a device type, NUL included */
#define WF_DEVICE_SPEC_MAX 192 /* a buffer of this size holds any formatted spec */

/*
 * A full device name or a partial spec. A part whose has_* flag is 0 means "any", so a zeroed struct
 * matches every device. type is "CPU", "GPU" or "OPENCL" for those types (written in any case), and
 * any other type exactly as written.
 */
typedef struct wf_device_spec {
    int has_job, has_replica, has_task, has_type, has_id;
    char job[WF_DEVICE_JOB_MAX];
    int replica;
    int task;
    char type[WF_DEVICE_TYPE_MAX];
    int id;
} wf_device_spec;

/*
 * Parses TensorFlow's device syntax:
 *   [/job:NAME][/replica:N][/task:N][/device:TYPE[:N|:*]]  parts in any order, a repeated part
 *                                                          overrides the earlier one, '*' = any
 *   /cpu:N  /CPU:N  /gpu:N  /GPU:N                         legacy forms of /device:CPU:N, GPU:N (N or *)
 *   TYPE:N                                                 a local name such as GPU:0 or cpu:0
 *   "", "/", "*" (and NULL)                                any device
 * NAME and TYPE start with a letter and hold letters, digits and '_'. A malformed spec returns
 * WF_INVALID_ARGUMENT quoting it, saying where it went wrong and showing the grammar.
 */
WF_API wf_status *wf_device_spec_parse(const char *text, wf_device_spec *out);
/*
 * Writes the canonical form (/job:J/replica:R/task:T/device:TYPE:N, omitted parts left out, an unset
 * id printed as '*') into buf like snprintf: returns the length the full text needs; buf is always
 * NUL-terminated when cap > 0. A buffer of WF_DEVICE_SPEC_MAX bytes is always enough.
 */
WF_API size_t wf_device_spec_format(const wf_device_spec *spec, char *buf, size_t cap);
/* 1 when every part `spec` sets is set in `device` to the same value (TF's IsSpecification), else 0. */
WF_API int wf_device_spec_matches(const wf_device_spec *spec, const wf_device_spec *device);
/* 1 when all five parts are set. */
WF_API int wf_device_spec_is_complete(const wf_device_spec *spec);
/*
 * Merges `other` into `target` (TF's MergeDevNames). Differing jobs, replicas or tasks are an error.
 * Differing types or ids are an error when allow_soft_placement is 0; when it is 1, differing types
 * leave the type and id unset and differing ids leave the id unset. On error target is unchanged.
 */
WF_API wf_status *wf_device_spec_merge(wf_device_spec *target, const wf_device_spec *other,
                                       int allow_soft_placement);
/*
 * Parses `name` (full or local form) and fills the parts it leaves unset from `basename`, which must be
 * a complete name; NULL stands for this process's CPU, /job:localhost/replica:0/task:0/device:CPU:0
 * (TF's CanonicalizeDeviceName). *out is then complete.
 */
WF_API wf_status *wf_device_spec_canonicalize(const char *name, const char *basename,
                                              wf_device_spec *out);

/* Backend plugins (libweft-opencl.so, libweft-cuda.so, ...) are looked for in WEFT_PLUGIN_PATH
 * (colon-separated folders), the running program's folder and the install folder when a context is
 * created. Each one found or missing is reported here; none of them failing is an error. */
typedef struct wf_plugin_info {
    const char *name;    /* "opencl" */
    const char *path;    /* the library, or the folders searched when not found */
    const char *status;  /* "loaded"; "not found" (no library); "unavailable" (it found no driver or
                            device); "failed" (it did not load, or speaks another ABI version) */
    const char *reason;  /* why it is not loaded or has no device, e.g. "no CUDA driver (libcuda.so.1 not found)" */
    int n_devices;
} wf_plugin_info;

/* Caps the device memory weft may take on every device that `device_spec` matches (0: no limit). Out
 * of memory is then a status naming the device and the size; the run's memory is freed and the next
 * run works. On the CPU the limit and the statistics count the host tensors its kernels produce
 * (the plans' arenas, and outputs outside them until freed), not the graph's constants, the feeds,
 * kernels' scratch memory or fetched results. Runs place intermediates in their plan's arena (one per
 * device, reserved by the plan's first run and kept while the plan is cached); a fetched value is
 * handed out as a copy in ordinary host memory, so the next run never overwrites it. */
WF_API wf_status *wf_context_set_memory_limit(wf_context *ctx, const char *device_spec, uint64_t bytes);

typedef struct wf_memory_stats {
    uint64_t in_use;      /* bytes in live tensors */
    uint64_t peak;        /* highest in_use so far */
    uint64_t reserved;    /* bytes taken from the device */
    uint64_t limit;       /* 0: none */
    int64_t n_allocs;     /* live allocations */
    int64_t total_allocs; /* allocations of the device's allocator so far (the CPU: counted host tensors
                             and arenas). A steady-state run makes none: runs 2..N leave it unchanged */
    int64_t chunk_allocs; /* chunks the allocator took from the backend so far (the CPU: as total_allocs) */
    uint64_t arena_bytes; /* bytes of the plans' arenas on the device (part of in_use): each cached plan
                             keeps one arena per device per concurrent run */
    int64_t fallback_allocs; /* outputs of runs with an arena that still came from the allocator: values
                                whose size is known only at run time (data-dependent ops such as NonZero,
                                Unique, or a Reshape to a computed shape), and a view of an arena value
                                whose own slot is missing */
} wf_memory_stats;

/* Statistics of a device's allocator (for the CPU: of the tensors counted as above). */
WF_API wf_status *wf_context_memory_stats(const wf_context *ctx, int device_index, wf_memory_stats *out);

/* What the placer assumes of a device. Defaults come from its properties (the CPU's from /proc/cpuinfo,
 * a backend's from its driver); calibration (wf_context_calibrate) replaces them with measurements, and
 * wf_context_set_device_perf with declared figures (tests, or a user who knows better). */
typedef struct wf_device_perf {
    double dense_gflops;    /* matmul and convolution (ops with at least 4 flops per byte moved) */
    double vector_gflops;   /* every other op */
    double mem_gbps;        /* memory traffic of an op */
    double launch_us;       /* fixed cost of running one node */
    double link_gbps;       /* copies to and from host memory (unused for the CPU) */
    double link_latency_us; /* fixed cost of one copy */
    int measured;           /* 1: from calibration; 0: defaults or declared */
} wf_device_perf;

WF_API wf_status *wf_context_device_perf(const wf_context *ctx, int device_index, wf_device_perf *out);
/* Sets the figures of every device `device_spec` matches. Every value must be > 0 (link figures of the
 * CPU are ignored). Plans built afterwards use them. */
WF_API wf_status *wf_context_set_device_perf(wf_context *ctx, const char *device_spec, const wf_device_perf *perf);

/* Calibration: measures the figures above on every device `device_spec` matches (NULL: all) by running
 * small graphs on it, forced there with strict placement: a chain of scalar Adds (launch_us), MatMul
 * 512x512x512 (dense), Tanh and Add over 4M floats (vector, memory), and for a device other than the CPU
 * copies of 1 scalar against several and of 1 float against 4M (link latency and bandwidth). Medians of
 * runs after a warm-up that compiles the kernels; a few seconds per device. Sets them with measured = 1
 * and stores them in the cache file `cache_path`, replacing those devices' lines and keeping the rest
 * (NULL: $WEFT_CACHE_DIR/perf.txt, else $XDG_CACHE_HOME/weft/perf.txt, else ~/.cache/weft/perf.txt; the
 * folder is created). NOT_FOUND names a spec that matches no device; IO_ERROR names a cache that cannot
 * be written (checked before measuring anything). A device that fails keeps its figures, the others are
 * still measured, and the first failure is returned, naming the device. */
WF_API wf_status *wf_context_calibrate(wf_context *ctx, const char *device_spec, const char *cache_path);
/* Sets the figures of the devices present from the cache `cache_path` (NULL: the default above), keyed
 * by full name, hardware and backend, with measured = 1. A missing file is not an error; malformed
 * lines are skipped. wf_context_new calls it with NULL. */
WF_API wf_status *wf_context_load_calibration(wf_context *ctx, const char *cache_path);

WF_API int wf_context_num_plugins(const wf_context *ctx);
WF_API wf_status *wf_context_plugin(const wf_context *ctx, int index, wf_plugin_info *out);

/* ------------------------------------------------------------------------------------------------ */
/* Graphs                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

typedef struct wf_graph wf_graph;
typedef struct wf_node wf_node;  /* owned by its graph */

/* One output of a node: the edge value other nodes consume. */
typedef struct wf_output {
    wf_node *node;
    int index;
} wf_output;

typedef enum wf_attr_type {
    WF_ATTR_INT = 1,
    WF_ATTR_FLOAT = 2,
    WF_ATTR_INTS = 3,
    WF_ATTR_FLOATS = 4,
    WF_ATTR_STRING = 5,
    WF_ATTR_DTYPE = 6,
    WF_ATTR_TENSOR = 7
} wf_attr_type;

/* An attribute passed to wf_op. Pointers are read during the call only (values are copied). */
typedef struct wf_attr {
    const char *name;
    wf_attr_type type;
    int64_t i;
    double f;
    const int64_t *ints;
    const double *floats;
    int n;                  /* length of ints or floats */
    const char *s;
    wf_dtype dtype;
    const wf_tensor *tensor;
} wf_attr;

static inline wf_attr wf_attr_int(const char *name, int64_t v)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_INT; a.i = v; return a; }
static inline wf_attr wf_attr_float(const char *name, double v)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_FLOAT; a.f = v; return a; }
static inline wf_attr wf_attr_ints(const char *name, const int64_t *v, int n)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_INTS; a.ints = v; a.n = n; return a; }
static inline wf_attr wf_attr_floats(const char *name, const double *v, int n)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_FLOATS; a.floats = v; a.n = n; return a; }
static inline wf_attr wf_attr_string(const char *name, const char *s)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_STRING; a.s = s; return a; }
static inline wf_attr wf_attr_dtype(const char *name, wf_dtype t)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_DTYPE; a.dtype = t; return a; }
static inline wf_attr wf_attr_tensor(const char *name, const wf_tensor *t)
{ wf_attr a = {0}; a.name = name; a.type = WF_ATTR_TENSOR; a.tensor = t; return a; }

/* Caller owns *out. */
WF_API wf_status *wf_graph_new(wf_graph **out);
/* Frees the graph and all its nodes. Sessions over it must be freed first. Accepts NULL. */
WF_API void wf_graph_free(wf_graph *g);

/* Adds a node running `op_type` (e.g. "MatMul") on `inputs`, with attributes. `name` may be NULL for
 * an automatic unique name (op type, then _1, _2, ...). The node is validated at once: unknown op,
 * wrong input count, unknown or mistyped attribute, incompatible shapes or dtypes each return a status
 * naming the node and op, and leave the graph unchanged. *out (optional) is owned by the graph. */
WF_API wf_status *wf_op(wf_graph *g, const char *op_type, const char *name, const wf_output *inputs,
                        int n_inputs, const wf_attr *attrs, int n_attrs, wf_node **out);

/* Requests a device for nodes created from now on (a partial device spec such as "/device:CPU:0",
 * "GPU:1", "/job:localhost"); NULL or "" clears it. Placement honours requests, see wf_session_*. */
WF_API wf_status *wf_graph_set_device(wf_graph *g, const char *spec);

/* Requests a device for one node (what `weft run --place` does); NULL or "" clears the request. */
WF_API wf_status *wf_node_set_device(wf_node *n, const char *spec);
/* Puts a node in a colocation group: every node of a group runs on one device (a variable with the
 * nodes that read and update it). NULL or "" leaves the group. */
WF_API wf_status *wf_node_set_colocation(wf_node *n, const char *group);
WF_API const char *wf_node_colocation(const wf_node *n); /* NULL when none */

WF_API int wf_graph_num_nodes(const wf_graph *g);
WF_API wf_node *wf_graph_node(const wf_graph *g, int index);
/* NOT_FOUND naming `name` when absent. */
WF_API wf_status *wf_graph_find(const wf_graph *g, const char *name, wf_node **out);
/* Parses "node" or "node:k" into an output. */
WF_API wf_status *wf_graph_output(const wf_graph *g, const char *name, wf_output *out);

WF_API const char *wf_node_name(const wf_node *n);
WF_API const char *wf_node_op(const wf_node *n);
WF_API const char *wf_node_device(const wf_node *n); /* requested device spec, "" if none */
WF_API int wf_node_num_inputs(const wf_node *n);
WF_API wf_output wf_node_input(const wf_node *n, int i);
WF_API int wf_node_num_outputs(const wf_node *n);
static inline wf_output wf_out(wf_node *n, int index) { wf_output o; o.node = n; o.index = index; return o; }

/* Inferred dtype and shape of an output. The shape function returns the rank (or -1 if unknown) and
 * writes up to WF_MAX_RANK dims; an unknown dim is -1. */
WF_API wf_dtype wf_output_dtype(wf_output o);
WF_API int wf_output_shape(wf_output o, int64_t *dims);

/* ---- Builders for common ops: thin wrappers over wf_op. name may be NULL. *out is the op's output. */
WF_API wf_status *wf_placeholder(wf_graph *g, const char *name, wf_dtype dtype, int rank,
                                 const int64_t *dims, wf_output *out); /* dims may contain -1 */
WF_API wf_status *wf_const(wf_graph *g, const char *name, const wf_tensor *value, wf_output *out);
WF_API wf_status *wf_const_scalar(wf_graph *g, const char *name, wf_dtype dtype, double value,
                                  wf_output *out);
WF_API wf_status *wf_unary(wf_graph *g, const char *op_type, const char *name, wf_output x,
                           wf_output *out);
WF_API wf_status *wf_binary(wf_graph *g, const char *op_type, const char *name, wf_output a,
                            wf_output b, wf_output *out);
WF_API wf_status *wf_add(wf_graph *g, const char *name, wf_output a, wf_output b, wf_output *out);
WF_API wf_status *wf_mul(wf_graph *g, const char *name, wf_output a, wf_output b, wf_output *out);
WF_API wf_status *wf_relu(wf_graph *g, const char *name, wf_output x, wf_output *out);
WF_API wf_status *wf_matmul(wf_graph *g, const char *name, wf_output a, wf_output b, int transpose_a,
                            int transpose_b, wf_output *out);
WF_API wf_status *wf_bias_add(wf_graph *g, const char *name, wf_output x, wf_output bias,
                              wf_output *out);
WF_API wf_status *wf_softmax(wf_graph *g, const char *name, wf_output x, int axis, wf_output *out);
WF_API wf_status *wf_reshape(wf_graph *g, const char *name, wf_output x, int rank,
                             const int64_t *dims, wf_output *out);
WF_API wf_status *wf_flatten(wf_graph *g, const char *name, wf_output x, int axis, wf_output *out);

/* ---- Files and images, for input pipelines (ops ReadFile, DecodeJpeg, DecodePng, ConvertImageDtype,
 * StatelessRandom{Brightness,Contrast,FlipLeftRight,Crop}; CPU kernels). Errors at run time name the
 * node, the op and, for ReadFile, the path. */

/* The bytes of the file at `path` (a string scalar) as a string scalar. A missing file is NOT_FOUND, an
 * unreadable one IO_ERROR, one larger than this machine's memory OUT_OF_MEMORY, each naming the path.
 * Stateful: read at every run, never folded. */
WF_API wf_status *wf_read_file(wf_graph *g, const char *name, wf_output path, wf_output *out);
/* A JPEG (libjpeg-turbo with its default accurate integer IDCT, JDCT_ISLOW, and fancy upsampling:
 * Pillow's decode, bit for bit. TensorFlow documents its dct_method "" as a system-specific default,
 * which its libjpeg wrapper makes the fast IDCT, JDCT_IFAST; weft takes the accurate one, so that a
 * decode can be checked against Pillow exactly and loses nothing to the faster approximation) or a
 * PNG (libpng; 16-bit samples keep their high byte, palettes and transparency are expanded) held in a
 * string scalar, as u8 [height, width, channels]. channels: 0 as stored (JPEG 1 or 3, PNG 1 to 4), 1
 * gray, 3 RGB (PNG also 4, RGBA: opaque alpha added where the file has none). Color to gray is ITU-R 601
 * luma (libjpeg's own conversion for JPEG; for PNG (299 R + 587 G + 114 B) / 1000 in 16-bit fixed point,
 * rounded, as Pillow's convert("L")); alpha is dropped, not blended. Height and width are known only at
 * run time. A corrupt or truncated image (libjpeg's warnings about damaged data included) is
 * INVALID_ARGUMENT naming the node and quoting the library's message; a decoded size over the CPU's
 * memory limit is OUT_OF_MEMORY before anything that size is allocated. The ops' attribute "dtype"
 * (wf_op; default u8, which these builders use) may be f32, f64, f16 or bf16: the pixels scaled to
 * [0, 1] exactly as wf_convert_image_dtype scales them, in one pass (TensorFlow's decode_image(dtype=)). */
WF_API wf_status *wf_decode_jpeg(wf_graph *g, const char *name, wf_output contents, int channels, wf_output *out);
WF_API wf_status *wf_decode_png(wf_graph *g, const char *name, wf_output contents, int channels, wf_output *out);
/* tf.image.convert_image_dtype with saturation: u8 to a float dtype multiplies by 1/255 (the scale
 * rounded to f32, for f16 and bf16 the f32 result rounded); a float dtype to u8 multiplies by 255.5 and
 * truncates after clamping to [0, 255] (NaN gives 0); float to float casts; u8 to u8 copies. */
WF_API wf_status *wf_convert_image_dtype(wf_graph *g, const char *name, wf_output image, wf_dtype dtype,
                                         wf_output *out);

/*
 * Stateless random image ops (TensorFlow's tf.image.stateless_random_* in spirit). image is u8, f32 or
 * f64 (crop and flip: any numeric dtype), [H, W, C] or a batch [N, H, W, C]; seed is an i64 [2] tensor
 * {seed, counter}, read on the host. Image n of a batch (n = 0 for a single image) draws from
 *     key = wf__rng_key(seed[0], seed[1] + n),  draw k = wf__rng_bits(key, k)
 * (the counter-based hash of src/ops/kutil_random.h, also behind StatelessRandomUniform), u_k =
 * wf__rng_f32(draw k): the top 24 bits times 2^-24, in [0, 1). The same seed gives the same output on
 * every machine; feed a new counter per epoch or step for new draws.
 *  - Brightness (max_delta >= 0): delta = (2 u_0 - 1) max_delta (in double, then rounded to the image's
 *    float dtype) is added to every element. u8 images are converted as by ConvertImageDtype to f32
 *    ([0, 1] units, like tf.image.adjust_brightness), shifted, and converted back with saturation.
 *  - Contrast (0 <= lower <= upper): factor = lower + u_0 (upper - lower); per image and channel,
 *    y = (x - mean) * factor + mean with mean over H and W (summed in double, then rounded to the
 *    float dtype), as tf.image.adjust_contrast; u8 goes through f32 and back as for brightness.
 *  - FlipLeftRight: the image is reversed along W when u_0 < 0.5.
 *  - Crop (size = {h, w, c}, each at most the image's dim, else INVALID_ARGUMENT naming the node):
 *    offsets oh = draw 0 mod (H - h + 1), ow = draw 1 mod (W - w + 1), oc = draw 2 mod (C - c + 1)
 *    (the raw 64-bit draws); the output is [h, w, c] (or [N, h, w, c], each image its own offsets).
 */
WF_API wf_status *wf_random_brightness(wf_graph *g, const char *name, wf_output image, wf_output seed,
                                       double max_delta, wf_output *out);
WF_API wf_status *wf_random_contrast(wf_graph *g, const char *name, wf_output image, wf_output seed,
                                     double lower, double upper, wf_output *out);
WF_API wf_status *wf_random_flip_left_right(wf_graph *g, const char *name, wf_output image, wf_output seed,
                                            wf_output *out);
WF_API wf_status *wf_random_crop(wf_graph *g, const char *name, wf_output image, wf_output seed,
                                 const int64_t size[3], wf_output *out);

/* ---- Gradients ---------------------------------------------------------------------------------- */
/* Reverse-mode autodiff: adds to g the nodes computing, for each xs[i], the gradient of
 * sum_k sum(grad_ys[k] * ys[k]) with respect to xs[i] (grad_ys NULL: ones of each ys' shape), and
 * returns them in dxs[i]. dxs[i].node is NULL when xs[i] does not influence the ys (TensorFlow's None).
 * The backward nodes are ordinary nodes: placement, copies and every device apply to them. An op on
 * the path without a gradient is an error naming the node and the op; g is left unchanged on error. */
WF_API wf_status *wf_gradients(wf_graph *g, const wf_output *ys, int n_ys, const wf_output *grad_ys,
                               const wf_output *xs, int n_xs, wf_output *dxs);

/* ---- Variables ----------------------------------------------------------------------------------- */
/* A variable is state a session keeps between runs, starting from `initial` (copied). Each session has
 * its own values. A run reads the values from before it; the Assign nodes it computes (fetched, given
 * as run targets, or feeding what is) become the new values when the run succeeds, all at once, and
 * a failed run changes nothing. Two Assigns of one variable in one run: the later in the graph wins. */
typedef struct wf_session wf_session;
WF_API wf_status *wf_variable(wf_graph *g, const char *name, const wf_tensor *initial, wf_output *out);
/* `value` (same dtype and shape as the variable) becomes the variable's value after the run. *out is
 * the value, for chaining. */
WF_API wf_status *wf_assign(wf_graph *g, const char *name, wf_output variable, wf_output value, wf_output *out);
/* The session's current value of the variable named `name` (caller frees). NOT_FOUND names it. */
WF_API wf_status *wf_session_get_variable(wf_session *s, const char *name, wf_tensor **value);
/* Replaces a variable's value; the dtype and shape must match (INVALID_ARGUMENT names both). */
WF_API wf_status *wf_session_set_variable(wf_session *s, const char *name, const wf_tensor *value);
/* Every variable's value in a safetensors file, keyed by node name (written atomically). */
WF_API wf_status *wf_session_save(wf_session *s, const char *path);
/* Loads every variable of the graph from a safetensors file. A missing, extra, or differently shaped
 * or typed tensor, or a damaged file, is an error naming it, and then no variable changes. */
WF_API wf_status *wf_session_restore(wf_session *s, const char *path);
/* Checkpoints with input-pipeline positions: the variables and each iterator's position
 * (wf_iterator_save) as "__iterator__/NAME" in the same file, so a training run restored from it
 * continues at the same element of its data (shuffle buffers' draws included). restore_iterators
 * restores the named iterators (fresh ones over the same pipelines; an iterator the file does not
 * have is NOT_FOUND naming it, another pipeline's position INVALID_ARGUMENT) and then the variables
 * as wf_session_restore does (a variables error leaves the iterators restored, the variables not);
 * wf_session_restore itself ignores the positions. */
typedef struct wf_iterator wf_iterator;
WF_API wf_status *wf_session_save_iterators(wf_session *s, const char *path, wf_iterator *const *its,
                                            const char *const *names, int n);
WF_API wf_status *wf_session_restore_iterators(wf_session *s, const char *path, wf_iterator *const *its,
                                               const char *const *names, int n);

/* ------------------------------------------------------------------------------------------------ */
/* Sessions                                                                                         */
/* ------------------------------------------------------------------------------------------------ */

typedef struct wf_session wf_session;

typedef struct wf_session_options {
    int inter_op_threads; /* 0 = the context's */
    int intra_op_threads; /* 0 = the context's */
    const char *device;   /* run every node on this device spec (e.g. "OPENCL:0"); NULL: each node's own
                             request (wf_graph_set_device), else the CPU. A spec matching no device makes
                             wf_session_new fail with the list of devices. Copied. */
    int strict_placement; /* an unsatisfiable request is an error (TensorFlow's message) instead of a
                             fallback to the CPU with the reason recorded */
    int plan_cache_size;  /* plans kept (one per feed/fetch set and input shapes), least recently used
                             evicted first; evicting one frees its arenas, never the session's device
                             copies of constants and variables. 0: 16 */
    /* appended: graph optimisation (src/passes/passes.h says what each level does) */
    int opt_level;        /* 0: none; 1: device-independent passes (identity, simplify, bnfold, matmul_bias,
                             fold, cse, conv_crop); 2: and epilogue fusion after placement ("fuse"); 3: and
                             channel-blocked layouts kept between the CPU's f32 convolutions
                             ("layout", src/lower/layout.c). What wf_session_options_init sets:
                             WF_OPT_LEVEL_DEFAULT */
    const char *disable_passes; /* comma-separated pass names to skip, or NULL. Copied */
    const char *dump_graph_dir; /* when not NULL, each optimisation writes DIR/NN-PASS.txt (the graph
                                   after it; 00-input.txt before). Copied */
    /* appended: automatic mixed precision (the "amp" pass, src/passes/amp.c, at any opt_level) */
    wf_dtype precision;   /* WF_BF16 or WF_F16: f32 ops on TensorFlow's allow list (MatMul, Gemm, the
                             convolutions) run in that dtype where their device computes it natively
                             (wf_device_info.fast_dtypes), with the elementwise and data-movement ops
                             between them, casts only at the boundaries; fetched values keep their
                             dtype. 0 or WF_F32: off. wf_session_precision_report says what converted */
    const char *amp_lists; /* edits of the pass's op lists, "allow+=Op,Op;deny-=Op" (lists: allow, infer,
                              clear, deny; L+= moves ops into L, L-= takes them out); NULL: TensorFlow's
                              lists as weft names them. Unknown lists or ops fail wf_session_new. Copied */
} wf_session_options;

#define WF_OPT_LEVEL_DEFAULT 2

WF_API void wf_session_options_init(wf_session_options *o);

/* A session runs one graph on one context. It reads the graph at run time (nodes may be added between
 * runs) but does not own it: free the session before the graph. opts may be NULL. Caller owns *out. */
WF_API wf_status *wf_session_new(wf_context *ctx, wf_graph *g, const wf_session_options *opts,
                                 wf_session **out);
WF_API void wf_session_free(wf_session *s);

typedef struct wf_feed {
    wf_output output; /* a Placeholder's output */
    const wf_tensor *tensor;
} wf_feed;

/* One executed node, as recorded by a traced run. Strings are owned by the trace.
 * In a traced run every node on an accelerator without streams and events is followed by a wait for
 * its device (the backend's synchronize), so start/end cover the node's execution, not just its
 * enqueueing; untraced runs never wait. A backend without a synchronize entry cannot be waited on: its
 * nodes have enqueue_only = 1. On a device with streams and events (OpenCL, the test backend) nothing
 * waits: start/end run from the node's enqueue to its completion being seen, and device_start_ns /
 * device_end_ns are its times on the device's streams, from its events. */
typedef struct wf_trace_event {
    const char *node;
    const char *op;
    const char *device;  /* full name */
    int thread;          /* index of the executor thread that ran it */
    int64_t start_ns;    /* relative to the start of the run */
    int64_t end_ns;
    /* appended fields */
    const char *device_short; /* "CPU:0", "OPENCL:0" */
    int device_index;         /* index into the context's devices (wf_context_device) */
    const char *shapes;       /* output dtypes and shapes, "f32[1,64,56,56]", several joined by ", " */
    int64_t bytes;            /* bytes moved: a copy's payload; for other nodes their inputs' and
                                 outputs' bytes */
    int is_copy;              /* 1: a Copy the planner inserted (device = its destination) */
    const char *reason;       /* why the node runs on its device (as wf_session_placement says) */
    int enqueue_only;         /* 1: start/end are the enqueue times of an accelerator node */
    /* appended fields: the stream it ran on and what it waited for */
    int stream;               /* WF_STREAM_COMPUTE, or WF_STREAM_COPY for the planner's copies */
    int stream_device;        /* the device whose stream it is: device_index, except for a copy to the
                                 host (CPU), which is on its source device's copy stream (the device
                                 issues the read) */
    int n_deps;
    const int *deps;          /* indices of the events it waited for: the producers of its inputs */
    int64_t out_bytes;        /* bytes of the values it produced (a copy: its payload) */
    int64_t release_ns;       /* when its outputs were released: the end of their last reader (its own
                                 end when nothing reads them); -1 when they outlive the run (a fetch,
                                 a feed, a constant) */
    /* On a device with streams and events: the node's times on the device's own clock (ns), from
     * its events (a kernel: from its stream reaching it to its end; a copy: the transfer). Comparable
     * between the events of one device only; 0 elsewhere. start_ns/end_ns are then the host's times
     * of its enqueue and of its completion being seen. */
    int64_t device_start_ns, device_end_ns;
} wf_trace_event;

enum { WF_STREAM_COMPUTE = 0, WF_STREAM_COPY = 1 };

typedef struct wf_trace wf_trace;

typedef struct wf_run_options {
    wf_trace **trace; /* when not NULL, receives a trace of the run; caller owns it */
    /* Outputs to compute without returning them (the Assigns of a training step, say). */
    const wf_output *targets;
    int n_targets;
    /* Appended. When not NULL, into[i] (NULL, or a host tensor of the caller's: a row of a batch, say)
     * is where fetch i is written if the kernel that computes it runs on the CPU and gives exactly that
     * dtype and shape (and the graph has no variables or targets, and into[i] shares no bytes with a fed
     * tensor or with another fetch's into): outputs[i] is then a new reference to into[i] itself. Otherwise outputs[i] is a new tensor
     * as usual and into[i] is left as it was, so a caller compares outputs[i] with into[i] and copies
     * when they differ. */
    wf_tensor *const *into;
} wf_run_options;

/* Runs the graph: feeds placeholders, computes `fetches` and writes one new tensor per fetch into
 * outputs[0..n_fetches) (caller owns each). The first run for a given (feeds, fetches, input shapes)
 * plans the graph; later runs reuse the plan. On failure nothing is written to outputs, the status
 * names the node at fault, and the session stays usable. opts may be NULL. */
WF_API wf_status *wf_session_run(wf_session *s, const wf_feed *feeds, int n_feeds,
                                 const wf_output *fetches, int n_fetches, wf_tensor **outputs,
                                 const wf_run_options *opts);

/* The device each node of the plan for (feeds, fetches) runs on, with the reason, one line per node
 * in TensorFlow's format "name: (Op): /job:localhost/replica:0/task:0/device:CPU:0". Plans if needed.
 * Caller frees *text with wf_free. */
WF_API wf_status *wf_session_placement(wf_session *s, const wf_feed *feeds, int n_feeds,
                                       const wf_output *fetches, int n_fetches, char **text);
/* What the mixed-precision pass decided for the plan of (feeds, fetches): one line per f32 node it
 * considered ("  bf16 conv1 (Conv2D): allow list, CPU:0 computes bf16 natively" or "  f32  sm
 * (Softmax): deny list"), then the totals. "" when the session has no precision. Caller frees *text
 * with wf_free. */
WF_API wf_status *wf_session_precision_report(wf_session *s, const wf_feed *feeds, int n_feeds,
                                              const wf_output *fetches, int n_fetches, char **text);

/* The same placement as records, one per plan node (copies included), for programs that read it. */
typedef struct wf_placement_entry {
    const char *node;      /* node name; a copy's is "<value>/Copy_to_<device>" */
    const char *op;        /* op type; "Copy" for copies */
    const char *fused;     /* ops fused into it ("BiasAdd+Relu"), or NULL */
    int device_index;      /* into the context's devices */
    const char *device;    /* full device name */
    const char *reason;    /* why it runs there */
    int is_copy;
    double est_ms;         /* the placer's estimate of its run time there; -1 for copies and feeds */
} wf_placement_entry;
typedef struct wf_placement wf_placement;
WF_API wf_status *wf_session_placement_get(wf_session *s, const wf_feed *feeds, int n_feeds,
                                           const wf_output *fetches, int n_fetches, wf_placement **out);
WF_API int wf_placement_num_entries(const wf_placement *p);
WF_API wf_placement_entry wf_placement_entry_at(const wf_placement *p, int i);
/* The placer's estimated makespan of one run of this plan, in ms. */
WF_API double wf_placement_est_makespan_ms(const wf_placement *p);
WF_API void wf_placement_free(wf_placement *p);

WF_API int wf_trace_num_events(const wf_trace *t);
WF_API wf_trace_event wf_trace_event_at(const wf_trace *t, int i);
/* Wall time of the traced run, from its start to its last node's end. */
WF_API int64_t wf_trace_wall_ns(const wf_trace *t);
WF_API void wf_trace_free(wf_trace *t);

/* Per device totals of a traced run. busy_ns is the union of its compute events (nodes running at
 * once on several threads count once), so busy_ns <= wall_ns; copies are counted on their destination
 * device. peak_memory is the device allocator's peak since the context was created (0 without ctx). */
typedef struct wf_trace_device_summary {
    const char *device;       /* short name, owned by the trace */
    int device_index;
    int n_nodes, n_copies;
    int64_t busy_ns;
    double utilisation;       /* busy_ns / wall_ns */
    int64_t copy_bytes;
    int64_t copy_ns;          /* union of its copy events */
    uint64_t peak_memory;
} wf_trace_device_summary;

/* Fills out[0..cap) with one entry per device that has an event, in device order, and returns how
 * many there are (may exceed cap). ctx, the context the session ran on, may be NULL. */
WF_API int wf_trace_summary(const wf_trace *t, const wf_context *ctx, wf_trace_device_summary *out, int cap);
/* The summary as text, one line per device plus the wall time. Caller frees *text with wf_free. */
WF_API wf_status *wf_trace_summary_text(const wf_trace *t, const wf_context *ctx, char **text);
/* Writes the trace as a Chrome trace (JSON object format: traceEvents, loadable in Perfetto and
 * chrome://tracing): one process per device with a track per stream, "OPENCL:0 compute" and
 * "OPENCL:0 copy" (extra lanes "CPU:0 compute #2" where events of a stream overlap), a flow arrow
 * (ph "s"/"f") per dependency, one complete event per node and per copy with op, shapes, bytes,
 * reason, its event index and deps in its args, and the summary in otherData and as an instant event at the end of each device's track.
 * Errors name the path. */
WF_API wf_status *wf_trace_write_chrome(const wf_trace *t, const wf_context *ctx, const char *path);
/* Writes a self-contained HTML report of the trace (inline CSS, JS and SVG; opens without a
 * network): a timeline with one row per device stream, utilisation per device, the top ops by time
 * per device (count, total, mean, share), copy volume and time per link (source -> destination),
 * the bytes of live values over time per device (from the events' out_bytes and release_ns: an
 * upper bound on what the run allocated, as in-place reuse is counted twice), and the placed graph
 * (the events and their dependencies) coloured by device. ctx (may be NULL) adds each device's
 * allocator peak. Every name from the graph is escaped. Errors name the path. */
WF_API wf_status *wf_trace_write_report(const wf_trace *t, const wf_context *ctx, const char *path);

/* ------------------------------------------------------------------------------------------------ */
/* Files and memory                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

/* Reads a .npy file (format 1.0 to 3.0, little-endian, C order, any weft dtype). Errors name the file
 * and the problem. Caller owns *out. */
WF_API wf_status *wf_npy_read(const char *path, wf_tensor **out);
WF_API wf_status *wf_npy_write(const char *path, const wf_tensor *t);

/* Releases memory the library returned (strings). Accepts NULL. */
WF_API void wf_free(void *p);

/* The host allocation funnel: every host allocation of the library goes through these hooks, so an
 * application (or a test injecting faults) can replace them. Set before creating any object; NULL
 * restores the defaults. alloc returns memory aligned to `align` (a power of two) or NULL. */
typedef void *(*wf_alloc_fn)(void *user, size_t size, size_t align);
typedef void (*wf_dealloc_fn)(void *user, void *p);
WF_API void wf_set_allocator(wf_alloc_fn alloc, wf_dealloc_fn dealloc, void *user);


/* ------------------------------------------------------------------------------------------------ */
/* ONNX models                                                                                      */
/* ------------------------------------------------------------------------------------------------ */

typedef struct wf_onnx_model wf_onnx_model;

/* One graph input or output of an imported model. Strings are owned by the model. */
typedef struct wf_onnx_value {
    const char *name;      /* the ONNX value name */
    wf_output output;      /* where it lives in the weft graph */
    wf_dtype dtype;
    int rank;              /* -1 if the model does not say */
    int64_t dims[WF_MAX_RANK]; /* -1 for a symbolic or unknown dim */
    int has_default;       /* an input backed by an initializer: feeding it is optional */
    /* Appended: what the file's ValueInfoProto says, beside what weft inferred above. */
    const char *dim_names[WF_MAX_RANK]; /* a symbolic dim's name (dim_param), else NULL */
    int file_rank;         /* rank the file gives (dim_names has that many), -1 if it gives none */
    int elem_type;         /* the file's TensorProto element type code (1 FLOAT, 10 FLOAT16, ...); 0: unstated */
} wf_onnx_value;

/* The model's own description. Strings are owned by the model and never NULL ("" when absent). */
typedef struct wf_onnx_meta {
    const char *producer_name, *producer_version, *domain;
    const char *doc_string;  /* the model's */
    const char *graph_name, *graph_doc_string;
    int64_t ir_version, model_version;
    int n_props;             /* metadata_props, in the file's order */
    const char *const *prop_keys;
    const char *const *prop_values;
} wf_onnx_meta;

/* Parses an .onnx file (IR version 3 or later, default-domain opsets 7 to 21) and adds its graph to g:
 * initializers become Const nodes (inputs that are also initializers may still be fed), every node is
 * mapped onto weft ops and shape-inferred. External-data initializers are read from files beside the
 * model; a path that leaves the model's folder is refused. Errors name the file and the node, op,
 * domain and opset at fault; unsupported ops are listed all at once. On failure g is unchanged.
 * Caller owns *out (free it before g). */
WF_API wf_status *wf_onnx_load(const char *path, wf_graph *g, wf_onnx_model **out);
WF_API void wf_onnx_model_free(wf_onnx_model *m);
WF_API int wf_onnx_num_inputs(const wf_onnx_model *m);
WF_API const wf_onnx_value *wf_onnx_input(const wf_onnx_model *m, int i);
WF_API int wf_onnx_num_outputs(const wf_onnx_model *m);
WF_API const wf_onnx_value *wf_onnx_output(const wf_onnx_model *m, int i);
WF_API const wf_onnx_meta *wf_onnx_model_meta(const wf_onnx_model *m);

/* A text report of an .onnx file without importing it: IR and opset versions, producer, inputs and
 * outputs with shapes, an op histogram, parameter count and bytes, and the ops weft does not support.
 * Caller frees *text with wf_free. */
WF_API wf_status *wf_onnx_inspect(const char *path, char **text);

/* Reads a serialized ONNX TensorProto (.pb, as in the ONNX test data). Caller owns *out. */
WF_API wf_status *wf_onnx_read_tensor(const char *path, wf_tensor **out);

/* Writes the inference part of s's graph to an ONNX model file (IR 8, default-domain opset 17): the
 * nodes `outputs[0..n_outputs)` depend on, with the placeholders they read as the graph inputs (a -1
 * dim becomes the symbolic dim "N"), Const nodes and every Variable (at its current value in s) as
 * initializers, and outputs named output_names[i] (NULL: the producing node's name). weft ops are
 * written as their ONNX equivalents (Conv2D as Conv, MaxPool2D as MaxPool, BiasAdd as Add, ...); an
 * output that depends on an op with no ONNX form, on an Assign, or on a training-only op is an error
 * naming the node and op, and nothing is written. Errors writing name the path. */
WF_API wf_status *wf_session_export_onnx(wf_session *s, const wf_output *outputs, const char *const *output_names,
                                         int n_outputs, const char *path);

/* wf_session_export_onnx of the graph the session runs for (feeds, fetches) after its level-1 graph
 * passes (identity removal, simplification, BatchNorm folding, MatMul+Add, constant folding, CSE;
 * `weft run --save-optimized`). Fetches are of the session's graph and named output_names[i] (NULL:
 * the producing node's name); only the feeds' nodes are read, not their tensors. Level 2's fusion
 * happens after placement, per device, and is not in the file. At level 0 this writes the graph as
 * it is. Errors as wf_session_export_onnx's: a node with no ONNX form is named and nothing is written. */
WF_API wf_status *wf_session_export_optimized_onnx(wf_session *s, const wf_feed *feeds, int n_feeds,
                                                   const wf_output *fetches, const char *const *output_names,
                                                   int n_fetches, const char *path);

/* ------------------------------------------------------------------------------------------------ */
/* Datasets                                                                                         */
/* ------------------------------------------------------------------------------------------------ */

/* Reads an IDX file (the MNIST format: magic 0 0 TYPE RANK, big-endian u32 dims, big-endian data of
 * type 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32 or 0x0E f64), plain or gzip-compressed. Errors
 * name the file and the problem: missing file (NOT_FOUND), bad magic, unknown type, truncated data,
 * dims that do not match the data size, a truncated or corrupt gzip stream. Caller owns *out. */
WF_API wf_status *wf_idx_read(const char *path, wf_tensor **out);

/* A dataset: features with one sample per row of the first dim, and optional labels with the same
 * first dim, visited in batches. Each epoch visits every sample exactly once, in stored order or, after
 * wf_dataset_set_shuffle, in an order drawn from (seed, epoch) by weft's own generator: splitmix64 started
 * at splitmix64(seed) + epoch, and Fisher-Yates with rejection sampling, so a seed gives the same
 * orders on every machine. Batches are new tensors
 * [batch, sample dims...] of the stored dtypes. Not thread-safe: one thread iterates a dataset. */
typedef struct wf_dataset wf_dataset;

typedef struct wf_dataset_options {
    int scale;            /* wf_dataset_from_idx: 1 turns u8 features into f32 divided by 255 (inputs in
                             [0, 1]); other dtypes are kept. 0 (default): features as stored */
    wf_dtype label_dtype; /* wf_dataset_from_idx: converts the labels (e.g. WF_I64 for a loss);
                             WF_DTYPE_INVALID (default) keeps the file's */
} wf_dataset_options;

WF_API void wf_dataset_options_init(wf_dataset_options *o);

/* Over in-memory arrays: takes a reference to each (no copy; do not modify them while the dataset
 * lives). labels may be NULL. Features need rank >= 1; labels a first dim equal to the features'.
 * Both in host memory. Defaults: batch 32, remainder kept, stored order. Caller owns *out. */
WF_API wf_status *wf_dataset_from_tensors(wf_tensor *features, wf_tensor *labels, wf_dataset **out);
/* Over IDX files (see wf_idx_read), e.g. Fashion-MNIST's train-images-idx3-ubyte.gz and
 * train-labels-idx1-ubyte.gz. labels_path may be NULL; opts NULL for the defaults. Images and labels
 * with different sample counts are an error naming both files. On failure no dataset is made. */
WF_API wf_status *wf_dataset_from_idx(const char *images_path, const char *labels_path,
                                      const wf_dataset_options *opts, wf_dataset **out);
WF_API void wf_dataset_free(wf_dataset *ds);

WF_API int64_t wf_dataset_num_samples(const wf_dataset *ds);
/* 0 for the first epoch; wf_dataset_reset adds 1. */
WF_API int64_t wf_dataset_epoch(const wf_dataset *ds);

/* Sets the batch size (>= 1). With drop_remainder, an epoch's last batch when smaller than batch_size
 * is skipped; otherwise it comes out smaller. Applies from the next batch on. */
WF_API wf_status *wf_dataset_set_batch(wf_dataset *ds, int64_t batch_size, int drop_remainder);
/* Visits samples in a seeded random order from now on: restarts the current epoch in the order drawn
 * from (seed, epoch); each later epoch gets its own. */
WF_API void wf_dataset_set_shuffle(wf_dataset *ds, uint64_t seed);
/* Starts the next epoch (reshuffled from (seed, epoch + 1) when shuffling). */
WF_API void wf_dataset_reset(wf_dataset *ds);

/* The epoch's next batch: *x the features, *y the labels (caller owns both; y may be NULL to skip
 * labels, and *y is NULL for a dataset without labels). At the end of the epoch returns NULL with
 * *x = NULL (and *y = NULL) until wf_dataset_reset:
 *     while (!(s = wf_dataset_next_batch(ds, &x, &y)) && x) { ...; wf_tensor_free(x); wf_tensor_free(y); }
 * A failure (out of memory) does not advance the epoch. */
WF_API wf_status *wf_dataset_next_batch(wf_dataset *ds, wf_tensor **x, wf_tensor **y);
/* Samples [start, start + count) in stored order (never shuffled), as one batch: for evaluation. */
WF_API wf_status *wf_dataset_rows(const wf_dataset *ds, int64_t start, int64_t count, wf_tensor **x,
                                  wf_tensor **y);
/* Splits off a validation set of round(n * val_fraction) samples, 0 < val_fraction < 1, both sets
 * non-empty: the last samples of ds's current epoch order go to *val, the others to *train. So an
 * unshuffled dataset gives its last samples (Keras's validation_split); after wf_dataset_set_shuffle(ds,
 * seed) a random subset that the seed reproduces. The two share ds's arrays (ds may be freed first),
 * take its batch settings, and start unshuffled at epoch 0. Caller owns both. */
WF_API wf_status *wf_dataset_split(const wf_dataset *ds, double val_fraction, wf_dataset **train,
                                   wf_dataset **val);

/* ---- Input pipelines (tf.data) ------------------------------------------------------------------
 * Besides the array datasets above, a wf_dataset can be a pipeline stage: a source (range, tensor
 * slices, files) or a transformation of other datasets, in TensorFlow's tf.data terms. A pipeline
 * dataset is an immutable description: transformations return a new dataset and leave their inputs
 * usable (each holds references to its inputs, so the caller may free them at once). Elements are
 * tuples of 1..WF_DATASET_MAX_COMPONENTS tensors. An array dataset used as a transformation's input
 * is its rows in stored order, elements (features[i]) or (features[i], labels[i]).
 * Iterate with wf_dataset_iterator (below) or, for the training loop's (x, y) batches, with
 * wf_dataset_next_batch / wf_dataset_reset: components 0 and 1 of each element. The array-only calls
 * (set_batch, set_shuffle, rows, split) refuse a pipeline with INVALID_ARGUMENT. */
#define WF_DATASET_MAX_COMPONENTS 8
typedef struct wf_iterator wf_iterator; /* a running pipeline (below) */
#define WF_AUTOTUNE (-1)            /* num_parallel_calls, prefetch buffer: tuned while running */
#define WF_DATASET_INFINITE (-1)    /* wf_dataset_cardinality of a repeat() without count */
#define WF_DATASET_UNKNOWN (-2)     /* ... after filter, or of files not yet read */

/* The iterator wf_dataset_next_batch reads a pipeline through: NULL before its first call and after
 * wf_dataset_reset (for wf_dataset_stats, wf_iterator_save and _restore). Owned by the dataset. */
WF_API wf_iterator *wf_dataset_current_iterator(wf_dataset *ds);
/* 1 for a pipeline stage, 0 for an array dataset (or NULL). */
WF_API int wf_dataset_is_pipeline(const wf_dataset *ds);
/* Elements; WF_DATASET_INFINITE or WF_DATASET_UNKNOWN when not known without running. */
WF_API int64_t wf_dataset_cardinality(const wf_dataset *ds);

/* Sources. Errors name the file, and for a file that stops parsing, the byte offset or line. */
/* Scalars i64 start, start + step, ... before stop (step != 0, either sign). */
WF_API wf_status *wf_dataset_range(int64_t start, int64_t stop, int64_t step, wf_dataset **out);
/* Element i: (components[0][i], ..., components[n-1][i]); each needs rank >= 1 and the same first dim.
 * References are taken (no copy). */
WF_API wf_status *wf_dataset_from_tensor_slices(wf_tensor *const *components, int n, wf_dataset **out);
/* The paths matching a glob(3) pattern, as scalar WF_STRING elements, sorted bytewise; shuffle != 0
 * visits them in an order drawn from (seed, iteration). No match: NOT_FOUND naming the pattern. */
WF_API wf_status *wf_dataset_list_files(const char *pattern, int shuffle, uint64_t seed, wf_dataset **out);
/* Every line of the files in turn (without '\n' or a final '\r'), as scalar WF_STRING elements. */
WF_API wf_status *wf_dataset_text_lines(const char *const *paths, int n_paths, wf_dataset **out);
/* Records of TFRecord files (length, masked CRC32C of it, data, masked CRC32C of the data; both CRCs
 * checked), as scalar WF_STRING elements. A corrupt record is DATA_LOSS naming the file and offset. */
WF_API wf_status *wf_dataset_tfrecord(const char *const *paths, int n_paths, wf_dataset **out);
typedef struct wf_csv_options {
    int n_columns;                /* required: columns per row */
    const wf_dtype *dtypes;       /* n_columns: WF_F32, WF_F64, WF_I32, WF_I64 or WF_STRING */
    const char *const *defaults;  /* NULL, or n_columns texts (NULL entries: no default) used for an
                                     empty field; an empty field without one is an error */
    int header;                   /* 1: the first line of each file is a header */
    char delimiter;               /* 0: ',' */
    const int *select;            /* NULL: every column; else n_select column indices, in this order */
    int n_select;
} wf_csv_options;
/* RFC 4180 CSV rows as elements of scalars, one component per (selected) column (at most
 * WF_DATASET_MAX_COMPONENTS). Quoted fields may hold delimiters, "" and newlines. A row with the
 * wrong column count or a field that does not parse is INVALID_ARGUMENT naming file, line, column. */
WF_API wf_status *wf_dataset_csv(const char *const *paths, int n_paths, const wf_csv_options *o, wf_dataset **out);
/* Slices of .npy arrays along their first dim: file k gives component k (same first dim). */
WF_API wf_status *wf_dataset_npy(const char *const *paths, int n_paths, wf_dataset **out);

/* Transformations. `in` stays the caller's; *out holds its own reference to it. */
/* A map function: either a weft graph or a C callback.
 *  - Graph: inputs[i] (Placeholders) receive the element's components, outputs are the new element's.
 *    seed_input, when its node is set, receives an i64 [2] tensor {seed, counter} for the stateless
 *    random ops: counter = element index within the iteration + (iteration << 40), so augmentations
 *    are the same at every thread count and differ between epochs. The dataset makes a session on ctx
 *    (or a new context when NULL) running on device ("CPU:0" when NULL); the graph must outlive it.
 *  - Callback: fn(user, index, in, n_in, out, &n_out) fills out[0..n_out) (n_out <= the max); called
 *    from several threads at once when num_parallel_calls > 1. index as the counter above. n_outputs,
 *    when > 0, declares n_out (then checked), which padded_batch's per-component arguments need. */
typedef wf_status *(*wf_map_callback)(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out,
                                      int *n_out);
typedef struct wf_map_fn {
    wf_graph *graph;
    const wf_output *inputs;
    int n_inputs;
    const wf_output *outputs;
    int n_outputs;
    wf_output seed_input;
    wf_context *ctx;
    const char *device;
    wf_map_callback fn;
    void *user;
} wf_map_fn;
typedef struct wf_map_options {
    int num_parallel_calls;       /* 1 (default): in the consumer's thread; N: N threads; WF_AUTOTUNE */
    int deterministic;            /* 1 (default): results in input order; 0: as they finish */
    uint64_t seed;                /* the {seed, counter} pair's seed (default 0) */
    int intra_op_threads;         /* threads inside one call of a graph function (0: 1, as tf.data's
                                     max_intra_op_parallelism): parallelism comes from calls at once.
                                     With a ctx of other thread counts the session makes its own pools */
} wf_map_options;
WF_API void wf_map_options_init(wf_map_options *o);
/* Errors of the function name the map stage and the element index; the iteration goes on after one
 * (an ignore_errors after it drops the element). */
WF_API wf_status *wf_dataset_map(wf_dataset *in, const wf_map_fn *fn, const wf_map_options *o, wf_dataset **out);
/* (A fixed num_parallel_calls starts that many threads whatever the iterator's cpu_budget; WF_AUTOTUNE
 * stays within it.) */
/* Keeps elements whose predicate (a map function with one scalar output: bool or a number, non-zero
 * keeps) holds. */
WF_API wf_status *wf_dataset_filter(wf_dataset *in, const wf_map_fn *pred, wf_dataset **out);
/* Stacks n consecutive elements into one (component shapes must agree: an error names the element
 * and both shapes); the last batch may be smaller unless drop_remainder. */
WF_API wf_status *wf_dataset_batch(wf_dataset *in, int64_t n, int drop_remainder, wf_dataset **out);
/* Like batch, but components of different shapes (same rank) are padded at the end of each dim to
 * padded_shapes (NULL, or per component NULL or an i64 vector of the component's rank, -1 for "the
 * batch's largest"; default: the batch's largest) with padding_values (NULL: zeros; else per
 * component NULL or a scalar of its dtype). A component larger than its padded shape is an error. */
WF_API wf_status *wf_dataset_padded_batch(wf_dataset *in, int64_t n, int drop_remainder,
                                          wf_tensor *const *padded_shapes, wf_tensor *const *padding_values,
                                          wf_dataset **out);
/* Splits each element's components along their first dim into elements. */
WF_API wf_status *wf_dataset_unbatch(wf_dataset *in, wf_dataset **out);
/* A buffer of `buffer` elements filled from in; each output is drawn uniformly from it (splitmix64
 * from (seed, iteration when reshuffle_each_iteration else 0)). buffer >= the cardinality is a full
 * uniform shuffle. The buffer's RAM counts against the iterator's budget but is not tuned. */
WF_API wf_status *wf_dataset_shuffle(wf_dataset *in, int64_t buffer, uint64_t seed, int reshuffle_each_iteration,
                                     wf_dataset **out);
/* count passes over in (-1: forever); each pass is a new iteration of in (reshuffled). */
WF_API wf_status *wf_dataset_repeat(wf_dataset *in, int64_t count, wf_dataset **out);
WF_API wf_status *wf_dataset_take(wf_dataset *in, int64_t count, wf_dataset **out);
WF_API wf_status *wf_dataset_skip(wf_dataset *in, int64_t count, wf_dataset **out);
/* Elements of n datasets side by side (components concatenated); ends with the shortest. */
WF_API wf_status *wf_dataset_zip(wf_dataset *const *ins, int n, wf_dataset **out);
/* For each element of in, fn makes a dataset (caller of fn owns it; weft frees it); cycle_length of
 * them are open at once and block_length elements are taken from each in turn. num_parallel_calls >
 * 1 (or WF_AUTOTUNE) reads the open ones ahead on threads; the order stays the sequential one. */
typedef wf_status *(*wf_interleave_fn)(void *user, wf_tensor *const *elem, int n, wf_dataset **out);
WF_API wf_status *wf_dataset_interleave(wf_dataset *in, wf_interleave_fn fn, void *user, int cycle_length,
                                        int block_length, int num_parallel_calls, wf_dataset **out);
/* The first full iteration's elements are kept (path NULL: in memory; else written to path, and
 * read from there by later iterations, also by later processes); later iterations replay them. A
 * cache file that does not belong to this pipeline is an error naming it. */
WF_API wf_status *wf_dataset_cache(wf_dataset *in, const char *path, wf_dataset **out);
/* A thread keeps up to n elements ready (WF_AUTOTUNE: tuned within the RAM budget). */
WF_API wf_status *wf_dataset_prefetch(wf_dataset *in, int64_t n, wf_dataset **out);
/* Drops elements whose production failed (in's errors), except running out of memory. */
WF_API wf_status *wf_dataset_ignore_errors(wf_dataset *in, wf_dataset **out);
/* A thread copies up to n elements (WF_AUTOTUNE: 2) ahead into `device`'s memory on ctx (through the
 * backend's asynchronous copy stream and pinned staging where it has them): the consumer receives
 * device tensors, which a session on that device takes without another copy. Must be last. */
WF_API wf_status *wf_dataset_prefetch_to_device(wf_dataset *in, wf_context *ctx, const char *device, int64_t n,
                                                wf_dataset **out);

/* Iterators: a running pipeline. One thread calls next; the stages' own threads are weft's. */
typedef struct wf_iterator_options {
    int cpu_budget;               /* threads for map/interleave/prefetch in all (0: the cores) */
    uint64_t ram_budget;          /* bytes the buffers may hold in all (0: half the machine's RAM);
                                     AUTOTUNE never exceeds it, and buffers wait rather than grow past it */
    int autotune;                 /* 1 (default): WF_AUTOTUNE knobs are tuned; 0: they stay at their start */
} wf_iterator_options;
WF_API void wf_iterator_options_init(wf_iterator_options *o);
/* Starts an iteration of ds (ds's next iteration: shuffles reshuffle). opts NULL: defaults. */
WF_API wf_status *wf_dataset_iterator(wf_dataset *ds, const wf_iterator_options *opts, wf_iterator **out);
/* The next element: out[0..*n) (caller owns them); *n = 0 at the end. cap below the element's
 * components is INVALID_ARGUMENT. An error names the stage, the element index and, for files, the file;
 * the next call goes on with the following element where the stage can. */
WF_API wf_status *wf_iterator_next(wf_iterator *it, wf_tensor **out, int cap, int *n);
WF_API void wf_iterator_free(wf_iterator *it);
/* The position: a small i64 tensor (the pipeline's fingerprint, the iteration, elements produced).
 * Restoring it into an iterator of the same pipeline (a fresh one) continues at the same element,
 * shuffles included: sources seek, 1:1 stages pass the skip on, and the rest replay. Exact for a
 * deterministic pipeline that met no element error, or whose errors an ignore_errors dropped (it
 * replays); after errors that reached the caller the position may be off by the failed elements.
 * Another pipeline's state is INVALID_ARGUMENT. */
WF_API wf_status *wf_iterator_save(const wf_iterator *it, wf_tensor **state);
WF_API wf_status *wf_iterator_restore(wf_iterator *it, const wf_tensor *state);
typedef struct wf_dataset_stage_stats {
    char name[48];                /* "map(parallel)", "prefetch", "batch", ... */
    int depth;                    /* 0: the stage the consumer reads */
    int64_t elements;
    double busy_s;                /* producing, inputs excluded, summed over the stage's threads */
    double wait_s;                /* its consumer waited on it */
    double elements_per_s;        /* elements / (busy_s / parallelism) */
    int64_t buffered_bytes, peak_buffered_bytes;
    int knob_kind;                /* 0 none, 1 parallelism, 2 buffer size */
    int knob;                     /* its current value */
    int tuned;                    /* set by AUTOTUNE */
} wf_dataset_stage_stats;
/* Fills up to cap stages' statistics, returns how many there are; *peak_bytes (may be NULL) gets the
 * peak of all buffers together. */
WF_API int wf_dataset_stats(wf_iterator *it, wf_dataset_stage_stats *out, int cap, int64_t *peak_bytes);
/* The copies a prefetch_to_device at the pipeline's end made so far (the latest 4096), oldest first:
 * element index and [start, end) in CLOCK_MONOTONIC nanoseconds, the clock of clock_gettime, so a
 * training loop can lay its own steps beside them. Returns how many there are (may exceed cap). */
typedef struct wf_dataset_event {
    int64_t element;
    int64_t start_ns, end_ns;
} wf_dataset_event;
WF_API int wf_iterator_copy_events(wf_iterator *it, wf_dataset_event *out, int cap);

/* ---- Checkpoints: safetensors files ------------------------------------------------------------ */
/* Writes n named tensors (host memory; F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL) in the safetensors
 * format, data in the order given. metadata_json, when not NULL, is a JSON object of string values
 * stored as "__metadata__". The file is written to PATH.tmp.PID, flushed to disk and renamed over path,
 * so a reader sees the old file or the new one, never a partial one. Duplicate names, the name
 * "__metadata__" and unsupported dtypes are errors. */
WF_API wf_status *wf_safetensors_write(const char *path, int n, const char *const *names,
                                       wf_tensor *const *tensors, const char *metadata_json);
/* Reads every tensor of a safetensors file, in the order of their data in the file. The file is
 * untrusted: a header larger than the file, bad JSON, an unknown dtype (UNIMPLEMENTED), a size that
 * does not match the shape, offsets that overlap or run past the end of the file (a truncated file)
 * are errors naming the file and the tensor. On success the caller owns *names and *tensors, *n
 * entries each: release them with wf_safetensors_free. */
WF_API wf_status *wf_safetensors_read(const char *path, int *n, char ***names, wf_tensor ***tensors);
WF_API void wf_safetensors_free(int n, char **names, wf_tensor **tensors);

/* ---- Record files: TFRecord --------------------------------------------------------------------- */
/* CRC32C (Castagnoli), continuing `crc` (0 to start): wf_crc32c(b, nb, wf_crc32c(a, na, 0)) is the CRC
 * of a followed by b; wf_crc32c("123456789", 9, 0) == 0xE3069283. Uses the SSE4.2 instruction when the
 * CPU has it. */
WF_API uint32_t wf_crc32c(const void *data, size_t n, uint32_t crc);
/* Writes n records as a TFRecord file (as TensorFlow's TFRecordWriter, uncompressed): per record its
 * u64 little-endian length, the masked CRC32C of the length, the bytes, the masked CRC32C of the bytes.
 * records[i] may be NULL when lens[i] is 0. Written to a temporary file beside path and renamed, so a
 * crash leaves the old file or the new one. Errors name the path. */
WF_API wf_status *wf_tfrecord_write(const char *path, const void *const *records, const size_t *lens, int64_t n);
/* The file's "__metadata__" as compact JSON text, or *json = NULL when it has none. Caller frees *json
 * with wf_free. */
WF_API wf_status *wf_safetensors_metadata(const char *path, char **json);


/* ------------------------------------------------------------------------------------------------ */
/* Training                                                                                         */
/* ------------------------------------------------------------------------------------------------ */

/* ---- Initializers ------------------------------------------------------------------------------ */
typedef enum wf_init_kind {
    WF_INIT_ZEROS = 1,
    WF_INIT_ONES = 2,
    WF_INIT_CONSTANT = 3,         /* value */
    WF_INIT_UNIFORM = 4,          /* [minval, maxval) (maxval reachable after rounding to the dtype) */
    WF_INIT_NORMAL = 5,           /* mean, stddev */
    WF_INIT_TRUNCATED_NORMAL = 6, /* mean, stddev; draws beyond 2 stddev are redrawn (TensorFlow) */
    WF_INIT_GLOROT_UNIFORM = 7,   /* U(-l, l), l = sqrt(6 / (fan_in + fan_out)) */
    WF_INIT_GLOROT_NORMAL = 8,    /* truncated normal, stddev = sqrt(2 / (fan_in + fan_out)) / 0.87962566 */
    WF_INIT_HE_UNIFORM = 9,       /* U(-l, l), l = sqrt(6 / fan_in) */
    WF_INIT_HE_NORMAL = 10        /* truncated normal, stddev = sqrt(2 / fan_in) / 0.87962566 */
} wf_init_kind;

/* What to fill a tensor with. The Glorot and He kinds follow Keras 3 (VarianceScaling; 0.87962566... is
 * the stddev of a unit normal truncated at 2, so the values get the stated variance). Their fans come
 * from the shape: rank 0: 1 and 1; rank 1 [n]: n and n; rank 2, a dense kernel [in, out]: in and out;
 * rank >= 3, a convolution filter in weft's Conv2D layout OIHW [out, in, k1, k2, ...]: in * rf and
 * out * rf with rf = k1 * k2 * ... (the fans Keras gives the same filter in its HWIO layout). */
typedef struct wf_init {
    wf_init_kind kind;
    double value;          /* CONSTANT */
    double minval, maxval; /* UNIFORM: minval <= maxval, both finite */
    double mean, stddev;   /* NORMAL, TRUNCATED_NORMAL: finite, stddev >= 0 */
    uint64_t seed;         /* the random kinds */
} wf_init;

/* A new tensor of `dtype` and shape dims[0..rank) filled as `spec` says. ZEROS, ONES and CONSTANT take
 * any dtype; the random kinds f32, f64, f16 and bf16. Random values come from weft's own generator:
 * splitmix64 started at splitmix64(seed), 53-bit uniforms, normals by Marsaglia's polar method, all in
 * double (only +, -, *, /, sqrt and log), rounded to the dtype (f16 and bf16 through f32), in row-major
 * order, so a seed gives the same tensor on every machine and different seeds give different tensors.
 * A bad spec (an unknown kind, minval > maxval, a negative or non-finite stddev or bound, a random kind
 * for an integer dtype, a negative dim) is INVALID_ARGUMENT naming the field. Caller owns *out. */
WF_API wf_status *wf_init_tensor(const wf_init *spec, wf_dtype dtype, int rank, const int64_t *dims,
                                 wf_tensor **out);

/* ---- Losses -------------------------------------------------------------------------------------- */
/* Graph builders: each adds the nodes computing a scalar loss, the mean over the batch, and sets *out
 * to it. The helper nodes are named "<name>/..." and the loss itself `name` (not NULL). Every loss is
 * differentiable with wf_gradients. Shapes or dtypes that do not fit are an error at build time naming
 * both; on any error g is unchanged. */

/* Softmax cross-entropy of logits [N, C] (f32, f64, f16, bf16). sparse = 1: labels are class indices
 * [N] (i32 or i64) and the loss is one SoftmaxCrossEntropyLoss node (reduction "mean") computing the
 * log-softmax with the log-sum-exp trick; a label outside [0, C) is a run-time error naming the node,
 * the label and its position, checked on the host on every device. sparse = 0: labels are
 * probabilities [N, C] of the logits' dtype (one-hot or soft) and loss = -mean_n sum_c labels *
 * LogSoftmax(logits). Both stay finite for logits of any magnitude. */
WF_API wf_status *wf_loss_softmax_cross_entropy(wf_graph *g, const char *name, wf_output logits,
                                                wf_output labels, int sparse, wf_output *out);
/* Binary cross-entropy, the mean over every element (for [N] or [N, K] targets: Keras's mean over K,
 * then over N). from_logits = 1: x are logits and loss = max(x, 0) - x z + log(1 + exp(-|x|)), stable
 * for any x (TensorFlow's sigmoid_cross_entropy_with_logits, whose gradient is sigmoid(x) - z
 * everywhere, x = 0 included). from_logits = 0: x are probabilities, clipped to [1e-7, 1 - 1e-7] as
 * Keras does, and loss = -(z log x + (1 - z) log(1 - x)). Targets z have x's shape and dtype. */
WF_API wf_status *wf_loss_binary_cross_entropy(wf_graph *g, const char *name, wf_output logits_or_probs,
                                               wf_output targets, int from_logits, wf_output *out);
/* Mean squared error: the mean over every element of (predictions - targets)^2; equal shapes and
 * dtypes. */
WF_API wf_status *wf_loss_mse(wf_graph *g, const char *name, wf_output predictions, wf_output targets,
                              wf_output *out);

/* ---- Optimizers ---------------------------------------------------------------------------------- */
typedef enum wf_optimizer_kind {
    WF_OPT_SGD = 1,
    WF_OPT_ADAM = 2,
    WF_OPT_ADAMW = 3,
    WF_OPT_RMSPROP = 4
} wf_optimizer_kind;

/* s counts the steps run before this one: 0 on the first step. */
typedef enum wf_lr_schedule {
    WF_LR_CONSTANT = 0,
    WF_LR_STEP = 1,   /* lr gamma^floor(s / step_size) */
    WF_LR_COSINE = 2  /* lr ((1 - alpha) 0.5 (1 + cos(pi min(s, decay_steps) / decay_steps)) + alpha) */
} wf_lr_schedule;

/* The update rules are Keras 3's, with g the gradient (after clipping), lr the scheduled learning rate
 * and t = s + 1 (s: the variable "<name>/step", i64, the steps run so far):
 *   SGD:      momentum 0: w -= lr g. Otherwise m = momentum m - lr g; then w += m, or with nesterov
 *             w += momentum m - lr g (with the new m).
 *   ADAM:     m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2);
 *             w -= m lr_t / (sqrt(v) + epsilon), lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)
 *             (the bias corrections folded into the step size; epsilon outside the square root).
 *   ADAMW:    ADAM after the decoupled decay w -= w weight_decay lr (of the old w).
 *   RMSPROP:  v = rho v + (1 - rho) g^2; inc = lr g / sqrt(v + epsilon) (epsilon inside, as Keras);
 *             momentum 0: w -= inc; otherwise m = momentum m + inc; w -= m.
 * weight_decay > 0 applies the same decoupled decay before the update of SGD and RMSPROP too (Keras 3).
 * clip_global_norm > 0 first scales every gradient by clip min(1 / global_norm, 1 / clip), global_norm
 * = sqrt(the sum of every gradient's squares) (tf.clip_by_global_norm, Keras's global_clipnorm).
 * The schedule and the scalar factors are computed in f64 in the graph and cast once to each variable's
 * dtype; everything per element runs in the variable's dtype. */
typedef struct wf_optimizer_options {
    wf_optimizer_kind kind;
    double learning_rate;        /* > 0 */
    double momentum;             /* SGD, RMSPROP: [0, 1) */
    int nesterov;                /* SGD */
    double beta1, beta2;         /* ADAM, ADAMW: [0, 1) */
    double epsilon;              /* ADAM, ADAMW, RMSPROP: >= 0 */
    double weight_decay;         /* >= 0 */
    double rho;                  /* RMSPROP: [0, 1) */
    double clip_global_norm;     /* 0: off; else > 0 */
    wf_lr_schedule schedule;
    int64_t step_size;           /* STEP: >= 1 */
    double gamma;                /* STEP: > 0 */
    int64_t decay_steps;         /* COSINE: >= 1 */
    double alpha;                /* COSINE: the final fraction of lr, [0, 1] */
} wf_optimizer_options;

/* Fills o with Keras 3's defaults for `kind`: SGD lr 0.01, momentum 0; ADAM lr 0.001, beta1 0.9, beta2
 * 0.999, epsilon 1e-7; ADAMW the same with weight_decay 0.004; RMSPROP lr 0.001, rho 0.9, momentum 0,
 * epsilon 1e-7. A constant schedule (step_size 1, gamma 1, decay_steps 1, alpha 0), no clipping. */
WF_API void wf_optimizer_options_init(wf_optimizer_options *o, wf_optimizer_kind kind);

/* Adds one training step to g: the gradients of the scalar `loss` with respect to vars[0..n_vars)
 * (float Variables; wf_gradients), the clipping, the schedule, the slot variables "<name>/<var>/m"
 * (SGD and RMSPROP with momentum, ADAM, ADAMW) and "<name>/<var>/v" (ADAM, ADAMW, RMSPROP), zeros of
 * the variable's shape and dtype, the step counter "<name>/step" (i64 scalar, 0), and one Assign per
 * updated variable, slot and the counter. *targets receives those Assigns, *n_targets how many: pass
 * them as wf_run_options.targets, and every run that computes them is one step. Free the array with
 * wf_free. Slots and the counter are variables, so wf_session_save and wf_session_restore checkpoint
 * the optimizer's state with the model. Errors (g unchanged): bad options (INVALID_ARGUMENT naming the
 * field and value), a var that is not a float Variable or appears twice, a var the loss does not
 * depend on (naming it), a loss that is not a float scalar, a name already taken. */
WF_API wf_status *wf_optimizer_minimize(wf_graph *g, const char *name, const wf_optimizer_options *o,
                                        wf_output loss, const wf_output *vars, int n_vars,
                                        wf_output **targets, int *n_targets);

/* ------------------------------------------------------------------------------------------------ */
/* Layers and the Sequential model (Keras-like)                                                     */
/* ------------------------------------------------------------------------------------------------ */

/* A Sequential model owns a graph, a session and the layers' variables. Layers are added in order; each
 * is shape-checked when added (errors name the layer). wf_model_compile adds the training graph (loss,
 * metrics, optimizer); fit, evaluate and predict run it. Images are NCHW (weft's layout; Keras uses
 * NHWC): a Conv2D layer wants [N, C, H, W] and a Reshape layer turns [N, 28, 28] into [N, 1, 28, 28].
 *
 * Training and inference share variables but not every node: Dropout draws a mask in training
 * (StatelessRandomUniform seeded by the layer's seed and the model's step counter, so a resumed run
 * draws the same masks) and is the identity in inference; BatchNorm normalises with the batch's
 * statistics in training and updates its moving mean and variance (Keras: moving = moving * momentum
 * + batch * (1 - momentum), the biased batch variance), and uses the moving statistics in inference. */
typedef struct wf_model wf_model;

/* Keras's dtype policies (keras.mixed_precision): which dtype a layer computes in. Variables always
 * stay in the model's float dtype (f32; f64 for an f64 input) as the master weights. Under a mixed
 * policy a layer casts its floating input and its variables to the compute dtype (f16 or bf16; Cast
 * nodes, so the gradients reach the f32 variables as f32 through Cast's gradient) and computes in it.
 * Statistics stay in f32: BatchNormalization and LayerNormalization cast their input to f32, normalise
 * there and cast the result back to the compute dtype, and a Softmax activation runs in f32 and its
 * output stays f32 (as Keras's advice to give the final softmax dtype "float32"). At compile the
 * model's output and the logits the loss reads are cast to f32, so the loss, the metrics and
 * wf_model_predict's output are f32 whatever the policy. A float32 layer after mixed ones casts its
 * f16/bf16 input back to f32. mixed_float16 also trains with dynamic loss scaling (wf_model_compile);
 * bf16 has f32's exponent range and needs none. */
typedef enum wf_dtype_policy {
    WF_POLICY_DEFAULT = 0,        /* a layer: the model's; a model: the global policy */
    WF_POLICY_FLOAT32 = 1,        /* compute in the variables' dtype (no casts but f16/bf16 inputs to f32) */
    WF_POLICY_MIXED_FLOAT16 = 2,  /* compute f16, variables f32, dynamic loss scaling */
    WF_POLICY_MIXED_BFLOAT16 = 3  /* compute bf16, variables f32 */
} wf_dtype_policy;

/* "float32", "mixed_float16" or "mixed_bfloat16" (Keras's names); WF_POLICY_DEFAULT is "default".
 * NULL for a value outside the enum. The string is static. */
WF_API const char *wf_policy_name(wf_dtype_policy p);
/* The policy named `name` (one of wf_policy_name's, not "default"). Errors: INVALID_ARGUMENT naming
 * the name and the accepted ones; *out unchanged. */
WF_API wf_status *wf_policy_from_name(const char *name, wf_dtype_policy *out);
/* The process-wide policy that wf_model_new gives a new model (Keras's set_global_policy); FLOAT32 at
 * start. Atomic: threads may set and read it, but a model takes it once, at wf_model_new. DEFAULT
 * means FLOAT32 here. Errors: INVALID_ARGUMENT for a value outside the enum (the policy unchanged). */
WF_API wf_status *wf_set_global_policy(wf_dtype_policy p);
WF_API wf_dtype_policy wf_global_policy(void);

typedef enum wf_activation {
    WF_ACT_NONE = 0,
    WF_ACT_RELU = 1,
    WF_ACT_SIGMOID = 2,
    WF_ACT_TANH = 3,
    WF_ACT_SOFTMAX = 4,   /* over the last axis */
    WF_ACT_ELU = 5,       /* alpha 1 */
    WF_ACT_SELU = 6,
    WF_ACT_GELU = 7,      /* exact (erf) form */
    WF_ACT_SOFTPLUS = 8,
    WF_ACT_LEAKY_RELU = 9 /* negative slope 0.2 (Keras's activation "leaky_relu") */
} wf_activation;

typedef enum wf_layer_kind {
    WF_LAYER_DENSE = 1,      /* y = act(x @ kernel + bias) over the last axis; kernel [in, units] */
    WF_LAYER_CONV2D = 2,     /* NCHW; kernel OIHW [filters, C, kh, kw] */
    WF_LAYER_MAXPOOL2D = 3,
    WF_LAYER_AVGPOOL2D = 4,  /* padding "same" averages over the valid elements only (Keras) */
    WF_LAYER_FLATTEN = 5,    /* [N, ...] -> [N, prod(...)] */
    WF_LAYER_DROPOUT = 6,
    WF_LAYER_BATCHNORM = 7,  /* over axis 1 (features of [N, F], channels of NCHW) */
    WF_LAYER_LAYERNORM = 8,  /* over the last axis, with gamma and beta */
    WF_LAYER_EMBEDDING = 9,  /* integer indices [N, ...] -> [N, ..., output_dim] */
    WF_LAYER_ACTIVATION = 10,
    WF_LAYER_RESHAPE = 11    /* to [N, target...] */
} wf_layer_kind;

typedef struct wf_layer {
    wf_layer_kind kind;
    const char *name;          /* NULL: Keras's automatic names ("dense", "dense_1", "conv2d", ...) */
    wf_activation activation;  /* DENSE, CONV2D, ACTIVATION */
    int64_t units;             /* DENSE */
    int64_t filters;           /* CONV2D */
    int64_t kernel[2];         /* CONV2D: kernel size; pools: pool size (default 2 x 2) */
    int64_t strides[2];        /* CONV2D (default 1 x 1); pools (default: the pool size) */
    int padding_same;          /* CONV2D and pools: 0 "valid" (default), 1 "same" */
    int use_bias;              /* DENSE, CONV2D: default 1 */
    double rate;               /* DROPOUT: the fraction dropped, [0, 1) */
    double momentum;           /* BATCHNORM: default 0.99 */
    double epsilon;            /* BATCHNORM, LAYERNORM: default 1e-3 */
    int64_t input_dim;         /* EMBEDDING: vocabulary size */
    int64_t output_dim;        /* EMBEDDING */
    int64_t target[WF_MAX_RANK]; /* RESHAPE: the shape without the batch dim (one entry may be -1) */
    int target_rank;
    wf_init kernel_init;       /* kind 0: Glorot uniform (DENSE, CONV2D), uniform(-0.05, 0.05) (EMBEDDING) */
    wf_init bias_init;         /* kind 0: zeros */
    uint64_t seed;             /* 0: derived from the model's seed and the layer's position */
    wf_dtype_policy policy;    /* WF_POLICY_DEFAULT (0): the model's (wf_model_set_policy) */
} wf_layer;

/* Fills l with Keras's defaults for `kind`. */
WF_API void wf_layer_init(wf_layer *l, wf_layer_kind kind);

/* A model whose inputs are [N, input_shape...] of `dtype` (an integer dtype for an Embedding first
 * layer). seed drives the initializers and dropout of layers that give none. Caller owns *out. */
WF_API wf_status *wf_model_new(wf_dtype dtype, int rank, const int64_t *input_shape, uint64_t seed,
                               wf_model **out);
WF_API void wf_model_free(wf_model *m);
/* The model's policy (its layers' default; wf_model_new takes wf_global_policy()), before any layer
 * is added. DEFAULT means the global policy. Errors (model unchanged): FAILED_PRECONDITION once a
 * layer is added, INVALID_ARGUMENT for a value outside the enum. */
WF_API wf_status *wf_model_set_policy(wf_model *m, wf_dtype_policy p);
WF_API wf_dtype_policy wf_model_policy(const wf_model *m);
/* Adds a layer. Before wf_model_compile only. Errors (model unchanged): a bad field (naming it), a
 * shape the layer cannot take (naming the layer, its input shape and the expected one). */
WF_API wf_status *wf_model_add(wf_model *m, const wf_layer *layer);
/* Keras's summary: one row per layer with its name, kind, output shape and parameter count, then the
 * totals. When any layer's policy is not float32, a "Policy" column gives every layer's (Keras 3
 * shows a layer's policy only where it differs from the global one; a column for all of them is
 * easier to read and to parse). Caller frees *text with wf_free. */
WF_API wf_status *wf_model_summary(const wf_model *m, char **text);

typedef enum wf_loss_kind {
    WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY = 1, /* labels: class indices [N] (i32, i64) */
    WF_LOSS_CATEGORICAL_CROSSENTROPY = 2,        /* labels: probabilities [N, C] */
    WF_LOSS_BINARY_CROSSENTROPY = 3,             /* targets of the output's shape */
    WF_LOSS_MSE = 4
} wf_loss_kind;

typedef struct wf_compile_options {
    wf_optimizer_options optimizer;
    wf_loss_kind loss;
    int from_logits;      /* 1: the output is logits. 0 (default): probabilities; when the last layer
                             ends in the matching softmax (categorical) or sigmoid (binary), the loss
                             reads that layer's logits instead, as Keras does, for a stable loss. */
    int accuracy;         /* 1 (default): the "accuracy" metric (argmax match; binary: threshold 0.5) */
    wf_dtype label_dtype; /* sparse labels: WF_I64 (default) or WF_I32 */
    const char *device;   /* as wf_session_options.device (NULL: the placer chooses) */
    int strict_placement;
    int inter_op_threads, intra_op_threads;
    /* Dynamic loss scaling, used when any layer's policy is mixed_float16 (Keras's LossScaleOptimizer,
     * TF's DynamicLossScale): the loss is multiplied by the scale before the gradients and the
     * gradients divided by it; a step whose gradients hold an inf or NaN changes no variable and no
     * optimizer state (the optimizer's step counter included), halves the scale (not below 1) and
     * resets the count of good steps; after loss_scale_growth_interval finite steps in a row the scale
     * doubles and the count restarts. The scale ("optimizer/loss_scale", f32) and the count
     * ("optimizer/loss_scale_good_steps", i64) are variables, checkpointed with the optimizer. */
    double initial_loss_scale;          /* 0: 2^15; else finite and >= 1 */
    int64_t loss_scale_growth_interval; /* 0: 2000; else >= 1 */
} wf_compile_options;

/* Defaults: Adam (Keras defaults), sparse categorical cross-entropy, from_logits 0, accuracy on. */
WF_API void wf_compile_options_init(wf_compile_options *o);
/* Builds the loss, the metrics, the optimizer step and the session on ctx (which must outlive m).
 * Once per model. Errors (model unchanged): an unknown loss, a loss that does not fit the output
 * shape, accuracy with MSE, a device spec no device matches (listing the devices). */
WF_API wf_status *wf_model_compile(wf_model *m, wf_context *ctx, const wf_compile_options *o);

/* The figures of one epoch, given to the callback and returned by fit. */
typedef struct wf_epoch_logs {
    int epoch;             /* 0-based */
    int epochs;
    int64_t steps, samples;
    double loss, accuracy; /* sample-weighted means over the epoch (accuracy NAN when off) */
    int has_validation;
    double val_loss, val_accuracy;
    double seconds;        /* wall time of the epoch's training steps (validation excluded) */
} wf_epoch_logs;

/* Called after each epoch; a nonzero return stops training after that epoch. */
typedef int (*wf_epoch_callback)(void *user, const wf_epoch_logs *logs);

typedef struct wf_fit_options {
    int epochs;                    /* default 1 */
    int64_t batch_size;            /* default 32 */
    double validation_split;       /* [0, 1): the last fraction of the samples, before shuffling (Keras) */
    wf_dataset *validation_data;   /* instead of validation_split; not owned */
    int shuffle;                   /* default 1: a new order each epoch from (seed, epoch) */
    uint64_t seed;                 /* default 1 */
    int verbose;                   /* 0 silent, 1 (default) a progress bar per epoch (redrawn on a
                                      terminal, one final line otherwise), 2 one line per epoch */
    wf_epoch_callback on_epoch_end;
    void *user;
    int initial_epoch;             /* resume: epochs before this one count as done (default 0) */
    /* appended (issue 16) */
    int steps_per_execution;       /* the running loss and accuracy stay on the training device and are
                                      read back every this many steps (Keras's name), when the progress
                                      bar redraws, and at the end of the epoch; 0 (default): only the
                                      latter two. 1 reads them after every step (a copy and a wait each) */
    const char *input_trace;       /* a Chrome trace (JSON) of the training loop written here at the end:
                                      per step its run and its wait for the next batch, and a pipeline's
                                      prefetch_to_device copies, on one clock; NULL: none */
} wf_fit_options;

WF_API void wf_fit_options_init(wf_fit_options *o);
/* Trains on `train` (features of the model's input shape, labels as the loss wants). An array
 * dataset's batching and shuffling are set from o (batch_size, shuffle, seed, validation_split); a
 * pipeline dataset gives its own batches (components 0 and 1), one iteration per epoch, and those
 * four options do not apply (validation_split is refused: pass validation_data). With a pipeline and
 * verbose, each epoch ends with a line of its stages' tuned knobs and rates (wf_dataset_stats), and
 * the bar shows the share of step time spent waiting for input when it is over 20%. Progress goes to stdout. *last (may be NULL) receives the
 * last epoch's logs. A batch that fails (labels out of range, a mismatched batch shape) stops training
 * with an error naming the epoch, the step and the node; that step's updates are not applied. */
WF_API wf_status *wf_model_fit(wf_model *m, wf_dataset *train, const wf_fit_options *o, wf_epoch_logs *last);
/* Loss and accuracy (NAN when off) over every sample, inference mode: an array dataset in batches of
 * batch_size; a pipeline (also as fit's validation_data) in its own batches, one iteration, sample-
 * weighted. */
WF_API wf_status *wf_model_evaluate(wf_model *m, wf_dataset *ds, int64_t batch_size, double *loss,
                                    double *accuracy);
/* The model's output for x [N, input_shape...], computed in batches of batch_size, inference mode.
 * Caller owns *out. */
WF_API wf_status *wf_model_predict(wf_model *m, const wf_tensor *x, int64_t batch_size, wf_tensor **out);
/* One training step on one batch, optionally traced (caller owns *trace). *loss may be NULL. */
WF_API wf_status *wf_model_train_step(wf_model *m, const wf_tensor *x, const wf_tensor *y, double *loss,
                                      wf_trace **trace);
/* Where a training step of batch `batch_size` runs: one entry per node of its plan. */
WF_API wf_status *wf_model_placement(wf_model *m, int64_t batch_size, wf_placement **out);
/* The dynamic loss scale and the count of finite steps since it last changed (either pointer may be
 * NULL). A model without loss scaling (no mixed_float16 layer) gives 1 and 0. Errors:
 * FAILED_PRECONDITION before compile. */
WF_API wf_status *wf_model_loss_scale(wf_model *m, double *scale, int64_t *good_steps);

/* The model's graph, session (NULL before compile; for wf_session_save / wf_session_restore, which
 * checkpoint the variables and the optimizer's state), its inference input and output. */
WF_API wf_graph *wf_model_graph(wf_model *m);
WF_API wf_session *wf_model_session(wf_model *m);
WF_API wf_output wf_model_input(const wf_model *m);
WF_API wf_output wf_model_output(const wf_model *m);
/* Writes the inference graph with the current weights to ONNX (wf_session_export_onnx), input
 * "input", output "output". */
WF_API wf_status *wf_model_export_onnx(wf_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_WEFT_H */
