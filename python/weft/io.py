"""tf.io: files."""
import types

import numpy as np

from . import _core, _ops_seed  # noqa: F401
from .ops import apply, const


def read_file(filename, name=None):
    """The bytes of a file as a string scalar (weft's ReadFile: read at every run)."""
    return apply("ReadFile", [filename])


def write_file(filename, contents, name=None):
    data = contents.numpy() if hasattr(contents, "numpy") else contents
    with open(filename if isinstance(filename, str) else bytes(np.asarray(filename).item()).decode(), "wb") as f:
        f.write(bytes(np.asarray(data, dtype=object).item()) if not isinstance(data, bytes) else data)


def decode_jpeg(contents, channels=0, name=None, **kwargs):
    return apply("DecodeJpeg", [contents], {"channels": int(channels)})


def decode_png(contents, channels=0, dtype=None, name=None):
    from . import dtypes
    at = {"channels": int(channels)}
    if dtype is not None:
        at["dtype"] = dtypes.as_dtype(dtype)
    return apply("DecodePng", [contents], at)


gfile = types.SimpleNamespace(glob=lambda pattern: sorted(__import__("glob").glob(pattern)),
                              exists=lambda p: __import__("os").path.exists(p),
                              makedirs=lambda p: __import__("os").makedirs(p, exist_ok=True))
