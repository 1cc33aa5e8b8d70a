"""A class-folder tree -> samples (`prep folder`): one sub-folder per class, one file per sample."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..data.decode import IMAGE_EXTENSIONS, can_decode, known_extensions
from ..data.sample import Sample
from ..harness.errors import DataError
from .source import Source


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
