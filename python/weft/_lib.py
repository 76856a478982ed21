"""The C API through ctypes: the library, its structs and the status-to-exception mapping.

Why ctypes and not an extension module: the package then holds no compiled Python extension at all, so
one wheel (tagged py3-none-<platform>) serves every CPython >= 3.9, which is what an abi3 wheel would
buy, without the limited API's gaps (the buffer protocol joined it only in 3.11). ctypes releases the
GIL around every foreign call, so weft's own threads (a dataset's map, the executor) run while Python
waits. The price is the cost of a foreign call (about a microsecond each), measured in
bench/bench_python.py; the hot paths (an eager op, a traced function's call) keep the number of calls
per run small.

Every struct here mirrors include/weft/weft.h field for field; tests/python/test_abi.py compiles a
program against the header and checks each size and offset.
"""
import ctypes as C
import os
import sys

from . import errors

# ---- the library ----------------------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    """WEFT_LIBRARY, else the copy installed with the package, else a build tree above a checkout."""
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        return env
    for cand in (os.path.join(_HERE, "libweft.so"),
                 os.path.join(_HERE, "lib", "libweft.so"),
                 os.path.join(_HERE, "..", "..", "build", "libweft.so")):
        if os.path.exists(cand):
            return os.path.abspath(cand)
    raise ImportError("weft: libweft.so not found next to the package (%s) nor in WEFT_LIBRARY; "
                      "install with `pip install .` or build with `make`" % _HERE)


LIB_PATH = _find_library()
# Plugins (libweft-opencl.so, libweft-cuda.so) sit beside the library; the C side looks in
# WEFT_PLUGIN_PATH, the program's folder (python's) and its install prefix, so name the folder.
_libdir = os.path.dirname(LIB_PATH)
if _libdir not in os.environ.get("WEFT_PLUGIN_PATH", "").split(":"):
    os.environ["WEFT_PLUGIN_PATH"] = ":".join(p for p in (os.environ.get("WEFT_PLUGIN_PATH"), _libdir) if p)
lib = C.CDLL(LIB_PATH)

# ---- dtypes ----------------------------------------------------------------------------------------

F32, F64, F16, BF16, I8, U8, I16, I32, I64, BOOL, STRING = range(1, 12)
MAX_RANK = 8
AUTOTUNE = -1

# ---- structs ---------------------------------------------------------------------------------------

vp = C.c_void_p
cp = C.c_char_p
i64 = C.c_int64
u64 = C.c_uint64


class Output(C.Structure):
    _c_name_ = "wf_output"
    _fields_ = [("node", vp), ("index", C.c_int)]


class Feed(C.Structure):
    _c_name_ = "wf_feed"
    _fields_ = [("output", Output), ("tensor", vp)]


class Attr(C.Structure):
    _c_name_ = "wf_attr"
    _fields_ = [("name", cp), ("type", C.c_int), ("i", i64), ("f", C.c_double),
                ("ints", C.POINTER(i64)), ("floats", C.POINTER(C.c_double)), ("n", C.c_int),
                ("s", cp), ("dtype", C.c_int), ("tensor", vp)]


ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_FLOATS, ATTR_STRING, ATTR_DTYPE, ATTR_TENSOR = range(1, 8)


class ContextOptions(C.Structure):
    _c_name_ = "wf_context_options"
    _fields_ = [("inter_op_threads", C.c_int), ("intra_op_threads", C.c_int)]


class DeviceInfo(C.Structure):
    _c_name_ = "wf_device_info"
    _fields_ = [("name", cp), ("type", cp), ("description", cp), ("compute_units", C.c_int),
                ("threads", C.c_int), ("memory_bytes", u64), ("backend", cp), ("fast_dtypes", C.c_uint32),
                ("precision", cp)]


class PluginInfo(C.Structure):
    _c_name_ = "wf_plugin_info"
    _fields_ = [("name", cp), ("path", cp), ("status", cp), ("reason", cp), ("n_devices", C.c_int)]


class MemoryStats(C.Structure):
    _c_name_ = "wf_memory_stats"
    _fields_ = [("in_use", u64), ("peak", u64), ("reserved", u64), ("limit", u64), ("n_allocs", i64),
                ("total_allocs", i64), ("chunk_allocs", i64), ("arena_bytes", u64), ("fallback_allocs", i64)]


class SessionOptions(C.Structure):
    _c_name_ = "wf_session_options"
    _fields_ = [("inter_op_threads", C.c_int), ("intra_op_threads", C.c_int), ("device", cp),
                ("strict_placement", C.c_int), ("plan_cache_size", C.c_int), ("opt_level", C.c_int),
                ("disable_passes", cp), ("dump_graph_dir", cp), ("precision", C.c_int), ("amp_lists", cp)]


class RunOptions(C.Structure):
    _c_name_ = "wf_run_options"
    _fields_ = [("trace", vp), ("targets", C.POINTER(Output)), ("n_targets", C.c_int), ("into", C.POINTER(vp))]


class PlacementEntry(C.Structure):
    _c_name_ = "wf_placement_entry"
    _fields_ = [("node", cp), ("op", cp), ("fused", cp), ("device_index", C.c_int), ("device", cp),
                ("reason", cp), ("is_copy", C.c_int), ("est_ms", C.c_double)]


class OnnxValue(C.Structure):
    _c_name_ = "wf_onnx_value"
    _fields_ = [("name", cp), ("output", Output), ("dtype", C.c_int), ("rank", C.c_int),
                ("dims", i64 * MAX_RANK), ("has_default", C.c_int), ("dim_names", cp * MAX_RANK),
                ("file_rank", C.c_int), ("elem_type", C.c_int)]


class OnnxMeta(C.Structure):
    _c_name_ = "wf_onnx_meta"
    _fields_ = [("producer_name", cp), ("producer_version", cp), ("domain", cp), ("doc_string", cp),
                ("graph_name", cp), ("graph_doc_string", cp), ("ir_version", i64), ("model_version", i64),
                ("n_props", C.c_int), ("prop_keys", C.POINTER(cp)), ("prop_values", C.POINTER(cp))]


MAP_CALLBACK = C.CFUNCTYPE(vp, vp, i64, C.POINTER(vp), C.c_int, C.POINTER(vp), C.POINTER(C.c_int))
INTERLEAVE_FN = C.CFUNCTYPE(vp, vp, C.POINTER(vp), C.c_int, C.POINTER(vp))


class MapFn(C.Structure):
    _c_name_ = "wf_map_fn"
    _fields_ = [("graph", vp), ("inputs", C.POINTER(Output)), ("n_inputs", C.c_int),
                ("outputs", C.POINTER(Output)), ("n_outputs", C.c_int), ("seed_input", Output),
                ("ctx", vp), ("device", cp), ("fn", MAP_CALLBACK), ("user", vp)]


class MapOptions(C.Structure):
    _c_name_ = "wf_map_options"
    _fields_ = [("num_parallel_calls", C.c_int), ("deterministic", C.c_int), ("seed", u64),
                ("intra_op_threads", C.c_int)]


class IteratorOptions(C.Structure):
    _c_name_ = "wf_iterator_options"
    _fields_ = [("cpu_budget", C.c_int), ("ram_budget", u64), ("autotune", C.c_int)]


class Init(C.Structure):
    _c_name_ = "wf_init"
    _fields_ = [("kind", C.c_int), ("value", C.c_double), ("minval", C.c_double), ("maxval", C.c_double),
                ("mean", C.c_double), ("stddev", C.c_double), ("seed", u64)]


class Layer(C.Structure):
    _c_name_ = "wf_layer"
    _fields_ = [("kind", C.c_int), ("name", cp), ("activation", C.c_int), ("units", i64), ("filters", i64),
                ("kernel", i64 * 2), ("strides", i64 * 2), ("padding_same", C.c_int), ("use_bias", C.c_int),
                ("rate", C.c_double), ("momentum", C.c_double), ("epsilon", C.c_double),
                ("input_dim", i64), ("output_dim", i64), ("target", i64 * MAX_RANK), ("target_rank", C.c_int),
                ("kernel_init", Init), ("bias_init", Init), ("seed", u64), ("policy", C.c_int)]


class OptimizerOptions(C.Structure):
    _c_name_ = "wf_optimizer_options"
    _fields_ = [("kind", C.c_int), ("learning_rate", C.c_double), ("momentum", C.c_double),
                ("nesterov", C.c_int), ("beta1", C.c_double), ("beta2", C.c_double), ("epsilon", C.c_double),
                ("weight_decay", C.c_double), ("rho", C.c_double), ("clip_global_norm", C.c_double),
                ("schedule", C.c_int), ("step_size", i64), ("gamma", C.c_double), ("decay_steps", i64),
                ("alpha", C.c_double)]


class CompileOptions(C.Structure):
    _c_name_ = "wf_compile_options"
    _fields_ = [("optimizer", OptimizerOptions), ("loss", C.c_int), ("from_logits", C.c_int),
                ("accuracy", C.c_int), ("label_dtype", C.c_int), ("device", cp), ("strict_placement", C.c_int),
                ("inter_op_threads", C.c_int), ("intra_op_threads", C.c_int),
                ("initial_loss_scale", C.c_double), ("loss_scale_growth_interval", i64)]


class EpochLogs(C.Structure):
    _c_name_ = "wf_epoch_logs"
    _fields_ = [("epoch", C.c_int), ("epochs", C.c_int), ("steps", i64), ("samples", i64),
                ("loss", C.c_double), ("accuracy", C.c_double), ("has_validation", C.c_int),
                ("val_loss", C.c_double), ("val_accuracy", C.c_double), ("seconds", C.c_double)]


EPOCH_CALLBACK = C.CFUNCTYPE(C.c_int, vp, C.POINTER(EpochLogs))


class FitOptions(C.Structure):
    _c_name_ = "wf_fit_options"
    _fields_ = [("epochs", C.c_int), ("batch_size", i64), ("validation_split", C.c_double),
                ("validation_data", vp), ("shuffle", C.c_int), ("seed", u64), ("verbose", C.c_int),
                ("on_epoch_end", EPOCH_CALLBACK), ("user", vp), ("initial_epoch", C.c_int),
                ("steps_per_execution", C.c_int), ("input_trace", cp)]


class DeviceSpec(C.Structure):
    _c_name_ = "wf_device_spec"
    _fields_ = [("has_job", C.c_int), ("has_replica", C.c_int), ("has_task", C.c_int), ("has_type", C.c_int),
                ("has_id", C.c_int), ("job", C.c_char * 64), ("replica", C.c_int), ("task", C.c_int),
                ("type", C.c_char * 32), ("id", C.c_int)]


STRUCTS = [Output, Feed, Attr, ContextOptions, DeviceInfo, PluginInfo, MemoryStats, SessionOptions, RunOptions,
           PlacementEntry, OnnxValue, OnnxMeta, MapFn, MapOptions, IteratorOptions, Init, Layer, OptimizerOptions,
           CompileOptions, EpochLogs, FitOptions, DeviceSpec]

# ---- functions -------------------------------------------------------------------------------------

P = C.POINTER
S = vp  # every call returning wf_status * (NULL: success)

_SIGS = {
    # status
    "wf_status_code": (C.c_int, [vp]),
    "wf_status_message": (cp, [vp]),
    "wf_status_free": (None, [vp]),
    "wf_status_new": (vp, [C.c_int, cp]),
    "wf_free": (None, [vp]),
    "wf_version": (cp, []),
    "wf_dtype_size": (C.c_size_t, [C.c_int]),
    "wf_dtype_name": (cp, [C.c_int]),
    # tensors
    "wf_tensor_new": (S, [C.c_int, C.c_int, P(i64), vp, P(vp)]),
    "wf_tensor_wrap": (S, [C.c_int, C.c_int, P(i64), vp, C.CFUNCTYPE(None, vp, vp), vp, P(vp)]),
    "wf_tensor_new_strings": (S, [C.c_int, P(i64), P(cp), P(C.c_size_t), P(vp)]),
    "wf_tensor_string": (vp, [vp, i64, P(C.c_size_t)]),
    "wf_tensor_ref": (vp, [vp]),
    "wf_tensor_free": (None, [vp]),
    "wf_tensor_dtype": (C.c_int, [vp]),
    "wf_tensor_rank": (C.c_int, [vp]),
    "wf_tensor_dims": (P(i64), [vp]),
    "wf_tensor_size": (i64, [vp]),
    "wf_tensor_bytes": (C.c_size_t, [vp]),
    "wf_tensor_data": (vp, [vp]),
    # context
    "wf_context_options_init": (None, [P(ContextOptions)]),
    "wf_context_new": (S, [P(ContextOptions), P(vp)]),
    "wf_context_free": (None, [vp]),
    "wf_context_num_devices": (C.c_int, [vp]),
    "wf_context_device": (S, [vp, C.c_int, P(DeviceInfo)]),
    "wf_context_num_plugins": (C.c_int, [vp]),
    "wf_context_plugin": (S, [vp, C.c_int, P(PluginInfo)]),
    "wf_context_set_memory_limit": (S, [vp, cp, u64]),
    "wf_context_memory_stats": (S, [vp, C.c_int, P(MemoryStats)]),
    "wf_device_spec_parse": (S, [cp, P(DeviceSpec)]),
    "wf_device_spec_format": (C.c_size_t, [P(DeviceSpec), cp, C.c_size_t]),
    "wf_device_spec_merge": (S, [P(DeviceSpec), P(DeviceSpec), C.c_int]),
    # graphs
    "wf_graph_new": (S, [P(vp)]),
    "wf_graph_free": (None, [vp]),
    "wf_op": (S, [vp, cp, cp, P(Output), C.c_int, P(Attr), C.c_int, P(vp)]),
    "wf_graph_set_device": (S, [vp, cp]),
    "wf_node_set_device": (S, [vp, cp]),
    "wf_graph_num_nodes": (C.c_int, [vp]),
    "wf_graph_node": (vp, [vp, C.c_int]),
    "wf_graph_find": (S, [vp, cp, P(vp)]),
    "wf_node_name": (cp, [vp]),
    "wf_node_op": (cp, [vp]),
    "wf_node_num_outputs": (C.c_int, [vp]),
    "wf_output_dtype": (C.c_int, [Output]),
    "wf_output_shape": (C.c_int, [Output, P(i64)]),
    "wf_placeholder": (S, [vp, cp, C.c_int, C.c_int, P(i64), P(Output)]),
    "wf_const": (S, [vp, cp, vp, P(Output)]),
    "wf_variable": (S, [vp, cp, vp, P(Output)]),
    "wf_gradients": (S, [vp, P(Output), C.c_int, P(Output), P(Output), C.c_int, P(Output)]),
    # sessions
    "wf_session_options_init": (None, [P(SessionOptions)]),
    "wf_session_new": (S, [vp, vp, P(SessionOptions), P(vp)]),
    "wf_session_free": (None, [vp]),
    "wf_session_run": (S, [vp, P(Feed), C.c_int, P(Output), C.c_int, P(vp), P(RunOptions)]),
    "wf_session_placement": (S, [vp, P(Feed), C.c_int, P(Output), C.c_int, P(C.c_void_p)]),
    "wf_session_placement_get": (S, [vp, P(Feed), C.c_int, P(Output), C.c_int, P(vp)]),
    "wf_placement_num_entries": (C.c_int, [vp]),
    "wf_placement_entry_at": (PlacementEntry, [vp, C.c_int]),
    "wf_placement_free": (None, [vp]),
    "wf_session_get_variable": (S, [vp, cp, P(vp)]),
    "wf_session_set_variable": (S, [vp, cp, vp]),
    "wf_session_save": (S, [vp, cp]),
    "wf_session_restore": (S, [vp, cp]),
    "wf_session_export_onnx": (S, [vp, P(Output), P(cp), C.c_int, cp]),
    # files
    "wf_npy_read": (S, [cp, P(vp)]),
    "wf_npy_write": (S, [cp, vp]),
    "wf_safetensors_write": (S, [cp, C.c_int, P(cp), P(vp), cp]),
    "wf_safetensors_read": (S, [cp, P(C.c_int), P(P(cp)), P(P(vp))]),
    "wf_safetensors_free": (None, [C.c_int, P(cp), P(vp)]),
    "wf_idx_read": (S, [cp, P(vp)]),
    # ONNX
    "wf_onnx_load": (S, [cp, vp, P(vp)]),
    "wf_onnx_model_free": (None, [vp]),
    "wf_onnx_num_inputs": (C.c_int, [vp]),
    "wf_onnx_input": (P(OnnxValue), [vp, C.c_int]),
    "wf_onnx_num_outputs": (C.c_int, [vp]),
    "wf_onnx_output": (P(OnnxValue), [vp, C.c_int]),
    "wf_onnx_model_meta": (P(OnnxMeta), [vp]),
    # datasets
    "wf_dataset_free": (None, [vp]),
    "wf_dataset_from_tensors": (S, [vp, vp, P(vp)]),
    "wf_dataset_cardinality": (i64, [vp]),
    "wf_dataset_range": (S, [i64, i64, i64, P(vp)]),
    "wf_dataset_from_tensor_slices": (S, [P(vp), C.c_int, P(vp)]),
    "wf_dataset_list_files": (S, [cp, C.c_int, u64, P(vp)]),
    "wf_dataset_text_lines": (S, [P(cp), C.c_int, P(vp)]),
    "wf_dataset_tfrecord": (S, [P(cp), C.c_int, P(vp)]),
    "wf_map_options_init": (None, [P(MapOptions)]),
    "wf_dataset_map": (S, [vp, P(MapFn), P(MapOptions), P(vp)]),
    "wf_dataset_filter": (S, [vp, P(MapFn), P(vp)]),
    "wf_dataset_batch": (S, [vp, i64, C.c_int, P(vp)]),
    "wf_dataset_unbatch": (S, [vp, P(vp)]),
    "wf_dataset_shuffle": (S, [vp, i64, u64, C.c_int, P(vp)]),
    "wf_dataset_repeat": (S, [vp, i64, P(vp)]),
    "wf_dataset_take": (S, [vp, i64, P(vp)]),
    "wf_dataset_skip": (S, [vp, i64, P(vp)]),
    "wf_dataset_zip": (S, [P(vp), C.c_int, P(vp)]),
    "wf_dataset_cache": (S, [vp, cp, P(vp)]),
    "wf_dataset_prefetch": (S, [vp, i64, P(vp)]),
    "wf_dataset_ignore_errors": (S, [vp, P(vp)]),
    "wf_dataset_prefetch_to_device": (S, [vp, vp, cp, i64, P(vp)]),
    "wf_iterator_options_init": (None, [P(IteratorOptions)]),
    "wf_dataset_iterator": (S, [vp, P(IteratorOptions), P(vp)]),
    "wf_iterator_next": (S, [vp, P(vp), C.c_int, P(C.c_int)]),
    "wf_iterator_free": (None, [vp]),
    # models
    "wf_policy_from_name": (S, [cp, P(C.c_int)]),
    "wf_policy_name": (cp, [C.c_int]),
    "wf_set_global_policy": (S, [C.c_int]),
    "wf_global_policy": (C.c_int, []),
    "wf_init_tensor": (S, [P(Init), C.c_int, C.c_int, P(i64), P(vp)]),
    "wf_layer_init": (None, [P(Layer), C.c_int]),
    "wf_model_new": (S, [C.c_int, C.c_int, P(i64), u64, P(vp)]),
    "wf_model_free": (None, [vp]),
    "wf_model_set_policy": (S, [vp, C.c_int]),
    "wf_model_add": (S, [vp, P(Layer)]),
    "wf_model_summary": (S, [vp, P(C.c_void_p)]),
    "wf_optimizer_options_init": (None, [P(OptimizerOptions), C.c_int]),
    "wf_compile_options_init": (None, [P(CompileOptions)]),
    "wf_model_compile": (S, [vp, vp, P(CompileOptions)]),
    "wf_fit_options_init": (None, [P(FitOptions)]),
    "wf_model_fit": (S, [vp, vp, P(FitOptions), P(EpochLogs)]),
    "wf_model_evaluate": (S, [vp, vp, i64, P(C.c_double), P(C.c_double)]),
    "wf_model_predict": (S, [vp, vp, i64, P(vp)]),
    "wf_model_graph": (vp, [vp]),
    "wf_model_session": (vp, [vp]),
    "wf_model_input": (Output, [vp]),
    "wf_model_output": (Output, [vp]),
    "wf_model_export_onnx": (S, [vp, cp]),
}

for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name, None)
    if _f is None:
        continue  # an older library: the wrapper that needs it says so when called
    _f.restype = _res
    _f.argtypes = _args

# ---- status -> exception ---------------------------------------------------------------------------


def check(status):
    """Raises the exception matching a non-NULL wf_status (and frees it)."""
    if not status:
        return
    code = lib.wf_status_code(status)
    msg = lib.wf_status_message(status).decode("utf-8", "replace")
    lib.wf_status_free(status)
    raise errors.from_code(code, msg)


def take_string(ptr):
    """A char * the library allocated (wf_free releases it) as a Python str."""
    if not ptr:
        return ""
    try:
        return C.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.wf_free(ptr)


def s(text):
    return None if text is None else text.encode("utf-8")


def version():
    return lib.wf_version().decode()


if sys.byteorder != "little":  # weft's tensors and files are little-endian
    raise ImportError("weft: big-endian hosts are not supported")
