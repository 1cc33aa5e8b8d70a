"""Prep in parts: `--part I --parts N` writes one slice of the data set, `prep join OUT` makes it one.

Part I takes the samples at storage positions [N_s * I // N, N_s * (I + 1) // N) of the training
set and of the held-out set (N_s: that set's size): positions in the source's own order after the
seeded held-out split or, with webdataset's storage shuffle, in the whole's shuffled order (the
part reads the samples its positions hold and reorders only those), so every machine computes the
same slices from the same options. It
writes them, verified, as a complete data set of its own under OUT/parts/part-I-of-N (the
held-out slice under OUT/heldout/parts/part-I-of-N), keyed by their positions in the whole,
and then its marker OUT/parts/part-I-of-N.json, which records the options it was given.

`prep join OUT` checks that parts 0 .. N-1 all have markers, with the same options, and
that their slices follow each other; then it writes labels.npy, sources.jsonl and the
format's own index of the whole, the held-out manifest, and the training manifest last
(write_manifest: a temporary name, then a rename). Until then OUT has no manifest.json,
so no run accepts a half-joined data set.

With --out s3://BUCKET/PREFIX (webdataset), each part is written so, in a TMPDIR spill, and uploaded
under PREFIX, its marker last; and `prep join s3://BUCKET/PREFIX` joins them there: the same checks
on the markers, the parts' manifests and small files downloaded, the shards left where they lie
(sources/parts_in_bucket.py).

The joined data set is the one a single prep with the same options writes: the same samples
under the same keys at the same positions, the same labels.npy and sources.jsonl (byte for
byte), the same held-out set, the same manifest fields. What differs, necessarily: the shards
(each part cuts its own, so their count, paths, bytes and sha256 differ, and with them the
webdataset sample index's byte offsets and its sha256), and the manifest's "parts" (how many).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data.manifest import FORMAT_FILES, MANIFEST, read_manifest, sha256_file, write_manifest
from ..harness.errors import DataError
from ..harness.options import option
from .source import Source

PARTS = "parts"  # OUT/parts and OUT/heldout/parts hold the parts' own data sets
SUMMED = ("num_samples", "payload_bytes")  # manifest fields of the whole: the parts' sum
REMADE = ("labels_sha256", "sources_sha256", "parts", "shards")  # made again by join (and the format's index)
JOINABLE = ("arrow", "files", "webdataset")  # formats whose manifest may list the shards of many writers
IN_BUCKETS = ("webdataset",)  # formats whose parts are written into, and joined in, a bucket (s3://)


@dataclass(frozen=True)
class Parts:
    """`--part I --parts N`: which slice of the data set this prep writes (harness.options.options_of)."""

    part: int = option(0, "The part to write, 0 .. --parts - 1 (with --parts)")
    parts: int = option(0, "Write one of N parts of the data set, then `prep join OUT` (0: the whole at once)")

    def check(self, out: Any, format: str) -> None:
        """DataError naming the bad choice: a part out of range, or what cannot be prepared in parts."""
        if self.parts < 0:
            raise DataError(f"--parts {self.parts} is not a number of parts: pass 2 or more (or leave it out)")
        if not self.parts:
            if self.part:
                raise DataError(f"--part {self.part} needs --parts N, the number of parts: pass both")
            return
        if not 0 <= self.part < self.parts:
            raise DataError(f"--part {self.part} is not one of --parts {self.parts}'s: pass 0 .. {self.parts - 1}")
        if format not in JOINABLE:
            raise DataError(
                f"the {format} backend stores a data set in one file, which parts cannot share: prep without --parts"
            )
        if "://" in str(out) and not (format in IN_BUCKETS and str(out).startswith("s3://")):
            raise DataError(f"--parts writes into a folder every part sees, not {out}: pass a folder as --out")


def part_name(part: int, parts: int) -> str:
    return f"part-{part:05d}-of-{parts:05d}"


def slice_of(num_samples: int, part: int, parts: int) -> tuple[int, int]:
    """[first, end) of part `part` of `parts` over `num_samples` positions: together, every position once."""
    return num_samples * part // parts, num_samples * (part + 1) // parts


def part_of(
    source: Source, part: int, parts: int, storage_seed: int | None = None, permutation: Callable | None = None
) -> tuple[Source | None, int, np.ndarray | None]:
    """(the samples of `source` in part `part`'s slice of storage positions, None when there are none; the
    storage position of its first; None when stored in the source's order, else the part's positions in
    its storage order: those [first, end) of the whole's storage shuffle `permutation(storage_seed, size)`,
    storing.storage_permutation)."""
    first, end = slice_of(source.num_samples, part, parts)
    if end == first:
        return None, first, None
    if storage_seed is None:
        return source.at(np.arange(first, end)), first, None
    wanted = permutation(storage_seed, source.num_samples)[first:end]  # the source positions stored there
    chosen = np.sort(wanted)
    return source.at(chosen), first, np.searchsorted(chosen, wanted)


def write_part(
    training: Source,
    heldout: Source | None,
    out: str | Path,
    chosen: Parts,
    given: dict[str, Any],
    write: Callable,
    permutation: Callable,
    **options: Any,
) -> None:
    """Write part `chosen.part` of `training` and `heldout` under OUT (the module's docstring) with `write`
    (prep.write_dataset, `options` its; `permutation`: storing.storage_permutation), then its marker, which
    records `given` (the command's options)."""
    out = Path(out).resolve()
    name = part_name(chosen.part, chosen.parts)
    if (out / MANIFEST).exists():
        raise DataError(f"{out} is a joined data set already: pass a new --out folder, or delete it first")
    marker = out / PARTS / f"{name}.json"
    if marker.exists():
        raise DataError(f"{marker} exists: part {chosen.part} is written already (delete it to write it again)")
    part, first, order = part_of(training, chosen.part, chosen.parts, options.get("storage_seed"), permutation)
    if part is None:
        raise DataError(
            f"part {chosen.part} of {chosen.parts} holds none of the {training.num_samples} samples: pass fewer --parts"
        )
    sets = [(part, first, out / PARTS / name, {**options, "storage_order": order})]
    held, held_first, _ = part_of(heldout, chosen.part, chosen.parts) if heldout is not None else (None, 0, None)
    if held is not None:
        sets.append((held, held_first, out / "heldout" / PARTS / name, {**options, "storage_seed": None}))
    written = []
    try:
        for source, start, root, settings in sets:
            root.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(root, ignore_errors=True)  # what this part left when killed before its marker
            tmp = root.parent / f".{name}.partial-{socket.gethostname()}-{os.getpid()}"
            written.append(tmp)
            write(source, tmp, first_key=start, **settings)
            os.rename(tmp, root)
        record = {
            "part": chosen.part,
            "parts": chosen.parts,
            "options": given,
            "training": {"first": first, "num_samples": part.num_samples, "of": training.num_samples},
            "heldout": None
            if heldout is None
            else {"first": held_first, "num_samples": held.num_samples if held else 0, "of": heldout.num_samples},
        }
        write_marker(marker, record)
    finally:
        for tmp in written:
            shutil.rmtree(tmp, ignore_errors=True)


def write_marker(marker: Path, record: dict[str, Any]) -> None:
    """A part's marker, under a temporary name renamed: written last, it says the part is complete."""
    tmp_marker = marker.with_name(marker.name + f".tmp-{os.getpid()}")
    tmp_marker.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp_marker, marker)


def read_markers(out: Path, where: str | None = None, unit: str = "num_samples") -> list[dict[str, Any]]:
    """The markers of parts 0 .. N-1 under OUT/parts, N from theirs; DataError naming the first missing or
    mismatched part (another N, other options, a slice that does not follow the one before). `where` names
    OUT in the errors when `out` holds copies of its markers (a bucket's: parts_in_bucket.py, where a part
    written again replaces the old one). `unit` is the field of a marker's slice that counts its positions
    (shards indexed in place split the shards: "num_shards", in_place_parts.py)."""
    named = where or str(out)
    found = sorted((out / PARTS).glob("part-*-of-*.json"))
    if not found:
        raise DataError(f"{named}/{PARTS} holds no part's marker: write the parts first (prep ... --part I --parts N)")
    first = json.loads(found[0].read_text())
    parts, markers = first["parts"], []
    for part in range(parts):
        path = out / PARTS / f"{part_name(part, parts)}.json"
        if not path.is_file():
            raise DataError(
                f"part {part} of {parts} is missing or not finished (no {named}/{PARTS}/{path.name}): run prep with "
                f"--part {part} --parts {parts} and part 0's options, then join again"
            )
        markers.append(json.loads(path.read_text()))
    others = sorted(set(found) - {out / PARTS / f"{part_name(part, parts)}.json" for part in range(parts)})
    if others:
        raise DataError(
            f"{named}/{PARTS}/{others[0].name} is a part of another --parts than {parts}: delete the parts of the "
            "other split"
        )
    base = markers[0]["options"]
    for part, marker in enumerate(markers):
        if marker["options"] != base:
            name, theirs, ours = first_difference(marker["options"], base)
            delete = "" if where else f" (delete {out / PARTS / part_name(part, parts)}* first)"
            raise DataError(
                f"part {part} of {parts} was made with {name}={theirs!r}, part 0 with {name}={ours!r}: prep part "
                f"{part} again with part 0's options{delete}"
            )
        for which in ("training", "heldout"):
            expected = slice_of(markers[0][which]["of"], part, parts) if markers[0][which] else None
            got = marker[which] and (marker[which]["first"], marker[which]["first"] + marker[which][unit])
            if got != expected:
                raise DataError(
                    f"part {part} of {parts} holds {which} {unit.removeprefix('num_')} {got}, not the slice "
                    f"{expected}: prep part {part} again"
                )
    return markers


def first_difference(mine: Any, theirs: Any, name: str = "") -> tuple[str, Any, Any]:
    """(the dotted name, my value, theirs) of the first field where two options' records differ."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*mine, *(key for key in theirs if key not in mine)]:
            if mine.get(key) != theirs.get(key):
                return first_difference(mine.get(key), theirs.get(key), f"{name}.{key}" if name else key)
    return name, mine, theirs


def join_parts(out: str | Path, format: str) -> int:
    """`prep join OUT`: the parts under OUT checked and made one data set (the module's docstring); its
    training sample count."""
    out = Path(out).resolve()
    if (out / MANIFEST).exists():
        raise DataError(f"{out} is joined already ({out / MANIFEST} exists)")
    markers = read_markers(out)

    def size_of(path: str) -> int | None:
        return (out / path).stat().st_size if (out / path).is_file() else None

    return join_folders(out, format, markers, str(out), size_of)


def part_folders(out: Path, markers: list[dict[str, Any]]) -> tuple[list[Path], list[Path]]:
    """(every part's training folder, the held-out folders of the parts that hold held-out samples), in part order."""
    names = [part_name(part, len(markers)) for part in range(len(markers))]
    held = [
        name
        for name, marker in zip(names, markers, strict=True)
        if marker["heldout"] and marker["heldout"]["num_samples"]
    ]
    return [out / PARTS / name for name in names], [out / "heldout" / PARTS / name for name in held]


def join_folders(
    out: Path, format: str, markers: list[dict[str, Any]], where: str, size_of: Callable[[str], int | None]
) -> int:
    """The parts of `markers` under `out` (their manifests and the files join copies; `size_of` a path
    relative to OUT gives the size of a shard there, None when missing; `where` names OUT) checked, then
    joined in `out`, the training manifest last; its training sample count."""
    training_folders, heldout_folders = part_folders(out, markers)
    # Every part's manifest read (and checked) before anything is written.
    training = [(folder, read_manifest(folder, format)) for folder in training_folders]
    heldout = [(folder, read_manifest(folder, format)) for folder in heldout_folders]
    for sets in (training, heldout):
        for root, manifest in sets:
            check_part_files(out, root.relative_to(out).as_posix(), manifest, where, size_of)
    if heldout:
        joined_set(out / "heldout", heldout, len(markers))
    return joined_set(out, training, len(markers))  # the training manifest last


def check_part_files(
    out: Path,
    folder: str,
    manifest: dict[str, Any],
    where: str,
    size_of: Callable[[str], int | None],
    beside: bool = False,
) -> None:
    """DataError when a file the manifest of the part in OUT/`folder` names is missing, of another size
    (`size_of`: join_folders'), or (labels.npy, sources.jsonl and the format's index, which join copies)
    of another sha256; `where` names OUT. `beside`: the manifest names its shards relative to OUT, where
    they lie (shards indexed in place: in_place_parts.py), not to the part's folder."""
    for name in ("labels", "sources", *FORMAT_FILES.get(manifest["format"], ())):
        if name in manifest and sha256_file(out / folder / manifest[name]) != manifest[f"{name}_sha256"]:
            raise DataError(
                f"{where}/{folder}/{manifest[name]} is not the file its part wrote (sha256): prep that part again"
            )
    for shard in manifest["shards"]:
        path = shard["path"] if beside else f"{folder}/{shard['path']}"
        if size_of(path) != shard["bytes"]:
            raise DataError(f"{where}/{path} is missing or not of {shard['bytes']} bytes: prep that part again")


def joined_set(root: Path, sets: list[tuple[Path, dict[str, Any]]], parts: int) -> int:
    """One set (training or held-out) of the parts `sets` ((folder, manifest), in part order) written as
    a data set in `root`: the arrays and sources concatenated, the manifest last; its sample count."""
    manifests = [manifest for _, manifest in sets]
    whole = joined_manifest(manifests, [folder.relative_to(root).as_posix() for folder, _ in sets])
    arrays = ["labels", *FORMAT_FILES.get(whole["format"], ())]
    for name in arrays:
        concatenated(root / whole[name], [folder / manifest[name] for folder, manifest in sets])
        whole[f"{name}_sha256"] = sha256_file(root / whole[name])
    if "sources" in whole:
        with open(root / (whole["sources"] + ".tmp"), "wb") as joined:
            for folder, manifest in sets:
                with open(folder / manifest["sources"], "rb") as part:
                    shutil.copyfileobj(part, joined)
        os.replace(root / (whole["sources"] + ".tmp"), root / whole["sources"])
        whole["sources_sha256"] = sha256_file(root / whole["sources"])
    whole["parts"] = parts
    shards = whole.pop("shards")
    write_manifest(root, whole, shards)
    return whole["num_samples"]


def concatenated(path: Path, pieces: list[Path]) -> None:
    """The .npy arrays `pieces` (one dtype, rows of one width) stacked into `path`, a temporary name renamed."""
    arrays = [np.load(piece, mmap_mode="r", allow_pickle=False) for piece in pieces]
    shape = (sum(len(array) for array in arrays), *arrays[0].shape[1:])
    tmp = path.with_name(path.name + ".tmp.npy")
    whole = np.lib.format.open_memmap(tmp, mode="w+", dtype=arrays[0].dtype, shape=shape)
    at = 0
    for array in arrays:
        whole[at : at + len(array)] = array
        at += len(array)
    whole.flush()
    del whole
    os.replace(tmp, path)


def joined_manifest(manifests: list[dict[str, Any]], folders: list[str]) -> dict[str, Any]:
    """The manifest of the parts' `manifests` (their folders relative to the whole's, in part order):
    counts summed, shards listed in order under their folders, every other field the same in every part."""
    whole = dict(manifests[0])
    for part, manifest in enumerate(manifests[1:], start=1):
        for name in sorted({*whole, *manifest} - {*SUMMED, *REMADE, "label_counts", "extensions", "max_side"}):
            if name.endswith("_sha256") or name in ("fields",):
                continue
            if manifest.get(name) != whole.get(name):
                raise DataError(
                    f"part {part}'s manifest has {name}={manifest.get(name)!r}, part 0's {whole.get(name)!r}: "
                    "prep the parts again with the same options"
                )
    for name in SUMMED:
        whole[name] = sum(manifest[name] for manifest in manifests)
    whole["label_counts"] = np.sum([manifest["label_counts"] for manifest in manifests], axis=0).tolist()
    extensions: dict[str, int] = {}
    for manifest in manifests:
        for extension, count in manifest["extensions"].items():
            extensions[extension] = extensions.get(extension, 0) + count
    whole["extensions"] = dict(sorted(extensions.items()))
    if "max_side" in whole:
        whole["max_side"] = {**whole["max_side"], "resized": sum(m["max_side"]["resized"] for m in manifests)}
    whole["fields"] = joined_fields([manifest.get("fields") for manifest in manifests])
    whole["shards"] = joined_shards(manifests, folders)
    return whole


def joined_fields(fields: list[Any]) -> Any:
    """The parts' "fields", the same but for a mask's counted classes ("0" .. the largest id a part saw):
    the longest of those."""
    whole = fields[0]
    for other in fields[1:]:
        if (
            other is None
            or whole is None
            or [(f["name"], f["kind"]) for f in other] != [(f["name"], f["kind"]) for f in whole]
        ):
            if other != whole:
                raise DataError(f"the parts hold other fields ({other} and {whole}): prep the parts again")
            continue
        whole = [
            max(mine, theirs, key=lambda entry: len(entry.get("classes", ())))
            for mine, theirs in zip(whole, other, strict=True)
        ]
    return whole


def joined_shards(manifests: list[dict[str, Any]], folders: list[str]) -> list[dict[str, Any]]:
    """Every part's shard entries in part order, their paths under the part's folder, their positions
    ("offset": the first sample's; "index": the shard's number) counted in the whole."""
    shards, first = [], 0
    for manifest, folder in zip(manifests, folders, strict=True):
        for shard in manifest["shards"]:
            entry = {**shard, "path": f"{folder}/{shard['path']}"}
            if "keys" in entry:
                entry["keys"] = f"{folder}/{shard['keys']}"
            if "offset" in entry:
                entry["offset"] = first + shard["offset"]
            if "index" in entry:
                entry["index"] = len(shards)
            shards.append(entry)
        first += manifest["num_samples"]
    return shards
