"""A plan's soundness, checked without simulating a tuple.

A plan is *sound* when, at every epoch, every active subscription it did not reject (and that a path
joins to its source, docs/DYNAMICS.md) is delivered from a flow that is available at its super-peer and
carries everything it needs: each flow on the chain from the raw stream down to the delivering flow keeps
every tuple the subscription's WHERE accepts (the WHERE implies each flow's predicate), each flow is
produced where its parent is available and crosses only backbone links, and the flows carry the
attributes their own filters and the delivery need.  A flow of need classes (``trim`` entries,
docs/PLANNER.md) decides each tuple's class where its stream enters the network, so its filters read what
its parent could carry; what it must hold instead is every attribute for the tuples that need it: each
subscription's WHERE implies, on every such flow of its chain, the class of every attribute it selects,
and a class of a child implies its parent's.  If all of that holds, every engine delivers exactly the
centralized result (the exactness of docs/ACCOUNTING.md) whatever the tuples are, so a violation found
here is a planner bug, named by epoch, flow and subscription.

The check is cheap enough for any user scenario (``run.py run --check-plans``): frozen flows and
deliveries are mostly the same objects from one epoch to the next, so each implication is decided once
per (subscription, flow object).
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from matcher import Predicate
from network.routing import Network
from sharing.plan import Flow, Plan
from topologies.model import Scenario
from topologies.outages import components, connected, network_states


def plan_problems(plan: Plan, scenario: Scenario, network: Network, limit: int = 20) -> list[str]:
    """Every violated invariant of ``plan``, as readable lines (empty: the plan is sound); at most
    ``limit`` lines (the first ones in epoch order)."""
    return _Checker(plan, scenario, network, limit).run()


class _Checker:
    def __init__(self, plan: Plan, scenario: Scenario, network: Network, limit: int):
        self.plan, self.scenario, self.network, self.limit = plan, scenario, network, limit
        self.problems: list[str] = []
        self.implies: dict[tuple[Predicate, Predicate], bool] = {}  # (a WHERE, a flow predicate) -> verdict
        self.streams = scenario.streams_by_id
        self.subs = scenario.subscriptions_by_id
        self.homes = scenario.homes
        subs = scenario.subscriptions
        self.sub_ids = np.array([s.id for s in subs], dtype=object)
        self.at = np.array([s.at for s in subs], dtype=np.float64)
        self.until = np.array([np.inf if s.until is None else s.until for s in subs], dtype=np.float64)
        self.links = set(network.directions)
        self.nested = plan.strategy.startswith("sharing-")  # the planner keeps each flow within its parent
        self.boxsets: dict[Predicate, frozenset] = {}
        self.seen: set[tuple[int, ...]] = set()  # ids of (delivery, *its chain) already checked
        self.flow_ok: dict[tuple[int, int | None], list[str]] = {}  # (id(flow), id(parent)) -> its problems
        self.rejected_from = plan.rejected_from()
        self.states = [(state, None) for state in network_states(scenario)] if scenario.events else []
        self.starts = [state.start for state, _ in self.states]
        self.source_home = {s.id: self.homes[self.streams[s.stream].source] for s in subs}

    def _labels(self, t: float) -> dict[str, int] | None:
        """The components of the backbone in force at ``t`` (None: nothing is down)."""
        k = bisect_right(self.starts, t) - 1
        if k < 0:
            return None
        state, labels = self.states[k]
        if state.intact or not t < state.end:
            return None
        if labels is None:
            labels = components(self.scenario, state)
            self.states[k] = (state, labels)
        return labels

    def add(self, line: str) -> None:
        if len(self.problems) < self.limit:
            self.problems.append(line)

    def _implies(self, where: Predicate, pred: Predicate) -> bool:
        key = (where, pred)  # predicates hash once (cached): equal predicates of new flow objects hit too
        verdict = self.implies.get(key)
        if verdict is None:
            verdict = self.implies[key] = self._box_wise(where, pred) or where.implies(pred)
        return verdict

    def _box_wise(self, where: Predicate, pred: Predicate) -> bool:
        """A sufficient test of ``where => pred``: each box of ``where`` is a box of ``pred`` (the ideal
        bound's unions) or lies in one (a flow holding its consumers' hulls); far cheaper than the exact
        test."""
        boxes = self.boxsets.get(pred)
        if boxes is None:
            boxes = self.boxsets[pred] = frozenset(pred.boxes)
        return all(box in boxes or any(b.contains(box) for b in pred.boxes) for box in where.boxes)

    def run(self) -> list[str]:
        plan, scenario = self.plan, self.scenario
        ends = [0.0] + [e.end for e in plan.epochs]
        if [e.start for e in plan.epochs] != ends[:-1] or ends[-1] != scenario.duration:
            self.add(f"epochs do not tile [0, {scenario.duration}): {[(e.start, e.end) for e in plan.epochs][:5]}...")
        for epoch in plan.epochs:
            self._epoch(epoch)
            if len(self.problems) >= self.limit:
                break
        return self.problems

    def _flow(self, f: Flow, parent: Flow | None, above: frozenset[str]) -> list[str]:
        """The problems of flow ``f`` read from ``parent`` (None: the raw stream), which carries ``above``
        there (for need classes, what the parent could carry: docs/PLANNER.md), independent of the
        epoch."""
        key = (id(f), id(parent) if parent is not None else None)
        found = self.flow_ok.get(key)
        if found is not None:
            return found
        found = []
        stream = self.streams.get(f.stream)
        if stream is None:
            found.append(f"{f.id}: unknown stream {f.stream}")
            self.flow_ok[key] = found
            return found
        if not f.path or f.path[0] != f.origin:
            found.append(f"{f.id}: path does not start at its origin {f.origin}")
        for a, b in f.hops:
            if (a, b) not in self.links:
                found.append(f"{f.id}: {a} -> {b} is not a backbone link")
        if len(set(f.path)) != len(f.path):
            found.append(f"{f.id}: path {' -> '.join(f.path)} visits a super-peer twice")
        if parent is None:
            source = self.homes[stream.source]
            if f.origin != source:
                found.append(f"{f.id}: reads the raw stream at {f.origin}, away from its source {source}")
        else:
            if parent.stream != f.stream:
                found.append(f"{f.id}: parent {parent.id} carries another stream")
            if f.origin not in parent.path:
                found.append(f"{f.id}: parent {parent.id} is not available at {f.origin}")
        if not set(f.attrs) <= above:
            found.append(f"{f.id}: carries {sorted(set(f.attrs) - above)} its parent lacks")
        passes_on = f.panes is not None and parent is not None and parent.panes is not None  # pane rows, by cell
        lacking = not set(f.predicate.dims) <= above
        if lacking and not passes_on and not (parent is not None and parent.predicate.implies(f.predicate)):
            found.append(f"{f.id}: its filter needs attributes its parent lacks")
        if parent is not None and self.nested and not passes_on and not f.predicate.implies(parent.predicate):
            # not a loss by itself (deliveries are checked against the whole chain), but the planner
            # then believes the flow holds tuples its parent never forwards
            found.append(f"{f.id}: its predicate reaches past its parent {parent.id}'s")
        if f.trim and parent is not None and parent.trim:
            mine, theirs = _classes(f), _classes(parent)
            for a, boxes in mine.items():
                if a not in theirs or not self._implies(boxes, theirs[a]):
                    found.append(f"{f.id}: tuples carrying {a} here lack it in its parent {parent.id}")
        self.flow_ok[key] = found
        return found

    def _epoch(self, epoch) -> None:
        where = f"epoch [{epoch.start:g}, {epoch.end:g})"
        flows: dict[str, Flow] = {}
        chains: dict[str, tuple[Flow, ...]] = {}  # flow id -> its chain from the root's first child
        carried: dict[str, frozenset[str]] = {}  # flow id -> what its filters' readers find in it
        for f in epoch.flows:
            if f.id in flows:
                self.add(f"{where} {f.id}: duplicate flow id")
                continue
            if f.parent is None:
                parent, chain = None, ()
                above = frozenset(self.streams[f.stream].attribute_names) if f.stream in self.streams else frozenset()
            elif f.parent not in flows:
                self.add(f"{where} {f.id}: parent {f.parent} is not listed before it")
                continue
            else:
                parent = flows[f.parent]
                chain = chains[f.parent]
                above = carried[f.parent]
            for line in self._flow(f, parent, above):
                self.add(f"{where} {line}")
            flows[f.id] = f
            chains[f.id] = (*chain, f)
            carried[f.id] = above if f.trim else frozenset(f.attrs)
        delivered = [d.subscription for d in epoch.deliveries]
        active = self.sub_ids[(self.at <= epoch.start) & (self.until >= epoch.end)].tolist()  # sharing.epochs
        if self.plan.rejected:  # they receive nothing from their rejection on
            active = [s for s in active if self.rejected_from.get(s, math.inf) >= epoch.end]
        labels = self._labels(epoch.start)
        if labels is not None:  # no path, nothing delivered (docs/DYNAMICS.md)
            active = [s for s in active if connected(labels, self.source_home[s], self.homes[self.subs[s].peer])]
        if len(delivered) != len(active) or set(delivered) != set(active):
            lacking = sorted(set(active) - set(delivered))
            surplus = sorted(set(delivered) - set(active))
            twice = sorted({s for s in delivered if delivered.count(s) > 1}) if not (lacking or surplus) else []
            self.add(f"{where}: not delivered {lacking[:5]}, delivered while inactive {surplus[:5]}, twice {twice[:5]}")
        for d in epoch.deliveries:
            self._delivery(where, d, flows, chains, carried)

    def _delivery(
        self,
        where: str,
        d,
        flows: dict[str, Flow],
        chains: dict[str, tuple[Flow, ...]],
        carried: dict[str, frozenset[str]],
    ) -> None:
        flow = flows.get(d.flow) if d.flow is not None else None
        if flow is not None:
            # the same delivery over the same chain of flow objects as in an earlier epoch: checked there
            seen = (id(d), *map(id, chains[flow.id]))
            if seen in self.seen:
                return
            self.seen.add(seen)
        sub = self.subs.get(d.subscription)
        if sub is None:
            self.add(f"{where} delivery of unknown subscription {d.subscription}")
            return
        stream = self.streams[sub.stream]
        select = sub.query.attributes(stream.attribute_names)
        home = self.homes[sub.peer]
        if d.home != home or d.peer != sub.peer or tuple(d.attrs) != tuple(select):
            self.add(f"{where} {d.subscription}: wrong home, peer or attributes")
        if d.flow is None:
            if d.home != self.homes[stream.source] or d.predicate != sub.query.where:
                self.add(f"{where} {d.subscription}: raw delivery away from the source or unfiltered")
            return
        if flow is None or flow.stream != sub.stream or d.home not in flow.path:
            self.add(f"{where} {d.subscription}: flow {d.flow} is not available at {d.home}")
            return
        wanted = sub.query.where
        for f in chains[flow.id]:  # nothing the subscription needs is filtered away upstream
            if not self._implies(wanted, f.predicate):
                self.add(f"{where} {d.subscription}: its WHERE does not imply {f.id}'s predicate (tuples lost)")
            if f.trim:  # nor any attribute it selects, for its tuples
                classes = _classes(f)
                for a in select:
                    if a not in classes or not self._implies(wanted, classes[a]):
                        self.add(f"{where} {d.subscription}: its tuples cross {f.id} without attribute {a}")
        # unfiltered, when a flow of the chain keeps nothing else (a pane tree's root, docs/ACCOUNTING.md)
        passes = d.predicate.is_true() and any(self._implies(f.predicate, wanted) for f in chains[flow.id])
        if d.predicate != wanted and not passes:
            self.add(f"{where} {d.subscription}: the delivery's filter is not its WHERE")
        needed = set(select) | (set(wanted.dims) if d.predicate == wanted else set())
        if not needed <= carried[flow.id]:
            self.add(f"{where} {d.subscription}: {flow.id} lacks attributes {sorted(needed - carried[flow.id])}")


_CLASSES: dict[int, tuple[Flow, dict[str, Predicate]]] = {}


def _classes(flow: Flow) -> dict[str, Predicate]:
    """Per attribute of a flow of need classes, the tuples carrying it: the OR of its ``trim`` entries
    naming the attribute (cached per flow object while it lives)."""
    hit = _CLASSES.get(id(flow))
    if hit is not None and hit[0] is flow:
        return hit[1]
    boxes: dict[str, list] = {}
    for predicate, attrs in flow.trim:
        for a in attrs:
            boxes.setdefault(a, []).extend(predicate.boxes)
    classes = {a: Predicate.from_nonempty(b) for a, b in boxes.items()}
    if len(_CLASSES) > 100_000:
        _CLASSES.clear()
    _CLASSES[id(flow)] = (flow, classes)
    return classes
