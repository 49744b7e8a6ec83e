"""``python run.py serve``: the report of a live run over MQTT (docs/LIVE.md), assembled and written.

report.json holds the served strategy's entry, made as for a simulated run (``"engine": "mqtt"``), and a
``live`` section with the live mode's own figures: start-up and drain times, lost and duplicate messages,
backlogs and back-pressure, malformed messages dropped, the super-peers that died, the input streams'
tuples (kept beside the report as ``input-<stream>.csv``, a replay timed by their emission, which the
report's centralized answer is computed from), and the latencies measured live next to those the local
engine simulates for the same scenario and plan (``latency``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from network.latency import LatencyStats
from network.meter import StrategyRun
from peers.live.connection import HIGH_WATER
from peers.live.serve import LiveResult, ServeOptions, run_live
from peers.local import run_local
from reports.report import build_report, report_json
from reports.runner import write_directory
from topologies.model import Scenario
from topologies.workload import tuple_count


@dataclass(frozen=True)
class ServedReport:
    """A live run and the report written of it."""

    result: LiveResult
    report: dict
    out_dir: str

    @property
    def exact(self) -> bool:
        """Every subscription received exactly the centralized result."""
        return self.report["exact"]


def live_report(result: LiveResult, simulate: bool = True) -> dict:
    """report.json of a live run: the strategy's entry against the expected answers of the scenario as it
    ran, and the ``live`` section; with ``simulate``, the latencies of the local engine running the plan
    that ran live (not after a super-peer process died: its re-plan is not the scenario's)."""
    report = build_report(result.scenario, {result.strategy: result.run}, engine="mqtt")
    report["live"] = {
        "speed": result.speed,
        "startup_s": result.startup_s,
        "drain_s": result.drain_s,
        "plan_versions": result.plan_versions,
        "runtime_subscriptions": list(result.runtime_subscriptions),
        "lost_messages": result.lost,
        "reconnects": result.reconnects,
        "duplicates_dropped": result.duplicates,
        "max_backlog": result.max_backlog,
        "max_outbox": result.max_outbox,
        "thin_peers": {
            "max_backlog": result.thin_peer_backlog,
            "max_outbox": result.thin_peer_outbox,
            "max_source_lag_s": result.source_lag_s,
        },
        "backpressure": {
            "high_water": HIGH_WATER,
            "horizon_held_s": result.horizon_held_s,
            "max_congested_nodes": result.max_congested,
            "max_super_peer_transit_s": result.super_peer_transit_s,
            "max_thin_peer_transit_s": result.thin_peer_transit_s,
        },
        "inputs": {
            stream: {"tuples": _emitted(result.scenario, stream), "file": _input_file(stream)}
            for stream in result.inputs
        },
        "late_inputs": result.late_inputs,
        "malformed_messages": result.malformed,
        "dead_peers": list(result.dead),
        "failures": [f.to_json() for f in result.failures],
        "exited_before_start": dict(result.exited),
    }
    if simulate and result.plan is not None and not result.dead:
        report["live"]["latency"] = compared_latencies(result.run, run_local(result.scenario, result.plan))
    return report


def compared_latencies(live: StrategyRun, simulated: StrategyRun) -> dict:
    """Latency percentiles (emulated seconds), live next to simulated: over every delivery and per
    subscription."""

    def pair(found: list[np.ndarray], modelled: list[np.ndarray]) -> dict:
        stats = [LatencyStats.of(np.concatenate(v) if v else np.zeros(0)) for v in (found, modelled)]
        return {
            name: {"p50": s.p50, "p99": s.p99, "count": s.count}
            for name, s in zip(("live", "simulated"), stats, strict=True)
        }

    none = np.zeros(0)
    subs = sorted(set(live.latencies) | set(simulated.latencies))
    return {
        "overall": pair(list(live.latencies.values()), list(simulated.latencies.values())),
        "subscriptions": {s: pair([live.latencies.get(s, none)], [simulated.latencies.get(s, none)]) for s in subs},
    }


def serve_scenario(
    scenario: Scenario, options: ServeOptions, out_dir: str, progress: bool | str = False
) -> ServedReport:
    """Serve ``scenario`` live (until its end, or SIGINT/SIGTERM) and write its report.json into ``out_dir``
    (whole, through :class:`reports.runner.OutputDirectory`); ``progress`` shows the emulated time on
    stderr (reports/progress.py).  Raises what :func:`peers.live.serve.serve` raises."""
    from reports.progress import Status

    total = 0 if options.forever else int(scenario.duration)
    with Status("serve", total, "emulated second", progress) as status:

        def shown(now: float | None, phase: str) -> None:
            if phase != "running" or now is None:
                if status.current != phase:
                    status.phase(phase if now is None else f"{phase} at t={now:.1f} s")
            else:
                status.update(int(now), f"t={now:.1f} s emulated")

        result = run_live(scenario, options, shown)
    report = live_report(result)
    files = {"report.json": report_json(report)}
    for stream, path in result.inputs.items():  # the input streams' tuples, which the report checked against
        with open(path, encoding="utf-8") as handle:
            files[_input_file(stream)] = handle.read()
    write_directory(out_dir, files, None)
    return ServedReport(result, report, out_dir)


def _input_file(stream: str) -> str:
    return f"input-{stream}.csv"


def _emitted(scenario: Scenario, stream: str) -> int:
    return tuple_count(scenario.stream(stream), scenario.duration)


def served_lines(served: ServedReport, wall_s: float) -> list[str]:
    """What ``serve`` prints when the run is over (``wall_s``: wall seconds since it started)."""
    result, report = served.result, served.report
    entry = report["strategies"][result.strategy]
    latency = entry["latency_s"]
    lines = [
        f"{result.scenario.name}: backbone {entry['backbone_bytes']} B, access {entry['access_bytes']} B, "
        f"exact {report['exact']}, lost messages {sum(result.lost.values())}, "
        f"reconnects {result.reconnects}, wall {wall_s:.1f} s"
    ]
    if latency["p50"] is not None:
        line = f"latency p50 {latency['p50'] * 1000:.1f} ms, p99 {latency['p99'] * 1000:.1f} ms"
        simulated = report["live"].get("latency", {}).get("overall", {}).get("simulated", {})
        if simulated.get("p50") is not None:
            line += f" (simulated p50 {simulated['p50'] * 1000:.1f} ms, p99 {simulated['p99'] * 1000:.1f} ms)"
        lines.append(line)
    live = report["live"]
    worst = max(result.max_backlog, key=result.max_backlog.get)
    lines.append(
        f"max super-peer backlog {result.max_backlog[worst]} messages ({worst}), max outbox "
        f"{max(live['max_outbox'].values())}, horizon held {live['backpressure']['horizon_held_s']:g} s"
    )
    startup = "never" if live["startup_s"] is None else f"{live['startup_s']:.1f} s after launch"
    lines.append(f"clock started {startup}; drained {live['drain_s']:.1f} s after the end")
    thin = live["thin_peers"]
    lines.append(
        f"thin-peers: max backlog {thin['max_backlog']} messages, max outbox {thin['max_outbox']}, "
        f"sources at most {thin['max_source_lag_s']:g} s behind"
    )
    malformed = live["malformed_messages"]
    if malformed:
        per_topic = ", ".join(f"{t} {sum(s.values())}" for t, s in malformed.items())
        lines.append(f"malformed messages dropped: {sum(sum(s.values()) for s in malformed.values())} ({per_topic})")
    for f in live["failures"]:
        lines.append(f"super-peer {f['node']} died: re-planned at t={f['at']:.3f}s, lost {f['lost_subscriptions']}")
    lines.append(f"wrote {os.path.join(served.out_dir, 'report.json')}")
    return lines
