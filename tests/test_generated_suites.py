"""Each rendered project's own test suite passes (a real torchrun launch included)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2
import pytest
from conftest import PACKAGE, ROOT, run_pytest
from variants import COMBINATIONS, DEFAULT_SAMPLER

TEMPLATE = ROOT / "template"

# What depends on the sampler is read from the template itself: a template file is
# sampler-dependent when its path or its Jinja uses the `sampler` answer (copier's answers file
# records every answer). Every other file is the same for every sampler of a backend, which
# test_sampler_independent_files_are_rendered_alike checks, so no sampler's project carries code
# that went untested. A test file runs once per backend (in its default sampler's project) when
# neither it nor any module of the package it imports, directly or through other modules,
# depends on the sampler. The other samplers' projects also leave out the tests that launch
# processes (train.sh, torchrun): what a sampler changes is the epoch plan, and their own
# test_loader shows that real DataLoader workers deliver exactly that plan.
JINJA_TAG = re.compile(r"{{.*?}}|{%.*?%}", re.DOTALL)
SAMPLER = re.compile(r"\bsampler\b")
ANSWERS_FILE = "{{_copier_conf.answers_file}}.jinja"


def uses_the_sampler(template_file: Path) -> bool:
    relative = template_file.relative_to(TEMPLATE)
    if SAMPLER.search(str(relative)) or relative.name == ANSWERS_FILE:
        return True
    if template_file.suffix != ".jinja":  # copied as it is
        return False
    return any(SAMPLER.search(tag) for tag in JINJA_TAG.findall(template_file.read_text()))


def rendered_path(template_file: Path, backend: str) -> str | None:
    """Where a sampler-independent template file lands in a project of `backend` (None: not rendered)."""
    relative = str(template_file.relative_to(TEMPLATE)).removesuffix(".jinja")
    path = jinja2.Template(relative).render(package_name=PACKAGE, loader_backend=backend)
    parts = path.split("/")
    return None if not all(parts) else path


def sampler_independent_files(backend: str) -> list[str]:
    return sorted(
        path
        for template_file in TEMPLATE.rglob("*")
        if template_file.is_file() and "__pycache__" not in template_file.parts  # copier leaves caches out
        if not uses_the_sampler(template_file)
        if (path := rendered_path(template_file, backend)) is not None
    )


def package_imports(path: Path) -> set[str]:
    """The modules of the package that a file imports (`from myexp import x`, `from myexp.x import y`, `from .x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == PACKAGE):
            module = (node.module or "").removeprefix(PACKAGE).lstrip(".")
            found |= {module.split(".")[0]} if module else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith(f"{PACKAGE}.")}
    return found


def named_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of the package a test file imports or names in a string (`"myexp.train"`, a
    parametrized `"sampling"`, run in a subprocess or imported by name)."""
    found = package_imports(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.removeprefix(f"-m {PACKAGE}.").removeprefix(f"{PACKAGE}.").split(".")[0]
            found |= {name} & modules
    return found


def sampler_independent_tests(project: Path, independent: list[str]) -> list[str]:
    """The test files of a project that neither depend on the sampler nor import or name a module that does."""
    package = project / "src" / PACKAGE
    modules = {p.stem for p in package.glob("*.py")}
    dependent = {name for name in modules if f"src/{PACKAGE}/{name}.py" not in independent}
    changed = True
    while changed:  # a module importing a sampler-dependent module depends on the sampler too
        grown = dependent | {p.stem for p in package.glob("*.py") if package_imports(p) & dependent}
        changed, dependent = grown != dependent, grown
    return sorted(
        path
        for path in independent
        if path.startswith("tests/test_") and not named_modules(project / path, modules) & dependent
    )


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_rendered_project_passes_its_own_tests(rendered, backend: str, sampler: str) -> None:
    project = rendered(backend, sampler)
    if DEFAULT_SAMPLER[backend] == sampler:
        result = run_pytest(project)
    else:
        once = sampler_independent_tests(project, sampler_independent_files(backend))
        result = run_pytest(project, "-m", "not processes", *(f"--ignore={path}" for path in once))
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, (
        f"{backend}/{sampler}: the generated tests fail:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    )
    assert "passed" in summary and "skipped" not in summary and " error" not in summary, (
        f"{backend}/{sampler}: unexpected summary {summary!r}"
    )


@pytest.mark.parametrize("backend", sorted(DEFAULT_SAMPLER))
def test_sampler_independent_files_are_rendered_alike(rendered, backend: str) -> None:
    projects = {sampler: rendered(b, sampler) for b, sampler in COMBINATIONS if b == backend}
    for path in sampler_independent_files(backend):
        texts = {sampler: (project / path).read_bytes() for sampler, project in projects.items()}
        assert len(set(texts.values())) == 1, (
            f"{backend}: {path} differs between samplers {sorted(texts)} although its template does not use "
            "the sampler answer: make its path or its Jinja use `sampler` where it depends on it"
        )


def test_the_sampler_split_is_read_from_the_template(rendered) -> None:
    backend, samplers = "memory", ("global", "block")
    sampling = f"src/{PACKAGE}/sampling.py"
    assert sampling not in sampler_independent_files(backend), "sampling.py counted as independent of the sampler"
    texts = {(rendered(backend, sampler) / sampling).read_text() for sampler in samplers}
    assert len(texts) == 2, "sampling.py is the same for two samplers: the split cannot be seen in it"
    project = rendered(backend, DEFAULT_SAMPLER[backend])
    once = sampler_independent_tests(project, sampler_independent_files(backend))
    assert "tests/test_ledger.py" in once, f"test_ledger (ledger.py only) runs for every sampler: {once}"
    for name in ("test_epoch_plan.py", "test_loader.py", "test_order_across_processes.py", "test_prep.py"):
        assert f"tests/{name}" not in once, f"{name} names a module that depends on the sampler, yet runs once: {once}"
