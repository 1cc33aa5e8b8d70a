"""Each rendered project's own test suite passes (a real torchrun launch included)."""

from __future__ import annotations

import pytest
from conftest import COMBINATIONS, run_pytest


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_rendered_project_passes_its_own_tests(rendered, backend: str, sampler: str) -> None:
    result = run_pytest(rendered(backend, sampler))
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, (
        f"{backend}/{sampler}: the generated tests fail:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    )
    assert "passed" in summary and "skipped" not in summary, f"{backend}/{sampler}: unexpected summary {summary!r}"
