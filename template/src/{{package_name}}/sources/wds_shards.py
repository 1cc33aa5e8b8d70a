"""Existing WebDataset shards (as webdataset's ShardWriter writes them) -> samples, to convert
them into this project's format: `prep webdataset SRC --out DIR`, for every backend.

The shards are read as tar streams, in sorted order, members grouped into samples as
webdataset groups them (consecutive members of one key, the name up to its first dot). A
sample's label is its `.cls` member (decimal text; `--label-member` names another), or a
field of its `.json` member (`--label-field`; numbers are class indices, text the class
names, sorted); its payload is its one member that decode.py reads (jpg, png, npy, txt, ...),
the others left out. A sample without a label, or with no payload or two, is refused naming
the shard and the key. A first pass reads the labels, so the shards are read twice; the
samples stream, so prep's memory stays flat. (The webdataset backend can also use shards
where they are: `prep webdataset SRC`, in_place.py.)
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..data.decode import can_decode, known_extensions
from ..data.sample import Sample
from ..harness.errors import DataError
from .source import Source

TAR_BLOCK = 512


def shard_paths(src: Path) -> list[Path]:
    shards = sorted(p for p in src.rglob("*.tar") if p.is_file() and not p.name.startswith("."))
    if not shards:
        raise DataError(f"{src} holds no .tar shards: pass the folder of a WebDataset's shards")
    return shards


def shard_samples(path: Path, name: str) -> Iterator[tuple[str, int, int, dict[str, bytes]]]:
    """(key, first byte, end byte, {extension: content}) of each sample of one shard, in order,
    its members grouped as webdataset groups them: consecutive members of one key."""
    try:
        with tarfile.open(path, "r:") as tar:
            key, start, end, members = None, 0, 0, {}
            for member in tar:
                if not member.isfile():
                    raise DataError(f"shard {name}: member {member.name} is not a plain file: remove it from the shard")
                stem, _, extension = member.name.partition(".")
                if stem != key:
                    if key is not None:
                        yield key, start, end, members
                    key, start, members = stem, member.offset, {}
                if extension in members:
                    raise DataError(f"shard {name}: sample {stem} has two .{extension} members: fix the shard")
                members[extension] = tar.extractfile(member).read()
                end = member.offset_data + -(-member.size // TAR_BLOCK) * TAR_BLOCK
            if key is not None:
                yield key, start, end, members
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"shard {name} is not a readable tar file ({err}): fix or remove it") from None


def label_value(name: str, key: str, members: dict[str, bytes], label_member: str, label_field: str | None) -> Any:
    """The sample's label as stored: an int from a .cls-like member, or a JSON field's value."""
    if label_field is not None:
        if "json" not in members:
            raise DataError(f"shard {name}: sample {key} has no .json member for --label-field {label_field}")
        try:
            value = json.loads(members["json"])[label_field]
        except (ValueError, KeyError, TypeError):
            raise DataError(f"shard {name}: sample {key}: its .json has no field {label_field!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise DataError(f"shard {name}: sample {key}: field {label_field!r} is {value!r}, not a class")
        return value
    if label_member not in members:
        raise DataError(
            f"shard {name}: sample {key} has no .{label_member} label (members: {', '.join(sorted(members))}): "
            "add one, or pass --label-member or --label-field"
        )
    try:
        value = int(members[label_member].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise DataError(
            f"shard {name}: sample {key} has the label {members[label_member][:20]!r}, not a number"
        ) from None
    if value < 0:
        raise DataError(f"shard {name}: sample {key} has the label {value}: labels are 0 or more")
    return value


def payload_of(name: str, key: str, members: dict[str, bytes], label_member: str) -> str:
    payloads = [e for e in members if e not in (label_member, "json") and can_decode(e)]
    if len(payloads) != 1:
        raise DataError(
            f"shard {name}: sample {key} has {len(payloads)} payloads decode.py reads ({', '.join(payloads) or 'none'}"
            f"; members: {', '.join(sorted(members))}; decode.py reads {known_extensions()}): "
            "keep one payload per sample"
        )
    return payloads[0]


def webdataset(src: Path, label_member: str = "cls", label_field: str | None = None) -> Source:
    """The samples of the shards under `src`, for converting them (see the module's doc)."""
    if not src.is_dir():
        raise DataError(f"{src} is not a folder: pass the folder of a WebDataset's shards")
    shards = shard_paths(src)
    names = [p.relative_to(src).as_posix() for p in shards]
    values: set[Any] = set()
    count = 0
    for path, name in zip(shards, names, strict=True):  # first pass: labels and counts
        for key, _, _, members in shard_samples(path, name):
            values.add(label_value(name, key, members, label_member, label_field))
            payload_of(name, key, members, label_member)
            count += 1
    if count == 0:
        raise DataError(f"{src}: its shards hold no samples")
    if all(isinstance(v, int) for v in values):
        classes = [str(c) for c in range(max(values) + 1)]
        index = {c: c for c in range(max(values) + 1)}
    elif all(isinstance(v, str) for v in values):
        classes = sorted(values)
        index = {c: i for i, c in enumerate(classes)}
    else:
        raise DataError(f"{src}: field {label_field!r} holds numbers for some samples and names for others")

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for path, name in zip(shards, names, strict=True):
            for key, _, _, members in shard_samples(path, name):
                if selected is None or selected[position]:
                    extension = payload_of(name, key, members, label_member)
                    label = index[label_value(name, key, members, label_member, label_field)]
                    yield Sample(members[extension], extension, label, f"{name}:{key}")
                position += 1

    description = {"kind": "webdataset", "path": str(src.resolve()), "label_member": label_member}
    if label_field is not None:
        description["label_field"] = label_field
    return Source(count, classes, read, description, sum(p.stat().st_size for p in shards))
