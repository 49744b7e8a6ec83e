"""A sweep's table, its statistics and its plots: ``sweep.csv``, ``sweep.md`` and one PNG per metric.

Each metric is drawn against the sweep's x key (``--x``, else the first varied key other than ``seed``), one line per
strategy through the mean over the points that differ only in ``seed`` (and in any other varied key
folded into the same x), with a band of its 95 % confidence interval: Student's t over the repetitions,
``mean +- t(0.975, n - 1) * s / sqrt(n)``; a single repetition has no band.  Other varied keys than x and
``seed`` each give the plot a panel per value.  A metric spanning orders of magnitude is drawn on a log
scale, as is an x key spanning a factor of 8 or more (a geometric grid such as 25, 50, ..., 400).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter, defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display; must precede pyplot
import matplotlib.pyplot as plt

from reports.plots import spans_orders
from reports.report import _fmt_bytes
from sharing import strategy_names

TITLES = {
    "backbone_bytes": "backbone bytes",
    "backbone_tuples": "backbone tuple-hops",
    "access_bytes": "access bytes",
    "saving_vs_data_shipping": "backbone bytes saved vs data-shipping (+ is less traffic)",
    "saving_vs_query_shipping": "backbone bytes saved vs query-shipping (+ is less traffic)",
    "saving_vs_multicast": "backbone bytes saved vs multicast (+ is less traffic)",
    "vs_ideal_bytes": "backbone bytes / ideal's (bytes x ideal)",
    "vs_ideal_tuple_hops": "tuple-hops / ideal's (hops x ideal)",
    "latency_p50_s": "delivery latency p50 (ms)",
    "latency_p99_s": "delivery latency p99 (ms)",
    "latency_mean_s": "delivery latency mean (ms)",
    "exact": "exact (1: every subscription got its centralized result)",
    "plan_s": "planning time (wall s)",
    "run_s": "simulation time (wall s)",
}
SAVING_FLOOR = -1.0  # savings below -100 % (twice the baseline's traffic) are drawn below the axis
SUMMARY_METRICS = ("backbone_bytes", "saving_vs_query_shipping", "vs_ideal_bytes", "latency_p99_s")


def shown(metric: str, mean: float, half: float) -> str:
    """A mean and its half-width as the console table shows the metric: savings as signed percentages,
    latencies in milliseconds, bytes with decimal units, the rest to four significant digits."""
    if metric.startswith("saving_vs_"):
        return f"{100 * mean:+.1f}% ± {100 * half:.1f}%"
    if metric.startswith("latency_"):
        return f"{1000 * mean:.2f} ± {1000 * half:.2g}"
    if metric in ("backbone_bytes", "access_bytes"):
        return f"{_fmt_bytes(mean)} ± {_fmt_bytes(half)}"
    return f"{mean:.4g} ± {half:.2g}"


def scale(metric: str) -> float:
    """What a metric's sweep.csv value (SI units, fractions) is multiplied by where it is shown: latencies in
    ms (savings are drawn as percentages by the axis's formatter)."""
    return 1000.0 if metric.startswith("latency_") else 1.0


def write_sweep_csv(path: str, spec, rows: list[dict]) -> None:
    """One row per point, strategy and metric: the varied keys, ``strategy``, ``metric``, ``value``."""
    keys = [k for k, _ in spec.vary]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow([*keys, "strategy", "metric", "value"])
        for row in rows:
            writer.writerow([_cell(row[k]) for k in keys] + [row["strategy"], row["metric"], _cell(row["value"])])


def _cell(value: object) -> str:
    if isinstance(value, float):
        return repr(value)
    return value if isinstance(value, str) else str(value)


def interval(values: list[float]) -> tuple[float, float, int]:
    """``(mean, half-width of the 95 % confidence interval, n)``; the half-width is 0 for one value."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, n
    from scipy.stats import t

    deviation = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(t.ppf(0.975, n - 1)) * deviation / math.sqrt(n), n


def aggregate(spec, rows: list[dict]) -> dict[tuple, dict[str, dict[object, tuple[float, float, int]]]]:
    """Per panel (the values of the varied keys other than x and seed), metric and strategy: x value ->
    :func:`interval` of the metric over the repetitions, as ``{(panel, metric): {strategy: {x: ...}}}``."""
    x = spec.x
    others = [k for k, _ in spec.vary if k not in (x, "seed")]
    groups: dict[tuple, dict[str, dict[object, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        panel = tuple(row[k] for k in others)
        groups[(panel, row["metric"])][row["strategy"]].setdefault(_hashable(row[x]), []).append(float(row["value"]))
    return {
        key: {s: {xv: interval(vs) for xv, vs in per_x.items()} for s, per_x in per_strategy.items()}
        for key, per_strategy in groups.items()
    }


def _numeric(values) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _sorted(values) -> list:
    """Numbers by value, anything else by its text."""
    return sorted(values, key=float) if _numeric(values) else sorted(values, key=repr)


def _hashable(value: object) -> object:
    return repr(value) if isinstance(value, list | dict) else value


def _order(names) -> list[str]:
    known = list(strategy_names())
    return sorted(names, key=lambda n: (known.index(n) if n in known else len(known), n))


def _colours(names: list[str]) -> dict[str, object]:
    palette = plt.get_cmap("tab10")
    known = list(strategy_names())
    return {n: palette((known.index(n) if n in known else len(known) + i) % 10) for i, n in enumerate(names)}


def write_sweep_plots(out_dir: str, spec, rows: list[dict], scenario: str) -> list[str]:
    """One PNG per metric (``<metric>.png``) in ``out_dir``; returns their names."""
    stats = aggregate(spec, rows)
    inexact = Counter(r["strategy"] for r in rows if r["metric"] == "exact" and r["value"] != 1)
    panels = sorted({panel for panel, _ in stats}, key=repr)
    others = [k for k, _ in spec.vary if k not in (spec.x, "seed")]
    seeds = dict(spec.vary).get("seed")
    written = []
    metrics = [m for m in TITLES if any(metric == m for _, metric in stats)]
    for metric in metrics:
        fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.3), squeeze=False)
        for ax, panel in zip(axes[0], panels, strict=True):
            _panel(ax, spec, stats.get((panel, metric), {}), metric, inexact)
            if others:
                ax.set_title(", ".join(f"{k}={v}" for k, v in zip(others, panel, strict=True)), fontsize=9)
        reps = f"mean over {len(seeds)} seeds, 95 % confidence band" if seeds else "one run per point"
        fig.suptitle(f"{scenario}: {TITLES[metric]}\n{reps}", fontsize=10)
        fig.tight_layout()
        name = f"{metric}.png"
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def _panel(ax, spec, per_strategy: dict, metric: str, inexact: Counter) -> None:
    """One panel: per strategy its means against x with their bands; a strategy that was not exact at some
    point is dashed and says at how many."""
    x_values = [xv for per_x in per_strategy.values() for xv in per_x]
    numeric = _numeric(x_values)
    order = _sorted(set(x_values))
    position = {v: (float(v) if numeric else k) for k, v in enumerate(order)}
    colours = _colours(_order(per_strategy))
    saving = metric.startswith("saving_vs_")
    means = []
    factor = scale(metric)
    for name in _order(per_strategy):
        per_x = per_strategy[name]
        xs = [xv for xv in order if xv in per_x]
        mean = [factor * per_x[xv][0] for xv in xs]
        half = [factor * per_x[xv][1] for xv in xs]
        where = [position[xv] for xv in xs]
        label = name if not inexact[name] else f"{name} (NOT EXACT at {inexact[name]} points)"
        if saving and max(mean) < SAVING_FLOOR:  # a baseline far dearer than this one would squash the rest
            label = f"{name}: {100 * min(mean):+.0f}% to {100 * max(mean):+.0f}%, below the axis"
        ax.plot(where, mean, "o--" if inexact[name] else "o-", ms=3, lw=1.3, color=colours[name], label=label)
        low = [m - h for m, h in zip(mean, half, strict=True)]
        high = [m + h for m, h in zip(mean, half, strict=True)]
        ax.fill_between(where, low, high, color=colours[name], alpha=0.18, lw=0)
        means += mean
    if saving:  # as the console table shows savings: percentages, + is less traffic
        from matplotlib.ticker import PercentFormatter

        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        shown = [m for m in means if m >= SAVING_FLOOR]
        if len(shown) < len(means):
            ax.set_ylim(min(shown, default=SAVING_FLOOR) - 0.05, max(max(shown, default=0.0), 0.0) + 0.05)
    elif metric != "exact" and spans_orders([abs(m) for m in means]) and min(means, default=0) > 0:
        ax.set_yscale("log")
    low, high = (min(float(v) for v in order), max(float(v) for v in order)) if numeric and order else (0, 0)
    if low > 0 and high / low >= 8:
        ax.set_xscale("log")
        ax.set_xticks([float(v) for v in order], [str(v) for v in order])
        ax.minorticks_off()
    elif not numeric:
        ax.set_xticks(range(len(order)), [str(v) for v in order])
    ax.set_xlabel(spec.x)
    ax.set_ylabel(TITLES[metric].split(" (")[0] + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def sweep_markdown(spec, rows: list[dict], plots: list[str], scenario: str) -> str:
    """``sweep.md``: the design, the main metrics' means with their 95 % intervals, the plots."""
    stats = aggregate(spec, rows)
    vary = "; ".join(f"`{k}` = {', '.join(map(str, v))}" for k, v in spec.vary)
    lines = [
        f"# Sweep: {scenario}",
        "",
        f"Varied: {vary}.",
    ]
    if spec.fixed:
        lines.append("Set at every point: " + "; ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in spec.fixed) + ".")
    lines += ["", f"Means over the repetitions against `{spec.x}`, with the half-width of the 95 % confidence"
              " interval (Student's t), in the console table's units (savings in percent, + is less traffic;"
              " latencies in milliseconds); every row of every point is in sweep.csv, in seconds and"
              " fractions.", ""]  # fmt: skip
    others = [k for k, _ in spec.vary if k not in (spec.x, "seed")]
    for (panel, metric), per_strategy in sorted(stats.items(), key=lambda item: repr(item[0])):
        if metric not in SUMMARY_METRICS:
            continue
        names = _order(per_strategy)
        heading = TITLES[metric] + "".join(f", {k}={v}" for k, v in zip(others, panel, strict=True))
        lines += [f"## {heading}", "", f"| {spec.x} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for xv in _sorted({xv for per_x in per_strategy.values() for xv in per_x}):
            cells = []
            for name in names:
                found = per_strategy[name].get(xv)
                cells.append("" if found is None else shown(metric, found[0], found[1]))
            lines.append(f"| {xv} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"![{name}]({name})" for name in plots]
    return "\n".join(lines) + "\n"
