"""The run folder: everything about one training run in one place.

    runs/20261130-142512-3f9c/        (train.sh --run-dir DIR picks another)
      config.json      every option (the recipe's too), the project's Copier answers, its git commit (and whether the
                       tree was dirty), library versions, world size, hosts, the data manifest's sha256;
                       "resumes": when, where and on how many ranks the run was resumed
      metrics.jsonl    one line per epoch: loss, accuracy, held-out accuracy, samples/s, the
                       fraction of the epoch's wall time the ranks waited for data and the
                       learning rate of its last step ("lr"); with --log-every N also one every
                       N steps, with the "step" it was written after
      checkpoints/     epoch-EEEE-step-SSSSSS.pt: the recipe's stateful parts (model, optimizer,
                       schedule) and the position (checkpoint.py)
      tensorboard/     metrics.jsonl's lines as TensorBoard scalars, where tensorboard is installed (curves.py)

      .lock            held by the run's launcher (train.sh's, on node 0) while it runs: "process
                       PID on host HOST since TIME"; a second train.sh on the folder is refused

Rank 0 writes; every file is written to a temporary name and renamed, so a killed run leaves
whole files or none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import secrets
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from .collectives import decided_by, gather_objects
from .curves import Scalars
from .errors import PACKAGE, DataError, disk_errors_reported
from .ledger import keep_lines

PROJECT = Path(__file__).resolve().parents[3]  # src/<package>/harness/run_folder.py -> the project
LIBRARIES = ("torch", "numpy", "datasets", "webdataset", "pyarrow", "pillow")
LOCK = ".lock"
# Set by launch.py for its ranks: the node this rank runs on (NODE_RANK), whose node 0 chose and
# locked the run folder; torchrun's own numbering of the nodes need not follow NODE_RANK.
NODE_RANK_VARIABLE = f"{PACKAGE.upper()}_NODE_RANK"


def new_run_dir(root: str | Path = "runs") -> Path:
    """runs/<UTC time>-<4 hex digits>: sortable by start, unique when two runs start in one second."""
    return Path(root) / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def newest_run_dir(root: str | Path = "runs") -> Path:
    """The run folder under `root` started last (names sort by start time)."""
    runs = sorted(path for path in Path(root).glob("*") if (path / "checkpoints").is_dir())
    if not runs:
        raise DataError(f"--resume: no run folder with checkpoints in {root}/: pass --run-dir")
    return runs[-1]


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def lock(path: Path) -> int:
    """Hold `path`'s lock for this process (the launcher), creating the folder; the lock's file
    descriptor. DataError naming the run that holds it.

    An flock: the kernel releases it when the process ends, however it ends (kill -9 too), so a
    lock file left by a dead run is stale by construction and is simply taken over. The file
    names its holder, for the refusal. A file another run unlinked (unlock) while this one
    waited for it is not the lock any more: take the file now at the path instead.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(
            f"cannot create the run folder {path} ({err.strerror}): pass a --run-dir you can write"
        ) from None
    while True:
        try:
            fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise DataError(
                f"cannot write in the run folder {path} ({err.strerror}): pass a --run-dir you can write"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise DataError(
                f"{path} is in use by the run of {holder}: wait for it to end, or pass another --run-dir"
            ) from None
        try:
            same = os.stat(path / LOCK).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.pwrite(fd, f"process {os.getpid()} on host {socket.gethostname()} since {started}\n".encode(), 0)
    return fd


def unlock(path: Path, fd: int, made: bool = False) -> None:
    """Let go of the lock: the file goes first, so that a run waiting on it takes a new one (lock). A
    folder the launcher `made` that is still empty (the run ended before it began: a bad input its
    ranks met at start) is removed, so a failed start leaves no empty run folder behind."""
    (path / LOCK).unlink(missing_ok=True)
    os.close(fd)
    if made:
        with contextlib.suppress(OSError):  # not empty: the run's own files stay
            path.rmdir()


def agreed_run_dir(run_dir: Path | None, resume: bool = False) -> Path:
    """The run folder every rank uses: the choice of node 0's first rank (the folder node 0's
    launcher locked): `run_dir`, else with `resume` the newest in runs/, else a new one. Ranks
    of other nodes may have been given another default."""
    leader = os.environ.get(NODE_RANK_VARIABLE, "0") == "0" and os.environ.get("LOCAL_RANK", "0") == "0"
    leaders = gather_objects(leader)
    source = leaders.index(True) if True in leaders else 0

    def choose() -> str:  # on that rank alone: new_run_dir makes the folder
        return str(run_dir if run_dir is not None else newest_run_dir() if resume else new_run_dir())

    return Path(decided_by(source, choose))


def write_json_atomically(path: Path, value: Any) -> None:
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(json.dumps(value, indent=2, default=str) + "\n")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)  # gone after the rename; half-written after a failed write


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


def config(options: dict[str, Any], data: str | Path, manifest_sha256: str | None, world_size: int) -> dict[str, Any]:
    """What config.json records; `hosts` comes from every rank (one all_gather). `manifest_sha256`:
    the data set's (data/manifest.py), which a resume must find unchanged."""
    hosts = gather_objects(socket.gethostname())
    answers = PROJECT / ".copier-answers.yml"
    return {
        "options": options,
        "copier_answers": answers.read_text() if answers.is_file() else None,
        "git": git_state(),
        "versions": versions(),
        "world_size": world_size,
        "hosts": sorted(set(hosts)),
        "data": str(data) if "://" in str(data) else str(Path(data).resolve()),
        "manifest_sha256": manifest_sha256,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class RunFolder:
    """Rank 0's view of the run folder (other ranks only learn its path)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoints = path / "checkpoints"

    def start(self, config: dict[str, Any], resumed_at: Any = None) -> None:
        """A new run writes config.json and starts metrics.jsonl (and tensorboard/) afresh. A
        resumed one keeps them: it adds when, where and on how many ranks it resumed to
        config.json's "resumes", and drops the metrics of the epochs it runs again (a run killed
        after its last line)."""
        metrics = self.path / "metrics.jsonl"
        config_file = self.path / "config.json"
        with disk_errors_reported(self.checkpoints):
            self.checkpoints.mkdir(parents=True, exist_ok=True)
        if resumed_at is None or not config_file.is_file():
            with disk_errors_reported(config_file):
                write_json_atomically(config_file, config)
            with disk_errors_reported(metrics):
                metrics.unlink(missing_ok=True)
            self.scalars = self.tensorboard(None)
            return
        first = read_config(self.path)
        resume = {"epoch": resumed_at.epoch, "step": resumed_at.step, "started": config["started"]}
        resume.update(world_size=config["world_size"], hosts=config["hosts"], options=config["options"])
        first.setdefault("resumes", []).append(resume)
        with disk_errors_reported(config_file):
            write_json_atomically(config_file, first)
        if metrics.is_file():  # epoch lines have no "step"; --log-every lines do
            position = (resumed_at.epoch, resumed_at.step)
            with disk_errors_reported(metrics):
                keep_lines(metrics, lambda line: (line["epoch"], line.get("step", float("inf"))) <= position)
        self.scalars = self.tensorboard((resumed_at.epoch, resumed_at.step))

    def tensorboard(self, resumed_at: tuple[int, int] | None) -> Scalars:
        """The TensorBoard copy of metrics.jsonl, once start() has set that file up (curves.py)."""
        with disk_errors_reported(self.path / "tensorboard"):
            return Scalars(self.path / "tensorboard", read_metrics(self.path), resumed_at)

    def log(self, metrics: dict[str, Any]) -> None:
        with disk_errors_reported(self.path / "metrics.jsonl"), open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        with disk_errors_reported(self.path / "tensorboard"):
            self.scalars.write(metrics)

    def complete(self, epoch: int, **figures: Any) -> None:
        """Set `figures` in epoch `epoch`'s line of metrics.jsonl (its held-out accuracy, measured
        after the epoch's checkpoint); the file is rewritten under another name, then renamed."""
        metrics = self.path / "metrics.jsonl"
        with disk_errors_reported(metrics):
            lines = read_metrics(self.path)
            partial = metrics.with_name(f".{metrics.name}.partial")
            partial.write_text("".join(
                json.dumps(line | figures if line["epoch"] == epoch and "step" not in line else line) + "\n"
                for line in lines
            ))  # fmt: skip
            partial.replace(metrics)
        with disk_errors_reported(self.path / "tensorboard"):
            self.scalars.write({"epoch": epoch, **figures})


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's lines (none where there is no file)."""
    metrics = run_dir / "metrics.jsonl"
    text = metrics.read_text() if metrics.is_file() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_config(run_dir: Path, fix: str = "") -> dict[str, Any]:
    """The run folder's config.json, checked for what a resume reads from it; DataError with `fix`
    (by default, a resume's)."""
    path = run_dir / "config.json"
    fix = fix or (
        f"restore it, or remove it (rm {path}) to resume from the checkpoint alone (a new config.json is written), "
        "or pass a new --run-dir"
    )
    try:
        first = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not readable JSON ({err}): {fix}") from None
    if not isinstance(first, dict) or not isinstance(first.get("options"), dict):
        raise DataError(f"{path} is not a config.json of this project (no 'options'): {fix}")
    if not isinstance(first.get("resumes", []), list):
        raise DataError(f"{path}: its 'resumes' is not a list: {fix}")
    return first
