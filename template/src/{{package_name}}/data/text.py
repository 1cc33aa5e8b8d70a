"""Texts -> token ids, in the DataLoader workers (decode.py): the tokenizer the recipe names
(`Recipe.text_tokenizer()`; the contrastive recipe's --tokenizer).

- BYTES, the default: a text's UTF-8 bytes are its ids, uint8 1..255 (byte 0 is padding). Nothing
  to download, any script; the text towers (model.py ByteNgrams) hash their n-grams.
- `tokenizer_named("path/to/tokenizer.json")`: a Hugging Face `tokenizers` file (what a tokenizer's
  `save_pretrained` writes, and what CLIP-like checkpoints ship beside their weights), read by the
  `tokenizers` library (the project's `text` extra); nothing is downloaded. Its ids are shifted up by
  one, so that 0 stays padding: int32 1..vocab_size - 1.

A text keeps at most MAX_TOKENS ids (longer texts are cut: a cap on a batch's memory). A batch's
texts are zero-padded to its longest (decode.padded_texts). A Tokenizer is a path and nothing else,
so it pickles into spawned workers as a few bytes; each process loads the file once (`loaded`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..harness.errors import DataError

MAX_TOKENS = 4096  # ids of a text kept: longer texts are cut there
BYTES_NAME = "bytes"  # --tokenizer's name for BYTES


@dataclass(frozen=True)
class Tokenizer:
    """`path`: a tokenizer.json file, or "" for the UTF-8 bytes themselves (BYTES)."""

    path: str = ""

    @property
    def name(self) -> str:
        return self.path or BYTES_NAME

    @property
    def vocab_size(self) -> int:
        """Ids are 1 .. vocab_size - 1; 0 is padding."""
        return 256 if not self.path else loaded(self.path).get_vocab_size() + 1

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the ids `encode` returns (a model can tell from it which tokenizer made a batch)."""
        return torch.uint8 if not self.path else torch.int32

    def encode(self, text: bytes) -> torch.Tensor:
        """A stored text's ids [length <= MAX_TOKENS]; ValueError when the bytes are not UTF-8."""
        decoded = text.decode("utf-8")  # refuse bytes that are not UTF-8 text
        if not self.path:
            return torch.from_numpy(np.frombuffer(text[:MAX_TOKENS], dtype=np.uint8).copy())
        ids = np.asarray(loaded(self.path).encode(decoded).ids[:MAX_TOKENS], dtype=np.int32)
        return torch.from_numpy(ids + 1)


BYTES = Tokenizer()


def tokenizer_named(name: str) -> Tokenizer:
    """`bytes`, or a tokenizer.json file (checked here: it exists, the `tokenizers` library is
    installed, and it reads the file); a DataError in one line otherwise."""
    if name == BYTES_NAME:
        return BYTES
    path = Path(name).expanduser()
    if not path.is_file():
        raise DataError(
            f"--tokenizer {name}: no such file: pass `{BYTES_NAME}` or a tokenizer.json file (a Hugging Face "
            "tokenizer saved with save_pretrained, or tokenizers.Tokenizer.save)"
        )
    try:
        loaded(str(path.resolve()))
    except ImportError:
        raise DataError(
            f"--tokenizer {name} needs the `tokenizers` library: pip install -e '.[text]' (or pass --tokenizer "
            f"{BYTES_NAME})"
        ) from None
    except Exception as err:  # the library's own error type for a file it cannot parse
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"--tokenizer {name} is not a tokenizers file ({first}): pass a tokenizer.json") from None
    return Tokenizer(str(path.resolve()))


@functools.cache
def loaded(path: str) -> Any:
    """The tokenizers.Tokenizer of `path`, read once per process."""
    from tokenizers import Tokenizer as Loaded  # the `text` extra: only for a tokenizer file

    return Loaded.from_file(path)
