"""A run's curves from its metrics.jsonl: one PNG of four panels, a line per epoch and the best epoch.

    python -m <package>.report runs/20261130-142512-3f9c                 # writes RUN_DIR/report.png
    python -m <package>.report runs/20261130-142512-3f9c --out curves.png

The panels: the training loss and the learning rate by optimizer step over the run (each epoch's
line, and with --log-every N each N steps' line: a line's loss is its epoch's mean so far), the
held-out figure (recipe.py's METRIC) and the fraction of the ranks' time spent waiting for data,
by epoch. The best epoch is that of the highest held-out figure: every METRIC here is higher-better
(accuracy, recall_at_1, miou). It reads a run that is still going too: one still in its first
epoch is drawn as far as it goes, with no held-out figure yet.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .harness.curves import position
from .harness.errors import DataError, checked_path, reported_as_one_line
from .recipe import METRIC

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE, DPI = (10, 7), 100  # inches, dots per inch: a PNG of 1000 x 700 pixels
PANELS = ("loss", "lr", "heldout", "data_wait")  # the series of the panels, left to right, top to bottom

app = typer.Typer(add_completion=False)


def read_lines(run_dir: Path) -> list[dict[str, Any]]:
    """RUN_DIR/metrics.jsonl's lines; DataError when there is none to draw. A last line without its
    newline is one train.py is writing now: left for the next report."""
    metrics = run_dir / "metrics.jsonl"
    if not run_dir.is_dir():
        raise DataError(f"{run_dir} is not a folder: pass a run folder that train.sh wrote (its --run-dir)")
    if not metrics.is_file():
        raise DataError(
            f"{run_dir} holds no metrics.jsonl: pass a run folder that train.sh wrote (its --run-dir, or runs/<time>-<id>)"
        )
    try:
        text = metrics.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read {metrics} ({err}): pass a run folder you can read") from None
    lines = []
    for number, line in enumerate(text[: text.rfind("\n") + 1].splitlines(), start=1):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(
                f"{metrics} line {number} is not JSON ({err}): remove that line, or restore the file"
            ) from None
        if not isinstance(value, dict) or not isinstance(value.get("epoch"), int):
            raise DataError(
                f"{metrics} line {number} is no line of train.py (no epoch): remove it, or restore the file"
            )
        lines.append(value)
    if not lines:
        raise DataError(f"{metrics} holds no line yet: report again after the first epoch (or --log-every N steps)")
    return lines


def number(line: dict[str, Any], name: str) -> float | None:
    """The line's figure `name`; None where it is missing, null (a held-out pass not run) or NaN."""
    value = line.get(name)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def curves(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report draws and prints, from metrics.jsonl's lines: "loss" and "lr" as [(run step,
    value)] over every line, on harness/curves.py's axis (TensorBoard's too); "heldout" and
    "data_wait" as [(epoch, value)] over the epochs' lines, a held-out figure that is null or NaN
    left out; "epochs": the epochs' lines; "best": (epoch, figure) of the highest held-out figure (the
    first of equals), None while there is none. A position written twice (a file joined by hand: a
    resume trims its own) counts once, with its last line."""
    latest = {(line["epoch"], line.get("step", math.inf)): line for line in lines}
    found: dict[str, Any] = {name: [] for name in (*PANELS, "epochs")}
    ends: dict[int, int] = {}  # each epoch's steps, as its line says (a resume on other ranks changes them)
    for (epoch, _), line in sorted(latest.items()):
        at = position(line, ends)
        for name in ("loss", "lr"):
            if number(line, name) is not None:
                found[name].append((at, number(line, name)))
        if "step" in line:
            continue
        found["epochs"].append(line)
        if number(line, "data_wait_fraction") is not None:
            found["data_wait"].append((epoch, number(line, "data_wait_fraction")))
        if number(line, f"heldout_{METRIC}") is not None:
            found["heldout"].append((epoch, number(line, f"heldout_{METRIC}")))
    found["best"] = max(found["heldout"], key=lambda point: point[1], default=None)
    return found


def shown(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def summary(found: dict[str, Any]) -> list[str]:
    """A line per epoch, then the best epoch (or why there is none yet)."""
    said = [
        f"epoch {line['epoch']}: loss {shown(number(line, 'loss'), '.4f')}  heldout {METRIC} "
        f"{shown(number(line, f'heldout_{METRIC}'), '.4f')}  lr {shown(number(line, 'lr'), '.3g')}  "
        f"data wait {shown(number(line, 'data_wait_fraction'), '.0%')}"
        for line in found["epochs"]
    ]
    if found["best"] is not None:
        said.append(f"best epoch {found['best'][0]}: heldout {METRIC} {found['best'][1]:.4f}")
    elif found["epochs"]:
        said.append(f"no held-out {METRIC}: the run has no held-out set, or its passes failed (evaluate scores them)")
    else:
        said.append(f"no held-out {METRIC} yet: no epoch has ended")
    return said


def columns(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [x for x, _ in points], [y for _, y in points]


def figure(found: dict[str, Any]) -> Figure:
    """The four panels (PANELS' order), each drawing its series first (the tests read them back)."""
    from matplotlib.figure import Figure  # no pyplot: no display, no global state
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    drawn = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    loss, lr, heldout, wait = drawn.subplots(2, 2).flat
    loss.plot(*columns(found["loss"]), marker=".")
    loss.set(title="training loss (the epoch's mean so far)", xlabel="optimizer step of the run")
    lr.plot(*columns(found["lr"]), marker=".")
    lr.set(title="learning rate", xlabel="optimizer step of the run")
    heldout.plot(*columns(found["heldout"]), marker="o")
    heldout.set(title=f"held-out {METRIC}", xlabel="epoch")
    if found["best"] is not None:
        heldout.plot(*columns([found["best"]]), marker="*", markersize=14, linestyle="", label="best")
        heldout.legend()
    else:
        heldout.text(0.5, 0.5, f"no held-out {METRIC} yet", ha="center", transform=heldout.transAxes)
    wait.plot(*columns(found["data_wait"]), marker="o")
    wait.set(title="waiting for data (of the ranks' time)", xlabel="epoch", ylim=(0, 1))
    wait.yaxis.set_major_formatter(PercentFormatter(1.0))
    for axes in (heldout, wait):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return drawn


def write(drawn: Figure, png: Path) -> None:
    """`drawn` into `png`, written under another name, then renamed: a whole file or the old one."""
    partial = png.with_name(f".{png.name}.partial")
    try:
        drawn.savefig(partial, format="png")
        partial.replace(png)
    except OSError as err:
        raise DataError(f"cannot write {png} ({err.strerror}): pass an --out you can write") from None
    finally:
        partial.unlink(missing_ok=True)


@app.command()
def main(
    run_dir: Annotated[
        Path, typer.Argument(metavar="RUN_DIR", help="A run folder (train.sh --run-dir)", parser=checked_path)
    ],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the PNG (default: RUN_DIR/report.png)", parser=checked_path)
    ] = None,
) -> None:
    """Draw a run's curves into one PNG; print each epoch's figures and the best epoch."""
    with reported_as_one_line():
        found = curves(read_lines(run_dir))
        png = out or run_dir / "report.png"
        if not png.parent.is_dir():
            raise DataError(f"--out {png}: the folder {png.parent} does not exist: create it, or pass another path")
        write(figure(found), png)
    print("\n".join(summary(found)))
    print(f"figure: {png}")


if __name__ == "__main__":
    app()
