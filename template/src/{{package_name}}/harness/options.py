"""train.py's options: the recipe's fields as typer options, the checks of the harness's own
options, and what a resume must match.

The recipe (recipe.py) is a dataclass; `options_of` turns each of its fields into an option of
the command (its name, type, default and help), so a field is the one edit a new
hyperparameter takes: the command receives them as one `recipe` argument, config.json records
them, and a resume is refused when one differs (`resume_options`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from .checkpoint import check_same_options, newest_readable
from .errors import DataError
from .run_folder import read_config


def option(default, help: str, parser=None):
    """A field of a dataclass that `options_of` makes an option: its default, its help text, and
    the parser of its value (a path's, say), if it needs one."""
    return dataclasses.field(default=default, metadata={"help": help, "parser": parser})


def options_of(**groups: type) -> typing.Callable:
    """Decorate a typer command whose parameters `groups` name are dataclasses (`recipe=Recipe`):
    each field of each becomes an option of the command (its name, type, default and help), and
    the command receives the group as one argument."""

    def decorate(command: typing.Callable) -> typing.Callable:
        members = {group: [f.name for f in dataclasses.fields(kind)] for group, kind in groups.items()}
        added = []
        for kind in groups.values():
            hints = typing.get_type_hints(kind)
            for f in dataclasses.fields(kind):
                option = typer.Option(help=f.metadata["help"], parser=f.metadata.get("parser"))
                kind_of = inspect.Parameter.KEYWORD_ONLY
                added.append(
                    inspect.Parameter(f.name, kind_of, default=f.default, annotation=Annotated[hints[f.name], option])
                )
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name not in groups]

        @functools.wraps(command)
        def with_groups(**given: Any) -> Any:
            built = {
                group: groups[group](**{name: given.pop(name) for name in names}) for group, names in members.items()
            }
            return command(**built, **given)

        with_groups.__signature__ = inspect.Signature([*own, *added])
        with_groups.__annotations__ = {p.name: p.annotation for p in [*own, *added]}
        return with_groups

    return decorate


def check_run_options(*, epochs: int, ledger: Path | None, run_dir: Path | None, **steps: int) -> None:
    """Refuse harness options no run can use, before any process starts; DataError names the fix.
    `steps`: --checkpoint-every, --log-every and --stop-after-steps, 0 or a number of steps."""
    if epochs < 0:
        raise DataError(f"--epochs {epochs}: pass 0 or more")
    if ledger is not None and ledger.exists() and not ledger.is_dir():
        raise DataError(f"--ledger {ledger} is a file: pass a folder (it holds one rankN.jsonl per rank)")
    if run_dir is not None and run_dir.exists() and not run_dir.is_dir():
        raise DataError(f"--run-dir {run_dir} is a file: pass a folder")
    for name, value in steps.items():
        if value < 0:
            raise DataError(f"--{name.replace('_', '-')} {value}: pass 0 or a number of steps")


def resume_options(recipe_options: dict, order_options: dict, data_manifest_sha256: str | None) -> dict:
    """What a run folder resumes only with: every field of the recipe, the options the data order
    depends on, and the data set (its manifest's sha256)."""
    return {**recipe_options, **order_options, "data_manifest_sha256": data_manifest_sha256}


def check_resumable(run_dir: Path, recipe_options: dict, order_options: dict, data_manifest_sha256: str | None) -> None:
    """Before any process starts: a run folder that will be resumed has a checkpoint that can be
    read, trained with these options on the data whose manifest has this sha256 (check_data's
    answer), and a config.json to add the resume to. The options come from that checkpoint, as
    the ranks will read them (config.json's are a record, which a user may edit)."""
    readable = newest_readable(run_dir / "checkpoints", quiet=True)
    if readable is None:
        return
    if (run_dir / "config.json").is_file():
        read_config(run_dir)
    wanted = resume_options(recipe_options, order_options, data_manifest_sha256)
    check_same_options(readable[0]["options"], wanted, run_dir)
