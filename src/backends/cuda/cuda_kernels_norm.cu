/*
 * Device code of the CUDA normalisations and selections (cuda_norm.c): the extra reductions, MVN,
 * Group/Instance/RMS normalisation, LRN, Hardmax, LpNormalization, TopK, LpPool, MaxUnpool, Det,
 * Compress, Unique and NonMaxSuppression. Ports of the OpenCL kernels (src/backends/opencl/ocl_norm.c,
 * ocl_seq.c, ocl_image.c); floats compute in double, as the CPU kernels, which widen to f64.
 */
#include "cuda_dev.cuh"
#include "cuda_norm.h"

namespace {

__device__ __forceinline__ int64_t goff(int64_t i, int n, const int64_t *d, const int64_t *st)
{
    int64_t off = 0;
    for (int k = n - 1; k >= 0; k--) {
        off += (i % d[k]) * st[k];
        i /= d[k];
    }
    return off;
}

/* ---- Reduce{L1,SumSquare,LogSum,LogSumExp,L2} ---- */

template <typename S> __device__ __forceinline__ bool int_acc(int op)
{
    return tr<S>::kind != K_FLT && (op == CUN_L1 || op == CUN_SUMSQ);
}

/* folds elements r0, r0 + step, ... of one output: integers wrapping into au, the rest into ad */
template <typename S>
__device__ void red_part(const S *p, const cun_geom &g, int op, int64_t r0, int64_t step, double m, double &ad,
                         uint64_t &au)
{
    bool flat = g.nr == 1 && g.rs[0] == 1;
    for (int64_t r = r0; r < g.count; r += step) {
        int64_t o = flat ? r : goff(r, g.nr, g.rd, g.rs);
        if (int_acc<S>(op)) {
            int64_t v = (int64_t)tr<S>::ld(p, o);
            uint64_t u = (uint64_t)v;
            au += op == CUN_L1 ? (v < 0 ? 0 - u : u) : u * u;
        } else {
            double v = ld_d(p, o);
            ad += op == CUN_L1 ? fabs(v) : (op == CUN_SUMSQ || op == CUN_L2) ? v * v : op == CUN_LOGSUM ? v : exp(v - m);
        }
    }
}

template <typename S> __device__ void red_fin(S *y, int64_t o, int op, double ad, uint64_t au, double m)
{
    if (int_acc<S>(op)) {
        tr<S>::st(y, o, (typename tr<S>::C)(int64_t)au);
        return;
    }
    double v = op == CUN_LOGSUM ? log(ad) : op == CUN_LOGSUMEXP ? log(ad) + m : op == CUN_L2 ? sqrt(ad) : ad;
    st_d(y, o, v);
}

template <typename S> __global__ void k_red_thread(const S *x, S *y, int64_t n_out, cun_geom g, int op)
{
    GRID_LOOP(o, n_out) {
        const S *p = x + goff(o, g.nk, g.kd, g.ks);
        double m = 0, ad = 0;
        uint64_t au = 0;
        if (op == CUN_LOGSUMEXP) {
            m = -INFINITY;
            for (int64_t r = 0; r < g.count; r++) m = max_nan<double>(m, ld_d(p, goff(r, g.nr, g.rd, g.rs)));
            if (isinf(m) || m != m) { /* all -inf, empty, +inf or NaN: the max is the answer */
                st_d(y, o, m);
                continue;
            }
        }
        red_part(p, g, op, 0, 1, m, ad, au);
        red_fin(y, o, op, ad, au, m);
    }
}

template <typename S> __global__ void k_red_block(const S *x, S *y, int64_t n_out, cun_geom g, int op)
{
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        const S *p = x + goff(o, g.nk, g.kd, g.ks);
        double m = 0, ad = 0;
        uint64_t au = 0;
        if (op == CUN_LOGSUMEXP) {
            m = -INFINITY;
            for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) m = max_nan<double>(m, ld_d(p, goff(r, g.nr, g.rd, g.rs)));
            m = block_reduce(m, [](double a, double b) { return max_nan<double>(a, b); });
            if (isinf(m) || m != m) { /* uniform over the block */
                if (threadIdx.x == 0) st_d(y, o, m);
                continue;
            }
        }
        red_part(p, g, op, threadIdx.x, blockDim.x, m, ad, au);
        if (int_acc<S>(op)) au = block_reduce(au, [](uint64_t a, uint64_t b) { return a + b; });
        else ad = block_reduce(ad, [](double a, double b) { return a + b; });
        if (threadIdx.x == 0) red_fin(y, o, op, ad, au, m);
    }
}

inline unsigned grid_of(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

/* ---- MeanVarianceNormalization: a block per output's set ---- */

template <typename S> __global__ void k_mvn(const S *x, S *y, int64_t n_out, cun_geom g)
{
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        int64_t base = goff(o, g.nk, g.kd, g.ks);
        const S *p = x + base;
        S *q = y + base;
        double m = 0, v = 0;
        for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) m += ld_d(p, goff(r, g.nr, g.rd, g.rs));
        m = block_reduce(m, [](double a, double b) { return a + b; }) / (double)g.count;
        for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
            double d = ld_d(p, goff(r, g.nr, g.rd, g.rs)) - m;
            v += d * d;
        }
        v = block_reduce(v, [](double a, double b) { return a + b; });
        /* ONNX's function body: (X - mean) / (sqrt(var) + 1e-9) */
        double den = sqrt(v / (double)g.count) + 1e-9;
        for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
            int64_t e = goff(r, g.nr, g.rd, g.rs);
            st_d(q, e, (ld_d(p, e) - m) / den);
        }
    }
}

/* ---- Group/InstanceNormalization and RMSNormalization: a block per group / row ---- */

template <typename S>
__global__ void k_groupnorm(const S *x, S *y, const S *sc, const S *bi, int64_t groups, int64_t len, int64_t S_,
                            int64_t C, int64_t G, int per_group, double eps)
{
    int64_t cs = (C / G) * S_;
    for (int64_t gr = blockIdx.x; gr < groups; gr += gridDim.x) {
        int64_t base = gr * len;
        double m = 0, v = 0;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) m += ld_d(x, base + i);
        m = block_reduce(m, [](double a, double b) { return a + b; }) / (double)len;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            double d = ld_d(x, base + i) - m;
            v += d * d;
        }
        v = block_reduce(v, [](double a, double b) { return a + b; });
        double inv = 1.0 / sqrt(v / (double)len + eps);
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            int64_t e = base + i, c = per_group ? (e / cs) % G : (e / S_) % C;
            double r = (ld_d(x, e) - m) * inv;
            st_d(y, e, r * ld_d(sc, c) + ld_d(bi, c));
        }
    }
}

struct dims8 {
    int64_t d[CUN_MAX_RANK], s[CUN_MAX_RANK];
};

template <typename S>
__global__ void k_rmsnorm(const S *x, S *y, const S *sc, int64_t rows, int64_t M, int nr, dims8 nd, double eps)
{
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const S *p = x + row * M;
        S *q = y + row * M;
        double v = 0;
        for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
            double d = ld_d(p, i);
            v += d * d;
        }
        v = block_reduce(v, [](double a, double b) { return a + b; });
        double inv = 1.0 / sqrt(v / (double)M + eps);
        for (int64_t i = threadIdx.x; i < M; i += blockDim.x) st_d(q, i, ld_d(p, i) * inv * ld_d(sc, goff(i, nr, nd.d, nd.s)));
    }
}

/* ---- LRN ---- */

template <typename S>
__global__ void k_lrn(const S *x, S *y, int64_t n, int64_t C, int64_t S_, int64_t lo, int64_t hi, double alpha,
                      double beta, double bias, double size)
{
    GRID_LOOP(g, n) {
        int64_t i = g % S_, c = (g / S_) % C, b = g / (S_ * C);
        double sq = 0;
        for (int64_t q = c - lo; q <= c + hi; q++)
            if (q >= 0 && q < C) {
                double v = ld_d(x, (b * C + q) * S_ + i);
                sq += v * v;
            }
        st_d(y, g, ld_d(x, g) / pow(bias + alpha / size * sq, beta));
    }
}

/* ---- Hardmax (p 0): 1 at the first maximum, the first NaN counting as it; LpNormalization (p 1, 2) ---- */

template <typename S> __global__ void k_line(const S *x, S *y, int64_t lines, int64_t n, int64_t inner, int p)
{
    GRID_LOOP(l, lines) {
        int64_t base = (l / inner) * n * inner + l % inner;
        const S *px = x + base;
        S *py = y + base;
        if (p == 0) {
            int64_t best = 0;
            double bv = ld_d(px, 0);
            for (int64_t i = 1; i < n && bv == bv; i++) {
                double v = ld_d(px, i * inner);
                if (v > bv || v != v) {
                    bv = v;
                    best = i;
                }
            }
            for (int64_t i = 0; i < n; i++) st_d(py, i * inner, i == best ? 1.0 : 0.0);
        } else {
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
                double v = ld_d(px, i * inner);
                s += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? s : sqrt(s);
            for (int64_t i = 0; i < n; i++) st_d(py, i * inner, norm == 0 ? 0.0 : ld_d(px, i * inner) / norm);
        }
    }
}

/* ---- TopK: each element's rank in a strict total order (NaN largest, ties by index) ---- */

template <typename C> __device__ __forceinline__ bool before(C w, int64_t j, C v, int64_t t, int largest)
{
    bool wn = is_nan(w), vn = is_nan(v);
    if (wn != vn) return largest ? wn : vn;
    if (!wn && w != v) return largest ? w > v : w < v;
    return j < t;
}

template <typename S>
__global__ void k_topk(const S *x, S *y, int64_t *yi, int64_t n, int64_t D, int64_t K, int64_t inner, int largest)
{
    GRID_LOOP(g, n) {
        int64_t t = g % D, line = g / D, o = line / inner, i = line % inner;
        const S *p = x + o * D * inner + i;
        typename tr<S>::C v = tr<S>::ld(p, t * inner);
        int64_t rank = 0;
        for (int64_t j = 0; j < D && rank < K; j++)
            if (j != t && before(tr<S>::ld(p, j * inner), j, v, t, largest)) rank++;
        if (rank < K) {
            int64_t q = (o * K + rank) * inner + i;
            y[q] = p[t * inner];
            yi[q] = t;
        }
    }
}

/* ---- LpPool: the window walked in full, padding skipped ---- */

template <typename S> __global__ void k_lppool(const S *x, S *y, int64_t n, cun_pool P, double pw)
{
    GRID_LOOP(o, n) {
        int64_t plane = o / P.out_plane, r = o % P.out_plane, oc[CUN_MAX_RANK];
        for (int i = P.ns - 1; i >= 0; i--) {
            oc[i] = r % P.od[i];
            r /= P.od[i];
        }
        const S *xp = x + plane * P.in_plane;
        double acc = 0;
        for (int64_t w = 0; w < P.win; w++) {
            int64_t ww = w, off = 0, str = 1;
            bool inside = true;
            for (int i = P.ns - 1; i >= 0 && inside; i--) {
                int64_t ki = ww % P.k[i];
                ww /= P.k[i];
                int64_t c = oc[i] * P.st[i] - P.pb[i] + ki * P.dl[i];
                if (c < 0 || c >= P.xd[i]) inside = false;
                off += c * str;
                str *= P.xd[i];
            }
            if (!inside) continue;
            double a = fabs(ld_d(xp, off));
            acc += pw == 2 ? a * a : pw == 1 ? a : pow(a, pw);
        }
        st_d(y, o, pw == 2 ? sqrt(acc) : pw == 1 ? acc : pow(acc, 1 / pw));
    }
}

/* ---- MaxUnpool ---- */

struct unpool_geom {
    int64_t ud[CUN_MAX_RANK], us[CUN_MAX_RANK], os[CUN_MAX_RANK];
    int rank;
};

template <typename E>
__global__ void k_unpool(const E *x, const void *ix, int ix64, E *y, int64_t n, unpool_geom G, int64_t total,
                         cuk_err *err, unsigned long long site)
{
    GRID_LOOP(e, n) {
        int64_t v = ix64 ? ((const int64_t *)ix)[e] : (int64_t)((const int32_t *)ix)[e], off = 0;
        if (v < 0 || v >= total) { /* reported, not written */
            cuk_flag(err, site, v, e, total);
            continue;
        }
        for (int i = 0; i < G.rank; i++) off += (v / G.us[i]) % G.ud[i] * G.os[i];
        y[off] = x[e];
    }
}

/* ---- Det: LU with partial pivoting, a matrix per thread (as LAPACK's getrf behind numpy) ---- */

template <typename S> __global__ void k_det(const S *x, S *y, double *a, int64_t batch, int64_t m)
{
    GRID_LOOP(b, batch) {
        int64_t mm = m * m;
        const S *px = x + b * mm;
        double *pa = a + b * mm;
        for (int64_t i = 0; i < mm; i++) pa[i] = ld_d(px, i);
        double det = 1;
        for (int64_t c = 0; c < m; c++) {
            int64_t piv = c;
            double best = fabs(pa[c * m + c]);
            for (int64_t r = c + 1; r < m; r++)
                if (fabs(pa[r * m + c]) > best) {
                    best = fabs(pa[r * m + c]);
                    piv = r;
                }
            if (piv != c) {
                for (int64_t q = 0; q < m; q++) {
                    double t = pa[c * m + q];
                    pa[c * m + q] = pa[piv * m + q];
                    pa[piv * m + q] = t;
                }
                det = -det;
            }
            double d = pa[c * m + c];
            det *= d;
            if (d == 0) break;
            for (int64_t r = c + 1; r < m; r++) {
                double f = pa[r * m + c] / d;
                if (f == 0) continue;
                for (int64_t q = c + 1; q < m; q++) pa[r * m + q] -= f * pa[c * m + q];
            }
        }
        st_d(y, b, det);
    }
}

__global__ void k_to_bool(const uint8_t *x, uint8_t *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = x[i] != 0;
}

template <typename E>
__global__ void k_compress(const E *x, const int64_t *sel, E *y, int64_t n, int64_t nnz, int64_t inner, int64_t D)
{
    GRID_LOOP(i, n) {
        int64_t r = i % inner, q = (i / inner) % nnz, o = i / (inner * nnz);
        y[i] = x[(o * D + sel[q]) * inner + r];
    }
}

/* ---- Unique: slices compared lexicographically, NaN last and equal to NaN (numpy.unique) ---- */

__device__ __forceinline__ int64_t uq_off(int64_t s, int64_t j, int64_t dim, int64_t inner)
{
    return ((j / inner) * dim + s) * inner + j % inner;
}

template <typename S> __device__ int uq_cmp(const S *x, int64_t a, int64_t b, int64_t len, int64_t inner, int64_t dim)
{
    for (int64_t j = 0; j < len; j++) {
        typename tr<S>::C va = tr<S>::ld(x, uq_off(a, j, dim, inner)), vb = tr<S>::ld(x, uq_off(b, j, dim, inner));
        bool na = is_nan(va), nb = is_nan(vb);
        if (na || nb) {
            if (na != nb) return na ? 1 : -1;
            continue;
        }
        if (va != vb) return va < vb ? -1 : 1;
    }
    return 0;
}

template <typename S>
__global__ void k_uq_group(const S *x, int64_t n, int64_t len, int64_t inner, int64_t *first, int64_t *cnt)
{
    GRID_LOOP(i, n) {
        int64_t f = i, c = 0;
        for (int64_t j = 0; j < n; j++)
            if (uq_cmp(x, j, i, len, inner, n) == 0) {
                c++;
                if (j < f) f = j;
            }
        first[i] = f;
        cnt[i] = c;
    }
}

template <typename S>
__global__ void k_uq_rank(const S *x, int64_t n, int64_t len, int64_t inner, int sorted, const int64_t *first,
                          int64_t *rank)
{
    GRID_LOOP(i, n) {
        int64_t f = first[i], r = 0;
        for (int64_t j = 0; j < n; j++)
            if (first[j] == j && (sorted ? uq_cmp(x, j, i, len, inner, n) < 0 : j < f)) r++;
        rank[i] = r;
    }
}

__global__ void k_uq_count(const int64_t *first, int64_t n, int64_t *ng)
{
    int64_t c = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) c += first[j] == j;
    c = block_reduce(c, [](int64_t a, int64_t b) { return a + b; });
    if (threadIdx.x == 0) *ng = c;
}

template <typename E>
__global__ void k_uq_fill(const E *x, int64_t n, int64_t len, int64_t inner, int64_t ng, const int64_t *first,
                          const int64_t *cnt, const int64_t *rank, E *y, int64_t *ix, int64_t *inv, int64_t *cts)
{
    GRID_LOOP(i, n) {
        int64_t r = rank[i];
        inv[i] = r;
        if (first[i] != i) continue;
        ix[r] = i;
        cts[r] = cnt[i];
        for (int64_t j = 0; j < len; j++) y[uq_off(r, j, ng, inner)] = x[uq_off(i, j, n, inner)];
    }
}

/* ---- NonMaxSuppression ---- */

/* candidates of each (batch, class) in score order, ties by the lower box */
template <typename S>
__global__ void k_nms_order(const S *sc, int64_t n, int64_t S_, int use_thr, double thr, int64_t *order)
{
    GRID_LOOP(g, n) {
        int64_t bc = g / S_, i = g % S_;
        const S *s = sc + bc * S_;
        double si = ld_d(s, i);
        if (use_thr && !(si > thr)) continue;
        int64_t r = 0;
        for (int64_t j = 0; j < S_; j++) {
            double sj = ld_d(s, j);
            if ((use_thr && !(sj > thr)) || j == i) continue;
            if (sj > si || (sj == si && j < i)) r++;
        }
        order[bc * S_ + r] = i;
    }
}

template <typename S>
__device__ void nms_box(const S *b, int center, double *x0, double *x1, double *y0, double *y1)
{
    double v0 = ld_d(b, 0), v1 = ld_d(b, 1), v2 = ld_d(b, 2), v3 = ld_d(b, 3);
    if (center) {
        *x0 = v0 - v2 / 2;
        *x1 = v0 + v2 / 2;
        *y0 = v1 - v3 / 2;
        *y1 = v1 + v3 / 2;
    } else {
        *x0 = fmin(v1, v3);
        *x1 = fmax(v1, v3);
        *y0 = fmin(v0, v2);
        *y1 = fmax(v0, v2);
    }
}

template <typename S> __device__ bool nms_suppress(const S *b1, const S *b2, int center, double thr)
{
    double ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
    nms_box(b1, center, &ax0, &ax1, &ay0, &ay1);
    nms_box(b2, center, &bx0, &bx1, &by0, &by1);
    double ix = fmin(ax1, bx1) - fmax(ax0, bx0), iy = fmin(ay1, by1) - fmax(ay0, by0);
    if (ix <= 0 || iy <= 0) return false;
    double inter = ix * iy, a1 = (ax1 - ax0) * (ay1 - ay0), a2 = (bx1 - bx0) * (by1 - by0), uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > thr;
}

/* the greedy pass of one (batch, class) per thread: sequential by nature */
template <typename S>
__global__ void k_nms_greedy(const S *bx, const S *sc, int64_t nbc, int64_t S_, int64_t C, int use_thr, double thr,
                             double iou, int center, int64_t max_out, const int64_t *order, int64_t *sel, int64_t *nsel)
{
    GRID_LOOP(bc, nbc) {
        int64_t b = bc / C, n = 0, k = 0;
        const S *s = sc + bc * S_, *boxes = bx + b * S_ * 4;
        for (int64_t j = 0; j < S_; j++) n += !use_thr || ld_d(s, j) > thr;
        for (int64_t r = 0; r < n && k < max_out; r++) {
            int64_t i = order[bc * S_ + r];
            bool keep = true;
            for (int64_t j = 0; j < k && keep; j++) keep = !nms_suppress(boxes + i * 4, boxes + sel[bc * S_ + j] * 4, center, iou);
            if (keep) sel[bc * S_ + k++] = i;
        }
        nsel[bc] = k;
    }
}

__global__ void k_nms_out(const int64_t *sel, const int64_t *nsel, const int64_t *start, int64_t nbc, int64_t S_,
                          int64_t C, int64_t *y)
{
    GRID_LOOP(bc, nbc) {
        int64_t q0 = start[bc];
        for (int64_t q = 0; q < nsel[bc]; q++) {
            int64_t *o = y + (q0 + q) * 3;
            o[0] = bc / C;
            o[1] = bc % C;
            o[2] = sel[bc * S_ + q];
        }
    }
}

} // namespace

extern "C" {

int cun_reduce(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n_out, const cun_geom *g)
{
    if (n_out <= 0) return 0;
    /* a block per output when each folds many values, else a thread per output */
    if (g->count >= 128) {
        DISPATCH_NUM(dtype, (k_red_block<T><<<grid_of(n_out), THREADS, 0, s>>>((const T *)x, (T *)y, n_out, *g, op)));
    } else {
        DISPATCH_NUM(dtype, (k_red_thread<T><<<blocks_for(n_out), THREADS, 0, s>>>((const T *)x, (T *)y, n_out, *g, op)));
    }
    return last_error();
}

int cun_mvn(cudaStream_t s, int dtype, const void *x, void *y, int64_t n_out, const cun_geom *g)
{
    if (n_out <= 0 || g->count <= 0) return 0;
    DISPATCH_FLT(dtype, (k_mvn<T><<<grid_of(n_out), THREADS, 0, s>>>((const T *)x, (T *)y, n_out, *g)));
    return last_error();
}

int cun_groupnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *sc, const void *bi, int64_t groups,
                  int64_t len, int64_t S, int64_t C, int64_t G, int per_group, double eps)
{
    if (groups <= 0 || len <= 0) return 0;
    DISPATCH_FLT(dtype, (k_groupnorm<T><<<grid_of(groups), THREADS, 0, s>>>((const T *)x, (T *)y, (const T *)sc,
                                                                             (const T *)bi, groups, len, S, C, G,
                                                                             per_group, eps)));
    return last_error();
}

int cun_rmsnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *sc, int64_t rows, int64_t M, int nr,
                const int64_t *nd, const int64_t *ss, double eps)
{
    if (rows <= 0 || M <= 0) return 0;
    if (nr > CUN_MAX_RANK) return (int)cudaErrorInvalidValue;
    dims8 d;
    for (int i = 0; i < CUN_MAX_RANK; i++) {
        d.d[i] = i < nr ? nd[i] : 1;
        d.s[i] = i < nr ? ss[i] : 0;
    }
    DISPATCH_FLT(dtype, (k_rmsnorm<T><<<grid_of(rows), THREADS, 0, s>>>((const T *)x, (T *)y, (const T *)sc, rows, M,
                                                                         nr, d, eps)));
    return last_error();
}

int cun_lrn(cudaStream_t s, int dtype, const void *x, void *y, int64_t n, int64_t C, int64_t S, int64_t lo, int64_t hi,
            double alpha, double beta, double bias, double size)
{
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_lrn<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, n, C, S, lo, hi, alpha, beta,
                                                                     bias, size)));
    return last_error();
}

int cun_line(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer, int64_t n, int64_t inner, int p)
{
    int64_t lines = outer * inner;
    if (lines <= 0 || n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_line<T><<<blocks_for(lines), THREADS, 0, s>>>((const T *)x, (T *)y, lines, n, inner, p)));
    return last_error();
}

int cun_topk(cudaStream_t s, int dtype, const void *x, void *y, int64_t *yi, int64_t outer, int64_t D, int64_t K,
             int64_t inner, int largest)
{
    int64_t n = outer * D * inner;
    if (n <= 0 || K <= 0) return 0;
    DISPATCH_NUM(dtype, (k_topk<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, yi, n, D, K, inner, largest)));
    return last_error();
}

int cun_lppool(cudaStream_t s, int dtype, const void *x, void *y, int64_t n_out, const cun_pool *P, double p)
{
    if (n_out <= 0) return 0;
    DISPATCH_FLT(dtype, (k_lppool<T><<<blocks_for(n_out), THREADS, 0, s>>>((const T *)x, (T *)y, n_out, *P, p)));
    return last_error();
}

int cun_max_unpool(cudaStream_t s, int esize, const void *x, const void *ix, int ix64, void *y, int64_t n, int rank,
                   const int64_t *ud, const int64_t *us, const int64_t *os, struct cuk_err *err,
                   unsigned long long site)
{
    if (n <= 0) return 0;
    if (rank > CUN_MAX_RANK) return (int)cudaErrorInvalidValue;
    unpool_geom G;
    G.rank = rank;
    for (int i = 0; i < CUN_MAX_RANK; i++) {
        G.ud[i] = i < rank ? ud[i] : 1;
        G.us[i] = i < rank ? us[i] : 1;
        G.os[i] = i < rank ? os[i] : 0;
    }
    int64_t total = 1;
    for (int i = 0; i < rank; i++) total *= ud[i];
    DISPATCH_SIZE(esize, (k_unpool<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, ix, ix64, (T *)y, n, G, total,
                                                                        err, site)));
    return last_error();
}

int cun_det(cudaStream_t s, int dtype, const void *x, void *y, double *a, int64_t batch, int64_t m)
{
    if (batch <= 0) return 0;
    DISPATCH_FLT(dtype, (k_det<T><<<blocks_for(batch), THREADS, 0, s>>>((const T *)x, (T *)y, a, batch, m)));
    return last_error();
}

int cun_to_bool(cudaStream_t s, const void *x, void *y, int64_t n)
{
    if (n <= 0) return 0;
    k_to_bool<<<blocks_for(n), THREADS, 0, s>>>((const uint8_t *)x, (uint8_t *)y, n);
    return last_error();
}

int cun_compress(cudaStream_t s, int esize, const void *x, const int64_t *sel, void *y, int64_t outer, int64_t nnz,
                 int64_t inner, int64_t D)
{
    int64_t n = outer * nnz * inner;
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_compress<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, sel, (T *)y, n, nnz, inner, D)));
    return last_error();
}

int cun_unique_plan(cudaStream_t s, int dtype, const void *x, int64_t n, int64_t len, int64_t inner, int sorted,
                    int64_t *first, int64_t *cnt, int64_t *rank, int64_t *ng)
{
    if (n <= 0) return 0;
    DISPATCH(dtype, (k_uq_group<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, n, len, inner, first, cnt)));
    int rc = last_error();
    if (rc) return rc;
    DISPATCH(dtype, (k_uq_rank<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, n, len, inner, sorted, first, rank)));
    if ((rc = last_error())) return rc;
    k_uq_count<<<1, THREADS, 0, s>>>(first, n, ng);
    return last_error();
}

int cun_unique_fill(cudaStream_t s, int esize, const void *x, int64_t n, int64_t len, int64_t inner, int64_t ng,
                    const int64_t *first, const int64_t *cnt, const int64_t *rank, void *y, int64_t *ix, int64_t *inv,
                    int64_t *counts)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_uq_fill<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, n, len, inner, ng, first, cnt,
                                                                         rank, (T *)y, ix, inv, counts)));
    return last_error();
}

int cun_nms(cudaStream_t s, int dtype, const void *boxes, const void *scores, int64_t nbc, int64_t S, int64_t C,
            int use_thr, double thr, double iou, int center, int64_t max_out, int64_t *order, int64_t *sel,
            int64_t *nsel)
{
    if (nbc <= 0) return 0;
    int64_t n = nbc * S;
    if (n > 0) {
        DISPATCH_FLT(dtype, (k_nms_order<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)scores, n, S, use_thr, thr, order)));
        int rc = last_error();
        if (rc) return rc;
    }
    DISPATCH_FLT(dtype, (k_nms_greedy<T><<<blocks_for(nbc), THREADS, 0, s>>>((const T *)boxes, (const T *)scores, nbc, S,
                                                                              C, use_thr, thr, iou, center, max_out,
                                                                              order, sel, nsel)));
    return last_error();
}

int cun_nms_out(cudaStream_t s, const int64_t *sel, const int64_t *nsel, const int64_t *start, int64_t nbc, int64_t S,
                int64_t C, int64_t *y)
{
    if (nbc <= 0) return 0;
    k_nms_out<<<blocks_for(nbc), THREADS, 0, s>>>(sel, nsel, start, nbc, S, C, y);
    return last_error();
}

} // extern "C"
