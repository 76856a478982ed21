/* Plugins that fail on purpose, one per BAD_KIND: the core must come up with the CPU and a diagnostic
 * each time. Built three times with different -DBAD_KIND values. */
#include "device/device_impl.h"

#if BAD_KIND == 1
/* no driver: the entry point reports why */
__attribute__((visibility("default"))) wf_status *wf_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt,
                                                                  void **backend)
{
    return host->status(WF_UNAVAILABLE, "libfakedriver.so.1 not found (simulated)");
}
#elif BAD_KIND == 2
/* built for another ABI version */
static int zero(void *b) { return 0; }
static void destroy(void *b) {}
static const wf_backend_vtable g_vt = {.abi_version = 999, .size = sizeof(wf_backend_vtable), .name = "badversion",
                                       .device_count = zero, .destroy = destroy};
__attribute__((visibility("default"))) wf_status *wf_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt,
                                                                  void **backend)
{
    *vt = &g_vt;
    *backend = NULL;
    return NULL;
}
#else
/* no entry point at all */
__attribute__((visibility("default"))) int not_a_backend(void) { return 42; }
#endif
