/*
 * Backend plugins: libweft-<name>.so found through WEFT_PLUGIN_PATH (colon-separated folders), the
 * folder of the running program, and the install folder, loaded with dlopen when a context is
 * created. A plugin that is missing ("not found"), fails to load or has another ABI version ("failed"),
 * or finds no driver or device ("unavailable") becomes a diagnostic (`weft devices --verbose`), never
 * an error of the context. A plugin should probe for its driver before it loads anything heavy (the
 * CUDA plugin loads cuBLAS only after finding a device): every weft process that finds it pays for
 * what its load costs.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "device/device.h"

#ifndef WEFT_PLUGIN_INSTALL_DIR
#define WEFT_PLUGIN_INSTALL_DIR "/usr/local/lib/weft"
#endif

static const char *const g_known[] = {"opencl", "cuda"};

static wf_status *host_kctx_fail(const wf__kctx *k, wf_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wf__kctx_fail(k, code, "%s", msg);
}

const wf_host_api wf__host_api = {
    .abi_version = WF_BACKEND_ABI_VERSION,
    .size = sizeof(wf_host_api),
    .status = wf__status,
    .malloc = wf__malloc,
    .free = wf__free,
    .kctx_output = wf__kctx_output,
    .kctx_output_view = wf__kctx_output_view,
    .kctx_fail = host_kctx_fail,
    .kctx_lock_state = wf__kctx_lock_state,
    .kctx_unlock_state = wf__kctx_unlock_state,
    .attr_get = wf__attr_get,
    .now_ns = wf__now_ns,
    .tensor_ref = wf_tensor_ref,
    .tensor_free = wf_tensor_free,
    .status_free = wf_status_free,
    .status_message = wf_status_message,
    .kctx_output_reuse = wf__kctx_output_reuse,
};

/* The folders searched, in order. */
static int search_dirs(char dirs[][PATH_MAX], int max)
{
    int n = 0;
    const char *env = getenv("WEFT_PLUGIN_PATH");
    while (env && *env && n < max) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        if (len && len < PATH_MAX) {
            memcpy(dirs[n], env, len);
            dirs[n++][len] = 0;
        }
        env = colon ? colon + 1 : NULL;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0 && n < max) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(dirs[n++], PATH_MAX, "%s", exe);
        }
    }
    if (n < max) snprintf(dirs[n++], PATH_MAX, "%s", WEFT_PLUGIN_INSTALL_DIR);
    return n;
}

static wf_status *add_plugin(wf_context *c, const char *name, const char *path, const char *status,
                             const char *reason, wf__plugin **out)
{
    wf__plugin *pl = wf__realloc(c->plugins, sizeof *pl * (size_t)c->n_plugins, sizeof *pl * (size_t)(c->n_plugins + 1));
    if (!pl) return wf__oom("plugin diagnostics", sizeof *pl);
    c->plugins = pl;
    wf__plugin *p = &pl[c->n_plugins++];
    memset(p, 0, sizeof *p);
    p->name = wf__strdup(name);
    p->path = wf__strdup(path);
    p->status = wf__strdup(status);
    p->reason = wf__strdup(reason ? reason : "");
    if (!p->name || !p->path || !p->status || !p->reason) return wf__oom("plugin diagnostics", 256);
    if (out) *out = p;
    return NULL;
}

static wf_status *add_devices(wf_context *c, wf__plugin *p)
{
    int n = p->vt->device_count(p->backend);
    for (int i = 0; i < n; i++) {
        wf_backend_device_info info;
        memset(&info, 0, sizeof info);
        wf_status *s = p->vt->device_info(p->backend, i, &info);
        void *dev = NULL;
        if (!s) s = p->vt->device_open(p->backend, i, &dev);
        if (s) {
            /* one bad device does not hide the others */
            char *old = p->reason;
            size_t len = strlen(old) + strlen(wf_status_message(s)) + 64;
            p->reason = wf__malloc(len);
            if (p->reason) snprintf(p->reason, len, "%s%sdevice %d: %s", old, *old ? "; " : "", i, wf_status_message(s));
            wf__free(old);
            wf_status_free(s);
            if (!p->reason) return wf__oom("plugin diagnostics", len);
            continue;
        }
        struct wf__device *d = wf__realloc(c->devices, sizeof *d * (size_t)c->n_devices, sizeof *d * (size_t)(c->n_devices + 1));
        if (!d) {
            p->vt->device_close(dev);
            return wf__oom("the device list", sizeof *d);
        }
        c->devices = d;
        /* a device's type points into its own info, which the realloc may have moved */
        for (int k = 0; k < c->n_devices; k++) d[k].type = d[k].info.type;
        struct wf__device *dv = &d[c->n_devices];
        memset(dv, 0, sizeof *dv);
        dv->info = info;
        dv->info.type[sizeof dv->info.type - 1] = 0;
        dv->info.description[sizeof dv->info.description - 1] = 0;
        dv->type = dv->info.type;
        int index = 0;
        for (int k = 0; k < c->n_devices; k++) index += !strcmp(c->devices[k].type, dv->type);
        char buf[256];
        snprintf(buf, sizeof buf, "/job:localhost/replica:0/task:0/device:%s:%d", dv->type, index);
        dv->name = wf__strdup(buf);
        snprintf(buf, sizeof buf, "%s:%d", dv->type, index);
        dv->short_name = wf__strdup(buf);
        dv->description = wf__strdup(info.description);
        dv->backend = p->name;
        dv->compute_units = info.compute_units;
        /* a device in host memory computes on the cores the intra-op threads use */
        dv->threads = info.host_memory ? c->intra.threads : 1;
        dv->memory_bytes = info.memory_bytes;
        if (info.host_memory)
            wf__perf_default_cpu(dv);
        else
            wf__perf_default_backend(dv);
        dv->vt = p->vt;
        dv->dev = dev;
        c->n_devices++; /* counted now so that context teardown closes it whatever happens next */
        if (!dv->name || !dv->short_name || !dv->description) return wf__oom("the device list", 256);
        if (!(dv->enqueue_mu = wf__malloc(sizeof *dv->enqueue_mu))) return wf__oom("the device list", sizeof *dv->enqueue_mu);
        pthread_mutex_init(dv->enqueue_mu, NULL);
        if (info.host_memory) {
            /* host tensors come from the tensor allocator; the device only counts their bytes */
            if (!(dv->host_acct = wf__memacct_new())) return wf__oom("the device list", sizeof(wf__memacct));
        } else {
            wf__bfc_backend be = {p->vt->chunk_alloc, p->vt->chunk_free, dev};
            WF__TRY(wf__bfc_new(dv->short_name, 0, info.alignment, be, &dv->bfc));
        }
        p->n_devices++;
    }
    if (!p->n_devices && !*p->reason) {
        wf__free(p->reason);
        p->reason = wf__strdup("the backend found no device");
        if (!p->reason) return wf__oom("plugin diagnostics", 64);
    }
    return NULL;
}

/* Whether vt is a table this core can use; why: what is wrong with it. */
static bool table_ok(const wf_backend_vtable *vt, char *why, size_t n)
{
    *why = 0;
    if (!vt)
        snprintf(why, n, "the backend returned no function table");
    else if (vt->abi_version != WF_BACKEND_ABI_VERSION)
        snprintf(why, n, "built for backend ABI version %u; this weft speaks version %d", vt->abi_version,
                 WF_BACKEND_ABI_VERSION);
    else if (vt->size < offsetof(wf_backend_vtable, destroy) + sizeof vt->destroy || !vt->device_count ||
             !vt->device_info || !vt->device_open || !vt->device_close || !vt->chunk_alloc || !vt->chunk_free ||
             !vt->copy_to_device || !vt->copy_to_host || !vt->find_kernel || !vt->destroy)
        snprintf(why, n, "its function table is incomplete");
    return !*why;
}

wf_status *wf__plugins_add_builtin(wf_context *c)
{
    wf__plugin *p = &c->builtin;
    memset(p, 0, sizeof *p);
    char why[256];
    wf_status *s = wf__cpu_backend_entry(&wf__host_api, &p->vt, &p->backend);
    if (!s && !table_ok(p->vt, why, sizeof why)) s = wf__status(WF_INTERNAL, "the CPU backend: %s", why);
    if (s) {
        p->vt = NULL;
        return s;
    }
    p->name = wf__strdup(p->vt->name);
    p->path = wf__strdup("");
    p->status = wf__strdup("built in");
    p->reason = wf__strdup("");
    if (!p->name || !p->path || !p->status || !p->reason) return wf__oom("the CPU backend", 64);
    WF__TRY(add_devices(c, p));
    if (!p->n_devices) return wf__status(WF_INTERNAL, "the CPU backend opened no device: %s", p->reason);
    return NULL;
}

static wf_status *load_one(wf_context *c, const char *name, const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return add_plugin(c, name, path, "failed", dlerror(), NULL);
    wf_backend_entry_fn entry = (wf_backend_entry_fn)(uintptr_t)dlsym(h, WF_BACKEND_ENTRY);
    if (!entry) {
        dlclose(h);
        return add_plugin(c, name, path, "failed", "the library has no " WF_BACKEND_ENTRY " symbol", NULL);
    }
    const wf_backend_vtable *vt = NULL;
    void *backend = NULL;
    wf_status *s = entry(&wf__host_api, &vt, &backend);
    if (s) {
        /* UNAVAILABLE is the backend's probe finding no driver or device: nothing is wrong with weft or
         * the plugin, so it is not reported as a failure */
        const char *status = wf_status_code(s) == WF_UNAVAILABLE ? "unavailable" : "failed";
        wf_status *d = add_plugin(c, name, path, status, wf_status_message(s), NULL);
        wf_status_free(s);
        dlclose(h);
        return d;
    }
    char why[256];
    if (!table_ok(vt, why, sizeof why)) {
        if (vt && vt->destroy && vt->abi_version == WF_BACKEND_ABI_VERSION) vt->destroy(backend);
        dlclose(h);
        return add_plugin(c, name, path, "failed", why, NULL);
    }
    wf__plugin *p;
    s = add_plugin(c, name, path, "loaded", "", &p);
    if (s) {
        vt->destroy(backend);
        dlclose(h);
        return s;
    }
    p->handle = h;
    p->vt = vt;
    p->backend = backend;
    return add_devices(c, p);
}

static bool exists(const char *path) { return access(path, R_OK) == 0; }

wf_status *wf__plugins_load(wf_context *c)
{
    char dirs[16][PATH_MAX];
    int nd = search_dirs(dirs, 16);
    /* the known backends, first match wins */
    for (size_t k = 0; k < sizeof g_known / sizeof g_known[0]; k++) {
        char path[PATH_MAX * 2];
        bool found = false;
        for (int i = 0; i < nd && !found; i++) {
            snprintf(path, sizeof path, "%.4095s/libweft-%s.so", dirs[i], g_known[k]);
            if (exists(path)) {
                found = true;
                WF__TRY(load_one(c, g_known[k], path));
            }
        }
        if (!found) {
            wf__str where = {0};
            for (int i = 0; i < nd; i++) wf__str_appendf(&where, "%s%s", i ? ":" : "", dirs[i]);
            char reason[128];
            snprintf(reason, sizeof reason, "libweft-%s.so is in none of the searched folders", g_known[k]);
            wf_status *s = add_plugin(c, g_known[k], where.p ? where.p : "", "not found", reason, NULL);
            wf__str_free(&where);
            if (s) return s;
        }
    }
    /* any other libweft-*.so in WEFT_PLUGIN_PATH (test backends, third-party ones) */
    const char *env = getenv("WEFT_PLUGIN_PATH");
    int n_env = 0;
    while (env && *env) {
        n_env++;
        const char *colon = strchr(env, ':');
        env = colon ? colon + 1 : NULL;
    }
    for (int i = 0; i < n_env && i < nd; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            const char *nm = e->d_name;
            size_t len = strlen(nm);
            if (strncmp(nm, "libweft-", 8) || len < 12 || strcmp(nm + len - 3, ".so")) continue;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len - 11), nm + 8);
            bool known = false;
            for (size_t k = 0; k < sizeof g_known / sizeof g_known[0]; k++) known |= !strcmp(name, g_known[k]);
            if (known) continue;
            char path[PATH_MAX * 2 + 300];
            snprintf(path, sizeof path, "%.4095s/%.255s", dirs[i], nm);
            wf_status *s = load_one(c, name, path);
            if (s) {
                closedir(d);
                return s;
            }
        }
        if (d) closedir(d);
    }
    return NULL;
}

static void plugin_free(wf__plugin *p)
{
    if (p->vt) p->vt->destroy(p->backend);
    if (p->handle) dlclose(p->handle);
    wf__free(p->name);
    wf__free(p->path);
    wf__free(p->status);
    wf__free(p->reason);
}

void wf__plugins_unload(wf_context *c)
{
    for (int i = 0; i < c->n_plugins; i++) plugin_free(&c->plugins[i]);
    wf__free(c->plugins);
    c->plugins = NULL;
    c->n_plugins = 0;
    plugin_free(&c->builtin);
    memset(&c->builtin, 0, sizeof c->builtin);
}
