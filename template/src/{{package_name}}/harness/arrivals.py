"""Which nodes have come to the rendezvous, by NODE_RANK: what a rendezvous timeout's line names.

torchrun's c10d rendezvous numbers nodes by host name and process id and keeps who came in
private state; the NODE_RANK a user gave each node is not in it. So every node's launcher
says it is there itself, through the rendezvous's own store (node 0 hosts it at
MASTER_ADDR:MASTER_PORT; torch.distributed.TCPStore is public API). Node 0 keeps a clock
there, `<package>-arrivals/clock`, one tick every BEAT_S; every node, every BEAT_S, stamps
`<package>-arrivals/<NODE_RANK>` with the tick it read. A node is there while its stamp is
within GONE_AFTER_TICKS of the clock: a node that came and then died stamps no more. One poll
tells who is there, so a node that reaches the store just before node 0 gives up still names
who came; node 0 is there whenever its store answers. What the last poll saw is kept, for
the store goes when node 0's launcher gives up.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from .errors import PACKAGE

BEAT_S = 1.0
GONE_AFTER_TICKS = 3  # three beats missed: gone, not late


class Arrivals:
    """A thread that stamps for this node and watches the others; `came()` is what it last saw."""

    def __init__(self, host: str, port: int, nnodes: int, node_rank: int) -> None:
        self.host, self.port, self.nnodes, self.node_rank = host.strip("[]"), port, nnodes, node_rank
        self.seen: list[int] = []  # the NODE_RANKs there at the last poll that reached the store
        self.reached = False  # whether the last poll reached node 0's store (waiting.py says so)
        self.stopped = threading.Event()
        self.polled = threading.Event()  # the first poll ended, whether it reached the store or not
        self.thread = threading.Thread(target=self.watch, name="arrivals", daemon=True)

    def __enter__(self) -> Arrivals:
        self.thread.start()
        # This node's stamp is in the store before its rendezvous starts, where node 0's store is up.
        self.polled.wait(timeout=3 * BEAT_S)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10 * BEAT_S)

    def key(self, name: int | str) -> str:
        return f"{PACKAGE}-arrivals/{name}"

    def poll(self, store) -> list[int]:
        """Stamp this node with the clock (node 0 ticks it first); the nodes whose stamps are recent."""
        clock = store.add(self.key("clock"), 1 if self.node_rank == 0 else 0)
        store.set(self.key(self.node_rank), str(clock))
        there = [0]  # the store's host
        for node in range(1, self.nnodes):
            if store.check([self.key(node)]) and clock - int(store.get(self.key(node))) <= GONE_AFTER_TICKS:
                there.append(node)
        return there

    def watch(self) -> None:
        import torch.distributed as dist

        store = None
        while not self.stopped.is_set():
            try:
                if store is None:  # node 0's store may not be up yet, or gone: try again next beat
                    store = dist.TCPStore(
                        self.host, self.port, is_master=False, timeout=timedelta(seconds=BEAT_S), use_libuv=True
                    )
                self.seen = self.poll(store)
                self.reached = True
            except (RuntimeError, ValueError, OSError):  # torch's DistStoreError is a RuntimeError
                store, self.reached = None, False
            self.polled.set()
            self.stopped.wait(BEAT_S)

    def came(self) -> list[int]:
        """The NODE_RANKs there at the last poll that reached node 0's store; if none did, node 0
        knows only itself and another node nothing."""
        return sorted(self.seen) or ([0] if self.node_rank == 0 else [])
