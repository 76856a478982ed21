"""tf.keras.Sequential over weft's C model (wf_model: src/model).

The C model needs its input shape when it is made, Keras does not: the Python model keeps the layers'
configurations and builds the C model on the first data it sees (or at `build`, or at once when the
first layer has input_shape). Before `compile` it runs inference through its own session over the
model's graph; `compile` builds the loss, metrics and optimizer step in C, carrying over the weights.
Channels-last image inputs (Keras's default) are transposed once at the model's edge into the NCHW
layout weft's convolutions take.
"""
import ctypes as C
import json
import math
import os
import sys

import numpy as np

from .. import _lib, _core, _convert, dtypes as _dt, errors
from .._core import EagerTensor
from .._lib import lib, check
from . import layers as L
from . import optimizers as _opt, losses as _loss, callbacks as _cb


def _as_f32_array(x):
    if isinstance(x, EagerTensor):
        x = x.numpy()
    a = np.asarray(x)
    if a.dtype != np.float32:
        a = a.astype(np.float32)
    return np.ascontiguousarray(a)


class Model:
    """The base of weft's Keras models. Only Sequential exists: the functional API (Model(inputs,
    outputs)) and subclassed models are not in weft yet, and constructing one says so."""

    def __new__(cls, *args, **kwargs):
        if cls is Model or not issubclass(cls, Sequential):
            raise errors.UnimplementedError(
                message="keras.Model (the functional API or a subclass) is not in weft yet; build the model with "
                        "keras.Sequential")
        return super().__new__(cls)


class Sequential(Model):
    def __init__(self, layers=None, name=None):
        self.name = name or "sequential"
        self._layers = []
        self._input_shape = None
        self._input_dtype = _dt.float32
        self._m = None            # wf_model *
        self._infer_sess = None   # a session over the model's graph before compile
        self._compiled = False
        self._compile_args = None
        self._nhwc = False
        self.history = None
        self.stop_training = False
        self.optimizer = None
        for layer in layers or []:
            self.add(layer)

    # ---- building -----------------------------------------------------------------------------------

    def add(self, layer):
        if self._m is not None:
            raise errors.FailedPreconditionError(message="Sequential.add: the model is already built")
        if isinstance(layer, L.InputLayer):
            self._input_shape = layer.input_shape
            if layer.input_dtype is not None:
                self._input_dtype = _dt.as_dtype(layer.input_dtype)
            return
        if not isinstance(layer, L.Layer):
            raise TypeError("Sequential.add takes a keras layer, got %r" % (layer,))
        if not self._layers and layer.input_shape is not None:
            self._input_shape = layer.input_shape
        if isinstance(layer, L.Embedding) and not self._layers:
            self._input_dtype = _dt.int64
        self._layers.append(layer)
        if self._input_shape is not None and len(self._layers) == 1:
            pass  # built lazily (a model may still get layers)

    @property
    def layers(self):
        return list(self._layers)

    @property
    def built(self):
        return self._m is not None

    def build(self, input_shape=None):
        if self._m is not None:
            return
        if input_shape is not None:
            self._input_shape = tuple(input_shape)[1:]
        if self._input_shape is None:
            raise errors.FailedPreconditionError(
                message="%s: the input shape is not known yet; give the first layer input_shape=, add a "
                        "keras.Input, or call the model on data first" % self.name)
        shape = [int(d) for d in self._input_shape]
        first_spatial = next((l for l in self._layers if isinstance(l, (L.Conv2D, L._Pool))), None)
        if first_spatial is not None and first_spatial.data_format == "channels_last" and len(shape) == 3:
            self._nhwc = True
            shape = [shape[2], shape[0], shape[1]]
        dims = (C.c_int64 * len(shape))(*shape)
        h = C.c_void_p()
        check(lib.wf_model_new(self._input_dtype._code, len(shape), dims, 1, C.byref(h)))
        try:
            for layer in self._layers:
                c = layer.to_c()
                check(lib.wf_model_add(h.value, C.byref(c)))
        except BaseException:
            lib.wf_model_free(h.value)
            raise
        self._m = h.value

    def _build_for(self, x):
        """Builds the C model on the first data it sees: an array, a tensor, or a dataset of batches
        (of features, or of (features, labels)), whose first batch gives the shape."""
        if self._m is not None:
            return
        if self._input_shape is None:
            from ..data import Dataset
            if isinstance(x, Dataset):
                first = next(iter(x.take(1)))
                x = first[0] if isinstance(first, tuple) else first
            self._input_shape = tuple(x.shape[1:]) if isinstance(x, EagerTensor) else tuple(np.shape(x)[1:])
        self.build()

    def __del__(self):
        if lib is None:
            return
        if self._infer_sess:
            lib.wf_session_free(self._infer_sess)
            self._infer_sess = None
        if self._m:
            lib.wf_model_free(self._m)
            self._m = None

    # ---- sessions and weights -------------------------------------------------------------------------

    def _session(self):
        if self._compiled:
            return lib.wf_model_session(self._m)
        if self._infer_sess is None:
            so = _core.session_options()
            s = C.c_void_p()
            check(lib.wf_session_new(_core.context(), lib.wf_model_graph(self._m), C.byref(so), C.byref(s)))
            self._infer_sess = s.value
        return self._infer_sess

    def _variable_names(self):
        g = lib.wf_model_graph(self._m)
        names = []
        for i in range(lib.wf_graph_num_nodes(g)):
            n = lib.wf_graph_node(g, i)
            if lib.wf_node_op(n) == b"Variable":
                nm = lib.wf_node_name(n).decode()
                if "/" in nm and not nm.startswith(("optimizer/", "model/", "metrics/")):
                    names.append(nm)
        return names

    @property
    def weights(self):
        if self._m is None:
            return []
        sess = self._session()
        out = []
        for nm in self._variable_names():
            h = C.c_void_p()
            check(lib.wf_session_get_variable(sess, nm.encode(), C.byref(h)))
            out.append(EagerTensor(h.value))
        return out

    trainable_weights = weights
    variables = weights

    def get_weights(self):
        return [w.numpy().copy() for w in self.weights]

    def set_weights(self, weights):
        names = self._variable_names()
        if len(weights) != len(names):
            raise errors.InvalidArgumentError(message="set_weights: the model has %d weights (%s), got %d" %
                                              (len(names), ", ".join(names), len(weights)))
        sess = self._session()
        for nm, w in zip(names, weights):
            t = _core.const(np.ascontiguousarray(np.asarray(w)))
            check(lib.wf_session_set_variable(sess, nm.encode(), t._h))

    def count_params(self):
        return int(sum(int(np.prod(w.shape)) for w in self.weights))

    def save_weights(self, filepath, overwrite=True):
        self._require_built("save_weights")
        check(lib.wf_session_save(self._session(), filepath.encode()))

    def load_weights(self, filepath):
        self._require_built("load_weights")
        check(lib.wf_session_restore(self._session(), filepath.encode()))

    def _require_built(self, what):
        if self._m is None:
            raise errors.FailedPreconditionError(message="%s: the model is not built yet (call it on data, or "
                                                 "give the first layer input_shape=)" % what)

    # ---- compile and train ----------------------------------------------------------------------------

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=1, jit_compile="auto", **kwargs):
        if self._compiled:
            raise errors.FailedPreconditionError(message="compile: weft compiles a model once")
        self.optimizer = _opt.get(optimizer)
        self.loss = _loss.get(loss)
        metrics = list(metrics or [])
        acc = False
        for m in metrics:
            mn = m if isinstance(m, str) else getattr(m, "name", type(m).__name__)
            if mn in ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy"):
                acc = True
            else:
                raise errors.UnimplementedError(message="metric %r is not in weft (accuracy is)" % (m,))
        self._compile_args = (self.optimizer, self.loss, acc, steps_per_execution)
        if self._m is not None:
            self._compile_now()

    def _compile_now(self):
        optimizer, loss, acc, _ = self._compile_args
        o = _lib.CompileOptions()
        lib.wf_compile_options_init(C.byref(o))
        optimizer._fill(o.optimizer)
        loss._fill(o)
        o.accuracy = int(acc)
        o.strict_placement = 0 if _core.config.soft_placement else 1
        o.inter_op_threads = _core.config.inter_op
        o.intra_op_threads = _core.config.intra_op
        dev = _core.local.device
        if dev:
            self._dev_b = dev.encode()
            o.device = self._dev_b
        carried = None
        if self._infer_sess is not None:  # weights set or seen before compile: keep them
            carried = self.get_weights()
            lib.wf_session_free(self._infer_sess)
            self._infer_sess = None
        check(lib.wf_model_compile(self._m, _core.context(), C.byref(o)))
        self._compiled = True
        if carried is not None:
            self.set_weights(carried)

    def _need_compiled(self, what):
        if self._compile_args is None:
            raise errors.FailedPreconditionError(message="%s: compile the model first (model.compile(optimizer=..., "
                                                 "loss=...))" % what)
        if not self._compiled:
            self._compile_now()

    def _to_nchw(self, a):
        return np.ascontiguousarray(a.transpose(0, 3, 1, 2)) if self._nhwc and a.ndim == 4 else a

    def _labels(self, y):
        if isinstance(y, EagerTensor):
            y = y.numpy()
        y = np.asarray(y)
        if self.loss.sparse:
            return np.ascontiguousarray(y.astype(np.int64).reshape(-1))
        return np.ascontiguousarray(y.astype(np.float32))

    def _dataset(self, x, y):
        from ..data import Dataset
        if isinstance(x, Dataset):
            ds = x
            if self._nhwc:
                from .. import ops
                ds = ds.map(lambda a, b: (ops.transpose(a, [0, 3, 1, 2]), b))
            return ds, ds._h
        xa = self._to_nchw(_as_f32_array(x) if self._input_dtype == _dt.float32 else np.ascontiguousarray(x))
        xt = _core.const(xa)
        yt = _core.const(self._labels(y)) if y is not None else None
        h = C.c_void_p()
        check(lib.wf_dataset_from_tensors(xt._h, yt._h if yt is not None else None, C.byref(h)))
        return (xt, yt, _DS(h.value)), h.value

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1, **kw):
        from ..data import Dataset
        self._build_for(x)
        self._need_compiled("fit")
        keep, train_h = self._dataset(x, y)
        o = _lib.FitOptions()
        lib.wf_fit_options_init(C.byref(o))
        o.epochs = int(epochs)
        if batch_size is not None:
            o.batch_size = int(batch_size)
        o.validation_split = float(validation_split)
        o.shuffle = int(bool(shuffle))
        o.verbose = 1 if verbose == "auto" else int(verbose)
        o.initial_epoch = int(initial_epoch)
        val_keep = None
        if validation_data is not None:
            if isinstance(validation_data, Dataset):
                val_keep, vh = self._dataset(validation_data, None)
            else:
                vx, vy = validation_data[0], validation_data[1]
                val_keep, vh = self._dataset(vx, vy)
            o.validation_data = vh
        cbs = _cb.CallbackList(callbacks or [], self)
        hist = _cb.History()
        cbs.append(hist)
        self.stop_training = False
        err = []

        def on_epoch(user, logs_p):
            try:
                lg = logs_p.contents
                logs = {"loss": lg.loss}
                if not math.isnan(lg.accuracy):
                    logs["accuracy"] = lg.accuracy
                if lg.has_validation:
                    logs["val_loss"] = lg.val_loss
                    if not math.isnan(lg.val_accuracy):
                        logs["val_accuracy"] = lg.val_accuracy
                cbs.on_epoch_end(lg.epoch, logs)
                return 1 if self.stop_training else 0
            except BaseException as e:  # an exception cannot cross the C frames: stop and re-raise after
                err.append(e)
                return 1

        cfn = _lib.EPOCH_CALLBACK(on_epoch)
        o.on_epoch_end = cfn
        sys.stdout.flush()
        cbs.on_train_begin()
        last = _lib.EpochLogs()
        try:
            check(lib.wf_model_fit(self._m, train_h, C.byref(o), C.byref(last)))
        finally:
            _libc_flush()
        if err:
            raise err[0]
        cbs.on_train_end()
        self.history = hist
        return hist

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", return_dict=False, **kw):
        self._build_for(x)
        self._need_compiled("evaluate")
        keep, h = self._dataset(x, y)
        loss, acc = C.c_double(), C.c_double()
        check(lib.wf_model_evaluate(self._m, h, int(batch_size or 32), C.byref(loss), C.byref(acc)))
        res = {"loss": loss.value}
        if not math.isnan(acc.value):
            res["accuracy"] = acc.value
        if verbose not in (0, "0"):
            print(" - ".join("%s: %.4f" % kv for kv in res.items()))
        if return_dict:
            return res
        return [res["loss"], res["accuracy"]] if "accuracy" in res else res["loss"]

    def predict(self, x, batch_size=None, verbose="auto", steps=None, **kw):
        xa = x.numpy() if isinstance(x, EagerTensor) else x
        from ..data import Dataset
        if isinstance(xa, Dataset):
            return np.concatenate([self.predict(b[0] if isinstance(b, tuple) else b, batch_size) for b in xa])
        self._build_for(xa)
        bs = int(batch_size or 32)
        xa = self._to_nchw(_as_f32_array(xa) if self._input_dtype == _dt.float32 else np.ascontiguousarray(xa))
        outs = [self._run(xa[i:i + bs]) for i in range(0, max(len(xa), 1), bs)] if len(xa) else []
        return np.concatenate([o.numpy() for o in outs]) if outs else np.zeros((0,))

    def _run(self, xa):
        sess = self._session()
        t = _core.const(xa)
        feed = _lib.Feed(lib.wf_model_input(self._m), t._h)
        fetch = (_lib.Output * 1)(lib.wf_model_output(self._m))
        out = (C.c_void_p * 1)()
        check(lib.wf_session_run(sess, C.byref(feed), 1, fetch, 1, out, None))
        return EagerTensor(out[0])

    def __call__(self, inputs, training=False, mask=None):
        if _core.local.trace is not None:
            raise errors.UnimplementedError(message="calling a keras model inside tf.function is not in weft yet; "
                                            "call it eagerly (it runs as one weft graph either way)")
        xa = inputs.numpy() if isinstance(inputs, EagerTensor) else np.asarray(inputs)
        self._build_for(xa)
        xa = self._to_nchw(_as_f32_array(xa) if self._input_dtype == _dt.float32 else np.ascontiguousarray(xa))
        return self._run(xa)

    def summary(self, line_length=None, positions=None, print_fn=None, **kw):
        self._require_built("summary")
        txt = C.c_void_p()
        check(lib.wf_model_summary(self._m, C.byref(txt)))
        (print_fn or print)(_lib.take_string(txt.value))

    # ---- saving -----------------------------------------------------------------------------------------

    def save(self, filepath, overwrite=True, **kw):
        from .. import saved_model
        saved_model.save(self, filepath)

    def export_onnx(self, path):
        """The inference graph with the current weights as an ONNX file."""
        self._require_built("export_onnx")
        names = (C.c_char_p * 1)(b"output")
        fetch = (_lib.Output * 1)(lib.wf_model_output(self._m))
        check(lib.wf_session_export_onnx(self._session(), fetch, names, 1, path.encode()))

    def get_config(self):
        return {"name": self.name, "input_shape": list(self._input_shape) if self._input_shape else None,
                "input_dtype": self._input_dtype.name,
                "layers": [{"class_name": type(l).__name__, "config": l.get_config()} for l in self._layers]}

    @classmethod
    def from_config(cls, config):
        m = cls(name=config.get("name"))
        if config.get("input_shape") is not None:
            m.add(L.InputLayer(shape=tuple(config["input_shape"]), dtype=config.get("input_dtype")))
        for spec in config["layers"]:
            klass = getattr(L, spec["class_name"], None)
            if klass is None:
                raise errors.InvalidArgumentError(message="unknown layer class %r in the model's config" %
                                                  spec["class_name"])
            cfg = dict(spec["config"])
            for k in ("input_shape", "dtype_policy", "trainable"):
                cfg.pop(k, None)
            m.add(klass(**cfg))
        return m


class _DS:
    """Frees a C dataset made for one fit/evaluate call."""

    def __init__(self, h):
        self.h = h

    def __del__(self):
        if lib is not None and self.h:
            lib.wf_dataset_free(self.h)


def _libc_flush():
    try:
        C.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def load_model(filepath, compile=True, **kw):
    from .. import saved_model
    return saved_model._load_keras(filepath)
