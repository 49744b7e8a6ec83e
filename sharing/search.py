"""The search for an arriving subscription's least option: which flow to reuse or widen, where to tap it.

A subscription ``S`` (stream ``X``, WHERE ``q``, SELECT attributes ``A``) at super-peer ``home`` may tap
every flow ``F`` of ``X`` at every super-peer ``v`` of ``F``'s path but its origin (where tapping ``F`` is
tapping its parent), or the raw stream at its source:

* the tuples: the strategy's matcher says whether ``q => F.predicate``; if not, ``F``'s predicate is
  relaxed with the strategy's matching algorithm (Kuntschke & Kemper's HSR, HCR or EM, TUM-I0615), and
  each ancestor that no longer covers its widened child (by the same matcher's verdict) is relaxed in
  turn, up to the raw stream, which covers everything;
* the attributes: ``S`` joins the need class of each attribute of ``A`` on every flow from the raw stream
  down to ``F`` (:mod:`sharing.needs`): the tuples of ``q`` that none of those flows' subscriptions
  selecting ``a`` wanted take ``a`` from now on.

A flow tapped before its last super-peer is split there: the part upstream takes the change, the part
downstream goes on unchanged as its child.  Then a branch flow ``v -> home`` with predicate ``q`` follows
(none when ``v == home``).

An :class:`Option` is such a choice with the :class:`FlowChange` s it makes, ranked by the estimated
backbone bytes per second it adds (:mod:`sharing.needs` gives a flow's cost): ties go to the shorter
branch, then the smaller super-peer id, then the older flow.

The search returns the least option but prunes with lower bounds (docs/PLANNER.md): candidates are
visited nearest first and the search stops once the branch alone adds more bytes than the best option
found; a flow whose least possible change already loses is not matched at all.  The flows do not change
during one search, so an :class:`OptionSearch` remembers matcher verdicts, widenings, need-class gains and
bounds for its own duration: ancestors and taps along one flow share them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import NamedTuple

from matcher import Box, Predicate
from sharing.cost import CostModel, added_boxes
from sharing.limits import Admission
from sharing.state import RELATIVE_SLACK, ActiveSubscription, InstalledFlow, bits_of

Matcher = Callable[[Predicate, Predicate], tuple[bool, Predicate]]


class StrategyMatcher(NamedTuple):
    """A sharing strategy's matching algorithm: ``match(stream predicate, query predicate)`` returns
    ``(matched, relaxed)``; ``whole_predicate`` says it must see the stream predicate's every box."""

    match: Matcher
    whole_predicate: bool


def strategy_matcher(strategy: str) -> StrategyMatcher:
    """The matching algorithm of a sharing strategy.

    EM runs with the DFS split strategy: Kuntschke & Kemper (TUM-I0615, sections 3.5 and 6.2) find that
    DFS detects mismatches earliest, the common case when a new query is matched against many installed
    streams, with the least space, and index support does not pay off for the per-flow predicates the
    planner matches.  HCR may relax any box of the stream predicate (into an interval hull), so it sees the
    whole predicate; HSR and EM only append boxes, so they may see the boxes near the query alone.
    """
    from matcher import matching

    if strategy == "sharing-hsr":
        return StrategyMatcher(matching.match_hsr, False)
    if strategy == "sharing-hcr":
        return StrategyMatcher(matching.match_hcr, True)
    return StrategyMatcher(lambda p, q: matching.match_em(p, q, strategy="dfs"), False)


class FlowChange(NamedTuple):
    """What an option makes of one installed flow: the part of its path that takes the change is the first
    ``cut`` hops, the rest is split off unchanged (``cut == flow.hops``: no split); its predicate becomes
    ``predicate`` (selectivity ``sel``), and the need class of each attribute the subscription selects
    grows by ``gains`` (in attribute order)."""

    flow: InstalledFlow
    predicate: Predicate
    sel: float
    cut: int
    gains: tuple[float, ...]


class OptionRank(NamedTuple):
    """Smaller is better, compared field by field."""

    bytes_per_s: float  # added backbone bytes per second
    branch_hops: int
    tap: str
    flow_seq: int


class Option(NamedTuple):
    """Serve a subscription by tapping ``flow`` at ``tap`` after ``changes``, then a branch to its home
    along ``route`` (None: the route between them, docs/ACCOUNTING.md)."""

    rank: OptionRank
    tuple_hops: float  # added tuple-hops per second
    flow: InstalledFlow
    tap: str
    changes: tuple[FlowChange, ...]
    route: tuple[str, ...] | None = None

    @property
    def bytes_per_s(self) -> float:
        return self.rank.bytes_per_s


class _Step(NamedTuple):
    """One flow of the chain an option changes, independent of where the chain's first flow is tapped:
    its new predicate, the gains of its need classes, and what it adds per hop it takes the change on."""

    flow: InstalledFlow
    predicate: Predicate
    sel: float
    gains: tuple[float, ...]
    bytes_per_hop: float
    tuples_per_hop: float


class _Walk:
    """The chain of an option tapping one flow (:meth:`OptionSearch._chain`), walked so far: its steps,
    the bytes per second of the ancestors among them (``fixed``: each on its whole path), and where the walk
    goes on."""

    __slots__ = ("below", "done", "fixed", "node", "steps", "uncovered")

    def __init__(self, flow: InstalledFlow, where: Predicate):
        self.steps: list[_Step] = []
        self.fixed = 0.0
        self.node = flow
        self.uncovered = where  # the boxes the next flow must come to cover
        self.below: tuple[float, ...] | None = None  # the gains of the step before
        self.done = False


class OptionSearch:
    """One arriving subscription's search, and what it remembers while the flows stand still."""

    def __init__(self, sub: ActiveSubscription, cost: CostModel, matcher: StrategyMatcher):
        self.sub = sub
        self._cost = cost
        self._match = matcher.match
        self._whole_predicate = matcher.whole_predicate
        self._selects = bits_of(sub.select)
        rate = cost.rate(sub.stream)
        self._rate = rate
        self._header = cost.header_bytes
        # bytes per second per hop of each unit of selectivity the query adds: its tuples with its attributes
        self._per_sel = rate * (cost.header_bytes + 8 * len(self._selects))
        self._unit = self._per_sel * sub.sel  # a branch's bytes and tuples per second per hop
        self._unit_tuples = rate * sub.sel
        # keyed by the flow's seq: (flow, query boxes left uncovered) -> the matcher's verdict
        self._verdicts: dict[tuple[int, Predicate], tuple[bool, Predicate]] = {}
        # (flow, relaxed predicate) -> the boxes it adds and its selectivity
        self._widenings: dict[tuple[int, Predicate], tuple[Predicate, float]] = {}
        self._gains: dict[tuple[int, int], float] = {}  # (flow, attribute bit) -> sel(query outside its class)
        self._nearby: dict[tuple[int, Box], list[Box]] = {}  # (flow, box) -> the flow's boxes that may overlap it
        self._outside: dict[int, float] = {}  # flow -> lower bound of sel(query outside it)
        self._chains: dict[int, _Walk] = {}  # tapped flow -> the chain its options change, walked so far

    def best(
        self,
        root: InstalledFlow,
        available: dict[str, list[InstalledFlow]],
        nearest_first: Sequence[tuple[int, str]],
        source_hops: int,
        cap: float,
        admit: Admission | None = None,
        routes: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Option | None:
        """The least option among the flows of the subscription's stream: ``root`` the raw stream,
        ``source_hops`` the route hops from its source to the subscriber's super-peer, ``available`` the
        flows at each super-peer, ``nearest_first`` every super-peer as (route hops to the subscriber's
        super-peer, id), nearest first.  Every option but a branch from the raw stream at the source adds
        at most ``cap`` bytes per second.  With ``admit`` (the network limits,
        :class:`sharing.limits.Admission`), only the options it admits count (maybe with their branch
        rerouted), and None means that none fits; ``routes`` are then the routes from the subscriber's
        super-peer to every super-peer."""
        unit = self._unit
        # the raw stream first: its query-shipping cost bounds every other candidate from the start
        best = self._evaluate(root, root.origin, source_hops, None)
        if admit is not None:
            best = admit(best, None) if admit.reaches(root.origin, routes[root.origin]) else None
        for hops, node in nearest_first:
            flows = available.get(node)
            if not flows:
                continue
            if best is not None and (unit * hops, hops) > (best.rank.bytes_per_s, best.rank.branch_hops):
                break
            for flow in flows:
                if flow is root or node == flow.origin:  # tapping a flow at its origin is tapping its parent there
                    continue
                if admit is not None and not admit.reaches(node, routes[node]):  # no branch from here fits
                    break
                # the bytes of every tap along a flow follow from two numbers: skip the hopeless
                cut = flow.path.index(node)
                limit = best.rank.bytes_per_s * (1 + RELATIVE_SLACK) if best is not None else float("inf")
                if unit * hops + self._least_change(flow, cut) > limit:
                    continue
                if (
                    admit is not None
                    and self._outside[flow.seq] > 0
                    and not admit.may_grow(flow, cut, self._outside[flow.seq])
                ):
                    continue  # the flow itself cannot grow by what it lacks
                # the bytes tapping ``flow`` adds besides the branch: its own change per hop down to the
                # tap, and each ancestor's on its whole path (its children read it at its end)
                first = self._chain(flow, math.inf).steps
                spent = unit * hops + (first[0].bytes_per_hop * cut if first else 0.0)
                if spent + self._chain(flow, spent, limit).fixed > limit:
                    continue
                option = self._evaluate(flow, node, hops, best)
                if option is None or (best is not None and not option.rank < best.rank):
                    continue
                if option.bytes_per_s > cap * (1 + RELATIVE_SLACK):
                    continue
                if admit is not None:
                    option = admit(option, best)  # a branch routed around a hot link may cost more
                    if option is None or (best is not None and not option.rank < best.rank):
                        continue
                    if option.bytes_per_s > cap * (1 + RELATIVE_SLACK):
                        continue
                best = option
        return best

    def _chain(self, flow: InstalledFlow, spent: float = 0.0, limit: float = math.inf) -> _Walk:
        """The flows an option tapping ``flow`` changes, ``flow`` first, and how: each is relaxed when it
        no longer covers the query (``flow``) or its widened child (an ancestor), and each takes the query
        into the need classes of the attributes it selects.  The walk stops at the first flow that needs
        neither: its ancestors already cover it and hold the query's tuples in those classes.

        Past ``flow`` itself, the walk goes up only while ``spent`` plus the bytes of the ancestors walked
        (:attr:`_Walk.fixed`) stay within ``limit``: an option over more has lost already, and the flows
        near the raw stream, whose need classes are the largest to price, come last.  A later call with
        more room walks on."""
        walk = self._chains.get(flow.seq)
        if walk is None:
            walk = self._chains[flow.seq] = _Walk(flow, self.sub.where)
        while not walk.done and (not walk.steps or spent + walk.fixed <= limit):
            node = walk.node
            if node.id is None:
                walk.done = True
                break
            matched, relaxed = self._verdict(node, walk.uncovered)
            if matched:
                pred, sel, fresh = node.predicate, node.sel, Predicate.FALSE
            else:
                pred = relaxed
                fresh, sel = self._widening(node, relaxed)
            gains = self._class_gains(node, walk.below)
            if matched and not any(gains):
                walk.done = True
                break
            tuples = self._rate * (sel - node.sel)
            step = _Step(node, pred, sel, gains, self._header * tuples + 8 * self._rate * sum(gains), tuples)
            if walk.steps:
                walk.fixed += step.bytes_per_hop * node.hops
            walk.steps.append(step)
            walk.uncovered, walk.below, walk.node = fresh, gains, node.parent
        return walk

    def _class_gains(self, flow: InstalledFlow, below: tuple[float, ...] | None) -> tuple[float, ...]:
        """Per attribute the subscription selects, sel(q outside ``flow``'s need class of it); ``below``
        are the same for the flow under it on the chain (a class holds its children's: no larger there)."""
        gains = []
        for k, bit in enumerate(self._selects):
            if below is not None and below[k] == 0.0:
                gains.append(0.0)
                continue
            key = (flow.seq, bit)
            gain = self._gains.get(key)
            if gain is None:
                union = flow.unions.get(bit)
                gain = self.sub.sel if union is None else union.gain(self._cost, flow.stream, self.sub.where)
                if gain <= RELATIVE_SLACK * self.sub.sel:
                    gain = 0.0
                self._gains[key] = gain
            gains.append(gain)
        return tuple(gains)

    def _evaluate(self, flow: InstalledFlow, tap: str, hops: int, best: Option | None) -> Option | None:
        """The option of tapping ``flow`` at ``tap``, ``hops`` route hops from the subscriber's super-peer,
        or None when it cannot beat ``best``."""
        total = self._unit * hops  # the branch
        tuples = self._unit_tuples * hops
        limit = best.rank.bytes_per_s * (1 + RELATIVE_SLACK) if best is not None else float("inf")
        changes = []
        if flow.id is not None:
            cut = flow.path.index(tap)
            if total + self._least_change(flow, cut) > limit:
                return None
            chain = self._chain(flow).steps
            if not chain:  # nothing changes but where it is read
                changes.append(FlowChange(flow, flow.predicate, flow.sel, cut, (0.0,) * len(self._selects)))
            for step in chain:
                span = cut if step.flow is flow else step.flow.hops
                total += step.bytes_per_hop * span
                tuples += step.tuples_per_hop * span
                if total > limit:
                    return None
                changes.append(FlowChange(step.flow, step.predicate, step.sel, span, step.gains))
        return Option(OptionRank(total, hops, tap, flow.seq), tuples, flow, tap, tuple(changes))

    def _least_change(self, flow: InstalledFlow, cut: int) -> float:
        """A lower bound of the bytes per second that serving the subscription from ``flow`` tapped ``cut``
        hops downstream of its origin adds to ``flow``'s own.

        Any relaxation covers the query and the flow, so the selectivity grows at least by the
        probability of the query outside the flow, which is at least ``sel(box) - sum sel(box AND b)``
        over the flow's boxes ``b`` near a query box (Bonferroni), or ``sel(box)`` for a box missing the
        flow's hull; those tuples take every attribute the query selects.  The probability does not
        depend on ``cut``: it is computed once per flow.
        """
        outside = self._outside.get(flow.seq)
        if outside is None:
            outside = 0.0
            bounds = flow.box_bounds()
            for box in self.sub.where.boxes:
                if bounds.may_overlap(box):
                    bound = self._cost.outside_lower_bound(flow.stream, box, self._near(flow, box))
                else:
                    bound = self._cost.box_probability(flow.stream, box)
                outside = max(outside, bound)
            if outside <= RELATIVE_SLACK * flow.sel:
                outside = 0.0
            self._outside[flow.seq] = outside
        return self._per_sel * outside * cut

    def _near(self, flow: InstalledFlow, box: Box) -> list[Box]:
        """The boxes of ``flow``'s predicate that may overlap ``box``."""
        key = (flow.seq, box)
        near = self._nearby.get(key)
        if near is None:
            near = flow.box_bounds().overlapping(box)
            self._nearby[key] = near
        return near

    def _verdict(self, flow: InstalledFlow, uncovered: Predicate) -> tuple[bool, Predicate]:
        """The strategy's matcher on ``(flow.predicate, uncovered)``.

        EM and HSR only ever compare the query's boxes with the stream boxes overlapping them (a box
        disjoint from a query box neither covers nor overlaps any piece of it) and append what they add,
        so they run on the overlapping boxes alone and the appended boxes go after the whole predicate:
        the same verdict and relaxation as on the whole predicate.  HCR may relax any stream box, so it
        sees the whole predicate (its predicates never grow beyond their first consumer's box count).
        """
        key = (flow.seq, uncovered)
        cached = self._verdicts.get(key)
        if cached is not None:
            return cached
        if self._whole_predicate:
            verdict = self._match(flow.predicate, uncovered)
        else:
            near = Predicate({b: None for box in uncovered.boxes for b in self._near(flow, box)})
            matched, relaxed = self._match(near, uncovered)
            if matched:
                verdict = (True, flow.predicate)
            else:
                verdict = (False, Predicate(flow.predicate.boxes + relaxed.boxes[len(near.boxes) :]))
        self._verdicts[key] = verdict
        return verdict

    def _widening(self, flow: InstalledFlow, relaxed: Predicate) -> tuple[Predicate, float]:
        """The boxes ``relaxed`` adds to ``flow``'s predicate and its exact selectivity, by increment."""
        key = (flow.seq, relaxed)
        cached = self._widenings.get(key)
        if cached is None:
            fresh = added_boxes(relaxed, flow.predicate)
            near = partial(self._near, flow)
            cached = (fresh, flow.sel + self._cost.added_selectivity(flow.stream, fresh, near))
            self._widenings[key] = cached
        return cached
