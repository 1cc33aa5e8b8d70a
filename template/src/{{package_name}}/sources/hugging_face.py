"""Hugging Face data sets -> samples: a `save_to_disk` folder, parquet or Arrow files in the
Hub's layout, or a data set in the local Hugging Face cache, read as Arrow record batches.

An image column (the `Image` feature: a struct of `bytes` and `path`, or plain binary) gives
each sample's payload exactly as stored, never re-encoded; its extension comes from the
bytes' signature (JPEG, PNG, GIF, WebP, BMP) or else the path's. A `ClassLabel` column's
names become the classes (its integers are their indices); any other label column's values,
sorted, do. Files are read one record batch at a time, memory-mapped where they are Arrow,
and a sample's payload is taken out of its batch one at a time, so prep's memory stays flat
in the data set's size. A sample's source is `<split>[<index>]`, its index in the split as
`datasets` counts it (`dataset[index]`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..data.decode import IMAGE_EXTENSIONS
from ..data.sample import Sample
from ..harness.errors import DataError
from .source import Source

HF_CHUNK_ROWS = 256  # parquet rows decompressed at once (images: a few MB)
SIGNATURES = [
    (b"\xff\xd8\xff", "jpg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
]


def image_extension(payload: bytes, path: str | None) -> str | None:
    """The extension for an image's bytes: from their signature, else from the path it had."""
    if payload[:4] == b"RIFF" and payload[8:12] == b"WEBP":
        return "webp"
    for signature, extension in SIGNATURES:
        if payload.startswith(signature):
            return extension
    suffix = Path(path).suffix[1:].lower() if path else ""
    return suffix if suffix in IMAGE_EXTENSIONS else None


# --- files: parquet or Arrow (IPC stream, as datasets writes it, or IPC file) ---------


def is_table_file(path: Path) -> bool:
    return path.suffix in (".parquet", ".arrow")


def arrow_reader(path: Path) -> Any:
    import pyarrow as pa

    source = pa.memory_map(str(path))
    try:
        return pa.ipc.open_stream(source)
    except pa.ArrowInvalid:
        return pa.ipc.open_file(source)


def file_schema(path: Path) -> Any:
    """The file's schema; DataError naming the file when it is not a parquet or Arrow file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).schema_arrow if path.suffix == ".parquet" else arrow_reader(path).schema
    except (pa.ArrowException, OSError) as err:
        raise DataError(
            f"cannot parse {path} ({str(err).splitlines()[0]}): check that it is a valid {path.suffix[1:]} file"
        ) from None


def file_batches(path: Path, columns: list[str]) -> Iterator[Any]:
    """The file's record batches, only `columns`: nothing else is decompressed (parquet) or touched (Arrow)."""
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        yield from pq.ParquetFile(path).iter_batches(batch_size=HF_CHUNK_ROWS, columns=columns)
        return
    reader = arrow_reader(path)
    batches = (
        reader
        if hasattr(reader, "read_next_batch")
        else (reader.get_batch(i) for i in range(reader.num_record_batches))
    )
    for batch in batches:
        yield batch.select(columns)


def schema_features(schema: Any) -> dict[str, Any]:
    """The `datasets` features a file's schema metadata records (empty when it records none)."""
    metadata = (schema.metadata or {}).get(b"huggingface")
    try:
        return json.loads(metadata)["info"]["features"] if metadata else {}
    except (ValueError, KeyError, TypeError):
        return {}


# --- where the files are --------------------------------------------------------------


def split_files(root: Path, split: str) -> list[Path]:
    """The Hub's layouts: data/<split>-00000-of-00002.parquet, <split>/....arrow, <split>.parquet;
    a folder whose files name no split at all is one split."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and is_table_file(p) and not p.name.startswith("."))
    named = [
        p
        for p in files
        if p.stem == split
        or p.name.startswith(f"{split}-")
        or p.name.startswith(f"{split}.")
        or split in p.relative_to(root).parts[:-1]
    ]
    return named or files


def locate(source: str, split: str) -> tuple[list[Path], dict[str, Any], dict[str, Any]]:
    """(files, features, description) of SOURCE's split."""
    path = Path(source)
    if path.is_file():
        if not is_table_file(path):
            raise DataError(f"{path} is not a .parquet or .arrow file: pass a Hugging Face data set's file or folder")
        return [path], {}, {"kind": "hf", "path": str(path.resolve())}
    if path.is_dir():
        folder = path
        if (path / "dataset_dict.json").is_file():  # DatasetDict.save_to_disk: one folder per split
            splits = json.loads((path / "dataset_dict.json").read_text()).get("splits", [])
            if split not in splits:
                raise DataError(f"{path} has no split {split!r} (splits: {', '.join(splits)}): pass --split")
            folder = path / split
        if (folder / "state.json").is_file():  # Dataset.save_to_disk
            state = json.loads((folder / "state.json").read_text())
            files = [folder / f["filename"] for f in state.get("_data_files", [])]
            info = folder / "dataset_info.json"
            features = json.loads(info.read_text()).get("features", {}) if info.is_file() else {}
        else:
            files, features = split_files(folder, split), {}
        if not files:
            raise DataError(f"{path} holds no .parquet or .arrow files: pass a Hugging Face data set's folder")
        return files, features, {"kind": "hf", "path": str(path.resolve()), "split": split}
    return cached(source, split)


def cached(name: str, split: str) -> tuple[list[Path], dict[str, Any], dict[str, Any]]:
    """A data set already in the local Hugging Face cache, by name: never downloaded (offline)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets

        dataset = datasets.load_dataset(name, split=split)
    except ImportError:
        raise DataError(f"{name} is not a file or folder, and `datasets` is not installed to look it up") from None
    except Exception as err:  # datasets raises many types for a name it cannot find offline
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"{name} is not a file or folder, nor a data set in the local Hugging Face cache ({line}): "
            "pass a save_to_disk folder or parquet files, or download it first with datasets.load_dataset"
        ) from None
    files = [Path(f["filename"]) for f in dataset.cache_files]
    return files, dataset.features.to_dict(), {"kind": "hf", "name": name, "split": split}


# --- the columns ----------------------------------------------------------------------


def is_image_column(field: Any, feature: dict[str, Any] | None) -> bool:
    import pyarrow as pa

    if feature is not None and feature.get("_type") == "Image":
        return True
    if pa.types.is_struct(field.type):
        return field.type.get_field_index("bytes") >= 0
    return pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)


def image_column_of(schema: Any, features: dict[str, Any], wanted: str | None, where: str) -> str | None:
    """The image column: `wanted`, else the first of the Image feature, a {bytes, path} struct or binary."""
    if wanted is not None:
        if wanted not in schema.names or not is_image_column(schema.field(wanted), features.get(wanted)):
            raise DataError(
                f"{where} has no image column {wanted!r} (binary, or a struct of bytes and path; columns: "
                f"{', '.join(schema.names)}): pass --image-column"
            )
        return wanted
    return next((f.name for f in schema if is_image_column(f, features.get(f.name))), None)


def image_rows(
    files: list[Path],
    features: dict[str, Any],
    where: str,
    name: Callable[[int], str],
    description: dict[str, Any],
    image_column: str | None = None,
    label_column: str = "label",
) -> Source:
    """The samples of a table with an image column: payloads as stored, labels from `label_column`;
    `name(position)` is a sample's source, for the data set's sources.jsonl and for errors."""
    import pyarrow as pa

    schema = file_schema(files[0])
    features = features or schema_features(schema)
    image = image_column_of(schema, features, image_column, where)
    if image is None:
        raise DataError(
            f"{where} has no image column (the Image feature, a struct of bytes and path, or binary; columns: "
            f"{', '.join(schema.names)}): pass --image-column, or use prep table for numeric columns"
        )
    if label_column not in schema.names:
        class_labels = [name for name, f in features.items() if isinstance(f, dict) and f.get("_type") == "ClassLabel"]
        if label_column != "label" or not class_labels:
            raise DataError(
                f"{where} has no column {label_column!r} (columns: {', '.join(schema.names)}): pass --label-column"
            )
        label_column = class_labels[0]
    label_feature = features.get(label_column) or {}
    names = label_feature.get("names") if label_feature.get("_type") == "ClassLabel" else None

    num_rows, values = 0, set()
    for path in files:  # first pass: the label column only
        for batch in file_batches(path, [label_column]):
            labels = batch.column(0)
            if labels.null_count:
                raise DataError(f"{where}: column {label_column!r} has empty values: fill or drop those rows")
            if names is None:
                values.update(str(v) for v in labels.to_pylist())
            num_rows += batch.num_rows
    if num_rows == 0:
        raise DataError(f"{where} has no rows: point prep at a non-empty data set")
    classes = list(names) if names is not None else sorted(values)
    index = {name: i for i, name in enumerate(classes)}

    def label_of(value: Any, position: int) -> int:
        if names is None:
            return index[str(value)]
        if not 0 <= value < len(names):
            raise DataError(
                f"{where}: {name(position)} has label {value}, not one of the {len(names)} ClassLabel names "
                "(-1: no label): drop unlabelled rows first"
            )
        return int(value)

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for path in files:
            for batch in file_batches(path, [image, label_column]):
                column, labels = batch.column(0), batch.column(1)
                is_struct = pa.types.is_struct(column.type)
                payloads = column.field("bytes") if is_struct else column
                paths = column.field("path") if is_struct and column.type.get_field_index("path") >= 0 else None
                for row in range(batch.num_rows):
                    if selected is None or selected[position]:
                        yield image_sample(payloads, paths, labels, row, position)
                    position += 1

    def image_sample(payloads: Any, paths: Any, labels: Any, row: int, position: int) -> Sample:
        payload = payloads[row].as_py()
        path = paths[row].as_py() if paths is not None else None
        if payload is None and path and Path(path).is_file():  # an Image stored by path, not embedded
            payload = Path(path).read_bytes()
        if not payload:
            raise DataError(f"{where}: {name(position)} has no image bytes: drop the row or embed its image")
        extension = image_extension(payload, path)
        if extension is None:
            raise DataError(
                f"{where}: {name(position)} is not an image decode.py reads ({', '.join(sorted(IMAGE_EXTENSIONS))}): "
                "drop or convert it"
            )
        return Sample(payload, extension, label_of(labels[row].as_py(), position), f"{name(position)}")

    return Source(
        num_rows,
        classes,
        read,
        {**description, "image_column": image, "label_column": label_column},
        sum(path.stat().st_size for path in files),
    )


def hf(source: str, split: str = "train", image_column: str | None = None, label_column: str = "label") -> Source:
    files, features, description = locate(source, split)
    return image_rows(files, features, source, lambda i: f"{split}[{i}]", description, image_column, label_column)
