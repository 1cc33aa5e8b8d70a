"""The sample ledger: LEDGER/rank{r}.jsonl, one line per optimizer step.

    {"epoch": e, "step": s, "rank": r, "keys": [...], "labels": [...]}

Keys and labels are in the order the batch held them. `read_ledger` turns a ledger back
into what `guarantees.py` checks: per epoch, per rank, the list of batches of keys.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .errors import DataError


class LedgerWriter:
    """Rank `rank`'s ledger file, started afresh; rank 0 also removes the files of ranks beyond
    `world_size` that an earlier, larger run left in the same folder."""

    def __init__(self, directory: str | Path, rank: int, world_size: int) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.file = open(directory / f"rank{rank}.jsonl", "w")
        self.rank = rank
        if rank == 0:
            for stale in directory.glob("rank*.jsonl"):
                if stale.stem[4:].isdigit() and int(stale.stem[4:]) >= world_size:
                    stale.unlink()

    def write(self, epoch: int, step: int, keys: list[str], labels: list[int]) -> None:
        record = {
            "epoch": epoch,
            "step": step,
            "rank": self.rank,
            "keys": list(keys),
            "labels": [int(y) for y in labels],
        }
        self.file.write(json.dumps(record) + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_ledger(directory: str | Path) -> dict[int, list[list[list[str]]]]:
    """{epoch: [rank][step] -> keys}, ranks 0..W-1 from rank*.jsonl, steps in step order."""
    files = sorted(Path(directory).glob("rank*.jsonl"), key=lambda p: int(p.stem[4:]))
    if not files:
        raise DataError(f"no rank*.jsonl files in {directory}: pass the --ledger folder of a training run")
    epochs: dict[int, dict[int, dict[int, list[str]]]] = defaultdict(lambda: defaultdict(dict))
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
                epochs[record["epoch"]][record["rank"]][record["step"]] = record["keys"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataError(f"{path}:{number} is not a ledger record ({err})") from None
    world_size = len(files)
    return {
        epoch: [[ranks[r][s] for s in sorted(ranks.get(r, {}))] for r in range(world_size)]
        for epoch, ranks in sorted(epochs.items())
    }


def read_labels(directory: str | Path) -> dict[str, int]:
    """key -> label, as the ledger recorded them."""
    labels: dict[str, int] = {}
    for path in Path(directory).glob("rank*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            labels.update(zip(record["keys"], record["labels"], strict=True))
    return labels
