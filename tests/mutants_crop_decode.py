"""Mutants of the JPEG decoded for its crop (issue 40, decode the crop, not the photo): the crop box
placed in the reduced-scale decode as if it were the full one (the wrong scale), or one pixel off the
crop it was drawn as (the wrong offset). Each is killed by the generated test named in `only_test`
(checked with test_mutants_are_killed -k); the test forces the Pillow decoder for one of its cases,
so each dies whether or not the `jpeg` extra (simplejpeg) is installed."""

from __future__ import annotations

from mutants_framework import Mutant

CROP_TEST = "tests/test_decode.py::test_a_jpeg_decoded_for_its_crop_is_the_full_decode_cropped_within_tolerance"

MUTANTS = [
    Mutant(
        "crop-box-at-the-full-scale",
        "a JPEG decoded at a reduced scale by Pillow's draft gets its crop box in full-scale pixels: the "
        "crop taken from the wrong place at the wrong size (a box twice as large, reaching past the image)",
        function="jpeg_crop.decoded_for",
        edits=(("return image, (drafted[1][2] / width if drafted else 1.0)", "return image, 1.0"),),
        backends=("arrow",),  # decode.py and jpeg_crop.py are the same for every backend and sampler
        samplers=("global",),
        only_test=CROP_TEST,
    ),
    Mutant(
        "crop-box-one-pixel-off",
        "the crop decoded one pixel right of the box the augmentation drew (the region's offset off by one)",
        function="jpeg_crop.upright_crop",
        edits=(
            (
                "inside = (box[0] - region[0], box[1] - region[1], box[2] - region[0], box[3] - region[1])",
                "inside = (box[0] - region[0] + 1, box[1] - region[1], box[2] - region[0] + 1, box[3] - region[1])",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test=CROP_TEST,
    ),
]
