"""copier.yml's backend and sampler questions agree with tests/variants.py, the one list the
tests, the mutants and noxfile.py read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT, render
from variants import BACKENDS, COMBINATIONS, DEFAULT, DEFAULT_SAMPLER, DEFAULT_TASK, SAMPLERS, TASK_RENDERS, TASKS, fits

QUESTIONS = yaml.safe_load((ROOT / "copier.yml").read_text())
REFUSED = [(backend, sampler) for backend in BACKENDS for sampler in SAMPLERS if not fits(backend, sampler)]


def test_copier_offers_exactly_the_backends_and_samplers_of_variants() -> None:
    offered = {name: set(QUESTIONS[name]["choices"].values()) for name in ("loader_backend", "sampler")}
    assert offered == {"loader_backend": set(BACKENDS), "sampler": set(SAMPLERS)}, (
        f"copier.yml offers {offered}; tests/variants.py lists {BACKENDS} and {SAMPLERS}: make them agree"
    )
    assert QUESTIONS["loader_backend"]["default"] == DEFAULT[0], "copier.yml's default backend is not variants'"


def test_copier_offers_exactly_the_tasks_of_variants_and_each_other_task_renders_once() -> None:
    offered = set(QUESTIONS["task"]["choices"].values())
    assert offered == set(TASKS) and QUESTIONS["task"]["default"] == DEFAULT_TASK, (
        f"copier.yml offers tasks {offered} (default {QUESTIONS['task']['default']}); tests/variants.py lists {TASKS}"
    )
    assert set(TASK_RENDERS) == set(TASKS) - {DEFAULT_TASK}, f"tasks without their one render: {TASK_RENDERS}"
    assert all(fits(*pair) for pair in TASK_RENDERS.values()), (
        f"a task renders on a pair that does not fit: {TASK_RENDERS}"
    )


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_every_pair_variants_allows_renders_with_its_answers(rendered, backend: str, sampler: str) -> None:
    answers = yaml.safe_load((rendered(backend, sampler) / ".copier-answers.yml").read_text())
    assert (answers["loader_backend"], answers["sampler"]) == (backend, sampler), answers


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_defaults_to_the_sampler_variants_names(tmp_path: Path, backend: str) -> None:
    answers = yaml.safe_load(
        (render(tmp_path / "p", package_name="ok", loader_backend=backend) / ".copier-answers.yml").read_text()
    )
    assert answers["sampler"] == DEFAULT_SAMPLER[backend], f"{backend} defaults to sampler {answers['sampler']}"


@pytest.mark.parametrize(("backend", "sampler"), REFUSED)
def test_every_other_pair_is_refused_before_anything_is_written(tmp_path: Path, backend: str, sampler: str) -> None:
    destination = tmp_path / "project"
    with pytest.raises(ValueError, match=f"sampler '{sampler}'"):
        render(destination, package_name="ok", loader_backend=backend, sampler=sampler)
    assert not destination.exists() or not any(destination.iterdir()), f"{backend}/{sampler} left files behind"
