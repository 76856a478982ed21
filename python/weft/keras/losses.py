"""tf.keras.losses: the losses weft's models build in C (wf_loss_kind)."""
from .. import errors

SPARSE_CCE, CCE, BCE, MSE = 1, 2, 3, 4


class Loss:
    _kind = 0
    sparse = False

    def __init__(self, from_logits=False, name=None, **kw):
        self.from_logits = bool(from_logits)
        self.name = name

    def _fill(self, o):
        o.loss = self._kind
        o.from_logits = int(self.from_logits)


class SparseCategoricalCrossentropy(Loss):
    _kind = SPARSE_CCE
    sparse = True


class CategoricalCrossentropy(Loss):
    _kind = CCE


class BinaryCrossentropy(Loss):
    _kind = BCE


class MeanSquaredError(Loss):
    _kind = MSE

    def __init__(self, name=None, **kw):
        super().__init__(False, name)


_BY_NAME = {"sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
            "categorical_crossentropy": CategoricalCrossentropy, "binary_crossentropy": BinaryCrossentropy,
            "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError}


def get(identifier):
    if isinstance(identifier, Loss):
        return identifier
    if identifier is None:
        raise errors.InvalidArgumentError(message="compile: give a loss")
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    raise errors.UnimplementedError(message="loss %r is not in weft (%s)" % (identifier, ", ".join(_BY_NAME)))
