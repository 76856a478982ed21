/*
 * FusedElementwise on OpenCL: the program of a cluster of elementwise ops (lowering's "jit",
 * src/lower/jit.c) written out as OpenCL C, one work item per output element, built at run time through
 * ocl_kernel, which caches the binary per device in memory and on disk (WEFT_CACHE_DIR, keyed by the
 * source, the build options, the device and the driver version).
 *
 * The source depends only on the ops, how they are wired, their attributes and what kind each input
 * is (the output's size, a scalar, or a broadcast run): element counts, the broadcast runs' inner and
 * period, and so the batch size, are kernel arguments, so a new shape reuses the built kernel. The op
 * expressions are the single-op kernels' own (OCLEW_BIN_FLT, OCLEW_UN_FLT and OCLEW_ACT_FLT in
 * ocl_elementwise.h), so the two agree, NaN and Inf included.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/opencl/ocl_elementwise.h"
#include "ops/kutil_sbuf.h"

typedef struct expr {
    const char *name, *op, *e; /* kernel suffix, graph op ("" for Gelu's tanh form, gelut), expression */
    bool bin;
} expr;

#define EXPR_BIN_(n, op, e) {#n, op, e, true},
#define EXPR_UN_(n, op, e) {#n, op, e, false},
static const expr g_exprs[] = {OCLEW_BIN_FLT(EXPR_BIN_) OCLEW_UN_FLT(EXPR_UN_) OCLEW_ACT_FLT(EXPR_UN_){NULL, NULL, NULL, false}};

static const expr *expr_of(const wf__ew_insn *in)
{
    bool gelut = !strcmp(in->op, "Gelu") && in->alpha != 0;
    for (int i = 0; g_exprs[i].op; i++)
        if ((gelut ? !strcmp(g_exprs[i].name, "gelut") : !strcmp(g_exprs[i].op, in->op)) && g_exprs[i].bin == (in->b >= 0))
            return &g_exprs[i];
    return NULL;
}

/* A float parameter as an exact OpenCL literal. */
static void literal(char *buf, size_t n, double v)
{
    float f = (float)v;
    if (isnan(f)) snprintf(buf, n, "NAN");
    else if (isinf(f)) snprintf(buf, n, f > 0 ? "INFINITY" : "-INFINITY");
    else snprintf(buf, n, "%af", (double)f);
}


static wf_status *source(wf__kctx *k, const wf__ew_program *pg, wf__ku_sbuf *b)
{
    /* no contraction into fma across ops: each rounds as its own kernel does */
    wf__ku_put(b, "#pragma OPENCL FP_CONTRACT OFF\n%s%s__kernel void k_fused(", OCLEW_PRELUDE, OCLEW_FLT_HELPERS);
    for (int i = 0; i < pg->n_in; i++) {
        wf__ku_put(b, "__global const float *p%d, ulong o%d, ", i, i);
        if (wf__ew_kind(pg, i) == WF__EW_BCAST) wf__ku_put(b, "ulong n%d, ulong r%d, ", i, i);
    }
    wf__ku_put(b, "__global float *py, ulong yo) {\n  ulong i = get_global_id(0);\n");
    for (int i = 0; i < pg->n_in; i++) {
        switch (wf__ew_kind(pg, i)) {
        case WF__EW_FULL: wf__ku_put(b, "  CT v%d = p%d[o%d + i];\n", i, i, i); break;
        case WF__EW_SCALAR: wf__ku_put(b, "  CT v%d = p%d[o%d];\n", i, i, i); break;
        default: wf__ku_put(b, "  CT v%d = p%d[o%d + (i / n%d) %% r%d];\n", i, i, i, i, i); break;
        }
    }
    for (int j = 0; j < pg->n_insn; j++) {
        const wf__ew_insn *in = &pg->insn[j];
        const expr *e = expr_of(in);
        if (!e)
            return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "generated kernel: no OpenCL expression for %s", in->op);
        char a[64], bb[64], va[16], vb[16];
        literal(a, sizeof a, in->alpha);
        literal(bb, sizeof bb, in->beta);
        snprintf(va, sizeof va, in->a < pg->n_in ? "v%d" : "t%d", in->a < pg->n_in ? in->a : in->a - pg->n_in);
        if (in->b >= 0)
            snprintf(vb, sizeof vb, in->b < pg->n_in ? "v%d" : "t%d", in->b < pg->n_in ? in->b : in->b - pg->n_in);
        if (e->bin) wf__ku_put(b, "  CT t%d; { CT x = %s, y = %s; t%d = %s; }\n", j, va, vb, j, e->e);
        else
            wf__ku_put(b, "  CT t%d; { const PT pa = %s, pb = %s; CT v = %s; (void)pa; (void)pb; t%d = %s; }\n", j, a, bb,
                va, j, e->e);
    }
    wf__ku_put(b, "  py[yo + i] = t%d;\n}\n", pg->n_insn - 1);
    return b->failed ? ocl_host->status(WF_OUT_OF_MEMORY, "out of memory writing a generated OpenCL kernel") : NULL;
}

static wf_status *k_FusedElementwise(wf__kctx *k)
{
    const wf__ew_program *pg = k->ewprog;
    const wf__tinfo *oi = &k->out_info[0];
    int64_t n;
    char msg[200];
    wf_code bad = wf__ew_check(k, &n, msg, sizeof msg);
    if (bad) return ocl_host->kctx_fail(k, bad, "%s", msg);
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, WF_F32, oi->rank, oi->dims, &y);
    if (s || n == 0) return s;
    wf__ku_sbuf src = {.alloc = ocl_host->malloc, .release = ocl_host->free};
    if ((s = source(k, pg, &src))) {
        ocl_host->free(src.p);
        return s;
    }
    char prog[64];
    snprintf(prog, sizeof prog, "generated %016llx", (unsigned long long)pg->hash);
    cl_kernel kern;
    s = oclew_kernel(k, prog, src.p, WF_F32, "fused", &kern);
    ocl_host->free(src.p);
    if (s) return s;
    /* arguments: each input's buffer and offset (and a broadcast's inner and period), then y's */
    cl_mem mem[2 * WF__EW_MAX_REGS + 1];
    cl_ulong u[4 * (2 * WF__EW_MAX_REGS + 1)];
    ocl_arg args[4 * (2 * WF__EW_MAX_REGS + 1)];
    int na = 0, nu = 0;
    for (int i = 0; i < pg->n_in; i++) {
        mem[i] = ocl_mem(k->in[i]);
        args[na++] = OCL_ARG(mem[i]);
        u[nu] = ocl_off(k->in[i]);
        args[na++] = OCL_ARG(u[nu]);
        nu++;
        if (wf__ew_kind(pg, i) == WF__EW_BCAST) {
            u[nu] = (cl_ulong)pg->in[i].inner;
            args[na++] = OCL_ARG(u[nu]);
            nu++;
            u[nu] = (cl_ulong)pg->in[i].period;
            args[na++] = OCL_ARG(u[nu]);
            nu++;
        }
    }
    mem[pg->n_in] = ocl_mem(y);
    args[na++] = OCL_ARG(mem[pg->n_in]);
    u[nu] = ocl_off(y);
    args[na++] = OCL_ARG(u[nu]);
    size_t global = (size_t)n;
    return ocl_launch(k, kern, na, args, 1, &global, NULL);
}

const wf__kernel_def ocl_kernels_fused[] = {
    {"FusedElementwise", "OPENCL", WF__DT_BIT(WF_F32), -1, k_FusedElementwise, NULL, WF__K_INPLACE},
    {0},
};
