"""Shuffle-quality report: what every rank reads, epoch by epoch, and how well it is shuffled.

    python -m <package>.audit plan --data data --epochs 3   # the epoch plan, no processes
    python -m <package>.audit ledger LEDGER --data data     # what a `train.sh --ledger` run read

Prints one row per epoch and an `ideal` row (a uniform random permutation) to compare
with, then checks the contract's guarantees; writes a PNG that shows the same at a glance.
The mix of each global batch is counted by class, by shard or by a field of the data set
(--stratify-by); by shard where the data set has no class field.
Exit code 1 when a guarantee fails (the report can gate a CI job), 2 on bad input.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from . import NPROC_PER_NODE
from .checks.guarantees import (
    Delivered,
    between_epochs_problems,
    epoch_problems,
    global_order,
    left_out,
    left_out_bound,
)
from .checks.shuffle_metrics import (
    ideal_label_mix,
    kendall_tau,
    kendall_tau_sd,
    label_counts_per_batch,
    label_mix,
    position_correlation,
    rank_of_position,
    relative_shuffle_entropy,
    same_rank_fraction,
)
from .data.labels import FORMAT, PLACES, Location, manifest_and_labels
from .data.loader import plan_epoch, stored_records
from .data.manifest import field_kinds
from .data.reading import Reading
from .data.sampling import SAMPLER, SHUFFLES
from .harness.errors import PACKAGE, DataError, reported_as_one_line
from .harness.ledger import read_labels as read_ledger_labels
from .harness.ledger import read_stretches
from .harness.options import options_of
from .recipe import Recipe

# Stand-in shard for the entropy measure when the format has no shards of several samples:
# about what one sequential read of neighbouring samples brings in.
BLOCK_OF_NEIGHBOURS = 100
FIELD_CHUNK = 4096  # samples read at a time for --stratify-by FIELD: memory stays flat
EPOCHS_PLOTTED = 4  # more columns would make each panel too small to read
POINTS_PLOTTED = 20_000  # per scatter panel; a random subset beyond that keeps the PNG light

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n\n")[0])


@dataclass(frozen=True)
class Strata:
    """What the mix of a global batch is counted in: the stratum of every storage position."""

    of_position: np.ndarray  # stratum id >= 0 by storage position; -1 where unknown (ledger without --data)
    column: str  # the table's column: "label mix", "shard mix", "<field> mix"
    counts: str  # what the legend says is counted: "the label counts", ...
    one: str  # one stratum, in the figure: "class", "shard", "value of 'txt'"
    many: str  # several


def class_strata(labels: np.ndarray) -> Strata:
    return Strata(labels, "label mix", "the label counts", "class", "classes")


def shard_strata(shards: np.ndarray) -> Strata:
    return Strata(shards, "shard mix", "the shard counts", "shard", "shards")


def field_strata(values: Iterable[bytes], name: str) -> Strata:
    """Strata of a field's per-sample values, in storage order: each distinct value (its bytes as
    stored) is one stratum, numbered in order of first appearance."""
    ids: dict[bytes, int] = {}
    of_position = np.fromiter((ids.setdefault(value, len(ids)) for value in values), dtype=np.int64)
    return Strata(of_position, f"{name} mix", f"the counts of each value of {name!r}", f"value of {name!r}", "values")


def stored_field(data: Location, num_samples: int, name: str) -> Iterator[bytes]:
    """Field `name` of every stored sample, in storage order, read through the backend in chunks."""
    for start in range(0, num_samples, FIELD_CHUNK):
        for record in stored_records(data, list(range(start, min(start + FIELD_CHUNK, num_samples)))):
            values = {field: value for field, _, value in record.fields}
            if name not in values:
                raise DataError(
                    f"sample {record.key} ({record.where}) has no field {name!r}, which the manifest lists: "
                    "prepare the data again"
                )
            yield values[name]


NO_CLASS_FIELD = "the data set has no class field, so the mix is counted by shard (--stratify-by shard)."


def chosen_strata(
    stratify_by: str | None,
    labels: np.ndarray,
    shards: Strata,
    fields: list[str],
    read_field: Callable[[str], Iterable[bytes]],
    where: str,
) -> tuple[Strata, list[str]]:
    """What --stratify-by names, and a note when it was chosen for the user: class (the default where
    the data has a class field), shard (the default where it has none) or a field (read by
    `read_field`). DataError in one line for class on data without classes and for a field it lacks."""
    has_classes = bool((labels >= 0).any())
    if stratify_by is None and not has_classes:
        return shards, [NO_CLASS_FIELD]
    if stratify_by in (None, "class"):
        if not has_classes:
            raise DataError(f"--stratify-by class: {where} has no class field: pass --stratify-by shard")
        return class_strata(labels), []
    if stratify_by == "shard":
        return shards, []
    if stratify_by not in fields:
        choices = " | ".join(["class"] * has_classes + ["shard", *fields])
        raise DataError(
            f"--stratify-by {stratify_by}: {where} has no field {stratify_by!r}: pass --stratify-by {choices}"
        )
    return field_strata(read_field(stratify_by), stratify_by), []


@dataclass
class Deliveries:
    """What is audited: per epoch, [rank][step] -> storage positions, and what is known of the data."""

    source: str  # where the deliveries come from, for the report's first lines
    epochs: dict[int, Delivered]
    num_samples: int  # of the data set; from a ledger without --data, the largest key + 1
    strata: Strata  # what the mix is counted in: classes, shards or a field's values
    num_workers: int
    shard_of_position: np.ndarray
    shard_unit: str
    notes: list[str] = field(default_factory=list)
    # Epochs resumed on another number of ranks (progress.py): their stretches, each [rank][step]
    # on its own ranks. `epochs` holds such an epoch as one stream of batches in delivery order.
    stretches: dict[int, list[Delivered]] = field(default_factory=dict)


@dataclass
class EpochRow:
    epoch: int
    steps: list[int | str]  # per rank (an epoch resumed on other sizes: "9+44", the steps of each stretch)
    worker_steps: tuple[int, int]  # fewest and most batches one DataLoader worker loads
    repeated: int  # samples delivered more than once
    left_out: int
    label_mix: float
    label_mix_sds: float  # standard deviations above an ideal shuffle
    position_rho: float
    entropy: float  # relative to a random permutation of the same samples
    tau: float = math.nan  # against the previous epoch
    same_rank: float = math.nan  # against the previous epoch


def shard_of_position(manifest: dict | None, num_samples: int) -> tuple[np.ndarray, str]:
    """Shard id of every storage position, for the entropy measure, and a description of it.

    The manifest's shards hold consecutive positions in manifest order (prep writes them
    so). Formats without shards of several samples (memory; files, one per sample; Arrow
    below its shard size) get blocks of BLOCK_OF_NEIGHBOURS neighbouring positions instead:
    the locality that a reader of label-sorted storage would see.
    """
    sizes = [shard["num_samples"] for shard in (manifest or {}).get("shards") or []]
    if len(sizes) >= 2 and sum(sizes) >= 2 * len(sizes):
        return np.repeat(np.arange(len(sizes)), sizes), f"the {len(sizes)} shards of the manifest"
    return np.arange(num_samples) // BLOCK_OF_NEIGHBOURS, f"blocks of {BLOCK_OF_NEIGHBOURS} neighbouring positions"


def known_label_mix(delivered: Delivered, labels: np.ndarray) -> float:
    """`label_mix` where only some labels (strata) are known (a ledger without --data):
    proportions are those of the known samples, which include every delivered one."""
    known = labels >= 0
    if known.all():
        return label_mix(delivered, labels)
    index_among_known = np.cumsum(known) - 1
    compact = [[index_among_known[np.asarray(batch, dtype=np.int64)] for batch in batches] for batches in delivered]
    return label_mix(compact, labels[known])


def global_batch_size(delivered: Delivered) -> int:
    return sum(len(batches[0]) for batches in delivered if len(batches))


def batch_per_rank(delivered: Delivered) -> int:
    return max((len(batch) for batches in delivered for batch in batches), default=0)


def ideal_mix(delivered: Delivered, strata: np.ndarray) -> tuple[float, float]:
    """Mean and sd of `label_mix` for an ideal shuffle of the samples whose strata are known,
    strata of unequal sizes (shards, a field's values) included."""
    sizes = np.bincount(strata[strata >= 0])
    sizes = sizes[sizes > 0]
    steps = min(len(batches) for batches in delivered)
    if not steps:
        return math.nan, math.nan
    return ideal_label_mix(int(sizes.sum()), global_batch_size(delivered), len(sizes), steps, sizes)


def steps_per_worker(steps: list[int], num_workers: int) -> tuple[int, int]:
    """The fewest and most batches one DataLoader worker loads, given each rank's steps: worker k of
    a rank loads steps k, k + K, ... (the DataLoader's round robin)."""
    workers = max(num_workers, 1)
    return min(s // workers for s in steps), max(-(-s // workers) for s in steps)


def as_one_stream(stretches: list[Delivered]) -> Delivered:
    """An epoch run in stretches on different ranks, as the batches of one rank in delivery order:
    stretch by stretch, step by step, rank by rank."""
    steps = [max(map(len, stretch), default=0) for stretch in stretches]
    batches = []
    for stretch, n in zip(stretches, steps, strict=True):
        batches += [ranks[s] for s in range(n) for ranks in stretch if s < len(ranks)]
    return [batches]


def measure_epoch(epoch: int, delivered: Delivered, deliveries: Deliveries) -> EpochRow:
    order = global_order(delivered)
    steps = [len(batches) for batches in delivered]
    worker_steps = steps_per_worker(steps, deliveries.num_workers)
    _, times = np.unique(order, return_counts=True)
    if min(steps) and len(order) >= 2:
        mean, sd = ideal_mix(delivered, deliveries.strata.of_position)
        mix = known_label_mix(delivered, deliveries.strata.of_position)
        mix_sds, rho = (mix - mean) / sd, position_correlation(order)
        entropy = relative_shuffle_entropy(order, deliveries.shard_of_position)
    else:  # a rank with no step: the guarantees report it, the shuffle measures have nothing to go on
        mix = mix_sds = rho = entropy = math.nan
    repeated = int((times > 1).sum())
    missing = len(left_out(delivered, deliveries.num_samples))
    return EpochRow(epoch, steps, worker_steps, repeated, missing, mix, mix_sds, rho, entropy)


def measure(deliveries: Deliveries) -> tuple[list[EpochRow], list[str]]:
    """One row per epoch, and every broken guarantee of the contract as a line."""
    rows, problems = [], []
    previous: tuple[int, Delivered] | None = None
    for epoch, delivered in deliveries.epochs.items():
        row = measure_epoch(epoch, delivered, deliveries)
        *earlier, last = deliveries.stretches.get(epoch, [delivered])
        broken = epoch_problems(
            last, deliveries.num_samples, deliveries.num_workers, batch_per_rank(last), before=earlier
        )
        problems += [f"epoch {epoch}: {p}" for p in broken]
        if earlier:
            row.steps = ["+".join(str(max(map(len, stretch), default=0)) for stretch in [*earlier, last])]
            row.worker_steps = steps_per_worker([len(batches) for batches in last], deliveries.num_workers)
        if previous is not None:
            before_epoch, before = previous
            row.tau = kendall_tau(global_order(before), global_order(delivered))
            if not {before_epoch, epoch} & set(deliveries.stretches):  # ranks mean nothing across a resize
                row.same_rank = same_rank_fraction(before, delivered)
            problems += [
                f"epochs {before_epoch}->{epoch}: {p}"
                for p in between_epochs_problems(before, delivered, deliveries.num_samples, SHUFFLES)
            ]
        rows.append(row)
        previous = epoch, delivered
    return rows, problems


def signed(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:+.{digits}f}"


def plain(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


COLUMNS = [
    ("epoch", 5), ("steps/rank", 10), ("per worker", 10), ("repeated", 8), ("left out", 8),
    ("label mix", 13), ("position rho", 12), ("entropy", 7), ("tau vs prev", 11), ("same rank", 9),
]  # fmt: skip
MIX = 5  # the column of the label mix (or the shard's, or a field's)


def table_line(cells: list[str], columns: list[tuple[str, int]] = COLUMNS) -> str:
    return "  ".join(cell.rjust(width) for cell, (_, width) in zip(cells, columns, strict=True))


def named_columns(strata: Strata) -> list[tuple[str, int]]:
    """COLUMNS with the mix column named for what it counts (wider for a long field name)."""
    return [(strata.column, max(width, len(strata.column))) if i == MIX else (name, width)
            for i, (name, width) in enumerate(COLUMNS)]  # fmt: skip


def report(deliveries: Deliveries, rows: list[EpochRow], problems: list[str]) -> str:
    """The printed report: source, table with the ideal row, legend, guarantees."""
    first = deliveries.epochs[rows[0].epoch]
    world_size, batch = len(first), global_batch_size(first)
    delivered_per_epoch = len(global_order(first))
    bound = left_out_bound(world_size, deliveries.num_workers, batch_per_rank(first))
    mean, sd = ideal_mix(first, deliveries.strata.of_position)
    columns = named_columns(deliveries.strata)
    header = [
        table_line([name for name, _ in columns], columns),
        table_line(["-" * width for _, width in columns], columns),
    ]
    lines = [deliveries.source, "", *header]
    for row in rows:
        steps = str(row.steps[0]) if len(set(row.steps)) == 1 else ",".join(map(str, row.steps))
        low, high = row.worker_steps
        mix = "-" if math.isnan(row.label_mix) else f"{row.label_mix:.2f} {row.label_mix_sds:+.1f}sd"
        lines.append(table_line([
            str(row.epoch), steps, str(low) if low == high else f"{low}-{high}", str(row.repeated), str(row.left_out),
            mix, signed(row.position_rho), plain(row.entropy), signed(row.tau), plain(row.same_rank),
        ], columns))  # fmt: skip
    position_sd = 1 / math.sqrt(max(delivered_per_epoch - 1, 1))
    lines.append(table_line([
        "ideal", "equal", "-", "0", f"<={bound}", f"{mean:.2f}+-{sd:.2f}", f"0+-{position_sd:.3f}", "1.00",
        f"0+-{kendall_tau_sd(delivered_per_epoch):.3f}", f"{1 / world_size:.2f}",
    ], columns))  # fmt: skip
    lines += [
        "",
        f"{deliveries.strata.column:<13} mean chi-square of {deliveries.strata.counts} of each global batch "
        f"({batch} samples) against the",
        "              data's proportions, and its sd above an ideal shuffle: below +3sd is good, +100sd is clumped",
        "position rho  rank correlation of storage position and delivery order: near 0 is good, 1 is storage order",
        "entropy       MosaicML Streaming's shuffle quality (gaps between neighbouring sample and shard ids) over a",
        "              random permutation's: near 1.00 is good, near 0 is unshuffled",
        f"              (shards: {deliveries.shard_unit})",
        "tau vs prev   Kendall's tau of this epoch's order against the previous one: near 0 is good, 1 is a repeat",
        "same rank     fraction of samples on the same rank as in the previous epoch: 1/W for a global shuffle",
        "",
        *(line for note in deliveries.notes for line in textwrap.wrap(f"Note: {note}", 110) + [""]),
    ]
    if problems:
        lines += ["Guarantees of the contract: BROKEN", *(f"  {p}" for p in problems)]
    else:
        lines.append(f"Guarantees of the contract: all hold in epochs {', '.join(str(r.epoch) for r in rows)}.")
    return "\n".join(lines)


def plot(deliveries: Deliveries, path: Path) -> None:
    """Two rows of panels, one column per shown epoch: delivery order against storage position,
    and the label counts of every global batch."""
    try:
        import matplotlib
    except ImportError:
        raise DataError("matplotlib is not installed: pip install -e '.[audit]'") from None
    matplotlib.use("Agg")  # files only: works without a display, on CI and over ssh
    import matplotlib.pyplot as plt

    epochs = list(deliveries.epochs)
    spread = np.linspace(0, len(epochs) - 1, min(EPOCHS_PLOTTED, len(epochs))).round().astype(int)
    shown = [epochs[i] for i in sorted(set(spread))]  # first, last and evenly between
    strata = deliveries.strata
    num_strata = int(strata.of_position.max()) + 1
    counts = {e: label_counts_per_batch(deliveries.epochs[e], strata.of_position, num_strata) for e in shown}
    most = max((int(c.max()) for c in counts.values() if c.size), default=1)
    scale = matplotlib.colors.Normalize(0, most)  # one colour scale for all epochs
    figure = plt.figure(figsize=(3.6 * len(shown) + 1.2, 8), layout="constrained")
    orders, mixes = figure.subfigures(2, 1)
    orders.suptitle(
        "Delivery order against storage position, one dot per sample, coloured by rank\n"
        "Good: an even cloud over the whole square. A diagonal, steps or bands: the order follows storage.",
        fontsize=10,
    )
    mixes.suptitle(
        f"Samples of each {strata.one} in each global batch ({global_batch_size(deliveries.epochs[shown[0]])} samples)\n"
        f"Good: a fine speckle, every {strata.one} in every batch. "
        f"Bright blocks or a staircase: batches of few {strata.many}.",
        fontsize=10,
    )
    order_axes = np.atleast_1d(orders.subplots(1, len(shown)))
    mix_axes = np.atleast_1d(mixes.subplots(1, len(shown)))
    rng = np.random.default_rng(0)
    for order_ax, mix_ax, epoch in zip(order_axes, mix_axes, shown, strict=True):
        delivered = deliveries.epochs[epoch]
        order = global_order(delivered)
        when = np.arange(len(order))
        if len(order) > POINTS_PLOTTED:
            when = np.sort(rng.choice(len(order), POINTS_PLOTTED, replace=False))
        rank = rank_of_position(delivered, deliveries.num_samples)[order[when]]
        order_ax.scatter(order[when], when, c=rank, s=2, cmap="tab10", vmin=0, vmax=9, linewidths=0, rasterized=True)
        order_ax.set(title=f"epoch {epoch}", xlabel="storage position", xlim=(0, deliveries.num_samples))
        mix_ax.set(title=f"epoch {epoch}", xlabel="global batch (step)")
        if counts[epoch].size:  # empty when some rank ran no step at all
            mix_ax.imshow(counts[epoch], aspect="auto", origin="lower", interpolation="nearest", norm=scale)
    order_axes[0].set_ylabel("delivery order")
    ranks = len(deliveries.epochs[shown[0]])
    if ranks <= 10:  # tab10 has ten distinct colours
        colours = matplotlib.colormaps["tab10"].colors
        handles = [matplotlib.lines.Line2D([], [], ls="", marker="o", color=colours[r]) for r in range(ranks)]
        orders.legend(handles, [f"rank {r}" for r in range(ranks)], loc="outside right upper", fontsize=8)
    mix_axes[0].set_ylabel(strata.one)
    mixes.colorbar(matplotlib.cm.ScalarMappable(scale), ax=mix_axes.tolist(), label=f"samples of the {strata.one}")
    figure.savefig(path, dpi=100)
    plt.close(figure)


def audit(deliveries: Deliveries, png: Path) -> None:
    rows, problems = measure(deliveries)
    typer.echo(report(deliveries, rows, problems))
    plot(deliveries, png)
    typer.echo(f"Figure: {png}")
    if problems:
        raise typer.Exit(1)


def require_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if value < 1:
            raise DataError(f"--{name.replace('_', '-')} must be at least 1, not {value}")


Data = Annotated[Location, typer.Option(help=f"Prepared data set (python -m {PACKAGE}.prep){PLACES}")]
Png = Annotated[Path, typer.Option(help="Where to write the figure")]
StratifyBy = Annotated[
    str | None,
    typer.Option(
        metavar="class|shard|FIELD",
        help="What the mix of each global batch is counted in: class (the default where the data has classes), "
        "shard (the default where it has none) or a field of the data set",
    ),
]


def classes(manifest: dict) -> str:
    """The data set's classes, for the report's first line."""
    return f"{manifest['num_classes']} classes" if manifest["num_classes"] else "no class field"


def check_png(png: Path) -> None:
    if not png.parent.is_dir():
        raise DataError(f"--png {png}: the folder {png.parent} does not exist: create it, or pass another path")


@app.command()
@options_of(reading=Reading)
def plan(
    data: Data,
    reading: Reading,  # train's reading options (data/reading.py), one option per field
    world_size: Annotated[int, typer.Option(help="Ranks (NPROC of train.sh)")] = NPROC_PER_NODE,
    batch_size: Annotated[int, typer.Option(help="Batch size per rank")] = Recipe().batch_size,
    seed: Annotated[int, typer.Option(help="Seed of every epoch's order")] = Recipe().seed,
    epochs: Annotated[int, typer.Option(help="Epochs to plan")] = 3,
    png: Png = Path("shuffle_audit.png"),
    stratify_by: StratifyBy = None,
) -> None:
    """Audit the epoch plan: what every rank and worker would read, without starting a process."""
    with reported_as_one_line():
        check_png(png)
        require_positive(world_size=world_size, batch_size=batch_size, epochs=epochs)
        reading.check()
        manifest, labels = manifest_and_labels(data, reading)
        num_samples = manifest["num_samples"]
        shards, unit = shard_of_position(manifest, num_samples)
        strata, notes = chosen_strata(
            stratify_by, labels, shard_strata(shards), list(field_kinds(manifest)) if manifest else [],
            lambda name: stored_field(data, num_samples, name), str(data),
        )  # fmt: skip
        sizes = dict(world_size=world_size, batch_size=batch_size, reading=reading)
        planned = {epoch: plan_epoch(manifest, seed=seed, epoch=epoch, **sizes) for epoch in range(epochs)}
        order = "".join(f", {name.replace('_', ' ')} {value}" for name, value in reading.order().items())
        source = (
            f"Shuffle audit of the epoch plan for {data} ({FORMAT}, {num_samples} samples, "
            f"{classes(manifest)})\n{SAMPLER} sampler, seed {seed}, "
            f"{world_size} ranks x {reading.num_workers} workers x batch {batch_size}{order}"
        )
        audit(Deliveries(source, planned, num_samples, strata, reading.num_workers, shards, unit, notes), png)


NOT_A_LEDGER = "is LEDGER the --ledger folder of a train.sh run?"
NOT_THE_DATA = "is --data the data set this run trained on?"


def as_positions(keys: list[str]) -> list[int]:
    """Ledger keys (storage positions as 8-digit strings) as integers."""
    try:
        positions = [int(key) for key in keys]
    except ValueError as err:
        raise DataError(f"a ledger key is not a storage position ({err}): {NOT_A_LEDGER}") from None
    if positions and min(positions) < 0:
        raise DataError(f"the ledger holds key {min(positions)}, not a storage position: {NOT_A_LEDGER}")
    return positions


@app.command()
def ledger(
    ledger_dir: Annotated[Path, typer.Argument(metavar="LEDGER", help="The --ledger folder of a train.sh run")],
    data: Annotated[
        Location | None, typer.Option(help="The run's data set (without it, some counts are bounds)")
    ] = None,
    num_workers: Annotated[int, typer.Option(help="DataLoader workers per rank of the run")] = Reading().num_workers,
    png: Png = Path("shuffle_audit.png"),
    stratify_by: StratifyBy = None,
) -> None:
    """Audit what a training run read, from the sample ledger its ranks wrote."""
    with reported_as_one_line():
        check_png(png)
        if not ledger_dir.is_dir():
            raise DataError(f"ledger folder {ledger_dir} not found: pass the --ledger folder of a train.sh run")
        if data is None and stratify_by not in (None, "class", "shard"):
            raise DataError(f"--stratify-by {stratify_by} reads that field from the data set: pass --data too")
        epochs, stretches, notes = {}, {}, []
        for epoch, parts in read_stretches(ledger_dir).items():
            parts = [[[as_positions(keys) for keys in batches] for batches in ranks] for ranks in parts]
            epochs[epoch] = parts[0]
            if len(parts) > 1:  # resumed on another number of ranks
                stretches[epoch], epochs[epoch] = parts, as_one_stream(parts)
                sizes = " then ".join(f"{max(map(len, part), default=0)} steps on {len(part)} ranks" for part in parts)
                notes.append(
                    f"epoch {epoch} was resumed on another number of ranks ({sizes}): its guarantees are checked "
                    "stretch by stretch and over the whole epoch, against the bound of its last ranks; its label mix "
                    "is that of each rank's batches, and 'same rank' is not measured next to it."
                )
        try:
            recorded = read_ledger_labels(ledger_dir)
        except (KeyError, TypeError) as err:
            raise DataError(f"a ledger record has no labels ({err!r}): {NOT_A_LEDGER}") from None
        read = [global_order(delivered) for delivered in epochs.values()]
        if not sum(map(len, read)):
            raise DataError(f"the ledger in {ledger_dir} records no steps: did the run train at least one step?")
        largest = int(max(order.max(initial=-1) for order in read))
        # Labels as the ledger recorded them: none where the data set has no class field.
        keys = np.array(as_positions(list(recorded)), dtype=np.int64)
        recorded_labels = np.array(list(recorded.values()), dtype=np.int64)
        if data is None:
            num_samples, manifest = largest + 1, None
            labels = np.full(num_samples, -1, dtype=np.int64)
            labels[keys] = recorded_labels
            notes.append(
                f"without --data the data set size is unknown: 'left out' counts the keys below {largest + 1} that "
                "were never read (a lower bound), keys beyond the data set cannot be found, and label proportions "
                "are those of the samples the ledger holds."
            )
            what = f"the run in {ledger_dir} (no --data)"
        else:
            manifest, labels = manifest_and_labels(data, Reading())
            num_samples = manifest["num_samples"]
            if largest >= num_samples:
                raise DataError(f"the ledger reads key {largest}, {data} holds {num_samples} samples: {NOT_THE_DATA}")
            wrong = int((labels[keys] != recorded_labels).sum())
            if wrong:
                raise DataError(f"{wrong} ledger labels differ from the labels stored in {data}: {NOT_THE_DATA}")
            what = f"the run in {ledger_dir} on {data} ({FORMAT}, {num_samples} samples, {classes(manifest)})"
        first = next(iter(epochs.values()))
        source = (
            f"Shuffle audit of {what}\n{SAMPLER} sampler, "
            f"{len(first)} ranks x {num_workers} workers x batch {batch_per_rank(first)}"
        )
        shards, unit = shard_of_position(manifest, num_samples)
        strata, chosen = chosen_strata(
            stratify_by, labels, shard_strata(shards), list(field_kinds(manifest)) if manifest else [],
            lambda name: stored_field(data, num_samples, name), str(data or ledger_dir),
        )  # fmt: skip
        deliveries = Deliveries(
            source, epochs, num_samples, strata, num_workers, shards, unit, chosen + notes, stretches
        )
        audit(deliveries, png)


if __name__ == "__main__":
    app()
