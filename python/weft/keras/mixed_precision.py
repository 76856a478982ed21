"""tf.keras.mixed_precision: Keras's dtype policies over weft's (wf_dtype_policy)."""
import ctypes as C

from .. import errors
from .._lib import lib, check


class Policy:
    """'float32', 'mixed_float16' or 'mixed_bfloat16'. Variables stay float32; layers compute in
    compute_dtype (bf16 runs natively on CPUs with AVX512_BF16/AMX, f16 with dynamic loss scaling)."""

    def __init__(self, name):
        code = C.c_int()
        check(lib.wf_policy_from_name(str(name).encode(), C.byref(code)))
        self.name = str(name)
        self._code = code.value

    @property
    def compute_dtype(self):
        return {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}[self.name]

    @property
    def variable_dtype(self):
        return "float32"

    def __repr__(self):
        return '<Policy "%s">' % self.name


def _policy_code(p):
    return (p if isinstance(p, Policy) else Policy(getattr(p, "name", p)))._code


def set_global_policy(policy):
    """Models built from now on take this policy (a model already built keeps its own)."""
    if policy is None:
        policy = "float32"
    p = policy if isinstance(policy, Policy) else Policy(policy)
    check(lib.wf_set_global_policy(p._code))


def global_policy():
    return Policy(lib.wf_policy_name(lib.wf_global_policy()).decode())


class LossScaleOptimizer:
    def __init__(self, inner_optimizer, dynamic=True, initial_scale=2 ** 15, dynamic_growth_steps=2000):
        if not dynamic:
            raise errors.UnimplementedError(message="a fixed loss scale is not in weft (dynamic is)")
        self.inner_optimizer = inner_optimizer

    def _fill(self, o):
        self.inner_optimizer._fill(o)
