"""Mutants of prep's --max-side (issue 40, storage sized for training): the shorter side bounded
instead of the longer one, a mask's ids resized bilinear (blended, no longer the ids it held). Each is
killed by the generated test named in `only_test` (checked with test_mutants_are_killed -k)."""

from __future__ import annotations

from mutants_framework import Mutant

MAX_SIDE_TEST = (
    "tests/test_prep.py::test_max_side_stores_large_images_resized_upright_with_aligned_masks_and_small_ones_untouched"
)

MUTANTS = [
    Mutant(
        "max-side-bounds-the-short-side",
        "--max-side N bounds the shorter side: a 400x300 photo is stored 171x128, larger than asked",
        function="max_side.bounded_size",
        edits=(("    scale = side / max(width, height)", "    scale = side / min(width, height)"),),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test=MAX_SIDE_TEST,
    ),
    Mutant(
        "max-side-mask-resized-bilinear",
        "--max-side resizes a mask's class ids bilinear: ids blended at every edge into ids the mask never held",
        function="max_side.resized_mask",
        edits=(
            (
                'mask.resize(size, Image.Resampling.NEAREST).save(out, format="PNG")',
                'mask.resize(size, Image.Resampling.BILINEAR).save(out, format="PNG")',
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test=MAX_SIDE_TEST,
    ),
    Mutant(
        "max-side-quality-ignored",
        "--max-side-quality is read but the resized images are encoded at the default quality 90 whatever it says",
        function="prep.folder",
        edits=(("bound = max_side_of(max_side, max_side_quality)", "bound = max_side_of(max_side, DEFAULT_QUALITY)"),),
        backends=("arrow",),
        samplers=("global",),
        only_test=MAX_SIDE_TEST,
    ),
    Mutant(
        "gpu-rate-ignored",
        "bench --gpu-rate N is read but the cores line is worked out for the default 2,500 img/s",
        function="bench.main",
        edits=(
            (
                "training = Training(image_size, augment, gpu_rate)",
                "training = Training(image_size, augment, GPU_RATE)",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_bench.py::test_a_run_measures_every_row_against_the_ceiling",
    ),
]
