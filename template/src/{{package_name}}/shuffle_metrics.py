"""How well an epoch is shuffled, measured on what was (or would be) delivered.

Each metric comes with its distribution under an ideal shuffle (a uniform random
permutation of all samples), so a measured value can be judged in standard deviations.
`delivered` is [rank][step] -> batch of storage positions, as in guarantees.py.
"""

from __future__ import annotations

import math

import numpy as np

from .guarantees import Delivered


def global_batches(delivered: Delivered) -> list[np.ndarray]:
    """The positions of each step's global batch (all ranks' batches of that step)."""
    steps = min(len(batches) for batches in delivered)
    return [np.concatenate([np.asarray(batches[s]) for batches in delivered]) for s in range(steps)]


def label_mix(delivered: Delivered, labels: np.ndarray) -> float:
    """Mean over global batches of Pearson's chi-square of the batch's label counts against
    the data set's label proportions: small when every batch holds a fair mix of classes."""
    counts = np.bincount(labels)
    proportions = counts[counts > 0] / len(labels)
    present = np.flatnonzero(counts)
    values = []
    for batch in global_batches(delivered):
        observed = np.bincount(labels[batch], minlength=len(counts))[present]
        expected = len(batch) * proportions
        values.append(float(((observed - expected) ** 2 / expected).sum()))
    return float(np.mean(values))


def ideal_label_mix(num_samples: int, batch: int, num_classes: int, num_batches: int) -> tuple[float, float]:
    """Mean and standard deviation of `label_mix` under an ideal shuffle.

    A global batch of n samples drawn without replacement from N has label counts with
    variance n p (1 - p) f, f = (N - n) / (N - 1), so its chi-square has mean (C - 1) f and,
    being close to a scaled chi-square with C - 1 degrees of freedom, variance 2 (C - 1) f^2.
    The G batches of one epoch are disjoint draws, which makes them slightly negatively
    correlated; treating them as independent over-estimates the spread of their mean
    (a conservative bound): sd = f sqrt(2 (C - 1) / G).
    """
    f = (num_samples - batch) / (num_samples - 1)
    return (num_classes - 1) * f, f * math.sqrt(2 * (num_classes - 1) / num_batches)


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
