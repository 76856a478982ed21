#!/bin/sh
# Runs weft's test suite. MODE: release | asan | tsan | all (default).
#   release: every tests/test_* program, the numpy op cases, the installed-API example, and the Python
#            package (scripts/python-tests.sh: pip install . into build/venv-py, pytest tests/python)
#   asan:    the same programs built with AddressSanitizer + UndefinedBehaviorSanitizer (leaks checked)
#   tsan:    the executor and session tests (and test_image's strings from four threads) built with ThreadSanitizer
# Ends with the line "tests: N passed, N failed, N skipped": passed and failed count test programs and
# checks; skipped counts every "SKIP name: why" line they print (a whole program or one test in it),
# and the list before that line says what was skipped and why. A program that only skipped is not
# counted as passed. Where PoCL is installed (setup installs it) or under CI, a missing OPENCL:0 fails.
set -u
cd "$(dirname "$0")/.."
MODE=${1:-all}
PY=/usr/bin/python3
JOBS=$(nproc)
PASS=0
FAIL=0
FAILED=""
SKIPS=$(mktemp "${TMPDIR:-/tmp}/weft-skips-XXXXXX")
trap 'rm -f "$SKIPS"' EXIT
# Caches (OpenCL programs, PoCL binaries, calibrated device figures) live in the build folder, so a
# user's ~/.cache/weft/perf.txt never changes what the placer decides in a test.
mkdir -p build
export WEFT_CACHE_DIR="$PWD/build/cl-cache" POCL_CACHE_DIR="$PWD/build/pocl-cache"

note() { printf '\n=== %s\n' "$*"; }

skip() { # name why: a check that could not run here
    echo "SKIP $1: $2"
    echo "$1: $2" >>"$SKIPS"
}

result() { # name rc [log]: with a log, its "SKIP name: why" lines are collected, and a run that
           # passed nothing but skipped something is a skip, not a pass
    n_skip=0
    if [ $# -ge 3 ] && [ -f "$3" ]; then
        n_skip=$(grep -c '^SKIP ' "$3")
        grep '^SKIP ' "$3" | sed "s|^SKIP |$1: |" >>"$SKIPS"
    fi
    if [ "$2" -ne 0 ]; then
        FAIL=$((FAIL + 1)); FAILED="$FAILED $1"; echo "FAIL $1 (exit $2)"
    elif [ "$n_skip" -gt 0 ] && tail -n 1 "$3" | grep -qE '(^|[^0-9])0 passed, 0 failed'; then
        echo "SKIP $1 (everything in it skipped)"
    else
        PASS=$((PASS + 1))
        if [ "$n_skip" -gt 0 ]; then echo "PASS $1 ($n_skip skipped inside)"; else echo "PASS $1"; fi
    fi
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
    result "$label:$prog" $rc "$dir/$prog.log"
}

coverage() { # label dir device [plugin-path]: test_ops --coverage (device empty: CPU:0)
    dev=$3
    log="$2/test_ops_coverage$(echo "${dev:+_$dev}" | tr -c 'A-Za-z0-9_\n' _).log"
    WEFT_PLUGIN_PATH="${4:-$PWD/$2}" timeout 600 "$2/tests/test_ops" ${dev:+--device "$dev"} --coverage build/opcases >"$log" 2>&1
    rc=$?
    tail -n 1 "$log"; [ $rc -ne 0 ] && grep -E 'UNLISTED|STALE|stale|unlisted' "$log" | head -20
    result "$1:test_ops:coverage${dev:+:$dev}" $rc "$log"
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
        # the PyTorch-exported models first: test_onnx_export round-trips one of them
        timeout 900 $PY tests/models/export_models.py build/models >build/export_models.log 2>&1 ||
            { tail -n 5 build/export_models.log; result "release:export_models" 1; }
        suite release build
        # level 3's blocked kernels in each CPU layout, whatever oneDNN picks on this machine (nhwc on
        # AVX-512, nChw8c on AVX2): test_passes with the layout forced
        for lay in nhwc 8 16; do
            WEFT_CPU_LAYOUT=$lay timeout 600 build/tests/test_passes >build/test_passes_layout_$lay.log 2>&1
            rc=$?; tail -n 1 build/test_passes_layout_$lay.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_passes_layout_$lay.log | head -20
            result "release:test_passes:layout-$lay" $rc build/test_passes_layout_$lay.log
        done
        # test_ops runs its cases without graph optimisation (a fold would skip the kernel): once more
        # with the default passes, which must give the same outputs
        timeout 900 build/tests/test_ops --opt-level 2 build/opcases >build/test_ops_opt2.log 2>&1
        rc=$?; tail -n 1 build/test_ops_opt2.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_ops_opt2.log | head -20
        result "release:test_ops:opt-level-2" $rc build/test_ops_opt2.log
        timeout 900 build/tests/test_ops --opt-level 3 build/opcases >build/test_ops_opt3.log 2>&1
        rc=$?; tail -n 1 build/test_ops_opt3.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_ops_opt3.log | head -20
        result "release:test_ops:opt-level-3" $rc build/test_ops_opt3.log
        # the recurrent cases through each LSTM path the CPU has (k_rnn_lstm.c picks AVX-512 where it
        # exists, so the AVX2 kernel and oneDNN's primitive would otherwise go untested there), the AVX-512
        # form's code compiled for AVX2 (emu16: its 16-lane logic on machines without AVX-512), and
        # test_dnnl's threaded LSTM runs on the AVX2 kernel
        for path in avx2 dnnl emu16; do
            if [ $path != dnnl ] && ! { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; }; then
                skip "release:lstm-$path" "this CPU has no AVX2 and FMA"; continue
            fi
            WEFT_CPU_LSTM=$path timeout 600 build/tests/test_ops build/opcases LSTM >build/test_ops_lstm_$path.log 2>&1
            rc=$?; tail -n 1 build/test_ops_lstm_$path.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_ops_lstm_$path.log | head -20
            result "release:test_ops:lstm-$path" $rc build/test_ops_lstm_$path.log
        done
        # the Resize cases and the image pipeline through each column kernel below the CPU's best
        # (k_misc_resize.c picks AVX-512 where it exists)
        for path in avx2 plain; do
            if [ $path = avx2 ] && ! grep -qw avx2 /proc/cpuinfo; then skip "release:resize-$path" "this CPU has no AVX2"; continue; fi
            { WEFT_CPU_RESIZE=$path timeout 600 build/tests/test_ops build/opcases Resize &&
              WEFT_CPU_RESIZE=$path timeout 600 build/tests/test_pipeline; } >build/test_resize_$path.log 2>&1
            rc=$?; tail -n 1 build/test_resize_$path.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_resize_$path.log | head -20
            result "release:resize-$path" $rc build/test_resize_$path.log
        done
        # Sigmoid, Swish, Gelu, Erf, Tanh, Sqrt and Rsqrt through the loops the suite did not take (k_elementwise_unary.c picks
        # AVX-512's, else AVX2's, else the portable one; Gelu and Erf have no AVX-512 form of their own, the
        # portable loop's clone): the portable loops wherever AVX2 exists, AVX2's on AVX-512
        for path in plain avx2; do
            if [ $path = plain ] && ! grep -qw avx2 /proc/cpuinfo; then
                skip "release:vmath-$path" "this CPU has no AVX2 (the portable loops are the ones the suite ran)"; continue
            fi
            if [ $path = avx2 ] && ! grep -qw avx512f /proc/cpuinfo; then
                skip "release:vmath-$path" "this CPU has no AVX-512 (the AVX2 loops are the ones the suite ran, if any)"; continue
            fi
            { WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases sigmoid &&
              WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases swish &&
              WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases gelu &&
              WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases erf &&
              WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases tanh &&
              WEFT_CPU_VMATH=$path timeout 600 build/tests/test_ops build/opcases sqrt; } >build/test_vmath_$path.log 2>&1
            rc=$?; tail -n 1 build/test_vmath_$path.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_vmath_$path.log | head -20
            result "release:vmath-$path" $rc build/test_vmath_$path.log
        done
        if grep -qw avx2 /proc/cpuinfo; then
            WEFT_CPU_LSTM=avx2 timeout 600 build/tests/test_dnnl >build/test_dnnl_lstm_avx2.log 2>&1
            rc=$?; tail -n 1 build/test_dnnl_lstm_avx2.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_dnnl_lstm_avx2.log | head -20
            result "release:test_dnnl:lstm-avx2" $rc build/test_dnnl_lstm_avx2.log
        fi
        # every MatMul, Gemm and convolution through oneDNN's primitives again: the small products' plain loop
        # (k_dnnl_matmul.c) and the small maps' GEMM (k_conv_gemm.c) off
        WEFT_CPU_GEMM_SMALL=0 WEFT_CPU_CONV_GEMM=0 timeout 600 build/tests/test_dnnl >build/test_dnnl_gemm_off.log 2>&1
        rc=$?; tail -n 1 build/test_dnnl_gemm_off.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_dnnl_gemm_off.log | head -20
        result "release:test_dnnl:gemm-paths-off" $rc build/test_dnnl_gemm_off.log
        note "include layout (scripts/check-layout.sh): no include points backwards along the pipeline"
        { sh scripts/check-layout.sh --self-test && sh scripts/check-layout.sh; } >build/check-layout.log 2>&1
        rc=$?; tail -n 1 build/check-layout.log; [ $rc -ne 0 ] && head -30 build/check-layout.log
        result "release:check-layout" $rc build/check-layout.log
        # the per-element helpers of the vectorised kernels must inline into their loops: an out-of-line
        # copy of one (GCC will not inline across `#pragma GCC optimize` unless always_inline) made
        # Swish, Exp, Sigmoid, Tanh and the LSTM cell several times slower without failing any test
        note "vector-math helpers inlined: no out-of-line wf__f32_bits, ew_expf, ... in the release library"
        nm build/libweft.so build/weft >build/check-inline.log 2>&1
        rc=$?
        if grep -E ' [tT] (wf__f32_bits|wf__f32_from_bits|wf__bf2f|wf__f2bf|expm1_poly|ew_expf|ew_exp_nonpos|ew_expm1f|ew_tanhf|ew_sigmoidf|ew_erff|erf8|sig8_wide|ew_sinf|ew_cosf|sc_reduce|sc_sin_poly|sc_cos_poly|ew_atanf|ew_asinf|ew_acosf|as_poly|as_half)(\.|$)' build/check-inline.log; then rc=1; fi
        result "release:check-inline" $rc build/check-inline.log
        note "op-case dtype coverage: every (op, dtype) with a CPU kernel has a case or a line in tests/ops/untested_dtypes.txt"
        coverage release build ""
        note "CLI on bad ONNX input"
        sh tests/cli/test_cli.sh build/weft >build/test_cli.log 2>&1; rc=$?
        tail -n 1 build/test_cli.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_cli.log | head -30
        result release:test_cli $rc build/test_cli.log
        note "CLI placement: --place, --explain, --profile, soft and strict requests"
        sh tests/cli/test_placement.sh build/weft >build/test_placement.log 2>&1; rc=$?
        tail -n 1 build/test_placement.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_placement.log | head -30
        result release:test_placement $rc build/test_placement.log
        note "plugins that cannot run cost nothing: weft devices' peak RSS and wording without a driver, the OpenCL compile notice"
        sh tests/cli/test_plugins.sh build/weft >build/test_plugins_cli.log 2>&1; rc=$?
        tail -n 1 build/test_plugins_cli.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_plugins_cli.log | head -20
        result release:test_plugins_cli $rc build/test_plugins_cli.log
        note "the HTML report in headless Chromium: weft run --report of a CPU+OPENCL:0 split, DOM and screenshot"
        sh tests/cli/test_report.sh build/weft >build/test_report.log 2>&1; rc=$?
        tail -n 1 build/test_report.log; [ $rc -ne 0 ] && grep FAIL -A3 build/test_report.log | head -30
        result release:test_report $rc build/test_report.log
        note "ONNX node tests that passed when this list was made (tests/onnx/node_tests_pass.txt)"
        sh scripts/conformance.sh --check build; result "release:onnx-node-tests" $?
        example
        note "models: PyTorch-exported ONNX through weft run"
        timeout 600 $PY tests/models/run_models.py --build build >build/models.log 2>&1
        rc=$?; grep -E '^(PASS|FAIL)| passed' build/models.log; result "release:models" $rc build/models.log
        timeout 600 $PY tests/models/run_models.py --build build --opt-level 0 >build/models_opt0.log 2>&1
        rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_opt0.log; result "release:models:opt-level-0" $rc build/models_opt0.log
        timeout 600 $PY tests/models/run_models.py --build build --opt-level 3 >build/models_opt3.log 2>&1
        rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_opt3.log; result "release:models:opt-level-3" $rc build/models_opt3.log
        # PoCL is one of setup's packages, so where it is installed (and always under CI) OPENCL:0 must
        # exist: a broken ICD would otherwise turn every OpenCL check into a silent skip
        ocl_required=${CI:+yes}
        dpkg-query -W -f='${Status}' pocl-opencl-icd 2>/dev/null | grep -q "install ok installed" && ocl_required=yes
        if WEFT_PLUGIN_PATH="$PWD/build" build/weft devices --match OPENCL:0 2>/dev/null | grep -q OPENCL:0; then
            # PoCL compiles each OpenCL program on first use (minutes when cold): caches in the build folder
            export POCL_CACHE_DIR="$PWD/build/pocl-cache" WEFT_CACHE_DIR="$PWD/build/cl-cache"
            note "every op case on OPENCL:0 (strict placement; a case whose op has no kernel there fails)"
            WEFT_PLUGIN_PATH="$PWD/build" timeout 2400 build/tests/test_ops --device OPENCL:0 build/opcases >build/test_ops_opencl.log 2>&1
            rc=$?; tail -n 2 build/test_ops_opencl.log; [ $rc -ne 0 ] && grep -E 'FAIL|UNSUPPORTED' build/test_ops_opencl.log | head -20
            result "release:test_ops:OPENCL:0" $rc build/test_ops_opencl.log
            coverage release build OPENCL:0
            note "gradient checks, training ops and the model API on OPENCL:0 (strict placement)"
            for t in test_grad test_grad_nn test_train_ops test_model; do
                [ -x build/tests/$t ] || continue
                WEFT_PLUGIN_PATH="$PWD/build" timeout 1200 build/tests/$t --device OPENCL:0 >build/${t}_opencl.log 2>&1
                rc=$?; tail -n 1 build/${t}_opencl.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/${t}_opencl.log | head -20
                # OPENCL:0 exists here and so does everything setup installs: any skip is a gap
                grep -q '^SKIP' build/${t}_opencl.log && rc=1
                result "release:$t:OPENCL:0" $rc build/${t}_opencl.log
            done
            # the transfers through pinned staging that a discrete device gets (PoCL's is host-unified
            # memory, so only this forces them): uploads, and downloads copied out by a callback
            note "copies and overlap on OPENCL:0 through pinned staging (WEFT_OCL_STAGING=1)"
            WEFT_PLUGIN_PATH="$PWD/build" WEFT_OCL_STAGING=1 timeout 600 build/tests/test_overlap >build/test_overlap_staging.log 2>&1
            rc=$?; tail -n 1 build/test_overlap_staging.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_overlap_staging.log | head -20
            # only the GPU:0 checks may skip here (the emulator is not on this path)
            grep '^SKIP' build/test_overlap_staging.log | grep -qv 'no GPU:0' && rc=1
            result "release:test_overlap:OPENCL:0(staged)" $rc build/test_overlap_staging.log
            note "models on OPENCL:0"
            timeout 1200 $PY tests/models/run_models.py --build build --device OPENCL:0 >build/models_opencl.log 2>&1
            rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_opencl.log; result "release:models:OPENCL:0" $rc build/models_opencl.log
        elif [ -n "$ocl_required" ]; then
            echo "PoCL is installed but weft finds no OPENCL:0:"
            WEFT_PLUGIN_PATH="$PWD/build" build/weft devices --verbose 2>&1 | grep -iE 'opencl' | head -5
            result "release:OPENCL:0-present" 1
        else
            skip "release:OpenCL" "no OPENCL:0 device and PoCL is not installed (weft devices --verbose says why)"
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
            result "release:cudaemu_selftest" $rc build/cudaemu_selftest.log
            env $emu_env timeout 600 build/tests/test_cuda >build/test_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_cuda_emu.log | head -20
            # skipping would prove nothing here: the emulated device must be found
            grep -q '^SKIP' build/test_cuda_emu.log && rc=1
            result "release:test_cuda:GPU:0(emulated)" $rc build/test_cuda_emu.log
            env $emu_env timeout 600 build/tests/test_overlap >build/test_overlap_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_overlap_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_overlap_cuda_emu.log | head -20
            grep -q '^SKIP test_gpu' build/test_overlap_cuda_emu.log && rc=1
            result "release:test_overlap:GPU:0(emulated)" $rc build/test_overlap_cuda_emu.log
            env $emu_env timeout 300 build/tests/test_trace >build/test_trace_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_trace_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_trace_cuda_emu.log | head -20
            grep -q '^SKIP test_gpu' build/test_trace_cuda_emu.log && rc=1
            result "release:test_trace:GPU:0(emulated)" $rc build/test_trace_cuda_emu.log
            # generated kernels on GPU:0 (cuda_fused.c through the emulator's NVRTC), then without NVRTC
            env $emu_env timeout 600 build/tests/test_passes >build/test_passes_cuda_emu.log 2>&1
            rc=$?; tail -n 1 build/test_passes_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_passes_cuda_emu.log | head -20
            grep -q '^SKIP test_jit_chain_cuda' build/test_passes_cuda_emu.log && rc=1
            result "release:test_passes:GPU:0(emulated)" $rc build/test_passes_cuda_emu.log
            env $emu_env WEFT_CUDAEMU_NVRTC=0 timeout 600 build/tests/test_passes >build/test_passes_cuda_emu_nortc.log 2>&1
            rc=$?; tail -n 1 build/test_passes_cuda_emu_nortc.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/test_passes_cuda_emu_nortc.log | head -20
            grep -q '^SKIP test_jit_cuda_no_nvrtc' build/test_passes_cuda_emu_nortc.log && rc=1
            result "release:test_passes:GPU:0(emulated, no NVRTC)" $rc build/test_passes_cuda_emu_nortc.log
            env $emu_env timeout 1200 build/tests/test_ops --device GPU:0 build/opcases >build/test_ops_cuda_emu.log 2>&1
            rc=$?; tail -n 2 build/test_ops_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|UNSUPPORTED' build/test_ops_cuda_emu.log | head -20
            result "release:test_ops:GPU:0(emulated)" $rc build/test_ops_cuda_emu.log
            # the scatters again with the emulator starting blocks and threads in reverse order: a
            # missed duplicate target then picks another winner than the CPU's index order
            env $emu_env WEFT_CUDAEMU_REVERSE=1 timeout 600 build/tests/test_ops --device GPU:0 build/opcases catter >build/test_ops_cuda_emu_rev.log 2>&1
            rc=$?; tail -n 1 build/test_ops_cuda_emu_rev.log; [ $rc -ne 0 ] && grep -E 'FAIL' build/test_ops_cuda_emu_rev.log | head -20
            result "release:test_ops:GPU:0(emulated, reversed order, scatters)" $rc build/test_ops_cuda_emu_rev.log
            coverage release build GPU:0 "$PWD/build/cudaemu:$PWD/build"
            for t in test_grad test_grad_nn test_train_ops; do
                [ -x build/tests/$t ] || continue
                env $emu_env timeout 900 build/tests/$t --device GPU:0 >build/${t}_cuda_emu.log 2>&1
                rc=$?; tail -n 1 build/${t}_cuda_emu.log; [ $rc -ne 0 ] && grep -E 'FAIL|error' build/${t}_cuda_emu.log | head -20
                # the emulated device is always there: a skip would hide the whole program
                grep -q '^SKIP' build/${t}_cuda_emu.log && rc=1
                result "release:$t:GPU:0(emulated)" $rc build/${t}_cuda_emu.log
            done
            note "models on GPU:0 (emulated)"
            env $emu_env timeout 1200 $PY tests/models/run_models.py --build build --device GPU:0 >build/models_cuda_emu.log 2>&1
            rc=$?; grep -E '^(PASS|FAIL)| passed' build/models_cuda_emu.log; result "release:models:GPU:0(emulated)" $rc build/models_cuda_emu.log
            note "NaN and Inf through PyTorch-exported CNNs on CPU:0, OPENCL:0 and GPU:0 (emulated), strict placement"
            env $emu_env timeout 900 $PY tests/models/nan_models.py --build build --devices CPU:0,OPENCL:0,GPU:0 >build/nan_models.log 2>&1
            rc=$?; grep -E '^(FAIL|SKIP)' build/nan_models.log; tail -n 1 build/nan_models.log
            result "release:nan_models" $rc build/nan_models.log
        else
            grep -E 'error|Error' build.cudaemu.log | head -40
            result "release:cudaemu:build" 1
        fi
        # The Python package as users get it (scripts/python-tests.sh): pip install . into build/venv-py
        # (PyPI the first time), pytest tests/python against the installed copy, the wheel reinstalled
        # offline. A pytest failure fails this check; each pytest skip is a "SKIP name: why" line in the
        # log, so result counts it with the suite's skips.
        note "Python package: pip install . into build/venv-py, pytest tests/python, the wheel installed offline"
        sh scripts/python-tests.sh >build/python-tests.log 2>&1; rc=$?
        grep -E '^(PASS|FAIL|SKIP|FAILED|ERROR) |^pip .* took|^wheel:|^python:|^=+ .*(passed|failed|error)|^[0-9]+ (passed|failed)' build/python-tests.log
        result "release:python" $rc build/python-tests.log
    else
        result "release:build" 1
    fi
fi

if [ "$MODE" = asan ] || [ "$MODE" = all ]; then
    note "AddressSanitizer + UndefinedBehaviorSanitizer build"
    if configure_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address -DWEFT_BENCH=OFF && gen_cases; then
        # sanitizer builds make no real CUDA plugin: test_plugins checks the release build's
        WEFT_TEST_CUDA_PLUGIN="$PWD/build/libweft-cuda.so" \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 suite asan build-asan
        ASAN_OPTIONS=detect_leaks=1 sh tests/cli/test_cli.sh build-asan/weft >build-asan/test_cli.log 2>&1; rc=$?
        tail -n 1 build-asan/test_cli.log; result asan:test_cli $rc build-asan/test_cli.log
        ASAN_OPTIONS=detect_leaks=1 sh tests/cli/test_placement.sh build-asan/weft >build-asan/test_placement.log 2>&1; rc=$?
        tail -n 1 build-asan/test_placement.log; result asan:test_placement $rc build-asan/test_placement.log
        note "libFuzzer: the ONNX loader, the .npy, safetensors, TFRecord and CSV readers, the JPEG and PNG decoders, the graph builder's attributes (short runs, fixed seeds)"
        sh scripts/fuzz.sh short >build-fuzz.log 2>&1; rc=$?; tail -n 3 build-fuzz.log; result fuzz:short $rc
    else
        result "asan:build" 1
    fi
fi

if [ "$MODE" = tsan ] || [ "$MODE" = all ]; then
    note "ThreadSanitizer build (executor, sessions, input pipelines)"
    if configure_build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread -DWEFT_BENCH=OFF; then
        # TSan needs a fixed memory layout on kernels with large mmap randomisation.
        for t in test_executor test_session test_overlap test_dnnl test_ocl_index test_image test_pipeline; do
            TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
                setarch "$(uname -m)" -R build-tsan/tests/$t >build-tsan/$t.log 2>&1
            rc=$?
            tail -n 1 build-tsan/$t.log
            # a failure prints the first report whole (CI keeps only this output, not the log)
            [ $rc -ne 0 ] && { grep -E 'FAIL|ERROR' build-tsan/$t.log | head -20
                sed -n '/WARNING: ThreadSanitizer/,/SUMMARY: ThreadSanitizer/p' build-tsan/$t.log | head -80; }
            result "tsan:$t" $rc build-tsan/$t.log
        done
    else
        result "tsan:build" 1
    fi
fi

echo
NSKIP=$(wc -l <"$SKIPS")
if [ "$NSKIP" -gt 0 ]; then
    echo "skipped:"
    sed 's/^/  /' "$SKIPS"
fi
[ -n "$FAILED" ] && echo "failed:$FAILED"
echo "tests: $PASS passed, $FAIL failed, $NSKIP skipped"
[ "$FAIL" -eq 0 ]
