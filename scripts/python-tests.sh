#!/bin/sh
# Tests the Python package the way a user gets it: `pip install .` into build/venv-py (a venv of
# /usr/bin/python3 with pytest, numpy, ml_dtypes, onnx and onnxruntime from PyPI), then pytest on
# tests/python against the installed copy (run from build/, so the source tree's python/ is not on
# sys.path), then the offline reinstall: the wheel and numpy's wheel in build/wheelhouse, installed with
# --no-index into a fresh build/venv-py-offline. Prints a PASS/FAIL line per check, each pytest skip as
# "SKIP name: why" (scripts/run-tests.sh counts those), and ends with "python: N passed, N failed".
# Exits non-zero when anything failed. Needs PyPI the first time (and for numpy's wheel).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
V=build/venv-py
VO=build/venv-py-offline
WH=build/wheelhouse
PASS=0
FAIL=0
mkdir -p build
# the wheel's CMake build uses every core; without a system ninja, make (scikit-build-core would fetch
# ninja from PyPI into each isolated build environment, a new path every time, for the same build folder)
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
command -v ninja >/dev/null 2>&1 || export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Unix Makefiles}"
# the package must find its own library and plugins, not a build tree's
unset WEFT_LIBRARY WEFT_PLUGIN_PATH

check() { # name rc [what failed]
    if [ "$2" -eq 0 ]; then
        PASS=$((PASS + 1)); echo "PASS $1"
    else
        FAIL=$((FAIL + 1)); echo "FAIL $1${3:+: $3}"
    fi
}

finish() {
    echo "python: $PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
    exit $?
}

secs() { # seconds since $1 (date +%s)
    echo $(($(date +%s) - $1))
}

# ---- the venv (idempotent: made once, refilled when a package is missing) -------------------------
# scikit-build-core too: the builds below run without build isolation, since a new isolated environment
# makes scikit-build-core clear build/py/ (every build would start from nothing)
PKGS="pytest numpy ml_dtypes onnx onnxruntime pillow scikit-build-core>=0.10"
if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c "import pytest, numpy, ml_dtypes, onnx, onnxruntime, PIL, scikit_build_core" 2>/dev/null; then
    { "$PY" -m venv "$V" &&
      "$V/bin/pip" install -q --disable-pip-version-check $PKGS; } >build/python-venv.log 2>&1
    rc=$?
    [ $rc -ne 0 ] && tail -n 15 build/python-venv.log
    check python:venv $rc "could not make $V or pip could not install $PKGS from PyPI (network?); build/python-venv.log says why"
    [ $rc -ne 0 ] && finish
fi

# ---- pip install . (incremental after the first: the CMake build in build/py/ is kept) -------------
t0=$(date +%s)
"$V/bin/pip" install --disable-pip-version-check --no-build-isolation . >build/python-install.log 2>&1
rc=$?
echo "pip install . took $(secs "$t0") s"
[ $rc -ne 0 ] && grep -E 'error|Error|ERROR' build/python-install.log | head -30
check python:install $rc "pip install --no-build-isolation . failed (build/python-install.log; the CMake build is in build/py/)"
[ $rc -ne 0 ] && finish

# ---- pytest on the installed package ---------------------------------------------------------------
# From build/: neither the repo root nor python/ is on sys.path, so `import weft` is the installed one
# (test_import.py fails, rather than skips, under WEFT_TEST_INSTALLED=1 otherwise).
rm -f build/python-tests.xml
(cd build && WEFT_TEST_INSTALLED=1 "$ROOT/$V/bin/python" -m pytest -q -rfEs -p no:cacheprovider \
    --rootdir="$ROOT/tests/python" --junitxml="$ROOT/build/python-tests.xml" "$ROOT/tests/python")
rc=$?
# each skipped test (not an expected failure) as "SKIP module::test: reason"
if [ -f build/python-tests.xml ]; then
    "$V/bin/python" - build/python-tests.xml <<'EOF'
import sys
import xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    for s in case.findall("skipped"):
        if s.get("type") == "pytest.xfail":
            continue
        name = case.get("classname", "") + "::" + case.get("name", "")
        why = " ".join((s.get("message") or s.text or "skipped").split())
        print("SKIP %s: %s" % (name, why))
EOF
fi
case $rc in
    0) check python:pytest 0 ;;
    5) check python:pytest 1 "pytest collected no tests in tests/python" ;;
    *) check python:pytest $rc "pytest exit $rc" ;;
esac

# ---- the wheel, installed offline into a fresh venv ------------------------------------------------
mkdir -p "$WH"
rm -f "$WH"/weft-*.whl
t0=$(date +%s)
"$V/bin/pip" wheel --disable-pip-version-check --no-build-isolation --no-deps -w "$WH" . >build/python-wheel.log 2>&1
rc=$?
echo "pip wheel . took $(secs "$t0") s"
[ $rc -ne 0 ] && grep -E 'error|Error|ERROR' build/python-wheel.log | head -30
whl=$(ls "$WH"/weft-*.whl 2>/dev/null | head -n 1)
if [ $rc -eq 0 ] && [ -n "$whl" ]; then
    echo "wheel: $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB)"
    # one wheel for every CPython 3: no extension module, so no interpreter or ABI in the tag
    case $(basename "$whl") in *-py3-none-*.whl) ;; *) rc=1; echo "the wheel is not tagged py3-none-<platform>" ;; esac
fi
check python:wheel $rc "pip wheel . failed or made no py3-none wheel (build/python-wheel.log)"
if [ $rc -eq 0 ]; then
    # numpy's wheel for this interpreter, fetched once while online (the version the test venv has)
    if ! ls "$WH"/numpy-*.whl >/dev/null 2>&1; then
        np=$("$V/bin/python" -c "import numpy; print(numpy.__version__)")
        "$V/bin/pip" download --disable-pip-version-check -q --only-binary=:all: "numpy==$np" -d "$WH" >build/python-download.log 2>&1 ||
            { tail -n 5 build/python-download.log; echo "pip download numpy failed (network?)"; }
    fi
    rm -rf "$VO"
    # --no-index and no other find-links (PIP_FIND_LINKS may name a local mirror): only the wheelhouse
    out=$({ "$PY" -m venv "$VO" &&
            env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL "$VO/bin/pip" install -q \
                --disable-pip-version-check --no-index --find-links "$WH" weft &&
            cd build && "$ROOT/$VO/bin/python" -c "
import os, weft, weft._lib as L
assert os.path.dirname(os.path.realpath(L.LIB_PATH)) == os.path.dirname(os.path.realpath(weft.__file__)), L.LIB_PATH
print(weft.__version__)"; } 2>&1)
    rc=$?
    echo "$out" | tail -n 10
    check python:offline-install $rc "pip install --no-index --find-links $WH weft into a fresh $VO, then import weft"
fi
finish
