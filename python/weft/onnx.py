"""weft.onnx: ONNX Runtime's Python API (InferenceSession) over weft's ONNX importer.

    import weft.onnx as wonnx
    sess = wonnx.InferenceSession("model.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    (y,) = sess.run(None, {"input": x})

The model is parsed and mapped onto weft ops by the C library (wf_onnx_load) into a graph of its own, and
run by a wf_session on the process's context (weft's tf.config settings apply). What ONNX Runtime
spells differently, and what weft cannot do, is written at each class; the README's "weft.onnx" section
has the summary.

Providers. ONNX Runtime's provider names choose weft's device: CPUExecutionProvider -> CPU,
CUDAExecutionProvider (and TensorrtExecutionProvider) -> GPU, OpenCLExecutionProvider (and
OpenCL/CLExecutionProvider) -> OPENCL. The first provider listed whose device the context has wins; one
the context lacks (or a name weft does not know) is skipped with a UserWarning, as ONNX Runtime does,
and the CPU is the last resort. `device=` names a weft/TensorFlow device spec ("GPU:0",
"/device:CPU:0") directly and wins over providers. Within the chosen device, nodes without a kernel
there run on the CPU (weft's soft placement), which is why get_providers() lists CPUExecutionProvider
after an accelerator, as ONNX Runtime does.
"""
import ctypes as C
import os
import tempfile
import threading
import warnings

import numpy as np

from . import _lib, _convert, _core, errors
from ._lib import lib, check

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "NodeArg",
           "ModelMetadata", "get_available_providers", "get_device"]

# ---- ONNX element types ----------------------------------------------------------------------------

# ONNX TensorProto.DataType -> the type string ONNX Runtime's NodeArg.type shows
_ONNX_TYPE = {1: "tensor(float)", 2: "tensor(uint8)", 3: "tensor(int8)", 4: "tensor(uint16)", 5: "tensor(int16)",
              6: "tensor(int32)", 7: "tensor(int64)", 8: "tensor(string)", 9: "tensor(bool)",
              10: "tensor(float16)", 11: "tensor(double)", 12: "tensor(uint32)", 13: "tensor(uint64)",
              14: "tensor(complex64)", 15: "tensor(complex128)", 16: "tensor(bfloat16)"}
# weft dtype -> the same strings (when the file's own type is not at hand)
_WF_TYPE = {_lib.F32: "tensor(float)", _lib.F64: "tensor(double)", _lib.F16: "tensor(float16)",
            _lib.BF16: "tensor(bfloat16)", _lib.I8: "tensor(int8)", _lib.U8: "tensor(uint8)",
            _lib.I16: "tensor(int16)", _lib.I32: "tensor(int32)", _lib.I64: "tensor(int64)",
            _lib.BOOL: "tensor(bool)", _lib.STRING: "tensor(string)"}

# ---- providers -------------------------------------------------------------------------------------

# ONNX Runtime provider name -> weft device type
_PROVIDER_DEVICE = {
    "CPUExecutionProvider": "CPU",
    "CUDAExecutionProvider": "GPU",
    "TensorrtExecutionProvider": "GPU",
    "OpenCLExecutionProvider": "OPENCL",
    "CLExecutionProvider": "OPENCL",
    "OpenCLProvider": "OPENCL",
}
# weft device type -> the provider name get_providers() reports
_DEVICE_PROVIDER = {"CPU": "CPUExecutionProvider", "GPU": "CUDAExecutionProvider",
                    "OPENCL": "OpenCLExecutionProvider"}


def _device_types():
    """{type: [index, ...]} of the context's devices."""
    out = {}
    for name, typ, _info in _core.devices():
        spec = _core.parse_spec(name)
        out.setdefault(typ, []).append(spec.id if spec.has_id else 0)
    return out


def get_available_providers():
    """The provider names weft can serve on this machine (its context's device types), CPU last."""
    types = _device_types()
    names = [_DEVICE_PROVIDER[t] for t in ("GPU", "OPENCL") if t in types]
    return names + ["CPUExecutionProvider"]


def get_device():
    """ONNX Runtime's get_device(): "GPU" when the context has a CUDA GPU, else "CPU"."""
    return "GPU" if "GPU" in _device_types() else "CPU"


# ---- options ---------------------------------------------------------------------------------------

class GraphOptimizationLevel:
    """ONNX Runtime's enum values; SessionOptions.graph_optimization_level takes these (or the ints)."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


def _opt_level(level):
    """ONNX Runtime's level -> weft's wf_session_options.opt_level.

    ORT_DISABLE_ALL -> 0 (no passes); ORT_ENABLE_BASIC -> 1 (device-independent simplification: identity,
    constant folding, BatchNormalization folding, MatMul+bias, CSE); ORT_ENABLE_EXTENDED -> 2 (and
    epilogue fusion after placement: weft's default); ORT_ENABLE_LAYOUT and ORT_ENABLE_ALL -> 3 (and
    channel-blocked layouts between the CPU's f32 convolutions, ONNX Runtime's NCHWc transform at its
    ALL level). ORT_ENABLE_ALL is ONNX Runtime's default and so ours: weft's own default is 2."""
    level = int(getattr(level, "value", level))
    if level <= 0:
        return 0
    if level >= 3:
        return 3
    return level


class SessionOptions:
    """The ONNX Runtime session options a user sets, mapped onto wf_session_options.

    intra_op_num_threads / inter_op_num_threads: the session's thread counts (0: the context's);
    graph_optimization_level: see _opt_level; weft_opt_level (weft's own, None: from
    graph_optimization_level) wins when set. log_severity_level, log_verbosity_level, execution_mode,
    enable_profiling, enable_cpu_mem_arena, enable_mem_pattern, enable_mem_reuse, use_deterministic_compute
    and optimized_model_filepath are accepted and ignored (weft's runs are deterministic and its memory
    planning is always on); add_session_config_entry stores entries that get_session_config_entry returns.
    """

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.weft_opt_level = None
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.execution_mode = 0
        self.enable_profiling = False
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.optimized_model_filepath = ""
        self.logid = ""
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[key]

    def opt_level(self):
        """The weft opt_level these options give."""
        if self.weft_opt_level is not None:
            return int(self.weft_opt_level)
        return _opt_level(self.graph_optimization_level)


class RunOptions:
    """Accepted by run() for ONNX Runtime compatibility; weft's runs take none of its settings."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = True

    def add_run_config_entry(self, key, value):
        pass


# ---- model description -----------------------------------------------------------------------------

class NodeArg:
    """An input or output as ONNX Runtime shows it: name, shape (ints; the dim's name for a symbolic
    dim, None for an unknown one; [] when the model gives no shape) and type ("tensor(float)")."""
    __slots__ = ("name", "shape", "type")

    def __init__(self, name, shape, type):  # noqa: A002 - ONNX Runtime's name
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class ModelMetadata:
    """get_modelmeta(): the model's producer_name, graph_name, graph_description, domain, description
    (the model's doc_string), version (model_version) and custom_metadata_map (metadata_props)."""

    def __init__(self, producer_name="", graph_name="", graph_description="", domain="", description="",
                 version=0, custom_metadata_map=None):
        self.producer_name = producer_name
        self.graph_name = graph_name
        self.graph_description = graph_description
        self.domain = domain
        self.description = description
        self.version = version
        self.custom_metadata_map = dict(custom_metadata_map or {})


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


def _model_meta(m):
    """ModelMetadata from the C API's description of the loaded model."""
    t = lib.wf_onnx_model_meta(m).contents
    props = {_text(t.prop_keys[i]): _text(t.prop_values[i]) for i in range(t.n_props)}
    return ModelMetadata(producer_name=_text(t.producer_name), graph_name=_text(t.graph_name),
                         graph_description=_text(t.graph_doc_string), domain=_text(t.domain),
                         description=_text(t.doc_string), version=t.model_version, custom_metadata_map=props)


class _Value:
    """One model input or output: the C API's wf_onnx_value, with the file's dim names and type."""
    __slots__ = ("name", "output", "dtype", "rank", "dims", "has_default", "arg", "np_dtype")

    def __init__(self, v):
        self.name = v.name.decode("utf-8", "replace")
        self.output = _lib.Output(v.output.node, v.output.index)
        self.dtype = v.dtype
        self.rank = v.rank
        self.dims = tuple(v.dims[i] for i in range(v.rank)) if v.rank >= 0 else None
        self.has_default = bool(v.has_default)
        self.np_dtype = _convert.NP_OF.get(v.dtype)
        elem = v.elem_type
        fdims = [_text(v.dim_names[i]) or None for i in range(v.file_rank)] if v.file_rank >= 0 else None
        typ = _ONNX_TYPE.get(elem) if elem else None
        if typ is None:
            typ = _WF_TYPE.get(v.dtype, "tensor(unknown)")
        if self.dims is None:
            shape = []
        elif fdims is not None and len(fdims) == len(self.dims):
            # the file's names for symbolic dims; weft's dims otherwise (its shape inference may know more)
            shape = [d if d >= 0 else f for d, f in zip(self.dims, fdims)]
        else:
            shape = [d if d >= 0 else None for d in self.dims]
        self.arg = NodeArg(self.name, shape, typ)

    def type_name(self):
        if self.dtype == _lib.STRING:
            return "string"
        return str(self.np_dtype) if self.np_dtype is not None else self.arg.type


# ---- the session -----------------------------------------------------------------------------------

def _resolve_device(providers, provider_options, device):
    """(weft device spec or None for the CPU default, the provider names used)."""
    types = _device_types()
    if device is not None:
        spec = _core.parse_spec(device if isinstance(device, str) else getattr(device, "name", str(device)))
        typ = spec.type.decode() if spec.has_type else "CPU"
        if typ not in types:
            raise errors.InvalidArgumentError(
                message="weft.onnx.InferenceSession: device %r: this context has no %s device (it has %s)"
                        % (device, typ, ", ".join(sorted(types))))
        used = [_DEVICE_PROVIDER.get(typ, typ)]
        if typ != "CPU":
            used.append("CPUExecutionProvider")
        return _core.format_spec(spec), used
    if not providers:
        return None, ["CPUExecutionProvider"]
    opts = list(provider_options) if provider_options else []
    for i, p in enumerate(providers):
        popts = {}
        if isinstance(p, (tuple, list)):
            p, popts = p[0], dict(p[1] or {})
        elif i < len(opts) and opts[i]:
            popts = dict(opts[i])
        typ = _PROVIDER_DEVICE.get(p)
        if typ is None:
            warnings.warn("weft.onnx: provider %r has no weft device (weft knows %s); skipped"
                          % (p, ", ".join(sorted(_PROVIDER_DEVICE))), UserWarning, stacklevel=3)
            continue
        idx = int(popts.get("device_id", 0))
        if typ not in types or idx not in types[typ]:
            warnings.warn("weft.onnx: provider %r wants device %s:%d, which this context does not have "
                          "(available: %s); falling back to the next provider"
                          % (p, typ, idx, ", ".join(get_available_providers())), UserWarning, stacklevel=3)
            continue
        if typ == "CPU":
            return None, ["CPUExecutionProvider"]
        return "%s:%d" % (typ, idx), [p, "CPUExecutionProvider"]
    return None, ["CPUExecutionProvider"]


class InferenceSession:
    """ONNX Runtime's InferenceSession over weft.

    path_or_bytes: a path (str or os.PathLike) or the serialized model (bytes). weft loads from a path, so
    bytes are written to a temporary file that is removed once the model is loaded; a model from bytes
    therefore cannot use external-data initializers (weft reads those from files beside the model).
    sess_options: a SessionOptions; providers: ONNX Runtime provider names, or (name, options) pairs
    whose options may give "device_id" (see the module's doc); provider_options as ONNX Runtime's;
    device: a weft device spec, which wins over providers.

    run() may be called from several threads at once: each call builds its own feed and fetch arrays and
    the wf_session is re-entrant. Returned arrays are numpy views of weft's output memory (no copy).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, device=None,
                 **kwargs):
        self._sess = self._graph = self._model = None
        self._spec_bytes = None
        self._lock = threading.Lock()
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        tmp = None
        try:
            if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
                fd, tmp = tempfile.mkstemp(suffix=".onnx", prefix="weft-onnx-")
                with os.fdopen(fd, "wb") as f:
                    f.write(path_or_bytes)
                path = tmp
                self._model_path = "<bytes>"
            else:
                path = os.fspath(path_or_bytes)
                self._model_path = path
            spec, self._providers = _resolve_device(providers, provider_options, device)
            self._device = spec
            self._load(path, spec)
        except BaseException:
            self.close()
            raise
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        m = self._model
        self._meta = _model_meta(m)
        self._inputs = [_Value(lib.wf_onnx_input(m, i).contents) for i in range(lib.wf_onnx_num_inputs(m))]
        self._outputs = [_Value(lib.wf_onnx_output(m, i).contents) for i in range(lib.wf_onnx_num_outputs(m))]
        self._in_by_name = {v.name: v for v in self._inputs}
        self._out_by_name = {v.name: v for v in self._outputs}

    def _load(self, path, spec):
        g = C.c_void_p()
        check(lib.wf_graph_new(C.byref(g)))
        self._graph = g.value
        m = C.c_void_p()
        check(lib.wf_onnx_load(_lib.s(path), self._graph, C.byref(m)))
        self._model = m.value
        self._spec_bytes = _lib.s(spec)
        self._sess = self._new_session()

    def _new_session(self):
        so = _core.session_options()
        o = self._sess_options
        so.intra_op_threads = int(o.intra_op_num_threads or 0)
        so.inter_op_threads = int(o.inter_op_num_threads or 0)
        so.opt_level = o.opt_level()
        if self._spec_bytes is not None:
            so.device = self._spec_bytes  # the C side copies the strings
        s = C.c_void_p()
        check(lib.wf_session_new(_core.context(), self._graph, C.byref(so), C.byref(s)))
        return s.value

    # ---- description ----

    def get_inputs(self):
        """The inputs a caller feeds (ONNX Runtime's: inputs backed by an initializer are in
        get_overridable_initializers() instead)."""
        return [v.arg for v in self._inputs if not v.has_default]

    def get_overridable_initializers(self):
        return [v.arg for v in self._inputs if v.has_default]

    def get_outputs(self):
        return [v.arg for v in self._outputs]

    def get_modelmeta(self):
        return self._meta

    def get_providers(self):
        """The providers this session uses, in ONNX Runtime's names: the chosen device's, then
        CPUExecutionProvider (nodes without a kernel on the device fall back to it)."""
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def get_session_options(self):
        return self._sess_options

    def placement(self, input_feed, output_names=None):
        """weft's placement of the run with these feeds (wf_session_placement's text): the device each
        node runs on and why, one line per node."""
        feeds, keep, fetches, outs = self._plan_args(output_names, input_feed)
        txt = C.c_void_p()
        try:
            sess = self._sess
            check(lib.wf_session_placement(sess, feeds, len(keep), fetches, len(outs), C.byref(txt)))
        finally:
            for h in keep:
                lib.wf_tensor_free(h)
        return _lib.take_string(txt.value)

    # ---- running ----

    def _feed_array(self, v, value):
        """value checked against input v and made into a C-contiguous array of its dtype (no copy when it
        is one already)."""
        if v.dtype == _lib.STRING:
            arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
            if arr.dtype.kind not in "OSU":
                raise errors.InvalidArgumentError(
                    message="input '%s': expected %s, got an array of %s" % (v.name, v.arg.type, arr.dtype))
        elif isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value)
            if v.np_dtype is not None and arr.dtype != v.np_dtype:
                raise errors.InvalidArgumentError(
                    message="input '%s': expected dtype %s (%s), got %s" % (v.name, v.type_name(), v.arg.type,
                                                                            arr.dtype))
        else:  # Python lists and numbers: converted to the input's dtype
            try:
                arr = np.asarray(value, dtype=v.np_dtype)
            except (TypeError, ValueError) as e:
                raise errors.InvalidArgumentError(
                    message="input '%s': cannot convert %s to %s: %s" % (v.name, type(value).__name__,
                                                                       v.type_name(), e)) from None
        if v.dims is not None:
            if arr.ndim != len(v.dims):
                raise errors.InvalidArgumentError(
                    message="input '%s': expected rank %d (shape %s), got rank %d (shape %s)"
                            % (v.name, len(v.dims), _shape_text(v.arg.shape), arr.ndim, list(arr.shape)))
            bad = [i for i, (want, got) in enumerate(zip(v.dims, arr.shape)) if want >= 0 and want != got]
            if bad:
                raise errors.InvalidArgumentError(
                    message="input '%s': expected shape %s, got %s (dim %s differs)"
                            % (v.name, _shape_text(v.arg.shape), list(arr.shape), ", ".join(map(str, bad))))
        if arr.dtype.kind not in "OSU" and (not arr.flags.c_contiguous or not arr.flags.aligned):
            arr = np.ascontiguousarray(arr)
        return arr

    def _plan_args(self, output_names, input_feed):
        """(feeds array, tensor handles to free, fetches array, the output _Values)."""
        if output_names is None:
            outs = self._outputs
        else:
            if isinstance(output_names, str):
                output_names = [output_names]
            outs = []
            for n in output_names:
                v = self._out_by_name.get(n)
                if v is None:
                    raise errors.NotFoundError(
                        message="output '%s' is not an output of the model (outputs: %s)"
                                % (n, ", ".join(o.name for o in self._outputs)))
                outs.append(v)
            if not outs:
                raise errors.InvalidArgumentError(message="run: output_names is empty")
        input_feed = {} if input_feed is None else input_feed
        unknown = [k for k in input_feed if k not in self._in_by_name]
        if unknown:
            raise errors.InvalidArgumentError(
                message="input%s %s %s not an input of the model (inputs: %s)"
                        % ("s" if len(unknown) > 1 else "", ", ".join("'%s'" % k for k in unknown),
                           "are" if len(unknown) > 1 else "is", ", ".join(v.name for v in self._inputs)))
        missing = [v.name for v in self._inputs if not v.has_default and v.name not in input_feed]
        if missing:
            raise errors.InvalidArgumentError(
                message="required input%s %s missing from the feed (fed: %s)"
                        % ("s" if len(missing) > 1 else "", ", ".join("'%s'" % k for k in missing),
                           ", ".join("'%s'" % k for k in input_feed) or "nothing"))
        arrays = [(self._in_by_name[k], self._feed_array(self._in_by_name[k], val))
                  for k, val in input_feed.items()]
        feeds = (_lib.Feed * max(len(arrays), 1))()
        keep = []
        try:
            for i, (v, arr) in enumerate(arrays):
                h = _convert.from_value(arr) if v.dtype == _lib.STRING else _convert.lend(arr)
                keep.append(h)
                feeds[i].output = v.output
                feeds[i].tensor = h
        except BaseException:
            for h in keep:
                lib.wf_tensor_free(h)
            raise
        fetches = (_lib.Output * len(outs))(*[v.output for v in outs])
        return feeds, keep, fetches, outs

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: a list of numpy arrays, one per name in output_names (None: every output, in
        the model's order). Feeds are numpy arrays of the input's dtype (lent to weft, not copied; other
        layouts are made contiguous) or Python lists/numbers (converted to the input's dtype). An unknown
        or missing input, or a wrong dtype, rank or fixed dim raises InvalidArgumentError naming the
        input; an unknown output NotFoundError. The session stays usable after an error."""
        if self._sess is None:
            raise errors.FailedPreconditionError(message="run: the InferenceSession is closed")
        feeds, keep, fetches, outs = self._plan_args(output_names, input_feed)
        n = len(outs)
        results = (C.c_void_p * n)()
        try:
            sess = self._sess
            check(lib.wf_session_run(sess, feeds, len(keep), fetches, n, results, None))
        finally:
            for h in keep:
                lib.wf_tensor_free(h)
        return [_core.EagerTensor(results[i]).numpy() for i in range(n)]

    def run_with_ort_values(self, *args, **kwargs):
        raise errors.UnimplementedError(message="weft.onnx: OrtValue runs are not supported; use run()")

    def io_binding(self):
        raise errors.UnimplementedError(message="weft.onnx: io_binding is not supported; use run()")

    # ---- lifetime ----

    def close(self):
        """Frees the session, then the ONNX model, then the graph (weft.h's order). Idempotent."""
        if lib is None:  # interpreter shutdown: the process takes the memory back
            return
        with self._lock:
            s, g, m = self._sess, self._graph, self._model
            self._sess = self._graph = self._model = None
        if s:
            lib.wf_session_free(s)
        if m:  # weft.h: free the model before its graph (it holds only names and wf_outputs)
            lib.wf_onnx_model_free(m)
        if g:
            lib.wf_graph_free(g)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<weft.onnx.InferenceSession %s on %s>" % (self._model_path, self._device or "CPU")


def _shape_text(shape):
    return "[%s]" % ", ".join("?" if d is None else str(d) for d in shape)
