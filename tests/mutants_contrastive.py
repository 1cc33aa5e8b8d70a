"""Mutants of the contrastive task (issue 38 section 3): mistakes of its loss and of its options
(--text-field, --embed-dim), applied to its one render (variants.TASK_RENDERS: webdataset) and killed by the generated test named in `only_test`
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
    Mutant(
        "text-field-ignored-by-step",
        "the training step reads the captions of the field named txt whatever --text-field says: a data set "
        "whose captions are in another field trains on its txt field, or fails without naming the option",
        function="Recipe.step",
        edits=(('images, texts = batch["x"], batch[self.text_field]', 'images, texts = batch["x"], batch["txt"]'),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_the_step_trains_on_the_text_field_chosen_not_on_another_text_field",
    ),
    Mutant(
        "text-field-ignored-by-score",
        "the held-out score embeds and compares the captions of the field named txt whatever --text-field says",
        function="Recipe.score",
        edits=(
            ("batch[self.text_field].to(device, non_blocking=True)", 'batch["txt"].to(device, non_blocking=True)'),
            (
                'caption_ids(batch[self.text_field], batch[f"{self.text_field}_lengths"])',
                'caption_ids(batch["txt"], batch["txt_lengths"])',
            ),
        ),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_the_score_matches_images_with_the_text_field_chosen",
    ),
    Mutant(
        "embed-dim-not-passed",
        "the model is built with the default embedding width, 64, whatever --embed-dim says",
        function="Recipe.build_model",
        edits=(("self.embed_dim, self.temperature)", "64, self.temperature)"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_both_towers_embed_in_embed_dim_dimensions",
    ),
    Mutant(
        "empty-share-of-default-width",
        "a rank with no held-out batch gathers empty embeddings 64 wide whatever --embed-dim says: with any "
        "other width its all_gather takes another shape than the other ranks'",
        function="Recipe.score",
        edits=(("empty = torch.zeros(0, self.embed_dim, device=device)", "empty = torch.zeros(0, 64, device=device)"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_a_rank_with_no_held_out_batch_gathers_embeddings_of_the_other_ranks_shape",
    ),
]
