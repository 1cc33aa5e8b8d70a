"""The mistakes people really make in DDP data pipelines, as small edits to named functions.

Each mutant names the function of a rendered project that holds the mistake (found by its
qualified name in any module of the package), the exact code it replaces there and what the
broken code says instead (the format: tests/mutants_framework.py). The project's own tests
must fail on it; which test fails first is reported. A mutant whose function or code is no
longer in the project fails at once (tests/test_mutants_apply.py), so a refactor cannot
quietly turn the suite into one that tests nothing.
"""

from __future__ import annotations

from mutants_framework import Mutant, one_render
from mutants_recipe import RESTORED
from variants import SHUFFLING_SAMPLERS as SHUFFLING

WEBDATASET_ONLY = one_render("webdataset")
# The mistakes of a rank's share of the plan (RankLoader.plan, rank_plan) are seen by what the
# loader delivers: test_loader first, not after the whole of test_epoch_plan (its killer each time).
LOADER_KILLS = "tests/test_loader.py"

MUTANTS = [
    # 1. The epoch is not passed to the sampler: the forgotten set_epoch.
    Mutant(
        "epoch-not-passed",
        "the epoch is not passed to the sampler (same order every epoch)",
        "RankLoader.plan",
        (("rank_plan(self.seed, epoch, sizes, self.rank, done)", "rank_plan(self.seed, 0, sizes, self.rank, done)"),),
        first_test=LOADER_KILLS,
    ),
    Mutant(
        "epoch-not-passed",
        "the epoch is not passed to the workers' stream (same shards, same order every epoch)",
        "RankLoader.epoch",
        (("part = EpochOfRank(self.seed, epoch, self.rank,", "part = EpochOfRank(self.seed, 0, self.rank,"),),
        **WEBDATASET_ONLY,
    ),
    # 2. No split by rank.
    Mutant(
        "no-rank-split",
        "no split by rank: every rank reads rank 0's share",
        "rank_plan",
        (
            (
                "return epoch_plan(seed, epoch, sizes, done)[rank]",
                "return epoch_plan(seed, epoch, sizes, done)[0]",
            ),
        ),
        first_test=LOADER_KILLS,
    ),
    Mutant(
        "no-rank-split",
        "no split by rank: the workers of every rank read the segments of rank 0",
        "segment_of",
        (("segment = rank * sizes.workers + worker", "segment = worker"),),
        **WEBDATASET_ONLY,
    ),
    # 3. A different seed on each rank.
    Mutant(
        "seed-per-rank",
        "a different seed on each rank: per-rank permutations overlap",
        "RankLoader.plan",
        (
            (
                "rank_plan(self.seed, epoch, sizes, self.rank, done)",
                "rank_plan(self.seed + self.rank, epoch, sizes, self.rank, done)",
            ),
        ),
        samplers=SHUFFLING,
        first_test=LOADER_KILLS,
    ),
    Mutant(
        "seed-per-rank",
        "a different seed on each rank: each rank cuts its segments from its own shard order",
        "RankEpoch.batches",
        (
            (
                "stretch_stream(part.seed, part.epoch, sizes, prior)",
                "stretch_stream(part.seed + part.rank, part.epoch, sizes, prior)",
            ),
        ),
        **WEBDATASET_ONLY,
    ),
    # 4. Padding by repeating samples.
    Mutant(
        "padding-duplicates",
        "pad the last global batch by repeating samples, as DistributedSampler does by default",
        "epoch_plan",
        (
            (
                "    steps = len(rest) // (world_size * batch_size)\n",
                "    steps = -(-len(rest) // (world_size * batch_size))\n"
                "    rest = np.concatenate([rest, rest[: steps * world_size * batch_size - len(rest)]])\n",
            ),
        ),
    ),
    Mutant(
        "padding-duplicates",
        "even out ranks by drawing shards (here: runs) with replacement, as webdataset's resampled=True does",
        "epoch_stream",
        (
            (
                "order = np.random.default_rng([seed, epoch]).permutation(len(first))",
                "order = np.random.default_rng([seed, epoch]).integers(len(first), size=len(first))",
            ),
        ),
        **WEBDATASET_ONLY,
    ),
    # 5. Shuffle turned off, or a shuffle buffer of 1.
    Mutant(
        "shuffle-off",
        "shuffle turned off: storage (label-sorted) order",
        "epoch_order",
        (
            (
                "def epoch_order(seed: int, epoch: int, num_samples: int, global_batch: int) -> np.ndarray:\n",
                "def epoch_order(seed: int, epoch: int, num_samples: int, global_batch: int) -> np.ndarray:\n"
                "    return np.arange(num_samples)\n",
            ),
        ),
        samplers=SHUFFLING,
    ),
    Mutant(
        "buffer-of-one",
        "a shuffle buffer of 1: each worker delivers its runs in storage order",
        "mixed_batches",
        (("wds.shuffle(shuffle_buffer, initial=shuffle_buffer, rng=rng)", "wds.shuffle(1, initial=1, rng=rng)"),),
        **WEBDATASET_ONLY,
    ),
    Mutant(
        "buffer-ignores-batch",
        "the default shuffle buffer chosen for a batch of 32 whatever the batch: at 256 per rank label-sorted "
        "shards mix worse than 1.5x an ideal shuffle",
        "Reading.buffer_for",
        (
            (
                "RUNS_PER_BATCH_SAMPLE * batch_size * self.run_samples",
                "RUNS_PER_BATCH_SAMPLE * 32 * self.run_samples",
            ),
        ),
        **WEBDATASET_ONLY,
        only_test="tests/test_shard_buffer_shuffle_quality.py::"
        "test_the_default_buffer_mixes_sorted_shards_within_1_5x_of_ideal_at_batch_32_and_256",
    ),
    # 6. A seed that does not change with the epoch.
    Mutant(
        "seed-ignores-epoch",
        "a seed that does not change with the epoch",
        "epoch_order",
        (("np.random.default_rng([seed, epoch])", "np.random.default_rng(seed)"),),
        samplers=SHUFFLING,
    ),
    Mutant(
        "seed-ignores-epoch",
        "a seed fixed when the dataset is built: shard order and buffers repeat every epoch",
        "epoch_stream",
        (
            ("np.random.default_rng([seed, epoch]).permutation", "np.random.default_rng([seed]).permutation"),
            ("buffer_rng", "key = [seed, epoch, rank, worker]", "key = [seed, rank, worker]"),
        ),
        **WEBDATASET_ONLY,
    ),
    # 7. Workers of a rank with one shuffle seed, or no split by worker.
    Mutant(
        "workers-share-a-seed",
        "all DataLoader workers of a rank shuffle their buffers with the same seed",
        "buffer_rng",
        (("key = [seed, epoch, rank, worker]", "key = [seed, epoch, rank]"),),
        **WEBDATASET_ONLY,
    ),
    Mutant(
        "no-worker-split",
        "no split by worker: every worker of a rank reads the rank's first segment",
        "segment_of",
        (
            (
                "segment = rank * sizes.workers + worker",
                "segment = rank * sizes.workers",
            ),
        ),
        **WEBDATASET_ONLY,
    ),
    # 8. Ranks with different step counts.
    Mutant(
        "uneven-steps",
        "ranks with different step counts in an epoch (rank 0 skips the last step)",
        "rank_plan",
        (
            (
                "return epoch_plan(seed, epoch, sizes, done)[rank]",
                "plan = epoch_plan(seed, epoch, sizes, done)[rank]\n    return plan[:-1] if rank == 0 else plan",
            ),
        ),
    ),
    Mutant(
        "uneven-steps",
        "ranks with different step counts: rank 0's workers stop one batch early (a with_epoch miscount)",
        "RankEpoch.batches",
        (
            (
                "        for batch in batches:\n            yield part.make_batch(",
                "        for batch in list(batches)[: -1 if part.rank == 0 else None]:\n            yield part.make_batch(",
            ),
        ),
        **WEBDATASET_ONLY,
    ),
    # 9. Shards dealt to ranks before they are shuffled.
    Mutant(
        "static-shard-assignment",
        "shards (here: runs) dealt to ranks and workers in storage order, never reshuffled (static assignment)",
        "epoch_stream",
        (("order = np.random.default_rng([seed, epoch]).permutation(len(first))", "order = np.arange(len(first))"),),
        **WEBDATASET_ONLY,
    ),
    Mutant(
        "whole-shards-in-turn",
        "each worker reads whole shards one after the other instead of short runs from all over the data",
        "epoch_stream",
        (
            (
                "first, end = run_bounds(shard_sizes, sizes.run_samples)",
                "first, end = run_bounds(shard_sizes, int(shard_sizes.max()))",
            ),
        ),
        **WEBDATASET_ONLY,
    ),
    # 10. The memory backend loading the whole data set in every rank.
    Mutant(
        "memory-copy-per-rank",
        "the memory backend loads the whole data set into every rank",
        "MemoryDataset._map",
        (
            (
                'self.payloads = self.shared["payloads"].as_bytes()',
                'self.payloads = np.array(self.shared["payloads"].as_bytes())',
            ),
        ),
        backends=("memory",),
        samplers=("global",),  # memory_backend.py is the same file for every sampler
        only_test="tests/test_memory_once_per_node.py",
    ),
]

# 11. A backend that reads the record of another position while reporting the requested key
# (an off-by-one in an index): caught only because keys come from the stored record.
MUTANTS += [
    Mutant(
        "wrong-record",
        "the memory backend reads the next record but reports the requested key",
        "MemoryDataset.read_records",
        (
            (
                "rows = self.index[np.asarray(positions)]",
                "rows = self.index[(np.asarray(positions) + 1) % len(self.index)]",
            ),
            ("Record(key.decode(), label,", 'Record(f"{requested:08d}", label,'),
            (
                "for (key, label, extension, offset, size), other in zip(rows.tolist(), fields, strict=True)",
                "for requested, (key, label, extension, offset, size), other in zip(positions, rows.tolist(), fields)",
            ),
        ),
        backends=("memory",),
        samplers=("global",),  # the backend and the loader are the same files for every sampler
    ),
    Mutant(
        "wrong-record",
        "the files backend reads the next file but reports the requested key",
        "FilesDataset.read_records",
        (
            (
                "relative, size, digest, label = self.files.entry(position)",
                "relative, size, digest, label = self.files.entry((position + 1) % len(self.files))",
            ),
            (
                'key, _, extension = relative.rpartition("/")[2].partition(".")',
                '_, _, extension = relative.rpartition("/")[2].partition(".")\n            key = f"{position:08d}"',
            ),
        ),
        backends=("files",),
        samplers=("global",),  # the backend and the loader are the same files for every sampler
    ),
    Mutant(
        "arrow-pickles-the-mapping",
        "the arrow backend pickles its memory-mapped tables into every spawned DataLoader worker: a copy of the data each",
        "ArrowDataset.__getstate__",
        (('return {**self.__dict__, "tables": None, "_views": None}', 'return {**self.__dict__, "_views": None}'),),
        backends=("arrow",),
        samplers=("global",),  # the backend is the same file for every sampler
        first_test="tests/test_loader.py",
    ),
    Mutant(
        "wrong-record",
        "the arrow backend gathers the next rows but reports the requested keys",
        "ArrowDataset.read_records",
        (
            (
                "positions = np.asarray(positions, dtype=np.int64)\n",
                "requested = list(positions)\n        positions = (np.asarray(positions, dtype=np.int64) + 1) % len(self)\n",
            ),
            ("records.append(Record(key, label,", 'records.append(Record(f"{requested[len(records)]:08d}", label,'),
        ),
        backends=("arrow",),
        samplers=("global",),  # the backend and the loader are the same files for every sampler
    ),
]

# 12. Hardening that must stay: payloads checked on read, ranks that end with their launcher.
MUTANTS += [
    Mutant(
        "payload-unchecked",
        "the files backend trains on whatever bytes it reads (no sha256 check)",
        "FilesDataset.read_checked",
        (("if hashlib.sha256(data).digest() != digest:", "if False:"),),
        backends=("files",),
        samplers=("global",),  # the backend is the same file for every sampler
        only_test="tests/test_map_style_refusals.py",
    ),
    Mutant(
        "payload-unchecked",
        "the arrow backend trains on whatever bytes it reads (no sha256 check)",
        "ArrowDataset.read_records",
        (("if sample_digest(payload, fields) != digest:", "if False:"),),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_map_style_refusals.py",
    ),
    Mutant(
        "field-unchecked",
        "the files backend checks each payload's sha256 but reads the samples' other fields unchecked",
        "FilesDataset.read_fields",
        (
            (
                "(name, kind, self.read_checked(field_path(path, name), size, digest.tobytes()))",
                "(name, kind, read_file(field_path(path, name), size))",
            ),
        ),
        backends=("files",),
        samplers=("global",),
        only_test="tests/test_loader.py::test_a_changed_byte_in_a_stored_field_is_refused_on_read",
    ),
    Mutant(
        "field-unchecked",
        "the arrow backend's row sha256 covers the payload alone: a changed byte in a field is trained on",
        "ArrowDataset.read_records",
        (
            ("if sample_digest(payload, fields) != digest:", "if sample_digest(payload, ()) != digest:"),
            (
                "SampleWriter.add",
                "sample_digest(sample.payload, fields), sample.payload",
                "sample_digest(sample.payload, ()), sample.payload",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_loader.py::test_a_changed_byte_in_a_stored_field_is_refused_on_read",
    ),
    Mutant(
        "payload-unchecked",
        "the webdataset backend trains on whatever bytes a run holds (no digest check against the sample index)",
        "checked_run",
        (("if layout.digest(sample) != digests[offset]:", "if False:"),),
        backends=("webdataset",),
        samplers=("shard_buffer",),
        only_test="tests/test_bad_shards.py",
    ),
    Mutant(
        "field-unchecked",
        "the webdataset sample digest covers the payload and the label only: a changed caption or record is trained on",
        "sample_digest",
        (('        digest.update(len(data).to_bytes(8, "little") + data)', "        pass"),),
        backends=("webdataset",),
        samplers=("shard_buffer",),
        only_test="tests/test_wds_fields.py",
    ),
    Mutant(
        "ranks-outlive-launcher",
        "ranks keep training after torchrun is killed with SIGKILL (no parent-death signal)",
        "train.main",
        (("            end_with_launcher()", "            pass"),),
        backends=("memory",),  # launcher_watch.py and its call are the same for every backend
        samplers=("global",),
        only_test="tests/test_launch.py::test_one_run_per_run_folder_and_a_killed_launcher_leaves_neither_ranks_nor_lock_nor_scratch",
    ),
]

# 13. Mistakes a ledger alone would not show.
MUTANTS += [
    Mutant(
        "ddp-bypassed",
        "the forward pass goes through model.module: DDP never synchronises the gradients",
        "Recipe.step",
        (("                    logits = model(xs)", "                    logits = model.module(xs)"),),
        backends=("arrow",),  # recipe.py's step is the same for every backend: one render suffices
        samplers=("global",),
        only_test="tests/test_train_end_to_end.py",
    ),
    Mutant(
        "unseeded-model",
        "the model is initialised without the seed: two runs with one seed train differently",
        "train",
        (("    torch.manual_seed(recipe.seed)\n", ""),),
        **WEBDATASET_ONLY,
        only_test="tests/test_train_end_to_end.py",
    ),
    Mutant(
        "order-from-hash",
        "the epoch order mixes in hash() of a string, which differs between processes",
        "epoch_order",
        (("np.random.default_rng([seed, epoch])", 'np.random.default_rng([seed, epoch, hash("order") % 1000])'),),
        samplers=("global",),
        only_test="tests/test_order_across_processes.py",
    ),
    Mutant(
        "order-from-hash",
        "the shard order mixes in hash() of a string, which differs between processes",
        "epoch_stream",
        (
            (
                "np.random.default_rng([seed, epoch]).permutation",
                'np.random.default_rng([seed, epoch, hash("order") % 1000]).permutation',
            ),
        ),
        **WEBDATASET_ONLY,
        only_test="tests/test_order_across_processes.py",
    ),
]

# 14. What issue "Hardening" found surviving the suite: a held-out set that overlaps the
# training set, a loader that keeps an old epoch, ranks that decide alone whether to
# evaluate, and a memory backend that names its shared memory or trusts it unchecked.
MUTANTS += [
    Mutant(
        "heldout-overlap",
        "prep synthetic draws the held-out samples from the training stream",
        "prep.synthetic",
        (("seed, stream=1, image_size=image_size)", "seed, stream=0, image_size=image_size)"),),
        backends=("files",),  # prep and sources are the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep.py",
    ),
    Mutant(
        "heldout-overlap",
        "a held-out split (prep folder/table) whose samples stay in the training set too",
        "split_heldout",
        (('source.subset(~heldout, {"split": "training"', 'source.subset(heldout | ~heldout, {"split": "training"'),),
        backends=("memory",),
        samplers=("global",),
        only_test="tests/test_prep.py",
    ),
    Mutant(
        "loader-keeps-old-epoch",
        "the loader keeps the batch plan of the first epoch it served",
        "RankLoader.epoch",
        (
            (
                "batch_sampler=PlannedBatches(self.plan(epoch, done)),",
                'batch_sampler=self.__dict__.setdefault("first_plan", PlannedBatches(self.plan(epoch, done))),',
            ),
        ),
        backends=("arrow",),  # loader.py is the same for every map-style backend and sampler
        samplers=("global",),
        # its killer, late in test_loader, which comes after the whole of test_epoch_plan
        only_test="tests/test_loader.py::test_one_loader_object_follows_the_plan_of_every_epoch",
    ),
    Mutant(
        "loader-keeps-old-epoch",
        "the loader keeps the workers' stream of the first epoch it served",
        "RankLoader.epoch",
        (
            (
                "RankEpoch(self.dataset, part),",
                'self.__dict__.setdefault("first_epoch", RankEpoch(self.dataset, part)),',
            ),
        ),
        **WEBDATASET_ONLY,
        # its killer, after test_shard_loader's prep tests (17 s of a full run before it)
        only_test="tests/test_shard_loader.py::test_one_loader_object_follows_the_plan_of_every_epoch",
    ),
    Mutant(
        "heldout-decided-per-rank",
        "each rank decides alone whether a held-out set exists (ranks disagree when one cannot see it)",
        "heldout_location",
        (
            (
                "return broadcast_object(str(location) if rank == 0 and location.is_dir() else None, src=0)",
                "return str(location) if location.is_dir() else None",
            ),
        ),
        backends=("files",),  # the map-style train.py is the same for every sampler
        samplers=("global",),
        only_test="tests/test_launch.py::test_ranks_agree_on_the_heldout_set_when_one_rank_cannot_see_it",
    ),
    Mutant(
        "named-shared-memory",
        "the memory backend copies the data set into a named file in /dev/shm",
        "SharedFile.copy_of",
        (
            (
                'fd = os.memfd_create(f"{PACKAGE}-{name}")',
                'fd = os.open(f"/dev/shm/mutant-named-shared-memory-{name}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)',
            ),
        ),
        backends=("memory",),
        samplers=("global",),
        # Not the package's name: the /dev/shm checks of the other projects tested at the same time
        # look for that name and would see this mutant's files come and go.
        leaves=("/dev/shm/mutant-named-shared-memory-*",),
        first_test="tests/test_memory_once_per_node.py",  # its killer, late in the order
    ),
    Mutant(
        "shared-copy-unchecked",
        "the memory backend shares the node's copy without checking its sha256",
        "SharedFile.copy_of",
        (("            if digest.hexdigest() != sha256:", "            if False:"),),
        backends=("memory",),
        samplers=("global",),
        first_test="tests/test_map_style_refusals.py",  # its killer, late in the order
    ),
]

# 15. An HTTP client that gives up too soon, retries what cannot mend, or forgets where a
# broken shard stopped (http_stream.py, webdataset over HTTP).
MUTANTS += [
    Mutant(
        "http-permanent-retried",
        "every HTTP error is retried, 404 and 403 included (a missing shard stalls the run for the whole backoff)",
        "is_transient",
        (("    return status in (408, 429) or (status >= 500 and status != 501)", "    return True"),),
        **WEBDATASET_ONLY,
        first_test="tests/test_http_faults.py",  # the HTTP client's faults, late in the order
    ),
    Mutant(
        "http-no-resume",
        "a request without Range: a run (or a broken one) is read from the shard's first byte, not from where it starts or broke",
        "HTTPStream.request",
        (('headers = {"Range": f"bytes={self.position}-{last}"} if self.position or last else {}', "headers = {}"),),
        **WEBDATASET_ONLY,
        first_test="tests/test_http_faults.py",  # the HTTP client's faults, late in the order
    ),
    Mutant(
        "http-pool-shared-across-fork",
        "DataLoader workers reuse the kept-alive connections of the process they were forked from",
        "take_connection",
        (('if getattr(_idle, "pid", None) != os.getpid():', 'if getattr(_idle, "pid", None) is None:'),),
        **WEBDATASET_ONLY,
        # The test that counts connections, one per process: its parent's connection is idle when the
        # workers fork (in the faults test a retry may have closed it, and the kill is chance).
        only_test="tests/test_http_faults.py::test_each_run_is_one_range_request_over_one_kept_alive_connection_per_process",
    ),
]

# 16. Resume (issue "Runs that survive"): what a resumed run gets wrong without a test
# comparing it with an uninterrupted one.
MUTANTS += [
    Mutant(
        "resume-restarts-epoch",
        "a resumed run starts the interrupted epoch again from step 0",
        "train",
        (("            done = start.done if epoch == start.epoch else ()", "            done = ()"),),
        backends=("files",),  # train.py's loop is the same for every backend
        samplers=("global",),
        only_test="tests/test_resume.py::test_a_stopped_run_resumed_writes_the_ledger_and_weights_of_an_uninterrupted_run",
    ),
    Mutant(
        "resume-forgets-rng",
        "a resumed run draws its dropout from a fresh seed instead of the checkpoint's random state",
        "restore",
        (('        restore_rng(ranks[rank]["rng"])', "        seed_rank(seed, rank)"),),
        backends=("arrow",),
        samplers=("global",),
        # what restore() does, at the function level; the resumed run of test_resume (processes)
        # sees it too, as the ledger and weights of an uninterrupted run
        only_test=RESTORED,
    ),
    Mutant(
        "resume-forgets-buffer",
        "a resumed worker skips the samples it had read and fills a fresh buffer, instead of replaying the buffer",
        "mixed_batches",
        (
            ("rng=rng)(iter(items))", "rng=rng)(iter(list(items)[skip * batch_size :]))"),
            ("        if index >= skip:", "        if True:"),
        ),
        **WEBDATASET_ONLY,
    ),
    Mutant(
        "resume-ledger-appended",
        "a resumed run appends to the ledger without dropping the steps after its checkpoint",
        "LedgerWriter.__init__",
        (("                truncate_before(path, *resume_at)", "                pass"),),
        backends=("memory",),  # ledger.py is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_ledger.py",
    ),
    Mutant(
        "elastic-redeals-everything",
        "a run resumed on another number of ranks deals the whole epoch again to the new ranks",
        "epoch_plan",
        (
            (
                "    rest = order[sum(stretch.steps * stretch.world_size for stretch in done) * batch_size :]",
                "    rest = order",
            ),
        ),
        backends=("memory",),
    ),
    Mutant(
        "elastic-redeals-everything",
        "a run resumed on other sizes deals the whole epoch again to the new ranks and workers",
        "epoch_stream",
        (("    kept[delivered] = False\n", ""),),
        **WEBDATASET_ONLY,
    ),
]
