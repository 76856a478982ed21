/*
 * Checked size arithmetic: every product or sum of dims goes through these, so an overflowing shape is
 * a status instead of undefined behaviour. Header-only and free of libweft calls because the device
 * plugins and the kutil_*.h helpers (which cannot link libweft) use them too.
 */
#ifndef WF_CORE_CHECKED_H
#define WF_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tensor is smaller than 2^62 bytes. Element counts and byte sizes below that leave
 * headroom for the sums of a few sizes (headers, alignment, memory plans) in int64 and size_t. */
#define WF__MAX_TENSOR_BYTES ((int64_t)1 << 62)

/* a * b, a + b, a - b into *r; true when the exact result does not fit in int64 (*r is then unusable). */
static inline bool wf__mul_overflow_i64(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline bool wf__add_overflow_i64(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline bool wf__sub_overflow_i64(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }

/* The product of rank dims (all >= 0) with zero dims counted as 1: false when it overflows int64. Shapes
 * are validated on this product, not only on the element count, so that every partial product of a
 * valid shape's dims (strides, rows x cols, a zero-size tensor's outer dims) fits too. */
static inline bool wf__shape_extent_checked(int rank, const int64_t *dims, int64_t *extent, bool *has_zero)
{
    int64_t p = 1;
    bool zero = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        if (dims[i] == 0) zero = true;
        else if (wf__mul_overflow_i64(p, dims[i], &p)) return false;
    }
    *extent = p;
    if (has_zero) *has_zero = zero;
    return true;
}

/* The element count of rank dims, all >= 0 (callers check unknown dims first). False when the product
 * of the non-zero dims does not fit in int64 (see wf__shape_extent_checked). */
static inline bool wf__shape_numel_checked(int rank, const int64_t *dims, int64_t *n)
{
    int64_t p;
    bool zero;
    if (!wf__shape_extent_checked(rank, dims, &p, &zero)) return false;
    *n = zero ? 0 : p;
    return true;
}

/* numel and bytes (numel * esize) of rank dims, all >= 0: false when the element count overflows int64
 * or the bytes (of the non-zero dims' product) reach WF__MAX_TENSOR_BYTES. numel / bytes may be NULL. */
static inline bool wf__shape_bytes_checked(int rank, const int64_t *dims, size_t esize, int64_t *numel,
                                           int64_t *bytes)
{
    int64_t p, b;
    bool zero;
    if (!wf__shape_extent_checked(rank, dims, &p, &zero)) return false;
    if (wf__mul_overflow_i64(p, (int64_t)(esize ? esize : 1), &b) || b >= WF__MAX_TENSOR_BYTES) return false;
    if (numel) *numel = zero ? 0 : p;
    if (bytes) *bytes = zero ? 0 : b;
    return true;
}

/* Row-major strides in elements. A shape with a zero dim may have outer strides past int64; they are
 * never used to address anything, so they wrap (unsigned arithmetic) instead of overflowing. */
static inline void wf__strides_wrapping(int rank, const int64_t *dims, int64_t *strides)
{
    uint64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = (int64_t)s;
        s *= (uint64_t)dims[i];
    }
}

/* A double that is a count (Range's length, a Resize output dim): true and *out when it is finite and in
 * [0, limit]; negative values clamp to 0 when clamp_negative. Converting an out-of-range double to
 * int64 is undefined, so every such conversion goes through here. */
static inline bool wf__f64_to_count(double v, int64_t limit, bool clamp_negative, int64_t *out)
{
    if (v != v) return false;
    if (v < 0) {
        if (!clamp_negative) return false;
        *out = 0;
        return true;
    }
    if (v > (double)limit || v >= 9223372036854775808.0) return false;
    *out = (int64_t)v;
    return true;
}

#endif
