"""The planner's cost model: estimated backbone bytes per second.

A flow of stream ``X`` keeping the tuples that satisfy predicate ``P``, carrying attributes ``A``, along a
path of ``h`` hops (links) costs

    rate(X) * sel(P) * (header_bytes + 8 * |A|) * h        bytes per second

where ``sel(P)`` is the probability that a tuple of ``X`` satisfies ``P``.  It is exact under the stream's
per-attribute distributions (attributes independent, SPEC section 1), computed by
:func:`matcher.selectivity.selectivity` over the predicate's disjoint decomposition.  A replayed stream
has no declared distribution; its dimensions count as unconstrained (probability 1), an upper bound.

The estimate is the expected value of what the simulator will count on the backbone for that flow
during one second: every tuple crossing a link costs its wire size once per link direction, and only
tuples satisfying ``P`` cross.  The raw stream at its source's super-peer crosses no link and costs 0.

The planner scores an option (reuse a flow, or widen one and branch from it) by the *sum of the changes*
it makes: the new branch flow's cost plus, for every widened flow, its cost after minus its cost before.
Widening never lowers a flow's cost (predicates only relax, attribute sets only grow), so a branch from
super-peer ``v`` to the subscriber's super-peer costs at least ``rate * sel(q) * (header + 8*|SELECT|) *
hops(v, home)``: the lower bound the planner uses to prune candidates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from matcher import Box, Predicate
from topologies.model import Scenario


class CostModel:
    """Selectivities (cached) and flow costs for one scenario's streams."""

    def __init__(self, scenario: Scenario):
        self.header_bytes = scenario.header_bytes
        self._rates = {s.id: float(s.rate) for s in scenario.streams}
        self._distributions = {
            s.id: {a.name: a.distribution for a in s.attributes if a.distribution is not None} for s in scenario.streams
        }
        self._selectivity: dict[tuple[str, Predicate], float] = {}

    def rate(self, stream: str) -> float:
        return self._rates[stream]

    def selectivity(self, stream: str, predicate: Predicate) -> float:
        """P(a tuple of ``stream`` satisfies ``predicate``), cached per (stream, predicate)."""
        key = (stream, predicate)
        cached = self._selectivity.get(key)
        if cached is None:
            cached = self._compute(stream, predicate)
            self._selectivity[key] = cached
        return cached

    def added_selectivity(self, stream: str, added: Predicate, before: BoxBounds) -> float:
        """sel(before OR added) - sel(before): the probability of the points of ``added`` outside ``before``.

        Only the boxes of ``before`` that overlap ``added`` can take points away, so the exact difference
        is computed against those alone.
        """
        if added.is_empty():
            return 0.0
        near = {b: None for box in added.boxes for b in before.overlapping(box)}  # ordered, no duplicates
        outside = added.minus(Predicate(near))
        if len(added.boxes) == 1:  # the pieces of one box are disjoint: add their probabilities
            dists = self._distributions[stream]
            return math.fsum(
                math.prod(dists[d].prob(iv) for d, iv in box.items() if d in dists) for box in outside.boxes
            )
        return self._compute(stream, outside)

    def tuple_bytes(self, n_attributes: int) -> int:
        return self.header_bytes + 8 * n_attributes

    def flow_cost(self, stream: str, selectivity: float, n_attributes: int, hops: int) -> float:
        """Bytes per second a flow adds to the backbone (see the module docstring)."""
        return self._rates[stream] * selectivity * self.tuple_bytes(n_attributes) * hops

    def cost_of(self, stream: str, predicate: Predicate, n_attributes: int, hops: int) -> float:
        return self.flow_cost(stream, self.selectivity(stream, predicate), n_attributes, hops)

    def _compute(self, stream: str, predicate: Predicate) -> float:
        from matcher.selectivity import selectivity

        dists = self._distributions[stream]
        # dimensions without a distribution (replayed streams) are dropped: unconstrained, an upper bound
        known = Predicate(Box((d, iv) for d, iv in b.items() if d in dists) for b in predicate.boxes)
        return float(selectivity(known, dists))


class BoxBounds:
    """A predicate's boxes as numeric bounds, to find fast which of them may overlap a given box.

    Open ends count as closed, so the filter may keep a box that only touches the given one but never
    drops one that overlaps it; callers then compute exactly on the few boxes kept.
    """

    def __init__(self, predicate: Predicate, rows: tuple[np.ndarray, np.ndarray] | None = None):
        self.predicate = predicate
        self.dims = predicate.dims
        self.lo, self.hi = rows if rows is not None else _bounds_rows(predicate.boxes, self.dims)

    def widened(self, predicate: Predicate) -> BoxBounds:
        """The bounds of ``predicate``, reusing these rows when it only appends boxes (HSR, EM)."""
        old = self.predicate.boxes
        if predicate.dims != self.dims or predicate.boxes[: len(old)] != old:
            return BoxBounds(predicate)
        lo, hi = _bounds_rows(predicate.boxes[len(old) :], self.dims)
        return BoxBounds(predicate, (np.vstack([self.lo, lo]), np.vstack([self.hi, hi])))

    def overlapping(self, box: Box) -> list[Box]:
        keep = np.ones(len(self.predicate.boxes), dtype=bool)
        for d, iv in box.items():
            if d in self.dims:  # a dimension no box of the predicate constrains overlaps everywhere
                j = self.dims.index(d)
                keep &= (self.lo[:, j] <= iv.hi) & (self.hi[:, j] >= iv.lo)
        boxes = self.predicate.boxes
        return [boxes[i] for i in np.flatnonzero(keep)]


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
    return sum(model.cost_of(f.stream, f.predicate, len(f.attrs), len(f.path) - 1) for f in flows)
