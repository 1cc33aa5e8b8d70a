"""Each known pipeline mistake, applied to a freshly rendered project, fails its own tests.

A green run proves nothing unless the tests bite: here every mutant of mutants.py is
applied to a copy of each rendered project whose backend and sampler it fits, and the
project's generated tests must fail with a message naming the broken property. The
summary at the end of the run (conftest.py) lists which mutants each combination's tests killed.
"""

from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path

import pytest
from conftest import COMBINATIONS, PACKAGE, run_pytest
from mutants import MUTANTS, Mutant

CASES = [
    pytest.param(backend, sampler, mutant, id=f"{backend}-{sampler}-{mutant.id}")
    for backend, sampler in COMBINATIONS
    for mutant in MUTANTS
    if mutant.applies(backend, sampler)
]


def mutate(project: Path, mutant: Mutant) -> None:
    path = project / "src" / PACKAGE / mutant.file
    source = path.read_text()
    for old, new in mutant.edits:
        assert old in source, (
            f"mutant {mutant.id} no longer applies: {mutant.file} lacks {old!r}; update tests/mutants.py to the new code"
        )
        source = source.replace(old, new)
    path.write_text(source)


def spec_first(project: Path) -> list[str]:
    """The project's test files, the pure specifications first (plan, then shuffle quality,
    then the loader), the audit's report tests last: pytest runs files in the order given,
    so the first failure is the one that names the broken property most directly."""
    priority = ("plan", "shuffle", "loader")

    def rank(path: Path) -> tuple[int, str]:
        found = [i for i, word in enumerate(priority) if word in path.name]
        return (found[0] if found else len(priority) + (path.name == "test_audit.py"), path.name)

    return [str(p.relative_to(project)) for p in sorted((project / "tests").glob("test_*.py"), key=rank)]


@pytest.mark.parametrize(("backend", "sampler", "mutant"), CASES)
def test_mutant_is_killed_by_the_generated_tests(
    rendered, tmp_path: Path, record_property, backend: str, sampler: str, mutant: Mutant
) -> None:
    project = tmp_path / "project"
    shutil.copytree(rendered(backend, sampler), project)
    mutate(project, mutant)
    # Stop at the first failure; tests that launch processes (marked `processes`) are left
    # out, except the one test file that alone can see a mistake of that kind (or that alone
    # sees it and would come late in the full run: Mutant.only_test).
    args = [
        "-x",
        "--tb=short",
        *([mutant.only_test] if mutant.only_test else ["-m", "not processes", *spec_first(project)]),
    ]
    try:
        result = run_pytest(project, *args, timeout=600)
    finally:
        for pattern in mutant.leaves:
            for left in glob.glob(pattern):
                Path(left).unlink(missing_ok=True)
    output = result.stdout + result.stderr
    assert result.returncode == 1, (
        f"mutant {mutant.id} ({mutant.mistake}) SURVIVED on {backend}/{sampler}:\n{output[-3000:]}"
    )
    assert re.search(mutant.killed_with, output), (
        f"mutant {mutant.id} failed the tests, but no message names the broken property ({mutant.killed_with!r}):\n"
        f"{output[-3000:]}"
    )
    failed = re.search(r"FAILED (\S+)", output)
    record_property("killed", (backend, sampler, mutant.id, failed.group(1) if failed else "?"))
