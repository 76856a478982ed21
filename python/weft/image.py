"""tf.image: decoding, resizing, dtype conversion and the random augmentations, as weft ops."""
import numpy as np

from . import dtypes as _dt, errors
from ._ops_seed import seed_input
from .io import decode_jpeg, decode_png  # noqa: F401
from .ops import apply, cast, convert_to_tensor, const


class ResizeMethod:
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"


def resize(images, size, method=ResizeMethod.BILINEAR, preserve_aspect_ratio=False, antialias=False, name=None):
    """tf.image.resize: [H, W, C] or [N, H, W, C] to `size` (half-pixel centres, TensorFlow 2's
    default), float32 out (nearest keeps the dtype). weft's Resize (ONNX's) over the two spatial axes."""
    if antialias or preserve_aspect_ratio:
        raise errors.UnimplementedError(message="tf.image.resize: antialias and preserve_aspect_ratio are not in weft")
    images = convert_to_tensor(images)
    r = len(images.shape)
    if r not in (3, 4):
        raise errors.InvalidArgumentError(message="tf.image.resize: images must be rank 3 or 4, got shape %s" %
                                          images.shape.as_list())
    axes = [0, 1] if r == 3 else [1, 2]
    modes = {"bilinear": ("linear", {}), "nearest": ("nearest", {"nearest_mode": "round_prefer_ceil"}),
             "bicubic": ("cubic", {"cubic_coeff_a": -0.5})}
    if method not in modes:
        raise errors.UnimplementedError(message="tf.image.resize: method %r is not in weft (bilinear, nearest, "
                                        "bicubic)" % method)
    mode, extra = modes[method]
    x = images if method == "nearest" else cast(images, _dt.float32)
    sizes = const(np.asarray(list(size), dtype=np.int64))
    at = {"mode": mode, "coordinate_transformation_mode": "half_pixel", "axes": axes}
    at.update(extra)
    return apply("Resize", [x, None, None, sizes], at)


def convert_image_dtype(image, dtype, saturate=False, name=None):
    return apply("ConvertImageDtype", [image], {"dtype": _dt.as_dtype(dtype)})


def random_brightness(image, max_delta, seed=None):
    if max_delta < 0:
        raise errors.InvalidArgumentError(message="random_brightness: max_delta must be non-negative, got %r" % max_delta)
    return apply("StatelessRandomBrightness", [image, seed_input(seed)], {"max_delta": float(max_delta)})


def random_contrast(image, lower, upper, seed=None):
    return apply("StatelessRandomContrast", [image, seed_input(seed)], {"lower": float(lower), "upper": float(upper)})


def random_flip_left_right(image, seed=None):
    return apply("StatelessRandomFlipLeftRight", [image, seed_input(seed)])


def random_crop(value, size, seed=None, name=None):
    return apply("StatelessRandomCrop", [value, seed_input(seed)], {"size": [int(s) for s in size]})




def stateless_random_brightness(image, max_delta, seed):
    return apply("StatelessRandomBrightness", [image, const(np.asarray(seed, np.int64))], {"max_delta": float(max_delta)})


def stateless_random_contrast(image, lower, upper, seed):
    return apply("StatelessRandomContrast", [image, const(np.asarray(seed, np.int64))],
                 {"lower": float(lower), "upper": float(upper)})


def stateless_random_flip_left_right(image, seed):
    return apply("StatelessRandomFlipLeftRight", [image, const(np.asarray(seed, np.int64))])
