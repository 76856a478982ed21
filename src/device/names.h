/*
 * Device names and device specs in TensorFlow's grammar (/job:J/replica:R/task:T/device:TYPE:N): parse,
 * print, match, merge and complete them. The public part belongs in include/weft/weft.h; until it is
 * there, the block below carries the exact declarations so the library and its tests compile.
 */
#ifndef WF_DEVICE_NAMES_H
#define WF_DEVICE_NAMES_H

#include "core/core.h"

/* WF_DEVICE_SPEC_MAX is defined by weft.h once the block below has moved there. */
#ifndef WF_DEVICE_SPEC_MAX
/* ------------------------------------------------------------------------------------------------ */
/* Device names and specs                                                                           */
/* ------------------------------------------------------------------------------------------------ */

#define WF_DEVICE_JOB_MAX 64   /* bytes of a job name, NUL included */
#define WF_DEVICE_TYPE_MAX 32  /* bytes of a device type, NUL included */
#define WF_DEVICE_SPEC_MAX 192 /* a buffer of this size holds any formatted spec */

/*
 * A full device name or a partial spec. A part whose has_* flag is 0 means "any", so a zeroed struct
 * matches every device. type is "CPU", "GPU" or "OPENCL" for those types (written in any case), and
 * any other type exactly as written.
 */
typedef struct wf_device_spec {
    int has_job, has_replica, has_task, has_type, has_id;
    char job[WF_DEVICE_JOB_MAX];
    int replica;
    int task;
    char type[WF_DEVICE_TYPE_MAX];
    int id;
} wf_device_spec;

/*
 * Parses TensorFlow's device syntax:
 *   [/job:NAME][/replica:N][/task:N][/device:TYPE[:N|:*]]  parts in any order, a repeated part
 *                                                          overrides the earlier one, '*' = any
 *   /cpu:N  /CPU:N  /gpu:N  /GPU:N                         legacy forms of /device:CPU:N, GPU:N (N or *)
 *   TYPE:N                                                 a local name such as GPU:0 or cpu:0
 *   "", "/", "*" (and NULL)                                any device
 * NAME and TYPE start with a letter and hold letters, digits and '_'. A malformed spec returns
 * WF_INVALID_ARGUMENT quoting it, saying where it went wrong and showing the grammar.
 */
WF_API wf_status *wf_device_spec_parse(const char *text, wf_device_spec *out);
/*
 * Writes the canonical form (/job:J/replica:R/task:T/device:TYPE:N, omitted parts left out, an unset
 * id printed as '*') into buf like snprintf: returns the length the full text needs; buf is always
 * NUL-terminated when cap > 0. A buffer of WF_DEVICE_SPEC_MAX bytes is always enough.
 */
WF_API size_t wf_device_spec_format(const wf_device_spec *spec, char *buf, size_t cap);
/* 1 when every part `spec` sets is set in `device` to the same value (TF's IsSpecification), else 0. */
WF_API int wf_device_spec_matches(const wf_device_spec *spec, const wf_device_spec *device);
/* 1 when all five parts are set. */
WF_API int wf_device_spec_is_complete(const wf_device_spec *spec);
/*
 * Merges `other` into `target` (TF's MergeDevNames). Differing jobs, replicas or tasks are an error.
 * Differing types or ids are an error when allow_soft_placement is 0; when it is 1, differing types
 * leave the type and id unset and differing ids leave the id unset. On error target is unchanged.
 */
WF_API wf_status *wf_device_spec_merge(wf_device_spec *target, const wf_device_spec *other,
                                       int allow_soft_placement);
/*
 * Parses `name` (full or local form) and fills the parts it leaves unset from `basename`, which must be
 * a complete name; NULL stands for this process's CPU, /job:localhost/replica:0/task:0/device:CPU:0
 * (TF's CanonicalizeDeviceName). *out is then complete.
 */
WF_API wf_status *wf_device_spec_canonicalize(const char *name, const char *basename,
                                              wf_device_spec *out);
#endif

/* ---- internal --------------------------------------------------------------------------------- */

/* The address space of the local process, the part every local device name starts with. */
#define WF__LOCAL_TASK "/job:localhost/replica:0/task:0"

/* Fills *out with the complete local name of device TYPE:id (type is canonicalised like a parsed one;
 * an invalid type yields WF_INVALID_ARGUMENT). */
wf_status *wf__device_spec_local(const char *type, int id, wf_device_spec *out);
/* true when both name the same job, replica and task, all set (TF's IsSameAddressSpace). */
bool wf__device_same_address_space(const wf_device_spec *a, const wf_device_spec *b);

#endif
