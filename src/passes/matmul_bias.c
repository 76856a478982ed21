/*
 * Pass "matmul_bias": Add(MatMul(a, b), c), either way round, where c is a constant (any value the
 * graph knows when built) of the MatMul's float dtype whose dimensions are all 1 but the last, which is
 * the MatMul's last known dimension N, and whose rank is at most the MatMul's
 *     -> BiasAdd(MatMul(a, b), c as [N])       (data_format NHWC: the bias runs along the last dim)
 * ONNX has no BiasAdd, so an imported MatMul + Add never met lowering's MatMul + BiasAdd + activation
 * epilogue (level 2). This is weft's form of ONNX Runtime's MatMul + Add -> Gemm, and it also covers
 * the batched MatMuls of transformers ([B, S, H] x [H, N]) that a Gemm cannot take. BiasAdd adds as
 * Add does (same dtype, the same broadcast), so the values are the same bits. The BiasAdd keeps the
 * Add's name and device request.
 */
#include "passes/pass.h"

/* Whether c is a bias for MatMul output mm that Add node `add` adds; *bias its value. */
static bool bias_of(wf_output mm, wf_output c, const wf_node *add, const wf_tensor **bias)
{
    if (!mm.node || mm.index != 0 || strcmp(mm.node->op->name, "MatMul") != 0) return false;
    const wf__tinfo *m = &mm.node->out[0];
    const wf_tensor *t = wf__pass_value(c);
    if (!t || m->rank < 1 || !wf__dtype_is_float(m->dtype) || t->dtype != m->dtype) return false;
    int64_t n = m->dims[m->rank - 1];
    if (n <= 0 || t->rank < 1 || t->rank > m->rank || t->dims[t->rank - 1] != n || t->size != n) return false;
    if (add->out[0].dtype != m->dtype) return false;
    *bias = t;
    return true;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    const wf_tensor *bias = NULL;
    int k = -1;
    if (!strcmp(n->op->name, "Add") && n->n_in == 2 && in[0].node && in[1].node) {
        if (bias_of(in[0], in[1], n, &bias)) k = 0;
        else if (bias_of(in[1], in[0], n, &bias)) k = 1;
    }
    if (k < 0) {
        wf_node *c;
        WF__TRY(wf__pass_copy(r, n, in, &c));
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    wf_output bin[2] = {in[k], in[1 - k]};
    if (bias->rank != 1) { /* [1, ..., 1, N] -> [N] */
        wf_tensor *b = NULL;
        int64_t len = bias->size;
        WF__TRY(wf__tensor_alloc(bias->dtype, 1, &len, "a MatMul's bias", &b));
        memcpy(b->data, bias->data, bias->bytes);
        char name[600];
        wf__pass_fresh_name(r->dst, n->name, "/bias", name, sizeof name);
        wf_status *s = wf_const(r->dst, name, b, &bin[1]);
        wf_tensor_free(b);
        if (s) return wf__status_wrap(s, "matmul_bias: node '%s' (Add)", n->name);
    }
    return wf__pass_emit(r, n, "BiasAdd", n->name, bin, 2, NULL, 0, &out[0]);
}

const wf__pass wf__pass_matmul_bias = {"matmul_bias", NULL, NULL, visit};
