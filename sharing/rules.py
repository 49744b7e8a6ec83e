"""The rules every plan keeps, checked once when the plan is made (:meth:`sharing.plan.Plan.check`).

Within an epoch: a flow is listed once; its stream is known; its path starts at its origin and crosses
only backbone links; it reads the raw stream at the source's super-peer, or a parent flow listed earlier
in the epoch whose path passes through its origin; a delivery names a subscription, its subscriber's
thin-peer and that peer's super-peer, and reads the raw stream at the source's super-peer or a flow of the
epoch passing through its super-peer; every filter and projection finds the attributes it needs in what
its input carries there.  A record flow (``Flow.aggregate``) aggregates exactly its aggregate subscription's
input (its WHERE, its attributes), no flow reads it, and only that subscription's delivery does, without a
filter.  A pane flow (``Flow.panes``) either folds tuples into panes (its parent carries tuples: the panes
are time panes keeping no holistic state, its attributes exactly its groups' and its states' over all its
eras, each era starting at 0 or later than the one before, on a pane boundary of its own) or passes a
pane flow's rows on unchanged (the same panes, no filter, its parent's attributes); no tuple flow reads
one, and a delivery reads one only for an aggregate subscription which every era from its first window
on serves: a time window the panes divide, groups among the panes' (its own roll up from them), the
states its aggregates need; and a WHERE equivalent to the pane tree's root's (with cells: to one of the
cells, which every flow of its chain keeps), without a filter.  A pane flow whose panes change from one
epoch to the next keeps the eras that started before it (only eras still to come may go).  A fragment
flow's cells are at most 62 WHEREs whose OR is its root's WHERE; a child may keep the rows of some cells (a
filter implying its parent's).  Epochs are non-empty and in time order.  A subscription the plan
rejected is one of the scenario's, its reason is one line, and no epoch ending after the time it was
rejected (its arrival, or a re-plan after a failure) delivers to it.  While a backbone element is down
(docs/DYNAMICS.md), no flow's path meets it and no delivery is taken at a super-peer that is down: an
epoch whose backbone differs from the one before is read whole, the others only where they changed.

The engines rely on these rules and do not check them again: they only lay a checked plan out.  A plan is
its epochs' changes (:class:`sharing.plan.Change`), so an epoch costs what changed in it
(:class:`sharing.epochs.Sequence`): its new objects, and those reading a flow replaced or gone.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from fractions import Fraction
from itertools import pairwise

from matcher import Predicate
from matcher.aggregate import AggregateQuery
from network.routing import Network
from sharing.epochs import Sequence
from sharing.plan import Delivery, Flow, Plan
from topologies.errors import PlanError
from topologies.model import Scenario, StreamSpec
from topologies.outages import NetworkState, network_states


def check_plan(plan: Plan, scenario: Scenario, network: Network | None = None) -> None:
    """Raises :class:`PlanError` naming the epoch, flow or subscription of the first broken rule, in epoch
    order (the rules: module docstring)."""
    _Rules(scenario, network or Network.of(scenario)).run(plan)


class _Rules:
    def __init__(self, scenario: Scenario, network: Network):
        self.scenario, self.network = scenario, network
        self.duration = float(scenario.duration)
        self.links = set(network.directions)
        self.linked: set[tuple[str, ...]] = set()  # paths found to cross links only
        # (id(flow), id(parent or None)) -> (flow, parent, what the flow carries): an object is checked once
        self.flows_seen: dict[tuple[int, int], tuple[Flow, Flow | None, frozenset[str]]] = {}
        self.deliveries_seen: dict[tuple[int, int], tuple[Delivery, Flow | None]] = {}
        self.needs: dict[int, tuple[object, frozenset[str]]] = {}  # id(flow or delivery) -> attributes read
        self.rejected: frozenset[str] = frozenset()
        self.states = network_states(scenario) if scenario.events else []
        self.down: NetworkState | None = None  # the state of the epoch being read, when something is down
        self.pane_eras: dict = {}  # pane flow id -> its panes when last seen, and when they left (None: in force)

    def run(self, plan: Plan) -> None:
        for sub, reason in plan.rejected.items():
            if sub not in self.scenario.subscriptions_by_id:
                raise PlanError(f"plan {plan.strategy}: rejects {sub!r}, which is no subscription of the scenario")
            if not isinstance(reason, str) or not reason or "\n" in reason:
                raise PlanError(f"plan {plan.strategy}: the reason {sub} is rejected is not one line: {reason!r}")
        self.rejected = frozenset(plan.rejected)
        self.rejected_from = plan.rejected_from()
        rejections = sorted({t for t in self.rejected_from.values() if t > -math.inf})
        state = _Epochs()
        previous_end = -math.inf
        states = iter(self.states)
        network = next(states, None)
        afresh = True  # the next epoch read is read whole (the first, or one after a gap)
        for change in plan.changes:
            flows = state.flow_order.apply(change.flows)
            deliveries = state.delivery_order.apply(change.deliveries)
            if not change.start < change.end or change.start < previous_end:
                span = f"[{change.start:g}, {change.end:g})"
                raise PlanError(f"plan {plan.strategy}: epoch {span} is empty or overlaps an earlier one")
            start, end = max(change.start, 0.0), min(change.end, self.duration)
            previous_end = change.end
            if start >= end:  # no tuple is emitted in it: nothing reads it
                afresh = True
                continue
            if afresh or start != state.end:
                state.reset()
                flows, deliveries = state.flow_order.whole(), state.delivery_order.whole()
                afresh = False
            state.start, state.end = start, end
            before = network
            while network is not None and network.end <= start:
                network = next(states, None)
            self.down = network if network is not None and not network.intact else None
            if self.down is not None and network is not before:  # every object meets the new backbone
                for item in state.flow_order.items:
                    self._up(item, change.start)
                if self.down.failed_nodes:  # a delivery uses no link
                    for item in state.delivery_order.items:
                        self._up(item, change.start)
            changed = self._flows(flows, change.start, state)
            self._deliveries(deliveries, changed, state)
            if rejections and rejections[0] < end:  # kept deliveries of those rejected since
                while rejections and rejections[0] < end:
                    rejections.pop(0)
                for delivery in state.delivery_order.items:
                    if self.rejected_from.get(delivery.subscription, math.inf) < end:
                        raise PlanError(f"delivery of {delivery.subscription}: the plan rejected it")

    def _pane_eras(self, flow: Flow, epoch_start: float) -> None:
        """A pane flow whose panes change keeps the eras that started while it was last in force: only those
        it had not yet reached may go (:class:`~sharing.plan.Panes`; a widening replaces the eras still to
        come)."""
        before = self.pane_eras.get(flow.id)
        self.pane_eras[flow.id] = (flow.panes, None)
        if before is None or before[0] == flow.panes:
            return
        until = Fraction(max(epoch_start if before[1] is None else before[1], 0.0))
        if [e for e in before[0].eras() if e.since < until] != [e for e in flow.panes.eras() if e.since < until]:
            raise PlanError(f"flow {flow.id}: at {epoch_start:g} s its panes change eras it had already reached")

    def _up(self, item: Flow | Delivery, epoch_start: float) -> None:
        """PlanError when ``item`` uses a link or super-peer that is down in the epoch (``self.down``)."""
        down = self.down
        if isinstance(item, Delivery):
            if item.home in down.failed_nodes:
                raise PlanError(
                    f"delivery of {item.subscription}: taken at {item.home}, which is down in the epoch"
                    f" starting at {epoch_start:g}"
                )
            return
        for node in item.path:
            if node in down.failed_nodes:
                raise PlanError(
                    f"flow {item.id}: path {item.path} meets super-peer {node}, which is down in the epoch"
                    f" starting at {epoch_start:g}"
                )
        for a, b in pairwise(item.path):
            if (min(a, b), max(a, b)) in down.failed_links:
                raise PlanError(
                    f"flow {item.id}: path {item.path} crosses link {a}-{b}, which is down in the epoch"
                    f" starting at {epoch_start:g}"
                )

    def _flows(self, advanced: tuple[list[int], list[int], bool], epoch_start: float, state: _Epochs) -> set[str]:
        """Check the flows of the epoch that are new or read a flow replaced or gone (``advanced``: what
        :meth:`Sequence.apply` said of them); the ids of the flows whose object changed or went."""
        flows = state.flow_order.items
        gone, fresh, twice = advanced
        if twice:
            again = next(f for i, f in enumerate(flows) if f in flows[:i])
            raise PlanError(f"flow {again.id} is defined twice in the epoch starting at {epoch_start:g}")
        changed: set[str] = set()
        for ident in gone:
            flow = state.flows.pop(ident)
            if flow.panes is not None:  # in force until now
                self.pane_eras[flow.id] = (flow.panes, epoch_start)
            if state.by_id.get(flow.id) is flow:
                del state.by_id[flow.id]
                del state.carried[flow.id]
                changed.add(flow.id)
            if flow.parent is not None:
                state.children.get(flow.parent, set()).discard(ident)
        if not fresh and not changed:
            self._order(state, set())
            return changed
        named = Counter(flows[p].id for p in fresh) if len(fresh) > 1 else None
        for p in fresh:
            flow = flows[p]
            if (named is not None and named[flow.id] > 1) or flow.id in state.by_id:
                raise PlanError(f"flow {flow.id} is defined twice in the epoch starting at {epoch_start:g}")
            if flow.panes is not None:
                self._pane_eras(flow, epoch_start)
        rank = state.flow_order.rank
        came = {id(flows[p]): flows[p] for p in fresh}
        if self.down is not None:
            for flow in came.values():
                self._up(flow, epoch_start)
        queue = [(rank[ident], ident) for ident in came]
        for flow_id in changed:  # read again: their parent is another object now, or none
            queue.extend((rank[c], c) for c in state.children.get(flow_id, ()))
        heapq.heapify(queue)
        done: set[int] = set()
        while queue:
            place, ident = heapq.heappop(queue)
            if ident in done:
                continue
            done.add(ident)
            flow = came[ident] if ident in came else state.flows[ident]
            parent = None if flow.parent is None else state.by_id.get(flow.parent)
            if parent is not None and rank[id(parent)] >= place:
                parent = None  # listed later: not an earlier flow of the epoch
            key = (ident, id(parent))
            seen = self.flows_seen.get(key)
            if seen is None:
                seen = self.flows_seen[key] = (flow, parent, self._flow(flow, parent, state))
            if ident not in came and state.by_id.get(flow.id) is flow and state.carried[flow.id] == seen[2]:
                continue  # read again, found as it was
            if state.by_id.get(flow.id) is not flow or state.carried.get(flow.id) != seen[2]:
                changed.add(flow.id)
                for child in state.children.get(flow.id, ()):
                    if rank[child] < place:
                        raise PlanError(
                            f"flow {state.flows[child].id}: parent {flow.id} is not an earlier flow of the epoch"
                        )
                    heapq.heappush(queue, (rank[child], child))
            state.flows[ident] = flow
            state.by_id[flow.id] = flow
            state.carried[flow.id] = seen[2]
            if flow.parent is not None:
                state.children.setdefault(flow.parent, set()).add(ident)
        self._order(state, done)
        return changed

    @staticmethod
    def _order(state: _Epochs, done: set[int]) -> None:
        """The flows kept from the epoch before but moved among the others: still after their parent and
        before their children (those checked above were)."""
        rank = state.flow_order.rank
        for ident in state.flow_order.shifted:
            if ident in done or ident not in state.flows:
                continue
            flow = state.flows[ident]
            parent = None if flow.parent is None else state.by_id.get(flow.parent)
            if flow.parent is not None and (parent is None or rank[id(parent)] >= rank[ident]):
                raise PlanError(f"flow {flow.id}: parent {flow.parent} is not an earlier flow of the epoch")
            for child in state.children.get(flow.id, ()):
                if rank[child] < rank[ident]:
                    raise PlanError(
                        f"flow {state.flows[child].id}: parent {flow.id} is not an earlier flow of the epoch"
                    )

    def _raw(self, stream: StreamSpec, at: str, what: str) -> tuple[frozenset[str], str]:
        """What a flow or delivery (``what``) reading ``stream`` raw at ``at`` sees, and how to name it: only
        the stream's source's super-peer has the raw stream."""
        source_home = self.scenario.home(stream.source)
        if at != source_home:
            raise PlanError(f"{what} reads raw {stream.id} at {at}, not at {source_home}")
        return frozenset(stream.attribute_names), f"raw stream {stream.id}"

    def _flow(self, flow: Flow, parent: Flow | None, state: _Epochs) -> frozenset[str]:
        """Check one flow read from ``parent`` (the raw stream when it has none); what it carries."""
        stream = self.scenario.streams_by_id.get(flow.stream)
        if stream is None:
            raise PlanError(f"flow {flow.id}: unknown stream {flow.stream!r}")
        if not flow.path or flow.path[0] != flow.origin:
            raise PlanError(f"flow {flow.id}: path {flow.path} does not start at its origin {flow.origin}")
        if flow.parent is None:
            above, what = self._raw(stream, flow.origin, f"flow {flow.id}")
        else:
            if parent is None:
                raise PlanError(f"flow {flow.id}: parent {flow.parent} is not an earlier flow of the epoch")
            if flow.origin not in parent.path:
                raise PlanError(f"flow {flow.id}: parent {flow.parent} does not pass through {flow.origin}")
            if parent.aggregate is not None:
                raise PlanError(f"flow {flow.id}: reads {parent.id}, which carries records")
            if parent.panes is not None and flow.panes is None:
                raise PlanError(f"flow {flow.id}: reads {parent.id}, which carries pane rows")
            above, what = state.carried[parent.id], f"flow {parent.id}"
        if flow.aggregate is not None:
            self._record_flow(flow, stream)
        if flow.panes is not None:
            self._pane_flow(flow, parent)
        if flow.path not in self.linked:
            for a, b in pairwise(flow.path):
                if (a, b) not in self.links:
                    raise PlanError(f"flow {flow.id}: path {flow.path} crosses {a} -> {b}, which is not a link")
            self.linked.add(flow.path)
        if flow.panes is None or parent is None or parent.panes is None:  # pane rows pass on by their cells
            self._reads(flow, above, f"flow {flow.id}", flow.origin, what)
        return above if flow.trim else frozenset(flow.attrs)

    def _record_flow(self, flow: Flow, stream: StreamSpec) -> None:
        """A record flow aggregates exactly its subscription's input: the tuples of its WHERE, with the
        attributes it reads (the records it carries are that subscription's)."""
        sub = self.scenario.subscriptions_by_id.get(flow.aggregate)
        if sub is None or not isinstance(sub.query, AggregateQuery) or sub.stream != flow.stream:
            raise PlanError(f"flow {flow.id}: carries the records of {flow.aggregate!r}, no aggregate of {flow.stream}")
        wanted = sub.query.attributes(stream.attribute_names)
        if flow.predicate != sub.query.where or tuple(flow.attrs) != wanted or flow.trim:
            raise PlanError(f"flow {flow.id}: aggregates other tuples than the input of {flow.aggregate}")

    @staticmethod
    def _pane_flow(flow: Flow, parent: Flow | None) -> None:
        """A pane flow folds its input into the panes it names, or passes its parent's pane rows on."""
        panes = flow.panes
        if flow.aggregate is not None or flow.trim:
            raise PlanError(f"flow {flow.id}: a pane flow carries no records of its own and trims nothing")
        if parent is not None and parent.panes is not None:
            # with cells, a child may keep the rows of some of them: a filter implying its parent's
            kept = flow.predicate.is_true() or (panes.cells and flow.predicate.implies(parent.predicate))
            if parent.panes != panes or not kept or tuple(flow.attrs) != tuple(parent.attrs):
                raise PlanError(f"flow {flow.id}: passes on the pane rows of {parent.id} with other panes or a filter")
            return
        eras = panes.eras()
        for era in eras:
            if not era.length > 0 or any(s not in ("sum", "sumsq", "min", "max") for s, _ in era.states):
                raise PlanError(f"flow {flow.id}: panes of {era.length} s keeping {list(era.states)}")
            if era.earlier or era.cells != panes.cells or (era.since / era.length).denominator != 1:
                raise PlanError(f"flow {flow.id}: its era of panes from {era.since} s does not start a pane of its own")
        if eras[0].since != 0 or any(a.since >= b.since for a, b in pairwise(eras)):
            raise PlanError(f"flow {flow.id}: its eras of panes start at {[str(e.since) for e in eras]} s")
        if panes.cells and (len(panes.cells) > 62 or not Predicate.any_of(panes.cells).equivalent(flow.predicate)):
            raise PlanError(f"flow {flow.id}: its cells are not those of its WHERE (at most 62 WHEREs, their OR)")
        wanted = set(panes.reading())
        if set(flow.attrs) != wanted or len(flow.attrs) != len(wanted):
            raise PlanError(f"flow {flow.id}: its panes read {sorted(wanted)}, it projects to {list(flow.attrs)}")

    def _deliveries(self, advanced: tuple[list[int], list[int], bool], changed: set[str], state: _Epochs) -> None:
        """Check the deliveries of the epoch that are new or read a flow in ``changed`` (``advanced``: what
        :meth:`Sequence.apply` said of them)."""
        deliveries = state.delivery_order.items
        gone, fresh, _ = advanced
        for ident in gone:
            delivery = state.deliveries.pop(ident)
            if delivery.flow is not None:
                state.readers.get(delivery.flow, set()).discard(ident)
        check = {id(deliveries[p]): deliveries[p] for p in fresh}
        again = False
        for flow_id in changed:
            for ident in state.readers.get(flow_id, ()):
                if ident not in check:
                    check[ident] = state.deliveries[ident]
                    again = True
        order = list(check.values())
        if again:  # in epoch order: the first broken rule is the one reported
            position = state.delivery_order.positions()
            order.sort(key=lambda d: position[id(d)])
        for delivery in order:
            flow = None if delivery.flow is None else state.by_id.get(delivery.flow)
            key = (id(delivery), id(flow))
            if self.down is not None:
                self._up(delivery, state.start)
            if delivery.subscription in self.rejected and self.rejected_from[delivery.subscription] < state.end:
                raise PlanError(f"delivery of {delivery.subscription}: the plan rejected it")
            if key not in self.deliveries_seen:
                self._delivery(delivery, flow, state)
                self.deliveries_seen[key] = (delivery, flow)
            state.deliveries[id(delivery)] = delivery
            if delivery.flow is not None:
                state.readers.setdefault(delivery.flow, set()).add(id(delivery))

    def _delivery(self, delivery: Delivery, flow: Flow | None, state: _Epochs) -> None:
        what = f"delivery of {delivery.subscription}"
        sub = self.scenario.subscriptions_by_id.get(delivery.subscription)
        home = self.scenario.homes.get(delivery.peer)
        if sub is None or home is None:
            raise PlanError(f"{what}: unknown subscription or thin-peer {delivery.peer}")
        if delivery.peer != sub.peer or delivery.home != home:
            raise PlanError(f"{what}: {delivery.peer} at {delivery.home}, but the subscriber is {sub.peer} at {home}")
        stream = self.scenario.streams_by_id.get(sub.stream)
        if stream is None:
            raise PlanError(f"{what}: unknown stream {sub.stream!r}")
        if delivery.flow is None:
            above, source = self._raw(stream, delivery.home, what)
        else:
            if flow is None or delivery.home not in flow.path:
                raise PlanError(f"{what}: flow {delivery.flow} is not available at {delivery.home}")
            if flow.aggregate is not None and flow.aggregate != delivery.subscription:
                raise PlanError(f"{what}: reads {flow.id}, the records of {flow.aggregate}")
            if flow.aggregate is not None and not delivery.predicate.is_true():
                raise PlanError(f"{what}: filters the records of {flow.id} (they pass whole)")
            if flow.panes is not None:
                self._pane_reader(delivery, flow, sub, state, what)
            above, source = state.carried[flow.id], f"flow {flow.id}"
        self._reads(delivery, above, what, delivery.home, source)

    @staticmethod
    def _pane_reader(delivery: Delivery, flow: Flow, sub, state: _Epochs, what: str) -> None:
        """A delivery reads a pane flow for an aggregate subscription the panes serve, unfiltered."""
        query = sub.query
        if not isinstance(query, AggregateQuery) or query.window.tuples:
            raise PlanError(f"{what}: reads the pane rows of {flow.id}, but is no aggregate over a time window")
        chain = [flow]
        while chain[-1].parent is not None and state.by_id[chain[-1].parent].panes is not None:
            chain.append(state.by_id[chain[-1].parent])
        panes = flow.panes
        if panes.cells:  # its WHERE one of the cells, whose rows every flow of the chain keeps
            cell = next((c for c in panes.cells if c.equivalent(query.where)), None)
            served = cell is not None and all(cell.implies(f.predicate) for f in chain)
        else:
            served = chain[-1].predicate.equivalent(query.where)
        # every era from its first window on serves it (the eras before fold windows it never receives)
        eras = panes.eras()
        first = query.window.first_start(sub.at)
        reading = [e for e, after in zip(eras, [*eras[1:], None], strict=True) if after is None or after.since > first]
        states = query.partial_states()
        if not (
            served
            and states is not None
            and all(
                query.window.whole_panes(e.length) and set(query.groups) <= set(e.groups) and states <= set(e.states)
                for e in reading
            )
            and delivery.predicate.is_true()
        ):
            raise PlanError(f"{what}: the pane rows of {flow.id} ({panes.text()}) do not serve it")

    def _reads(self, item: Flow | Delivery, above: frozenset[str], name: str, node: str, source: str) -> None:
        """PlanError unless ``above`` holds every attribute ``item``'s filter and projection read."""
        hit = self.needs.get(id(item))
        if hit is None:
            trim = item.trim if isinstance(item, Flow) else ()
            needs = frozenset([*item.predicate.dims, *item.attrs, *(d for p, _ in trim for d in p.dims)])
            hit = self.needs[id(item)] = (item, needs)
        missing = hit[1] - above
        if missing:
            raise PlanError(f"{name} at {node} needs attribute {min(missing)!r}, which {source} does not carry there")


class _Epochs:
    """What the check carries from one epoch to the next (objects keyed by identity): the plan's lists so
    far, and what was checked of them since the last epoch read whole."""

    def __init__(self) -> None:
        self.flow_order = Sequence(ranked=True)
        self.delivery_order = Sequence(ranked=False)
        self.start = self.end = 0.0
        self.reset()

    def reset(self) -> None:
        self.flows: dict[int, Flow] = {}
        self.deliveries: dict[int, Delivery] = {}
        self.by_id: dict[str, Flow] = {}  # flow id -> the object of the current epoch
        self.carried: dict[str, frozenset[str]] = {}  # flow id -> the attributes its tuples carry
        self.children: dict[str, set[int]] = {}  # flow id -> flows (ids) reading it
        self.readers: dict[str, set[int]] = {}  # flow id -> deliveries (ids) reading it
