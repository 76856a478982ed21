#!/bin/sh
# `weft run --place`, `--explain`, `--log-device-placement` and `--profile` on a small MLP made here
# with Debian's onnx: a forced MatMul on OPENCL:0 (skipped without one) matches numpy and is copied to
# once per (tensor, device), the Chrome trace is JSON with copy events, a request for a missing GPU
# falls back softly (and says so) or fails under --strict-placement, and a pattern matching nothing
# fails naming it. Usage: tests/cli/test_placement.sh [path/to/weft] (default build/weft).
# Ends with the line "N passed, N failed, N skipped".
T=test_placement
. "$(dirname "$0")/common.sh"

# y = 2 * (relu(x @ w1 + b1) @ w2), sg = sigmoid(x @ w1): x @ w1 is read on two devices when the
# MatMuls are forced away from the CPU, so copies appear in both directions.
$PY - "$D" <<'EOF' || { echo "test_placement: making the model failed"; echo "0 passed, 1 failed"; exit 1; }
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rng = np.random.default_rng(3)
w1 = rng.standard_normal((8, 16)).astype(np.float32)
b1 = rng.standard_normal((16,)).astype(np.float32)
w2 = rng.standard_normal((16, 4)).astype(np.float32)
x = rng.standard_normal((4, 8)).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
         helper.make_node("Add", ["h", "b1"], ["hb"], name="add"),
         helper.make_node("Relu", ["hb"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
         helper.make_node("Sigmoid", ["h"], ["sg"], name="sig"),
         helper.make_node("Add", ["z", "z"], ["y"], name="twice")]
g = helper.make_graph(nodes, "place", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("sg", TensorProto.FLOAT, None)],
                      initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                                   numpy_helper.from_array(w2, "w2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(out + "/mlp.onnx", "wb").write(m.SerializeToString())
np.save(out + "/x.npy", x)
h = x @ w1
z = np.maximum(h + b1, 0) @ w2
np.save(out + "/y_ref.npy", z + z)
np.save(out + "/sg_ref.npy", 1 / (1 + np.exp(-h)))
EOF

sanitizer() { grep -qE 'Sanitizer|runtime error' "$D/err"; }

M="$D/mlp.onnx"
X="--input x=$D/x.npy"
# matches: both outputs saved in $D/o agree with numpy
matches() {
    $PY -c "
import numpy as np, sys
d = sys.argv[1]
for n in ('y', 'sg'):
    a, b = np.load(d + '/o/' + n + '.npy'), np.load(d + '/' + n + '_ref.npy')
    if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5):
        sys.exit(n + ' differs from numpy')
" "$D" 2>>"$D/err"
}

HAVE_OCL=0
"$WEFT" devices --match OPENCL:0 >/dev/null 2>&1 && HAVE_OCL=1
HAVE_GPU=0
"$WEFT" devices --match GPU:0 >/dev/null 2>&1 && HAVE_GPU=1

# --- MatMuls forced onto OPENCL:0 ---------------------------------------------------------------
if [ $HAVE_OCL = 1 ]; then
    rm -rf "$D/o"
    if "$WEFT" run "$M" $X --iterations 1 --place 'op:MatMul=OPENCL:0' --log-device-placement --output-dir "$D/o" \
        >"$D/out" 2>"$D/err" && ! sanitizer && matches; then ok place_opencl_matches_numpy
    else bad place_opencl_matches_numpy "run failed or differs from numpy"; fi
    # the placement log (stderr): both MatMuls on OPENCL:0, copies named X:k/Copy_to_DEV on DEV, one per pair
    grep -E '^(mm1|mm2): \(MatMul' "$D/err" >"$D/mm" 2>/dev/null
    if [ "$(grep -c 'device:OPENCL:0$' "$D/mm")" = 2 ]; then ok place_log_matmul_on_opencl
    else bad place_log_matmul_on_opencl "the MatMuls are not both on OPENCL:0"; fi
    grep ': (Copy): ' "$D/err" >"$D/copies"
    n_copies=$(wc -l <"$D/copies")
    n_pairs=$(sed 's/: (Copy).*//' "$D/copies" | sort -u | wc -l)
    misplaced=$(sed -n 's|^.*/Copy_to_\([A-Z]*:[0-9]*\): (Copy): .*device:\(.*\)$|\1 \2|p' "$D/copies" |
        awk '$1 != $2' | wc -l)
    parsed=$(sed -n 's|^.*/Copy_to_\([A-Z]*:[0-9]*\): (Copy): .*device:\(.*\)$|\1 \2|p' "$D/copies" | wc -l)
    if [ "$n_copies" -ge 2 ] && [ "$n_copies" = "$n_pairs" ] && [ "$parsed" = "$n_copies" ] && [ "$misplaced" = 0 ] &&
        grep -q '^x:0/Copy_to_OPENCL:0: (Copy)' "$D/copies"; then ok place_log_one_copy_per_tensor_and_device
    else bad place_log_one_copy_per_tensor_and_device "$n_copies copy lines, $n_pairs distinct, $misplaced misplaced"; fi
else
    skip place_opencl "no OPENCL:0 (weft devices --match OPENCL:0 finds none)"
fi

# --- --profile: a Chrome trace json.load accepts, an event per node, copies on the copy track -----
PLACE=""
[ $HAVE_OCL = 1 ] && PLACE="--place op:MatMul=OPENCL:0"
rm -f "$D/p.json"
if "$WEFT" run "$M" $X --iterations 2 $PLACE --explain --profile "$D/p.json" >"$D/out" 2>"$D/err" && ! sanitizer &&
    grep -q '^profile: wall' "$D/err" && grep -q '^  CPU:0: .* nodes, busy' "$D/err" &&
    $PY - "$D/p.json" "$D/out" "$HAVE_OCL" <<'EOF' 2>>"$D/err"; then ok profile_chrome_trace
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
names = {e["name"] for e in ev}
nodes = [l.split(": (")[0] for l in open(sys.argv[2]) if ": (" in l]
missing = [n for n in nodes if n not in names]
assert nodes and not missing, "no event for %s" % missing
assert len(ev) == len(nodes), "%d events for %d placed nodes" % (len(ev), len(nodes))
for e in ev:
    assert e["dur"] >= 0 and {"op", "shapes", "bytes", "reason"} <= set(e["args"]), e
copies = [e for e in ev if e["cat"] == "copy"]
tracks = {(m["pid"], m["tid"]): m["args"]["name"] for m in t["traceEvents"] if m["ph"] == "M" and m["name"] == "thread_name"}
for e in copies:
    assert e["args"]["op"] == "Copy" and e["args"]["bytes"] > 0, e
    assert tracks[(e["pid"], e["tid"])].split(" ")[1] == "copy", e
for e in ev:
    if e["cat"] != "copy":
        assert tracks[(e["pid"], e["tid"])].split(" ")[1] == "compute", e
if sys.argv[3] == "1":
    assert copies, "no copy events"
    assert any(e["name"] == "mm1" and e["args"]["shapes"] == "f32[4,16]" for e in ev)
wall = t["otherData"]["wall_us"]
for d in t["otherData"]["devices"]:
    assert 0 <= d["busy_us"] <= wall + 1e-3 and 0 <= d["utilisation"] <= 1, d
    assert d["peak_memory_bytes"] >= 0
EOF
else bad profile_chrome_trace "no trace, invalid JSON or inconsistent"; fi

# the bad trace path is an error naming it
if "$WEFT" run "$M" $X --iterations 1 --profile "$D/no/such/dir/p.json" >"$D/out" 2>"$D/err"; then
    bad profile_bad_path "exit 0"
elif ! sanitizer && grep -q "$D/no/such/dir/p.json" "$D/err"; then ok profile_bad_path
else bad profile_bad_path "no error naming the path"; fi

# --- a request for a GPU there is not: soft placement falls back and says why; strict fails ------
if [ $HAVE_GPU = 0 ]; then
    rm -rf "$D/o"
    if "$WEFT" run "$M" $X --iterations 1 --place '*=/device:GPU:0' --explain --output-dir "$D/o" >"$D/out" 2>"$D/err" &&
        ! sanitizer && matches && grep -q '^mm1: (MatMul): .*# soft placement' "$D/out"; then ok place_gpu_soft
    else cat "$D/out" >>"$D/err"; bad place_gpu_soft "did not run, differs, or --explain does not say soft placement"; fi
    "$WEFT" run "$M" $X --iterations 1 --place '*=/device:GPU:0' --strict-placement >"$D/out" 2>"$D/err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && ! sanitizer && grep -q 'Cannot assign a device for operation' "$D/err"; then
        ok place_gpu_strict
    else bad place_gpu_strict "exit $rc"; fi
else
    skip place_gpu "this machine has a GPU:0"
fi

# --- memory: a model that does not fit in OPENCL:0's limit is placed partly on the CPU -------------
# and a trace of two branches on two devices shows copies overlapping compute
if [ $HAVE_OCL = 1 ]; then
    $PY - "$D" <<'EOF' 2>>"$D/err"
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rng = np.random.default_rng(5)
# mem.onnx: x[8,512] @ w1 (1 MiB) -> relu -> @ w2 (1 MiB); a 1.5 MiB limit holds only one weight
w1 = (rng.standard_normal((512, 512)) * 0.05).astype(np.float32)
w2 = (rng.standard_normal((512, 512)) * 0.05).astype(np.float32)
x = rng.standard_normal((8, 512)).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
g = helper.make_graph(nodes, "mem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 512])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(out + "/mem.onnx", "wb").write(m.SerializeToString())
np.save(out + "/memx.npy", x)
np.save(out + "/memy_ref.npy", np.maximum(x @ w1, 0) @ w2)
# branches.onnx: a long CPU chain (a_0..a_11: 512x512 MatMuls) beside a short branch (b_*) placed on
# OPENCL:0; the short branch's copies in and out happen while the chain computes
a = rng.standard_normal((512, 512)).astype(np.float32) / 23
nodes, prev = [], "x"
for i in range(12):
    nodes.append(helper.make_node("MatMul", [prev, "wa"], ["a%d" % i], name="a_%d" % i))
    prev = "a%d" % i
nodes += [helper.make_node("Tanh", ["x"], ["bt"], name="b_tanh"), helper.make_node("Mul", ["bt", "bt"], ["bm"], name="b_mul"),
          helper.make_node("Add", [prev, "bm"], ["y"], name="join")]
g = helper.make_graph(nodes, "branches", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 512])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      initializer=[numpy_helper.from_array(a, "wa")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
open(out + "/branches.onnx", "wb").write(m.SerializeToString())
xb = rng.standard_normal((512, 512)).astype(np.float32)
np.save(out + "/bx.npy", xb)
r = xb
for i in range(12):
    r = r @ a
np.save(out + "/by_ref.npy", r + np.tanh(xb) ** 2)
EOF
    rm -rf "$D/o"
    if "$WEFT" run "$D/mem.onnx" --input "x=$D/memx.npy" --iterations 1 --place '*=OPENCL:0' --memory-limit OPENCL:0=1.5M \
        --explain --output-dir "$D/o" >"$D/out" 2>"$D/err" && ! sanitizer &&
        grep -q '^mm1: (MatMul): .*device:OPENCL:0' "$D/out" &&
        grep -q '^mm2: (MatMul): .*device:CPU:0 .*OPENCL:0 left out: the plan would pass its memory limit (1.5 MiB)' "$D/out" &&
        $PY -c "import numpy as np, sys; a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); sys.exit(0 if np.allclose(a, b, rtol=1e-4, atol=1e-4) else 'differs')" \
            "$D/o/y.npy" "$D/memy_ref.npy" 2>>"$D/err"; then ok memory_limit_splits_placement
    else cat "$D/out" >>"$D/err"; bad memory_limit_splits_placement "mm2 not moved to the CPU for memory, or wrong result"; fi
    # Whether the two executor threads take the branches at once is up to the scheduler and the load:
    # up to five traced runs, one showing the overlap is enough.
    cat >"$D/overlap.py" <<'EOF'
import json, sys
import numpy as np
assert np.allclose(np.load(sys.argv[2]), np.load(sys.argv[3]), rtol=1e-3, atol=1e-3), "wrong result"
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
copies = [e for e in ev if e["cat"] == "copy"]
compute = [e for e in ev if e["cat"] != "copy" and e["args"]["op"] == "MatMul"]
assert copies and compute, "no copies or no MatMuls in the trace"
def overlap(c, k):
    return c["ts"] < k["ts"] + k["dur"] and k["ts"] < c["ts"] + c["dur"]
assert any(overlap(c, k) for c in copies for k in compute), "no copy overlaps a MatMul"
EOF
    seen=0
    for try in 1 2 3 4 5; do
        rm -rf "$D/o"
        if "$WEFT" run "$D/branches.onnx" --input "x=$D/bx.npy" --iterations 2 --threads 2 --place 'b_*=OPENCL:0' \
            --profile "$D/b.json" --output-dir "$D/o" >"$D/out" 2>"$D/err" && ! sanitizer &&
            $PY "$D/overlap.py" "$D/b.json" "$D/o/y.npy" "$D/by_ref.npy" 2>>"$D/err"; then seen=1; break; fi
    done
    if [ $seen = 1 ]; then ok trace_copy_overlaps_compute
    else bad trace_copy_overlaps_compute "no overlap of a copy with the CPU chain in the trace, or wrong result"; fi
fi

# --- patterns that match nothing -----------------------------------------------------------------
for p in 'nosuch*=CPU:0' 'op:Conv=CPU:0'; do
    pat=${p%=*}
    "$WEFT" run "$M" $X --iterations 1 --place "$p" >"$D/out" 2>"$D/err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && ! sanitizer && grep -qF "pattern '$pat' matches no node" "$D/err"; then
        ok "place_no_match:$pat"
    else bad "place_no_match:$pat" "exit $rc"; fi
done
# the first matching pattern wins: 'mm*' claims the MatMuls before '*' sends everything to the GPU
rm -rf "$D/o"
if "$WEFT" run "$M" $X --iterations 1 --place 'mm*=CPU:0' --place '*=/device:GPU:7' --explain --output-dir "$D/o" \
    >"$D/out" 2>"$D/err" && ! sanitizer && matches && grep -q "^mm1: (MatMul): .*# requested 'CPU:0'" "$D/out" &&
    grep -q "^relu: (Relu): .*GPU:7" "$D/out"; then ok place_first_match_wins
else cat "$D/out" >>"$D/err"; bad place_first_match_wins "mm1 not requested on CPU:0 or relu not on GPU:7"; fi

summary
