/*
 * Partition, the planner's stage after placement: for every value consumed on another device than its
 * producer's (or fetched from a device), one copy node per (value, destination device), shared by every
 * consumer there. Lowering (lower/plan.c) creates the copy nodes and routes inputs through them.
 * A host-memory argument (wf__op_def.host_in: a shape, axes, a count) is consumed in host memory
 * whatever the consumer's device: a device kernel reads it on the host, so it is copied to the host
 * device if anything, never uploaded to be read back. An input of which only the dtype and shape are
 * read (wf__op_def.meta_in: Shape's, Size's) is read where it is, and never copied.
 */
#include "place/placement.h"

typedef wf__plan_builder builder;

bool wf__keep_on_device(const wf_output *f) { return f->index == 0 && !strcmp(f->node->op->name, "Assign"); }

int wf__input_device(const wf__plan_builder *b, const wf_node *n, int i)
{
    if (i < 32 && (n->op->meta_in >> i & 1) && n->in[i].node) return b->dev_of[n->in[i].node->id];
    return i < 32 && (n->op->host_in >> i & 1) ? wf__host_device(b->ctx) : b->dev_of[n->id];
}

wf_status *wf__partition_copies(builder *b, const wf__plan_fusion *fu, const wf_output *fetches, int n_fetches,
                                int n_slots, wf__partition *pt)
{
    /* Partition: one copy node per (value, destination device), shared by every consumer there. */
    if (b->ctx->n_devices > 64) return wf__status(WF_UNIMPLEMENTED, "planning: more than 64 devices");
    const wf_graph *g = b->g;
    int n_graph_slots = n_slots, n_copies = 0;
    int *slot_dev = wf__malloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    int *slot_gid = wf__malloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    int *slot_out = wf__malloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    int *copy_base = wf__malloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    uint64_t *copy_mask = wf__calloc((size_t)(n_slots ? n_slots : 1), sizeof(uint64_t));
    if (!slot_dev || !slot_gid || !slot_out || !copy_base || !copy_mask) {
        wf__free(slot_dev);
        wf__free(slot_gid);
        wf__free(slot_out);
        wf__free(copy_base);
        wf__free(copy_mask);
        return wf__oom("planning", sizeof(int) * (size_t)n_slots * 5);
    }
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id] || b->fused_away[id]) continue;
        for (int j = 0; j < g->nodes[id]->n_out; j++) {
            slot_dev[b->slot[id][j]] = b->dev_of[id];
            slot_gid[b->slot[id][j]] = id;
            slot_out[b->slot[id][j]] = j;
        }
    }
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0) continue;
        const wf_node *n = g->nodes[id];
        int dest = b->dev_of[id];
        const wf_output *in;
        int n_in = wf__plan_inputs(fu, n, &in);
        for (int i = 0; i < n_in; i++) {
            if (!in[i].node) continue;
            /* a generated kernel reads all its inputs on its device */
            int sl = b->slot[in[i].node->id][in[i].index], at = fu[id].ext ? dest : wf__input_device(b, n, i);
            if (slot_dev[sl] != at) copy_mask[sl] |= 1ull << at;
        }
        if (fu[id].bias_node >= 0) {
            const wf_node *ba = g->nodes[fu[id].bias_node];
            int sl = b->slot[ba->in[1].node->id][ba->in[1].index];
            if (slot_dev[sl] != dest) copy_mask[sl] |= 1ull << dest;
        }
        if (fu[id].res_node >= 0) {
            int sl = b->slot[fu[id].res.node->id][fu[id].res.index];
            if (slot_dev[sl] != dest) copy_mask[sl] |= 1ull << dest;
        }
        const wf_output pro[3] = {fu[id].pre_div, fu[id].pre_mask, fu[id].pre_skip}; /* prologues' inputs */
        for (int k = 0; k < 3; k++)
            if (pro[k].node) {
                int sl = b->slot[pro[k].node->id][pro[k].index];
                if (slot_dev[sl] != dest) copy_mask[sl] |= 1ull << dest;
            }
    }
    int host = wf__host_device(b->ctx);
    for (int i = 0; i < n_fetches; i++) {
        int sl = b->slot[fetches[i].node->id][fetches[i].index];
        if (slot_dev[sl] != host && !wf__keep_on_device(&fetches[i])) copy_mask[sl] |= 1ull << host;
    }
    /* A value going from one device to another (neither in host memory) travels through a host copy:
     * a download on the source's copy stream, then an upload on the destination's, each asynchronous and
     * ordered by events, where a direct copy would block an inter-op thread on both devices. The host
     * copy is shared with any host consumer of the value. The lowering (lower/plan.c) makes the
     * device copy read it; it needs the host copy ordered first, so the host must be the lowest device
     * index among them (it always is: the CPU backend opens first). */
    for (int sl = 0; sl < n_graph_slots; sl++)
        if (slot_dev[sl] != host && (copy_mask[sl] & ~(1ull << host)) && !(copy_mask[sl] & ((1ull << host) - 1)))
            copy_mask[sl] |= 1ull << host;
    /* Strings live in host memory only. Placement keeps their producers and consumers on the CPU (only
     * it has string kernels, and Consts of strings stay there); this refuses what would slip through. */
    for (int sl = 0; sl < n_graph_slots; sl++) {
        if (!copy_mask[sl]) continue;
        const wf_node *src = g->nodes[slot_gid[sl]];
        if (b->info[src->id][slot_out[sl]].dtype != WF_STRING) continue;
        int bad = slot_dev[sl] != host ? slot_dev[sl] : __builtin_ctzll(copy_mask[sl] & ~(1ull << host));
        if (slot_dev[sl] == host && !(copy_mask[sl] & ~(1ull << host))) continue;
        wf_status *s = wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): its string output %d would go to %s; strings "
                                  "live in host memory only", src->name, src->op->name, slot_out[sl],
                                  b->ctx->devices[bad].name);
        wf__free(slot_dev);
        wf__free(slot_gid);
        wf__free(slot_out);
        wf__free(copy_base);
        wf__free(copy_mask);
        return s;
    }
    for (int sl = 0; sl < n_graph_slots; sl++) {
        copy_base[sl] = n_copies;
        n_copies += __builtin_popcountll(copy_mask[sl]);
    }
    pt->n_copies = n_copies;
    pt->slot_dev = slot_dev;
    pt->slot_gid = slot_gid;
    pt->slot_out = slot_out;
    pt->copy_base = copy_base;
    pt->copy_mask = copy_mask;
    return NULL;
}
