"""How far an epoch has run: the stretches of it already run, each on its own sizes.

An epoch that is interrupted and resumed runs in stretches. `Stretch(steps, world_size,
num_workers)` is one of them: `steps` optimizer steps run by `world_size` ranks with
`num_workers` DataLoader workers each. The epoch plan takes the stretches already run
(`done`) and returns the steps that remain:

- resumed on the sizes it last ran on, the epoch goes on with its own plan, step for step,
  exactly as an uninterrupted run would (exact resume);
- resumed on other sizes, the samples the stretches delivered are taken out, and the rest of
  the epoch's order is dealt to the new sizes (elastic resume): no sample twice, and at most
  the new sizes' bound left out.

A checkpoint stores the epoch's stretches, so the plan stays a pure function of (seed, epoch,
sizes, the stretches before) and a resumed run needs no loader state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Stretch(NamedTuple):
    steps: int
    world_size: int
    num_workers: int


def steps_done(done: Sequence[Stretch]) -> int:
    """The epoch's steps already run: the number of the next one."""
    return sum(stretch.steps for stretch in done)


def same_sizes(stretch: Stretch, world_size: int, num_workers: int) -> bool:
    return (stretch.world_size, max(stretch.num_workers, 1)) == (world_size, max(num_workers, 1))


def advance(done: Sequence[Stretch], steps: int, world_size: int, num_workers: int) -> tuple[Stretch, ...]:
    """`done` after `steps` more steps on these sizes; steps on the sizes of the last stretch
    lengthen it, so that an epoch resumed on its own sizes stays one stretch (0 workers load
    like 1: in the rank's own process, one stream)."""
    done = tuple(Stretch(*stretch) for stretch in done)
    if done and same_sizes(done[-1], world_size, num_workers):
        return (*done[:-1], done[-1]._replace(steps=done[-1].steps + steps))
    return (*done, Stretch(steps, world_size, num_workers)) if steps else done
