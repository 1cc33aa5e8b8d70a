"""How fast this project's loader is on your data, against what the same bytes allow and what you would write instead.

    python -m <package>.bench --data data            # table on stdout; bench/bench.json and bench/bench.png
    python -m <package>.bench --data data --ranks 4  # memory per node with 4 real ranks
    python -m <package>.bench --data data --image-size 224 --augment  # decoded as training at 224 px

The decoded rows decode at --image-size, augmented under --augment (training's decode); the
last line says how many cores feed --gpu-rate images a second to one GPU at the loader's
samples per CPU-second. Without matplotlib the table is printed and no bench.png drawn.

One rank (world size 1) reads a whole epoch of the data; every figure is the median of
--repeats passes, the kinds of pass taking turns so that a slow moment of a shared
machine spreads over all of them. A warm-up pass reads everything first, so the page
cache is warm unless a row says cold. Rows:

- ceiling: the files the loader reads, read start to end in large pieces with nothing
  else done: as fast as these bytes come off this machine. A loader is reported as a
  fraction of it (samples/s over samples/s: both read the same files for the same samples).
- loader, read (0 / K workers): the project's RankLoader handing over the stored bytes
  undecoded (decode.payload_batch): planning, reading, checking and the hand-off from
  the workers to the trainer, without decoding.
- loader, decoded: the same with decode.decode_batch, what training gets. Read vs decoded
  says whether a run is I/O- or CPU-bound.
- decode alone, per worker: every sample of an epoch read by the loader (untimed), then
  decoded by decode.decode_batch in this one process, only the decoding timed: the
  samples/s (images/s for images) one DataLoader worker can decode of this data set's
  payloads. The samples counted are those decode_batch returned.
- decode ceiling: every sample of an epoch decoded at full scale and nothing else (no resize,
  no crop), in one process. Every row is also given in samples per CPU-second (this process and
  the workers it waited for) and as a share of this row's.
- peer: what a user would write instead, on the same data and batch size (see bench_backend.peer_loader);
  decoded at --image-size, with a random resized crop + flip under --augment.
- loader, read, cold: the read pass after the data's pages were dropped from the page
  cache (posix_fadvise DONTNEED; Linux), so the storage itself is read.
- memory per node: W real ranks (torchrun) with K workers each read one epoch; the total
  PSS of all of them (/proc/PID/smaps_rollup), less that of the same processes reading
  nothing, against the data set's size; and the same for every rank loading the data
  itself.
- claims: measurements of what the backend's design rests on (see bench_backend.claims).
- the backend's own rows (bench_backend.more_rows; webdataset: over a URL with latency).

What differs between backends (the peer, the claims, the targets of the backend alone, the
rows of the backend alone) is in bench_backend.py, one per backend with the same names.

Targets (each row of "targets" in bench.json says met or not, with the figure): see TARGETS.
"""

from __future__ import annotations

import copy
import io
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer
from PIL import Image

from . import bench_backend
from .bench_backend import BACKEND, FORMAT, BackendOptions, Data, peer_loader
from .bench_timing import Pass, Row, loader_passes, measure_in_turns, plural, timed
from .data.decode import IMAGE_EXTENSIONS, IMAGE_SIZE, MakeBatch, Record, decode, decode_batch, payload_batch
from .data.loader import RankLoader
from .data.manifest import inside, open_manifest
from .data.reading import Reading
from .harness.errors import DataError, reported_as_one_line
from .harness.options import options_of

READ_PIECE = 8 << 20  # the ceiling reads files in pieces of this many bytes
CHECKSUM_SECONDS = 0.5  # how long the checksum speed test hashes
GPU_RATE = 2500  # --gpu-rate's default: images per second one GPU trains on (a ResNet-50 on an A100, about)
MEMORY_MIN_BYTES = 64 << 20  # smaller data sets report memory per node, but do not judge its target
TARGETS = {
    # name: (what, goal, higher is better)
    "read_vs_ceiling": ("loader read with K workers / ceiling (samples/s)", 0.7, True),
    "workers_vs_main": ("loader read, K workers / 0 workers", 1.0, True),
    "decode_scaling": ("loader decoded, K workers / 0 workers, as a fraction of K", 0.8, True),
    # The time sha256 takes over a mean payload, against the time per sample of reading it.
    **(
        {"checksum_share": ("sha256 of a sample / the loader's read of it (0 workers)", 0.1, False)}
        if bench_backend.CHECKSUM_EVERY_SAMPLE
        else {}
    ),
    # Reading, decoding excluded: decoding costs the same in both and would hide the difference.
    "read_vs_peer": ("loader read / peer read, K workers", bench_backend.READ_VS_PEER_GOAL, True),
    **bench_backend.TARGETS,  # the backend's own
}


@dataclass(frozen=True)
class Training:
    """What the decoded rows decode like: training's image size and augmentation (train's
    --image-size and --augment), and the GPU rate the cores line feeds."""

    image_size: int = IMAGE_SIZE
    augment: bool = False
    gpu_rate: float = GPU_RATE

    def check(self) -> None:
        if self.image_size < 1 or self.gpu_rate <= 0:
            raise DataError(
                f"--image-size must be at least 1 and --gpu-rate above 0, not {self.image_size} and {self.gpu_rate}"
            )

    def loader(self, data: str | Path, reading: Reading, batch_size: int) -> RankLoader:
        """The project's loader on one rank, 0 workers (the rows copy it with theirs), decoding as training does."""
        return RankLoader(
            data, reading=replace(reading, num_workers=0), seed=0, world_size=1, rank=0, batch_size=batch_size,
            image_size=self.image_size, augment=self.augment,
        )  # fmt: skip

    def peer(self, data: str | Path, manifest: dict, batch_size: int, num_workers: int, make_batch: MakeBatch | None):
        return peer_loader(
            data, manifest, batch_size, num_workers, make_batch, image_size=self.image_size, augment=self.augment
        )


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


# --- the ceiling: the same files, read start to end -------------------------------------


def data_files(data: Path, manifest: dict) -> list[Path]:
    """The files the loader reads samples from, in storage order."""
    return [inside(data, shard["path"]) for shard in manifest["shards"]]


def read_files(files: list[Path]) -> None:
    """Read every file start to end, in pieces, into one reused buffer."""
    view = memoryview(bytearray(READ_PIECE))
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(view):
                pass


def ceiling(files: list[Path], num_samples: int) -> Callable[[int], Iterable[dict]]:
    def batches(_: int) -> Iterator[dict]:
        read_files(files)
        yield {"key": range(num_samples)}  # the whole data set, read once

    return batches


def drop_from_page_cache(files: list[Path]) -> bool:
    """Ask the kernel to forget the files' cached pages; False where the platform cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages only: prep's were written back long ago
        finally:
            os.close(fd)
    return True


# --- the project's loader -------------------------------------------------------------------


def with_settings(loader: RankLoader, num_workers: int, make_batch: MakeBatch | None) -> RankLoader:
    """The same opened data set with other workers or batches: one copy of it (the memory
    backend holds the data in RAM once), not one per variant."""
    variant = copy.copy(loader)
    variant.num_workers, variant.make_batch = num_workers, make_batch
    bench_backend.plan_workers(variant, loader, num_workers)
    return variant


# --- decoding alone -------------------------------------------------------------------------


def record_batch(records: Sequence[Record], num_classes: int) -> dict:
    """make_batch of the decode row's reads: the stored records themselves, undecoded."""
    return {"records": list(records)}


def decoded_batches(
    loader: RankLoader, epoch: int, reduced_scale: bool = True
) -> Iterator[tuple[dict, float, float, list[str]]]:
    """(the batch as training decodes it, the seconds and CPU-seconds decoding took, its payload kinds), batch after
    batch of `epoch`: the loader reads the stored records (its settings, `record_batch`), untimed;
    decode_batch (at the loader's image size and augmentation) decodes them in this process, timed.
    `reduced_scale=False`: every JPEG pixel decoded (decode.py), for the full-scale row."""
    reader = with_settings(loader, loader.num_workers, record_batch)
    decode_records = with_settings(loader, loader.num_workers, None).batch_maker(epoch)  # what training decodes with
    num_classes = loader.manifest["num_classes"]
    for batch in reader.epoch(epoch):
        start, cpu = time.perf_counter(), time.process_time()
        decoded = decode_records(batch["records"], num_classes, reduced_scale=reduced_scale)
        took, cpu_took = time.perf_counter() - start, time.process_time() - cpu
        yield decoded, took, cpu_took, [record.extension for record in batch["records"]]


def decode_pass(loader: RankLoader, epoch: int, reduced_scale: bool = True) -> tuple[Pass, list[str]]:
    """(one pass of the decode row, the payload kinds it met): decoding time only; the samples
    counted are those decoding returned, not those read."""
    samples, seconds, cpu, first, kinds = 0, 0.0, 0.0, None, set()
    for decoded, took, cpu_took, extensions in decoded_batches(loader, epoch, reduced_scale):
        seconds, cpu = seconds + took, cpu + cpu_took
        first = seconds if first is None else first
        samples += len(decoded["key"])
        kinds.update(extensions)
    return Pass(samples, seconds, first or 0.0, cpu), sorted(kinds)


def decode_only(record: Record) -> None:
    """The payload decoded and nothing else: an image's every pixel (no reduced scale, no resize,
    no crop), any other payload as decode.decode makes it."""
    if record.extension in IMAGE_EXTENSIONS:
        with Image.open(io.BytesIO(record.payload)) as image:
            image.convert("RGB")
    else:
        decode(record.payload, record.extension)


def ceiling_decodes(loader: RankLoader, epoch: int) -> Iterator[tuple[list, float, float]]:
    """(the keys decoded, seconds, CPU-seconds), batch after batch of `epoch`: the loader reads the
    stored records (untimed), decode_only decodes each in this one process, timed."""
    reader = with_settings(loader, loader.num_workers, record_batch)
    for batch in reader.epoch(epoch):
        start, cpu = time.perf_counter(), time.process_time()
        for record in batch["records"]:
            decode_only(record)
        yield [record.key for record in batch["records"]], time.perf_counter() - start, time.process_time() - cpu


def decode_ceiling_row(loader: RankLoader, repeats: int) -> Row:
    """The decode ceiling of this data: every sample of an epoch decoded at full scale and nothing
    else, in one process; every row's samples per CPU-second is reported as a share of it."""
    row = Row("decode_ceiling", "decode ceiling: decode only, full scale, 1 process")
    for repeat in range(repeats):
        samples, seconds, cpu, first = 0, 0.0, 0.0, None
        for keys, took, cpu_took in ceiling_decodes(loader, repeat + 1):
            samples, seconds, cpu = samples + len(keys), seconds + took, cpu + cpu_took
            first = seconds if first is None else first
        row.add(Pass(samples, seconds, first or 0.0, cpu), repeat, repeats)
    return row


def cores_needed(loader_row: Row, gpu_rate: float) -> float:
    """The cores that feed `gpu_rate` samples per second to one GPU at the loader row's samples per CPU-second."""
    return gpu_rate / loader_row.samples_per_cpu_s


def cores_line(loader_row: Row, gpu_rate: float) -> str:
    return (
        f"to feed {gpu_rate:,.0f} img/s per GPU this data needs about {cores_needed(loader_row, gpu_rate):.1f} cores "
        f"({loader_row.what}: {loader_row.samples_per_cpu_s:,.0f} samples per CPU-second)"
    )


JPEG_KINDS = frozenset({"jpg", "jpeg"})


def decode_rows(loader: RankLoader, repeats: int) -> list[Row]:
    """The decode row; where the data holds JPEGs, also the same samples decoded at full scale
    (decode.py's reduced-scale decode off), the two taking turns: what the reduced scale saves."""
    reduced = Row("decode", "decode alone, per worker")
    full = Row("decode_full", "decode alone, per worker, JPEGs at full scale")
    for repeat in range(repeats):
        latest, kinds = decode_pass(loader, repeat + 1)
        reduced.what = f"decode alone, per worker ({', '.join(kinds)})"
        reduced.add(latest, repeat, repeats)
        if JPEG_KINDS & set(kinds):
            full.add(decode_pass(loader, repeat + 1, reduced_scale=False)[0], repeat, repeats)
    return [reduced, full] if full.passes else [reduced]


def decode_ratios(by_name: dict[str, Row]) -> dict[str, float]:
    """How much faster the reduced scale decodes this data's JPEGs, where it holds any."""
    if "decode_full" not in by_name:
        return {}
    return {"reduced_vs_full_scale": by_name["decode"].samples_per_s / by_name["decode_full"].samples_per_s}


def warm_then_measure(rows: dict[str, tuple[str, Callable[[int], Iterable[dict]]]], repeats: int) -> list[Row]:
    """Every row once, untimed (the page cache warm), then the timed passes in turns."""
    print("warm-up: every row once, untimed")
    for _, batches in rows.values():
        timed(batches(0))
    return measure_in_turns(rows, repeats)


def cold_row(read_wk: RankLoader, files: list[Path], repeats: int) -> Row:
    """The loader's read with K workers, the data dropped from the page cache before each pass."""
    row = Row("read_wk_cold", f"loader, read, {plural(read_wk.num_workers, 'worker')}, cold")
    for repeat in range(repeats):
        drop_from_page_cache(files)
        row.add(timed(read_wk.epoch(repeat + 1)), repeat, repeats)
    return row


def row_reports(measured: list[Row], rate: float, mean_bytes: float) -> list[dict]:
    """bench.json's rows: each row's medians, as a fraction of the read ceiling's `rate` too, its
    samples per CPU-second and their share of the decode ceiling's, and its passes."""
    decode_rate = next(r.samples_per_cpu_s for r in measured if r.name == "decode_ceiling")
    return [
        {
            "name": r.name,
            "what": r.what,
            "samples_per_s": r.samples_per_s,
            "mb_per_s": r.samples_per_s * mean_bytes / 1e6,
            "of_ceiling": r.samples_per_s / rate,
            "samples_per_cpu_s": r.samples_per_cpu_s,
            "cpu_s_per_1000_samples": 1000 / r.samples_per_cpu_s,
            "of_decode_ceiling": r.samples_per_cpu_s / decode_rate,
            "first_batch_s": r.first_batch,
            "passes": [asdict(p) for p in r.passes],
        }
        for r in measured
    ]


# --- memory per node: W real ranks ----------------------------------------------------------


def process_tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def total_pss(pids: list[int]) -> int:
    """Sum of the proportional set sizes (bytes): a page shared by n processes counts 1/n in each."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue  # gone meanwhile
    return total


def node_pss(data: Path, mode: str, ranks: int, num_workers: int, batch_size: int, scratch: Path) -> int:
    """Peak total PSS of `ranks` torchrun ranks (bench_ranks.py in `mode`) and their workers,
    sampled once every rank has read its epoch but the last batch (its workers still alive)."""
    signals = scratch / mode
    signals.mkdir()
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
        # torchrun's per-run log folder, in the scratch folder removed after the measurement (by
        # default torchrun makes one in TMPDIR and leaves it there after every run)
        "--log-dir", str(signals / "torchrun"),
        "-m", f"{__package__}.bench_ranks", mode, str(data), str(signals),
        "--num-workers", str(num_workers), "--batch-size", str(batch_size),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 600
        while len(list(signals.glob("ready-*"))) < ranks:
            if process.poll() is not None:
                output = process.stdout.read().decode(errors="replace")
                errors = [line for line in output.splitlines() if line.startswith("error: ")]
                if errors:  # bad sizes or data, which only W ranks meet: the ranks' own line
                    raise DataError(f"memory per node with {ranks} ranks: {errors[0].removeprefix('error: ')}")
                raise DataError(f"the {mode} ranks of the memory measurement failed:\n{output[-3000:]}")
            if time.monotonic() > deadline:
                raise DataError(f"the {mode} ranks of the memory measurement did not get ready in 600 s")
            time.sleep(0.05)
        peak = max(total_pss(process_tree(process.pid)) for _ in range(3))
        (signals / "go").touch()
        process.wait(timeout=120)
        return peak
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def memory_per_node(data: Path, payload_bytes: int, ranks: int, num_workers: int, batch_size: int) -> dict:
    """Extra PSS over `idle` (the same processes handing on batches of the same size, with no data
    behind them) per byte of the data set, for this project's loader and for the naive way."""
    modes = bench_backend.MEMORY_MODES
    with tempfile.TemporaryDirectory(prefix="bench-ranks-") as scratch:
        peaks = {}
        for mode in modes:
            print(f"  memory per node: {ranks} ranks x {plural(num_workers, 'worker')}, {mode}")
            peaks[mode] = node_pss(data, mode, ranks, num_workers, batch_size, Path(scratch))
    result = {"ranks": ranks, "num_workers": num_workers, "data_bytes": payload_bytes, "pss": peaks}
    for mode in modes[1:]:
        result[f"{mode}_vs_data"] = (peaks[mode] - peaks["idle"]) / payload_bytes
    if payload_bytes < MEMORY_MIN_BYTES:
        result["note"] = (
            f"the data set ({payload_bytes / 2**20:.0f} MiB) is too small beside the processes' own memory, which "
            f"varies by several MB from launch to launch: use {MEMORY_MIN_BYTES >> 20} MiB or more to judge the target"
        )
    return result


# --- claims the backend's design rests on -------------------------------------------------


def checksum_speeds() -> dict:
    """MB/s of the checksums a read path could use, on 64 KiB pieces: sha256, which this project
    checks (once per file when the node loads it, or on every sample it reads: bench_backend.py's
    CHECKSUM_EVERY_SAMPLE), and two cheaper ones for comparison."""
    import hashlib
    import zlib

    piece = np.random.default_rng(0).bytes(1 << 16)
    speeds = {}
    for name, digest in {
        "sha256": lambda b: hashlib.sha256(b).digest(),
        "blake2b": lambda b: hashlib.blake2b(b, digest_size=16).digest(),
        "crc32": zlib.crc32,
    }.items():
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < CHECKSUM_SECONDS / 3:
            digest(piece)
            count += 1
        speeds[name] = count * len(piece) / (time.perf_counter() - start) / 1e6
    return {"checksum_mb_per_s": speeds}


# --- data behind a URL or in a bucket --------------------------------------------------------


def run_remote(data: str, batch_size: int, reading: Reading, repeats: int, training: Training) -> dict:
    """The rows that need no local files, for data over http(s) or in a bucket: the ceiling is
    the shards read whole (one GET each); no cold pass (no page cache to drop), no memory per
    node and no claims (both measure local files)."""
    start = time.perf_counter()
    loader = training.loader(data, reading, batch_size)
    opened = time.perf_counter() - start
    manifest, num_workers = loader.manifest, reading.num_workers
    num_samples, mean_bytes = manifest["num_samples"], manifest["payload_bytes"] / manifest["num_samples"]
    print(f"{BACKEND}: {num_samples:,} samples of {mean_bytes / 1e3:.1f} KB on average, in {data}")
    read_w0 = with_settings(loader, 0, payload_batch)
    read_wk = with_settings(loader, num_workers, payload_batch)
    decoded_wk = with_settings(loader, num_workers, None)  # at training's size and augmentation
    workers = plural(num_workers, "worker")
    rows = {
        "ceiling": (
            "ceiling: the shards read whole, one request each",
            bench_backend.remote_ceiling(data, manifest, reading.retry_seconds),
        ),
        "read_w0": ("loader, read, 0 workers", loader_passes(read_w0)),
        "read_wk": (f"loader, read, {workers}", loader_passes(read_wk)),
        "decoded_wk": (f"loader, decoded, {workers}", loader_passes(decoded_wk)),
        "peer_read_wk": (f"peer, read, {workers}", peer_loader(data, manifest, batch_size, num_workers, payload_batch)),
        "peer_decoded_wk": (
            f"peer, decoded, {workers}",
            training.peer(data, manifest, batch_size, num_workers, decode_batch),
        ),
    }
    measured = warm_then_measure(rows, repeats) + decode_rows(read_w0, repeats) + [decode_ceiling_row(read_w0, repeats)]
    by_name = {row.name: row for row in measured}
    rate = by_name["ceiling"].samples_per_s
    # Requests an epoch: the loader's planned runs; one per shard for the ceiling and the peer (whole shards).
    requests = {name: bench_backend.planned_requests(read_wk, 1)[0] for name in ("read_w0", "read_wk", "decoded_wk")}
    requests |= {name: len(manifest["shards"]) for name in ("ceiling", "peer_read_wk", "peer_decoded_wk")}
    reports = [
        {**row, "requests_per_epoch": requests.get(row["name"])} for row in row_reports(measured, rate, mean_bytes)
    ]
    ratios = {
        "read_vs_ceiling": by_name["read_wk"].samples_per_s / rate,
        "workers_vs_main": by_name["read_wk"].samples_per_s / by_name["read_w0"].samples_per_s,
        "read_vs_peer": by_name["read_wk"].samples_per_s / by_name["peer_read_wk"].samples_per_s,
        **decode_ratios(by_name),
    }
    return {
        "backend": BACKEND,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "data": {"path": data, "num_samples": num_samples, "payload_bytes": manifest["payload_bytes"]},
        "settings": settings(batch_size, num_workers, repeats, training),
        "open_seconds": opened,
        "rows": reports,
        "ratios": ratios,
        "targets": [row for row in target_rows(ratios) if row["value"] is not None],
        "table": table(measured, rate, mean_bytes),
        "cores": cores_report(by_name["decoded_wk"], training.gpu_rate),
    }


# --- the report -----------------------------------------------------------------------------


def target_rows(ratios: dict) -> list[dict]:
    rows = []
    for name, (what, goal, higher) in TARGETS.items():
        value = ratios.get(name)
        met = None if value is None else (value >= goal if higher else value <= goal)
        rows.append({"target": name, "what": what, "goal": goal, "higher": higher, "value": value, "met": met})
    return rows


def settings(batch_size: int, num_workers: int, repeats: int, training: Training) -> dict:
    return {"batch_size": batch_size, "num_workers": num_workers, "repeats": repeats, **asdict(training)}


def cores_report(loader_row: Row, gpu_rate: float) -> dict:
    """The cores line of the loader's decoded row with K workers, what training runs."""
    return {
        "gpu_rate": gpu_rate,
        "row": loader_row.name,
        "samples_per_cpu_s": loader_row.samples_per_cpu_s,
        "cores": cores_needed(loader_row, gpu_rate),
        "line": cores_line(loader_row, gpu_rate),
    }


def table(rows: list[Row], ceiling_rate: float, mean_bytes: float) -> str:
    """One line a row: samples/s and MB/s (wall), as a share of the read ceiling, samples per
    CPU-second and their share of the decode ceiling's, and the first batch's wait."""
    decode_rate = next(row.samples_per_cpu_s for row in rows if row.name == "decode_ceiling")
    lines = [
        "| measurement | samples/s | MB/s | of read ceiling | samples/CPU-s | of decode ceiling | first batch (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.what} | {row.samples_per_s:,.0f} | {row.samples_per_s * mean_bytes / 1e6:,.1f} | "
            f"{row.samples_per_s / ceiling_rate:.2f} | {row.samples_per_cpu_s:,.0f} | "
            f"{row.samples_per_cpu_s / decode_rate:.2f} | {row.first_batch:.2f} |"
        )
    return "\n".join(lines)


def figure(rows: list[dict], path: Path, title: str) -> bool:
    """Horizontal bars: each row's samples/s as a fraction of the ceiling; False (nothing drawn)
    where matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    names = [row["what"] for row in rows][::-1]
    values = [row["of_ceiling"] for row in rows][::-1]
    bars = ax.barh(names, values, color=["#4c72b0" if "peer" not in n else "#999999" for n in names])
    ax.bar_label(bars, labels=[f"{row['samples_per_s']:,.0f}/s" for row in rows][::-1], fontsize=8, padding=2)
    ax.set_xscale("log")  # loaders run 10 to 100 times below the ceiling: a linear axis shows no bars
    ax.set_xlim(min(values) / 3, 3.0)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("samples/s as a fraction of the ceiling (the same files read start to end), log scale")
    ax.set_title(title)
    fig.tight_layout()
    partial = path.with_name(path.name + ".partial.png")
    fig.savefig(partial, dpi=110)
    plt.close(fig)
    partial.replace(path)
    return True


@app.command()
@options_of(reading=Reading, backend=BackendOptions)
def main(
    data: Data,
    reading: Reading,  # train's reading options (data/reading.py): --num-workers is K, the workers of the multi-worker rows
    backend: BackendOptions,  # the options of this backend alone (bench_backend.py)
    out: Annotated[Path, typer.Option(help="Folder for bench.json and bench.png")] = Path("bench"),
    batch_size: Annotated[int, typer.Option(help="Samples per batch")] = 256,
    repeats: Annotated[int, typer.Option(help="Timed passes per row (the median is reported)")] = 3,
    ranks: Annotated[int, typer.Option(help="W for memory per node (0: skip it)")] = 2,
    image_size: Annotated[int, typer.Option(help="Side the decoded rows decode to: train's --image-size")] = IMAGE_SIZE,
    augment: Annotated[
        bool, typer.Option(help="Decoded rows with the train transform (random resized crop + flip), as training")
    ] = False,
    gpu_rate: Annotated[float, typer.Option(help="Images per second one GPU trains on, for the cores line")] = GPU_RATE,
    cold: Annotated[bool, typer.Option(help="Also time a pass with the data dropped from the page cache")] = True,
    claims_too: Annotated[
        bool, typer.Option("--claims/--no-claims", help="Also measure the backend's design claims")
    ] = True,
) -> None:
    """Measure the loader against the read ceiling of the same files and against the peer a user would write."""
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show as they come, also through a pipe
    with reported_as_one_line():
        reading.check()
        if batch_size < 1 or reading.num_workers < 1 or repeats < 1 or ranks < 0:
            raise DataError("--batch-size, --num-workers and --repeats must be at least 1, --ranks at least 0")

        backend.check()
        training = Training(image_size, augment, gpu_rate)
        training.check()
        report, sections = measure(data, batch_size, reading, backend, repeats, ranks, cold, claims_too, training)
        out.mkdir(parents=True, exist_ok=True)
        partial = out / "bench.json.partial"
        partial.write_text(json.dumps(report, indent=2) + "\n")
        partial.replace(out / "bench.json")
        samples = report["data"]["num_samples"]
        drawn = figure(report["rows"], out / "bench.png", f"{BACKEND}: {samples:,} samples, batch {batch_size}")
        print(report["table"])
        for section in sections:
            print(report[section]["table"])
        for target in report["targets"]:
            verdict = "n/a" if target["met"] is None else ("met" if target["met"] else "NOT met")
            value = "-" if target["value"] is None else f"{target['value']:.2f}"
            print(f"target {target['what']}: {value} (goal {target['goal']}): {verdict}")
        if drawn:
            print(f"wrote {out / 'bench.json'} and {out / 'bench.png'}")
        else:
            print(f"wrote {out / 'bench.json'}; no bench.png: matplotlib is not installed (pip install -e '.[audit]')")
        print(report["cores"]["line"])


def measure(
    data: str | Path,
    batch_size: int,
    reading: Reading,
    backend: BackendOptions,
    repeats: int,
    ranks: int,
    cold: bool,
    claims_too: bool,
    training: Training = Training(),
) -> tuple[dict, list[str]]:
    """(the report, the names of the backend's own sections in it): for data behind a URL or in a
    bucket, the rows that need no local files (and no server of the bench's own); else every
    row, then the backend's own rows (bench_backend.more_rows) with their ratios and targets."""
    if bench_backend.is_remote(data):
        return run_remote(str(data), batch_size, reading, repeats, training), []
    data = Path(data)
    manifest, _ = open_manifest(data, FORMAT)  # every path it names checked to stay inside `data`
    report = run(data, manifest, batch_size, reading, repeats, ranks, cold, claims_too, training)
    sections = bench_backend.more_rows(data, manifest, batch_size, reading, repeats, backend)
    for name, section in sections.items():
        report[name] = section
        report["ratios"].update(section["ratios"])
    report["targets"] = target_rows(report["ratios"])
    return report, list(sections)


def run(
    data: Path,
    manifest: dict,
    batch_size: int,
    reading: Reading,
    repeats: int,
    ranks: int,
    cold: bool,
    claims_too: bool,
    training: Training = Training(),
) -> dict:
    num_workers = reading.num_workers
    num_samples, mean_bytes = manifest["num_samples"], manifest["payload_bytes"] / manifest["num_samples"]
    files = data_files(data, manifest)
    print(f"{BACKEND}: {num_samples:,} samples of {mean_bytes / 1e3:.1f} KB on average, in {len(files):,} files")
    start = time.perf_counter()
    loader = training.loader(data, reading, batch_size)
    opened = time.perf_counter() - start
    read_w0 = with_settings(loader, 0, payload_batch)
    read_wk = with_settings(loader, num_workers, payload_batch)
    decoded_w0 = with_settings(loader, 0, None)  # None: decode_batch at training's size and augmentation
    decoded_wk = with_settings(loader, num_workers, None)
    rows = {
        "ceiling": ("ceiling: the files read start to end", ceiling(files, num_samples)),
        "read_w0": ("loader, read, 0 workers", loader_passes(read_w0)),
        "read_wk": (f"loader, read, {plural(num_workers, 'worker')}", loader_passes(read_wk)),
        "decoded_w0": ("loader, decoded, 0 workers", loader_passes(decoded_w0)),
        "decoded_wk": (f"loader, decoded, {plural(num_workers, 'worker')}", loader_passes(decoded_wk)),
        "peer_read_wk": (
            f"peer, read, {plural(num_workers, 'worker')}",
            peer_loader(data, manifest, batch_size, num_workers, payload_batch),
        ),
        "peer_decoded_wk": (
            f"peer, decoded, {plural(num_workers, 'worker')}",
            training.peer(data, manifest, batch_size, num_workers, decode_batch),
        ),
    }
    measured = warm_then_measure(rows, repeats) + decode_rows(read_w0, repeats) + [decode_ceiling_row(read_w0, repeats)]
    by_name = {row.name: row for row in measured}
    if cold and drop_from_page_cache(files):
        measured.append(cold_row(read_wk, files, repeats))
        by_name[measured[-1].name] = measured[-1]
    rate = by_name["ceiling"].samples_per_s
    ratios = {
        "read_vs_ceiling": by_name["read_wk"].samples_per_s / rate,
        "workers_vs_main": by_name["read_wk"].samples_per_s / by_name["read_w0"].samples_per_s,
        "decode_scaling": by_name["decoded_wk"].samples_per_s / by_name["decoded_w0"].samples_per_s / num_workers,
        "read_vs_peer": by_name["read_wk"].samples_per_s / by_name["peer_read_wk"].samples_per_s,
        "decoded_vs_peer": by_name["decoded_wk"].samples_per_s / by_name["peer_decoded_wk"].samples_per_s,
        **decode_ratios(by_name),
    }
    checksums = checksum_speeds()
    if bench_backend.CHECKSUM_EVERY_SAMPLE:
        sha256_seconds = mean_bytes / (checksums["checksum_mb_per_s"]["sha256"] * 1e6)  # per sample
        ratios["checksum_share"] = sha256_seconds * by_name["read_w0"].samples_per_s
        ratios["checksum_share_decoded"] = sha256_seconds * by_name["decoded_w0"].samples_per_s
    report: dict[str, Any] = {
        "backend": BACKEND,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "data": {
            "path": str(data),
            "num_samples": num_samples,
            "payload_bytes": manifest["payload_bytes"],
            "files": len(files),
            "file_bytes": sum(p.stat().st_size for p in files),
        },
        "settings": settings(batch_size, num_workers, repeats, training),
        "open_seconds": opened,
        "rows": row_reports(measured, rate, mean_bytes),
        "cores": cores_report(by_name["decoded_wk"], training.gpu_rate),
    }
    if ranks:
        report["memory_per_node"] = memory_per_node(data, manifest["payload_bytes"], ranks, num_workers, batch_size)
        if "loader_vs_data" in report["memory_per_node"] and "note" not in report["memory_per_node"]:
            ratios["memory_per_node"] = report["memory_per_node"]["loader_vs_data"]
    if claims_too:
        print("claims")
        report["claims"] = bench_backend.claims(data, manifest)
    report["checksums"] = checksums
    report["ratios"] = ratios
    report["targets"] = target_rows(ratios)
    report["table"] = table(measured, rate, mean_bytes)
    return report


if __name__ == "__main__":
    app()
