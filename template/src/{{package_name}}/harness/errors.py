"""The one exception type for user mistakes, and how the CLIs report it: one line, exit code 2."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import faulthandler
import functools
import multiprocessing
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing import resource_sharer
from pathlib import Path
from types import TracebackType
from typing import NoReturn

# Set by launch.py for the ranks it starts: the file their error lines go to, so that the
# launcher prints each distinct line once instead of once per rank (see launch.py).
PACKAGE = __package__.partition(".")[0]  # the project's package: commands and variable names say it
ERROR_FILE_VARIABLE = f"{PACKAGE.upper()}_ERROR_FILE"
# The exit code of a rank that stopped because another rank died, and the mark of its line
# in the error file: a consequence, which the launcher shows only when nothing names a cause.
LOST_PEER_EXIT = 3
CONSEQUENCE = "consequence: "
# The mark of a line that says how a rank ended, in words its exit code cannot give ("ENDED<rank>
# <words>"): not a cause (a restart may mend it), so the launcher restarts as for any crash and
# names the rank with these words in its restart and error lines.
ENDED = "ended: "

# A run that hangs says where: `kill -USR2 PID` of its launcher, of a rank or of a DataLoader worker
# prints the Python stack of each thread of that process to its stderr (Python's faulthandler), and
# the process goes on. The launcher and every rank ask for it (stacks_on_signal); a worker inherits
# it from its rank. The tests send it to every process of a command that outlives its bound.
STACKS_SIGNAL = signal.SIGUSR2


def stacks_on_signal() -> None:
    """STACKS_SIGNAL prints this process's threads' stacks to stderr (and its children's, forked later)."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)


class DataError(Exception):
    """Bad input data or options; the message names the problem and the fix."""


# Errors of a disk that no restart mends: full, over quota, a file size limit, read-only (which only a
# write meets), and not ours (which a read meets too).
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
DISK_ERRORS = WRITE_ERRORS | {errno.EACCES, errno.EPERM}
RESUME_FIX = "then run train.sh again with the same --run-dir to go on from its checkpoint"


@contextlib.contextmanager
def disk_errors_reported(path: str | Path, fix: str = RESUME_FIX, refused: set[int] = DISK_ERRORS) -> Iterator[None]:
    """A write to `path` that its disk refuses (`refused`: full, read-only, ...) as a DataError: one line
    naming `path`, why, and `fix`, and no restart, which would meet the same disk; other OSErrors as they are
    (WRITE_ERRORS where what runs reads files too: an unreadable input is no disk of `path`'s)."""
    try:
        yield
    except OSError as err:
        if err.errno not in refused:
            raise
        raise DataError(
            f"cannot write {path} ({err.strerror}): free space on that disk or make it writable, {fix}"
        ) from None


def report(line: str, *, consequence: bool = False) -> None:
    """Print an error line, or hand it to the launcher of this rank."""
    error_file = os.environ.get(ERROR_FILE_VARIABLE)
    if error_file:
        with open(error_file, "a") as errors:  # one short append: lines of ranks never interleave
            errors.write((CONSEQUENCE if consequence else "") + line + "\n")
    else:
        print(line, file=sys.stderr)


def report_ending(rank: int, words: str) -> None:
    """Say how this rank ends (`words` follow "rank N"), for the launcher's restart or error line."""
    error_file = os.environ.get(ERROR_FILE_VARIABLE)
    if error_file:
        with open(error_file, "a") as errors:
            errors.write(f"{ENDED}{rank} {words}\n")
    else:
        print(f"error: rank {rank} {words}", file=sys.stderr)


# torch 2.13's words when a DataLoader worker of this process died of a signal: its SIGCHLD handler
# raises the first, which the loader re-raises as "DataLoader worker (pid(s) N) exited unexpectedly".
WORKER_KILLED = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: (.+?)\. ")
SIGNAL_BY_TEXT = {signal.strsignal(number): number for number in signal.Signals}
# A worker killed while it hands over a batch closes its socket a moment before it is a zombie: the
# loader's read then fails with the socket's own error (ConnectionResetError, EOFError) before
# torch's handler or its check of the workers sees the death (found with 4 busy loops beside it: 1
# run in 40). The death shows within milliseconds; this bounds how long it is looked for.
WORKER_DEATH_WAIT_S = 2.0
KILLED_CODES = (os.CLD_KILLED, os.CLD_DUMPED)


def worker_killed(err: BaseException, wait_s: float = WORKER_DEATH_WAIT_S) -> str | None:
    """How a DataLoader worker killed by a signal ended, in words for report_ending, when `err` (or
    what it was raised from) is torch's report of it, or an error of the loader's socket to a child
    of this process that a signal killed; None for any other error."""
    for seen in raised_from(err):
        if (words := reported_death(seen) or checked_death(seen)) is not None:
            return words
    if raised_in_the_loader(err):
        try:
            killed = killed_child(wait_s)
        except RuntimeError as report:  # torch's SIGCHLD handler saw the death while this looked for it
            if (words := reported_death(report)) is None:
                raise
            return words
        if killed is not None:
            pid, status = killed
            return killed_words(pid, status, str(status))
    return None


def reported_death(err: BaseException) -> str | None:
    """torch's report of a DataLoader worker killed by a signal (a RuntimeError), in words; None for
    any other error."""
    found = WORKER_KILLED.search(str(err)) if isinstance(err, RuntimeError) else None
    if found is None:
        return None
    pid, text = found.groups()
    return killed_words(int(pid), SIGNAL_BY_TEXT.get(text), text)


# torch's other report: when the loader's wait for a batch ends before its SIGCHLD handler runs (a
# 5-s timeout, or the dead worker's socket's error), it checks its workers itself (is_alive, which
# reaps the dead one, so the handler then finds nothing) and raises this; each dead worker, with its
# exit code (minus the signal's number), is on its list `failed_workers` in the frame that raised it.
WORKER_EXITED = re.compile(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly")


def checked_death(err: BaseException) -> str | None:
    """torch's report of a DataLoader worker found dead by its own check, in words when a signal
    killed it; None for any other error."""
    if not (isinstance(err, RuntimeError) and WORKER_EXITED.search(str(err))):
        return None
    for frame, _ in traceback.walk_tb(err.__traceback__):
        for worker in frame.f_locals.get("failed_workers", ()):
            code = getattr(worker, "exitcode", None)
            if code is not None and code < 0:
                return killed_words(worker.pid, -code, str(-code))
    return None


def raised_from(err: BaseException) -> Iterator[BaseException]:
    """`err`, then the error it was raised from (or while handling), and so on."""
    seen: BaseException | None = err
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def killed_words(pid: int, number: int | None, text: str) -> str:
    """report_ending's words of worker `pid` killed by signal `number` (None: not known by its number),
    or by what `text` says of it."""
    known = signal.Signals(number) if number in signal.valid_signals() else None
    name = known.name if known is not None else f"a signal ({text})"
    words = f"ended: its DataLoader worker (pid {pid}) was killed by {name}"
    if number == signal.SIGKILL:
        oom = "most often by the kernel's out-of-memory killer (see dmesg)"
        return f"{words}, {oom}: pass fewer --num-workers or a smaller --batch-size"
    return f"{words}; the worker's last output is above"


LOADER_CODE = f"{os.sep}torch{os.sep}utils{os.sep}data{os.sep}"  # torch's DataLoader, in a frame's file name


def raised_in_the_loader(err: BaseException) -> bool:
    """Whether `err`, or an error it was raised from, is a socket's or pipe's error raised in
    torch's DataLoader (reading a batch from a worker)."""
    return any(
        isinstance(seen, OSError | EOFError)
        and any(LOADER_CODE in frame.f_code.co_filename for frame, _ in traceback.walk_tb(seen.__traceback__))
        for seen in raised_from(err)
    )


def killed_child(wait_s: float) -> tuple[int, int] | None:
    """(pid, signal number) of a child of this process that a signal killed, looked for up to `wait_s`
    without reaping it (torch's handler and the loader's shutdown still wait for it); None if none."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # no child at all
            return None
        if found is not None and found.si_code in KILLED_CODES:
            return found.si_pid, found.si_status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


PR_SET_PDEATHSIG = 1  # Linux's prctl option: the signal the calling process gets when its parent ends


def quiet_when_the_rank_dies(worker_id: int) -> None:
    """A DataLoader worker's worker_init_fn: the worker says nothing of its rank's death, and ends with it.

    A worker hands a batch's shared memory to its rank over a socket of multiprocessing's
    resource_sharer, whose thread prints a traceback (ConnectionResetError in deliver_challenge)
    when the rank dies in the middle of taking it (a rank killed by the out-of-memory killer: seen
    in a test's kill -9 of a rank on 2 busy cores). The rank's death is what the launcher names, in
    one line.

    torch's watchdog ends a worker whose parent has changed since the watchdog began, after this
    function: a worker whose rank died before that (a rank killed as it started its workers) would
    poll for ever, seen once: 70 minutes after its run. On Linux the worker asks the kernel for
    SIGKILL when its rank ends (the thread that forked it: the rank's main thread, which runs the
    training loop), then ends at once if the rank already has."""
    sys.excepthook = functools.partial(unless_the_rank_died, sys.excepthook)
    rank = multiprocessing.parent_process()  # the rank's pid, recorded by the rank before the fork
    if rank is None or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != rank.pid:  # the rank ended before the request: nothing will send it
        os._exit(0)


def unless_the_rank_died(
    excepthook: Callable[..., object], kind: type[BaseException], err: BaseException, tb: TracebackType | None
) -> None:
    """`excepthook`, for any error but a resource_sharer's connection lost while it hands over (the
    one process it hands to is the rank)."""
    handing_over = tb is not None and tb.tb_frame.f_code is resource_sharer._ResourceSharer._serve.__code__
    if not (handing_over and issubclass(kind, ConnectionError | EOFError)):
        excepthook(kind, err, tb)


PEER_GONE = ("Connection reset by peer", "Connection closed by peer")


def lost_a_peer(err: BaseException) -> bool:
    """Whether a collective failed because another rank's process is gone.

    gloo's words for it (torch 2.13): "Connection reset by peer" when the peer died with data
    still unread (a kill), "Connection closed by peer" when it exited between messages. Any
    other failure (a timeout, a mismatch between ranks) is a bug to show in full.
    """
    text = str(err)
    return isinstance(err, RuntimeError) and any(words in text for words in PEER_GONE)


@contextlib.contextmanager
def reported_as_one_line() -> Iterator[None]:
    """Turn a DataError into `error: <message>` on stderr and exit code 2, without a traceback; so
    too a path with a NUL byte, which Python refuses before any file system sees it."""
    try:
        yield
    except DataError as err:
        report(f"error: {err}")
        raise SystemExit(2) from None
    except Stopped as stopped:
        report(f"error: stopped by {stopped.signal.name} before anything was written")
        raise SystemExit(128 + stopped.signal.value) from None
    except ValueError as err:
        if "embedded null byte" not in str(err):
            raise
        report(f"error: {NUL_IN_PATH}")
        raise SystemExit(2) from None


class Stopped(BaseException):
    """SIGINT or SIGTERM, raised where the process is (an import of torch, say): see stop_with_one_line."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal = signal.Signals(signum)


def stop_with_one_line() -> None:
    """Have SIGINT and SIGTERM raise Stopped, which the CLI turns into one line (and exit code
    128 + the signal's number) instead of Python's KeyboardInterrupt traceback, or a silent end."""

    def stop(signum, frame):
        raise Stopped(signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


NUL_IN_PATH = "a path given holds a NUL byte (\\0), which no file name can hold: pass it without one"


def checked_path(value: str | os.PathLike) -> Path:
    """The parser of every path option (`typer.Option(parser=checked_path)`): a path no file system
    can hold (a NUL byte, a name longer than the file system allows) ends the command with one
    `error:` line and exit code 2 before anything runs. Left to typer, a NUL byte gives a usage box,
    and a name too long a traceback from wherever it is first opened."""
    text = os.fspath(value)
    try:
        os.stat(text)
    except ValueError:  # "embedded null byte": Python refuses it before any system call
        end_with_one_line(NUL_IN_PATH)
    except OSError as err:
        # Absent or unreadable is for the command to judge (an --out folder does not exist yet);
        # a name that cannot exist is not.
        if err.errno == errno.ENAMETOOLONG:
            end_with_one_line(f"the path {text[:40]}... is longer than the file system allows: pass a shorter one")
    return Path(text)


def checked_location(value: str) -> str:
    """The parser of an option that takes a folder or a URL: a NUL byte is refused, and a folder
    is checked as checked_path checks it (a URL's parts may be longer than a file name's)."""
    if "\0" in value:
        end_with_one_line(NUL_IN_PATH)
    if "://" not in value:
        checked_path(value)
    return value


def end_with_one_line(problem: str) -> NoReturn:
    """End a command while its options are read: one line, exit code 2 (as reported_as_one_line does)."""
    report(f"error: {problem}")
    raise SystemExit(2)
