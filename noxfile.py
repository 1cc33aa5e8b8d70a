"""Sessions of the template repository.

    nox -s demo   render a project with the defaults, prepare its synthetic data, run train.sh
    nox -s test   render every (loader_backend, sampler) and run each project's own tests
    nox -s lint   ruff (through pre-commit) on this repository's own code

All rendered projects share this session's virtual environment. torch is pinned by
.ci/constraints.txt (override with PIP_CONSTRAINT) so that CI gets the CPU build.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = os.environ.get("PIP_CONSTRAINT") or str(ROOT / ".ci" / "constraints.txt")
# Everything any rendered project needs, plus the tools that render and test them.
DEPS = [
    "torch",
    "numpy",
    "typer",
    "tqdm",
    "pillow",
    "pyarrow",
    "datasets",
    "webdataset>=1.0,<2",
    "matplotlib",
    "pytest",
    "pytest-xdist",
    "copier>=9",
    "ruff",
    "pre-commit",
]

nox.options.sessions = ["test"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True


def install(session: nox.Session, *packages: str) -> None:
    session.install(*packages, env={"PIP_CONSTRAINT": CONSTRAINTS})


@nox.session
def test(session: nox.Session) -> None:
    """Render every combination and run its generated test suite, plus the template's own tests."""
    install(session, *DEPS)
    # One worker per core: most of the time goes to rendered projects' own pytest runs, a few
    # minutes each; -v names every test as it finishes, so the run shows its progress.
    session.run("pytest", "-n", "auto", "-v", "--durations=30", "tests", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """Generate a project with the defaults and train it on the embedded synthetic data (2 CPU processes)."""
    install(session, "copier>=9")
    project = Path(session.create_tmp()).resolve() / "demo-project"
    session.log(f"rendering the default project into {project}")
    shutil.rmtree(project, ignore_errors=True)
    session.run("copier", "copy", "--trust", "--defaults", "--vcs-ref", "HEAD", str(ROOT), str(project))
    install(session, "-e", f"{project}[audit]")
    session.chdir(project)
    package = next(p.name for p in (project / "src").iterdir() if p.is_dir())
    session.run("python", "-m", f"{package}.prep", "synthetic", "--out", "data")
    session.run(
        "./train.sh", "--data", "data", "--epochs", "3", "--ledger", "ledger", external=True, env={"NPROC": "2"}
    )
    session.run("python", "-m", f"{package}.audit", "ledger", "ledger", "--data", "data", "--png", "shuffle_audit.png")
    session.log(f"the project: {project} (data/, ledger/, shuffle_audit.png); cd there and run `nox -s test`")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on this repository's code; each rendered project is linted by tests/test_rendering.py."""
    session.install("pre-commit", "ruff")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure")
