"""Ranks end when their launcher dies.

torchrun stops its ranks when it is stopped with SIGTERM or Ctrl-C, but a launcher killed
with SIGKILL (an OOM kill, `kill -9`, a preempted job step) cannot: its ranks would train
on as orphans, holding GPUs and memory. Each rank asks the kernel for a SIGTERM when its
parent exits (Linux's PR_SET_PDEATHSIG); elsewhere this does nothing. prep's checking
processes (sources/verify.py) ask the same of prep.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def end_with_launcher(parent: int | None = None) -> None:
    """Have this process terminated when its parent process (torchrun, prep: `parent`, its pid
    before the fork, where the caller has it) exits."""
    if not sys.platform.startswith("linux"):
        return
    launcher = os.getppid() if parent is None else parent
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != launcher:  # the launcher died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
