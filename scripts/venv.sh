#!/bin/sh
# Creates build/venv with the Python packages from PyPI that conformance and the ONNX tools need
# (onnx, for its backend node tests). Idempotent. Prints the venv's python path.
set -eu
cd "$(dirname "$0")/.."
V=build/venv
if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c "import onnx, numpy, safetensors" 2>/dev/null; then
    mkdir -p build
    /usr/bin/python3 -m venv "$V" >&2
    "$V/bin/pip" install -q --disable-pip-version-check "onnx>=1.16" numpy safetensors >&2
fi
echo "$PWD/$V/bin/python"
