/* Attribute lookup by name in an op's declared attributes (ops/op.h). */
#include <assert.h>
#include <string.h>

#include "ops/op.h"

const wf__attr *wf__attr_get(const wf__op_def *op, const wf__attr *attrs, const char *name)
{
    for (int k = 0; k < WF__MAX_ATTRS && op->attrs[k].name; k++)
        if (!strcmp(op->attrs[k].name, name)) return &attrs[k];
    assert(!"attribute not declared by the op");
    return NULL;
}

int64_t wf__attr_i(const wf__op_def *op, const wf__attr *attrs, const char *name)
{
    const wf__attr *a = wf__attr_get(op, attrs, name);
    return a ? a->i : 0;
}

double wf__attr_f(const wf__op_def *op, const wf__attr *attrs, const char *name)
{
    const wf__attr *a = wf__attr_get(op, attrs, name);
    return a ? a->f : 0;
}

const char *wf__attr_s(const wf__op_def *op, const wf__attr *attrs, const char *name)
{
    const wf__attr *a = wf__attr_get(op, attrs, name);
    return a && a->s ? a->s : "";
}
