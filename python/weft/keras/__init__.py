"""tf.keras over weft's C models: Sequential, layers, optimizers, losses, callbacks, mixed precision."""
import types as _types

from . import layers, optimizers, losses, callbacks, mixed_precision, datasets
from .models import Sequential, Model, load_model
from .layers import Input

models = _types.SimpleNamespace(Sequential=Sequential, Model=Model, load_model=load_model)
metrics = _types.SimpleNamespace(Accuracy=lambda name="accuracy": _types.SimpleNamespace(name="accuracy"),
                                 SparseCategoricalAccuracy=lambda name="accuracy": _types.SimpleNamespace(name="accuracy"))


class _Init:
    def __init__(self, name, **kw):
        self._name = name
        for k, v in kw.items():
            setattr(self, k, v)


initializers = _types.SimpleNamespace(
    Zeros=lambda: _Init("zeros"), Ones=lambda: _Init("ones"),
    RandomUniform=lambda minval=-0.05, maxval=0.05, seed=None: _Init("random_uniform", minval=minval, maxval=maxval, seed=seed),
    RandomNormal=lambda mean=0.0, stddev=0.05, seed=None: _Init("random_normal", mean=mean, stddev=stddev, seed=seed),
    TruncatedNormal=lambda mean=0.0, stddev=0.05, seed=None: _Init("truncated_normal", mean=mean, stddev=stddev, seed=seed),
    GlorotUniform=lambda seed=None: _Init("glorot_uniform", seed=seed), GlorotNormal=lambda seed=None: _Init("glorot_normal", seed=seed),
    HeUniform=lambda seed=None: _Init("he_uniform", seed=seed), HeNormal=lambda seed=None: _Init("he_normal", seed=seed))
