#!/bin/sh
# `weft run` and `weft inspect` on bad input: each case must exit non-zero (never by a signal), print
# one error line that names the file and the problem, and nothing from a sanitizer. One good run is
# checked against numpy. Usage: tests/cli/test_cli.sh [path/to/weft] (default build/weft).
# The models come from tests/onnx/make_bad_models.py. Ends with "N passed, N failed, N skipped".
T=test_cli
. "$(dirname "$0")/common.sh"
# The OpenCL plugin's "compiling OpenCL kernels" line (a build over 1 s, so with a cold kernel cache)
# would come before the error line these cases read: a run that falls back to OPENCL:0 (the CPU:0
# memory limit below) printed it first on a fresh cache. test_plugins_cli checks that line itself.
export WEFT_OCL_COMPILE_NOTICE_MS=-1
$PY tests/onnx/make_bad_models.py "$D" || { echo "test_cli: make_bad_models.py failed"; echo "0 passed, 1 failed"; exit 1; }


# expect NAME LINES TEXT... -- weft ARGS: non-zero exit below 124, no sanitizer report, the first stderr
# line holds every TEXT; LINES: 1 = stderr is that one line, any = more may follow (lists of inputs).
# expect_exit NAME CODE TEXT... -- weft ARGS: the same with stderr one line, the exit code exactly CODE
# (2: a usage error, 1: a file, the model or the run failed) and nothing on stdout.
want_rc=""
expect() { want_rc=""; expect_core "$@"; }
expect_exit() {
    want_rc=$2 xname=$1
    shift 2
    expect_core "$xname" 1 "$@"
}
expect_core() {
    name=$1 lines=$2
    shift 2
    texts=""
    while [ "$1" != "--" ]; do texts="$texts
$1"; shift; done
    shift
    "$WEFT" "$@" >"$D/out" 2>"$D/err"
    rc=$?
    if [ $rc -eq 0 ]; then bad "$name" "exit 0, expected an error"; return; fi
    if [ $rc -ge 124 ]; then bad "$name" "exit $rc (a crash, signal or timeout)"; return; fi
    if grep -qE 'Sanitizer|runtime error|LeakSanitizer' "$D/err"; then bad "$name" "sanitizer report"; return; fi
    if [ -n "$want_rc" ] && [ $rc -ne "$want_rc" ]; then bad "$name" "exit $rc, expected $want_rc"; return; fi
    if [ -n "$want_rc" ] && [ -s "$D/out" ]; then bad "$name" "output on stdout: $(head -c 200 "$D/out")"; return; fi
    first=$(head -n 1 "$D/err")
    n=$(wc -l <"$D/err")
    if [ "$lines" = 1 ] && [ "$n" -ne 1 ]; then bad "$name" "$n lines on stderr, expected 1"; return; fi
    echo "$texts" | while IFS= read -r t; do
        [ -z "$t" ] && continue
        case "$first" in *"$t"*) ;; *) echo "missing: $t" ;; esac
    done >"$D/missing"
    if [ -s "$D/missing" ]; then bad "$name" "$(cat "$D/missing" | tr '\n' ' ')"; return; fi
    ok "$name"
}

# expect_ok NAME FIRST TEXT... -- weft ARGS: exit 0, nothing on stderr, stdout's first line starts with
# FIRST and stdout holds every TEXT somewhere (help texts).
expect_ok() {
    name=$1 firstw=$2
    shift 2
    texts=""
    while [ "$1" != "--" ]; do texts="$texts
$1"; shift; done
    shift
    "$WEFT" "$@" >"$D/out" 2>"$D/err"
    rc=$?
    if [ $rc -ne 0 ]; then bad "$name" "exit $rc, expected 0"; return; fi
    if [ -s "$D/err" ]; then bad "$name" "output on stderr"; return; fi
    case "$(head -n 1 "$D/out")" in "$firstw"*) ;; *) cp "$D/out" "$D/err"; bad "$name" "stdout does not start with '$firstw'"; return ;; esac
    echo "$texts" | while IFS= read -r t; do
        [ -z "$t" ] && continue
        grep -qF -- "$t" "$D/out" || echo "missing: $t"
    done >"$D/missing"
    if [ -s "$D/missing" ]; then bad "$name" "$(cat "$D/missing" | tr '\n' ' ')"; return; fi
    ok "$name"
}

R="run --iterations 1"
X="--input x=$D/x.npy"
expect missing_file 1 "$D/nope.onnx" "No such file" -- $R "$D/nope.onnx" $X
expect empty_file 1 "$D/empty.onnx" "empty file" -- $R "$D/empty.onnx" $X
expect truncated 1 "$D/truncated.onnx" "truncated or corrupt" -- $R "$D/truncated.onnx" $X
expect random_bytes 1 "$D/random.onnx" -- $R "$D/random.onnx" $X
expect raw_short 1 "$D/raw_short.onnx" "initializer 'w'" "raw_data holds 20 bytes" -- $R "$D/raw_short.onnx" $X
expect raw_long 1 "$D/raw_long.onnx" "initializer 'w'" "raw_data holds 28 bytes" -- $R "$D/raw_long.onnx" $X
expect ext_parent 1 "$D/sub/ext_up.onnx" "'../secret.bin' leaves the model's folder" "refused" -- \
    $R "$D/sub/ext_up.onnx" $X
expect ext_absolute 1 "$D/sub/ext_abs.onnx" "$D/secret.bin' leaves the model's folder" "refused" -- \
    $R "$D/sub/ext_abs.onnx" $X
expect ext_missing 1 "$D/sub/ext_missing.onnx" "external data file" "missing.bin" -- $R "$D/sub/ext_missing.onnx" $X
expect unsupported_ops 1 "$D/unsupported.onnx" "NoSuchOpA" "com.example.Custom" -- $R "$D/unsupported.onnx" $X
expect dangling_input 1 "$D/dangling.onnx" "node 'late'" "input 'nobody' is not produced" -- $R "$D/dangling.onnx" $X
expect ir_version_2 1 "$D/ir2.onnx" "IR version 2" -- $R "$D/ir2.onnx" $X
expect opset_6 1 "$D/opset6.onnx" "opset 6" -- $R "$D/opset6.onnx" $X
# bad inputs to a good model
expect input_dtype 1 "$D/x_i32.npy" "input 'x' has dtype i32" "expects f32" -- $R "$D/good.onnx" --input "x=$D/x_i32.npy"
expect input_shape 1 "$D/x_shape.npy" "input 'x' has shape [3,2]" "expects [2,3]" -- \
    $R "$D/good.onnx" --input "x=$D/x_shape.npy"
expect input_unknown_name any "$D/good.onnx" "no input named 'nosuch'" -- $R "$D/good.onnx" --input "nosuch=$D/x.npy"
expect input_missing_file 1 "$D/none.npy" -- $R "$D/good.onnx" --input "x=$D/none.npy"
expect input_not_npy 1 "$D/not_npy.npy" -- $R "$D/good.onnx" --input "x=$D/not_npy.npy"
expect input_not_given any "$D/good.onnx" "input 'x' was not given" -- $R "$D/good.onnx"
expect input_no_equals 1 "--input wants NAME=FILE" -- $R "$D/good.onnx" --input "$D/x.npy"
# device memory limits: a limit too small for the run names the device, the size and the limit
expect memory_limit_cpu any "out of memory" "on CPU:0" "8-byte limit" -- $R "$D/good.onnx" $X --memory-limit CPU:0=8
expect memory_limit_no_device 1 "'GPU:7' matches no device" -- $R "$D/good.onnx" $X --memory-limit GPU:7=1M
expect memory_limit_bad_size 1 "--memory-limit wants SPEC=SIZE" -- $R "$D/good.onnx" $X --memory-limit CPU:0
# inspect
expect inspect_missing 1 "$D/nope.onnx" -- inspect "$D/nope.onnx"
expect inspect_truncated 1 "$D/truncated.onnx" "truncated or corrupt" -- inspect "$D/truncated.onnx"
expect inspect_ir2 1 "$D/ir2.onnx" "IR version 2" -- inspect "$D/ir2.onnx"

# inspect reads a model it cannot import and names what is missing
if "$WEFT" inspect "$D/unsupported.onnx" >"$D/out" 2>"$D/err" && grep -q "unsupported ops:.*NoSuchOpA" "$D/out" &&
    grep -q "com.example.Custom" "$D/out"; then ok inspect_unsupported; else cp "$D/out" "$D/err"; bad inspect_unsupported "no list"; fi

# the good model runs, from raw data and from external data, and matches numpy
for m in good.onnx sub/ext_good.onnx; do
    rm -rf "$D/o"
    if "$WEFT" run "$D/$m" $X --iterations 1 --output-dir "$D/o" >"$D/out" 2>"$D/err" &&
        $PY -c "import numpy as np, sys; a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); sys.exit(0 if a.shape == b.shape and np.allclose(a, b) else 1)" \
            "$D/o/y.npy" "$D/y_ref.npy" 2>>"$D/err"; then ok "good_run:$m"; else bad "good_run:$m" "run failed or differs from numpy"; fi
done

# `weft demo`: bad options, a missing dataset, an unknown device; then one short real training run
# (1 epoch at batch 256: the accuracy band, the output lines the benchmark parses, a trace and an ONNX
# export that loads back through `weft inspect`).
expect demo_bad_epochs 1 "--epochs" -- demo --epochs 0
expect demo_bad_option any "unknown option '--frobnicate'" -- demo --frobnicate
expect demo_no_data 1 "$D/nodata/train-images-idx3-ubyte.gz" -- demo --data "$D/nodata"
expect demo_unknown_device any "GPU:9" -- demo --device GPU:9 --quiet
if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    if "$WEFT" demo --epochs 1 --batch 256 --quiet --trace "$D/demo.json" --export-onnx "$D/demo.onnx" \
        >"$D/out" 2>"$D/err"; then
        acc=$(sed -n 's/^test accuracy: \([0-9.]*\).*/\1/p' "$D/out")
        if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.80 && a <= 1) }' &&
            grep -q '^training time: .* s (.* samples/s)' "$D/out" && grep -q '^epoch time: median' "$D/out" &&
            $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(e.get("name")=="optimizer/dense/kernel/assign" or "dense/MatMul" in e.get("name","") for e in d["traceEvents"])' "$D/demo.json" 2>>"$D/err" &&
            "$WEFT" inspect "$D/demo.onnx" >"$D/inspect" 2>>"$D/err" && grep -q 'MatMul' "$D/inspect"; then
            ok "demo_one_epoch (test accuracy $acc)"
        else
            bad demo_one_epoch "accuracy '$acc', or a missing line, trace or ONNX file"; cat "$D/out" >>"$D/err"
        fi
        "$WEFT" demo --time-steps 20 --batch 32 >"$D/out" 2>"$D/err" &&
            grep -q '^train step: batch 32, 20 steps, median [0-9.]* ms, p10 [0-9.]* ms, p90 [0-9.]* ms' "$D/out" &&
            ok demo_time_steps || bad demo_time_steps "no 'train step:' line"
        # the CNN (oneDNN's backward convolutions): 30 steps from its saved initial weights must learn, and
        # an explicit --trace after --time-steps traces one step with the convolution gradients in it and
        # each Relu fused into its convolution (its gradient reads the Relu's output, not the conv's)
        if "$WEFT" demo --model cnn --batch 32 --print-losses 30 --save-initial "$D/cnn0.safetensors" \
            >"$D/out" 2>"$D/err" && [ "$(grep -c '^step [0-9]* loss ' "$D/out")" = 30 ] &&
            awk '/^step 0 loss/ { f = $4 } /^step 29 loss/ { l = $4 } END { exit !(f >= 2.0 && f <= 2.6 && l < f - 0.3) }' "$D/out" &&
            grep -q 'conv2d_1/kernel' "$D/cnn0.safetensors"; then
            ok demo_cnn_losses
        else
            bad demo_cnn_losses "no 30 falling losses from about ln(10), or no initial weights"; cat "$D/out" >>"$D/err"
        fi
        "$WEFT" demo --model cnn --time-steps 3 --batch 16 --trace "$D/cnn.json" >"$D/out" 2>"$D/err" &&
            grep -q '^one training step, traced' "$D/out" && grep -q 'Conv2DBackpropFilter' "$D/cnn.json" &&
            grep -q 'Conv2D+Relu' "$D/cnn.json" &&
            ok demo_cnn_time_steps_trace ||
            bad demo_cnn_time_steps_trace "no traced step after --time-steps, or its convolutions lost their Relu epilogue"
    else
        bad demo_one_epoch "exit non-zero"
    fi
else
    SKIP=$((SKIP + 1))
    echo "SKIP demo_one_epoch: no Fashion-MNIST (Debian package dataset-fashion-mnist)"
fi

# ---- overflowing and huge sizes (issue 12): one line naming the node and the shapes, exit below 128 ----
expect tile_overflow 1 "node 't' (Tile)" "output dim 1 (3 x 4611686018427387904) overflows int64" "f32[2,3]" \
    "[1,4611686018427387904]" -- $R "$D/tile_overflow.onnx" $X
expect expand_overflow 1 "node 'e' (Expand)" "overflows int64" "[4611686018427387904,4,1,1]" -- \
    $R "$D/expand_overflow.onnx" $X
expect expand_huge 1 "node 'e' (Expand)" "out of memory" "26388279066624 bytes" -- $R "$D/expand_huge.onnx" $X
expect init_huge 1 "initializer 'w' declares shape [33554432,33554432] of f32" "raw_data holds 24 bytes" -- \
    $R "$D/init_huge.onnx" $X
expect ext_huge 1 "initializer 'w'" "fewer than 0 + 4503599627370496" -- $R "$D/sub/ext_huge.onnx" $X
# ==== issue 12: the CLI says what is wrong ========================================================
# Usage errors exit 2 with one stderr line naming the option, the value and what is allowed; file
# problems exit 1 naming the path; --help prints the command's help on stdout and exits 0.
G="$D/good.onnx"
# numbers: strict, whole-argument, in range
expect_exit num_iterations_negative 2 "weft run: --iterations wants a positive integer, got '-1'" -- run "$G" $X --iterations -1
expect_exit num_iterations_float 2 "weft run: --iterations wants a positive integer, got '1e3'" -- run "$G" $X --iterations 1e3
expect_exit num_iterations_zero 2 "weft run: --iterations wants a positive integer, got '0'" -- run "$G" $X --iterations 0
expect_exit num_iterations_text 2 "weft run: --iterations wants a positive integer, got '10x'" -- run "$G" $X --iterations 10x
expect_exit num_iterations_plus 2 "weft run: --iterations wants a positive integer, got '+5'" -- run "$G" $X --iterations +5
expect_exit num_iterations_space 2 "weft run: --iterations wants a positive integer, got ' 5'" -- run "$G" $X --iterations " 5"
expect_exit num_iterations_large 2 "weft run: --iterations wants an integer from 1 to 1000000, got '1000001'" -- \
    run "$G" $X --iterations 1000001
expect_exit num_iterations_overflow 2 "weft run: --iterations wants an integer from 1 to 1000000, got '99999999999999999999'" -- \
    run "$G" $X --iterations 99999999999999999999
# graph optimisation: the level's range, level 3's layout, an unknown pass, the dump's files
expect_exit opt_level_large 2 "weft run: --opt-level wants an integer from 0 to 3, got '4'" -- run "$G" $X --opt-level 4
# level 3: Conv -> Relu -> Conv -> Add(residual) -> Relu -> GlobalAveragePool keeps its values blocked
# (the placement log says so; the second Conv takes the Add and Relu, lowering's "residual"; without it
# the Add and Relu are one generated kernel, as --explain says, and two nodes with --disable-pass jit
# too), and gives level 0's output; --disable-pass layout keeps them plain
$PY - "$D" <<'PYEOF'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
rng = np.random.default_rng(5)
w1 = numpy_helper.from_array((rng.standard_normal((16, 8, 3, 3)) * 0.3).astype(np.float32), "w1")
w2 = numpy_helper.from_array((rng.standard_normal((16, 16, 1, 1)) * 0.3).astype(np.float32), "w2")
nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
         helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"),
         helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
         helper.make_node("GlobalAveragePool", ["r2"], ["y"], name="gap")]
g = helper.make_graph(nodes, "lay", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 7, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 1, 1])], [w1, w2])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(d + "/layout.onnx", "wb").write(m.SerializeToString())
x = rng.standard_normal((2, 8, 7, 7)).astype(np.float32)
x[1, 2, 3, 3] = np.nan
np.save(d + "/layout_x.npy", x)
PYEOF
LX="--input x=$D/layout_x.npy --iterations 1"
if "$WEFT" run "$D/layout.onnx" $LX --opt-level 3 --log-device-placement --output-dir "$D/lay3" >"$D/out" 2>"$D/err" &&
    grep -q "conv2: (Conv2D+Add+Relu; blocked in, out)" "$D/err" &&
    grep -q "gap: (GlobalAvgPool; blocked in)" "$D/err" &&
    "$WEFT" run "$D/layout.onnx" $LX --opt-level 3 --disable-pass residual --log-device-placement >"$D/out3" 2>"$D/err3" &&
    grep -q "conv2: (Conv2D; blocked in, out)" "$D/err3" &&
    grep -q "relu2: (FusedElementwise+Add+Relu; blocked in, out)" "$D/err3" &&
    "$WEFT" run "$D/layout.onnx" $LX --explain >"$D/out3" 2>>"$D/err2" &&
    grep -q "conv2: (Conv2D+Add+Relu): " "$D/out3" &&
    "$WEFT" run "$D/layout.onnx" $LX --explain --disable-pass residual >"$D/out3" 2>>"$D/err2" &&
    grep -q "relu2: (FusedElementwise+Add+Relu): .*generated kernel of 2 ops (program [0-9a-f]*), built in" "$D/out3" &&
    "$WEFT" run "$D/layout.onnx" $LX --explain --disable-pass residual --disable-pass jit >"$D/out3" 2>>"$D/err2" &&
    grep -q "residual: (Add): " "$D/out3" && ! grep -q "FusedElementwise" "$D/out3" &&
    "$WEFT" run "$D/layout.onnx" $LX --opt-level 3 --disable-pass layout --log-device-placement >"$D/out2" 2>"$D/err2" &&
    ! grep -q "blocked" "$D/err2" &&
    "$WEFT" run "$D/layout.onnx" $LX --opt-level 0 --output-dir "$D/lay0" >>"$D/out2" 2>>"$D/err2" &&
    $PY -c "
import numpy as np, sys
a, b = np.load('$D/lay3/y.npy'), np.load('$D/lay0/y.npy')
assert a.shape == (2, 16, 1, 1) and np.isnan(a[1]).any() and not np.isnan(a[0]).any(), a
assert np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True), (a, b)
" >"$D/check" 2>&1; then
    ok opt_level_3_layout
else
    bad opt_level_3_layout "$(grep -E 'conv|residual|relu2|gap' "$D/err" | head -8) $(grep -E 'residual|relu2' "$D/out3" 2>/dev/null) $(tail -c 600 "$D/check" 2>/dev/null) $(tail -c 300 "$D/err2")"
fi
# --precision: the amp pass converts the convolutions where CPU:0 computes bf16 natively (weft devices
# --verbose says whether it does), --explain says which and why, the output stays f32 (NaN kept), and
# the largest deviation from the f32 run is printed and small
NATIVE_BF16=0
"$WEFT" devices --verbose 2>/dev/null | grep -q "precision: bf16: " && NATIVE_BF16=1
if "$WEFT" run "$D/layout.onnx" $LX --precision bf16 --explain --output-dir "$D/amp" >"$D/out" 2>"$D/err" &&
    grep -q "^precision (bf16):" "$D/out" && grep -q "^memory: CPU:0 activations [0-9.]* MiB (the plans. arenas), peak in use [0-9.]* MiB" "$D/out" &&
    if [ $NATIVE_BF16 = 1 ]; then
        grep -q "bf16 conv1 (Conv2D): allow list, CPU:0 computes it natively" "$D/out" &&
        grep -q "bf16 residual (Add): infer list" "$D/out" &&
        grep -q "conv1/to_f32\|relu2/to_f32\|/to_f32: (Cast)" "$D/out"
    else
        grep -q "f32  conv1 (Conv2D): allow list, CPU:0 does not compute bf16 natively" "$D/out"
    fi &&
    grep -q "f32  gap (GlobalAvgPool): infer list\|bf16 gap (GlobalAvgPool): infer list" "$D/out" &&
    grep -q "^precision: output y: largest deviation from f32 .*; [0-9]* NaN/Inf differ\|^precision: output y: largest deviation from f32 " "$D/out" &&
    $PY -c "
import re, sys, numpy as np
t = open('$D/out').read()
m = re.search(r'precision: output y: largest deviation from f32 (\S+) .*relative ([0-9.e+-]+)', t)
assert m, t[-400:]
assert 'NaN/Inf differ' not in m.group(0), m.group(0)
assert float(m.group(2)) < 0.05, m.group(0)
a, b = np.load('$D/amp/y.npy'), np.load('$D/lay0/y.npy')
assert a.dtype == np.float32 and np.isnan(a[1]).any() and not np.isnan(a[0]).any(), a
assert np.allclose(a[0], b[0], rtol=0.05, atol=0.05), (a[0], b[0])
" >"$D/check" 2>&1; then
    ok precision_bf16
else
    bad precision_bf16 "$(grep -E 'conv1|residual|gap|precision' "$D/out" | head -8) $(tail -c 600 "$D/check" 2>/dev/null) $(tail -c 300 "$D/err")"
fi
expect_exit precision_bad 2 "weft run: --precision wants f32, bf16 or f16, got 'f64'" -- run "$G" $X --precision f64
expect_exit amp_lists_unknown_op 1 "amp lists: unknown op 'Nope'" -- run "$G" $X --precision bf16 --amp-lists "deny+=Nope"
expect_exit disable_pass_unknown 1 "unknown pass 'nosuch' to disable" "cse, attention, conv_crop, conv_pool, conv_scale, fuse, residual, jit, layout)" -- run "$G" $X --disable-pass nosuch
if "$WEFT" run "$G" $X --iterations 1 --disable-pass fuse --dump-graph "$D/dump" >"$D/out" 2>"$D/err" &&
    [ -s "$D/dump/00-input.txt" ] && [ -s "$D/dump/07-cse.txt" ] && grep -q " = " "$D/dump/07-cse.txt"; then
    ok dump_graph_files
else
    bad dump_graph_files "exit or files: $(ls "$D/dump" 2>&1 | tr '\n' ' ') $(head -c 300 "$D/err")"
fi
# --save-optimized: x -> Identity -> MatMul(w) -> Add(b) -> Mul(1) -> Relu, twice over (CSE's twin): the
# file holds the level-1 graph (no Identity, no Mul by one, one MatMul with its bias), and it runs to
# the same output as the model; level 0 writes the graph as imported; an unwritable path is named
$PY - "$D" <<'PYEOF'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
rng = np.random.default_rng(3)
w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "b")
one = numpy_helper.from_array(np.ones((1,), np.float32), "one")
nodes = [helper.make_node("Identity", ["x"], ["xi"], name="id")]
for k in "pq":
    nodes += [helper.make_node("MatMul", ["xi", "w"], [k + "m"], name=k + "_mm"),
              helper.make_node("Add", [k + "m", "b"], [k + "a"], name=k + "_add"),
              helper.make_node("Mul", [k + "a", "one"], [k + "o"], name=k + "_mul"),
              helper.make_node("Relu", [k + "o"], [k + "r"], name=k + "_relu")]
nodes.append(helper.make_node("Sub", ["pr", "qr"], ["zero"], name="sub"))
nodes.append(helper.make_node("Add", ["pr", "zero"], ["y"], name="out"))
g = helper.make_graph(nodes, "saveopt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w, b, one])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(d + "/saveopt.onnx", "wb").write(m.SerializeToString())
np.save(d + "/saveopt_x.npy", rng.standard_normal((2, 4)).astype(np.float32))
PYEOF
SX="--input x=$D/saveopt_x.npy --iterations 1"
if "$WEFT" run "$D/saveopt.onnx" $SX --save-optimized "$D/saveopt_o2.onnx" --output-dir "$D/so_a" >"$D/out" 2>"$D/err" &&
    "$WEFT" run "$D/saveopt_o2.onnx" $SX --opt-level 0 --output-dir "$D/so_b" >"$D/out2" 2>>"$D/err" &&
    "$WEFT" run "$D/saveopt.onnx" $SX --opt-level 0 --save-optimized "$D/saveopt_o0.onnx" >>"$D/out2" 2>>"$D/err" &&
    $PY - "$D" >"$D/check" 2>&1 <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
d = sys.argv[1]
def ops(p):
    m = onnx.load(p)
    onnx.checker.check_model(m)
    # the export names an output through an Identity where its node has another name: not counted
    named = [n.op_type for n in m.graph.node if not (n.op_type == "Identity" and list(n.output) == ["y"])]
    return named, [o.name for o in m.graph.output], [i.name for i in m.graph.input]
o2, outs, ins = ops(d + "/saveopt_o2.onnx")
o0, _, _ = ops(d + "/saveopt_o0.onnx")
assert outs == ["y"] and ins == ["x"], (outs, ins)
assert "Identity" not in o2 and "Mul" not in o2 and o2.count("MatMul") == 1 and o2.count("Relu") == 1, o2
assert o0.count("MatMul") == 2 and o0.count("Mul") == 2 and "Identity" in o0, o0
x = np.load(d + "/saveopt_x.npy")
wi = {i.name: numpy_helper.to_array(i) for i in onnx.load(d + "/saveopt.onnx").graph.initializer}
want = np.maximum(x @ wi["w"] + wi["b"], 0)
a, b = np.load(d + "/so_a/y.npy"), np.load(d + "/so_b/y.npy")
assert np.allclose(a, want, rtol=1e-5, atol=1e-6) and np.allclose(b, want, rtol=1e-5, atol=1e-6), (a, b, want)
print("ok", o2)
PYEOF
then
    ok save_optimized
else
    cat "$D/check" >>"$D/err"
    bad save_optimized "$(head -c 600 "$D/err")"
fi
expect save_optimized_unwritable 1 "$D/nodir/x.onnx" -- run "$D/saveopt.onnx" $SX --save-optimized "$D/nodir/x.onnx"
expect_exit num_threads_text 2 "weft run: --threads wants an integer from 0 to 1024, got 'abc'" -- run "$G" $X --threads abc
expect_exit num_threads_large 2 "weft run: --threads wants an integer from 0 to 1024, got '100000'" -- run "$G" $X --threads 100000
expect_exit num_inter_threads_large 2 "weft run: --inter-op-threads wants an integer from 0 to 1024, got '2000'" -- \
    run "$G" $X --inter-op-threads 2000
expect_exit num_intra_threads_text 2 "weft run: --intra-op-threads wants an integer from 0 to 1024, got 'two'" -- \
    run "$G" $X --intra-op-threads two
# the time line: median with p10 and p90 over the timed runs, with the two thread counts set apart
if "$WEFT" run "$G" $X --iterations 9 --inter-op-threads 1 --intra-op-threads 2 >"$D/out" 2>"$D/err" &&
    grep -qE '^time: first [0-9.]+ ms, median [0-9.]+ ms over 9 runs \(p10 [0-9.]+ ms, p90 [0-9.]+ ms\)$' "$D/out"; then
    ok run_time_percentiles
else cp "$D/out" "$D/err"; bad run_time_percentiles "no 'time: ... (p10 X ms, p90 Y ms)' line"; fi
expect_exit num_threads_negative 2 "weft run: --threads wants an integer from 0 to 1024, got '-1'" -- run "$G" $X --threads -1
expect_exit num_memory_limit_suffix 2 "weft run: --memory-limit CPU:0=12Q: SIZE wants a number of bytes" "got '12Q'" -- \
    run "$G" $X --memory-limit CPU:0=12Q
expect_exit num_memory_limit_negative 2 "weft run: --memory-limit CPU:0=-1M: SIZE wants" "got '-1M'" -- \
    run "$G" $X --memory-limit CPU:0=-1M
expect_exit num_memory_limit_inf 2 "weft run: --memory-limit CPU:0=inf: SIZE wants" -- run "$G" $X --memory-limit CPU:0=inf
expect_exit num_memory_limit_2p64 2 "weft run: --memory-limit CPU:0=16777216T: SIZE wants" -- \
    run "$G" $X --memory-limit CPU:0=16777216T
expect_exit num_memory_limit_fraction 2 "weft run: --memory-limit CPU:0=0.5: SIZE wants" -- run "$G" $X --memory-limit CPU:0=0.5
expect_exit num_memory_limit_no_spec 2 "weft run: --memory-limit wants SPEC=SIZE" "got '=1M'" -- run "$G" $X --memory-limit =1M
expect_exit demo_epochs_zero 2 "weft demo: --epochs wants a positive integer, got '0'" -- demo --epochs 0
expect_exit demo_epochs_float 2 "weft demo: --epochs wants a positive integer, got '1.5'" -- demo --epochs 1.5
expect_exit demo_epochs_large 2 "weft demo: --epochs wants an integer from 1 to 100000, got '100001'" -- demo --epochs 100001
expect_exit demo_batch_zero 2 "weft demo: --batch wants a positive integer, got '0'" -- demo --batch 0
expect_exit demo_batch_large 2 "weft demo: --batch wants an integer from 1 to 65536, got '65537'" -- demo --batch 65537
expect_exit demo_threads_large 2 "weft demo: --threads wants an integer from 0 to 1024, got '2000'" -- demo --threads 2000
expect_exit demo_time_steps_zero 2 "weft demo: --time-steps wants a positive integer, got '0'" -- demo --time-steps 0
expect_exit demo_time_steps_text 2 "weft demo: --time-steps wants a positive integer, got 'x'" -- demo --time-steps x
expect_exit demo_model_bad 2 "weft demo: --model must be mlp or cnn, not 'rnn'" -- demo --model rnn
expect_exit demo_print_losses_zero 2 "weft demo: --print-losses wants a positive integer, got '0'" -- demo --print-losses 0
for lr in 0 -1 nan inf 1e999 1e-400 abc 0x1p-3 1e-3x ''; do
    expect_exit "demo_lr:'$lr'" 2 "weft demo: --lr wants a positive finite number, got '$lr'" -- demo --lr "$lr"
done
expect_exit demo_seed_negative 2 "weft demo: --seed wants an integer from 0 to 18446744073709551615, got '-1'" -- demo --seed -1
expect_exit demo_seed_2p64 2 "weft demo: --seed wants an integer from 0 to 18446744073709551615, got '18446744073709551616'" -- \
    demo --seed 18446744073709551616
expect_exit demo_seed_text 2 "weft demo: --seed wants an integer from 0 to 18446744073709551615, got '42abc'" -- demo --seed 42abc
# valid values pass through: 3 timed runs, 2 threads, a 1.5M limit and 0 (no limit), an integral lr
if "$WEFT" run "$G" $X --iterations 3 --threads 2 --memory-limit CPU:0=1.5M --memory-limit CPU:0=0 >"$D/out" 2>"$D/err" &&
    grep -q '^time: first .* over 3 runs (p10 ' "$D/out"; then ok num_valid_values
else cat "$D/out" >>"$D/err"; bad num_valid_values "run failed or not 3 runs"; fi
expect_exit demo_valid_numbers_reach_data 1 "$D/nodata/train-images-idx3-ubyte.gz" -- \
    demo --data "$D/nodata" --epochs 2 --batch 65536 --threads 0 --lr 2 --seed 18446744073709551615 --trace ''
# help: each command's own, on stdout, exit 0; it wins over the other arguments
expect_ok help_run "usage: weft run MODEL.onnx" "--iterations N" "1 to 1000000" "0 to 1024" "Exit status: 0 done" -- run --help
expect_ok help_run_short "usage: weft run MODEL.onnx" -- run -h
expect_ok help_run_with_args "usage: weft run MODEL.onnx" -- run "$G" --iterations -1 --help
expect_ok help_inspect "usage: weft inspect MODEL.onnx" "Exit status" -- inspect --help
expect_ok help_inspect_short "usage: weft inspect MODEL.onnx" -- inspect -h
expect_ok help_devices "usage: weft devices" "--match SPEC" "Exit status" -- devices --help
expect_ok help_devices_short "usage: weft devices" -- devices -h
expect_ok help_demo "usage: weft demo" "--epochs N 1 to 100000" "Exit status" -- demo --help
expect_ok help_demo_short "usage: weft demo" -- demo -h
expect_ok help_top "usage: weft COMMAND" "Exit status" -- help
expect_ok help_top_long "usage: weft COMMAND" -- --help
expect_ok help_top_run "usage: weft run MODEL.onnx" -- help run
expect_exit help_unknown_command 2 "weft help: unknown command 'frob'" -- help frob
expect_exit unknown_command 2 "weft: unknown command 'frob' (see 'weft help')" -- frob
# missing values, a second model, unknown options
expect_exit missing_value_input_last 2 "weft run: --input needs a value (NAME=FILE)" -- run "$G" --input
expect_exit missing_value_input_option 2 "weft run: --input needs a value (NAME=FILE)" -- run "$G" --input --random-inputs
expect_exit missing_value_iterations 2 "weft run: --iterations needs a value (N)" -- run "$G" $X --iterations
expect_exit missing_value_output_dir 2 "weft run: --output-dir needs a value (DIR)" -- run "$G" $X --output-dir
expect_exit missing_value_profile 2 "weft run: --profile needs a value (FILE.json)" -- run "$G" $X --profile
expect_exit missing_value_place 2 "weft run: --place needs a value (PATTERN=SPEC)" -- run "$G" $X --place
expect_exit missing_value_match 2 "weft devices: --match needs a value (SPEC)" -- devices --match
expect_exit missing_value_demo_data 2 "weft demo: --data needs a value (DIR)" -- demo --data
expect_exit missing_value_demo_epochs 2 "weft demo: --epochs needs a value (N)" -- demo --epochs --quiet
expect_exit second_model 2 "weft run: one model expected, got 'a.onnx' and 'b.onnx'" -- run a.onnx b.onnx
expect_exit second_model_inspect 2 "weft inspect: one model expected, got 'a.onnx' and 'b.onnx'" -- inspect a.onnx b.onnx
expect_exit no_model 2 "weft run: no model given" -- run $X
expect_exit no_model_inspect 2 "weft inspect: no model given" -- inspect
expect_exit unknown_option_run 2 "weft run: unknown option '--frobnicate' (see 'weft run --help')" -- run "$G" --frobnicate
expect_exit unknown_option_inspect 2 "weft inspect: unknown option '--frobnicate'" -- inspect "$G" --frobnicate
expect_exit unknown_option_devices 2 "weft devices: unknown option '--frobnicate'" -- devices --frobnicate
expect_exit unknown_option_demo 2 "weft demo: unknown option '--frobnicate' (see 'weft demo --help')" -- demo --frobnicate
expect_exit place_no_equals 2 "weft run: --place wants PATTERN=SPEC" "got 'CPU:0'" -- run "$G" $X --place CPU:0
# --input: the form is a usage error, the file a file error, both before the model loads (the model
# path here does not exist, so a message about the input proves the order)
expect_exit input_directory 1 "weft run: --input x: '$D/sub' is not a regular file" -- run "$D/nope.onnx" --input "x=$D/sub"
expect_exit input_missing_early 1 "weft run: --input x: cannot read '$D/none.npy': No such file or directory" -- \
    run "$D/nope.onnx" --input "x=$D/none.npy"
expect_exit input_empty_file_name 2 "weft run: --input wants NAME=FILE, got 'x='" -- run "$G" --input "x="
expect_exit input_empty_name 2 "weft run: --input wants NAME=FILE, got '=$D/x.npy'" -- run "$G" --input "=$D/x.npy"
expect_exit model_directory 1 "$D/sub is a directory without saved_model.onnx (not a weft SavedModel)" -- run "$D/sub" $X
# --output-dir creates its parents; a file in the way is named
rm -rf "$D/od"
if "$WEFT" run "$G" $X --iterations 1 --output-dir "$D/od/a/b/c" >"$D/out" 2>"$D/err" &&
    $PY -c "import numpy as np, sys; sys.exit(0 if np.allclose(np.load(sys.argv[1]), np.load(sys.argv[2])) else 1)" \
        "$D/od/a/b/c/y.npy" "$D/y_ref.npy" 2>>"$D/err"; then ok output_dir_parents
else bad output_dir_parents "no $D/od/a/b/c/y.npy matching numpy"; fi
if "$WEFT" run "$G" $X --iterations 1 --output-dir "$D/od/a/b/c/" >"$D/out" 2>"$D/err"; then ok output_dir_exists_trailing_slash
else bad output_dir_exists_trailing_slash "exit non-zero on an existing folder"; fi
expect_exit output_dir_file_in_way 1 "weft run: --output-dir $D/x.npy/b/c: '$D/x.npy' is not a directory" -- \
    run "$G" $X --output-dir "$D/x.npy/b/c"
# --profile: checked before the run (no output line, no time line), nothing left behind
expect_exit profile_missing_dir 1 "weft run: --profile $D/no/such/p.json: cannot write: No such file or directory" -- \
    run "$G" $X --iterations 1 --profile "$D/no/such/p.json"
expect_exit profile_under_file 1 "weft run: --profile $D/x.npy/p.json: cannot write: Not a directory" -- \
    run "$G" $X --iterations 1 --profile "$D/x.npy/p.json"
expect_exit profile_is_directory 1 "weft run: --profile $D/sub: is a directory" -- run "$G" $X --iterations 1 --profile "$D/sub"
rm -f "$D/p_none.json"
expect_exit profile_probe_leaves_nothing 1 "truncated or corrupt" -- run "$D/truncated.onnx" $X --profile "$D/p_none.json"
if [ -e "$D/p_none.json" ]; then bad profile_probe_removed "$D/p_none.json left behind"; else ok profile_probe_removed; fi
printf 'keep' >"$D/p_keep.json"
expect_exit profile_probe_keeps_file 1 "truncated or corrupt" -- run "$D/truncated.onnx" $X --profile "$D/p_keep.json"
if [ "$(cat "$D/p_keep.json")" = keep ]; then ok profile_existing_untouched; else bad profile_existing_untouched "contents changed"; fi
# demo: the files written after training are checked before the data loads
expect_exit demo_save_bad_path 1 "weft demo: --save $D/no/w.safetensors: cannot write" -- \
    demo --data "$D/nodata" --save "$D/no/w.safetensors"
expect_exit demo_export_bad_path 1 "weft demo: --export-onnx $D/no/m.onnx: cannot write" -- \
    demo --data "$D/nodata" --export-onnx "$D/no/m.onnx"
expect_exit demo_trace_bad_path 1 "weft demo: --trace $D/no/t.json: cannot write" -- demo --data "$D/nodata" --trace "$D/no/t.json"
# A read-only folder stops only non-root users: as root the two cases run as nobody (setpriv,
# util-linux), so they run on CI too.
RO_WEFT=$WEFT
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$D"
    printf '#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups "%s" "$@"\n' "$(readlink -f "$WEFT")" >"$D/weft-nobody"
    chmod 755 "$D/weft-nobody"
    RO_WEFT=$D/weft-nobody
fi
if "$RO_WEFT" version >/dev/null 2>&1; then
    mkdir -p "$D/ro" && chmod 555 "$D/ro"
    SAVED_WEFT=$WEFT WEFT=$RO_WEFT
    expect_exit profile_read_only_dir 1 "weft run: --profile $D/ro/p.json: cannot write: Permission denied" -- \
        run "$G" $X --profile "$D/ro/p.json"
    expect_exit output_dir_read_only 1 "weft run: --output-dir $D/ro/a/b: cannot create '$D/ro/a': Permission denied" -- \
        run "$G" $X --output-dir "$D/ro/a/b"
    WEFT=$SAVED_WEFT
    chmod 755 "$D/ro"
else
    SKIP=$((SKIP + 2))
    echo "SKIP profile_read_only_dir, output_dir_read_only: cannot run weft as an unprivileged user (setpriv)"
fi
# custom-domain ops: once each in inspect's list with the opset the model imports for the domain,
# and the import error quotes that opset (com.example=3, not ai.onnx's 13)
if "$WEFT" inspect "$D/custom.onnx" >"$D/out" 2>"$D/err" &&
    grep -qx 'unsupported ops: com.example.Custom (domain com.example, opset 3), com.example.Relu (domain com.example, opset 3)' "$D/out" &&
    grep -qE '^  com\.example\.Custom +3$' "$D/out" && grep -qE '^  com\.example\.Relu +1$' "$D/out" &&
    grep -qE '^  Relu +1$' "$D/out"; then ok inspect_custom_domain_once
else cp "$D/out" "$D/err"; bad inspect_custom_domain_once "not listed once each with opset 3"; fi
if "$WEFT" inspect "$D/unsupported.onnx" >"$D/out" 2>"$D/err" &&
    grep -qx "unsupported ops: com.example.Custom (domain com.example, not in the model's opset_import), NoSuchOpA" "$D/out"
then ok inspect_custom_domain_not_imported
else cp "$D/out" "$D/err"; bad inspect_custom_domain_not_imported "Custom listed twice or without its domain"; fi
expect_exit run_custom_domain_opset 1 "node 'c1' uses op com.example.Custom (domain 'com.example', opset 3)" \
    "unsupported ops in this model: com.example.Custom, com.example.Relu" -- run "$D/custom.onnx" $X
expect_exit run_custom_domain_not_imported 1 "node 'bad1' uses op NoSuchOpA (domain 'ai.onnx', opset 13)" \
    "unsupported ops in this model: NoSuchOpA, com.example.Custom" -- run "$D/unsupported.onnx" $X
# ==== end of issue 12 ==============================================================================

# ---- hostile file sizes (the file readers' checks): each a one-line error, exit below 128 --------------
$PY - "$D" <<'PYEOF' || bad hostile_files "could not write the files"
import struct, sys, numpy as np, onnx
from onnx import TensorProto, helper
d = sys.argv[1]
def npy(name, header, data=b"", total=None):
    h = header + " " * ((63 - (10 + len(header)) % 64)) + "\n"
    with open(f"{d}/{name}", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
        if total: f.truncate(total)
npy("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 1024, 1024, 1024), }")
npy("commas.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,3), }", bytes(24))
npy("trailing.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(36))
npy("v4.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(24))
with open(f"{d}/v4.npy", "r+b") as f: f.seek(6); f.write(b"\x04")
try:
    npy("sparse.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % ((5 << 40) - 128), total=5 << 40)
except OSError:
    pass
# an ONNX initializer whose external data claims 4 TiB, beside a 16-byte data file
w = TensorProto(name="w", data_type=TensorProto.UINT8, dims=[4 << 40])
w.data_location = TensorProto.EXTERNAL
for k, v in (("location", "big.bin"), ("offset", "0")):
    e = w.external_data.add(); e.key, e.value = k, v
g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 7
open(f"{d}/big_external.onnx", "wb").write(m.SerializeToString())
open(f"{d}/big.bin", "wb").write(bytes(16))
# safetensors written by hand (8-byte header length, JSON, data), whole and cut 5 bytes short
import json
def st(name, tensors, cut=0):
    hdr, data = {}, b""
    for k, a in tensors.items():
        b = a.tobytes()
        hdr[k] = {"dtype": {"float32": "F32", "int64": "I64"}[str(a.dtype)], "shape": list(a.shape),
                  "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    blob = struct.pack("<Q", len(h)) + h + data
    open(f"{d}/{name}", "wb").write(blob[:len(blob) - cut])
st("good.safetensors", {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.array(7, dtype=np.int64)})
st("cut.safetensors", {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, cut=5)
PYEOF
expect npy_4tib 1 "$D/huge.npy" "needs 4398046511104 bytes but 0 follow the header" -- $R "$D/good.onnx" --input "x=$D/huge.npy"
expect npy_shape_commas 1 "$D/commas.npy" "malformed 'shape'" -- $R "$D/good.onnx" --input "x=$D/commas.npy"
expect npy_trailing 1 "$D/trailing.npy" "12 bytes after the data" -- $R "$D/good.onnx" --input "x=$D/trailing.npy"
expect npy_version 1 "$D/v4.npy" "npy format version 4.0 is not supported" -- $R "$D/good.onnx" --input "x=$D/v4.npy"
if [ -f "$D/sparse.npy" ]; then
    expect npy_sparse_5tib 1 "$D/sparse.npy" "more than this machine's memory" -- $R "$D/good.onnx" --input "x=$D/sparse.npy"
else
    SKIP=$((SKIP + 1))
    echo "SKIP npy_sparse_5tib: this filesystem cannot hold a sparse 5 TiB file"
fi
expect_ok inspect_safetensors "w: f32 [2,3], 24 bytes" "step: i64 [], 8 bytes" "2 tensors, 32 bytes" -- \
    inspect "$D/good.safetensors"
expect_ok inspect_npy "$D/x.npy: f32 [" "1 tensor," -- inspect "$D/x.npy"
expect_exit safetensors_truncated 1 "$D/cut.safetensors: tensor 'w': data_offsets [0, 24) run past the end" -- \
    inspect "$D/cut.safetensors"
expect_exit inspect_npy_4tib 1 "$D/huge.npy" "needs 4398046511104 bytes but 0 follow the header" -- inspect "$D/huge.npy"
expect onnx_external_4tib 1 "$D/big_external.onnx" "external data file 'big.bin' holds 16 bytes, fewer than 0 + 4398046511104" -- \
    $R "$D/big_external.onnx"

summary
