"""How well an epoch is shuffled, measured on what was (or would be) delivered.

Each metric comes with its distribution under an ideal shuffle (a uniform random
permutation of all samples), so a measured value can be judged in standard deviations.
`delivered` is [rank][step] -> batch of storage positions, as in guarantees.py.
"""

from __future__ import annotations

import math

import numpy as np

from .guarantees import Delivered, global_order


def global_batches(delivered: Delivered) -> list[np.ndarray]:
    """The positions of each step's global batch (all ranks' batches of that step)."""
    steps = min(len(batches) for batches in delivered)
    return [np.concatenate([np.asarray(batches[s]) for batches in delivered]) for s in range(steps)]


def label_mix(delivered: Delivered, labels: np.ndarray) -> float:
    """Mean over global batches of Pearson's chi-square of the batch's label counts against
    the data set's label proportions: small when every batch holds a fair mix of classes.
    `labels` may be any stratum id >= 0 per storage position (a shard, a field's value)."""
    counts = np.bincount(labels)
    proportions = counts[counts > 0] / len(labels)
    present = np.flatnonzero(counts)
    values = []
    for batch in global_batches(delivered):
        observed = np.bincount(labels[batch], minlength=len(counts))[present]
        expected = len(batch) * proportions
        values.append(float(((observed - expected) ** 2 / expected).sum()))
    return float(np.mean(values))


def ideal_label_mix(
    num_samples: int, batch: int, num_classes: int, num_batches: int, sizes: np.ndarray | None = None
) -> tuple[float, float]:
    """Mean and standard deviation of `label_mix` under an ideal shuffle; `sizes` = the samples
    of each class (or stratum), equal when not given.

    A global batch of n samples drawn without replacement from N has label counts with
    variance n p (1 - p) f, f = (N - n) / (N - 1), so its chi-square has mean (C - 1) f, for
    any proportions p. Its variance, for a multinomial draw, is 2 (C - 1) + (sum 1/p - C^2
    - 2C + 2) / n (Haldane 1937); the -2(C - 1)/n is dropped (a slight over-estimate), which
    leaves 2 (C - 1) for equal strata, and sum 1/p - C^2 >= 0 is what unequal strata add
    (large when a stratum is small: a shard of a few samples, a rare value); drawing without
    replacement scales it by f^2 (simulated within a few % at n = 64, even at n p ~ 1).
    The G batches of one epoch are disjoint draws, which makes them slightly negatively
    correlated; treating them as independent over-estimates the spread of their mean
    (a conservative bound): sd = f sqrt((2 (C - 1) + excess / n) / G).
    """
    f = (num_samples - batch) / (num_samples - 1)
    excess = 0.0 if sizes is None else float((num_samples / np.asarray(sizes)).sum()) - num_classes**2
    return (num_classes - 1) * f, f * math.sqrt((2 * (num_classes - 1) + excess / batch) / num_batches)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two equally long sequences without ties."""
    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    ra -= ra.mean()
    rb -= rb.mean()
    return float((ra * rb).sum() / math.sqrt((ra * ra).sum() * (rb * rb).sum()))


def position_correlation(order: np.ndarray) -> float:
    """Spearman correlation between storage position and delivery position; about 0, with
    sd 1 / sqrt(n - 1), under an ideal shuffle of n samples; 1 for storage order."""
    return spearman(order, np.arange(len(order)))


def epoch_correlation(previous: np.ndarray, current: np.ndarray) -> float:
    """Spearman correlation between the delivery positions of the samples delivered in both
    epochs; about 0, with sd 1 / sqrt(n - 1), when the epochs are independent shuffles."""
    common = np.intersect1d(previous, current)
    where_before = np.empty(max(previous.max(), current.max()) + 1, dtype=np.int64)
    where_after = where_before.copy()
    where_before[previous] = np.arange(len(previous))
    where_after[current] = np.arange(len(current))
    return spearman(where_before[common], where_after[common])


def label_counts_per_batch(delivered: Delivered, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """[num_classes, global batches]: how many samples of each class every global batch holds."""
    batches = global_batches(delivered)
    counts = np.zeros((num_classes, len(batches)), dtype=np.int64)
    for step, batch in enumerate(batches):
        counts[:, step] = np.bincount(labels[batch], minlength=num_classes)
    return counts


def gap_entropy(sequence: np.ndarray) -> float:
    """Shannon entropy, in bits, of the absolute differences between neighbours of `sequence`.

    MosaicML Streaming's shuffle-quality measure (simulation/core/shuffle_quality.py,
    `get_entropy`): storage order has one gap value (entropy 0); a good shuffle has gaps
    of every size, so the entropy is high.
    """
    gaps = np.abs(np.diff(np.asarray(sequence, dtype=np.int64)))
    if len(gaps) == 0:
        return 0.0
    frequencies = np.bincount(gaps)
    probabilities = frequencies[frequencies > 0] / len(gaps)
    return float(-(probabilities * np.log2(probabilities)).sum())


def shuffle_entropy(order: np.ndarray, shard_of_position: np.ndarray) -> float:
    """MosaicML Streaming's combined shuffle quality: the harmonic mean of the gap entropy of
    the sample ids and of the shard ids, both in delivery order. It is 0 when either is 0:
    an order that never leaves a shard, or that walks through storage, is not shuffled."""
    samples = gap_entropy(order)
    shards = gap_entropy(shard_of_position[order])
    return 2 * samples * shards / (samples + shards) if samples > 0 and shards > 0 else 0.0


def relative_shuffle_entropy(order: np.ndarray, shard_of_position: np.ndarray, seed: int = 0) -> float:
    """`shuffle_entropy` of `order` divided by that of a seeded uniform random permutation of
    the same samples: about 1 for an ideal shuffle (within ~0.01 for a few thousand samples),
    near 0 for storage order; NaN when there is a single shard, where the measure says nothing."""
    order = np.asarray(order, dtype=np.int64)
    reference = shuffle_entropy(np.random.default_rng(seed).permutation(order), shard_of_position)
    return shuffle_entropy(order, shard_of_position) / reference if reference > 0 else math.nan


def count_inversions(values: np.ndarray) -> int:
    """Pairs i < j with values[i] > values[j], for distinct values, in O(n log^2 n).

    A bottom-up merge sort vectorised over all runs of one width: offsetting each pair of
    runs by pair * n lets one `searchsorted` count, for every element of every right run,
    the elements of its left run that are greater, and one sort merge every pair.
    """
    n, inversions, width = len(values), 0, 1
    runs = np.empty(n, dtype=np.int64)
    runs[np.argsort(values)] = np.arange(n)  # ranks 0..n-1: small, distinct keys
    index = np.arange(n)
    while width < n:
        pair = index // (2 * width)
        in_right_run = (index // width) % 2 == 1
        keyed = runs + pair * n
        left, right = keyed[~in_right_run], keyed[in_right_run]
        # Every pair before this one has a full left run of `width` elements.
        not_greater = np.searchsorted(left, right, side="right") - pair[in_right_run] * width
        inversions += int((width - not_greater).sum())
        runs = np.sort(keyed) - pair * n  # distinct keys: stability does not matter
        width *= 2
    return inversions


def kendall_tau(previous: np.ndarray, current: np.ndarray) -> float:
    """Kendall's tau between the delivery positions, in two epochs, of the samples delivered
    in both (a sample delivered twice counts at its last delivery): 1 for the same order,
    -1 for the reversed order, about 0 with sd sqrt(2(2n+5) / (9n(n-1))) for independent shuffles."""
    size = max(previous.max(initial=-1), current.max(initial=-1)) + 1
    where_before = np.full(size, -1, dtype=np.int64)
    where_after = where_before.copy()
    where_before[previous] = np.arange(len(previous))
    where_after[current] = np.arange(len(current))
    common = np.flatnonzero((where_before >= 0) & (where_after >= 0))
    n = len(common)
    if n < 2:
        return math.nan
    # The samples in the order of the previous epoch; every inversion of their current
    # positions is a discordant pair, every other pair is concordant (no ties).
    current_positions = where_after[common[np.argsort(where_before[common])]]
    return 1 - 4 * count_inversions(current_positions) / (n * (n - 1))


def kendall_tau_sd(n: int) -> float:
    """Standard deviation of Kendall's tau between two independent random orders of n samples."""
    return math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1))) if n >= 2 else math.nan


def rank_of_position(delivered: Delivered, size: int) -> np.ndarray:
    """[size]: the rank that delivered each storage position, -1 where none did."""
    ranks = np.full(size, -1, dtype=np.int64)
    for rank, batches in enumerate(delivered):
        for batch in batches:
            ranks[np.asarray(batch, dtype=np.int64)] = rank
    return ranks


def same_rank_fraction(previous: Delivered, current: Delivered) -> float:
    """Of the samples delivered in both epochs, the fraction delivered by the same rank both
    times: about 1/W for a global shuffle, 1 when every rank keeps a fixed slice of the data."""
    size = 1 + max(int(global_order(d).max(initial=-1)) for d in (previous, current))
    before, after = rank_of_position(previous, size), rank_of_position(current, size)
    in_both = (before >= 0) & (after >= 0)
    return float((before[in_both] == after[in_both]).mean()) if in_both.any() else math.nan
