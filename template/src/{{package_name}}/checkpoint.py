"""Checkpoints: the model, the optimizer and where the run stands, written by rank 0.

    RUN/checkpoints/epoch-0001-step-000040.pt

`epoch` and `step` are the next step to run: a checkpoint at the end of epoch 0 is epoch 1,
step 0. The data needs little more: each epoch's order is a pure function of (seed, epoch,
sizes), so a resumed loader starts again at that step of that epoch's plan. A checkpoint
holds what the plan cannot give back:

    model, optimizer      the weights and Adam's moments
    done                  the stretches of the epoch already run (progress.py): the step,
                          and on which world sizes it was reached
    ranks                 every rank's own random states (torch, CUDA, numpy, random) and its
                          running sums of the epoch (loss, correct, seen, time waiting for data)
    options               the options the data order and the optimizer depend on; a resume
                          with others is refused

A checkpoint is written to a temporary name and renamed after every rank has finished the
step, and the newest KEEP are kept: a run killed while writing leaves the previous
checkpoint whole.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .errors import DataError
from .progress import Stretch, steps_done

KEEP = 3
NAME = re.compile(r"epoch-(\d{4,})-step-(\d{6,})\.pt")


@dataclass(frozen=True, order=True)
class Position:
    epoch: int
    step: int  # the next step to run in `epoch`
    done: tuple[Stretch, ...] = field(default=(), compare=False)  # how `epoch` got to `step`

    @classmethod
    def within(cls, epoch: int, done: tuple[Stretch, ...]) -> Position:
        return cls(epoch, steps_done(done), done)


def checkpoint_name(position: Position) -> str:
    return f"epoch-{position.epoch:04d}-step-{position.step:06d}.pt"


def saved(directory: Path) -> list[tuple[Position, Path]]:
    """The checkpoints in `directory`, oldest first."""
    found = []
    for path in directory.glob("epoch-*-step-*.pt"):
        if match := NAME.fullmatch(path.name):
            found.append((Position(int(match[1]), int(match[2])), path))
    return sorted(found)


# --- every rank's own state --------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """This process's random states, as types a weights-only checkpoint can hold."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def seed_rank(seed: int, rank: int, *more: int) -> None:
    """Seed this rank's torch, numpy and random: every rank draws its own dropout (and whatever
    else the training step draws), reproducibly from the run's seed."""
    key = np.random.SeedSequence([seed, rank, *more]).generate_state(2)
    torch.manual_seed(int(key[0]))
    np.random.seed(int(key[1]))
    random.seed(int(key[1]))


def gather_ranks(sums: list[float], elapsed: float) -> list[dict[str, Any]]:
    """Every rank's random states, running sums and seconds into the epoch, gathered on every
    rank (one all_gather)."""
    ranks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, {"rng": rng_state(), "sums": list(sums), "elapsed": elapsed})
    return ranks


# --- writing and reading -----------------------------------------------------------------


def save(
    directory: Path,
    position: Position,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    ranks: list[dict[str, Any]],
    options: dict[str, Any],
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
        "done": [list(stretch) for stretch in position.done],
        "world_size": len(ranks),
        "ranks": ranks,
        "options": options,
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
    if not isinstance(state, dict) or not {"model", "optimizer", "epoch", "step"} <= set(state):
        raise DataError(f"{path} lacks the model, optimizer or position of a checkpoint: pass another")
    return state


def position_of(state: dict) -> Position:
    return Position(state["epoch"], state["step"], tuple(Stretch(*stretch) for stretch in state.get("done", ())))


def newest(directory: Path) -> dict | None:
    """Rank 0 reads the newest checkpoint in `directory` and every rank gets it (None when there
    is none), so the run folder need only be on rank 0's disk."""
    state = [None]
    if dist.get_rank() == 0:
        found = saved(directory)
        state = [load(found[-1][1]) if found else None]
    dist.broadcast_object_list(state, src=0)
    return state[0]


def restore(
    state: dict | None,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    seed: int,
    rank: int,
    world_size: int,
    num_sums: int = 4,
) -> tuple[Position, list[float], float]:
    """Where this rank starts: (position, its running sums of that epoch, seconds into it).

    Without a checkpoint, at the beginning, with the rank's random state seeded from the run's
    seed. With one, its model and optimizer are loaded; on the world size it was written on,
    every rank goes on from its own random state and sums (exact resume); on another, every
    rank draws afresh from (seed, rank, position) and rank 0 carries the epoch's sums so far.
    """
    if state is None:
        seed_rank(seed, rank)
        return Position(0, 0), [0.0] * num_sums, 0.0
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = position_of(state)
    ranks = state["ranks"]
    if state["world_size"] == world_size:
        restore_rng(ranks[rank]["rng"])
        return start, list(ranks[rank]["sums"]), ranks[rank]["elapsed"]
    seed_rank(seed, rank, start.epoch, start.step)
    if rank != 0:
        return start, [0.0] * num_sums, 0.0
    return start, [sum(values) for values in zip(*(r["sums"] for r in ranks), strict=True)], ranks[0]["elapsed"]


def check_same_options(recorded: dict[str, Any], options: dict[str, Any], run_dir: Path) -> None:
    """Refuse to resume with options the data order or the optimizer depend on changed."""
    for name, value in recorded.items():
        if options.get(name) == value:
            continue
        if name == "data_manifest_sha256":
            raise DataError(
                f"{run_dir} was trained on other data (its manifest's sha256 differs): resume with the same --data, "
                "or pass a new --run-dir"
            )
        flag = "--" + name.replace("_", "-")
        raise DataError(
            f"{run_dir} was trained with {flag} {value}, not {options.get(name)}: resume with {flag} {value}, "
            "or pass a new --run-dir"
        )
