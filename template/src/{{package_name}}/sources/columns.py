"""A table's columns -> samples of named fields: what `prep hf` and `prep table` read.

Each column becomes a field of the kind its type says (data/sample.py KINDS):
- an image: the `Image` feature, a struct of `bytes` and `path`, or binary; its stored bytes,
  never re-encoded. An image column is a mask (class ids a pixel, cropped and flipped with the
  image) when `--mask-column` names it, or, without `--mask-column`, when its name holds one of
  source.MASK_WORDS (`mask`, `seg`, `label`, `annotation`) and it is not `--image-column`;
- a string: text (UTF-8); an integer, a float or a boolean: a number (decimal text);
- a list or fixed-size array of numbers (`Sequence`, `List`, `Array2D`...): an array (.npy bytes,
  the source's dtype); any other list or struct: json;
- a mask's classes: `--mask-classes` names them (id i is the i-th name), else prep counts the
  ids its masks hold (sources/verify.py): "0" .. the largest (255, the ignored id, left out);
- the class column (`--label-column`): the class; a `ClassLabel`'s names are the classes, any
  other column's values, sorted (integers by value, so that ids 0..K-1 name the classes 0..K-1),
  are. By default the class is the column `label` when it is not an image or floating point (a
  float `label` is a number, a regression target), else the first `ClassLabel`; without either
  the data set has no class field (every label NO_LABEL);
  `--label-column ''` leaves the class out, and a floating-point column named is refused.
Other columns (audio, video, dates) are left out, as `description["left_out"]` records.

The first field is the payload, which decode.py's `x` is made of: an image (its extension from
the bytes' signature, else the stored path's), text (.txt) or an array (.npy). By default it is
`--image-column`, else the first image column that is not a mask, else the first text or array
column; the other fields follow in the table's column order. `--fields a,b,c` takes those columns
only, in that order, the first the payload (the class is `--label-column`'s whether named or not).

Two passes, each one record batch at a time: the class column alone (the classes and the row
count), then the fields' columns, an image's bytes taken out of its batch one at a time, so
memory stays flat in the data set's size.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..data.decode import IMAGE_EXTENSIONS
from ..data.sample import NO_LABEL, Sample
from ..harness.errors import DataError
from .source import Source, check_mask_classes, is_mask_name

PAYLOAD_KINDS = {"image": None, "text": "txt", "array": "npy"}  # what the payload can be, and its extension
UNSAFE_IN_NAMES = '/\\\0 "'  # a field name is a file or tar member suffix: none of these
SIGNATURES = [
    (b"\xff\xd8\xff", "jpg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
]
Batches = Callable[[list[str]], Iterator[Any]]  # columns -> the table's record batches of those columns


def image_extension(payload: bytes, path: str | None) -> str | None:
    """The extension for an image's bytes: from their signature, else from the path it had."""
    if payload[:4] == b"RIFF" and payload[8:12] == b"WEBP":
        return "webp"
    for signature, extension in SIGNATURES:
        if payload.startswith(signature):
            return extension
    suffix = Path(path).suffix[1:].lower() if path else ""
    return suffix if suffix in IMAGE_EXTENSIONS else None


def storage(arrow_type: Any) -> Any:
    """An extension type's storage (datasets' Array2D..5D when datasets is not imported), else the type."""
    import pyarrow as pa

    while isinstance(arrow_type, pa.BaseExtensionType):
        arrow_type = arrow_type.storage_type
    return arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type


def is_list(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def numbers_inside(arrow_type: Any) -> Any:
    """The number type at the bottom of nested lists (None when it is not numbers)."""
    import pyarrow as pa

    arrow_type = storage(arrow_type)
    while is_list(arrow_type):
        arrow_type = storage(arrow_type.value_type)
    numeric = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type)
    return arrow_type if numeric else None


def is_image_column(field: Any, feature: Any) -> bool:
    import pyarrow as pa

    if isinstance(feature, dict) and feature.get("_type") == "Image":
        return True
    if isinstance(feature, dict) and feature.get("_type") not in (None, "Value"):
        return False  # Audio, Video, Pdf are {bytes, path} structs too
    arrow_type = storage(field.type)
    if pa.types.is_struct(arrow_type):
        return arrow_type.get_field_index("bytes") >= 0
    return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)


def column_kind(field: Any, feature: Any) -> str | None:
    """The field kind a column's values are (image, text, number, array, json), None for none."""
    import pyarrow as pa

    if is_image_column(field, feature):
        return "image"
    if isinstance(feature, dict) and feature.get("_type") not in (
        None, "Value", "ClassLabel", "Sequence", "List", "LargeList", "Array2D", "Array3D", "Array4D", "Array5D",
    ):  # fmt: skip
        return None
    arrow_type = storage(field.type)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "text"
    if numbers_inside(arrow_type) is not None:
        return "array" if is_list(arrow_type) else "number"
    if pa.types.is_decimal(arrow_type):
        return "number"
    if is_list(arrow_type) or pa.types.is_struct(arrow_type):
        return "json"
    return None


def class_names(feature: Any) -> list[str] | None:
    return list(feature["names"]) if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" else None


def can_be_class(field: Any, feature: Any) -> bool:
    """A column the class can come from by default: a ClassLabel, integers, strings or booleans."""
    import pyarrow as pa

    arrow_type = storage(field.type)
    numeric = pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)
    return class_names(feature) is not None or (column_kind(field, feature) in ("text", "number") and not numeric)


def label_column_of(schema: Any, features: dict[str, Any], wanted: str | None, where: str) -> str | None:
    """The class column: `wanted` ('' none), else `label` when it can be a class, else the first ClassLabel."""
    if wanted == "":
        return None
    if wanted is not None:
        if wanted not in schema.names:
            raise DataError(
                f"{where} has no column {wanted!r} (columns: {', '.join(schema.names)}): pass --label-column "
                "(--label-column '' for data without classes)"
            )
        if column_kind(schema.field(wanted), features.get(wanted)) in (None, "image", "array", "json"):
            raise DataError(
                f"{where}: column {wanted!r} is not a class (labels, names or numbers): pass --label-column"
            )
        if not can_be_class(schema.field(wanted), features.get(wanted)):  # floats: each value a class of its own
            raise DataError(
                f"{where}: column {wanted!r} holds floating-point numbers, not classes: leave out --label-column "
                f"{wanted} to keep it a number field (a regression target; --label-column '' for no class at all), "
                "or cast it to integers or a ClassLabel first if its values are classes"
            )
        return wanted
    if "label" in schema.names and can_be_class(schema.field("label"), features.get("label")):
        return "label"
    return next((name for name in schema.names if class_names(features.get(name)) is not None), None)


def split_names(option: str | None, flag: str) -> list[str] | None:
    """A comma-separated option (`--fields a,b`) as its names; None when not given, [] when '' (none)."""
    if option is None:
        return None
    names = [name.strip() for name in option.split(",") if name.strip()]
    if (option.strip() and not names) or len(set(names)) != len(names):
        raise DataError(f"{flag} {option!r} is not a list of distinct names: pass {flag} a,b,c")
    return names


def fields_of(
    schema: Any,
    features: dict[str, Any],
    where: str,
    fields: list[str] | None,
    image_column: str | None,
    label: str | None,
    mask_columns: list[str] | None,
) -> list[tuple[str, str]]:
    """[(column, kind), ...] of the fields, the payload first, the class (kind "class") among them."""
    columns = ", ".join(schema.names)
    kinds = {name: column_kind(schema.field(name), features.get(name)) for name in schema.names}
    for name in [*(mask_columns or []), *([image_column] if image_column is not None else [])]:
        if kinds.get(name) != "image":
            flag = "--image-column" if name == image_column else "--mask-column"
            raise DataError(
                f"{where} has no image column {name!r} (the Image feature, a struct of bytes and path, or binary; "
                f"columns: {columns}): pass {flag}"
            )
    for name, kind in kinds.items():
        if kind == "image" and name != image_column:
            masked = name in mask_columns if mask_columns is not None else is_mask_name(name)
            kinds[name] = "mask" if masked else "image"
    if label is not None:
        kinds[label] = "class"
    if not fields:
        first = image_column or next((n for n, k in kinds.items() if k == "image"), None)
        first = first or next((n for n, k in kinds.items() if k in PAYLOAD_KINDS and n != label), None)
        if first is None:
            raise DataError(
                f"{where} has no column to be the payload: an image (the Image feature, a struct of bytes and path, or "
                f"binary), text or an array (columns: {columns}): pass --image-column or --fields"
            )
        fields = [first, *(n for n, k in kinds.items() if k is not None and n != first)]
    else:
        for name in fields:
            if name not in kinds:
                raise DataError(f"{where} has no column {name!r} (columns: {columns}): pass --fields")
            if kinds[name] is None:
                raise DataError(
                    f"{where}: column {name!r} ({schema.field(name).type}) is no kind of field (image, mask, text, "
                    "number, array, json): leave it out of --fields"
                )
        if image_column is not None and fields[0] != image_column:
            raise DataError(f"--image-column {image_column} is the payload, the first of --fields: name it first")
        if label is not None and label not in fields:
            fields = [fields[0], label, *fields[1:]]
    if kinds[fields[0]] not in PAYLOAD_KINDS:
        raise DataError(
            f"{where}: the payload, the first field, is column {fields[0]!r}, a {kinds[fields[0]]}: the payload is "
            "an image, text or an array: name one first in --fields"
        )
    for name in fields:
        if not name or any(c in name for c in UNSAFE_IN_NAMES):
            raise DataError(
                f"{where}: column {name!r} cannot name a field (no spaces, slashes or quotes): rename it "
                "(datasets' rename_column), or leave it out with --fields"
            )
    return [(name, kinds[name]) for name in fields]


def rows(
    schema: Any,
    batches: Batches,
    features: dict[str, Any],
    where: str,
    name: Callable[[int], str],
    description: dict[str, Any],
    payload_bytes: int,
    fields: list[str] | None = None,
    image_column: str | None = None,
    label_column: str | None = None,
    mask_columns: list[str] | None = None,
    mask_classes: list[str] | None = None,
) -> Source:
    """The samples of a table of `schema` whose record batches `batches(columns)` gives, one per row;
    `name(position)` is a sample's source, for the data set's sources.jsonl and for errors;
    `mask_classes` names the ids of the masks (None: prep counts them, sources/verify.py)."""
    label = label_column_of(schema, features, label_column, where)
    kinds = fields_of(schema, features, where, fields, image_column, label, mask_columns)
    check_mask_classes(mask_classes, kinds, where, ", ".join(schema.names), "pass --mask-column", noun="column")
    names = class_names(features.get(label)) if label is not None else None

    counted = label or next((n for n, k in kinds if k not in ("image", "mask")), kinds[0][0])
    num_rows, values, integers = 0, set(), True
    for batch in batches([counted]):  # first pass: the class column only (or one column, to count the rows)
        column = batch.column(0)
        if label is not None and column.null_count:
            raise DataError(f"{where}: column {label!r} has empty values: fill or drop those rows")
        if label is not None and names is None:
            values.update(str(v) for v in column.to_pylist())
            integers = integers and pa.types.is_integer(column.type)
        num_rows += batch.num_rows
    if num_rows == 0:
        raise DataError(f"{where} has no rows: point prep at a non-empty data set")
    # Integer classes in their numeric order, so that classes 0..K-1 keep their ids (as text, 10 came before 2).
    ordered = sorted(values, key=int) if integers else sorted(values)
    classes = [] if label is None else list(names) if names is not None else ordered
    index = {name: i for i, name in enumerate(classes)}

    def label_of(value: Any, position: int) -> int:
        if label is None:
            return NO_LABEL
        if names is None:
            return index[str(value)]
        if not 0 <= value < len(names):
            raise DataError(
                f"{where}: {name(position)} has label {value}, not one of the {len(names)} ClassLabel names "
                "(-1: no label): drop unlabelled rows first"
            )
        return int(value)

    payload, payload_kind = kinds[0]
    others = [(n, k) for n, k in kinds[1:] if k != "class"]
    read_columns = [payload, *(n for n, _ in others), *([label] if label is not None else [])]

    def read(selected: np.ndarray | None) -> Iterator[Sample]:
        position = 0
        for batch in batches(read_columns):
            columns = {n: Values(batch.column(n), k) for n, k in [kinds[0], *others]}
            labels = batch.column(label).to_pylist() if label is not None else None
            for row in range(batch.num_rows):
                if selected is None or selected[position]:
                    values = columns[payload]
                    data = field_bytes(values, row, position, payload)
                    yield Sample(
                        data,
                        PAYLOAD_KINDS[payload_kind] or image_extension(data, values.path(row)) or "",
                        label_of(labels[row], position) if labels is not None else NO_LABEL,
                        name(position),
                        tuple((n, field_bytes(columns[n], row, position, n)) for n, _ in others),
                    )
                position += 1

    def field_bytes(values: Values, row: int, position: int, column: str) -> bytes:
        try:
            data = values.bytes(row)
        except (ValueError, TypeError) as err:
            raise DataError(
                f"{where}: {name(position)}, column {column!r} holds no {values.kind} ({err}): fix or drop the row"
            ) from None
        if data is None or (not data and values.kind in ("image", "mask")):
            raise DataError(f"{where}: {name(position)}, column {column!r} is empty: fill or drop the row")
        if values.kind in ("image", "mask") and image_extension(data, values.path(row)) is None:
            raise DataError(
                f"{where}: {name(position)}, column {column!r} is not an image decode.py reads "
                f"({', '.join(sorted(IMAGE_EXTENSIONS))}): drop or convert it"
            )
        return data

    return Source(
        num_rows,
        classes,
        read,
        {
            **description,
            **({"image_column": payload} if payload_kind == "image" else {}),
            "label_column": label,
            "columns": [n for n, _ in kinds],
            "left_out": [n for n in schema.names if n not in dict(kinds)],
        },
        payload_bytes,
        schema=tuple(kinds),
        mask_classes=tuple(mask_classes or ()),
    )


class Values:
    """One column of a record batch, each row's value as a field's bytes (`bytes(row)`, None when empty)."""

    def __init__(self, column: Any, kind: str) -> None:
        import pyarrow as pa

        self.kind = kind
        self.column = column.storage if isinstance(column, pa.ExtensionArray) else column
        if kind in ("image", "mask"):  # taken out of the batch one image at a time
            is_struct = pa.types.is_struct(self.column.type)
            self.images = self.column.field("bytes") if is_struct else self.column
            has_path = is_struct and self.column.type.get_field_index("path") >= 0
            self.paths = self.column.field("path") if has_path else None
        elif kind == "array":
            self.arrays = numpy_rows(self.column)
            self.dtype = np.dtype(numbers_inside(self.column.type).to_pandas_dtype())
            self.values = self.column.to_pylist() if self.arrays is None else []
        else:
            self.values = self.column.to_pylist()
            arrow_type = storage(self.column.type)
            # a float32 as the shortest text that reads back to it ("0.1", not "0.10000000149011612")
            self.float = np.dtype(arrow_type.to_pandas_dtype()).type if pa.types.is_floating(arrow_type) else float

    def path(self, row: int) -> str | None:
        return self.paths[row].as_py() if self.kind in ("image", "mask") and self.paths is not None else None

    def bytes(self, row: int) -> bytes | None:
        if self.kind in ("image", "mask"):
            data, path = self.images[row].as_py(), self.path(row)
            if data is None and path and Path(path).is_file():  # an Image stored by path, not embedded
                data = Path(path).read_bytes()
            return data
        if self.kind == "array":
            if self.arrays is None and self.values[row] is None:
                return None
            buffer = io.BytesIO()
            array = self.arrays[row] if self.arrays is not None else as_array(self.values[row], self.dtype)
            np.save(buffer, array, allow_pickle=False)
            return buffer.getvalue()
        value = self.values[row]
        if value is None:
            return None
        if self.kind == "text":
            return value.encode("utf-8")
        if self.kind == "number":
            if not math.isfinite(float(value)):
                raise ValueError(f"{value} is not finite")
            return str(int(value) if isinstance(value, (bool, int)) else self.float(value)).encode("ascii")
        return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")  # json


def numpy_rows(column: Any) -> np.ndarray | None:
    """A column of fixed-size lists of numbers without empty values -> one array of every row (one
    reshape, the source's dtype); None for any other column, read row by row (`as_array`)."""
    import pyarrow as pa

    shape, inner, flat = [], column.type, column
    while pa.types.is_fixed_size_list(inner):
        if flat.null_count:
            return None
        shape.append(inner.list_size)
        inner, flat = inner.value_type, flat.flatten()
    if not shape or is_list(inner) or flat.null_count:
        return None
    dtype = np.dtype(numbers_inside(column.type).to_pandas_dtype())
    return flat.to_numpy(zero_copy_only=False).astype(dtype, copy=False).reshape(len(column), *shape)


def as_array(value: list, dtype: np.dtype) -> np.ndarray:
    """A row's (nested) list of numbers as an array: ValueError when ragged or holding an empty value."""
    array = np.asarray(value, dtype=object)
    if array.dtype == object and any(v is None or isinstance(v, list) for v in array.flat):
        raise ValueError("ragged, or holding an empty value")
    return array.astype(dtype)
