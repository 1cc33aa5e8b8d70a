"""The bench's timed passes and rows, which bench.py and every backend's bench_backend.py measure with."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .data.loader import RankLoader


@dataclass
class Pass:
    """One timed pass: `samples` delivered in `seconds`, the first batch after `first_batch`,
    `cpu_seconds` of CPU spent by this process and the workers it waited for meanwhile."""

    samples: int
    seconds: float
    first_batch: float
    cpu_seconds: float = 0.0


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its ended children (DataLoader workers,
    joined at the end of each epoch): a pass's CPU is the difference across it."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(batches: Iterable[dict]) -> Pass:
    start, cpu = time.perf_counter(), cpu_seconds()
    first = None
    samples = 0
    for batch in batches:
        if first is None:
            first = time.perf_counter() - start
        samples += len(batch["key"] if "key" in batch else batch["x"])  # a peer's batches have no keys
    return Pass(samples, time.perf_counter() - start, first or 0.0, cpu_seconds() - cpu)


@dataclass
class Row:
    """One line of the table: the median of its passes."""

    name: str
    what: str
    passes: list[Pass] = field(default_factory=list)

    def add(self, latest: Pass, repeat: int, repeats: int) -> None:
        self.passes.append(latest)
        print(f"  {self.name:<16} pass {repeat + 1}/{repeats}: {latest.samples / latest.seconds:,.0f} samples/s")

    @property
    def samples_per_s(self) -> float:
        return statistics.median(p.samples / p.seconds for p in self.passes)

    @property
    def samples_per_cpu_s(self) -> float:
        """Samples per CPU-second (this process and its workers): what a core delivers, whatever else runs."""
        return statistics.median(p.samples / max(p.cpu_seconds, 1e-9) for p in self.passes)

    @property
    def first_batch(self) -> float:
        return statistics.median(p.first_batch for p in self.passes)


def measure_in_turns(rows: dict[str, tuple[str, Callable[[int], Iterable[dict]]]], repeats: int) -> list[Row]:
    """Each row's pass `repeats` times, the rows taking turns; pass i reads epoch i + 1."""
    results = {name: Row(name, what) for name, (what, _) in rows.items()}
    for repeat in range(repeats):
        for name, (_, batches) in rows.items():
            results[name].add(timed(batches(repeat + 1)), repeat, repeats)
    return list(results.values())


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def loader_passes(loader: RankLoader) -> Callable[[int], Iterable[dict]]:
    return lambda epoch: loader.epoch(epoch)
