"""prep's check of every sample: each one decoded once, as the DataLoader workers will decode
it, in parallel processes, while prep writes.

A file that does not decode (a truncated JPEG, text that is not UTF-8) or a sample that
decodes to another shape than the others (a .txt among images: one batch cannot hold both)
is then refused at prep, naming its source, instead of stopping a training run hours later
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

from ..data.decode import DECODE_ERRORS, decode, first_line
from ..data.sample import Sample
from ..harness.errors import DataError

CHUNK = 64  # samples per task: large enough that pickling, not process hand-offs, dominates
IN_FLIGHT = 2  # chunks queued per process: each process has the next one ready


def default_processes() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


Shapes = dict[tuple[str, tuple[int | str, ...]], str]  # (dtype, shape) -> the first source decoding to it


def check_chunk(items: list[tuple[str, bytes, str]]) -> tuple[Shapes, tuple[str, str] | None]:
    """In a process: decode each (source, payload, extension); the shapes seen, and the first failure."""
    shapes: Shapes = {}
    for source, payload, extension in items:
        try:
            x = decode(payload, extension)
        except DECODE_ERRORS as err:
            return shapes, (source, f"does not decode as .{extension} ({first_line(err)})")
        shape = ("length",) if extension == "txt" else tuple(x.shape)  # texts are padded to one batch
        shapes.setdefault((str(x.dtype).removeprefix("torch."), shape), source)
    return shapes, None


class Verifier:
    """`add` every sample as it is written, then `finish`; DataError naming the first bad one."""

    def __init__(self, where: str, processes: int) -> None:
        self.where, self.processes = where, processes
        # fork: the processes start in milliseconds, with decode.py already imported.
        self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
        self.pending: deque[Future] = deque()
        self.chunk: list[tuple[str, bytes, str]] = []
        self.shapes: Shapes = {}

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def add(self, sample: Sample) -> None:
        self.chunk.append((sample.source, sample.payload, sample.extension))
        if len(self.chunk) == CHUNK:
            self.submit()

    def submit(self) -> None:
        if self.chunk:
            self.pending.append(self.pool.submit(check_chunk, self.chunk))
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
            if len(self.shapes) > 1:
                (first_kind, first), (other_kind, other) = list(self.shapes.items())[:2]
                raise DataError(
                    f"{self.where}: {other} decodes to {describe(other_kind)} but {first} to {describe(first_kind)}, "
                    "and one batch cannot hold both: remove the odd files, or make decode.py return one shape"
                )
        if failure is not None:
            source, problem = failure
            raise DataError(
                f"{self.where}: {source} {problem}: fix or remove it at the source, then prep again "
                "(--no-verify skips this check)"
            )


def describe(kind: tuple[str, tuple[int | str, ...]]) -> str:
    dtype, shape = kind
    return f"{dtype} [{', '.join(map(str, shape))}]"
