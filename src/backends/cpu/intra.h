/*
 * The intra-op gate's arithmetic that tests check without a busy machine (intra.c uses it; nothing
 * else should need it).
 */
#ifndef WF_BACKENDS_CPU_INTRA_H
#define WF_BACKENDS_CPU_INTRA_H

#include <stdint.h>

/* The cores count as busy while the average share of watched regions' thread time lost to preemption
 * is above this, in thousandths. */
#define WF__INTRA_LOST_PERMILLE 120

/* The moving average (thousandths) after one watched region: `preempted` involuntary context switches
 * happened in it, and the process got cpu_ns of CPU time in wall_ns of wall time on `threads` threads.
 * A region without preemption counts as nothing lost, whatever its CPU time (threads waiting for memory
 * or for each other are not a busy machine). Each region weighs a quarter. */
int wf__intra_lost_avg(int avg_permille, long preempted, int64_t cpu_ns, int threads, int64_t wall_ns);

#endif
