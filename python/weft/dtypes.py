"""tf.dtypes: TensorFlow's DType objects over weft's dtypes."""
import numpy as np

from . import _lib
from . import _convert


class DType:
    """A dtype as TensorFlow shows it (`tf.float32`), with weft's code underneath."""
    __slots__ = ("name", "_code")

    def __init__(self, name, code):
        self.name = name
        self._code = code

    @property
    def as_numpy_dtype(self):
        if self._code == _lib.STRING:
            return np.object_
        d = _convert.NP_OF.get(self._code)
        return d.type if d is not None else np.float32

    @property
    def size(self):
        return _lib.lib.wf_dtype_size(self._code)

    @property
    def is_floating(self):
        return self._code in (_lib.F32, _lib.F64, _lib.F16, _lib.BF16)

    @property
    def is_integer(self):
        return self._code in (_lib.I8, _lib.U8, _lib.I16, _lib.I32, _lib.I64)

    @property
    def is_bool(self):
        return self._code == _lib.BOOL

    def __eq__(self, other):
        try:
            return as_dtype(other)._code == self._code
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self):
        return hash(self._code)

    def __repr__(self):
        return "tf." + self.name

    __str__ = lambda self: "<dtype: '%s'>" % self.name


float32 = DType("float32", _lib.F32)
float64 = DType("float64", _lib.F64)
float16 = DType("float16", _lib.F16)
bfloat16 = DType("bfloat16", _lib.BF16)
int8 = DType("int8", _lib.I8)
uint8 = DType("uint8", _lib.U8)
int16 = DType("int16", _lib.I16)
int32 = DType("int32", _lib.I32)
int64 = DType("int64", _lib.I64)
bool = DType("bool", _lib.BOOL)  # noqa: A001 - TensorFlow's name
string = DType("string", _lib.STRING)
half = float16
double = float64

_BY_CODE = {d._code: d for d in (float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool, string)}
_BY_NAME = {d.name: d for d in _BY_CODE.values()}
_BY_NAME.update({"half": float16, "double": float64, "float": float32})


def from_code(code):
    return _BY_CODE[code]


def as_dtype(x):
    """tf.as_dtype: a DType from a DType, a name, a numpy dtype or a Python type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is object or x is bytes or x is str:
        return string
    if x is float:
        return float32
    if x is int:
        return int32
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError("cannot convert %r to a dtype" % (x,)) from None
    code = _convert.WF_OF.get(npd)
    if code is None:
        if npd.kind in "OSU":
            return string
        raise TypeError("weft has no dtype %s" % npd)
    return _BY_CODE[code]
