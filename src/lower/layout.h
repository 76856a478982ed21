/*
 * Layout planning (optimisation level 3): which values stay in a device's channel-blocked layout
 * between the kernels that can read and write it. See layout.c.
 */
#ifndef WF_LOWER_LAYOUT_H
#define WF_LOWER_LAYOUT_H

#include "lower/plan.h"
#include "place/placement.h"

/* Sets in_blocked / out_blocked on p's graph nodes (b->pidx) after their kernels are chosen. */
wf_status *wf__plan_layout(const wf__plan_builder *b, const wf__plan_fusion *fu, wf__plan *p);

#endif
