"""Raw data -> samples in storage order: the embedded synthetic images, a class-folder tree, a table.

A sample is its payload as the source gave it (encoded image bytes, an .npy array, UTF-8
text), its extension, an integer label and where the source holds it (`Sample.source`: a
path relative to the folder, a table row), which prep keeps beside the data so that an
error names the file. Nothing here decodes a payload for training: that happens in the
DataLoader workers (decode.py); prep decodes every sample once to check it (verify.py). Every source is streamed: it knows its
sample count and classes before the first sample, then yields one sample at a time, so
prep's memory does not grow with the data set. Keys are storage positions ("00000000",
"00000001", ...), so a ledger of keys maps straight back to where a sample is stored.
"""

from __future__ import annotations

import colorsys
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..harness.errors import DataError
from .decode import IMAGE_EXTENSIONS, can_decode, known_extensions

SYNTHETIC_SIZE = 32  # pixels per side of the embedded images (prep synthetic --image-size)
TABLE_CHUNK_ROWS = 4096  # rows a table source holds in memory at once


@dataclass(frozen=True)
class Sample:
    payload: bytes  # as the source gave it: never decoded by prep
    extension: str  # lower case, without the dot: "png", "jpg", "npy", "txt", ...
    label: int
    source: str = ""  # where the source holds it: "cat/001.jpg", "row 17", ...


@dataclass(frozen=True)
class Source:
    """A stream of samples in storage order, and what prep needs to know before the first one.

    `read(selected)` makes one pass over the source and yields the samples at the positions
    where `selected` is True (all when None), reading nothing else.
    """

    num_samples: int
    classes: list[str]
    read: Callable[[np.ndarray | None], Iterator[Sample]]
    description: dict[str, Any]
    payload_bytes: int  # total payload bytes, exact or estimated: sizes the webdataset shards
    selected: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.num_samples == 0:
            raise DataError("the source holds no samples: point prep at a non-empty source")

    def samples(self) -> Iterator[Sample]:
        """The samples, exactly as many as announced: DataError when the source changed while read."""
        count = 0
        for count, sample in enumerate(self.read(self.selected), start=1):
            if count > self.num_samples:
                raise DataError("the source grew while prep read it: run prep again")
            yield sample
        if count != self.num_samples:
            raise DataError(f"the source gave {count} samples after announcing {self.num_samples}: run prep again")

    def subset(self, selected: np.ndarray, description: dict[str, Any]) -> Source:
        count = int(selected.sum())
        return Source(
            count,
            self.classes,
            self.read,
            {**self.description, **description},
            self.payload_bytes * count // self.num_samples,
            selected,
        )


def key_of(position: int) -> str:
    return f"{position:08d}"


# --- the embedded default: label-sorted synthetic images --------------------------------


def synthetic_image(label: int, num_classes: int, rng: np.random.Generator, size: int = SYNTHETIC_SIZE) -> np.ndarray:
    """[S, S, 3] uint8: a shape in the class's colour (hue label/C) on a dark noisy background.

    Colour and shape both carry the class; position, size, hue jitter and pixel noise make
    every sample different, so a small CNN has something to learn and nothing to memorise.
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    image = np.empty((size, size, 3), dtype=np.float32)
    image[:] = rng.uniform(0, 70, size=3)
    hue = (label + rng.uniform(-0.25, 0.25)) / num_classes % 1.0
    colour = 255 * np.array(colorsys.hsv_to_rgb(hue, rng.uniform(0.7, 1.0), rng.uniform(0.75, 1.0)))
    cx, cy = rng.uniform(0.3 * size, 0.7 * size, size=2)
    radius = rng.uniform(0.18 * size, 0.3 * size)
    dx, dy = xx - cx, yy - cy
    shape = label % 3
    if shape == 0:  # disc
        mask = dx**2 + dy**2 < radius**2
    elif shape == 1:  # square
        mask = np.maximum(abs(dx), abs(dy)) < 0.8 * radius
    else:  # ring
        mask = abs(np.sqrt(dx**2 + dy**2) - 0.75 * radius) < 0.25 * radius
    image[mask] = colour
    image += rng.normal(0, 10, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def encode_png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)  # noise barely compresses: go fast
    return buffer.getvalue()


def synthetic_sample(
    position: int, num_samples: int, num_classes: int, seed: int, stream: int = 0, image_size: int = SYNTHETIC_SIZE
) -> Sample:
    """Sample `position` of the synthetic set, drawn from its own rng (seed, stream, position)."""
    label = position * num_classes // num_samples
    pixels = synthetic_image(label, num_classes, np.random.default_rng([seed, stream, position]), image_size)
    return Sample(encode_png(pixels), "png", label)


def synthetic(
    num_samples: int, num_classes: int, seed: int, stream: int = 0, image_size: int = SYNTHETIC_SIZE
) -> Source:
    """Encoded PNG images of `image_size` pixels a side, stored sorted by label: label of sample i is i * C // N.

    Any sample can be made again without the others (`synthetic_sample`). `stream` picks an
    independent draw (0: training, 1: held out). The PNGs are noisy, so they barely compress:
    a side of 32 makes payloads of about 2.4 KB, 64 about 9.4 KB, 128 about 38 KB (bench.py uses this to
    measure realistic sample sizes); decode.py resizes them all to its IMAGE_SIZE.
    """
    if num_samples < 1 or num_classes < 1:
        raise DataError("--num-samples and --num-classes must be at least 1")
    if image_size < 8:
        raise DataError(f"--image-size {image_size} is too small: use at least 8 pixels")
    if num_classes > num_samples:
        raise DataError(f"--num-classes {num_classes} exceeds --num-samples {num_samples}: every class needs a sample")

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        for position in range(num_samples):
            if selected is None or selected[position]:
                sample = synthetic_sample(position, num_samples, num_classes, seed, stream, image_size)
                yield Sample(sample.payload, sample.extension, sample.label, f"synthetic sample {position}")

    return Source(
        num_samples,
        [f"class_{c}" for c in range(num_classes)],
        read,
        {"kind": "synthetic", "num_classes": num_classes, "seed": seed, "stream": stream, "image_size": image_size},
        len(next(read(None)).payload) * num_samples,  # every image has about the first one's size
    )


# --- a class-folder tree -------------------------------------------------------------


def extension_of(path: Path) -> str:
    return path.suffix[1:].lower()


def class_files(class_dir: Path) -> list[Path]:
    """The sample files of one class, in sorted order (sub-folders included, hidden files not)."""
    return sorted(
        p
        for p in class_dir.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(class_dir).parts)
    )


def check_image_header(path: Path, payload: bytes) -> None:
    """Refuse a file that claims to be an image but is not one, reading only its header
    (the pixels are decoded later, in the DataLoader workers)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(payload)):
            pass
    except (UnidentifiedImageError, OSError) as err:
        raise DataError(f"{path} is not a readable image ({err}): fix or remove it, then prep again") from None


def folder(root: Path, keep_empty_classes: bool = False) -> Source:
    """One sub-folder per class, one file per sample; classes and files in sorted order.

    One pass lists and counts the files class by class; reading holds one class's file
    names at a time, never the data set. A class folder without files is refused (a class
    that can never be learned or scored), unless `keep_empty_classes`.
    """
    if not root.is_dir():
        raise DataError(f"{root} is not a folder: pass a folder with one sub-folder per class")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    counts, payload_bytes = [], 0
    for class_dir in class_dirs:
        files = class_files(class_dir)
        for path in files:
            if not can_decode(extension_of(path)):
                raise DataError(
                    f"{path}: no decoder for {path.suffix or 'files without an extension'} "
                    f"(decode.py reads {known_extensions()}): add one to decode.py, or remove the file"
                )
            payload_bytes += path.stat().st_size
        counts.append(len(files))
    empty = [d.name for d, count in zip(class_dirs, counts, strict=True) if count == 0]
    if empty and sum(counts) and not keep_empty_classes:
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        raise DataError(
            f"{root}: class folder {empty[0]!r}{more} holds no files: add its samples, remove it, "
            "or pass --keep-empty-classes"
        )
    if not sum(counts):
        raise DataError(f"{root} holds no class sub-folders with files: expected {root}/<class>/<sample file>")

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for label, class_dir in enumerate(class_dirs):
            for path in class_files(class_dir):
                if selected is None or selected[position]:
                    try:
                        payload = path.read_bytes()
                    except OSError as err:
                        raise DataError(
                            f"cannot read {path} ({err.strerror}): fix its permissions or remove it"
                        ) from None
                    if not payload:
                        raise DataError(f"{path} is empty: remove it, or replace it with the real sample")
                    if extension_of(path) in IMAGE_EXTENSIONS:
                        check_image_header(path, payload)
                    yield Sample(payload, extension_of(path), label, path.relative_to(root).as_posix())
                position += 1
        if position != sum(counts):
            raise DataError(
                f"{root} changed while prep read it ({position} files, {sum(counts)} before): run prep again"
            )

    return Source(
        sum(counts),
        [d.name for d in class_dirs],
        read,
        {"kind": "folder", "path": str(root.resolve())},
        payload_bytes,
    )


# --- a table: parquet, jsonl or csv ----------------------------------------------------


def table_batches(path: Path, columns: list[str] | None = None) -> Iterator[Any]:
    """The table as pyarrow record batches of at most TABLE_CHUNK_ROWS rows, read as a stream."""
    import pyarrow as pa

    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(path).iter_batches(batch_size=TABLE_CHUNK_ROWS, columns=columns)
    elif path.suffix == ".csv":
        import pyarrow.csv as pcsv

        # strings_can_be_null: an empty label cell is a missing label, not a class named "".
        options = pcsv.ConvertOptions(include_columns=columns, strings_can_be_null=True)
        yield from pcsv.open_csv(path, convert_options=options, read_options=pcsv.ReadOptions(block_size=1 << 20))
    elif path.suffix in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as lines:
            rows: list[dict] = []
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise pa.ArrowInvalid(f"line {number}: {err}") from None
                    rows.append({c: row.get(c) for c in columns} if columns else row)
                if len(rows) == TABLE_CHUNK_ROWS:
                    yield pa.RecordBatch.from_pylist(rows)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows)
    else:
        raise DataError(f"{path}: unknown table type {path.suffix!r}: use .parquet, .jsonl or .csv")


def table(path: Path, label_column: str, image_column: str | None = None) -> Source:
    """The label column plus numeric feature columns, in file order; each row's features
    become one float32 .npy payload. A first pass reads only the label column. A parquet or
    Arrow table with an image column (binary, or the {bytes, path} struct of Hugging Face's
    Image feature) gives the stored image bytes instead (hf_sources.py)."""
    import pyarrow as pa

    from . import hf_sources

    if not path.is_file():
        raise DataError(f"{path} not found: pass a .parquet, .arrow, .jsonl or .csv file")
    if path.suffix in (".parquet", ".arrow"):
        schema = hf_sources.file_schema(path)
        features = hf_sources.schema_features(schema)
        if (
            image_column is not None
            or path.suffix == ".arrow"
            or hf_sources.image_column_of(schema, features, None, "")
        ):
            description = {"kind": "table", "path": str(path.resolve())}
            return hf_sources.image_rows(
                [path], features, str(path), lambda i: f"row {i + 1}", description, image_column, label_column
            )

    def parsed(columns: list[str] | None = None) -> Iterator[Any]:
        try:
            yield from table_batches(path, columns)
        except (pa.ArrowException, UnicodeDecodeError) as err:
            raise DataError(
                f"cannot parse {path} ({str(err).splitlines()[0]}): check that it is a valid {path.suffix[1:]} file"
            ) from None

    first = next(parsed(), None)
    if first is None:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    if label_column not in first.schema.names:
        raise DataError(
            f"{path} has no column {label_column!r} (columns: {', '.join(first.schema.names)}): pass --label-column"
        )
    feature_columns = [
        f.name
        for f in first.schema
        if f.name != label_column and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]
    if not feature_columns:
        raise DataError(
            f"{path} has no numeric feature column besides {label_column!r}, nor an image column (binary, or a "
            f"struct of bytes and path; columns: {', '.join(first.schema.names)}): add one, or featurize first"
        )
    names, num_rows = set(), 0
    for batch in parsed([label_column]):
        values = batch.column(label_column)
        if values.null_count:
            raise DataError(f"{path}: column {label_column!r} has empty values: fill or drop those rows")
        names.update(str(v) for v in values.to_pylist())
        num_rows += batch.num_rows
    if num_rows == 0:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    classes = sorted(names)
    class_index = {name: i for i, name in enumerate(classes)}

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for batch in parsed([label_column, *feature_columns]):
            try:
                features = np.stack(
                    [batch.column(c).cast(pa.float32()).to_numpy(zero_copy_only=False) for c in feature_columns],
                    axis=1,
                )
            except pa.ArrowException as err:
                raise DataError(f"{path}: a feature column is not numeric ({err}): drop or fix it") from None
            bad = ~np.isfinite(features)  # nulls arrive as NaN
            if bad.any():
                row, column = np.argwhere(bad)[0]
                raise DataError(
                    f"{path}: row {position + row + 1}, column {feature_columns[column]!r} is empty or not finite "
                    f"({features[row, column]}): fill or drop such rows"
                )
            for row, label in enumerate(batch.column(label_column).to_pylist()):
                if selected is None or selected[position]:
                    payload = io.BytesIO()
                    np.save(payload, features[row], allow_pickle=False)
                    yield Sample(payload.getvalue(), "npy", class_index[str(label)], f"row {position + 1}")
                position += 1

    row_bytes = 128 + 4 * len(feature_columns)  # .npy header + float32 values
    return Source(
        num_rows,
        classes,
        read,
        {"kind": "table", "path": str(path.resolve()), "label_column": label_column, "features": feature_columns},
        row_bytes * num_rows,
    )


# --- held-out split --------------------------------------------------------------------


def split_heldout(source: Source, fraction: float, seed: int) -> tuple[Source, Source | None]:
    """Hold out a seeded random `fraction`; both parts keep storage order and are disjoint."""
    if not 0.0 <= fraction < 1.0:
        raise DataError(f"--heldout-fraction {fraction} must be in [0, 1)")
    num_heldout = int(round(source.num_samples * fraction))
    if num_heldout == 0:
        return source, None
    if num_heldout == source.num_samples:
        raise DataError("--heldout-fraction leaves no training samples: lower it")
    heldout = np.zeros(source.num_samples, dtype=bool)
    heldout[np.random.default_rng([seed, 2]).choice(source.num_samples, num_heldout, replace=False)] = True
    return (
        source.subset(~heldout, {"split": "training", "heldout_seed": seed}),
        source.subset(heldout, {"split": "heldout", "heldout_seed": seed}),
    )
