"""prep's check of every sample: each one decoded once, as the DataLoader workers will decode
it, in parallel processes, while prep writes.

A file that does not decode (a truncated JPEG, text that is not UTF-8), a field that does not
decode as its kind (a mask that is not a single-channel image, a number that is not one) or a
sample that decodes to another shape than the others (a .txt among images: one batch cannot
hold both) is then refused at prep, naming its source and the field, instead of stopping a training run hours later
or, never drawn, never. `prep ... --no-verify` skips it (a source checked before).

Samples go to the processes in chunks, with a bounded number of chunks in flight, so memory
stays flat however large the data set; the chunks are checked in storage order, so the first
bad sample is the one reported.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor

import torch

from ..data.decode import (
    DECODE_ERRORS,
    IMAGE_EXTENSIONS,
    IMAGE_SIZE,
    decode,
    decode_field,
    decode_image_drawn,
    first_line,
)
from ..data.sample import Sample
from ..harness.errors import DataError

CHUNK = 64  # samples per task: large enough that pickling, not process hand-offs, dominates
IN_FLIGHT = 2  # chunks queued per process: each process has the next one ready


def default_processes() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


# (what: the payload or a field, dtype, shape) -> the first source decoding to it
Shapes = dict[tuple[str, str, tuple[int | str, ...]], str]
Item = tuple[str, bytes, str, tuple[tuple[str, bytes], ...]]  # (source, payload, extension, fields)


def check_chunk(items: list[Item], kinds: dict[str, str]) -> tuple[Shapes, tuple[str, str] | None]:
    """In a process: decode each (source, payload, extension, fields), every field by its kind in
    `kinds`; the shapes seen, and the first failure."""
    shapes: Shapes = {}
    for source, payload, extension, fields in items:
        try:
            if extension in IMAGE_EXTENSIONS:
                x, _, image_shape = decode_image_drawn(payload, IMAGE_SIZE, None)
            else:
                x, image_shape = decode(payload, extension), None
        except DECODE_ERRORS as err:
            return shapes, (source, f"does not decode as .{extension} ({first_line(err)})")
        shape = ("length",) if extension == "txt" else tuple(x.shape)  # texts are padded to one batch
        shapes.setdefault(("the payload", str(x.dtype).removeprefix("torch."), shape), source)
        for name, data in fields:
            kind = kinds[name]
            try:
                value = decode_field(kind, data, IMAGE_SIZE, None, image_shape)
            except DECODE_ERRORS as err:
                return shapes, (source, f"has a field {name!r} that does not decode as {kind} ({first_line(err)})")
            if isinstance(value, torch.Tensor) and kind != "text":  # texts are padded to one batch
                dtype = str(value.dtype).removeprefix("torch.")
                shapes.setdefault((f"field {name!r}", dtype, tuple(value.shape)), source)
    return shapes, None


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
        shapes, failure = future.result()
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


def describe(kind: tuple[str, str, tuple[int | str, ...]]) -> str:
    _, dtype, shape = kind
    return f"{dtype} [{', '.join(map(str, shape))}]"
