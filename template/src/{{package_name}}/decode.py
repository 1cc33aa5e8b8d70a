"""Payload bytes -> tensors, in the DataLoader workers: the one place to change for a new modality.

    decode(payload, extension) -> Tensor

- images (png, jpg, jpeg, webp, bmp, gif): Pillow, converted to RGB, resized so the shorter
  side is IMAGE_SIZE and centre-cropped to IMAGE_SIZE x IMAGE_SIZE: uint8 [3, S, S]. uint8
  keeps the worker-to-trainer hand-off 4x smaller than float; the model scales to [0, 1].
- npy: numpy's .npy format with allow_pickle=False (data, never code): float32.
- txt: UTF-8 text as its bytes, cut or zero-padded to TEXT_BYTES: uint8 [TEXT_BYTES].

Every sample of a batch must decode to the same shape, so that the batch stacks. Swap in
your own transform (augmentation, another size, a tokenizer) in `decode`; an extension
without a decoder, or a payload that does not decode, is a DataError naming the sample.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image, ImageOps

from .errors import DataError

IMAGE_SIZE = 32
TEXT_BYTES = 256
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "webp", "bmp", "gif"})


@dataclass(frozen=True)
class Record:
    """One stored sample as a backend read it: the key and label come from the stored data."""

    key: str
    label: int
    payload: bytes
    extension: str
    where: str  # the file or shard it came from, for error messages


def decode_image(payload: bytes) -> torch.Tensor:
    with Image.open(io.BytesIO(payload)) as image:
        image = ImageOps.fit(image.convert("RGB"), (IMAGE_SIZE, IMAGE_SIZE), method=Image.Resampling.BILINEAR)
    return torch.from_numpy(np.asarray(image).transpose(2, 0, 1).copy())


def decode_array(payload: bytes) -> torch.Tensor:
    array = np.lib.format.read_array(io.BytesIO(payload), allow_pickle=False)
    return torch.from_numpy(np.asarray(array, dtype=np.float32))


def decode_text(payload: bytes) -> torch.Tensor:
    payload.decode("utf-8")  # refuse bytes that are not UTF-8 text
    data = np.zeros(TEXT_BYTES, dtype=np.uint8)
    head = np.frombuffer(payload[:TEXT_BYTES], dtype=np.uint8)
    data[: len(head)] = head
    return torch.from_numpy(data)


DECODERS = {
    **{extension: decode_image for extension in IMAGE_EXTENSIONS},
    "npy": decode_array,
    "txt": decode_text,
}


def can_decode(extension: str) -> bool:
    return extension in DECODERS


def known_extensions() -> str:
    return ", ".join(sorted(DECODERS))


def decode(payload: bytes, extension: str) -> torch.Tensor:
    """One sample's tensor; raises ValueError/OSError for a payload that does not decode."""
    return DECODERS[extension](payload)


MakeBatch = Callable[[Sequence[Record], int], dict]  # (records, num_classes) -> batch, run in the workers


def decode_batch(records: Sequence[Record], num_classes: int) -> dict:
    """Stored records -> {"key": [...], "x": Tensor [B, ...], "y": Tensor [B]}, in the workers."""
    tensors = []
    for record in records:
        if record.extension not in DECODERS:
            raise DataError(
                f"sample {record.key} ({record.where}) is a .{record.extension} payload and decode.py reads "
                f"{known_extensions()}: add a decoder for it"
            )
        if not 0 <= record.label < num_classes:
            raise DataError(
                f"sample {record.key} ({record.where}) has label {record.label}, outside [0, {num_classes}): "
                "prepare the data again"
            )
        try:
            tensors.append(decode(record.payload, record.extension))
        except (ValueError, OSError, EOFError, SyntaxError, Image.DecompressionBombError) as err:
            raise DataError(
                f"sample {record.key} ({record.where}) does not decode as .{record.extension} "
                f"({str(err).splitlines()[0] if str(err) else type(err).__name__}): fix or remove it at the source, "
                "then prep again"
            ) from None
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise DataError(
            f"samples {records[0].key}..{records[-1].key} decode to different shapes {sorted(shapes)}: "
            "make decode.py return one shape (resize, crop or pad)"
        )
    return {
        "key": [record.key for record in records],
        # torch.stack, but in a DataLoader worker straight into shared memory: the hand-off
        # to the trainer then passes the batch on instead of copying it there first.
        "x": torch.utils.data.default_collate(tensors),
        "y": torch.tensor([record.label for record in records], dtype=torch.int64),
    }


def payload_batch(records: Sequence[Record], num_classes: int) -> dict:
    """Stored records -> {"key", "payload": uint8 [total bytes], "offsets": int64 [B + 1], "y"}:
    the undecoded bytes of a batch in one tensor (one shared-memory hand-off from a worker,
    not B pickled byte strings). Sample i is payload[offsets[i]:offsets[i + 1]]. For decoding
    elsewhere (on the GPU), and for bench.py, which measures reading without decoding."""
    sizes = [len(record.payload) for record in records]
    payload = torch.empty(sum(sizes), dtype=torch.uint8)
    payload.numpy()[:] = np.frombuffer(b"".join(record.payload for record in records), dtype=np.uint8)
    return {
        "key": [record.key for record in records],
        "payload": payload,
        "offsets": torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)),
        "y": torch.tensor([record.label for record in records], dtype=torch.int64),
    }
