/*
 * Counters of the CPU oneDNN kernels, for tests that prove state is built once per plan node (no oneDNN
 * header needed to read them). Process-wide and monotonic; compare differences.
 */
#ifndef WF_K_DNNL_STATS_H
#define WF_K_DNNL_STATS_H

#include <stdint.h>

typedef struct wf__dn_stats {
    int64_t prims;   /* primitives built by wf__dn_acquire (a miss of a node's cache) */
    int64_t runs;    /* run contexts made (memory objects and scratchpad of one concurrent run) */
    int64_t mems;    /* oneDNN memory objects created */
    int64_t streams; /* oneDNN streams created (one per thread that executes) */
    int64_t wpacks;  /* Conv2D weight reorders and RNN/GRU/LSTM weight packs (into the cache or a run's buffer) */
    /* runs of weft's own LSTM (k_rnn_lstm.c), and those of them whose threads split the batch rows or the
     * hidden units (more than one thread), and the chunks of hidden units a thread took from another's range
     * in a step (the chunk split's balancing) */
    int64_t lstm_own, lstm_rows, lstm_chunks, lstm_steals;
    int64_t wino, wino4; /* convolutions the Winograd kernel ran (k_conv_wino.c), and of them as F(4x4, 3x3) */
    int64_t gpack;       /* MatMuls and Gemms run through oneDNN's packed GEMM (k_dnnl_matmul.c) */
    int64_t conv_gemv;   /* 1x1 convolutions over 1x1 maps run as dot products (k_dnnl_conv.c) */
    int64_t conv_gemm;   /* convolutions over small maps run as one packed GEMM (k_conv_gemm.c) */
    int64_t mm_small;    /* f32 MatMuls and Gemms of a few thousand multiply-adds run as a plain loop (k_dnnl_matmul.c) */
    int64_t conv_sub;    /* strided 1x1 convolutions run on their subsampled input at stride 1 (k_dnnl_conv.c) */
} wf__dn_stats;
void wf__dn_stats_get(wf__dn_stats *out);
/* The channel block of the layout oneDNN's jit kernels want on this CPU (16 with AVX-512, else 8; 1 where it
 * is nhwc), and its 4-D tag (nChw16c / nChw8c / nhwc) in wf__dn_blocked_tag (k_dnnl.h). */
int wf__dn_channel_block(void);

#endif
