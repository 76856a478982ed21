/* The Sequential model's internals shared by its two halves: model.c (layers, graph building,
 * compile) and fit.c (fit, evaluate, predict and the progress bar). */
#ifndef WEFT_MODEL_H
#define WEFT_MODEL_H

#include "core/core.h"
#include "weft/weft.h"

enum { MODEL_NAME_MAX = 96, MODEL_MAX_VARS = 4 };

typedef struct model_layer {
    wf_layer spec;
    char name[MODEL_NAME_MAX];
    uint64_t seed;
    int out_rank;                  /* with the batch dim */
    int64_t out_dims[WF_MAX_RANK]; /* out_dims[0] = -1 (the batch) */
    /* variables: the first n_trainable are trained (kernel, bias / gamma, beta), the rest are state
     * (BatchNorm's moving mean and variance) */
    wf_output vars[MODEL_MAX_VARS];
    int n_vars, n_trainable;
    int64_t params;
    wf_output infer_out, infer_pre; /* inference output, and before the activation */
    wf_dtype_policy policy;         /* resolved: never DEFAULT */
} model_layer;

struct wf_model {
    wf_graph *g;
    wf_session *sess;
    wf_context *ctx;
    wf_dtype in_dtype;
    int in_rank; /* with the batch dim */
    int64_t in_dims[WF_MAX_RANK];
    uint64_t seed;
    wf_dtype_policy policy; /* the layers' default; never DEFAULT */
    model_layer *layers;
    int n_layers, cap;
    int kind_count[16]; /* for Keras's automatic names */
    wf_output input, output;
    /* after compile */
    bool compiled;
    wf_compile_options co;
    bool has_acc;
    wf_output labels;
    wf_output train_loss, train_acc, eval_loss, eval_acc;
    wf_output *targets;
    int n_targets;
    /* fit's running sums on the training device (loss * samples, accuracy * samples, samples), added to
     * by every training step's targets and read back every steps_per_execution steps (fit.c);
     * n_step_targets: the targets before them (what wf_model_train_step runs) */
    wf_output metric_sum[3];
    int n_step_targets;
    /* dynamic loss scaling (a mixed_float16 layer): the scale and good-step variables; node NULL without */
    wf_output loss_scale, loss_scale_good_steps;
};

/* policy.c: p is a wf_dtype_policy value (DEFAULT included) */
bool wf__policy_valid(int p);

#endif
