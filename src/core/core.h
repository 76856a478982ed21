/*
 * Internal core: the allocation funnel, status construction, tensors and dtype helpers shared by every
 * stage. Nothing here is published; the public contract is include/weft/weft.h.
 */
#ifndef WF_CORE_H
#define WF_CORE_H

#include "weft/weft.h"
#include "core/checked.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define WF__ALIGN 64

/* Hot loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked when the library loads.
 * The ThreadSanitizer build turns this off: ifunc resolvers run before its runtime is initialised. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(WEFT_NO_MULTIVERSION)
#define WF__VEC __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WF__VEC
#endif

#if defined(__GNUC__)
#define WF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define WF__LIKELY(x) __builtin_expect(!!(x), 1)
#define WF__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define WF__PRINTF(a, b)
#define WF__LIKELY(x) (x)
#define WF__UNLIKELY(x) (x)
#endif

/* ---- allocation funnel (src/core/alloc.c) ------------------------------------------------------ */
/* Every host allocation of the library goes through these, so tests can inject failures. */
void *wf__malloc(size_t n);                 /* 16-byte aligned at least; NULL on failure */
void *wf__calloc(size_t count, size_t n);   /* zeroed; NULL on failure or overflow */
void *wf__realloc(void *p, size_t old_n, size_t new_n); /* like realloc; p may be NULL */
void *wf__aligned_alloc(size_t n, size_t align); /* free with wf__aligned_free */
void wf__free(void *p);
/* Requests above this (the machine's RAM plus swap) fail as if the allocator had no memory. */
size_t wf__host_alloc_limit(void);
void wf__aligned_free(void *p);
char *wf__strdup(const char *s);
char *wf__strndup(const char *s, size_t n);
/* For tests: make the Nth allocation from now fail (N >= 1), 0 disables. Returns allocations made. */
void wf__fault_inject(long nth);
long wf__alloc_count(void);

/* ---- status (src/core/status.c) ----------------------------------------------------------------- */
/* Never returns NULL for code != WF_OK: an out-of-memory while building a status yields a static one. */
wf_status *wf__status(wf_code code, const char *fmt, ...) WF__PRINTF(2, 3);
wf_status *wf__vstatus(wf_code code, const char *fmt, va_list ap);
/* Returns a new status "prefix: old message" with old's code; frees old. */
wf_status *wf__status_wrap(wf_status *old, const char *fmt, ...) WF__PRINTF(2, 3);
wf_status *wf__oom(const char *what, size_t bytes); /* "out of memory allocating N bytes for WHAT on host" */

#define WF__TRY(expr)                                                                            \
    do {                                                                                         \
        wf_status *wf__s_ = (expr);                                                              \
        if (wf__s_) return wf__s_;                                                               \
    } while (0)

/* ---- growable string (src/core/status.c) -------------------------------------------------------- */
typedef struct wf__str {
    char *p;
    size_t len, cap;
    bool failed; /* an append ran out of memory */
} wf__str;
void wf__str_appendf(wf__str *s, const char *fmt, ...) WF__PRINTF(2, 3);
void wf__str_append(wf__str *s, const char *text);
void wf__str_free(wf__str *s);

/* ---- dtypes (src/core/dtype.c) ------------------------------------------------------------------ */
#define WF__DT_BIT(t) (1u << (t))
#define WF__DT_FLOATS (WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64) | WF__DT_BIT(WF_F16) | WF__DT_BIT(WF_BF16))
#define WF__DT_SINTS (WF__DT_BIT(WF_I8) | WF__DT_BIT(WF_I16) | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64))
#define WF__DT_INTS (WF__DT_SINTS | WF__DT_BIT(WF_U8))
#define WF__DT_NUMERIC (WF__DT_FLOATS | WF__DT_INTS)
#define WF__DT_ALL (WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL))
#define WF__DT_SIGNED (WF__DT_FLOATS | WF__DT_SINTS)
/* Not in WF__DT_ALL: a kernel takes strings only when its table says so. */
#define WF__DT_STRING WF__DT_BIT(WF_STRING)

bool wf__dtype_valid(wf_dtype t);
bool wf__dtype_is_float(wf_dtype t);
bool wf__dtype_is_int(wf_dtype t);
/* Reads element i of a buffer of dtype t as a double / int64, and writes one. */
double wf__load_f64(const void *p, wf_dtype t, int64_t i);
int64_t wf__load_i64(const void *p, wf_dtype t, int64_t i);
void wf__store_f64(void *p, wf_dtype t, int64_t i, double v);
/* Converts n elements between dtypes (Cast semantics: float→int truncates toward zero, →bool is !=0). */
void wf__convert(const void *src, wf_dtype st, void *dst, wf_dtype dt, int64_t n);
/* n f16 or bf16 values (t) to f32 and back, vectorised, bit for bit as the scalar converters
 * (dtype_convert.c). */
void wf__half_to_f32_n(const uint16_t *src, float *dst, int64_t n, wf_dtype t);
void wf__f32_to_half_n(const float *src, uint16_t *dst, int64_t n, wf_dtype t);

/* ---- shapes (src/core/shape.c) ------------------------------------------------------------------ */
/* Static knowledge of a value: dtype and shape, with rank -1 or dims -1 where unknown. */
typedef struct wf__tinfo {
    wf_dtype dtype;
    int rank;
    int64_t dims[WF_MAX_RANK];
} wf__tinfo;

/* Product; 1 for rank 0; -1 if any dim unknown. Every known shape in a graph or a tensor has passed
 * wf__shape_bytes_checked, so this cannot overflow there; on a shape that would, it saturates at
 * INT64_MAX instead of overflowing. */
int64_t wf__numel(int rank, const int64_t *dims);
bool wf__tinfo_known(const wf__tinfo *t);          /* rank and all dims known */
/* "[2,3,?]" or "[?...]" (unknown rank), "[]" for scalars. buf must hold 160 bytes; returns buf. */
const char *wf__shape_str(int rank, const int64_t *dims, char *buf);
const char *wf__tinfo_str(const wf__tinfo *t, char *buf); /* "f32[2,3]" */
/* numpy broadcasting of two static shapes (unknowns allowed). false when incompatible. */
bool wf__broadcast_tinfo(const wf__tinfo *a, const wf__tinfo *b, int *rank, int64_t *dims);
/* Normalises axis into [0, rank); false when out of range. */
bool wf__norm_axis(int64_t axis, int rank, int *out);
/* Row-major strides in elements (wrapping where a zero dim makes outer strides meaningless). */
void wf__strides(int rank, const int64_t *dims, int64_t *strides);

/* ---- tensors (src/core/tensor.c) ---------------------------------------------------------------- */
struct wf_tensor {
    atomic_int refs;
    wf_dtype dtype;
    int rank;
    int64_t dims[WF_MAX_RANK];
    int64_t size;   /* elements */
    size_t bytes;
    void *data;     /* 64-byte aligned */
    wf_tensor *base; /* when not NULL, data belongs to base (a view: reshape, identity) */
    bool small;      /* block comes from the small-tensor cache (tensor.c) */
    size_t block;    /* bytes of the header + data block (tensor.c's large-block cache) */
    /* Device memory (data == NULL): a backend's chunk and the offset inside it, and who takes it back. */
    void *dev_chunk;
    size_t dev_offset;
    void *dev_priv;  /* the device allocator's record of the block */
    const struct wf__device *device; /* NULL: host memory */
    void (*dev_release)(wf_tensor *t);
    /* Host memory the caller lent (wf_tensor_wrap): given back through ext_release when the last
     * reference goes. */
    void (*ext_release)(void *user, void *data);
    void *ext_user;
    /* The content's version: 0 while anyone may still write the buffer (a kernel's output, a caller's
     * tensor), else a process-unique stamp (wf__tensor_new_version) given when the runtime made the content
     * final: a graph's attribute tensors (Const values, a Variable's initial value) and each value committed
     * to a session variable. A write to a stamped buffer must give it a new stamp. Kernels key what they
     * derive from an input (prepacked weights) on (version != 0, version) instead of comparing bytes. */
    uint64_t version;
};

/* Allocates an uninitialised tensor (header and data in one block). OOM status names `what`. */
wf_status *wf__tensor_alloc(wf_dtype dtype, int rank, const int64_t *dims, const char *what,
                            wf_tensor **out);
/* String tensors (WF_STRING; weft.h gives the layout). wf__tensor_alloc refuses WF_STRING, since a
 * string tensor's bytes do not follow from its shape: this allocates one with `payload` bytes after
 * the records, the records zeroed (every element empty) and the payload uninitialised; the producer
 * fills records and payload (wf__tensor_string_set). */
wf_status *wf__tensor_alloc_strings(int rank, const int64_t *dims, size_t payload, const char *what,
                                    wf_tensor **out);
/* Writes element i's record: its bytes start `offset` bytes into the payload (after the records). */
static inline void wf__tensor_string_set(wf_tensor *t, int64_t i, uint64_t offset, uint64_t length)
{
    uint64_t rec[2] = {(uint64_t)t->size * 16 + offset, length};
    memcpy((char *)t->data + i * 16, rec, 16);
}
/* A new host tensor with t's dtype, shape and contents (a deep copy for strings too). */
wf_status *wf__tensor_clone(const wf_tensor *t, const char *what, wf_tensor **out);
/* A header without host data, for device memory that the caller attaches (dev_* fields). */
wf_status *wf__tensor_alloc_header(wf_dtype dtype, int rank, const int64_t *dims, wf_tensor **out);
/* A new header sharing base's data with another shape of the same element count. */
wf_status *wf__tensor_view(wf_tensor *base, int rank, const int64_t *dims, wf_tensor **out);
/* A view of the bytes of host tensor base from `offset` on, as dtype base's and shape dims (a row of a
 * batch); INVALID_ARGUMENT when they do not fit inside base. */
wf_status *wf__tensor_view_at(wf_tensor *base, size_t offset, int rank, const int64_t *dims, wf_tensor **out);
/* Frees the calling thread's cache of small tensor blocks (tests, before switching allocators). */
void wf__tensor_cache_flush(void);
/* Frees the large blocks tensor.c keeps for reuse (wf_set_allocator calls it before switching). */
void wf__tensor_large_cache_flush(void);
/* A new process-unique, non-zero content version (see wf_tensor.version). */
uint64_t wf__tensor_new_version(void);
static inline int wf__tensor_refs(const wf_tensor *t) { return atomic_load_explicit(&t->refs, memory_order_acquire); }

/* ---- f32 bit casts, f16 / bf16 inline conversions for kernels ---------------------------------- */
/* always_inline: kernels compiled under `#pragma GCC optimize` (k_vmath.h's users) call these, and GCC
 * does not inline a plain inline function across different optimisation options: it became an
 * out-of-line call per element and made Swish, Exp, Sigmoid, Tanh and the LSTM cell 2-3x slower. */
#define WF__BITCAST_INLINE static inline __attribute__((always_inline))
WF__BITCAST_INLINE uint32_t wf__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
WF__BITCAST_INLINE float wf__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float wf__h2f(uint16_t h) { return wf_f16_to_f32(h); }
static inline uint16_t wf__f2h(float f) { return wf_f32_to_f16(f); }
WF__BITCAST_INLINE float wf__bf2f(uint16_t h) { return wf__f32_from_bits((uint32_t)h << 16); }
WF__BITCAST_INLINE uint16_t wf__f2bf(float f)
{
    uint32_t u = wf__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* monotonic clock in nanoseconds */
int64_t wf__now_ns(void);
int wf__num_cores(void);

#endif
