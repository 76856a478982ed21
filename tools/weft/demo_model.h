/* The tutorial model, shared by `weft demo` and the demo benchmark. */
#ifndef WEFT_DEMO_MODEL_H
#define WEFT_DEMO_MODEL_H

#include "weft/weft.h"

typedef struct demo_model {
    wf_output input;  /* f32 [batch, 28, 28] */
    wf_output probs;  /* f32 [batch, 10] */
} demo_model;

/* Builds Flatten -> Dense(128, relu) -> Dense(10, softmax) with Glorot-uniform weights from seed. */
wf_status *demo_model_build(wf_graph *g, unsigned seed, demo_model *m);

#endif
