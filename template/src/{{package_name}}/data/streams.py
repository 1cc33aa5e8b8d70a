"""Every random stream of the project, and what it is keyed by.

A stream keyed by what it shapes, never by which process happens to draw it, is what lets a
run be replayed: on other numbers of ranks or workers, and after a resume (exact or elastic).
The streams, and where each is keyed:

- the epoch's order: keyed in data/sampling.py, the chosen sampler, from (seed, epoch) (its
  docstring says how: a permutation, blocks, runs and shuffle buffers, or none);
- the DataLoader workers' base seed: from (seed, epoch, rank), `worker_seed_generator` below,
  so that loading draws nothing from the training process's random state;
- augmentation: each sample's draws from (seed, epoch, the sample's key),
  `sample_generator` below (decode.decode_batch hands it to transforms.train_transform): the
  same sample in the same epoch is augmented alike on any world size, any number of workers,
  and after any resume;
- the model's initial weights: torch.manual_seed(seed) in train.py, the same on every rank;
- dropout and whatever else a training step draws: each rank's torch, numpy and random seeded
  from (seed, rank) (harness/checkpoint.seed_rank), saved in every checkpoint and restored;
- prep: the held-out split from (seed) (sources/source.py), and the shuffled storage order from
  (seed) where the backend's prep shuffles it (sources/storing.py says; webdataset's does, in
  sources/storage_order.py).

Keys are hashed with SeedSequence (and a sample key with blake2b), never Python's hash(): that
changes from process to process with PYTHONHASHSEED.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

# Tells this module's streams apart from others keyed by the same (seed, epoch, ...) numbers.
WORKER_SEED_STREAM, AUGMENT_STREAM = 1, 2


def seed_of(*key: int) -> int:
    """One 63-bit seed from a key of non-negative integers, the same in every process."""
    return int(np.random.SeedSequence(list(key)).generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


def key_number(key: str) -> int:
    """A sample key as a number, stably (blake2b, not hash(): PYTHONHASHSEED differs between ranks)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "little")


def sample_generator(seed: int, epoch: int, key: str) -> torch.Generator:
    """The generator of one sample's augmentation in `epoch`: a function of (seed, epoch, key)
    alone, so no rank, worker or resume point can change what the sample is given."""
    return torch.Generator().manual_seed(seed_of(seed, epoch, AUGMENT_STREAM, key_number(key)))


def worker_seed_generator(seed: int, epoch: int, rank: int) -> torch.Generator:
    """The generator a rank's DataLoader draws its workers' base seed from, one for every (seed,
    epoch, rank). Left to itself, the DataLoader draws that seed from the training process's
    random state, so a run resumed mid-epoch (which starts its DataLoader at another point of
    that state) would see different dropout from then on than the run it continues."""
    return torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, epoch, rank, WORKER_SEED_STREAM]).generate_state(1)[0])
    )
