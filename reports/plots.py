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
    _timeline_plot(os.path.join(directory, PLOTS[1]), runs)
    _latency_plot(os.path.join(directory, PLOTS[2]), report)
    _topology_plot(os.path.join(directory, PLOTS[3]), scenario, report)
    return list(PLOTS)


def _bytes_plot(path: str, report: dict) -> None:
    names = list(report["strategies"])
    values = [report["strategies"][n]["backbone_bytes"] / 1e6 for n in names]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.5))
    bars = ax.barh(
        names,
        values,
        color=[
            "#888"
            if n in ("data-shipping", "query-shipping", "multicast")
            else "#2a7"
            if n.startswith("sharing")
            else "#57c"
            for n in names
        ],
    )
    ax.invert_yaxis()
    ax.set_xlabel("backbone traffic (MB)")
    ax.set_title(f"{report['scenario']}: backbone bytes per strategy")
    for bar, name in zip(bars, names, strict=True):
        saving = report["strategies"][name]["saving_vs"]
        notes = [f"{-100 * s:+.0f}% vs {b.split('-')[0][:5]}" for b, s in saving.items() if b != name and s]
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, "  " + ", ".join(notes), va="center", fontsize=7)
    ax.margins(x=0.45)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _timeline_plot(path: str, runs: dict[str, StrategyRun]) -> None:
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, run in runs.items():
        if not run.timeline:
            continue
        total = np.sum(np.stack(list(run.timeline.values())), axis=0)
        t = np.arange(len(total)) * run.bin_s
        ax.plot(t, total / run.bin_s / 1e3, label=name, drawstyle="steps-post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("backbone traffic (KB/s)")
    ax.set_title("backbone traffic over time")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _latency_plot(path: str, report: dict) -> None:
    names = list(report["strategies"])
    p50 = [1000 * (report["strategies"][n]["latency_s"]["p50"] or 0) for n in names]
    p99 = [1000 * (report["strategies"][n]["latency_s"]["p99"] or 0) for n in names]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.2, p50, 0.4, label="p50")
    ax.bar(x + 0.2, p99, 0.4, label="p99")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("delivery latency (ms)")
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
