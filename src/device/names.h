/*
 * Device names and device specs in TensorFlow's grammar (/job:J/replica:R/task:T/device:TYPE:N): parse,
 * print, match, merge and complete them. The public part belongs in include/weft/weft.h; until it is
 * there, the block below carries the exact declarations so the library and its tests compile.
 */
#ifndef WF_DEVICE_NAMES_H
#define WF_DEVICE_NAMES_H

#include "core/core.h"



/* ---- internal --------------------------------------------------------------------------------- */

/* The address space of the local process, the part every local device name starts with. */
#define WF__LOCAL_TASK "/job:localhost/replica:0/task:0"

/* Fills *out with the complete local name of device TYPE:id (type is canonicalised like a parsed one;
 * an invalid type yields WF_INVALID_ARGUMENT). */
wf_status *wf__device_spec_local(const char *type, int id, wf_device_spec *out);
/* true when both name the same job, replica and task, all set (TF's IsSameAddressSpace). */
bool wf__device_same_address_space(const wf_device_spec *a, const wf_device_spec *b);

#endif
