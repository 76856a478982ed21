/* Static shape helpers: element counts, printing, numpy broadcasting, axis normalisation. */
#include "core/core.h"

#include <stdio.h>

int64_t wf__numel(int rank, const int64_t *dims)
{
    if (rank < 0) return -1;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) return -1;
    int64_t n;
    return wf__shape_numel_checked(rank, dims, &n) ? n : INT64_MAX;
}

bool wf__tinfo_known(const wf__tinfo *t) { return t->rank >= 0 && wf__numel(t->rank, t->dims) >= 0; }

const char *wf__shape_str(int rank, const int64_t *dims, char *buf)
{
    if (rank < 0) {
        strcpy(buf, "[?...]");
        return buf;
    }
    size_t off = 0;
    buf[off++] = '[';
    for (int i = 0; i < rank && off < 140; i++) {
        if (dims[i] < 0)
            off += (size_t)snprintf(buf + off, 160 - off, "%s?", i ? "," : "");
        else
            off += (size_t)snprintf(buf + off, 160 - off, "%s%lld", i ? "," : "", (long long)dims[i]);
    }
    buf[off++] = ']';
    buf[off] = 0;
    return buf;
}

const char *wf__tinfo_str(const wf__tinfo *t, char *buf)
{
    char sh[160];
    snprintf(buf, 160, "%s%s", wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, sh));
    return buf;
}

bool wf__broadcast_tinfo(const wf__tinfo *a, const wf__tinfo *b, int *rank, int64_t *dims)
{
    if (a->rank < 0 || b->rank < 0) {
        *rank = -1;
        return true;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d;
        if (da == db) d = da;
        else if (da == 1) d = db;
        else if (db == 1) d = da;
        else if (da < 0) d = db;  /* unknown must equal the known non-1 dim at run time */
        else if (db < 0) d = da;
        else return false;
        dims[i] = d;
    }
    *rank = r;
    return true;
}

bool wf__norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -(int64_t)rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

void wf__strides(int rank, const int64_t *dims, int64_t *strides) { wf__strides_wrapping(rank, dims, strides); }
