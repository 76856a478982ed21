#!/bin/sh
# Runs weft's test suite. MODE: release | asan | tsan | all (default).
#   release: every tests/test_* program, the numpy op cases, and the installed-API example
#   asan:    the same programs built with AddressSanitizer + UndefinedBehaviorSanitizer (leaks checked)
#   tsan:    the executor and session tests built with ThreadSanitizer
# Ends with the line "N passed, N failed" (one count per test program or check).
set -u
cd "$(dirname "$0")/.."
MODE=${1:-all}
PY=/usr/bin/python3
JOBS=$(nproc)
PASS=0
FAIL=0
FAILED=""
# Caches (OpenCL programs, PoCL binaries, calibrated device figures) live in the build folder, so a
# user's ~/.cache/weft/perf.txt never changes what the placer decides in a test.
mkdir -p build
export WEFT_CACHE_DIR="$PWD/build/cl-cache" POCL_CACHE_DIR="$PWD/build/pocl-cache"

note() { printf '\n=== %s\n' "$*"; }

result() { # name rc
    if [ "$2" -eq 0 ]; then PASS=$((PASS + 1)); echo "PASS $1"; else FAIL=$((FAIL + 1)); FAILED="$FAILED $1"; echo "FAIL $1 (exit $2)"; fi
}

configure_build() { # dir extra-cmake-args...
    dir=$1; shift
    cmake -S . -B "$dir" "$@" >"$dir.cmake.log" 2>&1 || { cat "$dir.cmake.log"; return 1; }
    cmake --build "$dir" -j"$JOBS" >"$dir.build.log" 2>&1 || { grep -E 'error|Error' "$dir.build.log" | head -40; return 1; }
}

gen_cases() {
    if [ ! -f build/opcases/manifest.txt ] || [ -n "$(find tests/ops -newer build/opcases/manifest.txt -name '*.py')" ]; then
        rm -rf build/opcases
        $PY tests/ops/gen_cases.py build/opcases >/dev/null || return 1
    fi
}

run_prog() { # label dir prog [args]
    label=$1; dir=$2; prog=$3; shift 3
    timeout 900 "$dir/tests/$prog" "$@" >"$dir/$prog.log" 2>&1
    rc=$?
    tail -n 1 "$dir/$prog.log"
    [ $rc -ne 0 ] && grep -E 'FAIL|ERROR|error|Sanitizer|runtime error' "$dir/$prog.log" | head -30
    result "$label:$prog" $rc
}

suite() { # label dir
    label=$1; dir=$2
    for t in "$dir"/tests/test_*; do
        [ -x "$t" ] || continue
        name=$(basename "$t")
        if [ "$name" = test_ops ]; then
            run_prog "$label" "$dir" test_ops build/opcases
        else
            run_prog "$label" "$dir" "$name"
        fi
    done
}

example() {
    note "example: installed library, header and pkg-config"
    rm -rf build/_install
    cmake --install build --prefix "$PWD/build/_install" >/dev/null &&
    PKG_CONFIG_PATH="$PWD/build/_install/lib/pkgconfig:$PWD/build/_install/lib/x86_64-linux-gnu/pkgconfig" \
        sh -c 'cc -std=c11 -Wall -Werror -o build/example_mlp examples/mlp.c $(pkg-config --cflags --libs weft)' &&
    LD_LIBRARY_PATH="$PWD/build/_install/lib:$PWD/build/_install/lib/x86_64-linux-gnu" build/example_mlp
    result "example:mlp" $?
}

if [ "$MODE" = release ] || [ "$MODE" = all ]; then
    note "release build"
    if configure_build build -DCMAKE_BUILD_TYPE=Release && gen_cases; then
        # build/venv (onnx, safetensors from PyPI): test_data cross-checks checkpoints against the
        # reference safetensors package, and the ONNX node tests below are generated with it
        sh scripts/venv.sh >/dev/null || echo "no build/venv: the safetensors cross-check will skip"
        suite release build
        note "CLI on bad ONNX input"
        sh tests/cli/test_cli.sh build/weft >build/test_cli.log 2>&1; rc=$?
        tail -n 1 build/test_cli.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_cli.log | head -30
        result release:test_cli $rc
        note "CLI placement: --place, --explain, --profile, soft and strict requests"
        sh tests/cli/test_placement.sh build/weft >build/test_placement.log 2>&1; rc=$?
        tail -n 1 build/test_placement.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_placement.log | head -30
        result release:test_placement $rc
        note "ONNX node tests that passed when this list was made (tests/onnx/node_tests_pass.txt)"
        sh scripts/conformance.sh --check build; result "release:onnx-node-tests" $?
        example
        note "models: PyTorch-exported ONNX through weft run"
        timeout 600 $PY tests/models/run_models.py --build build >build/models.log 2>&1
        rc=$?; grep -E '^(PASS|FAIL)| passed' build/models.log; result "release:models" $rc
        if build/weft devices --match OPENCL:0 >/dev/null 2>&1; then
            # PoCL compiles each OpenCL program on first use (minutes when cold): caches in the build folder
            export POCL_CACHE_DIR="$PWD/build/pocl-cache" WEFT_CACHE_DIR="$PWD/build/cl-cache"
            note "every op case on OPENCL:0 (strict placement; ops without an OpenCL kernel counted apart)"
            WEFT_PLUGIN_PATH="$PWD/build" timeout 2400 build/tests/test_ops --device OPENCL:0 build/opcases >build/test_ops_opencl.log 2>&1
            rc=$?; tail -n 1 build/test_ops_opencl.log; [ $rc -ne 0 ] && grep FAIL build/test_ops_opencl.log | head -20
            result "release:test_ops:OPENCL:0" $rc
            note "gradient checks, training ops and the model API on OPENCL:0 (strict placement)"
            for t in test_grad test_grad_nn test_train_ops test_model; do
                [ -x build/tests/$t ] || continue
                WEFT_PLUGIN_PATH="$PWD/build" timeout 1200 build/tests/$t --device OPENCL:0 >build/${t}_opencl.log 2>&1
                rc=$?; tail -n 1 build/${t}_opencl.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/${t}_opencl.log | head -20
                result "release:$t:OPENCL:0" $rc
            done
            note "models on OPENCL:0"
            timeout 1200 $PY tests/models/run_models.py --build build --device OPENCL:0 >build/models_opencl.log 2>&1
            rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_opencl.log; result "release:models:OPENCL:0" $rc
        else
            echo "no OPENCL:0 device (weft devices --verbose says why): OpenCL checks skipped"
        fi
        # The CUDA plugin's own sources built against the CPU emulator (tests/cudaemu, -DWEFT_CUDA_EMU=ON):
        # its host logic, kernels and cuBLAS calls run with no GPU. build/cudaemu comes first in the plugin
        # path, so GPU:0 is the emulated device; tests/cudaemu/README.md says what this cannot prove.
        note "CUDA plugin on the CPU emulator (GPU:0 emulated; strict placement)"
        if cmake -S . -B build -DWEFT_CUDA_EMU=ON >>build.cmake.log 2>&1 &&
           cmake --build build -j"$JOBS" --target weft-cuda-emu cudaemu_selftest >build.cudaemu.log 2>&1; then
            emu_env="WEFT_PLUGIN_PATH=$PWD/build/cudaemu:$PWD/build"
            timeout 300 build/cudaemu/cudaemu_selftest >build/cudaemu_selftest.log 2>&1
            rc=$?; tail -n 1 build/cudaemu_selftest.log; [ $rc -ne 0 ] && grep FAIL build/cudaemu_selftest.log | head -20
            result "release:cudaemu_selftest" $rc
            env $emu_env timeout 600 build/tests/test_cuda >build/test_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_cuda_emu.log | head -20
            # skipping would prove nothing here: the emulated device must be found
            grep -q skipped build/test_cuda_emu.log && rc=1
            result "release:test_cuda:GPU:0(emulated)" $rc
            env $emu_env timeout 1200 build/tests/test_ops --device GPU:0 build/opcases >build/test_ops_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_ops_cuda_emu.log; [ $rc -ne 0 ] && grep FAIL build/test_ops_cuda_emu.log | head -20
            result "release:test_ops:GPU:0(emulated)" $rc
            for t in test_grad test_grad_nn test_train_ops; do
                [ -x build/tests/$t ] || continue
                env $emu_env timeout 900 build/tests/$t --device GPU:0 >build/${t}_cuda_emu.log 2>&1
                rc=$?; tail -n 1 build/${t}_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/${t}_cuda_emu.log | head -20
                result "release:$t:GPU:0(emulated)" $rc
            done
            note "models on GPU:0 (emulated)"
            env $emu_env timeout 1200 $PY tests/models/run_models.py --build build --device GPU:0 >build/models_cuda_emu.log 2>&1
            rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_cuda_emu.log; result "release:models:GPU:0(emulated)" $rc
        else
            grep -E 'error|Error' build.cudaemu.log | head -40
            result "release:cudaemu:build" 1
        fi
    else
        result "release:build" 1
    fi
fi

if [ "$MODE" = asan ] || [ "$MODE" = all ]; then
    note "AddressSanitizer + UndefinedBehaviorSanitizer build"
    if configure_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address -DWEFT_BENCH=OFF && gen_cases; then
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 suite asan build-asan
        ASAN_OPTIONS=detect_leaks=1 sh tests/cli/test_cli.sh build-asan/weft >build-asan/test_cli.log 2>&1; rc=$?
        tail -n 1 build-asan/test_cli.log; result asan:test_cli $rc
        ASAN_OPTIONS=detect_leaks=1 sh tests/cli/test_placement.sh build-asan/weft >build-asan/test_placement.log 2>&1; rc=$?
        tail -n 1 build-asan/test_placement.log; result asan:test_placement $rc
        note "libFuzzer: the ONNX loader (short run, fixed seeds)"
        sh scripts/fuzz.sh short >build-fuzz.log 2>&1; rc=$?; tail -n 3 build-fuzz.log; result fuzz:short $rc
    else
        result "asan:build" 1
    fi
fi

if [ "$MODE" = tsan ] || [ "$MODE" = all ]; then
    note "ThreadSanitizer build (executor and sessions)"
    if configure_build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread -DWEFT_BENCH=OFF; then
        # TSan needs a fixed memory layout on kernels with large mmap randomisation.
        for t in test_executor test_session; do
            TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
                setarch "$(uname -m)" -R build-tsan/tests/$t >build-tsan/$t.log 2>&1
            rc=$?
            tail -n 1 build-tsan/$t.log
            [ $rc -ne 0 ] && grep -E 'FAIL|WARNING|ERROR' build-tsan/$t.log | head -20
            result "tsan:$t" $rc
        done
    else
        result "tsan:build" 1
    fi
fi

echo
[ -n "$FAILED" ] && echo "failed:$FAILED"
echo "tests: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
