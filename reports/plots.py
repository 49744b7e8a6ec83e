"""PNG plots of a report: bytes per strategy, traffic over time, delivery latency, the topology by traffic."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # files only, no display; must precede pyplot
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

from network.meter import StrategyRun
from topologies.model import Scenario

PLOTS = ("bytes.png", "timeline.png", "latency.png", "topology.png")


def write_plots(directory: str, scenario: Scenario, report: dict, runs: dict[str, StrategyRun]) -> list[str]:
    """Write the four PNGs into ``directory``; returns their file names."""
    _bytes_plot(os.path.join(directory, PLOTS[0]), report)
    _timeline_plot(os.path.join(directory, PLOTS[1]), scenario, report, runs)
    _latency_plot(os.path.join(directory, PLOTS[2]), report)
    _topology_plot(os.path.join(directory, PLOTS[3]), scenario, report)
    return list(PLOTS)


BASELINES = ("data-shipping", "query-shipping", "multicast")
SHORT = {"data-shipping": "DS", "query-shipping": "QS", "multicast": "MC"}  # as the table's columns name them
KINDS = {"baseline": "#888", "bound": "#57c", "sharing": "#2a7", "other": "#c72"}
SPAN = 30.0  # values spanning more than this factor are drawn on a log scale


def kind(name: str) -> str:
    """What a strategy is, for its colour: a baseline, the ideal bound, a sharing strategy, or another one."""
    if name in BASELINES:
        return "baseline"
    if name == "ideal":
        return "bound"
    return "sharing" if name.startswith("sharing") else "other"


def exact(entry: dict) -> bool:
    return all(s["missing"] == 0 and s["extra"] == 0 for s in entry["subscriptions"])


def spans_orders(values) -> bool:
    """Whether the positive ``values`` span more than :data:`SPAN` (a linear axis would squash the small)."""
    positive = [v for v in values if v and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > SPAN


def label(name: str, entry: dict) -> str:
    return name if exact(entry) else f"{name} (NOT EXACT)"


def _legend_handles(names: list[str], report: dict) -> list:
    from matplotlib.patches import Patch

    words = {"baseline": "baseline", "bound": "ideal bound", "sharing": "stream sharing", "other": "other strategy"}
    shown = dict.fromkeys(kind(n) for n in names)
    handles = [Patch(color=KINDS[k], label=words[k]) for k in shown]
    if not all(exact(report["strategies"][n]) for n in names):
        handles.append(Patch(facecolor="white", edgecolor="#c00", hatch="///", label="not exact"))
    return handles


def _bytes_plot(path: str, report: dict) -> None:
    names = list(report["strategies"])
    entries = [report["strategies"][n] for n in names]
    values = [e["backbone_bytes"] / 1e6 for e in entries]
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(names) + 1.8))
    bars = ax.barh(
        [label(n, e) for n, e in zip(names, entries, strict=True)],
        values,
        color=[KINDS[kind(n)] for n in names],
        edgecolor=["#c00" if not exact(e) else "none" for e in entries],
        hatch=None,
    )
    for bar, entry in zip(bars, entries, strict=True):
        if not exact(entry):
            bar.set_hatch("///")
    ax.invert_yaxis()
    log = spans_orders(values)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("backbone traffic (MB" + (", log scale)" if log else ")"))
    ax.set_title(f"{report['scenario']}: backbone bytes per strategy (saved: + is less traffic, as in the table)")
    for bar, name in zip(bars, names, strict=True):
        saving = report["strategies"][name]["saving_vs"]
        notes = [f"saved {100 * s:+.1f}% vs {SHORT[b]}" for b, s in saving.items() if b != name and s is not None]
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, "  " + ", ".join(notes), va="center", fontsize=7)
    ax.margins(x=0.6 if not log else 0.0)
    if log:
        low, high = ax.get_xlim()
        ax.set_xlim(low, high * 40)  # room for the notes right of the longest bar
    ax.legend(handles=_legend_handles(names, report), fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _timeline_plot(path: str, scenario: Scenario, report: dict, runs: dict[str, StrategyRun]) -> None:
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    means = []
    for name, run in runs.items():
        if not run.timeline:
            continue
        total = np.sum(np.stack(list(run.timeline.values())), axis=0)
        t = np.arange(len(total)) * run.bin_s
        entry = report["strategies"].get(name, {"subscriptions": []})
        style = "-" if exact(entry) else "--"
        ax.plot(t, total / run.bin_s / 1e3, style, label=label(name, entry), drawstyle="steps-post", lw=1.2)
        means.append(float(total.mean()))
    log = spans_orders(means)
    if log:
        ax.set_yscale("log")
    arrivals = [s.at for s in scenario.subscriptions]
    departures = [s.until for s in scenario.subscriptions if s.until is not None and s.until < scenario.duration]
    marks = ax.get_xaxis_transform()  # x in seconds, y in axes fractions: the marks sit on the frame
    if arrivals:
        ax.plot(arrivals, [0.0] * len(arrivals), "^", ms=4, color="#2a7", alpha=0.6, transform=marks,
                clip_on=False, label=f"subscription arrives ({len(arrivals)})")  # fmt: skip
    if departures:
        ax.plot(departures, [1.0] * len(departures), "v", ms=4, color="#c33", alpha=0.6, transform=marks,
                clip_on=False, label=f"subscription leaves ({len(departures)})")  # fmt: skip
    ax.set_xlabel("time (s)")
    ax.set_ylabel("backbone traffic (KB/s" + (", log scale)" if log else ")"))
    ax.set_title("backbone traffic over time" + ("; zero bins are not drawn on a log scale" if log else ""))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _latency_plot(path: str, report: dict) -> None:
    names = list(report["strategies"])
    entries = [report["strategies"][n] for n in names]
    p50 = [1000 * (e["latency_s"]["p50"] or 0) for e in entries]
    p99 = [1000 * (e["latency_s"]["p99"] or 0) for e in entries]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    for offset, values, what in ((-0.2, p50, "p50"), (0.2, p99, "p99")):
        bars = ax.bar(x + offset, values, 0.4, label=what)
        for bar, entry in zip(bars, entries, strict=True):
            if not exact(entry):
                bar.set_hatch("///")
                bar.set_edgecolor("#c00")
    log = spans_orders(p50 + p99)
    if log:
        ax.set_yscale("log")
    ax.set_xticks(x, [label(n, e) for n, e in zip(names, entries, strict=True)], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("delivery latency (ms" + (", log scale)" if log else ")"))
    ax.set_title("emission to subscriber, all deliveries")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _topology_plot(path: str, scenario: Scenario, report: dict) -> None:
    graph = nx.Graph()
    graph.add_nodes_from(scenario.super_peers)
    graph.add_edges_from((link.a, link.b) for link in scenario.links)
    layout = nx.spring_layout(graph, seed=scenario.seed)  # seeded: the same drawing every run
    shown = [n for n in ("query-shipping", "sharing-em") if n in report["strategies"]]
    shown = shown or list(report["strategies"])[:1]
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 5), squeeze=False)
    per_edge = {name: _edge_bytes(report["strategies"][name]["links"]) for name in shown}
    peak = max((b for edges in per_edge.values() for b in edges.values()), default=0)
    for ax, name in zip(axes[0], shown, strict=True):
        edges = per_edge[name]
        widths = [0.3 + 8 * edges.get(frozenset(e), 0) / peak if peak else 0.3 for e in graph.edges]
        nx.draw_networkx_edges(graph, layout, ax=ax, width=widths, edge_color="#2a7")
        nx.draw_networkx_nodes(
            graph, layout, ax=ax, node_size=60 if len(graph) > 40 else 250, node_color="#ddd", edgecolors="#555"
        )
        if len(graph) <= 40:
            nx.draw_networkx_labels(graph, layout, ax=ax, font_size=7)
        ax.set_title(f"{name}: {report['strategies'][name]['backbone_bytes'] / 1e6:.2f} MB on the backbone")
        ax.axis("off")
    fig.suptitle("link width proportional to traffic (both directions)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _edge_bytes(links: list[dict]) -> dict[frozenset, int]:
    """Bytes per undirected link, both directions added."""
    edges: dict[frozenset, int] = {}
    for link in links:
        key = frozenset((link["from"], link["to"]))
        edges[key] = edges.get(key, 0) + link["bytes"]
    return edges
