#!/bin/sh
# Packs a release build with the real CUDA plugin into one tarball for scripts/gpu-check.sh on a lent GPU
# machine that cannot build weft itself: such a machine has nvcc and the NVIDIA libraries but no package
# registry, so no oneDNN, protobuf-c or OpenCL ICD loader to build or link against. The tarball holds
# build/ as laid out here (the tests have this checkout's build folder compiled in, for their plugins)
# with just the binaries the GPU checks run, and build/gpu-libs/ with the non-base shared libraries they
# load (libdnnl, libprotobuf-c, libgomp, libOpenCL). gpu-check.sh unpacks it when GPU_CHECK_PREBUILT
# names it. Built against this machine's glibc (Debian 12: 2.36), so it runs on any newer one.
#   sh scripts/gpu-pack.sh [BUILD [TARBALL]]   (defaults: build and .gpu/weft-gpu.tar.xz)
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
T=${2:-.gpu/weft-gpu.tar.xz}
[ -f "$B/CMakeCache.txt" ] || { echo "gpu-pack: $B is not a configured build folder" >&2; exit 1; }
cmake --build "$B" -j"$(nproc)" >/dev/null
[ -f "$B/libweft-cuda.so" ] || { echo "gpu-pack: $B/libweft-cuda.so was not built (no nvcc?)" >&2; exit 1; }
BINS="weft conformance libweft-cuda.so tests/plugins/libweft-testdev.so bench/bench_matmul bench/bench_train_resnet bench/bench_jit"
for t in test_cuda test_nvrtc test_passes test_overlap test_trace test_ops test_grad test_grad_nn test_train_ops; do
    BINS="$BINS tests/$t"
done
rm -rf "$B/gpu-libs"
mkdir -p "$B/gpu-libs" "$(dirname "$T")"
# the libraries outside glibc, the compiler's runtime and zlib, which every image has
for f in $BINS; do ldd "$B/$f"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz)\.so' |
    while read -r lib; do cp -L "$lib" "$B/gpu-libs/"; done
pwd >"$B/gpu-pack-root"
files=""
for f in $BINS; do files="$files $B/$f"; done
# shellcheck disable=SC2086
tar -cJf "$T" $files "$B/gpu-libs" "$B/gpu-pack-root"
echo "gpu-pack: $T ($(du -h "$T" | cut -f1)): $(cd "$B/gpu-libs" && echo *)"
