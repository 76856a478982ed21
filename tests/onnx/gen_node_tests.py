"""Writes ONNX's backend node tests into OUTDIR in ONNX's own on-disk layout, for tools/conformance.

usage: gen_node_tests.py OUTDIR [--force]      (run with build/venv/bin/python: needs onnx >= 1.16)

onnx wheels no longer ship the test data, only the generators (onnx.backend.test.case.node); this
script runs them and writes, per case:
    OUTDIR/node/<name>/model.onnx
    OUTDIR/node/<name>/test_data_set_<i>/input_<j>.pb, output_<j>.pb   (serialized TensorProto)
    OUTDIR/node/<name>/tolerance.txt     "rtol atol" of the case
    OUTDIR/node/<name>/info.txt          "op DOMAIN OP" per op (subgraphs and functions too) and
                                         "io DTYPE" per input/output dtype, for the runner's categories
    OUTDIR/node/<name>/skip.txt          instead of the data sets, when an input or output is not a
                                         tensor (sequence, map, optional): "non-tensor: ..."
OUTDIR/selftest/ holds copies of a few cases with deliberately wrong expected outputs, to test the
runner itself. OUTDIR/skipped.txt lists the skipped cases. OUTDIR/.stamp records the onnx version and
this script's hash; when both match, nothing is regenerated (collecting the cases takes ~15 s).
"""
import hashlib
import importlib.metadata
import os
import shutil
import sys
import warnings

STAMP_NAME = ".stamp"


def stamp_text():
    with open(os.path.abspath(__file__), "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    return "onnx %s gen %s\n" % (importlib.metadata.version("onnx"), digest)


def value_kind(value_info):
    t = value_info.type
    for kind in ("tensor_type", "sequence_type", "map_type", "optional_type", "sparse_tensor_type"):
        if t.HasField(kind):
            return kind[: -len("_type")]
    return "unknown"


def collect_ops(graph, functions, seen):
    """Every (domain, op) the model can run, including If/Loop/Scan bodies and local functions."""
    from onnx import AttributeProto

    for node in graph.node:
        seen.add((node.domain or "ai.onnx", node.op_type))
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                collect_ops(attr.g, functions, seen)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    collect_ops(g, functions, seen)
    for fn in functions:
        for node in fn.node:
            seen.add((node.domain or "ai.onnx", node.op_type))


def to_proto(value, name):
    """A TensorProto for a data-set value, or None when the value is not a tensor."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        # Cases for dtypes numpy lacks (float8, int4, ...) hand over ready-made protos.
        proto = TensorProto()
        proto.CopyFrom(value)
        proto.name = name
        return proto
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return numpy_helper.from_array(np.asarray(value), name)
    return None


def io_dtype_name(value_info):
    from onnx import helper

    if value_kind(value_info) != "tensor":
        return value_kind(value_info)
    elem = value_info.type.tensor_type.elem_type
    try:
        return helper.tensor_dtype_to_string(elem).replace("TensorProto.", "").lower()
    except Exception:  # an elem_type newer than this onnx knows
        return "type%d" % elem


def write_case(case, case_dir):
    graph = case.model.graph
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    with open(os.path.join(case_dir, "tolerance.txt"), "w") as f:
        f.write("%r %r\n" % (float(case.rtol), float(case.atol)))
    ops = set()
    collect_ops(graph, case.model.functions, ops)
    with open(os.path.join(case_dir, "info.txt"), "w") as f:
        for domain, op in sorted(ops):
            f.write("op %s %s\n" % (domain, op))
        for dt in sorted({io_dtype_name(v) for v in list(graph.input) + list(graph.output)}):
            f.write("io %s\n" % dt)

    non_tensor = ["%s '%s' is of type %s" % (role, v.name, value_kind(v))
                  for role, vals in (("input", graph.input), ("output", graph.output))
                  for v in vals if value_kind(v) != "tensor"]
    data_sets = []
    if not non_tensor:
        for inputs, outputs in case.data_sets:
            protos = []
            for role, values, decl in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, value in enumerate(values):
                    name = decl[j].name if j < len(decl) else "%s_%d" % (role, j)
                    proto = to_proto(value, name)
                    if proto is None:
                        non_tensor.append("%s %d of a data set is a %s" % (role, j, type(value).__name__))
                        break
                    protos.append(("%s_%d.pb" % (role, j), proto))
            data_sets.append(protos)
    if non_tensor:
        reason = "non-tensor: " + "; ".join(non_tensor)
        with open(os.path.join(case_dir, "skip.txt"), "w") as f:
            f.write(reason + "\n")
        return reason
    for i, protos in enumerate(data_sets):
        ds_dir = os.path.join(case_dir, "test_data_set_%d" % i)
        os.makedirs(ds_dir)
        for fname, proto in protos:
            with open(os.path.join(ds_dir, fname), "wb") as f:
                f.write(proto.SerializeToString())
    return None


def write_selftests(node_dir, out_dir):
    """Copies of real cases whose expected outputs were altered, so the runner's comparison is itself
    tested: selftest_pass_* must pass and selftest_fail_* must fail (scripts/conformance.sh --check)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    def altered(base, name, change):
        src = os.path.join(node_dir, base)
        if not os.path.isdir(os.path.join(src, "test_data_set_0")):
            return
        dst = os.path.join(out_dir, name)
        shutil.copytree(src, dst)
        path = os.path.join(dst, "test_data_set_0", "output_0.pb")
        proto = TensorProto()
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
        value = change(numpy_helper.to_array(proto).copy())
        with open(path, "wb") as f:
            f.write(numpy_helper.from_array(value, proto.name).SerializeToString())

    def nudge(factor, at=None):
        def change(a):
            # Relative to the case's rtol (1e-3): within tolerance for factor < 1.
            if at is None:
                return (a * (1 + 1e-3 * factor)).astype(a.dtype)
            a.flat[at] = a.flat[at] * (1 + 1e-3 * factor) + 1e-3 * factor
            return a
        return change

    def set_nan(a):
        a.flat[1] = np.nan
        return a

    def plus_one(a):
        a.flat[-1] += 1
        return a

    altered("test_add", "selftest_pass_within_tolerance", nudge(0.5))
    altered("test_add", "selftest_fail_beyond_tolerance", nudge(10, at=7))
    altered("test_add", "selftest_fail_dtype", lambda a: a.astype(np.float64))
    altered("test_add", "selftest_fail_shape", lambda a: a.reshape(a.shape[0], -1))
    altered("test_add", "selftest_fail_nan_expected", set_nan)
    altered("test_argmax_default_axis_example", "selftest_fail_int64_off_by_one", plus_one)
    altered("test_equal", "selftest_fail_bool_flipped", lambda a: np.logical_not(a))


def main():
    args = [a for a in sys.argv[1:] if a != "--force"]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    stamp = stamp_text()
    stamp_path = os.path.join(out, STAMP_NAME)
    if "--force" not in sys.argv and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read() == stamp:
                print("node tests in %s are up to date (%s)" % (out, stamp.strip()))
                return

    # The generators print numpy overflow warnings while building their expected outputs.
    warnings.filterwarnings("ignore")
    from onnx.backend.test.case.node import collect_testcases

    cases = collect_testcases(None)
    # Build into a fresh folder and swap it in, so an interrupted run never leaves a half-written
    # tree behind a valid stamp.
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "node"))
    skipped = []
    names = set()
    for case in cases:
        if case.kind != "node" or case.name in names:
            continue
        names.add(case.name)
        reason = write_case(case, os.path.join(tmp, "node", case.name))
        if reason:
            skipped.append((case.name, reason))
    write_selftests(os.path.join(tmp, "node"), os.path.join(tmp, "selftest"))
    with open(os.path.join(tmp, "skipped.txt"), "w") as f:
        for name, reason in skipped:
            f.write("%s %s\n" % (name, reason))
    with open(os.path.join(tmp, STAMP_NAME), "w") as f:
        f.write(stamp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print("wrote %d node tests (%d non-tensor, skipped) to %s" % (len(names), len(skipped), out))


if __name__ == "__main__":
    main()
