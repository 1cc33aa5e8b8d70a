"""What train.py counts: the steps this process ran, and this rank's running sums of the epoch,
by name (loss, samples right, samples seen, seconds waited for a batch), with the seconds the
epoch has taken. A checkpoint keeps the sums and the seconds of every rank (`kept`; a resume
starts from them, harness/checkpoint.py's restore); the metrics lines sum them over the ranks
(`summary`)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from .ddp import all_sum
from .errors import DataError

SUMS = ("loss", "correct", "seen", "waited")


class Tally:
    """This rank's counts: `steps` over the run, `sums` and the clock over the epoch."""

    def __init__(self, sums: dict[str, float] | None = None, elapsed: float = 0.0) -> None:
        """Start counting, in an epoch that has run `elapsed` seconds and summed `sums` so far
        (a resume's; none: the epoch's start)."""
        self.steps = 0  # run by this process, over its epochs: what --stop-after-steps counts
        self.new_epoch(sums, elapsed)

    def new_epoch(self, sums: dict[str, float] | None = None, elapsed: float = 0.0) -> None:
        self.sums = dict.fromkeys(SUMS, 0.0) | (sums or {})
        self.before, self.started = elapsed, None  # the clock starts with the epoch's first batch

    def timed(self, batches: Iterable[Any]) -> Iterator[Any]:
        """The epoch's `batches`, adding the time this rank waits for each to the sum "waited";
        the epoch's clock starts when the first is asked for."""
        batches = iter(batches)
        self.started = time.perf_counter()
        while True:
            asked = time.perf_counter()
            batch = next(batches, None)
            if batch is None:
                return
            self.sums["waited"] += time.perf_counter() - asked
            yield batch

    def add(self, *, loss: float, correct: int, seen: int, at: tuple[int, int]) -> None:
        """One optimizer step, step `at` = (epoch, step): its summed loss, the samples it classified
        right, its samples. A loss that is not finite ends the run there (DataError: exit 2, and no
        restart, which would only repeat it): every later step would train on NaN weights."""
        if not math.isfinite(loss):
            raise DataError(
                f"the loss is {loss} at epoch {at[0]} step {at[1]} (this rank's batch of {seen}): training "
                "diverged or the data holds NaN or inf; lower --lr (or add --warmup-steps or --clip-grad-norm), "
                "and check the data's values"
            )
        self.sums["loss"] += loss
        self.sums["correct"] += correct
        self.sums["seen"] += seen
        self.steps += 1

    def elapsed(self) -> float:
        """Seconds into the epoch, a resumed run's before it included."""
        return self.before + (time.perf_counter() - self.started if self.started is not None else 0.0)

    def kept(self) -> dict[str, Any]:
        """What a checkpoint keeps of this rank's epoch so far."""
        return {"sums": dict(self.sums), "elapsed": self.elapsed()}

    def summary(self, world_size: int, device: torch.device) -> dict[str, float]:
        """The epoch so far over all ranks (a collective: every rank calls it)."""
        elapsed = self.elapsed()
        loss, correct, seen, waited = all_sum([self.sums[name] for name in SUMS], device)
        return {
            "loss": loss / seen,
            "train_accuracy": correct / seen,
            "samples": int(seen),  # trained on so far in the epoch, over all ranks: what the ledger shows
            "samples_per_s": seen / elapsed,
            "seconds": elapsed,
            "data_wait_fraction": waited / (world_size * elapsed),  # of the ranks' time, waiting for a batch
        }
