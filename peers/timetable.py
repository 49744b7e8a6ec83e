"""A Plan as channels over the whole run, and the tuples each channel carries in a window of emission time.

The local engine does not lay out every epoch: consecutive epochs mostly hold the same flow and delivery
objects, so a plan is read once into

- **channels**: a stream of tuples along one route, fed at one node of its parent channel (or uploaded by
  the source thin-peer); one per distinct definition (stream, route, attributes carried, sink, parent and
  the node read), numbered in order of first use, so a parent always precedes its children;
- **phases**: the time intervals over which one reader (a flow's or a delivery's filter and projection)
  feeds a channel; a flow or delivery object unchanged over many epochs is one phase.

Readers are entries of one :class:`~peers.selection.SelectorTable`, one per distinct content (stream,
predicate, attributes, ``trim`` entries): the flow and delivery objects of a plan that read alike (a
subscription's deliveries re-issued epoch after epoch, a flow re-planned unchanged) share one.  Per window
of emission time, :meth:`Timetable.window` walks the phases overlapping it in channel order: each phase
keeps, of its parent channel's tuples emitted within its interval, those its reader selects.  The result is
one block per channel (tuple indices ascending, their positions in the parent's block, wire bytes), which
is all the queueing solve of :mod:`network.queues` needs.

**Reading costs what changed.**  A plan is its epochs' changes (:class:`~sharing.plan.Change`): the flows
and deliveries that left and those that came, which are all that is looked at.  Their order within the
epoch, which the numbering of new channels follows, is kept by applying the changes
(:class:`~sharing.epochs.Sequence`): for the flows as a rank per object, renumbered only where the epoch
changed, and listed for the deliveries in the epochs where one that did not change must be laid out
again.  The plan keeps the rules of every plan (:meth:`~sharing.plan.Plan.check`, run once when it is
made): it is laid out, not checked again.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from network.emulated import limited_processors, processor_nodes
from network.queues import Blocks, Route
from network.routing import Network
from peers.aggregation import least_float_from, pane_rows
from peers.selection import PASS, Channels, Phases, SelectorTable, StreamWindow, processor_work, select_window
from peers.superpeer import ChannelKey, flow_key, raw_key
from sharing.epochs import Sequence
from sharing.plan import Delivery, Flow, Panes, Plan
from topologies.expected import aggregate_results, expected_results, record_schedule, satisfies
from topologies.model import Scenario
from topologies.workload import Values, columns, columns_of, emission_times_of, tuple_count

RECORDS = -3
"""The reader of a phase delivering a record channel's records (laid out by :meth:`Timetable.window`, not
by the selection)."""


class Channel(NamedTuple):
    """One channel: ``route`` (nodes, ``route[0]`` where it starts), fed at ``route[0]`` by the channel
    ``parent`` read at position ``tap`` of the parent's route (``parent == -1``: uploaded by the source).
    A named tuple: a plan reads into thousands of them."""

    number: int
    stream: str
    route: tuple[str, ...]
    parent: int
    tap: int
    carries: tuple[str, ...]
    sink: str | None = None
    attrs: tuple[str, ...] = ()
    processor: bool = False  # a super-peer's processor: every tuple of its parent the operators there read
    # the aggregate subscription whose records it carries, or the pane class whose pane rows (docs/ACCOUNTING.md)
    records: str | None = None

    @property
    def hops(self) -> tuple[tuple[str, str], ...]:
        return tuple(pairwise(self.route))


@dataclass(slots=True)
class Phase:
    """Reader ``reader`` (a :class:`~peers.selection.SelectorTable` number; -1: every tuple, at the full
    upload width) feeds ``channel`` with tuples emitted in ``[start, end)``."""

    channel: int
    start: float
    end: float
    reader: int


@dataclass
class _Reading:
    """What :meth:`_Layout.read` carries from one epoch to the next (objects keyed by identity): the plan's
    lists so far, and the open phases of what was laid out of them since the last epoch read whole."""

    flows: dict[int, tuple[Phase, Flow]] = field(default_factory=dict)  # open phases of the flows
    deliveries: dict[int, tuple[Phase, Delivery]] = field(default_factory=dict)
    # per delivery reading a pane flow, the open phases of what it lays out beside its own channel
    companions: dict[int, list[Phase]] = field(default_factory=dict)
    by_id: dict[str, Flow] = field(default_factory=dict)  # flow id -> the object of the current epoch
    where: dict[str, int] = field(default_factory=dict)  # flow id -> its channel
    children: dict[str, set[int]] = field(default_factory=dict)  # flow id -> flows (ids) reading it
    readers: dict[str, set[int]] = field(default_factory=dict)  # flow id -> deliveries (ids) reading it
    flow_order: Sequence = field(default_factory=lambda: Sequence(ranked=True))
    delivery_order: Sequence = field(default_factory=lambda: Sequence(ranked=False))
    end: float = 0.0  # where the last epoch read ended
    here: dict[str, int] = field(default_factory=dict)  # super-peer -> operators of the current epoch
    grew: set[str] = field(default_factory=set)  # super-peers whose count grew in the epoch being read

    def count(self, node: str, change: int) -> None:
        """``node`` runs ``change`` operators more from the epoch being read on."""
        self.here[node] = self.here.get(node, 0) + change
        if change > 0:
            self.grew.add(node)

    def end_companions(self, ident: int, at: float) -> None:
        """End the phases laid out beside delivery ``ident``'s own at ``at``."""
        for phase in self.companions.pop(ident, ()):
            phase.end = at

    def close_all(self) -> None:
        """Cut every open phase at :attr:`end`; the next epoch lays everything out again."""
        for phase, _ in [*self.flows.values(), *self.deliveries.values()]:
            phase.end = self.end
        for phases in self.companions.values():
            for phase in phases:
                phase.end = self.end
        self.flows.clear()
        self.deliveries.clear()
        self.companions.clear()
        self.by_id.clear()
        self.where.clear()
        self.children.clear()
        self.readers.clear()
        self.here.clear()


class _Layout:
    """Reads a plan into channels, phases and reader entries (the state a :class:`Timetable` drops once it
    has compiled them)."""

    def __init__(self, scenario: Scenario, network: Network):
        self.scenario, self.network = scenario, network
        self.processors = processor_nodes(scenario)  # what operators read there passes their processor
        self.limited = limited_processors(scenario)  # ... which is a queue
        self.duration = float(scenario.duration)
        self.table = SelectorTable({s.id: s.attribute_names for s in scenario.streams}, scenario.header_bytes)
        self.channels: list[Channel] = []
        self.phases: list[Phase] = []
        self.uploads: dict[str, int] = {}
        self.operators: dict[str, int] = {}  # super-peer -> the most operators it runs in one epoch
        self.operator_of: dict[int, int] = {}  # record or pane channel -> the channel of its operator's input
        # pane classes (docs/ACCOUNTING.md, "Panes"): label -> (stream, the root's WHERE, its panes with every
        # era the plan gives them), the label being what the channels carrying their rows name as ``records``
        self.pane_classes: dict[str, tuple] = {}
        self.pane_chains: Mapping[str, Panes] = {}  # pane flow id -> its panes over the whole plan (Plan.pane_chains)
        self.pane_folds: dict[int, int] = {}  # pane operator's input -> states each tuple is folded into (count too)
        self.pane_cells: dict[str, tuple] = {}  # pane class -> its cells (docs/ACCOUNTING.md, "Panes"; () if none)
        self.pane_mask: dict[int, int] = {}  # a channel passing some cells' rows on -> their bits
        self.pane_tests: dict[int, int] = {}  # pane operator's input -> boxes each kept tuple is tested against
        self.pane_sink_of: dict[int, int] = {}  # delivery of records combined from panes -> its pane sink
        self.companions: dict[int, list[tuple[int, int]]] = {}  # such a delivery -> (channel, reader) beside it
        self.aggregated: dict[str, str] = {}  # subscription served from panes -> where they are aggregated
        self._numbers: dict[tuple, int] = {}
        self._memo: dict[tuple, tuple] = {}  # (id(item), parent channel) -> (item, channel, reader)
        self._readers: dict[tuple, int] = {}  # content -> reader
        self._entry_ids: dict[int, dict[tuple, int]] = {}  # id(predicate) -> (id(names), stream) -> trim entry
        self._kept: list[tuple] = []  # what is looked up by id, so the ids stay their own
        self._entry_numbers: dict[tuple, int] = {}  # (stream, predicate, names) -> trim entry
        self._pane_labels: dict[tuple, str] = {}
        for stream in scenario.streams:
            home = scenario.home(stream.source)
            number = self._channel(
                (raw_key(stream.id),),
                stream.id,
                (stream.source, home),
                -1,
                0,
                stream.attribute_names,
            )
            self.uploads[stream.id] = number
            self.phases.append(Phase(number, 0.0, self.duration, -1))

    def _channel(
        self,
        definition: tuple,
        stream: str,
        route: tuple[str, ...],
        parent: int,
        tap: int,
        carries: tuple[str, ...],
        sink: str | None = None,
        attrs: tuple[str, ...] = (),
        processor: bool = False,
        records: str | None = None,
    ) -> int:
        number = self._numbers.get(definition)
        if number is None:
            number = self._numbers[definition] = len(self.channels)
            self.channels.append(Channel(number, stream, route, parent, tap, carries, sink, attrs, processor, records))
        return number

    def _input(self, above: Channel, node: str) -> tuple[int, int]:
        """Where an operator at ``node`` reads channel ``above``: (channel, position on its route); where
        processors are emulated, the processor of ``node`` fed by ``above`` there (created on first use, so
        numbered before its first reader), at its end: a limited one crosses the direction ``(node, node)``,
        an unlimited one crosses nothing."""
        tap = above.route.index(node)
        if node not in self.processors:
            return above.number, tap
        route = (node, node) if node in self.limited else (node,)
        number = self._channel(("processor", above.number, tap), above.stream, route, above.number, tap,
                               above.carries, processor=True)  # fmt: skip
        return number, len(route) - 1

    def read(self, plan: Plan) -> None:
        """The phases of every flow and delivery.

        An epoch costs its change (:class:`Sequence`) plus work for what changed: new objects, and whatever
        reads a flow whose channel changed or went (laid out again, in epoch order).  The plan has passed
        :meth:`~sharing.plan.Plan.check`: it is laid out, not checked again."""
        self.pane_chains = plan.pane_chains
        state = _Reading()
        afresh = True  # the next epoch read is laid out whole (the first, or one after a gap)
        for change in plan.changes:
            flows = state.flow_order.apply(change.flows)
            deliveries = state.delivery_order.apply(change.deliveries)
            start, end = max(change.start, 0.0), min(change.end, self.duration)
            if start >= end:
                afresh = True
                continue
            if afresh or start != state.end:  # a gap between epochs: every phase is cut
                state.close_all()
                flows, deliveries = state.flow_order.whole(), state.delivery_order.whole()
                afresh = False
            state.end = end
            moved = self._flows(flows, start, state)
            self._deliveries(deliveries, start, moved, state)
            for node in state.grew:
                self.operators[node] = max(self.operators.get(node, 0), state.here[node])
            state.grew.clear()
        state.close_all()

    def _flows(self, advanced: tuple[list[int], list[int], bool], start: float, state: _Reading) -> set[str]:
        """Lay out the flows of the epoch that changed (``advanced``: what :meth:`Sequence.apply` said of
        them); the ids of flows whose channel changed, came or went."""
        flows = state.flow_order.items
        gone_ids, fresh, _ = advanced
        moved: set[str] = set()
        left: dict[str, int] = {}  # flow id -> its channel, for the flows whose object went
        for gone in gone_ids:
            phase, flow = state.flows.pop(gone)
            phase.end = start
            state.count(flow.origin, -1)
            if state.by_id.get(flow.id) is flow:
                del state.by_id[flow.id]
                left[flow.id] = state.where.pop(flow.id)
            if flow.parent is not None:
                state.children.get(flow.parent, set()).discard(gone)
        if not fresh and not left:
            return moved
        rank = state.flow_order.rank
        came = {id(flows[p]): flows[p] for p in fresh}
        queue = [(rank[ident], ident) for ident in came]
        for flow_id in left:  # read again: a flow replaced by a new object may now come after them
            queue.extend((rank[c], c) for c in state.children.get(flow_id, ()))
        heapq.heapify(queue)
        done: set[int] = set()
        while queue:
            _, ident = heapq.heappop(queue)
            if ident in done:
                continue
            done.add(ident)
            flow = came[ident] if ident in came else state.flows[ident][1]
            parent = self.uploads[flow.stream] if flow.parent is None else state.where[flow.parent]
            hit = self._memo.get((ident, parent))
            if hit is None:
                hit = self._memo[(ident, parent)] = (flow, *self._flow(flow, parent))
            number = hit[1]
            was = state.flows.get(ident)
            if was is not None and was[0].channel == self.operator_of.get(number, number):
                continue
            if was is not None:
                was[0].end = start
            else:
                state.count(flow.origin, 1)
            if state.where.get(flow.id, left.get(flow.id)) != number:
                moved.add(flow.id)
                for c in state.children.get(flow.id, ()):
                    heapq.heappush(queue, (rank[c], c))
            state.where[flow.id] = number
            state.by_id[flow.id] = flow
            if flow.parent is not None:
                state.children.setdefault(flow.parent, set()).add(ident)
            phase = Phase(self.operator_of.get(number, number), start, self.duration, hit[2])
            self.phases.append(phase)
            state.flows[ident] = (phase, flow)
        # a flow that went and did not come back: its readers are laid out again (and fail)
        moved.update(flow_id for flow_id in left if flow_id not in state.where)
        return moved

    def _deliveries(
        self, advanced: tuple[list[int], list[int], bool], start: float, moved: set[str], state: _Reading
    ) -> None:
        """Lay out the deliveries of the epoch that are new or read a flow in ``moved`` (``advanced``: what
        :meth:`Sequence.apply` said of them)."""
        deliveries = state.delivery_order.items
        gone_ids, fresh, _ = advanced
        for gone in gone_ids:
            phase, delivery = state.deliveries.pop(gone)
            phase.end = start
            state.end_companions(gone, start)
            state.count(delivery.home, -1)
            if delivery.flow is not None:
                state.readers.get(delivery.flow, set()).discard(gone)
        again = {id(deliveries[p]): p for p in fresh}
        position = None
        for flow_id in moved:
            for ident in state.readers.get(flow_id, ()):
                if ident not in again:
                    position = state.delivery_order.positions() if position is None else position
                    again[ident] = position[ident]
        # in epoch order: channel numbers must not depend on object addresses
        for p in sorted(again.values()) if position is not None else again.values():
            delivery = deliveries[p]
            ident = id(delivery)
            parent = None if delivery.flow is None else state.where[delivery.flow]
            hit = self._memo.get((ident, parent))
            if hit is None:
                target = ChannelKey("delivery", delivery.subscription, ident)
                hit = self._memo[(ident, parent)] = (delivery, *self._delivery(target, delivery, parent))
            was = state.deliveries.get(ident)
            if was is not None:
                if was[0].channel == hit[1]:
                    continue
                was[0].end = start
                state.end_companions(ident, start)
            else:
                state.count(delivery.home, 1)
            phase = Phase(hit[1], start, self.duration, hit[2])
            self.phases.append(phase)
            state.deliveries[ident] = (phase, delivery)
            if hit[1] in self.companions:
                beside = [Phase(c, start, self.duration, reader) for c, reader in self.companions[hit[1]]]
                self.phases.extend(beside)
                state.companions[ident] = beside
            if delivery.flow is not None:
                state.readers.setdefault(delivery.flow, set()).add(ident)

    def _flow(self, flow: Flow, parent: int) -> tuple[int, int]:
        """The channel of ``flow``, read off channel ``parent``, and its reader."""
        above = self.channels[parent]
        carries = above.carries if flow.trim else flow.attrs
        if above.records is not None:  # a pane flow passing its parent's rows on: nothing is read, nothing waits
            number = self._channel(
                (flow_key(flow.id), "panes", flow.path, above.number, flow.origin, flow.predicate), flow.stream,
                flow.path, above.number, above.route.index(flow.origin), (), records=above.records,
            )  # fmt: skip
            cells = self.pane_cells[above.records]
            if cells and not flow.predicate.is_true():  # the rows of the cells its filter holds
                self.pane_mask[number] = sum(1 << i for i, c in enumerate(cells) if c.implies(flow.predicate))
            return number, RECORDS
        parent, tap = self._input(above, flow.origin)
        key = flow_key(flow.id)
        if flow.aggregate is not None:
            return self._record_flow(flow, parent, tap)
        if flow.panes is not None:
            return self._pane_flow(flow, parent, tap)
        number = self._channel(
            (key, flow.stream, flow.path, carries, parent, tap),
            flow.stream,
            flow.path,
            parent,
            tap,
            carries,
        )
        return number, self._reader(flow.stream, flow.predicate, flow.attrs, flow.trim)

    def _record_flow(self, flow: Flow, parent: int, tap: int) -> tuple[int, int]:
        """A record flow's channels: its operator's input, read off channel ``parent`` at ``tap`` (a channel
        without hops at ``flow.origin``, delivering the subscription's input there), and the records along
        ``flow.path``, each read off its window's last input (the phases of the input; :meth:`Timetable.window`
        lays the records out).  The record channel, and the reader of the input."""
        sub = flow.aggregate
        operator = self._channel(
            ("operator", flow_key(flow.id), flow.path, parent, tap), flow.stream, (flow.origin,), parent, tap,
            flow.attrs, sub, flow.attrs,
        )  # fmt: skip
        number = self._channel(
            (flow_key(flow.id), "records", flow.stream, flow.path, operator), flow.stream, flow.path, operator, 0,
            (), records=sub,
        )  # fmt: skip
        self.operator_of[number] = operator
        return number, self._reader(flow.stream, flow.predicate, flow.attrs, ())

    def _pane_flow(self, flow: Flow, parent: int, tap: int) -> tuple[int, int]:
        """A pane tree's root (docs/ACCOUNTING.md, "Panes"): its operator's input, read off channel ``parent``
        at ``tap`` (a channel without hops at ``flow.origin``, delivering to nobody), and the pane rows along
        ``flow.path``, each read off its pane's last input tuple of its group (:class:`_RecordLayout` lays
        them out).  The pane channel, and the reader of the input."""
        panes = flow.panes  # in this epoch: what its operator keeps from now on
        content = (flow.stream, flow.predicate, self.pane_chains.get(flow.id, panes))
        label = self._pane_labels.setdefault(content, f"panes {len(self._pane_labels)}")
        self.pane_classes[label] = content
        self.pane_cells[label] = panes.cells
        operator = self._channel(
            ("operator", flow_key(flow.id), flow.path, parent, tap, panes), flow.stream, (flow.origin,), parent, tap,
            flow.attrs,
        )  # fmt: skip
        number = self._channel(
            (flow_key(flow.id), "panes", flow.stream, flow.path, operator, panes), flow.stream, flow.path, operator, 0,
            (), records=label,
        )  # fmt: skip
        self.operator_of[number] = operator
        self.pane_folds[operator] = 1 + len(panes.states)
        self.pane_tests[operator] = sum(len(c.boxes) for c in panes.cells)  # a tuple's cell: its bit per WHERE
        return number, self._reader(flow.stream, flow.predicate, flow.attrs, ())

    def _pane_delivery(self, target: ChannelKey, delivery: Delivery, above: Channel) -> tuple[int, int]:
        """A delivery of records combined from the pane rows of ``above`` (docs/ACCOUNTING.md, "Panes"): the
        pane rows reaching the subscriber's super-peer (a *pane sink*, without hops, which tells the meter of
        those that did not), the records along the access link, each read off its window's last pane row of
        its group, and beside them the subscription's input where the pane tree's operator receives it (a
        channel without hops delivering it there, as a record flow's operator input does)."""
        home, sub = delivery.home, delivery.subscription
        stream = above.stream
        sink = self._channel(
            (target, stream, "pane sink", above.number, home), stream, (home,), above.number, above.route.index(home),
            (), sub, delivery.attrs, records=above.records,
        )  # fmt: skip
        route = (home, delivery.peer)
        number = self._channel(
            (target, stream, route, "records", sink), stream, route, sink, 0, (), sub, delivery.attrs, records=sub,
        )  # fmt: skip
        root = above
        while root.number not in self.operator_of:
            root = self.channels[root.parent]
        operator = self.channels[self.operator_of[root.number]]
        query = self.scenario.subscription(sub).query
        beside = self._channel(
            (target, stream, "input", operator.number), stream, operator.route, operator.number, 0, delivery.attrs,
            sub, delivery.attrs,
        )  # fmt: skip
        self.pane_sink_of[number] = sink
        cells = self.pane_cells[above.records]
        if cells:  # the rows of the cells holding its WHERE's bit
            self.pane_mask[sink] = next(1 << i for i, c in enumerate(cells) if c.equivalent(query.where))
        self.companions[number] = [(beside, self._reader(stream, query.where, delivery.attrs, ()))]
        self.aggregated.setdefault(sub, operator.route[0])
        return number, RECORDS

    def _delivery(self, target: ChannelKey, delivery: Delivery, parent: int | None) -> tuple[int, int]:
        home = delivery.home
        stream = self.scenario.subscription(delivery.subscription).stream
        above = self.channels[self.uploads[stream] if parent is None else parent]
        if above.records in self.pane_classes:
            return self._pane_delivery(target, delivery, above)
        if above.records is not None:  # records pass on: nothing is tested, nothing waits for a processor
            route = (home, delivery.peer)
            number = self._channel(
                (target, stream, route, "records", above.number), stream, route, above.number,
                above.route.index(home), (), delivery.subscription, delivery.attrs, records=above.records,
            )  # fmt: skip
            return number, RECORDS
        parent, tap = self._input(above, home)
        route = (home, delivery.peer)
        number = self._channel(
            (target, stream, route, delivery.attrs, parent, tap),
            stream,
            route,
            parent,
            tap,
            delivery.attrs,
            delivery.subscription,
            delivery.attrs,
        )
        return number, self._reader(stream, delivery.predicate, delivery.attrs, ())

    def _reader(self, stream: str, predicate, attrs: tuple[str, ...], trim: tuple) -> int:
        """The table entry of a reader with this content (added on first use)."""
        entries = tuple(self._entry(stream, p, names) for p, names in trim) if trim else ()
        content = (stream, predicate, attrs, entries)
        number = self._readers.get(content)
        if number is None:
            number = self._readers[content] = self.table.add(stream, predicate, attrs, entries)
        return number

    def _entry(self, stream: str, predicate, names: tuple[str, ...]) -> int:
        """The table's trim entry for ``predicate`` and ``names`` (objects a plan shares between the flows
        listing them, so they are looked up by identity first, then by content)."""
        by_names = self._entry_ids.get(id(predicate))
        number = None if by_names is None else by_names.get((id(names), stream))
        if number is None:
            number = self._entry_numbers.get((stream, predicate, names))
            if number is None:
                number = self._entry_numbers[(stream, predicate, names)] = self.table.entry(stream, predicate, names)
            self._entry_ids.setdefault(id(predicate), {})[(id(names), stream)] = number
            self._kept.append((predicate, names))
        return number


class ChannelNumbers(NamedTuple):
    """How a plan is numbered into channels (what the live mode's processors order ties by): each channel's
    route, each stream's upload channel, the processor channel of each (channel read, position on its
    route), and the channel of each flow object read off a given channel (keyed ``(id(flow), channel)``:
    the plan keeps the objects), and of each delivery object alike (keyed ``(id(delivery), channel)``, the
    channel None where it reads the raw stream)."""

    routes: list[tuple[str, ...]]
    uploads: dict[str, int]
    processors: dict[tuple[int, int], int]
    flows: dict[tuple[int, int], int]
    deliveries: dict[tuple[int, int | None], int]


def channel_numbers(scenario: Scenario, network: Network, plan: Plan) -> ChannelNumbers:
    """``plan`` numbered into channels as the simulator lays it out (:class:`ChannelNumbers`)."""
    layout = _Layout(scenario, network)
    layout.read(plan)
    return ChannelNumbers(
        [c.route for c in layout.channels],
        dict(layout.uploads),
        {d[1:]: n for d, n in layout._numbers.items() if d[0] == "processor"},
        {key: hit[1] for key, hit in layout._memo.items() if isinstance(hit[0], Flow)},
        {key: hit[1] for key, hit in layout._memo.items() if isinstance(hit[0], Delivery)},
    )


def _processor_phases(channels: list[Channel], phases: list[Phase]) -> list[Phase]:
    """The phases of the processors: each passes its parent's tuples on over the union of the times the
    operators reading it do (so it queues the tuples they test, and no others)."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for phase in phases:
        parent = channels[phase.channel].parent
        if parent >= 0 and channels[parent].processor and phase.start < phase.end:
            spans.setdefault(parent, []).append((phase.start, phase.end))
    out = []
    for number, intervals in sorted(spans.items()):
        intervals.sort()
        lo, hi = intervals[0]
        for a, b in intervals[1:]:
            if a > hi:
                out.append(Phase(number, lo, hi, PASS))
                lo = a
            hi = max(hi, b)
        out.append(Phase(number, lo, hi, PASS))
    return out


class Timetable:
    """The channels and phases of ``plan`` over ``[0, duration)``, compiled for :meth:`window`.

    A plan not made by :func:`sharing.make_plan` is checked first (:meth:`~sharing.plan.Plan.check`:
    PlanError naming the epoch, flow or subscription of a broken rule).  Once built the timetable holds only
    what :meth:`window` and :meth:`routes` need (none of the plan's objects), so it pickles small (the
    Spark engine ships it to its executors).
    """

    def __init__(self, scenario: Scenario, plan: Plan, network: Network, values: Values | None = None):
        plan.check(scenario, network)
        self.scenario = scenario
        layout = _Layout(scenario, network)
        layout.read(plan)
        self.channels = layout.channels
        self.uploads = layout.uploads
        self.operators = dict(sorted(layout.operators.items()))  # as Plan.operators, counted while reading
        self._compile(layout)
        self._records = _RecordLayout(scenario, layout, values) if layout.operator_of else None
        # per aggregate subscription a record flow serves, the super-peer its operator runs at (the first)
        self.aggregated_at: dict[str, str] = {}
        for operator in sorted(layout.operator_of.values()):
            if self.channels[operator].sink is not None:
                self.aggregated_at.setdefault(self.channels[operator].sink, self.channels[operator].route[0])
        for sub, node in layout.aggregated.items():
            self.aggregated_at.setdefault(sub, node)

    # -- windows ----------------------------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """The channels as the queues see them (numbered alike)."""
        return [
            Route(c.hops, c.parent, c.tap, c.sink, c.attrs, None if c.processor else c.stream,
                  c.route[0] if c.processor else None, c.records is not None)
            for c in self.channels
        ]  # fmt: skip

    def _compile(self, layout: _Layout) -> None:
        """The phases and readers as arrays for :func:`~peers.selection.select_window` (once, after reading)."""
        streams = [s.id for s in self.scenario.streams]
        self.stream_number = {s: k for k, s in enumerate(streams)}
        self.attributes = {s.id: s.attribute_names for s in self.scenario.streams}
        # a record flow's records and their deliveries are laid out by :class:`_RecordLayout`, not selected
        selected = [p for p in layout.phases if p.reader != RECORDS]
        phases = selected + _processor_phases(layout.channels, selected)
        channel = np.fromiter((p.channel for p in phases), np.int64, len(phases))
        start = np.fromiter((p.start for p in phases), np.float64, len(phases))
        order = np.lexsort((start, channel))  # stable: by channel, then start
        self._ph_channel = channel[order]
        self._ph_start = start[order]
        self._ph_end = np.fromiter((p.end for p in phases), np.float64, len(phases))[order]
        self._ph_reader = np.fromiter((p.reader for p in phases), np.int64, len(phases))[order]
        self._readers = layout.table.arrays()
        chans = self.channels
        self._ch_parent = np.array([c.parent for c in chans], dtype=np.int64)
        self._ch_stream = np.array([self.stream_number[c.stream] for c in chans], dtype=np.int64)
        self._ch_upload_wire = np.array([self.scenario.tuple_bytes(len(c.carries)) for c in chans], dtype=np.int64)
        # what the operators cost their super-peer's processor (docs/ACCOUNTING.md, "Super-peer CPU"): per
        # reader its box tests per tuple, per channel what projecting a tuple it keeps costs (0: it keeps
        # every attribute it reads)
        costs = self.scenario.cpu_costs
        arrays = self._readers
        self._processor = np.array([c.processor for c in chans], dtype=np.bool_)
        self._tests = (arrays.boxes_end - arrays.boxes_at).astype(np.int64) * costs.box
        self._projection = np.array(
            [costs.projection if c.parent >= 0 and len(c.carries) < len(chans[c.parent].carries) else 0 for c in chans],
            dtype=np.int64,
        )
        # an aggregation operator folds each tuple it keeps into every aggregate's partial states
        # (a pane operator into its count and each partial state it keeps)
        for operator in layout.operator_of.values():
            if operator in layout.pane_folds:
                self._projection[operator] += costs.aggregate * layout.pane_folds[operator]
                self._projection[operator] += costs.box * layout.pane_tests[operator]
                continue
            query = self.scenario.subscription(chans[operator].sink).query
            self._projection[operator] += costs.aggregate * len(query.aggregates)

    def readings(self, times: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per stream, per tuple (``times[stream]``: the emission times of all its tuples), how many channels
        read it: the tuples :meth:`window` hands each channel, which is what a stretch of the run costs."""
        found = {}
        stream_of = self._ch_stream[self._ph_channel]
        for k, stream in enumerate(self.attributes):
            emitted = times[stream]
            mine = stream_of == k
            first = np.searchsorted(emitted, self._ph_start[mine], side="left")
            stop = np.searchsorted(emitted, self._ph_end[mine], side="left")
            n = len(emitted) + 1
            steps = np.bincount(first, minlength=n)[:n] - np.bincount(stop, minlength=n)[:n]
            found[stream] = np.cumsum(steps)[:-1]
        return found

    def window(
        self,
        start: float,
        end: float,
        values: Values,
        times: Mapping[str, np.ndarray],
        reserve: np.ndarray | None = None,
    ) -> Blocks:
        """Every channel's tuples emitted in ``[start, end)``, after ``reserve[c]`` places left unset at the
        start of channel ``c``'s block (the copies held back from earlier windows go there:
        :meth:`network.queues.Queues.serve`).

        ``values(stream, first, stop)`` gives the columns of tuples ``first..stop-1``; ``times[stream]`` the
        emission times of all of the stream's tuples."""
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
        phases = Phases(
            self._ph_channel[live],
            np.maximum(self._ph_start[live], start),
            np.minimum(self._ph_end[live], end),
            self._ph_reader[live],
        )
        reserve = np.zeros(len(self.channels), np.int64) if reserve is None else reserve
        selecting = reserve
        if self._records is not None:  # the record channels' blocks, places and all, come after
            selecting = reserve.copy()
            selecting[self._records.channels] = 0
        indices, emitted, parents, wire = select_window(
            phases,
            Channels(self._ch_parent, self._ch_stream, self._ch_upload_wire),
            StreamWindow(first, count, at_time, at_value, n_attrs, flat_times, flat_values),
            self._readers,
            self.scenario.header_bytes,
            selecting,
            ch_first,
            ch_count,
        )
        work = None
        if self._processor.any():
            work = processor_work(
                phases, self._ch_parent, self._processor, self._tests, self._projection, selecting, ch_first, ch_count,
                emitted, parents,
            )  # fmt: skip
        blocks = Blocks(indices, emitted, parents, wire, ch_first, ch_count, work)
        if self._records is not None:
            blocks = self._records.window(start, end, blocks, reserve)
        return blocks


class _RecordLayout:
    """The record and pane channels of a timetable (docs/ACCOUNTING.md, "Records" and "Panes"), laid out
    per window of emission time rather than selected.

    Each *label* (an aggregate subscription a record flow serves, or a pane class) has a schedule: the rows
    its operator completes, numbered in order of their last input tuple (``last``: stream tuple indices,
    ascending), with the emission times they are due at (``closes``: a window's or pane's closing).  A
    record flow's records are the central evaluation's (:class:`~topologies.expected.RecordSchedule`: the
    records the check expects); a pane class's rows are every pane and group holding tuples of its root's
    WHERE (:func:`~peers.aggregation.pane_rows`).  A row belongs to the window of emission time its last
    input tuple was emitted in, read off that tuple where the operator received it: the queues start it on
    its way when it is due (:meth:`Timetable.window` gives it that time as its emission) and that tuple
    has reached the operator, whichever is later.  A channel passing rows on (a record delivery, a pane
    flow's child, a pane sink) carries its parent's rows within its spans of emission time; a delivery of
    records combined from panes carries the subscription's records, each read off its window's last pane
    row of its group as it reached the subscriber's super-peer.  A pane sink's rows are numbered
    ``-1 - t``, ``t`` the pane row's last input tuple: the meter is told of those dropped or lost, which
    the check counts as it would that tuple's loss (:func:`network.exactness.record_summary`)."""

    def __init__(self, scenario: Scenario, layout: _Layout, values: Values | None):
        channels = layout.channels
        position = {sub.id: k for k, sub in enumerate(scenario.subscriptions)}
        labelled = {c.records for c in channels if c.records is not None}
        ids = sorted(labelled - layout.pane_classes.keys(), key=position.__getitem__)
        self.last: dict[str, np.ndarray] = {}
        self.closes: dict[str, np.ndarray] = {}
        self.last_time: dict[str, np.ndarray] = {}
        if ids:
            expected = aggregate_results(scenario) if values is None else expected_results(scenario, values)
            for sub_id in ids:
                schedule = record_schedule(scenario, expected, sub_id)
                self.last[sub_id], self.closes[sub_id] = schedule.last, schedule.closes
        self.bits: dict[str, np.ndarray] = {}  # per pane class with cells, each row's cell (bits)
        self.row_wire: dict[str, np.ndarray] = {}  # per pane class, each row's bytes (its era's values)
        for label, (stream_id, predicate, panes) in layout.pane_classes.items():
            self.last[label], self.closes[label], self.row_wire[label] = pane_schedule(
                scenario, stream_id, predicate, panes, values
            )
            if panes.cells:
                self.bits[label] = cells_of(scenario, stream_id, panes.cells, self.last[label], values)
        self.mask = dict(layout.pane_mask)
        for label, last in self.last.items():
            stream = scenario.stream(layout.pane_classes[label][0] if label in layout.pane_classes else
                                     scenario.subscription(label).stream)  # fmt: skip
            self.last_time[label] = emission_times_of(stream, last)
        self.channels = np.array([c.number for c in channels if c.records is not None], dtype=np.int64)
        self.flow = {c: c in layout.operator_of for c in self.channels.tolist()}  # else rows passed on or combined
        self.combined = {c: layout.pane_sink_of.get(c) == channels[c].parent for c in self.channels.tolist()}
        self.pane_sink = {c: channels[c].records in layout.pane_classes and channels[c].sink is not None
                          for c in self.channels.tolist()}  # fmt: skip
        spans: dict[int, list[tuple[float, float]]] = {int(c): [] for c in self.channels}
        operator = {o: c for c, o in layout.operator_of.items()}
        for phase in layout.phases:
            c = operator.get(phase.channel, phase.channel if phase.reader == RECORDS else None)
            if c is not None and phase.start < phase.end:
                spans[c].append((phase.start, phase.end))
                if c in layout.pane_sink_of:
                    spans[layout.pane_sink_of[c]].append((phase.start, phase.end))
        self.spans = {c: sorted(found) for c, found in spans.items()}
        self.parent = {int(c): channels[c].parent for c in self.channels}
        self.label = {int(c): channels[c].records for c in self.channels}
        self.wire: dict[int, int] = {}  # a record channel's bytes per record (a pane channel's: per row, row_wire)
        for c in self.channels.tolist():
            label = self.label[c]
            if label not in layout.pane_classes:
                self.wire[c] = scenario.tuple_bytes(1 + scenario.subscription(label).query.record_values())
        # per operator channel, the processor it reads through (-1: none emulated), which builds its rows
        self.input = {o: channels[o].parent if channels[channels[o].parent].processor else -1
                      for o in layout.operator_of.values()}  # fmt: skip
        self.record_ops = scenario.cpu_costs.record

    def window(self, start: float, end: float, blocks: Blocks, reserve: np.ndarray) -> Blocks:
        """``blocks`` with the record and pane channels' blocks of the window ``[start, end)`` appended (each
        after its ``reserve`` places), their work 0."""
        first, count = blocks.first, blocks.count
        work = blocks.work
        parts: list[tuple[np.ndarray, ...]] = []
        made: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # channel -> its new rows (numbers) and last times
        n = len(blocks.indices)
        for c in self.channels.tolist():
            label, p = self.label[c], self.parent[c]
            if self.flow[c]:
                last_time = self.last_time[label]
                lo, hi = np.searchsorted(last_time, [start, end], side="left").tolist()
                numbers = np.arange(lo, hi, dtype=np.int64)
                numbers = numbers[_within(last_time[lo:hi], self.spans[c], start, end)]
                own = blocks.indices[first[p] + reserve[p] : first[p] + count[p]] if first[p] >= 0 else numbers[:0]
                last = self.last[label][numbers]
                at = np.minimum(np.searchsorted(own, last), max(len(own) - 1, 0))
                found = (own[at] == last) if len(own) else np.zeros(len(numbers), np.bool_)
                numbers, parents = numbers[found], at[found] + reserve[p]
                times = last_time[numbers]
                q = self.input[p]
                if work is not None and q >= 0 and len(numbers):  # the job of the input completing a row
                    np.add.at(work, first[q] + blocks.parents[first[p] + parents], self.record_ops)
            elif self.combined[c]:  # each record read off its window's last pane row of its group
                above, _ = made.get(p, (np.zeros(0, np.int64), np.zeros(0)))
                ends = self.last[self.label[p]][above]
                lo = np.searchsorted(self.last[label], ends, side="left")
                counts = np.searchsorted(self.last[label], ends, side="right") - lo
                offsets = np.repeat(np.cumsum(counts) - counts, counts)
                numbers = np.repeat(lo, counts) + np.arange(int(counts.sum())) - offsets
                rows = np.repeat(np.arange(len(above)), counts)
                times = self.last_time[label][numbers]
                kept = np.flatnonzero(_within(times, self.spans[c], start, end))
                numbers, parents, times = numbers[kept], rows[kept] + reserve[p], times[kept]
            else:
                above, above_times = made.get(p, (np.zeros(0, np.int64), np.zeros(0)))
                inside = _within(above_times, self.spans[c], start, end)
                if c in self.mask:  # the rows of the cells it keeps
                    inside &= (self.bits[label][above] & self.mask[c]) != 0
                kept = np.flatnonzero(inside)
                numbers, parents, times = above[kept], kept + reserve[p], above_times[kept]
            made[c] = (numbers, times)
            size = int(reserve[c]) + len(numbers)
            if size == 0:
                first[c], count[c] = -1, 0
                continue
            first[c], count[c] = n, size
            places = np.zeros(int(reserve[c]), np.int64)
            indices = -1 - self.last[label][numbers] if self.pane_sink[c] else numbers
            wire = self.row_wire[label][numbers] if label in self.row_wire else np.full(len(numbers), self.wire[c])
            parts.append((
                np.concatenate([places, indices]),
                np.concatenate([places.astype(np.float64), self.closes[label][numbers]]),
                np.concatenate([places, parents]),
                np.concatenate([places, wire]).astype(np.int64),
            ))  # fmt: skip
            n += size
        if not parts:
            return blocks
        fields = ("indices", "emitted", "parents", "wire")
        indices, emitted, parents, wire = (
            np.concatenate([getattr(blocks, k), *(q[i] for q in parts)]) for i, k in enumerate(fields)
        )
        if work is not None:
            work = np.concatenate([work, np.zeros(len(indices) - len(work), np.int64)])
        return Blocks(indices, emitted, parents, wire, first, count, work)


def pane_schedule(
    scenario: Scenario, stream_id: str, predicate, panes: Panes, values: Values | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A pane class's rows over the run (:class:`_RecordLayout`): the last input tuple of each (tuple indices,
    ascending), the emission time its pane closes at (rounded to the nearest float) and its bytes (its era's
    row size); a row per pane and group holding tuples of ``predicate`` (with cells, per pane,
    group and cell).  Each era folds the tuples emitted from its start until the next era's, its panes
    numbered from time 0, the last cut short where the next era starts."""
    stream = scenario.stream(stream_id)
    n = tuple_count(stream, scenario.duration)
    found = columns(scenario, stream_id, 0, n) if values is None else values(stream_id, 0, n)
    chosen = np.flatnonzero(satisfies(predicate, found, n))
    times = emission_times_of(stream, chosen)
    eras = panes.eras()
    bits = None
    if panes.cells:
        bits = cell_bits(panes.cells, {k: np.asarray(v)[chosen] for k, v in found.items()}, len(chosen))
    bounds = [0, *np.searchsorted(times, [least_float_from(e.since) for e in eras[1:]]).tolist(), len(chosen)]
    last, closes, wire = [], [], []
    for k, era in enumerate(eras):
        part = slice(bounds[k], bounds[k + 1])
        keys = [np.asarray(found[g])[chosen[part]] for g in era.groups]
        if bits is not None:
            keys.append(bits[part].astype(np.float64))
        positions, numbers = pane_rows(era.length, times[part], keys)
        cut = eras[k + 1].since if k + 1 < len(eras) else None
        ends = ((j + 1) * era.length for j in numbers.tolist())
        closes.append(np.array([float(e if cut is None else min(e, cut)) for e in ends], dtype=np.float64))
        last.append(chosen[part][positions].astype(np.int64))
        wire.append(np.full(len(positions), scenario.tuple_bytes(era.values()), np.int64))
    return np.concatenate(last), np.concatenate(closes), np.concatenate(wire)


def cell_bits(cells: tuple, found: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """Each of ``n`` tuples' cell: bit ``i`` set when it satisfies ``cells[i]``."""
    bits = np.zeros(n, np.int64)
    for i, cell in enumerate(cells):
        bits |= satisfies(cell, found, n).astype(np.int64) << i
    return bits


def cells_of(
    scenario: Scenario, stream_id: str, cells: tuple, indices: np.ndarray, values: Values | None = None
) -> np.ndarray:
    """The cells (:func:`cell_bits`) of the stream's tuples ``indices``, read for those tuples alone: a pane
    row's cell is its last input tuple's."""
    indices = np.asarray(indices, np.int64)
    order = np.argsort(indices, kind="stable")
    names = tuple(sorted({d for cell in cells for d in cell.dims}))
    found = columns_of(scenario, stream_id, indices[order], names, values)
    bits = np.empty(len(indices), np.int64)
    bits[order] = cell_bits(cells, found, len(indices))
    return bits


def _within(times: np.ndarray, spans: list[tuple[float, float]], start: float, end: float) -> np.ndarray:
    """Which of ``times`` lie in one of ``spans`` (each ``[a, b)``), clipped to ``[start, end)``."""
    inside = np.zeros(len(times), np.bool_)
    for a, b in spans:
        if a < end and b > start:
            inside |= (times >= max(a, start)) & (times < min(b, end))
    return inside
