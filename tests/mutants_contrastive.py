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
        edits=(
            ("self.embed_dim, self.temperature, tokenizer.vocab_size)", "64, self.temperature, tokenizer.vocab_size)"),
        ),
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
    Mutant(
        "tokenizer-not-given-to-the-workers",
        "the DataLoader workers decode captions as their UTF-8 bytes whatever tokenizer the recipe names: a run "
        "with --tokenizer trains on bytes",
        function="RankLoader.batch_maker",
        edits=(("augment=augment, tokenizer=self.tokenizer)", "augment=augment)"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_the_workers_tokenize_captions_with_the_tokenizer_the_recipe_names",
    ),
    Mutant(
        "token-ids-not-shifted-past-padding",
        "a tokenizer file's ids are handed on as it gives them: its id 0 (a real token) reads as padding, "
        "left out of the text tower's mean and of the caption's length",
        function="Tokenizer.encode",
        edits=(("return torch.from_numpy(ids + 1)", "return torch.from_numpy(ids)"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_the_workers_tokenize_captions_with_the_tokenizer_the_recipe_names",
    ),
    Mutant(
        "tokenizer-option-unchecked",
        "--tokenizer is not checked before the ranks start: a missing file or one that is no tokenizer fails "
        "in every DataLoader worker instead of in one line",
        function="Recipe.check",
        edits=(("        self.text_tokenizer()\n", ""),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_a_tokenizer_that_is_no_file_or_no_tokenizer_is_refused_in_one_line",
    ),
    Mutant(
        "texts-of-another-tokenizer-modelled",
        "the recipe builds its text tower from batches whatever tokenizer made them: loaders made without "
        "the recipe's tokenizer train a run on other ids than config.json records",
        function="Recipe.build_model",
        edits=(("if texts is not None and texts.dtype != tokenizer.dtype:", "if False:"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_a_model_is_not_built_for_texts_another_tokenizer_made",
    ),
    Mutant(
        "train-ignores-the-recipes-tokenizer",
        "train.py makes its loaders without the recipe's tokenizer: the run's workers hand on bytes",
        function="train.main",
        edits=(("augment=recipe.augment, tokenizer=recipe.text_tokenizer(),", "augment=recipe.augment,"),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_two_ranks_learn_to_match_held_out_images_with_their_captions",
    ),
    Mutant(
        "evaluate-ignores-the-recipes-tokenizer",
        "evaluate.py reads the held-out set without the tokenizer the run was trained with",
        function="evaluate.main",
        edits=(("            tokenizer=recipe.text_tokenizer(),\n", ""),),
        **task_render("contrastive"),
        only_test="tests/test_contrastive.py::test_two_ranks_learn_to_match_held_out_images_with_their_captions",
    ),
    Mutant(
        "synthetic-of-another-task",
        "the contrastive project's prep synthetic writes the classification task's images (no captions): the "
        "demo and a user's first data set cannot train the recipe",
        function="prep.synthetic",
        edits=(
            (
                "        training = synthetic_source(num_samples,",
                "        training = synthetic_images.synthetic(num_samples,",
            ),
            (
                "            synthetic_source(heldout_samples,",
                "            synthetic_images.synthetic(heldout_samples,",
            ),
        ),
        **task_render("contrastive"),
        only_test="tests/test_prep.py::test_synthetic_is_stored_sorted_by_label_with_a_complete_manifest",
    ),
]
