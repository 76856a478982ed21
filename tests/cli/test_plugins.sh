#!/bin/sh
# What plugins cost where they cannot run, and what they say: with the real CUDA plugin beside weft on a
# machine without a CUDA driver, `weft devices` stays under 100 MB of peak memory (it was ~300 MB when
# the plugin linked cuBLAS) and `--verbose` calls the plugin "unavailable" with the missing driver as
# its reason; the first OpenCL run with an empty program cache says once on stderr that it is compiling
# kernels, and a second run with the cache warm does not. Usage: tests/cli/test_plugins.sh
# [path/to/weft] (default build/weft; its folder is the plugin path). Ends with "N passed, N failed,
# N skipped". /usr/bin/time is Debian's package "time" (scripts/setup.sh installs it).
T=test_plugins
. "$(dirname "$0")/common.sh"
BUILD=$(dirname "$WEFT")
export WEFT_PLUGIN_PATH="$BUILD"

# --- the CUDA plugin where there is no driver ---------------------------------------------------------
HAVE_DRIVER=0
{ ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; } && HAVE_DRIVER=1
if [ ! -f "$BUILD/libweft-cuda.so" ]; then
    skip devices_peak_rss "the real CUDA plugin $BUILD/libweft-cuda.so was not built (no nvcc, -DWEFT_CUDA=OFF or a sanitizer build)"
    skip cuda_unavailable_wording "no CUDA plugin"
elif [ $HAVE_DRIVER = 1 ]; then
    skip devices_peak_rss "this machine has a CUDA driver (libcuda.so.1), so the plugin rightly loads cuBLAS"
    skip cuda_unavailable_wording "this machine has a CUDA driver"
else
    # the cost: peak resident set of the whole process, in KB
    if /usr/bin/time -f %M -o "$D/rss" "$WEFT" devices >"$D/out" 2>"$D/err"; then
        kb=$(tail -n 1 "$D/rss")
        if [ "$kb" -lt 102400 ]; then ok "devices_peak_rss ($kb KB)"
        else bad devices_peak_rss "weft devices peaked at $kb KB with $BUILD/libweft-cuda.so in the plugin path (limit 102400 KB)"; fi
    else
        bad devices_peak_rss "weft devices failed"
    fi
    # the wording: unavailable, not failed, and why
    if "$WEFT" devices --verbose >"$D/out" 2>"$D/err" &&
        grep -qE '^  cuda +unavailable +0 devices' "$D/out" &&
        grep -A1 -E '^  cuda ' "$D/out" | grep -qF 'reason: no CUDA driver (libcuda.so.1 not found)'; then
        ok cuda_unavailable_wording
    else
        cat "$D/out" >>"$D/err"
        bad cuda_unavailable_wording "expected 'cuda unavailable 0 devices' and 'reason: no CUDA driver (libcuda.so.1 not found)'"
    fi
fi

# --- the OpenCL compile notice ------------------------------------------------------------------------
if ! "$WEFT" devices --match OPENCL:0 >/dev/null 2>&1; then
    skip ocl_compile_notice "no OPENCL:0 device (weft devices --verbose says why)"
elif ! $PY - "$D" 2>"$D/err" <<'EOF'
import sys
import numpy as np
from onnx import TensorProto, helper
nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "x"], ["y"], name="add")]
g = helper.make_graph(nodes, "notice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(sys.argv[1] + "/notice.onnx", "wb").write(m.SerializeToString())
np.save(sys.argv[1] + "/x.npy", np.arange(-3, 3, dtype=np.float32).reshape(2, 3))
EOF
then
    bad ocl_compile_notice "making the model with Debian's onnx failed"
else
    LINE='compiling OpenCL kernels for OPENCL:0 (cached for next time)'
    # run N: weft run on OPENCL:0 with weft's program cache in $D/cl and the notice threshold $2 ms;
    # stderr in $D/errN. PoCL's own cache (POCL_CACHE_DIR) is left as the caller set it: weft builds
    # from source whenever its cache misses, however fast PoCL then is, and a cold PoCL cache makes
    # LLVM leak at exit under ASan.
    run_ocl() {
        WEFT_CACHE_DIR="$D/cl" WEFT_OCL_COMPILE_NOTICE_MS=$2 \
            "$WEFT" run "$D/notice.onnx" --input "x=$D/x.npy" --device OPENCL:0 --strict-placement --iterations 1 \
            >"$D/out$1" 2>"$D/err$1"
    }
    # a threshold no build reaches: silent even though it compiles
    mkdir -p "$D/cl"
    if run_ocl 0 600000 && ! grep -q 'compiling OpenCL kernels' "$D/err0"; then ok ocl_notice_quiet_under_threshold
    else cp "$D/err0" "$D/err"; bad ocl_notice_quiet_under_threshold "a run whose builds stay under 600 s printed the notice or failed"; fi
    # with an empty cache and a threshold of 0: the line, exactly once, although several programs build
    rm -rf "$D/cl"
    mkdir -p "$D/cl"
    if run_ocl 1 0 && [ "$(grep -c 'compiling OpenCL kernels' "$D/err1")" = 1 ] && grep -qxF "$LINE" "$D/err1" &&
        [ -n "$(ls "$D/cl")" ]; then
        ok ocl_notice_first_run_once
    else
        cp "$D/err1" "$D/err"
        bad ocl_notice_first_run_once "expected the line '$LINE' once on stderr and a filled cache in $D/cl"
    fi
    # the same run with the cache now warm: nothing is compiled, nothing is said
    if run_ocl 2 0 && ! grep -q 'compiling OpenCL kernels' "$D/err2"; then ok ocl_notice_silent_when_cached
    else cp "$D/err2" "$D/err"; bad ocl_notice_silent_when_cached "the second run with a warm cache printed the notice or failed"; fi
fi

summary
