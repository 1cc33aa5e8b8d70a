"""Mutants of issue 20 section 2 (augmentation that a resume replays exactly): each sample's
draws from (seed, epoch, its key), never from a worker's or a rank's random state, and the
held-out set never augmented. Killed by the project's tests/test_augmentation.py."""

from __future__ import annotations

from mutants_framework import Mutant

TEST = "tests/test_augmentation.py"

MUTANTS = [
    Mutant(
        "augment-from-worker-rng",
        "augmentation drawn from the worker's random state (torch's global generator, seeded per worker): "
        "another number of ranks or workers, or a resume, augments a sample otherwise",
        function="decode_batch",
        edits=(
            (
                "generator = sample_generator(augment.seed, augment.epoch, record.key) if augment else None",
                "generator = torch.default_generator if augment else None",
            ),
        ),
        backends=("memory", "webdataset"),  # decode.py is the same for every backend: one map-style, one streaming
        samplers=("global", "shard_buffer"),
        only_test=f"{TEST}::test_a_sample_is_augmented_alike_on_1_or_3_ranks_and_1_or_2_workers",
    ),
    Mutant(
        "heldout-augmented",
        "the held-out set is augmented: evaluation numbers move with --augment",
        function="HeldoutLoader.__iter__",
        edits=(
            (
                "self.image_size, tokenizer=self.tokenizer)",
                "self.image_size, Augment(0, 0), tokenizer=self.tokenizer)",
            ),
        ),
        backends=("memory", "arrow", "files"),
        samplers=("global",),
        only_test=f"{TEST}::test_heldout_batches_are_never_augmented",
    ),
    Mutant(
        "heldout-augmented",
        "the held-out set is augmented: evaluation numbers move with --augment",
        function="HeldoutLoader.__iter__",
        edits=(
            (
                "self.image_size, tokenizer=self.tokenizer)",
                "self.image_size, Augment(0, 0), tokenizer=self.tokenizer)",
            ),
        ),
        backends=("webdataset",),
        samplers=("shard_buffer",),
        only_test=f"{TEST}::test_heldout_batches_are_never_augmented",
    ),
    Mutant(
        "augment-key-left-out",
        "the sample key is left out of the augmentation stream: every sample of an epoch gets the same crop and flip",
        function="sample_generator",
        edits=(
            (
                "seed_of(seed, epoch, AUGMENT_STREAM, key_number(key))",
                "seed_of(seed, epoch, AUGMENT_STREAM)",
            ),
        ),
        backends=("memory",),  # streams.py is the same for every backend and sampler
        samplers=("global",),
        only_test=f"{TEST}::test_each_sample_draws_its_own_augmentation",
    ),
    Mutant(
        "augment-epoch-left-out",
        "the loader augments every epoch alike: a sample gets the same crop and flip in every epoch",
        function="RankLoader.batch_maker",
        edits=(("Augment(self.seed, epoch, self.crop_scale_min)", "Augment(self.seed, 0, self.crop_scale_min)"),),
        backends=("memory", "webdataset"),
        samplers=("global", "shard_buffer"),
        only_test=f"{TEST}::test_a_sample_is_augmented_otherwise_in_another_epoch",
    ),
    Mutant(
        "crop-scale-hard-coded",
        "the crop's share of the area is the old (0.5, 1) whatever --crop-scale-min says: ImageNet's (0.08, 1) "
        "is recorded in config.json but never drawn",
        function="draw_geometry",
        edits=(
            (
                "random_crop_box(width, height, generator, (crop_scale_min, 1.0))",
                "random_crop_box(width, height, generator)",
            ),
        ),
        backends=("memory",),  # transforms.py is the same for every backend and sampler
        samplers=("global",),
        only_test=f"{TEST}::test_the_crop_keeps_at_least_crop_scale_min_of_the_area",
    ),
    Mutant(
        "crop-scale-default-by-size-ignored",
        "--crop-scale-min's default is 0.5 at every --image-size: a 224 px photo run trains with the 32 px crop range",
        function="default_crop_scale_min",
        edits=(("if image_size >= IMAGENET_CROP_FROM else", "if image_size < 0 else"),),
        backends=("memory",),
        samplers=("global",),
        only_test=f"{TEST}::test_crop_scale_min_defaults_by_image_size_is_recorded_and_refused_otherwise_on_resume",
    ),
    Mutant(
        "loader-ignores-crop-scale",
        "the training loader draws its crops with the default range, not the crop_scale_min train.py passes it",
        function="RankLoader.batch_maker",
        edits=(("Augment(self.seed, epoch, self.crop_scale_min)", "Augment(self.seed, epoch)"),),
        backends=("memory", "webdataset"),  # one map-style loader, the streaming one
        samplers=("global", "shard_buffer"),
        only_test=f"{TEST}::test_the_loader_crops_with_its_crop_scale_min",
    ),
    Mutant(
        "older-run-resumed-with-another-crop-scale",
        "a run from before --crop-scale-min (its checkpoint without it: 0.5 at any size) resumed at 224 px crops "
        "with 0.08 from then on, without a word",
        function="check_same_options",
        edits=(("    for name, value in {**recorded, **before}.items():", "    for name, value in recorded.items():"),),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_augmentation.py::"
        "test_crop_scale_min_defaults_by_image_size_is_recorded_and_refused_otherwise_on_resume",
    ),
]
