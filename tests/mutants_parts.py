"""Mutants of issue 41 (prep that scales out): parts whose slices overlap, parts that key their
samples from 0 each, a part of a shuffled data set stored in the source's order, a join that writes
the data set before it has checked every part; in a bucket, a part whose marker goes up before its
files and a join that downloads the shards; shards indexed in place in parts whose join numbers each
part's samples from 0. Each is killed by the generated test named in `only_test` (checked with
test_mutants_are_killed -k)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

PARTS = "tests/test_prep_parts.py::"
IN_PLACE = "tests/test_wds_in_place.py::"
IN_BUCKET = "tests/test_s3.py::test_two_parts_prepared_into_a_bucket_and_joined_there_are_the_data_set_one_prep_writes"

MUTANTS = [
    Mutant(
        "part-stored-in-the-sources-order",
        "a part of a shuffled webdataset stores its samples in the source's order, not in its slice of the whole's "
        "storage shuffle: the joined data set holds other samples at each position than one prep's",
        function="part_of",
        edits=(("np.searchsorted(chosen, wanted)", "np.arange(len(chosen))"),),
        **one_render("webdataset"),
        only_test=PARTS + "test_two_parts_joined_are_the_data_set_one_prep_writes",
    ),
    Mutant(
        "part-slices-overlap",
        "each part's slice takes the next part's first sample too: a sample stored twice in the joined data set",
        function="slice_of",
        edits=(("num_samples * (part + 1) // parts\n", "min(num_samples * (part + 1) // parts + 1, num_samples)\n"),),
        **one_render("arrow"),  # sources/parts.py is the same for every backend and sampler
        only_test=PARTS + "test_the_parts_slices_hold_every_position_once",
    ),
    Mutant(
        "parts-keyed-from-zero",
        "every part keys its samples from 0, not from its first position in the whole: two samples answer to one key",
        function="write_part",
        edits=(("write(source, tmp, first_key=start, **settings)", "write(source, tmp, **settings)"),),
        **one_render("arrow"),
        only_test=PARTS + "test_two_parts_joined_are_the_data_set_one_prep_writes",
    ),
    Mutant(
        "join-writes-before-checking-parts",
        "join writes the joined manifests first and checks the parts' shards after: a refused join leaves a data set",
        function="join_folders",
        edits=(
            (
                "    for sets in (training, heldout):\n        for root, manifest in sets:\n"
                "            check_part_files(out, root.relative_to(out).as_posix(), manifest, where, size_of)\n"
                '    if heldout:\n        joined_set(out / "heldout", heldout, len(markers))\n'
                "    return joined_set(out, training, len(markers))",
                '    if heldout:\n        joined_set(out / "heldout", heldout, len(markers))\n'
                "    count = joined_set(out, training, len(markers))\n    for sets in (training, heldout):\n"
                "        for root, manifest in sets:\n"
                "            check_part_files(out, root.relative_to(out).as_posix(), manifest, where, size_of)\n"
                "    return count",
            ),
        ),
        **one_render("arrow"),
        only_test=PARTS + "test_join_refuses_a_part_whose_shard_is_gone_and_writes_no_manifest",
    ),
    Mutant(
        "bucket-part-marker-first",
        "a part written into a bucket uploads its marker before its files: a part killed mid-upload looks finished, "
        "and a join reads a part that is not all there",
        function="upload_part",
        edits=(
            (
                "    object_store.remove(locate(url, marker))  # a part written again is unfinished from here on\n",
                "    object_store.put_file(scratch / marker, locate(url, marker))\n",
            ),
            ("    object_store.put_file(scratch / marker, locate(url, marker))  # last: the part is complete\n", ""),
        ),
        **one_render("webdataset"),
        only_test=IN_BUCKET,
    ),
    Mutant(
        "bucket-join-downloads-shards",
        "prep join s3://BUCKET/PREFIX downloads every part's shards with its small files: the whole data set moved "
        "through the one machine that joins",
        function="fetch_part",
        edits=(("if name in manifest]\n", 'if name in manifest] + [s["path"] for s in manifest["shards"]]\n'),),
        **one_render("webdataset"),
        only_test=IN_BUCKET,
    ),
    Mutant(
        "in-place-join-positions-from-zero",
        "the join of shards indexed in place in parts names each part's samples from position 0 in sources.jsonl, "
        "not from the part's first position in the whole: an error names another sample than the one it read",
        function="joined_slices",
        edits=(('sources.add(f"{count + int(position):08d}", source)', 'sources.add(f"{int(position):08d}", source)'),),
        **one_render("webdataset"),
        only_test=IN_PLACE + "test_shards_indexed_in_place_in_two_parts_and_joined_are_what_one_indexing_writes",
    ),
    Mutant(
        "bucket-in-place-join-manifest-first",
        "prep join s3://BUCKET/PREFIX of shards indexed in place in parts uploads the training index and its "
        "manifest.json before the held-out set's: a join stopped between them leaves a data set without its "
        "held-out index",
        function="join_in_place_in_bucket",
        edits=(
            (
                "in [*heldout_set, training_set]:  # the training manifest last",
                "in [training_set, *heldout_set]:",
            ),
        ),
        **one_render("webdataset"),
        only_test="tests/test_s3.py::"
        "test_shards_in_a_bucket_indexed_in_place_in_two_parts_and_joined_are_what_one_indexing_writes",
    ),
]
