"""tf.saved_model: a directory holding a model's graph, variables, signatures and assets.

    DIR/saved_model.onnx                   the inference graph with the weights (weft's ONNX export), which
                                           `weft run DIR` and any ONNX runtime load
    DIR/variables/variables.safetensors    the variables by name (what keras.models.load_model restores
                                           into a trainable model)
    DIR/saved_model.json                   format and version, the signatures (inputs and outputs: names,
                                           dtypes, shapes) and, for a Keras model, its configuration
    DIR/assets/                            files the model needs (copied from `assets=`)

TensorFlow's own format is protocol buffers of TensorFlow's graph; weft's graph format is ONNX, so that
is what the directory holds. The weights appear twice (in the ONNX file and in the safetensors file)
so that each half stands alone; the directory is written beside the target and renamed into place, so
a failed save leaves nothing half-written.
"""
import ctypes as C
import json
import os
import shutil
import tempfile

import numpy as np

from . import _lib, _core, errors
from ._core import EagerTensor
from ._lib import lib, check

FORMAT = "weft-saved-model"
VERSION = 1


def _sig_entry(name, dtype, shape):
    return {"name": name, "dtype": dtype.name, "shape": [None if d is None or d < 0 else int(d) for d in shape]}


def _write_variables(path, names, handles):
    n = len(names)
    arr_n = (C.c_char_p * max(n, 1))(*[x.encode() for x in names])
    arr_t = (C.c_void_p * max(n, 1))(*handles)
    check(lib.wf_safetensors_write(path.encode(), n, arr_n, arr_t, None))


def _save_keras(model, tmp):
    from .keras.models import Sequential
    if not isinstance(model, Sequential):
        raise errors.UnimplementedError(message="tf.saved_model.save: weft saves Sequential models and tf.functions")
    model._require_built("tf.saved_model.save")
    model.export_onnx(os.path.join(tmp, "saved_model.onnx"))
    names = model._variable_names()
    ws = model.weights
    _write_variables(os.path.join(tmp, "variables", "variables.safetensors"), names, [w._h for w in ws])
    o = lib.wf_model_input(model._m)
    from ._core import output_info
    in_dt, in_shape = output_info(o)
    out_dt, out_shape = output_info(lib.wf_model_output(model._m))
    in_name = lib.wf_node_name(o.node).decode()
    return {"serving_default": {"inputs": [_sig_entry(in_name, in_dt, in_shape)],
                                "outputs": [_sig_entry("output", out_dt, out_shape)]}}, model.get_config()


def _save_function(fn, tmp, signatures):
    from .function import Function, ConcreteFunction
    cf = signatures if isinstance(signatures, ConcreteFunction) else None
    if cf is None:
        f = fn if isinstance(fn, Function) else None
        if f is None:
            for v in vars(fn).values() if hasattr(fn, "__dict__") else ():
                if isinstance(v, Function):
                    f = v
                    break
        if f is None or f._sig is None and not f._cache:
            raise errors.InvalidArgumentError(
                message="tf.saved_model.save: give a tf.function with an input_signature (or called once), or "
                        "signatures=f.get_concrete_function(...)")
        cf = f.get_concrete_function() if f._sig is not None else next(iter(f._cache.values()))
    if cf.vars:
        raise errors.UnimplementedError(message="tf.saved_model.save: a tf.function that reads tf.Variables (%s) is "
                                        "not saved by weft yet; save a Keras model, or a function of constants" %
                                        ", ".join(v.name for v in cf.vars))
    sess = cf._session()
    names = ["output_%d" % i for i in range(cf.n_out)]
    arr = (C.c_char_p * max(cf.n_out, 1))(*[n.encode() for n in names])
    check(lib.wf_session_export_onnx(sess, cf.fetches, arr, cf.n_out, os.path.join(tmp, "saved_model.onnx").encode()))
    _write_variables(os.path.join(tmp, "variables", "variables.safetensors"), [], [])
    from ._core import output_info
    ins = [_sig_entry("arg%d" % i, s.dtype, s.shape) for i, s in enumerate(cf.input_specs)]
    outs = []
    for i in range(cf.n_out):
        dt, sh = output_info(cf.fetches[i])
        outs.append(_sig_entry(names[i], dt, sh or ()))
    return {"serving_default": {"inputs": ins, "outputs": outs}}, None


def save(obj, export_dir, signatures=None, options=None, assets=None):
    export_dir = os.fspath(export_dir)
    parent = os.path.dirname(os.path.abspath(export_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".saved_model-", dir=parent)
    try:
        os.makedirs(os.path.join(tmp, "variables"))
        os.makedirs(os.path.join(tmp, "assets"))
        from .keras.models import Sequential
        if isinstance(obj, Sequential):
            sigs, keras_cfg = _save_keras(obj, tmp)
        else:
            sigs, keras_cfg = _save_function(obj, tmp, signatures)
        for a in assets or []:
            shutil.copy(a, os.path.join(tmp, "assets"))
        meta = {"format": FORMAT, "version": VERSION, "weft_version": _lib.version(), "signatures": sigs}
        if keras_cfg is not None:
            meta["keras"] = keras_cfg
        with open(os.path.join(tmp, "saved_model.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.isdir(export_dir):
            old = tempfile.mkdtemp(prefix=".saved_model-old-", dir=parent)
            os.rmdir(old)
            os.replace(export_dir, old)
            os.replace(tmp, export_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, export_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_meta(export_dir):
    path = os.path.join(export_dir, "saved_model.json")
    if not os.path.isdir(export_dir):
        raise errors.NotFoundError(message="SavedModel %s: no such directory" % export_dir)
    try:
        with open(path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise errors.NotFoundError(message="SavedModel %s: %s is missing (not a weft SavedModel directory)" %
                                   (export_dir, path)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.DataLossError(message="SavedModel %s: %s is corrupt: %s" % (export_dir, path, e)) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("signatures"), dict):
        raise errors.DataLossError(message="SavedModel %s: %s is not a weft SavedModel description" % (export_dir, path))
    for name, sig in meta["signatures"].items():
        ok = isinstance(sig, dict) and all(
            isinstance(sig.get(k), list) and all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in sig[k])
            for k in ("inputs", "outputs"))
        if not ok:
            raise errors.DataLossError(message="SavedModel %s: %s: signature %r is malformed (inputs and outputs must "
                                       "be lists of {name, dtype, shape})" % (export_dir, path, name))
    if not isinstance(meta.get("version", 0), int) or meta.get("version", 0) > VERSION:
        raise errors.UnimplementedError(message="SavedModel %s: format version %s is newer than this weft reads (%d)" %
                                        (export_dir, meta.get("version"), VERSION))
    return meta


def _check_variables(export_dir):
    """Reads the variables file whole (its checks name a damaged file) and returns {name: EagerTensor}."""
    path = os.path.join(export_dir, "variables", "variables.safetensors")
    n = C.c_int()
    names = C.POINTER(C.c_char_p)()
    ts = C.POINTER(C.c_void_p)()
    check(lib.wf_safetensors_read(path.encode(), C.byref(n), C.byref(names), C.byref(ts)))
    out = {}
    try:
        for i in range(n.value):
            out[names[i].decode()] = EagerTensor(lib.wf_tensor_ref(ts[i]))
    finally:
        lib.wf_safetensors_free(n.value, names, ts)
    return out


class _Signature:
    """A loaded signature: call with keyword arguments named as its inputs; returns {output name: tensor}."""

    def __init__(self, loaded, spec):
        self._loaded = loaded
        self.spec = spec
        self.structured_input_signature = spec["inputs"]
        self.structured_outputs = spec["outputs"]

    def __call__(self, *args, **kwargs):
        s = self._loaded._sess
        names = [i["name"] for i in self.spec["inputs"]]
        if args:
            if len(args) > len(names):
                raise errors.InvalidArgumentError(message="the signature takes %d inputs (%s), got %d" %
                                                  (len(names), ", ".join(names), len(args)))
            kwargs.update(zip(names, args))
        unknown = set(kwargs) - set(names)
        if unknown:
            raise errors.InvalidArgumentError(message="the signature has no input %s (inputs: %s)" %
                                              (", ".join(sorted(unknown)), ", ".join(names)))
        missing = [n for n in names if n not in kwargs]
        if missing:
            raise errors.InvalidArgumentError(message="the signature's input %s is not given" % ", ".join(missing))
        feeds = (_lib.Feed * max(len(names), 1))()
        keep = []
        for k, nm in enumerate(names):
            t = _core.const(kwargs[nm])
            keep.append(t)
            feeds[k].output = self._loaded._in[nm]
            feeds[k].tensor = t._h
        outs_spec = self.spec["outputs"]
        fetches = (_lib.Output * len(outs_spec))(*[self._loaded._out[o["name"]] for o in outs_spec])
        outs = (C.c_void_p * len(outs_spec))()
        check(lib.wf_session_run(s, feeds, len(names), fetches, len(outs_spec), outs, None))
        return {o["name"]: EagerTensor(outs[i]) for i, o in enumerate(outs_spec)}


class _Loaded:
    """What tf.saved_model.load returns: .signatures, and calling it runs serving_default."""

    def __init__(self, export_dir):
        self._g = self._m = self._sess = None
        meta = _read_meta(export_dir)
        self.variables_by_name = _check_variables(export_dir)
        g = C.c_void_p()
        check(lib.wf_graph_new(C.byref(g)))
        self._g = g.value
        m = C.c_void_p()
        check(lib.wf_onnx_load(os.path.join(export_dir, "saved_model.onnx").encode(), self._g, C.byref(m)))
        self._m = m.value
        self._in, self._out = {}, {}
        for i in range(lib.wf_onnx_num_inputs(self._m)):
            v = lib.wf_onnx_input(self._m, i).contents
            self._in[v.name.decode()] = _lib.Output(v.output.node, v.output.index)
        for i in range(lib.wf_onnx_num_outputs(self._m)):
            v = lib.wf_onnx_output(self._m, i).contents
            self._out[v.name.decode()] = _lib.Output(v.output.node, v.output.index)
        for name, spec in meta["signatures"].items():
            for e in spec.get("inputs", []):
                if e.get("name") not in self._in:
                    raise errors.DataLossError(message="SavedModel %s: signature %s names input %r, which the graph "
                                               "does not have (inputs: %s)" % (export_dir, name, e.get("name"),
                                                                               ", ".join(self._in)))
            for e in spec.get("outputs", []):
                if e.get("name") not in self._out:
                    raise errors.DataLossError(message="SavedModel %s: signature %s names output %r, which the "
                                               "graph does not have" % (export_dir, name, e.get("name")))
        so = _core.session_options()
        s = C.c_void_p()
        check(lib.wf_session_new(_core.context(), self._g, C.byref(so), C.byref(s)))
        self._sess = s.value
        self.signatures = {k: _Signature(self, v) for k, v in meta["signatures"].items()}
        self.keras_config = meta.get("keras")
        self.export_dir = export_dir

    def __call__(self, *args, **kwargs):
        out = self.signatures["serving_default"](*args, **kwargs)
        return next(iter(out.values())) if len(out) == 1 else out

    def __del__(self):
        if lib is None:
            return
        if self._sess:
            lib.wf_session_free(self._sess)
        if self._m:
            lib.wf_onnx_model_free(self._m)
        if self._g:
            lib.wf_graph_free(self._g)
        self._sess = self._m = self._g = None


def load(export_dir, tags=None, options=None):
    return _Loaded(os.fspath(export_dir))


def _load_keras(export_dir):
    """keras.models.load_model of a SavedModel directory: the Sequential rebuilt from its configuration,
    with the saved variables (trainable again after compile)."""
    from .keras.models import Sequential
    export_dir = os.fspath(export_dir)
    meta = _read_meta(export_dir)
    if "keras" not in meta:
        raise errors.InvalidArgumentError(message="%s holds a tf.function, not a Keras model: use tf.saved_model.load"
                                          % export_dir)
    m = Sequential.from_config(meta["keras"])
    m.build()
    vals = _check_variables(export_dir)
    names = m._variable_names()
    if set(names) != set(vals):
        raise errors.DataLossError(message="%s: the variables file holds %s, the model needs %s" %
                                   (export_dir, sorted(vals), sorted(names)))
    m.set_weights([vals[n].numpy() for n in names])
    return m
