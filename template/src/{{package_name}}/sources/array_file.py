"""An .npy file that prep fills through a memory map (the labels, the storage shuffle's table of
contents), with its disk blocks claimed when it is made: on a disk that fills, a store into a page
the file system cannot give kills the process with SIGBUS (no message, its partial folder left);
claimed first, the full disk is an OSError where the file is made, which prep reports in one line."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def array_file(path: Path, dtype: type, shape: tuple[int, ...]) -> np.memmap:
    """A new .npy file at `path`, open for writing as an array, every block of it allocated."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    try:
        with open(path, "r+b") as file:
            os.posix_fallocate(file.fileno(), 0, os.fstat(file.fileno()).st_size)
    except BaseException:
        del array  # unmapped now, not when the error's frames go: the caller removes the file and its disk's space
        raise
    return array
