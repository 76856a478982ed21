"""Shared fixtures for weft's Python tests: config is process-global, so each test gets it restored."""
import os
import sys

import numpy as np
import pytest

import importlib.util

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
# The installed package when there is one (scripts/python-tests.sh tests what `pip install .` made);
# otherwise the source tree's, over the build tree's library (a developer's checkout after `make`).
if os.environ.get("WEFT_TEST_INSTALLED") != "1" and importlib.util.find_spec("weft") is None and PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import weft as tf  # noqa: E402
from weft import _core  # noqa: E402

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None


@pytest.fixture(autouse=True)
def restore_config():
    saved = (_core.config.soft_placement, _core.config.log_placement, _core.config.jit, _core.local.device)
    yield
    _core.config.soft_placement, _core.config.log_placement, _core.config.jit, _core.local.device = saved


def float_dtypes():
    out = [np.float32, np.float64, np.float16]
    if BF16 is not None:
        out.append(BF16)
    return out


ALL_NUMERIC = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]
