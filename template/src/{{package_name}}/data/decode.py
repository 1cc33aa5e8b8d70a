"""Payload bytes -> tensors, in the DataLoader workers: the one place to change for a new modality.

    decode(payload, extension, image_size=IMAGE_SIZE, generator=None, reduced_scale=True, tokenizer=BYTES) -> Tensor

- images (png, jpg, jpeg, webp, bmp, gif): Pillow, turned upright by their EXIF orientation,
  converted to RGB (`to_rgb`; an upright RGB JPEG skips both: no copy), then transforms.py: the eval transform (the shorter side
  resized to `image_size`, centre-cropped to a square) or, given a generator (training with
  augmentation), the train transform: uint8 [3, S, S], S = image_size (IMAGE_SIZE, 32, by
  default; train.py's --image-size). uint8 keeps the worker-to-trainer hand-off 4x smaller
  than float; the model scales to [0, 1]. Every mode Pillow opens gets there:
  16-bit and 32-bit integer images are scaled from 0..65535 to 0..255 (not clipped at 255),
  float images are taken as 0..1, and transparency (an alpha channel, or a palette or
  tRNS transparent colour) is composited on BACKGROUND (white). A JPEG is decoded for its crop
  (jpeg_crop.py): the crop box is drawn from its header first, then it is decoded at the least DCT
  scale (1/8 .. 1) that still gives the crop image_size pixels a side, by simplejpeg (libjpeg-turbo,
  the `jpeg` extra) when installed, else by Pillow's draft mode; only the crop is converted, turned
  upright and resized. Within CROP_TOLERANCE of the full decode + crop + resize (mean absolute
  difference, out of 255; tests/test_decode.py checks it for every kind of JPEG). `reduced_scale=False`
  decodes every pixel with Pillow and crops after (bench.py's full-scale row: the decode ceiling).
- npy: numpy's .npy format with allow_pickle=False (data, never code): float32.
- txt: UTF-8 text as its token ids (text.py: the recipe's tokenizer; by default its UTF-8 bytes,
  uint8 [length], whole up to TEXT_MAX_BYTES). A batch of texts is zero-padded to its longest,
  with each text's length in batch["lengths"] (id 0 is padding: the text model leaves it out).

Every other sample of a batch must decode to the same shape, so that the batch stacks. The
image transforms (augmentation) are in transforms.py, the tokenizers in text.py; another
modality's decoding (audio) goes in `decode`. An extension without a decoder, or a payload that does
not decode, is a DataError naming the sample.

`decode_batch(records, num_classes, image_size=..., augment=Augment(seed, epoch, crop_scale_min), tokenizer=...)` is what a
training batch is made with in the DataLoader workers: each image's draws come from
streams.sample_generator(seed, epoch, its key), so a sample is augmented alike whichever
rank or worker decodes it, and after a resume. Without `augment` (the held-out set,
evaluation, --no-augment) nothing is random.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import ExifTags, Image, ImageOps

from ..harness.errors import DataError
from ..transforms import (
    SMALL_CROP_SCALE_MIN,
    Geometry,
    apply_geometry,
    as_tensor,
    centre_geometry,
    draw_geometry,
    mask_transform,
)
from .jpeg_crop import decode_crop
from .streams import sample_generator
from .text import BYTES, MAX_TOKENS, Tokenizer

IMAGE_SIZE = 32  # the default side of a decoded image (train.py --image-size)
TEXT_MAX_BYTES = MAX_TOKENS  # bytes (ids) of a text kept: longer texts are cut (a cap on a batch's memory)
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "webp", "bmp", "gif"})
BACKGROUND = (255, 255, 255)  # what transparent pixels show: white, as a browser shows them
# A JPEG decoded for its crop against the full decode + crop + resize: mean |difference| per pixel value,
# out of 255 (the derivation: tests/test_decode.py, test_a_jpeg_decoded_for_its_crop_...).
CROP_TOLERANCE = 3.0
JPEG_MODES = frozenset({"RGB", "L", "CMYK"})  # the JPEGs decoded for their crop (jpeg_crop.py): all Pillow opens


@dataclass(frozen=True)
class Record:
    """One stored sample as a backend read it: the key and label come from the stored data."""

    key: str
    label: int  # sample.NO_LABEL when the data set has no class field
    payload: bytes
    extension: str
    where: str  # the file or shard it came from, for error messages
    fields: tuple[tuple[str, str, bytes], ...] = ()  # the other fields: (name, kind, bytes), in the schema's order


def to_rgb(image: Image.Image) -> Image.Image:
    """Any image Pillow opens -> 8-bit RGB as it is meant to be seen: upright, full range, opaque. An
    upright RGB image (a photo's usual JPEG) is returned as it is, loaded: no full-image copy that
    changes nothing (ImageOps.exif_transpose copies an upright image, convert("RGB") an RGB one)."""
    image.load()  # as exif_transpose does first: some formats read their tags with the pixels
    if image.getexif().get(ExifTags.Base.Orientation, 1) != 1:  # a phone's photo is stored sideways, with a tag
        image = ImageOps.exif_transpose(image)
    if image.mode.startswith("I"):  # I;16, I;16B, ... and I: 16-bit values, scaled (convert clips at 255)
        pixels = np.asarray(image).astype(np.float64)
        image = Image.fromarray(np.clip(np.rint(pixels / 257), 0, 255).astype(np.uint8), "L")
    elif image.mode == "F":  # floating point: taken as 0..1
        image = Image.fromarray(np.clip(np.rint(np.asarray(image) * 255), 0, 255).astype(np.uint8), "L")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        # Palette and tRNS transparency become alpha too; La (premultiplied) goes through LA.
        rgba = (image.convert("LA") if image.mode == "La" else image).convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (*BACKGROUND, 255)), rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")  # LAB too: Pillow >= 9.4 converts it through ImageCms


class SampleError(DataError):
    """A DataError about one stored sample: `sample <key> (<where>) <problem>`, so that the
    loader can add the sample's source (sample_sources.named_by_source)."""

    def __init__(self, key: str, where: str, problem: str) -> None:
        super().__init__(f"sample {key} ({where}) {problem}")
        self.key, self.where, self.problem = key, where, problem

    def __reduce__(self) -> tuple:  # passed from a worker to the trainer by pickle
        return SampleError, (self.key, self.where, self.problem)


# What a payload that does not decode raises (UnicodeDecodeError is a ValueError).
DECODE_ERRORS = (ValueError, OSError, EOFError, SyntaxError, Image.DecompressionBombError)


@dataclass(frozen=True)
class Augment:
    """Augment a training batch of `epoch`: each sample's draws from (seed, epoch, its key); the random
    resized crop keeps at least `crop_scale_min` of the image's area (the recipe's --crop-scale-min)."""

    seed: int
    epoch: int
    crop_scale_min: float = SMALL_CROP_SCALE_MIN


def decode_image(
    payload: bytes, image_size: int = IMAGE_SIZE, generator: torch.Generator | None = None, reduced_scale: bool = True
) -> torch.Tensor:
    """One encoded image -> uint8 [3, S, S]: the train transform with `generator`, else the eval transform
    (decode_image_drawn, which every image goes through: one place for the reduced-scale decode)."""
    return decode_image_drawn(payload, image_size, generator, reduced_scale)[0]


def decode_image_drawn(
    payload: bytes,
    image_size: int,
    generator: torch.Generator | None,
    reduced_scale: bool = True,
    crop_scale_min: float = SMALL_CROP_SCALE_MIN,
) -> tuple[torch.Tensor, Geometry, tuple[float, float]]:
    """decode_image, also returning the geometry it applied (the train transform's draws, or the eval
    transform's centre square), for the sample's other spatial fields (its masks) to follow, and the
    image's (width, height) in the pixels of that geometry's box: the whole stored image's extent in the
    decoded pixels (a large JPEG's box is drawn on it at a reduced scale 1/s, ceil(side / s) pixels a side,
    of which side / s are the image: the draft box, jpeg_crop.drawn_scale)."""
    with Image.open(io.BytesIO(payload)) as image:
        if reduced_scale and image.format == "JPEG" and image.mode in JPEG_MODES:
            return decode_crop(image, payload, image_size, generator, crop_scale_min)
        extent = stored = image.size
        image = to_rgb(image)
        if image.size != stored:  # turned a quarter by its EXIF orientation
            extent = extent[::-1]
        geometry = (
            centre_geometry(image.width, image.height)
            if generator is None
            else draw_geometry(image.width, image.height, generator, crop_scale_min)
        )
        return as_tensor(apply_geometry(image, geometry, image_size)), geometry.extended_to(*extent), extent


# A mask's modes: class ids in one channel. "1" (bits) reads as 0/1, not Pillow's 0/255 of "L".
MASK_MODES = {"1": "L", "L": "L", "P": "P", "I": "I", "I;16": "I", "I;16B": "I", "I;16L": "I"}
ASPECT_TOLERANCE = 0.02  # a mask's width/height against its image's: beyond this it was not drawn on it


def decode_mask(data: bytes, image_size: int, geometry: Geometry | None) -> torch.Tensor:
    """An encoded single-channel image of class ids -> int64 [S, S], through its image's geometry
    (nearest neighbour); without an image (a payload that is not one), the centre square."""
    return fitted_mask(stored_mask(data), image_size, geometry)


def stored_mask(data: bytes) -> Image.Image:
    """An encoded mask's class ids as stored, in mode L, P or I (a pixel's value its id); ValueError
    for a mask of colours. prep counts the ids of it (sources/verify.py)."""
    with Image.open(io.BytesIO(data)) as mask:
        if mask.mode not in MASK_MODES:
            raise ValueError(
                f"a mask in mode {mask.mode} (colours?): store class ids as a single-channel (L, P or 16-bit) PNG"
            )
        if mask.mode == "1":
            return Image.fromarray(np.asarray(mask).astype(np.uint8))
        return mask.convert(MASK_MODES[mask.mode])  # a loaded copy, in every mode


def fitted_mask(mask: Image.Image, image_size: int, geometry: Geometry | None) -> torch.Tensor:
    """A stored mask (`stored_mask`) -> uint8 [S, S] (int32 for a 16-bit mask), through its image's geometry
    (its own centre square without)."""
    if geometry is None:
        geometry = centre_geometry(mask.width, mask.height)
    aspect, image_aspect = mask.width / mask.height, geometry.width / geometry.height
    if abs(aspect / image_aspect - 1) > ASPECT_TOLERANCE:
        raise ValueError(
            f"the mask is {mask.width}x{mask.height} and its image {geometry.width:g}x{geometry.height:g}: "
            "a mask must cover its image (same aspect ratio)"
        )
    return mask_transform(mask, image_size, geometry)


def decode_array(payload: bytes) -> torch.Tensor:
    array = np.lib.format.read_array(io.BytesIO(payload), allow_pickle=False)
    return torch.from_numpy(np.asarray(array, dtype=np.float32))


def decode_text(payload: bytes, tokenizer: Tokenizer = BYTES) -> torch.Tensor:
    return tokenizer.encode(payload)


def padded_texts(tensors: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Texts of any length -> (their ids [B, longest] zero-padded, in the tokenizer's dtype, and int64 [B]
    lengths); stacked by
    default_collate, which in a worker puts the batch straight into shared memory."""
    lengths = torch.tensor([len(t) for t in tensors], dtype=torch.int64)
    longest = max(int(lengths.max()), 1)
    padded = [torch.nn.functional.pad(t, (0, longest - len(t))) for t in tensors]
    return torch.utils.data.default_collate(padded), lengths


DECODERS = {
    **{extension: decode_image for extension in IMAGE_EXTENSIONS},
    "npy": decode_array,
    "txt": decode_text,
}


def can_decode(extension: str) -> bool:
    return extension in DECODERS


def known_extensions() -> str:
    return ", ".join(sorted(DECODERS))


def decode(
    payload: bytes,
    extension: str,
    image_size: int = IMAGE_SIZE,
    generator: torch.Generator | None = None,
    reduced_scale: bool = True,
    tokenizer: Tokenizer = BYTES,
) -> torch.Tensor:
    """One sample's tensor; raises ValueError/OSError for a payload that does not decode. Images
    are `image_size` a side, augmented (transforms.train_transform) when given a generator;
    vectors and texts are never augmented; texts are `tokenizer`'s ids (text.py)."""
    if extension in IMAGE_EXTENSIONS:
        return decode_image(payload, image_size, generator, reduced_scale)
    if extension == "txt":
        return decode_text(payload, tokenizer)
    return DECODERS[extension](payload)


def first_line(err: BaseException) -> str:
    """The error's first line, without the in-memory file Pillow names ("cannot identify image file <_io...>")."""
    line = str(err).splitlines()[0] if str(err) else type(err).__name__
    return re.sub(r" <_io\.BytesIO object at 0x[0-9a-f]+>", "", line)


MakeBatch = Callable[[Sequence[Record], int], dict]  # (records, num_classes) -> batch, run in the workers


def decode_field(
    kind: str,
    data: bytes,
    image_size: int,
    geometry: Geometry | None,
    image_shape: tuple[float, float] | None = None,
    tokenizer: Tokenizer = BYTES,
) -> Any:
    """One field of a sample, decoded by its kind (data/sample.py KINDS); spatial fields follow the
    payload image's `geometry` (its crop box and flip), or, given only the image's (width, height)
    `image_shape`, its eval transform's centre square; with neither (the payload is no image), their own.
    Texts are `tokenizer`'s ids (text.py)."""
    if geometry is None and image_shape is not None:
        geometry = centre_geometry(*image_shape)
    if kind == "mask":
        return decode_mask(data, image_size, geometry)
    if kind == "image":
        with Image.open(io.BytesIO(data)) as image:
            image = to_rgb(image)
            return as_tensor(apply_geometry(image, geometry or centre_geometry(*image.size), image_size))
    if kind == "text":
        return decode_text(data, tokenizer)
    if kind == "json":
        return json.loads(data.decode("utf-8"))
    if kind == "number":
        return float(data.decode("ascii"))
    if kind == "array":
        return decode_array(data)
    return data  # bytes: handed on as stored


def collated(kind: str, name: str, values: list) -> dict[str, Any]:
    """A field's values over a batch -> the batch's entries for it: tensors stacked (in a worker, into
    shared memory), texts padded with their lengths, JSON values and raw bytes as lists."""
    if kind == "text":
        padded, lengths = padded_texts(values)
        return {name: padded, f"{name}_lengths": lengths}
    if kind == "number":
        return {name: torch.tensor(values, dtype=torch.float32)}
    if kind == "mask" and len({value.dtype for value in values}) > 1:  # 8-bit masks and 16-bit ones
        values = [value.to(torch.int32) for value in values]
    if kind in ("image", "mask", "array"):
        return {name: torch.utils.data.default_collate(values)}
    return {name: values}


def decode_batch(
    records: Sequence[Record],
    num_classes: int,
    image_size: int = IMAGE_SIZE,
    augment: Augment | None = None,
    reduced_scale: bool = True,
    tokenizer: Tokenizer = BYTES,
) -> dict:
    """Stored records -> {"key": [...], "x": Tensor [B, ...], "y": Tensor [B]} and an entry per other
    field (`collated`), in the workers; with `augment`, each image through the train transform with its
    own keyed generator, its masks through the same draws; texts as `tokenizer`'s ids (the recipe's:
    text.py). A data set without classes (num_classes 0) has no "y"."""
    tensors: list[torch.Tensor] = []
    values: dict[str, list] = {}
    for record in records:
        if record.extension not in DECODERS:
            raise SampleError(
                record.key,
                record.where,
                f"is a .{record.extension} payload and decode.py reads {known_extensions()}: add a decoder for it",
            )
        if num_classes and not 0 <= record.label < num_classes:
            raise SampleError(
                record.key,
                record.where,
                f"has label {record.label}, outside [0, {num_classes}): prepare the data again",
            )
        try:
            generator = sample_generator(augment.seed, augment.epoch, record.key) if augment else None
            geometry = None
            if record.extension in IMAGE_EXTENSIONS:
                crop_scale_min = augment.crop_scale_min if augment else SMALL_CROP_SCALE_MIN  # with a generator only
                x, geometry, _ = decode_image_drawn(
                    record.payload, image_size, generator, reduced_scale, crop_scale_min
                )
            else:
                x = decode(record.payload, record.extension, image_size, generator, reduced_scale, tokenizer)
            tensors.append(x)
        except DECODE_ERRORS as err:
            raise SampleError(
                record.key,
                record.where,
                f"does not decode as .{record.extension} ({first_line(err)}): fix or remove it at the source, "
                "then prep again",
            ) from None
        for name, kind, data in record.fields:
            try:
                values.setdefault(name, []).append(decode_field(kind, data, image_size, geometry, tokenizer=tokenizer))
            except DECODE_ERRORS as err:
                raise SampleError(
                    record.key,
                    record.where,
                    f"has a field {name!r} that does not decode as {kind} ({first_line(err)}): fix or remove it "
                    "at the source, then prep again",
                ) from None
    batch: dict[str, Any] = {"key": [record.key for record in records]}
    if all(record.extension == "txt" for record in records):
        batch["x"], batch["lengths"] = padded_texts(tensors)
    else:
        shapes = {tuple(t.shape) for t in tensors}
        if len(shapes) > 1:
            raise DataError(
                f"samples {records[0].key}..{records[-1].key} decode to different shapes {sorted(shapes)}: "
                "make decode.py return one shape (resize, crop or pad)"
            )
        # torch.stack, but in a DataLoader worker straight into shared memory: the hand-off
        # to the trainer then passes the batch on instead of copying it there first.
        batch["x"] = torch.utils.data.default_collate(tensors)
    if num_classes:
        batch["y"] = torch.tensor([record.label for record in records], dtype=torch.int64)
    kinds = {name: kind for name, kind, _ in records[0].fields} if records else {}
    for name, field_values in values.items():
        batch.update(collated(kinds[name], name, field_values))
    return batch


def payload_batch(records: Sequence[Record], num_classes: int) -> dict:
    """Stored records -> {"key", "payload": uint8 [total bytes], "offsets": int64 [B + 1], "y"} ("y" only
    when the data set has classes):
    the undecoded bytes of a batch in one tensor (one shared-memory hand-off from a worker,
    not B pickled byte strings). Sample i is payload[offsets[i]:offsets[i + 1]]. For decoding
    elsewhere (on the GPU), and for bench.py, which measures reading without decoding."""
    sizes = [len(record.payload) for record in records]
    payload = torch.empty(sum(sizes), dtype=torch.uint8)
    payload.numpy()[:] = np.frombuffer(b"".join(record.payload for record in records), dtype=np.uint8)
    batch = {
        "key": [record.key for record in records],
        "payload": payload,
        "offsets": torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)),
    }
    if num_classes:
        batch["y"] = torch.tensor([record.label for record in records], dtype=torch.int64)
    return batch
