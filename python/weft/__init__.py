"""weft: TensorFlow's Python API over weft's C library.

    import weft as tf

Names follow TensorFlow wherever weft does the same thing; the work is weft's (the C library through
ctypes: python/weft/_lib.py). What differs from TensorFlow is written where it differs, and in the
README's "Python package" section.
"""
import builtins as _builtins
import types as _types

from . import errors, dtypes, config, _core
from ._lib import version as _version
from ._core import device, EagerTensor, TensorShape, Tensor
from .dtypes import (DType, as_dtype, float32, float64, float16, bfloat16, half, double, int8, uint8, int16,
                     int32, int64, bool, string)  # noqa: A004
from .function import function, TensorSpec
from . import ops as _ops
from .ops import (add, subtract, multiply, divide, truediv, pow, maximum, minimum, equal, not_equal, less,
                  less_equal, greater, greater_equal, negative, abs, exp, sqrt, square, tanh, sigmoid, matmul,
                  cast, reshape, transpose, concat, expand_dims, squeeze, stack, reduce_sum, reduce_mean,
                  reduce_max, reduce_min, reduce_prod, argmax, argmin, where, fill, zeros, ones, zeros_like,
                  ones_like, range, identity, shape, size, rank, tile, gather, one_hot, constant,
                  convert_to_tensor, clip_by_value, add_n, round, sign, floor, ceil, logical_and, logical_or,
                  logical_not)  # noqa: A004

__version__ = _version()

newaxis = None


def is_tensor(x):
    return isinstance(x, Tensor)


def executing_eagerly():
    return _core.local.trace is None


class _Namespace(_types.ModuleType):
    """A TensorFlow sub-namespace: unknown names are functions weft lacks, which raise
    UnimplementedError (a NotImplementedError) naming them when called, instead of AttributeError."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        full = "%s.%s" % (self.__name__.replace("weft", "tf", 1), name)

        def missing(*args, **kwargs):
            raise errors.UnimplementedError(message="%s is not implemented in weft (no op for it); see the "
                                            "README's Python section for what is" % full)
        missing.__name__ = name
        return missing


def _ns(name, **members):
    m = _Namespace("weft." + name)
    m.__dict__.update(members)
    return m


math = _ns("math", add=add, subtract=subtract, multiply=multiply, divide=divide, truediv=truediv, pow=pow,
           maximum=maximum, minimum=minimum, equal=equal, not_equal=not_equal, less=less, less_equal=less_equal,
           greater=greater, greater_equal=greater_equal, negative=negative, abs=abs, exp=exp, log=_ops.log,
           sqrt=sqrt, rsqrt=_ops.rsqrt, square=square, tanh=tanh, sigmoid=sigmoid, reduce_sum=reduce_sum,
           reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min, reduce_prod=reduce_prod,
           reduce_logsumexp=_ops.reduce_logsumexp, argmax=argmax, argmin=argmin, round=round, sign=sign,
           floor=floor, ceil=ceil, sin=_ops.sin, cos=_ops.cos, erf=_ops.erf, is_nan=_ops.is_nan,
           reciprocal=_ops.reciprocal, softplus=_ops.softplus, add_n=add_n, logical_and=logical_and,
           logical_or=logical_or, logical_not=logical_not, floormod=_ops.floormod, mod=_ops.floormod,
           floordiv=_ops.floordiv)
nn = _ns("nn", relu=_ops.relu, relu6=_ops.relu6, sigmoid=sigmoid, tanh=tanh, softmax=_ops.softmax,
         log_softmax=_ops.log_softmax, gelu=_ops.gelu, elu=_ops.elu, selu=_ops.selu, leaky_relu=_ops.leaky_relu,
         swish=_ops.swish, silu=_ops.swish, softsign=_ops.softsign, softplus=_ops.softplus)
linalg = _ns("linalg", matmul=matmul)
signal = _ns("signal")
raw_ops = _ns("raw_ops")


def _raw(name):
    def op(*inputs, **attrs):
        return _ops.apply(name, list(inputs), attrs)
    return op


class _RawOps(_Namespace):
    """tf.raw_ops.OpName(*inputs, **attrs): any weft op by its name (src/graph); an op weft lacks is
    weft's own NOT_FOUND error naming it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _raw(name)


raw_ops = _RawOps("weft.raw_ops")
random = _ns("random", normal=_ops.random_normal, uniform=_ops.random_uniform,
             truncated_normal=_ops.truncated_normal, set_seed=_ops.set_seed)
experimental = _ns("experimental", dlpack=_types.SimpleNamespace(from_dlpack=_ops.from_dlpack,
                                                                 to_dlpack=_ops.to_dlpack))


def _set_log_device_placement(enabled):
    """Prints, for every op run eagerly, the device it ran on (and why, when it is not the one asked
    for), and for every traced function the placement of each of its nodes, to stderr."""
    _core.config.log_placement = _builtins.bool(enabled)


debugging = _ns("debugging", set_log_device_placement=_set_log_device_placement)

from . import io, image, data, keras, saved_model, distribute, onnx  # noqa: E402,F401
from .keras import mixed_precision as _mp  # noqa: E402,F401
from .ops import from_dlpack  # noqa: E402,F401
from .variables import Variable  # noqa: E402,F401
