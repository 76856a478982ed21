"""tf.keras.datasets: Fashion-MNIST and MNIST read with weft's IDX reader (wf_idx_read) from local
files: $WEFT_DATA_DIR/<name>/, Debian's dataset packages (/usr/share/datasets/<name>/, e.g.
dataset-fashion-mnist), or Keras's cache ($KERAS_HOME or ~/.keras, then datasets/<name>/). weft never downloads; a missing
dataset is a NotFoundError listing where it looked."""
import ctypes as C
import os
import types

from .. import errors
from .._core import EagerTensor
from .._lib import lib, check

_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _dirs(name):
    out = []
    if os.environ.get("WEFT_DATA_DIR"):
        out.append(os.path.join(os.environ["WEFT_DATA_DIR"], name))
    out.append("/usr/share/datasets/" + name)
    keras_home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    out.append(os.path.join(keras_home, "datasets", name))
    return out


def _read(path):
    h = C.c_void_p()
    check(lib.wf_idx_read(path.encode(), C.byref(h)))
    return EagerTensor(h.value).numpy()


def _load(name):
    for d in _dirs(name):
        paths = []
        for f in _FILES:
            p = next((os.path.join(d, f + ext) for ext in (".gz", "") if os.path.exists(os.path.join(d, f + ext))), None)
            paths.append(p)
        if all(paths):
            a = [_read(p) for p in paths]
            return (a[0], a[1]), (a[2], a[3])
    raise errors.NotFoundError(message="%s: its IDX files (%s) are in none of %s; weft does not download "
                               "(Debian: apt-get install dataset-%s)" % (name, ", ".join(_FILES), ", ".join(_dirs(name)), name))


fashion_mnist = types.SimpleNamespace(load_data=lambda: _load("fashion-mnist"))
mnist = types.SimpleNamespace(load_data=lambda: _load("mnist"))
