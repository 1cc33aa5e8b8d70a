"""The sample ledger: LEDGER/rank{r}.jsonl, one line per optimizer step.

    {"epoch": e, "step": s, "rank": r, "world_size": w, "keys": [...], "labels": [...]}

Keys and labels are in the order the batch held them. `read_ledger` turns a ledger back
into what `checks/guarantees.py` checks: per epoch, per rank, the list of batches of keys.

A resumed run truncates every rank's file to the steps before its checkpoint and appends
from there, so an interrupted and resumed run leaves the very bytes an uninterrupted one
would. An epoch resumed on another number of ranks runs in stretches (progress.py), each
on its own world size: `read_stretches` reads them apart.

A disk that refuses a line (full, read-only) ends the run in one line naming the ledger and no
restart, as a checkpoint's does; the part of the line that fitted is cut off again, so the file
holds whole lines only and a resume reads it as if the run had stopped a step earlier.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from .errors import RESUME_FIX, DataError, disk_errors_reported

# A resume truncates the ledger to its checkpoint's steps (LedgerWriter), so the same folder goes on.
LEDGER_FIX = RESUME_FIX.replace("the same --run-dir", "the same --run-dir and --ledger")


def ledger_files(directory: Path) -> list[Path]:
    files = [path for path in directory.glob("rank*.jsonl") if path.stem[4:].isdigit()]
    return sorted(files, key=lambda path: int(path.stem[4:]))


def keep_lines(path: Path, keep: Callable[[dict], bool]) -> None:
    """Keep the JSON lines of `path` that `keep` accepts; written to a temporary name, then renamed."""
    kept = [line for line in path.read_text().splitlines(keepends=True) if line.strip() and keep(json.loads(line))]
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text("".join(kept))
        partial.replace(path)
    except BaseException:  # a full disk included: the file stays as it was, nothing half-written beside it
        partial.unlink(missing_ok=True)
        raise


def truncate_before(path: Path, epoch: int, step: int) -> None:
    keep_lines(path, lambda record: (record["epoch"], record["step"]) < (epoch, step))


class LedgerWriter:
    """Rank `rank`'s ledger file. A new run starts it afresh, and rank 0 removes the files of
    ranks beyond `world_size` that an earlier, larger run left in the same folder. A run
    resumed at (epoch, step) `resume_at` keeps every file's lines before it (rank 0 also those
    of ranks this run no longer has: they hold the epochs those ranks ran) and appends.
    Lines are written through as they come (unbuffered): a rank that dies leaves every step it
    took, and the lines of a checkpoint's steps are in the file before it. A write its disk
    refuses is a DataError naming the folder (every rank that meets it says the same line)."""

    def __init__(
        self, directory: str | Path, rank: int, world_size: int, resume_at: tuple[int, int] | None = None
    ) -> None:
        self.directory = directory = Path(directory)
        path = directory / f"rank{rank}.jsonl"
        with self.disk_errors_reported():
            directory.mkdir(parents=True, exist_ok=True)
            if resume_at is None:
                if rank == 0:
                    for stale in ledger_files(directory):
                        if int(stale.stem[4:]) >= world_size:
                            stale.unlink()
                self.file = open(path, "wb", buffering=0)
            else:
                if path.exists():
                    truncate_before(path, *resume_at)
                if rank == 0:
                    for other in ledger_files(directory):
                        if int(other.stem[4:]) >= world_size:
                            truncate_before(other, *resume_at)
                self.file = open(path, "ab", buffering=0)
        self.end = os.fstat(self.file.fileno()).st_size  # where the whole lines end
        self.rank, self.world_size = rank, world_size

    def disk_errors_reported(self) -> contextlib.AbstractContextManager[None]:
        return disk_errors_reported(f"the ledger {self.directory}", LEDGER_FIX)

    def write(self, epoch: int, step: int, keys: list[str], labels: list[int] | None) -> None:
        """One step's line; `labels` None for a data set without classes (the line has no "labels")."""
        record = {"epoch": epoch, "step": step, "rank": self.rank, "world_size": self.world_size, "keys": list(keys)}
        if labels is not None:
            record["labels"] = [int(y) for y in labels]
        line = (json.dumps(record) + "\n").encode()
        with self.disk_errors_reported():
            try:
                written = 0
                while written < len(line):  # a write may take only a part of it
                    written += self.file.write(line[written:])
            except OSError:
                if os.fstat(self.file.fileno()).st_size > self.end:
                    os.ftruncate(self.file.fileno(), self.end)  # the part that fitted: a resume would read it
                raise
        self.end += len(line)

    def close(self) -> None:
        self.file.close()


def read_records(directory: str | Path) -> dict[int, list[dict]]:
    """{epoch: records}, every line of every rank*.jsonl file."""
    files = ledger_files(Path(directory))
    if not files:
        raise DataError(f"no rank*.jsonl files in {directory}: pass the --ledger folder of a training run")
    epochs: dict[int, list[dict]] = defaultdict(list)
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
                record.setdefault("world_size", len(files))  # ledgers written before world_size was recorded
                epochs[record["epoch"]].append({name: record[name] for name in ("step", "rank", "world_size", "keys")})
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataError(f"{path}:{number} is not a ledger record ({err})") from None
    return dict(sorted(epochs.items()))


def read_stretches(directory: str | Path) -> dict[int, list[list[list[list[str]]]]]:
    """{epoch: [stretch][rank][step] -> keys}: each epoch cut where the world size its steps ran on
    changes (one stretch, unless the epoch was resumed on another number of ranks)."""
    stretches = {}
    for epoch, records in read_records(directory).items():
        world_of_step: dict[int, int] = {}
        for record in records:
            world_of_step[record["step"]] = max(world_of_step.get(record["step"], 0), record["world_size"])
        bounds = []  # (world_size, first step, end step) of each stretch
        for step in sorted(world_of_step):
            if bounds and bounds[-1][0] == world_of_step[step]:
                bounds[-1][2] = step + 1
            else:
                bounds.append([world_of_step[step], step, step + 1])
        parts = []
        for world_size, first, end in bounds:
            ranks: dict[int, dict[int, list[str]]] = defaultdict(dict)
            for record in records:
                if first <= record["step"] < end:
                    ranks[record["rank"]][record["step"]] = record["keys"]
            size = max(world_size, max(ranks, default=-1) + 1)
            parts.append([[ranks[r][s] for s in sorted(ranks.get(r, {}))] for r in range(size)])
        stretches[epoch] = parts
    return stretches


def read_ledger(directory: str | Path) -> dict[int, list[list[list[str]]]]:
    """{epoch: [rank][step] -> keys}, steps in step order: the ledger of a run whose epochs each
    ran on one world size (use read_stretches for one resumed on another number of ranks)."""
    epochs = {}
    for epoch, parts in read_stretches(directory).items():
        if len(parts) > 1:
            sizes = " then ".join(str(len(part)) for part in parts)
            raise DataError(f"epoch {epoch} of {directory} ran on {sizes} ranks: read it with read_stretches")
        epochs[epoch] = parts[0]
    return epochs


def read_labels(directory: str | Path) -> dict[str, int]:
    """key -> label, as the ledger recorded them."""
    labels: dict[str, int] = {}
    for path in Path(directory).glob("rank*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "labels" in record:  # a data set without classes: none recorded
                labels.update(zip(record["keys"], record["labels"], strict=True))
    return labels
