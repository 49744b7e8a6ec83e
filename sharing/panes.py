"""Pane sharing: aggregate subscriptions that read one flow of partial states instead of records each.

Several aggregate subscriptions often fold the same input (one stream, equivalent WHEREs, the same
groups) over different windows and aggregates.  Their records differ, but each window is a run of *panes*
(docs/QUERIES.md, "Windowed aggregates"): cut time into panes dividing every one of their windows' sizes
and slides, keep per pane and group the partial states every one of their aggregates combines from, and
each subscription's records are combined from the panes of its windows, exactly.  One pane flow then
serves them all (docs/ACCOUNTING.md, "Panes"): its operator at the source's super-peer folds the input
once, and its pane rows cross each link of the union of the subscribers' routes once, where records of
their own would cross the shared links once per subscription.

**Which subscriptions share** (:func:`pane_classes`): those served by records (``shipped``) whose windows
are time windows and whose aggregates all combine from partial states (MEDIAN, holistic, keeps a record
flow of its own), grouped by stream and WHERE up to equivalence (implication both ways: a tuple folded
into a pane is every reader's input, so implication alone would fold in foreign tuples), then by group
attributes, two such groups merged while the cost model expects the merge to save bytes: the merged
panes are grouped by the union of the members' groups, and each member rolls its own coarser groups up
from them.  The panes are the longest dividing every member's size and slide, the states the union of
theirs.  A class of two or more shares when the cost model expects its pane rows over the union of the
members' routes, each link for as long as a member below it is registered, to weigh fewer bytes than
their records over their own routes (a member's with HAVING counted as none: HAVING is not priced, and
may leave nothing to ship); the decision holds for the whole run, so a window never straddles
a change between records and panes.

**The trees** (:class:`PaneTrees`): per class, over the epochs, a root flow at the source's super-peer
(the operator, crossing no link) and one flow per link of the union of the registered members' current
routes, each reading the flow of the link before it; a member's delivery reads the flow of its route's
last link at its super-peer (the root where it sits at the source's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise

from matcher import Predicate
from matcher.aggregate import AggregateQuery
from network.routing import Network
from sharing.cost import CostModel
from sharing.plan import Delivery, Flow, Panes
from topologies.model import Scenario, SubscriptionSpec


@dataclass(frozen=True)
class PaneClass:
    """Aggregate subscriptions ``members`` (ids, in scenario order) sharing one pane flow per epoch: their
    stream, the WHERE the operator applies (the first member's), and the panes it keeps."""

    id: str
    stream: str
    where: Predicate
    panes: Panes
    members: tuple[str, ...]

    @property
    def attrs(self) -> tuple[str, ...]:
        """What the operator reads: the group attributes, then the attributes of the states."""
        return tuple(dict.fromkeys([*self.panes.groups, *(a for _, a in self.panes.states)]))


def pane_length(queries: list[AggregateQuery]) -> Fraction:
    """The longest pane dividing every query's window size and slide (their gcd, as exact fractions)."""
    length = Fraction(0)
    for query in queries:
        for x in (query.window.size, query.window.slide):
            length = Fraction(
                math.gcd(length.numerator * x.denominator, x.numerator * length.denominator),
                length.denominator * x.denominator,
            )
    return length


def pane_classes(
    scenario: Scenario, network: Network, shipped: frozenset[str], cost: CostModel
) -> dict[str, PaneClass]:
    """The pane classes among the subscriptions ``shipped`` that the cost model expects to save bytes
    (module docstring), by member id."""
    by_stream: dict[str, list[list[SubscriptionSpec]]] = {}
    for sub in scenario.subscriptions:
        query = sub.query
        if sub.id not in shipped or not isinstance(query, AggregateQuery) or query.window.tuples:
            continue
        if query.partial_states() is None:
            continue
        inputs = by_stream.setdefault(sub.stream, [])
        for members in inputs:
            if members[0].query.where.equivalent(query.where):
                members.append(sub)
                break
        else:
            inputs.append([sub])
    found: dict[str, PaneClass] = {}
    for inputs in by_stream.values():
        for members in inputs:
            for cluster in _clusters(scenario, network, cost, members):
                chosen = _class_of(cluster)
                if len(cluster) > 1 and _pane_cost(scenario, network, cost, chosen, cluster) < _record_cost(
                    scenario, network, cost, cluster
                ):
                    found.update(dict.fromkeys(chosen.members, chosen))
    return found


def _class_of(members: list[SubscriptionSpec]) -> PaneClass:
    """The pane class of ``members`` (one input): the panes dividing every window, the groups of every
    member (each rolls its own up from them), the states of every aggregate."""
    first = members[0]
    queries = [m.query for m in members]
    groups = tuple(dict.fromkeys(g for q in queries for g in q.groups))
    states = tuple(sorted(set().union(*(q.partial_states() for q in queries))))
    panes = Panes(pane_length(queries), groups, states)
    return PaneClass(f"panes.{first.id}", first.stream, first.query.where, panes, tuple(m.id for m in members))


def _clusters(
    scenario: Scenario, network: Network, cost: CostModel, members: list[SubscriptionSpec]
) -> list[list[SubscriptionSpec]]:
    """``members`` (one input) cut into the groups of subscriptions expected to share panes best: first by
    their group attributes, then, greedily, two clusters merged (grouped by the union of their groups,
    each member rolling its own up) while that saves the most bytes."""
    by_groups: dict[frozenset[str], list[SubscriptionSpec]] = {}
    for sub in members:
        by_groups.setdefault(frozenset(sub.query.groups), []).append(sub)
    clusters = list(by_groups.values())

    def alone(cluster: list[SubscriptionSpec]) -> float:
        records = _record_cost(scenario, network, cost, cluster)
        if len(cluster) < 2:
            return records
        return min(records, _pane_cost(scenario, network, cost, _class_of(cluster), cluster))

    costs = [alone(c) for c in clusters]
    while len(clusters) > 1:
        best, pair = 0.0, None
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                merged = sorted(clusters[i] + clusters[j], key=members.index)
                saved = costs[i] + costs[j] - _pane_cost(scenario, network, cost, _class_of(merged), merged)
                if saved > best:
                    best, pair = saved, (i, j, merged)
        if pair is None:
            break
        i, j, merged = pair
        clusters[i], costs[i] = merged, alone(merged)
        del clusters[j], costs[j]
    return clusters


def _active(scenario: Scenario, sub: SubscriptionSpec) -> tuple[float, float]:
    end = scenario.duration if sub.until is None else min(sub.until, scenario.duration)
    return max(sub.at, 0.0), max(end, max(sub.at, 0.0))


def _record_cost(scenario: Scenario, network: Network, cost: CostModel, members: list[SubscriptionSpec]) -> float:
    """Bytes the members' own records are expected to carry over the run, along their routes; none for a
    member with HAVING, which the cost model does not price (it may remove every record at the source,
    where a pane flow carries its panes whole): pane sharing is chosen only where it saves bytes even so."""
    source = scenario.home(scenario.stream(members[0].stream).source)
    total = 0.0
    for sub in members:
        if not sub.query.having.is_true():
            continue
        start, end = _active(scenario, sub)
        window = sub.query.window
        # its windows lie wholly inside its registration: one every slide after the first whole size
        emitting = max(0.0, end - start - float(window.size) + float(window.slide))
        hops = len(network.route(source, scenario.home(sub.peer))) - 1
        total += cost.record_cost(sub.query, hops) * emitting
    return total


def _pane_cost(
    scenario: Scenario, network: Network, cost: CostModel, chosen: PaneClass, members: list[SubscriptionSpec]
) -> float:
    """Bytes the class's pane rows are expected to carry over the run: along each link of the members'
    routes, for as long as a member below it is registered."""
    source = scenario.home(scenario.stream(chosen.stream).source)
    spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for sub in members:
        for edge in pairwise(network.route(source, scenario.home(sub.peer))):
            spans.setdefault(edge, []).append(_active(scenario, sub))
    rows = cost.pane_rows_per_s(chosen.stream, chosen.where, chosen.panes.groups, float(chosen.panes.length))
    wire = scenario.tuple_bytes(chosen.panes.values())
    return rows * wire * sum(_covered(found) for found in spans.values())


def _covered(spans: list[tuple[float, float]]) -> float:
    """The length of the union of ``spans``."""
    total, reach = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


class PaneTrees:
    """The pane flows of every pane class over the epochs (module docstring, "The trees"), from the routes
    the registered members take now."""

    def __init__(self, scenario: Scenario, classes: dict[str, PaneClass]):
        self.classes = classes
        self._source = {s.id: scenario.home(s.source) for s in scenario.streams}
        self._specs = {s.id: s for s in scenario.subscriptions}
        self._select = {
            s.id: s.query.attributes(scenario.stream(s.stream).attribute_names) for s in scenario.subscriptions
        }
        self._routes: dict[str, dict[str, tuple[str, ...]]] = {}  # class id -> member -> its route now
        self._flows: tuple[Flow, ...] | None = ()
        self._made: dict = {}  # one object per value: an epoch's change holds what changed in value

    def route(self, sub_id: str, path: tuple[str, ...] | None) -> Delivery | None:
        """Member ``sub_id`` takes ``path`` from the source's super-peer (None: not served, cut off or
        gone); its delivery."""
        chosen = self.classes[sub_id]
        routes = self._routes.setdefault(chosen.id, {})
        if routes.get(sub_id) != path:
            if path is None:
                routes.pop(sub_id, None)
            else:
                routes[sub_id] = path
            self._flows = None
        if path is None:
            return None
        spec = self._specs[sub_id]
        reads = self._flow_id(chosen, path[-2], path[-1]) if len(path) > 1 else chosen.id
        delivery = Delivery(sub_id, spec.peer, path[-1], reads, Predicate.TRUE, self._select[sub_id])
        return self._made.setdefault(delivery, delivery)

    def flows(self) -> tuple[Flow, ...]:
        """Every class's flows now, parents first (the very tuple while no route changed)."""
        if self._flows is None:
            made = []
            for routes in self._routes.values():
                if not routes:
                    continue
                chosen = self.classes[next(iter(routes))]
                source = self._source[chosen.stream]
                made.append(Flow(chosen.id, chosen.stream, None, source, (source,), chosen.where, chosen.attrs,
                                 panes=chosen.panes))  # fmt: skip
                into: dict[str, str] = {source: chosen.id}  # node -> the flow arriving there
                # by depth, so the flow into a link's first node is made before it (routes from one source
                # form a tree; should two reach a node by different links, each link still has its flow)
                edges = sorted({(depth, e) for path in routes.values() for depth, e in enumerate(pairwise(path))})
                done: set[tuple[str, str]] = set()
                for _, (a, b) in edges:
                    if (a, b) in done:
                        continue
                    done.add((a, b))
                    flow_id = self._flow_id(chosen, a, b)
                    made.append(Flow(flow_id, chosen.stream, into[a], a, (a, b), Predicate.TRUE, chosen.attrs,
                                     panes=chosen.panes))  # fmt: skip
                    into.setdefault(b, flow_id)
            self._flows = tuple(self._made.setdefault(f, f) for f in made)
        return self._flows

    @staticmethod
    def _flow_id(chosen: PaneClass, a: str, b: str) -> str:
        return f"{chosen.id}:{a}>{b}"
