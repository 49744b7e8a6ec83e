"""Channels and taps of each epoch of a Plan, as the simulator wants them (:class:`~network.simulator.Layout`).

A plan's consecutive epochs mostly differ by one subscription coming or going, so :class:`Layouts` keeps
the previous epoch's layout and changes only what the new epoch touches: the flows and deliveries that are
new objects or left, the flows and deliveries reading a channel whose definition changed, the operators
whose readers changed, and the channels whose taps changed.  Its cost per epoch is therefore a few
dictionary passes over the epoch's items (to find what changed) plus work in proportion to the change,
not a rebuild of every operator and channel.  The full rebuild (:meth:`Layouts.rebuild`) stays as the
reference the incremental one is tested against, and serves custom operators (the Spark engine's
stand-ins, made per epoch).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from network.routing import Network
from network.simulator import Channel, Layout, Operator, Tap
from peers.superpeer import (
    FlowOperator,
    Index,
    OperatorCache,
    Reader,
    delivery_input,
    delivery_key,
    delivery_reader,
    flow_input,
    flow_key,
    flow_reader,
    install,
    make_operator,
    operator_signature,
    raw_key,
    subscription_keys,
)
from sharing.plan import Delivery, Epoch, Flow
from topologies.errors import EmulatorError
from topologies.model import Scenario

K = TypeVar("K")
V = TypeVar("V")
Install = Callable[[Scenario, Epoch], Mapping[tuple[str, Hashable], Operator]]
Group = tuple[str, Hashable]  # (super-peer, input channel target): one operator


@dataclass
class _State:
    """The layout of the last epoch, by target (``raw_key``, ``flow_key`` or a subscription key)."""

    items: dict[Hashable, Flow | Delivery] = field(default_factory=dict)  # flows and deliveries of the epoch
    source: dict[Hashable, Hashable] = field(default_factory=dict)  # the target each item reads
    node: dict[Hashable, str] = field(default_factory=dict)  # where it reads it
    children: dict[Hashable, set[Hashable]] = field(default_factory=dict)  # target -> items reading it
    where: dict[Hashable, Hashable] = field(default_factory=dict)  # target -> channel key
    carried: dict[Hashable, tuple[str, ...]] = field(default_factory=dict)
    routes: dict[Hashable, tuple[str, ...]] = field(default_factory=dict)
    defined: dict[Hashable, tuple] = field(default_factory=dict)  # target -> (stream, hops, sink, attrs)
    members: dict[Group, set[Hashable]] = field(default_factory=dict)  # operator -> its readers' targets
    operators: dict[Group, tuple[tuple, FlowOperator, Tap]] = field(default_factory=dict)  # signature, op, tap
    nodes: dict[Hashable, set[str]] = field(default_factory=dict)  # target -> nodes where it is read
    channel: dict[Hashable, Channel] = field(default_factory=dict)


class Layouts:
    """The layout of each epoch, keyed so that the simulator can merge epochs into one batch window.

    A channel's key is ``(stable key, version)``: the stable key is the flow id, the raw stream or the
    subscription delivered (:func:`~peers.superpeer.subscription_keys`, not the delivery's position, which
    shifts when an earlier one comes or goes), the same whichever ``operators`` installs the taps;
    the version numbers its distinct definitions (stream, route, attributes carried, sink, and the channel
    and node feeding it), so an unchanged channel keeps its key and one that changed gets a new one.  The
    feeding channel is part of the definition because the simulator expects each channel to be fed by one
    tap per window.  An unchanged channel (same key, same taps) is the same object from one epoch to the
    next, and so is an unchanged operator.

    :meth:`of` must be called for the epochs in order (the incremental layout follows them).
    """

    def __init__(self, scenario: Scenario, network: Network, operators: Install | None = None):
        self.scenario, self.network = scenario, network
        self.index = Index(scenario)
        self.custom = operators
        self.cache = OperatorCache()
        self.versions: dict[tuple[Hashable, tuple], tuple[Hashable, int]] = {}
        self.counts: dict[Hashable, int] = {}
        self.memo: dict[tuple, tuple] = {}
        # for the full rebuild: taps and channels of the last two epochs (an unchanged one must stay the
        # same object from one epoch to the next; older ones are let go with their operators)
        self.taps: _Recent[int, tuple[Operator, tuple[Hashable, ...], Tap]] = _Recent()
        self.channels: _Recent[tuple, Channel] = _Recent()
        self.state = _State()
        self.raw = [raw_key(s.id) for s in scenario.streams]
        for stream in scenario.streams:
            target = raw_key(stream.id)
            self.state.where[target] = self.key(target, ())
            self.state.carried[target] = stream.attribute_names
            self.state.routes[target] = (stream.source, self.index.homes[stream.source])
            self.state.defined[target] = (stream.id, ((stream.source, self.index.homes[stream.source]),), None, ())
            self._channel(target)

    def key(self, stable: Hashable, definition: tuple) -> tuple[Hashable, int]:
        key = self.versions.get((stable, definition))
        if key is None:
            version = self.counts.get(stable, 0)
            self.counts[stable] = version + 1
            key = self.versions[(stable, definition)] = (stable, version)
        return key

    def of(self, epoch: Epoch | None) -> Layout:
        """The layout of ``epoch`` (``None``: only the uploads)."""
        if epoch is None or self.custom is not None:
            return self.rebuild(epoch)
        return self.update(epoch)

    # -- incremental ------------------------------------------------------------------------------------

    def update(self, epoch: Epoch) -> Layout:
        """The layout of ``epoch``, changed from the previous one's where ``epoch`` changed it.

        Raises EmulatorError, as :func:`~peers.superpeer.install` does, for an inconsistent epoch."""
        state = self.state
        targets: list[Hashable] = [flow_key(f.id) for f in epoch.flows]
        n_flows = len(targets)
        targets += subscription_keys(epoch)
        items = dict(zip(targets, (*epoch.flows, *epoch.deliveries), strict=True))
        if len(items) != len(targets):
            seen: set[str] = set()
            twice = next(f for f in epoch.flows if f.id in seen or seen.add(f.id))  # type: ignore[func-returns-value]
            raise EmulatorError(f"flow {twice.id} is defined twice in the epoch starting at {epoch.start:g}")
        position = {t: p for p, t in enumerate(targets)}
        before = state.items
        queue = [position[t] for t, item in items.items() if before.get(t) is not item]
        # an unchanged flow whose parent moved after it is laid out again, to fail as the rebuild does
        queue += [
            p
            for p, flow in enumerate(epoch.flows)
            if flow.parent is not None and position.get(flow_key(flow.parent), p) >= p
        ]
        queued = set(queue)
        queue = sorted(queued)
        groups: set[Group] = set()  # operators whose readers or feeds may have changed
        sources: set[Hashable] = set()  # targets whose taps may have changed
        changed: set[Hashable] = set()  # targets whose channel may have changed

        def reread(target: Hashable) -> None:
            # the items reading ``target`` must be laid out again (its channel changed or went)
            for child in state.children.get(target, ()):
                p = position.get(child)
                if p is not None and p not in queued:
                    queued.add(p)
                    heapq.heappush(queue, p)

        def detach(target: Hashable) -> None:
            group = (state.node.pop(target), state.source.pop(target))
            state.members[group].discard(target)
            state.children[group[1]].discard(target)
            groups.add(group)

        for target in [t for t in before if t not in items]:
            reread(target)
            detach(target)
            for table in (state.where, state.carried, state.routes, state.defined, state.channel):
                table.pop(target, None)
            sources.add(target)
        heapq.heapify(queue)
        while queue:
            p = heapq.heappop(queue)
            target, item = targets[p], items[targets[p]]
            if target in state.node:
                detach(target)
            previous = state.where.get(target)
            if p < n_flows:
                self._lay_flow(target, item, items, position, p)
            else:
                self._lay_delivery(target, item, items)
            group = (state.node[target], state.source[target])
            state.members.setdefault(group, set()).add(target)
            state.children.setdefault(group[1], set()).add(target)
            groups.add(group)
            changed.add(target)
            if state.where[target] != previous:
                reread(target)
                sources.add(target)
        state.items = items
        for group in groups:
            self._operator(group, items, position, sources)
        for target in sources:
            if target in state.where:
                changed.add(target)
            else:
                state.nodes.pop(target, None)
                state.children.pop(target, None)
        for target in changed:
            self._channel(target)
        self.cache.advance()  # operators no epoch asked for since the last call are let go
        channel = state.channel
        every = [*self.raw, *targets]
        return Layout({channel[t].key: channel[t] for t in every}, {t[1]: state.where[t] for t in self.raw})

    def _lay_flow(
        self, target: Hashable, flow: Flow, items: Mapping[Hashable, Flow | Delivery], position: dict, p: int
    ) -> None:
        state = self.state
        parent = None
        if flow.parent is not None:
            found = position.get(flow_key(flow.parent))
            parent = items[flow_key(flow.parent)] if found is not None and found < p else None
        source = flow_input(self.index, flow, parent)  # type: ignore[arg-type]
        hit = self.memo.get((id(flow), state.where[source]))
        if hit is None:
            key, carries = self._flow_channel(flow, state.where[source], state.carried[source], state.routes[source])
            hit = self.memo[(id(flow), state.where[source])] = (flow, key, carries, flow.hops)
        _, state.where[target], state.carried[target], hops = hit
        state.routes[target] = flow.path
        state.defined[target] = (flow.stream, hops, None, ())
        state.source[target], state.node[target] = source, flow.origin

    def _lay_delivery(self, target: Hashable, delivery: Delivery, items: Mapping[Hashable, Flow | Delivery]) -> None:
        state = self.state
        flow = None if delivery.flow is None else items.get(flow_key(delivery.flow))
        home, source = delivery_input(self.index, flow, delivery)  # type: ignore[arg-type]
        stream = self.index.subscriptions[delivery.subscription].stream
        hit = self.memo.get((id(delivery), state.where[source], target))
        if hit is None:
            feeder = (state.where[source], state.routes[source].index(home))
            hops = ((home, delivery.peer),)
            key = self.key(target, (stream, hops, delivery.attrs, feeder))
            hit = self.memo[(id(delivery), state.where[source], target)] = (delivery, key, hops)
        _, state.where[target], hops = hit
        state.defined[target] = (stream, hops, delivery.subscription, delivery.attrs)
        state.source[target], state.node[target] = source, home

    def _operator(self, group: Group, items: Mapping, position: Mapping, sources: set[Hashable]) -> None:
        """Lay out the operator of ``group`` again (or remove it, if no reader is left); its input channel
        joins ``sources`` when its tap changed."""
        state = self.state
        node, source = group
        members = state.members.get(group)
        old = state.operators.get(group)
        if not members or source not in state.where:
            state.members.pop(group, None)
            state.nodes.get(source, set()).discard(node)
            if old is not None:
                del state.operators[group]
                sources.add(source)
            return
        ordered = sorted(members, key=position.__getitem__)
        readers = [self._reader(items[t], t) for t in ordered]
        signature = operator_signature(node, source, state.carried[source], readers, self.scenario.header_bytes)
        if old is not None and old[0] == signature:
            operator = old[1]
        else:
            operator = self.cache.operator(signature, partial(make_operator, signature))
        feeds = tuple(state.where[t] for t in ordered)
        if old is None or old[1] is not operator or old[2].feeds != feeds:
            state.operators[group] = (signature, operator, Tap(operator, feeds))
            state.nodes.setdefault(source, set()).add(node)
            sources.add(source)

    def _reader(self, item: Flow | Delivery, target: Hashable) -> Reader:
        if isinstance(item, Flow):
            return self.cache.reader(item, target, partial(flow_reader, item))
        return self.cache.reader(item, target, partial(delivery_reader, target, item))

    def _channel(self, target: Hashable) -> None:
        """Lay out the channel of ``target`` again, keeping the old object if nothing changed."""
        state = self.state
        route = state.routes.get(target)
        taps = {}
        for node in state.nodes.get(target, ()):
            taps[route.index(node)] = state.operators[(node, target)][2]
        taps = dict(sorted(taps.items()))
        key = state.where[target]
        old = state.channel.get(target)
        if old is not None and old.key == key and old.taps == taps:
            return
        stream, hops, sink, attrs = state.defined[target]
        state.channel[target] = Channel(key, stream, hops, taps, sink, attrs)

    # -- full rebuild -----------------------------------------------------------------------------------

    def rebuild(self, epoch: Epoch | None) -> Layout:
        """The layout of ``epoch`` built from nothing (``None``: only the uploads)."""
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
            carried[source], routes[source] = stream.attribute_names, (stream.source, self.index.homes[stream.source])
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
            stream = self.index.subscriptions[delivery.subscription].stream
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
