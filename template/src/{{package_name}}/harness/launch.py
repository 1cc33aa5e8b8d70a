"""torchrun on one node or several, with failures and restarts reported in one line each.

train.sh runs `python -m <package>.harness.launch --preflight --module <package>.train --nproc-per-node N
[--nnodes M --node-rank R --master-addr HOST --master-port P --max-restarts K --rdzv-timeout S] <training
options>`. --module names the training module, as torchrun's -m does: the launcher imports it by that
name where it needs it, not statically (nothing here imports the code above the harness). With --preflight it first runs the module's checks of
the options and the data for the ranks of all nodes (M x N), in this process: one interpreter importing
torch, not two, before any rank starts. Then it starts torchrun's own launcher (torch.distributed.run)
in this process, so rendezvous, the ranks' environment, stopping the other ranks when one fails and
restarting them are torchrun's.

The one-line restart reports and the forked ranks below rest on torchrun's private internals (its
agent's _monitor_workers, _restart_workers, ...: report_restarts, fork_ranks); torch offers no public
hook for either, and forking saves seconds of CPU a rank at every start. So pyproject.toml requires the
torch release the tests run (2.13), and before a launch torchrun_internals_missing checks each private
name it uses: under a torch that lacks or changed one, the launch warns in one line and runs torchrun
as torch documents it, which still trains and restarts, with new interpreters for ranks, torchrun's
own logs, and a bad input restarted like a crash.

What changes is what the user reads:

- A rank that meets bad data or a bad option appends its `error: ...` line to a file this
  launcher owns instead of printing it. Several ranks often meet the same problem (each
  reads the same broken sample), and torchrun would follow their lines with its own
  report and a Python traceback of the launcher. Instead, each distinct line is printed
  once and the exit code is 2, as for every other bad input of the project. A restart
  would meet the same input again, so there is none.
- A rank that dies of a signal or of a Python exception makes torchrun restart every rank of
  every node, up to --max-restarts times; each restart is one `restart: ...` line naming the
  rank, how it ended and the restarts left. When none are left, the rank is named in one
  `error:` line, with its exit code or signal; a Python exception's traceback stays above
  it, as the rank printed it. A rank whose DataLoader worker was killed (what the out-of-memory
  killer often picks) says so itself, without a traceback, and these lines name the worker, the
  signal and the fix (errors.worker_killed). The other ranks lose it in their next collective:
  they stop without a traceback, and the launcher names the rank that died, not them.
- Without --run-dir in the training options, the launcher adds `--run-dir runs/<time>-<id>`
  (with --resume, the newest run folder in runs/), chosen once here: every restart of the ranks
  then works in the same run folder and resumes from its checkpoint (on several nodes, node 0's
  folder is everyone's: train.py broadcasts it).
- One run per run folder: node 0's launcher holds the folder's lock (run_folder.lock) from
  before any rank starts until it ends, across every restart; a second train.sh on the folder
  is refused in one line naming the run that holds it.
- Nothing left behind: the launcher's scratch folder in TMPDIR (`<package>-launch-<host>-<pid>-*`:
  the ranks' error lines, torchrun's logs, and a link to the ranks' own TMPDIR beside it) is
  removed once every process the ranks started is gone, and the next start removes those of
  launchers that died (kill -9).
- On several nodes, a node that waits for the others (at the start, at every restart) says what
  it waits for and since when, every 30 s (waiting.py), instead of waiting in silence.
- A TMPDIR too long for the DataLoader workers' sockets is refused in one line before anything starts.
- Without CUDA, each rank is forked from this launcher, which has imported torch and the project
  already, instead of a new interpreter that imports them again (seconds of CPU a rank, at every
  start and restart); it is then what torchrun's own start gives: the leader of its own process
  group, the rank's environment, a new interpreter's signal handlers, unbuffered output
  (fork_ranks). With CUDA, ranks are new interpreters, as torchrun starts them: a process forked
  from one that has used CUDA cannot use it, and nothing here can promise the launcher never did.
  A forked rank keeps the launcher's torch C++ log level: on several nodes, where the launcher
  quiets it unless TORCH_CPP_LOG_LEVEL is set (start), its CPU ranks are quiet too.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .arrivals import Arrivals
from .errors import (
    CONSEQUENCE,
    ENDED,
    ERROR_FILE_VARIABLE,
    LOST_PEER_EXIT,
    PACKAGE,
    DataError,
    Stopped,
    stacks_on_signal,
    stop_with_one_line,
)
from .waiting import WaitReport

# A new interpreter's handlers of the signals that this launcher (and torchrun in it) handles itself,
# taken before either installs its own: a rank forked from it starts with these (fork_ranks).
FRESH_HANDLERS = {
    number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
}


@dataclass(frozen=True)
class Layout:
    """This node's place in the run (train.sh reads it from NPROC, NNODES, NODE_RANK, ...)."""

    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    max_restarts: int = 3
    rdzv_timeout: int = 300  # seconds every node waits for the others (RDZV_TIMEOUT)


OPTIONS = {f"--{name.replace('_', '-')}": name for name in Layout.__dataclass_fields__} | {"--module": "module"}


def usage() -> str:
    return (
        f"usage: python -m {__package__}.launch [--preflight] --module PACKAGE.train --nproc-per-node N [--nnodes M "
        "--node-rank R --master-addr HOST --master-port P --max-restarts K --rdzv-timeout S] [training options]"
    )


def parse(argv: list[str]) -> tuple[Layout, str, list[str]] | None:
    """The launcher's options (they come first), the training module they name (--module, as torchrun's
    -m) and the training options after them; None if malformed."""
    given: dict[str, str] = {}
    while len(argv) >= 2 and argv[0] in OPTIONS:
        given[OPTIONS[argv[0]]], argv = argv[1], argv[2:]
    module = given.pop("module", "")
    if not module or not all(part.isidentifier() for part in module.split(".")):
        return None
    numbers = {name: value for name, value in given.items() if name != "master_addr"}
    if "nproc_per_node" not in given or not all(value.isdigit() for value in numbers.values()):
        return None
    layout = Layout(**{name: value if name == "master_addr" else int(value) for name, value in given.items()})
    if layout.nproc_per_node < 1 or layout.nnodes < 1 or layout.node_rank >= layout.nnodes or layout.rdzv_timeout < 1:
        return None
    if not 0 < layout.master_port < 65536 or not layout.master_addr:
        return None
    return layout, module, argv


def rendezvous_arguments(layout: Layout) -> list[str]:
    """How torchrun's agents (one per node) meet.

    One node: `--standalone`. Several: torchrun's c10d rendezvous, its store hosted by node 0 at
    MASTER_ADDR:MASTER_PORT (`is_host`: node 0 must run there; torch's guess from host names
    fails for an alias or a second network card). c10d's agents meet in a new round at every
    restart, and with TORCH_DISABLE_SHARE_RDZV_TCP_STORE (main() sets it) the ranks of each round
    get a new store too. Not the static rendezvous (`--node-rank`, `--master-addr`): its agents'
    store is the ranks' store for the whole run, and the restarted ranks of the node that restarts
    first read there the addresses the other node's dead ranks left. Tried with two nodes on one
    machine and a rank killed (torch 2.13): static failed its first restart ("Connection refused")
    and hung in its second; c10d sharing its store failed every restart the same way; c10d as
    here resumed. c10d numbers the nodes itself (by host name, then process id), so global ranks
    need not follow NODE_RANK; nothing depends on them (a node's ranks share memory by GROUP_RANK).
    `join_timeout` bounds every node's wait for the others (torch's default is 600 s, unset here
    before): a node that never arrives ends the run on every node that waits, in one line.
    """
    if layout.nnodes == 1:
        # The ranks' own store on the loopback address: nothing depends on this host's name resolving.
        return ["--standalone", "--local-addr", "127.0.0.1"]
    host = layout.master_addr
    if ":" in host and not host.startswith("["):  # an IPv6 address
        host = f"[{host}]"
    # Nodes on this machine (a loopback MASTER_ADDR): their ranks too meet on the loopback address,
    # not at this host's name, which may not resolve (in a container, say).
    here = ["--local-addr", "127.0.0.1"] if host in ("127.0.0.1", "localhost", "[::1]") else []
    return [
        "--nnodes", str(layout.nnodes),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"{host}:{layout.master_port}",
        "--rdzv-id", f"{PACKAGE}-{layout.master_port}",  # the same on every node, without another variable
        "--rdzv-conf", f"is_host={str(layout.node_rank == 0).lower()},join_timeout={layout.rdzv_timeout}",
        *here,
    ]  # fmt: skip


def torchrun_arguments(layout: Layout, module: str, training_options: list[str], log_dir: Path) -> list[str]:
    return [
        *rendezvous_arguments(layout),
        "--nproc-per-node", str(layout.nproc_per_node), "--max-restarts", str(layout.max_restarts),
        "--log-dir", str(log_dir), "-m", module, *training_options,
    ]  # fmt: skip


def given_run_dir(training_options: list[str]) -> Path | None:
    """The --run-dir of the training options (the last one given, as typer reads them)."""
    found = None
    for i, option in enumerate(training_options):
        if option == "--run-dir" and i + 1 < len(training_options):
            found = Path(training_options[i + 1])
        elif option.startswith("--run-dir="):
            found = Path(option.removeprefix("--run-dir="))
    return found


def with_run_dir(training_options: list[str]) -> tuple[list[str], Path]:
    """The options with a --run-dir, and that folder: the given one, else with --resume the newest
    in runs/ (DataError when there is none), else a new runs/<time>-<id>; every restart reuses it."""
    given = given_run_dir(training_options)
    if given is not None:
        return training_options, given
    from .run_folder import new_run_dir, newest_run_dir  # imports torch: only when launching

    chosen = newest_run_dir() if "--resume" in training_options else new_run_dir()
    return [*training_options, "--run-dir", str(chosen)], chosen


def scratch_prefix() -> str:
    """The name of this host's launchers' scratch folders up to the pid."""
    return f"{PACKAGE}-launch-{socket.gethostname()}-"


# A DataLoader worker hands each batch to its rank through a Unix socket that multiprocessing
# makes in the rank's TMPDIR ($TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX: 32 characters more), and a
# socket's path holds at most 107 characters (108 bytes with its NUL, on Linux): past that, every
# worker fails with "AF_UNIX path too long" and the ranks wait for batches that never come. The
# ranks' TMPDIR is therefore a folder of its own directly in TMPDIR, named as briefly as
# tempfile names one (tmpXXXXXXXX), not a folder inside the scratch folder, whose name holds the
# package, the host and the pid.
SOCKET_PATH_MAX, BELOW_RANKS_TMPDIR = 107, 32
RANKS_TMPDIR_NAME = len("/tmpXXXXXXXX")
TMPDIR_MAX = SOCKET_PATH_MAX - BELOW_RANKS_TMPDIR - RANKS_TMPDIR_NAME  # 63


def temporary_too_long(temporary: Path) -> str | None:
    """One error line when the ranks' sockets in `temporary` would exceed a socket path's length."""
    if len(str(temporary)) <= TMPDIR_MAX:
        return None
    return (
        f"error: TMPDIR={temporary} is {len(str(temporary))} characters long: the DataLoader workers' sockets below "
        f"it would exceed the {SOCKET_PATH_MAX} characters of a socket path: set TMPDIR to a folder of at most "
        f"{TMPDIR_MAX} characters (e.g. /tmp)"
    )


def ranks_temporary(scratch: Path, temporary: Path) -> Path:
    """The ranks' TMPDIR: a new folder directly in `temporary`, linked from the scratch folder
    (scratch/tmp), which removes it with the rest (remove_scratch)."""
    folder = Path(tempfile.mkdtemp(dir=temporary))
    (scratch / "tmp").symlink_to(folder)
    return folder


def remove_scratch(scratch: Path) -> None:
    """A launcher's scratch folder and the ranks' TMPDIR it links to."""
    link = scratch / "tmp"
    if link.is_symlink():
        shutil.rmtree(os.readlink(link), ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)


def remove_dead_scratch(temporary: Path) -> None:
    """Remove the scratch folders that launchers of this host, now dead (kill -9), left in `temporary`."""
    from .run_folder import process_alive

    for stale in temporary.glob(scratch_prefix() + "*"):
        pid = stale.name[len(scratch_prefix()) :].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            remove_scratch(stale)


def processes_in_groups(groups: set[int]) -> list[int]:
    """The live processes (not zombies) of these process groups: on Linux, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) in groups and state != "Z":
            found.append(int(stat.parent.name))
    return found


# How long the launcher waits for the ranks' DataLoader workers after the ranks ended: a worker
# whose rank was killed notices within its watchdog's interval (torch's MP_STATUS_CHECK_INTERVAL,
# 5 s), then runs multiprocessing's clean-up in the ranks' temporary folder.
WORKERS_GONE_SECONDS = 30


def wait_for_groups(groups: set[int], seconds: float = WORKERS_GONE_SECONDS) -> bool:
    """Whether every process of `groups` (each rank is the leader of its own: torchrun starts it
    in a new session, and its DataLoader workers inherit the group) ended within `seconds`."""
    deadline = time.monotonic() + seconds
    while processes_in_groups(groups):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def what_ended(rank: int, exitcode: int, endings: dict[int, str]) -> str:
    """How a rank ended without reporting a DataError, in words: its own (`endings`, by rank), else
    its exit code's."""
    if rank in endings:  # a DataLoader worker of it killed, say: its exit code alone would say 1
        return f"rank {rank} {endings[rank]}"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        hint = " (often the kernel's out-of-memory killer: see dmesg)" if name == "SIGKILL" else ""
        return f"rank {rank} was killed by {name}{hint}; its last output is above"
    return f"rank {rank} failed with exit code {exitcode}; its traceback is above"


# How the other ranks of a node end once one failed: they lose it in a collective (LOST_PEER_EXIT),
# or torchrun ends them with SIGTERM (it lists them among the failures too).
CONSEQUENCES = (LOST_PEER_EXIT, -signal.SIGTERM)


def first_failure(failures: dict, nnodes: int, endings: dict[int, str]) -> str | None:
    """How the rank that failed first ended, in words, leaving out the ranks that ended because of
    it; None when every rank of this node did, on several nodes: the cause was on another node."""
    crashed = {rank: failure for rank, failure in failures.items() if failure.exitcode not in CONSEQUENCES}
    if not crashed and nnodes > 1:
        return None
    # On one node with only consequences (a rank stopped by hand with SIGTERM): one that a signal
    # ended before those that lost it. Timestamps are in seconds: ties are common.
    rank, failure = min(
        (crashed or failures).items(), key=lambda item: (item[1].exitcode == LOST_PEER_EXIT, item[1].timestamp)
    )
    return what_ended(rank, failure.exitcode, endings)


def reported_causes(error_file: Path) -> list[str]:
    """The distinct error lines the ranks reported as causes (a bad input), in order."""
    reported = list(dict.fromkeys(error_file.read_text().splitlines()))
    return [line for line in reported if not line.startswith((CONSEQUENCE, ENDED))]


def reported_endings(error_file: Path) -> dict[int, str]:
    """How ranks said they ended (errors.report_ending), by rank: the first line of each."""
    endings: dict[int, str] = {}
    for line in error_file.read_text().splitlines():
        if line.startswith(ENDED):
            rank, _, words = line.removeprefix(ENDED).partition(" ")
            endings.setdefault(int(rank), words)
    return endings


OTHER_NODE = "a rank on another node ended first (that node's output names it)"


def restart_line(failures: dict | None, restarts_left: int, nnodes: int, endings: dict[int, str]) -> str:
    left = f"{restarts_left} restart{'' if restarts_left == 1 else 's'} left"
    if not failures:  # this node's ranks were well: another node's agent asked for the new round
        return f"restart: {OTHER_NODE}; restarting the ranks of this node with it ({left} here)"
    return f"restart: {first_failure(failures, nnodes, endings) or OTHER_NODE}; restarting all ranks, {left}"


# torch's private names that report_restarts and fork_ranks build on, as torch 2.13 has them (the
# release pyproject.toml requires and the tests run). Another torch may rename or change any of them
# without notice; torchrun_internals_missing finds that before the launch relies on them.
HANDLER_PARAMETERS = ("entrypoint", "args", "env", "stdout", "stderr", "local_rank_id", "numa_options")
# What torch 2.13 calls on a rank's process: ForkedRank answers poll and wait (send_signal: on Windows only).
PROC_CALLS = {"poll", "wait", "send_signal"}


def code_names(function: Callable) -> set[str]:
    """The globals and attributes a function's code names, its comprehensions' included."""
    found, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        found.update(code.co_names)
        codes += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return found


def parameters(function: Callable) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def torchrun_internals_missing() -> list[str]:
    """The private parts of torchrun that report_restarts and fork_ranks use and this torch lacks, or
    has with another signature or use: [] for torch 2.13."""
    try:
        from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
        from torch.distributed.elastic.multiprocessing import api
        from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler
        from torch.distributed.launcher import api as launcher_api
    except ImportError as err:
        return [f"module {err.name}"]

    def proc_calls() -> set[str]:
        popen = {name for name in dir(subprocess.Popen) if not name.startswith("_")}
        functions = [f for cls in (api.SubprocessContext, SubprocessHandler) for f in vars(cls).values()]
        return {name for f in functions if inspect.isfunction(f) for name in code_names(f) & popen}

    agent = LocalElasticAgent
    expected: dict[str, Callable[[], bool]] = {
        "launcher.api.LocalElasticAgent": lambda: "LocalElasticAgent" in code_names(launcher_api.launch_agent),
        "LocalElasticAgent._start_workers": lambda: parameters(agent._start_workers) == ("self", "worker_group"),
        "LocalElasticAgent._monitor_workers": lambda: parameters(agent._monitor_workers) == ("self", "worker_group"),
        "LocalElasticAgent._restart_workers": lambda: parameters(agent._restart_workers) == ("self", "worker_group"),
        "LocalElasticAgent._shutdown": lambda: parameters(agent._shutdown)[:3] == ("self", "death_sig", "timeout"),
        # the agent's loop reads the restarts left, and restarts through _restart_workers
        "LocalElasticAgent._remaining_restarts": lambda: (
            {"_remaining_restarts", "_restart_workers", "_monitor_workers"} <= code_names(agent._invoke_run)
        ),
        "multiprocessing.api.get_subprocess_handler": lambda: (
            parameters(api.get_subprocess_handler) == HANDLER_PARAMETERS
            and "get_subprocess_handler" in code_names(api.SubprocessContext._start)
        ),
        "SubprocessHandler.__init__": lambda: (
            parameters(SubprocessHandler.__init__)[1:] == HANDLER_PARAMETERS
            and {"_stdout", "_stderr", "_popen", "proc"} <= code_names(SubprocessHandler.__init__)
        ),
        "SubprocessHandler._popen": lambda: parameters(SubprocessHandler._popen) == ("self", "args", "env"),
        "SubprocessHandler.proc": lambda: proc_calls() <= PROC_CALLS,
    }
    missing = []
    for name, holds in expected.items():
        try:
            found = holds()
        except (AttributeError, TypeError, ValueError):  # gone, or no longer a function
            found = False
        if not found:
            missing.append(name)
    return missing


def torchrun_as_documented(missing: list[str]) -> str:
    """The warning that the launch goes on with torchrun alone, without what `missing` would give."""
    import torch

    return (
        f"warning: torch {torch.__version__} lacks or changed torchrun internals this launcher was written "
        f"for (torch 2.13): {', '.join(missing)}; running torchrun as torch documents it, without the "
        "one-line restart reports (torchrun logs its own) and without forked ranks (each rank imports torch anew)"
    )


RANK_GROUPS: set[int] = set()  # the process groups of every rank this launcher started
RANKS_RUNNING = threading.Event()  # this node's ranks run: from their start to the next restart (waiting.py)


def report_restarts(error_file: Path, nnodes: int) -> None:
    """Have torchrun's agent print one line for each restart, and not restart after a bad input.

    The agent's hooks are private: `_monitor_workers` returns the state of this node's ranks
    (their failures, by global rank), `_restart_workers` is called for each restart, after the
    count of restarts left went down (or not: a restart that another node asked for is free).
    launch calls this only when torchrun_internals_missing finds them all.
    """
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.launcher import api

    class ReportingAgent(LocalElasticAgent):
        failures: dict | None = None  # of this node's ranks, since the last restart

        def _start_workers(self, worker_group):
            pids = super()._start_workers(worker_group)
            RANK_GROUPS.update(pids.values())  # each rank leads its process group
            RANKS_RUNNING.set()
            return pids

        def _monitor_workers(self, worker_group):
            result = super()._monitor_workers(worker_group)
            if result.is_failed():
                self.failures = result.failures
                if reported_causes(error_file):  # bad data or options: every restart would meet them again
                    self._remaining_restarts = 0
            return result

        def _shutdown(self, death_sig: signal.Signals = signal.SIGTERM, timeout: int = 30) -> None:
            # torchrun passes a Ctrl-C on to the ranks as SIGINT, which a rank still starting Python
            # (or in any step) turns into a KeyboardInterrupt traceback; SIGTERM ends it quietly.
            super()._shutdown(signal.SIGTERM if death_sig == signal.SIGINT else death_sig, timeout)

        def _restart_workers(self, worker_group) -> None:
            line = restart_line(self.failures, self._remaining_restarts, nnodes, reported_endings(error_file))
            print(line, file=sys.stderr, flush=True)
            RANKS_RUNNING.clear()  # a new rendezvous round comes first
            self.failures = None
            error_file.write_text("")  # the next round's lines only
            super()._restart_workers(worker_group)

    api.LocalElasticAgent = ReportingAgent  # launch_agent() makes its agent from this name


class ForkedRank:
    """A rank forked from this launcher, held as subprocess.Popen holds a process it started: what
    torchrun's SubprocessHandler uses of one (pid, poll, wait)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)  # -N: killed by signal N, as Popen says
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rank process {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


PR_SET_NAME = 15  # Linux's prctl option that names the calling process (/proc/PID/comm, ps, top)


def as_new_interpreter(env: dict[str, str], launchers_own: tuple[int, ...]) -> None:
    """In a process just forked from this launcher: what a rank that torchrun starts as `python -u
    -m MODULE` has and the fork would not. `env`: the rank's whole environment (this
    launcher's and RANK, WORLD_SIZE, ...); `launchers_own`: file descriptors that stay the
    launcher's alone (the run folder's lock: a rank that held it too would keep a killed launcher's
    run locked until the rank and its DataLoader workers are gone)."""
    import ctypes
    import io

    import numpy as np
    import torch

    for descriptor in launchers_own:
        os.close(descriptor)
    os.setsid()  # the leader of its own process group: torchrun stops a rank with its workers by group
    for number, handler in FRESH_HANDLERS.items():
        signal.signal(number, handler)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # found again from TMPDIR, the ranks' own (tempfile kept the launcher's)
    np.random.seed()  # a new interpreter's own entropy, not a copy of the launcher's state
    torch.manual_seed(torch.initial_seed())  # torch's state at its import
    threads = os.environ.get("OMP_NUM_THREADS", "")  # read by torch at its import, in the launcher
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    for name in ("stdout", "stderr"):  # python -u
        stream = getattr(sys, name)
        raw = io.FileIO(stream.fileno(), "w", closefd=False)
        setattr(sys, name, io.TextIOWrapper(raw, encoding=stream.encoding, errors=stream.errors, write_through=True))
    if sys.platform.startswith("linux"):  # `ps -o pid,comm` and top tell the ranks apart
        ctypes.CDLL(None).prctl(PR_SET_NAME, f"rank {env.get('RANK', '?')}".encode(), 0, 0, 0)


def command_line(module: str) -> Callable[..., object]:
    """The training module's command line (a typer app): `app`, which its `python -m` run calls."""
    return importlib.import_module(module).app


def become_rank(module: str, arguments: list[str]) -> None:
    """In a process forked from this launcher and made a new interpreter (as_new_interpreter): run
    the rank torchrun would start as `python -u -m MODULE ARGUMENTS`; ends the process."""
    from .rank_exit import run_then_exit

    app = command_line(module)
    sys.argv = [module, *arguments]
    run_then_exit(lambda: app(args=arguments, prog_name=f"python -m {module}"))


class HeldSignals:
    """Until `release`, a signal that this launcher handles in Python (FRESH_HANDLERS': torchrun's
    and Ctrl-C's) is noted, not handled; `release` puts the handlers back and raises each signal
    that came, in turn."""

    def __init__(self) -> None:
        self.came: list[int] = []
        self.handlers = {number: h for number in FRESH_HANDLERS if callable(h := signal.getsignal(number))}
        for number in self.handlers:
            signal.signal(number, lambda number, frame: self.came.append(number))

    def release(self, restore: bool = True) -> None:
        """restore=False: a new interpreter's handlers already took the noted ones' place."""
        if restore:
            for number, handler in self.handlers.items():
                signal.signal(number, handler)
        for number in self.came:
            signal.raise_signal(number)  # handled before it returns (its handler may raise)


def fork_as_rank(env: dict[str, str], launchers_own: tuple[int, ...], run: Callable[[], object]) -> ForkedRank:
    """Fork a process that becomes a new interpreter with the environment `env` (as_new_interpreter)
    and calls `run`, then ends. Returns once it leads its own process group, as subprocess.Popen
    returns once its child has started: torchrun stops a rank by its group, and a rank stopped
    sooner (Ctrl-C while the ranks start) would have no group yet to signal.

    Signals are held while os.fork runs its callbacks (logging's lock, ...): torchrun's handlers
    raise, and an exception raised in one of those callbacks is printed and dropped, so a Ctrl-C at
    that moment would be lost (the ranks train on) with logging's lock left held (the launcher hangs).

    What the launcher made (torch, its compiler, the training module: a few hundred thousand objects)
    is frozen before the fork (gc.freeze, as Python's documentation advises before a fork without
    exec): the rank's garbage collections never walk it, which would write to every object's header
    and so copy each page of it into the rank. It stays frozen in the launcher too, which keeps what
    it imported for the whole run anyway (and must not unfreeze what its caller froze)."""
    sys.stdout.flush()  # what this process has buffered is its own, not the rank's to print again
    sys.stderr.flush()
    grouped_read, grouped = os.pipe()
    held = HeldSignals()
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(grouped_read)
            as_new_interpreter(env, launchers_own)
            held.release(restore=False)  # what came to the launcher's group as the rank began: its own now
            os.close(grouped)  # the launcher may now stop this rank by its group
            run()
        finally:
            os._exit(1)  # only if `run` failed to end the process itself
    try:
        os.close(grouped)
        held.release()  # a Ctrl-C that came while forking raises here
        os.read(grouped_read, 1)  # end of file: the rank closed its end (or ended)
    except BaseException:  # a signal's exception (torchrun's on Ctrl-C) before the agent holds the rank
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(grouped_read)
    return ForkedRank(pid)


def fork_ranks(module: str, launchers_own: tuple[int, ...]) -> None:
    """Have torchrun's agent fork every rank (`python -u -m MODULE ...`) from this process
    (become_rank) rather than start a new interpreter for it. The agent starts, watches, stops and
    restarts them as it does the processes it starts itself: through a SubprocessHandler whose
    `proc` it polls, waits for and signals by process group. launch calls this only when
    torchrun_internals_missing finds what it uses."""
    # Imported once here, not in every rank: the training module, and torch._dynamo, which torch.optim
    # imports when a rank makes its optimizer (Optimizer.__init__), as long to import as torch itself.
    # Its import makes torch's compile cache folder (unless TORCHINDUCTOR_CACHE_DIR names one) in
    # tempfile's folder and names it in TORCHINDUCTOR_CACHE_DIR, which the ranks inherit: in the
    # ranks' TMPDIR (os.environ's by now), removed after them, as when each rank imports it itself.
    launchers_tempdir, tempfile.tempdir = tempfile.tempdir, None
    try:
        import torch._dynamo  # noqa: F401
    finally:
        tempfile.tempdir = launchers_tempdir
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler

    importlib.import_module(module)

    rank_command = ("-u", "-m", module)  # torchrun_arguments' -m, as torchrun runs it

    class ForkingHandler(SubprocessHandler):
        def _popen(self, args: tuple, env: dict[str, str]):
            if tuple(args[1:4]) != rank_command or self._stdout or self._stderr:  # not a rank, or redirected
                return super()._popen(args, env)
            return fork_as_rank(env, launchers_own, lambda: become_rank(module, list(args[4:])))

    def handler(entrypoint, args, env, stdout, stderr, local_rank_id, numa_options=None) -> SubprocessHandler:
        return ForkingHandler(entrypoint, args, env, stdout, stderr, local_rank_id, numa_options)

    api.get_subprocess_handler = handler  # SubprocessContext makes each rank's handler from this name


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def cuda_available() -> bool:
    """Whether torch sees a GPU here, asked without initialising CUDA in this process (through NVML),
    which would leave a process forked from it unable to use CUDA."""
    import torch

    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        return torch.cuda.is_available()
    finally:
        if before is None:
            del os.environ[NVML_CHECK]
        else:
            os.environ[NVML_CHECK] = before


def rendezvous_failure(err: Exception, layout: Layout, came: list[int], started: bool) -> str:
    """One line for a rendezvous of several nodes that did not happen, naming what to check;
    `came`: the NODE_RANKs seen there (arrivals.py), `started`: whether this node's ranks ever ran."""
    from torch.distributed.elastic.rendezvous import (
        RendezvousClosedError,
        RendezvousConnectionError,
        RendezvousTimeoutError,
    )

    where = f"{layout.master_addr}:{layout.master_port}"
    missing = [node for node in range(layout.nnodes) if node not in came]
    # Every waiting node's RDZV_TIMEOUT runs from its own join, and the first to end closes the
    # rendezvous: the others find it closed (or, away from node 0, its store gone), not a timeout
    # of their own. Before any rank ran, with nodes missing, that is the same timeout. (Node 0's
    # connection error is a port it cannot host on, below.)
    left = isinstance(err, RendezvousClosedError) or (
        isinstance(err, RendezvousConnectionError) and layout.node_rank != 0
    )
    another_gave_up = left and not started and came and missing
    if isinstance(err, RendezvousTimeoutError) or another_gave_up:
        seen = (
            f"{len(came)} came (NODE_RANK {', '.join(map(str, came))}), "
            f"{len(missing)} missing (NODE_RANK {', '.join(map(str, missing))})"
            if came
            else "which came is unknown: node 0's store was never reached"
        )
        return (
            f"error: not all NNODES={layout.nnodes} nodes joined the rendezvous at {where} within RDZV_TIMEOUT="
            f"{layout.rdzv_timeout} s (node {layout.node_rank} here; {seen}): start ./train.sh on every node "
            "with the same NNODES, MASTER_ADDR and MASTER_PORT, each with its own NODE_RANK 0..NNODES-1"
        )
    if isinstance(err, RendezvousClosedError):
        return "error: the run ended on another node (its output says why); this node's ranks stopped too"
    if isinstance(err, RendezvousConnectionError) and layout.node_rank == 0:
        return (
            f"error: node 0 cannot host the rendezvous at {where}: MASTER_ADDR must be this machine and MASTER_PORT "
            "free here (another node started with NODE_RANK=0 holds it, or another program: pick another)"
        )
    if isinstance(err, RendezvousConnectionError):
        return (
            f"error: cannot reach the rendezvous at {where}: run node 0 (NODE_RANK=0) there, and let "
            "MASTER_PORT through between the nodes"
        )
    return f"error: the rendezvous at {where} failed: {err}"


def main(argv: list[str]) -> int:
    # Ctrl-C or SIGTERM before torchrun takes over the signals (while torch is imported, say):
    # one line, and the scratch folder and the lock let go, as after one that comes later.
    stop_with_one_line()
    stacks_on_signal()  # a launcher that hangs says where, asked (errors.STACKS_SIGNAL); its forked ranks inherit it
    try:
        return start(argv)
    except Stopped as stopped:
        print(f"error: train.sh was stopped by {stopped.signal.name} before its ranks started", file=sys.stderr)
        return 128 + stopped.signal.value


def start(argv: list[str]) -> int:
    checks = argv[:1] == ["--preflight"]
    parsed = parse(argv[checks:])
    if parsed is None:
        print(usage(), file=sys.stderr)
        return 2
    layout, module, training_options = parsed
    too_long = temporary_too_long(Path(tempfile.gettempdir()))
    if too_long:
        print(too_long, file=sys.stderr)
        return 2
    # torch's C++ log in this process, on several nodes, unless the user set its level: a store
    # client that cannot reach node 0 logs each retry with a stack trace before the one line below
    # says so. Read once, as torch loads (the preflight imports it); ranks started anew get the
    # user's setting back, ranks forked from here keep this one.
    cpp_log_level = os.environ.get("TORCH_CPP_LOG_LEVEL")
    if layout.nnodes > 1 and cpp_log_level is None:
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    if checks:
        failed = preflight(module, layout.nnodes * layout.nproc_per_node, training_options)
        if failed:
            return failed
    from .run_folder import lock, unlock  # imports torch: after the usage line

    try:
        training_options, run_dir = with_run_dir(training_options)
        # The run folder is node 0's: its launcher holds it for the whole run (several nodes on one
        # machine share the path, and the other nodes' ranks use node 0's choice).
        made = not run_dir.exists()  # a folder this start makes, and removes again if no run wrote in it
        held = lock(run_dir) if layout.node_rank == 0 else None
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        return launch(layout, module, training_options, cpp_log_level, () if held is None else (held,))
    finally:
        if held is not None:
            unlock(run_dir, held, made)


def preflight(module: str, world_size: int, training_options: list[str]) -> int:
    """The training module's checks of the training options and the data for `world_size` ranks (its
    hidden --preflight), before the run folder is locked or a rank starts: 0 when they pass, else the
    exit code, its one `error:` line printed (or typer's usage error, as train.sh's own).

    A Ctrl-C while the module imports torch waits for the import to end (HeldSignals): raised in the
    middle of it, where torch's C++ calls back into Python, its exception can be lost (the run
    trains on) or end the launcher with SIGABRT and a trace of the import."""
    held = HeldSignals()
    try:
        app = command_line(module)
    finally:
        held.release()  # main says which signal stopped train.sh
    try:
        app(["--preflight", str(world_size), *training_options], prog_name="./train.sh")
    except SystemExit as end:  # typer ends every command this way, passing or not
        return end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
    return 0


def launch(
    layout: Layout, module: str, training_options: list[str], cpp_log_level: str | None, locks: tuple[int, ...]
) -> int:
    """torchrun running `module` with this node's layout; the exit code (main holds the run folder
    meanwhile: `locks`)."""
    # Imported here: torch takes seconds to import, and the usage line needs none of it.
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousError
    from torch.distributed.run import parse_args, run

    from .run_folder import NODE_RANK_VARIABLE

    os.environ[NODE_RANK_VARIABLE] = str(layout.node_rank)  # the ranks inherit it
    if cpp_log_level is None:
        os.environ.pop("TORCH_CPP_LOG_LEVEL", None)
    else:
        os.environ["TORCH_CPP_LOG_LEVEL"] = cpp_log_level

    missing = torchrun_internals_missing()
    if missing:  # another torch: torchrun alone, which reports restarts itself
        print(torchrun_as_documented(missing), file=sys.stderr, flush=True)
    else:
        # torchrun logs each failed rank, the SIGTERM it sends the others and every step of a restart
        # (with tracebacks of what it retries); this launcher reports all of that itself, in one line.
        # Its records end here instead of reaching torch's handler; the ranks are other processes.
        for name in ("torch.distributed.elastic", "torch.distributed.launcher", "torch.distributed.run"):
            logging.getLogger(name).addHandler(logging.NullHandler())
            logging.getLogger(name).propagate = False
    # A new store for the ranks of every restart, hosted by their rank 0: in the store torchrun's
    # agent would share across restarts (its default), the ranks of the node that restarts first
    # find the addresses of the other node's dead ranks and fail to connect (rendezvous_arguments).
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    # The ranks' error lines, and torchrun's per-run log folder, which it would otherwise
    # create in /tmp and leave there after every run. Named by host and pid, so that the next
    # start can tell one whose launcher died.
    temporary = Path(tempfile.gettempdir())
    remove_dead_scratch(temporary)
    scratch = Path(tempfile.mkdtemp(prefix=f"{scratch_prefix()}{os.getpid()}-", dir=temporary))
    error_file = scratch / "errors.txt"
    error_file.touch()
    os.environ[ERROR_FILE_VARIABLE] = str(error_file)  # the ranks inherit it
    # The ranks' temporary folder, removed with the rest. When one rank fails, torchrun ends the
    # others with SIGTERM to their whole process group, DataLoader workers included, and a worker
    # killed that way leaves behind what multiprocessing made for it there (pymp-*: the socket
    # that passes tensors to its rank). Its path is short: SOCKET_PATH_MAX.
    os.environ["TMPDIR"] = str(ranks_temporary(scratch, temporary))
    # torchrun's own default for several ranks per node, set here so that it does not warn about
    # it on every launch; export OMP_NUM_THREADS to give each rank more threads.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if not missing:
        report_restarts(error_file, layout.nnodes)
        if not cuda_available():
            fork_ranks(module, locks)
    # Several nodes: each says it is there, by NODE_RANK, in the rendezvous's store (arrivals.py), and
    # what it waits for while it waits (waiting.py).
    arrivals = Arrivals(layout.master_addr, layout.master_port, layout.nnodes, layout.node_rank)
    report = WaitReport(arrivals, layout.rdzv_timeout, running=RANKS_RUNNING.is_set)
    several = layout.nnodes > 1
    try:
        with arrivals if several else contextlib.nullcontext(), report if several else contextlib.nullcontext():
            run(parse_args(torchrun_arguments(layout, module, training_options, log_dir=scratch / "torchrun")))
        return 0
    except ChildFailedError as failed:
        causes = reported_causes(error_file)
        if causes:  # the ranks' own lines name the problem and the fix
            print("\n".join(causes), file=sys.stderr)
            return 2
        # No rank named a cause: name the rank that died, not those that then lost it.
        failure = first_failure(failed.failures, layout.nnodes, reported_endings(error_file)) or OTHER_NODE
        print(f"error: {failure}", file=sys.stderr)
        return 1
    except RendezvousError as err:
        print(rendezvous_failure(err, layout, arrivals.came(), started=bool(RANK_GROUPS)), file=sys.stderr)
        return 1
    except SignalException as stopped:
        print(f"error: train.sh was stopped by {stopped.sigval.name}; its ranks were stopped too", file=sys.stderr)
        return 128 + stopped.sigval.value
    finally:
        # Only once every process of the ranks' groups is gone: a killed rank's DataLoader workers
        # outlive it for a few seconds and then clean up their own files in the ranks' TMPDIR
        # (multiprocessing's pymp-*), which fails with a traceback if the folder is gone. Workers
        # that outlive the wait leave the folder to the next start (remove_dead_scratch).
        if wait_for_groups(RANK_GROUPS):
            remove_scratch(scratch)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
