/*
 * 2x2 windows at stride 2 (the pools of training CNNs) in GCC's vector extensions, shared by MaxPool2D
 * (k_pool.c) and MaxPool2DGrad (k_nn_grad.c). Each of WF__VEC's clones lowers them to its own ISA.
 *
 * N windows at a time take 2N inputs of a row as two N-lane vectors; EV/OD deinterleave the windows' even
 * and odd taps, LO/HI interleave N-lane results back into row order. f32 is loaded and stored as is; bf16
 * is widened in registers (exact) and stored back by its top half, which is exact for any value that is a
 * bf16 value already (a maximum, 0, or a dy value), so bf16 reads and writes its tensors in place instead
 * of through f32 copies.
 */
#ifndef WF_BACKENDS_CPU_K_POOL2X2_H
#define WF_BACKENDS_CPU_K_POOL2X2_H

#include <stdint.h>
#include <string.h>

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

/* LD*(p, &v): N stored elements at p as the bits of N f32 lanes; ST*(p, v): N lanes' bits back */
#define WF__LD8_F32(p, v) memcpy((v), (p), 32)
#define WF__ST8_F32(p, v)                                                                                \
    do {                                                                                                 \
        wf__v8i t_ = (v);                                                                                \
        memcpy((p), &t_, 32);                                                                            \
    } while (0)
#define WF__LD4_F32(p, v) memcpy((v), (p), 16)
#define WF__ST4_F32(p, v)                                                                                \
    do {                                                                                                 \
        wf__v4i t_ = (v);                                                                                \
        memcpy((p), &t_, 16);                                                                            \
    } while (0)
#define WF__LD8_BF16(p, v)                                                                               \
    do {                                                                                                 \
        wf__v8h h_;                                                                                      \
        memcpy(&h_, (p), 16);                                                                            \
        *(v) = (wf__v8i)(__builtin_convertvector(h_, wf__v8u) << 16);                                   \
    } while (0)
#define WF__ST8_BF16(p, v)                                                                               \
    do {                                                                                                 \
        wf__v8h h_ = __builtin_convertvector((wf__v8u)(v) >> 16, wf__v8h);                               \
        memcpy((p), &h_, 16);                                                                            \
    } while (0)
#define WF__LD4_BF16(p, v)                                                                               \
    do {                                                                                                 \
        wf__v4h h_;                                                                                      \
        memcpy(&h_, (p), 8);                                                                             \
        *(v) = (wf__v4i)(__builtin_convertvector(h_, wf__v4u) << 16);                                   \
    } while (0)
#define WF__ST4_BF16(p, v)                                                                               \
    do {                                                                                                 \
        wf__v4h h_ = __builtin_convertvector((wf__v4u)(v) >> 16, wf__v4h);                               \
        memcpy((p), &h_, 8);                                                                             \
    } while (0)

/* All n windows of a row: G(F8, j) and G(F4, j) do the eight or four windows from window j. Groups of
 * eight, then what is left as the row's last eight (or four) windows again (a window's results depend on
 * its own taps only, so they are written twice with the same values), and rows of fewer than four through
 * PADDED(F4) (zero-padded copies). Small CNNs' planes are 5 to 28 windows wide, so a scalar tail would be
 * most of the work. */
#define WF__ROW_2X2(n, G, F8, F4, PADDED)                                                                \
    do {                                                                                                 \
        int64_t j_ = 0;                                                                                  \
        for (; j_ + 8 <= (n); j_ += 8) G(F8, j_);                                                        \
        if (j_ < (n) && (n) >= 8) {                                                                      \
            G(F8, (n) - 8);                                                                              \
        } else if ((n) >= 4) {                                                                           \
            G(F4, 0);                                                                                    \
            if ((n) > 4) G(F4, (n) - 4);                                                                 \
        } else if ((n) > 0) {                                                                            \
            PADDED(F4);                                                                                  \
        }                                                                                                \
    } while (0)

#endif
