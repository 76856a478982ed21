/*
 * Pass "conv_scale": a per-channel scale of a convolution's input moves into the convolution's weight:
 *     Conv2D(Mul(x, s), W, b)  ->  Conv2D(x, Mul(W, s), b)
 * with x [N, C, H, W] and s one value per channel, [1, C, 1, 1] or [C, 1, 1], the same for every image
 * (a squeeze-and-excitation block's scale at batch 1: MobileNetV3's and EfficientNet's project
 * convolutions read Mul(dw, sigmoid(...)) and nothing else does). Every output of an ungrouped convolution
 * is a sum over input channels c of W[o, c, i, j] x[c, p] terms, so scaling x's channel c by s[c] is
 * scaling W's input channel c by it: Mul(W, s) broadcasts s over W's dim 1 as it did over x's. The
 * scale then costs O C kh kw multiplications per run instead of C H W, plus the convolution repacking
 * its weight, which is no longer a constant (about as much again); so the rewrite is made where
 * 2 O kh kw < H W. EfficientNet-B0's first three stages scale 1.2M, 0.3-0.45M and 0.1-0.19M values each
 * (57-101 us a Mul traced at batch 1) for 16-40 output channels.
 *
 * Values: (x s) W and x (W s) round differently (f32 rounding of each term). NaN and Inf: a term is
 * x[c, p] s[c] W[o, c, i, j] in either order, so it is NaN exactly where one factor is NaN or an infinite
 * one meets a zero, and else infinite of the same sign; padded taps read zeros that no scale changes.
 * Left alone: a Mul with another reader (a fetch, a gradient), a scale that differs by image or is not
 * per channel, a grouped convolution (its weight's dim 1 is a group's channels), shapes not known when
 * the graph is built, different device requests or colocation groups on the two nodes.
 */
#include "passes/pass.h"

typedef struct cs_state {
    int *sole;      /* per source node: its only live reader (wf__pass_sole_readers) */
    wf_output *s;   /* per source Mul folded away: its scale (mapped); its output maps to x */
} cs_state;

static wf_status *begin(wf__pass_run *r)
{
    cs_state *st = wf__calloc(1, sizeof *st);
    if (st) st->s = wf__calloc((size_t)(r->src->n ? r->src->n : 1), sizeof *st->s);
    if (st && st->s && !(st->sole = wf__pass_sole_readers(r))) wf__free(st->s), st->s = NULL;
    if (!st || !st->s) {
        wf__free(st);
        return wf__oom("conv_scale", sizeof(wf_output) * (size_t)r->src->n);
    }
    r->state = st;
    return NULL;
}

static void end(wf__pass_run *r)
{
    cs_state *st = r->state;
    if (!st) return;
    wf__free(st->sole);
    wf__free(st->s);
    wf__free(st);
    r->state = NULL;
}

static bool known(const wf__tinfo *t, int rank)
{
    if (t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

/* s is one value per channel of the [N, C, H, W] x, the same for every image: [1, C, 1, 1] or [C, 1, 1] */
static bool per_channel(const wf__tinfo *s, const wf__tinfo *x)
{
    if (s->dtype != x->dtype) return false;
    if (known(s, 4)) return s->dims[0] == 1 && s->dims[1] == x->dims[1] && s->dims[2] == 1 && s->dims[3] == 1;
    return known(s, 3) && s->dims[0] == x->dims[1] && s->dims[1] == 1 && s->dims[2] == 1;
}

/* Which input of Mul m (0 or 1) is the scale, where the rewrite is taken; -1 if not. */
static int scale_input(const wf__pass_run *r, const cs_state *st, const wf_node *m)
{
    if (strcmp(m->op->name, "Mul") != 0 || m->n_in != 2 || !m->in[0].node || !m->in[1].node) return -1;
    if (wf__pass_uses(r, m, 0) != 1 || st->sole[m->id] < 0) return -1;
    const wf_node *c = r->src->nodes[st->sole[m->id]];
    if (strcmp(c->op->name, "Conv2D") != 0 || c->n_in < 2 || c->in[0].node != m || c->in[0].index != 0 || !c->in[1].node)
        return -1;
    for (int i = 1; i < c->n_in; i++)
        if (c->in[i].node == m) return -1; /* the product is also the weight or the bias */
    if (!wf__pass_same_str(c->device, m->device) || !wf__pass_same_str(c->coloc, m->coloc)) return -1;
    if (wf__attr_i(c->op, c->attrs, "group") > 1) return -1;
    const wf__tinfo *a = wf__pass_info(m->in[0]), *b = wf__pass_info(m->in[1]), *w = wf__pass_info(c->in[1]);
    const wf__tinfo *y = &m->out[0];
    if (!known(y, 4) || !known(w, 4) || w->dtype != y->dtype || w->dims[1] != y->dims[1]) return -1;
    int si = known(a, 4) && !memcmp(a->dims, y->dims, sizeof(int64_t) * 4) && per_channel(b, y) ? 1
             : known(b, 4) && !memcmp(b->dims, y->dims, sizeof(int64_t) * 4) && per_channel(a, y) ? 0
                                                                                                 : -1;
    if (si < 0) return -1;
    /* O kh kw scaled weights and a repack against H W scaled values per channel */
    return 2.0 * (double)w->dims[0] * (double)(w->dims[2] * w->dims[3]) < (double)(y->dims[2] * y->dims[3]) ? si : -1;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    cs_state *st = r->state;
    int si = scale_input(r, st, n);
    if (si >= 0) { /* the Mul goes: its reader, the convolution, takes x and scales its weight */
        st->s[n->id] = in[si];
        out[0] = in[1 - si];
        return NULL;
    }
    const wf_node *m = !strcmp(n->op->name, "Conv2D") && n->n_in >= 2 ? n->in[0].node : NULL;
    wf_node *c;
    if (!m || !st->s[m->id].node) {
        WF__TRY(wf__pass_copy(r, n, in, &c));
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    char name[512];
    wf__pass_fresh_name(r->dst, n->name, "/scaled_weight", name, sizeof name);
    wf_output ws[2] = {in[1], st->s[m->id]}, sw;
    wf_status *s = wf__pass_emit(r, n, "Mul", name, ws, 2, NULL, 0, &sw);
    wf_output cin[3] = {in[0], sw, n->n_in > 2 ? in[2] : (wf_output){0}};
    if (!s) s = wf__pass_copy(r, n, cin, &c);
    if (s) return wf__status_wrap(s, "conv_scale: node '%s' (Conv2D) after '%s' (Mul)", n->name, m->name);
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_conv_scale = {"conv_scale", begin, end, visit};
