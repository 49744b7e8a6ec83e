"""The planner's cost model: estimated backbone bytes and tuple-hops per second.

A flow of stream ``X`` keeping the tuples that satisfy predicate ``P``, carrying attributes ``A``, along a
path of ``h`` hops (links) costs

    rate(X) * sel(P) * (header_bytes + 8 * |A|) * h        bytes per second

where ``sel(P)`` is the probability that a tuple of ``X`` satisfies ``P``, and ``rate(X) * sel(P) * h``
tuple-hops per second.  ``sel`` is exact under the stream's per-attribute distributions (attributes
independent): the selectivity kernel of :mod:`matcher.selectivity` cuts the predicate's boxes, box by
box, against the boxes before them that overlap them, and the disjoint pieces' probabilities add.  This
model caches the kernel's results (per predicate, and per box and the boxes it is cut against) and prices
a widening by what it adds, cutting only the added boxes against the boxes near them.  A replayed stream's
attributes have the empirical distribution of the file's columns (the loader builds it).

The estimate is the expected value of what the simulator will count on the backbone for that flow
during one second: every tuple crossing a link costs its wire size once per link direction, and only
tuples satisfying ``P`` cross.  The raw stream at its source's super-peer crosses no link and costs 0.

The planner (:mod:`sharing.search`) ranks an option (reuse a flow, or widen one and branch from it) by the
tuple-hops per second of the *sum of the changes* it makes, the new branch flow plus, for every widened
flow, after minus before, and bounds its plans by their bytes.  Widening never lowers a flow's
selectivity, so a branch from super-peer ``v`` to the subscriber's super-peer adds at least
``rate * sel(q) * hops(v, home)``: the lower bound the planner uses to prune candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial

import numpy as np

from matcher import Box, Interval, Predicate
from matcher.aggregate import AggregateQuery
from matcher.distributions import Choice, Distribution, Empirical, Normal, Uniform
from matcher.selectivity import UniformSpace, box_probability, outside_probabilities, overlap_probability
from topologies.model import Scenario, tuple_bytes


class CostModel:
    """Selectivities (cached) and flow costs for one scenario's streams."""

    def __init__(self, scenario: Scenario):
        self.header_bytes = scenario.header_bytes
        self._rates = {s.id: float(s.rate) for s in scenario.streams}
        self._distributions = {
            s.id: {a.name: _Remembered(a.distribution) for a in s.attributes if a.distribution is not None}
            for s in scenario.streams
        }
        self._uniform = {
            s.id: UniformSpace.of({a.name: a.distribution for a in s.attributes if a.distribution is not None})
            for s in scenario.streams
        }
        # streams whose every attribute has a distribution: their boxes need no trimming (``_known``)
        self._complete = {s.id for s in scenario.streams if all(a.distribution is not None for a in s.attributes)}
        self._selectivity: dict[tuple[str, Predicate], float] = {}
        self._raw = {s.id: {a.name: a.distribution for a in s.attributes} for s in scenario.streams}
        self._box_selectivity: dict[tuple[str, Box], float] = {}
        # (stream, box, boxes cut from it) -> the probabilities of the pieces left: narrowing a flow folds
        # its consumers again after each departure, cutting the same boxes against the same neighbours
        self._pieces: dict[tuple[str, Box, tuple[Box, ...]], list[float]] = {}
        self._overlaps: dict[tuple[str, Box, Box], float] = {}

    def rate(self, stream: str) -> float:
        return self._rates[stream]

    def tuple_hops(self, stream: str, selectivity: float, hops: int) -> float:
        """Tuples per second a flow makes cross links (see the module docstring): what options are ranked by."""
        return self._rates[stream] * selectivity * hops

    def selectivity(self, stream: str, predicate: Predicate) -> float:
        """P(a tuple of ``stream`` satisfies ``predicate``), cached per (stream, predicate)."""
        key = (stream, predicate)
        cached = self._selectivity.get(key)
        if cached is None:
            cached = self._compute(stream, predicate)
            self._selectivity[key] = cached
        return cached

    def added_selectivity(self, stream: str, added: Predicate, near: Callable[[Box], list[Box]]) -> float:
        """sel(before OR added) - sel(before): the probability of the points of ``added`` outside ``before``,
        given ``near(box)``: the boxes of ``before`` that may overlap ``box`` (a superset is fine).

        Each added box is cut against the boxes of ``before`` that overlap it and against the added boxes
        ahead of it, so all the pieces left are pairwise disjoint and their probabilities add: the work
        grows with the boxes near ``added``, never with the whole of ``before``.
        """
        dists = self._distributions[stream]
        terms: list[float] = []
        boxes = [self._known(stream, b) for b in added.boxes]
        # the added boxes ahead of each that may overlap it: by their bounds when there are many (a
        # whole predicate of hundreds of boxes, as need classes are)
        rows = _bounds_rows(tuple(boxes), Predicate(boxes).dims) if len(boxes) > _SCAN_BELOW else None
        for k, box in enumerate(boxes):
            others = [self._known(stream, b) for b in near(box)]
            if rows is None:
                others += [b for b in boxes[:k] if b.overlaps(box)]
            else:
                lo, hi = rows
                close = ((lo[:k] <= hi[k]) & (hi[:k] >= lo[k])).all(axis=1)
                # the boxes only touching it (closed ends in the filter) weigh nothing in the cuts
                others += [boxes[i] for i in np.flatnonzero(close)]
            key = (stream, box, tuple(others))
            pieces = self._pieces.get(key)
            if pieces is None:
                space = self._uniform[stream]
                if space is not None and others:
                    pieces = space.outside_probabilities(box, others)
                else:
                    pieces = outside_probabilities(box, others, dists, partial(self._overlap, stream))
                self._pieces[key] = pieces
            terms.extend(pieces)
        return math.fsum(terms)

    def uniform_space(self, stream: str) -> UniformSpace | None:
        """The stream's attributes as the compiled kernel's space, when every one is uniform
        (:class:`matcher.selectivity.UniformSpace`)."""
        return self._uniform[stream]

    def added_selectivity_rows(self, stream: str, added: Predicate, before: np.ndarray) -> float:
        """:meth:`added_selectivity` where every box of ``before`` is given, in order, as a row of the
        stream's :meth:`uniform_space`: the kernel weighs them all itself (those that miss a box weigh
        nothing), so no search for the boxes near it is needed."""
        space = self._uniform[stream]
        boxes = added.boxes
        partials = [space.outside_partials(box, before, boxes[:k]) for k, box in enumerate(boxes)]
        return math.fsum(np.concatenate(partials).tolist()) if partials else 0.0

    def _overlap(self, stream: str, box: Box, other: Box) -> float:
        """P(a tuple of ``stream`` lies in ``box`` and ``other``), cached per pair: a subscription's box
        meets the same boxes in the need classes of many flows."""
        key = (stream, box, other)
        cached = self._overlaps.get(key)
        if cached is None:
            cached = self._overlaps[key] = overlap_probability(box, other, self._distributions[stream])
        return cached

    def box_probability(self, stream: str, box: Box) -> float:
        """P(a tuple of ``stream`` lies in ``box``), cached per box."""
        key = (stream, box)
        cached = self._box_selectivity.get(key)
        if cached is None:
            cached = box_probability(self._known(stream, box), self._distributions[stream])
            self._box_selectivity[key] = cached
        return cached

    def outside_lower_bound(self, stream: str, box: Box, near: list[Box]) -> float:
        """A lower bound of P(``box`` and none of ``near``): ``sel(box) - sum sel(box AND b)``, or 0."""
        bound = self.box_probability(stream, box)
        box = self._known(stream, box)
        for other in near:
            bound -= self._overlap(stream, box, self._known(stream, other))
            if bound <= 0.0:
                return 0.0
        return bound

    def _known(self, stream: str, box: Box) -> Box:
        """``box`` without its dimensions that have no distribution (unconstrained, see the module docstring)."""
        if stream in self._complete:
            return box
        dists = self._distributions[stream]
        if all(d in dists for d in box.dims):
            return box
        return Box((d, iv) for d, iv in box.items() if d in dists)

    def tuple_bytes(self, n_attributes: int) -> int:
        return tuple_bytes(self.header_bytes, n_attributes)

    def flow_cost(self, stream: str, selectivity: float, n_attributes: int, hops: int) -> float:
        """Bytes per second a flow whose tuples all carry ``n_attributes`` adds to the backbone."""
        return self._rates[stream] * selectivity * self.tuple_bytes(n_attributes) * hops

    def bundle_cost(self, stream: str, selectivity: float, attribute_sel: float, hops: int) -> float:
        """Bytes per second of a flow of need classes (sharing.needs): each tuple its header, each
        attribute as often as its need class holds a tuple (``attribute_sel``: the sum of their
        selectivities)."""
        return self._rates[stream] * (self.header_bytes * selectivity + 8 * attribute_sel) * hops

    def attribute_sel(self, flow, sel: float) -> float:
        """The expected number of attributes a tuple of ``flow``'s stream takes on it (a
        :class:`sharing.plan.Flow` of selectivity ``sel``): per attribute, the selectivity of the OR of the
        ``trim`` entries carrying it, or its attributes on every tuple it keeps."""
        if not flow.trim:
            return sel * len(flow.attrs)
        carrying: dict[str, list] = {}
        for predicate, attrs in flow.trim:
            for a in attrs:
                carrying.setdefault(a, []).extend(predicate.boxes)
        return sum(self.selectivity(flow.stream, Predicate(boxes)) for boxes in carrying.values())

    def plan_flow_cost(self, flow) -> float:
        """Estimated bytes per second of a :class:`sharing.plan.Flow` (trimmed or not)."""
        sel = self.selectivity(flow.stream, flow.predicate)
        return self.bundle_cost(flow.stream, sel, self.attribute_sel(flow, sel), len(flow.path) - 1)

    def records_per_s(self, query: AggregateQuery) -> float:
        """The records per second an aggregate subscription's windows emit (docs/ACCOUNTING.md, "Records"),
        HAVING aside: a time window of ``size`` holds about ``m = rate * sel * size`` input tuples, and
        emits one record per distinct group among them, every ``slide``; a count window emits one record
        per ``slide`` tuples of its group.  The distinct groups among ``m`` tuples are expected under the
        group attributes' distributions (independent): ``sum over values v of 1 - (1 - p(v))^m``, every
        tuple its own group where an attribute is continuous or has no distribution."""
        stream = query.stream
        tuples = self._rates[stream] * self.selectivity(stream, query.where)
        window = query.window
        if window.tuples:
            return tuples / float(window.slide)
        m = tuples * float(window.size)
        return _distinct(m, [self._raw[stream].get(g) for g in query.groups]) / float(window.slide)

    def pane_rows_per_s(self, stream: str, where: Predicate, groups: tuple[str, ...], length: float) -> float:
        """The pane rows per second of a pane flow (docs/ACCOUNTING.md, "Panes"): a pane of ``length``
        seconds emits one row per distinct group among its tuples, estimated as a time window's records."""
        m = self._rates[stream] * self.selectivity(stream, where) * length
        return _distinct(m, [self._raw[stream].get(g) for g in groups]) / length

    def record_cost(self, query: AggregateQuery, hops: int) -> float:
        """Bytes per second of an aggregate subscription's records along ``hops`` links."""
        return self.records_per_s(query) * self.tuple_bytes(1 + query.record_values()) * hops

    def ships_records(self, query: AggregateQuery, n_attributes: int) -> bool:
        """Whether an aggregate subscription's records are expected to weigh fewer bytes than its input
        (the tuples of its WHERE with its ``n_attributes`` input attributes), link for link."""
        sel = self.selectivity(query.stream, query.where)
        return self.record_cost(query, 1) < self.flow_cost(query.stream, sel, n_attributes, 1)

    def _compute(self, stream: str, predicate: Predicate) -> float:
        # the pieces matcher.selectivity.selectivity adds up (it then clamps the sum to 1), taken through
        # the cache the widenings share: a predicate and its widenings are cut against the same boxes
        return self.added_selectivity(stream, predicate, lambda box: [])


class _Remembered:
    """A distribution whose interval probabilities are computed once: the planner asks for the same
    intervals (its subscriptions' bounds, cut against each other) again and again."""

    __slots__ = ("_known", "distribution")

    def __init__(self, distribution: Distribution):
        self.distribution = distribution
        self._known: dict[Interval, float] = {}

    def prob(self, iv: Interval) -> float:
        p = self._known.get(iv)
        if p is None:
            p = self._known[iv] = self.distribution.prob(iv)
        return p


class BoxBounds:
    """A predicate's boxes as numeric bounds, to find fast which of them may overlap a given box.

    Open ends count as closed, so the filter may keep a box that only touches the given one but never
    drops one that overlaps it; callers then compute exactly on the few boxes kept.
    """

    def __init__(self, predicate: Predicate):
        self.predicate = predicate
        self.dims = predicate.dims
        self.lo, self.hi = _bounds_rows(predicate.boxes, self.dims)
        # the hull of all boxes, per dimension, as plain floats: one test rules out most boxes at once
        self._hull = _hull(self.lo, self.hi, self.dims)

    def may_overlap(self, box: Box) -> bool:
        """False when ``box`` surely overlaps no box of the predicate (it misses their hull)."""
        if not self.predicate.boxes:
            return False
        hull = self._hull
        for d, iv in box.items():
            ends = hull.get(d)
            if ends is not None and (ends[0] > iv.hi or ends[1] < iv.lo):
                return False
        return True

    def widened(self, predicate: Predicate) -> BoxBounds:
        """The bounds of ``predicate``, reusing these rows when it only appends boxes (HSR, EM)."""
        old = self.predicate.boxes
        if predicate.boxes[: len(old)] != old:
            return BoxBounds(predicate)
        return self.appended(predicate.boxes[len(old) :], predicate)

    def appended(self, fresh: tuple[Box, ...], predicate: Predicate) -> BoxBounds:
        """The bounds of ``predicate``, which is this one's predicate with the boxes ``fresh`` appended."""
        if any(d not in self.dims for b in fresh for d in b.dims):  # a dimension no box constrained before
            return BoxBounds(predicate)
        wider = BoxBounds.__new__(BoxBounds)
        wider.predicate, wider.dims = predicate, self.dims
        if not fresh:
            wider.lo, wider.hi, wider._hull = self.lo, self.hi, self._hull
            return wider
        lo, hi = _bounds_rows(fresh, self.dims)
        wider.lo, wider.hi = np.vstack([self.lo, lo]), np.vstack([self.hi, hi])
        more = _hull(lo, hi, self.dims)
        wider._hull = {d: (min(a, more[d][0]), max(b, more[d][1])) for d, (a, b) in self._hull.items()}
        return wider

    def overlapping(self, box: Box) -> list[Box]:
        boxes = self.predicate.boxes
        if len(boxes) <= _SCAN_BELOW:
            items = box.items()
            return [b for b in boxes if all(_touch(iv, b.get(d)) for d, iv in items)]
        keep = np.ones(len(boxes), dtype=bool)
        for d, iv in box.items():
            if d in self.dims:  # a dimension no box of the predicate constrains overlaps everywhere
                j = self.dims.index(d)
                keep &= (self.lo[:, j] <= iv.hi) & (self.hi[:, j] >= iv.lo)
        return [boxes[i] for i in np.flatnonzero(keep)]


_SCAN_BELOW = 12  # below this many boxes a plain loop beats building numpy masks


def _touch(a: Interval, b: Interval) -> bool:
    """The closures of ``a`` and ``b`` meet (the filter's test: open ends count as closed)."""
    return a.lo <= b.hi and b.lo <= a.hi


def _hull(lo: np.ndarray, hi: np.ndarray, dims: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    return {d: (float(lo[:, j].min()), float(hi[:, j].max())) for j, d in enumerate(dims)}


def _bounds_rows(boxes: tuple[Box, ...], dims: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    column = {d: j for j, d in enumerate(dims)}
    lo = np.full((len(boxes), len(dims)), -np.inf)
    hi = np.full((len(boxes), len(dims)), np.inf)
    for i, box in enumerate(boxes):
        for d, iv in box.items():
            lo[i, column[d]] = iv.lo
            hi[i, column[d]] = iv.hi
    return lo, hi


def added_boxes(widened: Predicate, before: Predicate) -> Predicate:
    """The boxes of ``widened`` (a relaxation of ``before``) that ``before`` lacks.

    ``widened`` is covered by ``before`` OR these boxes, so matching or costing a widening only needs
    them, not the whole widened predicate.
    """
    old = before.boxes
    if widened.boxes[: len(old)] == old:  # HSR and EM append to the stream predicate
        return Predicate(widened.boxes[len(old) :])
    kept = set(old)  # HCR replaces relaxed boxes in place
    return Predicate(b for b in widened.boxes if b not in kept)


def epoch_cost(model: CostModel, flows: Iterable) -> float:
    """Estimated backbone bytes per second of an epoch's flows (``sharing.plan.Flow`` objects)."""
    return sum(model.plan_flow_cost(f) for f in flows)


MAX_GROUP_VALUES = 100_000  # group values enumerated for the distinct-group estimate; beyond, taken as uniform


def _values(distribution: Distribution | None) -> np.ndarray | None:
    """The probabilities of a discrete distribution's values (None: continuous, or unknown); a sample's
    (a replayed column) are its distinct values' shares."""
    if isinstance(distribution, Empirical):
        return np.unique(distribution.values, return_counts=True)[1] / len(distribution.values)
    if isinstance(distribution, Choice):
        return np.array([distribution.prob(Interval(v, v, True, True)) for v in distribution.values])
    if isinstance(distribution, Uniform | Normal) and distribution.integer:
        if isinstance(distribution, Uniform):
            lo, hi = math.ceil(distribution.lo), math.floor(distribution.hi)
        else:
            spread = 8 * distribution.sigma + 1
            lo, hi = math.floor(distribution.mu - spread), math.ceil(distribution.mu + spread)
        if hi - lo + 1 > MAX_GROUP_VALUES:
            return np.full(MAX_GROUP_VALUES, 1.0 / MAX_GROUP_VALUES)
        return np.array([distribution.prob(Interval(k, k, True, True)) for k in range(lo, hi + 1)])
    return None


def _distinct(m: float, distributions: list[Distribution | None]) -> float:
    """The expected number of distinct groups among ``m`` tuples (:meth:`CostModel.records_per_s`);
    no group attribute: one group, present when a tuple is."""
    probabilities = np.ones(1)
    for distribution in distributions:
        values = _values(distribution)
        if values is None:
            return m
        probabilities = np.outer(probabilities, values).ravel()
        if len(probabilities) > MAX_GROUP_VALUES:  # as many equally likely values
            probabilities = np.full(MAX_GROUP_VALUES, 1.0 / MAX_GROUP_VALUES)
    probabilities = probabilities[probabilities > 0]
    return float(np.sum(-np.expm1(m * np.log1p(-np.minimum(probabilities, 1 - 1e-12)))))
