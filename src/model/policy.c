/*
 * Keras's dtype policies: their names, the process-wide global policy (Keras's set_global_policy) and
 * a model's own. What a policy does to a layer's graph is in model.c (build_layer).
 */
#include <stdatomic.h>
#include <string.h>

#include "model/model.h"

/* An int, not the enum: C11 atomics on enums are allowed but an int says what the hardware holds. */
static atomic_int g_policy = WF_POLICY_FLOAT32;

static const char *const policy_names[] = {[WF_POLICY_DEFAULT] = "default",
                                           [WF_POLICY_FLOAT32] = "float32",
                                           [WF_POLICY_MIXED_FLOAT16] = "mixed_float16",
                                           [WF_POLICY_MIXED_BFLOAT16] = "mixed_bfloat16"};

bool wf__policy_valid(int p) { return p >= WF_POLICY_DEFAULT && p <= WF_POLICY_MIXED_BFLOAT16; }

const char *wf_policy_name(wf_dtype_policy p) { return wf__policy_valid((int)p) ? policy_names[p] : NULL; }

wf_status *wf_policy_from_name(const char *name, wf_dtype_policy *out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_policy_from_name: out is NULL");
    for (int p = WF_POLICY_FLOAT32; p <= WF_POLICY_MIXED_BFLOAT16; p++)
        if (name && !strcmp(name, policy_names[p])) {
            *out = (wf_dtype_policy)p;
            return NULL;
        }
    return wf__status(WF_INVALID_ARGUMENT,
                      "unknown dtype policy '%s'; the policies are float32, mixed_float16 and mixed_bfloat16",
                      name ? name : "(null)");
}

wf_status *wf_set_global_policy(wf_dtype_policy p)
{
    if (!wf__policy_valid((int)p))
        return wf__status(WF_INVALID_ARGUMENT, "wf_set_global_policy: unknown dtype policy %d", (int)p);
    atomic_store(&g_policy, p == WF_POLICY_DEFAULT ? WF_POLICY_FLOAT32 : (int)p);
    return NULL;
}

wf_dtype_policy wf_global_policy(void) { return (wf_dtype_policy)atomic_load(&g_policy); }

wf_status *wf_model_set_policy(wf_model *m, wf_dtype_policy p)
{
    if (!m) return wf__status(WF_INVALID_ARGUMENT, "wf_model_set_policy: model is NULL");
    if (!wf__policy_valid((int)p))
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_set_policy: unknown dtype policy %d", (int)p);
    if (m->n_layers > 0)
        return wf__status(WF_FAILED_PRECONDITION,
                          "wf_model_set_policy: the model already has %d layer%s (the first is '%s'); set its policy "
                          "before adding any",
                          m->n_layers, m->n_layers == 1 ? "" : "s", m->layers[0].name);
    m->policy = p == WF_POLICY_DEFAULT ? wf_global_policy() : p;
    return NULL;
}

wf_dtype_policy wf_model_policy(const wf_model *m) { return m ? m->policy : WF_POLICY_DEFAULT; }
