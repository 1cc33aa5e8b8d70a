"""Run a rendered project's pytest in a fork of a process that has already imported its libraries.

A mutant's run is short: most of its tests stop at the first failure within a second or two. Yet
a fresh `python -m pytest` first imports torch, datasets, pyarrow, webdataset and the rest, 5-8 s
on CI's 2 cores, and the mutants pay it 145 times. A server process imports them once (and
nothing of any project); each run is a fork of it that becomes the same pytest run a fresh
interpreter would make: its own session (process group), the project's folder as its working
directory, its src/ on sys.path and PYTHONPATH, its output in a file, pytest.main's exit code as
its own. The fork's subprocesses (train.sh, torchrun, DataLoader workers) are fresh as ever.

A run that outlives its timeout is killed with its whole process group. Only the modules of
third-party libraries are shared: the project's package, its tests and their conftest are
imported by the fork alone, so one mutant's edits never reach another's run.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What every rendered project's tests import (their package imports no more than these). A name
# missing here is not an error: the fork imports it itself, as a fresh interpreter would.
PRELOAD = (
    "numpy",
    "torch",
    "torch.distributed",
    "torch.nn",
    "torch.optim",
    "torch.utils.data",
    "pyarrow",
    "pyarrow.parquet",
    "datasets",
    "webdataset",
    "PIL.Image",
    "typer",
    "typer.testing",
    "boto3",
    "pytest",
    "anyio.pytest_plugin",  # a plugin pytest loads at every start: 0.7 s, finding anyio's backends
)

# The server imported anyio (datasets needs it; and its pytest plugin) before pytest loads that
# plugin, which asks for its own asserts to be rewritten: pytest warns that it cannot. Nothing of
# the project's is affected.
QUIET = ["-W", "ignore:Module already imported so cannot be rewritten; anyio:pytest.PytestAssertRewriteWarning"]

SCRIPT = r"""
import importlib, json, os, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
import gc
gc.freeze()  # what the libraries made lives on in every run: their collections need not walk it again
requests, replies = sys.stdin, sys.stdout
replies.write("ready\n"); replies.flush()
for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the run: what `cd PROJECT && PYTHONPATH=src python -m pytest ARGS > OUT 2>&1` would do
        try:
            os.setsid()
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.path[:0] = [request["cwd"], *request["env"].get("PYTHONPATH", "").split(os.pathsep)]
            out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            sys.argv = ["pytest", *request["args"]]
            import pytest
            code = int(pytest.main(request["args"]))
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 3
        os._exit(code)
    replies.write(json.dumps({"pid": pid}) + "\n"); replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"status": status}) + "\n"); replies.flush()
"""


class PytestServer:
    """One server per test process (a pytest-xdist worker); runs are made one at a time."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.pending = b""  # what the server wrote past the last line read

    def start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SCRIPT, json.dumps(PRELOAD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C of the test run is the test's to handle, not the server's
            )
            self.pending = b""
            self.reply(timeout=300)  # "ready"
        return self.process

    def reply(self, timeout: float) -> str | None:
        """The server's next line, or None when none came within `timeout` s. Read from the pipe
        itself, not through a buffered file: a line already in a buffer is one select() cannot see."""
        deadline = time.monotonic() + timeout
        descriptor = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                return None
            chunk = os.read(descriptor, 4096)
            if not chunk:
                self.process.kill()
                raise RuntimeError(f"the pytest server ended (exit code {self.process.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()

    def answer(self, timeout: float) -> dict:
        line = self.reply(timeout)
        if line is None:
            self.process.kill()
            raise RuntimeError(f"the pytest server gave no answer within {timeout:.0f} s")
        return json.loads(line)

    def run(self, cwd: Path, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """`python -m pytest ARGS` in cwd with env; stdout holds its output (stdout and stderr)."""
        process = self.start()
        handle, name = tempfile.mkstemp(prefix="pytest-server-", suffix=".out")
        os.close(handle)
        out = Path(name)
        request = {"cwd": str(cwd), "args": [*QUIET, *args], "env": env, "out": str(out)}
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        pid = self.answer(timeout=60)["pid"]
        line = self.reply(timeout)
        if line is None:  # hung: kill the run and everything it started, then take the server's answer
            os.killpg(pid, signal.SIGKILL)
            self.answer(timeout=60)
            output = out.read_text(errors="replace")
            out.unlink()
            raise subprocess.TimeoutExpired(["pytest", *args], timeout, output=output)
        try:  # whatever the run's subprocesses left running stops with it
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        code = os.waitstatus_to_exitcode(json.loads(line)["status"])
        output = out.read_text(errors="replace")
        out.unlink()
        return subprocess.CompletedProcess(["pytest", *args], code, stdout=output, stderr="")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


SERVER = PytestServer()  # one per test process, started by its first forked run
atexit.register(SERVER.stop)


# A default sampler's whole suite runs in one process: 245-558 s in fresh-clone .ci/run runs on
# 2 cores with two suites at once (the README's figures), up to 1252 s (arrow's, on 2026-12-03's
# machine) on a slower day: the bound on a hung one (each of its tests has its own) leaves 2.4x
# over the slowest seen.
def run_pytest(project: Path, *args: str, timeout: float = 3000) -> subprocess.CompletedProcess:
    """`cd PROJECT && PYTHONPATH=src python -m pytest -q -p no:cacheprovider ARGS` with this
    interpreter's environment (one shared venv), run as a fork of SERVER (its libraries imported
    already); stdout holds the output, stderr included."""
    env = dict(os.environ, PYTHONPATH=str(project / "src"), PYTHONUNBUFFERED="1")
    return SERVER.run(project, ["-q", "-p", "no:cacheprovider", *args], env, timeout=timeout)
