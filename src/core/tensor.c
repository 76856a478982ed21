/*
 * Host tensors: a header and its data in one 64-byte aligned block (one allocation per tensor keeps
 * small-op execution cheap), or a view header that shares another tensor's data.
 */
#include <inttypes.h>
#include <pthread.h>

#include "core/core.h"

#define HDR_BYTES ((sizeof(wf_tensor) + WF__ALIGN - 1) / WF__ALIGN * WF__ALIGN)

/*
 * Scalars and other tiny tensors dominate graphs of many small ops, where malloc/free would cost more
 * than the kernel. Blocks of SMALL_BLOCK bytes are therefore kept on a bounded per-thread free list;
 * a thread's list is released when the thread exits.
 */
#define SMALL_BLOCK 256
#define SMALL_KEEP 1024

typedef struct small_cache {
    void *head;
    int n;
} small_cache;

static _Thread_local small_cache tl_small;
static pthread_key_t g_small_key;
static pthread_once_t g_small_once = PTHREAD_ONCE_INIT;

static void small_cache_release(void *arg)
{
    small_cache *c = arg;
    while (c->head) {
        void *next = *(void **)c->head;
        wf__aligned_free(c->head);
        c->head = next;
    }
    c->n = 0;
}

static void small_key_init(void) { pthread_key_create(&g_small_key, small_cache_release); }

/*
 * Large blocks: a training loop frees and allocates the same sizes every step (gradients, optimizer
 * updates). Handed back to malloc, blocks this size are unmapped and every step faulted in fresh
 * zeroed pages: 15% of the demo model's training step. A small global cache of exact sizes keeps
 * them, bounded in count and bytes; anything else goes back to the allocator. Blocks up to 128 MB
 * are kept: a run that returns a 64 MB output each time otherwise spent 33 ms of its 56 in page
 * faults (bench/bench_jit.c).
 */
#define LARGE_MIN ((size_t)64 << 10)
#define LARGE_MAX ((size_t)128 << 20)
#define LARGE_SLOTS 48
#define LARGE_CAP ((size_t)160 << 20)

static pthread_mutex_t g_large_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t n;
} g_large[LARGE_SLOTS];
static int g_n_large;
static size_t g_large_bytes;

static void *large_take(size_t n)
{
    void *p = NULL;
    pthread_mutex_lock(&g_large_mu);
    for (int i = g_n_large - 1; i >= 0; i--)
        if (g_large[i].n == n) {
            p = g_large[i].p;
            g_large[i] = g_large[--g_n_large];
            g_large_bytes -= n;
            break;
        }
    pthread_mutex_unlock(&g_large_mu);
    return p;
}

static bool large_keep(void *p, size_t n)
{
    bool kept = false;
    pthread_mutex_lock(&g_large_mu);
    if (g_n_large < LARGE_SLOTS && g_large_bytes + n <= LARGE_CAP) {
        g_large[g_n_large].p = p;
        g_large[g_n_large++].n = n;
        g_large_bytes += n;
        kept = true;
    }
    pthread_mutex_unlock(&g_large_mu);
    return kept;
}

void wf__tensor_large_cache_flush(void)
{
    pthread_mutex_lock(&g_large_mu);
    for (int i = 0; i < g_n_large; i++) wf__aligned_free(g_large[i].p);
    g_n_large = 0;
    g_large_bytes = 0;
    pthread_mutex_unlock(&g_large_mu);
}

static void *block_alloc(size_t n, bool *small)
{
    *small = n <= SMALL_BLOCK;
    if (*small && tl_small.head) {
        void *b = tl_small.head;
        tl_small.head = *(void **)b;
        tl_small.n--;
        return b;
    }
    if (n >= LARGE_MIN && n <= LARGE_MAX) {
        void *b = large_take(n);
        if (b) return b;
    }
    return wf__aligned_alloc(*small ? SMALL_BLOCK : n, WF__ALIGN);
}

static void block_free(void *b, bool small, size_t n)
{
    if (small && tl_small.n < SMALL_KEEP) {
        if (tl_small.n == 0 && !tl_small.head) {
            pthread_once(&g_small_once, small_key_init);
            pthread_setspecific(g_small_key, &tl_small);
        }
        *(void **)b = tl_small.head;
        tl_small.head = b;
        tl_small.n++;
        return;
    }
    if (!small && n >= LARGE_MIN && n <= LARGE_MAX && large_keep(b, n)) return;
    wf__aligned_free(b);
}

void wf__tensor_cache_flush(void) { small_cache_release(&tl_small); }

static wf_status *check_shape(wf_dtype dtype, int rank, const int64_t *dims, int64_t *numel)
{
    char buf[160];
    if (!wf__dtype_valid(dtype)) return wf__status(WF_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
    if (rank < 0 || rank > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "rank %d is outside 0..%d", rank, WF_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return wf__status(WF_INVALID_ARGUMENT, "tensor shape %s has a negative dim",
                              wf__shape_str(rank, dims, buf));
    int64_t n;
    if (!wf__shape_numel_checked(rank, dims, &n))
        return wf__status(WF_INVALID_ARGUMENT, "tensor shape %s: its element count overflows int64",
                          wf__shape_str(rank, dims, buf));
    if (!wf__shape_bytes_checked(rank, dims, wf_dtype_size(dtype), NULL, NULL))
        return wf__status(WF_INVALID_ARGUMENT, "tensor shape %s of %s: %" PRId64 " elements exceed the 2^62-byte "
                          "limit of a tensor", wf__shape_str(rank, dims, buf), wf_dtype_name(dtype), n);
    *numel = n;
    return NULL;
}

/* One block for header, records and payload (extra: payload bytes, 0 for other dtypes). */
static wf_status *tensor_alloc(wf_dtype dtype, int rank, const int64_t *dims, size_t extra, const char *what,
                               wf_tensor **out)
{
    int64_t n;
    WF__TRY(check_shape(dtype, rank, dims, &n));
    size_t bytes = (size_t)n * wf_dtype_size(dtype);
    if (extra > ((size_t)1 << 62) - bytes)
        return wf__status(WF_INVALID_ARGUMENT, "a string tensor of %zu payload bytes exceeds the 2^62-byte limit of a tensor",
                          extra);
    bytes += extra;
    bool small;
    wf_tensor *t = block_alloc(HDR_BYTES + bytes, &small);
    if (!t) return wf__oom(what ? what : "a tensor", HDR_BYTES + bytes);
    atomic_init(&t->refs, 1);
    t->small = small;
    t->block = HDR_BYTES + bytes;
    t->dtype = dtype;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->size = n;
    t->bytes = bytes;
    t->data = (char *)t + HDR_BYTES;
    t->base = NULL;
    t->dev_chunk = t->dev_priv = NULL;
    t->dev_offset = 0;
    t->device = NULL;
    t->dev_release = NULL;
    t->ext_release = NULL;
    t->ext_user = NULL;
    t->version = 0;
    *out = t;
    return NULL;
}

wf_status *wf__tensor_alloc(wf_dtype dtype, int rank, const int64_t *dims, const char *what,
                            wf_tensor **out)
{
    /* every generic path that allocates "a tensor like this one" and copies bytes ends here: refusing
     * strings keeps them from writing a payload past a block sized for records only */
    if (dtype == WF_STRING)
        return wf__status(WF_INVALID_ARGUMENT, "%s: string tensors are made by wf_tensor_new_strings (or a kernel that "
                          "produces strings), not as a shape and a dtype", what ? what : "a tensor");
    return tensor_alloc(dtype, rank, dims, 0, what, out);
}

wf_status *wf__tensor_alloc_strings(int rank, const int64_t *dims, size_t payload, const char *what, wf_tensor **out)
{
    wf_tensor *t;
    WF__TRY(tensor_alloc(WF_STRING, rank, dims, payload, what, &t));
    for (int64_t i = 0; i < t->size; i++) wf__tensor_string_set(t, i, 0, 0);
    *out = t;
    return NULL;
}

wf_status *wf__tensor_clone(const wf_tensor *t, const char *what, wf_tensor **out)
{
    wf_tensor *c;
    if (t->dtype == WF_STRING)
        WF__TRY(wf__tensor_alloc_strings(t->rank, t->dims, t->bytes - (size_t)t->size * 16, what, &c));
    else
        WF__TRY(wf__tensor_alloc(t->dtype, t->rank, t->dims, what, &c));
    if (t->bytes) memcpy(c->data, t->data, t->bytes);
    *out = c;
    return NULL;
}

wf_status *wf_tensor_new_strings(int rank, const int64_t *dims, const char *const *ptrs, const size_t *lens,
                                 wf_tensor **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new_strings: out is NULL");
    if (rank > 0 && !dims) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new_strings: dims is NULL");
    int64_t n;
    WF__TRY(check_shape(WF_STRING, rank, dims, &n));
    if (n > 0 && !ptrs) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new_strings: ptrs is NULL for %" PRId64 " strings", n);
    size_t payload = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!ptrs[i] && (!lens || lens[i]))
            return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new_strings: string %" PRId64 " is NULL", i);
        size_t len = lens ? lens[i] : strlen(ptrs[i]);
        if (len > ((size_t)1 << 62) - payload)
            return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new_strings: the strings' lengths exceed the 2^62-byte limit of a tensor");
        payload += len;
    }
    wf_tensor *t;
    WF__TRY(wf__tensor_alloc_strings(rank, dims, payload, "a string tensor", &t));
    char *dst = (char *)t->data + n * 16;
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(ptrs[i]);
        if (len) memcpy(dst + off, ptrs[i], len);
        wf__tensor_string_set(t, i, off, len);
        off += len;
    }
    *out = t;
    return NULL;
}

const char *wf_tensor_string(const wf_tensor *t, int64_t i, size_t *len)
{
    if (!t || t->dtype != WF_STRING || !t->data || i < 0 || i >= t->size) return NULL;
    uint64_t rec[2];
    memcpy(rec, (const char *)t->data + i * 16, 16);
    /* records written by weft are always in range; a caller who wrote through wf_tensor_data might not */
    if (rec[0] > t->bytes || rec[1] > t->bytes - rec[0]) return NULL;
    if (len) *len = (size_t)rec[1];
    return (const char *)t->data + rec[0];
}

uint64_t wf__tensor_new_version(void)
{
    static atomic_uint_least64_t next = 1;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

wf_status *wf__tensor_alloc_header(wf_dtype dtype, int rank, const int64_t *dims, wf_tensor **out)
{
    int64_t zero = 0;
    wf_tensor *t;
    if (dtype == WF_STRING)
        return wf__status(WF_INVALID_ARGUMENT, "string tensors live in host memory only: none is made on a device");
    /* a header with no data: allocate as an empty tensor, then give it the real shape */
    WF__TRY(wf__tensor_alloc(dtype, 1, &zero, "a device tensor", &t));
    int64_t n;
    wf_status *s = check_shape(dtype, rank, dims, &n);
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->size = n;
    t->bytes = (size_t)n * wf_dtype_size(dtype);
    t->data = NULL;
    *out = t;
    return NULL;
}

wf_status *wf__tensor_view(wf_tensor *base, int rank, const int64_t *dims, wf_tensor **out)
{
    int64_t n;
    WF__TRY(check_shape(base->dtype, rank, dims, &n));
    if (n != base->size) {
        char a[160], b[160];
        return wf__status(WF_INVALID_ARGUMENT, "cannot view %s as %s: element counts differ",
                          wf__shape_str(base->rank, base->dims, a), wf__shape_str(rank, dims, b));
    }
    bool small;
    wf_tensor *t = block_alloc(HDR_BYTES, &small);
    if (!t) return wf__oom("a tensor view", HDR_BYTES);
    /* every field but refs, which other threads may be changing (views of one batch made and dropped by
     * several map workers) */
    _Static_assert(offsetof(wf_tensor, refs) == 0, "refs leads wf_tensor");
    memcpy((char *)t + sizeof t->refs, (const char *)base + sizeof t->refs, sizeof *t - sizeof t->refs);
    atomic_init(&t->refs, 1);
    t->small = small;
    t->block = HDR_BYTES;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->base = wf_tensor_ref(base->base ? base->base : base);
    *out = t;
    return NULL;
}

wf_status *wf__tensor_view_at(wf_tensor *base, size_t offset, int rank, const int64_t *dims, wf_tensor **out)
{
    int64_t n;
    WF__TRY(check_shape(base->dtype, rank, dims, &n));
    size_t bytes = (size_t)n * wf_dtype_size(base->dtype);
    if (base->device || base->dtype == WF_STRING || offset > base->bytes || bytes > base->bytes - offset)
        return wf__status(WF_INVALID_ARGUMENT, "a view of %zu bytes at %zu is not inside a %s tensor of %zu bytes",
                          bytes, offset, wf_dtype_name(base->dtype), base->bytes);
    WF__TRY(wf__tensor_view(base, base->rank, base->dims, out));
    wf_tensor *t = *out;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->size = n;
    t->bytes = bytes;
    t->data = (char *)base->data + offset;
    return NULL;
}

wf_status *wf_tensor_new(wf_dtype dtype, int rank, const int64_t *dims, const void *data,
                         wf_tensor **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new: out is NULL");
    if (rank > 0 && !dims) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new: dims is NULL");
    if (dtype == WF_STRING)
        return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_new: a string tensor's size does not follow from its shape; "
                          "make it with wf_tensor_new_strings");
    wf_tensor *t;
    WF__TRY(wf__tensor_alloc(dtype, rank, dims, "a tensor", &t));
    if (data)
        memcpy(t->data, data, t->bytes);
    else
        memset(t->data, 0, t->bytes);
    *out = t;
    return NULL;
}

wf_status *wf_tensor_wrap(wf_dtype dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *user, void *data), void *user, wf_tensor **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: out is NULL");
    if (rank > 0 && !dims) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: dims is NULL");
    if (dtype == WF_STRING)
        return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: string tensors are made with wf_tensor_new_strings");
    size_t esz = wf_dtype_size(dtype);
    if (esz == 0) return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: invalid dtype %d", (int)dtype);
    if ((uintptr_t)data % esz != 0)
        return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: data %p is not aligned to its %s elements (%zu bytes)",
                          data, wf_dtype_name(dtype), esz);
    wf_tensor *t;
    WF__TRY(wf__tensor_alloc_header(dtype, rank, dims, &t));
    if (!data && t->size > 0) {
        wf_tensor_free(t);
        return wf__status(WF_INVALID_ARGUMENT, "wf_tensor_wrap: data is NULL for %lld elements", (long long)t->size);
    }
    t->data = data;
    t->ext_release = release;
    t->ext_user = user;
    *out = t;
    return NULL;
}

wf_tensor *wf_tensor_ref(wf_tensor *t)
{
    if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void wf_tensor_free(wf_tensor *t)
{
    while (t) {
        if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
        wf_tensor *base = t->base;
        if (t->dev_release && !base) t->dev_release(t);
        if (t->ext_release && !base) t->ext_release(t->ext_user, t->data);
        block_free(t, t->small, t->block);
        t = base; /* drop the view's reference without recursion */
    }
}

wf_dtype wf_tensor_dtype(const wf_tensor *t) { return t->dtype; }
int wf_tensor_rank(const wf_tensor *t) { return t->rank; }
const int64_t *wf_tensor_dims(const wf_tensor *t) { return t->dims; }
int64_t wf_tensor_size(const wf_tensor *t) { return t->size; }
size_t wf_tensor_bytes(const wf_tensor *t) { return t->bytes; }
void *wf_tensor_data(const wf_tensor *t) { return t->data; }
