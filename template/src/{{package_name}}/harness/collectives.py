"""The collectives of a rank, each kept until the backend's thread has let go of it.

    waited(dist.all_reduce(tensor, async_op=True))  # every collective: started, waited for, kept
    everyone = gather_objects(value)                 # torch's all_gather_object, its work kept
    value = broadcast_object(value, src=0)           # torch's broadcast_object_list, its work kept
    choice = decided_by(0, choose)                   # rank 0's choose() on every rank, or its DataError

Why. gloo runs a collective on a worker thread, which lets go of the collective's work just after the
rank's wait has returned. When that thread holds the last reference to the work, it destroys it, and
with it its references to the rank's tensors; a tensor that has a Python object then takes the GIL,
and the thread, which has no Python thread state, makes one under the interpreter's lock of thread
states. A DataLoader worker forked at that moment (an epoch's start follows the last step's
collectives, the epoch's sums and its checkpoint) inherits that lock held, and in CPython before
3.11.10 (gh-112275; fixed in 3.11.10, 3.12 and late security releases of 3.8 to 3.10) waits for it
forever in its first instruction after the fork, before any of its Python runs: its rank waits for its
batches forever. Seen once on 2 busy cores
(gdb: the worker in `PyOS_AfterFork_Child` -> `_PyThreadState_DeleteExcept`), and made to happen: 2 of
64,000 children forked right after an all_reduce of a temporary tensor hung (8 ranks on 2 cores); 3 of
128,000 with the tensor kept alive too (the thread takes the GIL to count its Python object down), none
of 128,000 with the work kept (gdb: no gloo thread makes a thread state).

Kept here, in the main thread, a work outlives the thread's reference to it, and is destroyed by the
main thread when a later collective lets it go, KEPT_S seconds after its own. NCCL's watchdog thread lets
go of works too: every backend's are kept, on the Pythons that need it only (`forks_can_hang`), for they
hold their tensors meanwhile (on a GPU, a second of the contrastive loss's gathered embeddings).
"""

from __future__ import annotations

import pickle
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from .errors import DataError

T = TypeVar("T")

# How long a collective's work is kept after it was waited for. gloo's thread lets go of it within
# microseconds of the wait's return (the next lines of its loop), NCCL's watchdog when it next looks at
# its works; a second is also some thirty times what a runnable thread waits for its turn on 2 cores
# loaded 20-fold (ten threads a core, a few milliseconds each). A step makes three collectives at most
# (the contrastive loss's), so the works kept, and the tensors they hold, are a second's steps' worth.
KEPT_S = 1.0

KEPT: deque[tuple[float, dist.Work]] = deque()


def forks_can_hang(version: tuple[int, int, int]) -> bool:
    """Whether CPython `version` may hang a forked child on the lock of thread states (gh-112275): before
    3.11.10, which has the fix, as 3.12 has from the start. (Later security releases of 3.8 to 3.10 have it
    too; their works are kept all the same.)"""
    return version < (3, 11, 10)


# Whether this interpreter needs the works kept (see the module's text).
KEEP = forks_can_hang(tuple(sys.version_info[:3]))


def waited(work: dist.Work | None) -> None:
    """Wait for `work`, a collective started with async_op=True, and keep it KEPT_S seconds where forks can
    hang (see the module's text); the works of earlier collectives are let go here, in this thread."""
    if work is None:  # a rank outside the collective's group
        return
    work.wait()
    if not KEEP:
        return
    now = time.monotonic()
    while KEPT and now - KEPT[0][0] >= KEPT_S:
        KEPT.popleft()
    KEPT.append((now, work))


def object_device() -> torch.device:
    """Where an object collective's bytes go: NCCL moves only CUDA tensors (its rank's device)."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def as_bytes(value: Any, device: torch.device) -> torch.Tensor:
    return torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8).to(device)


def from_bytes(tensor: torch.Tensor, size: int) -> Any:
    return pickle.loads(tensor[:size].cpu().numpy().tobytes())


def gather_objects(value: Any) -> list[Any]:
    """Every rank's `value` (anything pickle takes), in rank order, on every rank: one all_gather of
    the sizes, one of the bytes padded to the longest."""
    device = object_device()
    mine = as_bytes(value, device)
    size = torch.tensor([len(mine)], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(size) for _ in range(dist.get_world_size())]
    waited(dist.all_gather(sizes, size, async_op=True))
    counts = [int(each) for each in sizes]
    padded = torch.zeros(max(counts), dtype=torch.uint8, device=device)
    padded[: len(mine)] = mine
    parts = [torch.empty_like(padded) for _ in counts]
    waited(dist.all_gather(parts, padded, async_op=True))
    return [from_bytes(part, count) for part, count in zip(parts, counts, strict=True)]


def broadcast_object(value: Any, src: int) -> Any:
    """Rank `src`'s `value` (anything pickle takes) on every rank; what the others pass is not read."""
    device = object_device()
    mine = as_bytes(value, device) if dist.get_rank() == src else None
    size = torch.tensor([0 if mine is None else len(mine)], dtype=torch.int64, device=device)
    waited(dist.broadcast(size, src=src, async_op=True))
    payload = mine if mine is not None else torch.empty(int(size), dtype=torch.uint8, device=device)
    waited(dist.broadcast(payload, src=src, async_op=True))
    return value if mine is not None else from_bytes(payload, int(size))


def decided_by(src: int, choose: Callable[[], T]) -> T:
    """What rank `src`'s `choose()` returns, on every rank, which pass on nothing of their own (a run
    folder, a checkpoint: what one rank reads for all). A DataError of `choose` is raised on every rank,
    so that none waits for a value that never comes."""
    decided: tuple[bool, Any] | None = None
    if dist.get_rank() == src:
        try:
            decided = (True, choose())
        except DataError as err:
            decided = (False, str(err))
    chosen, value = broadcast_object(decided, src=src)
    if not chosen:
        raise DataError(value)
    return value
