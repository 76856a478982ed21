/*
 * Pass "conv_crop": a convolution's kernel taps that only ever meet padding are dropped. Along each
 * spatial dim, tap a of a kernel with stride s, dilation d and leading pad pb reads input row
 * o s - pb + a d for the outputs o in [0, OH); a tap for which no output lands inside [0, H) multiplies
 * zeros. When the first or last taps are such taps, the convolution is rewritten over the used range
 * [lo, hi] with the pads moved in by the dropped taps (pb - lo d before, pe - (k - 1 - hi) d after), which
 * keeps every output's position and size:
 *     Conv2D(x, W)                      -> Conv2D(x, W[:, :, lo:hi+1, ...])
 *     Conv2DBackpropInput(sizes, W, dy) -> Conv2DBackpropInput(sizes, W[:, :, lo:hi+1, ...], dy)
 *     Conv2DBackpropFilter(x, sizes, dy) -> Pad(Conv2DBackpropFilter(x, cropped sizes, dy), zeros around)
 * The case that matters is a small input deep in a network: ResNet on 32x32 images reaches its last
 * stage at 1x1 (2x2 for the stride-2 convolution into it), where a 3x3 kernel with pad 1 uses one tap (four)
 * of nine, and oneDNN otherwise computes, reorders and writes gradients for all nine.
 *
 * The values are the same: a dropped tap's product was with padding, which weft's kernels skip (they never
 * multiply), so a NaN or Inf in a dropped weight never reached an output before either, and a dropped tap's
 * weight gradient was exactly 0, which the Pad restores. A constant W is cropped here (a new constant);
 * any other W through a Slice node. Only explicit pads are rewritten (auto_pad resolves to them: the
 * resolved window is what is cropped). Skipped: unknown spatial dims, a kernel whose every tap reads only
 * padding, and a crop that would need a negative pad.
 *
 * A window that, cropped, covers its whole input (one output per plane, no pad before it, group 1) is a
 * matrix product over K = C H W, and becomes one (as_matmul): on 1x1 maps oneDNN's convolution gradients
 * ran at a few GFLOP/s (3 ms for the 32x512 by 512x32 weight gradient of ResNet-18's last stage, a GEMM
 * of 17 MFLOP). A Conv2D with a bias stays a convolution: the fusion pass joins it to its activation and
 * the layout pass keeps its blocked layout (squeeze-and-excitation's 1x1 convolutions are such).
 */
#include "ops/nn_window.h"
#include "passes/pass.h"

/* The used taps [lo[i], hi[i]] of each spatial dim of window w over input in_hw, and in *crop whether some
 * tap is dropped; false when the window cannot be cropped (then lo, hi are not filled). */
static bool used_taps(const wf__nn_window *w, const int64_t *in_hw, int64_t *lo, int64_t *hi, bool *crop)
{
    *crop = false;
    for (int i = 0; i < 2; i++) {
        lo[i] = -1, hi[i] = -1;
        if (w->out[i] <= 0 || in_hw[i] <= 0 || w->s[i] <= 0) return false;
        for (int64_t a = 0; a < w->k[i]; a++) {
            /* the first output o with o s - pb + a d >= 0, and whether it is still below H */
            int64_t base = a * w->d[i] - w->pb[i], o = base >= 0 ? 0 : (-base + w->s[i] - 1) / w->s[i];
            if (o < w->out[i] && o * w->s[i] + base < in_hw[i]) {
                if (lo[i] < 0) lo[i] = a;
                hi[i] = a;
            }
        }
        if (lo[i] < 0) return false; /* no tap reads the input: left alone */
        int64_t pb = w->pb[i] - lo[i] * w->d[i], pe = w->pe[i] - (w->k[i] - 1 - hi[i]) * w->d[i];
        if (pb < 0 || pe < 0) return false;
        *crop |= lo[i] > 0 || hi[i] < w->k[i] - 1;
    }
    return true;
}

/* Whether the window, cropped to [lo, hi], covers its whole input with no pad and one output per plane:
 * then each output is the dot product of the input's C H W values with one filter's. */
static bool whole_window(const wf__nn_window *w, const int64_t *in_hw, const int64_t *lo, const int64_t *hi)
{
    for (int i = 0; i < 2; i++) {
        int64_t kc = hi[i] - lo[i] + 1;
        /* one output, reading rows 0 .. kc - 1 (a trailing pad it never reaches does not matter) */
        if (w->out[i] != 1 || kc != in_hw[i] || (kc > 1 && w->d[i] != 1) || w->pb[i] != lo[i] * w->d[i])
            return false;
    }
    return true;
}

/* The node's attributes with kernel_shape, pads and auto_pad replaced by the cropped window's. */
static int cropped_attrs(const wf_node *n, const wf__nn_window *w, const int64_t *lo, const int64_t *hi,
                         int64_t *ks, int64_t *pads, wf_attr *a)
{
    int na = 0;
    for (int k = 0; k < WF__MAX_ATTRS && n->op->attrs[k].name; k++) {
        const char *nm = n->op->attrs[k].name;
        const wf__attr *v = &n->attrs[k];
        if (!v->set || !strcmp(nm, "kernel_shape") || !strcmp(nm, "pads") || !strcmp(nm, "auto_pad")) continue;
        if (v->type == WF_ATTR_INTS) a[na++] = wf_attr_ints(nm, v->ints, v->n);
        else if (v->type == WF_ATTR_INT) a[na++] = wf_attr_int(nm, v->i);
    }
    for (int i = 0; i < 2; i++) {
        ks[i] = hi[i] - lo[i] + 1;
        pads[i] = w->pb[i] - lo[i] * w->d[i];
        pads[i + 2] = w->pe[i] - (w->k[i] - 1 - hi[i]) * w->d[i];
    }
    a[na++] = wf_attr_ints("kernel_shape", ks, 2);
    a[na++] = wf_attr_ints("pads", pads, 4);
    return na;
}

static wf_status *ints_const(wf__pass_run *r, const wf_node *n, const char *suffix, const int64_t *v, int64_t len,
                             wf_output *out)
{
    wf_tensor *t = NULL;
    char name[600];
    WF__TRY(wf__tensor_alloc(WF_I64, 1, &len, "conv_crop's indices", &t));
    memcpy(t->data, v, sizeof(int64_t) * (size_t)len);
    wf__pass_fresh_name(r->dst, n->name, suffix, name, sizeof name);
    wf_status *s = wf_const(r->dst, name, t, out);
    wf_tensor_free(t);
    return s;
}

/* The crops made in this run: a convolution and its Conv2DBackpropInput crop the same weights the same way,
 * and share one crop (each Slice of a variable reads the whole weight tensor: 0.35-0.47 ms for ResNet-18's
 * 512x512x3x3 per step). CSE ran before this pass, so it cannot merge them. Shared only between nodes with
 * the same device request and colocation group. */
typedef struct {
    wf_output wt, out;
    int64_t lo[2], hi[2];
    const char *device, *coloc;
} crop_memo;

typedef struct {
    crop_memo *m;
    int n, cap;
} crop_state;

static wf_status *begin(wf__pass_run *r)
{
    crop_state *st = wf__malloc(sizeof *st);
    if (!st) return wf__oom("conv_crop", sizeof *st);
    *st = (crop_state){0};
    r->state = st;
    return NULL;
}

static void end(wf__pass_run *r)
{
    crop_state *st = r->state;
    if (st) wf__free(st->m);
    wf__free(st);
    r->state = NULL;
}

static crop_memo *memo_find(crop_state *st, const wf_node *n, wf_output wt, const int64_t *lo, const int64_t *hi)
{
    for (int i = 0; st && i < st->n; i++) {
        crop_memo *m = &st->m[i];
        if (m->wt.node == wt.node && m->wt.index == wt.index && m->lo[0] == lo[0] && m->lo[1] == lo[1] &&
            m->hi[0] == hi[0] && m->hi[1] == hi[1] && wf__pass_same_str(m->device, n->device) &&
            wf__pass_same_str(m->coloc, n->coloc))
            return m;
    }
    return NULL;
}

/* Remembers a crop; a failure to grow the list only loses the sharing. */
static void memo_add(crop_state *st, const wf_node *n, wf_output wt, const int64_t *lo, const int64_t *hi,
                     wf_output out)
{
    if (!st) return;
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 16;
        crop_memo *m = wf__realloc(st->m, sizeof *m * (size_t)st->cap, sizeof *m * (size_t)cap);
        if (!m) return;
        st->m = m;
        st->cap = cap;
    }
    st->m[st->n++] = (crop_memo){.wt = wt, .out = out, .lo = {lo[0], lo[1]}, .hi = {hi[0], hi[1]},
                                 .device = n->device, .coloc = n->coloc};
}

static wf_status *crop_weights_new(wf__pass_run *r, const wf_node *n, wf_output wt, const int64_t *lo,
                                   const int64_t *hi, wf_output *out);

/* W[:, :, lo0:hi0+1, lo1:hi1+1]: a new constant when W is one, else a Slice node; the same crop of the same
 * W made earlier in this run when there is one. */
static wf_status *crop_weights(wf__pass_run *r, const wf_node *n, wf_output wt, const int64_t *lo, const int64_t *hi,
                               wf_output *out)
{
    const crop_memo *m = memo_find(r->state, n, wt, lo, hi);
    if (m) {
        *out = m->out;
        return NULL;
    }
    WF__TRY(crop_weights_new(r, n, wt, lo, hi, out));
    memo_add(r->state, n, wt, lo, hi, *out);
    return NULL;
}

static wf_status *crop_weights_new(wf__pass_run *r, const wf_node *n, wf_output wt, const int64_t *lo,
                                   const int64_t *hi, wf_output *out)
{
    const wf_tensor *v = wf__pass_value(wt);
    char name[600];
    if (v && v->rank == 4) {
        int64_t d[4] = {v->dims[0], v->dims[1], hi[0] - lo[0] + 1, hi[1] - lo[1] + 1};
        wf_tensor *t = NULL;
        WF__TRY(wf__tensor_alloc(v->dtype, 4, d, "conv_crop's weights", &t));
        size_t es = wf_dtype_size(v->dtype), row = es * (size_t)d[3];
        for (int64_t p = 0; p < d[0] * d[1]; p++)
            for (int64_t h = 0; h < d[2]; h++)
                memcpy((char *)t->data + es * (size_t)((p * d[2] + h) * d[3]),
                       (const char *)v->data + es * (size_t)((p * v->dims[2] + lo[0] + h) * v->dims[3] + lo[1]), row);
        wf__pass_fresh_name(r->dst, n->name, "/cropped_w", name, sizeof name);
        wf_status *s = wf_const(r->dst, name, t, out);
        wf_tensor_free(t);
        return s;
    }
    wf_output in[4] = {wt};
    const int64_t st[2] = {lo[0], lo[1]}, en[2] = {hi[0] + 1, hi[1] + 1}, ax[2] = {2, 3};
    WF__TRY(ints_const(r, n, "/crop_starts", st, 2, &in[1]));
    WF__TRY(ints_const(r, n, "/crop_ends", en, 2, &in[2]));
    WF__TRY(ints_const(r, n, "/crop_axes", ax, 2, &in[3]));
    wf__pass_fresh_name(r->dst, n->name, "/crop_w", name, sizeof name);
    return wf__pass_emit(r, n, "Slice", name, in, 4, NULL, 0, out);
}

static const wf__tinfo *info(wf_output o) { return o.node ? &o.node->out[o.index] : NULL; }

static bool known4(const wf__tinfo *t)
{
    if (!t || t->rank != 4) return false;
    for (int i = 0; i < 4; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

/* Reshape(v, dims) named base + suffix (or `name` when given). */
static wf_status *reshape(wf__pass_run *r, const wf_node *n, wf_output v, const int64_t *dims, int rank,
                          const char *suffix, const char *name, wf_output *out)
{
    wf_output in[2] = {v};
    char nm[600];
    WF__TRY(ints_const(r, n, suffix, dims, rank, &in[1]));
    if (!name) wf__pass_fresh_name(r->dst, n->name, suffix, nm, sizeof nm);
    return wf__pass_emit(r, n, "Reshape", name ? name : nm, in, 2, NULL, 0, out);
}

static wf_status *matmul(wf__pass_run *r, const wf_node *n, wf_output a, wf_output b, int ta, int tb, wf_output *out)
{
    wf_output in[2] = {a, b};
    wf_attr at[2] = {wf_attr_int("transpose_a", ta), wf_attr_int("transpose_b", tb)};
    char nm[600];
    wf__pass_fresh_name(r->dst, n->name, "/matmul", nm, sizeof nm);
    return wf__pass_emit(r, n, "MatMul", nm, in, 2, at, 2, out);
}

/* The convolution whose (cropped) window covers its whole input, as a matrix product over K = C H W, with
 * X [N, K], W [O, K] and dy [N, O] as views:
 *     Conv2D               y  = X W^T       (reshaped to [N, O, 1, 1])
 *     Conv2DBackpropInput  dx = dy W        (to [N, C, H, W])
 *     Conv2DBackpropFilter dW = dy^T X      (to [O, C, H, W], then padded back to the full kernel) */
static wf_status *as_matmul(wf__pass_run *r, const wf_node *n, const wf_output *in, const wf__tinfo *x,
                            const wf__tinfo *w, const int64_t *lo, const int64_t *hi, bool crop, wf_output *out)
{
    const char *op = n->op->name;
    int64_t N = x->dims[0], O = w->dims[0], C = w->dims[1], H = x->dims[2], W = x->dims[3];
    const int64_t xf[2] = {N, C * H * W}, wf_[2] = {O, C * H * W}, dyf[2] = {N, O};
    wf_output a, b, p;
    if (!strcmp(op, "Conv2D") || !strcmp(op, "Conv2DBackpropInput")) {
        wf_output wc = in[1];
        if (crop) WF__TRY(crop_weights(r, n, in[1], lo, hi, &wc));
        WF__TRY(reshape(r, n, wc, wf_, 2, "/w_rows", NULL, &b));
        if (!strcmp(op, "Conv2D")) {
            const int64_t yd[4] = {N, O, 1, 1};
            WF__TRY(reshape(r, n, in[0], xf, 2, "/x_rows", NULL, &a));
            WF__TRY(matmul(r, n, a, b, 0, 1, &p));
            return reshape(r, n, p, yd, 4, "/y_shape", n->name, &out[0]);
        }
        WF__TRY(reshape(r, n, in[2], dyf, 2, "/dy_rows", NULL, &a));
        WF__TRY(matmul(r, n, a, b, 0, 0, &p));
        return reshape(r, n, p, x->dims, 4, "/dx_shape", n->name, &out[0]);
    }
    const int64_t dwd[4] = {O, C, H, W};
    WF__TRY(reshape(r, n, in[2], dyf, 2, "/dy_rows", NULL, &a));
    WF__TRY(reshape(r, n, in[0], xf, 2, "/x_rows", NULL, &b));
    WF__TRY(matmul(r, n, a, b, 1, 0, &p));
    if (!crop) return reshape(r, n, p, dwd, 4, "/dw_shape", n->name, &out[0]);
    const int64_t zpads[8] = {0, 0, lo[0], lo[1], 0, 0, w->dims[2] - 1 - hi[0], w->dims[3] - 1 - hi[1]};
    wf_output pin[2];
    WF__TRY(reshape(r, n, p, dwd, 4, "/dw_shape", NULL, &pin[0]));
    WF__TRY(ints_const(r, n, "/crop_pads", zpads, 8, &pin[1]));
    return wf__pass_emit(r, n, "Pad", n->name, pin, 2, NULL, 0, &out[0]);
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    const char *op = n->op->name;
    bool fwd = !strcmp(op, "Conv2D"), bpi = !strcmp(op, "Conv2DBackpropInput"), bpf = !strcmp(op, "Conv2DBackpropFilter");
    const wf__tinfo *x = NULL, *w = NULL;
    if ((fwd || bpi || bpf) && n->n_in >= 2 && in[0].node && in[1].node) {
        x = fwd || bpf ? info(in[0]) : &n->out[0]; /* the forward input: Conv2DBackpropInput's output */
        w = bpf ? &n->out[0] : info(in[1]);
    }
    wf__nn_window win;
    int64_t lo[2], hi[2];
    char err[256];
    bool crop = false, mm = false;
    if (known4(x) && known4(w) &&
        !wf__nn_window_resolve_with(wf__attr_get, n->op, n->attrs, WF__WIN_CONV, x->dims + 2, w->dims + 2, &win, err,
                                    sizeof err) &&
        used_taps(&win, x->dims + 2, lo, hi, &crop))
        /* a matrix product when the window covers the input; not a Conv2D with a bias, which the fusion
         * pass joins to its activation and the layout pass keeps in a blocked layout */
        mm = whole_window(&win, x->dims + 2, lo, hi) && wf__attr_i(n->op, n->attrs, "group") == 1 &&
             x->dims[1] == w->dims[1] && (!fwd || n->n_in < 3 || !in[2].node) && (fwd || in[2].node);
    if (!crop && !mm) {
        wf_node *c;
        WF__TRY(wf__pass_copy(r, n, in, &c));
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    wf_status *s = NULL;
    if (mm) {
        s = as_matmul(r, n, in, x, w, lo, hi, crop, out);
        return s ? wf__status_wrap(s, "conv_crop: node '%s' (%s) as a matrix product", n->name, op) : NULL;
    }
    wf_attr a[WF__MAX_ATTRS + 2];
    int64_t ks[2], pads[4];
    int na = cropped_attrs(n, &win, lo, hi, ks, pads, a);
    wf_output nin[3] = {in[0], in[1], n->n_in > 2 ? in[2] : (wf_output){0}};
    if (!bpf) {
        s = crop_weights(r, n, in[1], lo, hi, &nin[1]);
        if (!s) s = wf__pass_emit(r, n, op, n->name, nin, n->n_in, a, na, &out[0]);
    } else {
        const int64_t sizes[4] = {w->dims[0], w->dims[1], ks[0], ks[1]};
        const int64_t zpads[8] = {0, 0, lo[0], lo[1], 0, 0, w->dims[2] - 1 - hi[0], w->dims[3] - 1 - hi[1]};
        char name[600];
        wf_output dw, pin[2];
        s = ints_const(r, n, "/cropped_sizes", sizes, 4, &nin[1]);
        wf__pass_fresh_name(r->dst, n->name, "/cropped", name, sizeof name);
        if (!s) s = wf__pass_emit(r, n, op, name, nin, 3, a, na, &dw);
        if (!s) s = ints_const(r, n, "/crop_pads", zpads, 8, &pin[1]);
        pin[0] = dw;
        if (!s) s = wf__pass_emit(r, n, "Pad", n->name, pin, 2, NULL, 0, &out[0]);
    }
    return s ? wf__status_wrap(s, "conv_crop: node '%s' (%s)", n->name, op) : NULL;
}

const wf__pass wf__pass_conv_crop = {"conv_crop", begin, end, visit};
