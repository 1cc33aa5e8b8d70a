"""Raw data -> samples in storage order: the embedded synthetic set, a class-folder tree, a table file.

A sample is a float32 feature vector and an integer label. Keys are storage positions
("00000000", "00000001", ...), so a ledger of keys maps straight back to where a sample
is stored. Replace `featurize_bytes` with your modality's decoder (images, audio, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .errors import DataError

SYNTHETIC_DIM = 32


@dataclass(frozen=True)
class Samples:
    features: np.ndarray  # [N, D] float32
    labels: np.ndarray  # [N] int64
    classes: list[str]

    def __post_init__(self) -> None:
        if len(self.labels) == 0:
            raise DataError("the source holds no samples: point prep at a non-empty source")

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index: np.ndarray) -> Samples:
        return Samples(self.features[index], self.labels[index], self.classes)


def key_of(position: int) -> str:
    return f"{position:08d}"


def synthetic(num_samples: int, num_classes: int, seed: int, stream: int = 0) -> Samples:
    """Gaussian class blobs stored sorted by label: label of sample i is i * C // N.

    `stream` picks an independent draw from the same distribution (0: training, 1: held out).
    """
    if num_samples < 1 or num_classes < 1:
        raise DataError("--num-samples and --num-classes must be at least 1")
    if num_classes > num_samples:
        raise DataError(f"--num-classes {num_classes} exceeds --num-samples {num_samples}: every class needs a sample")
    means = np.random.default_rng([seed, 0]).normal(size=(num_classes, SYNTHETIC_DIM))
    labels = np.arange(num_samples, dtype=np.int64) * num_classes // num_samples
    noise = np.random.default_rng([seed, 1 + stream]).normal(scale=1.5, size=(num_samples, SYNTHETIC_DIM))
    features = (means[labels] + noise).astype(np.float32)
    return Samples(features, labels, [f"class_{c}" for c in range(num_classes)])


def featurize_bytes(data: bytes) -> np.ndarray:
    """Any bytes -> a 256-bin normalised byte histogram. Swap in a real decoder for your data."""
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256).astype(np.float32)
    return counts / max(len(data), 1)


def folder(root: Path) -> Samples:
    """One sub-folder per class, one file per sample; classes and files in sorted order."""
    if not root.is_dir():
        raise DataError(f"{root} is not a folder: pass a folder with one sub-folder per class")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = [(label, f) for label, d in enumerate(class_dirs) for f in sorted(d.rglob("*")) if f.is_file()]
    if not files:
        raise DataError(f"{root} holds no class sub-folders with files: expected {root}/<class>/<sample file>")
    features = np.empty((len(files), 256), dtype=np.float32)
    for i, (_, path) in enumerate(tqdm(files, desc="reading files", unit="file", disable=len(files) < 1000)):
        try:
            features[i] = featurize_bytes(path.read_bytes())
        except OSError as err:
            raise DataError(f"cannot read {path} ({err.strerror}): fix its permissions or remove it") from err
    labels = np.array([label for label, _ in files], dtype=np.int64)
    return Samples(features, labels, [d.name for d in class_dirs])


def table(path: Path, label_column: str) -> Samples:
    """A parquet, jsonl or csv file: the label column plus numeric feature columns, in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not path.is_file():
        raise DataError(f"{path} not found: pass a .parquet, .jsonl or .csv file")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            tbl = pq.read_table(path)
        elif path.suffix in (".jsonl", ".json"):
            import pyarrow.json as pj

            tbl = pj.read_json(path)
        elif path.suffix == ".csv":
            import pyarrow.csv as pcsv

            tbl = pcsv.read_csv(path)
        else:
            raise DataError(f"{path}: unknown table type {path.suffix!r}: use .parquet, .jsonl or .csv")
    except pa.ArrowException as err:
        raise DataError(
            f"cannot parse {path} ({str(err).splitlines()[0]}): check that it is a valid {path.suffix[1:]} file"
        ) from err
    if tbl.num_rows == 0:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    if label_column not in tbl.column_names:
        raise DataError(
            f"{path} has no column {label_column!r} (columns: {', '.join(tbl.column_names)}): pass --label-column"
        )
    feature_columns = [
        name
        for name in tbl.column_names
        if name != label_column and (pa.types.is_integer(tbl[name].type) or pa.types.is_floating(tbl[name].type))
    ]
    if not feature_columns:
        raise DataError(f"{path} has no numeric feature column besides {label_column!r}: add one, or featurize first")
    label_values = tbl[label_column]
    if label_values.null_count:
        raise DataError(
            f"{path}: column {label_column!r} has {label_values.null_count} empty values: fill or drop those rows"
        )
    classes = sorted({str(v) for v in label_values.to_pylist()})
    class_index = {name: i for i, name in enumerate(classes)}
    labels = np.array([class_index[str(v)] for v in label_values.to_pylist()], dtype=np.int64)
    columns = [pc.fill_null(tbl[name].cast(pa.float32()), 0.0).to_numpy() for name in feature_columns]
    features = np.stack(columns, axis=1).astype(np.float32)
    return Samples(features, labels, classes)


def split_heldout(samples: Samples, fraction: float, seed: int) -> tuple[Samples, Samples | None]:
    """Hold out a seeded random `fraction`; both parts keep storage order."""
    if not 0.0 <= fraction < 1.0:
        raise DataError(f"--heldout-fraction {fraction} must be in [0, 1)")
    num_heldout = int(round(len(samples) * fraction))
    if num_heldout == 0:
        return samples, None
    if num_heldout == len(samples):
        raise DataError("--heldout-fraction leaves no training samples: lower it")
    heldout = np.zeros(len(samples), dtype=bool)
    heldout[np.random.default_rng([seed, 2]).choice(len(samples), num_heldout, replace=False)] = True
    return samples.subset(~heldout), samples.subset(heldout)
