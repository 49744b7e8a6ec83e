"""The local engine: a Plan executed by the super-peers' operators under the simpy simulator."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, TypeVar

import numpy as np

from network.meter import StrategyRun, TrafficMeter, bin_width
from network.routing import Network
from network.simulator import Channel, Feed, Layout, Operator, Simulator, Span, Tap
from peers.superpeer import OperatorCache, delivery_key, flow_key, install, raw_key, subscription_keys
from sharing.plan import Epoch, Flow, Plan
from topologies import workload
from topologies.errors import EmulatorError
from topologies.model import Scenario

K = TypeVar("K")
V = TypeVar("V")
Values = Callable[[str, int, int], dict[str, np.ndarray]]
Install = Callable[[Scenario, Epoch], Mapping[tuple[str, Hashable], Operator]]


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
    spans = _spans(scenario, plan, _Layouts(scenario, network, operators))
    Simulator(links, feeds, spans, meter, window, progress).run()
    return meter.result(plan.strategy, "local")


MAX_WINDOW = 5.0  # seconds
WINDOW_TUPLES = 1024


def batch_window(scenario: Scenario) -> float:
    """The default batch window: ``MAX_WINDOW`` seconds, or less so that a batch of the fastest stream holds
    at most ``WINDOW_TUPLES`` tuples.  Each channel moves one batch per window and hop, so longer windows
    mean fewer, larger numpy batches (on 300 super-peers and 500 subscriptions at 200 tuples/s, 5 s windows
    simulate 2-3x faster than 1 s ones, the same latencies to 0.01 ms); the cap bounds the tuples in flight
    per channel, hence memory."""
    fastest = max((s.rate for s in scenario.streams), default=0.0)
    return MAX_WINDOW if fastest <= 0 else min(MAX_WINDOW, WINDOW_TUPLES / fastest)


def _spans(scenario: Scenario, plan: Plan, layouts: _Layouts) -> Iterator[Span]:
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


class _Layouts:
    """The channels of each epoch, keyed so that the simulator can merge epochs into one batch window.

    A channel's key is ``(stable key, version)``: the stable key is the flow id, the raw stream or the
    subscription delivered (:func:`~peers.superpeer.subscription_keys`, not the delivery's position, which
    shifts when an earlier one comes or goes), the same whichever ``operators`` installs the taps;
    the version numbers its distinct definitions (stream, route, attributes carried, sink, and the channel
    and node feeding it), so an unchanged channel keeps its key and one that changed gets a new one.  The
    feeding channel is part of the definition because the simulator expects each channel to be fed by one
    tap per window.
    """

    def __init__(self, scenario: Scenario, network: Network, operators: Install | None):
        self.scenario, self.network = scenario, network
        self.streams = {s.id: s for s in scenario.streams}
        self.subscriptions = {s.id: s for s in scenario.subscriptions}
        self.homes = {p.id: p.attach for p in scenario.thin_peers}
        self.custom = operators
        self.cache = OperatorCache()
        self.versions: dict[tuple[Hashable, tuple], tuple[Hashable, int]] = {}
        self.counts: dict[Hashable, int] = {}
        self.memo: dict[tuple, tuple] = {}
        # taps and channels of the last two epochs (an unchanged one must stay the same object from one
        # epoch to the next; older ones are let go with their operators)
        self.taps: _Recent[int, tuple[Operator, tuple[Hashable, ...], Tap]] = _Recent()
        self.channels: _Recent[tuple, Channel] = _Recent()

    def key(self, stable: Hashable, definition: tuple) -> tuple[Hashable, int]:
        key = self.versions.get((stable, definition))
        if key is None:
            version = self.counts.get(stable, 0)
            self.counts[stable] = version + 1
            key = self.versions[(stable, definition)] = (stable, version)
        return key

    def of(self, epoch: Epoch | None) -> Layout:
        """The layout of ``epoch`` (``None``: only the uploads)."""
        stable = subscription_keys(epoch) if epoch is not None else []
        if epoch is None:
            operators, targets = {}, []
        elif self.custom is None:
            targets = stable
            operators = install(self.scenario, epoch, delivery_keys=targets, cache=self.cache)
        else:
            operators = self.custom(self.scenario, epoch)
            targets = [delivery_key(k) for k in range(len(epoch.deliveries))]
        where: dict[Hashable, Hashable] = {}  # operator target (raw/flow/delivery key) -> channel key
        carried: dict[Hashable, tuple[str, ...]] = {}
        routes: dict[Hashable, tuple[str, ...]] = {}
        defined = []  # (target, channel key, stream, hops, sink, attrs)
        for stream in self.scenario.streams:
            source = raw_key(stream.id)
            where[source] = self.key(source, ())
            carried[source], routes[source] = stream.attribute_names, (stream.source, self.homes[stream.source])
            hops = ((stream.source, routes[source][1]),)
            defined.append((source, where[source], stream.id, hops, None, ()))
        for flow in epoch.flows if epoch is not None else ():
            target = flow_key(flow.id)
            parent = raw_key(flow.stream) if flow.parent is None else flow_key(flow.parent)
            if parent not in where:
                raise EmulatorError(f"flow {flow.id}: parent {flow.parent} is not an earlier flow of the epoch")
            # flows and deliveries are mostly the same objects from one epoch to the next: memoised by identity
            # (the object is kept in the value, so its id stays unique)
            hit = self.memo.get((id(flow), where[parent]))
            if hit is None:
                key, carries = self._flow_channel(flow, where[parent], carried[parent], routes[parent])
                hit = self.memo[(id(flow), where[parent])] = (flow, key, carries, flow.hops)
            _, where[target], carried[target], hops = hit
            routes[target] = flow.path
            defined.append((target, where[target], flow.stream, hops, None, ()))
        deliveries = epoch.deliveries if epoch is not None else ()
        for target, copy, delivery in zip(targets, stable, deliveries, strict=True):
            stream = self.subscriptions[delivery.subscription].stream
            source = raw_key(stream) if delivery.flow is None else flow_key(delivery.flow)
            hit = self.memo.get((id(delivery), where[source], copy))
            if hit is None:
                feeder = (where[source], routes[source].index(delivery.home))
                hops = ((delivery.home, delivery.peer),)
                key = self.key(copy, (stream, hops, delivery.attrs, feeder))
                hit = self.memo[(id(delivery), where[source], copy)] = (delivery, key, hops)
            _, key, hops = hit
            where[target] = key
            defined.append((target, key, stream, hops, delivery.subscription, delivery.attrs))
        taps_of: dict[Hashable, dict[int, Tap]] = {}
        for (node, source), operator in operators.items():
            feeds = tuple(where[t] for t in operator.targets)
            taps_of.setdefault(source, {})[routes[source].index(node)] = self._tap(operator, feeds)
        channels = {}
        for target, key, stream, hops, sink, attrs in defined:
            taps = taps_of.get(target, {})
            signature = (key, tuple((pos, id(tap)) for pos, tap in taps.items()))
            channel = self.channels.get(signature)
            if channel is None:
                channel = self.channels.put(signature, Channel(key, stream, hops, taps, sink, attrs))
            channels[key] = channel
        for recent in (self.taps, self.channels, self.cache):
            recent.advance()
        return Layout(channels, {s.id: where[raw_key(s.id)] for s in self.scenario.streams})

    def _flow_channel(
        self, flow: Flow, parent: Hashable, parent_carries: tuple[str, ...], parent_route: tuple[str, ...]
    ) -> tuple[Hashable, tuple[str, ...]]:
        """The channel key of ``flow`` fed by channel ``parent``, and the attributes it carries.

        Raises EmulatorError when the flow's path crosses a pair of super-peers that is not a link or the
        parent does not pass through its origin."""
        for a, b in flow.hops:
            try:
                self.network.link(a, b)
            except KeyError:
                raise EmulatorError(
                    f"flow {flow.id}: path {flow.path} crosses {a} -> {b}, which is not a link"
                ) from None
        if flow.origin not in parent_route:
            raise EmulatorError(f"flow {flow.id}: parent {flow.parent} does not pass through {flow.origin}")
        carries = parent_carries if flow.trim else flow.attrs
        feeder = (parent, parent_route.index(flow.origin))
        return self.key(flow_key(flow.id), (flow.stream, flow.path, carries, feeder)), carries

    def _tap(self, operator: Operator, feeds: tuple[Hashable, ...]) -> Tap:
        """One :class:`Tap` object per operator and feeds, so that the simulator sees an unchanged tap as
        the very same object."""
        hit = self.taps.get(id(operator))
        if hit is None or hit[1] != feeds:
            hit = self.taps.put(id(operator), (operator, feeds, Tap(operator, feeds)))
        return hit[2]


class _Recent(Generic[K, V]):
    """A cache of what the current and the previous epoch used: :meth:`advance` forgets the rest."""

    def __init__(self) -> None:
        self._now: dict[K, V] = {}
        self._before: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        value = self._now.get(key)
        if value is None:
            value = self._before.pop(key, None)
            if value is not None:
                self._now[key] = value
        return value

    def put(self, key: K, value: V) -> V:
        self._now[key] = value
        return value

    def advance(self) -> None:
        self._before, self._now = self._now, {}
