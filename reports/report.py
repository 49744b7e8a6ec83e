"""Traffic reports: ``report.json`` (docs/REPORT.md), ``links.csv``, ``summary.md`` and the console table.

Everything in the report is a pure function of the scenario and the runs, so two runs of the same scenario
give byte-identical files, but for the wall time re-planning took at each change of the backbone
(``replan_s``, docs/REPORT.md) and the engine's name; the run's own wall-clock times are printed, never
written.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping

import numpy as np

from network.meter import StrategyRun, SubscriptionSummary, load_bin
from network.routing import Network
from topologies.model import Scenario
from topologies.workload import tuple_count

BASELINES = ("data-shipping", "query-shipping", "multicast")


def served_exactly(sub: dict) -> bool:
    """Whether a subscription's entry is exact: nothing missing and nothing extra (a copy dropped on the
    way, lost at a failure or unreachable is accounted for).  A subscription the planner rejected must
    have received exactly what it should have before its rejection (nothing, when it was rejected on
    arrival; ``missing_before_rejection`` when it was rejected later, at a failure) and nothing extra: it
    was refused, not served wrongly."""
    if sub.get("rejected") is not None:
        return sub.get("missing_before_rejection", sub["delivered"]) == 0 and sub["extra"] == 0
    return sub["missing"] == 0 and sub["extra"] == 0


def strategy_entry(scenario: Scenario, run: StrategyRun, surplus: Mapping[str, int] | None = None) -> dict:
    """One run's report entry, its subscriptions as the engine's check found them (``run.summary``,
    network/exactness.py).  ``surplus``: per stream, the attribute values its plan carries that nobody
    downstream selects (:func:`reports.surplus.surplus_values`), when computed: the entry's streams then
    give them in bytes, and :func:`assemble_report` splits the gap to ``ideal`` with them."""
    links = link_entries(scenario, run)
    subscriptions = []
    for sub in scenario.subscriptions:
        found = run.summary[sub.id]
        subscriptions.append(
            {
                "id": sub.id,
                "delivered": found.delivered,
                "expected": found.expected,
                "missing": found.missing,
                "extra": found.extra,
                "latency_s": found.latency.as_dict(),
                "dropped": found.dropped,
                "lost": found.lost,
                "unreachable": found.unreachable,
                "rejected": run.rejected.get(sub.id),
            }
        )
        if found.missing_before_rejection is not None:
            subscriptions[-1]["rejected_at"] = run.rejected_at[sub.id]
            subscriptions[-1]["missing_before_rejection"] = found.missing_before_rejection
        if found.input is not None:  # an aggregate subscription: the counts above are of records
            subscriptions[-1]["unit"] = "records"
            subscriptions[-1]["input"] = _input_entry(found.input)
            subscriptions[-1]["aggregated_at"] = found.aggregated_at
    access = access_links(scenario, run, subscriptions)
    super_peers = super_peer_entries(scenario, run, links, access)
    loads = [sp["peak_load"] for sp in super_peers if sp["peak_load"] is not None]
    lengths = [link.get("length_km") for link in links]
    entry = {
        "backbone_bytes": sum(link["bytes"] for link in links),
        "backbone_tuples": sum(link["tuples"] for link in links),
        "access_bytes": int(run.access_bytes),
        "network_usage": sum(link["bytes"] * link["latency"] for link in links),
        "byte_km": None if None in lengths else sum(link["bytes"] * link["length_km"] for link in links),
        "last_arrival_s": run.last_arrival,
        "exact": all(served_exactly(s) for s in subscriptions),
        "streams": stream_entries(scenario, run, surplus),
        "links": links,
        "access_links": access,
        "subscriptions": subscriptions,
        "latency_s": run.latency.as_dict(),
        "super_peers": super_peers,
        "peak_load": max(loads, default=None),
        "dropped": sum(copies(s)["dropped"] for s in subscriptions),
        "link_drops": sum(link["dropped"] for link in links),
        "rejected": sum(1 for s in subscriptions if s["rejected"] is not None),
        "lost": sum(copies(s)["lost"] for s in subscriptions),
        "link_lost": sum(link["lost"] for link in links),
        "unreachable": sum(copies(s)["unreachable"] for s in subscriptions),
        "replans": [r.to_json() for r in run.replans],
    }
    observe(entry, max(float(scenario.duration), run.last_arrival))  # alone; a report observes its whole span
    return entry


def copies(sub: dict) -> dict:
    """A subscription entry's counts of tuple copies: its own, or an aggregate subscription's input's (its
    own count records)."""
    return sub.get("input", sub)


def _input_entry(found: SubscriptionSummary) -> dict:
    """An aggregate subscription's input: the tuple copies its records were computed from, checked as a
    selection's are."""
    return {
        "delivered": found.delivered,
        "expected": found.expected,
        "missing": found.missing,
        "extra": found.extra,
        "dropped": found.dropped,
        "lost": found.lost,
        "unreachable": found.unreachable,
    }


def stream_entries(scenario: Scenario, run: StrategyRun, surplus: Mapping[str, int] | None = None) -> list[dict]:
    """Per stream, in the scenario's order, the bytes and tuples its flows put on backbone link directions
    (every direction counted, as ``backbone_bytes`` counts them; the entries add up to it); null where the
    engine does not count per stream (live mode's receivers count per link).  With ``surplus``, also the
    bytes of attribute values nobody downstream selects (:mod:`reports.surplus`).  The one place a
    per-stream entry is made: fields added to it belong here."""
    counted = bool(run.stream_bytes) or not scenario.streams
    entries = []
    for stream in scenario.streams:
        entry = {
            "id": stream.id,
            "backbone_bytes": int(run.stream_bytes.get(stream.id, 0)) if counted else None,
            "backbone_tuples": int(run.stream_tuples.get(stream.id, 0)) if counted else None,
        }
        if surplus is not None:
            entry["attribute_surplus_bytes"] = VALUE_BYTES * int(surplus[stream.id])
        entries.append(entry)
    return entries


VALUE_BYTES = 8  # one attribute value on the wire (docs/ACCOUNTING.md)


def gap_to_ideal(entry: dict, ideal: dict) -> dict | None:
    """How a strategy's backbone bytes differ from ``ideal``'s, whole and per stream: ``bytes`` (the
    difference), ``attribute_surplus`` (bytes of values nobody downstream selects; ideal carries none) and
    ``tuple_hops`` (the rest: tuple copies beyond ideal's, or fewer, with their headers and needed values).
    None unless both entries count per stream and the surplus is known."""
    theirs = {s["id"]: s for s in ideal["streams"]}
    streams = []
    for mine in entry["streams"]:
        other = theirs.get(mine["id"])
        if other is None or mine["backbone_bytes"] is None or other["backbone_bytes"] is None:
            return None
        surplus = mine.get("attribute_surplus_bytes")
        if surplus is None:
            return None
        gap = mine["backbone_bytes"] - other["backbone_bytes"]
        streams.append({"id": mine["id"], "bytes": gap, "attribute_surplus": surplus, "tuple_hops": gap - surplus})
    whole = {k: sum(s[k] for s in streams) for k in ("bytes", "attribute_surplus", "tuple_hops")}
    return {**whole, "streams": streams}


def link_entries(scenario: Scenario, run: StrategyRun) -> list[dict]:
    """Every backbone link direction, sorted: its traffic, its latency (seconds) and length (km, where
    known), and how hard it was driven (docs/REPORT.md): the busiest bin's offered load over the bandwidth
    (``peak_offered``, null when the engine did not measure it; :func:`observe` adds ``utilization`` and
    ``peak_utilization`` over the span observed), and the tuples its full buffer ``dropped``."""
    network = Network.of(scenario)
    found = []
    for a, b in sorted(run.link_bytes):
        sent = int(run.link_bytes[(a, b)])
        link = network.link(a, b)
        offered = run.offered.get((a, b))
        if offered is not None:
            peak = (int(offered.max()) * 8 if len(offered) else 0) / (link.bandwidth * run.load_bin_s)
        else:
            peak = 0.0 if sent == 0 else None
        entry = {
            "from": a,
            "to": b,
            "bytes": sent,
            "tuples": int(run.link_tuples[(a, b)]),
            "bandwidth": _number(link.bandwidth),
            "latency": float(link.latency),
            "peak_offered": peak,
            "dropped": int(run.link_dropped.get((a, b), 0)),
            "lost": int(run.link_lost.get((a, b), 0)),
        }
        if link.length is not None:
            entry["length_km"] = link.length
        found.append(entry)
    return found


def observe(entry: dict, observed_s: float) -> None:
    """A strategy entry's links over a span of ``observed_s`` seconds: each direction's ``utilization``
    (bytes x 8 / (bandwidth x observed_s): never above 1, since a link sends at most its bandwidth over the
    span) and ``peak_utilization``, its busiest bin's offered load (``peak_offered``) or the mean when that
    is higher (a last bin cut short by the end of the emissions can hide a busier stretch than any whole
    bin; the mean over the span bounds the busiest moment from below); the entry's highest peak and its
    directions offered more than their bandwidth in some bin.  A span of 0 (a live run stopped before its
    clock started) observes nothing: every utilization 0."""
    for link in entry["links"]:
        link["utilization"] = _rate(link["bytes"] * 8, link["bandwidth"] * observed_s)
        peak = link["peak_offered"]
        link["peak_utilization"] = None if peak is None else max(peak, link["utilization"])
    peaks = [link["peak_utilization"] for link in entry["links"] if link["peak_utilization"] is not None]
    entry["peak_utilization"] = max(peaks, default=0.0)
    entry["links_over_capacity"] = sum(1 for p in peaks if p > 1)
    for sp in entry.get("super_peers", ()):
        if sp.get("cpu") is None or sp.get("cpu_ops") is None:
            sp["cpu_utilization"] = sp["peak_cpu_utilization"] = None
            continue
        sp["cpu_utilization"] = _rate(sp["cpu_ops"], sp["cpu"] * observed_s)
        sp["peak_cpu_utilization"] = max(sp["peak_cpu_offered"], sp["cpu_utilization"])


def super_peer_entries(scenario: Scenario, run: StrategyRun, links: list[dict], access: list[dict]) -> list[dict]:
    """Every super-peer in the scenario's order: the tuples it took in (uploads of its sources and every
    tuple arriving over a backbone link) and sent out (over backbone links and down to its thin-peers),
    its ``load`` over the run and ``peak_load`` per bin against its capacity (null when unlimited), and the
    most operators it ran at once."""
    taken = dict.fromkeys(scenario.super_peers, 0)
    sent = dict.fromkeys(scenario.super_peers, 0)
    for link in links:
        taken[link["to"]] += link["tuples"]
        sent[link["from"]] += link["tuples"]
    for link in access:
        if link["to"] in taken:
            taken[link["to"]] += link["tuples"]
        else:
            sent[link["from"]] += link["tuples"]
    found = []
    for sp in scenario.super_peers:
        capacity = scenario.capacity.get(sp)
        landed = run.landed.get(sp)
        load = peak = None
        if capacity is not None:
            load = _rate(taken[sp], capacity * scenario.duration)
            if landed is not None:
                peak = _rate(int(landed.max()) if len(landed) else 0, capacity * run.load_bin_s)
            elif taken[sp] == 0:
                peak = 0.0
        found.append(
            {
                "id": sp,
                "tuples_in": taken[sp],
                "tuples_out": sent[sp],
                "capacity": None if capacity is None else _number(capacity),
                "load": load,
                "peak_load": peak,
                "operators": int(run.operators.get(sp, 0)),
                **_processor_entry(run, sp, scenario.cpu.get(sp)),
            }
        )
    return found


def _processor_entry(run: StrategyRun, sp: str, cpu: float | None) -> dict:
    """What ``sp``'s processor did (docs/ACCOUNTING.md, "Super-peer CPU"): its ``cpu`` (operations per
    second, null: unlimited), the operations it ran, the busiest bin's offered operations over its speed
    (``peak_cpu_offered``; :func:`observe` adds ``cpu_utilization`` and ``peak_cpu_utilization``, null when
    unlimited), the mean seconds a tuple spent there (waiting and served; null: none came), and the tuples
    its full input buffer dropped.  An engine that does not emulate processors gives nulls."""
    tally = run.processors.get(sp)
    if tally is None:
        return {"cpu": None if cpu is None else _number(cpu), "cpu_ops": None, "peak_cpu_offered": None,
                "processing_delay_mean": None, "cpu_dropped": None}  # fmt: skip
    peak = None
    if cpu is not None:
        peak = _rate(int(tally.offered.max()) if len(tally.offered) else 0, cpu * run.load_bin_s)
    return {
        "cpu": None if cpu is None else _number(cpu),
        "cpu_ops": tally.ops,
        "peak_cpu_offered": peak,
        "processing_delay_mean": tally.delay_mean(),
        "cpu_dropped": tally.dropped,
    }


def _rate(amount: float, per: float) -> float:
    """``amount / per``: the report keeps every ratio at full precision (tables round what they show); 0 over
    a run of no time (a live run stopped before its clock started carried nothing)."""
    return amount / per if per else 0.0


def _number(value: float) -> int | float:
    """A whole float as an int (``100000000``, not ``100000000.0``)."""
    return int(value) if float(value).is_integer() else value


def access_links(scenario: Scenario, run: StrategyRun, subscriptions: list[dict]) -> list[dict]:
    """Every access link direction (a thin-peer's upload to its super-peer, and its super-peer's deliveries
    to it), sorted by ``from``, then ``to``, zeros included: bytes as the engine metered them, tuples as the
    accounting rules make them (every emitted tuple uploaded once, every delivered copy sent down)."""
    tuples: dict[tuple[str, str], int] = {}
    for peer in scenario.thin_peers:
        tuples[(peer.id, peer.attach)] = tuples[(peer.attach, peer.id)] = 0
    for stream in scenario.streams:
        source = scenario.thin_peer(stream.source)
        tuples[(source.id, source.attach)] += tuple_count(stream, scenario.duration)
    for sub, found in zip(scenario.subscriptions, subscriptions, strict=True):
        # records shipped to it cross its access link, else the copies of its input do
        shipped = found.get("aggregated_at") is not None
        tuples[(scenario.home(sub.peer), sub.peer)] += (found if shipped else copies(found))["delivered"]
    return [
        {"from": a, "to": b, "bytes": int(run.access_link_bytes.get((a, b), 0)), "tuples": n}
        for (a, b), n in sorted(tuples.items())
    ]


def build_report(scenario: Scenario, runs: dict[str, StrategyRun], engine: str) -> dict:
    """The report as a JSON-ready dict; strategies in the order given."""
    return assemble_report(scenario, {name: strategy_entry(scenario, run) for name, run in runs.items()}, engine)


def assemble_report(scenario: Scenario, strategies: dict[str, dict], engine: str) -> dict:
    """The report from each strategy's :func:`strategy_entry` (strategies in the order given): the entries
    gain their links' utilization over the span the report observes (``observed_s``: from 0 to the later of
    the run's end and the last arrival of any of its tuples, in any strategy), their savings against the
    baselines and their ratios to ``ideal``."""
    observed_s = max([float(scenario.duration)] + [e.get("last_arrival_s", 0.0) for e in strategies.values()])
    for entry in strategies.values():
        observe(entry, observed_s)
        entry["saving_vs"] = {
            base: _saving(entry["backbone_bytes"], strategies[base]["backbone_bytes"])
            for base in BASELINES
            if base in strategies
        }
        if "ideal" in strategies:
            ideal = strategies["ideal"]
            entry["vs_ideal"] = {
                "bytes": _ratio(entry["backbone_bytes"], ideal["backbone_bytes"]),
                "tuple_hops": _ratio(entry["backbone_tuples"], ideal["backbone_tuples"]),
            }
            gap = gap_to_ideal(entry, ideal)
            if gap is not None:
                entry["gap_to_ideal"] = gap
    exact = all(served_exactly(s) for e in strategies.values() for s in e["subscriptions"])
    return {
        "scenario": scenario.name,
        "engine": engine,
        "duration": scenario.duration,
        "observed_s": observed_s,
        "bin_s": load_bin(scenario.duration),
        "header_bytes": scenario.header_bytes,
        "seed": scenario.seed,
        "exact": exact,
        "warnings": list(scenario.warnings),
        "events": event_entries(scenario, strategies),
        **({"positions": {sp: list(pos) for sp, pos in scenario.positions}} if scenario.positions else {}),
        "strategies": strategies,
    }


def event_entries(scenario: Scenario, strategies: dict[str, dict]) -> list[dict]:
    """The backbone's failures and recoveries, one entry per instant with events (docs/DYNAMICS.md): what
    happened, and per strategy what re-planning took (wall seconds), the flows it moved and the
    subscriptions it cut off or served again."""
    instants: dict[float, list[str]] = {}
    for event in scenario.events:
        instants.setdefault(float(event.at), []).append(event.text())
    entries = []
    for at, texts in sorted(instants.items()):
        per = {}
        for name, entry in strategies.items():
            done = next((r for r in entry.get("replans", ()) if r["time"] == at), None)
            if done is not None:
                per[name] = {k: done[k] for k in ("replan_s", "flows_moved", "cut_off", "restored")}
        entries.append({"time": at, "events": texts, "strategies": per})
    return entries


def _saving(value: int, base: int) -> float | None:
    """Fraction of the baseline's backbone bytes saved (negative: more traffic than the baseline)."""
    return None if base == 0 else 1.0 - value / base


def _ratio(value: int, base: int) -> float | None:
    return None if base == 0 else value / base


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2) + "\n"


def links_csv(report: dict) -> str:
    """``links.csv``: per strategy every backbone link direction, then every access link direction (a
    report without ``access_links``, such as a live one, has only the backbone's)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["strategy", "from", "to", "bytes", "tuples", "kind"])
    for name, entry in report["strategies"].items():
        for kind, key in (("backbone", "links"), ("access", "access_links")):
            for link in entry.get(key, ()):
                writer.writerow([name, link["from"], link["to"], link["bytes"], link["tuples"], kind])
    return out.getvalue()


def timeline_csv(runs: dict[str, StrategyRun]) -> str:
    """``timeline.csv``: per strategy and backbone link direction, the bytes that left in each time bin
    (``start_s`` is the bin's start; the bin width is the difference between consecutive starts, the same
    for every row of a run); bins with no traffic are left out."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["strategy", "from", "to", "start_s", "bytes"])
    for name, run in runs.items():
        for (a, b), line in sorted(run.timeline.items()):
            for k in np.flatnonzero(line).tolist():
                writer.writerow([name, a, b, f"{k * run.bin_s:.6g}", int(line[k])])
    return out.getvalue()


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _fmt_signed_bytes(n: int) -> str:
    """A byte difference: ``+1.20 MB``, ``-81.58 KB``, ``0 B``."""
    return "0 B" if n == 0 else ("+" if n > 0 else "-") + _fmt_bytes(abs(n))


def _fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def _fmt_share(x: float | None) -> str:
    """A share as a percentage: one decimal, or two significant digits below 0.1 % (a 10 Gbit/s link
    carrying a few Mbit/s is not at 0.0 %)."""
    if x is None:
        return "n/a"
    return f"{100 * x:.1f}%" if x == 0 or x >= 0.001 else f"{100 * x:.2g}%"


def _fmt_unit(x: float | None, unit: str) -> str:
    """Bytes times ``unit`` with a decimal prefix, e.g. ``632.53 B*s`` or ``126.51 MB*km``."""
    if x is None:
        return "n/a"
    return f"{_fmt_bytes(x)}*{unit}" if x == 0 or x >= 1 else f"{x:.2g} B*{unit}"


def _fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _fmt_ms(x: float | None) -> str:
    return "n/a" if x is None else f"{1000 * x:.2f}"


COLUMNS = {
    "strategy": "the strategy's name (docs/ACCOUNTING.md)",
    "backbone": "bytes on super-peer links, both directions (1 KB = 1,000 bytes)",
    "bytes x ideal": "backbone bytes divided by ideal's: how far from the bound (a need-class plan on"
    " query-shipping's routes reaches it); below 1 when the planner found shorter shared routes",
    "tuple-hops": "tuples times backbone links crossed",
    "hops x ideal": "tuple-hops divided by ideal's; below 1 when the planner found shorter shared routes than the"
    " fixed least-latency routes the bound assumes",
    "access": "bytes on the thin-peers' access links: every upload plus every delivery",
    "net usage": "network usage: bytes times latency summed over backbone link directions, in byte-seconds"
    " (a byte held on the wire for a second; SBON's and iFogSim's measure)",
    "byte-km": "bytes times link length summed over backbone link directions (shown when links have lengths: a"
    " real network's)",
    "saved vs DS": "backbone bytes saved against data-shipping: + is less traffic",
    "saved vs QS": "backbone bytes saved against query-shipping: + is less traffic",
    "saved vs MC": "backbone bytes saved against multicast: + is less traffic",
    "p50 ms": "median delivery latency, emission to arrival at the subscriber",
    "p99 ms": "99th percentile of the delivery latency",
    "peak util": "the highest offered load of any backbone link direction in one bin, over its bandwidth",
    "links >100%": "backbone link directions offered more than their bandwidth in some bin",
    "peak load": "the highest load of any super-peer with a capacity in one bin (n/a: none has one)",
    "drops": "tuples dropped at full link buffers",
    "rejected": "subscriptions the planner rejected to stay within the network's limits",
    "lost": "expected tuples lost in flight at a failure (shown when the scenario has events)",
    "unreachable": "expected tuples emitted while no path joined subscriber and source (shown with events)",
    "exact": "yes when every subscription got exactly its centralized result (a dropped copy counts as accounted for)",
}
"""What each column of the console table means, in a phrase (docs/REPORT.md tells it in full)."""


def table_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    geographic = any(e.get("byte_km") is not None for e in report["strategies"].values())
    header = ["strategy", "backbone", "bytes x ideal", "tuple-hops", "hops x ideal", "access", "net usage"]
    header += ["byte-km"] * geographic
    header += ["saved vs DS", "saved vs QS", "saved vs MC", "p50 ms", "p99 ms", "peak util", "links >100%"]
    header += ["peak load", "drops", "rejected"]
    dynamic = bool(report.get("events"))
    if dynamic:
        header += ["lost", "unreachable"]
    header += ["exact"]
    rows = []
    for name, e in report["strategies"].items():
        exact = all(served_exactly(s) for s in e["subscriptions"])
        vs_ideal = e.get("vs_ideal", {})
        rows.append(
            [
                name,
                _fmt_bytes(e["backbone_bytes"]),
                _fmt_ratio(vs_ideal.get("bytes")),
                str(e["backbone_tuples"]),
                _fmt_ratio(vs_ideal.get("tuple_hops")),
                _fmt_bytes(e["access_bytes"]),
                _fmt_unit(e.get("network_usage"), "s"),
                *([_fmt_unit(e.get("byte_km"), "km")] * geographic),
                _fmt_pct(e["saving_vs"].get("data-shipping")),
                _fmt_pct(e["saving_vs"].get("query-shipping")),
                _fmt_pct(e["saving_vs"].get("multicast")),
                _fmt_ms(e["latency_s"]["p50"]),
                _fmt_ms(e["latency_s"]["p99"]),
                _fmt_share(e.get("peak_utilization")),
                str(e.get("links_over_capacity", 0)),
                _fmt_share(e.get("peak_load")),
                str(e.get("link_drops", 0)),
                str(e.get("rejected", 0)),
                *([str(e.get("lost", 0)), str(e.get("unreachable", 0))] if dynamic else []),
                "yes" if exact else "NO",
            ]
        )
    return header, rows


def console_table(report: dict) -> str:
    header, rows = table_rows(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


HOTTEST = 3
"""Links and super-peers listed per strategy in summary.md."""


def hottest(entry: dict, n: int = HOTTEST) -> tuple[list[dict], list[dict]]:
    """A strategy's ``n`` hottest backbone link directions (by peak utilization, then utilization) with any
    traffic, and its ``n`` busiest super-peers (by peak load, then tuples taken in) with any tuples."""
    links = [link for link in entry.get("links", ()) if link["bytes"] or link.get("dropped")]
    links.sort(key=lambda link: (-(link.get("peak_utilization") or 0.0), -link.get("utilization", 0.0)))
    peers = [sp for sp in entry.get("super_peers", ()) if sp["tuples_in"]]
    peers.sort(key=lambda sp: (-max(sp["peak_load"] or 0.0, sp.get("peak_cpu_utilization") or 0.0), -sp["tuples_in"]))
    return links[:n], peers[:n]


def hottest_markdown(report: dict) -> list[str]:
    """summary.md's lines on the hottest links and super-peers of every strategy (none: no lines)."""
    link_rows, peer_rows = [], []
    for name, entry in report["strategies"].items():
        links, peers = hottest(entry)
        for link in links:
            link_rows.append(
                f"| {name} | {link['from']} -> {link['to']} | {_fmt_share(link.get('peak_utilization'))}"
                f" | {_fmt_share(link.get('utilization'))} | {link.get('dropped', 0)} |"
            )
        for sp in peers:
            delay = sp.get("processing_delay_mean")
            peer_rows.append(
                f"| {name} | {sp['id']} | {sp['tuples_in']} | {sp['tuples_out']} | {_fmt_share(sp['peak_load'])}"
                f" | {_fmt_share(sp.get('peak_cpu_utilization'))} | {'n/a' if delay is None else f'{delay * 1e3:.3g}'}"
                f" | {sp['operators']} |"
            )
    lines = []
    if link_rows:
        lines += [
            "",
            f"Hottest backbone links ({HOTTEST} per strategy; peak of the offered load per"
            f" {report.get('bin_s', 1):g} s bin over the bandwidth):",
            "",
        ]
        lines += ["| strategy | link | peak util | utilization | drops |", "|---|---|---|---|---|", *link_rows]
    if peer_rows:
        lines += [
            "",
            f"Busiest super-peers ({HOTTEST} per strategy; peak load n/a: no capacity given; peak cpu n/a: no cpu"
            " given; processing delay: mean ms a tuple spent at its processor, n/a: none emulated or none came):",
            "",
        ]
        lines += ["| strategy | super-peer | tuples in | tuples out | peak load | peak cpu | delay ms | operators |"]
        lines += ["|---|---|---|---|---|---|---|---|", *peer_rows]
    return lines


def streams_markdown(report: dict, shown_at_most: int = 15) -> list[str]:
    """summary.md's table of backbone bytes per stream and strategy, the busiest streams first (a scenario
    of one stream: no lines; its figures are the table's)."""
    names = list(report["strategies"])
    per = {n: {s["id"]: s["backbone_bytes"] or 0 for s in report["strategies"][n].get("streams", ())} for n in names}
    ids = list(per[names[0]]) if names else []
    if len(ids) < 2:
        return []
    ids.sort(key=lambda i: (-max(per[n][i] for n in names), i))
    more = (
        f" ({shown_at_most} busiest of {len(ids)}; `run.py show DIR --streams` lists all)"
        if len(ids) > shown_at_most
        else ""
    )
    lines = ["", f"Backbone bytes per stream{more}:", "", "| stream | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---|" * len(names))
    lines += [f"| {i} | " + " | ".join(_fmt_bytes(per[n][i]) for n in names) + " |" for i in ids[:shown_at_most]]
    return lines


def gap_markdown(report: dict, shown_at_most: int = 15) -> list[str]:
    """summary.md's split of each strategy's bytes beyond ``ideal``'s (:func:`gap_to_ideal`): attribute
    surplus against tuple-hops, for the run and per stream (the streams with the largest gaps first; none
    for a scenario of one stream)."""
    gaps = {n: e["gap_to_ideal"] for n, e in report["strategies"].items() if "gap_to_ideal" in e and n != "ideal"}
    if not gaps:
        return []
    lines = [
        "",
        "Bytes beyond `ideal`'s, and why: attribute surplus is values carried that nobody downstream selects;"
        " the tuple-hops part is tuple copies beyond ideal's (negative: fewer), each with its header and the values"
        " its receivers need (docs/REPORT.md):",
        "",
        "| strategy | bytes - ideal | attribute surplus | tuple-hops part |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {n} | {_fmt_signed_bytes(g['bytes'])} | {_fmt_signed_bytes(g['attribute_surplus'])}"
        f" | {_fmt_signed_bytes(g['tuple_hops'])} |"
        for n, g in gaps.items()
    ]
    ids = [s["id"] for s in next(iter(gaps.values()))["streams"]]
    if len(ids) < 2:
        return lines
    per = {n: {s["id"]: s for s in g["streams"]} for n, g in gaps.items()}
    ids.sort(key=lambda i: (-max(abs(per[n][i]["bytes"]) for n in gaps), i))
    more = (
        f" ({shown_at_most} of {len(ids)}, the largest gaps first; report.json has all)"
        if len(ids) > shown_at_most
        else ""
    )
    lines += ["", f"The same per stream, as attribute surplus / tuple-hops part{more}:", ""]
    lines += ["| stream | " + " | ".join(gaps) + " |", "|---|" + "---|" * len(gaps)]
    for i in ids[:shown_at_most]:
        cells = (
            f"{_fmt_signed_bytes(per[n][i]['attribute_surplus'])} / {_fmt_signed_bytes(per[n][i]['tuple_hops'])}"
            for n in gaps
        )
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    return lines


def events_markdown(report: dict) -> list[str]:
    """summary.md's table of the backbone's events: per instant and strategy, the re-plan's wall time, the
    flows it moved and the subscriptions cut off and served again (none: no lines)."""
    rows = []
    for event in report.get("events", ()):
        what = "; ".join(event["events"])
        for name, done in event["strategies"].items():
            rows.append(
                f"| {event['time']:g} | {what} | {name} | {1000 * done['replan_s']:.2f} | {done['flows_moved']}"
                f" | {len(done['cut_off'])} | {len(done['restored'])} |"
            )
    if not rows:
        return []
    lines = ["", "Failures and recoveries (re-plan in wall milliseconds; docs/DYNAMICS.md):", ""]
    lines += ["| t (s) | events | strategy | re-plan ms | flows moved | cut off | restored |"]
    return [*lines, "|---|---|---|---|---|---|---|", *rows]


def summary_markdown(report: dict, plots: list[str]) -> str:
    header, rows = table_rows(report)
    lines = [
        f"# Traffic report: {report['scenario']}",
        "",
        f"Engine `{report['engine']}`, {report['duration']} s simulated, header {report['header_bytes']} bytes per "
        f"tuple. Backbone = bytes on super-peer links (both directions); tuple-hops = tuples times links crossed; "
        f"savings are of backbone bytes against each baseline; latency from emission to arrival at the subscriber.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += [
        "",
        "Every subscription received exactly the centralized result."
        if report["exact"]
        else "**Some subscriptions did not receive exactly the centralized result: see report.json.**",
    ]
    if report.get("warnings"):
        lines += ["", "Warnings:", ""] + [f"- {warning}" for warning in report["warnings"]]
    lines += hottest_markdown(report)
    lines += streams_markdown(report)
    lines += gap_markdown(report)
    lines += events_markdown(report)
    lines += ["", "Columns:", ""] + [f"- `{name}`: {text}" for name, text in COLUMNS.items()]
    for name in plots:
        lines += ["", f"![{name}]({name})"]
    return "\n".join(lines) + "\n"
