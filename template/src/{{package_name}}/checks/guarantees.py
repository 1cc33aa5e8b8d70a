"""The per-epoch guarantees of the contract, checked on what was (or would be) delivered.

`delivered` is [rank][step] -> batch of storage positions; it comes from the epoch plan
(no processes) or from a training run's ledger, and both are checked by the same code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

Delivered = Sequence[Sequence[Sequence[int]]]


def global_order(delivered: Delivered) -> np.ndarray:
    """All positions in delivery order: step by step, and within a step rank by rank."""
    steps = max((len(batches) for batches in delivered), default=0)
    return np.array(
        [p for s in range(steps) for batches in delivered if s < len(batches) for p in batches[s]], dtype=np.int64
    )


def left_out_bound(world_size: int, num_workers: int, batch_size: int) -> int:
    """The most samples an epoch may leave out: W * max(K, 1) * B."""
    return world_size * max(num_workers, 1) * batch_size


def left_out(delivered: Delivered, num_samples: int) -> set[int]:
    return set(range(num_samples)) - set(global_order(delivered).tolist())


def epoch_problems(
    delivered: Delivered, num_samples: int, num_workers: int, batch_size: int, before: Sequence[Delivered] = ()
) -> list[str]:
    """Guarantees 1-3 for one epoch; an empty list means they hold. `before`: the stretches of an
    epoch resumed on other sizes that ran before `delivered` (progress.py), each on its own ranks;
    the bound on what is left out is then that of the last stretch's sizes."""
    problems = []
    for stretch in [*before, delivered]:
        steps = [len(batches) for batches in stretch]
        if len(set(steps)) > 1:
            problems.append(f"ranks ran different numbers of steps {steps}: DDP would hang")
    order = np.concatenate([global_order(stretch) for stretch in [*before, delivered]])
    repeated = {p: n for p, n in Counter(order.tolist()).items() if n > 1}
    if repeated:
        example = sorted(repeated)[:5]
        problems.append(f"{len(repeated)} samples delivered more than once (e.g. {example})")
    outside = order[(order < 0) | (order >= num_samples)]
    if len(outside):
        problems.append(f"{len(outside)} positions outside the data set (e.g. {outside[:5].tolist()})")
    missing = num_samples - len(set(order.tolist()))
    bound = left_out_bound(len(delivered), num_workers, batch_size)
    if missing > bound:
        problems.append(f"{missing} samples left out, more than the bound W*K*B = {bound}")
    return problems


def between_epochs_problems(previous: Delivered, current: Delivered, num_samples: int, shuffles: bool) -> list[str]:
    """Guarantees 3-4 across two consecutive epochs; an empty list means they hold."""
    problems = []
    before, after = left_out(previous, num_samples), left_out(current, num_samples)
    if before and before == after:
        problems.append(f"the same {len(before)} samples were left out in both epochs")
    if shuffles and np.array_equal(global_order(previous), global_order(current)):
        problems.append("the delivery order did not change between epochs (is the epoch passed to the sampler?)")
    return problems
