/*
 * FusedElementwise, the CPU's generated elementwise kernel: it runs the program that lowering's "jit"
 * pass (lower/jit.c, optimisation level 2) makes of a cluster of elementwise ops.
 *
 * Issue 14 leaves the CPU's code generator open: an LLVM or libgccjit backend, C source compiled once
 * and loaded, or a vectorised interpreter over fused tiles. This is the interpreter, for three reasons:
 * - A user's machine has no C compiler at run time (libweft is a library, not a toolchain), and LLVM
 *   or libgccjit would be a dependency of 50-100 MB for one feature.
 * - Compiling C or LLVM IR takes 50-300 ms per cluster, and a model has dozens; this program is ready in
 *   microseconds, so there is nothing worth a disk cache on the CPU (the OpenCL and CUDA builds are
 *   the ones that need WEFT_CACHE_DIR).
 * - The chains worth fusing are memory-bound: the unfused chain reads and writes the whole tensor once
 *   per op. Running every instruction over a tile of TILE elements that stays in L1 reads each input
 *   and writes the output once, which is where the time goes. The price is that values pass through
 *   L1 between instructions instead of staying in registers, which only compute-heavy chains feel.
 * Each instruction runs the very loop of the single-op kernel (k_elementwise*.c, k_math.c, cloned for
 * AVX-512 and AVX2 and picked when the library loads), so a fused chain gives the unfused chain's
 * results, NaN and Inf included, and no op has two implementations to keep in step. (Not always bit
 * for bit: a value may fall in a loop's vector body in one plan and in its scalar tail in the other,
 * where the polynomials of Tanh or Sigmoid can round an ulp apart.)
 *
 * Inputs of the output's size are read in place, a scalar with stride 0, and any other broadcast (a
 * bias over the last dims, one value per channel) is gathered into a tile register first.
 */
#include "backends/cpu/k_elementwise.h"

#define TILE 1024      /* floats per register: 4 KB, so a chain's live registers stay in L1 */
#define STACK_REGS WF__EW_MAX_REGS /* registers, on the stack: 64 KB */

enum { SRC_IN, SRC_SCALAR, SRC_REG };

typedef struct step {
    wf__ew_bin_fn bin; /* NULL: unary */
    wf__ew_unary un;
    int src[2], idx[2]; /* SRC_* and the input or register index */
    int dst;            /* register, or -1: the output */
} step;

typedef struct cprog {
    int n_steps, n_regs, n_gather;
    step *s;
    int *gather_in, *gather_reg; /* broadcast inputs and the register each is gathered into */
    int n_full, full_in[WF__EW_MAX_REGS * 2]; /* inputs read in place */
    int64_t grain;
} cprog;

static void cprog_free(void *p)
{
    cprog *c = p;
    if (!c) return;
    wf__free(c->s);
    wf__free(c->gather_in);
    wf__free(c->gather_reg);
    wf__free(c);
}

static bool is_full(const wf__ew_program *pg, int i) { return pg->in[i].inner == 1 && pg->in[i].period == pg->n; }
static bool is_scalar(const wf__ew_program *pg, int i) { return pg->in[i].period == 1 && !is_full(pg, i); }

/* Registers by linear scan: a value's register is free again after its last use, and an instruction
 * may write the register of an operand it is the last to read (every loop is elementwise). */
static wf_status *compile(wf__kctx *k, const wf__ew_program *pg, cprog **out)
{
    int ni = pg->n_in, nv = pg->n_in + pg->n_insn;
    cprog *c = wf__calloc(1, sizeof *c);
    int *last = wf__malloc(sizeof(int) * (size_t)nv), *reg = wf__malloc(sizeof(int) * (size_t)nv);
    int *free_regs = wf__malloc(sizeof(int) * (size_t)nv);
    wf_status *s = NULL;
    if (!c || !last || !reg || !free_regs || !(c->s = wf__calloc((size_t)pg->n_insn, sizeof *c->s)) ||
        !(c->gather_in = wf__malloc(sizeof(int) * (size_t)(ni ? ni : 1))) ||
        !(c->gather_reg = wf__malloc(sizeof(int) * (size_t)(ni ? ni : 1)))) {
        s = wf__oom("a generated kernel", sizeof(step) * (size_t)pg->n_insn);
        goto out;
    }
    c->n_steps = pg->n_insn;
    bool heavy = false;
    for (int v = 0; v < nv; v++) last[v] = -1, reg[v] = -1;
    for (int i = 0; i < pg->n_insn; i++) {
        const wf__ew_insn *in = &pg->insn[i];
        if (in->a < 0 || in->a >= ni + i || in->b >= ni + i)
        {
            s = wf__kctx_fail(k, WF_INTERNAL, "generated kernel: instruction %d reads a value not yet made", i);
            goto out;
        }
        last[in->a] = i;
        if (in->b >= 0) last[in->b] = i;
    }
    int n_free = 0;
    for (int i = 0; i < ni; i++) {
        /* a broadcast input, or a scalar that a unary op reads, is gathered into a register of its own */
        bool unary_reader = false;
        for (int j = 0; j < pg->n_insn; j++) unary_reader |= pg->insn[j].b < 0 && pg->insn[j].a == i;
        if (is_full(pg, i) && last[i] >= 0 && c->n_full < WF__EW_MAX_REGS * 2) c->full_in[c->n_full++] = i;
        if (is_full(pg, i) || (is_scalar(pg, i) && !unary_reader) || last[i] < 0) continue;
        c->gather_in[c->n_gather] = i;
        c->gather_reg[c->n_gather++] = reg[i] = c->n_regs++;
    }
    for (int i = 0; i < pg->n_insn; i++) {
        const wf__ew_insn *in = &pg->insn[i];
        step *st = &c->s[i];
        int ops[2] = {in->a, in->b};
        for (int o = 0; o < 2; o++) {
            int v = ops[o];
            if (v < 0) continue;
            if (reg[v] >= 0) st->src[o] = SRC_REG, st->idx[o] = reg[v];
            else st->src[o] = is_full(pg, v) ? SRC_IN : SRC_SCALAR, st->idx[o] = v;
        }
        if (in->b >= 0) {
            if (!(st->bin = wf__ew_binary_f32(in->op))) {
                s = wf__kctx_fail(k, WF_UNIMPLEMENTED, "generated kernel: no CPU loop for binary op %s", in->op);
                goto out;
            }
            heavy |= !strcmp(in->op, "Div");
        } else if (!wf__ew_unary_f32(in->op, in->alpha, in->beta, &st->un) &&
                   !wf__km_unary_f32(in->op, in->alpha, in->beta, &st->un)) {
            s = wf__kctx_fail(k, WF_UNIMPLEMENTED, "generated kernel: no CPU loop for unary op %s", in->op);
            goto out;
        } else {
            heavy |= strcmp(in->op, "Relu") && strcmp(in->op, "Neg") && strcmp(in->op, "Abs") &&
                     strcmp(in->op, "Clip") && strcmp(in->op, "LeakyRelu") && strcmp(in->op, "Square");
        }
        /* operands read for the last time free their registers (gathered inputs' included) */
        for (int o = 0; o < 2; o++)
            if (ops[o] >= 0 && last[ops[o]] == i && reg[ops[o]] >= 0 && (o == 0 || ops[1] != ops[0])) {
                free_regs[n_free++] = reg[ops[o]];
                reg[ops[o]] = -2; /* never read again */
            }
        if (i == pg->n_insn - 1) {
            st->dst = -1;
        } else {
            st->dst = n_free ? free_regs[--n_free] : c->n_regs++;
            reg[ni + i] = st->dst;
        }
    }
    if (c->n_regs > STACK_REGS) {
        s = wf__kctx_fail(k, WF_INTERNAL, "generated kernel: %d registers, more than %d", c->n_regs, STACK_REGS);
        goto out;
    }
    /* elements per parallel task: about the single-op kernels' work per task */
    c->grain = (heavy ? 4 * WF__EW_GRAIN_HEAVY : WF__EW_GRAIN) / (pg->n_insn > 4 ? pg->n_insn / 4 : 1);
    if (c->grain < TILE) c->grain = TILE;
out:
    wf__free(last);
    wf__free(reg);
    wf__free(free_regs);
    if (s) {
        cprog_free(c);
        return s;
    }
    *out = c;
    return NULL;
}

typedef struct job {
    const wf__ew_program *pg;
    const cprog *c;
    const float *const *in;
    float *out;
} job;

/* Input i's elements for output elements [off, off + m): element e reads (e / inner) % period. */
static void gather(const wf__ew_input *p, const float *src, int64_t off, int64_t m, float *dst)
{
    int64_t q = off / p->inner, r = off % p->inner, c = q % p->period;
    for (int64_t i = 0; i < m;) {
        if (p->inner == 1) {
            int64_t len = p->period - c < m - i ? p->period - c : m - i;
            memcpy(dst + i, src + c, sizeof(float) * (size_t)len);
            i += len;
            c = 0;
        } else {
            int64_t len = p->inner - r < m - i ? p->inner - r : m - i;
            const float v = src[c];
            for (int64_t t = 0; t < len; t++) dst[i + t] = v;
            i += len;
            r = 0;
            if (++c == p->period) c = 0;
        }
    }
}

static void run_tiles(const job *j, int64_t b, int64_t e, float *regs)
{
    const cprog *c = j->c;
    for (int64_t off = b; off < e; off += TILE) {
        int64_t m = e - off < TILE ? e - off : TILE;
        /* the next tile of each input the tile loop reads in place, a line at a time */
        if (off + TILE < e)
            for (int i = 0; i < c->n_full; i++) {
                const char *p = (const char *)(j->in[c->full_in[i]] + off + TILE);
                for (int l = 0; l < TILE * 4; l += 64) __builtin_prefetch(p + l);
            }
        for (int g = 0; g < c->n_gather; g++)
            gather(&j->pg->in[c->gather_in[g]], j->in[c->gather_in[g]], off, m, regs + (size_t)c->gather_reg[g] * TILE);
        for (int i = 0; i < c->n_steps; i++) {
            const step *st = &c->s[i];
            const float *p[2] = {NULL, NULL};
            int64_t stride[2] = {1, 1};
            for (int o = 0; o < (st->bin ? 2 : 1); o++) {
                switch (st->src[o]) {
                case SRC_IN: p[o] = j->in[st->idx[o]] + off; break;
                case SRC_SCALAR: p[o] = j->in[st->idx[o]]; stride[o] = 0; break;
                default: p[o] = regs + (size_t)st->idx[o] * TILE; break;
                }
            }
            float *d = st->dst < 0 ? j->out + off : regs + (size_t)st->dst * TILE;
            if (st->bin) st->bin(p[0], stride[0], p[1], stride[1], d, m);
            else st->un.call(&st->un, p[0], d, m);
        }
    }
}

static void range(void *arg, int64_t b, int64_t e)
{
    _Alignas(64) float regs[STACK_REGS * TILE];
    run_tiles(arg, b, e, regs);
}

static wf_status *k_FusedElementwise(wf__kctx *k)
{
    const wf__ew_program *pg = k->ewprog;
    if (!pg || pg->n_in != k->n_in || pg->n_insn < 1)
        return wf__kctx_fail(k, WF_INTERNAL, "FusedElementwise has no program for its %d inputs", k->n_in);
    const wf__tinfo *oi = &k->out_info[0];
    int64_t n = 1;
    for (int d = 0; d < oi->rank; d++) n *= oi->dims[d];
    if (oi->rank < 0 || n != pg->n)
        return wf__kctx_fail(k, WF_INTERNAL, "generated kernel: planned for %lld elements, output has %lld",
                             (long long)pg->n, (long long)n);
    const float *in_buf[16], **in = pg->n_in <= 16 ? in_buf : wf__malloc(sizeof *in * (size_t)pg->n_in);
    if (!in) return wf__oom("a generated kernel", sizeof *in * (size_t)pg->n_in);
    int reuse = -1;
    wf_status *s = NULL;
    for (int i = 0; i < pg->n_in && !s; i++) {
        const wf_tensor *t = k->in[i];
        int64_t want = is_full(pg, i) ? pg->n : pg->in[i].period;
        if (!t || t->dtype != WF_F32 || t->size != want) {
            char sh[160];
            s = wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                              "generated kernel: input %d is %s %s, the program was built for %lld f32 elements", i,
                              t ? wf_dtype_name(t->dtype) : "missing", t ? wf__shape_str(t->rank, t->dims, sh) : "",
                              (long long)want);
            break;
        }
        in[i] = t->data;
        if (reuse < 0 && is_full(pg, i) && i < 32 && (k->in_owned >> i & 1)) reuse = i;
    }
    /* the register plan, made by the first run; read under the lock, as concurrent runs share it */
    cprog *c = NULL;
    if (!s) {
        wf__kctx_lock_state(k);
        if (!(c = *k->state) && !(s = compile(k, pg, &c))) *k->state = c;
        wf__kctx_unlock_state(k);
    }
    wf_tensor *y = NULL;
    if (!s && reuse >= 0) s = wf__kctx_output_reuse(k, 0, reuse, WF_F32, oi->rank, oi->dims, &y, NULL);
    else if (!s) s = wf__kctx_output(k, 0, WF_F32, oi->rank, oi->dims, &y);
    if (!s && n > 0) {
        job j = {pg, c, in, y->data};
        if (n >= 2 * c->grain) wf__parallel_for(k, n, c->grain, range, &j);
        else range(&j, 0, n);
    }
    if (in != in_buf) wf__free(in);
    return s;
}

const wf__kernel_def wf__cpu_kernels_fused[] = {
    {"FusedElementwise", "CPU", WF__DT_BIT(WF_F32), -1, k_FusedElementwise, cprog_free, WF__K_INPLACE},
    {0},
};
