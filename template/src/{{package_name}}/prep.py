"""Turn raw data into this project's format (sources/storing.py) plus manifest.json.

    python -m <package>.prep synthetic --out data
    python -m <package>.prep folder RAW_DIR --out data
    python -m <package>.prep table FILE.parquet --out data [--label-column label] [--fields a,b]
    python -m <package>.prep hf SOURCE --out data [--split train] [--heldout-split test] [--fields image,caption]
    python -m <package>.prep webdataset SHARDS_DIR --out data      # webdataset: no --out indexes them in place
    python -m <package>.prep synthetic --out data --part I --parts N   # one of N parts (any source, any
    python -m <package>.prep join data                                 #  machine), then one data set of them
    python -m <package>.prep webdataset SHARDS_DIR --part I --parts N  # webdataset: indexed in place in parts,
    python -m <package>.prep join SHARDS_DIR                           #  then joined beside the shards

Payloads are stored as the source gave them (decoding happens in the DataLoader workers)
and streamed one sample at a time, so a data set larger than memory can be prepared.
The data set is written under a temporary name and renamed into place at the end, so an
interrupted prep (even kill -9) leaves no folder a loader would accept; the next prep
into the same place removes such leftovers. A held-out set goes to DIR/heldout: the source's own
(a Hugging Face split, --heldout-split; a folder's val/ tree; shards under SRC/heldout or named
by --heldout) or else a seeded --heldout-fraction of it; manifest.json's "heldout" says which.
What is the backend's own (its options, an --out elsewhere than a folder, shards indexed in
place, a storage order other than the source's) is in sources/storing.py, which every backend has.
"""

from __future__ import annotations

import contextlib
import json
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

from .data.manifest import (
    LABELS,
    ShardList,
    check_same_classes,
    field_kinds,
    same_mask_classes,
    sha256_file,
    write_manifest,
)
from .harness.errors import WRITE_ERRORS, DataError, disk_errors_reported, reported_as_one_line
from .harness.options import options_of

# isort: split
from .data.sample import NO_LABEL, Sample, key_of
from .sources import class_folders, columns, hugging_face, storing, synthetic_images, tables, wds_shards
from .sources.array_file import array_file
from .sources.max_side import DEFAULT_QUALITY, MaxSide
from .sources.parts import Parts, join_parts, write_part
from .sources.source import Source, split_heldout, with_mask_classes
from .sources.source_writer import SourceWriter
from .sources.storing import FORMAT, Out, SampleWriter, ShardsOut, Storing
from .sources.synthetic import HELP as SYNTHETIC_HELP
from .sources.synthetic import synthetic as synthetic_source
from .sources.verify import Undecodable, Verifier, default_processes

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=f"Turn raw data into this project's {FORMAT} format plus manifest.json.",
)
QUIET_BELOW = 10_000  # samples: smaller data sets are written without a progress bar
LOG_EVERY_S = 30.0  # seconds between progress lines when stderr is not a terminal

HELDOUT_FRACTION = 0.1  # --heldout-fraction's default
HeldoutFraction = Annotated[float, typer.Option(help="Fraction held out for evaluation (DIR/heldout)")]
ImageColumn = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(help="Column holding the image bytes (default: the first Image, {bytes, path} or binary column)"),
]
Seed = Annotated[int, typer.Option(help=f"Seed of the held-out split{storing.SEED_ALSO}")]
Fields = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(help="Columns to take, comma-separated, each a field, the first the payload (sources/columns.py)"),
]
MaskColumn = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(
        help="Image columns that are masks, comma-separated (default: those named with mask, seg, label or "
        "annotation; '' none)"
    ),
]
MaskClasses = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(
        help="The classes of the masks' ids, comma-separated, id 0 first (default: the ids the masks hold, "
        "counted: 0 .. the largest, 255 ignored)"
    ),
]
LabelColumn = Annotated[
    Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(
        help="Column holding the class (default: label, unless floating point, else the first ClassLabel; '' none)"
    ),
]
Verify = Annotated[
    bool,
    typer.Option(
        "--verify/--no-verify",
        help="Decode every sample once, in parallel processes, and refuse the data set, naming every sample that "
        "does not decode or the first that decodes to another shape (--no-verify: skip, for a source checked before)",
    ),
]
MaxSideOption = Annotated[
    Optional[int],  # noqa: UP045 (typer reads the annotation at run time)
    typer.Option(
        help="Store images whose longer side exceeds N pixels resized to N (aspect kept), re-encoded once in their "
        "own format (JPEG at --max-side-quality, PNG lossless; masks nearest, as PNG); default: byte for byte"
    ),
]
MaxSideQuality = Annotated[int, typer.Option(help="The JPEG (and WebP) quality of the images --max-side re-encodes")]


def max_side_of(max_side: int | None, quality: int) -> MaxSide | None:
    """--max-side and --max-side-quality as write_dataset's `max_side` (None: images stored byte for byte)."""
    if max_side is None:
        if quality != DEFAULT_QUALITY:
            raise DataError("--max-side-quality is the quality of the images --max-side resizes: pass --max-side N too")
        return None
    return MaxSide(max_side, quality)


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
    heldout_from: str | None = None,
    parts: Parts = Parts(),
    **options: Any,
) -> None:
    """Write the training set to `out` and the held-out set to `out/heldout`, all or nothing (or the
    part of them `parts` chooses: prepare_part);
    `heldout_from` says where the held-out set came from ("split test", "fraction 0.1, seed 0"; by
    default its source's kind: "synthetic (a source of its own)"), which both manifests record;
    `options` are write_dataset's (Storing.settings), `out` a folder or where storing.py writes."""
    if heldout is not None and heldout_from is None:
        heldout_from = f"{heldout.description['kind']} (a source of its own)"
    options = {**options, "heldout_from": heldout_from if heldout is not None else None}
    if parts.parts or parts.part:
        prepare_part(training, heldout, out, verify, parts, **options)
        return
    if storing.prepare_elsewhere(training, heldout, out, write_dataset, verify, **options):
        return
    out = Path(out).resolve()
    if out.exists():
        raise DataError(f"{out} already exists: pass a new --out folder, or delete it first")
    reclaim_stale_partials(out)
    tmp = partial_name(out, os.getpid())
    with disk_errors_reported(out, "or pass an --out on a disk with room", WRITE_ERRORS):  # after the rmtree below
        try:
            tmp.mkdir(parents=True)
            sets = [(training, tmp, options)]
            if heldout is not None:  # scored in full, in any order: stored as the source gives it
                sets.append((heldout, tmp / "heldout", {**options, "storage_seed": None}))
            bad: Undecodable | None = None
            for source, root, settings in sets:
                try:
                    write_dataset(source, root, verify=verify, **settings)
                except Undecodable as err:  # the held-out set is checked too: one error names every bad sample
                    bad = err if bad is None else bad.joined(err)
            if bad is not None:
                raise bad
            if heldout is not None:
                same_mask_classes([tmp, tmp / "heldout"])
            os.rename(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    typer.echo(f"wrote {training.num_samples} training samples ({FORMAT}) to {out}")


def prepare_part(
    training: Source, heldout: Source | None, out: str | Path, verify: bool, parts: Parts, **options: Any
) -> None:
    """Write part `parts.part` of `parts.parts` under `out` (sources/parts.py; in a bucket, storing.py), recording
    the sources and options it was made with (every part must have the same), for `prep join OUT` to make one data
    set of them."""
    parts.check(out, FORMAT)
    sets = {"training": training, "heldout": heldout}
    given = {
        **{name: {**s.description, "num_samples": s.num_samples} if s else None for name, s in sets.items()},
        **options,
        "verify": verify,
    }
    given = json.loads(json.dumps(given, default=repr))  # what a part was made with: the same for every part
    if not storing.prepare_part_elsewhere(
        training, heldout, out, parts, given, write_dataset, verify=verify, **options
    ):
        with disk_errors_reported(out, "or pass an --out on a disk with room", WRITE_ERRORS):
            shuffle = storing.storage_permutation
            write_part(training, heldout, out, parts, given, write_dataset, shuffle, verify=verify, **options)
    typer.echo(
        f"wrote part {parts.part} of {parts.parts} ({FORMAT}) into {out}: when every part is written, "
        f"`python -m {__package__}.prep join {out}`"
    )


@app.command()
def join(
    out: Annotated[
        str,
        typer.Argument(
            help="The --out folder (or s3://BUCKET/PREFIX) every part was written into, or the folder of shards "
            "indexed in place in parts (webdataset)"
        ),
    ],
) -> None:
    """Make one data set of the parts that `--part I --parts N` wrote into OUT: every part 0 .. N-1 checked
    present, finished and made with the same options, then the manifest written last (sources/parts.py)."""
    with reported_as_one_line():
        count = storing.join_elsewhere(out, FORMAT)
        if count is None:
            with disk_errors_reported(out, "or free room on its disk", WRITE_ERRORS):
                count = join_parts(out, FORMAT)
            out = str(Path(out).resolve())
    typer.echo(f"joined the parts into {count} training samples ({FORMAT}) in {out}")


def heldout_by_fraction(source: Source, fraction: float, seed: int) -> tuple[Source, Source | None, str]:
    """(training, held-out, where it came from): a seeded `fraction` of `source` held out."""
    training, heldout = split_heldout(source, fraction, seed)
    return training, heldout, f"fraction {fraction}, seed {seed}"


def own_heldout(heldout_fraction: float, problem: str) -> None:
    """Refuse a --heldout-fraction given where the source's own held-out set is taken (`problem` says which)."""
    if heldout_fraction != HELDOUT_FRACTION:
        raise DataError(problem)


def same_schema(heldout: Source, training: Source, where: str, other: str) -> None:
    """A held-out set of the source's own must have the training set's classes and fields, checked
    before a byte is written (train.py checks the manifests again: data/manifest.py)."""
    check_same_classes(heldout.classes, where, training.classes, other, fix="give both the same classes")
    if [name for name, _ in heldout.schema] != [name for name, _ in training.schema]:
        raise DataError(
            f"{where} has the fields {[name for name, _ in heldout.schema]}, {other} "
            f"{[name for name, _ in training.schema]}: give both the same fields"
        )


def samples_in_storage_order(
    source: Source, root: Path, storage_seed: int | None, storage_order: np.ndarray | None = None
) -> Iterator[Sample]:
    if storage_seed is None:
        return source.samples()
    spilling = Progress(source.num_samples, f"shuffling {root.name}")
    return storing.shuffled_samples(source, root, storage_seed, spilling, storage_order)


def write_dataset(
    source: Source,
    root: Path,
    storage_seed: int | None = None,
    verify: bool = True,
    shard_list=ShardList,
    heldout_from: str | None = None,
    max_side: MaxSide | None = None,
    first_key: int = 0,
    storage_order: np.ndarray | None = None,
    **options: Any,
) -> None:
    """Stream `source` into `root`: samples, labels.npy, sources.jsonl and manifest.json, in
    constant memory; in the source's order, or shuffled with `storage_seed`; every sample
    decoded once on the way unless not `verify` (sources/verify.py), which counts the class ids
    of masks whose source names no classes. `shard_list(root)` collects the
    shards' manifest entries as each shard is closed; `heldout_from` (None: no held-out set) is
    manifest.json's "heldout"; `max_side` (--max-side) bounds the images stored (sources/max_side.py);
    `first_key`: the whole data set's position of the first sample (a part's: sources/parts.py), its key;
    `storage_order`: a part's own order of `source`'s samples, its slice of the whole's storage shuffle."""
    root.mkdir(exist_ok=True)
    num_samples, num_classes = source.num_samples, len(source.classes)
    # Labels by storage position, in every format: the audit reads them without the data.
    labels = array_file(root / LABELS, np.int64, (num_samples,))
    label_counts = np.zeros(num_classes, dtype=np.int64)
    extensions: dict[str, int] = {}
    shards = shard_list(root)
    sample_sources = SourceWriter(root)  # each sample's source, so that errors can name it
    progress = Progress(num_samples, f"writing {root.name}")
    where = str(source.description.get("path", source.description["kind"]))
    kinds = field_kinds({"fields": source.fields({})})  # the fields besides payload and class, by name
    bound = MaxSide(max_side.side, max_side.quality) if max_side is not None else None  # this set's own count
    try:
        with (
            SampleWriter(root, num_samples, source.payload_bytes, shards, **options) as writer,
            Verifier(where, default_processes(), kinds) if verify else contextlib.nullcontext() as verifier,
        ):
            for position, sample in enumerate(samples_in_storage_order(source, root, storage_seed, storage_order)):
                if [name for name, _ in sample.fields] != list(kinds):  # what every backend stores relies on it
                    raise DataError(
                        f"{where}: {sample.source} has the fields {[name for name, _ in sample.fields]}, the source's "
                        f"schema {list(kinds)}: make the source give every sample the schema's fields, in its order"
                    )
                if not (0 <= sample.label < num_classes or (not num_classes and sample.label == NO_LABEL)):
                    raise DataError(
                        f"{where}: {sample.source} has label {sample.label}, not one of the source's {num_classes} "
                        f"classes: give each sample a class of the list, or {NO_LABEL} in a source without classes"
                    )
                if bound is not None:
                    sample = bound.bounded(sample, kinds)
                labels[position] = sample.label
                if num_classes:
                    label_counts[sample.label] += 1
                extensions[sample.extension] = extensions.get(sample.extension, 0) + 1
                key = key_of(first_key + position)
                writer.add(key, sample)
                sample_sources.add(key, sample.source)
                if verifier is not None:
                    verifier.add(sample)
                progress.update(len(sample.payload))
            layout = writer.finish()
            fields = source.fields(extensions)
            if verifier is not None:
                verifier.finish()
                fields = verifier.mask_classes(fields)  # a mask's classes: named by the source, else counted
        labels.flush()
        write_manifest(
            root,
            {
                "format": FORMAT,
                "num_samples": num_samples,
                "num_classes": num_classes,
                "classes": source.classes,
                "label_counts": label_counts.tolist(),
                "fields": fields,
                "extensions": dict(sorted(extensions.items())),
                "payload_bytes": progress.bytes,
                "labels": LABELS,
                "labels_sha256": sha256_file(root / LABELS),
                **sample_sources.finish(),
                "verified": verify,
                "source": source.description,
                "storage_order": "source" if storage_seed is None else "shuffled",
                "storage_seed": storage_seed,
                "heldout": {"from": heldout_from} if heldout_from else None,
                **(bound.manifest() if bound is not None else {}),
                **layout,
            },
            shards,
        )
    finally:
        progress.close()
        sample_sources.close()
        shards.remove()
        del labels


@app.command(help=SYNTHETIC_HELP)  # the task's embedded data (sources/synthetic.py)
@options_of(storage=Storing, in_parts=Parts)
def synthetic(
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    in_parts: Parts,  # --part I --parts N: one part of the data set (sources/parts.py)
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
        training = synthetic_source(num_samples, num_classes, seed, image_size=image_size)
        heldout = (
            synthetic_source(heldout_samples, num_classes, seed, stream=1, image_size=image_size)
            if heldout_samples
            else None
        )
        prepare(training, heldout, out, verify, parts=in_parts, **storage.settings(seed))


@app.command()
@options_of(storage=Storing, in_parts=Parts)
def folder(
    src: Annotated[
        Path,
        typer.Argument(
            help="Folder with one sub-folder per class (none: no classes), or with train/ and val/ (validation/, "
            "test/) trees of them, as torchvision's ImageFolder reads: the val tree is then the held-out set"
        ),
    ],
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    in_parts: Parts,  # --part I --parts N: one part of the data set (sources/parts.py)
    heldout_fraction: HeldoutFraction = HELDOUT_FRACTION,
    seed: Seed = 0,
    verify: Verify = True,
    max_side: MaxSideOption = None,
    max_side_quality: MaxSideQuality = DEFAULT_QUALITY,
    keep_empty_classes: Annotated[
        bool, typer.Option("--keep-empty-classes", help="Keep a class folder without files as a class of 0 samples")
    ] = False,
    mask_classes: MaskClasses = None,
) -> None:
    """A class-folder tree: SRC/<class>/<file>.jpg|png|webp|npy|txt, stored byte for byte; files named alike up to
    a dot (a.jpg, a.txt, a.mask.png) are one sample of several fields (sources/class_folders.py)."""
    with reported_as_one_line():
        names = columns.split_names(mask_classes, "--mask-classes")
        trees = class_folders.split_trees(src)
        headers = not verify  # without prep's check (--no-verify), each image's header is read as it is found
        if trees is None:
            images = class_folders.folder(src, keep_empty_classes, check_headers=headers)
            images = with_mask_classes(images, names, str(src))
            training, heldout, heldout_from = heldout_by_fraction(images, heldout_fraction, seed)
        else:  # SRC/train and SRC/val: the source's own held-out set
            own_heldout(
                heldout_fraction,
                f"{trees[1]} is the held-out set of {src}, so --heldout-fraction holds out nothing: leave it out "
                f"(or move {trees[1].name}/ out of {src} to hold out a fraction of {trees[0].name}/)",
            )
            training, heldout = (
                with_mask_classes(class_folders.folder(tree, keep_empty_classes, headers), names, str(tree))
                for tree in trees
            )
            same_schema(heldout, training, str(trees[1]), f"{trees[0]}")
            heldout_from = f"folder {trees[1].name}"
        bound = max_side_of(max_side, max_side_quality)
        prepare(training, heldout, out, verify, heldout_from, max_side=bound, parts=in_parts, **storage.settings(seed))
        if trees is not None:
            for unread in class_folders.unread_trees(src, trees[1]):  # a test/ beside val/: kept apart, said so
                typer.echo(
                    f"note: {unread}/ was not read: {trees[1].name}/ is the held-out set; to score {unread.name}/ "
                    f"once at the end, prep a folder of {trees[0].name}/ and {unread.name}/ alone and run evaluate "
                    "--data on it",
                    err=True,
                )


@app.command()
@options_of(storage=Storing, in_parts=Parts)
def table(
    file: Annotated[Path, typer.Argument(help="A .parquet, .arrow, .jsonl or .csv file")],
    out: Out,
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    in_parts: Parts,  # --part I --parts N: one part of the data set (sources/parts.py)
    label_column: LabelColumn = None,
    fields: Fields = None,
    image_column: ImageColumn = None,
    mask_column: MaskColumn = None,
    mask_classes: MaskClasses = None,
    heldout_fraction: HeldoutFraction = HELDOUT_FRACTION,
    seed: Seed = 0,
    verify: Verify = True,
    max_side: MaxSideOption = None,
    max_side_quality: MaxSideQuality = DEFAULT_QUALITY,
) -> None:
    """A table: each row's numeric columns become one float32 .npy payload (`features`), --label-column the
    class; --fields takes named columns as fields instead (`features,price`: a regression target); a parquet or
    Arrow table with an image column gives its stored image bytes and its other columns."""
    with reported_as_one_line():
        table = tables.table(
            file,
            label_column,
            image_column,
            columns.split_names(fields, "--fields"),
            columns.split_names(mask_column, "--mask-column"),
            columns.split_names(mask_classes, "--mask-classes"),
        )
        bound = max_side_of(max_side, max_side_quality)
        training, heldout, heldout_from = heldout_by_fraction(table, heldout_fraction, seed)
        prepare(training, heldout, out, verify, heldout_from, max_side=bound, parts=in_parts, **storage.settings(seed))


@app.command()
@options_of(storage=Storing, in_parts=Parts)
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
    in_parts: Parts,  # --part I --parts N: one part of the data set (sources/parts.py)
    split: Annotated[str, typer.Option(help="The split to prepare")] = "train",
    heldout_split: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(
            help="The split to hold out (DIR/heldout), as it is, e.g. test or validation (default: hold out "
            "--heldout-fraction of --split)"
        ),
    ] = None,
    fields: Fields = None,
    image_column: ImageColumn = None,
    label_column: LabelColumn = None,
    mask_column: MaskColumn = None,
    mask_classes: MaskClasses = None,
    heldout_fraction: HeldoutFraction = HELDOUT_FRACTION,
    seed: Seed = 0,
    verify: Verify = True,
    max_side: MaxSideOption = None,
    max_side_quality: MaxSideQuality = DEFAULT_QUALITY,
) -> None:
    """A Hugging Face data set: each column a field by its Features (an Image's stored bytes, never re-encoded;
    text; numbers; arrays; masks), a ClassLabel's names the classes."""
    with reported_as_one_line():
        if heldout_split is not None:
            own_heldout(
                heldout_fraction,
                "--heldout-split and --heldout-fraction both choose the held-out set: pass one of them, not both",
            )
            if heldout_split == split:
                raise DataError(f"--heldout-split {heldout_split} is the split to prepare: name another split")
        choices = (
            columns.split_names(fields, "--fields"),
            image_column,
            label_column,
            columns.split_names(mask_column, "--mask-column"),
            columns.split_names(mask_classes, "--mask-classes"),
        )
        images = hugging_face.hf(source, split, *choices)
        if heldout_split is None:
            training, heldout, heldout_from = heldout_by_fraction(images, heldout_fraction, seed)
        else:  # the data set's own held-out split, read as the training split is
            training, heldout = images, hugging_face.hf(source, heldout_split, *choices, flag="--heldout-split")
            same_schema(heldout, training, f"{source} split {heldout_split!r}", f"split {split!r}")
            heldout_from = f"split {heldout_split}"
        bound = max_side_of(max_side, max_side_quality)
        prepare(training, heldout, out, verify, heldout_from, max_side=bound, parts=in_parts, **storage.settings(seed))


@app.command(
    help=f"Existing WebDataset shards: {storing.SHARDS}. Every member of a sample is one of its fields "
    "(img2dataset's jpg, txt and json: the image the payload), or those --fields chooses; a .cls member "
    "(or --label-member, --label-field) gives the data set classes, and without one it has none."
)
@options_of(storage=Storing, in_parts=Parts)
def webdataset(
    src: Annotated[
        str,
        typer.Argument(
            help="A folder of .tar shards as webdataset's ShardWriter or img2dataset write them, or the "
            "s3://BUCKET/PREFIX they lie under (indexed there); those in its heldout folder (or named by "
            "--heldout) are the held-out set"
        ),
    ],
    storage: Storing,  # the backend's options of how samples are stored, one per field (sources/storing.py)
    in_parts: Parts,  # --part I --parts N: one part of the data set (sources/parts.py)
    out: ShardsOut = None,
    label_member: Annotated[str, typer.Option(help="The member holding each sample's label (decimal text)")] = "cls",
    label_field: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(help="Take the label from this field of each sample's .json member instead"),
    ] = None,
    fields: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(
            help="The members to keep, the payload first, each NAME or NAME:KIND (jpg,txt,seg.png:mask); "
            "default: every member of the first sample, its image the payload"
        ),
    ] = None,
    mask_classes: MaskClasses = None,
    heldout: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(
            help="Shards of SRC that are the held-out set where shards are indexed in place (no --out; the "
            "webdataset backend): names relative to SRC, comma-separated, or a glob ('val-*.tar'), or a share "
            "of them (0.1: a tenth, evenly spaced), linked into SRC/heldout (no byte copied) and indexed apart. "
            "To convert, put the held-out shards in SRC/heldout"
        ),
    ] = None,
    index_to: Annotated[
        Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
        typer.Option(
            help="Shards in a bucket indexed in place (no --out): write the index here, an s3://BUCKET/PREFIX or "
            "a local folder, not beside them (a read-only bucket)"
        ),
    ] = None,
    heldout_fraction: HeldoutFraction = HELDOUT_FRACTION,
    seed: Seed = 0,
    verify: Verify = True,
    max_side: MaxSideOption = None,
    max_side_quality: MaxSideQuality = DEFAULT_QUALITY,
) -> None:
    with reported_as_one_line():
        names = columns.split_names(mask_classes, "--mask-classes")
        bound = max_side_of(max_side, max_side_quality)
        if heldout is not None and out is not None:
            raise DataError(
                "--heldout names shards indexed in place (no --out): to convert, move the held-out shards into "
                "SRC/heldout, or leave out --heldout (--heldout-fraction)"
            )
        if index_to is not None and out is not None:
            raise DataError("--index-to is where shards indexed in place get their index (no --out): pass one of them")
        if out is None:
            if bound is not None:  # the shards are read as they are: nothing is rewritten
                raise DataError(
                    "--max-side resizes images into a new copy, and shards indexed in place are never rewritten: "
                    "pass --out DIR to convert them, or leave out --max-side"
                )
            if names:  # indexed in place, the masks' classes are the ids prep counts
                raise DataError(
                    "--mask-classes needs --out DIR: shards indexed in place take their masks' classes from the ids "
                    "prep counts (0 .. the largest)"
                )
            storing.index_in_place(src, label_member, label_field, verify, fields, heldout, index_to, in_parts)
            return
        src = Path(src)  # converted: a folder of shards
        shards = with_mask_classes(wds_shards.webdataset(src, label_member, label_field, fields), names, str(src))
        held = wds_shards.heldout_folder(src)
        if held is None:
            training, kept, heldout_from = heldout_by_fraction(shards, heldout_fraction, seed)
        else:  # the shards' own held-out set, SRC/heldout (never in `shards`)
            kept = with_mask_classes(wds_shards.webdataset(held, label_member, label_field, fields), names, str(held))
            training, heldout_from = shards, f"folder {held.name}"
            check_same_classes(kept.classes, held, training.classes, fix="label both with the same classes")
        prepare(training, kept, out, verify, heldout_from, max_side=bound, parts=in_parts, **storage.settings(seed))


if __name__ == "__main__":
    app()
