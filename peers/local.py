"""The local engine: a Plan executed by the super-peers' operators under the simpy simulator."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from network.meter import StrategyRun, TrafficMeter, bin_width
from network.routing import Network
from network.simulator import Feed, Simulator, Span
from peers.layout import Install, Layouts
from sharing.plan import Plan
from topologies import workload
from topologies.errors import EmulatorError
from topologies.model import Scenario

Values = Callable[[str, int, int], dict[str, np.ndarray]]


def run_local(
    scenario: Scenario,
    plan: Plan,
    progress: Callable[[int, int], None] | None = None,
    *,
    window: float | None = None,
    values: Values | None = None,
    operators: Install | None = None,
) -> StrategyRun:
    """Simulate ``plan`` over ``scenario``: traffic per link direction, deliveries and their latencies.

    ``window`` is the batch length in seconds of emission time (default :func:`batch_window`; it changes no
    count, only how closely the FIFO queues interleave batches, see network/simulator.py);
    ``values(stream, start, stop)`` replaces the scenario's workload (tests); ``operators(scenario, epoch)``
    installs the super-peers' operators, keyed and targeting as :func:`peers.superpeer.install` does by
    default (the Spark engine passes stand-ins replaying what the operators computed on Spark); by default
    the operators are installed with a cache, so that an operator unchanged from one epoch to the next is
    the same object and its batches are not cut at the epoch bound.  Raises :class:`EmulatorError` for an
    inconsistent plan (naming the flow or subscription) and for epochs that overlap or are not in order.
    """
    if window is None:
        window = batch_window(scenario)
    network = Network.of(scenario)
    links = {d: (network.link(*d).bandwidth, float(network.link(*d).latency)) for d in network.directions}
    for peer in scenario.thin_peers:
        links[(peer.id, peer.attach)] = links[(peer.attach, peer.id)] = (peer.bandwidth, float(peer.latency))
    if values is None:

        def values(stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
            return workload.columns(scenario, stream_id, start, stop)

    feeds = []
    for stream in scenario.streams:
        count = workload.tuple_count(stream, scenario.duration)

        def columns(start: int, stop: int, stream_id: str = stream.id) -> dict[str, np.ndarray]:
            return values(stream_id, start, stop)

        feeds.append(Feed(stream.id, workload.emission_times(stream, 0, count), columns, scenario.header_bytes))
    streams = {s.id: s for s in scenario.streams}
    attrs = {s.id: s.query.attributes(streams[s.stream].attribute_names) for s in scenario.subscriptions}
    meter = TrafficMeter(network.directions, attrs, bin_width(scenario.duration))
    spans = _spans(scenario, plan, Layouts(scenario, network, operators))
    Simulator(links, feeds, spans, meter, window, progress).run()
    return meter.result(plan.strategy, "local")


MAX_WINDOW = 5.0  # seconds
MAX_WINDOWS = 10_000  # windows over a run, at most (unless the tuple cap per batch needs more)
WINDOW_TUPLES = 1024


def batch_window(scenario: Scenario) -> float:
    """The default batch window: ``MAX_WINDOW`` seconds, or less so that a batch of the fastest stream holds
    at most ``WINDOW_TUPLES`` tuples.  Each channel moves one batch per window and hop, so longer windows
    mean fewer, larger numpy batches (on 300 super-peers and 500 subscriptions at 200 tuples/s, 5 s windows
    simulate 2-3x faster than 1 s ones, the same latencies to 0.01 ms); the cap bounds the tuples in flight
    per channel, hence memory."""
    fastest = max((s.rate for s in scenario.streams), default=0.0)
    # a run of more than MAX_WINDOWS windows (days of emulated time) gets longer ones: an empty window costs
    # as much as a full one, and a long run of rare tuples would otherwise walk millions of them
    longest = max(MAX_WINDOW, scenario.duration / MAX_WINDOWS)
    return longest if fastest <= 0 else min(longest, WINDOW_TUPLES / fastest)


def _spans(scenario: Scenario, plan: Plan, layouts: Layouts) -> Iterator[Span]:
    """Spans covering ``[0, duration)``: each epoch's layout, and upload-only layouts between epochs.

    A generator: the simulator asks for the next span when its window reaches it, so only the layouts of the
    epochs in flight are alive (with their operators), not the whole run's."""
    uploads = layouts.of(None)
    now = 0.0
    previous_end = -np.inf
    for epoch in plan.epochs:
        if not epoch.start < epoch.end or epoch.start < previous_end:
            raise EmulatorError(
                f"plan {plan.strategy}: epoch [{epoch.start:g}, {epoch.end:g}) is empty or overlaps an earlier one"
            )
        previous_end = epoch.end
        start, end = max(epoch.start, 0.0), min(epoch.end, scenario.duration)
        if start >= end:
            continue
        if now < start:
            yield Span(now, start, uploads)
        yield Span(start, end, layouts.of(epoch))
        now = end
    if now < scenario.duration:
        yield Span(now, scenario.duration, uploads)
