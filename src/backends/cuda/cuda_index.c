/*
 * Host side of the CUDA indexing and shape-to-tensor ops: Shape, Size, ConstantOfShape, Fill, EyeLike,
 * Range, NonZero (small outputs computed on the host and uploaded), OneHot, GatherND / ScatterND,
 * GatherElements / ScatterElements, Trilu, CumSum / CumProd and ReverseSequence (device kernels in
 * cuda_kernels_index.cu). Follows the OpenCL port (src/backends/opencl/ocl_shape_index.c) of the CPU
 * kernels. Indices are never read back: the kernels check them and write the first bad one to the
 * device's error record (cu_err_site / cu_err_take below), which the next download or synchronisation
 * turns into a status naming the node and the index, in the words of the CPU's checks. The scatters'
 * checking pass also finds duplicate targets on the device; those run in index order, as the CPU does.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kern_ext.h"
#include "ops/kutil_half.h"
#include "ops/kutil_shape.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

static int64_t numel(int n, const int64_t *d)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

static wf_status *check_index_dtype(wf__kctx *k, const wf_tensor *t, const char *what)
{
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                                  cu_dtype_name(t->dtype));
    return NULL;
}

/* ---- index checks on the device -------------------------------------------------------------------------- */

/* One checking launch: what its message says besides the bad index. The ring holds the last CU_ERR_SITES
 * launches of the device; a record whose site has left the ring (that many checking launches between the
 * bad one and the next read) still fails the run, with a message that says less. */
#define CU_ERR_SITES 512
typedef struct cu_err_site_rec {
    unsigned long long id;
    int kind, axis;
    char node[192], op[32], ix[160], x[160];
} cu_err_site_rec;

wf_status *cu_err_site(wf__kctx *k, int kind, int axis, const wf_tensor *ix, const wf_tensor *x, cuk_err **err,
                       unsigned long long *site)
{
    cu_dev *d = cu_of(k);
    wf_status *s = NULL;
    pthread_mutex_lock(&d->err_mu);
    if (!d->err) {
        cuk_err *e = NULL;
        cudaError_t rc = cudaMalloc((void **)&e, sizeof *e);
        if (rc == cudaSuccess) rc = cudaMemsetAsync(e, 0, sizeof *e, d->compute);
        cu_err_site_rec *ring = rc == cudaSuccess ? cu_host->malloc(sizeof *ring * CU_ERR_SITES) : NULL;
        if (!ring) {
            if (e) cudaFree(e);
            cudaGetLastError();
            s = cu_host->kctx_fail(k, rc == cudaSuccess ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                                   "cannot set up the index-error record on %s", k->device->short_name);
            goto out;
        }
        memset(ring, 0, sizeof *ring * CU_ERR_SITES);
        d->err = e;
        d->err_sites = ring;
    }
    pthread_mutex_lock(&d->site_mu); /* readers (err_status, maybe on a callback thread) take only this */
    cu_err_site_rec *r = &((cu_err_site_rec *)d->err_sites)[++d->err_next % CU_ERR_SITES];
    r->id = d->err_next;
    r->kind = kind;
    r->axis = axis;
    snprintf(r->node, sizeof r->node, "%s", k->node);
    snprintf(r->op, sizeof r->op, "%s", k->op->name);
    cu_tstr(ix, r->ix);
    cu_tstr(x, r->x);
    pthread_mutex_unlock(&d->site_mu);
    if (!d->err_any) {
        snprintf(d->err_node, sizeof d->err_node, "%s", r->node);
        d->err_any = d->err_one = true;
    } else if (strcmp(d->err_node, r->node) != 0) {
        d->err_one = false;
    }
    *err = d->err;
    *site = r->id;
    atomic_fetch_add(&d->err_armed, 1);
out:
    pthread_mutex_unlock(&d->err_mu);
    return s;
}

/* The error a read of the record found: the host check's message, naming the node unless the
 * executor's wrapper of the event it is on will (name_node false: the event is that node's own). */
static wf_status *err_status(cu_dev *d, const cuk_err *recp, bool name_node)
{
    cuk_err rec = *recp;
    if (!rec.site) return NULL;
    pthread_mutex_lock(&d->site_mu);
    cu_err_site_rec r = ((cu_err_site_rec *)d->err_sites)[rec.site % CU_ERR_SITES];
    pthread_mutex_unlock(&d->site_mu);
    if (r.id != rec.site)
        return cu_host->status(WF_INVALID_ARGUMENT, "an index kernel on GPU %d met index %lld out of range (its node has "
                               "left the record of the last %d checking launches)", d->ordinal, rec.value, CU_ERR_SITES);
    char who[256] = "";
    if (name_node) snprintf(who, sizeof who, "node '%s' (%s): ", r.node, r.op);
    /* the wording of the host checks these replace */
    switch (r.kind) {
    case CU_SITE_GATHER:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sindex %lld (element %lld of indices %s) is out of range for axis %d of data %s",
                               who, rec.value, rec.pos, r.ix, r.axis, r.x);
    case CU_SITE_ELEMENTS:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sindex %lld (at position %lld) is out of range for axis %d of data %s", who,
                               rec.value, rec.pos, r.axis, r.x);
    case CU_SITE_SEQLEN:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%ssequence length %lld of batch %lld is outside [0, %lld] for input %s", who,
                               rec.value, rec.pos, rec.entry, r.x);
    case CU_SITE_TARGET:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%starget %lld at position %lld is not a class in [0, %lld) nor ignore_index",
                               who, rec.value, rec.pos, rec.entry);
    case CU_SITE_UNPOOL:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sindex %lld (at position %lld) is outside the %lld unpooled elements", who,
                               rec.value, rec.pos, rec.entry);
    case CU_SITE_ROI_BATCH:
        return cu_host->status(WF_INVALID_ARGUMENT, "%sbatch_indices[%lld] = %lld is outside [0, %lld)",
                               who, rec.pos, rec.value, rec.entry);
    case CU_SITE_RNN_LENS:
        return cu_host->status(WF_INVALID_ARGUMENT, "%ssequence_lens[%lld] = %lld is outside [0, %lld]",
                               who, rec.pos, rec.value, rec.entry);
    case CU_SITE_POSITION:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sposition id %lld (at position %lld) is outside the caches' %lld positions",
                               who, rec.value, rec.pos, rec.entry);
    case CU_SITE_DIV_ZERO:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sinteger division by zero (element %lld of divisor %s)", who, rec.pos,
                               r.ix);
    case CU_SITE_NEG_POW:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sintegers to negative integer powers are not allowed (exponent %lld at "
                               "element %lld)",
                               who, rec.value, rec.pos);
    default:
        return cu_host->status(WF_INVALID_ARGUMENT,
                               "%sindex %lld (tuple %lld, entry %lld) is out of range for dim %lld of data %s",
                               who, rec.value, rec.pos, rec.entry, r.axis + rec.entry, r.x);
    }
}

/* ---- reads of the record carried by events ---------------------------------------------------------------
 * The first event recorded on the compute stream after a checking launch enqueues, before itself, a read
 * of the record into pinned host memory and a reset of it (cu_err_enqueue_read): the event completes
 * after the read, so its query, wait or callback finds the bad index in host memory without a CUDA
 * call. The executor records a node's event under the device's enqueue lock right after its commands,
 * so that is the node's own event (the message then leaves the node to the executor's wrapper when all
 * launches the read covers were that node's). A read no completion has looked at when its event is
 * released goes to err_orphans: the next event on compute, or cu_err_take, reports it. */

/* Pinned slots for the reads: a read without one goes to pageable memory, which waits on the host. */
#define CU_ERR_READS 64

struct cu_errbuf {
    cu_errbuf *next;
    cuk_err *rec;    /* a pinned slot, or &local */
    int slot;        /* -1: local */
    cuk_err local;
    atomic_bool seen; /* a completion has reported it (or found it clean) */
    bool one_node;    /* the launches it covers were all one node's */
    bool own;         /* on the event recorded right after that node's commands */
};

static void errbuf_free(cu_dev *d, cu_errbuf *b)
{
    if (b->slot >= 0) {
        pthread_mutex_lock(&d->err_mu);
        d->err_pin_used &= ~(1ull << b->slot);
        pthread_mutex_unlock(&d->err_mu);
    }
    cu_host->free(b);
}

wf_status *cu_err_enqueue_read(cu_dev *d, cu_errbuf **list)
{
    *list = NULL;
    cu_errbuf *b = NULL;
    cudaError_t rc = cudaSuccess;
    if (atomic_load(&d->err_armed)) {
        b = cu_host->malloc(sizeof *b);
        if (!b) return cu_host->status(WF_OUT_OF_MEMORY, "out of memory for a read of the index-error record of GPU %d",
                                       d->ordinal);
        memset(b, 0, sizeof *b);
        atomic_init(&b->seen, false);
        b->slot = -1;
        b->rec = &b->local;
        pthread_mutex_lock(&d->err_mu);
        long long armed = atomic_exchange(&d->err_armed, 0);
        if (armed) {
            if (!d->err_pin_tried) {
                d->err_pin_tried = true;
                if (cudaHostAlloc((void **)&d->err_pin, sizeof(cuk_err) * CU_ERR_READS, cudaHostAllocDefault) != cudaSuccess) {
                    cudaGetLastError(); /* not the next kernel's error */
                    d->err_pin = NULL;
                }
            }
            for (int i = 0; d->err_pin && i < CU_ERR_READS; i++)
                if (!(d->err_pin_used & (1ull << i))) {
                    d->err_pin_used |= 1ull << i;
                    b->slot = i;
                    b->rec = &d->err_pin[i];
                    break;
                }
            b->one_node = d->err_any && d->err_one;
            b->own = true;
            d->err_any = false;
            /* into pageable memory (no slot) the copy returns once done: a wait, not a wrong answer */
            rc = cudaMemcpyAsync(b->rec, d->err, sizeof *b->rec, cudaMemcpyDeviceToHost, d->compute);
            if (rc == cudaSuccess) rc = cudaMemsetAsync(d->err, 0, sizeof *d->err, d->compute);
            if (rc != cudaSuccess) atomic_fetch_add(&d->err_armed, armed); /* read next time */
        }
        pthread_mutex_unlock(&d->err_mu);
        if (rc != cudaSuccess || !armed) {
            errbuf_free(d, b);
            b = NULL;
        }
    }
    pthread_mutex_lock(&d->err_mu);
    cu_errbuf *orphans = d->err_orphans;
    d->err_orphans = NULL;
    pthread_mutex_unlock(&d->err_mu);
    if (b) {
        b->next = orphans;
        *list = b;
    } else {
        *list = orphans;
    }
    if (rc != cudaSuccess)
        return cu_host->status(WF_INTERNAL, "reading the index-error record of GPU %d (%s) failed: %s", d->ordinal, d->name,
                               cudaGetErrorString(rc));
    return NULL;
}

wf_status *cu_err_check(cu_dev *d, cu_errbuf *list)
{
    wf_status *s = NULL;
    for (cu_errbuf *b = list; b; b = b->next) {
        if (!s) s = err_status(d, b->rec, !(b->own && b->one_node));
        atomic_store(&b->seen, true);
    }
    return s;
}

void cu_err_free(cu_dev *d, cu_errbuf *list)
{
    for (cu_errbuf *b = list, *bn; b; b = bn) {
        bn = b->next;
        if (!atomic_load(&b->seen)) {
            b->own = false; /* the next event is another node's, or this one's recorded again */
            pthread_mutex_lock(&d->err_mu);
            b->next = d->err_orphans;
            d->err_orphans = b;
            pthread_mutex_unlock(&d->err_mu);
            continue;
        }
        errbuf_free(d, b);
    }
}

/* On the host after the compute stream has drained: the orphaned reads (complete now), then the record
 * if a checking launch ran since the last read; the first error, naming its node. */
wf_status *cu_err_take(cu_dev *d)
{
    pthread_mutex_lock(&d->err_mu);
    cu_errbuf *list = d->err_orphans;
    d->err_orphans = NULL;
    long long armed = atomic_exchange(&d->err_armed, 0); /* launches after this are read next time */
    if (armed) d->err_any = false;
    pthread_mutex_unlock(&d->err_mu);
    if (!armed && !list) return NULL;
    cuk_err rec;
    memset(&rec, 0, sizeof rec);
    cudaError_t rc = cudaStreamSynchronize(d->compute);
    if (rc == cudaSuccess && armed) rc = cudaMemcpy(&rec, d->err, sizeof rec, cudaMemcpyDeviceToHost);
    wf_status *s = NULL;
    if (rc != cudaSuccess) {
        atomic_fetch_add(&d->err_armed, armed); /* read next time */
        s = cu_host->status(WF_INTERNAL, "reading the index-error record of GPU %d (%s) failed: %s", d->ordinal,
                            d->name, cudaGetErrorString(rc));
    } else {
        for (cu_errbuf *b = list; b; b = b->next) b->own = false;
        s = cu_err_check(d, list); /* older than the record's */
        if (rec.site) {
            /* cleared in stream order: a kernel enqueued after this may report again */
            cudaMemsetAsync(d->err, 0, sizeof *d->err, d->compute);
            wf_status *s2 = err_status(d, &rec, true);
            if (s) cu_host->status_free(s2);
            else s = s2;
        }
    }
    for (cu_errbuf *b = list; b; b = b->next) atomic_store(&b->seen, true);
    cu_err_free(d, list);
    return s;
}

void cu_err_release(cu_dev *d)
{
    for (cu_errbuf *b = d->err_orphans; b; b = b->next) atomic_store(&b->seen, true);
    cu_errbuf *list = d->err_orphans;
    d->err_orphans = NULL;
    cu_err_free(d, list);
    if (d->err_pin) cudaFreeHost(d->err_pin);
    d->err_pin = NULL;
    if (d->err) cudaFree(d->err);
    cu_host->free(d->err_sites);
    d->err = NULL;
    d->err_sites = NULL;
}

static wf_status *copy_whole(wf__kctx *k, wf_tensor *y, const wf_tensor *x)
{
    if (!x->bytes) return NULL;
    return cu_check(k, (int)cudaMemcpyAsync(cu_ptr(y), cu_ptr(x), x->bytes, cudaMemcpyDeviceToDevice, cu_of(k)->compute),
                    "device copy");
}

/* Stream-ordered scratch on the compute stream: freed after the kernels queued before the free. */
static wf_status *scratch(wf__kctx *k, size_t bytes, void **p)
{
    *p = NULL;
    return cu_check(k, (int)cudaMallocAsync(p, bytes ? bytes : 1, cu_of(k)->compute), "scratch allocation");
}

static void scratch_free(wf__kctx *k, void *p)
{
    if (p) cudaFreeAsync(p, cu_of(k)->compute);
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int reduction(wf__kctx *k)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "reduction");
    const char *rs = a ? a->s : NULL;
    if (!rs) return RED_NONE;
    return !strcmp(rs, "add") ? RED_ADD : !strcmp(rs, "mul") ? RED_MUL : !strcmp(rs, "max") ? RED_MAX
         : !strcmp(rs, "min") ? RED_MIN : RED_NONE;
}

/* 1.0 (or true) as the bits of one element of dtype t. */
static uint64_t one_bits(wf_dtype t)
{
    switch (t) {
    case WF_F32: return 0x3f800000u;
    case WF_F64: return 0x3ff0000000000000ull;
    case WF_F16: return 0x3c00u;
    case WF_BF16: return 0x3f80u;
    default: return 1;
    }
}

/* ---- Shape, Size, NonZero, Range: small outputs computed on the host ------------------------------------ */

static wf_status *k_shape(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t start = cu_host->attr_get(k->op, k->attrs, "start")->i, end = cu_host->attr_get(k->op, k->attrs, "end")->i,
            r = x->rank;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, WF_I64, 1, &n, &y))) return s;
    return cu_write(k, y, x->dims + start, sizeof(int64_t) * (size_t)n);
}

static wf_status *k_size(wf__kctx *k)
{
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, WF_I64, 0, NULL, &y))) return s;
    int64_t n = k->in[0]->size;
    return cu_write(k, y, &n, sizeof n);
}

/* Element i is nonzero: any bit but a float's sign (NaN counts, -0 does not). */
static bool nonzero_at(const unsigned char *p, wf_dtype t, int64_t i)
{
    switch (t) {
    case WF_F32: { uint32_t u; memcpy(&u, p + 4 * i, 4); return (u & 0x7fffffffu) != 0; }
    case WF_F64: { uint64_t u; memcpy(&u, p + 8 * i, 8); return (u & 0x7fffffffffffffffull) != 0; }
    case WF_F16: case WF_BF16: { uint16_t u; memcpy(&u, p + 2 * i, 2); return (u & 0x7fffu) != 0; }
    case WF_I16: { uint16_t u; memcpy(&u, p + 2 * i, 2); return u != 0; }
    case WF_I32: { uint32_t u; memcpy(&u, p + 4 * i, 4); return u != 0; }
    case WF_I64: { uint64_t u; memcpy(&u, p + 8 * i, 8); return u != 0; }
    default: return p[i] != 0;
    }
}

/* The coordinates of the nonzero elements, [rank, nnz] in row-major order: read back, found on the
 * host and uploaded (the output's shape depends on the values, so the host must see them anyway). */
static wf_status *k_nonzero(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_status *s = cu_enter(k);
    if (s) return s;
    size_t bytes = (size_t)x->size * cu_size(x->dtype);
    unsigned char *buf = cu_host->malloc(bytes ? bytes : 1);
    if (!buf) return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reading back %zu bytes", bytes);
    int64_t nnz = 0, *out = NULL;
    if ((s = cu_read(k, x, buf, bytes))) goto done;
    for (int64_t i = 0; i < x->size; i++) nnz += nonzero_at(buf, x->dtype, i);
    int64_t d[2] = {x->rank, nnz};
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, WF_I64, 2, d, &y)) || !y->size) goto done;
    if (!(out = cu_host->malloc((size_t)y->size * sizeof(int64_t)))) {
        s = cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " coordinates", y->size);
        goto done;
    }
    int64_t idx[WF_MAX_RANK] = {0}, q = 0;
    for (int64_t i = 0; i < x->size; i++) {
        if (nonzero_at(buf, x->dtype, i)) {
            for (int r = 0; r < x->rank; r++) out[r * nnz + q] = idx[r];
            q++;
        }
        for (int r = x->rank - 1; r >= 0; r--) {
            if (++idx[r] < x->dims[r]) break;
            idx[r] = 0;
        }
    }
    s = cu_write(k, y, out, (size_t)y->size * sizeof(int64_t));
done:
    cu_host->free(out);
    cu_host->free(buf);
    return s;
}

static wf_status *k_range(wf__kctx *k)
{
    wf_dtype dt = k->in[0]->dtype;
    for (int i = 0; i < 3; i++)
        if (k->in[i]->dtype != dt || k->in[i]->size != 1)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "start, limit and delta must be scalars of one dtype");
    wf_status *s = cu_enter(k);
    if (s) return s;
    uint64_t raw[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        if ((s = cu_read(k, k->in[i], &raw[i], cu_size(dt)))) return s;
    bool is_int = cu_is_int(dt);
    int64_t n, si = 0, dli = 0;
    double sf = 0, dlf = 0;
    if (is_int) {
        si = cu_int_at(&raw[0], dt, 0);
        int64_t l = cu_int_at(&raw[1], dt, 0);
        dli = cu_int_at(&raw[2], dt, 0);
        if (dli == 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
        if (!wf__ku_range_count_i64(si, l, dli, &n))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "range(%lld, %lld, %lld) has more elements than int64 holds",
                                      (long long)si, (long long)l, (long long)dli);
    } else {
        sf = wf__ku_load_f64(raw, dt, 0);
        double l = wf__ku_load_f64(&raw[1], dt, 0);
        dlf = wf__ku_load_f64(&raw[2], dt, 0);
        if (dlf == 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
        if (!wf__ku_range_count_f64(sf, l, dlf, &n))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "range(%g, %g, %g) is too long", sf, l, dlf);
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dt, 1, &n, &y)) || !n) return s;
    void *buf = cu_host->malloc(y->bytes);
    if (!buf) return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " values", n);
    for (int64_t i = 0; i < n; i++) {
        if (is_int) {
            int64_t v = (int64_t)((uint64_t)si + (uint64_t)i * (uint64_t)dli);
            switch (dt) {
            case WF_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
            case WF_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
            case WF_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
            case WF_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
            default: ((int64_t *)buf)[i] = v; break;
            }
        } else if (dt == WF_F32) {
            ((float *)buf)[i] = (float)(sf + (double)i * dlf);
        } else if (dt == WF_F16 || dt == WF_BF16) { /* through f32, as the CPU's store rounds */
            float f = (float)(sf + (double)i * dlf);
            ((uint16_t *)buf)[i] = dt == WF_F16 ? wf__ku_f2h(f) : wf__ku_f2bf(f);
        } else {
            ((double *)buf)[i] = sf + (double)i * dlf;
        }
    }
    s = cu_write(k, y, buf, y->bytes);
    cu_host->free(buf);
    return s;
}

/* ---- Fill, ConstantOfShape, EyeLike: patterns written on the device ------------------------------------ */

static wf_status *fill_from_dims(wf__kctx *k, wf_dtype dt, uint64_t pattern)
{
    char b[160];
    int64_t v[WF_MAX_RANK];
    int n;
    wf_status *s = cu_read_ints(k, k->in[0], v, WF_MAX_RANK, &n, "shape");
    if (s) return s;
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has a negative dim", cu_tstr(k->in[0], b));
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dt, n, v, &y)) || !y->size) return s;
    return cu_check(k, cuk_fill(cu_of(k)->compute, (int)cu_size(dt), cu_ptr(y), y->size, pattern, 0, 0), "fill kernel");
}

static wf_status *k_fill(wf__kctx *k)
{
    const wf_tensor *v = k->in[1];
    if (v->size != 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "value must hold one element, got %" PRId64, v->size);
    wf_status *s = cu_enter(k);
    uint64_t raw = 0; /* little-endian: the element's bytes are the low bytes */
    if (s || (s = cu_read(k, v, &raw, cu_size(v->dtype)))) return s;
    return fill_from_dims(k, v->dtype, raw);
}

static wf_status *k_constant_of_shape(wf__kctx *k)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, "value");
    wf_status *s = cu_enter(k);
    if (s) return s;
    if (a && a->set && a->t) {
        if (a->t->size != 1)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'value' must hold one element");
        uint64_t raw = 0;
        if ((s = cu_read(k, a->t, &raw, cu_size(a->t->dtype)))) return s;
        return fill_from_dims(k, a->t->dtype, raw);
    }
    return fill_from_dims(k, WF_F32, 0);
}

static wf_status *k_eyelike(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank != 2) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 2-D", cu_tstr(x, b));
    const wf__attr *dta = cu_host->attr_get(k->op, k->attrs, "dtype");
    wf_dtype dt = dta && dta->set ? (wf_dtype)dta->i : x->dtype;
    if (dt < WF_F32 || dt > WF_BOOL) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "dtype %d is not valid", (int)dt);
    int64_t kk = cu_host->attr_get(k->op, k->attrs, "k")->i;
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, dt, 2, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_fill(cu_of(k)->compute, (int)cu_size(dt), cu_ptr(y), y->size, one_bits(dt), x->dims[1], kk),
                    "EyeLike kernel");
}

/* ---- OneHot ------------------------------------------------------------------------------------------- */

static wf_status *k_onehot(wf__kctx *k)
{
    const wf_tensor *ix = k->in[0], *dp = k->in[1], *vals = k->in[2];
    char b[160];
    if (!(WF__DT_BIT(ix->dtype) & WF__DT_NUMERIC) || !(WF__DT_BIT(dp->dtype) & WF__DT_NUMERIC) || dp->size != 1 ||
        vals->size != 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "needs numeric indices, a numeric depth with one value and two values, got %s, %s and %s",
                                  cu_dtype_name(ix->dtype), cu_dtype_name(dp->dtype), cu_tstr(vals, b));
    wf_status *s = cu_enter(k);
    uint64_t raw = 0;
    if (s || (s = cu_read(k, dp, &raw, cu_size(dp->dtype)))) return s;
    double depth_f = wf__ku_load_f64(&raw, dp->dtype, 0);
    if (!(depth_f >= 1) || depth_f > 1e15)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "depth must be positive, got %g", depth_f);
    int64_t depth = (int64_t)depth_f;
    int r = ix->rank + 1;
    if (r > WF_MAX_RANK) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    int ax;
    if (!wf__ku_norm_axis(axis, r, &ax))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for indices %s", axis,
                                  cu_tstr(ix, b));
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = i == ax ? depth : ix->dims[j++];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, vals->dtype, r, d, &y)) || !y->size) return s;
    return cu_check(k, cuk_onehot(cu_of(k)->compute, (int)cu_size(vals->dtype), ix->dtype, cu_ptr(ix), cu_ptr(vals),
                                  cu_ptr(y), y->size, depth, numel(ix->rank - ax, ix->dims + ax)),
                    "OneHot kernel");
}

/* ---- GatherND / ScatterND ----------------------------------------------------------------------------- */

typedef struct nd_info {
    cuk_dims nd;   /* the indexed dims of data and their element strides */
    int64_t n;     /* index tuples */
    int64_t slice; /* elements per tuple */
} nd_info;

/* Checks the shapes of indices [..., last] against dims [bd, bd + last) of data (the kernels check the
 * values). */
static wf_status *nd_check(wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int bd, nd_info *nd)
{
    char b1[160], b2[160];
    int q = ix->rank;
    memset(nd, 0, sizeof *nd);
    if (q < 1 || x->rank < 1 || bd >= q || bd >= x->rank)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "data %s and indices %s need rank >= 1 and above batch_dims %d",
                                  cu_tstr(x, b1), cu_tstr(ix, b2), bd);
    int64_t last = ix->dims[q - 1];
    if (last < 1 || last > x->rank - bd)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the last dim of indices %s must be in [1, %d] for data %s",
                                  cu_tstr(ix, b1), x->rank - bd, cu_tstr(x, b2));
    for (int i = 0; i < bd; i++)
        if (x->dims[i] != ix->dims[i])
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "batch dim %d differs between data %s and indices %s", i,
                                      cu_tstr(x, b1), cu_tstr(ix, b2));
    int64_t st[WF_MAX_RANK];
    wf__ku_strides(x->rank, x->dims, st);
    nd->nd.n = (int)last;
    for (int c = 0; c < last; c++) {
        nd->nd.d[c] = x->dims[bd + c];
        nd->nd.s[c] = st[bd + c];
    }
    nd->slice = numel(x->rank - bd - (int)last, x->dims + bd + last);
    nd->n = ix->size / last;
    return NULL;
}

static wf_status *k_gathernd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    wf_status *s = cu_enter(k);
    if (s || (s = check_index_dtype(k, ix, "indices"))) return s;
    int64_t bd = cu_host->attr_get(k->op, k->attrs, "batch_dims")->i;
    if (bd < 0 || bd >= WF_MAX_RANK)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "batch_dims %" PRId64 " is out of range", bd);
    nd_info nd;
    if ((s = nd_check(k, x, ix, (int)bd, &nd))) return s;
    int q = ix->rank, r = 0;
    int64_t d[2 * WF_MAX_RANK];
    for (int i = 0; i < q - 1; i++) d[r++] = ix->dims[i];
    for (int i = (int)bd + nd.nd.n; i < x->rank; i++) d[r++] = x->dims[i];
    if (r > WF_MAX_RANK) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    char b1[160];
    for (int c = 0; c < nd.nd.n; c++)
        if (nd.nd.d[c] == 0 && nd.n)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices are out of range for the empty dim %d of data %s",
                                      (int)bd + c, cu_tstr(x, b1));
    int64_t batches = numel((int)bd, x->dims), per_batch = batches ? nd.n / batches : 1;
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_ND, (int)bd, ix, x, &err, &site))) return s;
    return cu_check(k, cuk_gathernd(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(ix), ix->dtype == WF_I64,
                                    cu_ptr(y), y->size, &nd.nd, nd.slice, per_batch ? per_batch : 1,
                                    numel(x->rank - (int)bd, x->dims + bd), err, site),
                    "GatherND kernel");
}

static wf_status *k_scatternd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[160], b2[160], b3[160];
    wf_status *s = cu_enter(k);
    if (s || (s = check_index_dtype(k, ix, "indices"))) return s;
    int red = reduction(k);
    if (u->dtype != x->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "updates are %s but data is %s", cu_dtype_name(u->dtype),
                                  cu_dtype_name(x->dtype));
    int q = ix->rank;
    int64_t last = q >= 1 ? ix->dims[q - 1] : -1;
    bool ok = q >= 1 && last >= 1 && last <= x->rank && u->rank == q - 1 + x->rank - last;
    for (int i = 0; ok && i < u->rank; i++) ok = u->dims[i] == (i < q - 1 ? ix->dims[i] : x->dims[last + i - (q - 1)]);
    if (!ok)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "updates %s do not match indices %s and data %s (want indices.shape[:-1] + "
                                  "data.shape[indices.shape[-1]:])",
                                  cu_tstr(u, b1), cu_tstr(ix, b2), cu_tstr(x, b3));
    nd_info nd;
    if ((s = nd_check(k, x, ix, 0, &nd))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || (s = copy_whole(k, y, x))) return s;
    if (!nd.n) return NULL;
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_ND, 0, ix, x, &err, &site))) return s;
    /* an empty output still has its indices checked (every one is out of range for an empty dim) */
    int64_t targets = numel(nd.nd.n, x->dims);
    unsigned *bm = NULL;
    if (y->size && (s = scratch(k, cuk_scatter_bitmap_bytes(targets), (void **)&bm))) return s;
    s = cu_check(k, cuk_scatternd(cu_of(k)->compute, x->dtype, cu_ptr(y), cu_ptr(u), cu_ptr(ix), ix->dtype == WF_I64,
                                  &nd.nd, nd.slice, nd.n, bm, targets, red, err, site),
                 "ScatterND kernel");
    scratch_free(k, bm);
    return s;
}

/* ---- GatherElements / ScatterElements ------------------------------------------------------------------ */

/* Checks the shapes of indices against data on the axis and the other dims (the kernels check the values). */
static wf_status *elements_check(wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int *ax)
{
    char b0[160], b1[160];
    wf_status *s = check_index_dtype(k, ix, "indices");
    if (s) return s;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, ax))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                                  cu_tstr(x, b0));
    if (ix->rank != x->rank)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s must have the rank of data %s", cu_tstr(ix, b1),
                                  cu_tstr(x, b0));
    for (int d = 0; d < x->rank; d++)
        if (d != *ax && ix->dims[d] > x->dims[d])
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s is larger than data %s in dim %d",
                                      cu_tstr(ix, b1), cu_tstr(x, b0), d);
    if (x->dims[*ax] == 0 && ix->size)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices are out of range for the empty axis %d of data %s", *ax,
                                  cu_tstr(x, b0));
    return NULL;
}

static void idx_dims(const wf_tensor *ix, cuk_dims *id)
{
    memset(id, 0, sizeof *id);
    id->n = ix->rank;
    for (int i = 0; i < ix->rank; i++) id->d[i] = ix->dims[i];
}

static wf_status *k_gather_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    int ax;
    wf_status *s = cu_enter(k);
    if (s || (s = elements_check(k, x, ix, &ax))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, ix->rank, ix->dims, &y)) || !y->size) return s;
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_ELEMENTS, ax, ix, x, &err, &site))) return s;
    int64_t xst[WF_MAX_RANK];
    wf__ku_strides(x->rank, x->dims, xst);
    cuk_dims id;
    idx_dims(ix, &id);
    return cu_check(k, cuk_gather_el(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(ix), ix->dtype == WF_I64,
                                     cu_ptr(y), y->size, &id, xst, ax, x->dims[ax], err, site),
                    "GatherElements kernel");
}

static wf_status *k_scatter_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[160], b2[160];
    if (u->rank != ix->rank || memcmp(u->dims, ix->dims, sizeof(int64_t) * (size_t)ix->rank) || u->dtype != x->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "updates %s must have the shape of indices %s and data's dtype",
                                  cu_tstr(u, b2), cu_tstr(ix, b1));
    int ax;
    wf_status *s = cu_enter(k);
    if (s || (s = elements_check(k, x, ix, &ax))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || (s = copy_whole(k, y, x))) return s;
    if (!ix->size) return NULL;
    cuk_err *err;
    unsigned long long site;
    unsigned *bm;
    if ((s = cu_err_site(k, CU_SITE_ELEMENTS, ax, ix, x, &err, &site)) ||
        (s = scratch(k, cuk_scatter_bitmap_bytes(y->size), (void **)&bm)))
        return s;
    int64_t yst[WF_MAX_RANK];
    wf__ku_strides(x->rank, x->dims, yst);
    cuk_dims id;
    idx_dims(ix, &id);
    s = cu_check(k, cuk_scatter_el(cu_of(k)->compute, x->dtype, cu_ptr(y), cu_ptr(u), cu_ptr(ix), ix->dtype == WF_I64,
                                   ix->size, &id, yst, ax, x->dims[ax], bm, y->size, reduction(k), err, site),
                 "ScatterElements kernel");
    scratch_free(k, bm);
    return s;
}

/* ---- Trilu, CumSum, ReverseSequence ------------------------------------------------------------------- */

static wf_status *scalar_int(wf__kctx *k, int idx, const char *what, int64_t *v)
{
    const wf_tensor *t = k->in[idx];
    char b[160];
    if ((t->dtype != WF_I32 && t->dtype != WF_I64) || t->rank > 1 || t->size != 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be one i32 or i64 value", what, cu_tstr(t, b));
    uint64_t raw = 0;
    wf_status *s = cu_read(k, t, &raw, cu_size(t->dtype));
    if (!s) *v = cu_int_at(&raw, t->dtype, 0);
    return s;
}

static wf_status *k_trilu(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 2", cu_tstr(x, b));
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], kk = 0;
    wf_status *s = cu_enter(k);
    if (s || (k->n_in > 1 && k->in[1] && (s = scalar_int(k, 1, "k", &kk)))) return s;
    /* clamp so row + k cannot overflow; beyond +-(R + C) the answer no longer changes */
    int64_t lim = R + C + 1;
    kk = kk > lim ? lim : kk < -lim ? -lim : kk;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    int upper = cu_host->attr_get(k->op, k->attrs, "upper")->i != 0;
    return cu_check(k, cuk_trilu(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), y->size, R, C, kk, upper),
                    "Trilu kernel");
}

static wf_status *k_cumsum(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    int64_t axis;
    int a;
    wf_status *s = cu_enter(k);
    if (s || (s = scalar_int(k, 1, "axis", &axis))) return s;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                                  cu_tstr(x, b));
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    int excl = cu_host->attr_get(k->op, k->attrs, "exclusive")->i != 0,
        rev = cu_host->attr_get(k->op, k->attrs, "reverse")->i != 0, prod = !strcmp(k->op->name, "CumProd");
    return cu_check(k, cuk_cumsum(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), y->size, x->dims[a],
                                  numel(x->rank - a - 1, x->dims + a + 1), excl, rev, prod),
                    "cumulative kernel");
}

static wf_status *k_reverse_sequence(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *l = k->in[1];
    char b0[160], b1[160];
    int ba = (int)cu_host->attr_get(k->op, k->attrs, "batch_axis")->i,
        ta = (int)cu_host->attr_get(k->op, k->attrs, "time_axis")->i;
    wf_status *s = cu_enter(k);
    if (s || (s = check_index_dtype(k, l, "sequence_lens"))) return s;
    if (x->rank < 2 || l->rank != 1 || (ba != 0 && ba != 1) || ta != 1 - ba || l->dims[0] != x->dims[ba])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens %s must hold one length per batch of input %s",
                                  cu_tstr(l, b1), cu_tstr(x, b0));
    int64_t B = x->dims[ba], T = x->dims[ta];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !B) return s;
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_SEQLEN, ta, l, x, &err, &site))) return s;
    return cu_check(k, cuk_revseq(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(l), l->dtype == WF_I64,
                                  cu_ptr(y), y->size, ba, B, T, numel(x->rank - 2, x->dims + 2), err, site),
                    "ReverseSequence kernel");
}

#define RANGE_DT WF__DT_NUMERIC

const wf__kernel_def cu_kernels_index[] = {
    {"Shape", "GPU", WF__DT_ALL, 0, k_shape, NULL, 0},
    {"Size", "GPU", WF__DT_ALL, 0, k_size, NULL, 0},
    {"NonZero", "GPU", WF__DT_ALL, 0, k_nonzero, NULL, 0},
    {"Range", "GPU", RANGE_DT, 0, k_range, NULL, 0},
    {"Fill", "GPU", WF__DT_ALL, 1, k_fill, NULL, 0},
    {"ConstantOfShape", "GPU", WF__DT_ALL, -1, k_constant_of_shape, NULL, 0},
    {"EyeLike", "GPU", WF__DT_ALL, -1, k_eyelike, NULL, 0},
    {"OneHot", "GPU", WF__DT_ALL, 2, k_onehot, NULL, 0},
    {"GatherND", "GPU", WF__DT_ALL, 0, k_gathernd, NULL, 0},
    {"ScatterND", "GPU", WF__DT_ALL, 0, k_scatternd, NULL, 0},
    {"GatherElements", "GPU", WF__DT_ALL, 0, k_gather_elements, NULL, 0},
    {"ScatterElements", "GPU", WF__DT_ALL, 0, k_scatter_elements, NULL, 0},
    {"Trilu", "GPU", WF__DT_ALL, 0, k_trilu, NULL, 0},
    {"CumSum", "GPU", WF__DT_NUMERIC, 0, k_cumsum, NULL, 0},
    {"CumProd", "GPU", WF__DT_NUMERIC, 0, k_cumsum, NULL, 0},
    {"ReverseSequence", "GPU", WF__DT_ALL, 0, k_reverse_sequence, NULL, 0},
    {0},
};
