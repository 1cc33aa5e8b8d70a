"""Mutants of issue 38 section 3 (segmentation): a mask that leaves its image, mask classes
counted wrong at prep, and a recipe option (--mask-field, --num-classes, --ignore-index, --width)
that does not take effect. Killed by the segmentation render's tests/test_segmentation.py, whose
masks are a function of their images' pixels, whose prep hf masks hold known ids, and whose option
tests run Recipe.step and Recipe.score on decoded batches."""

from __future__ import annotations

from mutants_framework import Mutant, task_render

TEST = "tests/test_segmentation.py"
SEGMENTATION = task_render("segmentation")  # decode.py is the same in every render: the task's one render

MUTANTS = [
    Mutant(
        "mask-crop-drawn-apart",
        "the mask's crop and flip are a second draw from the sample's generator, not the image's: "
        "every augmented mask lies elsewhere than its image",
        function="decode_batch",
        edits=(
            (
                "decode_field(kind, data, image_size, geometry, tokenizer=tokenizer)",
                "decode_field(kind, data, image_size, geometry if generator is None else "
                "draw_geometry(round(geometry.width), round(geometry.height), generator), tokenizer=tokenizer)",
            ),
        ),
        **SEGMENTATION,
        only_test=TEST,
    ),
    Mutant(
        "mask-resampled-bilinear",
        "masks resized like images (bilinear): a pixel on a boundary gets a blend of two class ids, an id of neither",
        function="mask_transform",
        edits=(("Image.Resampling.NEAREST", "Image.Resampling.BILINEAR"),),
        **SEGMENTATION,
        only_test=TEST,
    ),
    Mutant(
        "mask-classes-of-one-set",
        "prep gives the training and the held-out set the ids each counted in its own masks: a class whose "
        "pixels all fell in one set leaves the other a shorter list, and training refuses the pair",
        function="prepare",
        edits=(('same_mask_classes([tmp, tmp / "heldout"])', "pass"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_prep_hf_counts_the_ids_the_masks_hold_as_the_mask_classes_of_both_sets",
    ),
    Mutant(
        "mask-ignore-counted",
        "prep counts the ignored id 255 as a class: a VOC-style border makes 256 classes, and --ignore-index "
        "255 is refused as one of them",
        function="Verifier.mask_classes",
        edits=(
            (
                'seen = {i for i in self.ids.get(entry["name"], ()) if i != MASK_IGNORE}',
                'seen = set(self.ids.get(entry["name"], ()))',
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_prep_hf_counts_the_ids_the_masks_hold_as_the_mask_classes_of_both_sets",
    ),
    Mutant(
        "mask-field-ignored-by-step",
        "the training step takes its targets from the field named mask whatever --mask-field says: a data set "
        "with two masks trains on the other one",
        function="Recipe.step",
        edits=(('x, masks = batch["x"], batch[self.mask_field]', 'x, masks = batch["x"], batch["mask"]'),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_the_step_and_the_score_take_their_targets_from_the_mask_field_chosen",
    ),
    Mutant(
        "mask-field-ignored-by-score",
        "the held-out mIoU compares the predictions with the field named mask whatever --mask-field says",
        function="Recipe.score",
        edits=(
            (
                "masks = batch[self.mask_field].to(device, non_blocking=True)",
                'masks = batch["mask"].to(device, non_blocking=True)',
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_the_step_and_the_score_take_their_targets_from_the_mask_field_chosen",
    ),
    Mutant(
        "num-classes-given-ignored",
        "the manifest's class count wins over --num-classes given by hand: the model scores as many classes "
        "as the manifest names, and a mask id of the classes given is refused",
        function="Recipe.classes",
        edits=(("        if self.num_classes:", "        if self.num_classes and not named:"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_num_classes_given_overrides_the_manifests_count_and_bounds_the_mask_ids",
    ),
    Mutant(
        "num-classes-one-accepted",
        "--num-classes 1 passes the option check: a model of one class scores every pixel right",
        function="Recipe.check",
        edits=(("        if self.num_classes == 1:", "        if False:"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_num_classes_given_overrides_the_manifests_count_and_bounds_the_mask_ids",
    ),
    Mutant(
        "ignore-index-not-given-to-the-loss",
        "the cross-entropy ignores VOC's 255 whatever --ignore-index says: pixels of another ignore index are "
        "taken for class ids",
        function="Recipe.pixel_losses",
        edits=(("ignore_index=self.ignore_index,", "ignore_index=MASK_IGNORE,"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_pixels_of_the_ignore_index_count_in_neither_the_loss_nor_the_miou",
    ),
    Mutant(
        "ignored-pixels-in-the-loss-mean",
        "each sample's loss is its ignored pixels' zeros and the others' losses averaged over all its pixels: "
        "a mask with more ignored pixels weighs less",
        function="Recipe.pixel_losses",
        edits=(
            (
                "counted = (masks != self.ignore_index).reshape(len(masks), -1).sum(1)",
                "counted = torch.full((len(masks),), masks[0].numel(), device=masks.device)",
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_pixels_of_the_ignore_index_count_in_neither_the_loss_nor_the_miou",
    ),
    Mutant(
        "ignore-index-not-given-to-the-miou",
        "the held-out mIoU leaves out VOC's 255 whatever --ignore-index says: pixels of another ignore index "
        "are counted as a class",
        function="Recipe.score",
        edits=(("counted = masks != self.ignore_index", "counted = masks != MASK_IGNORE"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_pixels_of_the_ignore_index_count_in_neither_the_loss_nor_the_miou",
    ),
    Mutant(
        "ignore-index-among-the-classes-accepted",
        "an --ignore-index that is one of the classes passes: that class's pixels are never trained on nor scored",
        function="Recipe.build_model",
        edits=(("        if 0 <= self.ignore_index < num_classes:", "        if False:"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_an_ignore_index_among_the_classes_is_refused_in_one_line",
    ),
    Mutant(
        "width-not-passed",
        "the small model is built at its default width, 32 channels, whatever --width says",
        function="Recipe.build_model",
        edits=(('example["x"][0], num_classes, self.width)', 'example["x"][0], num_classes)'),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_width_sets_the_channels_of_the_small_models_first_stage",
    ),
    Mutant(
        "mask-ids-compared-in-uint8",
        "the held-out mIoU compares the masks as the workers hand them over, uint8: --ignore-index -1 wraps to 255 "
        "and leaves out every pixel of class 255",
        function="Recipe.score",
        edits=(("            masks = masks.long()  # uint8 or int32 from the workers (decode.py)\n", ""),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_masks_of_uint8_ids_are_checked_and_scored_as_their_ids",
    ),
    Mutant(
        "mask-ids-checked-in-uint8",
        "check_masks compares uint8 masks with the class count: --ignore-index -1 wraps to 255 and hides an id "
        "that is no class (cross-entropy then fails on it unnamed)",
        function="Recipe.check_masks",
        edits=(("        masks = masks.long()  # in uint8", "        masks = masks  # in uint8"),),
        **SEGMENTATION,
        only_test=f"{TEST}::test_masks_of_uint8_ids_are_checked_and_scored_as_their_ids",
    ),
    Mutant(
        "mask-classes-of-a-folder-ignored",
        "prep folder counts the masks' ids as their classes whatever --mask-classes names",
        function="prep.folder",
        edits=(
            (
                "images = with_mask_classes(images, names, str(src))",
                "pass",
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_prep_folder_and_webdataset_take_the_mask_classes_named",
    ),
    Mutant(
        "mask-classes-of-shards-ignored",
        "prep webdataset --out counts the masks' ids as their classes whatever --mask-classes names",
        function="prep.webdataset",
        edits=(
            (
                "shards = with_mask_classes(wds_shards.webdataset(src, label_member, label_field, fields), names, str(src))",
                "shards = wds_shards.webdataset(src, label_member, label_field, fields)",
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_prep_folder_and_webdataset_take_the_mask_classes_named",
    ),
    Mutant(
        "mask-classes-of-held-out-shards-ignored",
        "prep webdataset --out names the training shards' mask classes but counts those of SRC/heldout",
        function="prep.webdataset",
        edits=(
            (
                "kept = with_mask_classes(wds_shards.webdataset(held, label_member, label_field, fields), names, str(held))",
                "kept = wds_shards.webdataset(held, label_member, label_field, fields)",
            ),
        ),
        **SEGMENTATION,
        only_test=f"{TEST}::test_prep_folder_and_webdataset_take_the_mask_classes_named",
    ),
]
