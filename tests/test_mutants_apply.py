"""Every mutant still applies to every rendered project it fits, checked in seconds.

A refactor that renames a function or rewrites the code a mutant quotes breaks the mutant;
this says which one and what is missing before the long mutant runs start.
"""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import PACKAGE
from mutants_framework import MutantError, all_mutants, mutated_sources
from variants import RENDERS


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_every_mutant_applies_to_every_render_it_fits(rendered, backend: str, sampler: str, task: str) -> None:
    project = rendered(backend, sampler, task)
    package = project / "src" / PACKAGE
    broken = []
    for mutant in all_mutants():
        if not mutant.applies(backend, sampler, task):
            continue
        for field, test in (("only_test", mutant.only_test), ("first_test", mutant.first_test)):
            if test and not (project / test.split("::")[0]).is_file():
                broken.append(
                    f"mutant {mutant.id}: its {field} {test} is not a file of the project: name its new place"
                )
        try:
            texts = mutated_sources(package, mutant)
        except MutantError as error:
            broken.append(str(error))
            continue
        if all(path.read_text() == text for path, text in texts.items()):
            broken.append(f"mutant {mutant.id} changes nothing")
    assert not broken, f"{backend}/{sampler}/{task}: {len(broken)} mutants do not apply:\n" + "\n".join(broken)


def test_every_mutant_fits_some_render_and_its_id_is_unique_there() -> None:
    fits = Counter(
        (backend, sampler, task, m.id)
        for m in all_mutants()
        for backend, sampler, task in RENDERS
        if m.applies(backend, sampler, task)
    )
    unused = [m.id for m in all_mutants() if not any(m.applies(b, s, t) for b, s, t in RENDERS)]
    assert not unused, f"mutants that fit no rendered combination (check their backends and samplers): {unused}"
    twice = sorted(key for key, count in fits.items() if count > 1)
    assert not twice, f"two mutants with one id apply to one combination (give each its own id): {twice}"
