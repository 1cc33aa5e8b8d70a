"""One comparison of the backends' benchmarks (`nox -s bench` runs it after them).

    python .ci/bench_compare.py OUT --command "nox -s bench" --data-line "20,000 synthetic PNGs ..." --revision 0c173e8

reads OUT/<backend>/bench.json for every backend that has one and writes OUT/comparison.md
(one row per backend) and OUT/comparison.png (per backend, the loader's and the peer's
samples/s as a fraction of the read ceiling of the same files).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BACKENDS = ["memory", "files", "arrow", "webdataset"]  # the order of the rows and bars
BARS = [  # (row of bench.json, label, colour, hatch)
    ("read_wk", "loader, read", "#4c72b0", ""),
    ("peer_read_wk", "peer, read", "#a6bddb", "//"),
    ("decoded_wk", "loader, decoded", "#dd8452", ""),
    ("peer_decoded_wk", "peer, decoded", "#fdd0a2", "//"),
]


def load(out: Path) -> dict[str, dict]:
    reports = {}
    for backend in BACKENDS:
        path = out / backend / "bench.json"
        if path.is_file():
            reports[backend] = json.loads(path.read_text())
    if not reports:
        raise SystemExit(f"error: no {out}/<backend>/bench.json to compare")
    return reports


def rows_of(report: dict) -> dict[str, dict]:
    return {row["name"]: row for row in report["rows"]}


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(reports: dict[str, dict]) -> str:
    workers = {report["settings"]["num_workers"] for report in reports.values()}
    k = workers.pop() if len(workers) == 1 else "K"
    lines = [
        f"| backend | ceiling | read, 0 workers | read, {k} workers | of ceiling | peer read | loader / peer, read "
        f"| decoded, {k} workers | peer decoded | loader / peer, decoded | memory per node: loader / data "
        "| naive / data | targets met |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend, report in reports.items():
        rows, ratios = rows_of(report), report["ratios"]
        memory = report.get("memory_per_node", {})
        judged = [t for t in report["targets"] if t["met"] is not None]
        rate = {name: number(row["samples_per_s"], 0) for name, row in rows.items()}
        lines.append(
            f"| {backend} | {rate['ceiling']} | {rate['read_w0']} | {rate['read_wk']} "
            f"| {number(ratios['read_vs_ceiling'])} | {rate['peer_read_wk']} | {number(ratios['read_vs_peer'])} "
            f"| {rate['decoded_wk']} | {rate['peer_decoded_wk']} | {number(ratios['decoded_vs_peer'])} "
            f"| {number(memory.get('loader_vs_data'))} | {number(memory.get('naive_vs_data'))} "
            f"| {sum(bool(t['met']) for t in judged)} of {len(judged)} |"
        )
    return "\n".join(lines)


TARGETS = ["read_vs_ceiling", "workers_vs_main", "decode_scaling", "read_vs_peer", "checksum_share", "memory_per_node"]


def targets(reports: dict[str, dict]) -> str:
    """Each backend's targets: value, goal and verdict (memory per node is judged for memory and arrow only)."""
    lines = ["| backend | " + " | ".join(f"`{name}`" for name in TARGETS) + " |", "|---|" + "---|" * len(TARGETS)]
    for backend, report in reports.items():
        cells = {target["target"]: target for target in report["targets"]}
        lines.append(f"| {backend} | " + " | ".join(verdict(cells.get(name)) for name in TARGETS) + " |")
    return "\n".join(lines)


def verdict(target: dict | None) -> str:
    if target is None:
        return "-"
    mark = "n/a" if target["met"] is None else ("met" if target["met"] else "**not met**")
    return f"{number(target['value'])} ({'>=' if target['higher'] else '<='} {target['goal']}): {mark}"


def markdown(reports: dict[str, dict], command: str, data_line: str, revision: str = "") -> str:
    first = next(iter(reports.values()))
    machine = first["machine"]
    settings = first["settings"]
    memory = first.get("memory_per_node")
    ranks = f"; memory per node with {memory['ranks']} ranks" if memory else ""
    if len({json.dumps(report["settings"], sort_keys=True) for report in reports.values()}) > 1:
        ranks += " (the backends' settings differ: see each bench.json)"
    sizes = {report["data"]["payload_bytes"] / report["data"]["num_samples"] for report in reports.values()}
    lines = [
        "# Loader benchmark: the backends compared",
        "",
        f"Machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}, torch {machine['torch']}.",
        f"Data: {data_line} ({min(sizes) / 1e3:.1f} KB of payload per sample on average); the same samples "
        "prepared by each backend's own `prep`.",
        f"Settings: batch size {settings['batch_size']}, {settings['num_workers']} workers, median of "
        f"{settings['repeats']} passes{ranks}.",
        "",
        table(reports),
        "",
        "Speeds in samples/s, one rank. Ceiling: the backend's files read start to end (warm page cache); "
        "read: the loader handing over undecoded bytes (`decode.payload_batch`); decoded: what training gets. "
        "Of ceiling and loader / peer are samples/s over samples/s. Memory per node: extra PSS of the ranks "
        "and their workers over the data set's bytes (naive: every rank reads the data into its own memory; "
        "none for webdataset, which streams). The peer is what a user would write instead on the same backend "
        "(see each project's bench_backend.py). Per-backend tables, claims and figures: `<backend>/bench.json`, "
        "`<backend>/bench.png`.",
        "",
        "Targets (value, goal, verdict), measured in the same run:",
        "",
        targets(reports),
        "",
        f"Reproduce (in the template repository{f', at {revision}' if revision else ''}):",
        "",
        "```",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def figure(reports: dict[str, dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    backends = list(reports)
    width = 0.8 / len(BARS)
    fig, ax = plt.subplots(figsize=(1.9 * len(backends) + 2.5, 4.5))
    lowest = 1.0
    for i, (name, label, colour, hatch) in enumerate(BARS):
        values = [rows_of(reports[b]).get(name, {}).get("of_ceiling", 0.0) for b in backends]
        lowest = min([lowest, *(v for v in values if v > 0)])
        positions = [b + (i - (len(BARS) - 1) / 2) * width for b in range(len(backends))]
        bars = ax.bar(positions, values, width, label=label, color=colour, hatch=hatch, edgecolor="#333333")
        ax.bar_label(bars, labels=[f"{v:.3f}" if v < 0.1 else f"{v:.2f}" for v in values], fontsize=7, padding=1)
    # A log scale: loaders are often 100 times below the ceiling, where a linear axis shows no bars.
    ax.set_yscale("log")
    ax.set_ylim(lowest / 3, 2.0)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(backends)), backends)
    ax.set_ylabel("samples/s as a fraction of the ceiling (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncols=4, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder holding <backend>/bench.json")
    parser.add_argument("--command", default="nox -s bench", help="the command that reproduces the comparison")
    parser.add_argument("--data-line", default="synthetic data", help="what the data were, for the report")
    parser.add_argument("--revision", default="", help="the template's commit the projects were rendered from")
    args = parser.parse_args()
    reports = load(args.out)
    (args.out / "comparison.md").write_text(markdown(reports, args.command, args.data_line, args.revision))
    first = next(iter(reports.values()))
    title = (
        f"{args.data_line}; batch {first['settings']['batch_size']}, "
        f"{first['settings']['num_workers']} workers, {first['machine']['cpus']} CPUs"
    )
    figure(reports, args.out / "comparison.png", title)
    print(f"wrote {args.out / 'comparison.md'} and {args.out / 'comparison.png'}")


if __name__ == "__main__":
    main()
