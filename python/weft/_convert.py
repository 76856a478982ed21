"""numpy <-> wf_tensor without copies where the memory allows it.

Into weft: a C-contiguous array of a weft dtype is lent to weft (wf_tensor_wrap): the tensor's data
pointer is the array's, and the array is kept alive until weft drops its last reference. Anything else
(another layout, Python lists, scalars) is first made into such an array by numpy.
Out of weft: an ndarray over the tensor's memory (the array's base keeps the tensor alive).
Strings (WF_STRING) are the exception both ways: numpy has no layout for them, so they are copied into
and out of numpy object arrays of bytes.
"""
import ctypes as C
import itertools
import threading

import numpy as np

from . import _lib
from ._lib import lib, check

try:  # numpy has no bfloat16; ml_dtypes (what JAX and TensorFlow use) does
    import ml_dtypes as _ml

    BF16_NP = np.dtype(_ml.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    BF16_NP = None

NP_OF = {_lib.F32: np.dtype(np.float32), _lib.F64: np.dtype(np.float64), _lib.F16: np.dtype(np.float16),
         _lib.I8: np.dtype(np.int8), _lib.U8: np.dtype(np.uint8), _lib.I16: np.dtype(np.int16),
         _lib.I32: np.dtype(np.int32), _lib.I64: np.dtype(np.int64), _lib.BOOL: np.dtype(np.bool_)}
if BF16_NP is not None:
    NP_OF[_lib.BF16] = BF16_NP
WF_OF = {v: k for k, v in NP_OF.items()}
# numpy types weft does not have, converted to the nearest it does (TensorFlow has them; weft does not)
_WIDEN = {np.dtype(np.uint16): np.dtype(np.int32), np.dtype(np.uint32): np.dtype(np.int64),
          np.dtype(np.uint64): np.dtype(np.int64)}

# ---- lending arrays to weft -------------------------------------------------------------------------

_lent = {}
_lent_lock = threading.Lock()
_tokens = itertools.count(1)
_alive = [True]


def _release(user, data):
    if _alive[0]:  # after interpreter shutdown started, let the memory go with the process
        with _lent_lock:
            _lent.pop(user, None)


_RELEASE = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p)(_release)


def wf_dtype(np_dtype):
    """weft's dtype code for a numpy dtype; TypeError naming it when weft has none."""
    d = np.dtype(np_dtype)
    code = WF_OF.get(d)
    if code is None:
        raise TypeError("weft has no dtype for numpy's %s (weft: float32, float64, float16, bfloat16, int8, "
                        "uint8, int16, int32, int64, bool, string)" % d)
    return code


def lend(arr):
    """A new wf_tensor (caller owns the handle) over arr's memory: no copy."""
    code = wf_dtype(arr.dtype)
    dims = (C.c_int64 * max(arr.ndim, 1))(*arr.shape)
    h = C.c_void_p()
    if arr.size == 0:
        # nothing to lend: a tensor weft allocates (its data pointer is not NULL, which consumers such as
        # the tensor-slices dataset take to mean host memory)
        check(lib.wf_tensor_new(code, arr.ndim, dims, None, C.byref(h)))
        return h.value
    token = next(_tokens)
    with _lent_lock:
        _lent[token] = arr
    st = lib.wf_tensor_wrap(code, arr.ndim, dims, arr.ctypes.data, _RELEASE, token,
                            C.byref(h))
    if st:
        with _lent_lock:
            _lent.pop(token, None)
        check(st)
    return h.value


def as_array(value, dtype=None):
    """value as a C-contiguous numpy array of a weft dtype (no copy when it already is one)."""
    if dtype is not None:
        dtype = np.dtype(dtype)
    arr = np.asarray(value, dtype=dtype)
    if dtype is None:
        if arr.dtype in _WIDEN:
            arr = arr.astype(_WIDEN[arr.dtype])
        elif not isinstance(value, (np.ndarray, np.generic)):
            # Python numbers and lists: TensorFlow's defaults, float32 and int32
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            elif arr.dtype == np.int64:
                arr = arr.astype(np.int32)
    if not arr.flags.c_contiguous or not arr.flags.aligned:
        arr = np.ascontiguousarray(arr)
    return arr


def strings_tensor(values, shape):
    """A WF_STRING tensor from a flat list of bytes."""
    n = len(values)
    ptrs = (C.c_char_p * max(n, 1))(*values)
    lens = (C.c_size_t * max(n, 1))(*[len(v) for v in values])
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    h = C.c_void_p()
    check(lib.wf_tensor_new_strings(len(shape), dims, ptrs, lens, C.byref(h)))
    return h.value


def from_value(value, dtype=None):
    """A new wf_tensor handle for any array-like; strings become WF_STRING. Caller owns it."""
    if isinstance(value, (bytes, str)) or (isinstance(value, np.ndarray) and value.dtype.kind in "OSU") or \
            (isinstance(value, (list, tuple)) and _is_strings(value)):
        arr = np.asarray(value, dtype=object)
        flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
        return strings_tensor(flat, arr.shape)
    return lend(as_array(value, dtype))


def _is_strings(seq):
    for v in seq:
        if isinstance(v, (list, tuple)):
            if v:
                return _is_strings(v)
            continue
        return isinstance(v, (bytes, str))
    return False


# ---- weft to numpy ----------------------------------------------------------------------------------

def shape_of(h):
    r = lib.wf_tensor_rank(h)
    d = lib.wf_tensor_dims(h)
    return tuple(d[i] for i in range(r))


class _Holder:
    """Exposes a tensor's memory to numpy (__array_interface__) and keeps the tensor alive."""
    __slots__ = ("owner", "__array_interface__")

    def __init__(self, owner, ptr, shape, typestr):
        self.owner = owner
        self.__array_interface__ = {"data": (ptr or 0, False), "shape": shape, "typestr": typestr,
                                    "version": 3}


def to_numpy(h, owner, sig=None):
    """An ndarray over tensor h's memory; `owner` (the Python object holding h) is kept alive by it.
    sig: the tensor's (dtype code, shape) when the caller knows them."""
    if sig is not None:
        code, shape = sig
    else:
        code = lib.wf_tensor_dtype(h)
        shape = shape_of(h)
    if code == _lib.STRING:
        n = lib.wf_tensor_size(h)
        out = np.empty(n, dtype=object)
        ln = C.c_size_t()
        for i in range(n):
            p = lib.wf_tensor_string(h, i, C.byref(ln))
            out[i] = C.string_at(p, ln.value) if p else b""
        return out.reshape(shape)
    npd = NP_OF.get(code)
    if npd is None:  # bfloat16 without ml_dtypes: the values as float32 (a copy, said in the README)
        raw = np.asarray(_Holder(owner, lib.wf_tensor_data(h), shape, "<u2"))
        return (raw.astype(np.uint32) << 16).view(np.float32)
    ptr = lib.wf_tensor_data(h)
    if code == _lib.BF16:  # (not npd == BF16_NP: without ml_dtypes that is np.dtype == None, which older
        # numpy answers True for float64, since np.dtype(None) is float64)
        return np.asarray(_Holder(owner, ptr, shape, "<u2")).view(BF16_NP)
    return np.asarray(_Holder(owner, ptr, shape, npd.str))
