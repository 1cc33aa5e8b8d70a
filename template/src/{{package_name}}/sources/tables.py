"""A table -> samples (`prep table`): parquet, jsonl or csv, one row per sample; a parquet or
Arrow table with an image column is read as Hugging Face's files are (hugging_face.py)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..data.sample import Sample
from ..harness.errors import DataError
from . import hugging_face
from .source import Source

TABLE_CHUNK_ROWS = 4096  # rows a table source holds in memory at once


def table_batches(path: Path, columns: list[str] | None = None) -> Iterator[Any]:
    """The table as pyarrow record batches of at most TABLE_CHUNK_ROWS rows, read as a stream."""
    import pyarrow as pa

    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(path).iter_batches(batch_size=TABLE_CHUNK_ROWS, columns=columns)
    elif path.suffix == ".csv":
        import pyarrow.csv as pcsv

        # strings_can_be_null: an empty label cell is a missing label, not a class named "".
        options = pcsv.ConvertOptions(include_columns=columns, strings_can_be_null=True)
        yield from pcsv.open_csv(path, convert_options=options, read_options=pcsv.ReadOptions(block_size=1 << 20))
    elif path.suffix in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as lines:
            rows: list[dict] = []
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise pa.ArrowInvalid(f"line {number}: {err}") from None
                    rows.append({c: row.get(c) for c in columns} if columns else row)
                if len(rows) == TABLE_CHUNK_ROWS:
                    yield pa.RecordBatch.from_pylist(rows)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows)
    else:
        raise DataError(f"{path}: unknown table type {path.suffix!r}: use .parquet, .jsonl or .csv")


def table(path: Path, label_column: str, image_column: str | None = None) -> Source:
    """The label column plus numeric feature columns, in file order; each row's features
    become one float32 .npy payload. A first pass reads only the label column. A parquet or
    Arrow table with an image column (binary, or the {bytes, path} struct of Hugging Face's
    Image feature) gives the stored image bytes instead (hugging_face.py)."""
    import pyarrow as pa

    if not path.is_file():
        raise DataError(f"{path} not found: pass a .parquet, .arrow, .jsonl or .csv file")
    if path.suffix in (".parquet", ".arrow"):
        schema = hugging_face.file_schema(path)
        features = hugging_face.schema_features(schema)
        if (
            image_column is not None
            or path.suffix == ".arrow"
            or hugging_face.image_column_of(schema, features, None, "")
        ):
            description = {"kind": "table", "path": str(path.resolve())}
            return hugging_face.image_rows(
                [path], features, str(path), lambda i: f"row {i + 1}", description, image_column, label_column
            )

    def parsed(columns: list[str] | None = None) -> Iterator[Any]:
        try:
            yield from table_batches(path, columns)
        except (pa.ArrowException, UnicodeDecodeError) as err:
            raise DataError(
                f"cannot parse {path} ({str(err).splitlines()[0]}): check that it is a valid {path.suffix[1:]} file"
            ) from None

    first = next(parsed(), None)
    if first is None:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    if label_column not in first.schema.names:
        raise DataError(
            f"{path} has no column {label_column!r} (columns: {', '.join(first.schema.names)}): pass --label-column"
        )
    feature_columns = [
        f.name
        for f in first.schema
        if f.name != label_column and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]
    if not feature_columns:
        raise DataError(
            f"{path} has no numeric feature column besides {label_column!r}, nor an image column (binary, or a "
            f"struct of bytes and path; columns: {', '.join(first.schema.names)}): add one, or featurize first"
        )
    names, num_rows = set(), 0
    for batch in parsed([label_column]):
        values = batch.column(label_column)
        if values.null_count:
            raise DataError(f"{path}: column {label_column!r} has empty values: fill or drop those rows")
        names.update(str(v) for v in values.to_pylist())
        num_rows += batch.num_rows
    if num_rows == 0:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    classes = sorted(names)
    class_index = {name: i for i, name in enumerate(classes)}

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for batch in parsed([label_column, *feature_columns]):
            try:
                features = np.stack(
                    [batch.column(c).cast(pa.float32()).to_numpy(zero_copy_only=False) for c in feature_columns],
                    axis=1,
                )
            except pa.ArrowException as err:
                raise DataError(f"{path}: a feature column is not numeric ({err}): drop or fix it") from None
            bad = ~np.isfinite(features)  # nulls arrive as NaN
            if bad.any():
                row, column = np.argwhere(bad)[0]
                raise DataError(
                    f"{path}: row {position + row + 1}, column {feature_columns[column]!r} is empty or not finite "
                    f"({features[row, column]}): fill or drop such rows"
                )
            for row, label in enumerate(batch.column(label_column).to_pylist()):
                if selected is None or selected[position]:
                    payload = io.BytesIO()
                    np.save(payload, features[row], allow_pickle=False)
                    yield Sample(payload.getvalue(), "npy", class_index[str(label)], f"row {position + 1}")
                position += 1

    row_bytes = 128 + 4 * len(feature_columns)  # .npy header + float32 values
    return Source(
        num_rows,
        classes,
        read,
        {"kind": "table", "path": str(path.resolve()), "label_column": label_column, "features": feature_columns},
        row_bytes * num_rows,
    )
