"""The local engine: a Plan executed by the super-peers' operators under the simpy simulator."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np

from network.meter import StrategyRun, TrafficMeter, bin_width
from network.routing import Network
from network.simulator import Channel, Feed, Layout, Operator, Simulator, Span
from peers.superpeer import delivery_key, flow_key, install, raw_key
from sharing.plan import Epoch, Plan
from topologies import workload
from topologies.errors import EmulatorError
from topologies.model import Scenario

Values = Callable[[str, int, int], dict[str, np.ndarray]]
Install = Callable[[Scenario, Epoch], Mapping[tuple[str, Hashable], Operator]]


def run_local(
    scenario: Scenario,
    plan: Plan,
    progress: Callable[[int, int], None] | None = None,
    *,
    window: float = 1.0,
    values: Values | None = None,
    operators: Install = install,
) -> StrategyRun:
    """Simulate ``plan`` over ``scenario``: traffic per link direction, deliveries and their latencies.

    ``window`` is the batch length in seconds of emission time (it changes no count, only how closely the
    FIFO queues interleave batches, see network/simulator.py); ``values(stream, start, stop)`` replaces the
    scenario's workload (tests); ``operators(scenario, epoch)`` installs the super-peers' operators (the
    Spark engine passes stand-ins replaying what the operators computed on Spark).  Raises
    :class:`EmulatorError` for an inconsistent plan (naming the flow or subscription) and for epochs that
    overlap or are not in order.
    """
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
    attrs = {s.id: s.query.select or scenario.stream(s.stream).attribute_names for s in scenario.subscriptions}
    meter = TrafficMeter(network.directions, attrs, bin_width(scenario.duration))
    spans = _spans(scenario, network, plan, operators)
    Simulator(links, feeds, spans, meter, window, progress).run()
    return meter.result(plan.strategy, "local")


def _spans(scenario: Scenario, network: Network, plan: Plan, operators: Install) -> list[Span]:
    """Spans covering ``[0, duration)``: each epoch's layout, and upload-only layouts between epochs."""
    uploads = _layout(scenario, network, None, operators)
    spans, now = [], 0.0
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
            spans.append(Span(now, start, uploads))
        spans.append(Span(start, end, _layout(scenario, network, epoch, operators)))
        now = end
    if now < scenario.duration:
        spans.append(Span(now, scenario.duration, uploads))
    return spans


def _layout(scenario: Scenario, network: Network, epoch: Epoch | None, install_operators: Install) -> Layout:
    """The channels of one epoch (``None``: only the uploads) with the super-peers' operators as taps."""
    operators = install_operators(scenario, epoch) if epoch is not None else {}
    channels: dict = {}
    sources = {}
    for stream in scenario.streams:
        key = raw_key(stream.id)
        home = scenario.home(stream.source)
        taps = {1: operators[(home, key)]} if (home, key) in operators else {}
        channels[key] = Channel(key, stream.id, len(channels), ((stream.source, home),), taps)
        sources[stream.id] = key
    for flow in epoch.flows if epoch is not None else ():
        for a, b in flow.hops:
            try:
                network.link(a, b)
            except KeyError:
                raise EmulatorError(
                    f"flow {flow.id}: path {flow.path} crosses {a} -> {b}, which is not a link"
                ) from None
        key = flow_key(flow.id)
        taps = {pos: operators[(node, key)] for pos, node in enumerate(flow.path) if (node, key) in operators}
        channels[key] = Channel(key, flow.stream, len(channels), flow.hops, taps)
    for k, delivery in enumerate(epoch.deliveries if epoch is not None else ()):
        key = delivery_key(k)
        stream = scenario.subscription(delivery.subscription).stream
        hop = ((delivery.home, delivery.peer),)
        channels[key] = Channel(key, stream, len(channels), hop, {}, delivery.subscription, delivery.attrs)
    return Layout(channels, sources)
