"""tf.config: devices, placement, thread pools, memory, JIT."""
import types

from . import _core, errors
from ._core import config as _cfg


class PhysicalDevice:
    """tf.config.PhysicalDevice: name '/physical_device:TYPE:N', device_type 'CPU', 'GPU', 'OPENCL'."""
    __slots__ = ("name", "device_type", "full_name", "description")

    def __init__(self, name, device_type, full_name, description=""):
        self.name = name
        self.device_type = device_type
        self.full_name = full_name
        self.description = description

    def __repr__(self):
        return "PhysicalDevice(name='%s', device_type='%s')" % (self.name, self.device_type)

    def __eq__(self, o):
        return isinstance(o, PhysicalDevice) and o.name == self.name

    def __hash__(self):
        return hash(self.name)


class LogicalDevice(PhysicalDevice):
    __slots__ = ()

    def __repr__(self):
        return "LogicalDevice(name='%s', device_type='%s')" % (self.name, self.device_type)


def _local(full):
    return full.rsplit("/device:", 1)[-1]


def list_physical_devices(device_type=None):
    out = []
    for full, typ, info in _core.devices():
        if device_type is None or typ.upper() == device_type.upper():
            out.append(PhysicalDevice("/physical_device:" + _local(full), typ, full,
                                      (info.description or b"").decode()))
    return out


def list_logical_devices(device_type=None):
    return [LogicalDevice(full, typ, full) for full, typ, _ in _core.devices()
            if device_type is None or typ.upper() == device_type.upper()]


def get_visible_devices(device_type=None):
    return list_physical_devices(device_type)


def set_soft_device_placement(enabled):
    """Soft placement (on by default): a request for a device that cannot run an op (or does not exist)
    runs it elsewhere, and the placement log says why. Off: such a request is an error."""
    _cfg.soft_placement = bool(enabled)


def get_soft_device_placement():
    return _cfg.soft_placement


def _not_after_init(what):
    if _core.context_initialized():
        raise RuntimeError("%s cannot be modified after initialization (weft's context already exists: set it "
                           "before the first op, as TensorFlow requires)" % what)


def _threading():
    def set_inter_op_parallelism_threads(num_threads):
        _not_after_init("Inter op parallelism")
        _cfg.inter_op = int(num_threads)

    def set_intra_op_parallelism_threads(num_threads):
        _not_after_init("Intra op parallelism")
        _cfg.intra_op = int(num_threads)

    def get_inter_op_parallelism_threads():
        return _cfg.inter_op

    def get_intra_op_parallelism_threads():
        return _cfg.intra_op

    ns = types.SimpleNamespace(**{f.__name__: f for f in (set_inter_op_parallelism_threads,
                                                           set_intra_op_parallelism_threads,
                                                           get_inter_op_parallelism_threads,
                                                           get_intra_op_parallelism_threads)})
    return ns


threading = _threading()


def _spec_of(device):
    name = device.name if isinstance(device, PhysicalDevice) else str(device)
    if name.startswith("/physical_device:"):
        name = name[len("/physical_device:"):]
    return name


def _set_memory_growth(device, enable):
    """Accepted and recorded: weft's device allocators always grow on demand (in chunks) and never take
    a device's whole memory up front, which is what memory growth asks of TensorFlow."""
    if not isinstance(device, PhysicalDevice):
        raise errors.InvalidArgumentError(message="set_memory_growth takes a PhysicalDevice, got %r" % (device,))
    _cfg.memory_growth[device.name] = bool(enable)


def _get_memory_growth(device):
    return _cfg.memory_growth.get(device.name, True)


def _set_memory_limit(device, limit_bytes):
    """Caps the memory weft may take on `device` (wf_context_set_memory_limit); out of memory is then
    a ResourceExhaustedError naming the device and size."""
    spec = _spec_of(device)
    _cfg.memory_limits[spec] = int(limit_bytes)
    if _core.context_initialized():
        from ._lib import lib, check
        check(lib.wf_context_set_memory_limit(_core.context(), spec.encode(), int(limit_bytes)))


def _get_memory_info(device):
    import ctypes as C
    from ._lib import lib, check, MemoryStats
    spec = _spec_of(device)
    for i, (full, _, _) in enumerate(_core.devices()):
        if full.endswith("/device:" + spec.split("device:")[-1].upper()) or full == spec or _local(full) == spec.upper():
            st = MemoryStats()
            check(lib.wf_context_memory_stats(_core.context(), i, C.byref(st)))
            return {"current": st.in_use, "peak": st.peak}
    raise errors.NotFoundError(message="no device %s" % spec)


experimental = types.SimpleNamespace(
    list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
    set_memory_growth=_set_memory_growth, get_memory_growth=_get_memory_growth,
    set_memory_limit=_set_memory_limit, get_memory_info=_get_memory_info,
    set_visible_devices=lambda devices, device_type=None: None)


class LogicalDeviceConfiguration:
    """tf.config.LogicalDeviceConfiguration(memory_limit=MB): in weft, a memory cap on the device."""

    def __init__(self, memory_limit=None, experimental_priority=None, experimental_device_ordinal=None):
        self.memory_limit = memory_limit


def set_logical_device_configuration(device, logical_devices):
    """One configuration with a memory_limit (MB, as TensorFlow) caps the device's memory. Splitting a
    device into several logical ones is not something weft does: more than one raises."""
    if len(logical_devices) != 1:
        raise errors.UnimplementedError(message="weft does not split %s into %d logical devices; give one "
                                        "LogicalDeviceConfiguration" % (_spec_of(device), len(logical_devices)))
    if logical_devices[0].memory_limit is not None:
        _set_memory_limit(device, int(logical_devices[0].memory_limit) << 20)


experimental.set_virtual_device_configuration = set_logical_device_configuration
experimental.VirtualDeviceConfiguration = LogicalDeviceConfiguration


def _set_jit(enabled):
    """True: generated kernels for clusters of elementwise ops (weft's default); False: off.
    "autoclustering" counts as True."""
    _cfg.jit = bool(enabled)


optimizer = types.SimpleNamespace(set_jit=_set_jit, get_jit=lambda: _cfg.jit is not False,
                                  set_experimental_options=lambda options: None,
                                  get_experimental_options=lambda: {})


def run_functions_eagerly(run_eagerly):
    if run_eagerly:
        raise errors.UnimplementedError(message="weft always runs tf.function as a graph")
