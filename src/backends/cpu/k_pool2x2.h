/*
 * 2x2 windows at stride 2 (the pools of training CNNs) in GCC's vector extensions, shared by MaxPool2D
 * (k_pool.c) and MaxPool2DGrad (k_nn_grad.c). Each of WF__VEC's clones lowers them to its own ISA.
 *
 * N windows at a time take 2N inputs of each of their two rows (WF__TAPS_*). f32 deinterleaves them with
 * EV/OD, and LO/HI interleave N-lane results back into row order; bf16 computes in f32 lanes whose values
 * are bf16 values (exact) and stores their top halves, so that it reads and writes its tensors in place
 * instead of through f32 copies.
 */
#ifndef WF_BACKENDS_CPU_K_POOL2X2_H
#define WF_BACKENDS_CPU_K_POOL2X2_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "k_pool2x2.h reads a bf16 pair as one 32-bit lane with the first value in its low half"
#endif

typedef float wf__v8f __attribute__((vector_size(32)));
typedef int32_t wf__v8i __attribute__((vector_size(32)));
typedef float wf__v4f __attribute__((vector_size(16)));
typedef int32_t wf__v4i __attribute__((vector_size(16)));
typedef uint16_t wf__v8h __attribute__((vector_size(16)));
typedef uint32_t wf__v8u __attribute__((vector_size(32)));
typedef uint16_t wf__v4h __attribute__((vector_size(8)));
typedef uint32_t wf__v4u __attribute__((vector_size(16)));

/* __builtin_shufflevector (constant lane numbers) is what both GCC 12+ and clang take; GCC's older
 * __builtin_shuffle is GCC-only and broke the clang fuzz build */
#define WF__SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define WF__EV8 0, 2, 4, 6, 8, 10, 12, 14
#define WF__OD8 1, 3, 5, 7, 9, 11, 13, 15
#define WF__LO8 0, 8, 1, 9, 2, 10, 3, 11
#define WF__HI8 4, 12, 5, 13, 6, 14, 7, 15
#define WF__EV4 0, 2, 4, 6
#define WF__OD4 1, 3, 5, 7
#define WF__LO4 0, 4, 1, 5
#define WF__HI4 2, 6, 3, 7

/* The four taps of N windows from rows r0 (top) and r1 (bottom) as N-lane f32 vectors a, b (top left and
 * right) and c, d (bottom). f32: 2N values of each row, deinterleaved (N is 8 or 4, pasted into WF__EV##N:
 * a list passed as an argument would split into many). bf16: the same 2N values read as N
 * 32-bit lanes, each holding a window's left tap in its low half and its right tap in its high half, so
 * the right tap is the lane with its low half cleared and the left tap the lane shifted up: the f32 of a
 * bf16 value is its bits in the top half (exact), and there is nothing to deinterleave. */
#define WF__TAPS_F32(VF, N, r0, r1, a, b, c, d)                                                          \
    VF a, b, c, d;                                                                                       \
    do {                                                                                                 \
        VF x0_, x1_, y0_, y1_;                                                                           \
        memcpy(&x0_, (r0), sizeof x0_), memcpy(&x1_, (r0) + N, sizeof x1_);                              \
        memcpy(&y0_, (r1), sizeof y0_), memcpy(&y1_, (r1) + N, sizeof y1_);                              \
        a = WF__SHUF(x0_, x1_, WF__EV##N), b = WF__SHUF(x0_, x1_, WF__OD##N);                            \
        c = WF__SHUF(y0_, y1_, WF__EV##N), d = WF__SHUF(y0_, y1_, WF__OD##N);                            \
    } while (0)
#define WF__TAPS_BF16(VU, VF, r0, r1, a, b, c, d)                                                        \
    VF a, b, c, d;                                                                                       \
    do {                                                                                                 \
        VU x_, y_;                                                                                       \
        memcpy(&x_, (r0), sizeof x_), memcpy(&y_, (r1), sizeof y_);                                      \
        a = (VF)(x_ << 16), b = (VF)(x_ & 0xffff0000u), c = (VF)(y_ << 16), d = (VF)(y_ & 0xffff0000u);  \
    } while (0)
/* N bf16 values at p as the bits of N f32 lanes (VH: N uint16_t, VU: N uint32_t) */
#define WF__BF16_WIDEN(VU, VH, p)                                                                        \
    __extension__({                                                                                      \
        VH h_;                                                                                           \
        memcpy(&h_, (p), sizeof h_);                                                                     \
        __builtin_convertvector(h_, VU) << 16;                                                           \
    })
/* N lanes of f32 bits whose low halves are zero (bf16 values) stored as N bf16 values at p */
#define WF__BF16_NARROW(VU, VH, p, v)                                                                    \
    do {                                                                                                 \
        VH h_ = __builtin_convertvector((VU)(v) >> 16, VH);                                              \
        memcpy((p), &h_, sizeof h_);                                                                     \
    } while (0)

/* All n windows of a row: G(F8, j) and G(F4, j) do the eight or four windows from window j. Groups of
 * eight, then what is left as the row's last eight (or four) windows again (a window's results depend on
 * its own taps only, so they are written twice with the same values), and rows of fewer than four through
 * PADDED(F4) (zero-padded copies). Small CNNs' planes are 5 to 28 windows wide, so a scalar tail would be
 * most of the work. */
#define WF__ROW_2X2(n, G, F8, F4, PADDED)                                                                \
    do {                                                                                                 \
        if ((n) >= 8) {                                                                                  \
            int64_t j_ = 0;                                                                              \
            for (; j_ + 8 <= (n); j_ += 8) G(F8, j_);                                                    \
            if (j_ < (n)) G(F8, (n) - 8);                                                                \
        } else if ((n) >= 4) {                                                                           \
            G(F4, 0);                                                                                    \
            if ((n) > 4) G(F4, (n) - 4);                                                                 \
        } else if ((n) > 0) {                                                                            \
            PADDED(F4);                                                                                  \
        }                                                                                                \
    } while (0)

#endif
