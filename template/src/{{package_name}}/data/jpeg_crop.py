"""A JPEG decoded for its crop: the crop box is drawn from the header before any pixel is decoded, then
the JPEG is decoded at the least of libjpeg's DCT scales that still gives the crop at least
CROP_FACTOR x image_size pixels a side, and only the crop (with the few pixels around it that the
resize reads) is converted to RGB, turned upright and resized.

    decode_crop(image, payload, image_size, generator, crop_scale_min) -> (uint8 [3, S, S], Geometry, extent)

`image` is the JPEG as Pillow opened it (its header read, no pixel decoded): its size and EXIF
orientation place the box. The box is drawn exactly as before this path existed (same sizes, same
draws from the same generator: a JPEG at least 2 x DRAFT_FACTOR x image_size a side is drawn on at
the scale Pillow's draft picks, `drawn_scale`), in the upright image's pixels, and mapped through the
orientation to the stored pixels (`upright_to_stored`). Two decoders give the same result to within
decode.CROP_TOLERANCE of the full decode + crop + resize:

- simplejpeg (the project's `jpeg` extra: libjpeg-turbo, bundled in its wheels), when it is installed:
  a faster decoder than Pillow's (the same libjpeg-turbo, less around it). CMYK JPEGs go through Pillow, whose
  conversion (Adobe's inverted CMYK included) the tests hold as the reference (simplejpeg 1.9 gives the
  same within a level; its floor, 1.8, is not checked for it).
- Pillow otherwise (`Image.draft`).
Both at the scales 1, 1/2, 1/4 and 1/8 (SCALES: libjpeg-turbo's others decode slower than in full).

What is saved, honestly: the DCT scale follows the crop, not the whole photo, and the colour
conversion, the EXIF turn and the copies touch the crop only. The JPEG is still entropy-decoded and
inverse-transformed in full at that scale: neither binding decodes a region alone (libjpeg-turbo's
partial decode, TurboJPEG 3's cropping region, is reached from Python through PyTurboJPEG, which needs
a system libturbojpeg that pip cannot install). docs/benchmarks.md measures both paths.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from PIL import ExifTags, Image

from ..transforms import Geometry, apply_geometry, as_tensor, centre_geometry, draw_geometry

try:  # the `jpeg` extra
    import simplejpeg
except ImportError:  # Pillow decodes alone
    simplejpeg = None

# The crop box of a JPEG at least 2 x DRAFT_FACTOR x image_size a side is drawn on the image at the
# reduced scale Pillow's draft picks for DRAFT_FACTOR x image_size (as before this path existed:
# the draws, and so every augmentation and a resumed run's, are unchanged).
DRAFT_FACTOR = 2
# The crop is decoded at the least DCT scale that keeps at least CROP_FACTOR x image_size pixels a side of it.
CROP_FACTOR = 1
# The reductions a JPEG is decoded at, largest first: Pillow's draft offers these; libjpeg-turbo also 3/8,
# 5/8, 6/8 and 7/8, but without its SIMD code those decode slower than the full scale (measured with
# simplejpeg on 500x400 photos: 7/8 1.6x, 6/8 1.2x, 5/8 1.1x the full decode's time; 1/2 0.7x).
SCALES = (8, 4, 2, 1)
# EXIF orientation -> the Pillow transpose that turns the stored pixels upright (ImageOps.exif_transpose's).
UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
INVERSE = {6: 8, 8: 6}  # the other orientations undo themselves
Box = tuple[float, float, float, float]


def drawn_scale(width: int, height: int, image_size: int) -> int:
    """The reduction 1/s of the image the crop box is drawn on: Pillow draft's choice for DRAFT_FACTOR x
    image_size when the image is at least twice that a side, else 1 (the draws of every earlier run)."""
    if min(width, height) < 2 * DRAFT_FACTOR * image_size:
        return 1
    fits = min(width // (DRAFT_FACTOR * image_size), height // (DRAFT_FACTOR * image_size))
    return next(scale for scale in SCALES if fits >= scale)


def stored_to_upright(box: Box, orientation: int, width: float, height: float) -> Box:
    """A box in the pixels of a stored image `width` x `height` -> the same pixels' box once the image
    is turned upright by its EXIF `orientation` (UPRIGHT)."""
    x0, y0, x1, y1 = box
    return {
        1: (x0, y0, x1, y1),
        2: (width - x1, y0, width - x0, y1),
        3: (width - x1, height - y1, width - x0, height - y0),
        4: (x0, height - y1, x1, height - y0),
        5: (y0, x0, y1, x1),
        6: (height - y1, x0, height - y0, x1),
        7: (height - y1, width - x1, height - y0, width - x0),
        8: (y0, width - x1, y1, width - x0),
    }[orientation]


def upright_to_stored(box: Box, orientation: int, width: float, height: float) -> Box:
    """A box in the upright image's pixels -> the stored image's (`width` x `height`, before the turn)."""
    turned = (height, width) if orientation >= 5 else (width, height)
    return stored_to_upright(box, INVERSE.get(orientation, orientation), *turned)


def decode_crop(
    image: Image.Image, payload: bytes, image_size: int, generator: torch.Generator | None, crop_scale_min: float
) -> tuple[torch.Tensor, Geometry, tuple[float, float]]:
    """decode.decode_image_drawn for a JPEG (same promises): the box drawn first, then only the scale the
    crop needs decoded (simplejpeg when installed, else Pillow) and only the crop turned and resized."""
    width, height = image.size
    orientation = image.getexif().get(ExifTags.Base.Orientation, 1)
    orientation = orientation if orientation in UPRIGHT else 1
    scale = drawn_scale(width, height, image_size)
    extent = (width / scale, height / scale)
    drawn = (math.ceil(extent[0]), math.ceil(extent[1]))
    if orientation >= 5:  # a quarter turn: the upright image is the stored one's height wide
        extent, drawn = extent[::-1], drawn[::-1]
    geometry = centre_geometry(*drawn) if generator is None else draw_geometry(*drawn, generator, crop_scale_min)
    upright_width, upright_height = extent[0] * scale, extent[1] * scale  # the stored pixels, upright
    # A box drawn on a reduced image may reach into its last, partial pixel: cut at the image's edge.
    x0, y0, x1, y1 = (side * scale for side in geometry.box)
    box = upright_to_stored((x0, y0, min(x1, upright_width), min(y1, upright_height)), orientation, width, height)
    decoded, reduction = decoded_for(image, payload, box, image_size)
    crop, inside = upright_crop(decoded, tuple(side * reduction for side in box), orientation, image_size)
    out = apply_geometry(crop, Geometry(crop.width, crop.height, inside, geometry.flip), image_size)
    return as_tensor(out), geometry.extended_to(*extent), extent


def upright_crop(
    decoded: Image.Image | np.ndarray, box: Box, orientation: int, image_size: int
) -> tuple[Image.Image, Box]:
    """The decoded pixels the resize of `box` (decoded stored pixels) reads, in upright RGB, and the box in
    them. An upright RGB image from Pillow is resized where it lies (a copy of the crop would be a copy
    more); simplejpeg's array, a grayscale or CMYK image or one to turn: only the crop is copied, converted
    and turned."""
    if isinstance(decoded, Image.Image) and decoded.mode == "RGB" and orientation == 1:
        return decoded, box
    height, width = decoded.shape[:2] if isinstance(decoded, np.ndarray) else decoded.size[::-1]
    region = crop_region(box, (width, height), image_size)
    if isinstance(decoded, np.ndarray):  # the array's rows of the crop: Pillow copies only them
        crop = Image.fromarray(decoded[region[1] : region[3], region[0] : region[2]])
    else:
        crop = decoded.crop(region)
    inside = (box[0] - region[0], box[1] - region[1], box[2] - region[0], box[3] - region[1])
    inside = stored_to_upright(inside, orientation, region[2] - region[0], region[3] - region[1])
    return to_upright_rgb(crop, orientation), inside


def decoded_for(
    image: Image.Image, payload: bytes, box: Box, image_size: int
) -> tuple[Image.Image | np.ndarray, float]:
    """The stored JPEG decoded at the least scale f (of SCALES) that keeps CROP_FACTOR x image_size pixels
    of the crop `box` (stored pixels) a side, and f: by simplejpeg (an RGB array) when installed, else by
    Pillow's draft (the image, loaded)."""
    width, height = image.size
    crop_side = min(box[2] - box[0], box[3] - box[1])
    reduction = next(s for s in SCALES if crop_side / s >= CROP_FACTOR * image_size or s == 1)
    if simplejpeg is not None and image.mode in ("RGB", "L"):  # CMYK through Pillow (see above)
        size = (math.ceil(width / reduction), math.ceil(height / reduction))
        if reduction > 1 and all(
            (math.ceil(width * n / 8), math.ceil(height * n / 8)) != size for n in range(1, 9) if n != 8 // reduction
        ):  # a size only this scale gives: simplejpeg (the least size of the eight at least this one) picks it
            return simplejpeg.decode_jpeg(payload, "RGB", min_width=size[0], min_height=size[1]), 1 / reduction
        return simplejpeg.decode_jpeg(payload, "RGB"), 1.0
    drafted = image.draft(None, (max(1, width // reduction), max(1, height // reduction))) if reduction > 1 else None
    image.load()
    return image, (drafted[1][2] / width if drafted else 1.0)


def crop_region(box: Box, size: tuple[int, int], image_size: int) -> tuple[int, int, int, int]:
    """The whole pixels around `box` that Pillow's bilinear resize of it to image_size reads: its triangle
    filter reaches out by the reduction (box side / image_size) when it reduces, one pixel when it
    enlarges; one pixel more for rounding. Cropping to these leaves the resize's result unchanged."""
    margin = math.ceil(max((box[2] - box[0]) / image_size, (box[3] - box[1]) / image_size, 1.0)) + 1
    return (
        max(0, math.floor(box[0]) - margin),
        max(0, math.floor(box[1]) - margin),
        min(size[0], math.ceil(box[2]) + margin),
        min(size[1], math.ceil(box[3]) + margin),
    )


def to_upright_rgb(crop: Image.Image, orientation: int) -> Image.Image:
    """A crop of the stored pixels in RGB (a grayscale or CMYK JPEG's converted), turned upright."""
    crop = crop if crop.mode == "RGB" else crop.convert("RGB")
    return crop.transpose(UPRIGHT[orientation]) if orientation in UPRIGHT else crop
