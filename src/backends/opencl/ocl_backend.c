/*
 * The OpenCL backend plugin: every device of every OpenCL platform becomes an OPENCL device. Memory
 * is cl_mem chunks that the core carves up; kernels run on an in-order compute queue and host<->device
 * copies on a second in-order queue (through pinned staging on discrete devices), so they overlap; the
 * two queues are the device's compute and copy streams, with cl_events as its events (device contract
 * v2, "streams and events" below);
 * programs are built from source on first use and cached per device and on disk (keyed by source,
 * options, device and driver), so a second process skips the compiler.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/opencl/ocl.h"
#include "ops/kutil_cache.h"

const wf_host_api *ocl_host;

struct ocl_prog {
    ocl_prog *next;
    uint64_t key;
    cl_program prog;
    int n_kernels;
    struct {
        char *name;
        cl_kernel k;
    } kernels[32];
};

/* A pinned staging buffer of asynchronous uploads (see "streams and events"). */
struct ocl_pin {
    struct ocl_pin *next;
    cl_mem mem;
    void *ptr;
    size_t bytes;
    cl_event busy; /* the last transfer from it, NULL if none */
};

typedef struct ocl_backend {
    int n;
    cl_platform_id plat[16];
    cl_device_id dev[64];
    cl_platform_id dev_plat[64];
} ocl_backend;

const char *ocl_err(cl_int e)
{
    switch (e) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_MISALIGNED_SUB_BUFFER_OFFSET: return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
    default: return "an OpenCL error";
    }
}

wf_status *ocl_fail(const wf__kctx *k, cl_int e, const char *what)
{
    return ocl_host->kctx_fail(k, WF_INTERNAL, "OpenCL %s failed on %s: %s (%d)", what, k->device->short_name, ocl_err(e),
                               (int)e);
}

const char *ocl_type(wf_dtype t)
{
    switch (t) {
    case WF_F32: return "float";
    case WF_F64: return "double";
    case WF_F16: return "half";
    case WF_BF16: return "ushort";
    case WF_I8: return "char";
    case WF_U8: return "uchar";
    case WF_I16: return "short";
    case WF_I32: return "int";
    case WF_I64: return "long";
    case WF_BOOL: return "uchar";
    default: return "void";
    }
}

/* ---- the first-run compile notice ------------------------------------------------------------------- */

/* A first run with an empty cache can spend many seconds in the OpenCL compiler (PoCL builds every
 * program with LLVM) with nothing on the screen. Once source builds on a device have taken longer than
 * WEFT_OCL_COMPILE_NOTICE_MS milliseconds in this process (default 1000; 0 prints it at the first
 * build, a negative value never), one line on stderr says so. clBuildProgram blocks, and one program
 * can take seconds by itself, so a watchdog thread, started by the first source build, prints the
 * line while the build runs rather than after it. */
struct ocl_notice {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* on CLOCK_MONOTONIC */
    pthread_t thread;
    bool started, done, stop; /* thread started; line printed (or never will be); device closing */
    bool building;
    uint64_t since_ns;       /* when the running build began */
    uint64_t spent_ns;       /* the finished builds' time */
    uint64_t limit_ns;
    char dev[64];            /* "OPENCL:0" */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *notice_main(void *arg)
{
    struct ocl_notice *n = arg;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        uint64_t now = mono_ns();
        uint64_t spent = n->spent_ns + (n->building ? now - n->since_ns : 0);
        /* checked before `stop`, so that a limit already passed is reported however late the thread runs */
        if (spent >= n->limit_ns) {
            fprintf(stderr, "compiling OpenCL kernels for %s (cached for next time)\n", n->dev);
            break;
        }
        if (n->stop) break;
        if (!n->building) {
            pthread_cond_wait(&n->cv, &n->mu);
            continue;
        }
        uint64_t at = now + (n->limit_ns - spent);
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        pthread_cond_timedwait(&n->cv, &n->mu, &ts);
    }
    n->done = true;
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* The notice's state for a device being opened, or NULL when it is turned off or cannot be had (the
 * line is a courtesy: nothing fails without it). */
static struct ocl_notice *notice_new(void)
{
    long ms = 1000;
    const char *env = getenv("WEFT_OCL_COMPILE_NOTICE_MS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (!*end) ms = v;
    }
    if (ms < 0) return NULL;
    struct ocl_notice *n = ocl_host->malloc(sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->limit_ns = (uint64_t)ms * 1000000u;
    pthread_condattr_t ca;
    bool cv_ok = false;
    if (pthread_condattr_init(&ca) == 0) {
        cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&n->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!cv_ok) {
        ocl_host->free(n);
        return NULL;
    }
    pthread_mutex_init(&n->mu, NULL);
    return n;
}

static void notice_free(struct ocl_notice *n)
{
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    n->stop = true;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    if (n->started) pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    ocl_host->free(n);
}

/* Around each build from source (under the device's mu, so one at a time per device). */
static void notice_build_begin(ocl_dev *d, const char *dev_name)
{
    struct ocl_notice *n = d->notice;
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    if (!n->done) {
        n->building = true;
        n->since_ns = mono_ns();
        if (!n->started) {
            snprintf(n->dev, sizeof n->dev, "%s", dev_name);
            n->started = pthread_create(&n->thread, NULL, notice_main, n) == 0;
            if (!n->started) n->done = true;
        }
        pthread_cond_signal(&n->cv);
    }
    pthread_mutex_unlock(&n->mu);
}

static void notice_build_end(ocl_dev *d)
{
    struct ocl_notice *n = d->notice;
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    if (n->building) n->spent_ns += mono_ns() - n->since_ns;
    n->building = false;
    pthread_cond_signal(&n->cv); /* a limit passed during the build is still reported */
    pthread_mutex_unlock(&n->mu);
}

/* ---- program cache ---------------------------------------------------------------------------------- */

/* A binary from the disk cache (ops/kutil_cache.h), or NULL. */
static cl_program load_cached(ocl_dev *d, uint64_t key, const char *opts)
{
    char path[1024];
    wf__ku_cache_path(path, sizeof path, "opencl", key, "bin");
    size_t blen = 0;
    unsigned char *bin = wf__ku_cache_read(path, ocl_host->malloc, ocl_host->free, (size_t)1 << 30, &blen);
    cl_program p = NULL;
    if (bin) {
        const unsigned char *bp = bin;
        cl_int st, bst;
        p = clCreateProgramWithBinary(d->ctx, 1, &d->id, &blen, &bp, &bst, &st);
        if (p && (st != CL_SUCCESS || bst != CL_SUCCESS || clBuildProgram(p, 1, &d->id, opts, NULL, NULL) != CL_SUCCESS)) {
            clReleaseProgram(p);
            p = NULL; /* a stale or foreign binary: rebuild from source */
        }
    }
    ocl_host->free(bin);
    return p;
}

static void store_cached(ocl_dev *d, uint64_t key, cl_program p)
{
    (void)d;
    size_t len = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || !len) return;
    unsigned char *bin = ocl_host->malloc(len);
    if (!bin) return;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
        char path[1024];
        wf__ku_cache_path(path, sizeof path, "opencl", key, "bin");
        wf__ku_cache_write(path, NULL, 0, bin, len);
    }
    ocl_host->free(bin);
}

wf_status *ocl_kernel(wf__kctx *k, const char *prog_name, const char *src, const char *opts, const char *kernel,
                      cl_kernel *out)
{
    ocl_dev *d = ocl_of(k);
    uint64_t key = wf__ku_fnv(wf__ku_fnv(wf__ku_fnv(wf__ku_fnv(WF__FNV_SEED, src), opts), d->name), d->version);
    wf_status *s = NULL;
    pthread_mutex_lock(&d->mu);
    ocl_prog *p;
    for (p = d->progs; p && p->key != key; p = p->next) {}
    if (!p) {
        cl_program prog = load_cached(d, key, opts);
        if (!prog) {
            cl_int st;
            prog = clCreateProgramWithSource(d->ctx, 1, &src, NULL, &st);
            if (!prog) {
                s = ocl_fail(k, st, "program creation");
                goto done;
            }
            notice_build_begin(d, k->device->short_name);
            st = clBuildProgram(prog, 1, &d->id, opts, NULL, NULL);
            notice_build_end(d);
            if (st != CL_SUCCESS) {
                char log[2048] = "";
                clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
                clReleaseProgram(prog);
                s = ocl_host->kctx_fail(k, WF_INTERNAL, "OpenCL program '%s' failed to build on %s: %.1500s", prog_name,
                                        k->device->short_name, log);
                goto done;
            }
            store_cached(d, key, prog);
        }
        p = ocl_host->malloc(sizeof *p);
        if (!p) {
            clReleaseProgram(prog);
            s = ocl_host->status(WF_OUT_OF_MEMORY, "out of memory caching an OpenCL program");
            goto done;
        }
        memset(p, 0, sizeof *p);
        p->key = key;
        p->prog = prog;
        p->next = d->progs;
        d->progs = p;
    }
    for (int i = 0; i < p->n_kernels; i++)
        if (!strcmp(p->kernels[i].name, kernel)) {
            *out = p->kernels[i].k;
            goto done;
        }
    if (p->n_kernels == 32) {
        s = ocl_host->kctx_fail(k, WF_INTERNAL, "OpenCL program '%s' has too many kernels", prog_name);
        goto done;
    }
    cl_int st;
    cl_kernel kk = clCreateKernel(p->prog, kernel, &st);
    if (!kk) {
        s = ocl_fail(k, st, kernel);
        goto done;
    }
    size_t nl = strlen(kernel) + 1;
    char *nm = ocl_host->malloc(nl);
    if (!nm) {
        clReleaseKernel(kk);
        s = ocl_host->status(WF_OUT_OF_MEMORY, "out of memory caching an OpenCL kernel");
        goto done;
    }
    memcpy(nm, kernel, nl);
    p->kernels[p->n_kernels].name = nm;
    p->kernels[p->n_kernels].k = kk;
    p->n_kernels++;
    *out = kk;
done:
    pthread_mutex_unlock(&d->mu);
    return s;
}

static wf_status *launch(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, int dims, const size_t *global,
                         const size_t *local, bool arm)
{
    ocl_dev *d = ocl_of(k);
    for (int i = 0; i < dims; i++)
        if (global[i] == 0) return NULL; /* nothing to do */
    cl_int st = CL_SUCCESS;
    /* arguments live in the cl_kernel object: set and enqueue together; a checking launch is counted
     * with its enqueue, so that a read of the record (err_enqueue_read) is before or after both */
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < n_args && st == CL_SUCCESS; i++) st = clSetKernelArg(kern, (cl_uint)i, args[i].size, args[i].value);
    if (st == CL_SUCCESS) st = clEnqueueNDRangeKernel(d->q, kern, (cl_uint)dims, NULL, global, local, 0, NULL, NULL);
    if (st == CL_SUCCESS && arm) atomic_fetch_add(&d->err_armed, 1);
    pthread_mutex_unlock(&d->mu);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "kernel launch");
}

wf_status *ocl_launch(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, int dims, const size_t *global,
                      const size_t *local)
{
    return launch(k, kern, n_args, args, dims, global, local, false);
}

wf_status *ocl_launch_checked(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, int dims,
                              const size_t *global)
{
    return launch(k, kern, n_args, args, dims, global, NULL, true);
}

/* ---- index errors ----------------------------------------------------------------------------------
 * A checking kernel (ocl_shape_index.c's, or check_vals below for the ops that check the values of an
 * integer input: ocl_check_ints) that meets a bad index writes it into the device's record
 * (err_mem: the site id of its launch, set from 0 by compare-and-swap so the first one wins, then the
 * index, its position and entry) instead of the host reading the indices back before the launch. The
 * host keeps the last OCL_ERR_SITES launches (node, op, axis, data's shape), so the message can be the
 * one the host check gave. The record is read back without blocking (err_enqueue_read, then reset, both
 * on q) by the first event recorded on q after a checking launch: the event completes after the read,
 * and event_query / event_sync / the notify callback return the index as its error. The executor
 * records a node's event under the device's enqueue lock right after its commands, so that is the
 * node's own event. An event released before anyone looked at its completion (the executor records a
 * node's event again after an output copy) hands its reads on to the next event recorded on q
 * (err_orphans); synchronize and the synchronous copy_to_host read what is armed and orphaned. The
 * executor's wrapper of an event's error names the event's node, so the message leaves the node out
 * when the read is the event's own and its launches were one node's (ocl_errbuf.own, one_node), and
 * names it otherwise. */

#define OCL_ERR_SITES 512

typedef struct ocl_err_rec {
    cl_uint site, pad;
    cl_long value, pos, entry;
} ocl_err_rec;

struct ocl_err_site {
    unsigned id;
    int kind, axis;
    char node[192], op[32], x[160];
};

/* One read of the record: its host copy, complete once `read` is. */
typedef struct ocl_errbuf {
    struct ocl_errbuf *next;
    cl_event read;
    ocl_err_rec rec;
    atomic_bool seen; /* an event's completion has reported it (or found it clean) */
    bool one_node;    /* the launches it covers were all one node's (err_one when it was enqueued) */
    bool own;         /* read by the event it is on, right after that node's commands (not handed on) */
} ocl_errbuf;

/* A wf_event: the cl_event and the reads of the record it carries. */
typedef struct ocl_ev {
    cl_event e;      /* the command (its device times) */
    cl_event done;   /* when not NULL, completion: a user event set once the host part is done too (a
                        staged download's copy out of pinned memory); else e's */
    ocl_errbuf *errs;
} ocl_ev;

static cl_event ev_done(const ocl_ev *w) { return w->done ? w->done : w->e; }

wf_status *ocl_err_site(wf__kctx *k, int kind, int axis, const char *data_shape, cl_mem *err, cl_uint *site)
{
    ocl_dev *d = ocl_of(k);
    wf_status *s = NULL;
    pthread_mutex_lock(&d->err_mu);
    if (!d->err_mem) {
        ocl_err_rec zero;
        memset(&zero, 0, sizeof zero);
        cl_int st = CL_SUCCESS;
        cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero, &st);
        struct ocl_err_site *ring = m ? ocl_host->malloc(sizeof *ring * OCL_ERR_SITES) : NULL;
        if (!ring) {
            if (m) clReleaseMemObject(m);
            s = m ? ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the index-error record of %s",
                                        k->device->short_name)
                  : ocl_fail(k, st, "index-error record allocation");
            goto out;
        }
        memset(ring, 0, sizeof *ring * OCL_ERR_SITES);
        d->err_mem = m;
        d->err_sites = ring;
    }
    if (++d->err_next == 0) d->err_next = 1; /* 0 is "no error" */
    struct ocl_err_site *r = &d->err_sites[d->err_next % OCL_ERR_SITES];
    r->id = d->err_next;
    r->kind = kind;
    r->axis = axis;
    snprintf(r->node, sizeof r->node, "%s", k->node ? k->node : "?");
    snprintf(r->op, sizeof r->op, "%s", k->op->name);
    snprintf(r->x, sizeof r->x, "%s", data_shape);
    if (!d->err_any) {
        snprintf(d->err_node, sizeof d->err_node, "%s", r->node);
        d->err_any = d->err_one = true;
    } else if (strcmp(d->err_node, r->node) != 0) {
        d->err_one = false;
    }
    *err = d->err_mem;
    *site = r->id;
out:
    pthread_mutex_unlock(&d->err_mu);
    return s;
}

/* Value checks (ocl_check_ints): one work item per element of an integer tensor of dtype code dt. */
static const char *g_vcheck_src =
    "__kernel void check_vals(__global const char *p, ulong off, int dt, long lo, long hi, int bad_inside,\n"
    "                         int has_skip, long skip, long ent, __global int *err, uint site) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long v;\n"
    "  switch (dt) {\n"
    "  case 0: v = p[off + g]; break;\n"
    "  case 1: v = ((__global const uchar *)p)[off + g]; break;\n"
    "  case 2: v = ((__global const short *)p)[off + g]; break;\n"
    "  case 3: v = ((__global const int *)p)[off + g]; break;\n"
    "  default: v = ((__global const long *)p)[off + g]; break;\n"
    "  }\n"
    "  if (has_skip && v == skip) return;\n"
    "  if ((v >= lo && v <= hi) != (bad_inside != 0)) return;\n"
    "  if (atomic_cmpxchg((volatile __global int *)err, 0, (int)site) == 0) {\n"
    "    __global long *e = (__global long *)err;\n"
    "    e[1] = v;\n"
    "    e[2] = (long)g;\n"
    "    e[3] = ent;\n"
    "  }\n"
    "}\n";

wf_status *ocl_check_ints(wf__kctx *k, const wf_tensor *t, int kind, int64_t lo, int64_t hi, bool bad_inside,
                          const int64_t *skip, int64_t entry, const char *data_shape)
{
    if (!t->size) return NULL;
    cl_int dt = ocl_int_code(t->dtype);
    if (dt < 0)
        return ocl_host->kctx_fail(k, WF_INTERNAL, "a value check on %s needs an integer tensor, got dtype %d",
                                   k->device->short_name, (int)t->dtype);
    cl_kernel kern;
    cl_mem em;
    cl_uint site;
    WF__TRY(ocl_kernel(k, "value_check", g_vcheck_src, "", "check_vals", &kern));
    WF__TRY(ocl_err_site(k, kind, 0, data_shape, &em, &site));
    cl_mem tm = ocl_mem(t);
    cl_ulong to = ocl_off(t); /* in elements of the loaded type */
    cl_long l = lo, h = hi, sk = skip ? *skip : 0, ent = entry;
    cl_int bi = bad_inside, hs = skip != NULL;
    ocl_arg args[] = {OCL_ARG(tm), OCL_ARG(to), OCL_ARG(dt), OCL_ARG(l),  OCL_ARG(h), OCL_ARG(bi),
                      OCL_ARG(hs), OCL_ARG(sk), OCL_ARG(ent), OCL_ARG(em), OCL_ARG(site)};
    size_t g = (size_t)t->size;
    return ocl_launch_checked(k, kern, 11, args, 1, &g);
}

/* If a checking launch was enqueued since the last read: a read of the record into a new buffer and a
 * reset of it, on q (under mu, so no checking launch falls between them); *out NULL if none was. */
static cl_int err_enqueue_read(ocl_dev *d, ocl_errbuf **out)
{
    *out = NULL;
    if (!atomic_load(&d->err_armed)) return CL_SUCCESS;
    ocl_errbuf *b = ocl_host->malloc(sizeof *b);
    if (!b) return CL_OUT_OF_HOST_MEMORY;
    memset(b, 0, sizeof *b);
    atomic_init(&b->seen, false);
    cl_int st = CL_SUCCESS;
    pthread_mutex_lock(&d->mu);
    int armed = atomic_exchange(&d->err_armed, 0);
    if (armed) {
        pthread_mutex_lock(&d->err_mu);
        b->one_node = d->err_any && d->err_one;
        d->err_any = false;
        pthread_mutex_unlock(&d->err_mu);
        static const cl_uint zero = 0;
        st = clEnqueueReadBuffer(d->q, d->err_mem, CL_FALSE, 0, sizeof b->rec, &b->rec, 0, NULL, &b->read);
        if (st == CL_SUCCESS) st = clEnqueueFillBuffer(d->q, d->err_mem, &zero, sizeof zero, 0, sizeof b->rec, 0, NULL, NULL);
        if (st != CL_SUCCESS) atomic_fetch_add(&d->err_armed, armed); /* read next time */
    }
    pthread_mutex_unlock(&d->mu);
    if (st != CL_SUCCESS || !armed) {
        if (b->read) {
            clWaitForEvents(1, &b->read);
            clReleaseEvent(b->read);
        }
        ocl_host->free(b);
        return st;
    }
    *out = b;
    return CL_SUCCESS;
}

/* The error of a completed read: the host check's message, naming the node unless the executor's
 * wrapper of the event it is on will (b->own and b->one_node: the event is that node's own). */
static wf_status *err_status(ocl_dev *d, const ocl_errbuf *b)
{
    const ocl_err_rec *rec = &b->rec;
    if (!rec->site) return NULL;
    pthread_mutex_lock(&d->err_mu);
    struct ocl_err_site r = d->err_sites[rec->site % OCL_ERR_SITES];
    pthread_mutex_unlock(&d->err_mu);
    long long v = (long long)rec->value, pos = (long long)rec->pos, ent = (long long)rec->entry;
    if (r.id != rec->site)
        return ocl_host->status(WF_INVALID_ARGUMENT,
                                "an index kernel on %s met index %lld out of range (its node has left the record of "
                                "the last %d checking launches)", d->name, v, OCL_ERR_SITES);
    /* the wording of the host checks these replace (those of the CPU) */
    char who[256] = "";
    if (!b->own || !b->one_node) snprintf(who, sizeof who, "node '%s' (%s): ", r.node, r.op);
    switch (r.kind) {
    case OCL_SITE_ND:
        return ocl_host->status(WF_INVALID_ARGUMENT,
                                "%sindex %lld (tuple %lld, entry %lld) is out of range for dim %lld of data %s",
                                who, v, pos, ent, (long long)r.axis + ent, r.x);
    case OCL_SITE_SEQLEN:
        return ocl_host->status(WF_INVALID_ARGUMENT,
                                "%ssequence length %lld of batch %lld is outside [0, %lld] for input %s",
                                who, v, pos, ent, r.x);
    case OCL_SITE_DIV_ZERO:
        return ocl_host->status(WF_INVALID_ARGUMENT, "%sinteger division by zero (%s divisor, element %lld)",
                                who, r.x, pos);
    case OCL_SITE_NEG_POW:
        return ocl_host->status(WF_INVALID_ARGUMENT,
                                "%sintegers to negative integer powers are not allowed (exponent %lld at "
                                "element %lld)",
                                who, v, pos);
    case OCL_SITE_TARGET:
        return ocl_host->status(WF_INVALID_ARGUMENT,
                                "%starget %lld at position %lld is not a class in [0, %lld) nor ignore_index",
                                who, v, pos, ent);
    case OCL_SITE_ROI_BATCH:
        return ocl_host->status(WF_INVALID_ARGUMENT, "%sbatch_indices[%lld] = %lld is outside [0, %lld)",
                                who, pos, v, ent);
    case OCL_SITE_POSITION:
        return ocl_host->status(WF_INVALID_ARGUMENT, "%sposition id %lld is outside the caches' %lld positions",
                                who, v, ent);
    case OCL_SITE_UNPOOL:
        return ocl_host->status(WF_INVALID_ARGUMENT, "%sindex %lld is outside the %lld unpooled elements", who, v, ent);
    case OCL_SITE_RNN_LENS:
        return ocl_host->status(WF_INVALID_ARGUMENT, "%ssequence_lens[%lld] = %lld is outside [0, %lld]", who, pos, v,
                                ent);
    default: break;
    }
    return ocl_host->status(WF_INVALID_ARGUMENT,
                            "%sindex %lld (at position %lld) is out of range for axis %d of data %s", who, v, pos, r.axis, r.x);
}

/* The first error of a list of completed reads; all of them are marked seen. */
static wf_status *errs_check(ocl_dev *d, ocl_errbuf *list)
{
    wf_status *s = NULL;
    for (ocl_errbuf *b = list; b; b = b->next) {
        if (!s) s = err_status(d, b);
        atomic_store(&b->seen, true);
    }
    return s;
}

/* Frees a list of reads; those no completion has looked at go to err_orphans, for the next event. */
static void errs_free(ocl_dev *d, ocl_errbuf *list)
{
    for (ocl_errbuf *b = list, *bn; b; b = bn) {
        bn = b->next;
        if (!atomic_load(&b->seen)) {
            b->own = false; /* the next event is another node's, or this one's recorded again */
            pthread_mutex_lock(&d->err_mu);
            b->next = d->err_orphans;
            d->err_orphans = b;
            pthread_mutex_unlock(&d->err_mu);
            continue;
        }
        if (b->read) clReleaseEvent(b->read);
        ocl_host->free(b);
    }
}

/* Under no lock, on the host (synchronize, copy_to_host): reads what is armed, waits for it and the
 * orphaned reads, and returns the first error, naming its node. */
static wf_status *err_take(ocl_dev *d)
{
    ocl_errbuf *b = NULL;
    cl_int st = err_enqueue_read(d, &b);
    if (st != CL_SUCCESS)
        return ocl_host->status(WF_INTERNAL, "reading the index-error record of %s failed: %s", d->name, ocl_err(st));
    pthread_mutex_lock(&d->err_mu);
    ocl_errbuf *list = d->err_orphans;
    d->err_orphans = NULL;
    pthread_mutex_unlock(&d->err_mu);
    if (b) {
        b->next = list;
        list = b;
    }
    for (ocl_errbuf *p = list; p && st == CL_SUCCESS; p = p->next) st = clWaitForEvents(1, &p->read);
    wf_status *s = st == CL_SUCCESS ? errs_check(d, list)
                                    : ocl_host->status(WF_INTERNAL, "reading the index-error record of %s failed: %s",
                                                       d->name, ocl_err(st));
    for (ocl_errbuf *p = list; p; p = p->next) atomic_store(&p->seen, true);
    errs_free(d, list);
    return s;
}

static void err_release(ocl_dev *d)
{
    for (ocl_errbuf *p = d->err_orphans; p; p = p->next) atomic_store(&p->seen, true);
    errs_free(d, d->err_orphans);
    d->err_orphans = NULL;
    if (d->err_mem) clReleaseMemObject(d->err_mem);
    ocl_host->free(d->err_sites);
}

/* ---- the vtable ------------------------------------------------------------------------------------- */

static int device_count(void *b) { return ((ocl_backend *)b)->n; }

static wf_status *device_info(void *b, int i, wf_backend_device_info *out)
{
    ocl_backend *be = b;
    cl_device_id id = be->dev[i];
    char name[128] = "", vendor[64] = "";
    cl_uint cu = 0, mhz = 0, align = 0;
    cl_ulong mem = 0;
    clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    clGetDeviceInfo(id, CL_DEVICE_VENDOR, sizeof vendor - 1, vendor, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align, &align, NULL);
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "OPENCL");
    snprintf(out->description, sizeof out->description, "%s (%s)", name, vendor);
    out->compute_units = (int)cu;
    out->memory_bytes = mem;
    cl_device_type type = 0;
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    /* Rough defaults until calibration measures them. A GPU: 64 f32 FMA lanes per compute unit. A CPU
     * device (PoCL) shares the cores of CPU:0, whose oneDNN kernels are several times faster than our
     * OpenCL ones there: a quarter of 8 lanes per unit, so the cost model prefers CPU:0. */
    bool gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    out->peak_gflops = cu * (mhz ? mhz : 1000) * 2.0 * (gpu ? 64 : 8 * 0.25) / 1e3;
    out->mem_gbps = gpu ? 200 : 10;
    out->link_gbps = gpu ? 12 : 10;
    out->link_latency_us = 20;
    out->shares_host_cores = (type & CL_DEVICE_TYPE_CPU) != 0;
    out->alignment = align >= 8 * 128 ? align / 8 : 128;
    /* f16 values are stored as half and computed in float (vload_half), so no dtype is faster here than
     * f32 in compute: fast_dtypes stays 0 and the mixed-precision pass leaves this device's ops in f32 */
    snprintf(out->precision_note, sizeof out->precision_note, "f16 stored as half, computed in f32; no bf16");
    return NULL;
}

static wf_status *device_open(void *b, int i, void **out)
{
    ocl_backend *be = b;
    ocl_dev *d = ocl_host->malloc(sizeof *d);
    if (!d) return ocl_host->status(WF_OUT_OF_MEMORY, "out of memory opening an OpenCL device");
    memset(d, 0, sizeof *d);
    d->id = be->dev[i];
    d->platform = be->dev_plat[i];
    cl_int st;
    d->ctx = clCreateContext(NULL, 1, &d->id, NULL, NULL, &st);
    if (d->ctx) d->q = clCreateCommandQueue(d->ctx, d->id, CL_QUEUE_PROFILING_ENABLE, &st);
    if (d->q) d->copy_q = clCreateCommandQueue(d->ctx, d->id, CL_QUEUE_PROFILING_ENABLE, &st);
    if (d->copy_q) d->aux_q = clCreateCommandQueue(d->ctx, d->id, 0, &st);
    if (!d->ctx || !d->q || !d->copy_q || !d->aux_q) {
        if (d->copy_q) clReleaseCommandQueue(d->copy_q);
        if (d->q) clReleaseCommandQueue(d->q);
        if (d->ctx) clReleaseContext(d->ctx);
        ocl_host->free(d);
        return ocl_host->status(WF_UNAVAILABLE, "OpenCL device %d: context or queue creation failed: %s", i, ocl_err(st));
    }
    clGetDeviceInfo(d->id, CL_DEVICE_NAME, sizeof d->name - 1, d->name, NULL);
    clGetDeviceInfo(d->id, CL_DRIVER_VERSION, sizeof d->version - 1, d->version, NULL);
    char ext[8192] = "";
    clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    d->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
    d->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d->max_wg, &d->max_wg, NULL);
    clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof d->mem_align, &d->mem_align, NULL);
    d->mem_align /= 8;
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->copy_mu, NULL);
    pthread_mutex_init(&d->err_mu, NULL);
    atomic_init(&d->err_armed, 0);
    const char *nr = getenv("WEFT_OCL_NO_READBACK");
    d->no_readback = nr && *nr && strcmp(nr, "0") != 0;
    d->staging = -1;
    d->notice = notice_new();
    *out = d;
    return NULL;
}

static void device_close(void *dev)
{
    ocl_dev *d = dev;
    clFinish(d->q);
    clFinish(d->copy_q);
    for (int i = 0; i < 2; i++) {
        if (d->stage_ev[i]) clReleaseEvent(d->stage_ev[i]);
        if (d->stage_ptr[i]) clEnqueueUnmapMemObject(d->copy_q, d->stage_mem[i], d->stage_ptr[i], 0, NULL, NULL);
    }
    clFinish(d->copy_q);
    err_release(d);
    for (struct ocl_pin *p = d->pins, *pn; p; p = pn) {
        pn = p->next;
        if (p->busy) clReleaseEvent(p->busy);
        clEnqueueUnmapMemObject(d->aux_q, p->mem, p->ptr, 0, NULL, NULL);
        clFinish(d->aux_q);
        clReleaseMemObject(p->mem);
        ocl_host->free(p);
    }
    notice_free(d->notice);
    for (int i = 0; i < 2; i++)
        if (d->stage_mem[i]) clReleaseMemObject(d->stage_mem[i]);
    for (ocl_prog *p = d->progs, *pn; p; p = pn) {
        pn = p->next;
        for (int i = 0; i < p->n_kernels; i++) {
            clReleaseKernel(p->kernels[i].k);
            ocl_host->free(p->kernels[i].name);
        }
        clReleaseProgram(p->prog);
        ocl_host->free(p);
    }
    clReleaseCommandQueue(d->aux_q);
    clReleaseCommandQueue(d->copy_q);
    clReleaseCommandQueue(d->q);
    clReleaseContext(d->ctx);
    pthread_mutex_destroy(&d->err_mu);
    pthread_mutex_destroy(&d->copy_mu);
    pthread_mutex_destroy(&d->mu);
    ocl_host->free(d);
}

static void *chunk_alloc(void *dev, size_t bytes)
{
    ocl_dev *d = dev;
    cl_int st;
    cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, bytes, NULL, &st);
    return st == CL_SUCCESS ? m : NULL;
}

static void chunk_free(void *dev, void *chunk)
{
    ocl_dev *d = dev;
    /* no queued kernel or upload may still use it (kernels wait for uploads, but say so plainly) */
    clFinish(d->q);
    clFinish(d->copy_q);
    clReleaseMemObject((cl_mem)chunk);
}

/* ---- copies ----------------------------------------------------------------------------------------------
 * Transfers run on copy_q, so a download overlaps kernels enqueued after it and an upload overlaps the
 * host's work. Ordering with the compute queue q:
 *  - each transfer first waits for a marker of q taken when it starts: a download must see every kernel
 *    enqueued so far, and an upload may land in a block the core freed right after enqueueing the last
 *    kernel that reads it (the allocator counts on in-order execution), so it must not overtake that kernel;
 *  - each upload leaves a barrier on q waiting for its last write: every command enqueued on q after
 *    copy_to_device returns waits for the data, whichever file enqueues it (ocl_launch, CLBlast, fills,
 *    kernels' own read-backs) — cheaper and harder to miss than a wait before each enqueue.
 * copy_mu keeps each marker-transfer-barrier sequence and the staging slots to one thread at a time;
 * it is never held while taking d->mu, and nothing on q waits for copy_q except through those barriers.
 *
 * Staging: a discrete device DMAs only from page-locked memory, so a transfer from ordinary memory is
 * copied into a driver buffer anyway (and a non-blocking upload would have to keep the caller's buffer).
 * Two pinned slots (CL_MEM_ALLOC_HOST_PTR, mapped once) take the caller's bytes, 8 MiB at a time, one
 * slot filling while the other's DMA runs; copy_to_device returns once the last piece is staged. On a
 * device with host-unified memory (PoCL, integrated GPUs) the device reads host memory directly and a
 * slot is only one more memcpy, so by default transfers there are direct and finish before returning.
 * WEFT_OCL_STAGING=0/1 forces the choice (to test the staged path on PoCL, or to compare). */

#define OCL_STAGE_BYTES ((size_t)8 << 20)

/* Under copy_mu: whether transfers go through the slots, deciding (and mapping them) on first use. */
static bool stage_ready(ocl_dev *d)
{
    if (d->staging >= 0) return d->staging == 1;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(d->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    bool want = !unified;
    const char *env = getenv("WEFT_OCL_STAGING");
    if (env && *env) want = strcmp(env, "0") != 0;
    d->staging = 0;
    if (!want) return false;
    bool ok = true;
    for (int i = 0; i < 2 && ok; i++) {
        cl_int st;
        d->stage_mem[i] = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, OCL_STAGE_BYTES, NULL, &st);
        if (d->stage_mem[i])
            d->stage_ptr[i] = clEnqueueMapBuffer(d->copy_q, d->stage_mem[i], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                                 OCL_STAGE_BYTES, 0, NULL, NULL, &st);
        ok = d->stage_ptr[i] != NULL;
    }
    if (!ok) {
        /* not fatal: direct transfers work everywhere, only slower */
        for (int i = 0; i < 2; i++) {
            if (d->stage_ptr[i]) clEnqueueUnmapMemObject(d->copy_q, d->stage_mem[i], d->stage_ptr[i], 0, NULL, NULL);
            d->stage_ptr[i] = NULL;
        }
        clFinish(d->copy_q);
        for (int i = 0; i < 2; i++) {
            if (d->stage_mem[i]) clReleaseMemObject(d->stage_mem[i]);
            d->stage_mem[i] = NULL;
        }
        return false;
    }
    d->stage_bytes = OCL_STAGE_BYTES;
    d->staging = 1;
    return true;
}

/* Under copy_mu: the slot for the next piece, once its previous transfer has finished. */
static cl_int stage_take(ocl_dev *d, int *slot)
{
    int i = (int)(d->stage_next++ & 1);
    cl_int st = CL_SUCCESS;
    if (d->stage_ev[i]) {
        st = clWaitForEvents(1, &d->stage_ev[i]);
        clReleaseEvent(d->stage_ev[i]);
        d->stage_ev[i] = NULL;
    }
    *slot = i;
    return st;
}

/* A marker of everything enqueued on q so far, submitted so that copy_q can wait for it. */
static cl_int compute_marker(ocl_dev *d, cl_event *m)
{
    cl_int st = clEnqueueMarkerWithWaitList(d->q, 0, NULL, m);
    if (st == CL_SUCCESS) st = clFlush(d->q);
    return st;
}

static wf_status *copy_to_device(void *dev, void *chunk, size_t off, const void *src, size_t n)
{
    ocl_dev *d = dev;
    if (!n) return NULL;
    cl_event m = NULL;
    pthread_mutex_lock(&d->copy_mu);
    cl_int st = compute_marker(d, &m);
    if (st == CL_SUCCESS && stage_ready(d)) {
        cl_event last = NULL;
        for (size_t o = 0; o < n && st == CL_SUCCESS;) {
            size_t len = n - o < d->stage_bytes ? n - o : d->stage_bytes;
            int i;
            if ((st = stage_take(d, &i)) != CL_SUCCESS) break;
            memcpy(d->stage_ptr[i], (const char *)src + o, len);
            /* copy_q is in order: only the first piece needs the marker */
            st = clEnqueueWriteBuffer(d->copy_q, (cl_mem)chunk, CL_FALSE, off + o, len, d->stage_ptr[i], o ? 0 : 1,
                                      o ? NULL : &m, &d->stage_ev[i]);
            if (st == CL_SUCCESS) st = clFlush(d->copy_q); /* start the DMA now, and let a slot wait finish */
            last = d->stage_ev[i];
            o += len;
        }
        if (st == CL_SUCCESS) st = clEnqueueBarrierWithWaitList(d->q, 1, &last, NULL);
    } else if (st == CL_SUCCESS) {
        st = clEnqueueWriteBuffer(d->copy_q, (cl_mem)chunk, CL_TRUE, off, n, src, 1, &m, NULL);
    }
    if (m) clReleaseEvent(m);
    pthread_mutex_unlock(&d->copy_mu);
    return st == CL_SUCCESS ? NULL
                            : ocl_host->status(WF_INTERNAL, "OpenCL write of %zu bytes to %s failed: %s", n, d->name, ocl_err(st));
}

/* Through the slots: piece j's DMA runs while piece j-1 is copied out to the caller. */
static cl_int download_staged(ocl_dev *d, char *dst, cl_mem src, size_t off, size_t n, cl_event m)
{
    cl_int st = CL_SUCCESS;
    int prev = -1;
    size_t prev_o = 0, prev_len = 0;
    for (size_t o = 0; o < n && st == CL_SUCCESS;) {
        size_t len = n - o < d->stage_bytes ? n - o : d->stage_bytes;
        int i;
        if ((st = stage_take(d, &i)) != CL_SUCCESS) break;
        st = clEnqueueReadBuffer(d->copy_q, src, CL_FALSE, off + o, len, d->stage_ptr[i], o ? 0 : 1, o ? NULL : &m,
                                 &d->stage_ev[i]);
        if (st == CL_SUCCESS) st = clFlush(d->copy_q);
        if (st == CL_SUCCESS && prev >= 0 && (st = clWaitForEvents(1, &d->stage_ev[prev])) == CL_SUCCESS)
            memcpy(dst + prev_o, d->stage_ptr[prev], prev_len);
        prev = i;
        prev_o = o;
        prev_len = len;
        o += len;
    }
    if (st == CL_SUCCESS && prev >= 0 && (st = clWaitForEvents(1, &d->stage_ev[prev])) == CL_SUCCESS)
        memcpy(dst + prev_o, d->stage_ptr[prev], prev_len);
    return st;
}

static wf_status *copy_to_host(void *dev, void *dst, const void *chunk, size_t off, size_t n)
{
    ocl_dev *d = dev;
    if (!n) return NULL;
    cl_event m = NULL;
    pthread_mutex_lock(&d->copy_mu);
    cl_int st = compute_marker(d, &m);
    if (st == CL_SUCCESS && stage_ready(d))
        st = download_staged(d, dst, (cl_mem)chunk, off, n, m);
    else if (st == CL_SUCCESS)
        st = clEnqueueReadBuffer(d->copy_q, (cl_mem)chunk, CL_TRUE, off, n, dst, 1, &m, NULL);
    if (m) clReleaseEvent(m);
    pthread_mutex_unlock(&d->copy_mu);
    if (st != CL_SUCCESS)
        return ocl_host->status(WF_INTERNAL, "OpenCL read of %zu bytes from %s failed: %s", n, d->name, ocl_err(st));
    return err_take(d); /* a bad index found by a kernel before the download fails it */
}

/* On the compute queue: after the kernels that produce src (in order) and the barriers of the uploads. */
static wf_status *copy_on_device(void *dev, void *dst, size_t doff, const void *src, size_t soff, size_t n)
{
    ocl_dev *d = dev;
    cl_int st = clEnqueueCopyBuffer(d->q, (cl_mem)src, (cl_mem)dst, soff, doff, n, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL
                            : ocl_host->status(WF_INTERNAL, "OpenCL copy of %zu bytes on %s failed: %s", n, d->name, ocl_err(st));
}

/* ---- streams and events --------------------------------------------------------------------------
 * WF_STREAM_COMPUTE is q, WF_STREAM_COPY is copy_q (both in order, with profiling); an event is a
 * marker (clEnqueueMarkerWithWaitList: everything before it on its queue) or a transfer's own
 * cl_event; a stream waits with clEnqueueBarrierWithWaitList; completion is told by clSetEventCallback;
 * timestamps are CL_PROFILING_COMMAND_START/END. The asynchronous transfers take no marker of q and
 * leave no barrier on it: the core orders them with events. */

#define OCL_PIN_MAX ((size_t)256 << 20) /* pinned bytes a device keeps for asynchronous uploads */

static cl_command_queue stream_q(ocl_dev *d, int stream) { return stream == WF_STREAM_COPY ? d->copy_q : d->q; }

static wf_status *cl_status(ocl_dev *d, cl_int st, const char *what)
{
    return ocl_host->status(WF_INTERNAL, "OpenCL %s on %s failed: %s (%d)", what, d->name, ocl_err(st), (int)st);
}

static wf_status *ev_new(ocl_dev *d, cl_event e, ocl_errbuf *errs, wf_event **ev)
{
    ocl_ev *w = ocl_host->malloc(sizeof *w);
    if (!w) {
        clWaitForEvents(1, &e);
        clReleaseEvent(e);
        if (errs) clWaitForEvents(1, &errs->read);
        errs_free(d, errs);
        return ocl_host->status(WF_OUT_OF_MEMORY, "out of memory for an OpenCL event");
    }
    w->e = e;
    w->done = NULL;
    w->errs = errs;
    *ev = (wf_event *)w;
    return NULL;
}

/* On q, first the reads of the index-error record that no event has carried yet (see "index errors"). */
static wf_status *event_record(void *dev, int stream, wf_event **ev)
{
    ocl_dev *d = dev;
    cl_event e = NULL;
    ocl_errbuf *errs = NULL;
    cl_int st = stream == WF_STREAM_COPY ? CL_SUCCESS : err_enqueue_read(d, &errs);
    if (errs) errs->own = true; /* right after the commands of the node whose event this is */
    if (st == CL_SUCCESS && stream != WF_STREAM_COPY) {
        pthread_mutex_lock(&d->err_mu);
        ocl_errbuf **tail = &errs;
        while (*tail) tail = &(*tail)->next;
        *tail = d->err_orphans;
        d->err_orphans = NULL;
        pthread_mutex_unlock(&d->err_mu);
    }
    if (st == CL_SUCCESS) st = clEnqueueMarkerWithWaitList(stream_q(d, stream), 0, NULL, &e);
    if (st == CL_SUCCESS) st = clFlush(stream_q(d, stream)); /* submitted, so that it can complete */
    if (st != CL_SUCCESS) {
        if (e) clReleaseEvent(e);
        errs_free(d, errs); /* unseen: back to the orphans */
        return cl_status(d, st, "marker");
    }
    return ev_new(d, e, errs, ev);
}

static wf_status *stream_wait(void *dev, int stream, wf_event *ev)
{
    ocl_dev *d = dev;
    cl_event e = ev_done((ocl_ev *)ev);
    cl_int st = clEnqueueBarrierWithWaitList(stream_q(d, stream), 1, &e, NULL);
    return st == CL_SUCCESS ? NULL : cl_status(d, st, "barrier");
}

static wf_status *exec_error(ocl_dev *d, cl_int status)
{
    return ocl_host->status(WF_INTERNAL, "OpenCL command failed while running on %s: %s (%d)", d->name, ocl_err(status),
                            (int)status);
}

/* The error of a completed event: the command's, else a bad index its reads of the record found. */
static wf_status *ev_error(ocl_dev *d, ocl_ev *w, cl_int status)
{
    if (status < 0) return exec_error(d, status);
    return errs_check(d, w->errs);
}

static wf_status *event_query(void *dev, wf_event *ev, int *done)
{
    ocl_dev *d = dev;
    ocl_ev *w = (ocl_ev *)ev;
    cl_int status = CL_QUEUED;
    cl_int st = clGetEventInfo(ev_done(w), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (st != CL_SUCCESS) {
        *done = 1;
        return cl_status(d, st, "event query");
    }
    *done = status == CL_COMPLETE || status < 0;
    return *done ? ev_error(d, w, status) : NULL;
}

static wf_status *event_sync(void *dev, wf_event *ev)
{
    ocl_dev *d = dev;
    ocl_ev *w = (ocl_ev *)ev;
    cl_event e = ev_done(w);
    cl_int st = clWaitForEvents(1, &e);
    cl_int status = CL_COMPLETE;
    clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (status < 0 || st == CL_SUCCESS) return ev_error(d, w, status);
    return cl_status(d, st, "event wait");
}

typedef struct ocl_notify {
    ocl_dev *d;
    ocl_ev *w;
    void (*fn)(void *, wf_status *);
    void *arg;
} ocl_notify;

/* On a driver thread: calls no OpenCL function (the reads of the record have completed before the
 * event, so their host copies are there to look at). */
static void CL_CALLBACK notify_tramp(cl_event e, cl_int status, void *user)
{
    (void)e;
    ocl_notify *n = user;
    wf_status *err = ev_error(n->d, n->w, status);
    void (*fn)(void *, wf_status *) = n->fn;
    void *arg = n->arg;
    ocl_host->free(n);
    fn(arg, err);
}

static wf_status *event_notify(void *dev, wf_event *ev, void (*fn)(void *, wf_status *), void *arg)
{
    ocl_dev *d = dev;
    ocl_ev *w = (ocl_ev *)ev;
    ocl_notify *n = ocl_host->malloc(sizeof *n);
    if (!n) return ocl_host->status(WF_OUT_OF_MEMORY, "out of memory for an OpenCL event callback");
    *n = (ocl_notify){d, w, fn, arg};
    cl_int st = clSetEventCallback(ev_done(w), CL_COMPLETE, notify_tramp, n);
    if (st != CL_SUCCESS) {
        ocl_host->free(n);
        return cl_status(d, st, "event callback");
    }
    return NULL;
}

static wf_status *event_times(void *dev, wf_event *ev, int64_t *t0, int64_t *t1)
{
    ocl_dev *d = dev;
    cl_event e = ((ocl_ev *)ev)->e;
    cl_ulong a = 0, b = 0;
    cl_int st = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
    if (st == CL_SUCCESS) st = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
    if (st != CL_SUCCESS) return cl_status(d, st, "profiling query");
    *t0 = (int64_t)a;
    *t1 = (int64_t)b;
    return NULL;
}

static void event_release(void *dev, wf_event *ev)
{
    ocl_ev *w = (ocl_ev *)ev;
    errs_free(dev, w->errs); /* reads nobody looked at go to the next event */
    clReleaseEvent(w->e);
    if (w->done) clReleaseEvent(w->done);
    ocl_host->free(w);
}

/* Under copy_mu: a pinned buffer of at least n bytes whose last transfer has completed, mapped; NULL
 * when none can be had within OCL_PIN_MAX (the transfer then goes direct). */
static struct ocl_pin *pin_take(ocl_dev *d, size_t n)
{
    struct ocl_pin *best = NULL;
    for (struct ocl_pin *p = d->pins; p; p = p->next) {
        if (p->bytes < n || (best && best->bytes <= p->bytes)) continue;
        cl_int status = CL_COMPLETE;
        if (p->busy) clGetEventInfo(p->busy, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        if (status == CL_COMPLETE || status < 0) best = p;
    }
    if (best || d->pin_bytes + n > OCL_PIN_MAX) return best;
    struct ocl_pin *p = ocl_host->malloc(sizeof *p);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    cl_int st;
    p->mem = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, n, NULL, &st);
    if (p->mem)
        p->ptr = clEnqueueMapBuffer(d->aux_q, p->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, NULL, NULL, &st);
    if (!p->ptr) {
        if (p->mem) clReleaseMemObject(p->mem);
        ocl_host->free(p);
        return NULL;
    }
    p->bytes = n;
    p->next = d->pins;
    d->pins = p;
    d->pin_bytes += n;
    return p;
}

/* A staged download's last step, on a driver thread once the read into pinned memory is done: the
 * bytes go to the caller's memory, then the user event that the core waits for completes. */
typedef struct ocl_copyout {
    void *dst;
    const void *src;
    size_t n;
    cl_event done;
} ocl_copyout;

static void CL_CALLBACK copy_out(cl_event e, cl_int status, void *user)
{
    (void)e;
    ocl_copyout *c = user;
    if (status >= 0) memcpy(c->dst, c->src, c->n);
    cl_event done = c->done;
    ocl_host->free(c);
    clSetUserEventStatus(done, status >= 0 ? CL_COMPLETE : status);
    clReleaseEvent(done); /* the callback's reference */
}

/* An asynchronous transfer on copy_q. Where the device wants staging (not host-unified memory, or
 * WEFT_OCL_STAGING=1) and a pinned buffer can be had, it goes through one: an upload copies the
 * caller's bytes in first; a download reads into it and a callback copies out to the caller, with a
 * user event (ocl_ev.done) completing after that, so that a DMA from pageable memory never holds up
 * the queue. Else it goes straight from or to the caller's memory (host-unified memory, or the
 * driver stages), which the caller keeps until the event completes. */
static wf_status *transfer_async(ocl_dev *d, bool up, cl_mem chunk, size_t off, void *host, size_t n, wf_event **ev)
{
    cl_event e = NULL, done = NULL;
    pthread_mutex_lock(&d->copy_mu);
    cl_int st = CL_SUCCESS;
    struct ocl_pin *p = stage_ready(d) ? pin_take(d, n) : NULL;
    ocl_copyout *c = p && !up ? ocl_host->malloc(sizeof *c) : NULL;
    if (p && !up && c) {
        done = clCreateUserEvent(d->ctx, &st);
        if (st == CL_SUCCESS) st = clEnqueueReadBuffer(d->copy_q, chunk, CL_FALSE, off, n, p->ptr, 0, NULL, &e);
        if (st == CL_SUCCESS) {
            *c = (ocl_copyout){host, p->ptr, n, done};
            clRetainEvent(done); /* the callback's */
            st = clSetEventCallback(e, CL_COMPLETE, copy_out, c);
            if (st != CL_SUCCESS) {
                clReleaseEvent(done);
                clWaitForEvents(1, &e); /* no callback: copy out here */
                memcpy(host, p->ptr, n);
                clSetUserEventStatus(done, CL_COMPLETE);
                ocl_host->free(c);
                st = CL_SUCCESS;
            }
            c = NULL;
            if (p->busy) clReleaseEvent(p->busy);
            clRetainEvent(done);
            p->busy = done; /* the pinned bytes are read until the copy out is done */
        }
        ocl_host->free(c);
    } else if (p && up) {
        memcpy(p->ptr, host, n);
        st = clEnqueueWriteBuffer(d->copy_q, chunk, CL_FALSE, off, n, p->ptr, 0, NULL, &e);
        if (st == CL_SUCCESS) {
            if (p->busy) clReleaseEvent(p->busy);
            clRetainEvent(e);
            p->busy = e;
        }
    } else if (up) {
        st = clEnqueueWriteBuffer(d->copy_q, chunk, CL_FALSE, off, n, host, 0, NULL, &e);
    } else {
        st = clEnqueueReadBuffer(d->copy_q, chunk, CL_FALSE, off, n, host, 0, NULL, &e);
    }
    if (st == CL_SUCCESS) st = clFlush(d->copy_q);
    pthread_mutex_unlock(&d->copy_mu);
    if (st != CL_SUCCESS) {
        if (e) {
            clWaitForEvents(1, &e);
            clReleaseEvent(e);
        }
        if (done) {
            clSetUserEventStatus(done, CL_COMPLETE);
            clReleaseEvent(done);
        }
        return ocl_host->status(WF_INTERNAL, "OpenCL %s of %zu bytes %s %s failed: %s", up ? "write" : "read", n,
                                up ? "to" : "from", d->name, ocl_err(st));
    }
    wf_status *s = ev_new(d, e, NULL, ev);
    if (s) {
        if (done) {
            clWaitForEvents(1, &done);
            clReleaseEvent(done);
        }
        return s;
    }
    ((ocl_ev *)*ev)->done = done;
    return NULL;
}

static wf_status *copy_to_device_async(void *dev, void *chunk, size_t off, const void *src, size_t n, wf_event **ev)
{
    return transfer_async(dev, true, (cl_mem)chunk, off, (void *)src, n, ev);
}

static wf_status *copy_to_host_async(void *dev, void *dst, const void *chunk, size_t off, size_t n, wf_event **ev)
{
    return transfer_async(dev, false, (cl_mem)chunk, off, dst, n, ev);
}

static const wf__kernel_def *const g_tables[] = {ocl_kernels_elementwise, ocl_kernels_shape, ocl_kernels_nn,
                                                 ocl_kernels_reduce, ocl_kernels_norm, ocl_kernels_image,
                                                 ocl_kernels_image_augment, ocl_kernels_seq, ocl_kernels_nngrad,
                                                 ocl_kernels_train, ocl_kernels_fused};

static const wf__kernel_def *find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    ocl_dev *d = dev;
    for (size_t t = 0; t < sizeof g_tables / sizeof g_tables[0]; t++)
        for (const wf__kernel_def *k = g_tables[t]; k->op; k++) {
            if (strcmp(k->op, op) != 0) continue;
            wf_dtype key = k->key_input >= 0 ? (k->key_input < n_in ? in[k->key_input].dtype : WF_DTYPE_INVALID)
                                             : out[0].dtype;
            if (!key || !(k->dtypes & WF__DT_BIT(key))) continue;
            /* double only where the device has it; half needs nothing: every kernel stores f16 as ushort
             * and converts with vload_half / vstore_half_rte, which OpenCL 1.2 has without cl_khr_fp16 */
            bool ok = true;
            for (int i = 0; i < n_in && ok; i++) ok = !(in[i].dtype == WF_F64 && !d->fp64);
            if (ok && out[0].dtype == WF_F64 && !d->fp64) ok = false;
            if (ok) return k;
        }
    return NULL;
}

static wf_status *synchronize(void *dev)
{
    ocl_dev *d = dev;
    cl_int st = clFinish(d->q);
    cl_int st2 = clFinish(d->copy_q);
    if (st == CL_SUCCESS) st = st2;
    if (st != CL_SUCCESS) return ocl_host->status(WF_INTERNAL, "OpenCL finish on %s failed: %s", d->name, ocl_err(st));
    return err_take(d);
}

static void destroy(void *b) { ocl_host->free(b); }

static const wf_backend_vtable g_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = sizeof(wf_backend_vtable), .name = "opencl",
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
        return host->status(WF_FAILED_PRECONDITION, "the OpenCL backend needs host ABI version %d", WF_BACKEND_ABI_VERSION);
    ocl_host = host;
    ocl_backend *be = host->malloc(sizeof *be);
    if (!be) return host->status(WF_OUT_OF_MEMORY, "out of memory loading the OpenCL backend");
    memset(be, 0, sizeof *be);
    cl_uint np = 0;
    cl_int st = clGetPlatformIDs(16, be->plat, &np);
    if (st != CL_SUCCESS || np == 0) {
        host->free(be);
        return host->status(WF_UNAVAILABLE, "no OpenCL platform (is an ICD such as pocl-opencl-icd installed?): %s",
                            st == CL_SUCCESS ? "none found" : ocl_err(st));
    }
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        cl_device_id ids[16];
        if (clGetDeviceIDs(be->plat[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS) continue;
        for (cl_uint i = 0; i < nd && be->n < 64; i++) {
            be->dev[be->n] = ids[i];
            be->dev_plat[be->n] = be->plat[p];
            be->n++;
        }
    }
    *vt = &g_vt;
    *backend = be;
    return NULL;
}
