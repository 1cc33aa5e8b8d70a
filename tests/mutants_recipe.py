"""Mutants of issue 20 section 1 (the recipe): the schedule's state, gradient accumulation and
the resume check of the recipe's options. Each is killed by the generated test named in
`only_test` (verified by hand: applied to a render, that test fails; restored, it passes).
recipe.py, harness/options.py and harness/checkpoint.py are the same for every backend: one
render suffices."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

# What restore() brings back, at the function level (the killer of resume-forgets-rng in mutants.py too)
RESTORED = "tests/test_recipe.py::test_a_checkpoint_restores_every_part_of_the_recipe_and_each_ranks_own_random_state"

RECIPE_ONLY = {"backends": ("arrow",), "samplers": ("global",)}  # recipe.py and the harness: every render's
OPTIONS = "tests/test_recipe.py::"

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
    # Each option of the recipe on one optimizer step (test_recipe.py, function level).
    Mutant(
        "clip-after-the-step",
        "--clip-grad-norm clips the gradients after optimizer.step(): the step used them unclipped",
        function="Recipe.step",
        edits=(
            (
                "        if self.clip_grad_norm:\n"
                "            torch.nn.utils.clip_grad_norm_(model.parameters(), self.clip_grad_norm)\n"
                '        lr = optimizer.param_groups[0]["lr"]\n        optimizer.step()\n',
                '        lr = optimizer.param_groups[0]["lr"]\n        optimizer.step()\n'
                "        if self.clip_grad_norm:\n"
                "            torch.nn.utils.clip_grad_norm_(model.parameters(), self.clip_grad_norm)\n",
            ),
        ),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_clipping_gives_the_optimizer_gradients_of_the_set_norm",
    ),
    Mutant(
        "weight-decay-not-given-to-adamw",
        "--weight-decay is recorded but AdamW is built without it: no decay",
        function="Recipe.build_optimizer",
        edits=(
            (
                "torch.optim.AdamW(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)",
                "torch.optim.AdamW(model.parameters(), lr=self.lr)",
            ),
        ),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_weight_decay_shrinks_each_weight_by_lr_times_decay_on_the_step",
    ),
    Mutant(
        "sgd-momentum-ignored",
        "--momentum is not given to SGD: plain SGD whatever the option says",
        function="Recipe.build_optimizer",
        edits=(("lr=self.lr, momentum=self.momentum, weight_decay=", "lr=self.lr, weight_decay="),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_sgd_momentum_adds_momentum_times_the_first_update_to_the_second",
    ),
    Mutant(
        "micro-batches-weighed-by-count",
        "each micro-batch's loss weighs 1/N of the step, not its share of the batch: with micro-batches "
        "of unequal size the step's gradient is not the batch's",
        function="Recipe.step",
        edits=(("(loss * (len(ys) / len(y))).backward()", "(loss / len(micro)).backward()"),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_micro_batches_of_unequal_size_give_the_whole_batchs_gradient",
    ),
    # What no run can use, refused in one line (test_recipe.py, function level).
    Mutant(
        "infinite-lr-accepted",
        "--lr inf passes the option check (inf > 0): the first step makes every weight NaN",
        function="Recipe.check",
        edits=(("if not (math.isfinite(self.lr) and self.lr > 0):", "if not self.lr > 0:"),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_a_non_finite_or_negative_float_option_is_refused_naming_it",
    ),
    Mutant(
        "warmup-longer-than-the-run-accepted",
        "--warmup-steps beyond the run's steps is accepted: the learning rate never reaches --lr",
        function="Recipe.build_schedule",
        edits=(("        if self.warmup_steps > total_steps:", "        if self.warmup_steps < 0:"),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_a_warmup_longer_than_the_whole_run_is_refused_naming_both",
    ),
    Mutant(
        "non-finite-loss-trained-on",
        "a step whose loss is NaN or inf is counted and the run goes on, on NaN weights, to a false "
        "diagnosis at its end",
        function="Tally.add",
        edits=(("        if not math.isfinite(loss):", "        if False:"),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_a_loss_that_is_not_finite_ends_the_run_naming_the_step_and_the_likely_causes",
    ),
    Mutant(
        "nan-parameters-blamed-on-ddp",
        "parameters gone NaN are reported as ranks out of sync (NaN never equals NaN): a false diagnosis",
        function="check_replicas_agree",
        edits=(("    if not all(torch.isfinite(f).all() for f in fingerprints):", "    if False:"),),
        **RECIPE_ONLY,
        only_test=f"{OPTIONS}test_parameters_that_are_not_finite_are_named_so_not_blamed_on_ddp",
    ),
    Mutant(
        "checkpoint-after-the-held-out-pass",
        "the epoch's checkpoint is written after its held-out pass: a pass that fails loses the trained epoch",
        function="train",
        edits=(
            (
                "            write_checkpoint(folder.checkpoints, Position(epoch + 1, 0), model, parts, tally.kept(), checked)\n"
                "            held_out(line, recipe, model, heldout, folder, device)",
                "            held_out(line, recipe, model, heldout, folder, device)\n"
                "            write_checkpoint(folder.checkpoints, Position(epoch + 1, 0), model, parts, tally.kept(), checked)",
            ),
        ),
        **RECIPE_ONLY,
        only_test="tests/test_run_folder.py::"
        "test_a_held_out_pass_that_fails_leaves_the_epoch_saved_and_logged_and_the_resume_goes_on",
    ),
    Mutant(
        "long-range-header-traceback",
        "serve reads a Range header's numbers whatever their length: 5,000 digits raise in int() (a "
        "traceback and a closed connection) instead of a 416",
        function="byte_range",
        edits=(("    if max(len(asked[1]), len(asked[2])) > DIGITS:", "    if False:"),),
        **one_render("webdataset"),
        only_test="tests/test_serve.py::test_a_range_is_served_exactly_or_refused_with_400_or_416",
    ),
]
