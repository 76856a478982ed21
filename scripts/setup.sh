#!/bin/sh
# Installs what weft's build, tests and demo need on a fresh Debian machine (run as root). Idempotent:
# prints nothing and installs nothing when everything is already present.
set -eu

PKGS="cmake make gcc g++ pkg-config time libdnnl-dev ocl-icd-opencl-dev opencl-headers libclblast-dev pocl-opencl-icd libprotobuf-c-dev protobuf-c-compiler libjpeg62-turbo-dev libpng-dev python3 python3-pil python3-numpy python3-onnx python3-venv python3-torch python3-torchvision clang libclang-rt-14-dev libasan8 libubsan1 libtsan2 util-linux zlib1g-dev dataset-fashion-mnist libopenblas0-pthread chromium"
# libopenblas0-pthread: the BLAS behind numpy and Debian's PyTorch (a benchmark peer); without it both use the
# reference BLAS, which made PyTorch's training step ~50x slower here.
# chromium: tests/cli/test_report.sh renders the HTML report headless (it skips without it).

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages:$missing; run 'sudo scripts/setup.sh' (needs root)" >&2
    exit 1
fi
echo "setup: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
