"""Mutants of the contrastive task (issue 38 section 3): mistakes of its loss, applied to its one
render (variants.TASK_RENDERS: webdataset) and killed by the generated test named in `only_test`
(verified by hand: applied to a render, that test fails; restored, it passes)."""

from __future__ import annotations

from mutants_framework import Mutant, task_render

MUTANTS = [
    Mutant(
        "contrastive-local-negatives",
        "each rank's contrastive loss takes its negatives from its own share of the batch only (no gather): "
        "the loss and gradients of 2 ranks are no longer those of the global batch",
        function="contrastive_loss",
        edits=(
            ("    images = gathered(image_embeddings, sizes)", "    images = image_embeddings"),
            ("    texts = gathered(text_embeddings, sizes)", "    texts = text_embeddings"),
            ("    first = sum(sizes[:rank])", "    first = 0"),
        ),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::"
        "test_two_ranks_with_part_of_the_batch_each_give_the_loss_and_gradients_of_one_process_with_all_of_it",
    ),
]
