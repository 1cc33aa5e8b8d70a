"""prep's sources.jsonl: one `["<key>", "<source>"]` line per stored sample, in storage order,
named in the manifest with its sha256 (data/sample_sources.py reads it when an error names a sample)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..data.manifest import HashingWriter
from ..data.sample_sources import SOURCES


class SourceWriter:
    """Streams the (key, source) lines, hashed as they are written."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.file = HashingWriter(root / SOURCES)

    def add(self, key: str, source: str) -> None:
        # json.dumps escapes newlines and undecodable file-name bytes: one line per sample, always.
        self.file.write((json.dumps([key, source]) + "\n").encode())

    def close(self) -> None:
        self.file.close()

    def finish(self) -> dict[str, Any]:
        """The manifest's fields for the file (after the last add)."""
        self.file.close()
        return {"sources": SOURCES, "sources_sha256": self.file.digest.hexdigest()}
