/*
 * The counter-based hash behind StatelessRandomUniform (graph/ops_train.c documents the op), shared by
 * the CPU kernel and the device plugins so that every backend draws bit-identical values. Header-only
 * and free of libweft calls because the plugins cannot link libweft.
 *
 * The draw at flat index i of (seed, counter) is
 *     key  = mix(mix(seed + G) + counter * C)         (once per launch, on the host)
 *     bits = mix(key + (i + 1) * G)                   (per element)
 * with mix the splitmix64 finaliser, G the 64-bit golden ratio and C another odd constant; all
 * arithmetic wraps modulo 2^64. The per-element step is splitmix64's own output function walked from
 * `key`, so one launch is a splitmix64 stream, and the two-level key makes neighbouring counters (one
 * per training step) start at unrelated points of the 2^64 cycle. Floats take the top bits, so the
 * conversion is exact everywhere: f32 the top 24 bits times 2^-24, f64 the top 53 times 2^-53, both in
 * [0, 1). f16 and bf16 take the f32 value rounded toward zero, which keeps them below 1 (round to
 * nearest would turn values just under 1 into 1.0).
 */
#ifndef WF_DEVICE_KUTIL_RANDOM_H
#define WF_DEVICE_KUTIL_RANDOM_H

#include <stdint.h>
#include <string.h>

#define WF__RNG_GOLDEN 0x9E3779B97F4A7C15ull
#define WF__RNG_COUNTER 0xD1B54A32D192ED03ull

static inline uint64_t wf__rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The per-launch key of (seed, counter). */
static inline uint64_t wf__rng_key(int64_t seed, int64_t counter)
{
    return wf__rng_mix(wf__rng_mix((uint64_t)seed + WF__RNG_GOLDEN) + (uint64_t)counter * WF__RNG_COUNTER);
}

static inline uint64_t wf__rng_bits(uint64_t key, uint64_t i) { return wf__rng_mix(key + (i + 1) * WF__RNG_GOLDEN); }
static inline float wf__rng_f32(uint64_t bits) { return (float)(uint32_t)(bits >> 40) * 0x1.0p-24f; }
static inline double wf__rng_f64(uint64_t bits) { return (double)(bits >> 11) * 0x1.0p-53; }

/* f32 in [0, 1) to f16 bits, rounded toward zero. */
static inline uint16_t wf__rng_f16(float f)
{
    if (f < 0x1.0p-14f) return (uint16_t)(f * 0x1.0p24f); /* subnormal: an exact scaling, then truncation */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((((u >> 23) & 0xff) - 127 + 15) << 10 | ((u >> 13) & 0x3ff));
}

/* f32 to bf16 bits, rounded toward zero. */
static inline uint16_t wf__rng_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

#endif
