/*
 * Which vector form of a kernel this CPU runs, for the kernels that carry their own AVX-512 and AVX2
 * forms (k_misc_resize.c's columns, k_elementwise_unary.c's Sigmoid and Swish, k_rnn_lstm.c's cell).
 */
#ifndef WF_BACKENDS_CPU_K_ISA_H
#define WF_BACKENDS_CPU_K_ISA_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { WF__FORM_PLAIN, WF__FORM_AVX2, WF__FORM_AVX512 };

/* The best form this CPU runs, chosen once into *cache (initialised to -1). The environment variable `env`
 * picks a lesser one, so that the test suite runs every form on an AVX-512 machine: "avx2", or `plain`, the
 * caller's name for its portable form ("plain", or the LSTM's "dnnl"); any other value changes nothing. */
static inline int wf__cpu_form(atomic_int *cache, const char *env, const char *plain)
{
    int f = atomic_load_explicit(cache, memory_order_relaxed);
    if (f >= 0) return f;
    f = WF__FORM_PLAIN;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) f = WF__FORM_AVX2;
    if (__builtin_cpu_supports("avx512f")) f = WF__FORM_AVX512;
#endif
    const char *e = getenv(env);
    if (e && !strcmp(e, plain)) f = WF__FORM_PLAIN;
    else if (e && !strcmp(e, "avx2") && f > WF__FORM_AVX2) f = WF__FORM_AVX2;
    atomic_store_explicit(cache, f, memory_order_relaxed);
    return f;
}

#endif
