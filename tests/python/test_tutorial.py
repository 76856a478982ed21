"""TensorFlow's beginner tutorial (Fashion-MNIST, Flatten -> Dense(128, relu) -> Dense(10), Adam, 5
epochs) as examples/fashion_mnist.py, at most 15 lines, reaches >= 0.87 test accuracy with weft.
(bench/bench_tutorial.py runs the same script under TensorFlow beside it.)"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "fashion_mnist.py"


def test_tutorial_is_short_and_tensorflow_code():
    lines = [l for l in SCRIPT.read_text().splitlines() if l.strip()]
    assert len(lines) <= 15, len(lines)
    assert lines[0].startswith("import weft as tf")
    assert "weft" not in "\n".join(lines[1:])  # the rest is TensorFlow's code, unchanged


def test_tutorial_reaches_087():
    import weft
    try:
        weft.keras.datasets.fashion_mnist.load_data()
    except weft.errors.NotFoundError as e:
        pytest.skip("Fashion-MNIST is not installed here: %s" % e)
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ))
    assert p.returncode == 0, p.stderr[-3000:]
    m = re.search(r"Test accuracy: ([0-9.]+)", p.stdout)
    assert m, p.stdout[-2000:]
    acc = float(m.group(1))
    print("weft tutorial test accuracy:", acc)
    assert acc >= 0.87, p.stdout[-2000:]
