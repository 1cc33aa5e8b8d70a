"""A sample as prep hands it to a backend's SampleWriter, and the key it is stored under.

A sample is a key and named fields, each as the source gave its bytes (never decoded by prep):
- its payload, the first field (an encoded image, an .npy array, UTF-8 text), with the
  extension its bytes came with;
- its other fields (`fields`, by name, in the order of the data set's schema): a caption, a
  JSON record, a mask, a number, ...;
- its class (`label`), an index into the data set's class list, or NO_LABEL when the data set
  has no class field.

The data set's schema (manifest.json's "fields") names every field and its kind (KINDS), which
decides how the DataLoader workers decode it (data/decode.py). The sources (sources/) make
samples; every backend stores them. Keys are storage positions ("00000000", "00000001", ...),
so a ledger of keys maps straight back to where a sample is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a field can be, and so how it is decoded (data/decode.py):
#   image  encoded image bytes (png, jpg, webp, ...)     -> uint8 [3, S, S], augmented in training
#   mask   an encoded image of integer class ids (png)   -> int64 [S, S], the image's crop and flip, nearest
#   text   UTF-8 text                                    -> uint8 bytes, padded, with lengths
#   json   a UTF-8 JSON document                         -> the parsed value (a list in the batch)
#   class  the class, as `label` (never stored as a field's bytes)
#   number a decimal number as text ("0.25")             -> float32 [B]
#   array  an .npy array (allow_pickle=False)            -> float32 [B, ...]
#   bytes  anything else, handed on undecoded           -> a list of bytes in the batch
KINDS = ("image", "mask", "text", "json", "class", "number", "array", "bytes")
NO_LABEL = -1  # the label of a sample of a data set without a class field
MASK_IGNORE = 255  # a mask id that is no class (VOC's void): prep never counts it as one, training ignores it


@dataclass(frozen=True)
class Sample:
    payload: bytes  # as the source gave it: never decoded by prep
    extension: str  # lower case, without the dot: "png", "jpg", "npy", "txt", ...
    label: int  # NO_LABEL when the data set has no class field
    source: str = ""  # where the source holds it: "cat/001.jpg", "row 17", ...
    fields: tuple[tuple[str, bytes], ...] = ()  # the other fields: (name, bytes), in the schema's order


def payload_kind(extensions: set[str] | dict[str, int]) -> str:
    """The kind of a payload field, from the extensions its samples had: text or array when every payload
    is .txt or .npy, else image (a data set of one payload per sample, as prep wrote them before fields)."""
    return "text" if set(extensions) == {"txt"} else "array" if set(extensions) == {"npy"} else "image"


def key_of(position: int) -> str:
    return f"{position:08d}"
