"""tf.function: a Python function traced into one weft graph per input signature.

Tracing calls the function once with symbolic tensors (placeholders of the arguments' dtypes and
shapes); every op it calls adds a node to the function's graph (with the device its tf.device scope
asks for), eager tensors it uses are captured as constants, and Python values in the arguments are
part of the signature. The graph then runs as one weft session: graph optimisation, placement, fusion,
copies and (unless turned off) generated kernels, like any weft graph. Straight-line code only: Python
control flow on tensor values is not converted (no autograph); it raises saying so.
"""
import ctypes as C
import functools
import threading
import weakref

import numpy as np

from . import _lib, _core, dtypes as _dt, errors
from ._core import EagerTensor, SymbolicTensor, Tensor, TensorShape, out_of, log
from ._lib import lib, check


class TensorSpec:
    """tf.TensorSpec(shape, dtype): an input of a traced function (None dims stay open)."""

    def __init__(self, shape, dtype=_dt.float32, name=None):
        self.shape = TensorShape(shape)
        self.dtype = _dt.as_dtype(dtype)
        self.name = name

    def __repr__(self):
        return "TensorSpec(shape=%s, dtype=%r, name=%r)" % (self.shape.as_list(), self.dtype, self.name)


class Trace:
    """A function's graph while it is being built."""

    def __init__(self):
        g = C.c_void_p()
        check(lib.wf_graph_new(C.byref(g)))
        self.graph = g.value
        self.captures = {}   # id(EagerTensor) -> (tensor, wf_output)
        self.variables = []  # (tf.Variable, its placeholder): fed with the variable's value at every call
        self.cur_dev = ""
        self._seed = None

    @property
    def seed(self):
        """The {seed, counter} i64 [2] input of the random ops in the graph, made on first use: a
        tf.function feeds a new counter at every call (so each call draws anew); a dataset map feeds
        its per-element seed."""
        if self._seed is None:
            self._seed = self.placeholder(_dt.int64, (2,), "random_seed")
        return self._seed

    def free(self):
        if self.graph:
            lib.wf_graph_free(self.graph)
            self.graph = None

    def placeholder(self, dtype, shape, name):
        o = _lib.Output()
        dims = [(-1 if d is None else d) for d in shape]
        arr = (C.c_int64 * max(len(dims), 1))(*dims)
        check(lib.wf_placeholder(self.graph, name.encode(), dtype._code, len(dims), arr, C.byref(o)))
        return SymbolicTensor(self, o)

    def to_output(self, x):
        if isinstance(x, SymbolicTensor):
            if x._trace is not self:
                raise errors.InvalidArgumentError(
                    message="a tensor of another tf.function's graph (%r) was used in this one" % (x,))
            return x._out
        from .variables import Variable
        if isinstance(x, Variable):
            for v, o in self.variables:
                if v is x:
                    return o
            o = _lib.Output()
            dims = (C.c_int64 * max(len(x.shape), 1))(*x.shape)
            check(lib.wf_placeholder(self.graph, ("var%d" % x._id).encode(), x.dtype._code, len(x.shape), dims,
                                     C.byref(o)))
            self.variables.append((x, o))
            return o
        if not isinstance(x, EagerTensor):
            x = _core.const(x)
        hit = self.captures.get(id(x))
        if hit is None:
            o = _lib.Output()
            check(lib.wf_const(self.graph, None, x._h, C.byref(o)))
            hit = self.captures[id(x)] = (x, o)
        return hit[1]

    def add(self, op_type, inputs, attrs):
        outs = [None if x is None else self.to_output(x) for x in inputs]
        dev = _core.local.device
        if dev != self.cur_dev:
            check(lib.wf_graph_set_device(self.graph, dev.encode() if dev else None))
            self.cur_dev = dev
        node = _core.add_node(self.graph, op_type, outs, attrs)
        return [SymbolicTensor(self, out_of(node, i)) for i in range(lib.wf_node_num_outputs(node))]


def _flatten(obj, leaves):
    """Structure of obj with tensors (and arrays) replaced by their leaf index."""
    if isinstance(obj, (Tensor, np.ndarray, TensorSpec)):
        leaves.append(obj)
        return ("#", len(leaves) - 1)
    if isinstance(obj, (list, tuple)):
        items = [_flatten(v, leaves) for v in obj]
        return (type(obj), tuple(items))
    if isinstance(obj, dict):
        return (dict, tuple((k, _flatten(obj[k], leaves)) for k in sorted(obj)))
    return ("=", obj)


def _unflatten(struct, leaves):
    tag = struct[0]
    if tag == "#":
        return leaves[struct[1]]
    if tag == "=":
        return struct[1]
    if tag is dict:
        return {k: _unflatten(v, leaves) for k, v in struct[1]}
    items = [_unflatten(v, leaves) for v in struct[1]]
    return tuple(items) if tag is tuple else items if tag is list else tag(items)


def _key(struct):
    try:
        hash(struct)
        return struct
    except TypeError:
        return repr(struct)


class ConcreteFunction:
    """One traced signature: the graph, its session, and how its outputs map back to Python."""

    def __init__(self, fn, args, kwargs, jit_compile, specs=None):
        leaves = []
        struct = _flatten((args, kwargs), leaves)
        self.trace = Trace()
        self._lock = threading.Lock()
        self.sess = None
        self.jit = jit_compile
        try:
            syms = []
            for i, leaf in enumerate(leaves):
                if specs is not None:
                    sp = specs[i]
                    syms.append(self.trace.placeholder(sp.dtype, sp.shape, sp.name or "arg%d" % i))
                elif isinstance(leaf, SymbolicTensor):
                    raise errors.InvalidArgumentError(message="a symbolic tensor passed to a tf.function from outside it")
                else:
                    t = leaf if isinstance(leaf, EagerTensor) else _core.const(leaf)
                    syms.append(self.trace.placeholder(t.dtype, t.shape, "arg%d" % i))
            targs, tkwargs = _unflatten(struct, syms)
            saved = _core.local.trace
            _core.local.trace = self.trace
            try:
                result = fn(*targs, **tkwargs)
            finally:
                _core.local.trace = saved
            out_leaves = []
            self.out_struct = _flatten(result, out_leaves)
            fetches = []
            for o in out_leaves:
                fetches.append(self.trace.to_output(o))
            self.n_in = len(syms)
            # variables the function reads are inputs too, fed with their current values at every call
            self.vars = [v for v, _ in self.trace.variables]
            for v, o in self.trace.variables:
                syms.append(_core.SymbolicTensor(self.trace, o))
            self.n_args = self.n_in
            self.n_in = len(syms)
            self.has_seed = self.trace._seed is not None
            self.feeds = (_lib.Feed * max(self.n_in + self.has_seed, 1))()
            for i, s_ in enumerate(syms):
                self.feeds[i].output = s_._out
            if self.has_seed:
                self.feeds[self.n_in].output = self.trace._seed._out
            self.n_out = len(fetches)
            self.fetches = (_lib.Output * max(self.n_out, 1))(*fetches)
            self.outs = (C.c_void_p * max(self.n_out, 1))()
            self.out_nodes = [lib.wf_node_name(f.node).decode() for f in fetches]
            self.out_sigs = []
            for f in fetches:  # signatures known at trace time (static shapes) go on the results
                d, sh = _core.output_info(f)
                ok = sh is not None and all(x is not None for x in sh)
                self.out_sigs.append((d._code, tuple(sh)) if ok else None)
            self.single = self.out_struct[0] == "#"
            self.devices = None
            self.input_specs = [TensorSpec(s.shape, s.dtype, "arg%d" % i) for i, s in enumerate(syms[:self.n_args])]
        except BaseException:
            self.trace.free()
            raise

    @property
    def graph(self):
        return self.trace.graph

    def _session(self):
        if self.sess is None:
            so = _core.session_options(self.jit)
            s = C.c_void_p()
            check(lib.wf_session_new(_core.context(), self.trace.graph, C.byref(so), C.byref(s)))
            self.sess = s.value
        return self.sess

    def placement_text(self):
        txt = C.c_void_p()
        check(lib.wf_session_placement(self._session(), self.feeds, self.n_in + self.has_seed, self.fetches,
                                       self.n_out,
                                       C.byref(txt)))
        return _lib.take_string(txt.value)

    def _placement(self):
        if self.devices is None:
            p = C.c_void_p()
            check(lib.wf_session_placement_get(self._session(), self.feeds, self.n_in + self.has_seed, self.fetches,
                                               self.n_out,
                                               C.byref(p)))
            by_node = {}
            try:
                for i in range(lib.wf_placement_num_entries(p.value)):
                    e = lib.wf_placement_entry_at(p.value, i)
                    if not e.is_copy:
                        by_node[e.node.decode()] = e.device.decode()
            finally:
                lib.wf_placement_free(p.value)
            self.devices = [by_node.get(n) for n in self.out_nodes]
            if _core.config.log_placement:
                log(self.placement_text())
        return self.devices

    def run_flat(self, tensors):
        feeds = self.feeds
        with self._lock:
            sess = self.sess or self._session()
            for i, t in enumerate(tensors):
                feeds[i].tensor = t._h
            for k, v in enumerate(self.vars):
                feeds[self.n_args + k].tensor = v._value._h
            seed = None
            if self.has_seed:  # a new counter per call: the random ops draw anew each time
                from .ops import _next_seed
                seed = _core.const(np.asarray([_core.RANDOM_BASE, _next_seed(None)], dtype=np.int64))
                feeds[self.n_in].tensor = seed._h
            check(lib.wf_session_run(sess, feeds, self.n_in + self.has_seed, self.fetches, self.n_out, self.outs,
                                     None))
            outs = self.outs[:self.n_out]
            # read while this call's feeds are still the ones set: another thread's call, or tensors freed
            # since, would otherwise be what the placement query reads
            devs = self.devices or self._placement()
        sigs = self.out_sigs
        return [EagerTensor(h, d, sg) for h, d, sg in zip(outs, devs, sigs)]

    def __call__(self, *args, **kwargs):
        leaves = []
        _flatten((args, kwargs), leaves)
        ts = [x if isinstance(x, EagerTensor) else _core.const(x) for x in leaves]
        return _unflatten(self.out_struct, self.run_flat(ts))

    def __del__(self):
        if lib is not None:
            if self.sess:
                lib.wf_session_free(self.sess)
                self.sess = None
            self.trace.free()


class Function:
    """What tf.function returns: traces per signature on first call, then runs the cached graph."""

    def __init__(self, fn, input_signature=None, jit_compile=None):
        self._fn = fn
        self._sig = list(input_signature) if input_signature is not None else None
        self.jit_compile = jit_compile
        self._cache = {}
        self._lock = threading.RLock()  # held while tracing (a trace may ask for another signature)
        self._bound = weakref.WeakKeyDictionary()
        self._fast = {}  # (input signatures, device scope, soft placement, jit) -> ConcreteFunction
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        """A method: one bound Function per instance, kept while the instance lives, so its traces are
        reused from call to call (a new Function per attribute access retraced on every call)."""
        if obj is None:
            return self
        try:
            bound = self._bound.get(obj)
        except TypeError:  # not weak-referenceable or not hashable: a fresh one (traces per access)
            return Function(self._fn.__get__(obj, objtype), self._sig, self.jit_compile)
        if bound is None:
            ref = weakref.ref(obj)
            fn = self._fn

            def method(*args, **kwargs):
                return fn(ref(), *args, **kwargs)
            functools.update_wrapper(method, fn)
            bound = Function(method, self._sig, self.jit_compile)
            self._bound[obj] = bound
        return bound

    def _signature(self, args, kwargs):
        leaves = []
        struct = _flatten((args, kwargs), leaves)
        sig = []
        for x in leaves:
            if isinstance(x, Tensor):
                sig.append((x.dtype._code, tuple(x.shape)))
            else:
                a = np.asarray(x)
                sig.append((a.dtype.str, a.shape))
        return (_key(struct), tuple(sig), _core.local.device, _core.config.soft_placement, self._jit())

    def _jit(self):
        return self.jit_compile if self.jit_compile is not None else _core.config.jit

    def get_concrete_function(self, *args, **kwargs):
        if self._sig is not None and not args and not kwargs:
            args = tuple(self._sig)
        key = self._signature(args, kwargs) if self._sig is None else ("sig",)
        cf = self._cache.get(key)
        if cf is None:
            with self._lock:  # one trace per signature, whichever thread asks first
                cf = self._cache.get(key)
                if cf is None:
                    cf = self._cache[key] = ConcreteFunction(self._fn, args, kwargs, self._jit(), self._sig)
        return cf

    def __call__(self, *args, **kwargs):
        if _core.local.trace is not None:  # called from another function being traced: inline it
            return self._fn(*args, **kwargs)
        if not kwargs and self._sig is None:
            # the common call: eager tensors as positional arguments, keyed on their signatures alone
            sigs = []
            for a in args:
                if type(a) is not EagerTensor:
                    break
                sigs.append(a._s or a._sig())
            else:
                key = (tuple(sigs), _core.local.device, _core.config.soft_placement, self._jit())
                cf = self._fast.get(key)
                if cf is None:
                    cf = self._fast[key] = self.get_concrete_function(*args)
                outs = cf.run_flat(args)
                return outs[0] if cf.single else _unflatten(cf.out_struct, outs)
        return self.get_concrete_function(*args, **kwargs)(*args, **kwargs)

    def experimental_get_tracing_count(self):
        return len(self._cache)


def function(func=None, input_signature=None, autograph=True, jit_compile=None, reduce_retracing=False,
             experimental_compile=None, **kwargs):
    """tf.function. jit_compile=True turns on weft's generated kernels for the function (they are on by
    default, as `tf.config.optimizer.set_jit` leaves them); False turns them off."""
    if experimental_compile is not None and jit_compile is None:
        jit_compile = experimental_compile

    def wrap(f):
        return Function(f, input_signature, jit_compile)
    return wrap(func) if func is not None else wrap
