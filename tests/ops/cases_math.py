"""Cases for the ops of src/graph/ops_math.c: trigonometric and hyperbolic functions, IsNaN/IsInf, the
extra activations, Shrink, PRelu, bitwise ops, Hardmax, LpNormalization, variadic Sum/Mean/Max/Min and
Det, each against numpy (float64, then rounded to the output dtype) following the ONNX definitions.

bf16 inputs are f32 arrays holding bf16-representable values, fed as bf16; their reference stays f32
with a bf16-sized tolerance.
"""
import numpy as np

from cases_elementwise import (BF16_TOL, FLOATS, INTS, NP, NUMERIC, SINTS, bf16_round, err, f64, mk,
                               out_like, rand)

BIG = (256, 260)        # 66,560 elements: just past the cheap ops' parallel threshold (2 x 32K)
BIG_HEAVY = (100, 200)  # 20,000 elements: past the transcendental threshold (2 x 4K)

SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def bf(dt, *idx):
    return idx if dt == 'bf16' else ()


# ---- references (float64, from the ONNX operator definitions) -----------------------------------

def _softplus(x):
    return np.logaddexp(0.0, x)


def _celu(x, alpha=1.0):
    return np.maximum(0.0, x) + np.minimum(0.0, alpha * np.expm1(x / alpha))


UNARY = {
    # op: (reference on float64, input range, heavy, attrs)
    'Sin': (np.sin, (-10, 10), True, {}),
    'Cos': (np.cos, (-10, 10), True, {}),
    'Tan': (np.tan, (-1.4, 1.4), True, {}),
    'Asin': (np.arcsin, (-0.99, 0.99), True, {}),
    'Acos': (np.arccos, (-0.99, 0.99), True, {}),
    'Atan': (np.arctan, (-10, 10), True, {}),
    'Sinh': (np.sinh, (-8, 8), True, {}),
    'Cosh': (np.cosh, (-8, 8), True, {}),
    'Asinh': (np.arcsinh, (-10, 10), True, {}),
    'Acosh': (np.arccosh, (1, 10), True, {}),
    'Atanh': (np.arctanh, (-0.95, 0.95), True, {}),
    'HardSigmoid': (lambda x: np.maximum(0.0, np.minimum(1.0, 0.2 * x + 0.5)), (-5, 5), False, {}),
    'HardSwish': (lambda x: x * np.maximum(0.0, np.minimum(1.0, x / 6.0 + 0.5)), (-5, 5), False, {}),
    'Selu': (lambda x: np.where(x > 0, SELU_GAMMA * x, SELU_GAMMA * SELU_ALPHA * np.expm1(x)), (-5, 5), True, {}),
    'Celu': (_celu, (-5, 5), True, {}),
    'Mish': (lambda x: x * np.tanh(_softplus(x)), (-8, 8), True, {}),
    'Softsign': (lambda x: x / (1.0 + np.abs(x)), (-5, 5), False, {}),
    'ThresholdedRelu': (lambda x: np.where(x > 1.0, x, 0.0), (-3, 3), False, {}),
    'Shrink': (lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0.0)), (-2, 2), False, {}),
    'Swish': (lambda x: x / (1.0 + np.exp(-x)), (-8, 8), True, {}),
}

EDGES = {
    'Sin': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, 1e4, -3.14159265],
    'Cos': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e4],
    'Tan': [np.nan, np.inf, 0.0, -0.0, 1.5],
    'Asin': [np.nan, 1.0, -1.0, 1.5, -2.0, 0.0, -0.0],
    'Acos': [np.nan, 1.0, -1.0, 1.5, -2.0, 0.0],
    'Atan': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30],
    'Sinh': [np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 1e-8],
    'Cosh': [np.nan, np.inf, -np.inf, 0.0, 100.0, -100.0],
    'Asinh': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e20, -1e20],
    'Acosh': [np.nan, np.inf, 1.0, 0.5, -1.0, 1e20],
    'Atanh': [np.nan, 1.0, -1.0, 2.0, 0.0, -0.0],
    'HardSigmoid': [np.nan, np.inf, -np.inf, -2.5, 2.5, 0.0],
    'HardSwish': [np.nan, np.inf, -np.inf, -3.0, 3.0, 0.0, -0.0],
    'Selu': [np.nan, np.inf, -np.inf, 0.0, -0.0, -1e-7, -100.0, 100.0],
    'Celu': [np.nan, np.inf, -np.inf, 0.0, -1e-7, -100.0, 100.0],
    'Mish': [np.nan, np.inf, -np.inf, 0.0, -100.0, 100.0, 20.0, -20.0],
    'Softsign': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30],
    'ThresholdedRelu': [np.nan, np.inf, -np.inf, 1.0, 1.0000001, 0.0],
    'Shrink': [np.nan, np.inf, -np.inf, 0.5, -0.5, 0.50001, -0.50001],
    'Swish': [np.nan, np.inf, -np.inf, 0.0, -0.0, -100.0, 100.0, -1000.0],
}


def _signed(v):
    return np.concatenate([v, -v]).astype(np.float32)


_SC = _signed(np.concatenate([np.linspace(0, 30, 20001), np.logspace(-40, 7, 20001),
                              np.linspace(524280, 524296, 65), [np.pi, 2 * np.pi, 1e4 * np.pi]]))
TRIG_SWEEP = {
    'Sin': _SC,
    'Cos': _SC,
    'Atan': _signed(np.concatenate([np.linspace(0, 50, 20001), np.logspace(-40, 38, 20001)])),
    'Asin': _signed(np.concatenate([np.linspace(0, 1, 20001), np.logspace(-40, 0, 2001)])),
    'Acos': _signed(np.concatenate([np.linspace(0, 1, 20001), np.logspace(-40, 0, 2001)])),
}


def unary_cases(rng):
    for op, (ref, (lo, hi), heavy, attrs) in UNARY.items():
        name = op.lower()
        with np.errstate(all='ignore'):
            for dt in FLOATS:
                x = rand(rng, (3, 4, 5), dt, lo, hi)
                yield mk('%s_%s' % (name, dt), op, [x], [out_like(ref(f64(x)), dt)], dt, attrs=attrs,
                         bf16_in=bf(dt, 0))
            x = rand(rng, (), 'f32', lo, hi)
            yield mk('%s_rank0' % name, op, [x], [out_like(ref(f64(x)), 'f32')], attrs=attrs)
            x = rand(rng, (2, 0, 3), 'f32', lo, hi)
            yield mk('%s_empty' % name, op, [x], [out_like(ref(f64(x)), 'f32')], attrs=attrs)
            x = rand(rng, BIG_HEAVY if heavy else BIG, 'f32', lo, hi)
            yield mk('%s_large' % name, op, [x], [out_like(ref(f64(x)), 'f32')], attrs=attrs)
            x = rand(rng, BIG_HEAVY, 'f16', lo, hi)
            yield mk('%s_large_f16' % name, op, [x], [out_like(ref(f64(x)), 'f16')], attrs=attrs)
            for dt in ('f32', 'f64'):
                x = np.array(EDGES[op], NP[dt])
                yield mk('%s_edges_%s' % (name, dt), op, [x], [out_like(ref(f64(x)), dt)], attrs=attrs)
        # the f32 vector forms (k_vmath.h: Cephes' polynomials, Sin/Cos reduced in double up to |x| = 2^19 and
        # libm past it) swept densely and across the whole range at 4 ulp; measured worst over every 97th f32:
        # Sin/Cos 1.56 ulp, Atan 2.82, Asin 2.40, Acos 1.28
        if op in TRIG_SWEEP:
            yield mk('%s_sweep' % name, op, [TRIG_SWEEP[op]], [out_like(ref(f64(TRIG_SWEEP[op])), 'f32')],
                     rtol=4.8e-7, atol=1e-45)
        if op != 'Shrink':
            yield err('%s_err_int' % name, op, [rand(rng, (2,), 'i32')], 'INVALID_ARGUMENT', 'floating-point')
        yield err('%s_err_bool' % name, op, [rand(rng, (2,), 'bool')], 'INVALID_ARGUMENT', 'is defined for')

    # attributes
    x = rand(rng, (4, 6), 'f32', -5, 5)
    yield mk('hardsigmoid_attrs', 'HardSigmoid', [x],
             [out_like(np.clip(0.3 * f64(x) - 0.1, 0, 1), 'f32')], attrs={'alpha': 0.3, 'beta': -0.1})
    yield mk('selu_attrs', 'Selu', [x], [out_like(np.where(x > 0, 1.5 * f64(x), 1.5 * 2.0 * np.expm1(f64(x))), 'f32')],
             attrs={'alpha': 2.0, 'gamma': 1.5})
    for a in (0.5, 2.0, -1.5):
        yield mk('celu_alpha_%s' % str(a).replace('.', 'p').replace('-', 'm'), 'Celu', [x],
                 [out_like(_celu(f64(x), a), 'f32')], attrs={'alpha': a})
    yield mk('thresholdedrelu_alpha', 'ThresholdedRelu', [x], [out_like(np.where(x > -0.5, f64(x), 0.0), 'f32')],
             attrs={'alpha': -0.5})
    for a in (0.5, 1.702, -1.0):
        yield mk('swish_alpha_%s' % str(a).replace('.', 'p').replace('-', 'm'), 'Swish', [x],
                 [out_like(f64(x) / (1.0 + np.exp(-a * f64(x))), 'f32')], attrs={'alpha': a})
    # the negative tail, where x * sigmoid(x) is below 1e-38 and then rounds to 0 (not flushed early), and a
    # sweep at 4 ulp; the kernel is also the fused Conv2D+Swish's pass. With alpha != 1 the reference takes
    # alpha * x rounded to f32, as the kernel does: exp(t) turns t's rounding (2^-24 relative) into 5e-6
    # relative error at t = -88, which is the input's, not the kernel's.
    xt = np.linspace(-104, 20, 40001, dtype=np.float32)
    for a in (1.0, 1.702):
        t = f64(np.float32(a) * xt)
        yield mk('swish_tail_%s' % str(a).replace('.', 'p'), 'Swish', [xt],
                 [out_like(f64(xt) / (1.0 + np.exp(-t)), 'f32')], attrs={'alpha': a}, rtol=4.8e-7, atol=2e-43)
    xs = rand(rng, (5, 7), 'f64', -3, 3)
    yield mk('shrink_attrs_f64', 'Shrink', [xs],
             [np.where(xs < -1.5, xs + 0.25, np.where(xs > 1.5, xs - 0.25, 0.0))], attrs={'lambd': 1.5, 'bias': 0.25})
    yield err('celu_err_alpha0', 'Celu', [x], 'INVALID_ARGUMENT', "'alpha' must not be 0", attrs={'alpha': 0.0})


def shrink_int_cases(rng):
    # ONNX's reference computes x +- bias in floating point and casts back with .astype (truncation)
    for dt in INTS:
        lo, hi = (0, 100) if dt == 'u8' else (-100, 100)
        x = rand(rng, (4, 9), dt, lo, hi)
        for lambd, bias in ((0.5, 0.0), (10.0, 3.0), (20.5, 2.5)):
            want = np.where(f64(x) < -lambd, f64(x) + bias, np.where(f64(x) > lambd, f64(x) - bias, 0.0))
            yield mk('shrink_%s_l%s_b%s' % (dt, str(lambd).replace('.', 'p'), str(bias).replace('.', 'p')),
                     'Shrink', [x], [np.trunc(want).astype(NP[dt])], attrs={'lambd': lambd, 'bias': bias})
    big = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 2 ** 60 + 1, -(2 ** 60) - 1, 0], np.int64)
    yield mk('shrink_i64_exact', 'Shrink', [big], [np.where(big == 0, 0, big).astype(np.int64)])
    x = rand(rng, BIG, 'i32', -1000, 1000)
    yield mk('shrink_large_i32', 'Shrink', [x], [np.where(np.abs(x) > 3, x, 0).astype(np.int32)], attrs={'lambd': 3.0})


def isnan_isinf_cases(rng):
    sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 65504.0, 1e-30]
    for dt in FLOATS:
        x = np.array(sp, np.float32 if dt == 'bf16' else NP[dt])
        if dt == 'bf16':
            x = bf16_round(x)
        yield mk('isnan_%s' % dt, 'IsNaN', [x], [np.isnan(x)], bf16_in=bf(dt, 0))
        for neg in (0, 1):
            for pos in (0, 1):
                want = (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))
                yield mk('isinf_%s_n%d_p%d' % (dt, neg, pos), 'IsInf', [x], [want],
                         attrs={'detect_negative': neg, 'detect_positive': pos}, bf16_in=bf(dt, 0))
    x = np.array(np.inf, np.float32)
    yield mk('isinf_rank0', 'IsInf', [x], [np.isinf(x)])
    yield mk('isnan_rank0', 'IsNaN', [np.array(np.nan)], [np.array(True)])
    yield mk('isnan_empty', 'IsNaN', [np.zeros((0, 3), np.float32)], [np.zeros((0, 3), np.bool_)])
    x = rand(rng, BIG, 'f32')
    x[rng.random(BIG) < 0.1] = np.nan
    x[rng.random(BIG) < 0.1] = np.inf
    x[rng.random(BIG) < 0.1] = -np.inf
    yield mk('isnan_large', 'IsNaN', [x], [np.isnan(x)])
    yield mk('isinf_large', 'IsInf', [x], [np.isinf(x)])
    yield mk('isinf_large_f16', 'IsInf', [x.astype(np.float16)], [np.isneginf(x)], attrs={'detect_positive': 0})
    yield err('isnan_err_int', 'IsNaN', [rand(rng, (2,), 'i32')], 'INVALID_ARGUMENT', 'floating-point')
    yield err('isinf_err_int', 'IsInf', [rand(rng, (2,), 'i64')], 'INVALID_ARGUMENT', 'floating-point')
    yield err('isinf_err_attr', 'IsInf', [rand(rng, (2,), 'f32')], 'INVALID_ARGUMENT',
              "'detect_negative' must be 0 or 1", attrs={'detect_negative': 2})


# ---- PRelu ------------------------------------------------------------------------------------------

def _prelu(x, s):
    if x.dtype.kind in 'iu':
        return np.where(x > 0, x, x * s)
    return np.where(f64(x) > 0, f64(x), f64(x) * f64(s))


def prelu_cases(rng):
    for dt in NUMERIC:
        lo = 0 if dt == 'u8' else -9
        x = rand(rng, (2, 3, 4, 5), dt, lo, 9)
        s = rand(rng, (3, 1, 1), dt, lo, 3)
        yield mk('prelu_%s' % dt, 'PRelu', [x, s], [out_like(_prelu(x, s), dt)], dt, bf16_in=bf(dt, 0, 1))
    x = rand(rng, (3, 4), 'f32')
    for name, shape in (('same', (3, 4)), ('row', (4,)), ('col', (3, 1)), ('scalar', ()), ('one', (1,))):
        s = rand(rng, shape, 'f32', 0, 1)
        yield mk('prelu_slope_%s' % name, 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    s = np.array([0.25], np.float32)
    yield mk('prelu_const_slope', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')], const=(1,))
    x, s = rand(rng, (), 'f32'), np.array(0.1, np.float32)
    yield mk('prelu_rank0', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x, s = rand(rng, (0, 4), 'f32'), rand(rng, (4,), 'f32')
    yield mk('prelu_empty', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -1.0], np.float32)
    s = np.array(0.5, np.float32)
    yield mk('prelu_special', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x, s = rand(rng, (4, 65, 300), 'f32'), rand(rng, (65, 1), 'f32', 0, 1)
    yield mk('prelu_large_channel', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x, s = rand(rng, BIG, 'f32'), rand(rng, (BIG[1],), 'f32', 0, 1)
    yield mk('prelu_large_rows', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x, s = rand(rng, BIG, 'f32'), np.array(0.2, np.float32)
    yield mk('prelu_large_scalar', 'PRelu', [x, s], [out_like(_prelu(x, s), 'f32')])
    x, s = rand(rng, (5, 7), 'i64', -2 ** 40, 2 ** 40), rand(rng, (7,), 'i64', -2 ** 30, 2 ** 30)
    yield mk('prelu_i64_wrap', 'PRelu', [x, s], [_prelu(x, s)])
    yield err('prelu_err_not_unidirectional', 'PRelu', [rand(rng, (3, 1), 'f32'), rand(rng, (3, 4), 'f32')],
              'INVALID_ARGUMENT', 'slope of shape [3,4] does not broadcast to X of shape [3,1]')
    yield err('prelu_err_rank', 'PRelu', [rand(rng, (4,), 'f32'), rand(rng, (1, 4), 'f32')],
              'INVALID_ARGUMENT', 'does not broadcast to X')
    yield err('prelu_err_dtypes', 'PRelu', [rand(rng, (4,), 'f32'), rand(rng, (4,), 'f64')],
              'INVALID_ARGUMENT', 'input dtypes differ: f32 and f64')
    yield err('prelu_err_bool', 'PRelu', [rand(rng, (4,), 'bool'), rand(rng, (4,), 'bool')],
              'INVALID_ARGUMENT', 'numeric')


# ---- bitwise ----------------------------------------------------------------------------------------

def _bitshift(a, b, direction):
    """ONNX BitShift (opset 28): logical for unsigned, arithmetic right shift for signed; an amount < 0
    or >= the width leaves the sign fill (-1 for a right shift of a negative value, else 0)."""
    a, b = np.broadcast_arrays(a, b)
    bits = a.dtype.itemsize * 8
    oor = (b < 0) | (b >= bits)
    amt = np.where(oor, 0, b)
    u = np.dtype('u%d' % a.dtype.itemsize)
    if direction == 'RIGHT':
        r = np.right_shift(a, amt.astype(a.dtype))
        fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == 'i' else np.zeros_like(a)
    else:
        r = np.left_shift(np.array(a, order='C').view(u), amt.astype(u)).view(a.dtype)
        fill = np.zeros_like(a)
    return np.where(oor, fill, r).astype(a.dtype)


BITWISE = {'BitwiseAnd': np.bitwise_and, 'BitwiseOr': np.bitwise_or, 'BitwiseXor': np.bitwise_xor}


def _full(rng, shape, dt):
    info = np.iinfo(NP[dt])
    return rand(rng, shape, dt, info.min, info.max)


def bitwise_cases(rng):
    for op, fn in BITWISE.items():
        lo = op.lower()
        for dt in INTS:
            a, b = _full(rng, (4, 1, 5), dt), _full(rng, (3, 1), dt)
            yield mk('%s_%s' % (lo, dt), op, [a, b], [fn(a, b)])
        a, b = _full(rng, (), 'i32'), _full(rng, (), 'i32')
        yield mk('%s_rank0' % lo, op, [a, b], [fn(a, b)])
        a, b = _full(rng, (6, 7), 'i16'), _full(rng, (), 'i16')
        yield mk('%s_scalar' % lo, op, [a, b], [fn(a, b)])
        a, b = _full(rng, (0, 3), 'u8'), _full(rng, (3,), 'u8')
        yield mk('%s_empty' % lo, op, [a, b], [fn(a, b)])
        a, b = _full(rng, BIG, 'i32'), _full(rng, (BIG[1],), 'i32')
        yield mk('%s_large' % lo, op, [a, b], [fn(a, b)])
        yield err('%s_err_float' % lo, op, [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32')], 'INVALID_ARGUMENT',
                  'integer')
        yield err('%s_err_bool' % lo, op, [rand(rng, (2,), 'bool'), rand(rng, (2,), 'bool')], 'INVALID_ARGUMENT',
                  'integer')
        yield err('%s_err_dtypes' % lo, op, [_full(rng, (2,), 'i32'), _full(rng, (2,), 'i64')], 'INVALID_ARGUMENT',
                  'input dtypes differ: i32 and i64')
        yield err('%s_err_shapes' % lo, op, [_full(rng, (2, 3), 'i32'), _full(rng, (4,), 'i32')], 'INVALID_ARGUMENT',
                  'cannot be broadcast')
    for dt in INTS:
        a = _full(rng, (3, 4, 5), dt)
        yield mk('bitwisenot_%s' % dt, 'BitwiseNot', [a], [np.invert(a)])
    a = _full(rng, (), 'i64')
    yield mk('bitwisenot_rank0', 'BitwiseNot', [a], [np.invert(a)])
    yield mk('bitwisenot_empty', 'BitwiseNot', [np.zeros((2, 0), np.int8)], [np.zeros((2, 0), np.int8)])
    a = _full(rng, BIG, 'i16')
    yield mk('bitwisenot_large', 'BitwiseNot', [a], [np.invert(a)])
    yield err('bitwisenot_err_float', 'BitwiseNot', [rand(rng, (2,), 'f64')], 'INVALID_ARGUMENT', 'integer')
    yield err('bitwisenot_err_bool', 'BitwiseNot', [rand(rng, (2,), 'bool')], 'INVALID_ARGUMENT', 'integer')

    for direction in ('LEFT', 'RIGHT'):
        d = direction.lower()
        for dt in INTS:
            bits = np.dtype(NP[dt]).itemsize * 8
            a = _full(rng, (4, 1, 6), dt)
            b = rand(rng, (3, 1), dt, 0 if dt == 'u8' else -2, bits + 2)
            yield mk('bitshift_%s_%s' % (d, dt), 'BitShift', [a, b], [_bitshift(a, b, direction)],
                     attrs={'direction': direction})
            # every amount from below 0 to past the width against a few values incl. MIN and -1
            vals = np.array([1, 5, -1, np.iinfo(NP[dt]).min, np.iinfo(NP[dt]).max], NP[dt]) if dt != 'u8' else \
                np.array([1, 5, 255, 128, 127], np.uint8)
            amts = np.arange(0 if dt == 'u8' else -2, bits + 3).astype(NP[dt])
            a, b = vals[:, None], amts[None, :]
            yield mk('bitshift_%s_%s_amounts' % (d, dt), 'BitShift', [a, b], [_bitshift(a, b, direction)],
                     attrs={'direction': direction})
        a, b = np.array(12, np.uint8), np.array(2, np.uint8)
        yield mk('bitshift_%s_rank0' % d, 'BitShift', [a, b], [_bitshift(a, b, direction)],
                 attrs={'direction': direction})
        a, b = _full(rng, (0, 2), 'i32'), np.array([1, 2], np.int32)
        yield mk('bitshift_%s_empty' % d, 'BitShift', [a, b], [_bitshift(a, b, direction)],
                 attrs={'direction': direction})
        a, b = _full(rng, BIG, 'i32'), rand(rng, (BIG[1],), 'i32', -1, 33)
        yield mk('bitshift_%s_large' % d, 'BitShift', [a, b], [_bitshift(a, b, direction)],
                 attrs={'direction': direction})
    # the ONNX spec's examples
    yield mk('bitshift_onnx_right', 'BitShift', [np.array([16, 4, 1], np.uint8), np.array([1, 2, 3], np.uint8)],
             [np.array([8, 1, 0], np.uint8)], attrs={'direction': 'RIGHT'})
    yield mk('bitshift_onnx_left', 'BitShift', [np.array([16, 4, 1], np.uint8), np.array([1, 2, 3], np.uint8)],
             [np.array([32, 16, 8], np.uint8)], attrs={'direction': 'LEFT'})
    yield err('bitshift_err_direction', 'BitShift', [_full(rng, (2,), 'u8'), _full(rng, (2,), 'u8')],
              'INVALID_ARGUMENT', "'direction' must be \"LEFT\" or \"RIGHT\", got \"UP\"", attrs={'direction': 'UP'})
    yield err('bitshift_err_no_direction', 'BitShift', [_full(rng, (2,), 'u8'), _full(rng, (2,), 'u8')],
              'INVALID_ARGUMENT', "missing required attribute 'direction'")
    yield err('bitshift_err_float', 'BitShift', [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32')],
              'INVALID_ARGUMENT', 'integer', attrs={'direction': 'LEFT'})


# ---- Sum, Mean, Max, Min ----------------------------------------------------------------------------

def _fold(fn, xs):
    acc = xs[0] if xs[0].dtype.kind in 'iu' else f64(xs[0])
    for x in xs[1:]:
        acc = fn(acc, x if x.dtype.kind in 'iu' else f64(x))
    return np.broadcast_to(acc, np.broadcast(*xs).shape) if len(xs) > 1 else acc


VARIADIC = {
    'Sum': (FLOATS, lambda xs: _fold(np.add, xs)),
    'Mean': (FLOATS, lambda xs: _fold(np.add, xs) / len(xs)),
    'Max': (NUMERIC, lambda xs: _fold(np.maximum, xs)),
    'Min': (NUMERIC, lambda xs: _fold(np.minimum, xs)),
}


def variadic_cases(rng):
    for op, (dts, ref) in VARIADIC.items():
        lo = op.lower()
        for dt in dts:
            xs = [rand(rng, s, dt, -50, 50) for s in ((4, 1, 5), (3, 1), (5,))]
            yield mk('%s_%s' % (lo, dt), op, xs, [out_like(ref(xs), dt)], dt, bf16_in=bf(dt, 0, 1, 2))
        for n in (1, 2, 4, 9):
            xs = [rand(rng, (2, 3), 'f32') for _ in range(n)]
            yield mk('%s_n%d' % (lo, n), op, xs, [out_like(ref(xs), 'f32')])
        # a later input with a larger shape than the first two, and broadcasting across all of them
        xs = [rand(rng, (3,), 'f64'), rand(rng, (), 'f64'), rand(rng, (2, 1, 3), 'f64'), rand(rng, (4, 1), 'f64')]
        yield mk('%s_grow' % lo, op, xs, [ref(xs)])
        xs = [rand(rng, (), 'f32') for _ in range(3)]
        yield mk('%s_rank0' % lo, op, xs, [out_like(ref(xs), 'f32')])
        xs = [rand(rng, (0, 3), 'f32'), rand(rng, (1, 3), 'f32'), rand(rng, (3,), 'f32')]
        yield mk('%s_empty' % lo, op, xs, [out_like(ref(xs), 'f32')])
        xs = [rand(rng, (4, 5), 'f32'), rand(rng, (4, 5), 'f32')]
        yield mk('%s_const' % lo, op, xs, [out_like(ref(xs), 'f32')], const=(1,))
        xs = [rand(rng, BIG, 'f32'), rand(rng, (BIG[1],), 'f32'), rand(rng, (BIG[0], 1), 'f32')]
        yield mk('%s_large' % lo, op, xs, [out_like(ref(xs), 'f32')])
        xs = [rand(rng, BIG_HEAVY, 'f16'), rand(rng, BIG_HEAVY, 'f16'), rand(rng, (BIG_HEAVY[1],), 'f16')]
        yield mk('%s_large_f16' % lo, op, xs, [out_like(ref(xs), 'f16')], rtol=4e-3, atol=2e-3)
        if dts == FLOATS:
            yield err('%s_err_int' % lo, op, [rand(rng, (2,), 'i32'), rand(rng, (2,), 'i32')], 'INVALID_ARGUMENT',
                      'floating-point')
        yield err('%s_err_bool' % lo, op, [rand(rng, (2,), 'bool')], 'INVALID_ARGUMENT', 'is defined for')
        yield err('%s_err_dtypes' % lo, op, [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32'), rand(rng, (2,), 'f64')],
                  'INVALID_ARGUMENT', 'input dtypes differ: f32 and f64 (inputs 0 and 2')
        yield err('%s_err_shapes' % lo, op, [rand(rng, (2, 3), 'f32'), rand(rng, (3,), 'f32'), rand(rng, (4,), 'f32')],
                  'INVALID_ARGUMENT', 'shapes [2,3] and [4] (input 2) cannot be broadcast')
        yield err('%s_err_no_inputs' % lo, op, [], 'INVALID_ARGUMENT', 'takes at least 1 inputs, got 0')

    # NaN propagates through Max/Min wherever it is, as numpy.maximum/minimum; ints over full ranges
    a = np.array([np.nan, 1.0, 2.0, -np.inf, np.inf, 0.0], np.float32)
    b = np.array([1.0, np.nan, 3.0, 5.0, np.nan, -0.0], np.float32)
    c = np.array([0.0, 0.0, np.nan, -np.inf, 1.0, 0.0], np.float32)
    for op in ('Max', 'Min'):
        yield mk('%s_nan' % op.lower(), op, [a, b, c], [out_like(VARIADIC[op][1]([a, b, c]), 'f32')])
        yield mk('%s_nan_f64' % op.lower(), op, [f64(a), f64(c)], [VARIADIC[op][1]([f64(a), f64(c)])])
        for dt in INTS:
            xs = [_full(rng, (3, 4), dt), _full(rng, (4,), dt), _full(rng, (3, 1), dt)]
            yield mk('%s_full_%s' % (op.lower(), dt), op, xs, [VARIADIC[op][1](xs)])
    with np.errstate(all='ignore'):
        xs = [a, b, c]
        yield mk('sum_special', 'Sum', xs, [out_like(VARIADIC['Sum'][1](xs), 'f32')])


# ---- Hardmax, LpNormalization, Det ------------------------------------------------------------------

def _hardmax(x, axis):
    y = np.zeros_like(x)
    if x.size:
        np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y


def _lpnorm(x, axis, p):
    x = f64(x)
    norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else \
        np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    with np.errstate(all='ignore'):
        return np.where(norm == 0, 0.0, x / norm)


def axis_cases(rng):
    for dt in FLOATS:
        # few distinct values so that ties (first maximum wins) are common
        x = np.round(rand(rng, (3, 4, 5), dt, -2, 2)).astype(np.float32 if dt == 'bf16' else NP[dt])
        for axis in (-1, 0, 1):
            yield mk('hardmax_%s_axis%d' % (dt, axis), 'Hardmax', [x], [out_like(_hardmax(x, axis), dt)],
                     attrs={'axis': axis}, bf16_in=bf(dt, 0))
    x = rand(rng, (4, 6), 'f32')
    yield mk('hardmax_default_axis', 'Hardmax', [x], [_hardmax(x, -1)])
    x = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, 1.0, 2.0, 3.0], [1.0, 5.0, 5.0, 2.0]], np.float32)
    yield mk('hardmax_nan_ties', 'Hardmax', [x], [_hardmax(x, 1)])
    yield mk('hardmax_1d', 'Hardmax', [np.array([3.0, 1.0, 3.0], np.float64)], [np.array([1.0, 0.0, 0.0])])
    yield mk('hardmax_empty', 'Hardmax', [np.zeros((0, 4), np.float32)], [np.zeros((0, 4), np.float32)])
    yield mk('hardmax_empty_axis', 'Hardmax', [np.zeros((3, 0), np.float32)], [np.zeros((3, 0), np.float32)])
    x = rand(rng, BIG, 'f32')
    yield mk('hardmax_large_last', 'Hardmax', [x], [_hardmax(x, -1)])
    yield mk('hardmax_large_first', 'Hardmax', [x], [_hardmax(x, 0)], attrs={'axis': 0})
    yield err('hardmax_err_axis', 'Hardmax', [rand(rng, (2, 3), 'f32')], 'INVALID_ARGUMENT',
              'axis 2 is out of range for rank 2', attrs={'axis': 2})
    yield err('hardmax_err_rank0', 'Hardmax', [rand(rng, (), 'f32')], 'INVALID_ARGUMENT', 'rank >= 1')
    yield err('hardmax_err_int', 'Hardmax', [rand(rng, (2, 3), 'i32')], 'INVALID_ARGUMENT', 'floating-point')

    for dt in FLOATS:
        x = rand(rng, (3, 4, 5), dt)
        for axis in (-1, 0, 1):
            for p in (1, 2):
                yield mk('lpnorm_%s_axis%d_p%d' % (dt, axis, p), 'LpNormalization', [x],
                         [out_like(_lpnorm(x, axis, p), dt)], dt, attrs={'axis': axis, 'p': p}, bf16_in=bf(dt, 0))
    x = rand(rng, (4, 6), 'f32')
    yield mk('lpnorm_defaults', 'LpNormalization', [x], [out_like(_lpnorm(x, -1, 2), 'f32')])
    x = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [1e-30, 0.0, 0.0]], np.float32)
    yield mk('lpnorm_zero_rows', 'LpNormalization', [x], [out_like(_lpnorm(x, 1, 2), 'f32')])
    yield mk('lpnorm_zero_rows_p1', 'LpNormalization', [x], [out_like(_lpnorm(x, 1, 1), 'f32')], attrs={'p': 1})
    yield mk('lpnorm_empty', 'LpNormalization', [np.zeros((0, 3), np.float32)], [np.zeros((0, 3), np.float32)])
    x = rand(rng, BIG, 'f32')
    yield mk('lpnorm_large', 'LpNormalization', [x], [out_like(_lpnorm(x, -1, 2), 'f32')])
    yield mk('lpnorm_large_axis0', 'LpNormalization', [x], [out_like(_lpnorm(x, 0, 1), 'f32')],
             attrs={'axis': 0, 'p': 1})
    yield err('lpnorm_err_p', 'LpNormalization', [rand(rng, (2, 3), 'f32')], 'INVALID_ARGUMENT',
              "'p' must be 1 or 2, got 3", attrs={'p': 3})
    yield err('lpnorm_err_axis', 'LpNormalization', [rand(rng, (2, 3), 'f32')], 'INVALID_ARGUMENT',
              'axis -3 is out of range', attrs={'axis': -3})
    yield err('lpnorm_err_int', 'LpNormalization', [rand(rng, (2, 3), 'i64')], 'INVALID_ARGUMENT', 'floating-point')

    for dt in FLOATS:
        x = rand(rng, (2, 3, 4, 4), dt, -1, 1)
        tol = {'f32': (1e-4, 1e-5), 'f64': (1e-10, 1e-12), 'f16': (1e-2, 2e-3), 'bf16': (3e-2, 1e-2)}[dt]
        yield mk('det_%s' % dt, 'Det', [x], [out_like(np.linalg.det(f64(x)), dt)], rtol=tol[0], atol=tol[1],
                 bf16_in=bf(dt, 0))
    for m in (1, 2, 3, 7):
        x = rand(rng, (m, m), 'f64', -2, 2)
        yield mk('det_2d_m%d' % m, 'Det', [x], [np.array(np.linalg.det(x))], rtol=1e-10, atol=1e-12)
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]], np.float64)
    perm = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    yield mk('det_singular', 'Det', [sing], [np.array(np.linalg.det(sing))], rtol=1e-10, atol=1e-12)
    yield mk('det_permutation', 'Det', [perm], [np.array(1.0)])
    yield mk('det_swap', 'Det', [swap], [np.array(-1.0)])
    yield mk('det_zero_matrix', 'Det', [np.zeros((3, 3), np.float32)], [np.array(0.0, np.float32)])
    yield mk('det_m0', 'Det', [np.zeros((2, 0, 0), np.float32)], [np.ones((2,), np.float32)])
    yield mk('det_empty_batch', 'Det', [np.zeros((0, 3, 3), np.float32)], [np.zeros((0,), np.float32)])
    x = rand(rng, (5000, 3, 3), 'f32', -1, 1)
    yield mk('det_large_batch', 'Det', [x], [out_like(np.linalg.det(f64(x)), 'f32')], rtol=1e-4, atol=1e-5)
    x = rand(rng, (64, 64), 'f64', -1, 1) + 4 * np.eye(64)
    yield mk('det_large_matrix', 'Det', [x], [np.array(np.linalg.det(x))], rtol=1e-9, atol=0.0)
    yield err('det_err_not_square', 'Det', [rand(rng, (2, 3, 4), 'f32')], 'INVALID_ARGUMENT',
              'square matrices [..., M, M], got [2,3,4]')
    yield err('det_err_rank1', 'Det', [rand(rng, (3,), 'f32')], 'INVALID_ARGUMENT', 'shape [..., M, M], got [3]')
    yield err('det_err_int', 'Det', [rand(rng, (2, 2), 'i32')], 'INVALID_ARGUMENT', 'floating-point')


def cases(rng):
    for gen in (unary_cases, shrink_int_cases, isnan_isinf_cases, prelu_cases, bitwise_cases, variadic_cases,
                axis_cases):
        yield from gen(rng)
