"""Turn raw data into this project's format (sources/storing.py) plus manifest.json.

    python -m <package>.prep synthetic --out data
    python -m <package>.prep folder RAW_DIR --out data
    python -m <package>.prep table FILE.parquet --out data --label-column label
    python -m <package>.prep hf SOURCE --out data [--split train] [--image-column image]
    python -m <package>.prep webdataset SHARDS_DIR --out data      # webdataset: no --out indexes them in place

Payloads are stored as the source gave them (decoding happens in the DataLoader workers)
and streamed one sample at a time, so a data set larger than memory can be prepared.
The data set is written under a temporary name and renamed into place at the end, so an
interrupted prep (even kill -9) leaves no folder a loader would accept; the next prep
into the same place removes such leftovers. A held-out split goes to DIR/heldout.
What is the backend's own (its options, an --out elsewhere than a folder, shards indexed in
place, a storage order other than the source's) is in sources/storing.py, which every backend has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from tqdm import tqdm

from .data.manifest import LABELS, ShardList, sha256_file, write_manifest
from .harness.errors import DataError, reported_as_one_line
from .harness.options import options_of

# isort: split
from .data.sample import Sample, key_of
from .sources import class_folders, hugging_face, storing, synthetic_images, tables, wds_shards
from .sources.source import Source, split_heldout
from .sources.source_writer import SourceWriter
from .sources.storing import FORMAT, Out, SampleWriter, ShardsOut, Storing
from .sources.verify import Verifier, default_processes

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=f"Turn raw data into this project's {FORMAT} format plus manifest.json.",
)
QUIET_BELOW = 10_000  # samples: smaller data sets are written without a progress bar
LOG_EVERY_S = 30.0  # seconds between progress lines when stderr is not a terminal

HeldoutFraction = Annotated[float, typer.Option(help="Fraction held out for evaluation (DIR/heldout)")]
ImageColumn = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(help="Column holding the image bytes (default: the first Image, {bytes, path} or binary column)"),
]
Seed = Annotated[int, typer.Option(help=f"Seed of the held-out split{storing.SEED_ALSO}")]
Verify = Annotated[
    bool,
    typer.Option(
        "--verify/--no-verify",
        help="Decode every sample once, in parallel processes, and refuse the data set at the first one that "
        "does not decode or decodes to another shape (--no-verify: skip, for a source checked before)",
    ),
]


class Progress:
    """A tqdm bar of samples/s with the payload MB/s beside it; silent for small data sets.

    When stderr is not a terminal (a log file, a batch job), a bar's carriage-return updates
    would fill the log with one unreadable line: it prints a line instead every LOG_EVERY_S
    seconds or every tenth of the way, whichever comes first.
    """

    def __init__(self, total: int, desc: str) -> None:
        quiet = total < QUIET_BELOW
        self.lines = not quiet and not sys.stderr.isatty()
        self.bar = tqdm(total=total, desc=desc, unit="sample", unit_scale=True, disable=quiet or self.lines)
        self.total, self.desc, self.count = total, desc, 0
        self.bytes, self.started = 0, time.perf_counter()
        self.next_line, self.next_tenth = self.started + LOG_EVERY_S, 1

    def update(self, num_bytes: int) -> None:
        self.bytes += num_bytes
        self.count += 1
        self.bar.update(1)
        if not self.bar.disable and self.bar.n % 512 == 0:
            self.bar.set_postfix_str(f"{self.megabytes_per_s():.1f} MB/s", refresh=False)
        if self.lines and (self.count * 10 >= self.next_tenth * self.total or time.perf_counter() >= self.next_line):
            self.log_line()

    def megabytes_per_s(self) -> float:
        return self.bytes / max(time.perf_counter() - self.started, 1e-9) / 2**20

    def log_line(self) -> None:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        print(
            f"{self.desc}: {self.count}/{self.total} samples ({100 * self.count / self.total:.0f}%), "
            f"{self.count / elapsed:.0f} samples/s, {self.megabytes_per_s():.1f} MB/s",
            file=sys.stderr,
            flush=True,
        )
        self.next_line = time.perf_counter() + LOG_EVERY_S
        while self.next_tenth * self.total <= self.count * 10:
            self.next_tenth += 1

    def close(self) -> None:
        self.bar.close()


def partial_name(out: Path, pid: int) -> Path:
    """Where prep writes before the rename: hidden, next to --out, owned by this host and process."""
    return out.parent / f".{out.name}.partial-{socket.gethostname()}-{pid}"


def reclaim_stale_partials(out: Path) -> None:
    """Remove what a prep of this host killed before its rename (kill -9, power loss) left behind."""
    prefix = partial_name(out, 0).name[: -len("0")]
    for stale in out.parent.glob(prefix + "*"):
        pid = stale.name[len(prefix) :]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare(
    training: Source,
    heldout: Source | None,
    out: str | Path,
    verify: bool = True,
    **options: Any,
) -> None:
    """Write the training set to `out` and the held-out set to `out/heldout`, all or nothing;
    `options` are write_dataset's (Storing.settings), `out` a folder or where storing.py writes."""
    if storing.prepare_elsewhere(training, heldout, out, write_dataset, verify, **options):
        return
    out = Path(out).resolve()
    if out.exists():
        raise DataError(f"{out} already exists: pass a new --out folder, or delete it first")
    reclaim_stale_partials(out)
    tmp = partial_name(out, os.getpid())
    try:
        tmp.mkdir(parents=True)
        write_dataset(training, tmp, verify=verify, **options)
        if heldout is not None:  # scored in full, in any order: stored as the source gives it
            write_dataset(heldout, tmp / "heldout", verify=verify, **{**options, "storage_seed": None})
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    typer.echo(f"wrote {training.num_samples} training samples ({FORMAT}) to {out}")


def samples_in_storage_order(source: Source, root: Path, storage_seed: int | None) -> Iterator[Sample]:
    if storage_seed is None:
        return source.samples()
    return storing.shuffled_samples(source, root, storage_seed, Progress(source.num_samples, f"shuffling {root.name}"))


def write_dataset(
    source: Source,
    root: Path,
    storage_seed: int | None = None,
    verify: bool = True,
    shard_list=ShardList,
    **options: Any,
) -> None:
    """Stream `source` into `root`: samples, labels.npy, sources.jsonl and manifest.json, in
    constant memory; in the source's order, or shuffled with `storage_seed`; every sample
    decoded once on the way unless not `verify` (sources/verify.py). `shard_list(root)` collects the
    shards' manifest entries as each shard is closed."""
    root.mkdir(exist_ok=True)
    num_samples, num_classes = source.num_samples, len(source.classes)
    # Labels by storage position, in every format: the audit reads them without the data.
    labels = np.lib.format.open_memmap(root / LABELS, mode="w+", dtype=np.int64, shape=(num_samples,))
    label_counts = np.zeros(num_classes, dtype=np.int64)
    extensions: dict[str, int] = {}
    shards = shard_list(root)
    sample_sources = SourceWriter(root)  # each sample's source, so that errors can name it
    progress = Progress(num_samples, f"writing {root.name}")
    where = str(source.description.get("path", source.description["kind"]))
    try:
        with (
            SampleWriter(root, num_samples, source.payload_bytes, shards, **options) as writer,
            Verifier(where, default_processes()) if verify else contextlib.nullcontext() as verifier,
        ):
            for position, sample in enumerate(samples_in_storage_order(source, root, storage_seed)):
                labels[position] = sample.label
                if num_classes:
                    label_counts[sample.label] += 1
                extensions[sample.extension] = extensions.get(sample.extension, 0) + 1
                key = key_of(position)
                writer.add(key, sample)
                sample_sources.add(key, sample.source)
                if verifier is not None:
                    verifier.add(sample)
                progress.update(len(sample.payload))
            layout = writer.finish()
            if verifier is not None:
                verifier.finish()
        labels.flush()
        write_manifest(
            root,
            {
                "format": FORMAT,
                "num_samples": num_samples,
                "num_classes": num_classes,
                "classes": source.classes,
                "label_counts": label_counts.tolist(),
                "fields": source.fields(extensions),
                "extensions": dict(sorted(extensions.items())),
                "payload_bytes": progress.bytes,
                "labels": LABELS,
                "labels_sha256": sha256_file(root / LABELS),
                **sample_sources.finish(),
                "verified": verify,
                "source": source.description,
                "storage_order": "source" if storage_seed is None else "shuffled",
                "storage_seed": storage_seed,
                **layout,
            },
            shards,
        )
    finally:
        progress.close()
        sample_sources.close()
        shards.remove()
        del labels


@app.command(
    help="The embedded default: PNG images of coloured shapes (32x32 unless --image-size), generated sorted by "
    f"label (the worst case order{storing.SORTED_SOURCE})."
)
@options_of(storage=Storing)
def synthetic(
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    num_samples: Annotated[int, typer.Option(help="Training samples")] = 2000,
    num_classes: Annotated[int, typer.Option(help="Classes")] = 10,
    seed: Annotated[int, typer.Option(help=f"Seed of the generator{storing.SEED_ALSO}")] = 0,
    heldout_samples: Annotated[int, typer.Option(help="Held-out samples (default: num_samples // 5)")] = -1,
    image_size: Annotated[
        int, typer.Option(help="Pixels a side (32: PNGs of 2.4 KB, 64: 9.4 KB; decode.py resizes them)")
    ] = synthetic_images.SYNTHETIC_SIZE,
    verify: Verify = True,
) -> None:
    with reported_as_one_line():
        if heldout_samples < 0:
            heldout_samples = max(num_samples // 5, num_classes)
        training = synthetic_images.synthetic(num_samples, num_classes, seed, image_size=image_size)
        heldout = (
            synthetic_images.synthetic(heldout_samples, num_classes, seed, stream=1, image_size=image_size)
            if heldout_samples
            else None
        )
        prepare(training, heldout, out, verify, **storage.settings(seed))


@app.command()
@options_of(storage=Storing)
def folder(
    src: Annotated[Path, typer.Argument(help="Folder with one sub-folder per class")],
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    heldout_fraction: HeldoutFraction = 0.1,
    seed: Seed = 0,
    verify: Verify = True,
    keep_empty_classes: Annotated[
        bool, typer.Option("--keep-empty-classes", help="Keep a class folder without files as a class of 0 samples")
    ] = False,
) -> None:
    """A class-folder tree: SRC/<class>/<file>.jpg|png|webp|npy|txt, stored byte for byte."""
    with reported_as_one_line():
        training, heldout = split_heldout(class_folders.folder(src, keep_empty_classes), heldout_fraction, seed)
        prepare(training, heldout, out, verify, **storage.settings(seed))


@app.command()
@options_of(storage=Storing)
def table(
    file: Annotated[Path, typer.Argument(help="A .parquet, .arrow, .jsonl or .csv file")],
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    label_column: Annotated[str, typer.Option(help="Column holding the class label")] = "label",
    image_column: ImageColumn = None,
    heldout_fraction: HeldoutFraction = 0.1,
    seed: Seed = 0,
    verify: Verify = True,
) -> None:
    """A table: each row's numeric columns become one float32 .npy payload, --label-column the class;
    a parquet or Arrow table with an image column gives its stored image bytes instead."""
    with reported_as_one_line():
        table = tables.table(file, label_column, image_column)
        training, heldout = split_heldout(table, heldout_fraction, seed)
        prepare(training, heldout, out, verify, **storage.settings(seed))


@app.command()
@options_of(storage=Storing)
def hf(
    source: Annotated[
        str,
        typer.Argument(
            help="A save_to_disk folder, a parquet or Arrow file or folder in the Hub's layout, or the name of a "
            "data set in the local Hugging Face cache (never downloaded)"
        ),
    ],
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    split: Annotated[str, typer.Option(help="The split to prepare")] = "train",
    image_column: ImageColumn = None,
    label_column: Annotated[
        str, typer.Option(help="Column holding the class (default: label, else the first ClassLabel)")
    ] = "label",
    heldout_fraction: HeldoutFraction = 0.1,
    seed: Seed = 0,
    verify: Verify = True,
) -> None:
    """A Hugging Face image data set: the Image column's stored bytes as payloads (never re-encoded), ClassLabel names as classes."""
    with reported_as_one_line():
        images = hugging_face.hf(source, split, image_column, label_column)
        training, heldout = split_heldout(images, heldout_fraction, seed)
        prepare(training, heldout, out, verify, **storage.settings(seed))


@app.command(help=f"Existing WebDataset shards: {storing.SHARDS}.")
@options_of(storage=Storing)
def webdataset(
    src: Annotated[Path, typer.Argument(help="A folder of .tar shards as webdataset's ShardWriter writes them")],
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    out: ShardsOut = None,
    label_member: Annotated[str, typer.Option(help="The member holding each sample's label (decimal text)")] = "cls",
    label_field: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(help="Take the label from this field of each sample's .json member instead"),
    ] = None,
    heldout_fraction: HeldoutFraction = 0.1,
    seed: Seed = 0,
    verify: Verify = True,
) -> None:
    with reported_as_one_line():
        if out is None:
            storing.index_in_place(src, label_member, label_field, verify)
            return
        shards = wds_shards.webdataset(src, label_member, label_field)
        training, heldout = split_heldout(shards, heldout_fraction, seed)
        prepare(training, heldout, out, verify, **storage.settings(seed))


if __name__ == "__main__":
    app()
