/*
 * The pipeline's handling of WF_STRING elements (paths, file contents, text lines, records): rows,
 * scalars and batches of strings, through the string tensor API.
 */
#include "data/stages.h"

wf_status *wf__ds_string_scalar(const char *s, size_t n, wf_tensor **out)
{
    const char *p[1] = {s};
    size_t l[1] = {n};
    return wf_tensor_new_strings(0, NULL, p, l, out);
}

wf_status *wf__ds_string_row(const wf_tensor *t, int64_t r, wf_tensor **out)
{
    int64_t inner = 1;
    for (int d = 1; d < t->rank; d++) inner *= t->dims[d];
    const char *stack_p[16];
    size_t stack_l[16];
    const char **p = inner <= 16 ? stack_p : wf__malloc((size_t)inner * sizeof *p);
    size_t *l = inner <= 16 ? stack_l : wf__malloc((size_t)inner * sizeof *l);
    wf_status *s = NULL;
    if (!p || !l) s = wf__oom("a row of strings", (size_t)inner * (sizeof *p + sizeof *l));
    for (int64_t i = 0; !s && i < inner; i++) p[i] = wf_tensor_string(t, r * inner + i, &l[i]);
    if (!s) s = wf_tensor_new_strings(t->rank - 1, t->dims + 1, p, l, out);
    if (p != stack_p) wf__free((void *)p);
    if (l != stack_l) wf__free(l);
    return s;
}

wf_status *wf__ds_stack_strings(const char *stage, int64_t first, const wf__elem *e, int k, int c, wf_tensor **out)
{
    const wf_tensor *t0 = e[0].t[c];
    int64_t inner = t0->size, dims[WF_MAX_RANK];
    if (t0->rank + 1 > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "%s: element %lld's component %d has rank %d", stage, (long long)first, c,
                          t0->rank);
    for (int i = 0; i < k; i++) {
        const wf_tensor *t = e[i].t[c];
        bool ok = t->dtype == WF_STRING && t->rank == t0->rank;
        for (int d = 0; ok && d < t->rank; d++) ok = t->dims[d] == t0->dims[d];
        if (!ok)
            return wf__status(WF_INVALID_ARGUMENT, "%s: element %lld's component %d (%s, rank %d) differs from element "
                              "%lld's (string, rank %d)", stage, (long long)(first + i), c, wf_dtype_name(t->dtype),
                              t->rank, (long long)first, t0->rank);
    }
    dims[0] = k;
    memcpy(dims + 1, t0->dims, (size_t)t0->rank * sizeof dims[0]);
    size_t n = (size_t)k * (size_t)inner;
    const char **p = wf__malloc((n ? n : 1) * sizeof *p);
    size_t *l = wf__malloc((n ? n : 1) * sizeof *l);
    wf_status *s = NULL;
    if (!p || !l) s = wf__oom("a batch of strings", n * (sizeof *p + sizeof *l));
    for (int i = 0; !s && i < k; i++)
        for (int64_t j = 0; j < inner; j++) p[(size_t)i * (size_t)inner + (size_t)j] = wf_tensor_string(e[i].t[c], j, &l[(size_t)i * (size_t)inner + (size_t)j]);
    if (!s) s = wf_tensor_new_strings(t0->rank + 1, dims, p, l, out);
    wf__free((void *)p);
    wf__free(l);
    return s;
}

wf_status *wf__ds_string_alloc(int rank, const int64_t *dims, size_t bytes, wf_tensor **out)
{
    int64_t size = 1;
    for (int d = 0; d < rank; d++) size *= dims[d];
    if (bytes < (size_t)size * 16)
        return wf__status(WF_INVALID_ARGUMENT, "a string tensor of %lld elements needs at least %lld bytes, not %zu",
                          (long long)size, (long long)size * 16, bytes);
    return wf__tensor_alloc_strings(rank, dims, bytes - (size_t)size * 16, "a cached element", out);
}
