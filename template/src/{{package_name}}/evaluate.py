"""Score a saved checkpoint on the held-out set, in this one process (no torchrun).

    python -m <package>.evaluate --run-dir runs/20261130-142512-3f9c        # its newest checkpoint
    python -m <package>.evaluate --checkpoint runs/.../checkpoints/epoch-0003-step-000000.pt --data data

The data set comes from the run folder's config.json (or --data); the model (--model,
--image-size) from the checkpoint's recipe (recipe.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import torch
import typer

from .data.loader import HeldoutLoader, training_manifest
from .data.manifest import check_same_classes, check_same_schema
from .data.reading import Reading
from .harness.checkpoint import Unreadable, load, saved
from .harness.errors import DataError, checked_path, reported_as_one_line
from .harness.run_folder import read_config
from .recipe import METRIC, Recipe

app = typer.Typer(add_completion=False)


def newest_checkpoint(run_dir: Path) -> Path:
    found = saved(run_dir / "checkpoints")
    if not found:
        raise DataError(f"{run_dir / 'checkpoints'} holds no checkpoint: pass the --run-dir of a run that wrote one")
    return found[-1][1]


def same_classes(heldout: dict, where: str, trained_on: str, path: Path, run: bool) -> None:
    """The held-out set's class list (`heldout`, its manifest, read at `where`) against the training set's (the run's data set when `run`):
    a label is a position in that list, so another list is refused before any scoring (a model of
    as many classes would score it without a word). A training set that cannot be read is passed
    over: the model's shape is still checked."""
    try:
        training = training_manifest(trained_on, Reading())
    except DataError:
        return
    other = f"the data set {path.name} was trained on ({trained_on})" if run else f"the training set ({trained_on})"
    fix = "pass the --data it was trained on, with a held-out set prepared with it in one prep"
    check_same_classes(heldout["classes"], where, training["classes"], other, fix)
    check_same_schema(heldout, where, training, other)


@app.command()
def main(
    run_dir: Annotated[
        Path | None, typer.Option(help="A run folder: its newest checkpoint and its data", parser=checked_path)
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option(help="A checkpoint file (default: the run's newest)", parser=checked_path)
    ] = None,
    data: Annotated[str | None, typer.Option(help="Prepared data set (default: the run's, from config.json)")] = None,
) -> None:
    """The held-out figure of a checkpoint (the recipe's METRIC: accuracy for classification)."""
    with reported_as_one_line():
        if run_dir is None and checkpoint is None:
            raise DataError("pass --run-dir (a run folder) or --checkpoint (a checkpoint file)")
        if run_dir is not None and not (run_dir / "config.json").is_file():
            raise DataError(f"{run_dir} holds no config.json: pass the folder a run wrote (train.sh --run-dir)")
        path = checkpoint or newest_checkpoint(run_dir)
        trained_on = None  # the data set the run names (config.json), else the training set beside the held-out one
        if data is None:
            if run_dir is None:
                raise DataError("pass --data: without --run-dir the data set is not known")
            instead = "pass --checkpoint (one of its checkpoints) and --data instead"
            data = read_config(run_dir, fix=instead).get("data")
            if not isinstance(data, str):
                raise DataError(f"{run_dir / 'config.json'} names no data set: pass --data")
            trained_on = data
        if "\0" in data:  # no file name holds one; the loader would look for a data set there
            raise DataError("--data holds a NUL byte (\\0), which no file name can hold: pass it without one")
        try:
            state = load(path)
        except Unreadable as err:
            raise DataError(f"{err}: pass --checkpoint with a checkpoint a run wrote (in its checkpoints/)") from None
        recipe = Recipe.from_options(state.get("options", {}))  # the model it was trained with
        heldout_dir = f"{str(data).rstrip('/')}/heldout"
        heldout = HeldoutLoader(
            heldout_dir, reading=Reading(), world_size=1, rank=0, batch_size=256, image_size=recipe.image_size,
            tokenizer=recipe.text_tokenizer(),
        )  # fmt: skip
        same_classes(heldout.manifest, heldout_dir, trained_on or data, path, run=trained_on is not None)
        model = recipe.build_model(next(iter(heldout)), heldout.manifest)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as err:  # torch's words for weights that do not fit the model
            raise DataError(
                f"{path} holds a model of another shape than this project makes for {data} "
                f"({str(err).strip().splitlines()[-1].strip()[:200]}): pass the --data it was trained on"
            ) from None
        figure = recipe.score(model, heldout, torch.device("cpu"))
    print(f"{path}: epoch {state['epoch']} step {state['step']}: held-out {METRIC} {figure:.4f}")


if __name__ == "__main__":
    app()
