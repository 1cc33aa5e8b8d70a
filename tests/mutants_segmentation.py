"""Mutants of issue 38 section 3 (segmentation): a mask that leaves its image, and mask classes
counted wrong at prep. Killed by the segmentation render's tests/test_segmentation.py, whose masks
are a function of their images' pixels, and whose prep hf masks hold known ids."""

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
                "decode_field(kind, data, image_size, geometry)",
                "decode_field(kind, data, image_size, geometry if generator is None else "
                "draw_geometry(round(geometry.width), round(geometry.height), generator))",
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
]
