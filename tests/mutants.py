"""The mistakes people really make in DDP data pipelines, as small source edits.

Each mutant names the file of a rendered project, the exact code it replaces, what the
broken code says instead, and words that the generated tests' failure message must
contain: the test that kills it has to name the broken property, not just crash.
"""

from __future__ import annotations

from dataclasses import dataclass

MAP_STYLE = ("memory", "files", "arrow")
SHUFFLING = ("global", "block")


@dataclass(frozen=True)
class Mutant:
    id: str
    mistake: str
    file: str  # relative to src/<package>/
    old: str
    new: str
    killed_with: str  # regex the failing tests' output must match
    backends: tuple[str, ...] = MAP_STYLE
    samplers: tuple[str, ...] = ("global", "block", "sequential")
    only_test: str = ""  # a test file that launches processes and alone sees this mistake

    def applies(self, backend: str, sampler: str) -> bool:
        return backend in self.backends and sampler in self.samplers


MUTANTS = [
    Mutant(
        "epoch-not-passed",
        "the epoch is not passed to the sampler (same order every epoch)",
        "loader.py",
        "self.seed, epoch, len(self.dataset)",
        "self.seed, 0, len(self.dataset)",
        # sequential promises no shuffle, so there it is the left-out set that must move
        r"did not change between epochs|the same \d+ samples were left out in both epochs",
    ),
    Mutant(
        "no-rank-split",
        "no split by rank: every rank reads rank 0's share",
        "plan.py",
        "return epoch_plan(seed, epoch, num_samples, world_size, num_workers, batch_size)[rank, start_step:]",
        "return epoch_plan(seed, epoch, num_samples, world_size, num_workers, batch_size)[0, start_step:]",
        r"delivered more than once",
    ),
    Mutant(
        "seed-per-rank",
        "a different seed on each rank: per-rank permutations overlap",
        "loader.py",
        "self.seed, epoch, len(self.dataset)",
        "self.seed + self.rank, epoch, len(self.dataset)",
        r"delivered more than once",
        samplers=SHUFFLING,
    ),
    Mutant(
        "padding-duplicates",
        "pad the last global batch by repeating samples, as DistributedSampler does by default",
        "plan.py",
        "    return order[: steps * global_batch].reshape(",
        "    steps = -(-num_samples // global_batch)\n"
        "    order = np.concatenate([order, order[: steps * global_batch - num_samples]])\n"
        "    return order[: steps * global_batch].reshape(",
        r"delivered more than once",
    ),
    Mutant(
        "shuffle-off",
        "shuffle turned off: storage (label-sorted) order",
        "sampling.py",
        "def epoch_order(seed: int, epoch: int, num_samples: int, global_batch: int) -> np.ndarray:\n",
        "def epoch_order(seed: int, epoch: int, num_samples: int, global_batch: int) -> np.ndarray:\n"
        "    return np.arange(num_samples)\n",
        r"is the data shuffled|did not change between epochs",
        samplers=SHUFFLING,
    ),
    Mutant(
        "seed-ignores-epoch",
        "a seed that does not change with the epoch",
        "sampling.py",
        "np.random.default_rng([seed, epoch])",
        "np.random.default_rng(seed)",
        r"did not change between epochs|does the seed change with the epoch",
        samplers=SHUFFLING,
    ),
    Mutant(
        "uneven-steps",
        "ranks with different step counts in an epoch (rank 0 skips the last step)",
        "plan.py",
        "return epoch_plan(seed, epoch, num_samples, world_size, num_workers, batch_size)[rank, start_step:]",
        "plan = epoch_plan(seed, epoch, num_samples, world_size, num_workers, batch_size)[rank, start_step:]\n"
        "    return plan[:-1] if rank == 0 else plan",
        r"different numbers of steps|would run .* steps and DDP would hang",
    ),
    Mutant(
        "memory-copy-per-rank",
        "the memory backend loads the whole data set into every rank",
        "memory_backend.py",
        'self.features = self.shared["features"].array\n        self.labels',
        'self.features = np.array(self.shared["features"].array)\n        self.labels',
        r"each rank holds its own copy",
        backends=("memory",),
        only_test="tests/test_memory_once_per_node.py",
    ),
]
