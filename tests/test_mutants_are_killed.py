"""Each known pipeline mistake, applied to a freshly rendered project, fails its own tests.

A green run proves nothing unless the tests bite: here every mutant (tests/mutants.py and
tests/mutants_*.py) is applied to a copy of each rendered project whose backend and sampler
it fits, and the project's generated tests must fail. The test that failed first is
recorded; the summary at the end of the run (conftest.py) lists mutant -> killing test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import PACKAGE
from mutants_framework import Mutant, all_mutants, killed_by
from variants import DEFAULT_TASK, RENDERS

CASES = [
    pytest.param(
        backend,
        sampler,
        task,
        mutant,
        id=f"{backend}-{sampler}-{mutant.id}" + (f"-{task}" if task != DEFAULT_TASK else ""),
    )
    for backend, sampler, task in RENDERS
    for mutant in all_mutants()
    if mutant.applies(backend, sampler, task)
]


def spec_first(project: Path, first: str = "") -> list[str]:
    """The project's test files, the pure specifications first (the plan, then the loader that
    delivers it, then shuffle quality), the audit's report tests last: pytest runs files in the
    order given and stops at the first failure (-x), so the first failure is the one that names
    the broken property most directly, and a mutant of the loader (the killer of a quarter of
    them) need not wait for the shuffle-quality statistics first. `first` (Mutant.first_test),
    where the project has it, goes before all of them."""
    priority = ("plan", "loader", "shuffle")

    def rank(path: Path) -> tuple[int, int, str]:
        found = [i for i, word in enumerate(priority) if word in path.name]
        named = str(path.relative_to(project)) == first
        return (not named, found[0] if found else len(priority) + (path.name == "test_audit.py"), path.name)

    return [str(p.relative_to(project)) for p in sorted((project / "tests").glob("test_*.py"), key=rank)]


@pytest.mark.parametrize(("backend", "sampler", "task", "mutant"), CASES)
def test_mutant_is_killed_by_the_generated_tests(
    rendered, tmp_path: Path, record_property, backend: str, sampler: str, task: str, mutant: Mutant
) -> None:
    project = tmp_path / "project"
    shutil.copytree(rendered(backend, sampler, task), project)
    # Tests that launch processes (marked `processes`) are left out, except the one test file
    # that alone can see a mistake of that kind (or that alone sees it and would come late in
    # the full run: Mutant.only_test). The others run as two pytest runs: the first file of
    # spec_first (the plan's file or the first_test), the killer of most of them (71 of 79 in
    # one full run), alone, then, if it passes, the rest: a mutant that dies in the first file
    # never collects the others (0.4 to 0.8 CPU-seconds each in a new interpreter).
    if mutant.only_test:
        runs = [[mutant.only_test]]
    else:
        first, *rest = spec_first(project, mutant.first_test)
        runs = [["-m", "not processes", first], ["-m", "not processes", *rest]]
    record_property("killed", (backend, sampler, mutant.id, killed_by(project, PACKAGE, mutant, *runs)))
