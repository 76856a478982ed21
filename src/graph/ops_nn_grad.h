/*
 * Gradient functions of the convolution and pooling ops (ops_nn.c's table points at them); they build
 * the backward ops of ops_nn_grad.c. Private to src/graph.
 */
#ifndef WF_GRAPH_OPS_NN_GRAD_H
#define WF_GRAPH_OPS_NN_GRAD_H

#include "graph/op.h"

wf_status *wf__grad_conv2d(wf__grad_ctx *ctx);
wf_status *wf__grad_conv_transpose2d(wf__grad_ctx *ctx);
wf_status *wf__grad_max_pool2d(wf__grad_ctx *ctx);
wf_status *wf__grad_avg_pool2d(wf__grad_ctx *ctx);
wf_status *wf__grad_global_avg_pool(wf__grad_ctx *ctx);

#endif
