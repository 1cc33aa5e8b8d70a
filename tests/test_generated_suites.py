"""Each rendered project's own test suite passes (a real torchrun launch included)."""

from __future__ import annotations

import pytest
from conftest import COMBINATIONS, PACKAGE, run_pytest

# prep, the sources, decoding and the backends do not depend on the sampler, and neither do
# the test files that prove them: they run once per backend, in the backend's default
# combination (its first). test_sampler_independent_files_are_rendered_alike checks that
# they are the same files for every sampler, so no sampler's project carries code that went
# untested. The other samplers' projects also leave out the tests that launch processes
# (train.sh, torchrun): what a sampler changes is the epoch plan, and their own
# test_loader shows that real DataLoader workers deliver exactly that plan.
SAMPLER_INDEPENDENT_TESTS = [
    "tests/test_prep.py",
    "tests/test_real_samples.py",
    "tests/test_memory_once_per_node.py",
    "tests/test_launch.py",
    "tests/test_bad_data.py",
    "tests/test_bad_inputs.py",
    "tests/test_ledger.py",
    "tests/test_run_folder.py",
    "tests/test_resume.py",
    "tests/test_bench.py",
    "tests/test_multinode.py",
    "tests/test_shell_scripts.py",
]
SAMPLER_INDEPENDENT_CODE = [
    "train.sh",
    "slurm/train.sbatch",
    "scripts/gpu_smoke.sh",
    "src/{package}/train.py",
    "src/{package}/launcher_watch.py",
    "src/{package}/launch.py",
    "src/{package}/run_folder.py",
    "src/{package}/checkpoint.py",
    "src/{package}/progress.py",
    "src/{package}/ledger.py",
    "src/{package}/evaluate.py",
    "src/{package}/rank_exit.py",
    "src/{package}/errors.py",
    "src/{package}/prep.py",
    "src/{package}/sources.py",
    "src/{package}/decode.py",
    "src/{package}/manifest.py",
    "src/{package}/{backend}_backend.py",
    "src/{package}/bench.py",
    "src/{package}/bench_ranks.py",
]
FIRST_OF_BACKEND = {backend: sampler for backend, sampler in reversed(COMBINATIONS)}


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_rendered_project_passes_its_own_tests(rendered, backend: str, sampler: str) -> None:
    project = rendered(backend, sampler)
    if FIRST_OF_BACKEND[backend] == sampler:
        result = run_pytest(project)
    else:
        result = run_pytest(project, "-m", "not processes", *(f"--ignore={path}" for path in SAMPLER_INDEPENDENT_TESTS))
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, (
        f"{backend}/{sampler}: the generated tests fail:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    )
    assert "passed" in summary and "skipped" not in summary and " error" not in summary, (
        f"{backend}/{sampler}: unexpected summary {summary!r}"
    )


@pytest.mark.parametrize("backend", sorted(FIRST_OF_BACKEND))
def test_sampler_independent_files_are_rendered_alike(rendered, backend: str) -> None:
    projects = {sampler: rendered(b, sampler) for b, sampler in COMBINATIONS if b == backend}
    paths = SAMPLER_INDEPENDENT_TESTS + [
        path.format(package=PACKAGE, backend=backend) for path in SAMPLER_INDEPENDENT_CODE
    ]
    for path in paths:
        texts = {
            sampler: (project / path).read_text() for sampler, project in projects.items() if (project / path).exists()
        }
        assert len(set(texts.values())) <= 1, (
            f"{backend}: {path} differs between samplers {sorted(texts)}: it depends on the sampler, so its tests "
            "must run for every sampler (remove it from SAMPLER_INDEPENDENT_*)"
        )
