/*
 * f32 MatMul 1024x1024x1024 through the public weft API (placeholders -> MatMul -> session run) against
 * the same oneDNN matmul primitive called directly in this process with the same thread count. The gap
 * is weft's per-run overhead: planning cache lookup, executor, output allocation, stream/memory setup.
 *
 * usage: bench_matmul [--threads N] [--size S] [--runs R]     peak: env WEFT_PEAK_GFLOPS, else estimated from /proc/cpuinfo
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "weft/weft.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int fail_status(const char *what, wf_status *s)
{
    fprintf(stderr, "bench_matmul: %s: %s: %s\n", what, wf_code_name(wf_status_code(s)), wf_status_message(s));
    wf_status_free(s);
    return 1;
}

#define TRY(what, expr)                                  \
    do {                                                 \
        wf_status *s_ = (expr);                          \
        if (s_) { rc = fail_status(what, s_); goto done; } \
    } while (0)

/* fp32 peak of `cores` cores from /proc/cpuinfo: two FMA pipes per core, 16 floats wide with AVX-512
 * (Zen 4/5 and Intel server cores), 8 with AVX2, at the highest clock the kernel reports. This is an
 * estimate: set WEFT_PEAK_GFLOPS to override it. */
static double machine_peak(int cores, char *why, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    double mhz = 0;
    int avx512 = 0, avx2 = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu MHz", 7)) {
            double m = atof(strchr(line, ':') + 1);
            if (m > mhz) mhz = m;
        } else if (!strncmp(line, "flags", 5)) {
            avx512 |= strstr(line, " avx512f") != NULL;
            avx2 |= strstr(line, " avx2") != NULL;
        }
    }
    if (f) fclose(f);
    if (mhz <= 0) mhz = 3000;
    int width = avx512 ? 16 : avx2 ? 8 : 4;
    double peak = cores * (mhz / 1e3) * width * 2 /* FMA */ * 2 /* pipes */;
    snprintf(why, n, "estimated: %d core%s x %.2f GHz x %s FMA x 2 pipes; set WEFT_PEAK_GFLOPS to override", cores,
             cores > 1 ? "s" : "", mhz / 1e3, avx512 ? "AVX-512" : avx2 ? "AVX2" : "SSE");
    return peak;
}

static int bench_weft(int threads, int64_t n, int warm, int runs, float *a, float *b, double *ms, float *check)
{
    int rc = 0;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *sess = NULL;
    wf_tensor *ta = NULL, *tb = NULL;
    double *t = calloc((size_t)runs, sizeof *t);
    int64_t dims[2] = {n, n};
    wf_context_options co;
    wf_context_options_init(&co);
    co.intra_op_threads = threads;
    wf_output pa, pb, y;
    TRY("context", wf_context_new(&co, &ctx));
    TRY("graph", wf_graph_new(&g));
    TRY("placeholder A", wf_placeholder(g, "A", WF_F32, 2, dims, &pa));
    TRY("placeholder B", wf_placeholder(g, "B", WF_F32, 2, dims, &pb));
    TRY("matmul", wf_matmul(g, "Y", pa, pb, 0, 0, &y));
    TRY("session", wf_session_new(ctx, g, NULL, &sess));
    TRY("tensor A", wf_tensor_new(WF_F32, 2, dims, a, &ta));
    TRY("tensor B", wf_tensor_new(WF_F32, 2, dims, b, &tb));
    wf_feed feeds[2] = {{pa, ta}, {pb, tb}};
    for (int i = 0; i < warm + runs; i++) {
        wf_tensor *out = NULL;
        double t0 = now_ms();
        TRY("run", wf_session_run(sess, feeds, 2, &y, 1, &out, NULL));
        double t1 = now_ms();
        if (i >= warm) t[i - warm] = t1 - t0;
        if (i == warm + runs - 1) memcpy(check, wf_tensor_data(out), sizeof(float) * (size_t)(n * n));
        wf_tensor_free(out);
    }
    *ms = median(t, runs);
done:
    free(t);
    wf_tensor_free(ta);
    wf_tensor_free(tb);
    wf_session_free(sess);
    wf_graph_free(g);
    wf_context_free(ctx);
    return rc;
}

#define DN(what, expr)                                                                   \
    do {                                                                                 \
        dnnl_status_t st_ = (expr);                                                      \
        if (st_ != dnnl_success) {                                                       \
            fprintf(stderr, "bench_matmul: oneDNN %s failed (status %d)\n", what, (int)st_); \
            rc = 1;                                                                      \
            goto done;                                                                   \
        }                                                                                \
    } while (0)

static int bench_direct(int threads, int64_t n, int warm, int runs, float *a, float *b, float *c, double *ms)
{
    int rc = 0;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    double *t = calloc((size_t)runs, sizeof *t);
    dnnl_dims_t dims = {n, n};
    dnnl_memory_desc_t md;
    dnnl_matmul_desc_t desc;
    omp_set_num_threads(threads);
    DN("engine", dnnl_engine_create(&eng, dnnl_cpu, 0));
    DN("stream", dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    DN("memory desc", dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
    DN("matmul desc", dnnl_matmul_desc_init(&desc, &md, &md, NULL, &md));
    DN("primitive desc", dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL));
    DN("primitive", dnnl_primitive_create(&prim, pd));
    DN("memory", dnnl_memory_create(&ma, &md, eng, a));
    DN("memory", dnnl_memory_create(&mb, &md, eng, b));
    DN("memory", dnnl_memory_create(&mc, &md, eng, c));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    for (int i = 0; i < warm + runs; i++) {
        double t0 = now_ms();
        DN("execute", dnnl_primitive_execute(prim, stream, 3, args));
        DN("wait", dnnl_stream_wait(stream));
        double t1 = now_ms();
        if (i >= warm) t[i - warm] = t1 - t0;
    }
    *ms = median(t, runs);
done:
    free(t);
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (stream) dnnl_stream_destroy(stream);
    if (eng) dnnl_engine_destroy(eng);
    return rc;
}

int main(int argc, char **argv)
{
    int threads = 2, runs = 20, warm = 3;
    int64_t n = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--size S] [--runs R]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || n < 1 || runs < 1) {
        fprintf(stderr, "bench_matmul: --threads, --size and --runs must be positive\n");
        return 2;
    }
    const char *pe = getenv("WEFT_PEAK_GFLOPS");
    char peak_why[160];
    double peak = pe && atof(pe) > 0 ? atof(pe) : machine_peak(threads, peak_why, sizeof peak_why);
    size_t elems = (size_t)(n * n);
    float *a = malloc(elems * sizeof(float)), *b = malloc(elems * sizeof(float));
    float *c_direct = malloc(elems * sizeof(float)), *c_weft = malloc(elems * sizeof(float));
    if (!a || !b || !c_direct || !c_weft) {
        fprintf(stderr, "bench_matmul: out of memory\n");
        return 1;
    }
    unsigned seed = 7;
    for (size_t i = 0; i < elems; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = ((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
        seed = seed * 1103515245u + 12345u;
        b[i] = ((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    double ms_w = 0, ms_d = 0;
    int rc = bench_weft(threads, n, warm, runs, a, b, &ms_w, c_weft);
    if (!rc) rc = bench_direct(threads, n, warm, runs, a, b, c_direct, &ms_d);
    if (!rc) {
        double maxdiff = 0;
        for (size_t i = 0; i < elems; i++) {
            double d = c_weft[i] - c_direct[i];
            if (d < 0) d = -d;
            if (d > maxdiff) maxdiff = d;
        }
        double flop = 2.0 * (double)n * (double)n * (double)n;
        double gw = flop / (ms_w * 1e6), gd = flop / (ms_d * 1e6);
        printf("f32 matmul %lldx%lldx%lld, %d thread(s), median of %d runs after %d warm-up\n", (long long)n,
               (long long)n, (long long)n, threads, runs, warm);
        printf("peak %.0f GFLOP/s (%s)\n", peak,
               pe ? "from WEFT_PEAK_GFLOPS" : peak_why);
        printf("weft   %9.3f ms  %8.1f GFLOP/s  %5.1f%% of peak\n", ms_w, gw, 100 * gw / peak);
        printf("direct %9.3f ms  %8.1f GFLOP/s  %5.1f%% of peak\n", ms_d, gd, 100 * gd / peak);
        printf("ratio weft/direct time %.3f\n", ms_w / ms_d);
        printf("max |weft - direct| %.3g\n", maxdiff);
    }
    free(a);
    free(b);
    free(c_direct);
    free(c_weft);
    return rc;
}
