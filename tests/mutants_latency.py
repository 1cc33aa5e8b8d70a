"""Mutants of the webdataset read path over a network (issue 21): several requests in flight,
samples handed on in plan order, the retry budget a time. Each was applied to a render by hand
and its test seen to fail."""

from mutants_framework import Mutant, one_render

WEBDATASET = one_render("webdataset")
IN_FLIGHT_TEST = (
    "tests/test_http_faults.py::test_with_several_requests_in_flight_the_loader_delivers_exactly_the_epoch_plan"
)

MUTANTS = [
    Mutant(
        "completion-order",
        "samples are handed on in the order their requests complete, not in the plan's order",
        function="read_ahead",
        edits=(
            (
                "shard, first, end, fetched = pending.popleft()",
                "shard, first, end, fetched = min(pending, key=lambda p: not p[3].done()); "
                "pending.remove((shard, first, end, fetched))",
            ),
        ),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "in-flight-unbounded",
        "a worker keeps four times --requests-in-flight requests in flight (memory and server load past the bound)",
        function="read_ahead",
        edits=(
            ("ThreadPoolExecutor(max_workers=in_flight,", "ThreadPoolExecutor(max_workers=4 * in_flight,"),
            (
                "itertools.islice(requests, in_flight - len(pending))",
                "itertools.islice(requests, 4 * in_flight - len(pending))",
            ),
        ),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "in-flight-ignored",
        "a served data set is read one request at a time whatever --requests-in-flight says (one run per round trip)",
        function="ShardDataset.samples",
        edits=(("if self.served and in_flight > 1:", "if False:"),),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "retry-budget-a-count",
        "the HTTP client gives up after 5 attempts (a fraction of a second to seconds of outage), not after --retry-seconds",
        function="HTTPStream.recover",
        edits=(("spent = now + wait - self.first_failure > self.retry_seconds", "spent = self.failures >= 5"),),
        **WEBDATASET,
        only_test="tests/test_http_faults.py::test_an_outage_within_the_retry_budget_is_ridden_out",
    ),
]

CACHE_TEST = "tests/test_shard_cache.py"
SECOND_RUN_TEST = (
    f"{CACHE_TEST}::test_a_second_run_on_two_ranks_with_a_full_cache_asks_the_server_for_the_manifest_alone"
)
MUTANTS += [
    Mutant(
        "cache-not-keyed-by-manifest",
        "the node-local cache keeps every version of a data set under one name (one version's entries meet another's)",
        function="ShardCache.__init__",
        edits=(("self.folder = Path(root) / manifest_digest(manifest)", 'self.folder = Path(root) / "data"'),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_entries_of_another_version_of_the_data_are_never_used",
    ),
    Mutant(
        "cache-limit-ignored",
        "the node-local cache keeps every block it reads, past --cache-bytes",
        function="ShardCache.reserve",
        edits=(("if used + size > self.limit:", "if False:"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_smaller_cache_never_exceeds_its_limit_and_the_epochs_are_unchanged",
    ),
    Mutant(
        "cache-entry-not-locked",
        "two readers of one node that miss the same shard both download it (no per-entry lock)",
        function="entry_lock.__enter__",
        edits=(("fcntl.flock(self.file, fcntl.LOCK_EX)", "pass"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_two_readers_of_one_node_download_each_shard_once",
    ),
    Mutant(
        "cache-corrupt-entry-kept",
        "a cache entry that fails its digest is read from the server for this epoch but stays in the cache",
        function="ShardDataset.cached_samples",
        edits=(
            ("self.cache.drop(self.cache.shard_entry(shard))\n", "pass\n"),
            (
                "data, cached = self.fetch_cached(reader, shard, first, end)",
                "data, cached = fetch_run(reader, shard, self.index, first, end)[1], False",
            ),
        ),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_corrupt_entry_is_dropped_and_fetched_again_never_used",
    ),
    Mutant(
        "cache-corrupt-entry-fatal",
        "a cache entry that fails its digest ends the run (as if the server's bytes were bad) instead of being fetched again",
        function="ShardDataset.fetch_cached",
        edits=(("return data, True", "return data, False"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_corrupt_entry_is_dropped_and_fetched_again_never_used",
    ),
    Mutant(
        "full-cache-disk-fatal",
        "a write the disk under --cache-dir refuses (full, a quota) ends the run with a traceback in the DataLoader "
        "workers, and restarts that meet it again, where a full cache only stops caching",
        function="ShardCache.write",
        edits=(("        except OSError as err:\n", "        except ZeroDivisionError as err:\n"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_disk_that_fills_stops_the_keeping_not_the_reading",
    ),
    Mutant(
        "full-cache-leaves-partials",
        "a refused write leaves its temporary file behind, filling the disk further",
        function="ShardCache.write",
        edits=(
            (
                "                partial.unlink(missing_ok=True)\n            self.reserve(-size)\n            self.stop_keeping",
                "                pass\n            self.reserve(-size)\n            self.stop_keeping",
            ),
        ),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_disk_that_fills_stops_the_keeping_not_the_reading",
    ),
    Mutant(
        "full-cache-said-by-every-process",
        "every process of the node that meets the full disk prints the warning, not the first of the run alone",
        function="ShardCache.stop_keeping",
        edits=(("            return  # another process of this run said so\n", "            pass\n"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_disk_that_fills_stops_the_keeping_not_the_reading",
    ),
    Mutant(
        "cache-usage-garbled-fatal",
        "a usage file that holds no number ends the run with a ValueError instead of being counted again",
        function="ShardCache.reserve",
        edits=(("int(text) if text.isdigit() else self.counted() if text else 0", "int(text or 0)"),),
        **WEBDATASET,
        only_test=f"{CACHE_TEST}::test_a_disk_that_fills_stops_the_keeping_not_the_reading",
    ),
    Mutant(
        "cache-index-not-kept",
        "the node-local cache keeps the shards but not the sample index: every rank of every run downloads it again",
        function="ShardDataset.read_index",
        edits=(
            (
                "            if self.cache is None:\n                raw = fetch()",
                "            if True:\n                raw = fetch()",
            ),
        ),
        **WEBDATASET,
        only_test=SECOND_RUN_TEST,
    ),
    Mutant(
        "cache-heldout-not-kept",
        "the held-out set is read from the server every epoch of every run, never through the node-local cache",
        function="open_heldout",
        edits=(("    if dataset.cache is None:\n", "    if True:\n"),),
        **WEBDATASET,
        only_test=SECOND_RUN_TEST,
    ),
    Mutant(
        "cache-heldout-asked-first",
        "whether a held-out set is there is asked of the server before the node-local cache is consulted",
        function="heldout_of",
        edits=(
            (
                "    if (cache.folder / HELDOUT / MANIFEST).is_file():\n",
                "    if heldout_beside(dataset.location, retry) and (cache.folder / HELDOUT / MANIFEST).is_file():\n",
            ),
        ),
        **WEBDATASET,
        only_test=SECOND_RUN_TEST,
    ),
    Mutant(
        "cache-shards-checked-at-the-store",
        "train.sh's start-up check asks the store for every shard's size (a HEAD each), those the cache holds too",
        function="ShardDataset.check_shards",
        edits=(("held = self.cache.holds if self.cache is not None else None", "held = None"),),
        **WEBDATASET,
        only_test=SECOND_RUN_TEST,
    ),
    Mutant(
        "cache-consulted-after-the-request",
        "each run is asked of the server first and the node-local cache consulted after: a full cache saves no request",
        function="ShardDataset.fetch_cached",
        edits=(
            (
                "        data = self.cache.read(",
                "        fetch_run(reader, shard, self.index, first, end)\n        data = self.cache.read(",
            ),
        ),
        **WEBDATASET,
        only_test=SECOND_RUN_TEST,
    ),
    Mutant(
        "cache-ignores-in-place-keys",
        "the node-local cache checks a run's samples against storage positions, not the keys of shards indexed in "
        "place: their data fails through a cache though it reads from the folder or the server",
        function="ShardDataset.cached_samples",
        edits=(
            (
                'server again; bytes from the server that fail end the run."""\n',
                'server again; bytes from the server that fail end the run."""\n        keys = None\n',
            ),
        ),
        **WEBDATASET,
        only_test="tests/test_wds_in_place.py::"
        "test_shards_indexed_in_place_and_served_read_through_a_node_cache_as_from_the_folder",
    ),
]
