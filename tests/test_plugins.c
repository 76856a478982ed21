/* Backend plugins: broken ones (no driver, wrong ABI version, no entry point) leave a context with the
 * CPU and a diagnostic each; the test backend's devices appear with TensorFlow-style names. */
#include <stdlib.h>

#include "check.h"

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
    const wf_plugin_info *pi = find_plugin(c, "noinit", &p);
    CHECK(pi && !strcmp(pi->status, "failed"));
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

int main(void)
{
    RUN_TEST(test_bad_plugins);
    RUN_TEST(test_testdev_devices);
    return check_summary();
}
