/*
 * One ISA's LSTM steps for k_rnn_lstm.c, which includes this file once per ISA after defining
 *   LS_V       lanes of a vector (hidden units per chunk): 16 for AVX-512, 8 for AVX2
 *   LS_ROWS    batch rows per register tile (4)
 *   LS_GP      gates a pass accumulates (4 with 32 registers, 2 with 16), LS_KEEP(wv) keeping its LS_GP
 *              weight vectors in registers
 *   LS_TARGET  the target attribute's string
 *   LS_NAME(x) x with the ISA's suffix
 *   LS_MIN(a, b), LS_MAX(a, b), LS_RCP(a)  the ISA's min, max (b when either is NaN) and reciprocal estimate
 *   LS_ATTR    more attributes of the two entry points (step, xstep), after a comma, or nothing
 * and undefines them at its end. Nothing else includes it.
 */

typedef float LS_NAME(vf) __attribute__((vector_size(LS_V * sizeof(float))));
typedef int32_t LS_NAME(vi) __attribute__((vector_size(LS_V * sizeof(float))));

/* The cell on whole vectors. Each gate needs one exponential, E = exp(-u) of its clamped argument u
 * (sigmoid(u) = 1 / (1 + E), tanh(u) = (1 - E') / (1 + E') with E' = exp(-2u)), and the cell's five
 * divisions become two reciprocals (LS_NAME(cell)). u is clamped to [-20, 20] first: within it the
 * products of the cell's denominators stay below 1e27, and past it sigmoid is within 2.1e-9 of 0 or 1 and
 * tanh within 4.3e-9 of -1 or 1. exp(-u) = 2^n e^r, r = -u - n ln2 with one float ln2 (|n| <= 29, so r is off
 * by at most 6e-8) and a degree-5 polynomial for e^r on [-ln2/2, ln2/2] (minimax for the relative error,
 * fitted for weft: 7.5e-8, 2.1e-7 in float). Against f64, on 1.6 million random cells (preactivations within
 * +-30): h within 2.9e-7 absolute, c within 3.7e-7 (relative past 1), where the five-division form this
 * replaced was within 4.8e-7 and 5.1e-7, in 4% less time for bench_lstm's classifier (768 -> 736 us, 2
 * threads, Zen 3). NaN stays NaN: LS_MIN/LS_MAX return their second operand, u, when either is NaN. */
__attribute__((always_inline, target(LS_TARGET))) static inline LS_NAME(vf) LS_NAME(clamp)(LS_NAME(vf) u)
{
    typedef LS_NAME(vf) vf;
    return LS_MAX((vf){0} - 20.0f, LS_MIN((vf){0} + 20.0f, u));
}

/* exp(-u) for u within [-20, 20] or NaN */
__attribute__((always_inline, target(LS_TARGET))) static inline LS_NAME(vf) LS_NAME(vexpn)(LS_NAME(vf) u)
{
    typedef LS_NAME(vf) vf;
    typedef LS_NAME(vi) vi;
    const vf magic = (vf){0} + 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    vf t = u * -LOG2E_F + magic, nf = t - magic;
    vf r = nf * 0.693147182f + u; /* the reduced argument is -r */
    vi n = (vi)t - (vi)magic;
    vf p = (vf){0} - 0.00829761949f;
    p = p * r + 0.0419156299f;
    p = p * r - 0.166675765f;
    p = p * r + 0.499988927f;
    p = p * r - 0.999999691f;
    p = p * r + 1.00000007f;
    return p * (vf)((n + 127) << 23);
}

/* 1 / d: the estimate and one Newton step (relative error about 2^-23) */
__attribute__((always_inline, target(LS_TARGET))) static inline LS_NAME(vf) LS_NAME(recip)(LS_NAME(vf) d)
{
    LS_NAME(vf) e = LS_RCP(d);
    return e * (2.0f - d * e);
}

/* ONNX's gates i, o, f, c (pre-activations a[0..3]) with the peepholes (zero when absent): c' = f c + i g,
 * h = o tanh(c'). With A = 1 + E_i, F = 1 + E_f, B = 1 + E_g (E_g = exp(-2 a_g)):
 * c' = c / F + (1 - E_g) / (A B) = (c A B + (1 - E_g) F) / (F A B), and h = (1 - E_c) / ((1 + E_o)(1 + E_c)). */
__attribute__((always_inline, target(LS_TARGET))) static inline void
LS_NAME(cell)(const LS_NAME(vf) a[4], LS_NAME(vf) pi, LS_NAME(vf) po, LS_NAME(vf) pf, LS_NAME(vf) *cr, LS_NAME(vf) *hr)
{
    typedef LS_NAME(vf) vf;
    vf cp = *cr;
    vf A = 1.0f + LS_NAME(vexpn)(LS_NAME(clamp)(a[0] + pi * cp));
    vf F = 1.0f + LS_NAME(vexpn)(LS_NAME(clamp)(a[2] + pf * cp));
    vf Eg = LS_NAME(vexpn)(LS_NAME(clamp)(2.0f * a[3])), AB = A * (1.0f + Eg);
    vf cn = (cp * AB + (1.0f - Eg) * F) * LS_NAME(recip)(F * AB);
    vf Eo = LS_NAME(vexpn)(LS_NAME(clamp)(a[1] + po * cn)), Ec = LS_NAME(vexpn)(LS_NAME(clamp)(2.0f * cn));
    *cr = cn;
    *hr = (1.0f - Ec) * LS_NAME(recip)((1.0f + Eo) * (1.0f + Ec));
}

/* Gates [G0, G0 + LS_GP) of NR rows of chunk c: init[r] + v_r P, where P is the chunk's panel of K rows
 * ([K][4][V]), v_r the K values at src[r], and init[r] (chunk c's [4][V] in it) the bias for the input
 * projection or row r's projection for a step. NR and G0 are constants at every call, so the pass's
 * accumulators stay in registers: AVX-512 takes the four gates of 4 rows in one pass (16 of 32 zmm); AVX2
 * two gates of 4 rows in each of two passes (8 of 16 ymm), which reads a chunk's weights once per 4 rows
 * instead of once per 2 (4 gates of 2 rows): a step's weights come from L2 at half the rate, which was the
 * bound. */
__attribute__((always_inline, target(LS_TARGET))) static inline void
LS_NAME(pass)(const int NR, const int G0, const float *const *init, int64_t c, const float *panel, int64_t K,
              const float *const *src, LS_NAME(vf) acc[][4])
{
    typedef LS_NAME(vf) vf;
    vf a[LS_ROWS][LS_GP];
    /* unrolled, so that a[][] lives in registers */
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
        const vf *b = (const vf *)(init[r] + c * 4 * LS_V) + G0;
#pragma GCC unroll 4
        for (int g = 0; g < LS_GP; g++) a[r][g] = b[g];
    }
    const vf *w = (const vf *)(panel + c * K * 4 * LS_V) + G0;
    for (int64_t k = 0; k < K; k++, w += 4) {
        vf wv[LS_GP];
#pragma GCC unroll 4
        for (int g = 0; g < LS_GP; g++) wv[g] = w[g];
        LS_KEEP(wv);
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            float v = src[r][k];
#pragma GCC unroll 4
            for (int g = 0; g < LS_GP; g++) a[r][g] += v * wv[g];
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int g = 0; g < LS_GP; g++) acc[r][G0 + g] = a[r][g];
}

/* NR rows (a constant at every call) of chunk c: bias + x W^T from the x rows xr[r] into the rows xo[r]
 * of the projections ([nc][4][V] each) */
__attribute__((always_inline, target(LS_TARGET))) static inline void
LS_NAME(xtile)(const int NR, const ls_dir *D, int64_t c, const float *const *xr, float *const *xo)
{
    typedef LS_NAME(vf) vf;
    vf acc[LS_ROWS][4];
    const float *bias[LS_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) bias[r] = D->bias;
    LS_NAME(pass)(NR, 0, bias, c, D->wp, D->in, xr, acc);
#if LS_GP == 2
    LS_NAME(pass)(NR, 2, bias, c, D->wp, D->in, xr, acc);
#endif
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) ((vf *)(xo[r] + c * 4 * LS_V))[g] = acc[r][g];
}

/* Batch rows n0 .. n0 + NR - 1 of chunk c for one step (NR a constant at every call): the four gates'
 * pre-activations (row r's projection xr[r] + h_{t-1} R^T), then the cell. hp: h_{t-1} rows of Hp floats;
 * cs, hn: c (updated in place) and h_t rows. */
__attribute__((always_inline, target(LS_TARGET))) static inline void
LS_NAME(tile)(const int NR, const ls_dir *D, int64_t c, const float *const *xr, const float *hp, float *cs, float *hn,
              int64_t n0, int64_t Hp)
{
    typedef LS_NAME(vf) vf;
    vf acc[LS_ROWS][4];
    const float *hr[LS_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) hr[r] = hp + (n0 + r) * Hp;
    LS_NAME(pass)(NR, 0, xr, c, D->rp, D->hs, hr, acc);
#if LS_GP == 2
    LS_NAME(pass)(NR, 2, xr, c, D->rp, D->hs, hr, acc);
#endif
    const vf *pp = (const vf *)(D->peep + c * 3 * LS_V), pi = pp[0], po = pp[1], pf = pp[2];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
        LS_NAME(cell)(acc[r], pi, po, pf, (vf *)(cs + (n0 + r) * Hp + c * LS_V), (vf *)(hn + (n0 + r) * Hp + c * LS_V));
}

/* Chunks [c0, c1) of one step for batch rows [b0, b1). */
__attribute__((target(LS_TARGET) LS_ATTR)) static void LS_NAME(step)(const ls_dir *D, int64_t c0, int64_t c1, int64_t b0,
                                                              int64_t b1, const float *const *xr, const float *hp,
                                                              float *cs, float *hn, int64_t Hp)
{
    for (int64_t c = c0; c < c1; c++)
        for (int64_t n0 = b0; n0 < b1; n0 += LS_ROWS) {
            const float *const *x = xr + n0;
            switch (b1 - n0 >= LS_ROWS ? LS_ROWS : b1 - n0) {
            case 1: LS_NAME(tile)(1, D, c, x, hp, cs, hn, n0, Hp); break;
#if LS_ROWS > 2
            case 2: LS_NAME(tile)(2, D, c, x, hp, cs, hn, n0, Hp); break;
            case 3: LS_NAME(tile)(3, D, c, x, hp, cs, hn, n0, Hp); break;
#endif
            default: LS_NAME(tile)(LS_ROWS, D, c, x, hp, cs, hn, n0, Hp); break;
            }
        }
}

/* The projections of nq rows (x rows xr, projection rows xo) for chunks [c0, c1), chunk by chunk so that a
 * chunk's W panel stays in L1 across the rows. */
__attribute__((target(LS_TARGET) LS_ATTR)) static void LS_NAME(xstep)(const ls_dir *D, int64_t c0, int64_t c1, int64_t nq,
                                                               const float *const *xr, float *const *xo)
{
    for (int64_t c = c0; c < c1; c++)
        for (int64_t q = 0; q < nq; q += LS_ROWS) {
            switch (nq - q >= LS_ROWS ? LS_ROWS : nq - q) {
            case 1: LS_NAME(xtile)(1, D, c, xr + q, xo + q); break;
#if LS_ROWS > 2
            case 2: LS_NAME(xtile)(2, D, c, xr + q, xo + q); break;
            case 3: LS_NAME(xtile)(3, D, c, xr + q, xo + q); break;
#endif
            default: LS_NAME(xtile)(LS_ROWS, D, c, xr + q, xo + q); break;
            }
        }
}

#undef LS_V
#undef LS_ROWS
#undef LS_GP
#undef LS_KEEP
#undef LS_TARGET
#undef LS_NAME
#undef LS_MIN
#undef LS_MAX
#undef LS_RCP
#undef LS_ATTR
