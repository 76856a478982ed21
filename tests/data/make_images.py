"""Reference images for tests/test_image.c, written with Pillow (which decodes JPEG with libjpeg-turbo,
like weft) and numpy at test time.

make_images.py OUTDIR writes
    rgb.jpg, gray.jpg            37x23 JPEGs at quality 90 (the RGB one 4:2:0 subsampled, Pillow's default)
    rgb444.jpg, progressive.jpg  the RGB image without subsampling, and progressive (4:2:0)
    gray.png, rgb.png, rgba.png  37x23 PNGs (8-bit L, RGB, RGBA), rgb16.png (16-bit RGB) and palette.png
                                 (16 colours, one of them transparent)
    NAME_cK.npy                  the image NAME decoded by Pillow to K channels (0: as stored), u8 [H, W, C]:
                                 JPEG gray output through Pillow's draft("L") (libjpeg's own YCbCr to gray
                                 conversion, as weft asks of libjpeg), every other conversion with
                                 Image.convert
    truncated.jpg, truncated.png the first half of rgb.jpg / rgb.png
    random.bin                   1000 random bytes
"""
import os
import sys

import numpy as np
from PIL import Image

W, H = 37, 23


def pattern(rng, channels):
    """Smooth gradients with noise: JPEG has real work, and every value range is used."""
    y, x = np.mgrid[0:H, 0:W]
    planes = [(x * 255 // (W - 1)), (y * 255 // (H - 1)), ((x + y) * 4) % 256, (x * y) % 256]
    a = np.stack(planes[:channels], axis=-1).astype(np.int64)
    a += rng.integers(-20, 21, size=a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def arr(im, k):
    a = np.asarray(im)
    if a.ndim == 2:
        a = a[:, :, None]
    assert a.dtype == np.uint8 and a.shape[2] == (k or a.shape[2]), (a.shape, k)
    return np.ascontiguousarray(a)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(16)
    rgb, gray, rgba = pattern(rng, 3), pattern(rng, 1)[:, :, 0], pattern(rng, 4)

    def save(name, a):
        np.save(os.path.join(out, name + ".npy"), a)

    Image.fromarray(rgb, "RGB").save(os.path.join(out, "rgb.jpg"), quality=90)
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "rgb444.jpg"), quality=90, subsampling=0)
    Image.fromarray(gray, "L").save(os.path.join(out, "gray.jpg"), quality=90)
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "progressive.jpg"), quality=90, progressive=True)
    for name in ("rgb", "rgb444", "progressive"):
        p = os.path.join(out, name + ".jpg")
        with Image.open(p) as im:
            save(name + "_c0", arr(im, 3))
            save(name + "_c3", arr(im, 3))
        with Image.open(p) as im:
            im.draft("L", im.size)  # libjpeg outputs gray itself (the Y channel)
            assert im.mode == "L"
            save(name + "_c1", arr(im, 1))
    with Image.open(os.path.join(out, "gray.jpg")) as im:
        assert im.mode == "L"
        save("gray_c0", arr(im, 1))
        save("gray_c1", arr(im, 1))
        save("gray_c3", arr(im.convert("RGB"), 3))

    Image.fromarray(gray, "L").save(os.path.join(out, "gray.png"))
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "rgb.png"))
    Image.fromarray(rgba, "RGBA").save(os.path.join(out, "rgba.png"))
    save("gray_png_c0", arr(Image.fromarray(gray, "L"), 1))
    save("gray_png_c3", arr(Image.fromarray(gray, "L").convert("RGB"), 3))
    save("gray_png_c4", arr(Image.fromarray(gray, "L").convert("RGBA"), 4))
    save("rgb_png_c0", rgb)
    save("rgb_png_c1", arr(Image.fromarray(rgb, "RGB").convert("L"), 1))
    save("rgb_png_c4", arr(Image.fromarray(rgb, "RGB").convert("RGBA"), 4))
    save("rgba_png_c0", rgba)
    save("rgba_png_c3", arr(Image.fromarray(rgba, "RGBA").convert("RGB"), 3))
    # a palette with one transparent entry (tRNS): expanded to RGBA
    pal = Image.fromarray(rgb, "RGB").quantize(16)
    pal.save(os.path.join(out, "palette.png"), transparency=3)
    with Image.open(os.path.join(out, "palette.png")) as im:
        save("palette_png_c0", arr(im.convert("RGBA"), 4))
        save("palette_png_c3", arr(im.convert("RGB"), 3))
    # 16-bit RGB, written by numpy's bytes and Pillow's PNG encoder for raw 16-bit rows is not
    # available: write it with zlib directly (a valid PNG: signature, IHDR, one IDAT, IEND)
    import struct
    import zlib
    rgb16 = rgb.astype(np.uint16) * 257 + rng.integers(0, 256, size=rgb.shape).astype(np.uint16) % 200
    raw = b"".join(b"\x00" + rgb16[r].astype(">u2").tobytes() for r in range(H))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    png16 = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 16, 2, 0, 0, 0)) +
             chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(os.path.join(out, "rgb16.png"), "wb") as f:
        f.write(png16)
    save("rgb16_png_c0", (rgb16 >> 8).astype(np.uint8))  # the high byte of each sample

    for name in ("rgb.jpg", "rgb.png"):
        with open(os.path.join(out, name), "rb") as f:
            data = f.read()
        with open(os.path.join(out, "truncated." + name.split(".")[1]), "wb") as f:
            f.write(data[:len(data) // 2])
    with open(os.path.join(out, "random.bin"), "wb") as f:
        f.write(rng.integers(0, 256, size=1000).astype(np.uint8).tobytes())
    print("wrote reference images to", out)


if __name__ == "__main__":
    main()
