/* The CUDA plugin's generated kernels (src/backends/cuda/cuda_fused.c) through the real NVRTC, without a
 * GPU: the plugin built by nvcc is loaded and its test hook, wf_cuda_jit_selftest, writes the CUDA C++
 * of hand-made programs and compiles it with the NVRTC the plugin loads (libnvrtc.so.<major>, from the
 * toolkit folder in its RUNPATH), with the kernel's own options, to a CUBIN for sm_90 (H100/H200) and
 * sm_75 (the oldest nvcc 13 builds for). The emulator (tests/cudaemu) compiles the same source with the
 * host's C++ compiler, so without this a GPU-less CI would never learn that NVRTC rejects it. The
 * programs use every op the generated kernels take (Gelu in both forms), each input kind (the output's
 * size, a scalar, a broadcast run), NaN and infinite parameters, and both index widths. Skipped where
 * the real plugin is not built or NVRTC is missing; a program NVRTC rejects fails with its log. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

#include "check.h"
#include "device/kernel.h"

typedef int (*selftest_fn)(const wf__ew_program *pg, int arch, char *log, size_t n);

static selftest_fn g_fn;

/* The ops, as lower/jit.c names them; "Gelu" with alpha 1 is the tanh form. */
static const char *const k_unary[] = {"Neg",  "Abs",     "Square",   "Sign",  "Relu",      "LeakyRelu", "Elu",
                                      "Exp",  "Log",     "Sqrt",     "Rsqrt", "Reciprocal", "Tanh",     "Sigmoid",
                                      "Erf",  "Gelu",    "Softplus", "Floor", "Ceil",      "Round",     "Swish",
                                      "HardSwish", "HardSigmoid", "Clip", NULL};
static const char *const k_binary[] = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", NULL};

static void compile_ok(const char *what, const wf__ew_program *pg)
{
    static char log[65536];
    for (int a = 0; a < 2; a++) {
        int arch = a ? 75 : 90;
        int rc = g_fn(pg, arch, log, sizeof log);
        if (rc) printf("  %s for sm_%d:\n%s\n", what, arch, log);
        CHECK_INT(rc, 0);
    }
}

/* One program that runs every op in turn on the previous result, with inputs of each kind. */
static void test_every_op(void)
{
    wf__ew_input in[3] = {{1, 1000}, {1, 1}, {10, 7}}; /* full, scalar, broadcast run */
    wf__ew_insn insn[64];
    int n = 0, last = 0;
    for (int i = 0; k_binary[i]; i++, n++) insn[n] = (wf__ew_insn){k_binary[i], n ? 3 + n - 1 : 0, 1 + i % 2, 0, 0};
    for (int i = 0; k_unary[i]; i++, n++) {
        double alpha = !strcmp(k_unary[i], "Clip") ? -1.5 : 0.3, beta = !strcmp(k_unary[i], "Clip") ? 2.5 : 0.5;
        insn[n] = (wf__ew_insn){k_unary[i], 3 + n - 1, -1, alpha, beta};
    }
    insn[n] = (wf__ew_insn){"Gelu", 3 + n - 1, -1, 1, 0}; /* the tanh form */
    last = n + 1;
    wf__ew_program pg = {3, last, in, insn, 1000, 1};
    compile_ok("every op", &pg);
}

/* Clip with infinite bounds and a NaN LeakyRelu slope: the literals NVRTC must take. */
static void test_special_literals(void)
{
    wf__ew_input in[1] = {{1, 64}};
    wf__ew_insn insn[3] = {{"Clip", 0, -1, -INFINITY, INFINITY}, {"LeakyRelu", 1, -1, NAN, 0}, {"Clip", 2, -1, -1, INFINITY}};
    wf__ew_program pg = {1, 3, in, insn, 64, 2};
    compile_ok("special literals", &pg);
}

/* Over 2^31 elements: 64-bit indices (and a broadcast divided in 64 bits). */
static void test_wide_index(void)
{
    int64_t n = (int64_t)3 << 30;
    wf__ew_input in[2] = {{1, n}, {1 << 20, 3}};
    wf__ew_insn insn[2] = {{"Mul", 0, 1, 0, 0}, {"Relu", 2, -1, 0, 0}};
    wf__ew_program pg = {2, 2, in, insn, n, 3};
    compile_ok("64-bit indices", &pg);
}

/* An op the kernels do not take is refused by name, before NVRTC sees anything. */
static void test_unknown_op(void)
{
    char log[300];
    wf__ew_input in[2] = {{1, 8}, {1, 8}};
    wf__ew_insn insn[1] = {{"Pow", 0, 1, 0, 0}};
    wf__ew_program pg = {2, 1, in, insn, 8, 4};
    CHECK_INT(g_fn(&pg, 90, log, sizeof log), -1);
    CHECK_STR_CONTAINS(log, "no CUDA expression for Pow");
}

int main(void)
{
#ifndef WEFT_CUDA_PLUGIN
    CHECK_SKIP("test_nvrtc", "this build has no real CUDA plugin");
    return check_summary();
#else
    struct stat st;
    if (stat(WEFT_CUDA_PLUGIN, &st) != 0) {
        CHECK_SKIP("test_nvrtc", "the real CUDA plugin is not built (%s: no nvcc, or -DWEFT_CUDA=OFF)", WEFT_CUDA_PLUGIN);
        return check_summary();
    }
    void *h = dlopen(WEFT_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) printf("dlopen %s: %s\n", WEFT_CUDA_PLUGIN, dlerror());
    CHECK(h != NULL);
    if (!h) return check_summary();
    void *p = dlsym(h, "wf_cuda_jit_selftest");
    CHECK(p != NULL);
    if (!p) return check_summary();
    memcpy(&g_fn, &p, sizeof p);
    /* NVRTC present? The hook says why not. */
    char why[400];
    wf__ew_input in[1] = {{1, 4}};
    wf__ew_insn insn[1] = {{"Neg", 0, -1, 0, 0}};
    wf__ew_program pg = {1, 1, in, insn, 4, 0};
    if (g_fn(&pg, 90, why, sizeof why) && (strstr(why, "not found") || strstr(why, "failed to load"))) {
        CHECK_SKIP("test_nvrtc", "the CUDA plugin finds no NVRTC: %s", why);
        return check_summary();
    }
    RUN_TEST(test_every_op);
    RUN_TEST(test_special_literals);
    RUN_TEST(test_wide_index);
    RUN_TEST(test_unknown_op);
    return check_summary();
#endif
}
