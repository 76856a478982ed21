"""tf.data over weft's C input pipelines (src/data).

A Dataset is a wf_dataset stage; the transformations make new stages and iteration runs the pipeline
on weft's threads. `map` traces the Python function once into a weft graph (as tf.function does), so
the per-element work runs in C on the map's threads without the GIL; the random image ops inside it
draw from the map's per-element seed. Elements are flat tuples of up to 8 components underneath; a
dict or nested tuple structure is kept on the Python side and rebuilt on the way out.
"""
import ctypes as C
import numpy as np

from . import _lib, _core, dtypes as _dt, errors
from ._core import EagerTensor, TensorShape
from ._lib import lib, check
from .function import Trace, TensorSpec, _flatten, _unflatten

AUTOTUNE = _lib.AUTOTUNE
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class _MapTrace(Trace):
    """A map function's graph: its seed input (Trace.seed) is fed by the dataset, per element."""


class _Fn:
    """A traced map/filter function and the wf_map_fn pointing into it (both kept alive together)."""

    def __init__(self, func, spec_struct, specs, kind):
        self.trace = _MapTrace()
        try:
            syms = [self.trace.placeholder(s.dtype, s.shape, "in%d" % i) for i, s in enumerate(specs)]
            args = _unflatten(spec_struct, syms)
            saved = _core.local.trace
            _core.local.trace = self.trace
            try:
                if isinstance(args, tuple) and spec_struct[0] is tuple:
                    result = func(*args)
                else:
                    result = func(args)
            finally:
                _core.local.trace = saved
            leaves = []
            self.out_struct = _flatten(result, leaves)
            if not leaves:
                raise errors.InvalidArgumentError(message="Dataset.%s: the function returned no tensor" % kind)
            if len(leaves) > 8:
                raise errors.InvalidArgumentError(message="Dataset.%s: %d components; weft's elements hold at most 8"
                                                  % (kind, len(leaves)))
            outs = [self.trace.to_output(x) for x in leaves]
            self.out_specs = []
            for o in outs:
                d, sh = _core.output_info(o)
                self.out_specs.append(TensorSpec(sh if sh is not None else (), d))
            self.inputs = (_lib.Output * max(len(syms), 1))(*[s._out for s in syms])
            self.outputs = (_lib.Output * len(outs))(*outs)
            fn = _lib.MapFn()
            fn.graph = self.trace.graph
            fn.inputs = C.cast(self.inputs, C.POINTER(_lib.Output))
            fn.n_inputs = len(syms)
            fn.outputs = C.cast(self.outputs, C.POINTER(_lib.Output))
            fn.n_outputs = len(outs)
            if self.trace._seed is not None:
                fn.seed_input = self.trace._seed._out
            fn.ctx = _core.context()
            dev = _core.local.device
            fn.device = dev.encode() if dev else None
            self.fn = fn
        except BaseException:
            self.trace.free()
            raise

    def __del__(self):
        if lib is not None:
            self.trace.free()


class Dataset:
    """tf.data.Dataset. Each instance is one immutable pipeline stage."""

    def __init__(self, handle, struct, specs, parents=(), keep=()):
        self._h = handle
        self._struct = struct     # _flatten structure of one element
        self._specs = specs       # TensorSpec per component
        self._parents = parents   # Python objects the C stage depends on (upstream datasets, map graphs)
        self._keep = keep

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.wf_dataset_free(h)

    # ---- sources ------------------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors, name=None):
        leaves = []
        struct = _flatten(tensors, leaves)
        if not leaves:
            leaves = [np.asarray(tensors)]
            struct = ("#", 0)
        ts = [x if isinstance(x, EagerTensor) else _core.const(x) for x in leaves]
        for t in ts:
            if len(t.shape) < 1:
                raise errors.InvalidArgumentError(message="from_tensor_slices: a component of rank 0 has no rows to slice")
        arr = (C.c_void_p * len(ts))(*[t._h for t in ts])
        h = C.c_void_p()
        check(lib.wf_dataset_from_tensor_slices(arr, len(ts), C.byref(h)))
        specs = [TensorSpec(t.shape[1:], t.dtype) for t in ts]
        return Dataset(h.value, struct, specs, keep=ts)

    @staticmethod
    def from_tensors(tensors, name=None):
        leaves = []
        struct = _flatten(tensors, leaves)
        ts = [(x if isinstance(x, EagerTensor) else _core.const(x)) for x in leaves]
        from .ops import expand_dims
        return Dataset.from_tensor_slices(_unflatten(struct, [expand_dims(t, 0) for t in ts]))

    @staticmethod
    def range(*args, output_type=_dt.int64, name=None):
        start, stop, step = 0, None, 1
        if len(args) == 1:
            stop = args[0]
        elif len(args) == 2:
            start, stop = args
        else:
            start, stop, step = args
        h = C.c_void_p()
        check(lib.wf_dataset_range(int(start), int(stop), int(step), C.byref(h)))
        ds = Dataset(h.value, ("#", 0), [TensorSpec((), _dt.int64)])
        return ds if _dt.as_dtype(output_type) == _dt.int64 else ds.map(lambda x: _cast(x, output_type))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None):
        """The files matching a glob, as string scalars; shuffled per iteration unless shuffle=False
        (TensorFlow's default is to shuffle). A pattern matching nothing is InvalidArgumentError."""
        if not isinstance(file_pattern, str):
            pats = list(file_pattern)
            if len(pats) != 1:
                raise errors.UnimplementedError(message="list_files: weft takes one pattern")
            file_pattern = pats[0]
        do_shuffle = True if shuffle is None else bool(shuffle)
        h = C.c_void_p()
        try:
            check(lib.wf_dataset_list_files(file_pattern.encode(), int(do_shuffle), int(seed or 0), C.byref(h)))
        except errors.NotFoundError as e:  # TensorFlow's class for a pattern that matches nothing
            raise errors.InvalidArgumentError(message=e.message) from None
        return Dataset(h.value, ("#", 0), [TensorSpec((), _dt.string)])

    @staticmethod
    def zip(*datasets, name=None):
        if len(datasets) == 1 and isinstance(datasets[0], (tuple, list)):
            datasets = tuple(datasets[0])
        arr = (C.c_void_p * len(datasets))(*[d._h for d in datasets])
        h = C.c_void_p()
        check(lib.wf_dataset_zip(arr, len(datasets), C.byref(h)))
        structs, specs, off = [], [], 0
        for d in datasets:
            structs.append(_shift(d._struct, off))
            off += len(d._specs)
            specs.extend(d._specs)
        return Dataset(h.value, (tuple, tuple(structs)), specs, parents=datasets)

    # ---- transformations ----------------------------------------------------------------------------

    def _derive(self, fn, *args, struct=None, specs=None, keep=()):
        h = C.c_void_p()
        check(fn(self._h, *args, C.byref(h)))
        return Dataset(h.value, self._struct if struct is None else struct, self._specs if specs is None else specs,
                       parents=(self,), keep=keep)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        f = _Fn(map_func, self._struct, self._specs, "map")
        o = _lib.MapOptions()
        lib.wf_map_options_init(C.byref(o))
        if num_parallel_calls is not None:
            o.num_parallel_calls = int(num_parallel_calls)
        if deterministic is not None:
            o.deterministic = int(bool(deterministic))
        return self._derive(lib.wf_dataset_map, C.byref(f.fn), C.byref(o), struct=f.out_struct, specs=f.out_specs,
                            keep=(f,))

    def filter(self, predicate, name=None):
        f = _Fn(predicate, self._struct, self._specs, "filter")
        return self._derive(lib.wf_dataset_filter, C.byref(f.fn), keep=(f,))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        n = int(batch_size)
        specs = [TensorSpec((n if drop_remainder else None,) + tuple(s.shape), s.dtype) for s in self._specs]
        return self._derive(lib.wf_dataset_batch, n, int(bool(drop_remainder)), specs=specs)

    def unbatch(self, name=None):
        specs = [TensorSpec(tuple(s.shape)[1:], s.dtype) for s in self._specs]
        return self._derive(lib.wf_dataset_unbatch, specs=specs)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        return self._derive(lib.wf_dataset_shuffle, int(buffer_size), int(seed or 0),
                            int(bool(reshuffle_each_iteration)))

    def repeat(self, count=None, name=None):
        return self._derive(lib.wf_dataset_repeat, -1 if count is None else int(count))

    def take(self, count, name=None):
        return self._derive(lib.wf_dataset_take, int(count))

    def skip(self, count, name=None):
        return self._derive(lib.wf_dataset_skip, int(count))

    def cache(self, filename="", name=None):
        return self._derive(lib.wf_dataset_cache, filename.encode() if filename else None)

    def prefetch(self, buffer_size, name=None):
        return self._derive(lib.wf_dataset_prefetch, int(buffer_size))

    def ignore_errors(self, log_warning=False, name=None):
        return self._derive(lib.wf_dataset_ignore_errors)

    def apply(self, transformation_func):
        return transformation_func(self)

    def prefetch_to_device(self, device, buffer_size=None):
        return self._derive(lib.wf_dataset_prefetch_to_device, _core.context(), device.encode(),
                            AUTOTUNE if buffer_size is None else int(buffer_size))

    # ---- facts ----------------------------------------------------------------------------------------

    @property
    def element_spec(self):
        return _unflatten(self._struct, self._specs)

    def cardinality(self):
        return _core.const(np.int64(lib.wf_dataset_cardinality(self._h)))

    def __len__(self):
        n = lib.wf_dataset_cardinality(self._h)
        if n == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if n < 0:
            raise TypeError("The dataset length is unknown.")
        return n

    # ---- iteration ------------------------------------------------------------------------------------

    def __iter__(self):
        return _Iterator(self)

    def as_numpy_iterator(self):
        for el in self:
            leaves = []
            struct = _flatten(el, leaves)
            yield _unflatten(struct, [t.numpy() for t in leaves])

    def __repr__(self):
        return "<Dataset element_spec=%r>" % (self.element_spec,)


def _shift(struct, off):
    tag = struct[0]
    if tag == "#":
        return ("#", struct[1] + off)
    if tag == "=":
        return struct
    if tag is dict:
        return (dict, tuple((k, _shift(v, off)) for k, v in struct[1]))
    return (tag, tuple(_shift(v, off) for v in struct[1]))


def _cast(x, dtype):
    from .ops import cast
    return cast(x, dtype)


class _Iterator:
    def __init__(self, ds):
        self._ds = ds
        h = C.c_void_p()
        check(lib.wf_dataset_iterator(ds._h, None, C.byref(h)))
        self._h = h.value
        self._buf = (C.c_void_p * 8)()
        self._n = C.c_int()

    def __iter__(self):
        return self

    def __next__(self):
        if not self._h:
            raise StopIteration
        check(lib.wf_iterator_next(self._h, self._buf, 8, C.byref(self._n)))
        n = self._n.value
        if n == 0:
            lib.wf_iterator_free(self._h)
            self._h = None
            raise StopIteration
        ts = [EagerTensor(self._buf[i]) for i in range(n)]
        return _unflatten(self._ds._struct, ts)

    def get_next(self):
        return next(self)

    def __del__(self):
        if self._h and lib is not None:
            lib.wf_iterator_free(self._h)
            self._h = None


def TFRecordDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):
    """Records of TFRecord files as string scalars (both CRCs checked: a damaged record is a
    DataLossError naming the file and offset)."""
    if compression_type:
        raise errors.UnimplementedError(message="TFRecordDataset: compressed files are not in weft")
    if isinstance(filenames, str):
        filenames = [filenames]
    names = [f.encode() if isinstance(f, str) else bytes(f) for f in filenames]
    arr = (C.c_char_p * max(len(names), 1))(*names)
    h = C.c_void_p()
    check(lib.wf_dataset_tfrecord(arr, len(names), C.byref(h)))
    return Dataset(h.value, ("#", 0), [TensorSpec((), _dt.string)])


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):
    if isinstance(filenames, str):
        filenames = [filenames]
    names = [f.encode() for f in filenames]
    arr = (C.c_char_p * max(len(names), 1))(*names)
    h = C.c_void_p()
    check(lib.wf_dataset_text_lines(arr, len(names), C.byref(h)))
    return Dataset(h.value, ("#", 0), [TensorSpec((), _dt.string)])


class experimental:
    AUTOTUNE = AUTOTUNE
    INFINITE_CARDINALITY = INFINITE_CARDINALITY
    UNKNOWN_CARDINALITY = UNKNOWN_CARDINALITY

    @staticmethod
    def prefetch_to_device(device, buffer_size=None):
        return lambda ds: ds.prefetch_to_device(device, buffer_size)
