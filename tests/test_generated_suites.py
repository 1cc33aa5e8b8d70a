"""Each rendered project's own test suite passes (a real torchrun launch included)."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import jinja2
import pytest
from conftest import PACKAGE, ROOT
from mutants_framework import definitions
from package_modules import imported_modules, package_imports, package_modules
from pytest_server import run_pytest
from variants import COMBINATIONS, DEFAULT_BACKEND, DEFAULT_SAMPLER, DEFAULT_TASK, TASK_RENDERS, TESTED, UNTESTED

TEMPLATE = ROOT / "template"

# What depends on the sampler is read from the template itself: a template file is
# sampler-dependent when its path or its Jinja uses the `sampler` answer (copier's answers file
# records every answer). Every other file is the same for every sampler of a backend, which
# test_sampler_independent_files_are_rendered_alike checks, so no sampler's project carries code
# that went untested. What a sampler changes is the epoch's order: the modules whose text uses
# the answer (data/sampling.py, the audit that reports the order) and those that import one of
# them (data/plan.py: each rank's share of that order). A test file runs again in every
# sampler's project when it imports or names one of those; a file that reaches them only
# through the loader (prep, decoding, bad data, text, the bench's rows) reads samples without
# checking their order, and runs once per backend, in its default sampler's project: that the
# loader's DataLoader workers deliver exactly the plan, whatever the sampler, is test_loader's
# own subject, and it runs for every sampler. The other samplers' projects also leave out the
# tests that launch processes (train.sh, torchrun).
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
    path = jinja2.Template(relative).render(package_name=PACKAGE, loader_backend=backend, task=DEFAULT_TASK)
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


def named_modules(path: Path, package: Path, modules: set[str]) -> set[str]:
    """The modules of the package a test file imports or names in a string (`"myexp.train"`,
    `"-m myexp.harness.launch"`, a parametrized `"sampling"`, run in a subprocess or imported by name)."""
    found = package_imports(path, package, modules)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.removeprefix(f"-m {PACKAGE}.").removeprefix(f"{PACKAGE}.")
            found |= {
                m
                for m in modules - {""}  # the package itself ("") is named only by an import of it
                if name == m or name.startswith(f"{m}.") or name.split(".")[0] == m.split(".")[-1]
            }
    return found


def helpers_of(path: Path) -> list[Path]:
    """The test file and the modules of its own folder it imports besides conftest (order_cases.py:
    a test's cases, one file per backend), whose names count as the test's."""
    imported = {node.module for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)}
    return [
        path,
        *(
            path.parent / f"{m}.py"
            for m in sorted(imported - {None, "conftest"})
            if (path.parent / f"{m}.py").is_file()
        ),
    ]


def sampler_independent_tests(project: Path, independent: list[str]) -> list[str]:
    """The test files of a project that neither depend on the sampler nor import or name a module
    that makes or reads the epoch's order: one whose text depends on the sampler, or one that
    imports such a module (the loader, which imports the plan, is not one: see above)."""
    package = project / "src" / PACKAGE
    modules = package_modules(package)
    names = set(modules)
    direct = {name for name, path in modules.items() if str(path.relative_to(project)) not in independent}
    dependent = direct | {name for name, path in modules.items() if package_imports(path, package, names) & direct}
    return sorted(
        path
        for path in independent
        if path.startswith("tests/test_")
        and not any(named_modules(part, package, names) & dependent for part in helpers_of(project / path))
    )


# What is the same for every backend is marked in the generated tests themselves: a process
# test (or a parameter of one: test_bad_inputs' train.sh cases) marked `same_for_every_backend`
# proves what the harness, train.sh or the recipe do (launch, lock, rendezvous, refusals, the
# recipe's resume, the GPU smoke script), which no backend changes. It runs
# in the default backend's project only, its source and its own fixtures checked identical in
# every backend's (test_tests_run_in_one_backend_are_rendered_alike); each backend's loader,
# resume, restarts and two-node training still run in its own project.
ONE_BACKEND = "same_for_every_backend"


def one_backend_tests(project: Path) -> dict[str, str]:
    """{"tests/FILE::TEST[PARAMETER]": its source} of the tests marked `same_for_every_backend`, as
    pytest collects them in the project (the mark on a test function or on one of its parameters).
    The source is the test's (decorators included, as the mutants find functions:
    mutants_framework.definitions), that of the fixtures of its file it takes and of the functions of
    its file it calls and, for a parameter marked on its own, the call outside functions that defines
    it by its id (`Case("train.sh: ...", ...)` in a list of cases) with the functions of the file
    that call names."""
    collected = run_pytest(project, "--collect-only", "-m", ONE_BACKEND, "tests", timeout=300)
    assert collected.returncode == 0, f"{project}: the tests do not collect:\n{collected.stdout[-3000:]}"
    nodes: dict[str, list[str]] = {}
    for node in (line for line in collected.stdout.splitlines() if line.startswith("tests/test_")):
        nodes.setdefault(node.partition("::")[0], []).append(node)
    found = {}
    for file, marked in nodes.items():  # each file read and parsed once
        path = project / file
        text = path.read_text()
        spans = definitions(path, text)
        sources = {name: text[spans[name][0].start : spans[name][0].end] for name in spans if "." not in name}
        tree = ast.parse(text)
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        made = [statement for statement in tree.body if not isinstance(statement, ast.FunctionDef | ast.ClassDef)]
        calls = [n for statement in made for n in ast.walk(statement) if isinstance(n, ast.Call)]
        for node in marked:
            name, _, parameter = node.partition("::")[2].removesuffix("]").partition("[")
            calls_of_test = (c for c in ast.walk(functions[name]) if isinstance(c, ast.Call))
            # the file's functions the test calls itself (test_bad_inputs' run_and_judge)
            called = sorted({c.func.id for c in calls_of_test if isinstance(c.func, ast.Name)} & functions.keys())
            parts = [name, *(a.arg for a in functions[name].args.args if a.arg in sources), *called]
            source = "".join(sources[part] for part in parts)
            for call in calls:  # Case("id", ...), pytest.param(x, id="id")
                if parameter and parameter in defining_ids(call):
                    named = {n.id for n in ast.walk(call) if isinstance(n, ast.Name) and n.id in sources}
                    source += ast.get_source_segment(text, call) + "".join(sources[n] for n in sorted(named))
            found[node] = source
    return found


def defining_ids(call: ast.Call) -> set[str]:
    """The ids a call may give a test parameter: its first argument or its `id=`, when a string."""
    candidates = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "id")]
    return {c.value for c in candidates if isinstance(c, ast.Constant) and isinstance(c.value, str)}


@pytest.mark.parametrize(("backend", "sampler"), TESTED)
def test_rendered_project_passes_its_own_tests(rendered, backend: str, sampler: str) -> None:
    project = rendered(backend, sampler)
    if DEFAULT_SAMPLER[backend] == sampler:
        result = run_pytest(project, *([] if backend == DEFAULT_BACKEND else ["-m", f"not {ONE_BACKEND}"]))
    else:
        once = sampler_independent_tests(project, sampler_independent_files(backend))
        result = run_pytest(project, "-m", "not processes", *(f"--ignore={path}" for path in once))
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, f"{backend}/{sampler}: the generated tests fail:\n{result.stdout[-6000:]}"
    assert "passed" in summary and "skipped" not in summary and " error" not in summary, (
        f"{backend}/{sampler}: unexpected summary {summary!r}"
    )


# The files of a project that say which pair it is, rather than run it: its answers, its
# description (pyproject.toml), its package's docstring, and its pages (*.md).
DESCRIPTIONS = (".copier-answers.yml", "pyproject.toml", f"src/{PACKAGE}/__init__.py")


def not_from_tested_pairs(project: Path, backend: str, sampler: str, twins: list[Path]) -> list[str]:
    """The files of a project of an untested pair (variants.UNTESTED) that no tested project (`twins`:
    its backend's with the default sampler, its sampler's with the default backend) holds: a file
    counts as held when a twin has it byte for byte or, for the files that describe the project
    (DESCRIPTIONS, *.md), when each of its lines is a line of a twin's or names this backend and
    this sampler both (the description, "a files data pipeline and the block sampler") and holds no
    Jinja and no link, which no tested project's test would then have checked."""
    names = [re.compile(rf"\b{re.escape(word)}\b") for word in (backend, sampler)]
    found = []
    for path in sorted(p for p in project.rglob("*") if p.is_file() and ".git" not in p.relative_to(project).parts):
        relative, data = path.relative_to(project), path.read_bytes()
        held = [twin / relative for twin in twins if (twin / relative).is_file()]
        if any(twin.read_bytes() == data for twin in held):
            continue
        if relative.suffix == ".md" or str(relative) in DESCRIPTIONS:
            lines = {line for twin in held for line in twin.read_text().splitlines()}
            if all(line in lines or named_alone(line, names) for line in path.read_text().splitlines()):
                continue
        found.append(str(relative))
    return found


def named_alone(line: str, names: list[re.Pattern]) -> bool:
    return all(n.search(line) for n in names) and not JINJA_TAG.search(line) and "](" not in line


@pytest.mark.parametrize(("backend", "sampler"), UNTESTED)
def test_a_pair_left_untested_holds_only_files_of_tested_pairs(rendered, backend: str, sampler: str) -> None:
    """Why CI runs no suite of this pair (variants.TESTED): every file of its project is a file of a
    project whose suite and mutants run."""
    pairs = [(backend, DEFAULT_SAMPLER[backend]), (DEFAULT_BACKEND, sampler)]
    assert all(pair in TESTED for pair in pairs), f"{backend}/{sampler}: its twins {pairs} are not all tested"
    twins = [rendered(*pair) for pair in pairs]
    assert not (found := not_from_tested_pairs(rendered(backend, sampler), backend, sampler, twins)), (
        f"{backend}/{sampler}: files no tested project holds: {found}; test this pair (variants.TESTED) "
        "or move what depends on both answers into a file of one of them"
    )


def test_a_file_of_an_untested_pair_that_no_tested_project_holds_is_found(rendered, tmp_path: Path) -> None:
    """The other side: a line of code that only the untested pair has, or a page line that names one of
    its answers but not the other, is found; the same lines in the tested projects' files are not."""
    backend, sampler = UNTESTED[0]
    twins = [rendered(backend, DEFAULT_SAMPLER[backend]), rendered(DEFAULT_BACKEND, sampler)]
    project = Path(shutil.copytree(rendered(backend, sampler), tmp_path / "project"))
    assert not_from_tested_pairs(project, backend, sampler, twins) == []
    loader = project / "src" / PACKAGE / "data" / "loader.py"
    loader.write_text(loader.read_text() + "\nSTEP = 2\n")
    readme = project / "README.md"
    readme.write_text(readme.read_text() + f"\nOnly the {sampler} sampler does this.\n")
    assert not_from_tested_pairs(project, backend, sampler, twins) == ["README.md", f"src/{PACKAGE}/data/loader.py"]
    readme.write_text(readme.read_text() + f"\nThe {backend} backend with the {sampler} sampler.\n")
    readme.write_text(readme.read_text().replace(f"\nOnly the {sampler} sampler does this.\n", ""))
    assert not_from_tested_pairs(project, backend, sampler, twins) == [f"src/{PACKAGE}/data/loader.py"]


def bound_names(statement: ast.stmt) -> set[str] | None:
    """The names a module-level statement binds (a def, an assignment, an import); None for any
    other statement (an `if` at module level, a call): what it does is not a name's."""
    if isinstance(statement, ast.FunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return set()  # the docstring
    return None


def used_names(tree: ast.AST) -> set[str]:
    """Every name a piece of code reads, and the parameters of its functions: a fixture is asked for
    by a parameter's name."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for a in n.args.args
    }


def conftest_names_that_change(
    project: Path, classification: Path, modules: set[str], changed_modules: set[str]
) -> set[str] | None:
    """The names of the task project's tests/conftest.py whose meaning the task changes: those whose
    statement differs from the classification project's conftest (the task's synthetic source, its
    METRIC_FLOOR), those imported from a module the task changes, and every name whose definition
    uses one of them (prepare_synthetic, then sorted_data, then two_runs: a fixture's parameters count).
    None when the change is not a name's: a module-level statement that binds none, a pytest hook or
    an autouse fixture (which reach every test). `modules`: the package's module names; `changed_modules`
    those the task changes."""
    task, other = (ast.parse((p / "tests" / "conftest.py").read_text()) for p in (project, classification))
    other_statements = {ast.dump(statement) for statement in other.body}
    definitions: dict[str, list[ast.stmt]] = {}
    changed: set[str] = set()
    for statement in task.body:
        bound = bound_names(statement)
        if bound is None:
            if ast.dump(statement) not in other_statements:
                return None
            continue
        for name in bound:
            definitions.setdefault(name, []).append(statement)
        # conftest is outside the package: its imports of the package are absolute (`here` is empty)
        if ast.dump(statement) not in other_statements or imported_modules(statement, [], modules) & changed_modules:
            changed |= bound
    grown = True
    while grown:  # what uses a changed name changes, to the end of the chain
        more = {name for name, statements in definitions.items() if any(used_names(s) & changed for s in statements)}
        grown = bool(more - changed)
        changed |= more
    for name in changed:
        for statement in definitions.get(name, []):
            if name.startswith("pytest_") or "autouse" in ast.unparse(statement).split(":", 1)[0]:
                return None
    return changed


def task_dependent_tests(project: Path, classification: Path) -> list[str]:
    """The test files of a task's project that its task can change: those that differ from the same
    backend's and sampler's classification project (or exist only here: the task's own), those that
    import or name a module that differs (the recipe, the model, the synthetic source) or a module that
    imports one, directly or through others (train.py, evaluate.py), and those that use a name of
    conftest.py that the task changes (conftest_names_that_change: its synthetic data, every fixture
    that prepares or trains on them). Every other test file is byte-identical and tests identical code
    with identical fixtures in the classification project, where it runs already."""
    package, other = project / "src" / PACKAGE, classification / "src" / PACKAGE
    modules = package_modules(package)
    names = set(modules)

    def same(path: Path, twin: Path) -> bool:
        return twin.is_file() and path.read_bytes() == twin.read_bytes()

    imports = {name: package_imports(path, package, names) for name, path in modules.items()}
    dependent = {name for name, path in modules.items() if not same(path, other / path.relative_to(package))}
    while more := {name for name in modules if imports[name] & dependent} - dependent:
        dependent |= more
    files = sorted((project / "tests").glob("test_*.py"))
    changed = conftest_names_that_change(project, classification, names, dependent)
    if changed is None:
        return [str(path.relative_to(project)) for path in files]
    return sorted(
        str(path.relative_to(project))
        for path in files
        if not all(same(part, classification / part.relative_to(project)) for part in helpers_of(path))
        or any(named_modules(part, package, names) & dependent for part in helpers_of(path))
        or any(used_names(ast.parse(part.read_text())) & changed for part in helpers_of(path))
    )


@pytest.mark.parametrize("task", sorted(TASK_RENDERS))
def test_task_project_passes_its_own_tests(rendered, task: str) -> None:
    """A task other than the default renders once (variants.TASK_RENDERS), and runs the tests its task
    can change (task_dependent_tests): those that start no processes, and the task's own files,
    tests/test_<task>*.py, processes included (the gathered loss, a training run). The pipeline's process
    tests (launch, resume, restarts) run in the classification projects: the task changes a batch's
    fields and the step, never the order or the harness. They pass in the task's project too (its
    `nox -s test`: conftest prepares the task's synthetic data, the tests read the recipe's METRIC),
    which CI leaves out: the whole suite of each task's project took about 15 minutes with -n 2 on 2
    shared, busy cores."""
    backend, sampler = TASK_RENDERS[task]
    project = rendered(backend, sampler, task)
    tests = task_dependent_tests(project, rendered(backend, sampler))
    own = [path for path in tests if Path(path).name.startswith(f"test_{task}")]
    assert own, f"{task}: the project has no tests/test_{task}*.py of its own"
    others = [path for path in tests if path not in own]  # none given would mean every file: never empty here
    assert others, f"{task}: no test file but its own is task-dependent: {tests}"
    results = [run_pytest(project, "-m", "not processes", *others), run_pytest(project, *own)]
    for result in results:
        summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        assert result.returncode == 0, (
            f"{task} ({backend}/{sampler}): the generated tests fail:\n{result.stdout[-6000:]}"
        )
        assert "passed" in summary and "skipped" not in summary and " error" not in summary, (
            f"{task} ({backend}/{sampler}): unexpected summary {summary!r}"
        )


def test_a_test_file_that_uses_what_the_task_changes_in_conftest_is_task_dependent(rendered, tmp_path: Path) -> None:
    """test_arrivals.py is byte-identical in the segmentation project, imports no module that differs,
    and takes only `free_port` of conftest, which the task does not change: it does not run there.
    With `free_port` made to use the task's synthetic source, it does (the other side); with a pytest
    hook added to the task's conftest, every file does."""
    backend, sampler = TASK_RENDERS["segmentation"]
    task, classification = rendered(backend, sampler, "segmentation"), rendered(backend, sampler)
    arrivals = "tests/test_arrivals.py"
    assert (task / arrivals).read_bytes() == (classification / arrivals).read_bytes(), "test_arrivals.py differs"
    assert arrivals not in task_dependent_tests(task, classification), "a file that uses nothing the task changes"
    changed = Path(shutil.copytree(task, tmp_path / "changed"))
    conftest = changed / "tests" / "conftest.py"
    text = conftest.read_text()
    assert text.count("def free_port() -> int:\n") == 1, "conftest's free_port changed: update this test"
    conftest.write_text(text.replace("def free_port() -> int:\n", "def free_port() -> int:\n    assert synthetic\n"))
    assert arrivals in task_dependent_tests(changed, classification), "a file whose conftest name changed is left out"
    hooked = Path(shutil.copytree(task, tmp_path / "hooked"))
    conftest = hooked / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\n\ndef pytest_configure(config):\n    pass\n")
    every = sorted(str(p.relative_to(hooked)) for p in (hooked / "tests").glob("test_*.py"))
    assert task_dependent_tests(hooked, classification) == every, "a hook the task adds reaches every test file"


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
    sampling = f"src/{PACKAGE}/data/sampling.py"
    assert sampling not in sampler_independent_files(backend), "sampling.py counted as independent of the sampler"
    texts = {(rendered(backend, sampler) / sampling).read_text() for sampler in samplers}
    assert len(texts) == 2, "sampling.py is the same for two samplers: the split cannot be seen in it"
    project = rendered(backend, DEFAULT_SAMPLER[backend])
    once = sampler_independent_tests(project, sampler_independent_files(backend))
    for name in ("test_ledger.py", "test_prep.py", "test_decode.py"):  # ledger.py only; the loader reads prep's output
        assert f"tests/{name}" in once, f"{name} runs for every sampler, yet checks no order: {once}"
    for name in ("test_epoch_plan.py", "test_loader.py", "test_order_across_processes.py", "test_audit.py"):
        # sampling, the plan and the loader, the order in fresh interpreters, the audit of the order
        assert f"tests/{name}" not in once, f"{name} names a module that makes the order, yet runs once: {once}"


def test_tests_run_in_one_backend_are_rendered_alike(rendered) -> None:
    projects = {backend: rendered(backend, sampler) for backend, sampler in DEFAULT_SAMPLER.items()}
    expected = one_backend_tests(projects[DEFAULT_BACKEND])
    assert len(expected) >= 10, (
        f"only {len(expected)} tests marked {ONE_BACKEND} in {DEFAULT_BACKEND}: {sorted(expected)}"
    )
    for backend, project in projects.items():
        found = one_backend_tests(project)
        assert sorted(found) == sorted(expected), (
            f"{backend}: the tests marked {ONE_BACKEND} differ from {DEFAULT_BACKEND}'s: "
            f"{sorted(set(found) ^ set(expected))}: a test run in one backend's project must exist in every one"
        )
        for name, source in found.items():
            assert source == expected[name], (
                f"{backend}: {name} (or a fixture of its file it takes) renders differently from {DEFAULT_BACKEND}'s, "
                f"yet runs only in {DEFAULT_BACKEND}'s project: drop its `{ONE_BACKEND}` mark"
            )


def test_a_marked_parameter_is_compared_by_the_call_that_makes_it(rendered, tmp_path: Path) -> None:
    """The other side of the check above: a case of test_bad_inputs marked on its own (not its test
    function) that renders otherwise in one backend is seen, and only that case."""
    project = rendered(DEFAULT_BACKEND, DEFAULT_SAMPLER[DEFAULT_BACKEND])
    expected = one_backend_tests(project)
    node = "tests/test_bad_inputs.py::test_a_bad_input_ends_with_one_error_line_and_leaves_nothing_behind[train.sh: NPROC=0]"
    assert node in expected, f"{node} is not marked {ONE_BACKEND}: {sorted(expected)}"
    changed = Path(shutil.copytree(project, tmp_path / "project"))
    cases = changed / "tests" / "test_bad_inputs.py"
    text = cases.read_text()
    assert text.count('("NPROC=0", "1 or more")') == 1, "the case's words changed: update this test"
    cases.write_text(text.replace('("NPROC=0", "1 or more")', '("NPROC=0", "one or more")'))
    found = one_backend_tests(changed)
    assert [name for name in expected if found.get(name) != expected[name]] == [node]
