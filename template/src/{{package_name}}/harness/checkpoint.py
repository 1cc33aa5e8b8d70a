"""Checkpoints: the recipe's stateful parts and where the run stands, written by rank 0.

    RUN/checkpoints/epoch-0001-step-000040.pt

`epoch` and `step` are the next step to run: a checkpoint at the end of epoch 0 is epoch 1,
step 0. The data needs little more: each epoch's order is a pure function of (seed, epoch,
sizes), so a resumed loader starts again at that step of that epoch's plan. A checkpoint
holds what the plan cannot give back:

    model, optimizer, ... every stateful part of the recipe, by the name recipe.parts gives it
                          (the weights, the optimizer's moments, the schedule's step count),
                          as its state_dict(); "parts" lists the names
    done                  the stretches of the epoch already run (progress.py): the step,
                          and on which world sizes it was reached
    ranks                 every rank's own random states (torch, CUDA, numpy, random), its
                          running sums of the epoch by name (loss, correct, seen, time waiting
                          for data) and its seconds into it (tally.py)
    options               the recipe and the options the data order depends on; a resume
                          with others is refused

A checkpoint is written to a temporary name and renamed after every rank has finished the
step, and the newest KEEP are kept: a run killed while writing leaves the previous
checkpoint whole. A write that fails (a full or read-only disk) removes its temporary file
and is a DataError: one line, and no restart, which would meet the same disk. A resume reads
the newest checkpoint that can be read, naming each newer one that cannot.
"""

from __future__ import annotations

import os
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .collectives import decided_by, gather_objects
from .ddp import check_replicas_agree
from .errors import DISK_ERRORS, DataError
from .progress import Stretch, steps_done

KEEP = 3
NAME = re.compile(r"epoch-(\d{4,})-step-(\d{6,})\.pt")
# What a checkpoint holds: to be scored (evaluate.py), and to be resumed from.
SCORED = {"model": dict, "epoch": int, "step": int}
RESUMED = {**SCORED, "parts": list, "done": list, "world_size": int, "ranks": list, "options": dict}


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


def gather_ranks(kept: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's random states and what it keeps of the epoch so far (tally.py: its running
    sums and seconds into the epoch), gathered on every rank (one all_gather)."""
    return gather_objects({"rng": rng_state(), **kept})


# --- writing and reading -----------------------------------------------------------------


class WholeWrites:
    """A file descriptor as torch.save's file, which keeps the OSError that stopped a write. torch's
    writer turns an error of its file into a RuntimeError without the errno ("unexpected pos"),
    a full disk included; save() raises the OSError instead."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.error: OSError | None = None

    def write(self, data) -> int:
        whole = memoryview(data).cast("B")
        view = whole
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as err:
            self.error = err
            raise
        return whole.nbytes

    def flush(self) -> None:
        pass


def save(
    directory: Path,
    position: Position,
    *,
    parts: dict[str, Any],
    ranks: list[dict[str, Any]],
    options: dict[str, Any],
    keep: int = KEEP,
) -> Path:
    """Rank 0: write the checkpoint of `position` (each of `parts` as its state_dict() under its
    name), then remove all but the newest `keep`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(position)
    partial = directory / f".{path.name}.partial"
    state = {
        **{name: part.state_dict() for name, part in parts.items()},
        "parts": list(parts),
        "epoch": position.epoch,
        "step": position.step,
        "done": [list(stretch) for stretch in position.done],
        "world_size": len(ranks),
        "ranks": ranks,
        "options": options,
    }
    try:
        with open(partial, "wb") as file:
            writer = WholeWrites(file.fileno())
            try:
                torch.save(state, writer)
            except RuntimeError:
                if writer.error is None:
                    raise
                raise writer.error from None
            os.fsync(file.fileno())  # a full disk shows here, not after the rename
        partial.replace(path)
    except OSError as err:
        partial.unlink(missing_ok=True)  # the previous checkpoints stay as they were
        if err.errno not in DISK_ERRORS:
            raise
        raise DataError(
            f"cannot write the checkpoint {path} ({err.strerror}): free space on that disk or make it writable, "
            "then run train.sh again with the same --run-dir to go on from the previous checkpoint"
        ) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    for _, old in saved(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return path


class Unreadable(DataError):
    """A file that is not a checkpoint of this project (the message names it and why)."""


def load(
    path: Path, map_location: str | torch.device = "cpu", fields: dict[str, type] = SCORED, mmap: bool = False
) -> dict:
    """A checkpoint's state with `fields` of their types; Unreadable naming the file and why not."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as err:  # whatever torch's reader or its weights-only unpickler make of bytes that are not one
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise Unreadable(f"{path} is not a readable checkpoint ({reason})") from None
    for name, kind in fields.items():
        if not isinstance(state, dict) or not isinstance(state.get(name), kind) or isinstance(state.get(name), bool):
            raise Unreadable(f"{path} is not a checkpoint of this project (no {name!r} of type {kind.__name__})")
    return state


def position_of(state: dict) -> Position:
    return Position(state["epoch"], state["step"], tuple(Stretch(*stretch) for stretch in state.get("done", ())))


def newest_readable(directory: Path, quiet: bool = False) -> tuple[dict, Path] | None:
    """The newest checkpoint in `directory` that can be read, and its path; None when there is none.
    Unless `quiet`, each newer one that cannot be read is named on stderr; DataError with the fix
    when none can. `quiet` (the check before launching) maps the files instead of reading them:
    it needs only their options."""
    found = saved(directory)
    unreadable = []
    for _, path in reversed(found):
        try:
            state = load(path, fields=RESUMED, mmap=quiet)
        except Unreadable as err:
            unreadable.append(str(err))
            continue
        for reason in unreadable if not quiet else ():
            print(f"warning: {reason}: resuming from {path.name} instead", file=sys.stderr, flush=True)
        return state, path
    if unreadable:
        raise DataError(
            f"none of the {len(found)} checkpoints in {directory} can be read ({unreadable[0]}): remove them "
            f"(rm {directory}/*.pt) to train that run folder afresh, or pass a new --run-dir"
        )
    return None


def newest(directory: Path) -> dict | None:
    """Rank 0 reads the newest readable checkpoint in `directory` and every rank gets it (None
    when there is none; its path as "path"), so the run folder need only be on rank 0's disk.
    Its DataError reaches every rank (decided_by), so that none waits for a broadcast that never comes."""

    def read() -> dict | None:
        readable = newest_readable(directory)
        return None if readable is None else {**readable[0], "path": str(readable[1])}

    return decided_by(0, read)


def restore(
    state: dict | None,
    parts: dict[str, Any],
    *,
    seed: int,
    rank: int,
    world_size: int,
) -> tuple[Position, dict[str, Any]]:
    """Where this rank starts: (position, what it carries of that epoch: its running sums by
    name and seconds into it, as `Tally(**carried)` takes them).

    Without a checkpoint, at the beginning, with the rank's random state seeded from the run's
    seed. With one, each of `parts` loads its state; on the world size it was written on,
    every rank goes on from its own random state and sums (exact resume); on another, every
    rank draws afresh from (seed, rank, position) and rank 0 carries the epoch's sums so far.
    """
    if state is None:
        seed_rank(seed, rank)
        return Position(0, 0), {}
    where = state.get("path", "the checkpoint")
    for name, part in parts.items():
        if not isinstance(state.get(name), dict):
            raise DataError(
                f"{where} holds no {name!r}: resume with the recipe it was trained with, or pass a new --run-dir"
            )
        try:
            part.load_state_dict(state[name])
        except (RuntimeError, ValueError, KeyError) as err:  # torch's words for weights that do not fit
            reason = str(err).strip().splitlines()[-1].strip()[:200]
            raise DataError(
                f"{where} holds a {name} of another shape ({reason}): "
                "resume with the model it was trained with, or pass a new --run-dir"
            ) from None
    start = position_of(state)
    ranks = state["ranks"]
    if state["world_size"] == world_size:
        restore_rng(ranks[rank]["rng"])
        return start, {"sums": ranks[rank]["sums"], "elapsed": ranks[rank]["elapsed"]}
    seed_rank(seed, rank, start.epoch, start.step)
    if rank != 0:
        return start, {}
    sums = {name: sum(r["sums"][name] for r in ranks) for name in ranks[0]["sums"]}
    return start, {"sums": sums, "elapsed": ranks[0]["elapsed"]}


def to_resume(run_dir: Path, resume: bool, options: dict[str, Any]) -> dict | None:
    """The newest checkpoint of the run folder (every rank gets it: `newest`), which must have been
    trained with `options`; None for a new run. A run folder with a checkpoint is always resumed;
    `resume` (--resume) asks for one."""
    resumed = newest(run_dir / "checkpoints")
    if resume and resumed is None:
        raise DataError(
            f"--resume: {run_dir / 'checkpoints'} holds no checkpoint: drop --resume to start a new run there"
        )
    if resumed is not None:
        check_same_options(resumed["options"], options, run_dir)
    return resumed


def write_checkpoint(
    checkpoints: Path, position: Position, model: torch.nn.Module, parts: dict[str, Any], kept: dict, options: dict
) -> None:
    """Every rank's part in a checkpoint at `position`, which rank 0 writes: `kept` is what this
    rank keeps of the epoch so far (tally.py). Never rank 0's weights while the ranks disagree:
    a torchrun restart would resume from them, every rank alike, and end a broken run with a
    passing final check."""
    check_replicas_agree(model, dist.get_world_size())
    ranks = gather_ranks(kept)  # also waits until every rank has finished the step
    if dist.get_rank() == 0:
        save(checkpoints, position, parts=parts, ranks=ranks, options=options)
    # Every rank waits until the checkpoint is in place: a rank that fails right after (its held-out
    # pass, its next batch) would otherwise end the run while rank 0 writes, and the epoch it
    # trained would be lost with the half-written file.
    dist.barrier()


# What a run made before an option existed used in its place: a resume of such a run (its checkpoint
# without the option) must match it, or it would change silently (--crop-scale-min: 0.5 at any size).
BEFORE_RECORDED: dict[str, Any] = {"crop_scale_min": 0.5}


def check_same_options(recorded: dict[str, Any], options: dict[str, Any], run_dir: Path) -> None:
    """Refuse to resume with another recipe, or other options the data order depends on."""
    before = {name: value for name, value in BEFORE_RECORDED.items() if name in options and name not in recorded}
    for name, value in {**recorded, **before}.items():
        if options.get(name) == value:
            continue
        if name == "data_manifest_sha256":
            raise DataError(
                f"{run_dir} was trained on other data (its manifest's sha256 differs): resume with the same --data, "
                "or pass a new --run-dir"
            )
        if isinstance(value, bool):  # a switch (--augment / --no-augment, --bf16 / --no-bf16), without a value
            was, given = (("--" if on else "--no-") + name.replace("_", "-") for on in (value, not value))
            raise DataError(
                f"{run_dir} was trained with {was}, not {given}: resume with {was}, or pass a new --run-dir"
            )
        flag = "--" + name.replace("_", "-")
        raise DataError(
            f"{run_dir} was trained with {flag} {value}, not {options.get(name)}: resume with {flag} {value}, "
            "or pass a new --run-dir"
        )
