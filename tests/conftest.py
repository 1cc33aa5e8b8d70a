"""Render the template once per combination of answers and share the result across tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from copier import run_copy
from variants import COMBINATIONS, DEFAULT_BACKEND, DEFAULT_SAMPLER, DEFAULT_TASK

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "myexp"


def render(destination: Path, run_tasks: bool = False, **answers) -> Path:
    """copier copy --trust --defaults --vcs-ref HEAD (uncommitted changes included)."""
    run_copy(
        str(ROOT),
        str(destination),
        data=answers,
        defaults=True,
        unsafe=True,
        vcs_ref="HEAD",
        skip_tasks=not run_tasks,
        quiet=True,
    )
    return destination


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--combination",
        metavar="BACKEND/SAMPLER",
        help="run the tests of one combination only (nox -s quick: arrow/global); tests of no combination still run",
    )


def cost(item: pytest.Item) -> int:
    """How long a test runs, roughly, as a rank: 0 the default backend's whole suite (it alone runs
    the tests marked same_for_every_backend), 1 another backend's suite with its process tests (its
    default sampler's), 2 another generated suite, 3 a mutant whose one test launches processes,
    4 the rest (seconds each)."""
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    name = getattr(item, "originalname", item.name)
    if name == "test_rendered_project_passes_its_own_tests":
        if DEFAULT_SAMPLER[params["backend"]] != params["sampler"]:
            return 2
        return 0 if params["backend"] == DEFAULT_BACKEND else 1  # it alone runs the tests of every backend
    if name == "test_task_project_passes_its_own_tests":
        return 1  # a render's tests that start no processes, and one training run or two
    if name == "test_mutant_is_killed_by_the_generated_tests":
        return 3 if params["mutant"].only_test else 4
    return 4


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first (pytest-xdist hands tests out in this order, two at a time with
    noxfile.py's --maxschedchunk=1), so that the workers end together rather than one of them
    starting a 10-minute suite near the end;
    --combination B/S: deselect the tests parametrized with another backend or sampler."""
    items.sort(key=cost)  # stable: within a rank, the order of the files and parameters
    chosen = config.getoption("--combination")
    if not chosen:
        return
    backend, _, sampler = chosen.partition("/")
    if (backend, sampler) not in COMBINATIONS:
        raise pytest.UsageError(
            f"--combination {chosen}: choose one of {', '.join(f'{b}/{s}' for b, s in COMBINATIONS)}"
        )
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params else {}
        other = (
            params.get("backend", backend) != backend
            or params.get("sampler", sampler) != sampler
            or params.get("task", DEFAULT_TASK) != DEFAULT_TASK
        )
        (drop if other else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    """rendered(backend, sampler, task=DEFAULT_TASK) -> the project, rendered once per session."""
    cache: dict[tuple[str, str, str], Path] = {}

    def get(backend: str, sampler: str, task: str = DEFAULT_TASK) -> Path:
        if (backend, sampler, task) not in cache:
            destination = tmp_path_factory.mktemp(f"{backend}-{sampler}-{task}") / "project"
            cache[backend, sampler, task] = render(
                destination, package_name=PACKAGE, loader_backend=backend, sampler=sampler, task=task
            )
        return cache[backend, sampler, task]

    return get


def run_in(project: Path, *command: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a command in a rendered project with this interpreter's environment (one shared venv)."""
    env = dict(os.environ, PYTHONPATH=str(project / "src"), PYTHONUNBUFFERED="1")
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)


KILLED: list[tuple[str, str, str, str]] = []  # (backend, sampler, mutant, killing test)


def pytest_runtest_logreport(report) -> None:
    """Collect what test_mutants_are_killed recorded (user properties also cross pytest-xdist)."""
    if report.when == "call" and report.passed:
        KILLED.extend(value for name, value in report.user_properties if name == "killed")


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run: which mutant each combination's generated tests killed, and with which test."""
    if KILLED:
        terminalreporter.section("mutants killed by the generated tests")
        for backend, sampler, mutant, test in sorted(KILLED):
            terminalreporter.write_line(f"{backend:>10} {sampler:<12} {mutant:<22} killed by {test}")
