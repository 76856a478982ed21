/* CPU kernels of the core ops. Placeholder has none: the executor fills its slot from the feed. */
#include "device/kernel.h"

static wf_status *k_const(wf__kctx *k)
{
    const wf__attr *v = wf__attr_get(k->op, k->attrs, "value");
    wf_tensor_free(k->out[0]);
    k->out[0] = wf_tensor_ref(v->t);
    return NULL;
}

static wf_status *k_identity(wf__kctx *k)
{
    wf_tensor_free(k->out[0]);
    k->out[0] = wf_tensor_ref(k->in[0]);
    return NULL;
}

const wf__kernel_def wf__cpu_kernels_core[] = {
    /* strings too: these pass a reference along, never the bytes */
    {"Const", "CPU", WF__DT_ALL | WF__DT_STRING, -1, k_const, NULL, WF__K_CONST_VALUE},
    {"Identity", "CPU", WF__DT_ALL | WF__DT_STRING, 0, k_identity},
    {"PlaceholderWithDefault", "CPU", WF__DT_ALL | WF__DT_STRING, 0, k_identity},
    {0},
};
