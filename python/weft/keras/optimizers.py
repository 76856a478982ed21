"""tf.keras.optimizers: Keras 3's update rules, run by weft's optimizer ops (wf_optimizer_options)."""
from .. import errors
from .._lib import lib

SGD_K, ADAM_K, ADAMW_K, RMSPROP_K = 1, 2, 3, 4


class Optimizer:
    _kind = 0

    def __init__(self, learning_rate=0.001, clipnorm=None, global_clipnorm=None, weight_decay=None, name=None, **kw):
        if callable(learning_rate) and not isinstance(learning_rate, (int, float)):
            raise errors.UnimplementedError(message="learning-rate schedule objects are not in weft's Python API yet; "
                                            "pass a number")
        if clipnorm is not None:
            raise errors.UnimplementedError(message="clipnorm (per variable) is not in weft; global_clipnorm is")
        self.learning_rate = float(learning_rate)
        self.global_clipnorm = global_clipnorm
        self.weight_decay = weight_decay
        self.name = name or type(self).__name__.lower()
        self._extra = kw

    def _fill(self, o):
        import ctypes
        lib.wf_optimizer_options_init(ctypes.byref(o), self._kind)
        o.learning_rate = self.learning_rate
        if self.global_clipnorm:
            o.clip_global_norm = float(self.global_clipnorm)
        if self.weight_decay:
            o.weight_decay = float(self.weight_decay)
        self._more(o)

    def _more(self, o):
        pass


class SGD(Optimizer):
    _kind = SGD_K

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kw):
        super().__init__(learning_rate, **kw)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def _more(self, o):
        o.momentum, o.nesterov = self.momentum, int(self.nesterov)


class Adam(Optimizer):
    _kind = ADAM_K

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False, **kw):
        super().__init__(learning_rate, **kw)
        if amsgrad:
            raise errors.UnimplementedError(message="Adam(amsgrad=True) is not in weft")
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def _more(self, o):
        o.beta1, o.beta2, o.epsilon = self.beta_1, self.beta_2, self.epsilon


class AdamW(Adam):
    _kind = ADAMW_K

    def __init__(self, learning_rate=0.001, weight_decay=0.004, **kw):
        super().__init__(learning_rate, weight_decay=weight_decay, **kw)


class RMSprop(Optimizer):
    _kind = RMSPROP_K

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, **kw):
        super().__init__(learning_rate, **kw)
        if centered:
            raise errors.UnimplementedError(message="RMSprop(centered=True) is not in weft")
        self.rho, self.momentum, self.epsilon = rho, momentum, epsilon

    def _more(self, o):
        o.rho, o.momentum, o.epsilon = self.rho, self.momentum, self.epsilon


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise errors.UnimplementedError(message="optimizer %r is not in weft (%s)" % (identifier, ", ".join(_BY_NAME)))
