"""The run folder: everything about one training run in one place.

    runs/20261130-142512-3f9c/        (train.sh --run-dir DIR picks another)
      config.json      the options, the project's Copier answers, its git commit (and whether the
                       tree was dirty), library versions, world size, hosts, the data manifest's sha256
      metrics.jsonl    one line per epoch: loss, accuracy, held-out accuracy, samples/s, and the
                       fraction of the epoch's wall time the ranks waited for data
      checkpoints/     epoch-EEEE-step-SSSSSS.pt: model, optimizer and position (checkpoint.py)

Rank 0 writes; every file is written to a temporary name and renamed, so a killed run leaves
whole files or none.
"""

from __future__ import annotations

import json
import platform
import secrets
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch.distributed as dist

from .manifest import MANIFEST, sha256_file

PROJECT = Path(__file__).resolve().parents[2]  # src/<package>/run_folder.py -> the project
LIBRARIES = ("torch", "numpy", "datasets", "webdataset", "pyarrow", "pillow")


def new_run_dir(root: str | Path = "runs") -> Path:
    """runs/<UTC time>-<4 hex digits>: sortable by start, unique when two runs start in one second."""
    return Path(root) / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def agreed_run_dir(run_dir: Path | None) -> Path:
    """The run folder every rank uses: `run_dir`, or a new one that rank 0 names for all."""
    choice = [str(run_dir) if run_dir is not None else (str(new_run_dir()) if dist.get_rank() == 0 else None)]
    dist.broadcast_object_list(choice, src=0)
    return Path(choice[0])


def write_json_atomically(path: Path, value: Any) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(value, indent=2, default=str) + "\n")
    partial.replace(path)


def git_state() -> dict[str, Any]:
    """The project's commit and whether its tree differs from it; {} outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=PROJECT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {}


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def config(options: dict[str, Any], data: str | Path, world_size: int) -> dict[str, Any]:
    """What config.json records; `hosts` comes from every rank (one all_gather)."""
    hosts: list[Any] = [None] * world_size
    dist.all_gather_object(hosts, socket.gethostname())
    answers = PROJECT / ".copier-answers.yml"
    manifest = Path(str(data)) / MANIFEST
    return {
        "options": options,
        "copier_answers": answers.read_text() if answers.is_file() else None,
        "git": git_state(),
        "versions": versions(),
        "world_size": world_size,
        "hosts": sorted(set(hosts)),
        "data": str(data) if "://" in str(data) else str(Path(data).resolve()),
        "manifest_sha256": sha256_file(manifest) if manifest.is_file() else None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class RunFolder:
    """Rank 0's view of the run folder (other ranks only learn its path)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoints = path / "checkpoints"

    def start(self, config: dict[str, Any]) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        write_json_atomically(self.path / "config.json", config)

    def log_epoch(self, metrics: dict[str, Any]) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
