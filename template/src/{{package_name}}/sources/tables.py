"""A table -> samples (`prep table`): parquet, Arrow, jsonl or csv, one row per sample.

Without `--fields`, each row's numeric columns (all but the class) become one float32 .npy
payload, the field `features`. `--fields a,b,c` takes those columns as fields instead, the
first the payload (columns.py: strings text, numbers number, lists of numbers array); the name
`features` there, unless the table has such a column, is the numeric columns not named
otherwise, packed as without `--fields`: `--fields features,price` is numbers and a regression
target. The class is `--label-column` (default `label`, when the table has one that is not
floating point; '' for none): a table without one has no class field. A parquet or Arrow table
with an image column is read as Hugging Face's files are (hugging_face.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..harness.errors import DataError
from . import columns, hugging_face
from .source import Source

TABLE_CHUNK_ROWS = 4096  # rows a table source holds in memory at once
FEATURES = "features"  # the field of the numeric columns packed into one float32 array


def table_batches(path: Path, names: list[str] | None = None) -> Iterator[Any]:
    """The table as pyarrow record batches of at most TABLE_CHUNK_ROWS rows, read as a stream."""
    import pyarrow as pa

    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(path).iter_batches(batch_size=TABLE_CHUNK_ROWS, columns=names)
    elif path.suffix == ".csv":
        import pyarrow.csv as pcsv

        # strings_can_be_null: an empty label cell is a missing label, not a class named "".
        options = pcsv.ConvertOptions(include_columns=names, strings_can_be_null=True)
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
                    rows.append({c: row.get(c) for c in names} if names else row)
                if len(rows) == TABLE_CHUNK_ROWS:
                    yield pa.RecordBatch.from_pylist(rows)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows)
    else:
        raise DataError(f"{path}: unknown table type {path.suffix!r}: use .parquet, .jsonl or .csv")


def table(
    path: Path,
    label_column: str | None = None,
    image_column: str | None = None,
    fields: list[str] | None = None,
    mask_columns: list[str] | None = None,
    mask_classes: list[str] | None = None,
) -> Source:
    """The table's rows as samples: `fields` (default: the packed numeric `features`), the class from
    `label_column` (columns.label_column_of); a parquet or Arrow table with an image column (binary,
    or the {bytes, path} struct of Hugging Face's Image feature) gives the stored image bytes and
    its other columns (hugging_face.py)."""
    import pyarrow as pa

    if not path.is_file():
        raise DataError(f"{path} not found: pass a .parquet, .arrow, .jsonl or .csv file")
    description = {"kind": "table", "path": str(path.resolve())}
    where = str(path)
    if path.suffix in (".parquet", ".arrow"):
        schema = hugging_face.file_schema(path)
        features = hugging_face.schema_features(schema)
        if (
            image_column is not None
            or path.suffix == ".arrow"
            or any(columns.is_image_column(f, features.get(f.name)) for f in schema)
        ):
            return columns.rows(
                schema,
                lambda names: hugging_face.file_batches(path, names),
                features,
                where,
                row_name,
                description,
                path.stat().st_size,
                fields,
                image_column,
                label_column,
                mask_columns,
                mask_classes,
            )

    def parsed(names: list[str] | None = None) -> Iterator[Any]:
        try:
            yield from table_batches(path, names)
        except (pa.ArrowException, UnicodeDecodeError) as err:
            raise DataError(
                f"cannot parse {path} ({str(err).splitlines()[0]}): check that it is a valid {path.suffix[1:]} file"
            ) from None

    first = next(parsed(), None)
    if first is None:
        raise DataError(f"{path} has no rows: point prep at a non-empty table")
    label = columns.label_column_of(first.schema, {}, label_column, where)
    label_column = label if label is not None else ""  # resolved: rows below takes it as given
    fields = fields or [FEATURES]
    if FEATURES not in fields or FEATURES in first.schema.names:
        return columns.rows(
            first.schema, parsed, {}, where, row_name, description, path.stat().st_size, fields, None, label_column
        )
    packed = [
        f.name
        for f in first.schema
        if f.name != label and f.name not in fields and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]
    if not packed:
        besides = f" besides {label!r}" if label is not None else ""
        raise DataError(
            f"{path} has no numeric feature column{besides}, nor an image column (binary, or a "
            f"struct of bytes and path; columns: {', '.join(first.schema.names)}): add one, or featurize first"
        )

    def with_features(names: list[str]) -> Iterator[Any]:
        """The table's batches of `names`, FEATURES among them made of the packed columns."""
        position = 0
        wanted = [n for n in names if n != FEATURES]
        for batch in parsed([*wanted, *(c for c in packed if c not in wanted)] if FEATURES in names else names):
            if FEATURES in names:
                vectors = packed_features(batch, packed, path, position)
                flat = pa.array(vectors.reshape(-1), type=pa.float32())
                batch = pa.RecordBatch.from_arrays(
                    [*(batch.column(n) for n in wanted), pa.FixedSizeListArray.from_arrays(flat, len(packed))],
                    names=[*wanted, FEATURES],
                )
            position += batch.num_rows
            yield batch

    schema = pa.schema([*first.schema, pa.field(FEATURES, pa.list_(pa.float32(), len(packed)))])
    source = columns.rows(schema, with_features, {}, where, row_name, description, 0, fields, None, label_column)
    return replace(
        source,
        description={**source.description, "features": packed},
        payload_bytes=(128 + 4 * len(packed)) * source.num_samples,  # .npy header + float32 values a row
    )


def row_name(position: int) -> str:
    return f"row {position + 1}"


def packed_features(batch: Any, packed: list[str], path: Path, position: int) -> np.ndarray:
    """The batch's `packed` columns as float32 [rows, len(packed)]; DataError naming an empty or
    non-finite value's row and column."""
    import pyarrow as pa

    try:
        features = np.stack(
            [batch.column(c).cast(pa.float32()).to_numpy(zero_copy_only=False) for c in packed], axis=1
        ).astype(np.float32)
    except pa.ArrowException as err:
        raise DataError(f"{path}: a feature column is not numeric ({err}): drop or fix it") from None
    bad = ~np.isfinite(features)  # nulls arrive as NaN
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise DataError(
            f"{path}: row {position + row + 1}, column {packed[column]!r} is empty or not finite "
            f"({features[row, column]}): fill or drop such rows"
        )
    return features
