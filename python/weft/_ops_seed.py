"""The {seed, counter} input of weft's stateless random image ops."""
import numpy as np

from . import _core


def seed_input(seed=None):
    """Inside a dataset map being traced: the map's per-element seed input (weft feeds
    {seed, element index + (iteration << 40)}, so each element and each epoch draws anew). Elsewhere a
    constant pair drawn from the global/op seed, a new one per call (TensorFlow's random_* ops)."""
    tr = _core.local.trace
    if tr is not None and getattr(tr, "seed", None) is not None:
        return tr.seed
    from .ops import _next_seed
    return _core.const(np.asarray([_next_seed(seed), 0], dtype=np.int64))
