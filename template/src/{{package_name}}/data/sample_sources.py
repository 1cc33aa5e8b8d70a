"""sources.jsonl: where every stored sample came from, so that an error names the user's file.

prep writes one line per sample, in storage order (sources/source_writer.py):
`["<key>", "<source>"]`, the source being a path relative to the folder prep read, a table
row or a shard and key. It lies beside labels.npy in every backend's format and is named in
the manifest with its sha256 (`sources`, `sources_sha256`). It is read only when something
goes wrong: a DataError about a sample then gains `source cat/001.jpg`, found by scanning
the file for the key.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..harness.errors import DataError
from .manifest import MANIFEST

SOURCES = "sources.jsonl"


def source_of(data_dir: str | Path, key: str) -> str | None:
    """The source of sample `key`, or None where the data set keeps none (prepared before
    sources.jsonl, or not a local folder) or the file cannot be read."""
    path = Path(data_dir) / SOURCES
    if "://" in str(data_dir) or not (Path(data_dir) / MANIFEST).is_file():
        return None
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                stored_key, source = json.loads(line)
                if stored_key == key:
                    return source
    except (OSError, ValueError, TypeError):
        return None
    return None


def named_by_source(err: DataError, data_dir: str | Path) -> DataError:
    """`err` with the source of its sample named, when it is about one sample (decode.SampleError)."""
    from .decode import SampleError

    if not isinstance(err, SampleError):
        return err
    source = source_of(data_dir, err.key)
    return err if source is None else SampleError(err.key, f"{err.where}, source {source}", err.problem)
