"""Every valid combination of answers renders a clean project holding only what was chosen."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import COMBINATIONS, PACKAGE, ROOT, render, run_in
from package_modules import package_imports, package_modules
from variants import RENDERS

JINJA_LEFTOVER = re.compile(r"{{|}}|{%|%}|{#|#}")
FIGURES = {".png"}  # the docs pages' figures (webdataset: docs/shuffle_audit.png)
BACKEND_FILES = {
    "memory": {"memory_backend.py"},
    "files": {"files_backend.py"},
    "arrow": {"arrow_backend.py"},
    "webdataset": {"webdataset_backend.py", "storage_order.py", "in_place.py", "in_bucket.py", "parts_in_bucket.py"},
}
MAP_STYLE_ONLY = {"plan.py", "backend.py"}  # backend.py: which backend data/loader.py reads


def project_files(project: Path) -> list[Path]:
    return [p for p in project.rglob("*") if p.is_file() and ".git" not in p.relative_to(project).parts]


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_no_jinja_syntax_survives_rendering(rendered, backend: str, sampler: str, task: str) -> None:
    project = rendered(backend, sampler, task)
    for path in project_files(project):
        assert not path.name.endswith(".jinja"), f"{path.relative_to(project)} kept its .jinja suffix"
        if path.suffix in FIGURES:  # copied byte for byte: Jinja renders text only
            continue
        text = path.read_text()
        match = JINJA_LEFTOVER.search(text)
        assert not match, (
            f"{path.relative_to(project)} still holds Jinja syntax {match.group()!r} near offset {match.start()}"
        )


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_only_the_chosen_backend_and_sampler_are_rendered(rendered, backend: str, sampler: str) -> None:
    project = rendered(backend, sampler)
    package_files = {p.name for p in (project / "src" / PACKAGE).rglob("*") if p.is_file()}
    for other, files in BACKEND_FILES.items():
        if other == backend:
            assert files <= package_files, f"{backend}: its backend files {files - package_files} are missing"
        else:
            assert not files & package_files, (
                f"{backend}: files of the {other} backend were rendered: {files & package_files}"
            )
    assert "sampling.py" in package_files, f"{backend}/{sampler}: sampling.py is missing"
    sampler_doc = (project / "src" / PACKAGE / "data" / "sampling.py").read_text().split("\n", 1)[0]
    assert f"`{sampler}`" in sampler_doc, f"sampling.py is not the {sampler} sampler: {sampler_doc}"
    if backend == "webdataset":
        assert not MAP_STYLE_ONLY & package_files, (
            f"map-style files rendered for webdataset: {MAP_STYLE_ONLY & package_files}"
        )
    else:
        assert MAP_STYLE_ONLY <= package_files, f"{backend}: map-style files missing"
    test_names = " ".join(p.name for p in (project / "tests").iterdir())
    assert ("memory" in test_names) == (backend == "memory"), (
        f"{backend}: memory tests rendered or missing: {test_names}"
    )


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_answers_file_and_executable_launch_script(rendered, backend: str, sampler: str, task: str) -> None:
    project = rendered(backend, sampler, task)
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert (answers["loader_backend"], answers["sampler"], answers["task"]) == (backend, sampler, task), answers
    assert os.access(project / "train.sh", os.X_OK), "train.sh lost its executable bit"


@pytest.mark.parametrize(("backend", "sampler"), COMBINATIONS)
def test_the_lowest_torch_a_project_allows_is_the_torch_its_tests_run_on(rendered, backend: str, sampler: str) -> None:
    # harness/launch.py builds on torchrun's private internals as this release has them: the floor
    # is what CI's process tests (launch, restart, resume) prove, not an older torch nobody ran.
    declared = tomllib.loads((rendered(backend, sampler) / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = [found.group(1) for r in declared if (found := re.fullmatch(r"torch>=([0-9.]+)", r.replace(" ", "")))]
    pinned = re.findall(r"^torch==([0-9.]+)$", (ROOT / ".ci" / "constraints.txt").read_text(), re.MULTILINE)
    assert len(floors) == 1 and len(pinned) == 1, f"torch requirements {declared}, CI's pins {pinned}"
    assert floors[0].split(".")[:2] == pinned[0].split(".")[:2], (
        f"{backend}/{sampler}: the project allows torch>={floors[0]}, but CI tests torch {pinned[0]}: "
        "raise the floor to the tested release (or test the floor)"
    )


def assert_linted(project: Path, what: str) -> None:
    for command in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "--diff", "."]):
        result = run_in(project, sys.executable, "-m", "ruff", *command)
        assert result.returncode == 0, f"ruff {command[0]} fails on the rendered {what}:\n{result.stdout[-3000:]}"


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_rendered_code_passes_the_projects_own_linters(rendered, backend: str, sampler: str, task: str) -> None:
    assert_linted(rendered(backend, sampler, task), f"{backend}/{sampler}/{task} project")


def test_the_templates_plain_python_is_linted_where_it_is() -> None:
    """The template's Python files without a .jinja suffix (conditional names included) are what
    `nox -s lint` checks in place: train.py, shared by every backend and task, is one, with no Jinja in it."""
    loop = ROOT / "template" / "src" / "{{package_name}}" / "train.py"
    assert not JINJA_LEFTOVER.search(loop.read_text()), "template/.../train.py holds Jinja: it is no plain Python"
    listed = run_in(ROOT, sys.executable, "-m", "ruff", "check", "--no-cache", "--show-files", "template")
    linted = {Path(line.strip()).name for line in listed.stdout.splitlines()}
    plain = {
        "train.py",
        "audit.py",
        "prep.py",
        "streams.py",
        "{% if loader_backend == 'webdataset' %}storing.py{% endif %}",
        # The files that take a default from the answers read it from __init__.py.jinja (SEED, ...)
        "{% if loader_backend != 'webdataset' %}loader.py{% endif %}",
        "{% if loader_backend != 'webdataset' %}reading.py{% endif %}",
        "{% if loader_backend == 'webdataset' %}reading.py{% endif %}",
        "{% if task == 'classification' %}recipe.py{% endif %}",
        "{% if task == 'contrastive' %}recipe.py{% endif %}",
        "{% if task == 'segmentation' %}recipe.py{% endif %}",
    }
    assert plain <= linted, f"ruff does not read the template's plain Python in place: {sorted(linted)}"
    assert_linted(ROOT / "template", "template's plain Python files, in place")


# The package's one rendered Python file: the answers that other files take as defaults.
ANSWERS = "__init__.py.jinja"


def test_the_package_renders_one_file_of_answers_and_the_rest_is_plain_python() -> None:
    package = ROOT / "template" / "src" / "{{package_name}}"
    rendered = sorted(str(p.relative_to(package)) for p in package.rglob("*.jinja"))
    assert rendered == [ANSWERS], (
        f"template/src/{{{{package_name}}}}/ renders {rendered}, not {ANSWERS} alone: a file that needs an "
        f"answer imports it from the package (`from .. import SEED`) and {ANSWERS} names it, once, so that "
        "ruff reads the file in place"
    )


# A Jinja `if` on the backend picks files, not lines: a file rendered for every backend holds none.
BACKEND_IF = re.compile(r"{%-?\s*(?:el)?if\b[^%]*\bloader_backend\b")
BACKEND_IF_ALLOWED = {
    # The dependencies a backend needs: configuration, not code.
    "pyproject.toml.jinja",
    # The answers of the questions a backend alone asks (copier.yml's `when`): configuration too.
    "src/{{package_name}}/__init__.py.jinja",
}


def test_files_rendered_for_every_backend_hold_no_backend_if() -> None:
    template = ROOT / "template"
    shared = [p for p in template.rglob("*") if p.is_file() and "loader_backend" not in str(p.relative_to(template))]
    holding = {
        str(p.relative_to(template)) for p in shared if p.suffix not in FIGURES and BACKEND_IF.search(p.read_text())
    }
    unexpected = sorted(holding - BACKEND_IF_ALLOWED)
    assert not unexpected, (
        "these template files are rendered for every backend but switch on loader_backend with a Jinja if: "
        f"{unexpected}; move each backend's part into the backend's own file (a conditional file name)"
    )


# train.py is the loop a researcher reads in one sitting; the harness and the recipe hold the rest
TRAIN_LINES, LOOP_LINES = 180, 60  # the file; its train() function
HELP_PANELS = ("Run", "Recipe", "Reading")  # the option groups, each a panel of ./train.sh --help


def function_lines(path: Path, name: str) -> int:
    """The lines of the module-level function `name` in `path`, its signature included."""
    found = [node for node in ast.parse(path.read_text()).body if getattr(node, "name", None) == name]
    assert len(found) == 1, f"{path.name} defines {len(found)} functions named {name}"
    return found[0].end_lineno - found[0].lineno + 1


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_the_training_loop_is_one_short_file_and_the_package_shows_its_parts(
    rendered, backend: str, sampler: str, task: str
) -> None:
    package = rendered(backend, sampler, task) / "src" / PACKAGE
    lines = len((package / "train.py").read_text().splitlines())
    assert lines <= TRAIN_LINES, f"{backend}/{sampler}/{task}: train.py holds {lines} lines, more than {TRAIN_LINES}"
    loop = function_lines(package / "train.py", "train")
    assert loop <= LOOP_LINES, f"{backend}/{sampler}/{task}: train() holds {loop} lines, more than {LOOP_LINES}"
    top = {p.name for p in package.iterdir()}
    for researchers in ("recipe.py", "model.py", "transforms.py", "train.py"):
        assert researchers in top, f"{backend}/{sampler}/{task}: {researchers} is not at the top of the package"
    for folder, parts in (
        ("harness", {"launch.py", "checkpoint.py", "run_folder.py", "run_options.py", "tally.py"}),
        ("data", {"loader.py", "sampling.py", "decode.py"}),
        ("sources", {"source.py", "synthetic_images.py", "class_folders.py", "verify.py"}),
        ("checks", {"guarantees.py", "shuffle_metrics.py"}),
    ):
        assert parts <= {p.name for p in (package / folder).iterdir()}, (
            f"{backend}/{sampler}/{task}: {folder}/ lacks {parts}"
        )


def layer(module: str) -> str:
    """data, sources, checks, harness, or top (the commands and the recipe at the package's top)."""
    folder = module.partition(".")[0]
    return folder if folder in ("data", "sources", "checks", "harness") and "." in module else "top"


# Which modules each folder must not import, and why, in words for the failure.
FORBIDDEN_IMPORTS = {
    "data": (
        lambda target: (
            layer(target) in ("sources", "checks")
            or target == "harness.launch"
            or (layer(target) == "top" and target not in ("transforms", ""))
        ),
        "the read path imports nothing from prep's sources/, the order's checks/, harness/launch.py or the "
        "commands (of the top level, only transforms.py and the package's answers, __init__.py)",
    ),
    "harness": (
        lambda target: layer(target) != "harness",
        "harness/ imports only harness/: nothing from data/ or above",
    ),
    "sources": (
        lambda target: layer(target) in ("checks", "top"),
        "prep's sources/ import nothing from checks/ or the commands",
    ),
    "checks": (
        lambda target: layer(target) in ("sources", "top"),
        "checks/ imports nothing from sources/ or the commands",
    ),
}


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_imports_run_downward_and_in_no_circle(rendered, backend: str, sampler: str, task: str) -> None:
    package = rendered(backend, sampler, task) / "src" / PACKAGE
    modules = package_modules(package)
    imports = {name: package_imports(path, package, set(modules)) - {name} for name, path in modules.items()}
    for module, targets in imports.items():
        rule = FORBIDDEN_IMPORTS.get(layer(module))
        for target in sorted(targets):
            if rule and rule[0](target):
                raise AssertionError(
                    f"{backend}/{sampler}/{task}: {modules[module].relative_to(package)} imports {target}: {rule[1]}"
                )
    # A circle: a module that reaches itself again through the modules it imports.
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circle = path[path.index(module) :] + [module]
            raise AssertionError(
                f"{backend}/{sampler}/{task}: modules import each other in a circle: {' -> '.join(circle)}"
            )
        if module in done:
            return
        for target in sorted(imports[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in imports:
        visit(module, [])


@pytest.mark.parametrize("backend", ["arrow", "webdataset"])
def test_train_help_shows_the_option_groups_under_the_command_a_user_types(rendered, backend: str) -> None:
    # What ./train.sh --help runs (without torchrun), in a terminal wide enough for every line.
    project = rendered(backend, {"arrow": "global", "webdataset": "shard_buffer"}[backend])
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "COLUMNS": "160", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", "--help"], cwd=project, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, f"{backend}: --help failed:\n{result.stderr[-3000:]}"
    assert "Usage: ./train.sh [OPTIONS]" in result.stdout, f"{backend}: the usage line:\n{result.stdout[:500]}"
    panels = re.findall(r"^╭─ (\w+) ─", result.stdout, flags=re.MULTILINE)
    assert [p for p in panels if p != "Options"] == list(HELP_PANELS), (
        f"{backend}: --help shows the panels {panels}, not {list(HELP_PANELS)} (and typer's own for --help)"
    )
    run_panel = result.stdout.split("╭─ Run ")[1].split("╰")[0]
    for option in ("--data", "--epochs", "--run-dir", "--checkpoint-every", "--ledger", "--log-every", "--resume"):
        assert option in run_panel, f"{backend}: {option} is not in the Run panel:\n{run_panel}"


# Answers other than copier.yml's defaults, each the default of the option of its name
# (`batch_size`: --batch-size); one render per task, as each task's recipe.py reads its own.
ANSWERED = {
    "classification": ("arrow", {"seed": 7, "batch_size": 5, "num_workers": 3}),
    "contrastive": (
        "webdataset",
        {"seed": 11, "batch_size": 6, "num_workers": 1, "shuffle_buffer": 4096, "run_samples": 8},
    ),
    "segmentation": ("files", {"seed": 13, "batch_size": 4}),
}


@pytest.mark.parametrize("task", sorted(ANSWERED))
def test_each_answer_is_the_default_of_its_option_in_train_help(tmp_path: Path, task: str) -> None:
    backend, answers = ANSWERED[task]
    project = render(tmp_path / "project", package_name=PACKAGE, loader_backend=backend, task=task, **answers)
    # A terminal wide enough that no option's help wraps before its [default: ...]
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "COLUMNS": "300", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.train", "--help"], cwd=project, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, f"{task}: --help failed:\n{result.stderr[-3000:]}"
    for answer, value in answers.items():
        option = "--" + answer.replace("_", "-")
        line = re.search(rf"^\W*{option}\s.*?\[default: ([^\]]*)\]", result.stdout, flags=re.MULTILINE)
        shown = line.group(1) if line else None
        assert shown == str(value), (
            f"{backend}/{task} rendered with {answers}: ./train.sh --help shows {option}'s default as {shown}, "
            f"not the answer {value}"
        )


def test_defaults_render_the_arrow_backend_with_the_global_sampler(tmp_path: Path) -> None:
    project = render(tmp_path / "project")
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert (answers["loader_backend"], answers["sampler"]) == ("arrow", "global"), answers
    assert answers["package_name"] == "ddp_experiment", (
        f"package name derived from the project name: {answers['package_name']}"
    )
    assert (project / "src" / "ddp_experiment" / "data" / "arrow_backend.py").is_file()
    # The README's first command renders these answers: its package name is longer than the other
    # renders' (myexp), and a line that fits with one may not with the other.
    assert_linted(project, "project of the default answers")


def test_webdataset_defaults_to_the_shard_buffer_sampler(tmp_path: Path) -> None:
    project = render(tmp_path / "project", loader_backend="webdataset")
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["sampler"] == "shard_buffer", f"webdataset got sampler {answers['sampler']}"


def test_copy_task_makes_a_git_repository_with_one_clean_commit(tmp_path: Path) -> None:
    project = render(tmp_path / "project", run_tasks=True, package_name=PACKAGE)
    log = subprocess.run(["git", "log", "--oneline"], cwd=project, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1, f"expected one commit, got:\n{log.stdout}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"the first commit left files out:\n{status.stdout}"


def test_template_files_outside_the_project_are_not_rendered(rendered) -> None:
    project = rendered("arrow", "global")
    for name in ("copier.yml", "hooks", "noxfile.py.jinja"):
        assert not (project / name).exists(), f"{name} leaked into the rendered project"
    assert (ROOT / "template").is_dir()


def test_the_json_hook_checks_two_files_without_writing_either(rendered, tmp_path: Path) -> None:
    # `python -m json.tool a.json b.json` (the hook once used) reads a.json and writes it over b.json.
    project = tmp_path / "project"
    shutil.copytree(rendered("arrow", "global"), project)
    first, second = project / "first.json", project / "second.json"
    first.write_text('{"a": 1}\n')
    second.write_text('{"b": [2, 3]}\n')
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-cache"))
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "first.json", "second.json", ".pre-commit-config.yaml"], cwd=project, check=True)
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "check-json", "--files", "first.json", "second.json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"the check-json hook fails on two valid files:\n{result.stdout}\n{result.stderr}"
    assert (first.read_text(), second.read_text()) == ('{"a": 1}\n', '{"b": [2, 3]}\n'), (
        "the check-json hook rewrote a JSON file it should only check"
    )
    second.write_text('{"b": ')
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "check-json", "--files", "second.json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode != 0 and "second.json" in result.stdout, f"a broken JSON file passed:\n{result.stdout}"
    assert second.read_text() == '{"b": ', "the check-json hook rewrote a broken JSON file"


README_LIMIT = 15_000  # bytes: the README opens a project (or this repository); reference goes to pages
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(markdown: Path, root: Path) -> list[str]:
    """The relative links of a markdown file whose target is not a file or folder inside root."""
    text = re.sub(r"```.*?```", "", markdown.read_text(), flags=re.S)  # a code block holds no links
    broken = []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            broken.append(f"{target} (points outside the repository)")
            continue
        path = target.partition("#")[0]
        destination = (markdown.parent / path).resolve() if path else markdown
        if not destination.exists() or not destination.is_relative_to(root.resolve()):
            broken.append(target)
    return broken


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_the_readme_is_short_and_every_link_of_the_docs_resolves_in_the_project(
    rendered, backend: str, sampler: str, task: str
) -> None:
    project = rendered(backend, sampler, task)
    readme = project / "README.md"
    assert readme.stat().st_size <= README_LIMIT, (
        f"{backend}/{sampler}/{task}: README.md is {readme.stat().st_size} bytes, over {README_LIMIT}: move reference to docs/"
    )
    pages = [readme, *sorted((project / "docs").glob("*.md"))]
    assert len(pages) > 1, f"{backend}/{sampler}/{task}: no docs/*.md pages rendered"
    for page in pages:
        broken = broken_links(page, project)
        assert not broken, (
            f"{backend}/{sampler}/{task}: {page.relative_to(project)} links to what the project lacks: {broken}"
        )


def test_this_repositorys_readme_is_short_and_its_links_resolve() -> None:
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= README_LIMIT, (
        f"README.md is {readme.stat().st_size} bytes, over {README_LIMIT}: move reference to template/docs or tests/README.md"
    )
    for page in (readme, ROOT / "tests" / "README.md"):
        broken = broken_links(page, ROOT)
        assert not broken, f"{page.relative_to(ROOT)} links to what the repository lacks: {broken}"


@pytest.mark.parametrize(("backend", "sampler", "task"), RENDERS)
def test_every_test_file_of_a_render_is_named_in_its_docs(rendered, backend: str, sampler: str, task: str) -> None:
    """docs/tests.md and the backend's page say what each test file proves: a new file needs its row."""
    project = rendered(backend, sampler, task)
    docs = "".join(page.read_text() for page in (project / "docs").glob("*.md"))
    unnamed = sorted(path.name for path in (project / "tests").glob("test_*.py") if f"`{path.name}`" not in docs)
    assert not unnamed, f"{backend}/{sampler}/{task}: test files no docs/ page names: {unnamed}"
