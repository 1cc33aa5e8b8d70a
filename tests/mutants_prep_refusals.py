"""Mutants of issue 43 (prep too forgiving): in-place `prep webdataset` indexing a shard cut short,
a key two shards hold, or failing in a folder it cannot write in with a traceback; `prep hf` making
class names of a float column; `prep folder` dropping a link to nothing or a FIFO without a word.
Each is killed by the generated test named in `only_test` (checked with test_mutants_are_killed -k)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

IN_PLACE = "tests/test_wds_in_place.py::"

MUTANTS = [
    Mutant(
        "truncated-shard-indexed",
        "a shard cut where a sample's header begins is indexed as a shard of fewer samples, without a word",
        function="ends_as_a_tar",
        edits=(("    if tail == END_OF_ARCHIVE:\n", "    if True:\n"),),
        **one_render("webdataset"),  # wds_shards.py is the same for every sampler
        only_test=IN_PLACE + "test_a_shard_cut_short_or_damaged_is_refused_naming_it",
    ),
    Mutant(
        "key-of-two-shards-indexed",
        "shards indexed in place may hold one key twice (a shard copied): two samples answer to one name",
        function="each_key_once",
        edits=(("    if not repeats.size:\n", "    if True:\n"),),
        **one_render("webdataset"),
        only_test=IN_PLACE + "test_a_key_two_shards_hold_is_refused_naming_the_key_and_both_shards",
    ),
    Mutant(
        "refused-index-leaves-held-out-index",
        "a training index refused after the held-out set's was written leaves the held-out index behind",
        function="in_place.index_in_place",
        edits=(("        elif held is not None:", "        elif False:"),),
        **one_render("webdataset"),
        only_test=IN_PLACE + "test_a_key_two_shards_hold_is_refused_naming_the_key_and_both_shards",
    ),
    Mutant(
        "read-only-shard-folder-traceback",
        "in-place prep in a folder it cannot write in ends with a PermissionError traceback",
        function="in_place.indexable",
        edits=(("        writable(folder)\n", "        pass\n"),),
        **one_render("webdataset"),
        only_test=IN_PLACE + "test_a_folder_prep_cannot_write_in_is_refused_in_one_line_naming_the_fix",
    ),
    Mutant(
        "float-label-column-made-classes",
        "prep hf --label-column naming a float column makes a class of every value",
        function="label_column_of",
        edits=(("        if not can_be_class(schema.field(wanted), features.get(wanted)):", "        if False:"),),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_hf_fields.py::"
        "test_a_float_label_is_a_number_and_named_as_the_class_is_refused_in_one_line",
    ),
    Mutant(
        "folder-drops-links-to-nothing-and-fifos",
        "prep folder leaves out a link to nothing or a FIFO in a class folder without a word",
        function="class_folders.folder",
        edits=(
            (
                '        unusable += [f"{path.relative_to(root).as_posix()} ({not_a_file(path)})" for path in others]\n',
                "",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_prep_verification.py::"
        "test_a_link_to_nothing_or_a_fifo_in_a_class_folder_is_named_and_never_opened",
    ),
    Mutant(
        "integer-classes-sorted-as-text",
        "a plain integer class column's values sorted as text: classes 0..11 become '0', '1', '10', '11', '2', ..., "
        "so the samples of class 2 train as id 4",
        function="columns.rows",
        edits=(
            ("    ordered = sorted(values, key=int) if integers else sorted(values)", "    ordered = sorted(values)"),
        ),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep.py::test_integer_classes_keep_their_values_as_ids",
    ),
    Mutant(
        "unread-test-tree-not-said",
        "prep folder of train/, val/ and test/ leaves test/ out without a word: the user believes it was used",
        function="prep.folder",
        edits=(
            ("            for unread in class_folders.unread_trees(src, trees[1]):", "            for unread in []:"),
        ),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep.py::test_a_folder_of_train_and_val_trees_holds_out_the_val_tree_exactly",
    ),
]
