/*
 * Host-side checks of the training ops that the CPU kernels and the device plugins share. Header-only
 * and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_TRAIN_H
#define WF_DEVICE_KUTIL_TRAIN_H

#include "core/core.h"

/* ApplyAdam's inputs, in order. */
static const char *const wf__ku_adam_inputs[8] = {"w", "m", "v", "g", "lr_t", "one_minus_beta1", "one_minus_beta2",
                                                  "epsilon"};

/* The first of ApplyAdam's inputs that does not fit w: m, v and g must have w's dtype and shape, the
 * four factors w's dtype and one element. -1 when all fit. */
static inline int wf__ku_adam_bad_input(wf_tensor *const *in)
{
    const wf_tensor *w = in[0];
    for (int i = 1; i < 8; i++) {
        const wf_tensor *t = in[i];
        bool ok = t->dtype == w->dtype;
        if (ok && i < 4) {
            ok = t->rank == w->rank;
            for (int d = 0; ok && d < w->rank; d++) ok = t->dims[d] == w->dims[d];
        } else if (ok) {
            ok = t->size == 1;
        }
        if (!ok) return i;
    }
    return -1;
}

#endif
