/*
 * Private glue between the OpenCL "seq" files: ocl_seq.c (Einsum, NonZero, Compress, Unique,
 * NonMaxSuppression and the family's kernel table) and ocl_rnn_attn.c (RNN, GRU, LSTM, Attention).
 */
#ifndef WF_OCL_SEQ_H
#define WF_OCL_SEQ_H

#include "backends/opencl/ocl_elementwise.h"

/* A device buffer of `bytes` (at least 1), filled from host memory `src` when src is not NULL. Release
 * it with clReleaseMemObject once the kernels using it are enqueued: the queue keeps it alive. */
wf_status *oclseq_buf(wf__kctx *k, size_t bytes, const void *src, cl_mem *out);

wf_status *oclseq_k_rnn(wf__kctx *k);       /* RNN, GRU, LSTM */
wf_status *oclseq_k_attention(wf__kctx *k); /* ONNX Attention */

#endif
