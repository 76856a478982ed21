"""Cases for the image group: ConvertImageDtype (tf.image.convert_image_dtype's arithmetic, with
saturation) and the stateless random augmentations, whose draws are replicated here from the hash that
include/weft/weft.h and src/ops/kutil_random.h document (a replica in Python integers, not a call into
weft), so every draw and every output is recomputed independently.

bf16 inputs are f32 arrays of bf16-exact values fed as bf16; bf16 outputs are compared as f32."""
import numpy as np

from opcase import Case, DType, Ints

F32, F64, U8, I64 = np.float32, np.float64, np.uint8, np.int64
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
COUNTER = 0xD1B54A32D192ED03
ERR = "INVALID_ARGUMENT"
NP = {"f32": F32, "f64": F64, "f16": np.float16, "bf16": F32, "i8": np.int8, "u8": U8, "i16": np.int16,
      "i32": np.int32, "i64": I64, "bool": np.bool_}


# ---- the generator, from its documentation ------------------------------------------------------------

def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed, counter):
    return mix((mix((seed + GOLDEN) & M64) + (counter & M64) * COUNTER) & M64)


def rng_bits(key, i):
    return mix((key + (i + 1) * GOLDEN) & M64)


def rng_f32(bits):
    return F32((bits >> 40) * 2.0 ** -24)


def image_key(seed, n):
    """Image n of a batch: key(seed[0], seed[1] + n), both as 64-bit two's complement."""
    return rng_key(int(seed[0]) & M64, (int(seed[1]) + n) & M64)


# ---- references ---------------------------------------------------------------------------------------

U8_TO_F32 = F32(1.0 / 255.0)


def bf16_round(x):
    u = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(F32)


def bf16_trunc(x):
    return (np.asarray(x, F32).view(np.uint32) & np.uint32(0xFFFF0000)).view(F32)


def sat_u8(v):
    """Clamp to [0, 255] and truncate; NaN gives 0."""
    v = np.where(np.isnan(v), 0, v)
    return np.clip(v, 0, 255).astype(U8)


def to_float01(x):
    """u8 to f32 as ConvertImageDtype does: the value times 1/255 rounded to f32."""
    return x.astype(F32) * U8_TO_F32


def ref_convert(x, src, dst):
    if src == dst:
        return x
    if src == "u8":
        if dst == "f64":
            return x.astype(F64) * (1.0 / 255.0)
        v = to_float01(x)
        return {"f32": v, "f16": v.astype(np.float16), "bf16": bf16_round(v)}[dst]
    if dst == "u8":
        if src == "f64":
            return sat_u8(x * 255.5)
        return sat_u8(x.astype(F32) * F32(255.5))
    if dst == "bf16":
        return bf16_round(x.astype(F32))
    return x.astype(NP[dst])


def per_image(x, fn):
    if x.ndim == 3:
        return fn(x, 0)
    return np.stack([fn(x[n], n) for n in range(x.shape[0])])


def ref_brightness(x, seed, max_delta):
    def one(img, n):
        u = rng_f32(rng_bits(image_key(seed, n), 0))
        delta = (2.0 * float(u) - 1.0) * max_delta
        if img.dtype == F64:
            return img + delta
        if img.dtype == F32:
            return img + F32(delta)
        return sat_u8((to_float01(img) + F32(delta)) * F32(255.5))
    return per_image(x, one)


def ref_contrast(x, seed, lower, upper):
    def one(img, n):
        u = rng_f32(rng_bits(image_key(seed, n), 0))
        factor = lower + float(u) * (upper - lower)
        v = to_float01(img) if img.dtype == U8 else img
        mean = np.sum(v.astype(F64), axis=(0, 1)) / (img.shape[0] * img.shape[1])
        if img.dtype == F64:
            return (v - mean) * factor + mean
        mf, ff = mean.astype(F32), F32(factor)
        y = (v - mf) * ff + mf
        return y if img.dtype == F32 else sat_u8(y * F32(255.5))
    return per_image(x, one)


def ref_flip(x, seed):
    return per_image(x, lambda img, n: img[:, ::-1] if rng_f32(rng_bits(image_key(seed, n), 0)) < 0.5 else img)


def ref_crop(x, seed, size):
    h, w, c = size

    def one(img, n):
        key = image_key(seed, n)
        H, W, C = img.shape
        oh = rng_bits(key, 0) % (H - h + 1)
        ow = rng_bits(key, 1) % (W - w + 1)
        oc = rng_bits(key, 2) % (C - c + 1)
        return img[oh:oh + h, ow:ow + w, oc:oc + c]
    return per_image(x, one)


# ---- inputs -------------------------------------------------------------------------------------------

def image(rng, shape, dt):
    if dt == "u8":
        return rng.integers(0, 256, size=shape).astype(U8)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("i8", "i16", "i32", "i64"):
        return rng.integers(-100, 100, size=shape).astype(NP[dt])
    x = rng.random(shape).astype(F32 if dt in ("bf16", "f16") else NP[dt])
    if dt == "bf16":
        return bf16_trunc(x)
    return x.astype(NP[dt])


def fd(dt):
    return {0: "bf16"} if dt == "bf16" else None


def seed(a, b):
    return np.array([a, b], I64)


def cases(rng):
    out = []
    # ConvertImageDtype: every source and destination, values across the range and out of it
    for src in ("u8", "f32", "f64", "f16", "bf16"):
        for dst in ("u8", "f32", "f64", "f16", "bf16"):
            if src == "u8":
                x = np.arange(256, dtype=U8).reshape(16, 16, 1)
            else:
                x = rng.uniform(-0.2, 1.2, size=(7, 9, 3)).astype(F32)
                x[0, 0, :] = [0.0, 1.0, 0.5]
                x[0, 1, :] = [1.0 / 255, 254.5 / 255.5, 255.0 / 255.5]
                x = bf16_trunc(x) if src == "bf16" else x.astype(NP[src])
            exp = ref_convert(x, src, dst)
            out.append(Case("ConvertImageDtype_%s_to_%s" % (src, dst), "ConvertImageDtype", [x], [exp],
                            attrs={"dtype": DType(dst)}, feed_dtype=fd(src), rtol=0.0, atol=0.0))
    xnan = np.array([[[np.nan, np.inf, -np.inf]]], F32)
    out.append(Case("ConvertImageDtype_nan_inf", "ConvertImageDtype", [xnan], [np.array([[[0, 255, 0]]], U8)],
                    attrs={"dtype": DType("u8")}))
    out.append(Case("ConvertImageDtype_bad_dtype", "ConvertImageDtype", [image(rng, (2, 2, 1), "f32")],
                    attrs={"dtype": DType("i32")}, error=(ERR, "attribute 'dtype' is i32")))
    out.append(Case("ConvertImageDtype_bad_input", "ConvertImageDtype", [np.zeros((2, 2, 1), np.int32)],
                    attrs={"dtype": DType("f32")}, error=(ERR, "input 0 has dtype i32")))

    # Brightness and contrast: single images and batches, several seeds (negative ones too)
    seeds = [seed(0, 0), seed(7, 3), seed(-5, 1 << 40), seed(123456789, -2)]
    for dt in ("u8", "f32", "f64"):
        for k, sd in enumerate(seeds):
            shape = (13, 11, 3) if k % 2 == 0 else (4, 6, 5, 2)
            x = image(rng, shape, dt)
            tl = (1e-6, 1e-6) if dt != "u8" else (0.0, 0.0)
            out.append(Case("StatelessRandomBrightness_%s_%d" % (dt, k), "StatelessRandomBrightness", [x, sd],
                            [ref_brightness(x, sd, 0.3)], attrs={"max_delta": 0.3}, rtol=tl[0], atol=tl[1]))
            out.append(Case("StatelessRandomContrast_%s_%d" % (dt, k), "StatelessRandomContrast", [x, sd],
                            [ref_contrast(x, sd, 0.2, 1.8)], attrs={"lower": 0.2, "upper": 1.8},
                            rtol=tl[0], atol=tl[1]))
    x = image(rng, (5, 5, 3), "f32")
    out.append(Case("StatelessRandomBrightness_zero_delta", "StatelessRandomBrightness", [x, seeds[1]], [x],
                    attrs={"max_delta": 0.0}, rtol=0.0, atol=0.0))
    out.append(Case("StatelessRandomBrightness_bad_delta", "StatelessRandomBrightness", [x, seeds[1]],
                    attrs={"max_delta": -1.0}, error=(ERR, "max_delta")))
    out.append(Case("StatelessRandomContrast_bad_range", "StatelessRandomContrast", [x, seeds[1]],
                    attrs={"lower": 1.5, "upper": 0.5}, error=(ERR, "lower <= upper")))
    out.append(Case("StatelessRandomBrightness_bad_seed", "StatelessRandomBrightness", [x, np.array([1, 2, 3], I64)],
                    attrs={"max_delta": 0.1}, error=(ERR, "input 'seed'")))
    out.append(Case("StatelessRandomBrightness_bad_rank", "StatelessRandomBrightness",
                    [image(rng, (4, 4), "f32"), seeds[0]], attrs={"max_delta": 0.1}, error=(ERR, "input 'image'")))

    # Flip and crop move elements: exact for every dtype; batches of 8 see both outcomes of the flip
    for dt in ("f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"):
        for k, sd in enumerate(seeds[:2]):
            x = image(rng, (8, 5, 7, 3), dt)
            out.append(Case("StatelessRandomFlipLeftRight_%s_%d" % (dt, k), "StatelessRandomFlipLeftRight", [x, sd],
                            [ref_flip(x, sd)], feed_dtype=fd(dt), rtol=0.0, atol=0.0))
            out.append(Case("StatelessRandomCrop_%s_%d" % (dt, k), "StatelessRandomCrop", [x, sd],
                            [ref_crop(x, sd, (3, 4, 2))], attrs={"size": Ints([3, 4, 2])}, feed_dtype=fd(dt),
                            rtol=0.0, atol=0.0))
    for k, sd in enumerate(seeds):
        x = image(rng, (9, 10, 3), "u8")
        out.append(Case("StatelessRandomFlipLeftRight_single_%d" % k, "StatelessRandomFlipLeftRight", [x, sd],
                        [ref_flip(x, sd)], rtol=0.0, atol=0.0))
        out.append(Case("StatelessRandomCrop_single_%d" % k, "StatelessRandomCrop", [x, sd],
                        [ref_crop(x, sd, (5, 10, 3))], attrs={"size": Ints([5, 10, 3])}, rtol=0.0, atol=0.0))
    x = image(rng, (6, 6, 3), "f32")
    out.append(Case("StatelessRandomCrop_whole", "StatelessRandomCrop", [x, seeds[2]], [x],
                    attrs={"size": Ints([6, 6, 3])}, rtol=0.0, atol=0.0))
    out.append(Case("StatelessRandomCrop_too_large", "StatelessRandomCrop", [x, seeds[2]],
                    attrs={"size": Ints([7, 6, 3])}, error=(ERR, "larger than the image")))
    out.append(Case("StatelessRandomCrop_bad_size", "StatelessRandomCrop", [x, seeds[2]],
                    attrs={"size": Ints([2, 2])}, error=(ERR, "attribute 'size' has 2 values")))
    return out
