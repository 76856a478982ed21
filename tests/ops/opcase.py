"""Op test cases checked against numpy.

Each cases_<group>.py module defines `cases(rng)` yielding Case objects. gen_cases.py writes them as
.npy files plus a manifest that tests/test_ops.c reads: the C program builds each node through the
public API, runs it, and compares with the numpy reference computed here at test time.

Manifest grammar (one directive per line, fields separated by single spaces):
    case NAME OP
    attr NAME int V | float V | ints N V... | floats N V... | string V | dtype D | tensor FILE
    input feed FILE [DTYPE]     a Placeholder fed at run time (cast from the file to DTYPE if given)
    input const FILE [DTYPE]    a Const node (needed where shape inference reads the value)
    input none                  an omitted optional input (ONNX-style)
    expect FILE RTOL ATOL       output k (in order); compared in f64, NaN == NaN, exact for ints/bool
    expect_error CODE TEXT      building or running must fail with wf_code name CODE and a message
                                containing TEXT (rest of line)
    end
    skip NAME WHY               cases that could not be generated here (a missing reference package):
                                test_ops prints "SKIP NAME: WHY" and counts them as skipped, not passed
"""
import os
import numpy as np


class Ints(list):
    """An INTS attribute (needed for an empty list)."""


class Floats(list):
    """A FLOATS attribute."""


class DType:
    def __init__(self, name):
        self.name = name


class Case:
    def __init__(self, name, op, inputs, expected=None, attrs=None, const=(), cast=None, rtol=None,
                 atol=None, error=None, feed_dtype=None):
        """inputs: list of np.ndarray or None (omitted optional input).
        expected: list of np.ndarray (one per output) unless error=(CODE, TEXT).
        const: indices of inputs that become Const nodes (others are Placeholders).
        feed_dtype: {input index: 'bf16'} to convert an f32 file to bf16 in the C driver.
        rtol/atol default by the first expected array's dtype."""
        self.name, self.op, self.inputs = name, op, inputs
        self.expected = expected or []
        self.attrs = attrs or {}
        self.const = set(const)
        self.feed_dtype = feed_dtype or {}
        self.error = error
        self.rtol, self.atol = rtol, atol


class Skipped:
    """Cases that could not be generated (their reference is missing): reported, never passed."""

    def __init__(self, name, why):
        self.name, self.why = name, why


DEFAULT_TOL = {
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-14),
    np.dtype(np.float16): (2e-3, 1e-4),
}


def _fmt_float(v):
    return repr(float(v))


def write_manifest(cases, outdir):
    os.makedirs(outdir, exist_ok=True)
    lines = []
    names = set()
    for c in cases:
        if isinstance(c, Skipped):
            lines.append("skip %s %s" % (c.name, c.why.replace("\n", " ")))
            continue
        assert c.name not in names, "duplicate case name " + c.name
        assert " " not in c.name
        names.add(c.name)
        lines.append("case %s %s" % (c.name, c.op))
        for k, v in c.attrs.items():
            if isinstance(v, DType):
                lines.append("attr %s dtype %s" % (k, v.name))
            elif isinstance(v, bool) or isinstance(v, (int, np.integer)):
                lines.append("attr %s int %d" % (k, int(v)))
            elif isinstance(v, (float, np.floating)):
                lines.append("attr %s float %s" % (k, _fmt_float(v)))
            elif isinstance(v, Floats) or (isinstance(v, (list, tuple)) and v and
                                           all(isinstance(x, (float, np.floating)) for x in v)):
                lines.append("attr %s floats %d %s" % (k, len(v), " ".join(_fmt_float(x) for x in v)))
            elif isinstance(v, (Ints, list, tuple)):
                lines.append(("attr %s ints %d %s" % (k, len(v), " ".join(str(int(x)) for x in v))).rstrip())
            elif isinstance(v, str):
                assert " " not in v
                lines.append("attr %s string %s" % (k, v))
            elif isinstance(v, np.ndarray):
                f = "%s.attr_%s.npy" % (c.name, k)
                np.save(os.path.join(outdir, f), v)
                lines.append("attr %s tensor %s" % (k, f))
            else:
                raise TypeError("attr %s of %s: %r" % (k, c.name, v))
        for i, x in enumerate(c.inputs):
            if x is None:
                lines.append("input none")
                continue
            f = "%s.in%d.npy" % (c.name, i)
            np.save(os.path.join(outdir, f), np.array(x, order="C"))  # ascontiguousarray would make rank 0 into rank 1
            kind = "const" if i in c.const else "feed"
            extra = (" " + c.feed_dtype[i]) if i in c.feed_dtype else ""
            lines.append("input %s %s%s" % (kind, f, extra))
        if c.error:
            lines.append("expect_error %s %s" % c.error)
        for k, e in enumerate(c.expected):
            e = np.asarray(e)
            f = "%s.out%d.npy" % (c.name, k)
            np.save(os.path.join(outdir, f), np.array(e, order="C"))
            rt, at = DEFAULT_TOL.get(e.dtype, (0.0, 0.0))
            if c.rtol is not None:
                rt = c.rtol
            if c.atol is not None:
                at = c.atol
            lines.append("expect %s %s %s" % (f, _fmt_float(rt), _fmt_float(at)))
        lines.append("end")
    with open(os.path.join(outdir, "manifest.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return len(cases)
