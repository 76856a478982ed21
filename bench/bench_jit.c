/*
 * Generated elementwise kernels (level 2's "jit", lower/jit.c) against the unfused chain and the
 * memory bandwidth of a STREAM-style copy, measured in the same run on the same threads.
 *
 * The chains run on 16M f32 values (64 MB in, 64 MB out):
 *   arith: y = min(|((x * 1.5 + 0.25) max0) * 0.75 - 0.1|, 4) * -1 ... 8 ops: Mul Add Relu Mul Sub Abs
 *          Minimum Neg
 *   tanh:  the same with Tanh in place of Abs (a polynomial of ~20 flops per value)
 * Each reads x and writes y once, as the copy does, so its bandwidth is (64 + 64) MB over its time,
 * counted as STREAM counts copy: bytes read plus bytes written. The copy is a plain loop c[i] = a[i] on
 * as many threads as weft's intra-op pool (2 by default here), with ordinary stores as weft's kernels
 * make; memcpy (which may use non-temporal stores) is printed as well.
 *
 * Then the same on every other device of the context (OpenCL, CUDA), by the compute nodes' time in a
 * traced run, since those runs also upload x and download y. A CUDA GPU's reference is cudaMemcpy
 * device-to-device of the same 64 MB (the runtime loaded at run time); OpenCL's the host copy.
 *
 * Runs interleave (fused, unfused, copy) for --rounds rounds of --iterations runs each; medians are
 * printed per round, so the noise between rounds shows. Nothing is asserted.
 */
#define _DEFAULT_SOURCE
#pragma GCC optimize("no-tree-loop-distribute-patterns") /* keep the copy loop a loop, not memcpy */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/weft.h"

#define N_VALUES (16 << 20)

static void die(wf_status *s)
{
    if (!s) return;
    fprintf(stderr, "bench_jit: %s\n", wf_status_message(s));
    exit(1);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct copy_arg {
    const float *a;
    float *c;
    size_t n;
    int use_memcpy;
} copy_arg;

static void *copy_part(void *p)
{
    copy_arg *a = p;
    if (a->use_memcpy) {
        memcpy(a->c, a->a, a->n * sizeof(float));
    } else {
        const float *restrict src = a->a;
        float *restrict dst = a->c;
        for (size_t i = 0; i < a->n; i++) dst[i] = src[i];
    }
    return NULL;
}

static double copy_ms(const float *a, float *c, size_t n, int threads, int use_memcpy)
{
    pthread_t t[16];
    copy_arg args[16];
    double t0 = now_ms();
    for (int i = 0; i < threads; i++) {
        size_t b = n * (size_t)i / (size_t)threads, e = n * (size_t)(i + 1) / (size_t)threads;
        args[i] = (copy_arg){a + b, c + b, e - b, use_memcpy};
        if (i) pthread_create(&t[i], NULL, copy_part, &args[i]);
    }
    copy_part(&args[0]);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    return now_ms() - t0;
}

/* cudaMemcpy device-to-device of n floats on CUDA device `ordinal`, ms per copy (median of iters, after one
 * untimed), through
 * the CUDA runtime found at run time (this program links no CUDA); < 0 with *why when there is none. */
static double d2d_copy_ms(int ordinal, size_t n, int iters, const char **why)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        *why = "no libcudart.so on the loader's path";
        return -1;
    }
    int (*set_device)(int), (*dmalloc)(void **, size_t), (*dfree)(void *), (*sync)(void);
    int (*copy)(void *, const void *, size_t, int);
    void *f[5] = {dlsym(h, "cudaSetDevice"), dlsym(h, "cudaMalloc"), dlsym(h, "cudaFree"), dlsym(h, "cudaDeviceSynchronize"),
                  dlsym(h, "cudaMemcpy")};
    for (int i = 0; i < 5; i++)
        if (!f[i]) {
            *why = "libcudart lacks a function";
            return -1;
        }
    memcpy(&set_device, &f[0], sizeof f[0]);
    memcpy(&dmalloc, &f[1], sizeof f[1]);
    memcpy(&dfree, &f[2], sizeof f[2]);
    memcpy(&sync, &f[3], sizeof f[3]);
    memcpy(&copy, &f[4], sizeof f[4]);
    void *a = NULL, *c = NULL;
    double ms = -1, t[1000];
    *why = "cudaMalloc failed";
    if (set_device(ordinal) == 0 && dmalloc(&a, n * sizeof(float)) == 0 && dmalloc(&c, n * sizeof(float)) == 0) {
        copy(c, a, n * sizeof(float), 3); /* cudaMemcpyDeviceToDevice; the first one pays the setup */
        sync();
        for (int i = 0; i < iters; i++) {
            double t0 = now_ms();
            copy(c, a, n * sizeof(float), 3);
            sync();
            t[i] = now_ms() - t0;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp);
        ms = t[iters / 2];
    }
    if (a) dfree(a);
    if (c) dfree(c);
    /* the runtime stays loaded: unloading it under weft's own CUDA plugin is not worth the risk */
    return ms;
}

static wf_output scalar(wf_graph *g, float v)
{
    wf_output o;
    die(wf_const_scalar(g, NULL, WF_F32, v, &o));
    return o;
}

static wf_output bin(wf_graph *g, const char *op, wf_output a, wf_output b)
{
    wf_node *n;
    wf_output in[2] = {a, b};
    die(wf_op(g, op, NULL, in, 2, NULL, 0, &n));
    return (wf_output){n, 0};
}

static wf_output un(wf_graph *g, const char *op, wf_output a)
{
    wf_node *n;
    die(wf_op(g, op, NULL, &a, 1, NULL, 0, &n));
    return (wf_output){n, 0};
}

/* A graph of the 8-op chain over placeholder *x of dims; mid is Abs or Tanh. */
static wf_output chain(wf_graph **g_out, const int64_t *dims, wf_output *x, const char *mid)
{
    wf_graph *g;
    die(wf_graph_new(&g));
    die(wf_placeholder(g, "x", WF_F32, 1, dims, x));
    *g_out = g;
    wf_output v = bin(g, "Mul", *x, scalar(g, 1.5f));
    v = bin(g, "Add", v, scalar(g, 0.25f));
    v = un(g, "Relu", v);
    v = bin(g, "Mul", v, scalar(g, 0.75f));
    v = bin(g, "Sub", v, scalar(g, 0.1f));
    v = un(g, mid, v);
    v = bin(g, "Minimum", v, scalar(g, 4.0f));
    return un(g, "Neg", v);
}

static double run_ms(wf_session *s, wf_feed *f, wf_output y)
{
    wf_tensor *out = NULL;
    double t0 = now_ms();
    die(wf_session_run(s, f, 1, &y, 1, &out, NULL));
    double dt = now_ms() - t0;
    wf_tensor_free(out);
    return dt;
}

int main(int argc, char **argv)
{
    int rounds = 3, iters = 10;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations")) iters = atoi(argv[++i]);
    }
    if (rounds < 1 || iters < 1 || iters > 1000) {
        fprintf(stderr, "usage: bench_jit [--rounds R] [--iterations I]\n");
        return 2;
    }
    wf_context *ctx;
    die(wf_context_new(NULL, &ctx));
    wf_device_info di;
    die(wf_context_device(ctx, 0, &di));
    int threads = di.threads;
    if (threads < 1 || threads > 16) threads = threads < 1 ? 1 : 16;
    size_t n = N_VALUES;
    float *a = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
    if (!a || !c) return 1;
    for (size_t i = 0; i < n; i++) a[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f, c[i] = 0;
    wf_tensor *xt;
    int64_t dims[1] = {(int64_t)n};
    die(wf_tensor_new(WF_F32, 1, dims, a, &xt));
    double mb = 2.0 * (double)n * sizeof(float) / 1e6; /* read + written, as STREAM counts copy */
    printf("8-op elementwise chains on %zu f32 values (%.0f MB read + written per run), %d intra-op threads, %s\n", n,
           mb, threads, di.name);
    printf("%-6s %5s %12s %12s %12s %12s | %8s %8s %10s\n", "chain", "round", "fused ms", "unfused ms", "copy ms",
           "memcpy ms", "GB/s", "%copy", "x unfused");
    const char *mids[2] = {"Abs", "Tanh"};
    for (int m = 0; m < 2; m++) {
        wf_graph *g;
        wf_output x, y = chain(&g, dims, &x, mids[m]);
        wf_session_options fo, uo;
        wf_session_options_init(&fo);
        wf_session_options_init(&uo);
        uo.disable_passes = "jit";
        wf_session *fs, *us;
        die(wf_session_new(ctx, g, &fo, &fs));
        die(wf_session_new(ctx, g, &uo, &us));
        wf_feed f = {x, xt};
        /* the plans, and one check that both give the same values */
        wf_tensor *o1 = NULL, *o2 = NULL;
        die(wf_session_run(fs, &f, 1, &y, 1, &o1, NULL));
        die(wf_session_run(us, &f, 1, &y, 1, &o2, NULL));
        const float *p1 = wf_tensor_data(o1), *p2 = wf_tensor_data(o2);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += memcmp(&p1[i], &p2[i], sizeof(float)) != 0;
        char *pl = NULL;
        die(wf_session_placement(fs, &f, 1, &y, 1, &pl));
        int fused_nodes = 0;
        for (char *p = pl; p && (p = strstr(p, "FusedElementwise+")); p++) fused_nodes++;
        wf_free(pl);
        wf_tensor_free(o1);
        wf_tensor_free(o2);
        for (int r = 0; r < rounds; r++) {
            double tf[1000], tu[1000], tc[1000], tm[1000];
            /* each measurement starts from idle cores: weft's intra-op threads spin a while after a
             * kernel, and would take a core from a copy that starts at once */
            for (int i = 0; i < iters; i++) {
                usleep(20000);
                tf[i] = run_ms(fs, &f, y);
                usleep(20000);
                tu[i] = run_ms(us, &f, y);
                usleep(20000);
                tc[i] = copy_ms(a, c, n, threads, 0);
                usleep(20000);
                tm[i] = copy_ms(a, c, n, threads, 1);
            }
            qsort(tf, (size_t)iters, sizeof *tf, cmp);
            qsort(tu, (size_t)iters, sizeof *tu, cmp);
            qsort(tc, (size_t)iters, sizeof *tc, cmp);
            qsort(tm, (size_t)iters, sizeof *tm, cmp);
            double F = tf[iters / 2], U = tu[iters / 2], C = tc[iters / 2], M = tm[iters / 2];
            printf("%-6s %5d %12.2f %12.2f %12.2f %12.2f | %8.2f %7.0f%% %9.2fx\n", m ? "tanh" : "arith", r + 1, F, U,
                   C, M, mb / F, 100.0 * C / F, U / F);
        }
        printf("%-6s (fused plan: %d FusedElementwise node%s; %zu of %zu values differ from the unfused plan's in any bit)\n",
               m ? "tanh" : "arith", fused_nodes, fused_nodes == 1 ? "" : "s", differ, n);
        wf_session_free(fs);
        wf_session_free(us);
        wf_graph_free(g);
    }
    /* The other devices (OpenCL): the same chains, kernel time only. Their runs upload x and download
     * y, which say nothing of the kernels, so a traced run gives the time of the compute nodes (tracing
     * waits for each node to finish on the device). */
    for (int dv = 1; dv < wf_context_num_devices(ctx); dv++) {
        wf_device_info od;
        if (wf_context_device(ctx, dv, &od)) continue;
        printf("\n%s (%s, %s): kernel time of the chains' compute nodes in a traced run, copies left out\n",
               od.name, od.type, od.description ? od.description : "");
        bool gpu = !strcmp(od.type, "GPU"), d2d_said = false;
        printf("%-6s %5s %12s %12s %12s | %8s %8s %10s\n", "chain", "round", "fused ms", "unfused ms", "copy ms", "GB/s",
               "%copy", "x unfused");
        for (int m = 0; m < 2; m++) {
            wf_graph *g;
            wf_output x, y = chain(&g, dims, &x, mids[m]);
            wf_session *ss[2];
            for (int k = 0; k < 2; k++) {
                wf_session_options o;
                wf_session_options_init(&o);
                o.device = od.name;
                o.disable_passes = k ? "jit" : NULL;
                die(wf_session_new(ctx, g, &o, &ss[k]));
            }
            wf_feed f = {x, xt};
            for (int r = 0; r < rounds; r++) {
                double t[2][1000], tc[1000];
                for (int i = 0; i < iters; i++) {
                    for (int k = 0; k < 2; k++) {
                        wf_trace *tr = NULL;
                        wf_run_options ro = {&tr};
                        wf_tensor *out = NULL;
                        usleep(20000);
                        die(wf_session_run(ss[k], &f, 1, &y, 1, &out, &ro));
                        wf_tensor_free(out);
                        double ns = 0;
                        for (int e = 0; e < wf_trace_num_events(tr); e++) {
                            wf_trace_event ev = wf_trace_event_at(tr, e);
                            if (!ev.is_copy && ev.device_index == dv) ns += (double)(ev.end_ns - ev.start_ns);
                        }
                        t[k][i] = ns / 1e6;
                        wf_trace_free(tr);
                    }
                    usleep(20000);
                    const char *why = "";
                    tc[i] = gpu ? d2d_copy_ms(0, n, 1, &why) : copy_ms(a, c, n, threads, 0);
                    if (tc[i] < 0 && !d2d_said) printf("(cudaMemcpy not measured: %s)\n", why);
                    if (tc[i] < 0) d2d_said = true;
                }
                qsort(t[0], (size_t)iters, sizeof(double), cmp);
                qsort(t[1], (size_t)iters, sizeof(double), cmp);
                qsort(tc, (size_t)iters, sizeof(double), cmp);
                double F = t[0][iters / 2], U = t[1][iters / 2], C = tc[iters / 2];
                printf("%-6s %5d %12.2f %12.2f %12.2f | %8.2f %7.0f%% %9.2fx\n", m ? "tanh" : "arith", r + 1, F, U, C,
                       mb / F, 100.0 * C / F, U / F);
            }
            wf_session_free(ss[0]);
            wf_session_free(ss[1]);
            wf_graph_free(g);
        }
        printf(gpu ? "(copy: cudaMemcpy device-to-device of the same bytes on CUDA device 0, median of each round's "
                     "iterations)\n"
                   : "(copy: the host's STREAM-style copy, the memory an OpenCL CPU device such as PoCL works in)\n");
    }
    wf_tensor_free(xt);
    wf_context_free(ctx);
    free(a);
    free(c);
    return 0;
}
