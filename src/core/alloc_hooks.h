/* Test hooks of the allocation funnel (src/core/alloc.c) beside wf__fault_inject in core.h: what the
 * fault-injection tests need to prove that a run reached the end of the allocation sequence and that
 * an error path freed everything it took. */
#ifndef WF_CORE_ALLOC_HOOKS_H
#define WF_CORE_ALLOC_HOOKS_H

long wf__alloc_live(void);   /* blocks allocated through the funnel and not yet freed */
long wf__faults_fired(void); /* injected failures so far (wf__fault_inject fails one allocation) */

#endif
