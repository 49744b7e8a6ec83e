"""Run a scenario live over an MQTT broker (``python run.py serve``; its report is written by reports/live.py).

Every super-peer and thin-peer is an asyncio service with its own broker connection; with ``--processes N``
the super-peers are spread over N OS processes (round robin; see peers/live/node.py), with ``--processes``
alone each runs in its own.  The coordinator plans, keeps the clock and answers the subscription CLI; it
re-plans around a super-peer whose process died.  Without ``--forever`` the run ends at the scenario's duration,
with it at SIGINT/SIGTERM; :func:`serve` then returns what the run did, as a :class:`LiveResult`.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from network.meter import StrategyRun
from network.routing import Network
from peers.live.access import COORDINATOR, super_peer_user, thin_peer_user
from peers.live.connection import Broker, raise_failed, reach
from peers.live.coordinator import Coordinator, Failure
from peers.live.malformed import merge_counts
from peers.live.plans import PlanBook
from peers.live.superpeer_service import SuperPeerService
from peers.live.thinpeer_service import BATCH_S, ThinPeerService
from peers.live.topics import DEFAULT_PREFIX, Topics
from sharing import check_strategy
from sharing.plan import Plan
from topologies.errors import InputError
from topologies.model import Scenario

CREDENTIALS_ENV = "STREAMGLOBE_MQTT_CREDENTIALS"  # {super-peer: its login's password} for node processes (not in ps)
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
    json_results: bool = False  # republish every result as JSON lines on results/<peer>/<subscription>
    inputs: tuple[str, ...] = ()  # streams whose tuples MQTT clients publish as JSON on in/<stream>
    record_dir: str | None = None  # where the input streams' recordings go (default: a new temporary directory)


@dataclass(frozen=True)
class LiveResult:
    """What a live run did: its traffic and deliveries, as the receivers counted them, and the live mode's
    own figures (times in wall seconds unless said otherwise; per-node figures are -1 for a node that never
    reported).  reports/live.py turns it into report.json."""

    strategy: str
    speed: float  # emulated seconds per wall second
    run: StrategyRun  # what crossed the topics, as the receivers counted it
    scenario: Scenario  # as it ran: the emitted duration and every subscription, run-time ones included
    startup_s: float | None  # from launch until the clock started (None: stopped before it did)
    drain_s: float  # after the end until nothing was in flight
    plan_versions: int
    runtime_subscriptions: list[str]  # ids of the subscriptions made while it ran
    lost: dict[str, int]  # messages sent but never received, per data topic
    reconnects: int
    duplicates: int  # messages received twice (QoS 1 after a reconnect) and dropped
    max_backlog: dict[str, int]  # per super-peer: most messages waiting in its incoming queue
    max_outbox: dict[str, int]  # per super-peer: most messages waiting to be sent
    thin_peer_backlog: int  # the most of any thin-peer
    thin_peer_outbox: int
    source_lag_s: float  # the most any source was behind its emission schedule
    horizon_held_s: float  # how long congestion held the planning horizon
    max_congested: int  # most nodes congested at once
    super_peer_transit_s: float  # the longest a message took to reach a super-peer
    thin_peer_transit_s: float  # ... and a thin-peer
    malformed: dict[str, dict[str, int]]  # malformed messages dropped, per topic (without the prefix) and sender
    dead: list[str]  # super-peers whose process died
    failures: list[Failure]  # per dead super-peer: when it was taken out, subscriptions lost and re-planned
    plan: Plan | None = None  # the plan version in force at the end (every earlier one is spliced into it)
    inputs: dict[str, str] = field(default_factory=dict)  # input stream -> the CSV recording its tuples
    late_inputs: int = 0  # input tuples that arrived after the end of the run (not emitted)
    exited: dict[str, int] = field(default_factory=dict)  # super-peer -> exit code of its process, when it
    # exited before the clock started: the run stopped at once, with nothing emitted

    @property
    def problem(self) -> str | None:
        """One line saying why the run could not go as asked (None: it could)."""
        if not self.exited:
            return None
        codes = sorted(set(self.exited.values()))
        return (
            f"the process of super-peer{'s' * (len(self.exited) > 1)} {', '.join(self.exited)} exited (exit code"
            f" {', '.join(map(str, codes))}) before the clock started; the run stopped with nothing emitted"
        )


def check_options(scenario: Scenario, options: ServeOptions) -> None:
    """Raises :class:`InputError` for a bad ``--processes``, ``--batch-ms``, ``--speed`` or strategy."""
    if options.processes < 0:
        raise InputError(f"--processes: must be a positive number of processes, got {options.processes}")
    if not options.batch_s > 0:
        raise InputError(f"--batch-ms: must be positive, got {options.batch_s * 1000:g}")
    if not options.speed > 0:
        raise InputError(f"--speed: must be positive, got {options.speed:g}")
    for stream in options.inputs:
        if stream not in scenario.streams_by_id:
            known = ", ".join(scenario.streams_by_id) or "none"
            raise InputError(f"--input {stream}: not a stream of {scenario.name} (its streams: {known})")
    check_strategy(options.strategy)


def _as(options: ServeOptions, user: str) -> Broker:
    if options.credentials is None:
        return options.broker
    return options.broker.as_user(user, options.credentials[user])


async def serve(
    scenario: Scenario,
    options: ServeOptions,
    stop: asyncio.Event | None = None,
    progress: Callable[[float | None, str], None] | None = None,
) -> LiveResult:
    """Run ``scenario`` live until its duration (or, with ``forever``, until ``stop`` is set).

    ``progress(now, phase)``, when given, is called as the run goes: ``now`` the emulated time (None
    before the clock starts), ``phase`` ``starting``, ``running`` or ``draining``."""
    report = progress or (lambda now, phase: None)
    check_options(scenario, options)
    await reach(_as(options, COORDINATOR))
    launched = time.time()
    stop = stop or asyncio.Event()
    base = replace(scenario, duration=FOREVER_S) if options.forever else scenario
    topics = Topics(options.prefix)
    run = secrets.token_hex(4)
    book = PlanBook(base, run)
    network = Network.of(base)
    end = None if options.forever else float(scenario.duration)
    groups = [base.super_peers[k :: options.processes] for k in range(min(options.processes, len(base.super_peers)))]
    process_of: dict[str, subprocess.Popen] = {}

    def gone(node: str) -> bool:
        return node in process_of and process_of[node].poll() is not None

    # planned before any node process starts (the plan decides which aggregates live mode serves their input)
    coordinator = Coordinator(
        base, options.strategy, _as(options, COORDINATOR), topics, options.speed, book, end,
        gone if groups else None, run, secure=options.credentials is not None, inputs=frozenset(options.inputs),
    )  # fmt: skip
    children = {nodes: _spawn(scenario, nodes, options, run) for nodes in groups}
    process_of.update({node: child for nodes, child in children.items() for node in nodes})
    inputs = frozenset(options.inputs)
    thin_peers = [
        ThinPeerService(
            p.id, base, _as(options, thin_peer_user(p.id)), topics, options.batch_s, run, options.json_results, inputs
        )
        for p in base.thin_peers
    ]
    super_peers: list[SuperPeerService] = []
    if not groups:
        super_peers = [
            SuperPeerService(n, book, _as(options, super_peer_user(n)), topics, network, options.batch_s)
            for n in base.super_peers
        ]
    tasks = [asyncio.create_task(coordinator.run(options.ready_timeout_s))]
    tasks += [asyncio.create_task(s.run()) for s in [*super_peers, *thin_peers]]
    exited: dict[str, int] = {}
    try:
        while (end is None or coordinator.now() < end) and not stop.is_set():
            await asyncio.sleep(0.05)
            now = coordinator.now()
            report(None if now == -float("inf") else now, "starting" if now == -float("inf") else "running")
            # the run cannot go on without a failed service (a coordinator that never started the clock
            # would leave us waiting)
            raise_failed(tasks, "a live service")
            if coordinator.t0 == float("inf"):  # a process gone before the clock starts: it never will
                exited = {
                    n: child.returncode for nodes, child in children.items() if child.poll() is not None for n in nodes
                }
                if exited:
                    coordinator.stop(0.0)
                    break
        if stop.is_set():  # cut at the barrier: exact, and never waiting for a horizon congestion holds
            coordinator.stop(math.inf if end is None else end)
        ended = time.time()
        report(coordinator.now() if coordinator.t0 != float("inf") else None, "draining")
        sources = [t for t in thin_peers if t.streams]
        nodes = [*base.super_peers, *(t.peer for t in thin_peers)]
        lost = await coordinator.drain(nodes, sources, DRAIN_PATIENCE_S, stop)
        end = coordinator.end
        coordinator.notify_end()
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
    recorded = _record_inputs(final, thin_peers, options.record_dir)
    final = replace(final, streams=tuple(recorded.get(s.id, s) for s in final.streams))
    stats = coordinator.stats
    return LiveResult(
        strategy=options.strategy,
        speed=options.speed,
        run=coordinator.result(final, thin_peers),
        scenario=final,
        startup_s=coordinator.t0 - launched if coordinator.t0 != float("inf") else None,
        drain_s=drained - ended,
        plan_versions=coordinator.version + 1,
        runtime_subscriptions=list(coordinator.runtime_ids),
        lost=lost,
        reconnects=sum(int(doc.get("reconnects", 0)) for doc in stats.values()),
        duplicates=sum(int(doc.get("duplicates", 0)) for doc in stats.values()),
        max_backlog={n: int(stats.get(n, {}).get("backlog", -1)) for n in base.super_peers},
        max_outbox={n: int(stats.get(n, {}).get("outbox", -1)) for n in base.super_peers},
        thin_peer_backlog=max((t.connection.max_backlog for t in thin_peers), default=0),
        thin_peer_outbox=max((t.connection.max_outbox for t in thin_peers), default=0),
        source_lag_s=max((t.max_lag_s for t in thin_peers), default=0.0),
        horizon_held_s=coordinator.held_s,
        max_congested=coordinator.max_congested,
        super_peer_transit_s=max((float(d.get("transit_s", 0)) for d in stats.values()), default=0),
        thin_peer_transit_s=max((t.pressure.max_transit_s for t in thin_peers), default=0.0),
        malformed=_malformed(coordinator, topics),
        dead=list(coordinator.dead),
        failures=list(coordinator.failures),
        plan=book.versions[coordinator.version].plan,
        exited=exited,
        inputs={stream: spec.replay for stream, spec in recorded.items()},
        late_inputs=sum(t.late_inputs for t in thin_peers),
    )


def run_live(
    scenario: Scenario, options: ServeOptions, progress: Callable[[float | None, str], None] | None = None
) -> LiveResult:
    """:func:`serve` in an event loop of its own, stopped by SIGINT or SIGTERM (with ``forever``, the only
    way it ends)."""

    async def main() -> LiveResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await serve(scenario, options, stop, progress)

    return asyncio.run(main())


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


def _record_inputs(scenario: Scenario, thin_peers: list[ThinPeerService], directory: str | None) -> dict:
    """Each input stream as the replay of what its clients published, timed by the emulated times it was
    emitted at (a CSV with a time column ``t`` from 0, in ``directory``): the stream the report checks
    the deliveries against, with every engine's rules."""
    found = {}
    for peer in thin_peers:
        for stream_id, recording in peer.inputs.items():
            directory = directory or tempfile.mkdtemp(prefix="streamglobe-inputs-")
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(os.path.abspath(directory), f"input-{stream_id}.csv")
            rows = list(zip(recording.times, *(recording.columns[n] for n in recording.names), strict=True))
            if not rows:  # a replay needs a row: one at the end of the run, which is never emitted
                rows = [(scenario.duration, *(0.0 for _ in recording.names))]
            column = "t"
            while column in recording.names:  # the time column must not take an attribute's name
                column = f"_{column}"
            with open(path, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow([column, *recording.names])
                writer.writerows([repr(float(v)) for v in row] for row in rows)
            stream = scenario.stream(stream_id)
            count = sum(1 for t in recording.times if t < scenario.duration)
            found[stream_id] = replace(
                stream, rate=max(1, count) / scenario.duration, replay=path, time=column, time_start="0"
            )
    return found


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
        env[CREDENTIALS_ENV] = json.dumps({n: options.credentials[super_peer_user(n)] for n in nodes})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.Popen(cmd, cwd=root, env=env)
