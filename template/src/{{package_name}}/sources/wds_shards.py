"""Existing WebDataset shards (as webdataset's ShardWriter or img2dataset write them) -> samples,
to convert them into this project's format: `prep webdataset SRC --out DIR`, for every backend.

The shards are the `.tar` files under SRC, in sorted order (anything else beside them, such as
img2dataset's `.parquet` and `_stats.json` files, is not read), but those under SRC/heldout: a
held-out set, converted as the held-out set (--heldout-fraction is then not used); their members are grouped into
samples as webdataset groups them (consecutive members of one key, the name up to its first
dot). Every member of a sample is one of its fields (`Choice`), by default the members of the
first sample: its image (else its one member decode.py reads: npy, txt) is the payload, each
other member a field of the kind its name says (`kind_of`), and `.cls` the class when it is there
(decimal text; `--label-member` names another). `--fields jpg,txt,seg.png:mask` chooses the
members instead (the first is the payload; `name:kind` gives a kind, data/sample.py's KINDS), and
the others are left out. `--label-field` takes the class from a field of the `.json` member
(numbers are class indices, text the class names, sorted). Without a class member or field the
data set has no classes (every label NO_LABEL). A sample that lacks a chosen member or its
label, or that holds a member the first one does not, is refused naming the shard and the key.
A first pass reads the labels, so the shards are read twice; the samples stream, so prep's
memory stays flat. (The webdataset backend can also use shards where they are:
`prep webdataset SRC`, in_place.py, with the same choice of members.)
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data.decode import IMAGE_EXTENSIONS, can_decode, known_extensions
from ..data.sample import KINDS, NO_LABEL, Sample
from ..harness.errors import DataError
from .source import Source

TAR_BLOCK = 512
# The kind of a member by the last suffix of its name: "jpg", "seg.png" (a mask, see kind_of), "txt", ...
SUFFIX_KINDS = {**{e: "image" for e in IMAGE_EXTENSIONS}, "txt": "text", "json": "json", "npy": "array"}
MASK_WORDS = ("mask", "seg")  # an image member named with one of these ("seg.png", "mask.png") is a mask
UNFIT = '/\\\0 "'  # characters a field's name cannot hold (manifest.checked_schema)


HELDOUT = "heldout"  # SRC's sub-folder of held-out shards: never in the training set (in_place.py indexes it)


def shard_paths(src: Path) -> list[Path]:
    """The .tar files under `src`, in sorted order, but those under `src/heldout` and those linked
    there (`prep webdataset SRC --heldout`, in_place.py): a held-out set kept beside the training
    shards is never read into the training set."""
    held = {file_id(p) for p in (src / HELDOUT).rglob("*.tar")} if (src / HELDOUT).is_dir() else set()
    shards = sorted(
        p
        for p in src.rglob("*.tar")
        if p.is_file()
        and not p.name.startswith(".")
        and p.relative_to(src).parts[0] != HELDOUT
        and file_id(p) not in held
    )
    if not shards:
        raise DataError(f"{src} holds no .tar shards: pass the folder of a WebDataset's shards")
    return shards


def file_id(path: Path) -> tuple[int, int]:
    """The file a path names (device, inode): the same for two hard links of one file."""
    status = path.stat()
    return status.st_dev, status.st_ino


def heldout_folder(src: Path) -> Path | None:
    """`src/heldout` where it holds .tar shards: the shards' own held-out set, else None."""
    folder = src / HELDOUT
    return folder if folder.is_dir() and any(p.is_file() for p in folder.rglob("*.tar")) else None


def shard_samples(path: Path, name: str) -> Iterator[tuple[str, int, int, dict[str, bytes]]]:
    """(key, first byte, end byte, {extension: content}) of each sample of one shard, in order,
    its members grouped as webdataset groups them: consecutive members of one key. A shard that
    does not end as a tar ends (ends_as_a_tar) is refused before its last sample is given."""
    samples = 0
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
                        samples += 1
                    key, start, members = stem, member.offset, {}
                if extension in members:
                    raise DataError(f"shard {name}: sample {stem} has two .{extension} members: fix the shard")
                members[extension] = tar.extractfile(member).read()
                end = member.offset_data + -(-member.size // TAR_BLOCK) * TAR_BLOCK
            ends_as_a_tar(path, name, tar.offset, samples + (key is not None))
            if key is not None:
                yield key, start, end, members
    except (tarfile.TarError, OSError, EOFError) as err:
        if "unexpected end of data" in str(err):  # a member's data cut short
            raise truncated(name, "it ends inside a member", samples) from None
        raise DataError(f"shard {name} is not a readable tar file ({err}): fix or remove it") from None


END_OF_ARCHIVE = bytes(2 * TAR_BLOCK)  # the two zero blocks a tar ends with


def ends_as_a_tar(path: Path, name: str, offset: int, samples: int) -> None:
    """The two zero blocks of a tar's end where its next header would be (`offset`). tarfile ends its
    listing quietly at the end of the file or at a block that is no header, so a shard cut short (a
    download or copy that stopped) or overwritten would pass for a shard of fewer samples."""
    with open(path, "rb") as shard:
        shard.seek(offset)
        tail = shard.read(len(END_OF_ARCHIVE))
    if tail == END_OF_ARCHIVE:
        return
    if not any(tail):
        raise truncated(
            name, f"it ends at byte {offset + len(tail)}, before the two zero blocks that end a tar", samples
        )
    raise DataError(
        f"shard {name} is damaged (byte {offset}, after {samples} samples, is neither a tar header nor the end of "
        "the tar): download or write it again, or move it out of the shards' folder"
    )


def truncated(name: str, where: str, samples: int) -> DataError:
    return DataError(
        f"shard {name} is truncated ({where}, after {samples} samples): download or write it again, "
        "or move it out of the shards' folder"
    )


def kind_of(name: str) -> str:
    """The kind (data/sample.py's KINDS) of a member named `name` (what follows the key: "jpg",
    "seg.png"): by its last suffix, images (jpg, png, webp, ...), text (txt), json, array (npy), and
    bytes for anything else; an image whose name says mask or seg ("seg.png", "mask.png") is a
    mask. A number, or another kind, is chosen with --fields name:kind."""
    kind = SUFFIX_KINDS.get(name.rpartition(".")[2].lower(), "bytes")
    if kind == "image" and any(word in name.lower() for word in MASK_WORDS):
        return "mask"
    return kind


def extension_of(member: str) -> str:
    """The payload's extension, as decode.py knows it: the member's last suffix ("image.png": png)."""
    return member.rpartition(".")[2].lower()


def parsed_fields(fields: str) -> list[tuple[str, str | None]]:
    """--fields "jpg,txt,seg.png:mask" -> [("jpg", None), ("txt", None), ("seg.png", "mask")]."""
    chosen: list[tuple[str, str | None]] = []
    for item in fields.split(","):
        name, _, kind = item.strip().partition(":")
        if not name or any(c in name for c in UNFIT) or name in (n for n, _ in chosen):
            raise DataError(f"--fields {fields!r}: {name!r} is not a member's name, or comes twice")
        if kind and kind not in KINDS or kind == "class":
            raise DataError(
                f"--fields {fields!r}: {kind!r} is not a kind of field ({', '.join(k for k in KINDS if k != 'class')}; "
                "the class comes from --label-member or --label-field)"
            )
        chosen.append((name, kind or None))
    return chosen


@dataclass(frozen=True)
class Choice:
    """Which members of a sample the data set holds: the payload, the other fields and the label.

    `payload` is None when the data set is a payload and at most a label (as webdataset's
    ShardWriter writes a classification set): then each sample's one member besides the label is
    its payload, whatever its extension (png and jpg in one set)."""

    payload: str | None  # the payload's member, None: each sample's one member besides the label
    payload_name: str  # the payload's name in the schema (the first sample's payload member)
    fields: tuple[tuple[str, str], ...]  # (member, kind) of the other fields, in the schema's order
    label: str | None  # the member holding the class (decimal text), None: none (or --label-field)
    left_out: frozenset[str]  # members no sample's fields include (the label member under --label-field)
    chosen: bool  # by --fields: members it leaves out are left out; else every member must be a field

    def schema(self, class_name: str | None) -> tuple[tuple[str, str], ...]:
        """Source.schema: the payload, the other fields, and the class (named `class_name`) when there is one."""
        payload_kind = SUFFIX_KINDS.get(extension_of(self.payload or self.payload_name), "bytes")
        return ((self.payload_name, payload_kind), *self.fields, *([(class_name, "class")] if class_name else []))

    def besides(self) -> str:
        named = [f".{name}" for name, _ in self.fields] + [f".{self.label}"] * (self.label is not None)
        return f"besides {', '.join(named)}" if named else "(the first sample holds its payload alone)"

    def parts(
        self, shard: str, key: str, members: dict[str, bytes], label_hint: str
    ) -> tuple[str, bytes, tuple[tuple[str, bytes], ...]]:
        """(payload extension, payload, other fields) of one sample; DataError naming the shard and
        the key when it lacks a member the data set holds (the label included) or holds another."""
        listing = ", ".join(sorted(members))
        if self.label is not None and self.label not in members:
            raise DataError(
                f"shard {shard}: sample {key} has no .{self.label} label (members: {listing}): {label_hint}"
            )
        names = [name for name, _ in self.fields]
        if self.payload is None:
            rest = [m for m in members if m != self.label and m not in self.left_out]
            if len(rest) != 1:
                raise DataError(
                    f"shard {shard}: sample {key} has {len(rest)} members {self.besides()} "
                    f"({', '.join(rest) or 'none'}), and a sample has one payload: choose the members with --fields"
                )
            payload = rest[0]
        else:
            payload = self.payload
            missing = [m for m in (payload, *names) if m not in members]
            if missing:
                chose = "--fields chose it" if self.chosen else "the first sample holds it"
                raise DataError(
                    f"shard {shard}: sample {key} has no .{missing[0]} member (members: {listing}), and {chose}: "
                    "fix the shard, or choose the members every sample holds with --fields"
                )
            extra = [m for m in members if m not in (payload, *names, self.label, *self.left_out)]
            if extra and not self.chosen:
                raise DataError(
                    f"shard {shard}: sample {key} holds .{extra[0]}, which the first sample does not (members: "
                    f"{listing}): choose the members every sample holds with --fields"
                )
        if not can_decode(extension_of(payload)):
            raise DataError(
                f"shard {shard}: sample {key} has a .{payload} payload, and decode.py reads {known_extensions()}: "
                "add a decoder for it, or choose another payload with --fields (its first member)"
            )
        return extension_of(payload), members[payload], tuple((name, members[name]) for name in names)


def choice(
    shard: str, key: str, members: dict[str, bytes], fields: str | None, label_member: str, label_field: str | None
) -> Choice:
    """The members a data set holds, from its first sample (`key` of `shard`) and the options: see
    the module's doc. DataError when the payload is not clear or a chosen member cannot be a field."""
    # The class: the label member when the first sample holds it (or another was named), unless
    # --label-field takes it from the .json; the label member is never one of the other fields.
    label = None if label_field is not None else label_member
    if label == "cls" and "cls" not in members:
        label = None  # no .cls: a data set without classes
    left_out = frozenset({label_member} if label_field is not None else ())
    if fields is not None:
        chosen = parsed_fields(fields)
        if label_member in (name for name, _ in chosen):
            raise DataError(
                f"--fields {fields!r} names .{label_member}, the label member: leave it out (a sample's class "
                "comes from --label-member or --label-field)"
            )
        payload = chosen[0][0]
        if not can_decode(extension_of(payload)):
            raise DataError(
                f"--fields {fields!r}: its first member, the payload, is a .{payload}, and decode.py reads "
                f"{known_extensions()}: put the payload (an image, npy or txt member) first"
            )
        others = tuple((name, kind or kind_of(name)) for name, kind in chosen[1:])
        return Choice(payload, payload, others, label, left_out, chosen=True)
    candidates = [m for m in members if m not in (label_member,)]
    for name in candidates:
        if any(c in name for c in UNFIT) or name.startswith("_"):
            raise DataError(
                f"shard {shard}: sample {key} has a member .{name}, which cannot be a field's name: "
                "choose the members with --fields"
            )
    if len(candidates) == 1:  # a payload and at most a label: each sample's one other member is its payload
        return Choice(None, candidates[0], (), label, left_out, chosen=False)
    images = [m for m in candidates if kind_of(m) == "image"]
    readable = [m for m in candidates if can_decode(extension_of(m))]
    payloads = images if len(images) == 1 else readable
    if len(payloads) != 1:
        raise DataError(
            f"shard {shard}: sample {key} holds {', '.join(sorted(candidates))}, and which one is the payload is not "
            f"clear ({len(payloads)} of them decode.py reads): name the members with --fields, the payload first"
        )
    others = tuple((name, kind_of(name)) for name in candidates if name != payloads[0])  # in the shard's order
    return Choice(payloads[0], payloads[0], others, label, left_out, chosen=False)


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
    try:
        value = int(members[label_member].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise DataError(
            f"shard {name}: sample {key} has the label {members[label_member][:20]!r}, not a number"
        ) from None
    if value < 0:
        raise DataError(f"shard {name}: sample {key} has the label {value}: labels are 0 or more")
    return value


LABEL_HINT = "add one, or pass --label-member or --label-field"


def webdataset(
    src: Path, label_member: str = "cls", label_field: str | None = None, fields: str | None = None
) -> Source:
    """The samples of the shards under `src`, for converting them (see the module's doc)."""
    if not src.is_dir():
        raise DataError(f"{src} is not a folder: pass the folder of a WebDataset's shards")
    shards = shard_paths(src)
    names = [p.relative_to(src).as_posix() for p in shards]
    values: set[Any] = set()
    count = 0
    chosen: Choice | None = None
    for path, name in zip(shards, names, strict=True):  # first pass: the members, labels and counts
        for key, _, _, members in shard_samples(path, name):
            if chosen is None:
                chosen = choice(name, key, members, fields, label_member, label_field)
            chosen.parts(name, key, members, LABEL_HINT)
            if chosen.label is not None or label_field is not None:
                values.add(label_value(name, key, members, label_member, label_field))
            count += 1
    if chosen is None:
        raise DataError(f"{src}: its shards hold no samples")
    if not values:
        classes, index = [], {}
    elif all(isinstance(v, int) for v in values):
        classes = [str(c) for c in range(max(values) + 1)]
        index = {c: c for c in range(max(values) + 1)}
    elif all(isinstance(v, str) for v in values):
        classes = sorted(values)
        index = {c: i for i, c in enumerate(classes)}
    else:
        raise DataError(f"{src}: field {label_field!r} holds numbers for some samples and names for others")
    labelled = bool(classes)

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for path, name in zip(shards, names, strict=True):
            for key, _, _, members in shard_samples(path, name):
                if selected is None or selected[position]:
                    extension, payload, others = chosen.parts(name, key, members, LABEL_HINT)
                    label = index[label_value(name, key, members, label_member, label_field)] if labelled else NO_LABEL
                    yield Sample(payload, extension, label, f"{name}:{key}", others)
                position += 1

    description = {"kind": "webdataset", "path": str(src.resolve()), "label_member": label_member}
    if label_field is not None:
        description["label_field"] = label_field
    if fields is not None:
        description["fields"] = fields
    schema = chosen.schema(label_field or chosen.label)
    return Source(count, classes, read, description, sum(p.stat().st_size for p in shards), schema=schema)
