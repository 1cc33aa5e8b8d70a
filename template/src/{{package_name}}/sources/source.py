"""What every source is: a stream of samples in storage order (data/sample.py's Sample), its
size and classes known before the first sample; and the held-out split of one.

A sample is its payload as the source gave it (encoded image bytes, an .npy array, UTF-8
text), its extension, its other named fields (`Source.schema` names them and their kinds), an
integer label (or NO_LABEL: a source without classes has `classes == []`) and where the source
holds it (`Sample.source`: a path relative to the folder, a table row), which prep keeps beside
the data so that an error names the file. Nothing here decodes a payload for training: that happens in the
DataLoader workers (data/decode.py); prep decodes every sample once to check it (verify.py).
Every source is streamed: it knows its sample count and classes before the first sample,
then yields one sample at a time, so prep's memory does not grow with the data set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..data.sample import Sample, payload_kind
from ..harness.errors import DataError

MASK_WORDS = ("mask", "seg", "label", "annotation")  # in an image field's name: a mask, not an image


def is_mask_name(name: str) -> bool:
    """Whether an image field (a column, a file's name after its sample's key) of this name is a mask
    (an image of class ids, cropped and flipped with the sample's image): by MASK_WORDS."""
    return any(word in name.lower() for word in MASK_WORDS)


@dataclass(frozen=True)
class Source:
    """A stream of samples in storage order, and what prep needs to know before the first one.

    `read(selected)` makes one pass over the source and yields the samples at the positions
    where `selected` is True (all when None), reading nothing else.
    """

    num_samples: int
    classes: list[str]
    read: Callable[[np.ndarray | None], Iterator[Sample]]
    description: dict[str, Any]
    payload_bytes: int  # total payload bytes, exact or estimated: sizes the webdataset shards
    selected: np.ndarray | None = field(default=None, repr=False)
    # ((name, kind), ...) of every field, the payload first and the class (when `classes`) among them,
    # as manifest.json's "fields" records them; () for a payload and a class (`classic_schema`).
    schema: tuple[tuple[str, str], ...] = ()
    # The class of each id a mask field holds (mask_classes[i] names id i), as manifest.json's mask
    # entries record it ({"name": "mask", "kind": "mask", "classes": [...]}); () when not known.
    mask_classes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.num_samples == 0:
            raise DataError("the source holds no samples: point prep at a non-empty source")

    def samples(self) -> Iterator[Sample]:
        """The samples, exactly as many as announced: DataError when the source changed while read."""
        count = 0
        for count, sample in enumerate(self.read(self.selected), start=1):
            if count > self.num_samples:
                raise DataError("the source grew while prep read it: run prep again")
            yield sample
        if count != self.num_samples:
            raise DataError(f"the source gave {count} samples after announcing {self.num_samples}: run prep again")

    def subset(self, selected: np.ndarray, description: dict[str, Any]) -> Source:
        count = int(selected.sum())
        return Source(
            count,
            self.classes,
            self.read,
            {**self.description, **description},
            self.payload_bytes * count // self.num_samples,
            selected,
            self.schema,
            self.mask_classes,
        )

    def at(self, positions: np.ndarray) -> Source:
        """The samples at `positions` (increasing, among this source's 0 .. num_samples - 1), in its order."""
        mine = np.flatnonzero(self.selected) if self.selected is not None else np.arange(self.num_samples)
        selected = np.zeros(len(self.selected) if self.selected is not None else self.num_samples, dtype=bool)
        selected[mine[positions]] = True
        payload_bytes = self.payload_bytes * len(positions) // self.num_samples
        return replace(self, num_samples=len(positions), selected=selected, payload_bytes=payload_bytes)

    def fields(self, extensions: dict[str, int]) -> list[dict[str, str]]:
        """manifest.json's "fields": the source's schema, or a payload (named by its kind, from the
        `extensions` its samples had) and a class."""
        if self.schema:
            return [
                {
                    "name": name,
                    "kind": kind,
                    **({"classes": list(self.mask_classes)} if kind == "mask" and self.mask_classes else {}),
                }
                for name, kind in self.schema
            ]
        kind = payload_kind(extensions)
        return [{"name": kind, "kind": kind}] + ([{"name": "class", "kind": "class"}] if self.classes else [])


def with_mask_classes(source: Source, names: list[str] | None, where: str) -> Source:
    """`source` with its masks' ids named (`--mask-classes`: id i is the i-th name); DataError when it has
    no mask field. prep's check refuses a mask id beyond the names (sources/verify.py)."""
    if not names:
        return source
    check_mask_classes(
        names,
        source.schema,
        where,
        listing=", ".join(f"{name}:{kind}" for name, kind in source.schema) or "an image and a class",
        fix="name a mask field (a.mask.png beside a.jpg; --fields jpg,seg.png:mask), or leave --mask-classes out",
    )
    return replace(source, mask_classes=tuple(names))


def check_mask_classes(
    names: list[str] | None, kinds: Sequence[tuple[str, str]], where: str, listing: str, fix: str, noun: str = "field"
) -> None:
    """DataError when `--mask-classes` names classes (`names`) for fields `kinds` ((name, kind), ...) none of
    which is a mask: one check for every prep source (`listing` names the fields, or the table's columns:
    `noun`; `fix` says how the source names a mask)."""
    if names and not any(kind == "mask" for _, kind in kinds):
        raise DataError(
            f"{where}: --mask-classes names the classes of masks, but no {noun} is a mask ({noun}s: {listing}): {fix}"
        )


def split_heldout(source: Source, fraction: float, seed: int) -> tuple[Source, Source | None]:
    """Hold out a seeded random `fraction`; both parts keep storage order and are disjoint."""
    if not 0.0 <= fraction < 1.0:
        raise DataError(f"--heldout-fraction {fraction} must be in [0, 1)")
    num_heldout = int(round(source.num_samples * fraction))
    if num_heldout == 0:
        return source, None
    if num_heldout == source.num_samples:
        raise DataError("--heldout-fraction leaves no training samples: lower it")
    heldout = np.zeros(source.num_samples, dtype=bool)
    heldout[np.random.default_rng([seed, 2]).choice(source.num_samples, num_heldout, replace=False)] = True
    return (
        source.subset(~heldout, {"split": "training", "heldout_seed": seed}),
        source.subset(heldout, {"split": "heldout", "heldout_seed": seed}),
    )
