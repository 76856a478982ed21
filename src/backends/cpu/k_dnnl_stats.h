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
     * hidden units (more than one thread) */
    int64_t lstm_own, lstm_rows, lstm_chunks;
} wf__dn_stats;
void wf__dn_stats_get(wf__dn_stats *out);

#endif
