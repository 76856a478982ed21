/*
 * The boundary between the CUDA host file of the sequence and quantisation ops (cuda_seq.c: RNN, GRU,
 * LSTM, Attention, RotaryEmbedding, Quantize / Dequantize / DynamicQuantizeLinear, MatMulInteger,
 * QLinearMatMul, ConvInteger, QLinearConv) and their device code (cuda_kernels_seq.cu). Plain C launchers
 * that enqueue kernels and return the launch error (cudaSuccess = 0); pointers are device addresses of
 * element 0 and dtypes are wf_dtype values (0 where an operand is absent).
 */
#ifndef WF_CUDA_SEQ_H
#define WF_CUDA_SEQ_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RNN, GRU, LSTM: the host runs the time loop, one launch per step over (direction, batch, unit) ---- */

typedef struct cuk_rnn {
    int64_t seq, batch, in, hs, nd, step;
    int kind;             /* gates: 1 RNN, 3 GRU, 4 LSTM */
    int layout, lbr, input_forget, reverse;
    int phase;            /* GRU without linear_before_reset: 1 forms r * h, 2 the rest; others 2 */
    int lens_dt;          /* sequence_lens dtype (i32 / i64), 0 when absent */
    double clip;          /* <= 0: none */
    int ak[6];            /* WF__KU_ACT_* per function, direction-major */
    double aa[6], ab[6];
} cuk_rnn;

/* State (nd x batch x hs doubles, h and c) from initial_h / initial_c (NULL: zeros). */
int cuk_rnn_init(cudaStream_t s, int dtype, const cuk_rnn *m, const void *h0, const void *c0, double *h, double *c);
/* Step m->step: reads hp, writes hn (and c, rh in place), and Y's row of each (direction, batch) still
 * inside its sequence. b and p may be NULL, lens too (all sequences full). */
int cuk_rnn_step(cudaStream_t s, int dtype, const cuk_rnn *m, const void *x, const void *w, const void *r,
                 const void *b, const void *p, const void *lens, const double *hp, double *hn, double *c, double *rh,
                 void *y);
/* Y_h (yh may be NULL) and Y_c (may be NULL) from the final state. */
int cuk_rnn_fin(cudaStream_t s, int dtype, const cuk_rnn *m, const double *h, const double *c, void *yh, void *yc);

/* ---- Attention ---- */

typedef struct cuk_attn {
    int64_t B, Hq, Hkv, Sq, T, P, Dk, Dv;
    int64_t qbs, qhs, qss;  /* Q's strides of batch, head, sequence */
    int64_t ms[4], mlen;    /* mask strides over (B, Hq, Sq, key) and its key length */
    int64_t left, right;    /* sliding window, -1: none */
    int causal, mode, sp, mask_dt, np_dt, q4;
    int replace;            /* mask_replaces: a forbidden key's score is -inf, not plus -inf */
    double rs, softcap;     /* sqrt(scale) rounded to the dtype */
} cuk_attn;

/* present (B, H, P + S, D) = past ++ cur (cur element (b, h, s, d) at b * bs + h * hs + s * ss + d), for
 * elements of esize bytes; past may be NULL when P is 0. */
int cuk_attn_cache(cudaStream_t s, int esize, const void *past, const void *cur, void *out, int64_t B, int64_t H,
                   int64_t P, int64_t T, int64_t D, int64_t bs, int64_t hs, int64_t ss);
/* Query rows [row0, row0 + nq), one per thread: scores into qk, softmax in xs (nq x T doubles), Y in Q's
 * layout. mask and nonpad may be NULL. */
int cuk_attention(cudaStream_t s, int dtype, const cuk_attn *a, const void *q, const void *pk, const void *pv,
                  const void *mask, const void *nonpad, double *xs, void *qk, void *y, int64_t row0, int64_t nq);

/* ---- RotaryEmbedding ---- */

typedef struct cuk_rope {
    int64_t B, H, S, D, bs, hs, ss, rd;
    int inter, pos_dt;     /* pos_dt 0: rows are b * S + s */
    int64_t rows;          /* the caches' rows: a row (a position id) is clamped into [0, rows) */
} cuk_rope;

int cuk_rotary(cudaStream_t s, int dtype, const cuk_rope *g, const void *x, const void *cc, const void *sn,
               const void *pos, void *y);

/* ---- quantisation ---- */

/* Where element i finds its scale / zero point: kind 0 per tensor, 1 per axis, 2 blocked. */
typedef struct cuk_qmap {
    int kind;
    int64_t alen, inner, block, nb;
} cuk_qmap;

/* y (u8 / i8 / i16) = clamp(rint(x / scale) + zp) with the division rounded to dtype pr; zp may be NULL. */
int cuk_quantize(cudaStream_t s, int xdt, const void *x, int sdt, const void *sc, const cuk_qmap *ms, int zdt,
                 const void *zp, const cuk_qmap *mz, int odt, void *y, int64_t n, int pr, int64_t lo, int64_t hi);
/* y (a float dtype) = (x - zp) * scale, rounded to f32 first; zp may be NULL. */
int cuk_dequantize(cudaStream_t s, int xdt, const void *x, int sdt, const void *sc, const cuk_qmap *ms, int zdt,
                   const void *zp, const cuk_qmap *mz, int odt, void *y, int64_t n);
/* DynamicQuantizeLinear of n f32 values: the range, then y; ys / yz get the scale and zero point. */
int cuk_dyn_quantize(cudaStream_t s, const float *x, int64_t n, uint8_t *y, float *ys, uint8_t *yz);

/* Integer matmul with numpy batch broadcasting: acc = sum (a - az[m]) * (b - bz[n]); MatMulInteger stores
 * acc as i32, QLinearMatMul clamp(rint(acc * mult + z)) in odt. */
typedef struct cuk_imm {
    int64_t M, K, N;
    int nb;  /* batch rank */
    int64_t bat[8], abat[8], bbat[8];
    int adt, bdt, azdt, bzdt;
    int64_t naz, nbz; /* zero point counts: 1 or M / N (0: absent) */
    int qlinear, odt;
    double mult, z;
    int64_t lo, hi;
} cuk_imm;

int cuk_matmul_int(cudaStream_t s, const cuk_imm *g, const void *a, const void *b, const void *az, const void *bz,
                   void *y, int64_t n);

/* Integer N-d convolution, one output per thread (ConvInteger: i32; QLinearConv: scaled per output channel
 * by round(round(xs * ws[m]) / ys) in the scales' dtype st, plus bias, then rounded and clamped). */
typedef struct cuk_iconv {
    int ns;
    int64_t N, C, M, G, in[6], out[6], k[6], s[6], d[6], pb[6];
    int xdt, wdt, wzdt, bdt, wsdt, st;
    int64_t zx, nwz, nws;
    int qlinear, odt;
    double xs, ys, z;
    int64_t lo, hi;
} cuk_iconv;

int cuk_conv_int(cudaStream_t s, const cuk_iconv *g, const void *x, const void *w, const void *wz, const void *bias,
                 const void *ws, void *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
