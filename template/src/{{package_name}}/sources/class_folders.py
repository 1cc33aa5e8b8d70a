"""A folder tree -> samples (`prep folder`): one sub-folder per class, one sample per file or
per group of files; a folder without sub-folders is one data set of its files, without a class field.

Files of one folder whose names differ only after a dot are one sample, as WebDataset groups a
tar's members: `a.jpg`, `a.txt` and `a.mask.png` are sample `a`, with the fields `jpg`, `txt`
and `mask.png`. A sample's key is the shortest start of a file's name, up to a dot, that is also
a file's whole name without its extension, so `cat.0.jpg` and `cat.1.jpg` stay two samples. The
payload is the sample's image that is not a mask (source.is_mask_name: `mask`, `seg`, `label` or
`annotation` in the field's name), else its .npy, else its .txt; the other fields' kinds come from
their extension: an image (a mask by its name), .txt text, .json json, .npy array, else bytes.
Every sample of a data set of such groups has the same fields (its payload image in any format).

A folder whose sub-folders are `train/` and `val/` (or `validation/`, `test/`), each a tree as above
(torchvision's ImageFolder layout of a split data set), is two data sets: `split_trees` finds them,
and prep takes the val tree as the held-out set (val, else validation, else test; the others not read).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..data.decode import IMAGE_EXTENSIONS, can_decode, known_extensions
from ..data.sample import NO_LABEL, Sample
from ..harness.errors import DataError
from .source import Source, is_mask_name
from .verify import NAMED

FIELD_KINDS = {"txt": "text", "json": "json", "npy": "array"}  # by extension; images by IMAGE_EXTENSIONS
PAYLOAD_RANKS = {"image": 0, "array": 1, "text": 2}  # a sample's payload: the first of its files by these
Group = list[tuple[str, Path]]  # one sample's files: (field name, path), the payload first


def extension_of(path: Path) -> str:
    return path.suffix[1:].lower()


def field_kind(field: str) -> str:
    """A field's kind from its name (a file's name after its sample's key): by its extension."""
    extension = field.rpartition(".")[2].lower()
    if extension in IMAGE_EXTENSIONS:
        return "mask" if is_mask_name(field) else "image"
    return FIELD_KINDS.get(extension, "bytes")


def payload_rank(field: str) -> int:
    """Which of a sample's files is its payload: an image that is not a mask, else .npy, else .txt."""
    return PAYLOAD_RANKS.get(field_kind(field), len(PAYLOAD_RANKS))


def class_files(class_dir: Path) -> list[Path]:
    """The sample files of one class, in sorted order (sub-folders included, hidden files not)."""
    return class_entries(class_dir)[0]


def class_entries(class_dir: Path) -> tuple[list[Path], list[Path]]:
    """(the sample files of one class, in sorted order; what else is there that is no folder: a link
    to nothing, a FIFO, a socket, a device), sub-folders included, hidden files not. Telling them
    apart takes a stat, never an open: a FIFO opened for reading waits for a writer, forever."""
    files, others = [], []
    for p in class_dir.rglob("*"):
        if any(part.startswith(".") for part in p.relative_to(class_dir).parts):
            continue
        if p.is_file():
            files.append(p)
        elif not p.is_dir():
            others.append(p)
    return sorted(files), sorted(others)


def not_a_file(path: Path) -> str:
    """What a path that is neither a file nor a folder is, for an error."""
    if not path.exists():
        return f"a link to nothing: {os.readlink(path)}" if path.is_symlink() else "gone"
    mode = path.stat().st_mode
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device, not a file"


def samples_of(files: list[Path]) -> list[Group]:
    """Sorted files -> one group a sample, in the order of their first file, each its payload first."""
    stems = {(p.parent, p.name.rpartition(".")[0] or p.name) for p in files}
    groups: dict[tuple[Path, str], Group] = {}
    for path in files:
        name = path.name
        cut = next((i for i, c in enumerate(name) if c == "." and (path.parent, name[:i]) in stems), len(name))
        groups.setdefault((path.parent, name[:cut]), []).append((name[cut + 1 :], path))
    samples = []
    for group in groups.values():
        payload = min(group, key=lambda file: (payload_rank(file[0]), file[0]))
        samples.append([payload, *sorted(file for file in group if file is not payload)])
    return samples


def check_image_header(path: Path, payload: bytes) -> None:
    """Refuse a file that claims to be an image but is not one, reading only its header
    (the pixels are decoded later, in the DataLoader workers)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(payload)):
            pass
    except (UnidentifiedImageError, OSError) as err:
        raise DataError(f"{path} is not a readable image ({err}): fix or remove it, then prep again") from None


TRAINING_TREE = "train"
HELDOUT_TREES = ("val", "validation", "test")  # the held-out tree beside train/, the first present


def split_trees(root: Path) -> tuple[Path, Path] | None:
    """(train tree, held-out tree) where `root`'s sub-folders are train/ and val/ (validation/, test/)
    and nothing else; None for a folder of class sub-folders."""
    if not root.is_dir():
        return None
    names = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
    if TRAINING_TREE not in names or not names & set(HELDOUT_TREES) or names - {TRAINING_TREE, *HELDOUT_TREES}:
        return None
    return root / TRAINING_TREE, root / next(name for name in HELDOUT_TREES if name in names)


def unread_trees(root: Path, heldout: Path) -> list[Path]:
    """The held-out trees beside train/ that prep does not read: all but `heldout`, the first present."""
    return [root / name for name in HELDOUT_TREES if name != heldout.name and (root / name).is_dir()]


def read_file(path: Path, check_headers: bool) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read {path} ({err.strerror}): fix its permissions or remove it") from None
    if not data:
        raise DataError(f"{path} is empty: remove it, or replace it with the real sample")
    if check_headers and extension_of(path) in IMAGE_EXTENSIONS:
        check_image_header(path, data)
    return data


def folder(root: Path, keep_empty_classes: bool = False, check_headers: bool = True) -> Source:
    """One sub-folder per class (or the folder's own files, without classes), one sample per file or
    group of files (samples_of); classes and samples in sorted order.

    One pass lists and counts the samples class by class and checks that they have the same
    fields, and that every file is readable and not empty (all such files named in one error, as
    verify.py names every file that does not decode; so too links to nothing, FIFOs and the like,
    which are never opened); reading holds one class's file names at a time, never the data set. A class folder
    without files is refused (a class that can never be learned or scored), unless `keep_empty_classes`.
    With `check_headers` an image file whose header does not read is refused as it is read; prep turns
    it off where its check decodes every file (verify.py), which names every such file in one error.
    """
    if not root.is_dir():
        raise DataError(f"{root} is not a folder: pass a folder with one sub-folder per class")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    classes = [d.name for d in class_dirs]
    if not class_dirs:  # the folder's own files: a data set without a class field
        class_dirs = [root]
    counts, payload_bytes, first, unusable = [], 0, None, []
    for class_dir in class_dirs:
        files, others = class_entries(class_dir)
        unusable += [f"{path.relative_to(root).as_posix()} ({not_a_file(path)})" for path in others]
        groups = samples_of(files)
        for group in groups:
            field, path = group[0]
            if len(group) > 1 and payload_rank(field) == len(PAYLOAD_RANKS):
                raise DataError(
                    f"{root}: {named(root, group)}, none of them a payload: add the sample's image, .npy or .txt file"
                )
            if not can_decode(extension_of(path)):
                raise DataError(
                    f"{path}: no decoder for {path.suffix or 'files without an extension'} "
                    f"(decode.py reads {known_extensions()}): add one to decode.py, or remove the file"
                )
            first = first or group
            if [f for f, _ in group[1:]] != [f for f, _ in first[1:]]:
                raise DataError(
                    f"{root}: {named(root, group)} but {named(root, first)}: every sample needs the same fields "
                    "(files named <sample>.<field>, side by side): add or remove files"
                )
            sizes = [path.stat().st_size for _, path in group]
            payload_bytes += sum(sizes)
            unusable += [
                f"{path.relative_to(root).as_posix()} ({'empty' if not size else 'unreadable'})"
                for (_, path), size in zip(group, sizes, strict=True)
                if not size or not os.access(path, os.R_OK)
            ]
        counts.append(len(groups))
    if unusable:
        more = f" and {len(unusable) - NAMED} more" if len(unusable) > NAMED else ""
        raise DataError(
            f"{root}: {len(unusable)} files are empty or unreadable: {', '.join(unusable[:NAMED])}{more}: "
            "remove them, or replace them with the real samples (and fix their permissions or links)"
        )
    empty = [d.name for d, count in zip(class_dirs, counts, strict=True) if count == 0]
    if empty and sum(counts) and not keep_empty_classes:
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        raise DataError(
            f"{root}: class folder {empty[0]!r}{more} holds no files: add its samples, remove it, "
            "or pass --keep-empty-classes"
        )
    if not sum(counts):
        raise DataError(f"{root} holds no class sub-folders with files: expected {root}/<class>/<sample file>")
    schema = ()  # one file a sample: its payload and the class (Source.fields)
    if first is not None and len(first) > 1:
        schema = ((first[0][0], field_kind(first[0][0])), *((f, field_kind(f)) for f, _ in first[1:]))
        schema += (("class", "class"),) if classes else ()

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for label, class_dir in enumerate(class_dirs):
            for group in samples_of(class_files(class_dir)):
                if selected is None or selected[position]:
                    (_, path), others = group[0], group[1:]
                    yield Sample(
                        read_file(path, check_headers),
                        extension_of(path),
                        label if classes else NO_LABEL,
                        path.relative_to(root).as_posix(),
                        tuple((field, read_file(file, check_headers)) for field, file in others),
                    )
                position += 1
        if position != sum(counts):
            raise DataError(
                f"{root} changed while prep read it ({position} samples, {sum(counts)} before): run prep again"
            )

    description = {"kind": "folder", "path": str(root.resolve())}
    return Source(sum(counts), classes, read, description, payload_bytes, schema=schema)


def named(root: Path, group: Group) -> str:
    """A sample's files, for an error: `cat/a has the fields jpg, txt`."""
    field, path = group[0]
    relative = path.relative_to(root).as_posix()
    key = relative[: len(relative) - len(field) - 1] if field else relative
    return f"{key} has the fields {', '.join(f for f, _ in group) or 'none'}"
