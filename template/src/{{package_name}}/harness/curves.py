"""metrics.jsonl's lines on one axis, the run's optimizer steps, and the same lines as TensorBoard
scalars in RUN_DIR/tensorboard/ (rank 0's, where tensorboard is installed: pip install -e
'.[tensorboard]'; without it nothing is written and nothing said).

An epoch's line sits at its epoch's end, a --log-every line at its step, each after the steps of
the epochs before it (their lines' "steps": a resume on another number of ranks changes how many
an epoch has). TensorBoard wants one integer axis; report.py draws on the same one.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

POSITION = ("epoch", "step", "steps")  # where a line is, not a figure of it


def run_step(ends: dict[int, int], epoch: int, step: int) -> int:
    """Optimizer steps from the run's start to `step` of `epoch`; `ends`: each finished epoch's steps."""
    return sum(steps for earlier, steps in ends.items() if earlier < epoch) + step


def position(line: dict[str, Any], ends: dict[int, int]) -> int:
    """Where `line` sits on the run's axis: its step (a --log-every line), else its epoch's end;
    an epoch line's own "steps" goes into `ends` first."""
    if "step" in line:
        return run_step(ends, line["epoch"], line["step"])
    if "steps" in line:
        ends[line["epoch"]] = line["steps"]
    return run_step(ends, line["epoch"] + 1, 0)


def figures(line: dict[str, Any]) -> dict[str, float]:
    """The line's figures by TensorBoard tag: "step/loss" for a --log-every line, "epoch/loss" for an
    epoch's; a figure that is null (a held-out pass not run) or not finite is left out."""
    kind = "step" if "step" in line else "epoch"
    return {
        f"{kind}/{name}": float(value)
        for name, value in line.items()
        if name not in POSITION and isinstance(value, int | float) and math.isfinite(value)
    }


class Scalars:
    """Rank 0's TensorBoard copy of metrics.jsonl: each line written there is written here too, and
    flushed at once (a rank ends with os._exit, harness/rank_exit.py: nothing is flushed after)."""

    def __init__(self, folder: Path, kept: list[dict[str, Any]], resumed_at: tuple[int, int] | None) -> None:
        """Start writing into `folder`. A new run (`resumed_at` None) starts it afresh, as it does
        metrics.jsonl; a resumed one keeps what it holds up to its position and has TensorBoard pass
        over the scalars written after it (purge_step: those of a run killed past its checkpoint),
        which this run writes again. `kept`: metrics.jsonl's lines that the run keeps."""
        self.ends: dict[int, int] = {}
        for line in kept:
            position(line, self.ends)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is not installed: metrics.jsonl alone
            self.writer = None
            return
        if resumed_at is None:
            shutil.rmtree(folder, ignore_errors=True)  # a new run's, as metrics.jsonl is
        purge = None if resumed_at is None else run_step(self.ends, *resumed_at) + 1
        self.writer = SummaryWriter(str(folder), purge_step=purge)

    def write(self, line: dict[str, Any]) -> None:
        """`line` (of metrics.jsonl, or the figures added to an epoch's line) as scalars at its step."""
        at = position(line, self.ends)
        if self.writer is None:
            return
        for tag, value in figures(line).items():
            self.writer.add_scalar(tag, value, at)
        self.writer.flush()
