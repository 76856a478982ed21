"""The package as `pip install .` installs it: its version is the C library's, it loads the libweft.so
installed inside it (not a build tree's), and the backend plugins installed beside that library load.

scripts/python-tests.sh sets WEFT_TEST_INSTALLED=1: there a package imported from the source tree, or
a library from elsewhere, is a failure rather than a skip."""
import ctypes as C
import os

import pytest

import weft
from weft import _lib

PKG_DIR = os.path.dirname(os.path.realpath(weft.__file__))
INSTALLED = os.environ.get("WEFT_TEST_INSTALLED") == "1"


def _require_installed():
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "python", "weft"))
    why = None
    if PKG_DIR == src:
        why = "weft is imported from the source tree (python/weft), not an installed package"
    elif os.environ.get("WEFT_LIBRARY"):
        why = "WEFT_LIBRARY is set (%s)" % os.environ["WEFT_LIBRARY"]
    if why:
        if INSTALLED:
            pytest.fail(why)
        pytest.skip(why)


def test_version_is_the_library_version():
    assert weft.__version__ == _lib.version()


def test_distribution_version():
    # pyproject.toml takes the wheel's version from CMakeLists.txt's project(); wf_version() must agree
    _require_installed()
    from importlib.metadata import version
    assert version("weft") == _lib.version()


def test_library_is_the_packaged_one():
    _require_installed()
    lib = os.path.realpath(_lib.LIB_PATH)
    assert os.path.dirname(lib) == PKG_DIR, "%s is not inside the package folder %s" % (lib, PKG_DIR)
    assert os.path.basename(_lib.LIB_PATH) == "libweft.so"
    assert not os.path.islink(os.path.join(PKG_DIR, "libweft.so")), "libweft.so should be a real file"


def test_packaged_plugins_load():
    """Each plugin shipped in the package folder is found there and loads (status "loaded", or
    "unavailable" when this machine has no driver or device for it)."""
    _require_installed()
    shipped = sorted(f[len("libweft-"):-len(".so")] for f in os.listdir(PKG_DIR)
                     if f.startswith("libweft-") and f.endswith(".so"))
    if not shipped:
        pytest.skip("the wheel holds no backend plugin (CMake found neither OpenCL+CLBlast nor nvcc)")
    opts = _lib.ContextOptions()
    _lib.lib.wf_context_options_init(C.byref(opts))
    ctx = C.c_void_p()
    _lib.check(_lib.lib.wf_context_new(C.byref(opts), C.byref(ctx)))
    try:
        seen = {}
        for i in range(_lib.lib.wf_context_num_plugins(ctx)):
            info = _lib.PluginInfo()
            _lib.check(_lib.lib.wf_context_plugin(ctx, i, C.byref(info)))
            dec = lambda b: b.decode() if b else ""  # noqa: E731
            seen[dec(info.name)] = (dec(info.path), dec(info.status), dec(info.reason))
    finally:
        _lib.lib.wf_context_free(ctx)
    for name in shipped:
        assert name in seen, "plugin %s is in %s but the context does not list it: %r" % (name, PKG_DIR, seen)
        path, status, reason = seen[name]
        assert status in ("loaded", "unavailable"), "plugin %s: %s (%s) at %s" % (name, status, reason, path)
        assert os.path.dirname(os.path.realpath(path)) == PKG_DIR, "plugin %s loaded from %s" % (name, path)
