"""The runtime under the API: the process's context, device scopes, tensors, and how an op runs.

An op called outside tf.function runs eagerly: weft has no eager mode of its own, so each distinct
(op, attributes, input dtypes and shapes, device scope) becomes a one-node graph with a session,
cached (LRU, _EAGER_CACHE_SIZE plans), and a call is one wf_session_run. Inside a tf.function trace the
same call adds a node to the function's graph instead (SymbolicTensor). Either way the op, its checks
and its kernels are weft's: Python only routes.
"""
import collections
import ctypes as C
import sys
import threading

import numpy as np

from . import _lib, _convert, dtypes as _dt, errors
from ._lib import lib, check

# ---- configuration (tf.config) ---------------------------------------------------------------------


class _Config:
    def __init__(self):
        self.inter_op = 0
        self.intra_op = 0
        self.soft_placement = True
        self.log_placement = False
        self.jit = None            # None: weft's default (generated kernels on); True/False: set_jit
        self.memory_growth = {}
        self.memory_limits = {}    # device spec -> bytes


config = _Config()
_ctx = None
_ctx_lock = threading.Lock()


def context():
    """The process's wf_context, made on first use with the configured thread pools."""
    global _ctx
    if _ctx is None:
        with _ctx_lock:
            if _ctx is None:
                o = _lib.ContextOptions()
                lib.wf_context_options_init(C.byref(o))
                o.inter_op_threads = config.inter_op
                o.intra_op_threads = config.intra_op
                h = C.c_void_p()
                check(lib.wf_context_new(C.byref(o), C.byref(h)))
                for spec, nbytes in config.memory_limits.items():
                    check(lib.wf_context_set_memory_limit(h, spec.encode(), nbytes))
                _ctx = h.value
    return _ctx


def context_initialized():
    return _ctx is not None


def devices():
    """[(full name, type, DeviceInfo)] of the context."""
    ctx = context()
    out = []
    for i in range(lib.wf_context_num_devices(ctx)):
        info = _lib.DeviceInfo()
        check(lib.wf_context_device(ctx, i, C.byref(info)))
        out.append((info.name.decode(), info.type.decode(), info))
    return out


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- device scopes ----------------------------------------------------------------------------------

class _Local(threading.local):
    def __init__(self):
        self.device = ""       # the merged spec of the enclosing tf.device scopes ("" = any)
        self.trace = None      # the tf.function trace being built, or None


local = _Local()


def parse_spec(text):
    spec = _lib.DeviceSpec()
    check(lib.wf_device_spec_parse(_lib.s(text), C.byref(spec)))
    return spec


def format_spec(spec):
    buf = C.create_string_buffer(256)
    lib.wf_device_spec_format(C.byref(spec), buf, 256)
    return buf.value.decode()


class device:
    """tf.device(spec): nodes made inside run on `spec` where they can. Nested scopes merge by the C
    API's rules (wf_device_spec_merge): with soft placement on (the default) an inner scope naming
    another type or index leaves that part open, with it off they must agree. None clears the scope."""

    def __init__(self, spec):
        if spec is not None and not isinstance(spec, str):
            spec = getattr(spec, "name", spec)
            if not isinstance(spec, str):
                raise TypeError("tf.device takes a device name, got %r" % (spec,))
        self._spec = spec
        self._saved = []

    def __enter__(self):
        self._saved.append(local.device)
        if self._spec is None:
            local.device = ""
            return self
        inner = parse_spec(self._spec)
        if local.device:
            merged = parse_spec(local.device)
            check(lib.wf_device_spec_merge(C.byref(merged), C.byref(inner), 1 if config.soft_placement else 0))
            local.device = format_spec(merged)
        else:
            local.device = format_spec(inner)
        return self

    def __exit__(self, *exc):
        local.device = self._saved.pop()
        return False


# ---- shapes -----------------------------------------------------------------------------------------

class TensorShape(tuple):
    """A shape: a tuple of ints (None for a dim known only at run time), with TensorFlow's helpers."""

    def __new__(cls, dims):
        if dims is None:
            return super().__new__(cls, ())
        return super().__new__(cls, (None if d is None or d < 0 else int(d) for d in dims))

    @property
    def rank(self):
        return len(self)

    ndims = rank

    def as_list(self):
        return list(self)

    def num_elements(self):
        n = 1
        for d in self:
            if d is None:
                return None
            n *= d
        return n

    def is_fully_defined(self):
        return all(d is not None for d in self)

    def __repr__(self):
        return "TensorShape(%s)" % list(self)


# ---- tensors ----------------------------------------------------------------------------------------

class Tensor:
    """Shared behaviour of eager and symbolic tensors: Python operators and indexing route to ops."""
    __array_priority__ = 100

    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().subtract(self, o)
    def __rsub__(self, o): return _ops().subtract(o, self)
    def __mul__(self, o): return _ops().multiply(self, o)
    def __rmul__(self, o): return _ops().multiply(o, self)
    def __truediv__(self, o): return _ops().divide(self, o)
    def __rtruediv__(self, o): return _ops().divide(o, self)
    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)
    def __pow__(self, o): return _ops().pow(self, o)
    def __rpow__(self, o): return _ops().pow(o, self)
    def __mod__(self, o): return _ops().floormod(self, o)
    def __rmod__(self, o): return _ops().floormod(o, self)
    def __floordiv__(self, o): return _ops().floordiv(self, o)
    def __rfloordiv__(self, o): return _ops().floordiv(o, self)
    def __and__(self, o): return _ops().logical_and(self, o)
    def __rand__(self, o): return _ops().logical_and(o, self)
    def __or__(self, o): return _ops().logical_or(self, o)
    def __ror__(self, o): return _ops().logical_or(o, self)
    def __xor__(self, o): return _ops().not_equal(self, o)
    def __rxor__(self, o): return _ops().not_equal(o, self)
    def __invert__(self): return _ops().logical_not(self)
    def __neg__(self): return _ops().negative(self)
    def __abs__(self): return _ops().abs(self)
    def __lt__(self, o): return _ops().less(self, o)
    def __le__(self, o): return _ops().less_equal(self, o)
    def __gt__(self, o): return _ops().greater(self, o)
    def __ge__(self, o): return _ops().greater_equal(self, o)
    def __getitem__(self, key): return _ops().getitem(self, key)
    # elementwise, as TensorFlow 2's tensors (symbolic ones too: `x % 2 == 0` in a traced filter)
    def __eq__(self, o): return _ops().equal(self, o)
    def __ne__(self, o): return _ops().not_equal(self, o)
    __hash__ = object.__hash__

    @property
    def ndim(self):
        return len(self.shape)

    def get_shape(self):
        return self.shape


def _ops():
    from . import ops
    return ops


class EagerTensor(Tensor):
    """A value in host memory: a wf_tensor handle, the device that produced it."""
    __slots__ = ("_h", "_device", "_np", "_s")

    def __init__(self, handle, device_name=None, sig=None):
        self._h = handle
        self._device = device_name
        self._np = None
        self._s = sig  # (dtype code, shape tuple), read once: the eager cache's key

    def _sig(self):
        s = self._s
        if s is None:
            s = self._s = (lib.wf_tensor_dtype(self._h), _convert.shape_of(self._h))
        return s

    def __del__(self):
        h = self._h
        if h and lib is not None:
            self._h = None
            lib.wf_tensor_free(h)

    @property
    def dtype(self):
        return _dt.from_code(lib.wf_tensor_dtype(self._h))

    @property
    def shape(self):
        return TensorShape(_convert.shape_of(self._h))

    @property
    def device(self):
        """The full weft name of the device the op that made it ran on (TensorFlow's
        /job:localhost/replica:0/task:0/device:CPU:0 form)."""
        return self._device or "/job:localhost/replica:0/task:0/device:CPU:0"

    def numpy(self):
        """The value as an ndarray over the tensor's own memory (no copy). A string scalar is its bytes
        (as TensorFlow gives it)."""
        if self._np is None:
            self._np = _convert.to_numpy(self._h, self, self._s)
            if self._np.dtype == object and self._np.ndim == 0:
                return self._np.item()
        elif self._np.dtype == object and self._np.ndim == 0:
            return self._np.item()
        return self._np

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    @property
    def __array_interface__(self):
        return self.numpy().__array_interface__

    def __dlpack__(self, stream=None, **kw):
        return self.numpy().__dlpack__(**kw)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: every value Python sees is in host memory

    def data_ptr(self):
        return lib.wf_tensor_data(self._h)

    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("len() of a scalar tensor")
        return s[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self):
        return bool(self.numpy())

    def __float__(self):
        return float(self.numpy())

    def __int__(self):
        return int(self.numpy())

    def __index__(self):
        return int(self.numpy())

    def __repr__(self):
        return "<tf.Tensor: shape=%s, dtype=%s, numpy=%s>" % (self.shape.as_list(), self.dtype.name,
                                                             np.array2string(self.numpy(), threshold=20))

    def __str__(self):
        return "tf.Tensor(%s, shape=%s, dtype=%s)" % (self.numpy(), tuple(self.shape), self.dtype.name)


def const(value, dtype=None):
    """An EagerTensor over `value` (numpy arrays of weft dtypes are lent, not copied)."""
    if type(value) is np.ndarray and dtype is None:  # the common case: lend it as it is, no copy
        code = _convert.WF_OF.get(value.dtype)
        if code is not None and value.flags.c_contiguous and value.flags.aligned:
            return EagerTensor(_convert.lend(value), None, (code, value.shape))
    from .variables import Variable  # (variables.py imports this module)
    if isinstance(value, Variable):
        value = value.read_value()  # its tensor now, or inside tf.function its input
    if isinstance(value, EagerTensor):
        if dtype is not None and _dt.as_dtype(dtype) != value.dtype:
            return _ops().cast(value, dtype)
        return value
    if isinstance(value, SymbolicTensor):
        return value
    npd = None
    if dtype is not None:
        d = _dt.as_dtype(dtype)
        if d._code == _lib.STRING:
            return EagerTensor(_convert.from_value(np.asarray(value, dtype=object)))
        npd = _convert.NP_OF.get(d._code)
        if npd is None:
            raise TypeError("numpy cannot hold %s values here (install ml_dtypes)" % d.name)
    if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
        value = np.from_dlpack(value)
    return EagerTensor(_convert.from_value(value, npd))


# ---- graph building (shared by eager plans and tf.function traces) ----------------------------------

def _attrs(attrs, keep):
    """wf_attr array from {name: value}; `keep` collects the buffers that must outlive the call."""
    arr = (_lib.Attr * max(len(attrs), 1))()
    for k, (name, v) in enumerate(attrs.items()):
        a = arr[k]
        a.name = name.encode()
        if isinstance(v, _dt.DType):
            a.type, a.dtype = _lib.ATTR_DTYPE, v._code
        elif isinstance(v, bool) or isinstance(v, (int, np.integer)):
            a.type, a.i = _lib.ATTR_INT, int(v)
        elif isinstance(v, (float, np.floating)):
            a.type, a.f = _lib.ATTR_FLOAT, float(v)
        elif isinstance(v, str):
            a.type, a.s = _lib.ATTR_STRING, v.encode()
        elif isinstance(v, (list, tuple)):
            if all(isinstance(x, (int, np.integer)) for x in v):
                buf = (C.c_int64 * max(len(v), 1))(*v)
                a.type, a.ints, a.n = _lib.ATTR_INTS, C.cast(buf, C.POINTER(C.c_int64)), len(v)
            else:
                buf = (C.c_double * max(len(v), 1))(*v)
                a.type, a.floats, a.n = _lib.ATTR_FLOATS, C.cast(buf, C.POINTER(C.c_double)), len(v)
            keep.append(buf)
        elif isinstance(v, EagerTensor):
            a.type, a.tensor = _lib.ATTR_TENSOR, v._h
        else:
            raise TypeError("attribute %s: unsupported value %r" % (name, v))
    return arr


def add_node(g, op_type, inputs, attrs, name=None):
    """Adds op_type over inputs (wf_output or None for an absent optional input) to graph g;
    returns the node handle."""
    keep = []
    ins = (_lib.Output * max(len(inputs), 1))()
    for i, o in enumerate(inputs):
        if o is not None:
            ins[i] = o
    at = _attrs(attrs, keep)
    node = C.c_void_p()
    check(lib.wf_op(g, op_type.encode(), _lib.s(name), ins, len(inputs), at, len(attrs), C.byref(node)))
    return node.value


def out_of(node, index=0):
    return _lib.Output(node, index)


def output_info(o):
    dims = (C.c_int64 * _lib.MAX_RANK)()
    r = lib.wf_output_shape(o, dims)
    shape = None if r < 0 else TensorShape(dims[i] for i in range(r))
    return _dt.from_code(lib.wf_output_dtype(o)), shape


# ---- symbolic tensors (inside tf.function) -----------------------------------------------------------

class SymbolicTensor(Tensor):
    """An output of a node in a function's graph while it is traced."""
    __slots__ = ("_trace", "_out", "dtype", "shape")

    def __init__(self, trace, out):
        self._trace = trace
        self._out = out
        self.dtype, shape = output_info(out)
        self.shape = shape if shape is not None else TensorShape(())

    @property
    def device(self):
        return local.device

    def numpy(self):
        raise errors.FailedPreconditionError(
            message="numpy() of a symbolic tensor inside tf.function: its value exists only when the "
                    "function runs; return it from the function instead")

    def __bool__(self):
        raise TypeError("using a symbolic tensor as a Python bool inside tf.function is not supported: "
                        "weft traces straight-line code (no autograph)")

    def __len__(self):
        if not self.shape or self.shape[0] is None:
            raise TypeError("len() of a tensor of unknown first dim")
        return self.shape[0]

    def __repr__(self):
        return "<tf.Tensor '%s' shape=%s dtype=%s>" % (lib.wf_node_name(self._out.node).decode(),
                                                     self.shape.as_list(), self.dtype.name)


# ---- eager execution ----------------------------------------------------------------------------------

_EAGER_CACHE_SIZE = 1024
# The seed without tf.random.set_seed, and the seed half of a tf.function's random input (whose counter
# half changes per call)
RANDOM_BASE = 0x5eed


class _EagerPlan:
    """A one-node graph and its session for one op signature."""
    __slots__ = ("graph", "sess", "feeds", "fetches", "n_out", "devices", "reasons", "outs", "op", "lock", "out_sigs",
                 "attr_tensors")

    def __init__(self, op_type, in_sigs, attrs, n_out, dev):
        self.op = op_type
        # the cache key names tensor attributes by id(): holding them keeps that id from being reused
        # by another tensor (which would hit this plan with the old value)
        self.attr_tensors = [v for v in attrs.values() if isinstance(v, EagerTensor)]
        self.lock = threading.Lock()
        g = C.c_void_p()
        check(lib.wf_graph_new(C.byref(g)))
        self.graph = g.value
        self.sess = None
        try:
            phs = []
            for k, (code, shape) in enumerate(in_sigs):
                if code is None:
                    phs.append(None)
                    continue
                o = _lib.Output()
                dims = (C.c_int64 * max(len(shape), 1))(*shape)
                check(lib.wf_placeholder(self.graph, b"x%d" % k, code, len(shape), dims, C.byref(o)))
                phs.append(o)
            if dev:
                check(lib.wf_graph_set_device(self.graph, dev.encode()))
            node = add_node(self.graph, op_type, phs, attrs, op_type)
            real = [p for p in phs if p is not None]
            self.feeds = (_lib.Feed * max(len(real), 1))()
            for i, p in enumerate(real):
                self.feeds[i].output = p
            self.n_out = n_out if n_out else lib.wf_node_num_outputs(node)
            self.fetches = (_lib.Output * self.n_out)(*[out_of(node, i) for i in range(self.n_out)])
            self.outs = (C.c_void_p * self.n_out)()
            # output signatures known when the plan is built (static shapes), so results need no lookup
            sigs = []
            for i in range(self.n_out):
                d, sh = output_info(self.fetches[i])
                sigs.append((d._code, tuple(sh)) if sh is not None and all(x is not None for x in sh) else None)
            self.out_sigs = sigs
            so = session_options()
            s = C.c_void_p()
            check(lib.wf_session_new(context(), self.graph, C.byref(so), C.byref(s)))
            self.sess = s.value
            self.devices = None
        except BaseException:
            self.free()
            raise

    def free(self):
        if self.sess:
            lib.wf_session_free(self.sess)
            self.sess = None
        if self.graph:
            lib.wf_graph_free(self.graph)
            self.graph = None

    def __del__(self):
        if lib is not None:
            self.free()

    def placement(self, n_feeds):
        """(device of the op, reason) from the session's plan, read once."""
        if self.devices is None:
            p = C.c_void_p()
            check(lib.wf_session_placement_get(self.sess, self.feeds, n_feeds, self.fetches, self.n_out, C.byref(p)))
            try:
                dev, why = None, ""
                for i in range(lib.wf_placement_num_entries(p.value)):
                    e = lib.wf_placement_entry_at(p.value, i)
                    if e.node and e.node.decode() == self.op and not e.is_copy:
                        dev, why = e.device.decode(), (e.reason or b"").decode()
                self.devices, self.reasons = dev or "/job:localhost/replica:0/task:0/device:CPU:0", why
            finally:
                lib.wf_placement_free(p.value)
        return self.devices, self.reasons


_eager = {}
_eager_lock = threading.Lock()


def session_options(jit=None):
    so = _lib.SessionOptions()
    lib.wf_session_options_init(C.byref(so))
    so.strict_placement = 0 if config.soft_placement else 1
    j = config.jit if jit is None else jit
    if j is False:
        so.disable_passes = b"jit"
    return so


def clear_eager_cache():
    with _eager_lock:
        _eager.clear()


def _freeze(v):
    if isinstance(v, list):
        return tuple(v)
    if isinstance(v, EagerTensor):
        return ("T", id(v))
    return v


def _plan_for(op_type, inputs, attrs, n_out, akey):
    dev = local.device
    sig = tuple([None if t is None else (t._s or t._sig()) for t in inputs])
    key = (op_type, sig, akey, dev, config.soft_placement, n_out)
    plan = _eager.get(key)
    if plan is None:
        plan = _EagerPlan(op_type, [(None, None) if x is None else x for x in sig], attrs, n_out, dev)
        with _eager_lock:
            if len(_eager) >= _EAGER_CACHE_SIZE:  # first in, first out: a full cache drops its oldest plan
                del _eager[next(iter(_eager))]
            _eager[key] = plan
    return plan


def _attr_key(attrs):
    return tuple([(k, _freeze(v)) for k, v in attrs.items()]) if attrs else ()


def _log_run(op_type, plan):
    log("Executing op %s in device %s%s" % (op_type, plan.devices, (" (%s)" % plan.reasons) if plan.reasons else ""))


def run_eager(op_type, inputs, attrs, n_out):
    """Runs op_type on EagerTensors (None for an absent optional input); returns a list of EagerTensors."""
    plan = _plan_for(op_type, inputs, attrs, n_out, _attr_key(attrs))
    feeds = plan.feeds
    with plan.lock:
        n = 0
        for t in inputs:
            if t is not None:
                feeds[n].tensor = t._h
                n += 1
        check(lib.wf_session_run(plan.sess, feeds, n, plan.fetches, plan.n_out, plan.outs, None))
        outs = plan.outs[:plan.n_out]
        if plan.devices is None:
            plan.placement(n)
    if config.log_placement:
        _log_run(op_type, plan)
    return [EagerTensor(h, plan.devices, sg) for h, sg in zip(outs, plan.out_sigs)]


def run_eager2(op_type, a, b):
    """run_eager for a two-input op without attributes (the arithmetic operators): one tensor out."""
    plan = _plan_for(op_type, (a, b), {}, 1, ())
    feeds = plan.feeds
    with plan.lock:
        feeds[0].tensor = a._h
        feeds[1].tensor = b._h
        check(lib.wf_session_run(plan.sess, feeds, 2, plan.fetches, 1, plan.outs, None))
        h = plan.outs[0]
        if plan.devices is None:
            plan.placement(2)
    if config.log_placement:
        _log_run(op_type, plan)
    return EagerTensor(h, plan.devices, plan.out_sigs[0])
