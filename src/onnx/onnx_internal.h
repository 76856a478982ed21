/* Internals of the ONNX importer shared by its files: the import context, tensor conversion, and the
 * op mapping table. */
#ifndef WF_ONNX_INTERNAL_H
#define WF_ONNX_INTERNAL_H

#include "graph/graph.h"
#include "onnx.pb-c.h"

typedef struct onnx_value {
    char *name;
    wf_output out;
} onnx_value;

typedef struct wf__onnx_ctx {
    wf_graph *g;
    const char *path;       /* the model file, for messages */
    char *dir;              /* its folder, for external data */
    int64_t opset;          /* default-domain opset */
    onnx_value *vals;       /* value name -> graph output, open addressing */
    size_t vals_cap, vals_n;
} wf__onnx_ctx;

/* One node being mapped. */
typedef struct onnx_node {
    wf__onnx_ctx *c;
    const Onnx__NodeProto *n;
    char name[256];         /* unique weft name for the main node */
    int n_in;
    wf_output *in;          /* resolved inputs; {NULL, 0} for omitted optional ones */
    int n_out;
    wf_output *out;         /* to fill: one per ONNX output ({NULL} for omitted ones) */
    int n_helpers;          /* helper nodes created so far (for their names) */
} onnx_node;

typedef wf_status *(*onnx_map_fn)(onnx_node *nc);

/* Handler for an ONNX op type in the default domain, or NULL: then a weft op of the same name (if
 * any) is used with its attributes copied by name. */
onnx_map_fn wf__onnx_handler(const char *op_type);
/* Would the importer support this default-domain op (by handler or same-named weft op)? */
bool wf__onnx_supported(const char *op_type);
wf_status *wf__onnx_map_node(onnx_node *nc);

/* TensorProto -> tensor. `what` names it in messages ("initializer 'W'"). dir resolves external data. */
wf_status *wf__onnx_tensor(const Onnx__TensorProto *t, const char *dir, const char *file, const char *what,
                           wf_tensor **out);
/* ONNX TensorProto.DataType -> weft dtype; WF_DTYPE_INVALID when weft has none. */
wf_dtype wf__onnx_dtype(int32_t onnx_type);
const char *wf__onnx_dtype_name(int32_t onnx_type);

/* protobuf-c allocations through weft's funnel */
extern ProtobufCAllocator wf__onnx_pb_alloc;
/* Reads a whole file; caller frees *buf with wf__free. */
wf_status *wf__read_file(const char *path, uint8_t **buf, size_t *len);

#endif
