#!/bin/sh
# `weft run` and `weft inspect` on bad input: each case must exit non-zero (never by a signal), print
# one error line that names the file and the problem, and nothing from a sanitizer. One good run is
# checked against numpy. Usage: tests/cli/test_cli.sh [path/to/weft] (default build/weft).
# The models come from tests/onnx/make_bad_models.py. Ends with the line "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
WEFT=${1:-build/weft}
PY=/usr/bin/python3
PASS=0
FAIL=0
D=$(mktemp -d "${TMPDIR:-/tmp}/weft-cli-XXXXXX")
trap 'rm -rf "$D"' EXIT

if [ ! -x "$WEFT" ]; then echo "test_cli: $WEFT not found"; echo "0 passed, 1 failed"; exit 1; fi
$PY tests/onnx/make_bad_models.py "$D" || { echo "test_cli: make_bad_models.py failed"; echo "0 passed, 1 failed"; exit 1; }

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; sed 's/^/       | /' "$D/err" | head -20; }

# expect NAME LINES TEXT... -- weft ARGS: non-zero exit below 128, no sanitizer report, the first stderr
# line holds every TEXT; LINES: 1 = stderr is that one line, any = more may follow (lists of inputs).
expect() {
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
    else
        bad demo_one_epoch "exit non-zero"
    fi
else
    echo "skip demo_one_epoch: no Fashion-MNIST"
fi

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
PYEOF
expect npy_4tib 1 "$D/huge.npy" "needs 4398046511104 bytes but 0 follow the header" -- $R "$D/good.onnx" --input "x=$D/huge.npy"
expect npy_shape_commas 1 "$D/commas.npy" "malformed 'shape'" -- $R "$D/good.onnx" --input "x=$D/commas.npy"
expect npy_trailing 1 "$D/trailing.npy" "12 bytes after the data" -- $R "$D/good.onnx" --input "x=$D/trailing.npy"
expect npy_version 1 "$D/v4.npy" "npy format version 4.0 is not supported" -- $R "$D/good.onnx" --input "x=$D/v4.npy"
if [ -f "$D/sparse.npy" ]; then
    expect npy_sparse_5tib 1 "$D/sparse.npy" "more than this machine's memory" -- $R "$D/good.onnx" --input "x=$D/sparse.npy"
else
    echo "SKIP npy_sparse_5tib: this filesystem cannot hold a sparse 5 TiB file"
fi
expect onnx_external_4tib 1 "$D/big_external.onnx" "external data file 'big.bin' holds 16 bytes, fewer than 0 + 4398046511104" -- \
    $R "$D/big_external.onnx"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
