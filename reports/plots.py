"""PNG plots of a report: bytes per strategy, traffic over time, delivery latency, the topology by traffic and
by peak utilization, the hottest links' utilization over time, the super-peers' load."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # files only, no display; must precede pyplot
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

from network.meter import StrategyRun
from reports.report import served_exactly
from topologies.model import Scenario

PLOTS = ("bytes.png", "timeline.png", "latency.png", "topology.png", "utilization.png", "load.png", "streams.png")


def write_plots(directory: str, scenario: Scenario, report: dict, runs: dict[str, StrategyRun]) -> list[str]:
    """Write the PNGs into ``directory``; returns their file names."""
    _bytes_plot(os.path.join(directory, PLOTS[0]), report)
    _timeline_plot(os.path.join(directory, PLOTS[1]), scenario, report, runs)
    _latency_plot(os.path.join(directory, PLOTS[2]), report)
    _topology_plot(os.path.join(directory, PLOTS[3]), scenario, report)
    _utilization_plot(os.path.join(directory, PLOTS[4]), scenario, report, runs)
    _load_plot(os.path.join(directory, PLOTS[5]), report)
    _streams_plot(os.path.join(directory, PLOTS[6]), report)
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
    return all(served_exactly(s) for s in entry["subscriptions"])


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
    for action, color, style, word in (("fail", "#c00", "--", "failure"), ("recover", "#080", ":", "recovery")):
        times = sorted(float(e.at) for e in scenario.events if e.action == action)
        for k, at in enumerate(sorted(set(times))):
            ax.axvline(at, color=color, lw=0.9, ls=style, alpha=0.8, label=f"{word} ({len(times)})" if k == 0 else None)
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
    layout, geographic = topology_layout(scenario, graph)
    shown = [n for n in ("query-shipping", "sharing-em") if n in report["strategies"]]
    shown = shown or list(report["strategies"])[:1]
    hottest = max(report["strategies"], key=lambda n: report["strategies"][n].get("peak_utilization") or 0.0)
    if hottest not in shown and (report["strategies"][hottest].get("peak_utilization") or 0.0) > 1:
        shown.insert(0, hottest)  # a strategy overloading a link: where it does
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 5), squeeze=False)
    per_edge = {name: _edge_bytes(report["strategies"][name]["links"]) for name in shown}
    peak = max((b for edges in per_edge.values() for b in edges.values()), default=0)
    colours = plt.get_cmap("RdYlGn_r")
    scale = matplotlib.colors.Normalize(0.0, 1.0)  # 100 % and above: the reddest
    for ax, name in zip(axes[0], shown, strict=True):
        edges = per_edge[name]
        hot = _edge_peaks(report["strategies"][name]["links"])
        widths = [0.3 + 8 * edges.get(frozenset(e), 0) / peak if peak else 0.3 for e in graph.edges]
        edge_colours = [colours(scale(min(1.0, hot.get(frozenset(e), 0.0)))) for e in graph.edges]
        nx.draw_networkx_edges(graph, layout, ax=ax, width=widths, edge_color=edge_colours)
        nx.draw_networkx_nodes(
            graph, layout, ax=ax, node_size=60 if len(graph) > 40 else 250, node_color="#ddd", edgecolors="#555"
        )
        if len(graph) <= 40 or (geographic and len(graph) <= 60):  # a map spreads its labels
            nx.draw_networkx_labels(graph, layout, ax=ax, font_size=7 if len(graph) <= 40 else 5)
        ax.set_title(f"{name}: {report['strategies'][name]['backbone_bytes'] / 1e6:.2f} MB on the backbone")
        if geographic:  # degrees of longitude shrink with the cosine of the latitude: keep the map's shape
            latitudes = [lat for _, lat in layout.values()]
            ax.set_aspect(1 / max(0.1, np.cos(np.radians((min(latitudes) + max(latitudes)) / 2))))
            ax.set_xlabel("longitude")
            ax.set_ylabel("latitude")
            ax.tick_params(left=True, bottom=True, labelleft=True, labelbottom=True, labelsize=7)
        else:
            ax.axis("off")
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=scale, cmap=colours), ax=axes[0].tolist(), shrink=0.6)
    bar.set_label("peak utilization, busier direction (red: 100 % or more)")
    fig.suptitle("width: traffic (both directions); colour: peak utilization")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def topology_layout(scenario: Scenario, graph: nx.Graph) -> tuple[dict, bool]:
    """Where each super-peer is drawn, and whether that is geography: every super-peer at its (lon, lat)
    when each has a position (a real network's); else a seeded spring layout (the same drawing every run)
    holding the super-peers that have a position in place."""
    position = scenario.position
    if position and all(sp in position for sp in scenario.super_peers):
        return {sp: position[sp] for sp in scenario.super_peers}, True
    if position:
        return nx.spring_layout(graph, pos=dict(position), fixed=list(position), seed=scenario.seed), False
    return nx.spring_layout(graph, seed=scenario.seed), False


def _edge_peaks(links: list[dict]) -> dict[frozenset, float]:
    """Peak utilization per undirected link: its busier direction's."""
    edges: dict[frozenset, float] = {}
    for link in links:
        key = frozenset((link["from"], link["to"]))
        edges[key] = max(edges.get(key, 0.0), link.get("peak_utilization") or 0.0)
    return edges


HOTTEST_LINES = 8  # lines at most in utilization.png


def _utilization_plot(path: str, scenario: Scenario, report: dict, runs: dict[str, StrategyRun]) -> None:
    """Offered load over bandwidth per bin for each strategy's hottest backbone link direction (the
    hottest first, at most :data:`HOTTEST_LINES`), with the 100 % line."""
    bandwidth = {(link.a, link.b): link.bandwidth for link in scenario.links}
    bandwidth |= {(b, a): bw for (a, b), bw in bandwidth.items()}
    lines = []
    for name, run in runs.items():
        entry = report["strategies"].get(name)
        if entry is None or not run.offered:
            continue
        links = [link for link in entry["links"] if link.get("peak_utilization")]
        if links:
            top = max(links, key=lambda link: link["peak_utilization"])
            lines.append((top["peak_utilization"], name, (top["from"], top["to"])))
    lines.sort(key=lambda line: -line[0])
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    for _, name, direction in lines[:HOTTEST_LINES]:
        run = runs[name]
        series = run.offered[direction] * 8 / (bandwidth[direction] * run.load_bin_s)
        t = np.arange(len(series)) * run.load_bin_s
        style = "-" if exact(report["strategies"][name]) else "--"
        ax.plot(
            t, 100 * series, style, drawstyle="steps-post", lw=1.2, label=f"{name}: {direction[0]} -> {direction[1]}"
        )
    ax.axhline(100, color="#c00", lw=1, ls=":", label="100 % of the bandwidth")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"offered load per {report.get('bin_s', 1):g} s, % of bandwidth")
    ax.set_title("each strategy's hottest backbone link direction over time")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _load_plot(path: str, report: dict) -> None:
    """Per strategy, its busiest super-peer: peak and mean load against its capacity, or, when no
    super-peer has a capacity, the tuples per second it took in."""
    names = list(report["strategies"])
    limited = any(sp.get("capacity") for e in report["strategies"].values() for sp in e.get("super_peers", ()))
    peaks, means, notes = [], [], []
    for name in names:
        peers = report["strategies"][name].get("super_peers", [])
        if limited:
            peers = [sp for sp in peers if sp["load"] is not None]
            top = max(peers, key=lambda sp: (sp["peak_load"] or 0.0, sp["load"]), default=None)
            peaks.append(100 * (top["peak_load"] or 0.0) if top else 0.0)
            means.append(100 * top["load"] if top else 0.0)
        else:
            top = max(peers, key=lambda sp: sp["tuples_in"], default=None)
            peaks.append(0.0)
            means.append(top["tuples_in"] / report["duration"] if top else 0.0)
        notes.append(top["id"] if top else "")
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(names) + 1.8))
    if limited:
        ax.barh(y - 0.2, peaks, 0.4, label=f"peak (per {report.get('bin_s', 1):g} s)", color="#c72")
        ax.barh(y + 0.2, means, 0.4, label="over the run", color="#57c")
        ax.axvline(100, color="#c00", lw=1, ls=":", label="capacity")
        ax.set_xlabel("load of the busiest super-peer, % of its capacity")
    else:
        ax.barh(y, means, 0.5, color="#57c", label="over the run")
        ax.set_xlabel("tuples per second taken in by the busiest super-peer (no capacities given)")
    for k, note in enumerate(notes):
        ax.text(max(peaks[k], means[k]), k, f"  {note}", va="center", fontsize=7)
    ax.set_yticks(y, [label(n, report["strategies"][n]) for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set_title(f"{report['scenario']}: super-peer load per strategy")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


STREAMS_SHOWN = 15  # streams at most in streams.png: the ones with the most backbone bytes


def _streams_plot(path: str, report: dict) -> None:
    """Per stream (the busiest :data:`STREAMS_SHOWN`), the backbone bytes each strategy's flows of it carry."""
    names = list(report["strategies"])
    per = {n: {s["id"]: s["backbone_bytes"] or 0 for s in report["strategies"][n].get("streams", ())} for n in names}
    ids = sorted(per[names[0]], key=lambda i: (-max(per[n][i] for n in names), i))[:STREAMS_SHOWN] if names else []
    fig, ax = plt.subplots(figsize=(8.5, min(12.0, 0.1 * len(ids) * max(1, len(names)) + 1.8)))
    height = 0.8 / max(1, len(names))
    y = np.arange(len(ids))
    values = [per[n][i] / 1e6 for n in names for i in ids]
    for k, name in enumerate(names):
        ax.barh(
            y + k * height, [per[name][i] / 1e6 for i in ids], height, label=name, color=plt.get_cmap("tab10")(k % 10)
        )
    ax.set_yticks(y + height * (len(names) - 1) / 2, ids, fontsize=8)
    ax.invert_yaxis()
    log = spans_orders(values)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("backbone traffic of the stream's flows (MB" + (", log scale)" if log else ")"))
    shown = (
        f"the {len(ids)} busiest of {len(per[names[0]])} streams"
        if names and len(per[names[0]]) > len(ids)
        else "every stream"
    )
    ax.set_title(f"{report['scenario']}: backbone bytes per stream ({shown})")
    ax.legend(fontsize=7, loc="lower right")
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
