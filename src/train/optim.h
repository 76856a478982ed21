/* The optimizer's internal entry for clients above the graph layer (the Sequential model): the same
 * step as wf_optimizer_minimize, with dynamic loss scaling for f16 training. */
#ifndef WEFT_TRAIN_OPTIM_H
#define WEFT_TRAIN_OPTIM_H

#include "weft/weft.h"

/* Dynamic loss scaling (TF's DynamicLossScale, Keras's LossScaleOptimizer); the rules are in weft.h at
 * wf_compile_options. The caller fills the figures; the minimizer fills the two variables. */
typedef struct wf__loss_scale {
    double initial;          /* finite, >= 1 */
    int64_t growth_interval; /* >= 1 */
    wf_output scale;         /* out: "<name>/loss_scale", f32 scalar */
    wf_output good_steps;    /* out: "<name>/loss_scale_good_steps", i64 scalar */
} wf__loss_scale;

/* wf_optimizer_minimize, and with ls non-NULL the loss scaled by ls's variable: the gradients are
 * unscaled before clipping, and every Assign of a variable, slot and the step counter keeps the old
 * value (Where) when any unscaled gradient is not finite, so that step changes nothing. The scale and
 * its counter get their own Assigns among *targets. Errors as wf_optimizer_minimize's, and
 * INVALID_ARGUMENT for bad ls figures; g unchanged on failure. */
wf_status *wf__optimizer_minimize_scaled(wf_graph *g, const char *name, const wf_optimizer_options *o,
                                         wf_output loss, const wf_output *vars, int n_vars, wf__loss_scale *ls,
                                         wf_output **targets, int *n_targets);

#endif
