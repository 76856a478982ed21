/*
 * Private declarations of the training modules (src/train/): the gradient function that the op table
 * in graph/ops_onnx.c points at for the class losses.
 */
#ifndef WF_TRAIN_TRAIN_H
#define WF_TRAIN_TRAIN_H

#include "graph/op.h"

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (grad_losses.c): without class weights or
 * ignore_index; those are UNIMPLEMENTED. */
wf_status *wf__grad_class_loss(wf__grad_ctx *c);

#endif
