/*
 * The gradient function that the op table in graph/ops_onnx.c points at for the class losses
 * (grad_losses.c; it was in src/train/, which made graph and train include each other).
 */
#ifndef WF_GRAPH_GRAD_LOSSES_H
#define WF_GRAPH_GRAD_LOSSES_H

#include "graph/op.h"

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (grad_losses.c): without class weights or
 * ignore_index; those are UNIMPLEMENTED. */
wf_status *wf__grad_class_loss(wf__grad_ctx *c);

#endif
