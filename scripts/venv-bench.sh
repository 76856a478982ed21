#!/bin/sh
# Creates build/venv-bench with TensorFlow (tensorflow-cpu from PyPI) for the training benchmark
# (bench/bench_train.py) and ONNX Runtime (onnxruntime from PyPI) for the recurrent benchmark
# (bench/bench_lstm.py). Kept apart from build/venv so conformance's onnx pin and TF's numpy/protobuf
# pins never fight. Idempotent. Prints the venv's python path.
set -eu
cd "$(dirname "$0")/.."
V=build/venv-bench
if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c "import tensorflow, onnxruntime, numpy" 2>/dev/null; then
    mkdir -p build
    /usr/bin/python3 -m venv "$V" >&2
    "$V/bin/pip" install -q --disable-pip-version-check tensorflow-cpu onnxruntime numpy >&2
fi
echo "$PWD/$V/bin/python"
