"""prep's `--max-side N` (opt-in, as FFCV's max resolution): an image whose longer side exceeds N
pixels is resized once, at prep, so that its longer side is N (aspect kept, Lanczos), and stored
re-encoded in its own format: a JPEG at `--max-side-quality` (default 90), a WebP at that quality,
a PNG or BMP losslessly. Every worker of every epoch then decodes the smaller image.

- The EXIF orientation is applied first and the image stored upright (its EXIF block dropped).
- An image no larger than N, and one in another format (GIF, TIFF, an animation), is stored byte for byte.
- A mask field of a resized sample is resized to the image's new size with nearest (ids are never
  blended) and stored as a PNG, lossless: mask and image stay aligned pixel for pixel.
- An image field (kind image) besides the payload is bounded on its own.

Without the option prep stores every payload byte for byte, as the source gave it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, ImageOps

from ..data.decode import IMAGE_EXTENSIONS
from ..data.sample import Sample
from ..harness.errors import DataError

DEFAULT_QUALITY = 90  # JPEG and WebP quality of a re-encoded image
LOSSLESS = {"PNG", "BMP"}  # formats re-encoded losslessly
LOSSY = {"JPEG", "WEBP"}  # formats re-encoded at the recorded quality


@dataclass
class MaxSide:
    """Bounds the images of the samples `bounded` is given; `resized` counts the samples changed."""

    side: int
    quality: int = DEFAULT_QUALITY
    resized: int = 0

    def __post_init__(self) -> None:
        if self.side < 1:
            raise DataError(f"--max-side {self.side}: give the longest side to store in pixels, 1 or more")
        if not 1 <= self.quality <= 100:
            raise DataError(f"--max-side-quality {self.quality}: give a JPEG quality from 1 to 100 (default 90)")

    def bounded(self, sample: Sample, kinds: dict[str, str]) -> Sample:
        """`sample` with its images bounded to `side` (kinds: {field name: kind} of its other fields)."""
        payload, size = sample.payload, None
        if sample.extension in IMAGE_EXTENSIONS:
            payload, size = self.image(sample.payload)
        fields = []
        for name, data in sample.fields:
            if kinds.get(name) == "image":
                data, _ = self.image(data)
            elif kinds.get(name) == "mask" and size is not None:
                data = resized_mask(data, *size)
            fields.append((name, data))
        if payload is sample.payload and all(a is b for (_, a), (_, b) in zip(fields, sample.fields, strict=True)):
            return sample
        self.resized += 1
        return Sample(payload, sample.extension, sample.label, sample.source, tuple(fields))

    def manifest(self) -> dict[str, dict[str, int]]:
        """manifest.json's record of it: the bound, the quality of what was re-encoded, how many samples were."""
        record = {"side": self.side, "quality": self.quality, "resized": self.resized}
        return {"max_side": record}

    def image(self, data: bytes) -> tuple[bytes, tuple[int, int, int, int] | None]:
        """(the image's bytes, bounded; (old width, old height, new width, new height) upright) or
        (`data` itself, None) when it is small enough or not one of the formats re-encoded."""
        try:
            with Image.open(io.BytesIO(data)) as image:
                if image.format not in LOSSY | LOSSLESS or getattr(image, "n_frames", 1) > 1:
                    return data, None
                if max(image.size) <= self.side:
                    return data, None
                fmt, icc = image.format, image.info.get("icc_profile")
                upright = ImageOps.exif_transpose(image)  # a phone's photo: stored upright from now on
                width, height = upright.size
                new = bounded_size(width, height, self.side)
                if upright.mode in ("1", "P"):  # resized through colours, not palette indices
                    alpha = upright.mode == "P" and "transparency" in upright.info
                    upright = upright.convert("RGBA" if alpha else ("L" if upright.mode == "1" else "RGB"))
                small = upright.resize(new, Image.Resampling.LANCZOS)
                out = io.BytesIO()
                options = {"quality": self.quality} if fmt in LOSSY else {}
                if fmt == "JPEG" and small.mode not in ("L", "RGB", "CMYK"):
                    small = small.convert("RGB")
                small.save(out, format=fmt, **options, **({"icc_profile": icc} if icc else {}))
                return out.getvalue(), (width, height, *new)
        except (OSError, ValueError, Image.DecompressionBombError):
            return data, None  # prep's check names a file that does not decode


def bounded_size(width: int, height: int, side: int) -> tuple[int, int]:
    """(width, height) scaled so that the LONGER side is `side`, the aspect ratio kept."""
    scale = side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def resized_mask(data: bytes, width: int, height: int, new_width: int, new_height: int) -> bytes:
    """A mask of an image resized from width x height to new_width x new_height: its ids resized with
    nearest to the image's new size (scaled alike when the mask has another size), stored as a PNG."""
    try:
        with Image.open(io.BytesIO(data)) as mask:
            mask.load()
            if mask.size == (width, height):
                size = (new_width, new_height)
            else:
                size = (max(1, round(mask.width * new_width / width)), max(1, round(mask.height * new_height / height)))
            out = io.BytesIO()
            mask.resize(size, Image.Resampling.NEAREST).save(out, format="PNG")
            return out.getvalue()
    except (OSError, ValueError, Image.DecompressionBombError):
        return data  # prep's check names a mask that does not decode
