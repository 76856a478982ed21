/* Backend plugins: broken ones (no driver, wrong ABI version, no entry point) leave a context with the
 * CPU and a diagnostic each, a missing driver as "unavailable" and the others as "failed"; the real CUDA
 * plugin on a machine without a driver costs no cuBLAS load; the test backend's devices appear with
 * TensorFlow-style names. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "device/device.h"
#include "device/device_impl.h"
#include "testutil.h"

static const wf_plugin_info *find_plugin(wf_context *c, const char *name, wf_plugin_info *buf)
{
    for (int i = 0; i < wf_context_num_plugins(c); i++) {
        CHECK_OK(wf_context_plugin(c, i, buf));
        if (!strcmp(buf->name, name)) return buf;
    }
    return NULL;
}

static void test_bad_plugins(void)
{
    setenv("WEFT_PLUGIN_PATH", WEFT_BAD_PLUGIN_DIR, 1);
    wf_context *c = NULL;
    CHECK_OK(wf_context_new(NULL, &c));
    if (!c) return;
    CHECK_INT(wf_context_num_devices(c), 1);
    wf_device_info d;
    CHECK_OK(wf_context_device(c, 0, &d));
    CHECK(!strcmp(d.name, "/job:localhost/replica:0/task:0/device:CPU:0"));
    wf_plugin_info p;
    /* its entry point says UNAVAILABLE: a missing driver is not a failure */
    const wf_plugin_info *pi = find_plugin(c, "noinit", &p);
    CHECK(pi && !strcmp(pi->status, "unavailable") && pi->n_devices == 0);
    if (pi) CHECK_STR_CONTAINS(pi->reason, "libfakedriver.so.1 not found");
    pi = find_plugin(c, "badversion", &p);
    CHECK(pi && !strcmp(pi->status, "failed"));
    if (pi) CHECK_STR_CONTAINS(pi->reason, "built for backend ABI version 999");
    pi = find_plugin(c, "noentry", &p);
    CHECK(pi && !strcmp(pi->status, "failed"));
    if (pi) CHECK_STR_CONTAINS(pi->reason, "no wf_backend_entry symbol");
    /* the known backends are reported even when absent from this folder */
    pi = find_plugin(c, "cuda", &p);
    CHECK(pi != NULL);
    /* the CPU still runs things */
    wf_graph *g;
    wf_session *s;
    wf_output x, y;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
    CHECK_OK(wf_relu(g, "y", x, &y));
    CHECK_OK(wf_session_new(c, g, NULL, &s));
    float v = -3;
    wf_tensor *t, *o = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, &v, &t));
    wf_feed f = {x, t};
    CHECK_OK(wf_session_run(s, &f, 1, &y, 1, &o, NULL));
    if (o) CHECK(((float *)wf_tensor_data(o))[0] == 0);
    wf_tensor_free(o);
    wf_tensor_free(t);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(c);
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

/* The CUDA plugin this build made (WEFT_TEST_CUDA_PLUGIN overrides it, e.g. to try another build's). */
static const char *cuda_plugin(void)
{
    const char *env = getenv("WEFT_TEST_CUDA_PLUGIN");
    return env && *env ? env : WEFT_CUDA_PLUGIN;
}

/* The real CUDA plugin alone in the plugin path. Without a driver or device it is "unavailable", says
 * why, and has not loaded cuBLAS (libcublas + libcublasLt were ~210 MB of peak memory when the plugin
 * linked them); with a GPU it is "loaded" and cuBLAS is in. */
static void test_cuda_plugin_probe_first(void)
{
    char dir[] = "/tmp/weft-cuda-plugin-XXXXXX", link[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(link, sizeof link, "%s/libweft-cuda.so", dir);
    CHECK(symlink(cuda_plugin(), link) == 0);
    setenv("WEFT_PLUGIN_PATH", dir, 1);
    bool blas_before = mapped("libcublas");
    long rss_before = peak_rss_kb();
    wf_context *c = NULL;
    CHECK_OK(wf_context_new(NULL, &c));
    long rss_growth = peak_rss_kb() - rss_before;
    wf_plugin_info p;
    const wf_plugin_info *pi = c ? find_plugin(c, "cuda", &p) : NULL;
    CHECK(pi != NULL);
    CHECK(!blas_before);
    if (pi && !strcmp(pi->status, "loaded")) {
        fprintf(stderr, "  (a CUDA device is present: %d device(s); checking that cuBLAS was loaded)\n", pi->n_devices);
        CHECK(pi->n_devices > 0);
        CHECK(mapped("libcublas"));
    } else if (pi) {
        CHECK(!strcmp(pi->status, "unavailable"));
        /* the probe's words: no driver at all, or a driver without a device */
        if (!strstr(pi->reason, "no CUDA device")) CHECK_STR_CONTAINS(pi->reason, "no CUDA driver");
        CHECK(!mapped("libcublas"));
        /* the plugin itself (its static runtime, its device code) may cost a little, not cuBLAS's 200 MB */
        if (rss_growth >= 64 * 1024) CHECK_FAIL_("creating the context grew the peak RSS by %ld KB (limit 65536 KB)", rss_growth);
        fprintf(stderr, "  (cuda: %s: %s; peak RSS grew by %ld KB)\n", pi->status, pi->reason, rss_growth);
        /* where this process cannot open the driver either (after the checks above, which it would disturb),
         * the reason is exactly the missing file */
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (drv) dlclose(drv);
        else CHECK(!strcmp(pi->reason, "no CUDA driver (libcuda.so.1 not found)"));
    }
    wf_context_free(c);
    unlink(link);
    rmdir(dir);
    unsetenv("WEFT_PLUGIN_PATH");
}

static void test_testdev_devices(void)
{
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1);
    wf_context *c = NULL;
    CHECK_OK(wf_context_new(NULL, &c));
    if (!c) return;
    CHECK_INT(wf_context_num_devices(c), 3);
    wf_device_info d;
    CHECK_OK(wf_context_device(c, 1, &d));
    CHECK(!strcmp(d.name, "/job:localhost/replica:0/task:0/device:TESTDEV:0"));
    CHECK(!strcmp(d.backend, "testdev"));
    CHECK_OK(wf_context_device(c, 2, &d));
    CHECK(!strcmp(d.name, "/job:localhost/replica:0/task:0/device:TESTDEV:1"));
    wf_plugin_info p;
    const wf_plugin_info *pi = find_plugin(c, "testdev", &p);
    CHECK(pi && !strcmp(pi->status, "loaded") && pi->n_devices == 2);
    wf_context_free(c);
    unsetenv("WEFT_PLUGIN_PATH");
}

/* The CPU is a backend like the plugins' (issue 13): device 0 is opened through the built-in backend's
 * table, answers find_kernel with the CPU registry's kernels and copies with its own calls, and is told
 * apart only by what its info declares (host memory), not by a missing table. The test backend, built
 * before host_memory meant anything to it, declares device memory by leaving it 0. */
static void test_cpu_is_a_backend(void)
{
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1);
    wf_context *c = NULL;
    CHECK_OK(wf_context_new(NULL, &c));
    if (!c) return;
    const struct wf__device *d = &c->devices[0];
    CHECK(d->vt && !strcmp(d->vt->name, "builtin") && d->vt->abi_version == WF_BACKEND_ABI_VERSION);
    CHECK(!strcmp(d->type, "CPU") && !strcmp(d->short_name, "CPU:0") && !strcmp(d->backend, "builtin"));
    CHECK_INT(d->info.host_memory, 1);
    CHECK(d->host_acct && !d->bfc && d->dev);
    wf__tinfo in[2] = {{.dtype = WF_F32, .rank = 0}, {.dtype = WF_F32, .rank = 0}}, out = {.dtype = WF_F32, .rank = 0};
    const wf__kernel_def *k = d->vt->find_kernel(d->dev, "Add", in, 2, &out);
    CHECK(k && k == wf__kernel_find("Add", "CPU", in, 2, &out));
    CHECK(d->vt->find_kernel(d->dev, "NoSuchOp", in, 2, &out) == NULL);
    float src[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    void *chunk = d->vt->chunk_alloc(d->dev, 64);
    CHECK(chunk != NULL);
    if (chunk) {
        CHECK_OK(d->vt->copy_to_device(d->dev, chunk, 8, src, sizeof src));
        CHECK_OK(d->vt->copy_to_host(d->dev, back, chunk, 8, sizeof back));
        CHECK(!memcmp(src, back, sizeof src));
        d->vt->chunk_free(d->dev, chunk);
    }
    for (int i = 1; i < c->n_devices; i++) CHECK(c->devices[i].vt && !c->devices[i].info.host_memory);
    wf_plugin_info p;
    CHECK(find_plugin(c, "builtin", &p) == NULL); /* not listed among the plugins */
    wf_context_free(c);
    unsetenv("WEFT_PLUGIN_PATH");
}

int main(void)
{
    RUN_TEST(test_cpu_is_a_backend);
    RUN_TEST(test_bad_plugins);
    if (access(cuda_plugin(), R_OK) == 0)
        RUN_TEST(test_cuda_plugin_probe_first);
    else {
        CHECK_SKIP("test_cuda_plugin_probe_first", "%s was not built (no nvcc, -DWEFT_CUDA=OFF or a sanitizer build; "
                   "WEFT_TEST_CUDA_PLUGIN may name another build's)", cuda_plugin());
        check_skipped_++;
    }
    RUN_TEST(test_testdev_devices);
    return check_summary();
}
