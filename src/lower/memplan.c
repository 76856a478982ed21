/*
 * The static memory plan and the session's weights (see memplan.h).
 *
 * Layout: plan nodes are visited in a topological order; each value whose size is known (dtype and
 * every dim) goes into a buffer of its device. A buffer is free for a node v when every reader of the
 * buffer's last value is an ancestor of v (the last value's producer when nothing reads it), so the
 * bytes are dead whatever order the executor runs ready nodes in; earlier values of the buffer are
 * then dead too (their readers are ancestors of the last value's producer). Of the free buffers the
 * smallest that fits is taken, else the largest (grown); else a new buffer. Fetched values keep their
 * buffer to the end of the run. Buffers are laid out one after another per device, each rounded to
 * WF__ARENA_ALIGN bytes.
 */
#include <stdio.h>

#include "device/device.h"
#include "lower/memplan.h"

/* Ancestor bitsets cost n^2/8 bytes: past this many nodes a plan gets no arena. */
#define MEMPLAN_MAX_NODES 8192
/* Fetched values of at least this many bytes are not planned (see wf__memplan_build). */
#define MEMPLAN_FETCH_DIRECT ((size_t)1 << 20)

static size_t round_up(size_t n) { return (n + WF__ARENA_ALIGN - 1) / WF__ARENA_ALIGN * WF__ARENA_ALIGN; }

/* Fetched Assigns stay where they ran (a resident variable's next value): they outlive the run. */
static bool outlives_run(const wf__plan *p, int slot)
{
    for (int i = 0; i < p->n_fetches; i++)
        if (p->fetch_slot[i] == slot && p->key_fetch[i].index == 0 && p->key_fetch[i].node &&
            !strcmp(p->key_fetch[i].node->op->name, "Assign"))
            return true;
    return false;
}

/* Whether the value in `slot` becomes a variable's next value: an Assign that outlives the run reads it.
 * The Assign passes the very buffer on (its kernel is Identity's), so the buffer must outlive the run
 * too; planned into the arena it was copied out again at every run (ResNet-18's training step: the new
 * weights and Adam slots, 135 MB, 16 ms a step). */
static bool kept_by_assign(const wf__plan *p, int slot, const int *rd_start, const int *rd)
{
    for (int r = rd_start[slot]; r < rd_start[slot + 1]; r++) {
        const wf__pnode *a = &p->nodes[rd[r]];
        if (a->op && !strcmp(a->op->name, "Assign") && a->n_out > 0 && outlives_run(p, a->out_slot[0])) return true;
    }
    return false;
}

/* The buffer of node v's input 0 if v's output 0 can take it: the kernel works in place
 * (WF__K_INPLACE: it writes output element i only after reading input element i), the input is a planned
 * value of the same dtype and byte size on v's device, still the buffer's last value (not fetched), read
 * once by v, and every other reader of it is an ancestor of v (it has run whatever the order). -1 if not.
 * A Conv2D or MatMul with a fused residual (wf__pnode.fused_res) takes the residual's buffer instead: its
 * result is accumulated over the residual there. */
static int in_place_buffer(const wf__plan *p, int v, const uint64_t *av, size_t raw, const int *buf_of,
                           const int *b_last, const int *b_dev, const int *producer, const int *rd_start,
                           const int *rd)
{
    const wf__pnode *pn = &p->nodes[v];
    int ip = pn->fused_res > 0 ? pn->fused_res : pn->kernel && (pn->kernel->flags & WF__K_INPLACE) ? 0 : -1;
    if (ip < 0 || ip >= pn->n_in || pn->n_out < 1) return -1;
    int a = pn->in_slot[ip];
    if (a < 0 || buf_of[a] < 0 || b_last[buf_of[a]] != a || b_dev[buf_of[a]] != pn->device) return -1;
    for (int i = 0; i < pn->n_in; i++)
        if (i != ip && pn->in_slot[i] == a) return -1;
    const wf__tinfo *to = &pn->out_info[0], *ti = NULL;
    const wf__pnode *pa = producer[a] >= 0 ? &p->nodes[producer[a]] : NULL;
    for (int j = 0; pa && j < pa->n_out; j++)
        if (pa->out_slot[j] == a) ti = &pa->out_info[j];
    if (!ti || ti->dtype != to->dtype || ti->rank < 0) return -1;
    int64_t e = wf__numel(ti->rank, ti->dims);
    if (e < 0 || (size_t)e * wf_dtype_size(ti->dtype) != raw) return -1;
    for (int r = rd_start[a]; r < rd_start[a + 1]; r++)
        if (rd[r] != v && !(av[rd[r] / 64] >> (rd[r] % 64) & 1)) return -1;
    return buf_of[a];
}

/* Concats laid out in place: a Concat's inputs are placed inside its output, so that their producers
 * write there and the Concat copies nothing (a kernel with WF__K_PARTS_IN_PLACE skips an input found at
 * its place). SqueezeNet's eight and GoogLeNet's nine channel Concats had cost 5% and 1% of a run in
 * copies. A group is a chain of such Concats whose input lists are prefixes of the longest one's (its
 * leader): DenseNet's layer k concatenates the block's input and the first k - 1 layers' results, so
 * every layer's Concat is a prefix of the block's last, and the whole block lives in the last one's
 * buffer, each Concat's result its first bytes (DenseNet-121's 62 Concats had copied 2 ms of a 37 ms
 * run). Only where each input is a contiguous run of the output's bytes: ones before the axis (batch 1
 * along the channels), in plain layouts or in level 3's channel blocks of 8 or 16 (whole blocks per
 * input: lower/layout.c), not in nhwc. */
static bool concat_contiguous(const wf_context *ctx, const wf__plan *p, int v)
{
    const wf__pnode *pn = &p->nodes[v];
    if (!pn->kernel || !(pn->kernel->flags & WF__K_PARTS_IN_PLACE) || pn->n_out != 1 || pn->n_in < 1 ||
        pn->n_in > 64 || pn->feed >= 0)
        return false;
    const wf__tinfo *to = &pn->out_info[0];
    int ax;
    if (to->rank < 1 || to->dtype == WF_STRING || !wf__norm_axis(wf__attr_i(pn->op, pn->attrs, "axis"), to->rank, &ax))
        return false;
    for (int a = 0; a < ax; a++)
        if (to->dims[a] != 1) return false;
    if (pn->in_blocked && (ax != 1 || ctx->devices[pn->device].info.channel_block <= 1)) return false;
    for (int i = 0; i < pn->n_in; i++)
        if (pn->in_slot[i] < 0) return false;
    return true;
}

/* Whether Concat u's inputs are the first of Concat v's, in order. */
static bool concat_prefix(const wf__plan *p, int u, int v)
{
    const wf__pnode *a = &p->nodes[u], *b = &p->nodes[v];
    if (a->n_in > b->n_in || a->device != b->device || a->out_info[0].dtype != b->out_info[0].dtype ||
        a->in_blocked != (b->in_blocked & ((a->n_in >= 32 ? 0 : 1u << a->n_in) - 1u)))
        return false;
    for (int i = 0; i < a->n_in; i++)
        if (a->in_slot[i] != b->in_slot[i]) return false;
    return true;
}

/* The group led by Concat v (see above), if it can be laid out in place: in_grp[w] = v for its Concats
 * (v among them; cand[] lists the Concats that qualify alone), off[] the leader's inputs' byte offsets.
 * Every input is a planned value of the leader's device that only the group's Concats read, each once,
 * neither fetched nor a feed, a constant or another group's Concat's result, at a 64-byte multiple; the
 * other Concats' results are not fetched (their bytes are the leader's). False (in_grp untouched) if not. */
static bool concat_group(const wf__plan *p, int v, const int *cand, int nc, const int *producer, const int *rd_start,
                         const int *rd, const int *fetched, const int *grp, int *in_grp, int64_t *off)
{
    const wf__pnode *pn = &p->nodes[v];
    const wf__tinfo *to = &pn->out_info[0];
    if (grp[pn->out_slot[0]] >= 0) return false; /* an input of a group formed already */
    for (int c = 0; c < nc; c++)
        if (cand[c] != v && concat_prefix(p, cand[c], v) &&
            (p->nodes[cand[c]].n_in == pn->n_in || fetched[p->nodes[cand[c]].out_slot[0]] ||
             grp[p->nodes[cand[c]].out_slot[0]] >= 0))
            return false;
    int64_t at = 0;
    for (int i = 0; i < pn->n_in; i++) {
        int sl = pn->in_slot[i];
        if (p->slot_static[sl] || fetched[sl] || producer[sl] < 0 || in_grp[producer[sl]] >= 0) return false;
        for (int c = 0; c < nc; c++) /* a Concat's result: not nested in another group */
            if (cand[c] == producer[sl]) return false;
        /* readers: the group's Concats long enough to hold input i, each once */
        int want = 1;
        for (int c = 0; c < nc; c++)
            want += cand[c] != v && p->nodes[cand[c]].n_in > i && concat_prefix(p, cand[c], v);
        if (rd_start[sl + 1] - rd_start[sl] != want) return false;
        for (int r = rd_start[sl]; r < rd_start[sl + 1]; r++)
            if (rd[r] != v && !(p->nodes[rd[r]].n_in < pn->n_in && concat_prefix(p, rd[r], v))) return false;
        const wf__pnode *pa = &p->nodes[producer[sl]];
        if (pa->device != pn->device || pa->feed >= 0) return false;
        const wf__tinfo *ti = NULL;
        for (int j = 0; j < pa->n_out; j++)
            if (pa->out_slot[j] == sl) ti = &pa->out_info[j];
        if (!ti || ti->dtype != to->dtype || ti->rank != to->rank) return false;
        int64_t e = wf__numel(ti->rank, ti->dims);
        if (e < 0 || at % 64) return false;
        off[i] = at;
        at += e * (int64_t)wf_dtype_size(ti->dtype);
    }
    int64_t e = wf__numel(to->rank, to->dims);
    if (e < 0 || at != e * (int64_t)wf_dtype_size(to->dtype)) return false;
    in_grp[v] = v;
    for (int c = 0; c < nc; c++)
        if (cand[c] != v && concat_prefix(p, cand[c], v)) in_grp[cand[c]] = v;
    return true;
}

wf_status *wf__memplan_build(wf_context *ctx, wf__plan *p)
{
    int n = p->n_nodes, ns = p->n_slots, nd = ctx->n_devices;
    pthread_mutex_init(&p->arena_mu, NULL);
    p->arena_ctx = ctx;
    p->slot_off = wf__malloc(sizeof *p->slot_off * (size_t)(ns ? ns : 1));
    p->slot_cap = wf__calloc((size_t)(ns ? ns : 1), sizeof *p->slot_cap);
    if (!p->slot_off || !p->slot_cap) return wf__oom("the memory plan", sizeof(int64_t) * (size_t)ns * 2);
    for (int i = 0; i < ns; i++) p->slot_off[i] = -1;
    if (n == 0 || n > MEMPLAN_MAX_NODES) return NULL;

    size_t words = ((size_t)n + 63) / 64;
    uint64_t *anc = wf__calloc((size_t)n * words, sizeof *anc);
    int *order = wf__malloc(sizeof(int) * (size_t)n), *pend = wf__malloc(sizeof(int) * (size_t)n);
    int *producer = wf__malloc(sizeof(int) * (size_t)ns), *fetched = wf__calloc((size_t)ns, sizeof(int));
    int *rd_start = wf__calloc((size_t)ns + 1, sizeof(int)), *rd = NULL;
    int *buf_of = wf__malloc(sizeof(int) * (size_t)ns);
    int nb = 0, cap_b = 16;
    size_t *b_size = wf__malloc(sizeof(size_t) * (size_t)cap_b);
    int *b_last = wf__malloc(sizeof(int) * (size_t)cap_b), *b_dev = wf__malloc(sizeof(int) * (size_t)cap_b);
    /* Concats laid out in place: per slot, its group (the Concat's node) or -1 and its offset in the
     * group's buffer; per node, the group's buffer once opened (-1 before) */
    int *grp = wf__malloc(sizeof(int) * (size_t)ns), *g_buf = wf__malloc(sizeof(int) * (size_t)n);
    int64_t *sub_off = wf__calloc((size_t)ns, sizeof(int64_t)), *sub_len = wf__calloc((size_t)ns, sizeof(int64_t));
    int *in_grp = wf__malloc(sizeof(int) * (size_t)n), *cand = wf__malloc(sizeof(int) * (size_t)n);
    wf_status *s = NULL;
    if (!anc || !order || !pend || !producer || !fetched || !rd_start || !buf_of || !b_size || !b_last || !b_dev ||
        !grp || !g_buf || !sub_off || !sub_len || !in_grp || !cand) {
        s = wf__oom("the memory plan", (size_t)n * words * 8);
        goto out;
    }
    /* readers of each slot (a node reading one slot twice counts once per input: harmless) */
    size_t n_reads = 0;
    for (int v = 0; v < n; v++)
        for (int i = 0; i < p->nodes[v].n_in; i++)
            if (p->nodes[v].in_slot[i] >= 0) rd_start[p->nodes[v].in_slot[i] + 1]++, n_reads++;
    for (int i = 0; i < ns; i++) rd_start[i + 1] += rd_start[i];
    if (!(rd = wf__malloc(sizeof(int) * (n_reads ? n_reads : 1)))) {
        s = wf__oom("the memory plan", sizeof(int) * n_reads);
        goto out;
    }
    for (int i = 0; i < ns; i++) buf_of[i] = rd_start[i]; /* fill cursor */
    for (int v = 0; v < n; v++)
        for (int i = 0; i < p->nodes[v].n_in; i++)
            if (p->nodes[v].in_slot[i] >= 0) rd[buf_of[p->nodes[v].in_slot[i]]++] = v;
    for (int i = 0; i < ns; i++) producer[i] = -1, buf_of[i] = -1;
    for (int v = 0; v < n; v++)
        for (int j = 0; j < p->nodes[v].n_out; j++) producer[p->nodes[v].out_slot[j]] = v;
    for (int i = 0; i < p->n_fetches; i++) fetched[p->fetch_slot[i]] = 1;
    /* topological order (Kahn) and ancestor sets */
    int head = 0, tail = 0;
    for (int v = 0; v < n; v++)
        if (!(pend[v] = p->nodes[v].pending0)) order[tail++] = v;
    while (head < tail) {
        int u = order[head++];
        const wf__pnode *pu = &p->nodes[u];
        for (int k = 0; k < pu->n_succ; k++) {
            int w = pu->succ[k];
            uint64_t *aw = anc + (size_t)w * words, *au = anc + (size_t)u * words;
            for (size_t x = 0; x < words; x++) aw[x] |= au[x];
            aw[u / 64] |= 1ull << (u % 64);
            if (--pend[w] == 0) order[tail++] = w;
        }
    }
    if (tail != n) goto out; /* not a DAG: leave everything to the allocator */
    for (int i = 0; i < ns; i++) grp[i] = -1;
    int nc = 0;
    for (int v = 0; v < n; v++) {
        g_buf[v] = in_grp[v] = -1;
        if (concat_contiguous(ctx, p, v)) cand[nc++] = v;
    }
    /* leaders from the last in topological order: a chain's longest Concat comes after its others */
    for (int oi = n - 1; oi >= 0 && nc; oi--) {
        int v = order[oi];
        bool cv = false;
        for (int c = 0; c < nc && !cv; c++) cv = cand[c] == v;
        if (!cv || in_grp[v] >= 0) continue;
        int64_t offs[64];
        if (!concat_group(p, v, cand, nc, producer, rd_start, rd, fetched, grp, in_grp, offs)) continue;
        const wf__pnode *pn = &p->nodes[v];
        /* each part and each shorter Concat's result gets exactly its bytes (sub_len): a kernel asking for more
         * than planned goes to the allocator instead of over the next part */
        const wf__tinfo *to = &pn->out_info[0];
        int64_t whole = wf__numel(to->rank, to->dims) * (int64_t)wf_dtype_size(to->dtype);
        for (int i = 0; i < pn->n_in; i++) {
            grp[pn->in_slot[i]] = v, sub_off[pn->in_slot[i]] = offs[i];
            sub_len[pn->in_slot[i]] = (i + 1 < pn->n_in ? offs[i + 1] : whole) - offs[i];
        }
        for (int c = 0; c < nc; c++)
            if (in_grp[cand[c]] == v) {
                const wf__pnode *pc = &p->nodes[cand[c]];
                grp[pc->out_slot[0]] = v;
                if (cand[c] != v) sub_len[pc->out_slot[0]] = pc->n_in < pn->n_in ? offs[pc->n_in] : whole;
            }
    }
    for (int oi = 0; oi < n; oi++) {
        int v = order[oi];
        const wf__pnode *pn = &p->nodes[v];
        if (pn->feed >= 0) continue;
        const uint64_t *av = anc + (size_t)v * words;
        for (int j = 0; j < pn->n_out; j++) {
            int sl = pn->out_slot[j];
            const wf__tinfo *ti = &pn->out_info[j];
            /* a string's bytes are known only when it is made: never planned */
            if (p->slot_static[sl] || ti->rank < 0 || ti->dtype == WF_DTYPE_INVALID || ti->dtype == WF_STRING) continue;
            if (outlives_run(p, sl) || kept_by_assign(p, sl, rd_start, rd)) {
                p->slot_off[sl] = WF__SLOT_OWN;
                continue;
            }
            int64_t e = wf__numel(ti->rank, ti->dims);
            size_t es = wf_dtype_size(ti->dtype);
            if (e < 0 || es == 0) continue; /* known only at run time (data-dependent) */
            size_t raw = (size_t)e * es, need = round_up(raw ? raw : 1);
            /* A large fetched value is allocated when it is made and handed to the caller as it is: in
             * the arena it would be copied out at the end of every run (a 64 MB output took 18 ms more
             * that way, bench/bench_jit.c). Small ones stay planned, where the copy costs less than an
             * allocation. */
            if (fetched[sl] && raw >= MEMPLAN_FETCH_DIRECT) {
                p->slot_off[sl] = WF__SLOT_OWN;
                continue;
            }
            /* a part of an in-place Concat, or its result: the group's buffer, opened (the Concat's size) by
             * whichever of them comes first and held until the result is written, then the result's like
             * any value's (every part's only reader is the Concat, so they die with it) */
            int g = grp[sl];
            if (g >= 0) {
                const wf__tinfo *tc = &p->nodes[g].out_info[0];
                raw = (size_t)wf__numel(tc->rank, tc->dims) * es;
                need = round_up(raw ? raw : 1);
                if (g_buf[g] >= 0) {
                    int b = g_buf[g];
                    if (sl == p->nodes[g].out_slot[0]) b_last[b] = fetched[sl] ? -1 : sl;
                    buf_of[sl] = b;
                    continue;
                }
            }
            /* output 0 in the buffer of input 0 (or of a fused residual) where the kernel allows it, else
             * the best fit among the dead buffers */
            int best = j == 0 && g < 0 ? in_place_buffer(p, v, av, raw, buf_of, b_last, b_dev, producer, rd_start, rd) : -1;
            bool in_place = best >= 0;
            for (int b = 0; !in_place && b < nb; b++) {
                if (b_dev[b] != pn->device || b_last[b] < 0) continue;
                int last = b_last[b];
                bool dead = true;
                if (rd_start[last] == rd_start[last + 1]) {
                    int pr = producer[last];
                    dead = pr != v && (av[pr / 64] >> (pr % 64) & 1);
                }
                for (int r = rd_start[last]; dead && r < rd_start[last + 1]; r++)
                    dead = rd[r] != v && (av[rd[r] / 64] >> (rd[r] % 64) & 1);
                if (!dead) continue;
                if (best < 0) best = b;
                else if (b_size[b] >= need && (b_size[best] < need || b_size[b] < b_size[best])) best = b;
                else if (b_size[best] < need && b_size[b] > b_size[best]) best = b;
            }
            if (best < 0) {
                if (nb == cap_b) {
                    int nc = cap_b * 2;
                    size_t *ns2 = wf__realloc(b_size, sizeof *b_size * (size_t)cap_b, sizeof *b_size * (size_t)nc);
                    if (ns2) b_size = ns2;
                    int *nl = ns2 ? wf__realloc(b_last, sizeof(int) * (size_t)cap_b, sizeof(int) * (size_t)nc) : NULL;
                    if (nl) b_last = nl;
                    int *ndv = nl ? wf__realloc(b_dev, sizeof(int) * (size_t)cap_b, sizeof(int) * (size_t)nc) : NULL;
                    if (!ndv) {
                        s = wf__oom("the memory plan", sizeof(size_t) * (size_t)nc * 2);
                        goto out;
                    }
                    b_dev = ndv;
                    cap_b = nc;
                }
                best = nb++;
                b_size[best] = 0;
                b_dev[best] = pn->device;
            }
            if (b_size[best] < need) b_size[best] = need;
            b_last[best] = fetched[sl] ? -1 : sl; /* -1: held to the end of the run */
            if (g >= 0) {
                g_buf[g] = best;
                if (sl != p->nodes[g].out_slot[0]) b_last[best] = -2; /* open: nobody else's */
            }
            buf_of[sl] = best;
        }
    }
    if (nb == 0) goto out;
    size_t *b_off = wf__malloc(sizeof(size_t) * (size_t)nb);
    p->arena_bytes = wf__calloc((size_t)nd, sizeof *p->arena_bytes);
    if (!b_off || !p->arena_bytes) {
        wf__free(b_off);
        s = wf__oom("the memory plan", sizeof(size_t) * (size_t)(nb + nd));
        goto out;
    }
    p->n_arena_dev = nd;
    for (int b = 0; b < nb; b++) {
        b_off[b] = p->arena_bytes[b_dev[b]];
        p->arena_bytes[b_dev[b]] += b_size[b];
    }
    for (int sl = 0; sl < ns; sl++)
        if (buf_of[sl] >= 0) {
            p->slot_off[sl] = (int64_t)b_off[buf_of[sl]] + sub_off[sl];
            p->slot_cap[sl] = sub_len[sl] ? (size_t)sub_len[sl] : b_size[buf_of[sl]] - (size_t)sub_off[sl];
        }
    wf__free(b_off);
out:
    wf__free(anc);
    wf__free(order);
    wf__free(pend);
    wf__free(producer);
    wf__free(fetched);
    wf__free(rd_start);
    wf__free(rd);
    wf__free(buf_of);
    wf__free(b_size);
    wf__free(b_last);
    wf__free(b_dev);
    wf__free(grp);
    wf__free(g_buf);
    wf__free(sub_off);
    wf__free(sub_len);
    wf__free(in_grp);
    wf__free(cand);
    return s;
}

/* ---- arenas at run time ---- */

static void arena_set_free(wf_context *ctx, wf__arena_set *a)
{
    if (!a) return;
    for (int d = 0; a->dev && d < a->n_dev; d++) {
        wf__arena_dev *ad = &a->dev[d];
        struct wf__device *dv = &ctx->devices[d];
        if (!ad->bytes) continue;
        if (ad->host) {
            wf__aligned_free(ad->host);
            if (dv->host_acct) wf__memacct_release(dv->host_acct, ad->bytes);
        } else if (ad->priv) {
            wf__bfc_block b = {ad->chunk, ad->off, ad->bytes, ad->priv};
            wf__bfc_release(dv->bfc, &b);
        }
        atomic_fetch_sub(&dv->arena_bytes, ad->bytes);
    }
    wf__free(a->dev);
    wf__free(a);
}

wf_status *wf__arena_acquire(wf_context *ctx, const wf__plan *p, wf__arena_set **out)
{
    *out = NULL;
    if (!p->arena_bytes) return NULL;
    wf__plan *mp = (wf__plan *)p; /* the pool is the plan's only mutable part, under arena_mu */
    pthread_mutex_lock(&mp->arena_mu);
    wf__arena_set *a = mp->arena_pool;
    if (a) mp->arena_pool = a->next;
    pthread_mutex_unlock(&mp->arena_mu);
    if (a) {
        *out = a;
        return NULL;
    }
    a = wf__calloc(1, sizeof *a);
    if (a) a->dev = wf__calloc((size_t)p->n_arena_dev, sizeof *a->dev);
    if (!a || !a->dev) {
        wf__free(a);
        return wf__oom("a run's arenas", sizeof *a->dev * (size_t)p->n_arena_dev);
    }
    a->n_dev = p->n_arena_dev;
    for (int d = 0; d < p->n_arena_dev; d++) {
        size_t bytes = p->arena_bytes[d];
        struct wf__device *dv = &ctx->devices[d];
        wf__arena_dev *ad = &a->dev[d];
        if (!bytes) continue;
        wf_status *s = NULL;
        if (dv->info.host_memory) {
            if (dv->host_acct && !wf__memacct_reserve(dv->host_acct, bytes)) {
                s = wf__status(WF_OUT_OF_MEMORY,
                               "out of memory on %s: cannot allocate a %zu-byte arena for a run (%llu bytes in use "
                               "of its %llu-byte limit)",
                               dv->short_name, bytes, (unsigned long long)atomic_load(&dv->host_acct->in_use),
                               (unsigned long long)atomic_load(&dv->host_acct->limit));
            } else if (!(ad->host = wf__aligned_alloc(bytes, WF__ARENA_ALIGN))) {
                if (dv->host_acct) wf__memacct_release(dv->host_acct, bytes);
                s = wf__oom("a run's arena on CPU:0", bytes);
            }
        } else {
            wf__bfc_block b;
            s = wf__bfc_alloc(dv->bfc, bytes, &b);
            if (!s) ad->chunk = b.chunk, ad->off = b.offset, ad->priv = b.priv;
        }
        if (s) {
            arena_set_free(ctx, a);
            return wf__status_wrap(s, "the run's arena on %s", dv->short_name);
        }
        ad->bytes = bytes;
        atomic_fetch_add(&dv->arena_bytes, bytes);
    }
    *out = a;
    return NULL;
}

void wf__arena_release(const wf__plan *p, wf__arena_set *a)
{
    if (!a) return;
    wf__plan *mp = (wf__plan *)p;
    pthread_mutex_lock(&mp->arena_mu);
    a->next = mp->arena_pool;
    mp->arena_pool = a;
    pthread_mutex_unlock(&mp->arena_mu);
}

void wf__arena_pool_free(wf__plan *p)
{
    if (!p->slot_off) return; /* memplan never ran: the mutex was not initialised */
    for (wf__arena_set *a = p->arena_pool, *an; a; a = an) {
        an = a->next;
        arena_set_free(p->arena_ctx, a);
    }
    p->arena_pool = NULL;
    pthread_mutex_destroy(&p->arena_mu);
}
