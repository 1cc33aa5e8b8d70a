"""manifest.json: what a prepared data set holds, written once by prep and read by every loader."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError

MANIFEST = "manifest.json"
LABELS = "labels.npy"  # int64 label of every sample, by storage position


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def shard_entry(root: Path, path: Path, num_samples: int, **extra: Any) -> dict[str, Any]:
    """One entry of the manifest's `shards` list; `path` is stored relative to the data set."""
    return {
        "path": path.relative_to(root).as_posix(),
        "num_samples": num_samples,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        **extra,
    }


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, root / MANIFEST)


def read_manifest(root: str | Path, expected_format: str) -> dict[str, Any]:
    """Read and sanity-check DIR/manifest.json; raise DataError with the fix on any problem."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise DataError(
            f"{path} not found: prepare the data first, e.g. `python -m {__package__}.prep synthetic --out {root}`"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not readable JSON ({err}): prepare the data again") from err
    return checked_manifest(manifest, path, expected_format)


def checked_manifest(manifest: dict[str, Any], where: str | Path, expected_format: str) -> dict[str, Any]:
    """`manifest` (read from `where`, a file or URL) if it is of this project's format and its
    shards add up; DataError with the fix otherwise."""
    if manifest.get("format") != expected_format:
        raise DataError(
            f"{where} describes format {manifest.get('format')!r}, but this project reads {expected_format!r}: "
            f"prepare the data with this project's `python -m {__package__}.prep`"
        )
    shards = manifest.get("shards")
    if shards is not None and sum(s["num_samples"] for s in shards) != manifest["num_samples"]:
        raise DataError(f"{where}: the shards' sample counts do not add up to num_samples: prepare the data again")
    return manifest


def read_labels(root: str | Path) -> np.ndarray:
    """The label of every sample by storage position, without reading the samples."""
    path = Path(root) / LABELS
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {path} ({err}): prepare the data again") from None
