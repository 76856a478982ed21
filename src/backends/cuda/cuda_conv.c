/*
 * CUDA Conv2D / ConvTranspose2D, MaxPool2D / AvgPool2D and GlobalAvgPool. Convolutions go through cuDNN's
 * legacy API (cudnnConvolutionForward / BackwardData), which the plugin loads with dlopen("libcudnn.so.9")
 * on first use so that it loads, and runs every other op, without cuDNN; where cuDNN is missing or cannot
 * take the geometry (asymmetric pads, bf16) a direct kernel computes the same thing. Pools are direct
 * kernels with the CPU's exact rules (ceil mode, count_include_pad, dilations). Window geometry comes from
 * graph/nn_window.h, as on every other device.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_conv.h"
#include "ops/nn_window.h"

#if defined(__has_include)
#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define CU_HAVE_CUDNN 1
#endif
#endif

/* Workspaces above this are not worth their memory (which the core's allocator does not see): a slower
 * algorithm with a smaller workspace is taken instead. */
#define CU_WS_CAP ((size_t)256 << 20)

#ifdef CU_HAVE_CUDNN

/* The cuDNN entry points, resolved once per process from libcudnn.so.9 (cuDNN 9's front library, which
 * exports the legacy API and loads its sub-libraries itself). */
#define CU_DNN_FUNCS(X)                                                                                            \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                      \
    X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor)                   \
    X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)                   \
    X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)    \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) X(cudnnGetConvolutionForwardAlgorithm_v7)      \
    X(cudnnConvolutionForward) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnConvolutionBackwardData)

static struct {
#define X(f) __typeof__(&f) f;
    CU_DNN_FUNCS(X)
#undef X
    bool ok;
    char why[200]; /* why cuDNN is unusable, for messages */
    size_t version;
} g_dnn;

static pthread_once_t g_dnn_once = PTHREAD_ONCE_INIT;

static void dnn_load(void)
{
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (!e || strstr(e, "No such file"))
            snprintf(g_dnn.why, sizeof g_dnn.why, "libcudnn.so.9 not found");
        else
            snprintf(g_dnn.why, sizeof g_dnn.why, "libcudnn.so.9 failed to load: %.150s", e);
        return;
    }
    /* through a void* so that the function-pointer conversion is explicit (ISO C has none from void*) */
#define X(f)                                                                                                       \
    {                                                                                                              \
        void *p = dlsym(h, #f);                                                                                    \
        if (!p) {                                                                                                  \
            snprintf(g_dnn.why, sizeof g_dnn.why, "libcudnn.so.9 lacks %s", #f);                                   \
            return; /* the library stays loaded: harmless, and dlclose of cuDNN is known to be fragile */         \
        }                                                                                                          \
        memcpy(&g_dnn.f, &p, sizeof p);                                                                            \
    }
    CU_DNN_FUNCS(X)
#undef X
    g_dnn.version = g_dnn.cudnnGetVersion();
    if (g_dnn.version < 90000) {
        snprintf(g_dnn.why, sizeof g_dnn.why, "libcudnn.so.9 reports version %zu, expected 9.x", g_dnn.version);
        return;
    }
    g_dnn.ok = true;
}

static bool dnn_ready(void)
{
    pthread_once(&g_dnn_once, dnn_load);
    return g_dnn.ok;
}

const char *cu_cudnn_describe(char *buf, size_t n)
{
    if (dnn_ready())
        snprintf(buf, n, "cuDNN %zu.%zu.%zu", g_dnn.version / 10000, g_dnn.version % 10000 / 100, g_dnn.version % 100);
    else
        snprintf(buf, n, "no cuDNN: %s; convolutions use direct kernels", g_dnn.why);
    return buf;
}

void cu_cudnn_release(cu_dev *d)
{
    if (d->dnn && g_dnn.ok) g_dnn.cudnnDestroy((cudnnHandle_t)d->dnn);
    d->dnn = NULL;
    if (d->ws) cudaFree(d->ws);
    d->ws = NULL;
    d->ws_size = 0;
}

static wf_status *dnn_fail(const wf__kctx *k, cudnnStatus_t st, const char *what)
{
    return cu_host->kctx_fail(k, st == CUDNN_STATUS_ALLOC_FAILED ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                              "cuDNN %s failed on %s: %s (%d)", what, k->device->short_name,
                              g_dnn.cudnnGetErrorString(st), (int)st);
}

/* The device's workspace of at least `bytes` (under dnn_mu). Growing frees the old block only after the
 * compute stream has drained: a queued convolution may still use it. */
static bool ws_reserve(cu_dev *d, size_t bytes)
{
    if (bytes <= d->ws_size) return true;
    if (d->ws) {
        cudaStreamSynchronize(d->compute);
        cudaFree(d->ws);
        d->ws = NULL;
        d->ws_size = 0;
    }
    if (cudaMalloc(&d->ws, bytes) != cudaSuccess) {
        cudaGetLastError(); /* not the next kernel's error */
        d->ws = NULL;
        return false;
    }
    d->ws_size = bytes;
    return true;
}

typedef struct dnn_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
} dnn_descs;

static void descs_free(dnn_descs *ds)
{
    if (ds->x) g_dnn.cudnnDestroyTensorDescriptor(ds->x);
    if (ds->y) g_dnn.cudnnDestroyTensorDescriptor(ds->y);
    if (ds->w) g_dnn.cudnnDestroyFilterDescriptor(ds->w);
    if (ds->c) g_dnn.cudnnDestroyConvolutionDescriptor(ds->c);
}

/* Whether a perf entry's math suits dtype t: f32 and f64 never take tensor-op (TF32) kernels, so that the
 * results stay within the CPU's rounding. */
static bool math_ok(wf_dtype t, cudnnMathType_t m)
{
    return t == WF_F16 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

/* What a node's convolution keeps between runs (its kernel state): the four descriptors and the chosen
 * algorithm with its workspace size, keyed by everything that went into them, so a run with the shapes of
 * the previous one sets no descriptor and runs no heuristic. Built and used under the device's dnn_mu (the
 * handle and workspace are the device's), so one state never serves two runs at once. */
#define DNN_KEY_N 24
typedef struct dnn_state {
    int64_t key[DNN_KEY_N];
    dnn_descs ds;
    int algo;       /* cudnnConvolutionFwdAlgo_t or cudnnConvolutionBwdDataAlgo_t */
    size_t ws;      /* its workspace */
    bool unsup;     /* cuDNN declined this geometry: the direct kernel runs */
} dnn_state;

static void dnn_state_free(void *p)
{
    dnn_state *st = p;
    if (!st) return;
    if (g_dnn.ok) descs_free(&st->ds);
    cu_host->free(st);
}

/* Sets up st for the key: descriptors, then the heuristics' first usable algorithm (skipping what is
 * unusable or would need too much workspace). */
static cudnnStatus_t dnn_state_build(cu_dev *d, dnn_state *st, bool transposed, wf_dtype t, const wf_tensor *fin,
                                     const wf_tensor *fout, const wf_tensor *w, const wf__nn_window *wn, int64_t groups,
                                     const char **what)
{
    cudnnDataType_t dt = t == WF_F64 ? CUDNN_DATA_DOUBLE : t == WF_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    cudnnDataType_t ct = t == WF_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; /* f16 accumulates in f32, as the CPU */
    dnn_descs *ds = &st->ds;
    cudnnStatus_t rc;
    *what = "descriptor setup";
    if ((rc = g_dnn.cudnnCreateTensorDescriptor(&ds->x)) || (rc = g_dnn.cudnnCreateTensorDescriptor(&ds->y)) ||
        (rc = g_dnn.cudnnCreateFilterDescriptor(&ds->w)) || (rc = g_dnn.cudnnCreateConvolutionDescriptor(&ds->c)))
        return rc;
    if ((rc = g_dnn.cudnnSetTensor4dDescriptor(ds->x, CUDNN_TENSOR_NCHW, dt, (int)fin->dims[0], (int)fin->dims[1],
                                               (int)fin->dims[2], (int)fin->dims[3])) ||
        (rc = g_dnn.cudnnSetTensor4dDescriptor(ds->y, CUDNN_TENSOR_NCHW, dt, (int)fout->dims[0], (int)fout->dims[1],
                                               (int)fout->dims[2], (int)fout->dims[3])) ||
        /* W is [K, C/group, kh, kw] with K the forward conv's output channels: Conv2D's [OC, C/g, ..] and
         * ConvTranspose2D's [C, OC/g, ..] alike */
        (rc = g_dnn.cudnnSetFilter4dDescriptor(ds->w, dt, CUDNN_TENSOR_NCHW, (int)w->dims[0], (int)w->dims[1],
                                               (int)w->dims[2], (int)w->dims[3])) ||
        (rc = g_dnn.cudnnSetConvolution2dDescriptor(ds->c, (int)wn->pb[0], (int)wn->pb[1], (int)wn->s[0], (int)wn->s[1],
                                                    (int)wn->d[0], (int)wn->d[1], CUDNN_CROSS_CORRELATION, ct)) ||
        (rc = g_dnn.cudnnSetConvolutionGroupCount(ds->c, (int)groups)) ||
        (rc = g_dnn.cudnnSetConvolutionMathType(ds->c, t == WF_F16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH)))
        return rc;
    int n = 0, pick = -1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (!transposed) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        *what = "cudnnGetConvolutionForwardAlgorithm_v7";
        if ((rc = g_dnn.cudnnGetConvolutionForwardAlgorithm_v7((cudnnHandle_t)d->dnn, ds->x, ds->w, ds->c, ds->y,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf)))
            return rc;
        for (int i = 0; i < n && pick < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok(t, perf[i].mathType) && perf[i].memory <= CU_WS_CAP &&
                ws_reserve(d, perf[i].memory))
                pick = i, st->algo = (int)perf[i].algo, st->ws = perf[i].memory, math = perf[i].mathType;
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        *what = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
        if ((rc = g_dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7((cudnnHandle_t)d->dnn, ds->w, ds->y, ds->c, ds->x,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf)))
            return rc;
        for (int i = 0; i < n && pick < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok(t, perf[i].mathType) && perf[i].memory <= CU_WS_CAP &&
                ws_reserve(d, perf[i].memory))
                pick = i, st->algo = (int)perf[i].algo, st->ws = perf[i].memory, math = perf[i].mathType;
    }
    if (pick < 0) {
        st->unsup = true; /* kept: the next run goes straight to the direct kernel */
        return CUDNN_STATUS_SUCCESS;
    }
    if (t == WF_F16 && (rc = g_dnn.cudnnSetConvolutionMathType(ds->c, math))) return rc;
    return CUDNN_STATUS_SUCCESS;
}

/* The convolution through cuDNN: forward for Conv2D (x: input, y: output) or backward data for
 * ConvTranspose2D (x is the forward conv's dy, y its dx). Returns CUDNN_STATUS_NOT_SUPPORTED in *unsup
 * (and no status) when cuDNN declines the geometry, so the caller can take the direct kernel. The
 * descriptors and algorithm live in the node's state (dnn_state) while the shapes stay the same. */
static wf_status *dnn_conv(wf__kctx *k, bool transposed, const wf_tensor *x, const wf_tensor *w, const wf_tensor *y,
                           const wf__nn_window *wn, int64_t groups, bool *unsup)
{
    cu_dev *d = cu_of(k);
    wf_dtype t = x->dtype;
    /* the forward conv's input is x for Conv2D and y for ConvTranspose2D; its output the other one */
    const wf_tensor *fin = transposed ? y : x, *fout = transposed ? x : y;
    int64_t key[DNN_KEY_N] = {transposed, t, groups, wn->pb[0], wn->pb[1], wn->s[0], wn->s[1], wn->d[0], wn->d[1]};
    for (int i = 0; i < 4; i++) key[9 + i] = fin->dims[i], key[13 + i] = fout->dims[i], key[17 + i] = w->dims[i];
    cudnnStatus_t rc = CUDNN_STATUS_SUCCESS;
    const char *what = "descriptor setup";
    *unsup = false;
    wf_status *s = NULL;
    dnn_state local = {0}, *st = NULL;
    bool own = false; /* st is `local` (no node state) or a fresh one not yet kept */
    pthread_mutex_lock(&d->dnn_mu);
    if (!d->dnn) {
        cudnnHandle_t h = NULL;
        what = "handle creation";
        if ((rc = g_dnn.cudnnCreate(&h)) != CUDNN_STATUS_SUCCESS) goto fail;
        d->dnn = h;
    }
    what = "cudnnSetStream";
    if ((rc = g_dnn.cudnnSetStream((cudnnHandle_t)d->dnn, d->compute)) != CUDNN_STATUS_SUCCESS) goto fail;
    if (k->state) {
        cu_host->kctx_lock_state(k);
        st = *k->state;
        cu_host->kctx_unlock_state(k);
    }
    if (!st || memcmp(st->key, key, sizeof key)) {
        dnn_state *fresh = k->state ? cu_host->malloc(sizeof *fresh) : &local;
        if (!fresh) {
            pthread_mutex_unlock(&d->dnn_mu);
            return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating cuDNN state on %s",
                                      k->device->short_name);
        }
        memset(fresh, 0, sizeof *fresh);
        memcpy(fresh->key, key, sizeof key);
        own = true;
        st = fresh;
        if ((rc = dnn_state_build(d, st, transposed, t, fin, fout, w, wn, groups, &what))) goto fail;
        if (k->state) {
            /* every user of the old state holds dnn_mu, as this run does: it can go now */
            cu_host->kctx_lock_state(k);
            dnn_state *old = *k->state;
            *k->state = st;
            cu_host->kctx_unlock_state(k);
            dnn_state_free(old);
            own = false;
        }
    }
    if (st->unsup) {
        *unsup = true;
        goto done;
    }
    ws_reserve(d, st->ws); /* the workspace only grows: already big enough */
    double a64 = 1, b64 = 0;
    float a32 = 1, b32 = 0;
    const void *alpha = t == WF_F64 ? (const void *)&a64 : &a32, *beta = t == WF_F64 ? (const void *)&b64 : &b32;
    const dnn_descs *ds = &st->ds;
    if (!transposed) {
        what = "cudnnConvolutionForward";
        rc = g_dnn.cudnnConvolutionForward((cudnnHandle_t)d->dnn, alpha, ds->x, cu_ptr(x), ds->w, cu_ptr(w), ds->c,
                                           (cudnnConvolutionFwdAlgo_t)st->algo, d->ws, st->ws, beta, ds->y, cu_ptr(y));
    } else {
        what = "cudnnConvolutionBackwardData";
        /* dy is the transposed conv's input x, dx its output y */
        rc = g_dnn.cudnnConvolutionBackwardData((cudnnHandle_t)d->dnn, alpha, ds->w, cu_ptr(w), ds->y, cu_ptr(x), ds->c,
                                                (cudnnConvolutionBwdDataAlgo_t)st->algo, d->ws, st->ws, beta, ds->x,
                                                cu_ptr(y));
    }
    if (rc == CUDNN_STATUS_SUCCESS) goto done;
fail:
    if (rc == CUDNN_STATUS_NOT_SUPPORTED) *unsup = true;
    else s = dnn_fail(k, rc, what);
done:
    if (own && st) {
        descs_free(&st->ds);
        if (st != &local) cu_host->free(st);
    }
    pthread_mutex_unlock(&d->dnn_mu);
    return s;
}

#else /* no cudnn.h at build time */

const char *cu_cudnn_describe(char *buf, size_t n)
{
    snprintf(buf, n, "built without cuDNN headers; convolutions use direct kernels");
    return buf;
}

void cu_cudnn_release(cu_dev *d)
{
    if (d->ws) cudaFree(d->ws);
    d->ws = NULL;
    d->ws_size = 0;
}

#define CU_CONV_FREE_STATE dnn_state_free

#endif

#ifndef CU_CONV_FREE_STATE
#define CU_CONV_FREE_STATE NULL
#endif

/* ---- Conv2D / ConvTranspose2D ------------------------------------------------------------------------- */

static int window_resolve(const wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, wf__nn_window *w,
                          char *err, size_t en)
{
    return wf__nn_window_resolve_with(cu_host->attr_get, k->op, k->attrs, kind, in_hw, wk, w, err, en);
}

static bool fits_int(const wf_tensor *t)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > INT_MAX) return false;
    return true;
}

static wf_status *conv_common(wf__kctx *k, bool transposed)
{
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    char sx[160], sw[160];
    if (x->rank != 4 || w->rank != 4)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s must be 4-D", cu_tstr(x, sx), cu_tstr(w, sw));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and B have different dtypes", cu_tstr(x, sx),
                                  cu_tstr(w, sw));
    int64_t n = x->dims[0], c = x->dims[1], g = cu_host->attr_get(k->op, k->attrs, "group")->i, oc;
    if (!wf__ku_conv_channels(c, w->dims, g, transposed, &oc))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and group %lld do not match", cu_tstr(x, sx),
                                  cu_tstr(w, sw), (long long)g);
    if (b && (b->rank != 1 || b->dims[0] != oc))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "B must be 1-D with %lld elements", (long long)oc);
    wf__nn_window wn;
    char err[256];
    int64_t in_hw[2] = {x->dims[2], x->dims[3]}, wk[2] = {w->dims[2], w->dims[3]};
    if (window_resolve(k, transposed ? WF__WIN_CONVT : WF__WIN_CONV, in_hw, wk, &wn, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s: %s", cu_tstr(x, sx), cu_tstr(w, sw), err);
    int64_t od[4] = {n, oc, wn.out[0], wn.out[1]};
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, 4, od, &y)) || !y->size) return s;
    cudaStream_t st = cu_of(k)->compute;
    if (x->size == 0 || w->size == 0) { /* an empty sum: the bias alone (or zeros) */
        s = cu_check(k, (int)cudaMemsetAsync(cu_ptr(y), 0, (size_t)y->size * cu_size(y->dtype), st), "memset");
        if (s || !b) return s;
        return cu_check(k, cuk_bias_add(st, y->dtype, cu_ptr(y), cu_ptr(b), cu_ptr(y), y->size, oc, od[2] * od[3]),
                        "bias kernel");
    }
#ifdef CU_HAVE_CUDNN
    /* cuDNN takes symmetric, non-negative pads only; a transposed conv must also be the exact inverse of a
     * forward one (its output_padding below the stride) */
    bool sym = true;
    for (int i = 0; i < 2; i++) {
        sym = sym && wn.pb[i] == wn.pe[i] && wn.pb[i] >= 0 && wn.pb[i] <= INT_MAX && wn.s[i] <= INT_MAX &&
              wn.d[i] <= INT_MAX;
        if (transposed && sym) {
            int64_t eff = (wk[i] - 1) * wn.d[i] + 1, span = od[2 + i] + 2 * wn.pb[i] - eff;
            sym = span >= 0 && span / wn.s[i] + 1 == in_hw[i];
        }
    }
    if (sym && x->dtype != WF_BF16 && g <= INT_MAX && fits_int(x) && fits_int(w) && fits_int(y) && dnn_ready()) {
        bool unsup;
        if ((s = dnn_conv(k, transposed, x, w, y, &wn, g, &unsup))) return s;
        if (!unsup) {
            if (!b) return NULL;
            return cu_check(k, cuk_bias_add(st, y->dtype, cu_ptr(y), cu_ptr(b), cu_ptr(y), y->size, oc, od[2] * od[3]),
                            "bias kernel");
        }
    }
#endif
    cuk_conv geo = {n, c, x->dims[2], x->dims[3], oc, g, wk[0], wk[1], wn.out[0], wn.out[1],
                    wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return cu_check(k, cuk_conv2d(st, x->dtype, transposed, cu_ptr(x), cu_ptr(w), b ? cu_ptr(b) : NULL, cu_ptr(y), &geo),
                    "convolution kernel");
}

static wf_status *k_conv(wf__kctx *k) { return conv_common(k, false); }
static wf_status *k_convt(wf__kctx *k) { return conv_common(k, true); }

/* ---- pools ------------------------------------------------------------------------------------------- */

static wf_status *k_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160], err[256];
    if (x->rank != 4) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must be 4-D", cu_tstr(x, sx));
    wf__nn_window wn;
    int64_t in_hw[2] = {x->dims[2], x->dims[3]};
    if (window_resolve(k, WF__WIN_POOL, in_hw, NULL, &wn, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s: %s", cu_tstr(x, sx), err);
    int64_t od[4] = {x->dims[0], x->dims[1], wn.out[0], wn.out[1]};
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, 4, od, &y)) || !y->size) return s;
    int is_max = !strcmp(k->op->name, "MaxPool2D");
    int include_pad = !is_max && cu_host->attr_get(k->op, k->attrs, "count_include_pad")->i != 0;
    cuk_conv geo = {od[0], od[1], x->dims[2], x->dims[3], 0, 1, wn.k[0], wn.k[1], wn.out[0], wn.out[1],
                    wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return cu_check(k, cuk_pool2d(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), &geo, wn.pe[0], wn.pe[1], is_max,
                                  include_pad),
                    "pooling kernel");
}

static wf_status *k_global_avg_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160];
    if (x->rank < 3) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must have rank >= 3", cu_tstr(x, sx));
    int64_t od[WF_MAX_RANK], inner = 1;
    for (int i = 0; i < x->rank; i++) {
        od[i] = i < 2 ? x->dims[i] : 1;
        if (i >= 2) inner *= x->dims[i];
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, od, &y)) || !y->size) return s;
    return cu_check(k, cuk_gap(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), y->size, inner), "GlobalAvgPool kernel");
}

const wf__kernel_def cu_kernels_conv[] = {
    {"Conv2D", "GPU", WF__DT_FLOATS, 0, k_conv, CU_CONV_FREE_STATE, 0},
    {"ConvTranspose2D", "GPU", WF__DT_FLOATS, 0, k_convt, CU_CONV_FREE_STATE, 0},
    {"MaxPool2D", "GPU", WF__DT_FLOATS, 0, k_pool, NULL, 0},
    {"AvgPool2D", "GPU", WF__DT_FLOATS, 0, k_pool, NULL, 0},
    {"GlobalAvgPool", "GPU", WF__DT_FLOATS, 0, k_global_avg_pool, NULL, 0},
    {0},
};
