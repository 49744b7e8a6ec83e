"""The search for an arriving subscription's least option: which flow to reuse or widen, where to tap it.

A subscription ``S`` (stream ``X``, WHERE ``q``, SELECT attributes ``A``) at super-peer ``home`` may tap
every flow ``F`` of ``X`` at every super-peer ``v`` of ``F``'s path but its origin (where tapping ``F`` is
tapping its parent), or the raw stream at its source:

* reuse: the strategy's matcher says ``q => F.predicate`` and ``F`` carries the attributes ``S`` needs
  (``A``, plus ``q``'s attributes unless ``F`` holds exactly ``q``'s result);
* widen: relax ``F.predicate`` with the strategy's matching algorithm (Kuntschke & Kemper's HSR, HCR or
  EM, TUM-I0615), add the missing attributes, and propagate upward: each ancestor that no longer covers
  its widened child (by the same matcher's verdict) is relaxed in turn, up to the raw stream, which
  covers everything.  A widened flow is split where its new consumer attaches: only the part upstream of
  ``v`` (of the child's origin, for an ancestor) widens; downstream, the old flow goes on unchanged as a
  child of the widened part, so consumers further down do not receive the widening.

Then a branch flow ``v -> home`` with predicate ``q`` and attributes ``A`` (none when ``v == home``).
An :class:`Option` is such a choice with the :class:`FlowChange` s it makes, ranked by the estimated
tuple-hops per second it adds (:mod:`sharing.cost`): ties go to the shorter branch, then the smaller
super-peer id, then the older flow.

The search returns the least option but prunes with lower bounds (docs/PLANNER.md): candidates are
visited nearest first and the search stops once the branch alone adds more tuple-hops than the best
option found; a flow whose least possible change already loses is not matched at all.  The flows do not
change during one search, so an :class:`OptionSearch` remembers matcher verdicts, widenings and bounds
for its own duration: ancestors and taps along one flow share them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import NamedTuple

from matcher import Box, Predicate
from sharing.cost import CostModel, added_boxes
from sharing.limits import Admission
from sharing.state import RELATIVE_SLACK, ActiveSubscription, AttributeMasks, InstalledFlow, holds_exactly

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
    ``cut`` hops, the rest is split off unchanged (``cut == flow.hops``: no split)."""

    flow: InstalledFlow
    predicate: Predicate
    sel: float
    attrs: int
    full_needs: int
    cut: int


class OptionRank(NamedTuple):
    """Smaller is better, compared field by field."""

    tuple_hops: float  # added tuple-hops per second
    branch_hops: int
    tap: str
    flow_seq: int


class Option(NamedTuple):
    """Serve a subscription by tapping ``flow`` at ``tap`` after ``changes``, then a branch to its home
    along ``route`` (None: the route between them, docs/ACCOUNTING.md)."""

    rank: OptionRank
    bytes_per_s: float  # added
    flow: InstalledFlow
    tap: str
    changes: tuple[FlowChange, ...]
    route: tuple[str, ...] | None = None


class OptionSearch:
    """One arriving subscription's search, and what it remembers while the flows stand still."""

    def __init__(self, sub: ActiveSubscription, cost: CostModel, masks: AttributeMasks, matcher: StrategyMatcher):
        self.sub = sub
        self._cost = cost
        self._masks = masks
        self._match = matcher.match
        self._whole_predicate = matcher.whole_predicate
        # keyed by the flow's seq: (flow, query boxes left uncovered) -> the matcher's verdict
        self._verdicts: dict[tuple[int, Predicate], tuple[bool, Predicate]] = {}
        # (flow, relaxed predicate) -> the boxes it adds and its selectivity
        self._widenings: dict[tuple[int, Predicate], tuple[Predicate, float]] = {}
        self._nearby: dict[tuple[int, Box], list[Box]] = {}  # (flow, box) -> the flow's boxes that may overlap it
        self._outside: dict[int, float] = {}  # flow -> lower bound of sel(query outside it)
        self._terms: dict[int, tuple[float, float]] = {}  # flow -> its tuple_terms

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
        super-peer, id), nearest first.  Every option but reusing the raw stream adds at most ``cap`` bytes
        per second.  With ``admit`` (the network limits, :class:`sharing.limits.Admission`), only the
        options it admits count (maybe with their branch rerouted), and None means that none fits;
        ``routes`` are then the routes from the subscriber's super-peer to every super-peer."""
        sub = self.sub
        unit = self._cost.tuple_hops(sub.stream, sub.sel, 1)  # a branch's tuple-hops per hop
        # the raw stream first: its query-shipping cost bounds every other candidate from the start
        best = self._evaluate(root, root.origin, source_hops, None)
        if admit is not None:
            best = admit(best, None) if admit.reaches(root.origin, routes[root.origin]) else None
        for hops, node in nearest_first:
            flows = available.get(node)
            if not flows:
                continue
            if best is not None and (unit * hops, hops) > (best.rank.tuple_hops, best.rank.branch_hops):
                break
            for flow in flows:
                if flow is root or node == flow.origin:  # tapping a flow at its origin is tapping its parent there
                    continue
                if admit is not None and not admit.reaches(node, routes[node]):  # no branch from here fits
                    break
                # the tuple-hops of every tap along a flow follow from two numbers: skip the hopeless
                cut = flow.path.index(node)
                limit = best.rank.tuple_hops * (1 + RELATIVE_SLACK) if best is not None else float("inf")
                if unit * hops + self._least_change(flow, cut) > limit:
                    continue
                if (
                    admit is not None
                    and self._outside[flow.seq] > 0
                    and not admit.may_grow(flow, cut, self._outside[flow.seq])
                ):
                    continue  # the flow itself cannot grow by what it lacks
                per_hop, fixed = self._tuple_terms(flow)
                if unit * hops + per_hop * cut + fixed > limit:
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

    def _tuple_terms(self, flow: InstalledFlow) -> tuple[float, float]:
        """The tuple-hops/s tapping ``flow`` adds besides the branch, as (per hop between ``flow``'s origin
        and the tap, fixed): only relaxed flows add tuples, and which flows relax (``flow`` and the chain
        of ancestors that no longer cover their widened child) does not depend on the tap, nor does
        where an ancestor is cut (at its child's origin)."""
        terms = self._terms.get(flow.seq)
        if terms is None:
            per_hop = fixed = 0.0
            node, at, uncovered = flow, None, self.sub.where
            while node.id is not None:
                matched, relaxed = self._verdict(node, uncovered)
                if matched:
                    break
                uncovered, sel = self._widening(node, relaxed)
                if at is None:
                    per_hop = self._cost.tuple_hops(flow.stream, sel - node.sel, 1)
                else:
                    fixed += self._cost.tuple_hops(flow.stream, sel - node.sel, node.path.index(at) or node.hops)
                node, at = node.parent, node.origin
            terms = self._terms[flow.seq] = (per_hop, fixed)
        return terms

    def _evaluate(self, flow: InstalledFlow, tap: str, hops: int, best: Option | None) -> Option | None:
        """The option of tapping ``flow`` at ``tap``, ``hops`` route hops from the subscriber's super-peer,
        or None when it cannot beat ``best``.

        A flow that must change is split where its new consumer attaches (``tap`` for ``flow``, the
        child's origin for an ancestor): only the part upstream of that super-peer is widened; the part
        downstream, when consumers sit there, stays as it was, as a child flow filtering by the old
        predicate (so the upstream part also carries that predicate's attributes).
        """
        sub = self.sub
        cost = self._cost
        stream = sub.stream
        limit = best.rank.tuple_hops * (1 + RELATIVE_SLACK) if best is not None else float("inf")
        total = cost.tuple_hops(stream, sub.sel, hops)  # the branch
        added = cost.flow_cost(stream, sub.sel, sub.select.bit_count(), hops)
        changes: list[FlowChange] = []
        # The consumer added to ``node`` (first the branch flow or the delivery, then the widened child):
        # its predicate and selectivity, the part of it ``node`` may not cover yet (``node`` covered the
        # child before it was widened), the attributes it needs and would need if it had to filter.
        child_pred, child_sel, uncovered = sub.where, sub.sel, sub.where
        child_attrs, child_full = sub.select, sub.select | sub.where_attrs
        if tap != sub.home:  # a branch flow always filters by its predicate: it needs WHERE's attributes
            child_attrs = child_full
        node, at = flow, tap
        if flow.id is not None and total + self._least_change(flow, flow.path.index(tap)) > limit:
            return None
        while node.id is not None:
            cut = node.path.index(at) or node.hops  # a child at its parent's origin: widen the parent whole
            matched, relaxed = self._verdict(node, uncovered)
            if matched:
                pred, sel, fresh = node.predicate, node.sel, Predicate.FALSE
                need = child_attrs
                if not holds_exactly(pred, sel, child_pred, child_sel):
                    need |= child_full
                attrs, full = node.attrs | need, node.full_needs | child_full
            else:
                pred = relaxed
                fresh, sel = self._widening(node, relaxed)
                # a relaxed predicate no longer holds any consumer's exact result: all need their filters
                full = node.full_needs | child_full
                attrs = full
            if matched and attrs == node.attrs:
                if full != node.full_needs:
                    changes.append(FlowChange(node, pred, sel, attrs, full, node.hops))
                break
            if cut < node.hops:  # the downstream part keeps filtering by the old predicate
                kept = node.attrs | self._dims_mask(node, node.predicate, Predicate.FALSE)
                attrs, full = attrs | kept, full | kept
            # linear in hops: the downstream part costs what it cost before
            total += cost.tuple_hops(stream, sel - node.sel, cut)
            added += cost.flow_cost(stream, sel, attrs.bit_count(), cut) - cost.flow_cost(
                stream, node.sel, node.attrs.bit_count(), cut
            )
            if total > limit:
                return None
            changes.append(FlowChange(node, pred, sel, attrs, full, cut))
            child_pred, child_sel, uncovered = pred, sel, fresh
            child_full = attrs | self._dims_mask(node, pred, fresh)
            child_attrs = child_full  # flows filter by their predicate even when it equals the parent's
            node, at = node.parent, node.origin
        return Option(OptionRank(total, hops, tap, flow.seq), added, flow, tap, tuple(changes))

    def _least_change(self, flow: InstalledFlow, cut: int) -> float:
        """A lower bound of the tuple-hops per second that serving the subscription from ``flow`` tapped
        ``cut`` hops downstream of its origin adds to ``flow``'s own.

        Any relaxation covers the query and the flow, so the selectivity grows at least by the
        probability of the query outside the flow, which is at least ``sel(box) - sum sel(box AND b)``
        over the flow's boxes ``b`` near a query box (Bonferroni), or ``sel(box)`` for a box missing the
        flow's hull.  The bound does not depend on ``cut``: it is computed once per flow.
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
        return self._cost.tuple_hops(flow.stream, outside, cut)

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

    def _dims_mask(self, flow: InstalledFlow, pred: Predicate, fresh: Predicate) -> int:
        """The attributes ``pred`` (``flow``'s predicate, or its relaxation adding ``fresh``) constrains."""
        masks = self._masks
        if flow.where_dims is None or flow.where_dims[0] is not flow.predicate:
            flow.where_dims = (flow.predicate, masks.mask(flow.stream, flow.predicate.dims))
        if pred is flow.predicate:
            return flow.where_dims[1]
        if pred.boxes[: len(flow.predicate.boxes)] == flow.predicate.boxes:  # appended: the union
            return flow.where_dims[1] | masks.mask(flow.stream, fresh.dims)
        return masks.mask(flow.stream, pred.dims)  # HCR's hulls may drop a dimension
