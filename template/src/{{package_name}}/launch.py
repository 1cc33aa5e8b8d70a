"""torchrun, with a failed run reported in one line.

train.sh runs `python -m <package>.launch --nproc-per-node N <training options>`. This
starts torchrun's own launcher (torch.distributed.run) in this process, so rendezvous,
the ranks' environment and stopping the other ranks when one fails are torchrun's. What
changes is what the user reads when a run fails:

- A rank that meets bad data or a bad option appends its `error: ...` line to a file this
  launcher owns instead of printing it. Several ranks often meet the same problem (each
  reads the same broken sample), and torchrun would follow their lines with its own
  report and a Python traceback of the launcher. Instead, each distinct line is printed
  once and the exit code is 2, as for every other bad input of the project.
- A rank that dies of a signal or of a Python exception is named in one `error:` line,
  with its exit code or signal; a Python exception's traceback stays above it, as the
  rank printed it. The other ranks then lose it in their next collective: they stop
  without a traceback, and the launcher names the rank that died, not them.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from .errors import CONSEQUENCE, ERROR_FILE_VARIABLE, LOST_PEER_EXIT


def usage() -> str:
    return f"usage: python -m {__package__}.launch --nproc-per-node N [training options]"


def torchrun_arguments(nproc: int, training_options: list[str], log_dir: Path) -> list[str]:
    return [
        "--standalone", "--nproc-per-node", str(nproc), "--log-dir", str(log_dir),
        "-m", f"{__package__}.train", *training_options,
    ]  # fmt: skip


def describe_failure(rank: int, exitcode: int) -> str:
    """One line for a rank that ended without reporting a DataError."""
    if exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        hint = " (often the kernel's out-of-memory killer: see dmesg)" if name == "SIGKILL" else ""
        return f"error: rank {rank} was killed by {name}{hint}; its last output is above"
    return f"error: rank {rank} failed with exit code {exitcode}; its traceback is above"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--nproc-per-node" or not argv[1].isdigit() or int(argv[1]) < 1:
        print(usage(), file=sys.stderr)
        return 2
    # Imported here: torch takes seconds to import, and the usage line needs none of it.
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    # torchrun logs the failed rank and the SIGTERM it sends the others; this launcher
    # reports the failure itself, in one line.
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").setLevel(logging.CRITICAL)
    # The ranks' error lines, and torchrun's per-run log folder, which it would otherwise
    # create in /tmp and leave there after every run.
    scratch = Path(tempfile.mkdtemp(prefix=f"{__package__}-launch-"))
    error_file = scratch / "errors.txt"
    error_file.touch()
    os.environ[ERROR_FILE_VARIABLE] = str(error_file)  # the ranks inherit it
    # The ranks' temporary folder, removed with the rest. When one rank fails, torchrun ends the
    # others with SIGTERM to their whole process group, DataLoader workers included, and a worker
    # killed that way leaves behind what multiprocessing made for it there (pymp-*: the socket
    # that passes tensors to its rank).
    rank_tmp = scratch / "tmp"
    rank_tmp.mkdir()
    os.environ["TMPDIR"] = str(rank_tmp)
    # torchrun's own default for several ranks per node, set here so that it does not warn about
    # it on every launch; export OMP_NUM_THREADS to give each rank more threads.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        run(parse_args(torchrun_arguments(int(argv[1]), argv[2:], log_dir=scratch / "torchrun")))
        return 0
    except ChildFailedError as failed:
        reported = list(dict.fromkeys(error_file.read_text().splitlines()))
        causes = [line for line in reported if not line.startswith(CONSEQUENCE)]
        if causes:  # the ranks' own lines name the problem and the fix
            print("\n".join(causes), file=sys.stderr)
            return 2
        # No rank named a cause: name the rank that died, not those that then lost it.
        crashed = {rank: f for rank, f in failed.failures.items() if f.exitcode != LOST_PEER_EXIT}
        rank, failure = min(crashed.items() or failed.failures.items(), key=lambda item: item[1].timestamp)
        print(describe_failure(rank, failure.exitcode), file=sys.stderr)
        return 1
    except SignalException as stopped:
        print(f"error: train.sh was stopped by {stopped.sigval.name}; its ranks were stopped too", file=sys.stderr)
        return 128 + stopped.sigval.value
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
