"""Mutants of issue 38 section 3 (segmentation): a mask that leaves its image. Killed by the
segmentation render's tests/test_segmentation.py, whose masks are a function of their images'
pixels."""

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
]
