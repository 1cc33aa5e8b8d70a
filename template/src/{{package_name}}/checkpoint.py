"""Checkpoints: the model, the optimizer and where the run stands, written by rank 0.

    RUN/checkpoints/epoch-0001-step-000040.pt   {"model", "optimizer", "epoch", "step", "world_size"}

`epoch` and `step` are the next step to run: a checkpoint at the end of epoch 0 is epoch 1,
step 0. The data needs nothing else: each epoch's order is a pure function of (seed, epoch,
sizes), so the loader starts again at that step of that epoch's plan. A checkpoint is written
to a temporary name and renamed after every rank has finished the step, and the newest KEEP
are kept: a run killed while writing leaves the previous checkpoint whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import DataError

KEEP = 3
NAME = re.compile(r"epoch-(\d{4,})-step-(\d{6,})\.pt")


@dataclass(frozen=True, order=True)
class Position:
    epoch: int
    step: int  # the next step to run in `epoch`


def checkpoint_name(position: Position) -> str:
    return f"epoch-{position.epoch:04d}-step-{position.step:06d}.pt"


def saved(directory: Path) -> list[tuple[Position, Path]]:
    """The checkpoints in `directory`, oldest first."""
    found = []
    for path in directory.glob("epoch-*-step-*.pt"):
        if match := NAME.fullmatch(path.name):
            found.append((Position(int(match[1]), int(match[2])), path))
    return sorted(found)


def save(
    directory: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    position: Position,
    world_size: int,
    keep: int = KEEP,
) -> Path:
    """Rank 0: write the checkpoint of `position`, then remove all but the newest `keep`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(position)
    partial = directory / f".{path.name}.partial"
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": position.epoch,
        "step": position.step,
        "world_size": world_size,
    }
    torch.save(state, partial)
    partial.replace(path)
    for _, old in saved(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def load(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """A checkpoint's state; DataError naming the file when it is not one."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError) as err:
        raise DataError(f"{path} is not a readable checkpoint ({err}): pass another --checkpoint") from None
    if not {"model", "optimizer", "epoch", "step"} <= set(state):
        raise DataError(f"{path} lacks the model, optimizer or position of a checkpoint: pass another")
    return state
