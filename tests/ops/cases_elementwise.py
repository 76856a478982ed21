"""Elementwise op cases: binary arithmetic with broadcasting, comparisons, logic, Where, unary math,
Clip and Cast, checked against numpy (computed in float64, then rounded to the output dtype).

bf16 inputs are f32 arrays holding bf16-representable values, fed as bf16 (feed_dtype); their
reference stays f32 with a bf16-sized tolerance.
"""
import math

import numpy as np

from opcase import Case, DType

NP = {'f32': np.float32, 'f64': np.float64, 'f16': np.float16, 'bf16': np.float32, 'i8': np.int8,
      'u8': np.uint8, 'i16': np.int16, 'i32': np.int32, 'i64': np.int64, 'bool': np.bool_}
FLOATS = ['f32', 'f64', 'f16', 'bf16']
INTS = ['i8', 'u8', 'i16', 'i32', 'i64']
SINTS = ['i8', 'i16', 'i32', 'i64']
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ['bool']

# bf16 keeps 8 significant bits: one rounding of the result is 2^-9 relative.
BF16_TOL = (8e-3, 1e-3)

BIG = (260, 300)        # 78,000 elements: past the cheap ops' parallel threshold (2 x 32K)
BIG_HEAVY = (100, 200)  # 20,000 elements: past the transcendental threshold (2 x 4K)

_erf = np.vectorize(math.erf, otypes=[np.float64])


def bf16_round(x):
    """f32 values rounded to the nearest bf16 (ties to even), kept as f32."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r).astype(np.float32)


def rand(rng, shape, dt, lo=-4.0, hi=4.0):
    if dt == 'bool':
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt in FLOATS:
        x = rng.uniform(lo, hi, shape).astype(NP[dt])
        return bf16_round(x) if dt == 'bf16' else x
    info = np.iinfo(NP[dt])
    lo_i, hi_i = max(int(lo), info.min), min(int(hi), info.max)
    if dt == 'u8':
        lo_i = max(lo_i, 0)
    return rng.integers(lo_i, hi_i + 1, shape).astype(NP[dt])


def out_like(ref, dt):
    """A float64 (or exact) reference as the output dtype (f32 for bf16)."""
    if dt == 'bool':
        return np.asarray(ref).astype(np.bool_)
    return np.asarray(ref).astype(NP[dt])


def mk(name, op, inputs, expected, dt=None, attrs=None, const=(), rtol=None, atol=None, bf16_in=()):
    """bf16_in: indices of inputs fed as bf16 (their arrays hold bf16 values as f32)."""
    fd = {i: 'bf16' for i in bf16_in}
    if dt == 'bf16' and rtol is None:
        rtol, atol = BF16_TOL
    return Case(name, op, inputs, expected, attrs=attrs, const=const, rtol=rtol, atol=atol, feed_dtype=fd)


def err(name, op, inputs, code, text, attrs=None, const=()):
    return Case(name, op, inputs, attrs=attrs, const=const, error=(code, text))


def f64(x):
    return np.asarray(x).astype(np.float64)


# ---- binary arithmetic ------------------------------------------------------------------------------

def _div_ref(a, b):
    if a.dtype.kind in 'iu':
        # truncation toward zero, exactly: a - fmod(a, b) is a multiple of b
        return ((a - np.fmod(a, b)) // b).astype(a.dtype)
    return f64(a) / f64(b)


def _pow_ref(a, b):
    if a.dtype.kind in 'iu':
        return np.power(a, b)
    return np.power(f64(a), f64(b))


def _arith(fn):
    def ref(a, b):
        if a.dtype.kind in 'iu':
            return fn(a, b)
        return fn(f64(a), f64(b))
    return ref


ARITH = {
    'Add': _arith(np.add),
    'Sub': _arith(np.subtract),
    'Mul': _arith(np.multiply),
    'Div': _div_ref,
    'Pow': _pow_ref,
    'Maximum': _arith(np.maximum),
    'Minimum': _arith(np.minimum),
}


def _operands(rng, op, dt, sa, sb):
    if op == 'Pow':
        if dt in FLOATS:
            return rand(rng, sa, dt, 0.1, 3.0), rand(rng, sb, dt, -2.0, 2.0)
        return rand(rng, sa, dt, -4, 4), rand(rng, sb, dt, 0, 4)
    if op == 'Div' and dt not in FLOATS:
        b = rand(rng, sb, dt, -9, 9)
        b[b == 0] = 3
        if dt == 'u8':
            return rand(rng, sa, dt, 0, 250), b
        return rand(rng, sa, dt, -100, 100), b
    if op == 'Div':
        b = rand(rng, sb, dt, 0.5, 4.0)
        return rand(rng, sa, dt), b * np.where(rng.random(sb) < 0.5, -1, 1).astype(b.dtype)
    if dt in INTS:
        info = np.iinfo(NP[dt])
        return rand(rng, sa, dt, info.min, info.max), rand(rng, sb, dt, info.min, info.max)
    return rand(rng, sa, dt), rand(rng, sb, dt)


def binary_cases(rng):
    for op, ref in ARITH.items():
        lo = op.lower()
        for dt in NUMERIC:
            a, b = _operands(rng, op, dt, (4, 1, 5), (3, 1))
            bf = (0, 1) if dt == 'bf16' else ()
            rt = 4e-3 if (op == 'Pow' and dt == 'f16') else None
            yield mk('%s_%s_bcast' % (lo, dt), op, [a, b], [out_like(ref(a, b), dt)], dt, rtol=rt, bf16_in=bf)
        # same shape, scalar on either side, rank 0, empty dims, and a parallel-sized case
        a, b = _operands(rng, op, 'f32', (3, 4), (3, 4))
        yield mk('%s_same_shape' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', (7, 6), ())
        yield mk('%s_scalar_b' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', (), (2, 9))
        yield mk('%s_scalar_a' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', (), ())
        yield mk('%s_rank0' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'i32', (), ())
        yield mk('%s_rank0_i32' % lo, op, [a, b], [out_like(ref(a, b), 'i32')])
        a, b = _operands(rng, op, 'f32', (0, 3), (3,))
        yield mk('%s_empty' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', (2, 1, 3), (2, 0, 1))
        yield mk('%s_empty_bcast' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', BIG, (BIG[1],))
        yield mk('%s_large_rows' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', BIG, BIG)
        yield mk('%s_large_flat' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'f32', (BIG[0], 1), BIG)
        yield mk('%s_large_col' % lo, op, [a, b], [out_like(ref(a, b), 'f32')])
        a, b = _operands(rng, op, 'i64', (2, 3, 1, 4), (3, 5, 1))
        yield mk('%s_rank4_i64' % lo, op, [a, b], [out_like(ref(a, b), 'i64')])
        a, b = _operands(rng, op, 'f32', (3, 4), (4,))
        yield mk('%s_const_b' % lo, op, [a, b], [out_like(ref(a, b), 'f32')], const=(1,))
        yield err('%s_err_dtype_mismatch' % lo, op, [rand(rng, (2, 3), 'f32'), rand(rng, (2, 3), 'i32')],
                  'INVALID_ARGUMENT', 'input dtypes differ: f32 and i32')
        yield err('%s_err_shapes' % lo, op, [rand(rng, (2, 3), 'f32'), rand(rng, (4,), 'f32')],
                  'INVALID_ARGUMENT', 'shapes [2,3] and [4] cannot be broadcast')
        yield err('%s_err_bool' % lo, op, [rand(rng, (2,), 'bool'), rand(rng, (2,), 'bool')],
                  'INVALID_ARGUMENT', 'numeric')

    # Special values: NaN propagation of Maximum/Minimum, inf arithmetic, float division by zero.
    sp = np.array([np.nan, 1.0, -np.inf, np.inf, 0.0, -0.0, 2.0, np.nan], np.float32)
    sq = np.array([1.0, np.nan, np.inf, np.inf, 0.0, 0.0, -np.inf, np.nan], np.float32)
    with np.errstate(all='ignore'):
        for op in ['Add', 'Sub', 'Mul', 'Div', 'Maximum', 'Minimum', 'Pow']:
            yield mk('%s_special_f32' % op.lower(), op, [sp, sq], [out_like(ARITH[op](sp, sq), 'f32')])
            yield mk('%s_special_f64' % op.lower(), op, [f64(sp), f64(sq)], [ARITH[op](f64(sp), f64(sq))])

    # Integer division: truncation toward zero, MIN / -1 wraps, zero divisors fail the node.
    a = np.array([7, -7, 7, -7, 1, -1, 0, 100], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3, 5, -7], np.int32)
    yield mk('div_trunc_i32', 'Div', [a, b], [np.array([3, -3, -3, 3, 0, 0, 0, -14], np.int32)])
    for dt in ['i32', 'i64', 'i8', 'i16']:
        m = np.iinfo(NP[dt]).min
        yield mk('div_min_by_minus1_%s' % dt, 'Div', [np.array([m, 5], NP[dt]), np.array([-1, -1], NP[dt])],
                 [np.array([m, -5], NP[dt])])
    for dt in INTS:
        yield err('div_by_zero_%s' % dt, 'Div', [np.array([1, 2, 3], NP[dt]), np.array([1, 0, 2], NP[dt])],
                  'INVALID_ARGUMENT', 'integer division by zero')
    yield err('div_by_zero_scalar', 'Div', [np.array([1, 2, 3], np.int64), np.array(0, np.int64)],
              'INVALID_ARGUMENT', 'integer division by zero')

    # Pow: the x**2 fast path (scalar exponent), negative bases with integral exponents, int errors.
    for dt in ['f32', 'f64', 'f16']:
        x = rand(rng, (5, 7), dt)
        yield mk('pow_square_%s' % dt, 'Pow', [x, np.array(2, NP[dt])], [out_like(f64(x) ** 2, dt)])
    x = rand(rng, (5, 7), 'f32')
    yield mk('pow_square_const', 'Pow', [x, np.array(2, np.float32)], [out_like(f64(x) ** 2, 'f32')], const=(1,))
    x = rand(rng, BIG, 'f32')
    yield mk('pow_square_large', 'Pow', [x, np.array(2, np.float32)], [out_like(f64(x) ** 2, 'f32')])
    x = np.array([-2.0, -3.0, -0.5, 4.0], np.float32)
    e = np.array([3.0, 2.0, -1.0, 0.5], np.float32)
    yield mk('pow_negative_base', 'Pow', [x, e], [out_like(np.power(f64(x), f64(e)), 'f32')])
    x = np.array([3, -3, 2, 7, 0, 1], np.int64)
    e = np.array([40, 39, 63, 0, 0, 100], np.int64)
    yield mk('pow_wrap_i64', 'Pow', [x, e], [np.power(x, e)])
    for dt in SINTS:
        yield err('pow_negative_exponent_%s' % dt, 'Pow', [np.array([2, 3], NP[dt]), np.array([1, -1], NP[dt])],
                  'INVALID_ARGUMENT', 'negative integer powers')


def mod_cases(rng):
    for dt in NUMERIC:
        for fm in (0, 1):
            if dt in FLOATS:
                a = rand(rng, (4, 1, 5), dt, -20, 20)
                b = rand(rng, (3, 1), dt, 0.5, 6) * np.where(rng.random((3, 1)) < 0.5, -1, 1).astype(NP[dt])
                if dt == 'bf16':
                    b = bf16_round(b)
                fn = np.fmod if fm else np.mod
                want = out_like(fn(f64(a), f64(b)), dt)
                # the f16/bf16 reference rounds once from f64; an f32 fmod then rounding can land one
                # ulp of the result away, relative to the (possibly tiny) result
                rt, at = {'f16': (2e-3, 2e-2), 'bf16': (1e-2, 0.1)}.get(dt, (None, None))
                yield mk('mod_%s_fmod%d' % (dt, fm), 'Mod', [a, b], [want], dt, attrs={'fmod': fm}, rtol=rt,
                         atol=at, bf16_in=(0, 1) if dt == 'bf16' else ())
            else:
                lo = 0 if dt == 'u8' else -100
                a = rand(rng, (4, 1, 5), dt, lo, 100)
                b = rand(rng, (3, 1), dt, lo // 10 - 1, 9)
                b[b == 0] = 7
                fn = np.fmod if fm else np.mod
                yield mk('mod_%s_fmod%d' % (dt, fm), 'Mod', [a, b], [fn(a, b)], dt, attrs={'fmod': fm})
    a = np.array([7, -7, 7, -7, 6, -6, np.iinfo(np.int32).min], np.int32)
    b = np.array([3, 3, -3, -3, 3, -3, -1], np.int32)
    yield mk('mod_signs_i32', 'Mod', [a, b], [np.array([1, 2, -2, -1, 0, 0, 0], np.int32)])
    yield mk('mod_signs_i32_fmod', 'Mod', [a, b], [np.array([1, -1, 1, -1, 0, 0, 0], np.int32)], attrs={'fmod': 1})
    a = np.array([5.5, -5.5, 5.5, -5.5, 6.0, -6.0, 1.0], np.float64)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0], np.float64)
    with np.errstate(all='ignore'):
        yield mk('mod_signs_f64', 'Mod', [a, b], [np.mod(a, b)])
        yield mk('mod_signs_f64_fmod', 'Mod', [a, b], [np.fmod(a, b)], attrs={'fmod': 1})
    a, b = rand(rng, (), 'i64', -50, 50), np.array(-7, np.int64)
    yield mk('mod_rank0', 'Mod', [a, b], [np.mod(a, b)])
    yield mk('mod_empty', 'Mod', [rand(rng, (3, 0), 'i32'), np.array([4], np.int32)], [np.zeros((3, 0), np.int32)])
    a = rand(rng, BIG_HEAVY, 'f32', -50, 50)
    b = rand(rng, (BIG_HEAVY[1],), 'f32', 1, 9)
    yield mk('mod_large', 'Mod', [a, b], [out_like(np.fmod(f64(a), f64(b)), 'f32')], attrs={'fmod': 1})
    a = rand(rng, BIG_HEAVY, 'i32', -1000, 1000)
    b = rand(rng, (BIG_HEAVY[1],), 'i32', 1, 9)
    yield mk('mod_large_i32', 'Mod', [a, b], [np.mod(a, b)])
    yield err('mod_err_fmod_attr', 'Mod', [rand(rng, (2,), 'i32'), rand(rng, (2,), 'i32', 1, 3)],
              'INVALID_ARGUMENT', "'fmod' must be 0 or 1", attrs={'fmod': 2})
    yield err('mod_by_zero', 'Mod', [np.array([5, 6], np.int16), np.array([0], np.int16)], 'INVALID_ARGUMENT',
              'integer division by zero')
    yield err('mod_by_zero_fmod', 'Mod', [np.array([5, 6], np.uint8),
                                          np.array([1, 0], np.uint8)], 'INVALID_ARGUMENT', 'division by zero',
              attrs={'fmod': 1})
    yield err('mod_err_dtypes', 'Mod', [rand(rng, (2,), 'i32'), rand(rng, (2,), 'i64')], 'INVALID_ARGUMENT',
              'input dtypes differ: i32 and i64')
    yield err('mod_err_shapes', 'Mod', [rand(rng, (2, 5), 'i32'), rand(rng, (3, 1), 'i32')], 'INVALID_ARGUMENT',
              'cannot be broadcast')


# ---- comparisons and logic ------------------------------------------------------------------------

CMP = {'Equal': np.equal, 'NotEqual': np.not_equal, 'Less': np.less, 'LessEqual': np.less_equal,
       'Greater': np.greater, 'GreaterEqual': np.greater_equal}


def compare_cases(rng):
    for op, fn in CMP.items():
        lo = op.lower()
        for dt in ALL:
            # few distinct values so that equality is common
            a = rand(rng, (4, 1, 5), dt, -3, 3)
            b = rand(rng, (3, 1), dt, -3, 3)
            if dt in FLOATS:
                a = np.round(a).astype(a.dtype)
                b = np.round(b).astype(b.dtype)
            yield mk('%s_%s' % (lo, dt), op, [a, b], [fn(a, b)], bf16_in=(0, 1) if dt == 'bf16' else ())
        nan = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0], np.float32)
        oth = np.array([np.nan, np.nan, 1.0, -np.inf, -0.0], np.float32)
        yield mk('%s_nan' % lo, op, [nan, oth], [fn(nan, oth)])
        a, b = rand(rng, (), 'i64'), rand(rng, (), 'i64')
        yield mk('%s_rank0' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (0, 4), 'f32'), rand(rng, (1, 4), 'f32')
        yield mk('%s_empty' % lo, op, [a, b], [fn(a, b)])
        a = np.round(rand(rng, BIG, 'f32'))
        b = np.round(rand(rng, (BIG[1],), 'f32'))
        yield mk('%s_large' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (6, 7), 'i32', -2, 2), rand(rng, (), 'i32', -2, 2)
        yield mk('%s_scalar' % lo, op, [a, b], [fn(a, b)])
        yield err('%s_err_dtypes' % lo, op, [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f64')],
                  'INVALID_ARGUMENT', 'input dtypes differ: f32 and f64')
        yield err('%s_err_shapes' % lo, op, [rand(rng, (3,), 'f32'), rand(rng, (2,), 'f32')],
                  'INVALID_ARGUMENT', 'cannot be broadcast')


LOGIC = {'And': np.logical_and, 'Or': np.logical_or, 'Xor': np.logical_xor}


def logic_cases(rng):
    for op, fn in LOGIC.items():
        lo = op.lower()
        a, b = rand(rng, (4, 1, 5), 'bool'), rand(rng, (3, 1), 'bool')
        yield mk('%s_bcast' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (3, 4), 'bool'), rand(rng, (3, 4), 'bool')
        yield mk('%s_same' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (), 'bool'), rand(rng, (), 'bool')
        yield mk('%s_rank0' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (5,), 'bool'), np.array(True)
        yield mk('%s_scalar' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, (0,), 'bool'), rand(rng, (1,), 'bool')
        yield mk('%s_empty' % lo, op, [a, b], [fn(a, b)])
        a, b = rand(rng, BIG, 'bool'), rand(rng, BIG, 'bool')
        yield mk('%s_large' % lo, op, [a, b], [fn(a, b)])
        yield err('%s_err_dtype' % lo, op, [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32')], 'INVALID_ARGUMENT',
                  'bool')
        yield err('%s_err_shapes' % lo, op, [rand(rng, (2, 2), 'bool'), rand(rng, (3,), 'bool')],
                  'INVALID_ARGUMENT', 'cannot be broadcast')
    for shape in [(3, 4), (), (0, 2), BIG]:
        a = rand(rng, shape, 'bool')
        yield mk('not_%s' % ('x'.join(map(str, shape)) or 'rank0'), 'Not', [a], [np.logical_not(a)])
    yield err('not_err_dtype', 'Not', [rand(rng, (2,), 'i32')], 'INVALID_ARGUMENT', 'bool')


def where_cases(rng):
    for dt in ALL:
        c, x, y = rand(rng, (4, 1, 5), 'bool'), rand(rng, (3, 1), dt), rand(rng, (5,), dt)
        yield mk('where_%s' % dt, 'Where', [c, x, y], [np.where(c, x, y)], dt,
                 bf16_in=(1, 2) if dt == 'bf16' else ())
    c, x, y = rand(rng, (3, 4), 'bool'), rand(rng, (3, 4), 'f32'), rand(rng, (3, 4), 'f32')
    yield mk('where_same', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = rand(rng, (6, 5), 'bool'), np.array(1.5, np.float32), np.array(-2.0, np.float32)
    yield mk('where_scalars', 'Where', [c, x, y], [np.where(c, x, y)])
    # a masked value against a scalar, either side (the relu gradient Where(x > 0, dy, 0))
    c, x, y = rand(rng, (7, 9), 'bool'), rand(rng, (7, 9), 'f32'), np.array(0.0, np.float32)
    yield mk('where_tensor_scalar', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = rand(rng, (7, 9), 'bool'), np.array(-1.0, np.float64), rand(rng, (7, 9), 'f64')
    yield mk('where_scalar_tensor', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = np.array(True), rand(rng, (2, 3), 'i64'), rand(rng, (1, 3), 'i64')
    yield mk('where_scalar_cond', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = np.array(False), np.array(3, np.int32), np.array(4, np.int32)
    yield mk('where_rank0', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = rand(rng, (0, 3), 'bool'), rand(rng, (3,), 'f32'), rand(rng, (1, 1), 'f32')
    yield mk('where_empty', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = rand(rng, BIG, 'bool'), rand(rng, BIG, 'f32'), rand(rng, (BIG[1],), 'f32')
    yield mk('where_large', 'Where', [c, x, y], [np.where(c, x, y)])
    c, x, y = rand(rng, BIG, 'bool'), rand(rng, BIG, 'f64'), rand(rng, BIG, 'f64')
    yield mk('where_large_same', 'Where', [c, x, y], [np.where(c, x, y)])
    yield err('where_err_cond', 'Where', [rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32'), rand(rng, (2,), 'f32')],
              'INVALID_ARGUMENT', 'bool')
    yield err('where_err_dtypes', 'Where', [rand(rng, (2,), 'bool'), rand(rng, (2,), 'f32'), rand(rng, (2,), 'i32')],
              'INVALID_ARGUMENT', 'input dtypes differ: f32 and i32')
    yield err('where_err_shapes', 'Where', [rand(rng, (2,), 'bool'), rand(rng, (3,), 'f32'), rand(rng, (3,), 'f32')],
              'INVALID_ARGUMENT', 'cannot be broadcast')


# ---- unary -----------------------------------------------------------------------------------------

def _relu(x):
    return np.maximum(x, x.dtype.type(0)) if x.dtype.kind in 'iu' else np.maximum(f64(x), 0.0)


def _gelu(x):
    x = f64(x)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    x = f64(x)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _float_fn(fn):
    return lambda x: fn(f64(x))


def _num_fn(fn):
    return lambda x: fn(x) if x.dtype.kind in 'iu' else fn(f64(x))


# op: (dtypes, reference, input range, heavy, attrs)
UNARY = {
    'Neg': (NUMERIC, _num_fn(np.negative), (-5, 5), False, {}),
    'Abs': (NUMERIC, _num_fn(np.abs), (-5, 5), False, {}),
    'Sign': (NUMERIC, _num_fn(np.sign), (-2, 2), False, {}),
    'Square': (NUMERIC, _num_fn(np.square), (-9, 9), False, {}),
    'Relu': (NUMERIC, _relu, (-5, 5), False, {}),
    'Exp': (FLOATS, _float_fn(np.exp), (-10, 10), True, {}),
    'Log': (FLOATS, _float_fn(np.log), (0.01, 50), True, {}),
    'Sqrt': (FLOATS, _float_fn(np.sqrt), (0, 50), True, {}),
    'Rsqrt': (FLOATS, _float_fn(lambda x: 1.0 / np.sqrt(x)), (0.01, 50), True, {}),
    'Reciprocal': (FLOATS, _float_fn(lambda x: 1.0 / x), (0.1, 5), False, {}),
    'Tanh': (FLOATS, _float_fn(np.tanh), (-6, 6), True, {}),
    'Sigmoid': (FLOATS, _float_fn(lambda x: 1.0 / (1.0 + np.exp(-x))), (-20, 20), True, {}),
    'LeakyRelu': (FLOATS, _float_fn(lambda x: np.where(x < 0, 0.01 * x, x)), (-5, 5), False, {}),
    'Elu': (FLOATS, _float_fn(lambda x: np.where(x < 0, np.expm1(x), x)), (-6, 3), True, {}),
    'Gelu': (FLOATS, _gelu, (-6, 6), True, {}),
    'Erf': (FLOATS, _float_fn(_erf), (-4.5, 4.5), True, {}),
    'Softplus': (FLOATS, _float_fn(lambda x: np.logaddexp(0.0, x)), (-30, 30), True, {}),
    'Floor': (FLOATS, _float_fn(np.floor), (-6, 6), False, {}),
    'Ceil': (FLOATS, _float_fn(np.ceil), (-6, 6), False, {}),
    'Round': (FLOATS, _float_fn(np.round), (-6, 6), False, {}),
}

# Values that probe each f32 implementation's edges (polynomial range switches, overflow, NaN).
EDGES = {
    'Exp': [np.nan, np.inf, -np.inf, 88.7, 88.8, 89.0, -87.3, -103.0, -104.0, -200.0, 0.0, -0.0, 1e-8, 0.34657, 0.3466],
    'Tanh': [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.6249, 0.625, 0.6251, -0.625, 9.0, 9.1, 20.0, 1e-6, -1e-30],
    'Sigmoid': [np.nan, np.inf, -np.inf, 0.0, -87.0, -88.0, -103.0, -104.0, 88.0, 100.0, 1e-7],
    'Erf': [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.9999, 1.0, 1.0001, 3.9199, 3.92, 3.9201, 10.0, -1.0, 1e-6],
    'Gelu': [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.414, 1.4143, -10.0, 10.0, 1e-6, -5.5],
    'Elu': [np.nan, -np.inf, np.inf, 0.0, -0.0, -1e-6, -0.3465, -0.3467, -30.0, -31.0, -100.0],
    'Softplus': [np.nan, np.inf, -np.inf, 0.0, 20.0, 40.0, -40.0, -100.0],
    'Log': [np.nan, np.inf, 0.0, -0.0, -1.0, 1.0, 1e-30],
    'Sqrt': [np.nan, np.inf, 0.0, -0.0, -1.0, 4.0, 1e-30],
    'Rsqrt': [np.nan, np.inf, 0.0, -1.0, 4.0],
    'Reciprocal': [np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0],
    'Floor': [np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, 2.5, -2.5, 1e10, -1e10, 8388607.5, -8388607.5],
    'Ceil': [np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, 2.5, -2.5, 1e10, -1e10, 8388607.5, -8388607.5],
    'Round': [np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, 1.5, 2.5, -1.5, -2.5, 1e10, 8388607.5, 4194303.5],
    'Relu': [np.nan, np.inf, -np.inf, -0.0, 0.0],
    'Abs': [np.nan, np.inf, -np.inf, -0.0],
    'Sign': [np.nan, np.inf, -np.inf, -0.0, 0.0],
    'LeakyRelu': [np.nan, np.inf, -np.inf],
}


def _int_range(dt, lo, hi):
    info = np.iinfo(NP[dt])
    return max(lo, info.min), min(hi, info.max)


def unary_cases(rng):
    for op, (dts, ref, (lo, hi), heavy, attrs) in UNARY.items():
        name = op.lower()
        with np.errstate(all='ignore'):
            for dt in dts:
                if dt in INTS:
                    info = np.iinfo(NP[dt])
                    x = rand(rng, (3, 4, 5), dt, info.min, info.max)
                    if dt != 'u8':
                        x.flat[0] = info.min  # Neg/Abs of the most negative value wrap, as numpy
                else:
                    x = rand(rng, (3, 4, 5), dt, lo, hi)
                yield mk('%s_%s' % (name, dt), op, [x], [out_like(ref(x), dt)], dt, attrs=attrs,
                         bf16_in=(0,) if dt == 'bf16' else ())
            x = rand(rng, (), 'f32', lo, hi)
            yield mk('%s_rank0' % name, op, [x], [out_like(ref(x), 'f32')], attrs=attrs)
            x = rand(rng, (2, 0, 3), 'f32', lo, hi)
            yield mk('%s_empty' % name, op, [x], [out_like(ref(x), 'f32')], attrs=attrs)
            x = rand(rng, BIG_HEAVY if heavy else BIG, 'f32', lo, hi)
            yield mk('%s_large' % name, op, [x], [out_like(ref(x), 'f32')], attrs=attrs)
            if heavy:
                x = rand(rng, BIG_HEAVY, 'f16', lo, hi)
                yield mk('%s_large_f16' % name, op, [x], [out_like(ref(x), 'f16')], attrs=attrs)
            if op in EDGES:
                for dt in ('f32', 'f64'):
                    x = np.array(EDGES[op], NP[dt])
                    yield mk('%s_edges_%s' % (name, dt), op, [x], [out_like(ref(x), dt)], attrs=attrs)
            # dense sweep over the whole interesting range of the f32 polynomials
            if op in ('Exp', 'Tanh', 'Sigmoid', 'Erf', 'Gelu', 'Elu'):
                x = np.linspace({'Exp': -100, 'Elu': -20}.get(op, -12), {'Exp': 88}.get(op, 12), 20001,
                                dtype=np.float32)
                yield mk('%s_sweep' % name, op, [x], [out_like(ref(x), 'f32')], attrs=attrs)
            # Log's and Softplus's vector forms (k_vmath.h: ew_logf, ew_softplusf) over the whole positive f32
            # range, subnormals included, densely around 1, and Softplus down to where it is subnormal, at 4 ulp
            if op == 'Log':
                x = np.concatenate([np.logspace(-45, 38.5, 20001, dtype=np.float64).astype(np.float32),
                                    np.linspace(0.5, 2, 20001, dtype=np.float32)])
                yield mk('%s_sweep' % name, op, [x], [out_like(ref(x), 'f32')], rtol=4.8e-7, atol=1e-45)
            if op == 'Softplus':
                x = np.linspace(-100, 100, 40001, dtype=np.float32)
                yield mk('%s_sweep' % name, op, [x], [out_like(ref(x), 'f32')], rtol=4.8e-7, atol=3e-45)
            # Sigmoid's negative tail down to where it rounds to 0, values below 1e-38 included (computed
            # from exp(-|x|), they are not flushed), at 4 ulp and a subnormal's absolute step
            if op == 'Sigmoid':
                x = np.linspace(-104, 30, 40001, dtype=np.float32)
                yield mk('%s_tail' % name, op, [x], [out_like(ref(x), 'f32')], attrs=attrs, rtol=4.8e-7, atol=3e-45)
        if dts == FLOATS:
            yield err('%s_err_int' % name, op, [rand(rng, (2,), 'i32')], 'INVALID_ARGUMENT', 'floating-point')
        yield err('%s_err_bool' % name, op, [rand(rng, (2,), 'bool')], 'INVALID_ARGUMENT',
                  'is defined for' if dts == FLOATS else 'numeric')

    # attributes
    x = rand(rng, (4, 6), 'f32')
    yield mk('leakyrelu_alpha', 'LeakyRelu', [x], [out_like(np.where(x < 0, 0.2 * f64(x), f64(x)), 'f32')],
             attrs={'alpha': 0.2})
    yield mk('elu_alpha', 'Elu', [x], [out_like(np.where(x < 0, 0.5 * np.expm1(f64(x)), f64(x)), 'f32')],
             attrs={'alpha': 0.5})
    yield mk('gelu_none_attr', 'Gelu', [x], [out_like(_gelu(x), 'f32')], attrs={'approximate': 'none'})
    for dt in FLOATS:
        x = rand(rng, (3, 4, 5), dt, -6, 6)
        yield mk('gelu_tanh_%s' % dt, 'Gelu', [x], [out_like(_gelu_tanh(x), dt)], dt, attrs={'approximate': 'tanh'},
                 bf16_in=(0,) if dt == 'bf16' else ())
    x = np.linspace(-12, 12, 20001, dtype=np.float32)
    yield mk('gelu_tanh_sweep', 'Gelu', [x], [out_like(_gelu_tanh(x), 'f32')], attrs={'approximate': 'tanh'})
    x = rand(rng, BIG_HEAVY, 'f32', -6, 6)
    yield mk('gelu_tanh_large', 'Gelu', [x], [out_like(_gelu_tanh(x), 'f32')], attrs={'approximate': 'tanh'})
    yield err('gelu_err_approximate', 'Gelu', [rand(rng, (2,), 'f32')], 'INVALID_ARGUMENT',
              "'approximate' must be", attrs={'approximate': 'fast'})


def clip_cases(rng):
    for dt in NUMERIC:
        if dt in FLOATS:
            x = rand(rng, (3, 4, 5), dt, -5, 5)
            lo, hi = np.array(-1.5, NP[dt]), np.array(2.25, NP[dt])
        else:
            info = np.iinfo(NP[dt])
            x = rand(rng, (3, 4, 5), dt, info.min, info.max)
            lo, hi = np.array(info.min // 2 + (info.max // 8 if dt == 'u8' else 0), NP[dt]), np.array(info.max // 3, NP[dt])
        want = np.minimum(np.maximum(x, lo), hi)
        bf = (0, 1, 2) if dt == 'bf16' else ()
        yield mk('clip_%s' % dt, 'Clip', [x, lo, hi], [want], dt, bf16_in=bf)
        yield mk('clip_min_only_%s' % dt, 'Clip', [x, lo], [np.maximum(x, lo)], dt, bf16_in=bf[:2])
        yield mk('clip_max_only_%s' % dt, 'Clip', [x, None, hi], [np.minimum(x, hi)], dt,
                 bf16_in=(0, 2) if dt == 'bf16' else ())
    x = rand(rng, (3, 4), 'f32')
    yield mk('clip_no_bounds', 'Clip', [x], [x])
    yield mk('clip_const_bounds', 'Clip', [x, np.array(-1, np.float32), np.array(1, np.float32)],
             [np.clip(x, -1, 1)], const=(1, 2))
    yield mk('clip_bounds_1d', 'Clip', [x, np.array([-1], np.float32), np.array([1], np.float32)], [np.clip(x, -1, 1)])
    yield mk('clip_min_gt_max', 'Clip', [x, np.array(2, np.float32), np.array(1, np.float32)],
             [np.minimum(np.maximum(x, np.float32(2)), np.float32(1))])
    sp = np.array([np.nan, np.inf, -np.inf, 0.5], np.float32)
    yield mk('clip_special', 'Clip', [sp, np.array(-1, np.float32), np.array(1, np.float32)],
             [np.minimum(np.maximum(sp, np.float32(-1)), np.float32(1))])
    x = rand(rng, (), 'f32')
    lo, hi = np.array(-1, np.float32), np.array(1, np.float32)
    yield mk('clip_rank0', 'Clip', [x, lo, hi], [np.minimum(np.maximum(x, lo), hi)])
    x = rand(rng, (0, 5), 'i32')
    yield mk('clip_empty', 'Clip', [x, np.array(-1, np.int32), np.array(1, np.int32)], [x])
    x = rand(rng, BIG, 'f32')
    yield mk('clip_large', 'Clip', [x, np.array(-1, np.float32), np.array(1, np.float32)], [np.clip(x, -1, 1)])
    yield err('clip_err_bound_dtype', 'Clip', [rand(rng, (3,), 'f32'), np.array(0, np.float64)],
              'INVALID_ARGUMENT', 'min has dtype f64 but the input is f32')
    yield err('clip_err_bound_shape', 'Clip', [rand(rng, (3,), 'f32'), np.array(0, np.float32),
                                               np.array([1, 2], np.float32)], 'INVALID_ARGUMENT',
              'max must be a scalar, got shape [2]')
    yield err('clip_err_bool', 'Clip', [rand(rng, (3,), 'bool')], 'INVALID_ARGUMENT', 'numeric')


# ---- Cast ------------------------------------------------------------------------------------------

def _cast_src(rng, src, dst, shape):
    """Values every destination represents without undefined behaviour: non-negative when going to
    u8/bool-unaware unsigned, within the destination's range for float sources."""
    if src == 'bool':
        return rand(rng, shape, 'bool')
    lo, hi = -100, 100
    if dst == 'u8' or src == 'u8':
        lo = 0
    if dst == 'i8':
        lo, hi = max(lo, -128), 127
    if src in FLOATS:
        x = rand(rng, shape, src, lo, hi)
        x.flat[:3] = [0.0, -0.0, 0.5]
        return x
    return rand(rng, shape, src, lo, hi)


def cast_cases(rng):
    for src in ALL:
        for dst in ALL:
            x = _cast_src(rng, src, dst, (3, 7))
            if dst == 'bf16':
                want = bf16_round(x.astype(np.float32))
            else:
                want = x.astype(NP[dst])
            bf = (0,) if src == 'bf16' else ()
            rt = 0.0 if dst == 'bf16' else None  # same f64 -> f32 -> bf16 path as the kernel
            yield mk('cast_%s_to_%s' % (src, dst), 'Cast', [x], [want], attrs={'to': DType(dst)}, rtol=rt,
                     atol=0.0 if dst == 'bf16' else None, bf16_in=bf)
    # truncation toward zero, wrapping between integers, everything non-zero is true
    x = np.array([2.9, -2.9, 0.5, -0.5, 127.0, -128.0, 1e-3, -0.0], np.float32)
    yield mk('cast_trunc_f32_to_i8', 'Cast', [x], [np.trunc(x).astype(np.int8)], attrs={'to': DType('i8')})
    x = np.array([300, -300, 255, 256, -1, 0], np.int32)
    yield mk('cast_wrap_i32_to_i8', 'Cast', [x], [x.astype(np.int8)], attrs={'to': DType('i8')})
    yield mk('cast_wrap_i32_to_u8', 'Cast', [x], [x.astype(np.uint8)], attrs={'to': DType('u8')})
    x = np.array([np.nan, 0.0, -0.0, 1e-30, -2.0, np.inf], np.float32)
    yield mk('cast_special_to_bool', 'Cast', [x], [x.astype(np.bool_)], attrs={'to': DType('bool')})
    x = np.array([1e10, -1e10, 2.0 ** 31, -2.0 ** 31, 2147483520.0], np.float32)
    yield mk('cast_saturate_f32_to_i32', 'Cast', [x],
             [np.array([2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 2147483520], np.int32)],
             attrs={'to': DType('i32')})
    x = np.array([70000.0, 65519.0, 65520.0, 1e-8, 6e-8, 3e-8, np.nan, -np.inf], np.float32)
    yield mk('cast_f32_to_f16_edges', 'Cast', [x], [x.astype(np.float16)], attrs={'to': DType('f16')})
    x = rand(rng, (), 'f64')
    yield mk('cast_rank0', 'Cast', [x], [x.astype(np.float32)], attrs={'to': DType('f32')})
    x = rand(rng, (4, 0), 'i64')
    yield mk('cast_empty', 'Cast', [x], [x.astype(np.float64)], attrs={'to': DType('f64')})
    x = rand(rng, BIG, 'f32', -1000, 1000)
    yield mk('cast_large_f32_to_i32', 'Cast', [x], [x.astype(np.int32)], attrs={'to': DType('i32')})
    x = rand(rng, BIG, 'f32')
    yield mk('cast_large_f32_to_f16', 'Cast', [x], [x.astype(np.float16)], attrs={'to': DType('f16')})
    x = rand(rng, BIG, 'i32', -1000, 1000)
    yield mk('cast_large_same', 'Cast', [x], [x], attrs={'to': DType('i32')})
    yield err('cast_err_missing_to', 'Cast', [rand(rng, (2,), 'f32')], 'INVALID_ARGUMENT',
              "missing required attribute 'to'")


def cases(rng):
    out = []
    with np.errstate(all='ignore'):  # numpy warns on the overflows and NaNs these cases test on purpose
        for gen in (binary_cases, mod_cases, compare_cases, logic_cases, where_cases, unary_cases, clip_cases,
                    cast_cases):
            out.extend(gen(rng))
    return out
