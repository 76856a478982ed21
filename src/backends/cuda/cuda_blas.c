/*
 * cuBLAS at run time: the plugin resolves the few cuBLAS calls it makes with dlopen + dlsym, and only
 * after wf_backend_entry has found a driver and a device. Linking cuBLAS at load time (as the plugin
 * once did) made the dynamic loader relocate libcublas and libcublasLt in every weft process that found
 * the plugin: about 210 MB of peak memory and 0.1-0.2 s, only to report "no CUDA driver". The toolkit's
 * library folder is the plugin's RUNPATH (cmake/cuda.cmake), so the dlopen finds the same cuBLAS that
 * the link used to.
 *
 * This is a function table rather than a thin plugin that loads a heavy one beside it: five calls are
 * all the plugin needs, the probe stays where it was (wf_backend_entry), and one library is installed.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"

cu_blas_api cu_blas;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const char *g_why = "cuBLAS was not loaded";

#ifdef WEFT_CUDA_EMU

/* The emulator's cuBLAS is part of its runtime, linked into the plugin (tests/cudaemu/cudaemu_runtime.cc). */
static void load(void)
{
#define X(field, fn) cu_blas.field = fn;
    CU_BLAS_FUNCS(X)
#undef X
    g_why = NULL;
}

#else

static char g_why_buf[300];

#define CU_STR_(x) #x
#define CU_STR(x) CU_STR_(x) /* expands its argument first: cublasCreate is a macro for cublasCreate_v2 */

#ifdef CUBLAS_VER_MAJOR
#define CU_BLAS_SONAME "libcublas.so." CU_STR(CUBLAS_VER_MAJOR) /* the major version the headers declare */
#else
#define CU_BLAS_SONAME "libcublas.so"
#endif

static void load(void)
{
    void *h = dlopen(CU_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (!e || strstr(e, "No such file"))
            snprintf(g_why_buf, sizeof g_why_buf, "cuBLAS not found (%s)", CU_BLAS_SONAME);
        else
            snprintf(g_why_buf, sizeof g_why_buf, "cuBLAS (%s) failed to load: %.200s", CU_BLAS_SONAME, e);
        g_why = g_why_buf;
        return;
    }
    cu_blas_api t;
    /* through a void * so that the function-pointer conversion is explicit (ISO C has none from void *) */
#define X(field, fn)                                                                                               \
    {                                                                                                              \
        void *p = dlsym(h, CU_STR(fn));                                                                            \
        if (!p) {                                                                                                  \
            snprintf(g_why_buf, sizeof g_why_buf, "%s lacks %s", CU_BLAS_SONAME, CU_STR(fn));                      \
            g_why = g_why_buf;                                                                                     \
            dlclose(h);                                                                                            \
            return;                                                                                                \
        }                                                                                                          \
        memcpy(&t.field, &p, sizeof p);                                                                            \
    }
    CU_BLAS_FUNCS(X)
#undef X
    /* kept loaded for the life of the process, like cuDNN: the handles of every context use it */
    cu_blas = t;
    g_why = NULL;
}

#endif

const char *cu_blas_load(void)
{
    pthread_once(&g_once, load);
    return g_why;
}
