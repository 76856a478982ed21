/*
 * Einsum's equation, parsed against the operands' ranks and dims by the same rules at graph build time
 * (ops_misc.c, with dims -1 while unknown) and in every backend's kernel (CPU, OpenCL, CUDA: the plugins
 * cannot link libweft, so this is header-only). Letters are labels 0..51; "..." dims are 52.. aligned
 * from the right like numpy broadcasting.
 */
#ifndef WF_DEVICE_KUTIL_EINSUM_H
#define WF_DEVICE_KUTIL_EINSUM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

/* 52 letters plus one label per broadcast (ellipsis) dim. */
#define WF__EINSUM_LABELS (52 + WF_MAX_RANK)
#define WF__EINSUM_MAX_IN 16

typedef struct wf__einsum {
    int n_in;
    int in_rank[WF__EINSUM_MAX_IN];
    int in_label[WF__EINSUM_MAX_IN][WF_MAX_RANK]; /* label of each axis of each input */
    int out_rank;
    int out_label[WF_MAX_RANK];
    int n_labels;                                   /* labels in use are [0, n_labels) */
    int64_t label_dim[WF__EINSUM_LABELS];           /* -1 while unknown */
    bool in_out[WF__EINSUM_LABELS];                 /* label appears in the output */
    bool used[WF__EINSUM_LABELS];                   /* label is an axis of some input */
} wf__einsum;

static inline int wf__ku_ein_label(char ch)
{
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    return -1;
}

static inline char wf__ku_ein_char(int l) { return (char)(l < 26 ? 'A' + l : 'a' + l - 26); }

/* One operand term: labels (letters as 0..51, WF__EIN_ELL for "...") in order. */
#define WF__EIN_ELL (-2)

static inline bool wf__ku_ein_term(const char **pp, int *lab, int *n, bool *has_ell, char *err, size_t errlen)
{
    const char *p = *pp;
    *n = 0;
    *has_ell = false;
    while (*p == ' ') p++;
    while (*p && *p != ',' && *p != '-') {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*n >= WF_MAX_RANK + 1) {
            snprintf(err, errlen, "a term has more than %d labels", WF_MAX_RANK);
            return false;
        }
        if (p[0] == '.') {
            if (p[1] != '.' || p[2] != '.' || *has_ell) {
                snprintf(err, errlen, "bad ellipsis at '%s'", p);
                return false;
            }
            *has_ell = true;
            lab[(*n)++] = WF__EIN_ELL;
            p += 3;
            continue;
        }
        int l = wf__ku_ein_label(*p);
        if (l < 0) {
            snprintf(err, errlen, "'%c' is not a label (letters a-z, A-Z)", *p);
            return false;
        }
        lab[(*n)++] = l;
        p++;
    }
    *pp = p;
    return true;
}

/* Parses `eq` for n_in inputs with the given ranks and dims (dims may be -1 while building). Ellipsis
 * dims broadcast like numpy; letter dims must agree. On error writes a message into err and returns
 * false. */
static inline bool wf__einsum_parse(const char *eq, int n_in, const int *ranks, const int64_t (*dims)[WF_MAX_RANK],
                      wf__einsum *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    if (n_in > WF__EINSUM_MAX_IN) {
        snprintf(err, errlen, "%d inputs; at most %d", n_in, WF__EINSUM_MAX_IN);
        return false;
    }
    e->n_in = n_in;
    int terms[WF__EINSUM_MAX_IN][WF_MAX_RANK + 1], nt[WF__EINSUM_MAX_IN];
    bool ell[WF__EINSUM_MAX_IN];
    const char *p = eq;
    int k = 0;
    for (;;) {
        if (k >= n_in) {
            snprintf(err, errlen, "equation '%s' has more terms than the %d inputs", eq, n_in);
            return false;
        }
        if (!wf__ku_ein_term(&p, terms[k], &nt[k], &ell[k], err, errlen)) return false;
        k++;
        if (*p != ',') break;
        p++;
    }
    if (k != n_in) {
        snprintf(err, errlen, "equation '%s' has %d input terms for %d inputs", eq, k, n_in);
        return false;
    }
    /* Ellipsis dims: as many as the widest operand's, aligned from the right like numpy broadcasting. */
    int n_ell = 0;
    for (int i = 0; i < n_in; i++) {
        int explicit_n = nt[i] - (ell[i] ? 1 : 0);
        if (ranks[i] < explicit_n || (!ell[i] && ranks[i] != explicit_n)) {
            snprintf(err, errlen, "term %d has %d labels but input %d has rank %d", i, explicit_n, i, ranks[i]);
            return false;
        }
        int ne = ranks[i] - explicit_n;
        if (ne > n_ell) n_ell = ne;
    }
    e->n_labels = 52 + n_ell;
    for (int l = 0; l < WF__EINSUM_LABELS; l++) e->label_dim[l] = -2; /* unused */
    int count[WF__EINSUM_LABELS] = {0};
    for (int i = 0; i < n_in; i++) {
        int ne = ranks[i] - (nt[i] - (ell[i] ? 1 : 0)), ax = 0;
        e->in_rank[i] = ranks[i];
        for (int t = 0; t < nt[i]; t++) {
            if (terms[i][t] == WF__EIN_ELL) {
                for (int j = 0; j < ne; j++, ax++) e->in_label[i][ax] = 52 + n_ell - ne + j;
                continue;
            }
            e->in_label[i][ax++] = terms[i][t];
            count[terms[i][t]]++;
        }
        for (ax = 0; ax < ranks[i]; ax++) {
            int l = e->in_label[i][ax];
            int64_t d = dims[i][ax], *ld = &e->label_dim[l];
            e->used[l] = true;
            bool bcast = l >= 52; /* broadcast dims may be 1 in some inputs */
            if (*ld == -2) *ld = d;
            else if (d < 0) {
                if (bcast && *ld == 1) *ld = -1;
            } else if (*ld < 0) {
                if (!bcast || d != 1) *ld = d;
            } else if (d != *ld) {
                if (bcast && (d == 1 || *ld == 1)) {
                    if (*ld == 1) *ld = d;
                } else {
                    snprintf(err, errlen, "label '%c' has size %lld in input %d but %lld elsewhere",
                             bcast ? '.' : wf__ku_ein_char(l), (long long)d, i, (long long)*ld);
                    return false;
                }
            }
        }
    }
    e->out_rank = 0;
    if (p[0] == '-') {
        if (p[1] != '>') {
            snprintf(err, errlen, "expected '->' in equation '%s'", eq);
            return false;
        }
        p += 2;
        int lab[WF_MAX_RANK + 1], n;
        bool has_ell;
        if (!wf__ku_ein_term(&p, lab, &n, &has_ell, err, errlen)) return false;
        while (*p == ' ') p++;
        if (*p) {
            snprintf(err, errlen, "unexpected '%s' after the output term", p);
            return false;
        }
        if (n_ell && !has_ell) {
            /* numpy (the ONNX reference) refuses to sum broadcast dims away implicitly */
            snprintf(err, errlen, "the inputs have '...' dims but the output term of '%s' has no '...'", eq);
            return false;
        }
        for (int t = 0; t < n; t++) {
            if (lab[t] == WF__EIN_ELL) {
                for (int j = 0; j < n_ell; j++) {
                    if (e->out_rank >= WF_MAX_RANK) goto too_big;
                    e->out_label[e->out_rank++] = 52 + j;
                }
                continue;
            }
            if (!count[lab[t]]) {
                snprintf(err, errlen, "output label '%c' appears in no input", wf__ku_ein_char(lab[t]));
                return false;
            }
            if (e->in_out[lab[t]]) {
                snprintf(err, errlen, "output label '%c' is repeated", wf__ku_ein_char(lab[t]));
                return false;
            }
            if (e->out_rank >= WF_MAX_RANK) goto too_big;
            e->out_label[e->out_rank++] = lab[t];
            e->in_out[lab[t]] = true;
        }
    } else {
        while (*p == ' ') p++;
        if (*p) {
            snprintf(err, errlen, "unexpected '%s' in equation '%s'", p, eq);
            return false;
        }
        /* Implicit output: broadcast dims, then the labels used once, in alphabetical (ASCII) order. */
        for (int j = 0; j < n_ell; j++) e->out_label[e->out_rank++] = 52 + j;
        for (int l = 0; l < 52; l++)
            if (count[l] == 1) {
                if (e->out_rank >= WF_MAX_RANK) goto too_big;
                e->out_label[e->out_rank++] = l;
            }
    }
    for (int j = 0; j < e->out_rank; j++) e->in_out[e->out_label[j]] = true;
    for (int l = 0; l < e->n_labels; l++)
        if (e->label_dim[l] == -2) e->label_dim[l] = 1;
    return true;
too_big:
    snprintf(err, errlen, "the output has more than %d dims", WF_MAX_RANK);
    return false;
}


/* wf__einsum_parse over the kernel's actual operands. */
static inline bool wf__einsum_parse_tensors(const char *eq, int n_in, wf_tensor *const *in, wf__einsum *e, char *err,
                                            size_t errlen)
{
    int ranks[WF__EINSUM_MAX_IN];
    int64_t dims[WF__EINSUM_MAX_IN][WF_MAX_RANK];
    if (n_in > WF__EINSUM_MAX_IN) {
        snprintf(err, errlen, "%d inputs; at most %d", n_in, WF__EINSUM_MAX_IN);
        return false;
    }
    for (int i = 0; i < n_in; i++) {
        ranks[i] = in[i]->rank;
        memcpy(dims[i], in[i]->dims, sizeof(int64_t) * (size_t)in[i]->rank);
    }
    return wf__einsum_parse(eq, n_in, ranks, (const int64_t(*)[WF_MAX_RANK])dims, e, err, errlen);
}

/* Each operand's element stride per label (a repeated label walks the diagonal, so its strides add; a
 * broadcast dim of 1 does not move; st zeroed here) and the summed labels, those in no output, in order
 * into sum_label. Returns their count. */
static inline int wf__einsum_walk(const wf__einsum *e, int n_in, wf_tensor *const *in,
                                  int64_t (*st)[WF__EINSUM_LABELS], int *sum_label)
{
    memset(st, 0, sizeof(int64_t) * WF__EINSUM_LABELS * (size_t)n_in);
    for (int i = 0; i < n_in; i++) {
        int64_t s = 1;
        for (int d = in[i]->rank - 1; d >= 0; d--) {
            int l = e->in_label[i][d];
            if (in[i]->dims[d] != 1 || e->label_dim[l] == 1) st[i][l] += s;
            s *= in[i]->dims[d];
        }
    }
    int ns = 0;
    for (int l = 0; l < e->n_labels; l++)
        if (e->used[l] && !e->in_out[l]) sum_label[ns++] = l;
    return ns;
}

/* The plan the device kernels read, as int64 values: out_rank, n_sum, n_in, the output dims, each
 * operand's strides of the output labels, the summed labels' dims, each operand's strides of the summed
 * labels. wf__einsum_plan_len values; returns the position after the last. */
static inline size_t wf__einsum_plan_len(const wf__einsum *e, int n_in, int n_sum)
{
    return 3 + (size_t)e->out_rank * (1 + (size_t)n_in) + (size_t)n_sum * (1 + (size_t)n_in);
}

static inline int64_t *wf__einsum_plan(const wf__einsum *e, int n_in, const int64_t (*st)[WF__EINSUM_LABELS],
                                       const int *sum_label, int n_sum, int64_t *q)
{
    *q++ = e->out_rank, *q++ = n_sum, *q++ = n_in;
    for (int d = 0; d < e->out_rank; d++) *q++ = e->label_dim[e->out_label[d]];
    for (int i = 0; i < n_in; i++)
        for (int d = 0; d < e->out_rank; d++) *q++ = st[i][e->out_label[d]];
    for (int j = 0; j < n_sum; j++) *q++ = e->label_dim[sum_label[j]];
    for (int i = 0; i < n_in; i++)
        for (int j = 0; j < n_sum; j++) *q++ = st[i][sum_label[j]];
    return q;
}

#endif
