/*
 * Device code of the CUDA sequence and quantisation ops (cuda_seq.c). Ports of the OpenCL kernels
 * (src/backends/opencl/ocl_rnn_attn.c, ocl_quant_signal.c) with the CPU kernels' arithmetic: recurrences and
 * attention in double with each step rounded where the CPU rounds, integer products in 64 bits, and
 * products that the CPU rounds separately written with _rn intrinsics so nvcc never fuses them.
 */
#include "cuda_dev.cuh"
#include "cuda_seq.h"

namespace {

/* ---- dtype helpers (wf_dtype numbering: 1 f32 2 f64 3 f16 4 bf16 5 i8 6 u8 7 i16 8 i32 9 i64 10 bool) ---- */

__device__ __forceinline__ float bf_to_f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

/* element i of any dtype as a double */
__device__ __forceinline__ double ld_f(const void *p, int64_t i, int dt)
{
    switch (dt) {
    case 1: return (double)((const float *)p)[i];
    case 2: return ((const double *)p)[i];
    case 3: return (double)__half2float(((const __half *)p)[i]);
    case 4: return (double)bf_to_f(((const uint16_t *)p)[i]);
    case 5: return (double)((const int8_t *)p)[i];
    case 6: case 10: return (double)((const uint8_t *)p)[i];
    case 7: return (double)((const int16_t *)p)[i];
    case 8: return (double)((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

/* element i of an integer dtype (floats truncated, NaN 0) */
__device__ __forceinline__ int64_t ld_i(const void *p, int64_t i, int dt)
{
    switch (dt) {
    case 5: return ((const int8_t *)p)[i];
    case 6: case 10: return ((const uint8_t *)p)[i];
    case 7: return ((const int16_t *)p)[i];
    case 8: return ((const int32_t *)p)[i];
    case 9: return ((const int64_t *)p)[i];
    default: {
        double v = ld_f(p, i, dt);
        return v != v ? 0 : (int64_t)v;
    }
    }
}

/* v to a float dtype through f32 (as the CPU's conversion from f64) */
__device__ __forceinline__ void st_f(void *p, int64_t i, int dt, double v)
{
    switch (dt) {
    case 1: ((float *)p)[i] = __double2float_rn(v); break;
    case 2: ((double *)p)[i] = v; break;
    case 3: ((__half *)p)[i] = __float2half_rn(__double2float_rn(v)); break;
    default: ((uint16_t *)p)[i] = bf_round(__double2float_rn(v)); break;
    }
}

/* an in-range integer to u8 / i8 / i16 / i32 */
__device__ __forceinline__ void st_q(void *p, int64_t i, int dt, int64_t q)
{
    switch (dt) {
    case 6: ((uint8_t *)p)[i] = (uint8_t)q; break;
    case 5: ((int8_t *)p)[i] = (int8_t)q; break;
    case 7: ((int16_t *)p)[i] = (int16_t)q; break;
    default: ((int32_t *)p)[i] = (int32_t)q; break;
    }
}

/* v rounded to float dtype dt (the CPU's wf__ko_round); f64 and non-float dtypes keep it */
__device__ __forceinline__ double rnd(double v, int dt)
{
    switch (dt) {
    case 1: return (double)__double2float_rn(v);
    case 3: return (double)__half2float(__float2half_rn(__double2float_rn(v)));
    case 4: return (double)bf_to_f(bf_round(__double2float_rn(v)));
    default: return v;
    }
}

/* ---- RNN, GRU, LSTM ---- */

/* the activations of src/ops/kutil_rnn.h, as the CPU computes them */
__device__ double act(int kind, double al, double be, double x)
{
    switch (kind) {
    case 0: return x < 0 ? 0 : x; /* NaN stays NaN */
    case 1: return tanh(x);
    case 2: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case 3: return al * x + be;
    case 4: return x >= 0 ? x : al * x;
    case 5: return x > al ? x : 0;
    case 6: return al * tanh(be * x);
    case 7: { double v = al * x + be; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case 8: return x >= 0 ? x : al * (exp(x) - 1);
    case 9: return x / (1 + fabs(x));
    default: return x > 30 ? x : log1p(exp(x));
    }
}

__device__ __forceinline__ double fa(const cuk_rnn &m, int a, double v)
{
    if (m.clip > 0) v = v < -m.clip ? -m.clip : v > m.clip ? m.clip : v;
    return act(m.ak[a], m.aa[a], m.ab[a], v);
}

__device__ __forceinline__ int64_t h_at(const cuk_rnn &m, int64_t d, int64_t b)
{
    return (m.layout ? b * m.nd + d : d * m.batch + b) * m.hs;
}

template <typename T>
__global__ void k_rnn_init(cuk_rnn m, const T *h0, const T *c0, double *h, double *c, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t j = g % m.hs, b = (g / m.hs) % m.batch, d = g / (m.hs * m.batch);
        h[g] = h0 ? ld_d(h0, h_at(m, d, b) + j) : 0.0;
        c[g] = c0 ? ld_d(c0, h_at(m, d, b) + j) : 0.0;
    }
}

template <typename T>
__global__ void k_rnn_step(cuk_rnn m, const T *x, const T *w, const T *r, const T *bb, const T *p, const void *lens,
                           const double *hp, double *hn, double *cs, double *rh, T *y, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t H = m.hs, G = m.kind, I = m.in;
        int64_t j = g % H, b = (g / H) % m.batch, d = g / (H * m.batch), si = (d * m.batch + b) * H;
        int64_t len = lens ? ld_i(lens, b, m.lens_dt) : m.seq;
        len = len < 0 ? 0 : len > m.seq ? m.seq : len; /* a bad length is reported by the caller's check */
        if (m.step >= len) { /* this sequence has ended: its state stays */
            if (m.phase != 1) hn[si + j] = hp[si + j];
            continue;
        }
        bool rev = m.nd == 2 ? d == 1 : m.reverse;
        int64_t t = rev ? len - 1 - m.step : m.step;
        const T *xt = x + (m.layout ? b * m.seq + t : t * m.batch + b) * I;
        const T *W = w + d * G * H * I, *R = r + d * G * H * H;
        const T *Wb = bb ? bb + d * 2 * G * H : nullptr, *Rb = bb ? Wb + G * H : nullptr;
        const double *h = hp + si;
        int A = (int)d * (G == 1 ? 1 : G == 3 ? 2 : 3);
        double xw[4] = {0, 0, 0, 0}, hr[4] = {0, 0, 0, 0};
        for (int64_t q = 0; q < G; q++) {
            if (m.phase == 1 && q != 1) continue; /* phase 1 needs only the reset gate */
            double a = Wb ? ld_d(Wb, q * H + j) : 0.0, e = Rb ? ld_d(Rb, q * H + j) : 0.0;
            const T *wr = W + (q * H + j) * I, *rr = R + (q * H + j) * H;
            for (int64_t i = 0; i < I; i++) a += ld_d(xt, i) * ld_d(wr, i);
            /* GRU's hidden gate without linear_before_reset multiplies h by r first (phase 1) */
            if (!(G == 3 && !m.lbr && q == 2))
                for (int64_t i = 0; i < H; i++) e += h[i] * ld_d(rr, i);
            xw[q] = a;
            hr[q] = e;
        }
        double nh;
        if (G == 1) {
            nh = fa(m, A, xw[0] + hr[0]);
        } else if (G == 3) {
            double rg = fa(m, A, xw[1] + hr[1]);
            if (m.phase == 1) {
                rh[si + j] = rg * h[j];
                continue;
            }
            double z = fa(m, A, xw[0] + hr[0]), eh;
            if (!m.lbr) {
                const T *rr = R + (2 * H + j) * H;
                eh = Rb ? ld_d(Rb, 2 * H + j) : 0.0;
                for (int64_t i = 0; i < H; i++) eh += rh[si + i] * ld_d(rr, i);
            } else {
                eh = hr[2] * rg;
            }
            double hh = fa(m, A + 1, xw[2] + eh);
            nh = (1 - z) * hh + z * h[j];
        } else {
            /* gates i, o, f, c; peepholes p_i, p_o, p_f */
            const T *P = p ? p + d * 3 * H : nullptr;
            double c = cs[si + j];
            double gi = fa(m, A, xw[0] + hr[0] + (P ? ld_d(P, j) * c : 0.0));
            double gf = m.input_forget ? 1 - gi : fa(m, A, xw[2] + hr[2] + (P ? ld_d(P, 2 * H + j) * c : 0.0));
            double gc = fa(m, A + 1, xw[3] + hr[3]);
            c = gf * c + gi * gc;
            double go = fa(m, A, xw[1] + hr[1] + (P ? ld_d(P, H + j) * c : 0.0));
            nh = go * fa(m, A + 2, c);
            cs[si + j] = c;
        }
        hn[si + j] = nh;
        int64_t yo = (m.layout ? (b * m.seq + t) * m.nd + d : (t * m.nd + d) * m.batch + b) * H;
        st_d(y, yo + j, nh);
    }
}

template <typename T>
__global__ void k_rnn_fin(cuk_rnn m, const double *h, const double *c, T *yh, T *yc, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t j = g % m.hs, b = (g / m.hs) % m.batch, d = g / (m.hs * m.batch);
        if (yh) st_d(yh, h_at(m, d, b) + j, h[g]);
        if (yc) st_d(yc, h_at(m, d, b) + j, c[g]);
    }
}

/* ---- Attention ---- */

template <typename E>
__global__ void k_attn_cache(const E *past, const E *cur, E *out, int64_t n, int64_t H, int64_t P, int64_t T,
                             int64_t D, int64_t bs, int64_t hs, int64_t ss)
{
    GRID_LOOP(g, n) {
        int64_t d = g % D, s = (g / D) % T, h = (g / (D * T)) % H, b = g / (D * T * H);
        out[g] = s < P ? past[((b * H + h) * P + s) * D + d] : cur[b * bs + h * hs + (s - P) * ss + d];
    }
}

/* The additive bias of query i and key kj of batch b, head h (the CPU's attn_bias). */
__device__ double attn_bias(const cuk_attn &a, const void *mask, const void *np, int64_t b, int64_t h, int64_t i,
                            int64_t kj)
{
    double v = 0.0;
    if (mask) {
        if (kj >= a.mlen) return -INFINITY;
        int64_t off = b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + kj * a.ms[3];
        if (a.mask_dt == 10) {
            if (!((const uint8_t *)mask)[off]) return -INFINITY;
        } else {
            v = ld_f(mask, off, a.mask_dt);
        }
    }
    int64_t nonpad = np ? ld_i(np, b, a.np_dt) : -1;
    int64_t offset = a.P > 0 ? a.P : (np ? nonpad - a.Sq : 0);
    int64_t diff = i + offset - kj;
    if (a.causal && diff < 0) return -INFINITY;
    if (a.left >= 0 && diff > a.left) return -INFINITY;
    if (a.right >= 0 && -diff > a.right) return -INFINITY;
    if (np && kj >= nonpad) return -INFINITY;
    return v;
}

template <typename T>
__global__ void k_attention(cuk_attn a, int dt, const T *q, const T *pk, const T *pv, const void *mask, const void *np,
                            double *xs, T *qk, T *y, int64_t row0, int64_t nq)
{
    int sp = a.sp;
    GRID_LOOP(local, nq) {
        int64_t row = row0 + local;
        int64_t i = row % a.Sq, h = (row / a.Sq) % a.Hq, b = row / (a.Sq * a.Hq), hk = h / (a.Hq / a.Hkv);
        const T *qr = q + b * a.qbs + h * a.qhs + i * a.qss;
        const T *kb = pk + (b * a.Hkv + hk) * a.T * a.Dk, *vb = pv + (b * a.Hkv + hk) * a.T * a.Dv;
        double *x = xs + local * a.T;
        T *qkr = qk + row * a.T;
        double mx = -INFINITY, sum = 0.0;
        bool open = false; /* some key's bias is not -inf */
        for (int64_t kj = 0; kj < a.T; kj++) {
            double acc = 0.0;
            for (int64_t d = 0; d < a.Dk; d++)
                acc += rnd(__dmul_rn(ld_d(qr, d), a.rs), dt) * rnd(__dmul_rn(ld_d(kb, kj * a.Dk + d), a.rs), dt);
            double s = rnd(acc, dt);
            /* softcap comes before the bias, so masked scores stay -inf */
            if (a.softcap > 0) s = rnd(rnd(tanh(rnd(s / a.softcap, dt)), dt) * a.softcap, dt);
            double bias = attn_bias(a, mask, np, b, h, i, kj);
            open |= bias != -INFINITY;
            double v = a.replace && bias == -INFINITY ? -INFINITY : rnd(s + bias, dt);
            st_d(qkr, kj, a.mode == 2 ? v : s);
            double xv = rnd(v, sp);
            x[kj] = xv;
            if (xv != xv || xv > mx) mx = xv; /* NaN propagates, as numpy's max does */
        }
        /* a row no key may attend is zero, in Y and in mode 3's output; scores all -inf by themselves
         * give NaN, as Softmax does */
        bool dead = !open;
        if (dead) {
            if (a.mode == 3)
                for (int64_t kj = 0; kj < a.T; kj++) st_d(qkr, kj, 0.0);
        } else {
            /* numpy sums bf16 one rounded addition at a time, other floats in a wider type */
            for (int64_t kj = 0; kj < a.T; kj++) {
                x[kj] = rnd(exp(rnd(x[kj] - mx, sp)), sp);
                sum = sp == 4 ? rnd(sum + x[kj], sp) : sum + x[kj];
            }
            sum = rnd(sum, sp);
            if (sum == 0.0) sum = 1.0;
            for (int64_t kj = 0; kj < a.T; kj++) {
                double pr = rnd(x[kj] / sum, sp);
                if (a.mode == 3) st_d(qkr, kj, pr);
                x[kj] = rnd(pr, dt);
            }
        }
        for (int64_t d = 0; d < a.Dv; d++) {
            double acc = 0.0;
            if (!dead)
                for (int64_t kj = 0; kj < a.T; kj++) acc += x[kj] * ld_d(vb, kj * a.Dv + d);
            int64_t o = a.q4 ? row * a.Dv + d : (b * a.Sq + i) * a.Hq * a.Dv + h * a.Dv + d;
            st_d(y, o, acc);
        }
    }
}

/* ---- RotaryEmbedding ---- */

template <typename T>
__global__ void k_rotary(cuk_rope g, int dt, const T *x, const T *cc, const T *sn, const void *pos, T *y, int64_t n)
{
    GRID_LOOP(e, n) {
        int64_t d = e % g.D, t = e / g.D, s = t % g.S;
        t /= g.S;
        int64_t h = t % g.H, b = t / g.H, base = b * g.bs + h * g.hs + s * g.ss;
        if (d >= g.rd) {
            y[base + d] = x[base + d];
            continue;
        }
        int64_t half = g.rd / 2, i = g.inter ? d / 2 : d % half;
        bool first = g.inter ? d % 2 == 0 : d < half;
        int64_t i1 = g.inter ? 2 * i : i, i2 = g.inter ? 2 * i + 1 : i + half;
        int64_t row = g.pos_dt ? ld_i(pos, b * g.S + s, g.pos_dt) : b * g.S + s;
        row = row < 0 ? 0 : row >= g.rows ? g.rows - 1 : row; /* a bad id is reported by the caller's check */
        double c = ld_d(cc, row * half + i), sv = ld_d(sn, row * half + i);
        double x1 = ld_d(x, base + i1), x2 = ld_d(x, base + i2), v;
        if (first) v = rnd(__dsub_rn(rnd(__dmul_rn(c, x1), dt), rnd(__dmul_rn(sv, x2), dt)), dt);
        else v = rnd(__dadd_rn(rnd(__dmul_rn(sv, x1), dt), rnd(__dmul_rn(c, x2), dt)), dt);
        st_d(y, base + d, v);
    }
}

/* ---- quantisation ---- */

__device__ __forceinline__ int64_t qidx(const cuk_qmap &m, int64_t i)
{
    if (m.kind == 0) return 0;
    int64_t a = (i / m.inner) % m.alen;
    if (m.kind == 1) return a;
    return ((i / (m.inner * m.alen)) * m.nb + a / m.block) * m.inner + i % m.inner;
}

__global__ void k_quantize(int xdt, const void *x, int sdt, const void *sc, cuk_qmap ms, int zdt, const void *zp,
                           cuk_qmap mz, int odt, void *y, int64_t n, int pr, int64_t lo, int64_t hi)
{
    GRID_LOOP(i, n) {
        double v = rnd(__ddiv_rn(rnd(ld_f(x, i, xdt), pr), rnd(ld_f(sc, qidx(ms, i), sdt), pr)), pr);
        double r = rint(v);
        int64_t q = r != r ? 0 : r > 4e18 ? INT64_MAX / 2 : r < -4e18 ? INT64_MIN / 2 : (int64_t)r;
        if (zp) q += ld_i(zp, qidx(mz, i), zdt);
        q = q < lo ? lo : q > hi ? hi : q;
        st_q(y, i, odt, q);
    }
}

__global__ void k_dequantize(int xdt, const void *x, int sdt, const void *sc, cuk_qmap ms, int zdt, const void *zp,
                             cuk_qmap mz, int odt, void *y, int64_t n)
{
    GRID_LOOP(i, n) {
        /* the reference widens x to f32 before subtracting */
        double v = (double)(float)ld_i(x, i, xdt);
        if (zp) v = __dsub_rn(v, (double)ld_i(zp, qidx(mz, i), zdt));
        v = __dmul_rn(v, ld_f(sc, qidx(ms, i), sdt));
        st_f(y, i, odt, rnd(v, 1));
    }
}

/* one block: the range [min(0, x), max(0, x)] with NaN winning, then scale and zero point in f32 */
__global__ void k_dq_range(const float *x, int64_t n, float *ys, uint8_t *yz)
{
    float mx = 0.0f, mn = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        mx = max_nan(mx, x[i]);
        mn = min_nan(mn, x[i]);
    }
    mx = block_reduce(mx, [](float u, float v) { return max_nan(u, v); });
    mn = block_reduce(mn, [](float u, float v) { return min_nan(u, v); });
    if (threadIdx.x == 0) {
        float scale = __fdiv_rn(mx == mn ? 1.0f : __fsub_rn(mx, mn), 255.0f);
        float izp = __fsub_rn(0.0f, __fdiv_rn(mn, scale));
        float zp = rintf(izp < 0.0f ? 0.0f : izp > 255.0f ? 255.0f : izp);
        *ys = scale;
        *yz = (uint8_t)zp;
    }
}

__global__ void k_dq_apply(const float *x, int64_t n, const float *ys, const uint8_t *yz, uint8_t *y)
{
    float scale = *ys, zp = (float)*yz;
    GRID_LOOP(i, n) {
        float v = __fadd_rn(rintf(__fdiv_rn(x[i], scale)), zp);
        y[i] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
}

/* clamp(rint(acc * mult + z)) or clamp-then-rint (conv), as the CPU orders them */
__device__ __forceinline__ void st_scaled(void *y, int64_t i, int odt, double v, int64_t lo, int64_t hi)
{
    v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
    st_q(y, i, odt, (int64_t)v);
}

template <typename A, typename B>
__global__ void k_matmul_int(cuk_imm g, const A *a, const B *b, const void *az, const void *bz, void *y, int64_t n)
{
    GRID_LOOP(o, n) {
        int64_t nn = o % g.N, t = o / g.N, m = t % g.M, bi = t / g.M;
        /* batch offsets as ops/kutil_matmul.h's wf__ku_mm_batch_offsets */
        int64_t sa = g.M * g.K, sb = g.K * g.N, oa = 0, ob = 0;
        for (int i = g.nb - 1; i >= 0; i--) {
            int64_t idx = bi % g.bat[i];
            bi /= g.bat[i];
            if (g.abat[i] != 1) oa += idx * sa;
            if (g.bbat[i] != 1) ob += idx * sb;
            sa *= g.abat[i];
            sb *= g.bbat[i];
        }
        int64_t za = g.naz ? ld_i(az, g.naz == 1 ? 0 : m, g.azdt) : 0, zb = g.nbz ? ld_i(bz, g.nbz == 1 ? 0 : nn, g.bzdt) : 0;
        const A *ar = a + oa + m * g.K;
        const B *bc = b + ob + nn;
        int64_t acc = 0;
        for (int64_t q = 0; q < g.K; q++) acc += ((int64_t)ar[q] - za) * ((int64_t)bc[q * g.N] - zb);
        if (!g.qlinear) ((int32_t *)y)[o] = (int32_t)acc;
        else st_scaled(y, o, g.odt, rint(__dadd_rn(__dmul_rn((double)acc, g.mult), g.z)), g.lo, g.hi);
    }
}

template <typename X, typename W>
__global__ void k_conv_int(cuk_iconv g, const X *x, const W *w, const void *wz, const void *bias, const void *ws, void *y,
                           int64_t n)
{
    int64_t op = 1, kp = 1, ip = 1;
    for (int i = 0; i < g.ns; i++) {
        op *= g.out[i];
        kp *= g.k[i];
        ip *= g.in[i];
    }
    int64_t cg = g.C / g.G, mg = g.M / g.G;
    GRID_LOOP(e, n) {
        int64_t o = e % op, t = e / op, m = t % g.M, nb = t / g.M, gr = m / mg;
        int64_t zw = g.nwz ? ld_i(wz, g.nwz == 1 ? 0 : m, g.wzdt) : 0;
        int64_t oc[6], r = o, sum = bias ? ld_i(bias, m, g.bdt) : 0;
        for (int i = g.ns - 1; i >= 0; i--) {
            oc[i] = r % g.out[i];
            r /= g.out[i];
        }
        for (int64_t kk = 0; kk < kp; kk++) {
            int64_t rr = kk, off = 0, stride = 1;
            bool inside = true;
            for (int i = g.ns - 1; i >= 0; i--) {
                int64_t c = oc[i] * g.s[i] - g.pb[i] + (rr % g.k[i]) * g.d[i];
                rr /= g.k[i];
                if (c < 0 || c >= g.in[i]) inside = false;
                off += c * stride;
                stride *= g.in[i];
            }
            if (!inside) continue;
            for (int64_t c = 0; c < cg; c++)
                sum += ((int64_t)x[(nb * g.C + gr * cg + c) * ip + off] - g.zx) * ((int64_t)w[(m * cg + c) * kp + kk] - zw);
        }
        if (!g.qlinear) {
            ((int32_t *)y)[e] = (int32_t)sum;
        } else {
            /* x_scale * w_scale / y_scale in the scales' dtype, as the reference forms it */
            double wsv = ld_f(ws, g.nws == 1 ? 0 : m, g.wsdt);
            double mult = rnd(__ddiv_rn(rnd(__dmul_rn(g.xs, wsv), g.st), g.ys), g.st);
            double v = __dadd_rn(__dmul_rn((double)sum, mult), g.z);
            v = v < (double)g.lo ? (double)g.lo : v > (double)g.hi ? (double)g.hi : v;
            st_q(y, e, g.odt, (int64_t)rint(v));
        }
    }
}

/* Calls CALL with A the storage type of an i8 (5) or u8 (6) dtype. */
#define DISPATCH_Q(dt, A, CALL)                                                                                    \
    switch (dt) {                                                                                                  \
    case 5: { typedef int8_t A; CALL; } break;                                                                     \
    case 6: { typedef uint8_t A; CALL; } break;                                                                    \
    default: return (int)cudaErrorInvalidValue;                                                                    \
    }

} // namespace

/* ---- launchers ---- */

extern "C" int cuk_rnn_init(cudaStream_t s, int dtype, const cuk_rnn *m, const void *h0, const void *c0, double *h,
                            double *c)
{
    int64_t n = m->nd * m->batch * m->hs;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_rnn_init<T><<<blocks_for(n), THREADS, 0, s>>>(*m, (const T *)h0, (const T *)c0, h, c, n)));
    return last_error();
}

extern "C" int cuk_rnn_step(cudaStream_t s, int dtype, const cuk_rnn *m, const void *x, const void *w, const void *r,
                            const void *b, const void *p, const void *lens, const double *hp, double *hn, double *c,
                            double *rh, void *y)
{
    int64_t n = m->nd * m->batch * m->hs;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_rnn_step<T><<<blocks_for(n), THREADS, 0, s>>>(*m, (const T *)x, (const T *)w, (const T *)r,
                                                                        (const T *)b, (const T *)p, lens, hp, hn, c,
                                                                        rh, (T *)y, n)));
    return last_error();
}

extern "C" int cuk_rnn_fin(cudaStream_t s, int dtype, const cuk_rnn *m, const double *h, const double *c, void *yh,
                           void *yc)
{
    int64_t n = m->nd * m->batch * m->hs;
    if (n <= 0 || (!yh && !yc)) return 0;
    DISPATCH_FLT(dtype, (k_rnn_fin<T><<<blocks_for(n), THREADS, 0, s>>>(*m, h, c, (T *)yh, (T *)yc, n)));
    return last_error();
}

extern "C" int cuk_attn_cache(cudaStream_t s, int esize, const void *past, const void *cur, void *out, int64_t B,
                              int64_t H, int64_t P, int64_t len, int64_t D, int64_t bs, int64_t hs, int64_t ss)
{
    int64_t n = B * H * len * D;
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_attn_cache<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)past, (const T *)cur, (T *)out, n,
                                                                            H, P, len, D, bs, hs, ss)));
    return last_error();
}

extern "C" int cuk_attention(cudaStream_t s, int dtype, const cuk_attn *a, const void *q, const void *pk, const void *pv,
                             const void *mask, const void *nonpad, double *xs, void *qk, void *y, int64_t row0,
                             int64_t nq)
{
    if (nq <= 0) return 0;
    /* one row per thread; small blocks spread the few rows of a decode step over more multiprocessors */
    int64_t nb = (nq + 63) / 64;
    unsigned blocks = (unsigned)(nb > (1 << 20) ? (1 << 20) : nb);
    DISPATCH_FLT(dtype, (k_attention<T><<<blocks, 64, 0, s>>>(*a, dtype, (const T *)q, (const T *)pk, (const T *)pv, mask,
                                                             nonpad, xs, (T *)qk, (T *)y, row0, nq)));
    return last_error();
}

extern "C" int cuk_rotary(cudaStream_t s, int dtype, const cuk_rope *g, const void *x, const void *cc, const void *sn,
                          const void *pos, void *y)
{
    int64_t n = g->B * g->H * g->S * g->D;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_rotary<T><<<blocks_for(n), THREADS, 0, s>>>(*g, dtype, (const T *)x, (const T *)cc,
                                                                      (const T *)sn, pos, (T *)y, n)));
    return last_error();
}

extern "C" int cuk_quantize(cudaStream_t s, int xdt, const void *x, int sdt, const void *sc, const cuk_qmap *ms, int zdt,
                            const void *zp, const cuk_qmap *mz, int odt, void *y, int64_t n, int pr, int64_t lo,
                            int64_t hi)
{
    if (n <= 0) return 0;
    k_quantize<<<blocks_for(n), THREADS, 0, s>>>(xdt, x, sdt, sc, *ms, zdt, zp, *mz, odt, y, n, pr, lo, hi);
    return last_error();
}

extern "C" int cuk_dequantize(cudaStream_t s, int xdt, const void *x, int sdt, const void *sc, const cuk_qmap *ms,
                              int zdt, const void *zp, const cuk_qmap *mz, int odt, void *y, int64_t n)
{
    if (n <= 0) return 0;
    k_dequantize<<<blocks_for(n), THREADS, 0, s>>>(xdt, x, sdt, sc, *ms, zdt, zp, *mz, odt, y, n);
    return last_error();
}

extern "C" int cuk_dyn_quantize(cudaStream_t s, const float *x, int64_t n, uint8_t *y, float *ys, uint8_t *yz)
{
    /* the range runs even for an empty x: the scale and zero point are still outputs */
    k_dq_range<<<1, THREADS, 0, s>>>(x, n, ys, yz);
    int e = last_error();
    if (e || n <= 0) return e;
    k_dq_apply<<<blocks_for(n), THREADS, 0, s>>>(x, n, ys, yz, y);
    return last_error();
}

extern "C" int cuk_matmul_int(cudaStream_t s, const cuk_imm *g, const void *a, const void *b, const void *az,
                              const void *bz, void *y, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_Q(g->adt, TA, DISPATCH_Q(g->bdt, TB, (k_matmul_int<TA, TB><<<blocks_for(n), THREADS, 0, s>>>(
                                                       *g, (const TA *)a, (const TB *)b, az, bz, y, n))));
    return last_error();
}

extern "C" int cuk_conv_int(cudaStream_t s, const cuk_iconv *g, const void *x, const void *w, const void *wz,
                            const void *bias, const void *ws, void *y, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_Q(g->xdt, TX, DISPATCH_Q(g->wdt, TW, (k_conv_int<TX, TW><<<blocks_for(n), THREADS, 0, s>>>(
                                                       *g, (const TX *)x, (const TW *)w, wz, bias, ws, y, n))));
    return last_error();
}
