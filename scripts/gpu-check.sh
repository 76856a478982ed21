#!/bin/sh
# The checks that need an NVIDIA GPU, as one command for a machine lent with one (about 8 minutes on 16
# cores, from a fresh clone): installs what is missing (scripts/setup.sh), builds with CUDA into
# build-gpu/, lists the devices, then runs on GPU:0 test_cuda, test_overlap and test_trace (streams and
# events), every numpy op case (test_ops --device),
# the gradient checks, the training ops, the exported models against PyTorch (run_models.py --device),
# the ONNX node tests (tools/conformance --device), a GEMM and a ResNet-18 through `weft run --device`
# (CPU timings beside them, plus bench/bench_matmul), and last the CPU suite (scripts/run-tests.sh
# release) in the time that is left. Logs and summary.txt go to $OUT (default build-gpu/out).
# Exits 0 when every step passed, 1 when one failed, 2 when the machine has no usable GPU (the summary
# then says why, from `weft devices --verbose`).
#   GPU_CHECK_BUDGET  seconds for the whole run (default 470); each step's timeout is cut to fit
#   GPU_CHECK_CPU_SUITE=0  skips the CPU suite
#   GPU_CHECK_NODE_TESTS  a folder of generated ONNX node tests, for machines that cannot reach PyPI
#   GPU_CHECK_PREBUILT  a tarball from scripts/gpu-pack.sh, for a lent machine with nvcc but no package
#                    registry (so no oneDNN or protobuf-c to build with): setup, configure and build are
#                    skipped, the tarball's build/ is unpacked and its gpu-libs/ put on LD_LIBRARY_PATH
#   GPU_CHECK_EMU=1  a dry run of this script on a machine without a GPU: the CUDA plugin is built
#                    against the CPU emulator (tests/cudaemu) into build-gpu-emu/, GEMM and ResNet-18
#                    are shrunk, and the figures mean nothing; it proves the script, not the GPU
set -u
cd "$(dirname "$0")/.." || exit 1
B=build-gpu
EMU=${GPU_CHECK_EMU:-0}
CUDA_OPTS=""
GEMM_N=4096
RESNET_BATCH=8
if [ "$EMU" = 1 ]; then
    B=build-gpu-emu
    CUDA_OPTS="-DWEFT_CUDA=OFF -DWEFT_CUDA_EMU=ON"
    GEMM_N=256
    RESNET_BATCH=1
    WEFT_PLUGIN_PATH=$PWD/$B/cudaemu:$PWD/$B
    export WEFT_PLUGIN_PATH
fi
PREBUILT=${GPU_CHECK_PREBUILT:-}
[ -n "$PREBUILT" ] && B=build
mkdir -p "$B"
OUT=${OUT:-$PWD/$B/out}
mkdir -p "$OUT"
SUM=$OUT/summary.txt
: >"$SUM"
# Debian's python3 with numpy and torch; where it has no numpy (an image with its own Python), the one on PATH
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || PY=python3
JOBS=$(nproc)
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_BUDGET:-470}))
PASS=0
FAIL=0
SKIP=0

say() { echo "$*" | tee -a "$SUM"; }
skip() { SKIP=$((SKIP + 1)); say "$(printf '%-20s %-9s        %s' "$1" SKIP "$2")"; }

# step NAME TIMEOUT CMD...: output to $OUT/NAME.log; one summary line with the result, the seconds taken
# and the log's last line. The timeout is cut so that the run ends by the deadline.
step() {
    name=$1; to=$2; shift 2
    left=$((DEADLINE - $(date +%s)))
    if [ "$left" -lt 10 ]; then skip "$name" "no time left in the budget"; return 125; fi
    [ "$to" -gt "$left" ] && to=$left
    t=$(date +%s)
    timeout "$to" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t))
    last=$(grep -v '^[[:space:]]*$' "$OUT/$name.log" | tail -n 1 | cut -c1-150)
    if [ $rc -eq 0 ]; then st=PASS; PASS=$((PASS + 1))
    elif [ $rc -eq 124 ]; then st=TIMEOUT; FAIL=$((FAIL + 1))
    else st="FAIL($rc)"; FAIL=$((FAIL + 1)); fi
    say "$(printf '%-20s %-9s %4ss  %s' "$name" "$st" "$dt" "$last")"
    return $rc
}

finish() {
    say ""
    say "gpu-check: $PASS passed, $FAIL failed, $SKIP skipped in $(($(date +%s) - START)) s; logs in $OUT"
    exit "$1"
}

# the median time and, given the FLOPs of one run, the rate, from a `weft run` log
rate() { # log gflop
    sed -n 's/^time: first \([0-9.]*\) ms, median \([0-9.]*\) ms over \([0-9]*\) runs.*$/\2 \1 \3/p' "$1" |
        awk -v g="$2" '{ printf "median %.3f ms (first %.1f ms, %d runs)", $1, $2, $3; if (g > 0) printf ", %.0f GFLOP/s", g / ($1 / 1e3) }'
}

say "gpu-check on $(hostname) at $(date -u '+%Y-%m-%d %H:%M:%S') UTC, $JOBS cores"
if [ -n "$PREBUILT" ]; then
    say "prebuilt: $PREBUILT (setup, configure and build skipped); python: $PY"
    step unpack 120 tar -xJf "$PREBUILT" || finish 1
    # the tests name the packing checkout's build folder for their plugins: make that path reach this one
    root=$(cat "$B/gpu-pack-root")
    if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"; fi
    LD_LIBRARY_PATH=$PWD/$B/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # cuBLAS, cuDNN and NVRTC are dlopened: where no folder on the loader's paths has them, the first found
    for want in libcublas.so libcudnn.so.9 libnvrtc.so.13; do
        if ! ldconfig -p 2>/dev/null | grep -qF "$want (" && [ ! -e /usr/local/cuda/lib64/"$want" ]; then
            f=$(find /usr/local /opt /usr/lib -name "$want*" 2>/dev/null | sort | head -n 1)
            if [ -n "$f" ]; then
                [ "$want" = libcublas.so ] && ln -sf "$f" "$B/gpu-libs/libcublas.so"
                LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$f")
            fi
        fi
    done
    [ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
    export LD_LIBRARY_PATH
    say "    LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    command -v nvidia-smi >/dev/null 2>&1 && step nvidia-smi 30 nvidia-smi
else
    step setup 240 sh scripts/setup.sh
    if command -v nvidia-smi >/dev/null 2>&1; then
        step nvidia-smi 30 nvidia-smi
    else
        skip nvidia-smi "nvidia-smi is not installed"
    fi
    # shellcheck disable=SC2086
    step configure 120 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DWEFT_BENCH=ON $CUDA_OPTS || finish 1
    grep -E '^-- (CUDA backend|nvcc or the CUDA)' "$OUT/configure.log" | sed 's/^/    /' | tee -a "$SUM"
    step build 420 cmake --build "$B" -j"$JOBS" || { grep -E 'error' "$OUT/build.log" | head -20 | tee -a "$SUM"; finish 1; }
    CUDA_SO=$B/libweft-cuda.so
    [ "$EMU" = 1 ] && CUDA_SO=$B/cudaemu/libweft-cuda.so
    if [ ! -f "$CUDA_SO" ]; then
        say "FATAL: $CUDA_SO was not built: nvcc or the CUDA toolkit was not found (see $OUT/configure.log)"
        FAIL=$((FAIL + 1))
        finish 1
    fi
fi

step devices 60 "$B/weft" devices --verbose
sed -n '/^plugins:/,$p' "$OUT/devices.log" | sed 's/^/    /' | tee -a "$SUM"
if ! grep -q 'device:GPU:0' "$OUT/devices.log"; then
    why=$(sed -n '/^ *cuda /,/reason:/s/^ *reason: //p' "$OUT/devices.log" | head -n 1)
    say "NO GPU: weft found no CUDA device${why:+: $why}; the GPU checks cannot run here"
    finish 2
fi

step test_cuda 120 "$B/tests/test_cuda"
# generated kernels (cuda_fused.c): NVRTC alone, then the fused chains and every op on GPU:0 against the
# CPU, the disk cache; then their bandwidth against cudaMemcpy device-to-device (issue 14's 8-op chain)
step test_nvrtc 60 "$B/tests/test_nvrtc"
step test_passes_gpu 180 "$B/tests/test_passes"
grep -E 'jit_chain_cuda|^  ' "$OUT/test_passes_gpu.log" | head -n 20 | sed 's/^/    /' | tee -a "$SUM"
step bench_jit_gpu 180 "$B/bench/bench_jit" --rounds 2 --iterations 5
sed -n '/GPU:0 (GPU/,/^(copy/p' "$OUT/bench_jit_gpu.log" | sed 's/^/    /' | tee -a "$SUM"
# the device contract's streams and events on GPU:0: asynchronous copies and their order against the
# kernels on the device's clock, a bad index reaching the run through the node's event, and (only a real
# GPU shows it) the upload of one input overlapping the MatMul of another (test_overlap_gpu)
step test_overlap_gpu 120 "$B/tests/test_overlap"
step test_trace_gpu 60 "$B/tests/test_trace"

if step gen_opcases 180 "$PY" tests/ops/gen_cases.py "$B/opcases"; then
    step test_ops_gpu 300 "$B/tests/test_ops" --device GPU:0 "$B/opcases"
    grep '^FAIL' "$OUT/test_ops_gpu.log" | head -n 40 | sed 's/^/    /' | tee -a "$SUM"
fi
# gradients (numeric checks) and the training ops on GPU:0
step test_grad_gpu 120 "$B/tests/test_grad" --device GPU:0
step test_grad_nn_gpu 120 "$B/tests/test_grad_nn" --device GPU:0
step test_train_ops_gpu 60 "$B/tests/test_train_ops" --device GPU:0
# GEMM: one f32 MatMul 4096^3 (137 GFLOP), inputs random; the times include the host-device copies.
GEMM_GFLOP=$(awk -v n="$GEMM_N" 'BEGIN { printf "%.4f", 2 * n * n * n / 1e9 }')
mkdir -p "$B/models/gemm"
if step gen_gemm 60 "$PY" -c "
import onnx
from onnx import helper as h, TensorProto as T
n = $GEMM_N
g = h.make_graph([h.make_node('MatMul', ['A', 'B'], ['Y'])], 'gemm',
                 [h.make_tensor_value_info('A', T.FLOAT, [n, n]), h.make_tensor_value_info('B', T.FLOAT, [n, n])],
                 [h.make_tensor_value_info('Y', T.FLOAT, [n, n])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '$B/models/gemm/model.onnx')
"; then
    step gemm_gpu 120 "$B/weft" run "$B/models/gemm/model.onnx" --random-inputs --device GPU:0 --iterations 20 \
        --log-device-placement && say "    GPU GEMM $GEMM_N: $(rate "$OUT/gemm_gpu.log" "$GEMM_GFLOP")"
    # the CPU baselines name CPU:0: without --device the placer would put the work on the GPU too
    step gemm_cpu 120 "$B/weft" run "$B/models/gemm/model.onnx" --random-inputs --device CPU:0 --iterations 5 &&
        say "    CPU GEMM $GEMM_N: $(rate "$OUT/gemm_cpu.log" "$GEMM_GFLOP")"
fi
step bench_matmul 120 "$B/bench/bench_matmul" --size 1024 --runs 10

# ResNet-18 (torchvision, random weights, batch 8): convolutions run through cuDNN when libcudnn.so.9 is
# found (else direct kernels; the device line of devices.log says which), pools as CUDA kernels; any node
# without a CUDA kernel falls back to the CPU, and the placement log says which.
# (its own folder: models_gpu below exports the test models at batch 2; the model's batch dim is
# dynamic, so the input is given explicitly: --random-inputs would run batch 1)
X=$B/bench-models/input.npy
if step export_resnet18 180 "$PY" tests/models/export_models.py "$B/bench-models" --only resnet18 &&
   step resnet18_input 30 "$PY" -c "import numpy as np; np.save('$X', np.random.default_rng(0).standard_normal(($RESNET_BATCH, 3, 224, 224)).astype(np.float32))"; then
    M=$B/bench-models/resnet18/model.onnx
    step resnet18_gpu 180 "$B/weft" run "$M" --input "input=$X" --device GPU:0 --iterations 10 --log-device-placement &&
        say "    GPU ResNet-18 batch $RESNET_BATCH: $(rate "$OUT/resnet18_gpu.log" 0); nodes on GPU: $(grep -c 'device:GPU:0' "$OUT/resnet18_gpu.log"), on CPU: $(grep -c 'device:CPU:0' "$OUT/resnet18_gpu.log")"
    step resnet18_cpu 180 "$B/weft" run "$M" --input "input=$X" --device CPU:0 --iterations 5 &&
        say "    CPU ResNet-18 batch $RESNET_BATCH: $(rate "$OUT/resnet18_cpu.log" 0)"
fi

# the exported models against PyTorch and the ONNX node tests last: the figures above come first when the
# budget is short
step models_gpu 300 "$PY" tests/models/run_models.py --build "$B" --device GPU:0
grep -E '^(PASS|FAIL)' "$OUT/models_gpu.log" | sed 's/^/    /' | tee -a "$SUM"

# The ONNX node tests need onnx >= 1.16 from PyPI (scripts/venv.sh): skipped when it cannot be had,
# unless GPU_CHECK_NODE_TESTS names a folder already generated (holding node/).
if [ -n "${GPU_CHECK_NODE_TESTS:-}" ] && [ -d "$GPU_CHECK_NODE_TESTS/node" ]; then
    step conformance_gpu 300 "$B/conformance" --quiet --device GPU:0 "$GPU_CHECK_NODE_TESTS/node"
# A prebuilt run (no registry) uses $PY's onnx when it has one.
elif { [ -n "$PREBUILT" ] && "$PY" -c 'import onnx' 2>/dev/null && VPY=$PY; } || VPY=$(sh scripts/venv.sh 2>"$OUT/venv.log"); then
    if step gen_node_tests 240 "$VPY" tests/onnx/gen_node_tests.py "$B/onnx-node-tests"; then
        step conformance_gpu 300 "$B/conformance" --quiet --device GPU:0 "$B/onnx-node-tests/node"
    fi
else
    skip conformance_gpu "no Python venv with onnx >= 1.16 (is PyPI reachable? see venv.log)"
fi

if [ "${GPU_CHECK_CPU_SUITE:-1}" != 0 ]; then
    step cpu_suite 900 sh scripts/run-tests.sh release
else
    skip cpu_suite "GPU_CHECK_CPU_SUITE=0"
fi

[ "$FAIL" -eq 0 ] && finish 0
finish 1
