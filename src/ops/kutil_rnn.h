/*
 * Host-side reading of the RNN / GRU / LSTM `activations`, `activation_alpha` and `activation_beta`
 * attributes, shared by the CPU kernel and the OpenCL plugin so both resolve names, defaults and the
 * per-direction sets by the same rules. Header-only and free of libweft calls because the plugins
 * cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_RNN_H
#define WF_DEVICE_KUTIL_RNN_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ops/attr.h"

/* The OpenCL kernel source numbers these the same way (0..10). */
enum {
    WF__KU_ACT_RELU,
    WF__KU_ACT_TANH,
    WF__KU_ACT_SIGMOID,
    WF__KU_ACT_AFFINE,
    WF__KU_ACT_LEAKY,
    WF__KU_ACT_THRESH,
    WF__KU_ACT_STANH,
    WF__KU_ACT_HSIGMOID,
    WF__KU_ACT_ELU,
    WF__KU_ACT_SOFTSIGN,
    WF__KU_ACT_SOFTPLUS
};

/* At most this many functions: LSTM's three per direction, two directions. */
#define WF__KU_MAX_ACTS 6

/*
 * weft has no list-of-strings attribute, so `activations` (s, may be NULL) is one string with the names
 * separated by commas, spaces or semicolons. ONNX wants one set of per_dir functions per direction (nd);
 * a single set serves both, none gives `defaults`. alpha (al) and beta (be) values are consumed in order
 * by the functions that take them. Fills kind/alpha/beta[per_dir * nd]; returns false with a message
 * in err.
 */
static inline bool wf__ku_rnn_acts(const char *s, const wf__attr *al, const wf__attr *be, int per_dir, int nd,
                                   const char *const *defaults, const char *opname, int *kind, double *alpha,
                                   double *beta, char *err, size_t en)
{
    static const struct {
        const char *name;
        int kind;
        bool has_alpha, has_beta;
        double alpha, beta;
    } acts[] = {
        {"Relu", WF__KU_ACT_RELU, false, false, 0, 0},
        {"Tanh", WF__KU_ACT_TANH, false, false, 0, 0},
        {"Sigmoid", WF__KU_ACT_SIGMOID, false, false, 0, 0},
        {"Affine", WF__KU_ACT_AFFINE, true, true, 1.0, 0.0},
        {"LeakyRelu", WF__KU_ACT_LEAKY, true, false, 0.01, 0},
        {"ThresholdedRelu", WF__KU_ACT_THRESH, true, false, 1.0, 0},
        {"ScaledTanh", WF__KU_ACT_STANH, true, true, 1.0, 1.0},
        {"HardSigmoid", WF__KU_ACT_HSIGMOID, true, true, 0.2, 0.5},
        {"Elu", WF__KU_ACT_ELU, true, false, 1.0, 0},
        {"Softsign", WF__KU_ACT_SOFTSIGN, false, false, 0, 0},
        {"Softplus", WF__KU_ACT_SOFTPLUS, false, false, 0, 0},
    };
    const char *all = s;
    char names[WF__KU_MAX_ACTS][32];
    int n = 0;
    while (s && *s) {
        while (*s == ',' || *s == ' ' || *s == ';') s++;
        if (!*s) break;
        size_t len = 0;
        while (s[len] && s[len] != ',' && s[len] != ' ' && s[len] != ';') len++;
        if (n == WF__KU_MAX_ACTS || len >= sizeof names[0]) {
            snprintf(err, en, "activations '%s' holds too many or too long names", all);
            return false;
        }
        memcpy(names[n], s, len);
        names[n++][len] = 0;
        s += len;
    }
    if (n == 0)
        for (; n < per_dir * nd; n++) snprintf(names[n], sizeof names[n], "%s", defaults[n % per_dir]);
    if (n != per_dir && n != per_dir * nd) {
        snprintf(err, en, "activations lists %d functions; %s needs %d per direction", n, opname, per_dir);
        return false;
    }
    int ia = 0, ib = 0, na = al ? al->n : 0, nb = be ? be->n : 0;
    for (int i = 0; i < per_dir * nd; i++) {
        if (i >= n) { /* the set repeated for the second direction reuses the first one's values */
            kind[i] = kind[i - n], alpha[i] = alpha[i - n], beta[i] = beta[i - n];
            continue;
        }
        size_t j;
        for (j = 0; j < sizeof acts / sizeof acts[0] && strcasecmp(acts[j].name, names[i]); j++) {}
        if (j == sizeof acts / sizeof acts[0]) {
            snprintf(err, en, "activation '%s' is not one ONNX defines for %s", names[i], opname);
            return false;
        }
        kind[i] = acts[j].kind;
        alpha[i] = acts[j].alpha;
        beta[i] = acts[j].beta;
        if (acts[j].has_alpha && ia < na) alpha[i] = al->floats[ia++];
        if (acts[j].has_beta && ib < nb) beta[i] = be->floats[ib++];
    }
    return true;
}

#endif
