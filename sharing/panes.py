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
flow of its own), per stream, grouped by WHERE up to equivalence (implication both ways: a tuple folded
into a pane is every reader's input, so implication alone would fold in foreign tuples) and group
attributes, two such groups merged while the cost model expects the merge to save bytes: the merged
panes are grouped by the union of the members' groups (each member rolls its own coarser groups up from
them) and, where their WHEREs differ and overlap, keep fragments: a row per cell of those WHEREs.  The
panes are the longest dividing every member's size and slide, the states the union of theirs.  A class of two
or more shares when the cost model expects its pane rows over the union of the members' routes, each link for
as long as a member below it is registered, to weigh fewer bytes than their records over their own routes (a
member's with HAVING counted as none: HAVING is not priced, and may leave nothing to ship); the decision holds
for the whole run, so a window never straddles a change between records and panes.

**The trees** (:class:`PaneTrees`): per class, over the epochs, a root flow at the source's super-peer
(the operator, crossing no link) and one flow per link of the union of the registered members' current
routes, each reading the flow of the link before it (and, with cells, keeping those its members below
read); a member's delivery reads the flow of its route's last link at its super-peer (the root where it
sits at the source's).

**Widening and narrowing** (:func:`pane_eras`): a tree keeps the panes its members registered *now* need,
not the class's: the longest panes dividing their windows, the union of their groups and of their states
(the cells stay the class's).  As a member arrives or leaves, the panes change from the first pane boundary
of the new panes at or after that instant (an *era*, :class:`~sharing.plan.Panes`): a newcomer's first
window starts no earlier (it starts at a multiple of its slide, which the new panes divide), the members
already there read the old panes up to it and the new after it (their windows' bounds are pane bounds of
both), and the old pane holding that boundary is cut short there.  A change decided before the last one
took effect replaces it (the new panes serve the members the last one was for, from no later).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import pairwise

from matcher import Predicate
from matcher.aggregate import AggregateQuery, pane_length
from network.routing import Network
from sharing.cost import CostModel
from sharing.plan import Delivery, Flow, Panes
from topologies.model import Scenario, SubscriptionSpec


@dataclass(frozen=True)
class PaneClass:
    """Aggregate subscriptions ``members`` (ids, in scenario order) sharing one pane flow per epoch: their
    stream, the WHERE the operator applies (the first member's), and the panes serving every member (its
    tree keeps, era by era, those of the members registered then: :func:`pane_eras`)."""

    id: str
    stream: str
    where: Predicate
    panes: Panes
    members: tuple[str, ...]


MAX_CELLS = 4
"""The most distinct WHEREs one fragment flow keeps cells of (its rows are estimated per cell: up to
``2**MAX_CELLS - 1`` of them)."""


def pane_classes(
    scenario: Scenario, network: Network, shipped: frozenset[str], cost: CostModel
) -> dict[str, PaneClass]:
    """The pane classes among the subscriptions ``shipped`` that the cost model expects to save bytes
    (module docstring), by member id."""
    by_stream: dict[str, list[SubscriptionSpec]] = {}
    for sub in scenario.subscriptions:
        query = sub.query
        if sub.id not in shipped or not isinstance(query, AggregateQuery) or query.window.tuples:
            continue
        if query.partial_states() is not None:
            by_stream.setdefault(sub.stream, []).append(sub)
    found: dict[str, PaneClass] = {}
    for stream, candidates in by_stream.items():
        model = _Model(scenario, network, cost, stream, candidates)
        for cluster in model.clusters():
            if len(cluster) > 1 and model.panes(cluster) < model.records(cluster):
                chosen = model.class_of(cluster)
                found.update(dict.fromkeys(chosen.members, chosen))
    return found


class _Model:
    """What pane sharing is expected to cost among the candidates of one stream (module docstring)."""

    def __init__(
        self, scenario: Scenario, network: Network, cost: CostModel, stream: str, candidates: list[SubscriptionSpec]
    ):
        self.scenario, self.cost, self.stream = scenario, cost, stream
        self.order = {sub.id: k for k, sub in enumerate(candidates)}
        source = scenario.home(scenario.stream(stream).source)
        self.routes = {sub.id: network.route(source, scenario.home(sub.peer)) for sub in candidates}
        self.spans = {sub.id: _active(scenario, sub) for sub in candidates}
        # each candidate's input: the first WHERE (in scenario order) equivalent to its own
        self.wheres: list[Predicate] = []
        self.input: dict[str, int] = {}
        for sub in candidates:
            where = sub.query.where
            k = next((k for k, w in enumerate(self.wheres) if w.equivalent(where)), None)
            if k is None:
                k = len(self.wheres)
                self.wheres.append(where)
            self.input[sub.id] = k
        self.candidates = candidates
        self._atoms: dict[tuple[int, ...], list[tuple[int, float]]] = {}
        self._overlap: dict[tuple[int, int], bool] = {}
        self._panes: dict[frozenset[str], float] = {}

    def clusters(self) -> list[list[SubscriptionSpec]]:
        """The candidates cut into the clusters expected to share best: first by input and group attributes,
        then, greedily, the two clusters whose merge saves the most bytes merged (grouped by the union of
        their groups, each member rolling its own up; of overlapping inputs, with cells), while one does."""
        start: dict[tuple, list[SubscriptionSpec]] = {}
        for sub in self.candidates:
            start.setdefault((self.input[sub.id], frozenset(sub.query.groups)), []).append(sub)
        clusters = list(start.values())
        costs = [self.alone(c) for c in clusters]
        while len(clusters) > 1:
            best, pair = 0.0, None
            for i in range(len(clusters)):
                for j in range(i + 1, len(clusters)):
                    merged = sorted(clusters[i] + clusters[j], key=lambda s: self.order[s.id])
                    if not self._mergeable(merged):
                        continue
                    saved = costs[i] + costs[j] - self.panes(merged)
                    if saved > best:
                        best, pair = saved, (i, j, merged)
            if pair is None:
                break
            i, j, merged = pair
            clusters[i], costs[i] = merged, self.alone(merged)
            del clusters[j], costs[j]
        return clusters

    def alone(self, cluster: list[SubscriptionSpec]) -> float:
        """Bytes the cluster is expected to carry as it would be served: its records, or its pane flow."""
        records = self.records(cluster)
        return records if len(cluster) < 2 else min(records, self.panes(cluster))

    def _mergeable(self, members: list[SubscriptionSpec]) -> bool:
        """At most :data:`MAX_CELLS` inputs, each overlapping another (disjoint ones share nothing)."""
        inputs = sorted({self.input[s.id] for s in members})
        if len(inputs) == 1:
            return True
        if len(inputs) > MAX_CELLS:
            return False
        return all(any(self._overlaps(a, b) for b in inputs if b != a) for a in inputs)

    def _overlaps(self, a: int, b: int) -> bool:
        key = (min(a, b), max(a, b))
        if key not in self._overlap:
            both = self.wheres[a].and_(self.wheres[b])
            self._overlap[key] = bool(both.boxes) and self.cost.selectivity(self.stream, both) > 0
        return self._overlap[key]

    def class_of(self, members: list[SubscriptionSpec]) -> PaneClass:
        """The pane class of ``members``: the panes dividing every window, grouped by every member's groups,
        keeping every aggregate's states, with a cell per input when there are several."""
        first = members[0]
        queries = [m.query for m in members]
        groups = tuple(dict.fromkeys(g for q in queries for g in q.groups))
        states = tuple(sorted(set().union(*(q.partial_states() for q in queries))))
        inputs = sorted({self.input[m.id] for m in members})
        cells = tuple(self.wheres[k] for k in inputs) if len(inputs) > 1 else ()
        where = Predicate.any_of(self.wheres[k] for k in inputs)
        panes = Panes(pane_length(q.window for q in queries), groups, states, cells)
        return PaneClass(f"panes.{first.id}", first.stream, where, panes, tuple(m.id for m in members))

    def records(self, members: list[SubscriptionSpec]) -> float:
        """Bytes the members' own records are expected to carry over the run, along their routes; none for
        a member with HAVING, which the cost model does not price (it may remove every record at the
        source, where a pane flow carries its panes whole): panes are chosen only where they save even so."""
        total = 0.0
        for sub in members:
            if not sub.query.having.is_true():
                continue
            start, end = self.spans[sub.id]
            window = sub.query.window
            # its windows lie wholly inside its registration: one every slide after the first whole size
            emitting = max(0.0, end - start - float(window.size) + float(window.slide))
            total += self.cost.record_cost(sub.query, len(self.routes[sub.id]) - 1) * emitting
        return total

    def panes(self, members: list[SubscriptionSpec]) -> float:
        """Bytes the members' pane flow is expected to carry over the run: along each link of their routes,
        for as long as a member below it is registered, the rows of the cells those members read, each era
        of its panes (:func:`pane_eras`: those its members registered then need) at its own rows and size."""
        key = frozenset(s.id for s in members)
        if key in self._panes:
            return self._panes[key]
        chosen = self.class_of(members)
        inputs = sorted({self.input[m.id] for m in members})
        bit = {k: 1 << n for n, k in enumerate(inputs)}
        below: dict[tuple[str, str], tuple[int, list[tuple[float, float]]]] = {}
        for sub in members:
            for edge in pairwise(self.routes[sub.id]):
                needs, spans = below.get(edge, (0, []))
                below[edge] = (needs | bit[self.input[sub.id]], [*spans, self.spans[sub.id]])
        decided = pane_eras(chosen.panes, [(m.query, *self.spans[m.id]) for m in members], self.scenario.duration)
        if not decided:  # none of them is registered within the run: nothing to carry
            self._panes[key] = 0.0
            return 0.0
        eras = decided[-1][1].eras()
        ends = [float(e.since) for e in eras[1:]] + [math.inf]
        total = 0.0
        for era, end in zip(eras, ends, strict=True):
            atoms = self._atom_rows(tuple(inputs), era)
            wire = self.scenario.tuple_bytes(era.values())
            for needs, spans in below.values():
                rows = sum(r for bits, r in atoms if bits & needs)
                total += rows * wire * _covered([(max(a, float(era.since)), min(b, end)) for a, b in spans])
        self._panes[key] = total
        return total

    def _atom_rows(self, inputs: tuple[int, ...], panes: Panes) -> list[tuple[int, float]]:
        """Per cell of the ``inputs``' WHEREs (as the bits of those it satisfies), its expected pane rows
        per second; one cell, the WHERE, for a single input."""
        key = (*inputs, panes.length, *panes.groups)
        if key not in self._atoms:
            found = []
            wheres = [self.wheres[k] for k in inputs]
            for bits in range(1, 1 << len(inputs)):
                cell = Predicate.TRUE
                for n, where in enumerate(wheres):
                    if bits >> n & 1:
                        cell = cell.and_(where)
                outside = Predicate.any_of(where for n, where in enumerate(wheres) if not bits >> n & 1)
                if outside.boxes and cell.boxes:
                    cell = cell.minus(outside)
                if not cell.boxes:
                    continue
                rows = self.cost.pane_rows_per_s(self.stream, cell, panes.groups, float(panes.length))
                found.append((bits, rows))
            self._atoms[key] = found
        return self._atoms[key]


def _active(scenario: Scenario, sub: SubscriptionSpec) -> tuple[float, float]:
    end = scenario.duration if sub.until is None else min(sub.until, scenario.duration)
    return max(sub.at, 0.0), max(end, max(sub.at, 0.0))


def _covered(spans: list[tuple[float, float]]) -> float:
    """The length of the union of ``spans``."""
    total, reach = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > reach and b > a:
            total += b - max(a, reach)
            reach = b
    return total


def pane_eras(
    chosen: Panes, members: list[tuple[AggregateQuery, float, float]], duration: float
) -> list[tuple[float, Panes]]:
    """The panes of a pane class's tree (``chosen``: the class's, whose groups' order and cells it keeps) as
    its ``members`` (each a query registered over ``[start, end)``) come and go (module docstring,
    "Widening and narrowing"): per instant in ``[0, duration)`` a member arrives or leaves while one is
    registered, the panes from then on, with their eras; in time order."""
    instants = sorted({t for _, a, b in members if a < b for t in (a, b) if t < duration})
    found: list[tuple[float, Panes]] = []
    chain: Panes | None = None
    for t in instants:
        now = [q for q, a, b in members if a <= t < b]
        if not now:
            continue
        needs = set().union(*(q.groups for q in now))
        spec = Panes(
            pane_length(q.window for q in now),
            tuple(g for g in chosen.groups if g in needs),
            tuple(sorted(set().union(*(q.partial_states() for q in now)))),
            chosen.cells,
        )
        widened = spec if chain is None else _changed(chain, Fraction(t), spec)
        if widened != chain:
            found.append((t, widened))
            chain = widened
    return found


def _changed(chain: Panes, t: Fraction, spec: Panes) -> Panes:
    """``chain`` changed at instant ``t`` to the panes ``spec``: its eras reached by then kept, ``spec``'s
    starting at its first pane boundary at or after ``t`` (none when the last kept era is ``spec``)."""
    eras = [e for e in chain.eras() if e.since < t]  # (the first, from 0, at least: a change comes after it)
    last = eras[-1]
    if (last.length, last.groups, last.states) != (spec.length, spec.groups, spec.states):
        eras.append(replace(spec, since=math.ceil(t / spec.length) * spec.length))
    return replace(eras[-1], earlier=tuple(eras[:-1]))


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
        self._eras = {}
        for chosen in {c.id: c for c in classes.values()}.values():
            members = [(self._specs[m].query, *_active(scenario, self._specs[m])) for m in chosen.members]
            self._eras[chosen.id] = pane_eras(chosen.panes, members, float(scenario.duration))
        self._panes: dict[str, Panes] = {}  # class id -> its panes now
        self._flows: tuple[Flow, ...] | None = ()
        self._made: dict = {}  # one object per value: an epoch's change holds what changed in value
        self._cells: dict[str, int] = {}

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

    def flows(self, now: float) -> tuple[Flow, ...]:
        """Every class's flows at instant ``now`` (each with its panes then: :func:`pane_eras`), parents first
        (the very tuple while no route and no panes changed)."""
        for class_id, eras in self._eras.items():
            panes = next((p for t, p in reversed(eras) if t <= now), eras[0][1] if eras else None)
            if panes is not None and self._panes.get(class_id) != panes:
                self._panes[class_id] = panes
                self._flows = None
        if self._flows is None:
            made = []
            for routes in self._routes.values():
                if not routes:
                    continue
                chosen = self.classes[next(iter(routes))]
                source = self._source[chosen.stream]
                panes = self._panes[chosen.id]
                made.append(Flow(chosen.id, chosen.stream, None, source, (source,), chosen.where, panes.reading(),
                                 panes=panes))  # fmt: skip
                into: dict[str, str] = {source: chosen.id}  # node -> the flow arriving there
                # with cells, each link keeps the rows of the cells its members below read
                cells = chosen.panes.cells
                below: dict[tuple[str, str], set[int]] = {}
                for sub_id, path in routes.items():
                    for edge in pairwise(path):
                        below.setdefault(edge, set()).add(self._cell(chosen, sub_id))
                # by depth, so the flow into a link's first node is made before it (routes from one source
                # form a tree; should two reach a node by different links, each link still has its flow)
                edges = sorted({(depth, e) for path in routes.values() for depth, e in enumerate(pairwise(path))})
                done: set[tuple[str, str]] = set()
                for _, (a, b) in edges:
                    if (a, b) in done:
                        continue
                    done.add((a, b))
                    flow_id = self._flow_id(chosen, a, b)
                    keep = Predicate.TRUE
                    if cells and len(below[(a, b)]) < len(cells):
                        keep = Predicate.any_of(cells[k] for k in sorted(below[(a, b)]))
                    made.append(Flow(flow_id, chosen.stream, into[a], a, (a, b), keep, panes.reading(),
                                     panes=panes))  # fmt: skip
                    into.setdefault(b, flow_id)
            self._flows = tuple(self._made.setdefault(f, f) for f in made)
        return self._flows

    def _cell(self, chosen: PaneClass, sub_id: str) -> int:
        """The cell a member reads (0 without cells)."""
        if sub_id not in self._cells:
            where = self._specs[sub_id].query.where
            self._cells[sub_id] = next((k for k, c in enumerate(chosen.panes.cells) if c.equivalent(where)), 0)
        return self._cells[sub_id]

    @staticmethod
    def _flow_id(chosen: PaneClass, a: str, b: str) -> str:
        return f"{chosen.id}:{a}>{b}"
