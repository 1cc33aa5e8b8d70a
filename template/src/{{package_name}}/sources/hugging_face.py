"""Hugging Face data sets -> samples: a `save_to_disk` folder, parquet or Arrow files in the
Hub's layout, or a data set in the local Hugging Face cache, read as Arrow record batches.

Each column becomes a field of the kind its `Features` say (columns.py): an `Image` the stored
bytes, never re-encoded (a mask when `--mask-column` names it), a string text, a `ClassLabel`
the class, numbers a number, a `Sequence` or `Array2D` of numbers an array. Files are read one
record batch at a time, memory-mapped where they are Arrow, and a sample's image is taken out
of its batch one at a time, so prep's memory stays flat in the data set's size. A sample's
source is `<split>[<index>]`, its index in the split as `datasets` counts it (`dataset[index]`).
A second split of the same data set (`--heldout-split test`) is read the same way, as the held-out
set: it must be a split the data set names (a DatasetDict's, or files named for it in the Hub's layout).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..harness.errors import DataError
from . import columns
from .source import Source

HF_CHUNK_ROWS = 256  # parquet rows decompressed at once (images: a few MB)


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


def split_files(root: Path, split: str, flag: str = "--split") -> list[Path]:
    """The Hub's layouts: data/<split>-00000-of-00002.parquet, <split>/....arrow, <split>.parquet;
    a folder whose files name no split at all is one split, but never a held-out one (`flag`
    --heldout-split): DataError naming the splits its files name."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and is_table_file(p) and not p.name.startswith("."))
    named = [
        p
        for p in files
        if p.stem == split
        or p.name.startswith(f"{split}-")
        or p.name.startswith(f"{split}.")
        or split in p.relative_to(root).parts[:-1]
    ]
    if not named and files and flag != "--split":
        splits = sorted({p.name.split("-")[0].split(".")[0] for p in files})
        raise DataError(f"{root} has no files of split {split!r} (splits: {', '.join(splits)}): pass {flag}")
    return named or files


def locate(source: str, split: str, flag: str = "--split") -> tuple[list[Path], dict[str, Any], dict[str, Any]]:
    """(files, features, description) of SOURCE's split (`flag`: the option that named it)."""
    path = Path(source)
    if path.is_file():
        if not is_table_file(path):
            raise DataError(f"{path} is not a .parquet or .arrow file: pass a Hugging Face data set's file or folder")
        if flag != "--split":
            raise DataError(f"{path} is one file, one split: pass the folder of its splits, or leave out {flag}")
        return [path], {}, {"kind": "hf", "path": str(path.resolve())}
    if path.is_dir():
        folder = path
        if (path / "dataset_dict.json").is_file():  # DatasetDict.save_to_disk: one folder per split
            splits = json.loads((path / "dataset_dict.json").read_text()).get("splits", [])
            if split not in splits:
                raise DataError(f"{path} has no split {split!r} (splits: {', '.join(splits)}): pass {flag}")
            folder = path / split
        elif flag != "--split" and (folder / "state.json").is_file():
            raise DataError(f"{path} is one split (Dataset.save_to_disk): save a DatasetDict, or leave out {flag}")
        if (folder / "state.json").is_file():  # Dataset.save_to_disk
            state = json.loads((folder / "state.json").read_text())
            files = [folder / f["filename"] for f in state.get("_data_files", [])]
            info = folder / "dataset_info.json"
            features = json.loads(info.read_text()).get("features", {}) if info.is_file() else {}
        else:
            files, features = split_files(folder, split, flag), {}
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


def hf(
    source: str,
    split: str = "train",
    fields: list[str] | None = None,
    image_column: str | None = None,
    label_column: str | None = None,
    mask_columns: list[str] | None = None,
    mask_classes: list[str] | None = None,
    flag: str = "--split",
) -> Source:
    """SOURCE's split as samples of fields (columns.py: how each column's Features become a field);
    `flag` the option that named the split, which errors name."""
    files, features, description = locate(source, split, flag)
    schema = file_schema(files[0])
    return columns.rows(
        schema,
        lambda names: (batch for path in files for batch in file_batches(path, names)),
        features or schema_features(schema),
        source,
        lambda i: f"{split}[{i}]",
        description,
        sum(path.stat().st_size for path in files),
        fields,
        image_column,
        label_column,
        mask_columns,
        mask_classes,
    )
