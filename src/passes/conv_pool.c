/*
 * Pass "conv_pool": a 1x1 convolution (stride 1, no padding) read only by an average pool runs after
 * the pool instead of before it:
 *     AvgPool2D(Conv2D(x, W, b))  ->  Conv2D(AvgPool2D(x), W, b)
 * A 1x1 convolution is the same affine map at every pixel, y[:, p] = W x[:, p] + b, and a pool without
 * padding and without ceil mode averages whole windows, each output the mean of k0 k1 pixels; a mean of
 * affine images is the affine image of the mean (the weights 1 / (k0 k1) sum to 1, so b comes through
 * once). The convolution then reads the pool's output, k0 k1 / (s0 s1) times fewer pixels: DenseNet's
 * transition layers (BN, ReLU, a 1x1 convolution halving the channels, a 2x2 average pool of stride 2)
 * do a quarter of their multiplications (DenseNet-121: 3 convolutions of 0.2 GFLOP each at batch 1).
 * The pool now averages the convolution's C input channels instead of its O outputs, so the rewrite is
 * made only where the multiply-adds it saves, C O (H W - OH OW) / group, exceed the additions it adds,
 * (C - O) OH OW k0 k1.
 *
 * Values: the same products, summed in another order (within f32 rounding of the terms' magnitude). A
 * NaN or Inf in x gives the same outputs in both orders: an output is the sum over a window's pixels p
 * and channels c of the terms W[o, c] x[c, p] / (k0 k1), so it is NaN where those terms hold a NaN, a
 * 0 * Inf or Infs of both signs, and else the sign of the infinite terms; pooling first sums a channel's
 * Infs before multiplying by the same W[o, c], which gives NaN, or an Inf of that sign, in just those
 * cases (only a finite sum that overflows in one order and not the other can differ). A grouped 1x1
 * convolution is also per pixel and is taken.
 * Left alone: a convolution with another reader (a fetch, a gradient), kernels other than 1x1, strides
 * or pads, a pool with pads, ceil_mode or a shape not known at build time, a request for different
 * devices or colocation groups on the two nodes.
 */
#include "ops/nn_window.h"
#include "passes/pass.h"

typedef struct cp_state {
    int *sole;         /* per source node: its only live reader (wf__pass_sole_readers) */
    wf_output *moved;  /* per source node: for a pool the convolution now follows, the convolution's output */
} cp_state;

static wf_status *begin(wf__pass_run *r)
{
    cp_state *st = wf__calloc(1, sizeof *st);
    if (st) st->moved = wf__calloc((size_t)(r->src->n ? r->src->n : 1), sizeof *st->moved);
    if (st && st->moved && !(st->sole = wf__pass_sole_readers(r))) wf__free(st->moved), st->moved = NULL;
    if (!st || !st->moved) {
        wf__free(st);
        return wf__oom("conv_pool", sizeof(wf_output) * (size_t)r->src->n);
    }
    r->state = st;
    return NULL;
}

static void end(wf__pass_run *r)
{
    cp_state *st = r->state;
    if (!st) return;
    wf__free(st->sole);
    wf__free(st->moved);
    wf__free(st);
    r->state = NULL;
}

static bool known4(const wf__tinfo *t)
{
    if (t->rank != 4) return false;
    for (int i = 0; i < 4; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

/* The AvgPool2D that convolution c (in: its mapped inputs) can move after, or NULL. */
static const wf_node *movable(const wf__pass_run *r, const cp_state *st, const wf_node *c, const wf_output *in)
{
    if (strcmp(c->op->name, "Conv2D") != 0 || !in[0].node || !in[1].node) return NULL;
    if (wf__pass_uses(r, c, 0) != 1 || st->sole[c->id] < 0) return NULL;
    const wf_node *p = r->src->nodes[st->sole[c->id]];
    if (strcmp(p->op->name, "AvgPool2D") != 0 || p->in[0].node != c || p->in[0].index != 0) return NULL;
    if (!wf__pass_same_str(c->device, p->device) || !wf__pass_same_str(c->coloc, p->coloc)) return NULL;
    const wf__tinfo *x = wf__pass_info(in[0]), *w = wf__pass_info(in[1]), *y = &c->out[0], *z = &p->out[0];
    if (!known4(x) || !known4(w) || !known4(y) || !known4(z) || w->dims[2] != 1 || w->dims[3] != 1) return NULL;
    wf__nn_window cw, pw;
    char err[256];
    const int64_t none[2] = {-1, -1};
    if (wf__nn_window_resolve_with(wf__attr_get, c->op, c->attrs, WF__WIN_CONV, x->dims + 2, w->dims + 2, &cw, err,
                                   sizeof err) ||
        wf__nn_window_resolve_with(wf__attr_get, p->op, p->attrs, WF__WIN_POOL, y->dims + 2, none, &pw, err,
                                   sizeof err))
        return NULL;
    if (wf__attr_i(p->op, p->attrs, "ceil_mode") != 0) return NULL;
    for (int i = 0; i < 2; i++)
        if (cw.k[i] != 1 || cw.s[i] != 1 || cw.pb[i] || cw.pe[i] || pw.pb[i] || pw.pe[i] || pw.out[i] != z->dims[2 + i])
            return NULL;
    /* multiply-adds saved (w's dim 1: a group's input channels) against the pool's added additions */
    double C = (double)x->dims[1], Cg = (double)w->dims[1], O = (double)y->dims[1],
           hw = (double)(x->dims[2] * x->dims[3]), ohw = (double)(pw.out[0] * pw.out[1]), kk = (double)(pw.k[0] * pw.k[1]);
    return Cg * O * (hw - ohw) > (C - O) * ohw * kk ? p : NULL;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    cp_state *st = r->state;
    if (st->moved[n->id].node) { /* the pool, now before its convolution */
        out[0] = st->moved[n->id];
        return NULL;
    }
    const wf_node *pool = movable(r, st, n, in);
    wf_node *c;
    if (!pool) {
        WF__TRY(wf__pass_copy(r, n, in, &c));
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    /* the pool (its attributes, name and requests) over x, then the convolution over the pool's output */
    wf_node *pc;
    wf_status *s = wf__pass_copy(r, pool, &in[0], &pc);
    wf_output cin[3] = {{pc, 0}, in[1], n->n_in > 2 ? in[2] : (wf_output){0}};
    if (!s) s = wf__pass_copy(r, n, cin, &c);
    if (s) return wf__status_wrap(s, "conv_pool: node '%s' (Conv2D) after '%s' (AvgPool2D)", n->name, pool->name);
    /* the convolution's own output has no reader left (the pool was its only one): both map to the result */
    st->moved[pool->id] = out[0] = (wf_output){c, 0};
    return NULL;
}

const wf__pass wf__pass_conv_pool = {"conv_pool", begin, end, visit};
