"""tf.distribute: not in weft yet (the distribution issue brings it). Each strategy raises
NotImplementedError naming itself, so code written for TensorFlow fails clearly instead of with an
AttributeError."""
from . import errors


def _strategy(name):
    class _S:
        def __init__(self, *args, **kwargs):
            raise errors.UnimplementedError(
                message="tf.distribute.%s is not implemented in weft yet (distribution is a later milestone: "
                        "mirrored, multi-worker over MPI, NCCL); run without a strategy" % name)
    _S.__name__ = _S.__qualname__ = name
    return _S


MirroredStrategy = _strategy("MirroredStrategy")
MultiWorkerMirroredStrategy = _strategy("MultiWorkerMirroredStrategy")
TPUStrategy = _strategy("TPUStrategy")
ParameterServerStrategy = _strategy("ParameterServerStrategy")
OneDeviceStrategy = _strategy("OneDeviceStrategy")
experimental = type("experimental", (), {"MultiWorkerMirroredStrategy": MultiWorkerMirroredStrategy})


def get_strategy():
    """The default strategy: one replica, the current device."""
    return _Default()


class _Default:
    num_replicas_in_sync = 1

    def scope(self):
        import contextlib
        return contextlib.nullcontext()
