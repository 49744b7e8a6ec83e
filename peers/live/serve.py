"""``python run.py serve``: run a scenario live over an MQTT broker and write its report.

Every super-peer and thin-peer is an asyncio service with its own broker connection; with ``--processes N``
the super-peers are spread over N OS processes (round robin; see peers/live/node.py), with ``--processes``
alone each runs in its own.  The coordinator plans, keeps the clock and answers the subscription CLI; it
re-plans around a super-peer whose process died.  Without ``--forever`` the run ends at the scenario's duration,
with it at SIGINT/SIGTERM; then the report (SPEC section 5, ``"engine": "mqtt"``) is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace

from network.meter import StrategyRun
from network.routing import Network
from peers.live.connection import HIGH_WATER, Broker, raise_failed, reach
from peers.live.coordinator import Coordinator
from peers.live.malformed import merge_counts
from peers.live.plans import PlanBook
from peers.live.superpeer_service import SuperPeerService
from peers.live.thinpeer_service import BATCH_S, ThinPeerService
from peers.live.topics import DEFAULT_PREFIX, Topics
from reports.report import build_report, report_json
from sharing import check_strategy
from topologies.errors import InputError
from topologies.expected import expected_results
from topologies.model import Scenario

CREDENTIALS_ENV = "STREAMGLOBE_MQTT_CREDENTIALS"  # {super-peer: password} for node processes (not in ``ps``)
FOREVER_S = 10.0**7  # the emulated duration planned for when running until a signal
DRAIN_PATIENCE_S = 30.0  # wall seconds without progress after which what is in flight counts as lost


@dataclass(frozen=True)
class ServeOptions:
    broker: Broker
    strategy: str = "sharing-em"
    speed: float = 1.0
    forever: bool = False
    processes: int = 0  # OS processes for the super-peers; 0: all in this process
    prefix: str = DEFAULT_PREFIX
    credentials: dict | None = None  # user -> password, with --secure
    batch_s: float = BATCH_S  # wall seconds between a source's batches: fewer messages, more latency
    ready_timeout_s: float = 60.0  # wall seconds without one more super-peer loading the plan: give up


@dataclass
class LiveResult:
    report: dict
    run: StrategyRun  # what crossed the topics, as the receivers counted it
    scenario: Scenario  # as it ran: the emitted duration and every subscription, run-time ones included
    lost: dict[str, int]  # messages sent but never received, per data topic
    reconnects: int
    max_backlog: dict[str, int]  # per super-peer: most messages waiting in its incoming queue
    dead: list[str]
    failures: list[dict]  # per dead super-peer: when it was taken out, subscriptions lost and re-planned


def check_options(scenario: Scenario, options: ServeOptions) -> None:
    """Raises :class:`InputError` for a bad ``--processes``, ``--batch-ms``, ``--speed`` or strategy."""
    if options.processes < 0:
        raise InputError(f"--processes: must be a positive number of processes, got {options.processes}")
    if not options.batch_s > 0:
        raise InputError(f"--batch-ms: must be positive, got {options.batch_s * 1000:g}")
    if not options.speed > 0:
        raise InputError(f"--speed: must be positive, got {options.speed:g}")
    check_strategy(options.strategy)


def _as(options: ServeOptions, user: str) -> Broker:
    if options.credentials is None:
        return options.broker
    return options.broker.as_user(user, options.credentials[user])


async def serve(scenario: Scenario, options: ServeOptions, stop: asyncio.Event | None = None) -> LiveResult:
    """Run ``scenario`` live until its duration (or, with ``forever``, until ``stop`` is set)."""
    check_options(scenario, options)
    await reach(_as(options, "coordinator"))
    launched = time.time()
    stop = stop or asyncio.Event()
    base = replace(scenario, duration=FOREVER_S) if options.forever else scenario
    topics = Topics(options.prefix)
    run = secrets.token_hex(4)
    book = PlanBook(base, run)
    network = Network.of(base)
    end = None if options.forever else float(scenario.duration)
    groups = [base.super_peers[k :: options.processes] for k in range(min(options.processes, len(base.super_peers)))]
    children = {nodes: _spawn(scenario, nodes, options, run) for nodes in groups}
    process_of = {node: child for nodes, child in children.items() for node in nodes}

    def gone(node: str) -> bool:
        return node in process_of and process_of[node].poll() is not None

    coordinator = Coordinator(
        base, options.strategy, _as(options, "coordinator"), topics, options.speed, book, end,
        gone if groups else None, run, secure=options.credentials is not None,
    )  # fmt: skip
    thin_peers = [
        ThinPeerService(p.id, base, _as(options, p.id), topics, options.batch_s, run) for p in base.thin_peers
    ]
    super_peers: list[SuperPeerService] = []
    if not groups:
        super_peers = [
            SuperPeerService(n, book, _as(options, n), topics, network, options.batch_s) for n in base.super_peers
        ]
    tasks = [asyncio.create_task(coordinator.run(options.ready_timeout_s))]
    tasks += [asyncio.create_task(s.run()) for s in [*super_peers, *thin_peers]]
    try:
        while (end is None or coordinator.now() < end) and not stop.is_set():
            await asyncio.sleep(0.05)
            # the run cannot go on without a failed service (a coordinator that never started the clock
            # would leave us waiting)
            raise_failed(tasks, "a live service")
        if stop.is_set():  # cut at the barrier: exact, and never waiting for a horizon congestion holds
            coordinator.stop(math.inf if end is None else end)
        ended = time.time()
        sources = [t for t in thin_peers if t.streams]
        nodes = [*base.super_peers, *(t.peer for t in thin_peers)]
        lost = await coordinator.drain(nodes, sources, DRAIN_PATIENCE_S, stop)
        end = coordinator.end
        drained = time.time()
        raise_failed(tasks, "a live service")
    finally:
        for service in [*super_peers, *thin_peers]:
            await service.close()
        await coordinator.connection.flush_or_give_up(1.0)
        await coordinator.connection.close()
        await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        for child in children.values():
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()  # a node still busy with a backlog: it must not outlive the run
                child.wait()
    final = _final_scenario(scenario, coordinator, end)
    run = coordinator.result(final, thin_peers)
    report = build_report(final, {options.strategy: run}, expected_results(final), engine="mqtt")
    backlog = {n: int(coordinator.stats.get(n, {}).get("backlog", -1)) for n in base.super_peers}
    outbox = {n: int(coordinator.stats.get(n, {}).get("outbox", -1)) for n in base.super_peers}
    reconnects = sum(int(doc.get("reconnects", 0)) for doc in coordinator.stats.values())
    report["live"] = {
        "speed": options.speed,
        # wall seconds until the clock started (None: stopped before it did)
        "startup_s": round(coordinator.t0 - launched, 1) if coordinator.t0 != float("inf") else None,
        "drain_s": round(drained - ended, 1),  # wall seconds after the end until nothing was in flight
        "plan_versions": coordinator.version + 1,
        "runtime_subscriptions": list(coordinator.runtime_ids),
        "lost_messages": lost,
        "reconnects": reconnects,
        "duplicates_dropped": sum(int(doc.get("duplicates", 0)) for doc in coordinator.stats.values()),
        "max_backlog": backlog,
        "max_outbox": outbox,
        "thin_peers": {
            "max_backlog": max((t.connection.max_backlog for t in thin_peers), default=0),
            "max_outbox": max((t.connection.max_outbox for t in thin_peers), default=0),
            "max_source_lag_s": round(max((t.max_lag_s for t in thin_peers), default=0.0), 3),
        },
        "backpressure": {
            "high_water": HIGH_WATER,
            "horizon_held_s": round(coordinator.held_s, 3),
            "max_congested_nodes": coordinator.max_congested,
            "max_super_peer_transit_s": max(
                (float(d.get("transit_s", 0)) for d in coordinator.stats.values()), default=0
            ),
            "max_thin_peer_transit_s": round(max((t.pressure.max_transit_s for t in thin_peers), default=0.0), 3),
        },
        "malformed_messages": _malformed(coordinator, topics),
        "dead_peers": list(coordinator.dead),
        "failures": [f.to_json() for f in coordinator.failures],
    }
    failures = report["live"]["failures"]
    return LiveResult(report, run, final, lost, reconnects, backlog, list(coordinator.dead), failures)


def _malformed(coordinator: Coordinator, topics: Topics) -> dict[str, dict[str, int]]:
    """Malformed messages dropped, per topic (without the prefix) and sender: the coordinator's and what
    every node reported."""
    counts: dict[str, dict[str, int]] = {}
    for doc in [{"malformed": coordinator.connection.rejects.to_json()}, *coordinator.stats.values()]:
        merge_counts(counts, doc.get("malformed", {}))
    return {topics.key_of(t) or t: dict(sorted(s.items())) for t, s in sorted(counts.items())}


def _final_scenario(scenario: Scenario, coordinator: Coordinator, end: float) -> Scenario:
    """The scenario as it ran: its emitted duration and every subscription that started before the end."""
    subs = tuple(s for s in coordinator.subscriptions if s.at < end)
    return replace(scenario, duration=end, subscriptions=subs)


def _spawn(scenario: Scenario, nodes: tuple[str, ...], options: ServeOptions, run: str) -> subprocess.Popen:
    if scenario.path is None:
        raise InputError("--processes needs a scenario loaded from a file")
    url = f"mqtt://{options.broker.host}:{options.broker.port}"
    cmd = [sys.executable, "-m", "peers.live.node", scenario.path, url, *nodes, "--prefix", options.prefix]
    cmd += ["--batch-ms", f"{options.batch_s * 1000:g}", "--run", run]
    if options.forever:
        cmd.append("--forever")
    env = dict(os.environ)
    if options.credentials is not None:
        env[CREDENTIALS_ENV] = json.dumps({n: options.credentials[n] for n in nodes})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.Popen(cmd, cwd=root, env=env)


def run_serve(args: argparse.Namespace) -> int:
    """The ``serve`` subcommand: returns the exit code (1 when a delivery was not exact)."""
    from reports.runner import OutputDirectory, write_directory
    from topologies.loader import load_scenario

    scenario = load_scenario(args.scenario)
    broker = Broker.parse(args.broker)
    out_dir = args.out or os.path.join("out", scenario.name, "live")
    OutputDirectory.check(out_dir)  # before serving: a report that cannot be written is refused now
    credentials = None
    if args.secure:
        from peers.live.access import secure_setup

        setup = secure_setup(scenario, args.secure_dir or os.path.join(out_dir + "-broker"), broker, args.prefix)
        credentials = setup.credentials
        print(setup.instructions)
    processes = len(scenario.super_peers) if args.processes == -1 else args.processes
    options = ServeOptions(
        broker, args.strategy, args.speed, args.forever, processes, args.prefix, credentials, args.batch_ms / 1000
    )  # fmt: skip

    async def main() -> LiveResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await serve(scenario, options, stop)

    started = time.monotonic()
    print(f"serving {scenario.name} on {args.broker} (strategy {args.strategy}, speed {args.speed:g})", flush=True)
    result = asyncio.run(main())
    write_directory(out_dir, {"report.json": report_json(result.report)}, None)
    entry = result.report["strategies"][args.strategy]
    latency = entry["latency_s"]
    print(
        f"{scenario.name}: backbone {entry['backbone_bytes']} B, access {entry['access_bytes']} B, "
        f"exact {result.report['exact']}, lost messages {sum(result.lost.values())}, "
        f"reconnects {result.reconnects}, wall {time.monotonic() - started:.1f} s"
    )
    if latency["p50"] is not None:
        print(f"latency p50 {latency['p50'] * 1000:.1f} ms, p99 {latency['p99'] * 1000:.1f} ms")
    live = result.report["live"]
    worst = max(result.max_backlog, key=result.max_backlog.get)
    print(
        f"max super-peer backlog {result.max_backlog[worst]} messages ({worst}), max outbox "
        f"{max(live['max_outbox'].values())}, horizon held {live['backpressure']['horizon_held_s']:g} s"
    )
    print(f"clock started {live['startup_s']} s after launch; drained {live['drain_s']:g} s after the end")
    thin = live["thin_peers"]
    print(
        f"thin-peers: max backlog {thin['max_backlog']} messages, max outbox {thin['max_outbox']}, "
        f"sources at most {thin['max_source_lag_s']:g} s behind"
    )
    malformed = live["malformed_messages"]
    if malformed:
        per_topic = ", ".join(f"{t} {sum(s.values())}" for t, s in malformed.items())
        print(f"malformed messages dropped: {sum(sum(s.values()) for s in malformed.values())} ({per_topic})")
    if result.failures:
        for f in result.failures:
            print(f"super-peer {f['node']} died: re-planned at t={f['at']:.3f}s, lost {f['lost_subscriptions']}")
    print(f"wrote {os.path.join(out_dir, 'report.json')}")
    return 0 if result.report["exact"] else 1
