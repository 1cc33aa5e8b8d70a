"""A node that waits for the others says so, at an interval: what it waits for and for how long.

Without it a node of several waits in silence: node 0 up to RDZV_TIMEOUT for nodes that do not
come, another node up to a few minutes for a node 0 it cannot reach. While this node's ranks do not
run and not every node is there (arrivals.py), a thread prints to stdout, with this node's NODE_RANK:

    node 0: waiting for 1 of 2 nodes at node0:29500 (NODE_RANK 1 missing), 40 s of RDZV_TIMEOUT=300
    node 1: waiting for node 0's rendezvous at node0:29500, not reached yet (...), 10 s so far

at the start and at every restart, each wait counted from its own beginning (and from reaching node
0's store, where RDZV_TIMEOUT begins).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from .arrivals import Arrivals
from .errors import PACKAGE

# A rendezvous of nodes that all started completes within a few seconds of the last one's start
# (the nodes of a SLURM job start within seconds of one another), so a node that still waits after
# a third of the interval (10 s) is waiting for something: its first line comes then. Then one line
# every interval (30 s): a SLURM log followed with `tail -f` moves within half a minute, and the
# default RDZV_TIMEOUT (300 s) adds 10 lines to it, not hundreds. The tests shorten it through
# INTERVAL_VARIABLE (seconds; the first line after a third of them).
INTERVAL_S = 30.0
INTERVAL_VARIABLE = f"{PACKAGE.upper()}_WAIT_REPORT_SECONDS"
LOOK_S = 0.25  # how often the thread looks whether this node still waits


def interval() -> float:
    """The interval between two lines: INTERVAL_VARIABLE's seconds where set and positive, else INTERVAL_S."""
    given = os.environ.get(INTERVAL_VARIABLE, "")
    try:
        return float(given) if float(given) > 0 else INTERVAL_S
    except ValueError:
        return INTERVAL_S


def waiting_line(
    node_rank: int, nnodes: int, where: str, came: list[int], reached: bool, seconds: float, rdzv_timeout: int
) -> str:
    """What node `node_rank` waits for after `seconds`: the NODE_RANKs missing from `came`, or,
    away from node 0, node 0's store when its last poll did not reach it (`reached`)."""
    if node_rank != 0 and not reached:
        return (
            f"node {node_rank}: waiting for node 0's rendezvous at {where}, not reached yet (start node 0, "
            f"NODE_RANK=0, there, and let MASTER_PORT through between the nodes), {seconds:.0f} s so far"
        )
    missing = [node for node in range(nnodes) if node not in came]
    which = f" (NODE_RANK {', '.join(map(str, missing))} missing)"
    return (
        f"node {node_rank}: waiting for {len(missing)} of {nnodes} nodes at {where}{which}, "
        f"{seconds:.0f} s of RDZV_TIMEOUT={rdzv_timeout}"
    )


class WaitReport:
    """A thread that prints waiting_line while this node waits: while `running()` is false (its ranks
    do not run) and `arrivals` does not see every node."""

    def __init__(self, arrivals: Arrivals, rdzv_timeout: int, running: Callable[[], bool]) -> None:
        self.arrivals, self.rdzv_timeout, self.running = arrivals, rdzv_timeout, running
        self.every = interval()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.watch, name="wait-report", daemon=True)

    def __enter__(self) -> WaitReport:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10 * LOOK_S)

    def waiting(self) -> bool:
        return not self.running() and len(self.arrivals.came()) < self.arrivals.nnodes

    def watch(self) -> None:
        a = self.arrivals
        where = f"{a.host}:{a.port}" if ":" not in a.host else f"[{a.host}]:{a.port}"
        since = next_line = None  # when this wait began, when its next line is due
        unreached = False  # node 0's store, at the last look
        while not self.stopped.wait(LOOK_S):
            now, reached = time.monotonic(), a.reached or a.node_rank == 0
            if not self.waiting():
                since = None
                continue
            if since is None:
                since, next_line = now, now + self.every / 3
            elif reached and unreached:  # RDZV_TIMEOUT runs from the join, which follows reaching node 0
                since = now
            unreached = not reached
            if now >= next_line:
                line = waiting_line(a.node_rank, a.nnodes, where, a.came(), reached, now - since, self.rdzv_timeout)
                print(line, flush=True)
                next_line += self.every
