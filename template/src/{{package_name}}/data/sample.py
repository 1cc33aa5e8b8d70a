"""A sample as prep hands it to a backend's SampleWriter, and the key it is stored under.

The sources (sources/) make samples; every backend stores them. Keys are storage positions
("00000000", "00000001", ...), so a ledger of keys maps straight back to where a sample is stored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    payload: bytes  # as the source gave it: never decoded by prep
    extension: str  # lower case, without the dot: "png", "jpg", "npy", "txt", ...
    label: int
    source: str = ""  # where the source holds it: "cat/001.jpg", "row 17", ...


def key_of(position: int) -> str:
    return f"{position:08d}"
