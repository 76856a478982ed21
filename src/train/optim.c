/*
 * Optimizers (wf_optimizer_minimize): one training step as ordinary graph nodes. The gradients come
 * from wf_gradients, the optimizer's state (slots, the step counter) lives in session variables, and
 * every new value is an Assign the caller runs as a target, so a step commits all at once or not at
 * all. The update formulas are Keras 3's (see weft.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "graph/graph.h"
#include "train/optim.h"

#define NM_MAX 1024

void wf_optimizer_options_init(wf_optimizer_options *o, wf_optimizer_kind kind)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->learning_rate = kind == WF_OPT_SGD ? 0.01 : 0.001;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->epsilon = 1e-7;
    o->rho = 0.9;
    o->weight_decay = kind == WF_OPT_ADAMW ? 0.004 : 0;
    o->schedule = WF_LR_CONSTANT;
    o->step_size = 1;
    o->gamma = 1;
    o->decay_steps = 1;
    o->alpha = 0;
}

/* ---- building ------------------------------------------------------------------------------------- */

/* A scalar the update uses: a constant (emitted as a Const of each variable's dtype, as Keras casts
 * its Python floats), or an f64 node cast once per dtype. */
typedef struct scal {
    bool is_const;
    double v;
    wf_output f64;
    wf_output by_dtype[WF_NUM_DTYPES];
    const char *label;
} scal;

typedef struct ob {
    wf_graph *g;
    const char *name;
    wf_output *assigns;
    int n_assigns;
    wf_output finite; /* loss scaling: bool scalar, every gradient finite; node NULL without */
} ob;

static wf_status *opv(ob *b, const char *op, const wf_output *in, int n_in, const wf_attr *at, int n_at,
                      wf_output *out, const char *fmt, va_list ap)
{
    char nm[NM_MAX];
    int k = snprintf(nm, sizeof nm, "%s/", b->name);
    vsnprintf(nm + k, sizeof nm - (size_t)k, fmt, ap);
    wf_node *n;
    WF__TRY(wf_op(b->g, op, nm, in, n_in, at, n_at, &n));
    *out = wf_out(n, 0);
    return NULL;
}

static wf_status *op(ob *b, const char *opname, const wf_output *in, int n_in, const wf_attr *at, int n_at,
                     wf_output *out, const char *fmt, ...) WF__PRINTF(8, 9);
static wf_status *op(ob *b, const char *opname, const wf_output *in, int n_in, const wf_attr *at, int n_at,
                     wf_output *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wf_status *s = opv(b, opname, in, n_in, at, n_at, out, fmt, ap);
    va_end(ap);
    return s;
}

static wf_status *bin(ob *b, const char *opname, wf_output x, wf_output y, wf_output *out, const char *fmt, ...)
    WF__PRINTF(6, 7);
static wf_status *bin(ob *b, const char *opname, wf_output x, wf_output y, wf_output *out, const char *fmt, ...)
{
    wf_output in[2] = {x, y};
    va_list ap;
    va_start(ap, fmt);
    wf_status *s = opv(b, opname, in, 2, NULL, 0, out, fmt, ap);
    va_end(ap);
    return s;
}

static wf_status *un(ob *b, const char *opname, wf_output x, wf_output *out, const char *fmt, ...) WF__PRINTF(5, 6);
static wf_status *un(ob *b, const char *opname, wf_output x, wf_output *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wf_status *s = opv(b, opname, &x, 1, NULL, 0, out, fmt, ap);
    va_end(ap);
    return s;
}

static wf_status *cnst(ob *b, wf_dtype dt, double v, wf_output *out, const char *fmt, ...) WF__PRINTF(5, 6);
static wf_status *cnst(ob *b, wf_dtype dt, double v, wf_output *out, const char *fmt, ...)
{
    char nm[NM_MAX];
    int k = snprintf(nm, sizeof nm, "%s/", b->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nm + k, sizeof nm - (size_t)k, fmt, ap);
    va_end(ap);
    return wf_const_scalar(b->g, nm, dt, v, out);
}

static scal sconst(const char *label, double v)
{
    scal s = {.is_const = true, .v = v, .label = label};
    return s;
}

static scal snode(const char *label, wf_output f64)
{
    scal s = {.is_const = false, .f64 = f64, .label = label};
    return s;
}

/* The scalar in dtype dt, built on first use. */
static wf_status *sget(ob *b, scal *s, wf_dtype dt, wf_output *out)
{
    if (!s->by_dtype[dt].node) {
        if (s->is_const) {
            WF__TRY(cnst(b, dt, s->v, &s->by_dtype[dt], "%s_%s", s->label, wf_dtype_name(dt)));
        } else if (dt == WF_F64) {
            s->by_dtype[dt] = s->f64;
        } else {
            wf_attr to = wf_attr_dtype("to", dt);
            WF__TRY(op(b, "Cast", &s->f64, 1, &to, 1, &s->by_dtype[dt], "%s_%s", s->label, wf_dtype_name(dt)));
        }
    }
    *out = s->by_dtype[dt];
    return NULL;
}

/* A slot variable of v's shape and dtype, zeros, named "<name>/<var>/<slot>". */
static wf_status *slot(ob *b, wf_output var, const char *slot_name, wf_output *out)
{
    int64_t dims[WF_MAX_RANK];
    int rank = wf_output_shape(var, dims);
    wf_init z = {.kind = WF_INIT_ZEROS};
    wf_tensor *t;
    WF__TRY(wf_init_tensor(&z, wf_output_dtype(var), rank, dims, &t));
    char nm[NM_MAX];
    snprintf(nm, sizeof nm, "%s/%s/%s", b->name, wf_node_name(var.node), slot_name);
    wf_status *s = wf_variable(b->g, nm, t, out);
    wf_tensor_free(t);
    return s;
}

/* var = value, or under loss scaling var = finite ? value : var: a skipped step writes back what it
 * read, so no variable, slot or counter changes. (A gate input on every update op would save the
 * Where, but the composite updates of f16/bf16 and SGD/RMSprop have no single op to gate.) */
static wf_status *assign(ob *b, wf_output var, wf_output value)
{
    char nm[NM_MAX];
    if (b->finite.node) {
        wf_output in[3] = {b->finite, value, var};
        snprintf(nm, sizeof nm, "%s/%s/skip_if_not_finite", b->name, wf_node_name(var.node));
        wf_node *n;
        WF__TRY(wf_op(b->g, "Where", nm, in, 3, NULL, 0, &n));
        value = wf_out(n, 0);
    }
    snprintf(nm, sizeof nm, "%s/%s/assign", b->name, wf_node_name(var.node));
    WF__TRY(wf_assign(b->g, nm, var, value, &b->assigns[b->n_assigns]));
    b->n_assigns++;
    return NULL;
}

/* ---- checks ---------------------------------------------------------------------------------------- */

static wf_status *bad(const char *name, const char *field, double v, const char *want)
{
    return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': %s = %g, must be %s", name, field, v, want);
}

static bool in01(double v) { return v >= 0 && v < 1; }

static wf_status *check_options(const char *name, const wf_optimizer_options *o)
{
    if (o->kind < WF_OPT_SGD || o->kind > WF_OPT_RMSPROP)
        return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': kind %d is not SGD, ADAM, ADAMW or RMSPROP", name,
                          (int)o->kind);
    if (!(o->learning_rate > 0) || !isfinite(o->learning_rate))
        return bad(name, "learning_rate", o->learning_rate, "finite and > 0");
    if ((o->kind == WF_OPT_SGD || o->kind == WF_OPT_RMSPROP) && !in01(o->momentum))
        return bad(name, "momentum", o->momentum, "in [0, 1)");
    if (o->kind == WF_OPT_ADAM || o->kind == WF_OPT_ADAMW) {
        if (!in01(o->beta1)) return bad(name, "beta1", o->beta1, "in [0, 1)");
        if (!in01(o->beta2)) return bad(name, "beta2", o->beta2, "in [0, 1)");
    }
    if (o->kind != WF_OPT_SGD && (!(o->epsilon >= 0) || !isfinite(o->epsilon)))
        return bad(name, "epsilon", o->epsilon, "finite and >= 0");
    if (o->kind == WF_OPT_RMSPROP && !in01(o->rho)) return bad(name, "rho", o->rho, "in [0, 1)");
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return bad(name, "weight_decay", o->weight_decay, "finite and >= 0");
    if (!(o->clip_global_norm >= 0) || !isfinite(o->clip_global_norm))
        return bad(name, "clip_global_norm", o->clip_global_norm, "0 (off) or finite and > 0");
    switch (o->schedule) {
    case WF_LR_CONSTANT: break;
    case WF_LR_STEP:
        if (o->step_size < 1) return bad(name, "step_size", (double)o->step_size, ">= 1");
        if (!(o->gamma > 0) || !isfinite(o->gamma)) return bad(name, "gamma", o->gamma, "finite and > 0");
        break;
    case WF_LR_COSINE:
        if (o->decay_steps < 1) return bad(name, "decay_steps", (double)o->decay_steps, ">= 1");
        if (!(o->alpha >= 0 && o->alpha <= 1)) return bad(name, "alpha", o->alpha, "in [0, 1]");
        break;
    default:
        return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': schedule %d is not CONSTANT, STEP or COSINE", name,
                          (int)o->schedule);
    }
    return NULL;
}

static bool is_output_of(const wf_graph *g, wf_output o)
{
    return o.node && o.node->graph == g && o.node->id < g->n && g->nodes[o.node->id] == o.node && o.index >= 0 &&
           o.index < o.node->n_out;
}

static wf_status *check_inputs(wf_graph *g, const char *name, wf_output loss, const wf_output *vars, int n_vars)
{
    char b[160];
    if (!is_output_of(g, loss))
        return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': the loss is not an output of a node of this graph", name);
    int64_t d[WF_MAX_RANK];
    int r = wf_output_shape(loss, d);
    int64_t numel = r < 0 ? -1 : wf__numel(r, d);
    if (!wf__dtype_is_float(wf_output_dtype(loss)) || r < 0 || numel != 1)
        return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': the loss '%s' is %s%s, not a float scalar", name,
                          wf_node_name(loss.node), wf_dtype_name(wf_output_dtype(loss)),
                          r < 0 ? "[?]" : wf__shape_str(r, d, b));
    for (int i = 0; i < n_vars; i++) {
        if (!is_output_of(g, vars[i]))
            return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': vars[%d] is not an output of a node of this graph",
                              name, i);
        if (strcmp(wf_node_op(vars[i].node), "Variable") != 0)
            return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': vars[%d], node '%s' (%s), is not a Variable", name,
                              i, wf_node_name(vars[i].node), wf_node_op(vars[i].node));
        if (!wf__dtype_is_float(wf_output_dtype(vars[i])))
            return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': variable '%s' is %s, not a float dtype", name,
                              wf_node_name(vars[i].node), wf_dtype_name(wf_output_dtype(vars[i])));
        for (int j = 0; j < i; j++)
            if (vars[j].node == vars[i].node)
                return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': variable '%s' is given twice (vars[%d] and [%d])",
                                  name, wf_node_name(vars[i].node), j, i);
    }
    return NULL;
}

/* ---- the step ------------------------------------------------------------------------------------- */

#define T(expr) WF__TRY(expr)

/* The learning rate at step s (f64 scalar s_f). */
static wf_status *schedule(ob *b, const wf_optimizer_options *o, wf_output s_f, scal *lr)
{
    if (o->schedule == WF_LR_CONSTANT) {
        *lr = sconst("lr", o->learning_rate);
        return NULL;
    }
    wf_output base, r;
    T(cnst(b, WF_F64, o->learning_rate, &base, "lr_base"));
    if (o->schedule == WF_LR_STEP) {
        wf_output size, q, fl, gamma, f;
        T(cnst(b, WF_F64, (double)o->step_size, &size, "lr_step_size"));
        T(bin(b, "Div", s_f, size, &q, "lr_step_ratio"));
        T(un(b, "Floor", q, &fl, "lr_step_floor"));
        T(cnst(b, WF_F64, o->gamma, &gamma, "lr_gamma"));
        T(bin(b, "Pow", gamma, fl, &f, "lr_step_factor"));
        T(bin(b, "Mul", base, f, &r, "lr"));
    } else {
        wf_output ds, sm, frac, pi, ang, cs, one, half, p1, cd, oma, alpha, t1, dec;
        T(cnst(b, WF_F64, (double)o->decay_steps, &ds, "lr_decay_steps"));
        T(bin(b, "Minimum", s_f, ds, &sm, "lr_step_capped"));
        T(bin(b, "Div", sm, ds, &frac, "lr_fraction"));
        T(cnst(b, WF_F64, M_PI, &pi, "lr_pi"));
        T(bin(b, "Mul", pi, frac, &ang, "lr_angle"));
        T(un(b, "Cos", ang, &cs, "lr_cos"));
        T(cnst(b, WF_F64, 1, &one, "lr_one"));
        T(cnst(b, WF_F64, 0.5, &half, "lr_half"));
        T(bin(b, "Add", one, cs, &p1, "lr_one_plus_cos"));
        T(bin(b, "Mul", half, p1, &cd, "lr_cosine_decayed"));
        T(cnst(b, WF_F64, 1 - o->alpha, &oma, "lr_one_minus_alpha"));
        T(cnst(b, WF_F64, o->alpha, &alpha, "lr_alpha"));
        T(bin(b, "Mul", oma, cd, &t1, "lr_scaled"));
        T(bin(b, "Add", t1, alpha, &dec, "lr_decayed"));
        T(bin(b, "Mul", base, dec, &r, "lr"));
    }
    *lr = snode("lr", r);
    return NULL;
}

/* tf.clip_by_global_norm over every gradient, in place. The norm is summed in f64. */
static wf_status *clip(ob *b, const wf_optimizer_options *o, const wf_output *vars, wf_output *grads, int n)
{
    wf_output *parts = wf__calloc((size_t)n, sizeof *parts);
    if (!parts) return wf__oom("the gradient norms", sizeof *parts * (size_t)n);
    wf_status *s = NULL;
    wf_attr k0 = wf_attr_int("keepdims", 0), to = wf_attr_dtype("to", WF_F64);
    for (int i = 0; i < n && !s; i++) {
        const char *vn = wf_node_name(vars[i].node);
        wf_output sq, ss;
        if ((s = bin(b, "Mul", grads[i], grads[i], &sq, "%s/grad_norm_square", vn))) break;
        if ((s = op(b, "ReduceSum", &sq, 1, &k0, 1, &ss, "%s/grad_norm_square_sum", vn))) break;
        if (wf_output_dtype(ss) != WF_F64) s = op(b, "Cast", &ss, 1, &to, 1, &ss, "%s/grad_norm_square_sum_f64", vn);
        parts[i] = ss;
    }
    wf_output total, norm, inv, clipv, invclip, m, scale, zero_if_finite, scale2;
    if (!s) s = n > 1 ? op(b, "Sum", parts, n, NULL, 0, &total, "global_norm_square") : NULL;
    if (n == 1) total = parts[0];
    wf__free(parts);
    if (s) return s;
    T(un(b, "Sqrt", total, &norm, "global_norm"));
    T(un(b, "Reciprocal", norm, &inv, "global_norm_inverse"));
    T(cnst(b, WF_F64, o->clip_global_norm, &clipv, "clip_norm"));
    T(cnst(b, WF_F64, 1 / o->clip_global_norm, &invclip, "clip_norm_inverse"));
    T(bin(b, "Minimum", inv, invclip, &m, "clip_min"));
    T(bin(b, "Mul", clipv, m, &scale, "clip_scale_finite"));
    /* norm - norm: 0, or NaN when the norm is not finite, so a NaN gradient is not silently scaled to 0 */
    T(bin(b, "Sub", norm, norm, &zero_if_finite, "clip_nan_guard"));
    T(bin(b, "Add", scale, zero_if_finite, &scale2, "clip_scale"));
    scal sc = snode("clip_scale", scale2);
    for (int i = 0; i < n; i++) {
        wf_output f;
        T(sget(b, &sc, wf_output_dtype(grads[i]), &f));
        T(bin(b, "Mul", grads[i], f, &grads[i], "%s/grad_clipped", wf_node_name(vars[i].node)));
    }
    return NULL;
}

typedef struct scalars {
    scal lr, lr_t, wd, mom, one_m_b1, one_m_b2, eps, rho, one_m_rho;
} scalars;

static wf_status *update(ob *b, const wf_optimizer_options *o, scalars *sc, wf_output w, wf_output g)
{
    const char *vn = wf_node_name(w.node);
    wf_dtype dt = wf_output_dtype(w);
    wf_output w0 = w, lr, nw;
    if (o->weight_decay > 0) {
        wf_output wd, a, c;
        T(sget(b, &sc->wd, dt, &wd));
        T(sget(b, &sc->lr, dt, &lr));
        T(bin(b, "Mul", w, wd, &a, "%s/decay_wd", vn));
        T(bin(b, "Mul", a, lr, &c, "%s/decay", vn));
        T(bin(b, "Sub", w, c, &w0, "%s/decayed", vn));
    }
    switch (o->kind) {
    case WF_OPT_SGD: {
        wf_output gl;
        T(sget(b, &sc->lr, dt, &lr));
        T(bin(b, "Mul", g, lr, &gl, "%s/grad_lr", vn));
        if (o->momentum == 0) {
            T(bin(b, "Sub", w0, gl, &nw, "%s/new", vn));
            break;
        }
        wf_output m, mom, mm, m_new;
        T(slot(b, w, "m", &m));
        T(sget(b, &sc->mom, dt, &mom));
        T(bin(b, "Mul", m, mom, &mm, "%s/m_momentum", vn));
        T(bin(b, "Sub", mm, gl, &m_new, "%s/m_new", vn));
        T(assign(b, m, m_new));
        if (o->nesterov) {
            wf_output mm2, inc;
            T(bin(b, "Mul", m_new, mom, &mm2, "%s/nesterov_momentum", vn));
            T(bin(b, "Sub", mm2, gl, &inc, "%s/nesterov_step", vn));
            T(bin(b, "Add", w0, inc, &nw, "%s/new", vn));
        } else {
            T(bin(b, "Add", w0, m_new, &nw, "%s/new", vn));
        }
        break;
    }
    case WF_OPT_ADAM:
    case WF_OPT_ADAMW: {
        wf_output m, v, b1c, b2c, eps, lrt, d, dm, m_new, g2, dv, dv2, v_new, num, sq, den, upd;
        T(slot(b, w, "m", &m));
        T(slot(b, w, "v", &v));
        T(sget(b, &sc->one_m_b1, dt, &b1c));
        T(sget(b, &sc->one_m_b2, dt, &b2c));
        T(sget(b, &sc->eps, dt, &eps));
        T(sget(b, &sc->lr_t, dt, &lrt));
        if (dt == WF_F32 || dt == WF_F64) {
            /* one fused pass (graph/ops_train.c) instead of twelve: the same formula in the same order,
             * so it gives the composite's values exactly; f16/bf16 keep the composite below */
            wf_output in[8] = {w0, m, v, g, lrt, b1c, b2c, eps};
            char nm[NM_MAX];
            snprintf(nm, sizeof nm, "%s/%s/apply_adam", b->name, vn);
            wf_node *n;
            T(wf_op(b->g, "ApplyAdam", nm, in, 8, NULL, 0, &n));
            T(assign(b, m, wf_out(n, 1)));
            T(assign(b, v, wf_out(n, 2)));
            nw = wf_out(n, 0);
            break;
        }
        T(bin(b, "Sub", g, m, &d, "%s/m_delta", vn));
        T(bin(b, "Mul", d, b1c, &dm, "%s/m_increment", vn));
        T(bin(b, "Add", m, dm, &m_new, "%s/m_new", vn));
        T(bin(b, "Mul", g, g, &g2, "%s/grad_square", vn));
        T(bin(b, "Sub", g2, v, &dv, "%s/v_delta", vn));
        T(bin(b, "Mul", dv, b2c, &dv2, "%s/v_increment", vn));
        T(bin(b, "Add", v, dv2, &v_new, "%s/v_new", vn));
        T(assign(b, m, m_new));
        T(assign(b, v, v_new));
        T(bin(b, "Mul", m_new, lrt, &num, "%s/step_numerator", vn));
        T(un(b, "Sqrt", v_new, &sq, "%s/v_sqrt", vn));
        T(bin(b, "Add", sq, eps, &den, "%s/step_denominator", vn));
        T(bin(b, "Div", num, den, &upd, "%s/step", vn));
        T(bin(b, "Sub", w0, upd, &nw, "%s/new", vn));
        break;
    }
    default: { /* RMSPROP */
        wf_output v, rho, omr, eps, vr, g2, g2r, v_new, ve, den, gl, inc;
        T(slot(b, w, "v", &v));
        T(sget(b, &sc->rho, dt, &rho));
        T(sget(b, &sc->one_m_rho, dt, &omr));
        T(sget(b, &sc->eps, dt, &eps));
        T(sget(b, &sc->lr, dt, &lr));
        T(bin(b, "Mul", v, rho, &vr, "%s/v_rho", vn));
        T(bin(b, "Mul", g, g, &g2, "%s/grad_square", vn));
        T(bin(b, "Mul", g2, omr, &g2r, "%s/grad_square_scaled", vn));
        T(bin(b, "Add", vr, g2r, &v_new, "%s/v_new", vn));
        T(assign(b, v, v_new));
        T(bin(b, "Add", v_new, eps, &ve, "%s/v_eps", vn));
        T(un(b, "Sqrt", ve, &den, "%s/denominator", vn));
        T(bin(b, "Mul", lr, g, &gl, "%s/lr_grad", vn));
        T(bin(b, "Div", gl, den, &inc, "%s/increment", vn));
        if (o->momentum > 0) {
            wf_output m, mom, mm, m_new;
            T(slot(b, w, "m", &m));
            T(sget(b, &sc->mom, dt, &mom));
            T(bin(b, "Mul", mom, m, &mm, "%s/m_momentum", vn));
            T(bin(b, "Add", mm, inc, &m_new, "%s/m_new", vn));
            T(assign(b, m, m_new));
            T(bin(b, "Sub", w0, m_new, &nw, "%s/new", vn));
        } else {
            T(bin(b, "Sub", w0, inc, &nw, "%s/new", vn));
        }
        break;
    }
    }
    return assign(b, w, nw);
}

/* A scalar Variable "<name>/<what>" of dtype dt holding v. */
static wf_status *scalar_var(ob *b, const char *what, wf_dtype dt, double v, wf_output *out)
{
    wf_tensor *z;
    T(wf_tensor_new(dt, 0, NULL, NULL, &z));
    if (dt == WF_I64) *(int64_t *)wf_tensor_data(z) = (int64_t)v;
    else *(float *)wf_tensor_data(z) = (float)v;
    char nm[NM_MAX];
    snprintf(nm, sizeof nm, "%s/%s", b->name, what);
    wf_status *s = wf_variable(b->g, nm, z, out);
    wf_tensor_free(z);
    return s;
}

/* The loss times the scale variable, in the loss's dtype. */
static wf_status *scale_loss(ob *b, wf__loss_scale *ls, wf_output loss, wf_output *scaled)
{
    T(scalar_var(b, "loss_scale", WF_F32, ls->initial, &ls->scale));
    T(scalar_var(b, "loss_scale_good_steps", WF_I64, 0, &ls->good_steps));
    wf_output sc = ls->scale;
    if (wf_output_dtype(loss) != WF_F32) {
        wf_attr to = wf_attr_dtype("to", wf_output_dtype(loss));
        T(op(b, "Cast", &sc, 1, &to, 1, &sc, "loss_scale_%s", wf_dtype_name(wf_output_dtype(loss))));
    }
    return bin(b, "Mul", loss, sc, scaled, "scaled_loss");
}

/* Divides every gradient by the scale (a power of two, so exactly) and sets b->finite: no gradient
 * holds an inf or NaN. g * 0 is 0 for a finite g and NaN for inf or NaN, so the sum of those products
 * is 0 exactly when every gradient is finite; a sum of the gradients themselves could overflow. */
static wf_status *unscale(ob *b, wf__loss_scale *ls, const wf_output *vars, wf_output *grads, int n)
{
    wf_output s64, inv64, *parts = NULL;
    wf_attr to64 = wf_attr_dtype("to", WF_F64);
    T(op(b, "Cast", &ls->scale, 1, &to64, 1, &s64, "loss_scale_f64"));
    T(un(b, "Reciprocal", s64, &inv64, "loss_scale_inverse"));
    scal inv = snode("loss_scale_inverse", inv64), zero = sconst("zero", 0);
    parts = wf__calloc((size_t)n, sizeof *parts);
    if (!parts) return wf__oom("the gradients' finiteness checks", sizeof *parts * (size_t)n);
    wf_status *s = NULL;
    wf_attr k0 = wf_attr_int("keepdims", 0), to32 = wf_attr_dtype("to", WF_F32);
    for (int i = 0; i < n && !s; i++) {
        const char *vn = wf_node_name(vars[i].node);
        wf_dtype dt = wf_output_dtype(grads[i]);
        wf_output f, z, zs;
        if ((s = sget(b, &inv, dt, &f))) break;
        if ((s = bin(b, "Mul", grads[i], f, &grads[i], "%s/grad_unscaled", vn))) break;
        if ((s = sget(b, &zero, dt, &z))) break;
        if ((s = bin(b, "Mul", grads[i], z, &zs, "%s/grad_times_zero", vn))) break;
        if ((s = op(b, "ReduceSum", &zs, 1, &k0, 1, &zs, "%s/grad_nonfinite_sum", vn))) break;
        if (dt != WF_F32) s = op(b, "Cast", &zs, 1, &to32, 1, &zs, "%s/grad_nonfinite_sum_f32", vn);
        parts[i] = zs;
    }
    wf_output total = parts[0], zf;
    if (!s && n > 1) s = op(b, "Sum", parts, n, NULL, 0, &total, "grads_nonfinite_sum");
    wf__free(parts);
    if (s) return s;
    T(cnst(b, WF_F32, 0, &zf, "grads_zero"));
    return bin(b, "Equal", total, zf, &b->finite, "grads_finite");
}

/* The scale's rules: a finite step counts (good + 1), and the count reaching the interval doubles the
 * scale and restarts the count; a skipped step halves the scale, not below 1, and restarts the count. */
static wf_status *update_scale(ob *b, const wf__loss_scale *ls)
{
    wf_output one_i, zero_i, interval, two, half, one_f, g1, grow, doubled, halved0, halved, grown, new_scale,
        good_fin, new_good;
    T(cnst(b, WF_I64, 1, &one_i, "loss_scale_one_step"));
    T(cnst(b, WF_I64, 0, &zero_i, "loss_scale_no_steps"));
    T(cnst(b, WF_I64, (double)ls->growth_interval, &interval, "loss_scale_growth_interval"));
    T(cnst(b, WF_F32, 2, &two, "loss_scale_two"));
    T(cnst(b, WF_F32, 0.5, &half, "loss_scale_half"));
    T(cnst(b, WF_F32, 1, &one_f, "loss_scale_min"));
    T(bin(b, "Add", ls->good_steps, one_i, &g1, "loss_scale_good_steps_next"));
    T(bin(b, "GreaterEqual", g1, interval, &grow, "loss_scale_grow"));
    T(bin(b, "Mul", ls->scale, two, &doubled, "loss_scale_doubled"));
    T(bin(b, "Mul", ls->scale, half, &halved0, "loss_scale_halved_unclamped"));
    T(bin(b, "Maximum", halved0, one_f, &halved, "loss_scale_halved"));
    wf_output in[3] = {grow, doubled, ls->scale};
    T(op(b, "Where", in, 3, NULL, 0, &grown, "loss_scale_if_grown"));
    wf_output in2[3] = {b->finite, grown, halved};
    T(op(b, "Where", in2, 3, NULL, 0, &new_scale, "loss_scale_new"));
    wf_output in3[3] = {grow, zero_i, g1};
    T(op(b, "Where", in3, 3, NULL, 0, &good_fin, "loss_scale_good_steps_if_finite"));
    wf_output in4[3] = {b->finite, good_fin, zero_i};
    T(op(b, "Where", in4, 3, NULL, 0, &new_good, "loss_scale_good_steps_new"));
    char nm[NM_MAX];
    snprintf(nm, sizeof nm, "%s/loss_scale_assign", b->name);
    T(wf_assign(b->g, nm, ls->scale, new_scale, &b->assigns[b->n_assigns]));
    b->n_assigns++;
    snprintf(nm, sizeof nm, "%s/loss_scale_good_steps_assign", b->name);
    T(wf_assign(b->g, nm, ls->good_steps, new_good, &b->assigns[b->n_assigns]));
    b->n_assigns++;
    return NULL;
}

static wf_status *minimize(ob *b, const wf_optimizer_options *o, wf_output loss, const wf_output *vars, int n,
                           wf__loss_scale *ls, wf_output *grads)
{
    wf_output target = loss;
    if (ls) T(scale_loss(b, ls, loss, &target));
    T(wf_gradients(b->g, &target, 1, NULL, vars, n, grads));
    for (int i = 0; i < n; i++)
        if (!grads[i].node)
            return wf__status(WF_INVALID_ARGUMENT,
                              "optimizer '%s': variable '%s' has no gradient: the loss '%s' does not depend on it",
                              b->name, wf_node_name(vars[i].node), wf_node_name(loss.node));
    if (ls) {
        T(unscale(b, ls, vars, grads, n));
        T(update_scale(b, ls));
    }
    /* the step counter: s steps done, this one is t = s + 1; a skipped step leaves it */
    wf_output step, one, s_next, s_f;
    T(scalar_var(b, "step", WF_I64, 0, &step));
    T(cnst(b, WF_I64, 1, &one, "step_one"));
    T(bin(b, "Add", step, one, &s_next, "step_next"));
    if (b->finite.node) {
        wf_output in[3] = {b->finite, s_next, step};
        T(op(b, "Where", in, 3, NULL, 0, &s_next, "step_if_finite"));
    }
    {
        char nm[NM_MAX];
        snprintf(nm, sizeof nm, "%s/step_assign", b->name);
        T(wf_assign(b->g, nm, step, s_next, &b->assigns[b->n_assigns]));
        b->n_assigns++;
    }
    wf_attr to = wf_attr_dtype("to", WF_F64);
    T(op(b, "Cast", &step, 1, &to, 1, &s_f, "step_f64"));
    scalars sc = {.wd = sconst("weight_decay", o->weight_decay), .mom = sconst("momentum", o->momentum),
                  .one_m_b1 = sconst("one_minus_beta1", 1 - o->beta1), .one_m_b2 = sconst("one_minus_beta2", 1 - o->beta2),
                  .eps = sconst("epsilon", o->epsilon), .rho = sconst("rho", o->rho),
                  .one_m_rho = sconst("one_minus_rho", 1 - o->rho)};
    T(schedule(b, o, s_f, &sc.lr));
    if (o->kind == WF_OPT_ADAM || o->kind == WF_OPT_ADAMW) {
        /* lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t) */
        wf_output one_f, t, b1, b2, b1p, b2p, c2, c1, r2, num, lr, lrt;
        T(cnst(b, WF_F64, 1, &one_f, "one"));
        T(bin(b, "Add", s_f, one_f, &t, "t"));
        T(cnst(b, WF_F64, o->beta1, &b1, "beta1"));
        T(cnst(b, WF_F64, o->beta2, &b2, "beta2"));
        T(bin(b, "Pow", b1, t, &b1p, "beta1_power"));
        T(bin(b, "Pow", b2, t, &b2p, "beta2_power"));
        T(bin(b, "Sub", one_f, b2p, &c2, "one_minus_beta2_power"));
        T(bin(b, "Sub", one_f, b1p, &c1, "one_minus_beta1_power"));
        T(un(b, "Sqrt", c2, &r2, "sqrt_one_minus_beta2_power"));
        T(sget(b, &sc.lr, WF_F64, &lr));
        T(bin(b, "Mul", lr, r2, &num, "lr_t_numerator"));
        T(bin(b, "Div", num, c1, &lrt, "lr_t"));
        sc.lr_t = snode("lr_t", lrt);
    }
    if (o->clip_global_norm > 0) T(clip(b, o, vars, grads, n));
    for (int i = 0; i < n; i++) T(update(b, o, &sc, vars[i], grads[i]));
    return NULL;
}

wf_status *wf__optimizer_minimize_scaled(wf_graph *g, const char *name, const wf_optimizer_options *o,
                                         wf_output loss, const wf_output *vars, int n_vars, wf__loss_scale *ls,
                                         wf_output **targets, int *n_targets)
{
    if (!g || !name || !*name || !o || !targets || !n_targets || (n_vars > 0 && !vars))
        return wf__status(WF_INVALID_ARGUMENT, "wf_optimizer_minimize: NULL graph, name, options, vars or targets");
    if (n_vars < 1) return wf__status(WF_INVALID_ARGUMENT, "optimizer '%s': no variables to train (n_vars %d)", name, n_vars);
    WF__TRY(check_options(name, o));
    if (ls && (!(ls->initial >= 1) || !isfinite(ls->initial) || ls->initial > 3.0e38))
        return bad(name, "initial loss scale", ls->initial, "finite and >= 1");
    if (ls && ls->growth_interval < 1)
        return bad(name, "loss scale growth interval", (double)ls->growth_interval, ">= 1");
    WF__TRY(check_inputs(g, name, loss, vars, n_vars));
    int n0 = g->n;
    /* at most three Assigns per variable (itself, m, v), the counter, the loss scale and its counter */
    ob b = {.g = g, .name = name};
    b.assigns = wf__malloc(sizeof *b.assigns * (size_t)(3 * n_vars + 3));
    wf_output *grads = wf__calloc((size_t)n_vars, sizeof *grads);
    wf_status *s = NULL;
    if (!b.assigns || !grads) s = wf__oom("an optimizer", sizeof *grads * (size_t)(4 * n_vars + 3));
    if (!s) s = minimize(&b, o, loss, vars, n_vars, ls, grads);
    wf__free(grads);
    if (s) {
        wf__graph_truncate(g, n0); /* the graph is as it was */
        wf__free(b.assigns);
        return s;
    }
    *targets = b.assigns;
    *n_targets = b.n_assigns;
    return NULL;
}

wf_status *wf_optimizer_minimize(wf_graph *g, const char *name, const wf_optimizer_options *o, wf_output loss,
                                 const wf_output *vars, int n_vars, wf_output **targets, int *n_targets)
{
    return wf__optimizer_minimize_scaled(g, name, o, loss, vars, n_vars, NULL, targets, n_targets);
}
