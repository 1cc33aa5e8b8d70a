"""Mutants of issue 42 (splits from the source): a Hugging Face data set's own held-out split, shards
of SRC named by --heldout, and a folder's val/ tree, each taken as the held-out set and never trained on."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

MUTANTS = [
    Mutant(
        "heldout-split-ignored",
        "prep hf --heldout-split test holds out a tenth of train instead: the test split is never scored",
        function="prep.hf",
        edits=(
            (
                "        if heldout_split is None:\n            training, heldout, heldout_from",
                "        if True:\n            training, heldout, heldout_from",
            ),
        ),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_hf.py::test_heldout_split_holds_out_exactly_that_split_and_without_it_a_fraction_of_train",
    ),
    Mutant(
        "heldout-shards-also-trained",
        "the shards --heldout links into SRC/heldout stay in the training index too: the held-out accuracy"
        " measures memory",
        function="shard_paths",
        edits=(("        and file_id(p) not in held\n", ""),),
        **one_render("webdataset"),  # wds_shards.py is the same for every sampler
        only_test="tests/test_wds_in_place.py::"
        "test_heldout_names_the_shards_of_the_heldout_set_and_no_training_sample_is_among_them",
    ),
    Mutant(
        "heldout-shards-not-named",
        "prep webdataset SRC --heldout indexes every shard for training and has no held-out set",
        function="prep.webdataset",
        edits=(
            (
                "storing.index_in_place(src, label_member, label_field, verify, fields, heldout, index_to, in_parts)",
                "storing.index_in_place(src, label_member, label_field, verify, fields, None, index_to, in_parts)",
            ),
        ),
        **one_render("webdataset"),
        only_test="tests/test_wds_in_place.py::test_train_sh_trains_on_shards_indexed_in_place_with_every_guarantee",
    ),
    Mutant(
        "no-heldout-set-not-said",
        "shards indexed in place without a held-out set say nothing: every epoch prints heldout nan",
        function="storing.index_in_place",
        edits=(("    if came_from is None:\n", "    if False:\n"),),
        **one_render("webdataset"),
        only_test="tests/test_wds_in_place.py::"
        "test_heldout_names_the_shards_of_the_heldout_set_and_no_training_sample_is_among_them",
    ),
    Mutant(
        "heldout-class-ids-counted-apart",
        "held-out shards indexed in place list the classes their own labels reach: without the last class, train.sh"
        " refuses the pair",
        function="same_class_ids",
        edits=(('        if 0 < manifest["num_classes"] < num_classes:', "        if False:"),),
        **one_render("webdataset"),
        only_test="tests/test_wds_in_place.py::"
        "test_heldout_shards_without_the_last_class_get_the_training_sets_class_list",
    ),
    Mutant(
        "val-tree-ignored",
        "prep folder of train/ and val/ trees takes train and val for two classes, holding out a fraction of both",
        function="split_trees",
        edits=(("    if TRAINING_TREE not in names", "    if True or TRAINING_TREE not in names"),),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_prep.py::test_a_folder_of_train_and_val_trees_holds_out_the_val_tree_exactly",
    ),
    Mutant(
        "val-tree-classes-unchecked",
        "a val tree missing a class is prepared: its labels shift and the held-out accuracy is wrong (train.sh "
        "refuses it only later, at launch)",
        function="prep.same_schema",
        edits=(
            (
                'check_same_classes(heldout.classes, where, training.classes, other, fix="give both the same classes")',
                "pass",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_prep.py::test_a_val_tree_missing_a_class_is_refused_naming_it",
    ),
    Mutant(
        "heldout-share-bunched",
        "prep webdataset SRC --heldout 0.25 holds out the first shards, not shards spread over the storage order: "
        "data cut sorted by class or time holds out its first stretch only",
        function="heldout_share",
        edits=(("return [names[int((i + 0.5) * len(names) / count)] for i in range(count)]", "return names[:count]"),),
        **one_render("webdataset"),
        only_test="tests/test_wds_in_place.py::test_a_share_of_the_shards_is_held_out_evenly_spaced",
    ),
]
