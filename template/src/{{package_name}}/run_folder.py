"""The run folder: everything about one training run in one place.

    runs/20261130-142512-3f9c/        (train.sh --run-dir DIR picks another)
      config.json      the options, the project's Copier answers, its git commit (and whether the
                       tree was dirty), library versions, world size, hosts, the data manifest's sha256;
                       "resumes": when, where and on how many ranks the run was resumed
      metrics.jsonl    one line per epoch: loss, accuracy, held-out accuracy, samples/s, and the
                       fraction of the epoch's wall time the ranks waited for data; with
                       --log-every N also one every N steps, with the "step" it was written after
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

from .errors import DataError
from .ledger import keep_lines
from .manifest import MANIFEST, sha256_file

PROJECT = Path(__file__).resolve().parents[2]  # src/<package>/run_folder.py -> the project
LIBRARIES = ("torch", "numpy", "datasets", "webdataset", "pyarrow", "pillow")


def new_run_dir(root: str | Path = "runs") -> Path:
    """runs/<UTC time>-<4 hex digits>: sortable by start, unique when two runs start in one second."""
    return Path(root) / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def newest_run_dir(root: str | Path = "runs") -> Path:
    """The run folder under `root` started last (names sort by start time)."""
    runs = sorted(path for path in Path(root).glob("*") if (path / "checkpoints").is_dir())
    if not runs:
        raise DataError(f"--resume: no run folder with checkpoints in {root}/: pass --run-dir")
    return runs[-1]


def agreed_run_dir(run_dir: Path | None, resume: bool = False) -> Path:
    """The run folder every rank uses, rank 0's choice: `run_dir`, else with `resume` the newest
    in runs/, else a new one. Ranks of other nodes may have been given another default."""
    choice: list[str | None] = [None]
    if dist.get_rank() == 0:
        try:
            chosen = run_dir if run_dir is not None else newest_run_dir() if resume else new_run_dir()
            choice = [str(chosen)]
        except DataError as err:
            choice = [f"error: {err}"]
    dist.broadcast_object_list(choice, src=0)
    if choice[0].startswith("error: "):
        raise DataError(choice[0].removeprefix("error: "))
    return Path(choice[0])


def manifest_sha256(data: str | Path) -> str | None:
    """The sha256 of the data set's manifest (None when it has none); read through the URL
    (http(s) or s3) of a remote data set, so a resume on changed remote data is refused too."""
    if "://" in str(data):
        from .webdataset_backend import dataset_manifest_sha256  # the backend that reads URLs

        return dataset_manifest_sha256(data)
    manifest = Path(data) / MANIFEST
    return sha256_file(manifest) if manifest.is_file() else None


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
    return {
        "options": options,
        "copier_answers": answers.read_text() if answers.is_file() else None,
        "git": git_state(),
        "versions": versions(),
        "world_size": world_size,
        "hosts": sorted(set(hosts)),
        "data": str(data) if "://" in str(data) else str(Path(data).resolve()),
        "manifest_sha256": manifest_sha256(data),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class RunFolder:
    """Rank 0's view of the run folder (other ranks only learn its path)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoints = path / "checkpoints"

    def start(self, config: dict[str, Any], resumed_at: Any = None) -> None:
        """A new run writes config.json and starts metrics.jsonl afresh. A resumed one keeps
        both: it adds when, where and on how many ranks it resumed to config.json's "resumes",
        and drops the metrics of the epochs it runs again (a run killed after its last line)."""
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        metrics = self.path / "metrics.jsonl"
        config_file = self.path / "config.json"
        if resumed_at is None or not config_file.is_file():
            write_json_atomically(config_file, config)
            metrics.unlink(missing_ok=True)
            return
        first = json.loads(config_file.read_text())
        resume = {"epoch": resumed_at.epoch, "step": resumed_at.step, "started": config["started"]}
        resume.update(world_size=config["world_size"], hosts=config["hosts"], options=config["options"])
        first.setdefault("resumes", []).append(resume)
        write_json_atomically(config_file, first)
        if metrics.is_file():  # epoch lines have no "step"; --log-every lines do
            position = (resumed_at.epoch, resumed_at.step)
            keep_lines(metrics, lambda line: (line["epoch"], line.get("step", float("inf"))) <= position)

    def log(self, metrics: dict[str, Any]) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
