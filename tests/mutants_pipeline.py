"""Mutants of the pipeline remnants of issues 18, 19 and 20: the epoch's sizes as one value, path
options no file system can hold, the rendezvous timeout's NODE_RANKs, the bench's decode row and
its loader variants, prep hf by cache name and in flat memory; and the audit's shard mix (issue
38). Each is killed by the generated test named in `only_test` (verified by hand: applied to a
render, that test fails; restored, it passes)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

MEMORY_ONLY = one_render("memory")  # the file is the same for every backend
WEBDATASET_ONLY = one_render("webdataset")
ARROW_ONLY = one_render("arrow")  # sources/hugging_face.py is the same for every backend

MUTANTS = [
    Mutant(
        "stretch-sizes-keep-workers",
        "the sizes of an earlier stretch of a resumed epoch keep the new number of workers: what it delivered is "
        "found from another plan, and an elastic resume on other workers deals samples twice",
        function="EpochSizes.with_processes",
        edits=(
            ("replace(self, world_size=world_size, num_workers=num_workers)", "replace(self, world_size=world_size)"),
        ),
        **WEBDATASET_ONLY,
        only_test="tests/test_shard_plan.py::test_an_epoch_resumed_on_any_sizes_keeps_the_guarantees",
    ),
    Mutant(
        "nul-path-usage-box",
        "a NUL byte in a path option is left to typer: a usage box instead of one error line",
        function="checked_path",
        edits=(("        end_with_one_line(NUL_IN_PATH)\n    except OSError", "        raise\n    except OSError"),),
        **MEMORY_ONLY,
        only_test="tests/test_path_options.py",
    ),
    Mutant(
        "long-path-traceback",
        "a path option with a name longer than the file system allows passes: a traceback where it is first opened",
        function="checked_path",
        edits=(("if err.errno == errno.ENAMETOOLONG:", "if False:"),),
        **MEMORY_ONLY,
        only_test="tests/test_path_options.py",
    ),
    Mutant(
        "timeout-names-only-this-node",
        "the rendezvous timeout's line names only the node that prints it, not the NODE_RANKs that came",
        function="Arrivals.came",
        edits=(
            (
                "return sorted(self.seen)",
                "return [self.node_rank]",
            ),
        ),
        **MEMORY_ONLY,
        only_test="tests/test_arrivals.py",
    ),
    Mutant(
        "arrivals-never-forget",
        "a node that came and then died is still named as there: its stamp never grows old",
        function="Arrivals.poll",
        edits=((" and clock - int(store.get(self.key(node))) <= GONE_AFTER_TICKS:", ":"),),
        **MEMORY_ONLY,
        only_test="tests/test_arrivals.py",
    ),
    Mutant(
        "node-0-blames-another-node",
        "node 0, whose rendezvous another waiting node closed first, says the run ended on another node "
        "instead of naming who came",
        function="rendezvous_failure",
        edits=(
            (
                "another_gave_up = left and not started and came and missing",
                "another_gave_up = left and layout.node_rank != 0 and not started and came and missing",
            ),
        ),
        **MEMORY_ONLY,
        only_test="tests/test_arrivals.py",
    ),
    Mutant(
        "decode-row-decodes-fewer",
        "the bench's decode row decodes one sample of each batch and reports the epoch's samples as decoded",
        function="decoded_batches",
        edits=(
            ('decode_records(batch["records"], num_classes,', 'decode_records(batch["records"][:1], num_classes,'),
            ("decode_pass", 'samples += len(decoded["key"])', "samples += len(extensions)"),
        ),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "full-scale-row-reduced",
        "the bench's full-scale decode row decodes JPEGs at the reduced scale too: it reports no gain",
        function="decode_image_drawn",
        edits=(("if reduced_scale and image.format == ", "if image.format == "),),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "bench-variant-keeps-sizes",
        "a bench row of the loader with other workers keeps the plan of the loader it copies (0 workers): "
        "one worker reads the whole stream, the others nothing",
        function="plan_workers",
        edits=(
            (
                "    variant.sizes = loader.sizes.with_processes(loader.world_size, num_workers)",
                "    variant.sizes = loader.sizes",
            ),
        ),
        **WEBDATASET_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "bench-ignores-image-size",
        "bench --image-size N decodes its loader rows at the loader's default size (32 px): a row says "
        "nothing of training at N",
        function="Training.loader",
        edits=(
            ("            image_size=self.image_size, augment=self.augment,\n", "            augment=self.augment,\n"),
        ),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "cores-from-wall-rate",
        "the cores line divides the GPU rate by the loader's samples per wall second, not per CPU-second: "
        "with K workers it says K times too few cores",
        function="cores_needed",
        edits=(("return gpu_rate / loader_row.samples_per_cpu_s", "return gpu_rate / loader_row.samples_per_s"),),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "decode-ceiling-decodes-fewer",
        "the decode ceiling decodes the first sample of each batch and counts the batch: a ceiling too high",
        function="ceiling_decodes",
        edits=(('        for record in batch["records"]:\n', '        for record in batch["records"][:1]:\n'),),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "bench-needs-matplotlib",
        "bench raises after measuring when matplotlib is missing: no table, exit 2",
        function="bench.figure",
        edits=(("        return False\n", '        raise DataError("matplotlib is not installed") from None\n'),),
        **MEMORY_ONLY,
        only_test="tests/test_bench_rows.py",
    ),
    Mutant(
        "bench-leaves-torchrun-logs",
        "the bench's memory-per-node ranks run without a log folder of their own: torchrun leaves a "
        "torchelastic_* folder in TMPDIR after every measurement",
        function="node_pss",
        edits=(('        "--log-dir", str(signals / "torchrun"),\n', ""),),
        **MEMORY_ONLY,
        only_test="tests/test_bench.py::test_a_run_measures_memory_per_node_with_real_ranks_and_leaves_none_behind",
    ),
    Mutant(
        "hf-name-not-in-cache",
        "prep hf looks a name up nowhere: a data set in the local Hugging Face cache is refused as a missing folder",
        function="hugging_face.locate",
        edits=(
            (
                "    return cached(source, split)",
                '    raise DataError(f"{source} is not a file or folder: pass a Hugging Face data set\'s file or folder")',
            ),
        ),
        **ARROW_ONLY,
        only_test="tests/test_prep_hf_cache.py",
    ),
    Mutant(
        "hf-prep-holds-the-table",
        "prep hf reads each parquet file into one table: its memory grows with the data set",
        function="hugging_face.file_batches",
        edits=(
            (
                "yield from pq.ParquetFile(path).iter_batches(batch_size=HF_CHUNK_ROWS, columns=columns)",
                "yield from pq.read_table(path, columns=columns).to_batches(max_chunksize=HF_CHUNK_ROWS)",
            ),
        ),
        **ARROW_ONLY,
        only_test="tests/test_prep_hf_streaming.py",
    ),
    Mutant(
        "shard-mix-counts-classes",
        "audit --stratify-by shard counts classes: on label-sorted data its figures look plausible, and are the "
        "label mix",
        function="chosen_strata",
        edits=(
            (
                '    if stratify_by == "shard":\n        return shards, []',
                '    if stratify_by == "shard":\n        return class_strata(labels), []',
            ),
        ),
        **ARROW_ONLY,
        only_test="tests/test_audit.py::test_shard_mix_is_ideal_after_a_shuffle_and_clumped_in_storage_order",
    ),
]
