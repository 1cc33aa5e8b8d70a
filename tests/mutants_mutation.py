"""Mutants from a mutation tool's run (issue 43; tests/README.md, "The mutation tool's run"): of
mutmut's survivors, those that are a plausible mistake, killed by the function-level test it made
us write. Each is killed by the generated test named in `only_test` (verified by hand: applied to
a render, that test fails; restored, it passes). The metrics are the same for every backend and
sampler: arrow's render alone."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

AUDIT = "tests/test_audit.py::"
ARROW = one_render("arrow")

MUTANTS = [
    Mutant(
        "same-rank-over-either-epoch",
        "the same-rank fraction is taken over the samples delivered in either epoch, not in both: a "
        "sample left out of one epoch counts as one that changed rank",
        function="same_rank_fraction",
        edits=(("    in_both = (before >= 0) & (after >= 0)", "    in_both = (before >= 0) | (after >= 0)"),),
        **ARROW,
        only_test=f"{AUDIT}test_same_rank_fraction_counts_only_the_samples_delivered_in_both_epochs",
    ),
    Mutant(
        "kendall-tau-drops-the-first-delivered",
        "Kendall's tau leaves out the sample delivered first in the earlier epoch (position 0 taken "
        "for the 'not delivered' mark): a figure over part of the samples it claims",
        function="kendall_tau",
        edits=(("(where_before >= 0) & (where_after >= 0)", "(where_before > 0) & (where_after >= 0)"),),
        **ARROW,
        only_test=f"{AUDIT}test_correlations_and_taus_of_small_orders_are_their_textbook_values",
    ),
    Mutant(
        "ideal-mix-sd-of-one-batch",
        "the ideal label mix's sd is that of one global batch, not of the mean of the epoch's G "
        "batches: the audit's ideal row is sqrt(G) times too wide, and a clumped shuffle passes it",
        function="ideal_label_mix",
        edits=(("excess / batch) / num_batches)", "excess / batch))"),),
        **ARROW,
        only_test=f"{AUDIT}test_ideal_mix_is_exact_for_every_batch_of_a_small_set_and_its_sd_shrinks_with_the_batches",
    ),
]
