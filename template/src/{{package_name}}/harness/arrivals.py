"""Which nodes have come to the rendezvous, by NODE_RANK: what a rendezvous timeout's line names.

torchrun's c10d rendezvous numbers nodes by host name and process id and keeps who came in
private state; the NODE_RANK a user gave each node is not in it. So every node's launcher
says it is there itself, through the rendezvous's own store (node 0 hosts it at
MASTER_ADDR:MASTER_PORT; torch.distributed.TCPStore is public API): it adds 1 to the counter
`<package>-arrivals/<NODE_RANK>` every BEAT_S, and reads every node's counter. A node is there
while its counter moves: a node that came and then died stops counting, and after
GONE_AFTER_S it is missing again. What the last poll saw is kept, for the store goes when
node 0's launcher gives up.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta

from .errors import PACKAGE

BEAT_S = 1.0
GONE_AFTER_S = 3 * BEAT_S  # three beats missed: gone, not late


class Arrivals:
    """A thread that beats for this node and watches the others; `came()` is what it last saw."""

    def __init__(self, host: str, port: int, nnodes: int, node_rank: int) -> None:
        self.host, self.port, self.nnodes, self.node_rank = host.strip("[]"), port, nnodes, node_rank
        self.seen: dict[int, tuple[int, float]] = {}  # NODE_RANK -> (its counter, when it last moved)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.watch, name="arrivals", daemon=True)

    def __enter__(self) -> Arrivals:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10 * BEAT_S)

    def key(self, node_rank: int) -> str:
        return f"{PACKAGE}-arrivals/{node_rank}"

    def watch(self) -> None:
        import torch.distributed as dist

        store = None
        while not self.stopped.is_set():
            try:
                if store is None:  # node 0's store may not be up yet, or gone: try again next beat
                    store = dist.TCPStore(
                        self.host, self.port, is_master=False, timeout=timedelta(seconds=BEAT_S), use_libuv=True
                    )
                store.add(self.key(self.node_rank), 1)
                now = time.monotonic()
                for node in range(self.nnodes):
                    count = store.add(self.key(node), 0)  # reads it (0: never came)
                    if node not in self.seen:  # a counter left by a node that died moves no more
                        self.seen[node] = (count, -math.inf) if count else (0, -math.inf)
                    elif count != self.seen[node][0]:
                        self.seen[node] = (count, now)
            except (RuntimeError, ValueError, OSError):  # torch's DistStoreError is a RuntimeError
                store = None
            self.stopped.wait(BEAT_S)

    def came(self) -> list[int]:
        """The NODE_RANKs whose counters moved within GONE_AFTER_S of the last poll that saw any."""
        last = max((moved for _, moved in self.seen.values()), default=-math.inf)
        return sorted(node for node, (_, moved) in self.seen.items() if last - moved <= GONE_AFTER_S)
