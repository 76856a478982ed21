/*
 * Private to the OpenCL shape kernels (ocl_shape.c, ocl_shape_index.c): host-side helpers (reading
 * small device tensors back, shapes in messages) and the launchers of the byte-moving kernels, which
 * are compiled once per element size (1, 2, 4, 8 bytes) so that every dtype shares them.
 */
#ifndef WF_OCL_SHAPE_H
#define WF_OCL_SHAPE_H

#include "backends/opencl/ocl.h"

#define OCL_SB 160
static inline bool ocl_shp_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

const char *ocl_shp_dtname(wf_dtype t);
const char *ocl_shp_shape(int rank, const int64_t *dims, char *buf);
bool ocl_shp_axis(int64_t axis, int rank, int *out);
int64_t ocl_shp_numel(int rank, const int64_t *dims);
void ocl_shp_strides(int rank, const int64_t *dims, int64_t *st);

/* Copies all of t (device or host) into dst (t->bytes). */
wf_status *ocl_shp_read(wf__kctx *k, const wf_tensor *t, void *dst);
/* Writes n bytes from src to the start of device tensor t. */
wf_status *ocl_shp_write(wf__kctx *k, wf_tensor *t, const void *src, size_t n);
/* Fills device tensor t with its element size's byte pattern (eb bytes, a power of two). */
wf_status *ocl_shp_fill(wf__kctx *k, wf_tensor *t, const void *pattern, size_t eb);
/* Element i of a host buffer of dtype t, as double / as int64. */
double ocl_shp_load_f64(const void *p, wf_dtype t, int64_t i);
int64_t ocl_shp_load_i64(const void *p, wf_dtype t, int64_t i);
/* Stores v as dtype t, rounding like the CPU kernels (through f32 for f16/bf16). */
void ocl_shp_store_f64(void *p, wf_dtype t, int64_t i, double v);
/* Reads an i32/i64 input of rank <= 1 with at most max values; errors name `what`. */
wf_status *ocl_shp_ints(wf__kctx *k, int idx, const char *what, int64_t *v, int max, int *n);
/* Reads a whole index tensor (i32/i64) as int64 into a new buffer (caller frees with ocl_host->free);
 * *v is NULL when it has more than `limit` elements. */
wf_status *ocl_shp_index_host(wf__kctx *k, const wf_tensor *ix, int64_t limit, int64_t **v);

/* The kernel `name` of the byte-moving program for elements of eb bytes. */
wf_status *ocl_shp_move_kernel(wf__kctx *k, size_t eb, const char *name, cl_kernel *out);

/* cl_long8 from up to 8 values (the rest 0/1 as given). */
cl_long8 ocl_shp_l8(int n, const int64_t *v, int64_t fill);

/* y[yo + sum(c_d * yst_d)] = x[xo + sum((c_d % xmod_d) * xst_d)] over the index space dims (rank <= 8,
 * strides and offsets in elements of the tensors' dtype; xmod NULL: no wrap). */
wf_status *ocl_shp_copy_nd(wf__kctx *k, const wf_tensor *y, int64_t yo, const wf_tensor *x, int64_t xo, int rank,
                           const int64_t *dims, const int64_t *xst, const int64_t *xmod, const int64_t *yst);

/* Kernels defined in ocl_shape_index.c. */
wf_status *ocl_shp_gather(wf__kctx *k);
wf_status *ocl_shp_gathernd(wf__kctx *k);
wf_status *ocl_shp_scatternd(wf__kctx *k);
wf_status *ocl_shp_gather_elements(wf__kctx *k);
wf_status *ocl_shp_scatter_elements(wf__kctx *k);
wf_status *ocl_shp_pad(wf__kctx *k);
wf_status *ocl_shp_onehot(wf__kctx *k);
wf_status *ocl_shp_range(wf__kctx *k);
wf_status *ocl_shp_shape_op(wf__kctx *k);
wf_status *ocl_shp_size(wf__kctx *k);
wf_status *ocl_shp_fill_op(wf__kctx *k);
wf_status *ocl_shp_constant_of_shape(wf__kctx *k);
wf_status *ocl_shp_trilu(wf__kctx *k);
wf_status *ocl_shp_eyelike(wf__kctx *k);
wf_status *ocl_shp_cumsum(wf__kctx *k);
wf_status *ocl_shp_reverse_sequence(wf__kctx *k);

#endif
