/* cuBLAS loaded at run time (src/backends/cuda/cuda_blas.c), built here against the real CUDA toolkit:
 * nothing of cuBLAS is mapped before cu_blas_load(); the load resolves every entry of the table from
 * libcublas.so.<major> (the symbol names behind cublas_v2.h's macros, e.g. cublasCreate_v2); and the
 * calls reach the library. Needs the toolkit, not a GPU (the plugin calls the loader only once it has
 * found one, so without this test a GPU-less CI would never run it); skipped where the real CUDA
 * plugin is not built. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#include "check.h"
#include "testutil.h"

#ifdef WEFT_TEST_HAVE_CUDA
#include "backends/cuda/cuda.h"

static void test_load_resolves_the_table(void)
{
    CHECK(!mapped("libcublas"));
    const char *why = cu_blas_load();
    if (why) CHECK_FAIL_("cu_blas_load: %s", why);
    if (why) return;
    CHECK(mapped("libcublas"));
    CHECK(cu_blas_load() == NULL); /* once per process, and stays loaded */
#define X(field, fn) CHECK(cu_blas.field != NULL);
    CU_BLAS_FUNCS(X)
#undef X
    /* the library's own strings, so the pointers are its functions */
    CHECK_STR_CONTAINS(cu_blas.status_string(CUBLAS_STATUS_NOT_INITIALIZED), "not initialized");
    CHECK_STR_CONTAINS(cu_blas.status_string(CUBLAS_STATUS_ALLOC_FAILED), "alloc");
    /* a handle: with a GPU it is made (and destroyed); without a driver cuBLAS says it cannot start */
    cublasHandle_t h = NULL;
    cublasStatus_t st = cu_blas.create(&h);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) CHECK_INT(st, CUBLAS_STATUS_NOT_INITIALIZED);
    else dlclose(drv);
    CHECK(st == CUBLAS_STATUS_SUCCESS || st == CUBLAS_STATUS_NOT_INITIALIZED);
    if (st == CUBLAS_STATUS_SUCCESS) CHECK_INT(cu_blas.destroy(h), CUBLAS_STATUS_SUCCESS);
}
#endif

int main(void)
{
#ifdef WEFT_TEST_HAVE_CUDA
    RUN_TEST(test_load_resolves_the_table);
#else
    CHECK_SKIP("test_cuda_blas", "the real CUDA plugin is not built here, so there is no cuda_blas.c to test");
    check_skipped_++;
#endif
    return check_summary();
}
