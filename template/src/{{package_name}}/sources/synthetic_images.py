"""The embedded default source: label-sorted synthetic images (`prep synthetic`)."""

from __future__ import annotations

import colorsys
import io
from collections.abc import Iterator

import numpy as np

from ..data.sample import Sample
from ..harness.errors import DataError
from .source import Source

SYNTHETIC_SIZE = 32  # pixels per side of the embedded images (prep synthetic --image-size)


def synthetic_image(label: int, num_classes: int, rng: np.random.Generator, size: int = SYNTHETIC_SIZE) -> np.ndarray:
    """[S, S, 3] uint8: a shape in the class's colour (hue label/C) on a dark noisy background.

    Colour and shape both carry the class; position, size, hue jitter and pixel noise make
    every sample different, so a small CNN has something to learn and nothing to memorise.
    """
    image = np.empty((size, size, 3), dtype=np.float32)
    image[:] = rng.uniform(0, 70, size=3)
    colour = class_colour(label, num_classes, rng)
    cx, cy = rng.uniform(0.3 * size, 0.7 * size, size=2)
    radius = rng.uniform(0.18 * size, 0.3 * size)
    image[shape_pixels(label % 3, cx, cy, radius, size)] = colour
    image += rng.normal(0, 10, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def class_colour(label: int, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """RGB 0..255 of class `label` of `num_classes`: hue label/C within a quarter of a class's spacing, so
    that no two classes share a hue; saturated and bright, against the dark background."""
    hue = (label + rng.uniform(-0.25, 0.25)) / num_classes % 1.0
    return 255 * np.array(colorsys.hsv_to_rgb(hue, rng.uniform(0.7, 1.0), rng.uniform(0.75, 1.0)))


def shape_pixels(shape: int, cx: float, cy: float, radius: float, size: int) -> np.ndarray:
    """[S, S] bool: the pixels of shape 0 (a disc), 1 (a square) or 2 (a ring) centred at (cx, cy)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    dx, dy = xx - cx, yy - cy
    if shape == 0:  # disc
        return dx**2 + dy**2 < radius**2
    if shape == 1:  # square
        return np.maximum(abs(dx), abs(dy)) < 0.8 * radius
    return abs(np.sqrt(dx**2 + dy**2) - 0.75 * radius) < 0.25 * radius  # ring


def encode_png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)  # noise barely compresses: go fast
    return buffer.getvalue()


def synthetic_sample(
    position: int, num_samples: int, num_classes: int, seed: int, stream: int = 0, image_size: int = SYNTHETIC_SIZE
) -> Sample:
    """Sample `position` of the synthetic set, drawn from its own rng (seed, stream, position)."""
    label = position * num_classes // num_samples
    pixels = synthetic_image(label, num_classes, np.random.default_rng([seed, stream, position]), image_size)
    return Sample(encode_png(pixels), "png", label)


def synthetic(
    num_samples: int, num_classes: int, seed: int, stream: int = 0, image_size: int = SYNTHETIC_SIZE
) -> Source:
    """Encoded PNG images of `image_size` pixels a side, stored sorted by label: label of sample i is i * C // N.

    Any sample can be made again without the others (`synthetic_sample`). `stream` picks an
    independent draw (0: training, 1: held out). The PNGs are noisy, so they barely compress:
    a side of 32 makes payloads of about 2.4 KB, 64 about 9.4 KB, 128 about 38 KB (bench.py uses this to
    measure realistic sample sizes); decode.py resizes them all to its IMAGE_SIZE.
    """
    if num_samples < 1 or num_classes < 1:
        raise DataError("--num-samples and --num-classes must be at least 1")
    if image_size < 8:
        raise DataError(f"--image-size {image_size} is too small: use at least 8 pixels")
    if num_classes > num_samples:
        raise DataError(f"--num-classes {num_classes} exceeds --num-samples {num_samples}: every class needs a sample")

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        for position in range(num_samples):
            if selected is None or selected[position]:
                sample = synthetic_sample(position, num_samples, num_classes, seed, stream, image_size)
                yield Sample(sample.payload, sample.extension, sample.label, f"synthetic sample {position}")

    return Source(
        num_samples,
        [f"class_{c}" for c in range(num_classes)],
        read,
        {"kind": "synthetic", "num_classes": num_classes, "seed": seed, "stream": stream, "image_size": image_size},
        len(next(read(None)).payload) * num_samples,  # every image has about the first one's size
    )
