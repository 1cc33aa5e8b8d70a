"""One rank of bench.py's memory-per-node measurement; torchrun starts W of them on this node.

    python -m torch.distributed.run --standalone --nproc-per-node W -m <package>.bench_ranks MODE DATA SIGNALS

MODE is what each rank holds while bench.py adds up the PSS of all ranks and their workers:

- idle: the same ranks and K workers handing on batches of the same size (zeros), with no
  data behind them: the memory of the processes and of the batches in flight;
- loader: this project's RankLoader, one epoch read with K workers (undecoded batches);
- naive: what this project avoids, every rank reading the whole data set into its own memory.

Each rank reads its epoch but the last batch (its workers stay alive), writes
SIGNALS/ready-RANK, and waits for SIGNALS/go before it finishes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import torch.distributed as dist
import typer

from .data.decode import payload_batch
from .data.loader import RankLoader
from .data.manifest import MANIFEST, inside
from .data.reading import Reading
from .harness.errors import reported_as_one_line

WAIT_SECONDS = 600  # bench.py samples within seconds; a rank left alone gives up after this


class ZeroBatches(torch.utils.data.Dataset):
    """Batches of zeros as large as the loader's undecoded batches (`batch_size` mean payloads)."""

    def __init__(self, batch_bytes: int) -> None:
        self.batch_bytes = batch_bytes

    def __len__(self) -> int:
        return 1 << 30

    def __getitems__(self, positions: list[int]) -> dict:
        return {"payload": torch.zeros(self.batch_bytes, dtype=torch.uint8), "y": torch.zeros(len(positions))}


def zero_epoch(data: Path, num_workers: int, batch_size: int, steps: int) -> torch.utils.data.DataLoader:
    manifest = json.loads((data / MANIFEST).read_text())  # bench.py checked it before starting the ranks
    batch_bytes = batch_size * manifest["payload_bytes"] // manifest["num_samples"]
    batches = torch.utils.data.BatchSampler(range(steps * batch_size), batch_size, drop_last=True)
    return torch.utils.data.DataLoader(
        ZeroBatches(batch_bytes), batch_sampler=batches, collate_fn=lambda batch: batch, num_workers=num_workers
    )


def main(
    mode: Annotated[str, typer.Argument(help="idle, loader or naive")],
    data: Annotated[Path, typer.Argument(help="Prepared data folder")],
    signals: Annotated[Path, typer.Argument(help="Folder for the ready-RANK and go files")],
    num_workers: Annotated[int, typer.Option(help="DataLoader workers per rank")] = 2,
    batch_size: Annotated[int, typer.Option(help="Samples per batch")] = 256,
) -> None:
    if mode not in ("idle", "loader", "naive"):
        raise typer.BadParameter(f"{mode!r} is not idle, loader or naive", param_hint="MODE")
    dist.init_process_group("gloo")
    try:
        with reported_as_one_line():
            hold_an_epoch(mode, data, signals, num_workers, batch_size)
    finally:
        dist.destroy_process_group()


def hold_an_epoch(mode: str, data: Path, signals: Path, num_workers: int, batch_size: int) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    held = []
    if mode == "loader":
        loader = RankLoader(
            data,
            reading=Reading(num_workers=num_workers),
            seed=0,
            world_size=world_size,
            rank=rank,
            batch_size=batch_size,
            make_batch=payload_batch,
        )
        batches, steps = loader.epoch(0), loader.steps
    else:
        if mode == "naive":
            manifest = json.loads((data / MANIFEST).read_text())
            held = [np.fromfile(inside(data, shard["path"]), dtype=np.uint8) for shard in manifest["shards"]]
        steps = 4 * max(num_workers, 1)  # more than the batches in flight (2 per worker)
        batches = zero_epoch(data, num_workers, batch_size, steps)
    iterator = iter(batches)
    for _ in range(steps - 1):
        next(iterator)
    (signals / f"ready-{rank}").touch()
    deadline = time.monotonic() + WAIT_SECONDS
    while not (signals / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in iterator:
        pass
    del held
    dist.barrier()


if __name__ == "__main__":
    typer.run(main)
