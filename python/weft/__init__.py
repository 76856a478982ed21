"""weft: TensorFlow's Python API over weft's C library. `import weft as tf`."""
from . import errors  # noqa: F401
from ._lib import version as _version

__version__ = _version()
