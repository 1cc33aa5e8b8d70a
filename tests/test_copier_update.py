"""`copier update` brings a project made from the previous release up to this template, keeping the user's work.

The project is rendered from PREVIOUS_RELEASE (a fixed commit of this repository: a fresh clone
has it), committed as a user would, edited and committed again; then `copier update --defaults
--vcs-ref HEAD` (uncommitted template changes included). The update must apply without a
conflict, keep the user's edit, and leave exactly the project a fresh render of HEAD makes,
plus that edit: so the updated project passes the tests the fresh render passes
(tests/test_generated_suites.py runs them), without running them twice here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import PACKAGE, ROOT, render
from copier import run_copy, run_update

# The commit that landed as the release before the benchmarks (issue 9): README and
# pyproject changes since then touch files the user edit below leaves alone.
PREVIOUS_RELEASE = "0c173e842d0abf2e84a7744f3513e78766e188ed"
ANSWERS = {"package_name": PACKAGE, "loader_backend": "arrow", "sampler": "global"}
USER_EDITED = f"src/{PACKAGE}/model.py"
USER_LINE = "# my experiment: a wider first layer comes next\n"
IGNORED = {".git", ".copier-answers.yml"}  # the answers file records the template commit, which differs


def git(project: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def files_of(project: Path) -> dict[str, bytes]:
    return {
        path.relative_to(project).as_posix(): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file() and not IGNORED & set(path.relative_to(project).parts)
    }


def test_update_from_the_previous_release_keeps_the_user_edit_and_matches_a_fresh_render(tmp_path: Path) -> None:
    project = tmp_path / "project"
    run_copy(
        str(ROOT), str(project), data=ANSWERS, defaults=True, unsafe=True, vcs_ref=PREVIOUS_RELEASE, quiet=True,
        skip_tasks=True,
    )  # fmt: skip
    answers = (project / ".copier-answers.yml").read_text()
    assert f"_commit: {PREVIOUS_RELEASE[:7]}\n" in answers, f"the answers do not record the release:\n{answers}"
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "project from the previous release")
    with open(project / USER_EDITED, "a") as f:
        f.write(USER_LINE)
    git(project, "commit", "-qam", "the user's change")

    run_update(str(project), defaults=True, unsafe=True, vcs_ref="HEAD", overwrite=True, quiet=True, skip_tasks=True)

    rejected = sorted(p.relative_to(project).as_posix() for p in project.rglob("*.rej"))
    assert not rejected, f"the update left rejected hunks: {rejected}"
    updated = files_of(project)
    conflicted = sorted(path for path, data in updated.items() if b"\n<<<<<<< " in data or data.startswith(b"<<<<<<< "))
    assert not conflicted, f"the update left conflict markers in {conflicted}"
    assert updated[USER_EDITED].endswith(USER_LINE.encode()), "the update dropped the user's edit"

    fresh = files_of(render(tmp_path / "fresh", **ANSWERS))
    assert sorted(updated) == sorted(fresh), (
        f"the updated project has other files than a fresh render: only updated {sorted(set(updated) - set(fresh))}, "
        f"only fresh {sorted(set(fresh) - set(updated))}"
    )
    differing = sorted(path for path in fresh if updated[path] != fresh[path])
    assert differing == [USER_EDITED], f"the updated project differs from a fresh render in {differing}"
    assert updated[USER_EDITED] == fresh[USER_EDITED] + USER_LINE.encode(), (
        "the user's file is not the fresh one + edit"
    )
    answers = (project / ".copier-answers.yml").read_text()
    assert f"_commit: {PREVIOUS_RELEASE[:7]}\n" not in answers, f"the answers still record the old release:\n{answers}"
