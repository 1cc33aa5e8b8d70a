"""Mutants of issue 42 (curves): the report's best epoch and panels, the run's TensorBoard copy of
metrics.jsonl, and the epoch line's data wait. Each is killed by the generated test named in
`only_test` (verified by hand: applied to a render, that test fails; restored, it passes). The
report, the harness and train.py are the same for every backend: arrow's render alone."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

TEST = "tests/test_report.py::"
ARROW = one_render("arrow")

MUTANTS = [
    Mutant(
        "best-epoch-lowest-metric",
        "the best epoch is picked as that of the lowest held-out figure (accuracy, recall@1 and mIoU are higher-better)",
        function="report.curves",
        edits=(('    found["best"] = max(found["heldout"]', '    found["best"] = min(found["heldout"]'),),
        **ARROW,
        only_test=f"{TEST}test_the_curves_are_metrics_jsonl_s_figures_on_the_runs_steps",
    ),
    Mutant(
        "panel-plots-another-series",
        "the learning-rate panel plots the loss",
        function="report.figure",
        edits=(('    lr.plot(*columns(found["lr"])', '    lr.plot(*columns(found["loss"])'),),
        **ARROW,
        only_test=f"{TEST}test_each_panel_draws_its_own_series",
    ),
    Mutant(
        "tensorboard-writes-nothing",
        "the TensorBoard writer is opened but no scalar is written to it: an empty tensorboard/",
        function="Scalars.write",
        edits=(("            self.writer.add_scalar(tag, value, at)", "            pass"),),
        **ARROW,
        only_test=f"{TEST}test_a_resumed_run_leaves_each_scalar_in_tensorboard_once",
    ),
    Mutant(
        "tensorboard-keeps-a-killed-runs-scalars",
        "a resumed run appends to tensorboard/ without purge_step: the scalars a killed run wrote past its "
        "checkpoint stay beside those written again (two values at one step)",
        function="Scalars.__init__",
        edits=(("purge_step=purge)", "purge_step=None)"),),
        **ARROW,
        only_test=f"{TEST}test_a_resumed_run_leaves_each_scalar_in_tensorboard_once",
    ),
    Mutant(
        "epoch-line-without-data-wait",
        "the epoch line train.py prints leaves out the data wait (recorded in metrics.jsonl, never shown)",
        function="held_out",
        edits=(("  data wait {100 * line['data_wait_fraction']:.0f}%  ", "  "),),
        **ARROW,
        only_test=f"{TEST}test_the_epoch_line_shows_the_data_wait",
    ),
    Mutant(
        "epoch-line-in-two-writes",
        "the epoch line is printed as print writes it, its text and then its newline: unbuffered ranks of two "
        "nodes in one log run their lines together",
        function="held_out",
        edits=(('samples/s\\n", end="", flush=True)', 'samples/s", flush=True)'),),
        **ARROW,
        only_test=f"{TEST}test_the_epoch_line_is_one_write_with_its_newline",
    ),
]
