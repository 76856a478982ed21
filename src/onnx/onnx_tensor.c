/*
 * ONNX TensorProto decoding: typed fields or raw_data, and external data read from files beside the
 * model (refusing paths that leave the model's folder). Every size a file declares is checked against
 * the bytes it really holds.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "io/io.h"
#include "onnx/onnx_internal.h"

static void *pb_alloc(void *data, size_t size) { return wf__malloc(size ? size : 1); }
static void pb_free(void *data, void *p) { wf__free(p); }
ProtobufCAllocator wf__onnx_pb_alloc = {pb_alloc, pb_free, NULL};

wf_status *wf__read_file(const char *path, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return wf__status(errno == ENOENT ? WF_NOT_FOUND : WF_IO_ERROR, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return wf__status(WF_IO_ERROR, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    wf_status *s = wf__io_check_memory(path, "reading the file", (uint64_t)n);
    if (s) {
        fclose(f);
        return s;
    }
    uint8_t *b = wf__malloc(n ? n : 1);
    if (!b) {
        fclose(f);
        return wf__oom(path, n);
    }
    if (fread(b, 1, n, f) != n) {
        fclose(f);
        wf__free(b);
        return wf__status(WF_IO_ERROR, "%s: read failed", path);
    }
    fclose(f);
    *buf = b;
    *len = n;
    return NULL;
}

wf_dtype wf__onnx_dtype(int32_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return WF_F32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return WF_U8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return WF_I8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return WF_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return WF_I32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return WF_I64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return WF_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return WF_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return WF_F64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return WF_BF16;
    default: return WF_DTYPE_INVALID;
    }
}

const char *wf__onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",   "INT16",
                                        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16",  "DOUBLE",
                                        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
                                        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
    if (t >= 0 && (size_t)t < sizeof names / sizeof names[0]) return names[t];
    return "unknown";
}

/* Opens `location` relative to dir, refusing absolute paths and anything that resolves outside dir. */
static wf_status *open_external(const char *dir, const char *file, const char *what, const char *location,
                                FILE **out)
{
    if (!location || !*location)
        return wf__status(WF_INVALID_ARGUMENT, "%s: %s has external data without a location", file, what);
    if (location[0] == '/' || strstr(location, ".."))
        return wf__status(WF_INVALID_ARGUMENT,
                          "%s: %s: external data path '%s' leaves the model's folder; refused", file, what, location);
    char joined[PATH_MAX], real_dir[PATH_MAX], real_file[PATH_MAX];
    snprintf(joined, sizeof joined, "%s/%s", dir, location);
    if (!realpath(dir, real_dir) || !realpath(joined, real_file))
        return wf__status(WF_NOT_FOUND, "%s: %s: external data file '%s': %s", file, what, joined, strerror(errno));
    size_t dl = strlen(real_dir);
    if (strncmp(real_file, real_dir, dl) != 0 || real_file[dl] != '/')
        return wf__status(WF_INVALID_ARGUMENT,
                          "%s: %s: external data path '%s' resolves outside the model's folder; refused", file,
                          what, location);
    FILE *f = fopen(real_file, "rb");
    if (!f) return wf__status(WF_IO_ERROR, "%s: %s: external data file '%s': %s", file, what, joined, strerror(errno));
    *out = f;
    return NULL;
}

/* Opens a tensor's external data and checks, before its tensor is allocated, that the file holds the
 * `bytes` its shape needs at the given offset. Leaves *out positioned at the data. */
static wf_status *open_external_data(const Onnx__TensorProto *t, const char *dir, const char *file, const char *what,
                                     uint64_t bytes, FILE **out)
{
    const char *location = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key) continue;
        if (!strcmp(e->key, "location")) location = e->value;
        else if (!strcmp(e->key, "offset") && e->value) offset = strtoll(e->value, NULL, 10);
        else if (!strcmp(e->key, "length") && e->value) length = strtoll(e->value, NULL, 10);
    }
    if (offset < 0) return wf__status(WF_INVALID_ARGUMENT, "%s: %s: negative external data offset", file, what);
    if (length >= 0 && (uint64_t)length != bytes)
        return wf__status(WF_INVALID_ARGUMENT, "%s: %s declares %llu bytes of data but its external length is %lld",
                          file, what, (unsigned long long)bytes, length);
    if (!dir) return wf__status(WF_INVALID_ARGUMENT, "%s: %s uses external data, which needs a model folder", file, what);
    FILE *f;
    WF__TRY(open_external(dir, file, what, location, &f));
    struct stat st;
    wf_status *s = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        s = wf__status(WF_IO_ERROR, "%s: %s: external data file '%s' is not a regular file", file, what, location);
    else if ((uint64_t)offset > (uint64_t)st.st_size || bytes > (uint64_t)st.st_size - (uint64_t)offset)
        s = wf__status(WF_INVALID_ARGUMENT, "%s: %s: external data file '%s' holds %llu bytes, fewer than %lld + %llu",
                       file, what, location, (unsigned long long)st.st_size, offset, (unsigned long long)bytes);
    else if (fseeko(f, (off_t)offset, SEEK_SET) != 0)
        s = wf__status(WF_IO_ERROR, "%s: %s: external data file '%s': %s", file, what, location, strerror(errno));
    if (!s) {
        char w[300];
        snprintf(w, sizeof w, "%s's external data", what);
        s = wf__io_check_memory(file, w, bytes);
    }
    if (s) {
        fclose(f);
        return s;
    }
    *out = f;
    return NULL;
}

static wf_status *typed_count(const char *file, const char *what, size_t have, int64_t want, const char *field)
{
    return wf__status(WF_INVALID_ARGUMENT, "%s: %s declares %lld elements but its %s holds %zu", file, what,
                      (long long)want, field, have);
}

wf_status *wf__onnx_tensor(const Onnx__TensorProto *t, const char *dir, const char *file, const char *what,
                           wf_tensor **out)
{
    wf_dtype dt = wf__onnx_dtype(t->data_type);
    if (!dt)
        return wf__status(WF_UNIMPLEMENTED, "%s: %s has data type %s, which weft does not support", file, what,
                          wf__onnx_dtype_name(t->data_type));
    if (t->n_dims > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "%s: %s has %zu dims; weft supports up to %d", file, what, t->n_dims,
                          WF_MAX_RANK);
    int64_t dims[WF_MAX_RANK];
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return wf__status(WF_INVALID_ARGUMENT, "%s: %s has a negative dim %lld", file, what, (long long)t->dims[i]);
        dims[i] = t->dims[i];
    }
    /* Check what the file declares against what it holds before allocating: a 100-byte file must not
     * make us ask for gigabytes. */
    char sh[160];
    int64_t want, want_bytes;
    if (!wf__shape_bytes_checked((int)t->n_dims, dims, wf_dtype_size(dt), &want, &want_bytes))
        return wf__status(WF_INVALID_ARGUMENT, "%s: %s declares shape %s of %s: too large (its size overflows int64 "
                          "or exceeds the 2^62-byte limit of a tensor)", file, what,
                          wf__shape_str((int)t->n_dims, dims, sh), wf_dtype_name(dt));
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external && t->has_raw_data && (uint64_t)t->raw_data.len != (uint64_t)want_bytes)
        return wf__status(WF_INVALID_ARGUMENT, "%s: %s declares shape %s of %s (%lld bytes) but its raw_data holds %zu bytes",
                          file, what, wf__shape_str((int)t->n_dims, dims, sh), wf_dtype_name(dt), (long long)want_bytes,
                          t->raw_data.len);
    if (!external && !t->has_raw_data) {
        size_t have = dt == WF_F32 ? t->n_float_data : dt == WF_F64 ? t->n_double_data
                    : dt == WF_I64 ? t->n_int64_data : t->n_int32_data;
        const char *field = dt == WF_F32 ? "float_data" : dt == WF_F64 ? "double_data" : dt == WF_I64 ? "int64_data" : "int32_data";
        if ((uint64_t)have != (uint64_t)want) return typed_count(file, what, have, want, field);
    }
    FILE *ext = NULL;
    if (external) WF__TRY(open_external_data(t, dir, file, what, (uint64_t)want_bytes, &ext));
    wf_tensor *x;
    wf_status *s = wf__tensor_alloc(dt, (int)t->n_dims, dims, what, &x);
    if (s) {
        if (ext) fclose(ext);
        return wf__status_wrap(s, "%s: %s", file, what);
    }
    int64_t n = x->size;
    if (external) {
        if (x->bytes && fread(x->data, 1, x->bytes, ext) != x->bytes)
            s = wf__status(WF_IO_ERROR, "%s: %s: reading %zu bytes of external data failed", file, what, x->bytes);
        fclose(ext);
    } else if (t->has_raw_data) {
        if (t->raw_data.len != x->bytes)
            s = wf__status(WF_INVALID_ARGUMENT, "%s: %s declares shape %s of %s (%zu bytes) but its raw_data holds %zu bytes",
                           file, what, wf__shape_str(x->rank, x->dims, (char[160]){0}), wf_dtype_name(dt), x->bytes,
                           t->raw_data.len);
        else if (x->bytes)
            memcpy(x->data, t->raw_data.data, x->bytes);
        if (!s && dt == WF_BOOL)
            for (int64_t i = 0; i < n; i++) ((uint8_t *)x->data)[i] = ((uint8_t *)x->data)[i] != 0;
    } else {
        switch (dt) {
        case WF_F32:
            if ((int64_t)t->n_float_data != n) s = typed_count(file, what, t->n_float_data, n, "float_data");
            else if (x->bytes) memcpy(x->data, t->float_data, x->bytes);
            break;
        case WF_F64:
            if ((int64_t)t->n_double_data != n) s = typed_count(file, what, t->n_double_data, n, "double_data");
            else if (x->bytes) memcpy(x->data, t->double_data, x->bytes);
            break;
        case WF_I64:
            if ((int64_t)t->n_int64_data != n) s = typed_count(file, what, t->n_int64_data, n, "int64_data");
            else if (x->bytes) memcpy(x->data, t->int64_data, x->bytes);
            break;
        default: /* int32_data carries i32, i16, i8, u8, bool, and the bits of f16 / bf16 */
            if ((int64_t)t->n_int32_data != n) {
                s = typed_count(file, what, t->n_int32_data, n, "int32_data");
                break;
            }
            for (int64_t i = 0; i < n; i++) {
                int32_t v = t->int32_data[i];
                switch (dt) {
                case WF_I32: ((int32_t *)x->data)[i] = v; break;
                case WF_I16: ((int16_t *)x->data)[i] = (int16_t)v; break;
                case WF_I8: ((int8_t *)x->data)[i] = (int8_t)v; break;
                case WF_U8: ((uint8_t *)x->data)[i] = (uint8_t)v; break;
                case WF_BOOL: ((uint8_t *)x->data)[i] = v != 0; break;
                default: ((uint16_t *)x->data)[i] = (uint16_t)v; break; /* f16, bf16 bits */
                }
            }
        }
    }
    if (s) {
        wf_tensor_free(x);
        return s;
    }
    *out = x;
    return NULL;
}

wf_status *wf_onnx_read_tensor(const char *path, wf_tensor **out)
{
    if (!path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_onnx_read_tensor: NULL path or out");
    uint8_t *buf;
    size_t len;
    WF__TRY(wf__read_file(path, &buf, &len));
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&wf__onnx_pb_alloc, len, buf);
    wf__free(buf);
    if (!t) return wf__status(WF_INVALID_ARGUMENT, "%s: not a valid ONNX TensorProto (truncated or corrupt)", path);
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", t->name ? t->name : "");
    /* a .pb's external data would be relative to its own folder */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    wf_status *s = wf__onnx_tensor(t, dir, path, what, out);
    onnx__tensor_proto__free_unpacked(t, &wf__onnx_pb_alloc);
    return s;
}
