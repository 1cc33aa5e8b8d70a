"""The mutant framework on a tiny package of its own: lookup by qualified name over all
modules, edits confined to the named function, kills judged by the tests failing, not by
their wording."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from mutants_framework import Mutant, MutantError, Survived, all_mutants, killed_by, mutate, mutated_sources

LOADER = """class Loader:
    def epoch(self, seed, epoch):
        return order(seed + epoch)

    def other(self, seed, epoch):
        return order(seed + epoch)


def order(key):
    return [key, key + 1]
"""
TEST = """from tiny.loader import Loader


def test_the_order_changes_with_the_epoch():
    assert Loader().epoch(0, 0) != Loader().epoch(0, 1), "MESSAGE"
"""
EPOCH_IGNORED = Mutant(
    "epoch-ignored",
    "the epoch is not used",
    "Loader.epoch",
    (("order(seed + epoch)", "order(seed)"),),
    backends=("memory",),
    samplers=("global",),
)


def project(tmp_path: Path, module: str = "loader.py", message: str = "the order did not change") -> Path:
    """tmp_path/project: src/tiny/{module} holding Loader, tests/test_order.py asserting with `message`."""
    package = tmp_path / "project" / "src" / "tiny"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / module).parent.mkdir(parents=True, exist_ok=True)
    (package / module).write_text(LOADER)
    if module != "loader.py":  # the class moved: the old module re-exports it
        dotted = ".".join(Path(module).with_suffix("").parts)
        (package / "loader.py").write_text(f"from tiny.{dotted} import Loader  # noqa: F401\n")
    tests = tmp_path / "project" / "tests"
    tests.mkdir()
    (tests / "test_order.py").write_text(TEST.replace("MESSAGE", message))
    return tmp_path / "project"


def test_a_method_is_found_in_whatever_module_defines_it(tmp_path: Path) -> None:
    root = project(tmp_path, module="sub/moved.py")
    killer = killed_by(root, "tiny", EPOCH_IGNORED, ["tests"], timeout=120)
    assert killer == "tests/test_order.py::test_the_order_changes_with_the_epoch", f"killed by {killer!r}"
    assert "order(seed)\n" in (root / "src" / "tiny" / "sub" / "moved.py").read_text(), "moved.py was not mutated"


def test_an_edit_changes_only_the_named_function(tmp_path: Path) -> None:
    root = project(tmp_path)
    ((path, text),) = mutated_sources(root / "src" / "tiny", EPOCH_IGNORED).items()
    assert text == LOADER.replace("order(seed + epoch)", "order(seed)", 1), (
        f"the same code in Loader.other was changed too, or Loader.epoch was not:\n{text}"
    )
    assert path.read_text() == LOADER, "mutated_sources wrote the module"


def test_a_missing_function_is_reported_with_its_name(tmp_path: Path) -> None:
    root = project(tmp_path)
    gone = Mutant("gone", "a renamed method", "Loader.renamed", (("order(", "order2("),))
    with pytest.raises(MutantError, match=r"mutant gone: no function 'Loader.renamed'"):
        mutate(root / "src" / "tiny", gone)
    assert (root / "src" / "tiny" / "loader.py").read_text() == LOADER, "a failed mutant wrote the module"


def test_code_no_longer_in_the_function_is_reported_with_the_code(tmp_path: Path) -> None:
    root = project(tmp_path)
    stale = Mutant("stale", "code that was rewritten", "Loader.epoch", (("order(seed - epoch)", "order(seed)"),))
    with pytest.raises(
        MutantError, match=r"mutant stale: Loader.epoch \(loader.py\) no longer holds 'order\(seed - epoch\)'"
    ):
        mutate(root / "src" / "tiny", stale)


def test_code_of_another_function_does_not_count(tmp_path: Path) -> None:
    root = project(tmp_path)
    elsewhere = Mutant("elsewhere", "code that is only in another function", "order", (("seed + epoch", "seed"),))
    with pytest.raises(MutantError, match="no longer holds"):
        mutate(root / "src" / "tiny", elsewhere)


def test_a_name_defined_in_two_modules_is_refused_until_the_module_is_named(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "src" / "tiny" / "copy.py").write_text(LOADER)
    with pytest.raises(MutantError, match=r"'Loader.epoch' is defined 2 times \(copy.py, loader.py\)"):
        mutate(root / "src" / "tiny", EPOCH_IGNORED)
    named = Mutant("named", "the epoch is not used", "loader.Loader.epoch", EPOCH_IGNORED.edits)
    assert mutate(root / "src" / "tiny", named) == [root / "src" / "tiny" / "loader.py"]


@pytest.mark.parametrize("message", ["the order did not change", "a reworded message"])
def test_a_kill_is_the_tests_failing_whatever_their_message(tmp_path: Path, message: str) -> None:
    root = project(tmp_path, message=message)
    killer = killed_by(root, "tiny", EPOCH_IGNORED, ["tests"], timeout=120)
    assert killer == "tests/test_order.py::test_the_order_changes_with_the_epoch", f"killed by {killer!r}"


def test_a_mutant_the_tests_do_not_see_survives(tmp_path: Path) -> None:
    root = project(tmp_path)
    unseen = Mutant(
        "unseen", "a change in a method no test calls", "Loader.other", (("order(seed + epoch)", "order(seed)"),)
    )
    with pytest.raises(Survived, match=r"unseen .* SURVIVED \(pytest exit code 0"):
        killed_by(root, "tiny", unseen, ["tests"], timeout=120)


def test_runs_are_made_in_turn_until_one_fails_and_one_that_selects_nothing_counts_for_nothing(
    tmp_path: Path,
) -> None:
    def with_another_test(where: Path) -> Path:
        root = project(where)
        (root / "tests" / "test_other.py").write_text("def test_something_else():\n    assert True\n")
        return root

    first, second = ["tests/test_other.py"], ["tests/test_order.py"]
    assert killed_by(with_another_test(tmp_path / "a"), "tiny", EPOCH_IGNORED, first, second, timeout=120).endswith(
        "test_order.py::test_the_order_changes_with_the_epoch"
    ), "the second run, which fails, did not kill the mutant"
    nothing = ["-m", "no_such_mark", "tests"]
    with pytest.raises(Survived, match=r"SURVIVED \(pytest exit code 5, 0, 1 = tests failed\)"):
        killed_by(with_another_test(tmp_path / "b"), "tiny", EPOCH_IGNORED, nothing, first, timeout=120)
    with pytest.raises(Survived, match=r"SURVIVED \(pytest exit code 5, 1 = tests failed\)"):
        killed_by(with_another_test(tmp_path / "c"), "tiny", EPOCH_IGNORED, nothing, timeout=120)


def test_each_run_imports_its_own_project_not_the_last_ones(tmp_path: Path) -> None:
    """The runs are forks of one server (tests/pytest_server.py): a mutated package imported by
    one run must not be what the next run of another project sees."""
    killed = project(tmp_path / "a")
    assert killed_by(killed, "tiny", EPOCH_IGNORED, ["tests"], timeout=120).endswith(
        "test_the_order_changes_with_the_epoch"
    )
    clean = project(tmp_path / "b")
    unseen = Mutant("unseen", "a change no test calls", "Loader.other", (("order(seed + epoch)", "order(seed)"),))
    with pytest.raises(Survived, match=r"exit code 0"):  # b's own Loader.epoch, not a's mutated one
        killed_by(clean, "tiny", unseen, ["tests"], timeout=120)


def test_a_run_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    root = project(tmp_path)
    started = tmp_path / "child.pid"
    (root / "tests" / "test_hangs.py").write_text(
        "import subprocess, time\n\n\ndef test_hangs():\n"
        f"    child = subprocess.Popen(['sleep', '600'])\n    open({str(started)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(600)\n"
    )
    begun = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        killed_by(root, "tiny", EPOCH_IGNORED, ["tests/test_hangs.py"], timeout=10)
    assert time.monotonic() - begun < 60, "the timeout did not end the run"
    child = int(started.read_text())
    for _ in range(50):  # the kill is sent; the process is reaped a moment later
        if not running(child):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the hung test's subprocess {child} outlived the run's timeout")


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (killed, not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_every_mutant_is_in_the_readmes_proof_table() -> None:
    """The README's proof table maps each promise to its test and its mutants: a mutant added
    without a row (or a row naming a mutant that no longer exists) fails here, in seconds."""
    readme = (Path(__file__).parent / "README.md").read_text()
    table = readme[readme.index("## The proof table") :]
    table = table[: table.index("\n\n", table.index("| --- |"))]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| promise")]
    named = {name for row in rows for name in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", row.rsplit("|", 2)[-2])}
    known = {mutant.id for mutant in all_mutants()}
    assert not known - named, f"mutants without a row in the README's proof table: {sorted(known - named)}"
    assert not named - known, f"the README's proof table names mutants that do not exist: {sorted(named - known)}"
