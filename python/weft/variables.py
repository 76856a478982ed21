"""tf.Variable: a value that changes between runs.

Eagerly it is a holder of a tensor that `assign` replaces. A tf.function that uses one reads it as an
input fed with the variable's current value at every call (so an assign between calls is seen without
retracing); assigning to a variable inside a tf.function is not supported (it raises saying so). Keras
models keep their weights in the C model's session, not in tf.Variables.
"""
import itertools

import numpy as np

from . import _core, dtypes as _dt, errors
from ._core import EagerTensor, Tensor

_names = itertools.count()


class Variable(Tensor):
    def __init__(self, initial_value, trainable=True, name=None, dtype=None, shape=None, **kwargs):
        if callable(initial_value):
            initial_value = initial_value()
        v = initial_value.numpy() if isinstance(initial_value, EagerTensor) else initial_value
        arr = np.array(v, dtype=_dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else None)  # a copy
        if dtype is None and not isinstance(v, (np.ndarray, np.generic, EagerTensor)):
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            elif arr.dtype == np.int64:
                arr = arr.astype(np.int32)
        self._value = _core.const(np.ascontiguousarray(arr))
        self.trainable = trainable
        self.name = (name or "Variable") + ":0" if not (name or "").endswith(":0") else name
        self._id = next(_names)

    # ---- reading -----------------------------------------------------------------------------------
    @property
    def dtype(self):
        return self._value.dtype

    @property
    def shape(self):
        return self._value.shape

    @property
    def device(self):
        return self._value.device

    def read_value(self):
        tr = _core.local.trace
        if tr is not None:
            return _core.SymbolicTensor(tr, tr.to_output(self))
        return self._value

    value = read_value

    def numpy(self):
        return self._value.numpy()

    def __array__(self, dtype=None, copy=None):
        return self._value.__array__(dtype, copy)

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __bool__(self):
        return bool(self._value)

    def __len__(self):
        return len(self._value)

    def __eq__(self, o):
        return _core._ops().equal(self, o)

    def __ne__(self, o):
        return _core._ops().not_equal(self, o)

    __hash__ = object.__hash__

    # ---- writing -------------------------------------------------------------------------------------
    def assign(self, value, use_locking=None, name=None, read_value=True):
        if _core.local.trace is not None:
            raise errors.UnimplementedError(message="assigning to %s inside tf.function is not supported in weft: "
                                            "assign between calls (the function reads the new value)" % self.name)
        t = value if isinstance(value, EagerTensor) else _core.const(np.asarray(value, dtype=self.dtype.as_numpy_dtype))
        if t.dtype != self.dtype or tuple(t.shape) != tuple(self.shape):
            raise errors.InvalidArgumentError(message="assign to %s (%s%s): the value is %s%s" % (
                self.name, self.dtype.name, list(self.shape), t.dtype.name, list(t.shape)))
        self._value = _core.const(np.array(t.numpy()))  # its own copy: later writes to `value` do not leak in
        return self if read_value else None

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self.assign(_core._ops().add(self._value, delta), read_value=read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self.assign(_core._ops().subtract(self._value, delta), read_value=read_value)

    def __repr__(self):
        return "<tf.Variable '%s' shape=%s dtype=%s, numpy=%s>" % (self.name, self.shape.as_list(), self.dtype.name,
                                                                   np.array2string(self.numpy(), threshold=20))
