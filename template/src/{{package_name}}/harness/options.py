"""train.py's options in groups: the run's (harness/run_options.py), the recipe's (recipe.py) and
the reading's, each a dataclass whose fields `options_of` makes options of the command, each
group a panel of its own in --help; and what a resume must match.

A field is the one edit a new option takes (its name, type, default and help): the command
receives each group as one argument, config.json records the fields, and a resume is refused
when one of the recipe's differs (`resume_options`).
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
from .run_folder import read_config

REQUIRED = dataclasses.MISSING  # the default of an option that must be given


def option(default, help: str, parser=None, names: tuple[str, ...] = ()):
    """A field of a dataclass that `options_of` makes an option: its default (REQUIRED: none),
    its help text, the parser of its value (a path's, say), if it needs one, and its names, when
    not the field's (("--resume",): a switch without --no-resume)."""
    return dataclasses.field(default=default, metadata={"help": help, "parser": parser, "names": names})


def options_of(**groups: type) -> typing.Callable:
    """Decorate a typer command whose parameters `groups` name are dataclasses (`recipe=Recipe`):
    each field of each becomes an option of the command (its name, type, default and help), listed
    by --help in a panel named for the group ("Recipe"), and the command receives the group as
    one argument."""

    def decorate(command: typing.Callable) -> typing.Callable:
        members = {group: [f.name for f in dataclasses.fields(kind)] for group, kind in groups.items()}
        added = []
        for group, kind in groups.items():
            hints = typing.get_type_hints(kind)
            for f in dataclasses.fields(kind):
                option = typer.Option(
                    *f.metadata.get("names", ()),
                    help=f.metadata["help"],
                    parser=f.metadata.get("parser"),
                    rich_help_panel=group.replace("_", " ").capitalize(),
                )
                default = inspect.Parameter.empty if f.default is REQUIRED else f.default
                kind_of = inspect.Parameter.KEYWORD_ONLY
                added.append(
                    inspect.Parameter(f.name, kind_of, default=default, annotation=Annotated[hints[f.name], option])
                )
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(command, eval_str=True).parameters.values()
            if p.name not in groups
        ]

        @functools.wraps(command)
        def with_groups(**given: Any) -> Any:
            built = {
                group: groups[group](**{name: given.pop(name) for name in names}) for group, names in members.items()
            }
            return command(**built, **given)

        # The groups' options first: --help shows their panels in the order of `groups`.
        with_groups.__signature__ = inspect.Signature([*added, *own])
        with_groups.__annotations__ = {p.name: p.annotation for p in [*added, *own]}
        return with_groups

    return decorate


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
