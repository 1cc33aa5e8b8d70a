"""prep's check of every sample: each one decoded once, as the DataLoader workers will decode
it, in parallel processes, while prep writes.

A file that does not decode (a truncated JPEG, text that is not UTF-8), a field that does not
decode as its kind (a mask that is not a single-channel image, a number that is not one) or a
sample that decodes to another shape than the others (a .txt among images: one batch cannot
hold both) is then refused at prep, naming its source and the field, instead of stopping a training run hours later
or, never drawn, never. `prep ... --no-verify` skips it (a source checked before).

The check also counts the class ids each mask field holds (at the stored resolution, so that a
small region's id is not lost to the resize): a mask field whose source names no classes gets
"0" .. its largest id (MASK_IGNORE, 255, left out) as its classes in manifest.json, and one whose
source names them is refused when a mask holds an id beyond them (`mask_classes`).

Samples go to the processes in chunks, with a bounded number of chunks in flight, so memory
stays flat however large the data set; the chunks are checked in storage order, so the first
bad sample is the one reported.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np
import torch

from ..data.decode import (
    DECODE_ERRORS,
    IMAGE_EXTENSIONS,
    IMAGE_SIZE,
    centre_geometry,
    decode,
    decode_field,
    decode_image_drawn,
    first_line,
    fitted_mask,
    stored_mask,
)
from ..data.sample import MASK_IGNORE, Sample
from ..harness.errors import DataError

CHUNK = 64  # samples per task: large enough that pickling, not process hand-offs, dominates
IN_FLIGHT = 2  # chunks queued per process: each process has the next one ready


def default_processes() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


# (what: the payload or a field, dtype, shape) -> the first source decoding to it
Shapes = dict[tuple[str, str, tuple[int | str, ...]], str]
Item = tuple[str, bytes, str, tuple[tuple[str, bytes], ...]]  # (source, payload, extension, fields)
Ids = dict[str, set[int]]  # mask field -> the class ids its masks hold


def check_chunk(items: list[Item], kinds: dict[str, str]) -> tuple[Shapes, tuple[str, str] | None, Ids]:
    """In a process: decode each (source, payload, extension, fields), every field by its kind in
    `kinds`; the shapes seen, the first failure, and the ids each mask field holds."""
    shapes: Shapes = {}
    ids: Ids = {name: set() for name, kind in kinds.items() if kind == "mask"}
    for source, payload, extension, fields in items:
        try:
            if extension in IMAGE_EXTENSIONS:
                x, _, image_shape = decode_image_drawn(payload, IMAGE_SIZE, None)
            else:
                x, image_shape = decode(payload, extension), None
        except DECODE_ERRORS as err:
            return shapes, (source, f"does not decode as .{extension} ({first_line(err)})"), ids
        shape = ("length",) if extension == "txt" else tuple(x.shape)  # texts are padded to one batch
        shapes.setdefault(("the payload", str(x.dtype).removeprefix("torch."), shape), source)
        for name, data in fields:
            kind = kinds[name]
            try:
                if kind == "mask":  # decoded once: its ids as stored, then fitted to the image
                    mask = stored_mask(data)
                    ids[name].update(np.unique(np.asarray(mask)).tolist())
                    value = fitted_mask(mask, IMAGE_SIZE, centre_geometry(*image_shape) if image_shape else None)
                else:
                    value = decode_field(kind, data, IMAGE_SIZE, None, image_shape)
            except DECODE_ERRORS as err:
                return shapes, (source, f"has a field {name!r} that does not decode as {kind} ({first_line(err)})"), ids
            if isinstance(value, torch.Tensor) and kind != "text":  # texts are padded to one batch
                # a mask's ids are uint8 or int32 as its PNG is 8-bit or 16-bit: either is a mask of ids
                dtype = "class ids" if kind == "mask" else str(value.dtype).removeprefix("torch.")
                shapes.setdefault((f"field {name!r}", dtype, tuple(value.shape)), source)
    return shapes, None, ids


class Verifier:
    """`add` every sample as it is written, then `finish`; DataError naming the first bad one.
    `kinds`: {name: kind} of the samples' other fields (data/manifest.py field_kinds)."""

    def __init__(self, where: str, processes: int, kinds: dict[str, str] | None = None) -> None:
        self.where, self.processes, self.kinds = where, processes, kinds or {}
        # fork: the processes start in milliseconds, with decode.py already imported.
        self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
        self.pending: deque[Future] = deque()
        self.chunk: list[Item] = []
        self.shapes: Shapes = {}
        self.ids: Ids = {name: set() for name, kind in self.kinds.items() if kind == "mask"}

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def add(self, sample: Sample) -> None:
        self.chunk.append((sample.source, sample.payload, sample.extension, sample.fields))
        if len(self.chunk) == CHUNK:
            self.submit()

    def submit(self) -> None:
        if self.chunk:
            self.pending.append(self.pool.submit(check_chunk, self.chunk, self.kinds))
            self.chunk = []
        while len(self.pending) > IN_FLIGHT * self.processes:
            self.collect(self.pending.popleft())

    def finish(self) -> None:
        self.submit()
        while self.pending:
            self.collect(self.pending.popleft())

    def collect(self, future: Future) -> None:
        shapes, failure, ids = future.result()
        for name, seen in ids.items():
            self.ids[name] |= seen
        for kind, source in shapes.items():
            self.shapes.setdefault(kind, source)
            same = [(seen, first) for seen, first in self.shapes.items() if seen[0] == kind[0]]  # of the same field
            if len(same) > 1:
                (first_kind, first), (other_kind, other) = same[:2]
                what = "" if kind[0] == "the payload" else f"'s {kind[0]}"
                raise DataError(
                    f"{self.where}: {other}{what} decodes to {describe(other_kind)} but {first}{what} to "
                    f"{describe(first_kind)}, and one batch cannot hold both: remove the odd files, or make decode.py "
                    "return one shape"
                )
        if failure is not None:
            source, problem = failure
            raise DataError(
                f"{self.where}: {source} {problem}: fix or remove it at the source, then prep again "
                "(--no-verify skips this check)"
            )

    def mask_classes(self, fields: list[dict]) -> list[dict]:
        """manifest.json's "fields" with each mask field's classes: those the source named (DataError when a
        mask holds an id beyond them), else "0" .. the largest id seen, MASK_IGNORE left out. Call after
        `finish`."""
        entries = []
        for entry in fields:
            seen = {i for i in self.ids.get(entry["name"], ()) if i != MASK_IGNORE}
            if entry["kind"] == "mask" and "classes" in entry:
                beyond = sorted(i for i in seen if not 0 <= i < len(entry["classes"]))
                if beyond:
                    raise DataError(
                        f"{self.where}: the masks of field {entry['name']!r} hold id {beyond[-1]}, beyond the "
                        f"{len(entry['classes'])} classes the source names (ids 0 .. {len(entry['classes']) - 1}, "
                        f"{MASK_IGNORE} ignored): name every class (--mask-classes), or fix the masks"
                    )
            elif entry["kind"] == "mask" and seen:
                if min(seen) < 0:
                    raise DataError(
                        f"{self.where}: the masks of field {entry['name']!r} hold id {min(seen)}: a class id is 0 or "
                        "more: fix the masks"
                    )
                entry = {**entry, "classes": [str(i) for i in range(max(seen) + 1)]}
            entries.append(entry)
        return entries


def describe(kind: tuple[str, str, tuple[int | str, ...]]) -> str:
    _, dtype, shape = kind
    return f"{dtype} [{', '.join(map(str, shape))}]"
