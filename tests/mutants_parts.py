"""Mutants of issue 41 (prep that scales out): parts whose slices overlap, parts that key their
samples from 0 each, a part of a shuffled data set stored in the source's order, a join that writes the data set before it has checked every part. Each is
killed by the generated test named in `only_test` (checked with test_mutants_are_killed -k)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

PARTS = "tests/test_prep_parts.py::"

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
        function="join_parts",
        edits=(
            (
                "    for sets in (training, heldout):\n        for root, manifest in sets:\n"
                "            check_part_files(root, manifest)\n    if heldout:\n"
                '        joined_set(out / "heldout", heldout, parts)\n    return joined_set(out, training, parts)',
                '    if heldout:\n        joined_set(out / "heldout", heldout, parts)\n'
                "    count = joined_set(out, training, parts)\n    for sets in (training, heldout):\n"
                "        for root, manifest in sets:\n            check_part_files(root, manifest)\n    return count",
            ),
        ),
        **one_render("arrow"),
        only_test=PARTS + "test_join_refuses_a_part_whose_shard_is_gone_and_writes_no_manifest",
    ),
]
