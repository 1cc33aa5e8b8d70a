"""manifest.json: what a prepared data set holds, written once by prep and read by every loader.

Every path in a manifest is relative to the data set's folder and must stay inside it:
an absolute path, a `..` or a symlink that leads out is refused, so a manifest from
elsewhere can never make a loader read (or copy into shared memory) a file outside it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import numpy as np

from ..harness.errors import PACKAGE, DataError
from .sample import KINDS, payload_kind

MANIFEST = "manifest.json"
LABELS = "labels.npy"  # int64 label of every sample, by storage position
# Fields every backend relies on, with their types; checked before anything else is read.
REQUIRED = {
    "format": str,
    "num_samples": int,
    "num_classes": int,
    "classes": list,
    "label_counts": list,
    "labels": str,
    "labels_sha256": str,
    "shards": list,
}
SHARD_REQUIRED = {"path": str, "num_samples": int, "sha256": str, "bytes": int}
# Fields one format adds (file names, then their sha256): webdataset's sample index (webdataset_backend.py).
FORMAT_FILES = {"webdataset": ("sample_index",)}


def schema(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """The data set's fields, [{"name", "kind"}, ...], the payload first and the class field (when the
    data has classes) among them. A manifest from before named fields (no "fields") holds a payload and
    a class: it is read as [{"name": <the payload's kind>, ...}, {"name": "class", "kind": "class"}]."""
    if "fields" in manifest:
        return manifest["fields"]
    extensions = set(manifest.get("extensions", {})) or {"png"}
    kind = payload_kind(extensions)
    return [{"name": kind, "kind": kind}, {"name": "class", "kind": "class"}]


def field_kinds(manifest: dict[str, Any]) -> dict[str, str]:
    """{name: kind} of the fields besides the payload and the class, in the schema's order: what a
    backend stores beside the payload and hands to decode.py in Record.fields."""
    return {f["name"]: f["kind"] for f in schema(manifest)[1:] if f["kind"] != "class"}


def mask_classes(manifest: dict[str, Any], name: str) -> list[str] | None:
    """The class names of mask field `name`'s ids (its "classes": id i is classes[i]), None when the
    manifest records none; DataError when the data set has no mask field of that name."""
    masks = {f["name"]: f for f in schema(manifest) if f["kind"] == "mask"}
    if name not in masks:
        raise DataError(
            f"the data set has no mask field {name!r} (its masks: {', '.join(masks) or 'none'}): "
            "pass --mask-field with one of them, or prepare the data with its masks"
        )
    return masks[name].get("classes")


def has_classes(manifest: dict[str, Any]) -> bool:
    return any(f["kind"] == "class" for f in schema(manifest))


def checked_schema(fields: Any, where: str | Path) -> None:
    """A manifest's "fields": a list of {"name", "kind"}, names unique and plain (a tar member's or a
    file's suffix), kinds of data/sample.py's KINDS, the first one the payload (not the class), at
    most one class field; DataError naming the problem otherwise."""
    if not isinstance(fields, list) or not fields:
        raise DataError(f"{where}: field 'fields' is not a list of fields: prepare the data again")
    names = []
    for i, entry in enumerate(fields):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("name"), str)
            or not entry["name"]
            or any(c in entry["name"] for c in '/\\\0 "')
            or entry.get("kind") not in KINDS
            or not isinstance(entry.get("classes", []), list)
            or not all(isinstance(name, str) for name in entry.get("classes", []))
        ):
            raise DataError(
                f"{where}: fields[{i}] is not a field (a plain 'name', a 'kind' of {', '.join(KINDS)} and, for a "
                "mask, 'classes' as a list of names): prepare the data again"
            )
        names.append(entry["name"])
    if len(set(names)) != len(names) or fields[0]["kind"] == "class" or [f["kind"] for f in fields].count("class") > 1:
        raise DataError(
            f"{where}: fields {names} repeat a name, start with the class or hold two classes: prepare the data again"
        )


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def open_manifest(root: str | Path, expected_format: str) -> tuple[dict[str, Any], str]:
    """DIR/manifest.json read and checked (read_manifest), every path it names checked to stay
    inside DIR (`inside`: a symlink that leads out is refused), and the sha256 of its bytes (which
    version of the data a run reads). A loader joins those paths to DIR plainly afterwards."""
    manifest = read_manifest(root, expected_format)
    for path in named_paths(manifest, expected_format):
        inside(root, path)
    return manifest, sha256_file(Path(root) / MANIFEST)


def named_paths(manifest: dict[str, Any], expected_format: str) -> list[str]:
    """Every file a checked manifest names: labels, the format's own files, each shard (and its keys)."""
    files = [manifest["labels"], *(manifest[name] for name in FORMAT_FILES.get(expected_format, ()))]
    for shard in manifest["shards"]:
        files += [shard["path"], shard["keys"]] if "keys" in shard else [shard["path"]]
    return files


def manifest_sha256(location: str | Path) -> str | None:
    """The sha256 of the data set's manifest.json (None when it has none): which version of the
    data a run read, recorded in its config.json; a resume on other data is refused."""
    manifest = Path(location) / MANIFEST
    return sha256_file(manifest) if manifest.is_file() else None


SAME_CLASSES_FIX = "prepare the held-out set from the same class folders, or with the training set in one prep"


def check_same_classes(
    classes: list[str],
    where: str | Path,
    training: list[str],
    other: str = "the training set",
    fix: str = SAME_CLASSES_FIX,
) -> None:
    """A held-out set's `classes` (the manifest's list, read at `where`) against `training`'s: the
    same names in the same order, for a label is a position in that list (one missing shifts every
    label after it). DataError in one line naming the first difference, else nothing."""
    if classes == training:
        return
    at = next(i for i in range(max(len(classes), len(training)) + 1) if classes[i : i + 1] != training[i : i + 1])
    if at >= len(classes) or (at < len(training) and training[at] not in classes):
        difference = f"{training[at]!r} is missing at label {at}"
    elif at >= len(training) or classes[at] not in training:
        difference = f"{classes[at]!r} at label {at} is not a class of {other}"
    else:  # the same names in another order
        difference = f"label {at} is {classes[at]!r} there, {training[at]!r} in {other}"
    raise DataError(
        f"{where} has {len(classes)} classes ({named(classes)}), {other} {len(training)} ({named(training)}): "
        f"{difference}: {fix}"
    )


def check_same_schema(
    manifest: dict[str, Any], where: str | Path, training: dict[str, Any], other: str = "the training set"
) -> None:
    """A held-out set's fields (its manifest, read at `where`) against `training`'s (a manifest): the
    same names and kinds in the same order, for the model reads each field by name, and each mask's
    classes the same, for an id is a position in that list. DataError in one line naming both otherwise."""
    if [(f["name"], f["kind"]) for f in schema(manifest)] == [(f["name"], f["kind"]) for f in schema(training)]:
        for entry, trained in zip(schema(manifest), schema(training), strict=True):
            if entry.get("classes") != trained.get("classes"):  # a mask's ids named, or counted, otherwise
                check_same_classes(
                    entry.get("classes", []), where, trained.get("classes", []), f"{other}'s mask {entry['name']!r}",
                    "prepare the held-out set with the training set in one prep (which counts the ids of both), "
                    "or name the classes of both (--mask-classes)",
                )  # fmt: skip
    if schema(manifest) != schema(training):
        described = [", ".join(f"{f['name']} ({f['kind']})" for f in schema(m)) for m in (manifest, training)]
        raise DataError(
            f"{where} holds the fields {described[0]}, {other} {described[1]}: prepare the held-out set from the "
            "same source, or with the training set in one prep"
        )


def same_mask_classes(roots: list[Path]) -> None:
    """Give the data sets prepared together at `roots` (a training set and its held-out set) the same
    classes for each mask field whose ids prep counted ("0" .. the largest id of each set's masks): the
    longest list, which holds the others, rewritten into the manifests that have a shorter one. Lists
    the source named are the same already; a list that does not extend the other is left as it is."""
    manifests = [json.loads((root / MANIFEST).read_text()) for root in roots]
    longest: dict[str, list[str]] = {}
    for manifest in manifests:
        for entry in manifest["fields"]:
            have = longest.setdefault(entry["name"], entry.get("classes", []))
            if entry["kind"] == "mask" and len(entry.get("classes", [])) > len(have):
                longest[entry["name"]] = entry["classes"]
    for root, manifest in zip(roots, manifests, strict=True):
        fields = []
        for entry in manifest["fields"]:
            have, wanted = entry.get("classes", []), longest[entry["name"]]
            extended = entry["kind"] == "mask" and have != wanted and wanted[: len(have)] == have
            fields.append({**entry, "classes": wanted} if extended else entry)
        if fields != manifest["fields"]:
            shards = manifest.pop("shards")
            write_manifest(root, {**manifest, "fields": fields}, shards)


def named(classes: list[str], shown: int = 3) -> str:
    """The first `shown` names of a class list, each as a Python string (one line whatever they hold)."""
    return ", ".join([repr(name) for name in classes[:shown]] + ["..."] * (len(classes) > shown))


class HashingWriter:
    """A binary file written once, front to back, hashed on the way: no second read for its sha256."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: BinaryIO = open(path, "wb")
        self.digest = hashlib.sha256()
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.bytes += len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    @property
    def closed(self) -> bool:  # with flush, what pyarrow needs to write into it
        return self.file.closed

    def entry(self, root: Path, num_samples: int, **extra: Any) -> dict[str, Any]:
        """The manifest's `shards` entry of this file (call after close)."""
        return {
            "path": self.path.relative_to(root).as_posix(),
            "num_samples": num_samples,
            "sha256": self.digest.hexdigest(),
            "bytes": self.bytes,
            **extra,
        }


class ShardList:
    """The manifest's `shards` entries, spooled to a file as they are made, so that a data
    set of a million sample files is listed without a million entries in memory."""

    def __init__(self, root: Path) -> None:
        self.path = root / ".shards.jsonl"
        self.file = open(self.path, "w")

    def append(self, entry: dict[str, Any]) -> None:
        self.file.write(json.dumps(entry) + "\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.file.close()
        with open(self.path) as lines:
            for line in lines:
                yield json.loads(line)

    def remove(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)


def write_manifest(root: Path, fields: dict[str, Any], shards: Iterable[dict[str, Any]]) -> None:
    """manifest.json = `fields` + `shards`, streamed out entry by entry, then renamed into place."""
    tmp = root / (MANIFEST + ".tmp")
    with open(tmp, "w") as out:
        out.write(json.dumps(fields, indent=1)[:-2] + ',\n "shards": [')
        for i, entry in enumerate(shards):
            out.write(("," if i else "") + "\n  " + json.dumps(entry))
        out.write("\n ]\n}\n")
    os.replace(tmp, root / MANIFEST)


def read_manifest(root: str | Path, expected_format: str) -> dict[str, Any]:
    """Read and sanity-check DIR/manifest.json; raise DataError with the fix on any problem."""
    path = Path(root) / MANIFEST
    if Path(root).is_file():
        raise DataError(
            f"{root} is a file, not a prepared data set (a folder with {MANIFEST}): prepare it first: "
            f"{prep_hint(Path(root), expected_format)}"
        )
    if not path.is_file():
        raise DataError(f"{path} not found: prepare the data first: {prep_hint(Path(root), expected_format)}")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not readable JSON ({err}): prepare the data again") from err
    return checked_manifest(manifest, path, expected_format)


TABLE_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv")  # what `prep table` reads (sources/tables.py)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


def prep_hint(root: Path, expected_format: str) -> str:
    """The commands that prepare what `--data root` names, as the user typed it, and then train on it:
    for a file or a folder, those for what it holds (a folder's first thousand entries tell), else for
    each kind. Each prep command writes a folder that does not exist yet, which the train command names."""
    prep = f"python -m {PACKAGE}.prep"
    entries = list(itertools.islice(root.iterdir(), 1000)) if root.is_dir() else []
    suffixes = {p.suffix.lower() for p in entries}
    if root.is_file():
        folder = root.parent if root.parent.name else Path.cwd()  # the folder it is in, named
        if root.suffix.lower() in TABLE_SUFFIXES:
            return then_train(f"{prep} table {root}", root)
        if root.suffix.lower() == ".tar":  # one shard: prep takes the folder of shards
            return f"it is a .tar shard: {shards_hint(prep, folder, expected_format)}"
        if root.suffix.lower() in IMAGE_SUFFIXES:  # one image: prep takes their folder (of class folders)
            classes = folder.parent if folder.parent.name else Path.cwd()
            return then_train(f"{prep} folder {classes}", classes) + f" ({classes}/<class>/<image>)"
    elif ".tar" in suffixes:
        return f"it holds .tar shards: {shards_hint(prep, root, expected_format)}"
    elif {"dataset_info.json", "dataset_dict.json", "state.json"} & {p.name for p in entries} or ".arrow" in suffixes:
        return "it holds a Hugging Face data set: " + then_train(f"{prep} hf {root}", root)
    elif ".parquet" in suffixes:
        table = min(p for p in entries if p.suffix.lower() == ".parquet")
        return f"it holds parquet files: {then_train(f'{prep} hf {root}', root)} (or `{prep} table {table} --out ...`)"
    elif any(p.is_dir() and not p.name.startswith(".") for p in entries):
        return "if it holds one sub-folder per class: " + then_train(f"{prep} folder {root}", root)
    elif suffixes & set(IMAGE_SUFFIXES):
        return "it holds images (without classes: use one sub-folder per class for them): " + then_train(
            f"{prep} folder {root}", root
        )
    out = prepared(root) if root.exists() else root  # prep writes a new folder: --data names it as it is
    return (
        f"`{prep} folder RAW_DIR --out {out}` (one sub-folder per class), `{prep} table FILE --out {out}`, "
        f"`{prep} hf SOURCE --out {out}` (a Hugging Face data set) or `{prep} synthetic --out {out}`, "
        f"then `./train.sh --data {out}`"
    )


def prepared(source: Path) -> Path:
    """Where a hint has prep write the data set prepared from `source` (a file or a folder): beside it, a
    new name (train.parquet -> train-prepared)."""
    if not source.name:  # "."
        return Path(f"{Path.cwd()}-prepared")
    return source.with_name((source.stem if source.is_file() else source.name) + "-prepared")


def then_train(command: str, source: Path) -> str:
    """`command` (a prep command without --out) writing beside `source`, then the training command on it."""
    out = prepared(source)
    return f"`{command} --out {out}`, then `./train.sh --data {out}`"


def shards_hint(prep: str, folder: Path, expected_format: str) -> str:
    """The commands for the folder of .tar shards `folder`: indexed where they are (webdataset), or converted."""
    if expected_format == "webdataset":  # this backend reads the shards where they are
        return f"index them where they are with `{prep} webdataset {folder}`, then `./train.sh --data {folder}`"
    return "convert them with " + then_train(f"{prep} webdataset {folder}", folder)


def checked_manifest(manifest: Any, where: str | Path, expected_format: str) -> dict[str, Any]:
    """`manifest` (read from `where`, a file or URL) if it is of this project's format, has
    every field with its type, and its counts add up; DataError with the fix otherwise."""
    if not isinstance(manifest, dict) or manifest.get("format") != expected_format:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DataError(
            f"{where} describes format {found!r}, but this project reads {expected_format!r}: "
            f"prepare the data with this project's `python -m {PACKAGE}.prep`"
        )
    for name, kind in REQUIRED.items():
        if not isinstance(manifest.get(name), kind) or isinstance(manifest.get(name), bool):
            raise DataError(f"{where}: field {name!r} is missing or not a {kind.__name__}: prepare the data again")
    for name, value, check, what in (
        ("classes", manifest["classes"], lambda c: all(isinstance(name, str) for name in c), "a list of names"),
        ("label_counts", manifest["label_counts"], lambda c: all(is_count(n) for n in c), "a list of counts >= 0"),
        ("labels_sha256", manifest["labels_sha256"], is_sha256, "a sha256 (64 hex digits)"),
    ):
        if not check(value):
            raise DataError(f"{where}: field {name!r} is not {what}: prepare the data again")
    for i, shard in enumerate(manifest["shards"]):
        for name, kind in SHARD_REQUIRED.items():
            if (
                not isinstance(shard, dict)
                or not isinstance(shard.get(name), kind)
                or isinstance(shard.get(name), bool)
            ):
                raise DataError(f"{where}: shards[{i}] lacks {name!r} ({kind.__name__}): prepare the data again")
        if not is_count(shard["num_samples"]) or not is_count(shard["bytes"]) or not is_sha256(shard["sha256"]):
            raise DataError(
                f"{where}: shards[{i}] has an impossible num_samples, bytes (counts >= 0) or sha256 (64 hex digits): "
                "prepare the data again"
            )
        relative_path(shard["path"], where)
        if "keys" in shard:  # webdataset: the shard's keys file (webdataset_backend.shard_keys)
            if not isinstance(shard["keys"], str):
                raise DataError(f"{where}: shards[{i}]'s 'keys' is not a str: prepare the data again")
            relative_path(shard["keys"], where)
    relative_path(manifest["labels"], where)
    for name in FORMAT_FILES.get(expected_format, ()):
        for field in (name, f"{name}_sha256"):
            if not isinstance(manifest.get(field), str):
                raise DataError(
                    f"{where}: field {field!r} is missing (a data set from an older prep?): prepare the data again"
                )
        relative_path(manifest[name], where)
    if "fields" in manifest:
        checked_schema(manifest["fields"], where)
    num_samples, num_classes = manifest["num_samples"], manifest["num_classes"]
    counts = manifest["label_counts"]
    if (
        num_samples < 1
        or num_classes < (1 if has_classes(manifest) else 0)
        or (num_classes and not has_classes(manifest))
        or len(manifest["classes"]) != num_classes
        or len(counts) != num_classes
        or (num_classes and sum(counts) != num_samples)
        or sum(s["num_samples"] for s in manifest["shards"]) != num_samples
    ):
        raise DataError(
            f"{where}: num_samples, num_classes, classes, label_counts and the shards' sample counts do not agree: "
            "prepare the data again"
        )
    return manifest


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def relative_path(path: str, where: str | Path) -> str:
    """`path` if it is a plain relative path that stays inside the data set (no /, no ..)."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith(("/", "\\")) or ".." in parts or ":" in parts[0] or "\0" in path:
        raise DataError(
            f"{where} names {path!r}, which is not a path inside the data set's folder: "
            "prepare the data again (manifests hold relative paths only)"
        )
    return path


def inside(root: str | Path, path: str) -> Path:
    """root/path, refused when it is not a relative path or a symlink leads outside root."""
    root = Path(root)
    target = root / relative_path(path, root / MANIFEST)
    resolved, base = target.resolve(), root.resolve()
    if resolved != base and base not in resolved.parents:
        raise DataError(f"{target} leads outside {root} (a symlink?): prepare the data again inside one folder")
    return target


def read_labels(root: str | Path, manifest: dict[str, Any] | None = None) -> np.ndarray:
    """The label of every sample by storage position, without reading the samples."""
    path = inside(root, manifest["labels"]) if manifest else Path(root) / LABELS
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {path} ({err}): prepare the data again") from None
