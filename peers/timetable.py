"""A Plan as channels over the whole run, and the tuples each channel carries in a window of emission time.

The local engine does not lay out every epoch: consecutive epochs mostly hold the same flow and delivery
objects, so a plan is read once into

- **channels**: a stream of tuples along one route, fed at one node of its parent channel (or uploaded by
  the source thin-peer); one per distinct definition (stream, route, attributes carried, sink, parent and
  the node read), numbered in order of first use, so a parent always precedes its children;
- **phases**: the time intervals over which one reader (a flow's or a delivery's filter and projection)
  feeds a channel; a flow or delivery object unchanged over many epochs is one phase.

Per window of emission time, :meth:`Timetable.window` walks the phases overlapping it in channel order:
each phase keeps, of its parent channel's tuples emitted within its interval, those its reader selects.
The result is one block per channel (tuple indices ascending, their positions in the parent's block,
wire bytes), which is all the queueing solve of :mod:`network.queues` needs.

Each reader is validated when its phase opens, with the local engine's messages (a parent missing or
listed later, a path over a pair that is not a link, an attribute the input does not carry ...).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from network.queues import Blocks, Route
from network.routing import Network
from peers.selection import SelectorTable, select_window
from peers.superpeer import (
    Index,
    Selector,
    delivery_input,
    delivery_reader,
    flow_input,
    flow_key,
    flow_reader,
    raw_key,
)
from sharing.plan import Delivery, Epoch, Flow, Plan
from topologies.errors import EmulatorError
from topologies.model import Scenario

Values = Callable[[str, int, int], dict[str, np.ndarray]]
# (epoch number, target, the flow or delivery) -> the selector standing in for its reader (the Spark engine)
Selectors = Callable[[int, Hashable, Flow | Delivery], "Selector"]


@dataclass(frozen=True)
class Channel:
    """One channel: ``route`` (nodes, ``route[0]`` where it starts), fed at ``route[0]`` by the channel
    ``parent`` read at position ``tap`` of the parent's route (``parent == -1``: uploaded by the source)."""

    number: int
    stream: str
    route: tuple[str, ...]
    parent: int
    tap: int
    carries: tuple[str, ...]
    describe: str  # "raw stream S" / "flow F": what readers of this channel read
    sink: str | None = None
    attrs: tuple[str, ...] = ()

    @property
    def hops(self) -> tuple[tuple[str, str], ...]:
        return tuple(pairwise(self.route))


@dataclass
class Phase:
    """``selector`` feeds ``channel`` with tuples emitted in ``[start, end)`` (``None``: every tuple, at the
    full upload width)."""

    channel: int
    start: float
    end: float
    selector: Selector | None


@dataclass
class _Reading:
    """What :meth:`Timetable._read` carries from one epoch to the next (objects keyed by identity)."""

    flows: dict[int, tuple[Phase, Flow]] = field(default_factory=dict)  # open phases of the flows
    deliveries: dict[int, tuple[Phase, Delivery]] = field(default_factory=dict)
    by_id: dict[str, Flow] = field(default_factory=dict)  # flow id -> the object of the current epoch
    where: dict[str, int] = field(default_factory=dict)  # flow id -> its channel
    children: dict[str, set[int]] = field(default_factory=dict)  # flow id -> flows (ids) reading it
    readers: dict[str, set[int]] = field(default_factory=dict)  # flow id -> deliveries (ids) reading it
    end: float = 0.0  # where the last epoch read ended

    def close_all(self) -> None:
        """Cut every open phase at :attr:`end`; the next epoch lays everything out again."""
        for phase, _ in [*self.flows.values(), *self.deliveries.values()]:
            phase.end = self.end
        self.flows.clear()
        self.deliveries.clear()
        self.by_id.clear()
        self.where.clear()
        self.children.clear()
        self.readers.clear()


class Timetable:
    """The channels and phases of ``plan`` over ``[0, duration)``.

    Raises EmulatorError naming the flow or subscription for an inconsistent plan, and for epochs that are
    empty, overlap or are out of order.  ``selectors`` replaces the readers (the Spark engine's replay of
    what its executors computed); a phase then lasts while the selector returned is the same object.
    """

    def __init__(self, scenario: Scenario, plan: Plan, network: Network, selectors: Selectors | None = None):
        self.scenario, self.network = scenario, network
        self.index = Index(scenario)
        self.custom = selectors
        self.channels: list[Channel] = []
        self.phases: list[Phase] = []
        self._numbers: dict[tuple, int] = {}
        self._memo: dict[tuple, tuple] = {}  # (id(item), parent channel) -> (item, channel, selector)
        self._selectors: dict[int, tuple[object, Selector]] = {}
        self.uploads: dict[str, int] = {}
        for stream in scenario.streams:
            home = self.index.homes[stream.source]
            number = self._channel(
                (raw_key(stream.id),),
                stream.id,
                (stream.source, home),
                -1,
                0,
                stream.attribute_names,
                f"raw stream {stream.id}",
            )
            self.uploads[stream.id] = number
            self.phases.append(Phase(number, 0.0, float(scenario.duration), None))
        self._read(plan)
        self._compile()

    # -- reading the plan -------------------------------------------------------------------------------

    def _channel(
        self,
        definition: tuple,
        stream: str,
        route: tuple[str, ...],
        parent: int,
        tap: int,
        carries: tuple[str, ...],
        describe: str,
        sink: str | None = None,
        attrs: tuple[str, ...] = (),
    ) -> int:
        number = self._numbers.get(definition)
        if number is None:
            number = self._numbers[definition] = len(self.channels)
            self.channels.append(Channel(number, stream, route, parent, tap, carries, describe, sink, attrs))
        return number

    def _read(self, plan: Plan) -> None:
        """The phases of every flow and delivery.

        Consecutive epochs mostly hold the same objects, so an epoch costs set differences over the
        identities of its flows and deliveries plus work for what changed: new objects, and whatever reads a
        flow whose channel changed or went (laid out again, and so validated again, in epoch order)."""
        duration = float(self.scenario.duration)
        state = _Reading()
        previous_end = -np.inf
        for k, epoch in enumerate(plan.epochs):
            if not epoch.start < epoch.end or epoch.start < previous_end:
                raise EmulatorError(
                    f"plan {plan.strategy}: epoch [{epoch.start:g}, {epoch.end:g}) is empty or overlaps an earlier one"
                )
            start, end = max(epoch.start, 0.0), min(epoch.end, duration)
            previous_end = epoch.end
            if start >= end:
                continue
            if start != state.end or self.custom is not None:
                # a gap between epochs (or stand-in selectors, asked per epoch): every phase is cut
                state.close_all()
            state.end = end
            moved = self._flows(k, epoch, start, state)
            self._deliveries(k, epoch, start, moved, state)
        state.close_all()

    def _flows(self, k: int, epoch: Epoch, start: float, state: _Reading) -> set[str]:
        """Lay out the flows of ``epoch`` that changed; the ids of flows whose channel changed, came or went."""
        duration = float(self.scenario.duration)
        current = dict(zip(map(id, epoch.flows), epoch.flows, strict=True))
        if len(current) != len(epoch.flows):  # the same object twice
            twice = next(f for i, f in enumerate(epoch.flows) if f in epoch.flows[:i])
            raise EmulatorError(f"flow {twice.id} is defined twice in the epoch starting at {epoch.start:g}")
        moved: set[str] = set()
        left: dict[str, int] = {}  # flow id -> its channel, for the flows whose object went
        for gone in state.flows.keys() - current.keys():
            phase, flow = state.flows.pop(gone)
            phase.end = start
            if state.by_id.get(flow.id) is flow:
                del state.by_id[flow.id]
                left[flow.id] = state.where.pop(flow.id)
            if flow.parent is not None:
                state.children.get(flow.parent, set()).discard(gone)
        fresh = current.keys() - state.flows.keys()
        if not fresh and not left:
            return moved
        position = dict(zip(current, range(len(current)), strict=True))
        queue = [position[i] for i in fresh]
        named = Counter(current[i].id for i in fresh)
        for i in sorted(fresh, key=position.__getitem__):
            flow = current[i]
            held = state.by_id.get(flow.id)
            if named[flow.id] > 1 or (held is not None and id(held) in current):
                raise EmulatorError(f"flow {flow.id} is defined twice in the epoch starting at {epoch.start:g}")
        for flow_id in left:  # read again: a flow replaced by a new object may now come after them
            queue.extend(position[c] for c in state.children.get(flow_id, ()) if c in position)
        heapq.heapify(queue)
        done: set[int] = set()
        while queue:
            p = heapq.heappop(queue)
            if p in done:
                continue
            done.add(p)
            flow = epoch.flows[p]
            ident = id(flow)
            parent_flow = None
            if flow.parent is None:
                parent = self.uploads.get(flow.stream)
            else:
                parent_flow = state.by_id.get(flow.parent)
                if parent_flow is not None and position.get(id(parent_flow), p) >= p:
                    parent_flow = None  # listed later: not an earlier flow of the epoch
                parent = None if parent_flow is None else state.where[flow.parent]
            hit = self._memo.get((ident, parent))
            if hit is None:
                hit = self._memo[(ident, parent)] = (flow, *self._flow(flow, parent_flow, parent))
            number = hit[1]
            was = state.flows.get(ident)
            if was is not None and was[0].channel == number:
                continue
            if was is not None:
                was[0].end = start
            if state.where.get(flow.id, left.get(flow.id)) != number:
                moved.add(flow.id)
                queue_children = [position[c] for c in state.children.get(flow.id, ()) if c in position]
                for c in queue_children:
                    if c < p:
                        child = epoch.flows[c]
                        raise EmulatorError(f"flow {child.id}: parent {flow.id} is not an earlier flow of the epoch")
                    heapq.heappush(queue, c)
            state.where[flow.id] = number
            state.by_id[flow.id] = flow
            if flow.parent is not None:
                state.children.setdefault(flow.parent, set()).add(ident)
            phase = Phase(number, start, duration, self._selector(k, flow_key(flow.id), flow, hit[2]))
            self.phases.append(phase)
            state.flows[ident] = (phase, flow)
        # a flow that went and did not come back: its readers are laid out again (and fail)
        moved.update(flow_id for flow_id in left if flow_id not in state.where)
        return moved

    def _deliveries(self, k: int, epoch: Epoch, start: float, moved: set[str], state: _Reading) -> None:
        """Lay out the deliveries of ``epoch`` that are new or read a flow in ``moved``."""
        duration = float(self.scenario.duration)
        current = dict(zip(map(id, epoch.deliveries), epoch.deliveries, strict=True))
        for gone in state.deliveries.keys() - current.keys():
            phase, delivery = state.deliveries.pop(gone)
            phase.end = start
            if delivery.flow is not None:
                state.readers.get(delivery.flow, set()).discard(gone)
        again = current.keys() - state.deliveries.keys()
        for flow_id in moved:
            again.update(state.readers.get(flow_id, set()) & current.keys())
        if len(again) > 1:  # in epoch order: channel numbers must not depend on object addresses
            again = [ident for ident in current if ident in again]
        for ident in again:
            delivery = current[ident]
            flow = None if delivery.flow is None else state.by_id.get(delivery.flow)
            parent = None if flow is None else state.where[flow.id]
            target = ("delivery", delivery.subscription, ident)
            hit = self._memo.get((ident, parent))
            if hit is None:
                hit = self._memo[(ident, parent)] = (delivery, *self._delivery(target, delivery, flow, parent))
            was = state.deliveries.get(ident)
            if was is not None:
                if was[0].channel == hit[1]:
                    continue
                was[0].end = start
            phase = Phase(hit[1], start, duration, self._selector(k, target, delivery, hit[2]))
            self.phases.append(phase)
            state.deliveries[ident] = (phase, delivery)
            if delivery.flow is not None:
                state.readers.setdefault(delivery.flow, set()).add(ident)

    def _flow(self, flow: Flow, parent_flow: Flow | None, parent: int | None) -> tuple[int, Selector | None]:
        """The channel of ``flow`` (validated) and its selector, checked against what its input carries."""
        flow_input(self.index, flow, parent_flow)  # raises for a missing, later or misplaced parent
        for a, b in flow.hops:
            try:
                self.network.link(a, b)
            except KeyError:
                raise EmulatorError(
                    f"flow {flow.id}: path {flow.path} crosses {a} -> {b}, which is not a link"
                ) from None
        assert parent is not None  # flow_input found the parent (the raw stream or an earlier flow)
        above = self.channels[parent]
        carries = above.carries if flow.trim else flow.attrs
        tap = above.route.index(flow.origin)
        number = self._channel(
            (flow_key(flow.id), flow.stream, flow.path, carries, parent, tap),
            flow.stream,
            flow.path,
            parent,
            tap,
            carries,
            f"flow {flow.id}",
        )
        return number, self._checked(flow, flow_key(flow.id), flow.origin, above)

    def _delivery(
        self, target: Hashable, delivery: Delivery, flow: Flow | None, parent: int | None
    ) -> tuple[int, Selector | None]:
        home, _ = delivery_input(self.index, flow, delivery)  # raises for a delivery it cannot read
        stream = self.index.subscriptions[delivery.subscription].stream
        above = self.channels[self.uploads[stream] if parent is None else parent]
        tap = above.route.index(home)
        route = (home, delivery.peer)
        number = self._channel(
            (target, stream, route, delivery.attrs, above.number, tap),
            stream,
            route,
            above.number,
            tap,
            delivery.attrs,
            f"delivery of {delivery.subscription}",
            delivery.subscription,
            delivery.attrs,
        )
        return number, self._checked(delivery, target, home, above)

    def _checked(self, item: Flow | Delivery, target: Hashable, node: str, above: Channel) -> Selector | None:
        """The selector of ``item`` (one per object), checked against what ``above`` carries; ``None`` when
        stand-ins replace the selectors."""
        if self.custom is not None:
            return None
        hit = self._selectors.get(id(item))
        if hit is None:
            reader = flow_reader(item) if isinstance(item, Flow) else delivery_reader(target, item)
            hit = self._selectors[id(item)] = (item, Selector(reader, self.scenario.header_bytes))
        hit[1].check(node, above.describe, frozenset(above.carries))
        return hit[1]

    def _selector(self, k: int, target: Hashable, item: Flow | Delivery, selector: Selector | None) -> Selector:
        return self.custom(k, target, item) if self.custom is not None else selector

    # -- windows ----------------------------------------------------------------------------------------

    _READING_ONLY = ("network", "index", "phases", "_numbers", "_memo", "_selectors", "custom")

    def __getstate__(self) -> dict:
        """What :meth:`window` and :meth:`routes` need: the Spark engine ships a timetable to its
        executors, and the reading state (which holds the plan's own objects) stays behind."""
        return {k: v for k, v in vars(self).items() if k not in self._READING_ONLY}


    def routes(self) -> list[Route]:
        """The channels as the queues see them (numbered alike)."""
        return [Route(c.hops, c.parent, c.tap, c.sink, c.attrs) for c in self.channels]

    def _compile(self) -> None:
        """The phases and readers as arrays for :func:`~peers.selection.select_window` (once, after reading)."""
        streams = [s.id for s in self.scenario.streams]
        self.stream_number = {s: k for k, s in enumerate(streams)}
        self.attributes = {s.id: s.attribute_names for s in self.scenario.streams}
        table = SelectorTable(self.attributes)
        phases = sorted(self.phases, key=lambda p: (p.channel, p.start))
        chans = self.channels
        self._ph_channel = np.array([p.channel for p in phases], dtype=np.int64)
        self._ph_start = np.array([p.start for p in phases], dtype=np.float64)
        self._ph_end = np.array([p.end for p in phases], dtype=np.float64)
        self._ph_reader = np.array(
            [-1 if p.selector is None else table.add(p.selector, chans[p.channel].stream) for p in phases],
            dtype=np.int64,
        )
        self._readers = table
        self._ch_parent = np.array([c.parent for c in chans], dtype=np.int64)
        self._ch_stream = np.array([self.stream_number[c.stream] for c in chans], dtype=np.int64)
        header = self.scenario.header_bytes
        self._ch_upload_wire = np.array([header + 8 * len(c.carries) for c in chans], dtype=np.int64)

    def window(self, start: float, end: float, values: Values, times: Mapping[str, np.ndarray]) -> Blocks:
        """Every channel's tuples emitted in ``[start, end)``.

        ``values(stream, first, stop)`` gives the columns of tuples ``first..stop-1``; ``times[stream]`` the
        emission times of all of the stream's tuples.  Raises EngineError (from a stand-in reader) when a
        stand-in names a tuple its input does not carry."""
        live = np.flatnonzero((self._ph_start < end) & (self._ph_end > start))
        n_streams = len(self.stream_number)
        first = np.zeros(n_streams, np.int64)
        count = np.zeros(n_streams, np.int64)
        at_time = np.zeros(n_streams, np.int64)
        at_value = np.zeros(n_streams, np.int64)
        n_attrs = np.zeros(n_streams, np.int64)
        window_times, window_values = [], []
        t = v = 0
        for k, (stream, names) in enumerate(self.attributes.items()):
            lo, hi = np.searchsorted(times[stream], [start, end], side="left").tolist()
            first[k], count[k], at_time[k], at_value[k], n_attrs[k] = lo, hi - lo, t, v, len(names)
            if hi == lo:
                continue
            window_times.append(times[stream][lo:hi])
            columns = values(stream, lo, hi)
            block = np.full((len(names), hi - lo), np.nan)
            for a, name in enumerate(names):
                if name in columns:
                    block[a] = columns[name]
            window_values.append(block.ravel())
            t += hi - lo
            v += block.size
        flat_times = np.concatenate(window_times) if window_times else np.zeros(0)
        flat_values = np.concatenate(window_values) if window_values else np.zeros(0)
        ch_first = np.empty(len(self.channels), np.int64)
        ch_count = np.empty(len(self.channels), np.int64)
        indices, emitted, parents, wire, bad = select_window(
            self._ph_channel[live],
            np.maximum(self._ph_start[live], start),
            np.minimum(self._ph_end[live], end),
            self._ph_reader[live],
            self._ch_parent,
            self._ch_stream,
            self._ch_upload_wire,
            first,
            count,
            at_time,
            at_value,
            n_attrs,
            flat_times,
            flat_values,
            self._readers.arrays(),
            self.scenario.header_bytes,
            ch_first,
            ch_count,
        )
        if bad >= 0:
            self._readers.selector(int(bad)).fail()
        return Blocks(indices, emitted, parents, wire, ch_first, ch_count)
