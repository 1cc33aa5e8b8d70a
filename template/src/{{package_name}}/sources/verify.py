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

Every sample that does not decode is reported, in one error at the end (the first NAMED of them by
name, then how many more), so that one prep finds every broken file. Samples go to the processes in
chunks, with a bounded number of chunks in flight, so memory stays flat however large the data set;
the chunks are checked in storage order, so the bad samples are named in that order.
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
from ..harness.launcher_watch import end_with_launcher

CHUNK = 64  # samples per task: large enough that pickling, not process hand-offs, dominates
IN_FLIGHT = 2  # chunks queued per process: each process has the next one ready
NAMED = 20  # bad samples an error names; the rest it counts


def default_processes() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


# (what: the payload or a field, dtype, shape) -> the first source decoding to it
Shapes = dict[tuple[str, str, tuple[int | str, ...]], str]
Item = tuple[str, bytes, str, tuple[tuple[str, bytes], ...]]  # (source, payload, extension, fields)
Ids = dict[str, set[int]]  # mask field -> the class ids its masks hold


Failure = tuple[str, str, str, str]  # (source, the field or "" for the payload, decoded as what, why not)


def check_chunk(items: list[Item], kinds: dict[str, str]) -> tuple[Shapes, list[Failure], Ids]:
    """In a process: decode each (source, payload, extension, fields), every field by its kind in
    `kinds`; the shapes seen, every sample that does not decode, and the ids each mask field holds."""
    shapes: Shapes = {}
    failures: list[Failure] = []
    ids: Ids = {name: set() for name, kind in kinds.items() if kind == "mask"}
    for source, payload, extension, fields in items:
        try:
            if extension in IMAGE_EXTENSIONS:
                x, _, image_shape = decode_image_drawn(payload, IMAGE_SIZE, None)
            else:
                x, image_shape = decode(payload, extension), None
        except DECODE_ERRORS as err:
            failures.append((source, "", f".{extension}", first_line(err)))
            continue
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
                failures.append((source, name, kind, first_line(err)))
                break
            if isinstance(value, torch.Tensor) and kind != "text":  # texts are padded to one batch
                # a mask's ids are uint8 or int32 as its PNG is 8-bit or 16-bit: either is a mask of ids
                dtype = "class ids" if kind == "mask" else str(value.dtype).removeprefix("torch.")
                shapes.setdefault((f"field {name!r}", dtype, tuple(value.shape)), source)
    return shapes, failures, ids


class Undecodable(DataError):
    """The samples of a data set that do not decode: the first NAMED (source, what and why), and a count."""

    def __init__(self, where: str, failures: list[Failure], count: int) -> None:
        self.where, self.failures, self.count = where, failures, count
        if count == 1:
            (source, field, kind, why), *_ = failures
            what = f"has a field {field!r} that does not decode" if field else "does not decode"
            message = f"{source} {what} as {kind} ({why}): fix or remove it at the source"
        else:
            named = ", ".join(
                f"{source} ({f'field {field!r}: ' if field else ''}{why})" for source, field, _, why in failures
            )
            more = f" and {count - len(failures)} more" if count > len(failures) else ""
            message = f"{count} samples do not decode: {named}{more}: fix or remove them at the source"
        super().__init__(f"{where}: {message}, then prep again (--no-verify skips this check)")

    def joined(self, other: Undecodable) -> Undecodable:
        """Both sets' bad samples in one error (the training set's and the held-out set's)."""
        return Undecodable(self.where, (self.failures + other.failures)[:NAMED], self.count + other.count)


class Verifier:
    """`add` every sample as it is written, then `finish`: Undecodable naming every sample that does not
    decode, or at once a DataError naming two that decode to different shapes. `kinds`: {name: kind} of
    the samples' other fields (data/manifest.py field_kinds)."""

    def __init__(self, where: str, processes: int, kinds: dict[str, str] | None = None) -> None:
        self.where, self.processes, self.kinds = where, processes, kinds or {}
        # fork: the processes start in milliseconds, with decode.py already imported. They end with
        # prep, even a prep killed with SIGKILL, which leaves them blocked on their task pipe otherwise.
        self.pool = ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("fork"),
            initializer=end_with_launcher,
            initargs=(os.getpid(),),
        )
        self.pending: deque[Future] = deque()
        self.chunk: list[Item] = []
        self.shapes: Shapes = {}
        self.ids: Ids = {name: set() for name, kind in self.kinds.items() if kind == "mask"}
        self.failures: list[Failure] = []  # the first NAMED bad samples, in storage order
        self.bad = 0  # and how many there are

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
        if self.bad:
            raise Undecodable(self.where, self.failures, self.bad)

    def collect(self, future: Future) -> None:
        shapes, failures, ids = future.result()
        self.bad += len(failures)
        self.failures += failures[: NAMED - len(self.failures)]
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
