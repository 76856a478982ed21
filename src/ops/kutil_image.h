/*
 * The stateless random image ops' draws (weft.h documents them next to wf_random_brightness), shared by
 * the CPU kernels and the OpenCL and CUDA plugins so that every device draws the same values: each
 * backend computes them on the host from the seed input and applies them in its own kernels.
 * Header-only and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_OPS_KUTIL_IMAGE_H
#define WF_OPS_KUTIL_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/kutil_random.h"

/* An image input [H, W, C] (n = 1) or [N, H, W, C], and its seed input {seed, counter}. */
typedef struct wf__ki_geom {
    int64_t n, h, w, c;
    int64_t seed, counter;
} wf__ki_geom;

/* dims of a rank-3 or rank-4 image, and the seed's two values. */
static inline wf__ki_geom wf__ki_geom_of(const int64_t *dims, int rank, const int64_t seed[2])
{
    const int64_t *d = dims + (rank - 3);
    wf__ki_geom g = {rank == 4 ? dims[0] : 1, d[0], d[1], d[2], seed[0], seed[1]};
    return g;
}

/* Image i's key: the counter advanced by i, wrapping as the hash does. */
static inline uint64_t wf__ki_key(const wf__ki_geom *g, int64_t i)
{
    return wf__rng_key(g->seed, (int64_t)((uint64_t)g->counter + (uint64_t)i));
}

/* Image i's first uniform draw u_0 in [0, 1). */
static inline float wf__ki_u(const wf__ki_geom *g, int64_t i) { return wf__rng_f32(wf__rng_bits(wf__ki_key(g, i), 0)); }

/* Brightness: delta = (2 u_0 - 1) max_delta, in double. */
static inline double wf__ki_delta(const wf__ki_geom *g, int64_t i, double max_delta)
{
    return (2.0 * (double)wf__ki_u(g, i) - 1.0) * max_delta;
}

/* Contrast: factor = lower + u_0 (upper - lower), in double. */
static inline double wf__ki_factor(const wf__ki_geom *g, int64_t i, double lower, double upper)
{
    return lower + (double)wf__ki_u(g, i) * (upper - lower);
}

/* FlipLeftRight: image i is reversed along W when u_0 < 0.5. */
static inline bool wf__ki_flip(const wf__ki_geom *g, int64_t i) { return wf__ki_u(g, i) < 0.5f; }

/* Crop to {h, w, c} (each at most the image's): offsets draw 0, 1, 2 modulo the room on each axis. */
static inline void wf__ki_crop(const wf__ki_geom *g, int64_t i, int64_t h, int64_t w, int64_t c, int64_t off[3])
{
    uint64_t key = wf__ki_key(g, i);
    off[0] = (int64_t)(wf__rng_bits(key, 0) % (uint64_t)(g->h - h + 1));
    off[1] = (int64_t)(wf__rng_bits(key, 1) % (uint64_t)(g->w - w + 1));
    off[2] = (int64_t)(wf__rng_bits(key, 2) % (uint64_t)(g->c - c + 1));
}

#endif
