"""Mutants of issue 20 section 1 (the recipe): the schedule's state, gradient accumulation and
the resume check of the recipe's options. Each is killed by the generated test named in
`only_test` (verified by hand: applied to a render, that test fails; restored, it passes).
recipe.py, harness/options.py and harness/checkpoint.py are the same for every backend: one
render suffices."""

from __future__ import annotations

from mutants_framework import Mutant

# What restore() brings back, at the function level (the killer of resume-forgets-rng in mutants.py too)
RESTORED = "tests/test_recipe.py::test_a_checkpoint_restores_every_part_of_the_recipe_and_each_ranks_own_random_state"

MUTANTS = [
    Mutant(
        "schedule-not-restored",
        "a resume starts the learning-rate schedule from step 0: the resumed run trains with other rates",
        function="restore",
        edits=(
            (
                "            part.load_state_dict(state[name])",
                '            if name != "schedule":\n                part.load_state_dict(state[name])',
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        # restore() at the function level; test_recipe's resumed 2-rank run sees it too, in its learning rates
        only_test=RESTORED,
    ),
    Mutant(
        "accumulation-all-reduces-every-micro-batch",
        "every micro-batch's backward all-reduces the gradients: --accumulate N costs N all-reduces a step",
        function="Recipe.step",
        edits=(
            (
                "            with model.no_sync() if i < len(micro) - 1 else contextlib.nullcontext():",
                "            with contextlib.nullcontext():",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_recipe.py::test_two_micro_batches_of_half_the_batch_give_its_gradient_and_all_reduce_once",
    ),
    Mutant(
        "accumulation-steps-every-micro-batch",
        "the optimizer steps after every micro-batch: --accumulate N is N smaller steps, not one of the batch",
        function="Recipe.step",
        edits=(
            (
                "            correct += self.correct(logits, ys)\n",
                "            correct += self.correct(logits, ys)\n            optimizer.step()\n",
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_recipe.py::test_two_micro_batches_of_half_the_batch_give_its_gradient_and_all_reduce_once",
    ),
    Mutant(
        "option-missing-from-resume-check",
        "a recipe option (--accumulate) is left out of what a resume must match: a resume with another is not refused",
        function="resume_options",
        edits=(
            (
                "    return {**recipe_options, **order_options",
                '    return {**{k: v for k, v in recipe_options.items() if k != "accumulate"}, **order_options',
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        # resume_options at the function level; a resumed run with another --accumulate is refused in
        # one line too (test_a_resume_with_another_recipe_is_refused_in_one_line, processes)
        only_test="tests/test_recipe.py::test_a_resume_must_match_every_field_of_the_recipe",
    ),
]
