"""The one exception type for user mistakes, and how the CLIs report it: one line, exit code 2."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class DataError(Exception):
    """Bad input data or options; the message names the problem and the fix."""


@contextlib.contextmanager
def reported_as_one_line() -> Iterator[None]:
    """Turn a DataError into `error: <message>` on stderr and exit code 2, without a traceback."""
    try:
        yield
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
