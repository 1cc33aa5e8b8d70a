"""Mutants: known mistakes as small edits to one named function of a rendered project.

A mutant names the function (or method, or class) it breaks by its qualified name
(`RankLoader.epoch`, `epoch_plan`, `outer.inner`), found by parsing every module of the
rendered package, so that a function moved to another module is still found. Only a name
defined in several modules (`main`) needs its module in front (`train.main`). Each edit
replaces exact code inside that function's source and nowhere else. A mutant whose
function is gone or ambiguous, or whose code is no longer in it, raises MutantError with
its id and what is missing, before any test runs (tests/test_mutants_apply.py checks all of
them in seconds). A mutant is killed when the project's tests fail: which test failed is
reported, and no wording of the failure is required.

The mutants themselves are listed in tests/mutants.py and tests/mutants_*.py (MUTANTS = [...]).
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_server import run_pytest
from variants import DEFAULT_SAMPLER, DEFAULT_TASK, MAP_STYLE_BACKENDS, MAP_STYLE_SAMPLERS, TASK_RENDERS

TESTS = Path(__file__).resolve().parent


class MutantError(Exception):
    """A mutant that cannot be applied to a rendered project: its function or code is gone."""


@dataclass(frozen=True)
class Mutant:
    id: str
    mistake: str
    function: str  # qualified name in the rendered package: "epoch_plan", "RankLoader.epoch"
    # (exact code inside the function, what the broken code says); (other function, old, new) for
    # a mistake that spans two functions
    edits: tuple[tuple[str, ...], ...]
    backends: tuple[str, ...] = MAP_STYLE_BACKENDS
    samplers: tuple[str, ...] = MAP_STYLE_SAMPLERS
    # The one test file (or node id) to run: it launches processes (left out of the full run),
    # or it comes late in the full run while nothing before it can see this mistake.
    only_test: str = ""
    # A test file to run first in the full run (no only_test): the one that killed it last time
    # when it comes late in the order. Only the order changes: every other file still runs after
    # it, so a hint gone stale costs time, never a kill.
    first_test: str = ""
    leaves: tuple[str, ...] = ()  # absolute globs of what the broken code leaves behind, removed after its run
    task: str = DEFAULT_TASK  # the task whose projects hold the code (another task's: its one render, task_render)

    def applies(self, backend: str, sampler: str, task: str = DEFAULT_TASK) -> bool:
        return task == self.task and backend in self.backends and sampler in self.samplers


@dataclass(frozen=True)
class Definition:
    path: Path
    start: int  # character offsets of the definition's lines (decorators included) in the module
    end: int


@functools.cache  # every mutant looks through every module: parse each text once
def definitions(path: Path, source: str) -> dict[str, list[Definition]]:
    """Every function, method and class of one module by qualified name (nested: Class.method, outer.inner)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    found: dict[str, list[Definition]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.setdefault(name, []).append(Definition(path, offsets[first - 1], offsets[child.end_lineno]))
                visit(child, f"{name}.")
            else:  # functions defined under an if or a with keep their enclosing prefix
                visit(child, prefix)

    visit(ast.parse(source, filename=str(path)), "")
    return found


def locate(package: Path, mutant: Mutant, function: str) -> Definition:
    """The one definition of `function` among all modules of the package."""
    matches = []
    for path in sorted(package.rglob("*.py")):
        matches.extend(named_in(package, path, path.read_text(), function))
    if not matches:
        raise MutantError(
            f"mutant {mutant.id}: no function {function!r} in any module of {package}: "
            "it was renamed or removed; name the function the mistake now lies in"
        )
    if len(matches) > 1:
        where = ", ".join(str(m.path.relative_to(package)) for m in matches)
        raise MutantError(
            f"mutant {mutant.id}: {function!r} is defined {len(matches)} times ({where}): "
            "name it by a qualified name that is unique (Class.method, outer.inner, or module.function)"
        )
    return matches[0]


def named_in(package: Path, path: Path, source: str, function: str) -> list[Definition]:
    """The definitions in one module (`source`, its text) that `function` names: by its qualified name,
    or by that name after the module's dotted path or any tail of it (`loader.f`, `data.loader.f`), so
    that a mutant still finds its function after the module moves into a folder."""
    parts = path.relative_to(package).with_suffix("").parts
    modules = {".".join(parts[i:]) for i in range(len(parts))}
    return [
        definition
        for qualname, found in definitions(path, source).items()
        if function == qualname or function in {f"{module}.{qualname}" for module in modules}
        for definition in found
    ]


def mutated_sources(package: Path, mutant: Mutant) -> dict[Path, str]:
    """{module: its text with the mutant's edits applied inside the named functions}; writes nothing.

    An edit is (old, new) inside mutant.function, or (function, old, new) for a mistake that
    spans two functions. Every edit is checked before anything is written.
    """
    texts: dict[Path, str] = {}
    for edit in mutant.edits:
        function, old, new = edit if len(edit) == 3 else (mutant.function, *edit)
        definition = locate(package, mutant, function)
        if definition.path in texts:  # a second function of a module already edited: find it again there
            source = texts[definition.path]
            definition = named_in(package, definition.path, source, function)[0]
        else:
            source = definition.path.read_text()
        segment = source[definition.start : definition.end]
        if old not in segment:
            raise MutantError(
                f"mutant {mutant.id}: {function} ({definition.path.relative_to(package)}) no longer holds "
                f"{old!r}: update the mutant's edit to the function's new code"
            )
        texts[definition.path] = source[: definition.start] + segment.replace(old, new) + source[definition.end :]
    return texts


def mutate(package: Path, mutant: Mutant) -> list[Path]:
    """Apply the mutant to the package in place; returns the modules it changed."""
    texts = mutated_sources(package, mutant)
    for path, text in texts.items():
        path.write_text(text)
    return sorted(texts)


def one_render(backend: str) -> dict[str, tuple[str, ...]]:
    """A Mutant's backends and samplers when the code it breaks is the same file for every sampler
    (and every backend, for the harness's code): the backend's render with its default sampler."""
    return {"backends": (backend,), "samplers": (DEFAULT_SAMPLER[backend],)}


def task_render(task: str) -> dict[str, object]:
    """A Mutant's task, backends and samplers for code of a task other than the default: the task's one render."""
    backend, sampler = TASK_RENDERS[task]
    return {"task": task, "backends": (backend,), "samplers": (sampler,)}


class Survived(AssertionError):
    """The project's tests passed (or did not run) with the mutant applied."""


def first_failure(output: str) -> str:
    """The node id of the first test that failed (or errored) in pytest's short summary."""
    found = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", output, re.MULTILINE)  # ids may hold spaces
    return found.group(1) if found else "?"


NOTHING_COLLECTED = 5  # pytest's exit code when a run selected no test


def killed_by(project: Path, package: str, mutant: Mutant, *runs: list[str], timeout: float = 600) -> str:
    """Apply the mutant to the project, make the pytest `runs` there one after the other (each
    stopping at its first failure) until one fails, and return the test that failed first; raises
    Survived when none does. Each run is `python -m pytest ARGS` in the project, made by a fork of
    the pytest server (tests/pytest_server.py), which has imported torch and the rest already: 5-8
    s less per run. Runs in turn rather than one: a run collects only its own files, and most
    mutants fail the first, which is short (test_mutants_are_killed.py).

    Killed means pytest's exit code 1 (tests failed): a message of the failure is not matched,
    so rewording an assertion changes nothing. A run that selects no test (exit code 5) counts for
    nothing either way; any other code (2 interrupted or a collection error) would count a broken
    run as a kill, so it is a survival, as are runs that pass or select no test at all.
    """
    mutate(project / "src" / package, mutant)  # MutantError before any test runs
    codes: list[int] = []
    try:
        for args in runs:
            result = run_pytest(project, "-x", "--tb=short", "-rfE", *args, timeout=timeout)
            codes.append(result.returncode)
            if result.returncode == 1:
                return first_failure(result.stdout)
            if result.returncode not in (0, NOTHING_COLLECTED):
                break  # a broken run: its output says why
    finally:
        for pattern in mutant.leaves:
            for left in glob.glob(pattern):
                Path(left).unlink(missing_ok=True)
    raise Survived(
        f"mutant {mutant.id} ({mutant.mistake}) SURVIVED (pytest exit code {', '.join(map(str, codes))}, "
        f"1 = tests failed):\n{result.stdout[-3000:]}"
    )


def all_mutants() -> list[Mutant]:
    """The mutants of tests/mutants.py and of every tests/mutants_*.py (this module excepted)."""
    modules = ["mutants"] + sorted(
        p.stem for p in TESTS.glob("mutants_*.py") if p.stem != Path(__file__).stem and p.is_file()
    )
    return [mutant for name in modules for mutant in importlib.import_module(name).MUTANTS]
