"""Exact selectivity and data-space volume of a predicate, with independent attributes.

A predicate's boxes may overlap, so their probabilities do not simply add.  One kernel,
:func:`outside_probabilities`, cuts a box against the boxes it must not count twice with the Compare
Dimensions split of Kuntschke & Kemper's exact matching (TUM-I0615), exact about open and closed ends, and
returns the probabilities of the disjoint pieces left; with independent attributes a piece's probability is
the product of its intervals' probabilities.  :func:`selectivity` cuts each box against the boxes before it
that overlap it, so all pieces are pairwise disjoint and their probabilities add: the work grows with the
overlaps, not with a decomposition of the whole predicate on one grid.  The stream-sharing planner's cost
model (``sharing.cost``) calls the same kernel for the probability a widening adds, and caches its results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matcher.distributions import Distribution, Uniform
from matcher.predicate import Box, CellGrid, Interval, Predicate, uncovered_breadth_first


def selectivity(pred: Predicate, dists: Mapping[str, Distribution]) -> float:
    """P(a tuple satisfies ``pred``) when attribute ``d`` follows ``dists[d]``, attributes independent.

    Attributes ``pred`` does not constrain need no distribution.  Raises KeyError naming an attribute
    that ``pred`` constrains but ``dists`` lacks.
    """
    missing = [d for d in pred.dims if d not in dists]
    if missing:
        raise KeyError(f"no distribution for attribute {missing[0]!r} (known: {', '.join(sorted(dists)) or 'none'})")
    terms: list[float] = []
    for k, box in enumerate(pred.boxes):
        terms.extend(outside_probabilities(box, [b for b in pred.boxes[:k] if b.overlaps(box)], dists))
    # the disjoint pieces of a predicate covering everything may add up to a rounding error above 1
    return min(1.0, math.fsum(terms))


def volume(pred: Predicate, bounds: Mapping[str, tuple[float, float]]) -> float:
    """The fraction of the data space ``prod_d [lo_d, hi_d]`` that ``pred`` covers.

    Raises KeyError naming an attribute ``pred`` constrains without bounds, ValueError for bounds that are
    not finite with ``lo < hi``.
    """
    spaces = {}
    for dim, (lo, hi) in bounds.items():
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds of {dim!r} must be finite with lo < hi, got [{lo}, {hi}]")
        spaces[dim] = Uniform(lo, hi)
    return selectivity(pred, spaces)


def box_probability(box: Box, dists: Mapping[str, Distribution]) -> float:
    """P(a tuple lies in ``box``); every dimension ``box`` constrains has a distribution in ``dists``."""
    p = 1.0
    for d, iv in box.items():
        p *= dists[d].prob(iv)
        if p == 0.0:
            break
    return p


def outside_probabilities(box: Box, others: Sequence[Box], dists: Mapping[str, Distribution]) -> list[float]:
    """The probabilities of disjoint pieces making up ``box`` minus the union of ``others``: they add up to
    P(a tuple lies in ``box`` and in none of ``others``).  Every dimension ``box`` and ``others`` constrain
    has a distribution in ``dists`` (else KeyError).
    """
    # Overlaps of zero probability (boxes touching at a bound of a continuous attribute) change no
    # probability, so they are not cut at all; the others go largest overlap first, which leaves the
    # fewest pieces to cut against the rest.
    weighted = []
    for k, other in enumerate(others):
        weight = box_probability(box.intersect(other), dists)
        if weight > 0.0:
            weighted.append((-weight, k, other))
    if not weighted:
        return [box_probability(box, dists)]
    weighted.sort()
    if weighted[0][2].contains(box):
        return []
    grid = CellGrid((box, *(other for *_, other in weighted)))
    constraints = [grid.constraint(other) for *_, other in weighted]
    pieces = uncovered_breadth_first(grid.encode(box), constraints)
    if not pieces:
        return []
    # a piece's probability from its cell ranges, each range's probability computed once
    values, top = grid.values, grid.top
    ranges: dict[tuple[str, int, int], float] = {}
    terms = []
    for piece in pieces:
        p = 1.0
        for k, dim in enumerate(grid.dims):
            lo, hi = piece[2 * k], piece[2 * k + 1]
            if lo == 0 and hi == top:
                continue
            key = (dim, lo, hi)
            q = ranges.get(key)
            if q is None:
                lower = -math.inf if lo == 0 else values[(lo - 1) // 2]
                upper = math.inf if hi == top else values[hi // 2]
                q = dists[dim].prob(Interval(lower, upper, lo % 2 == 1, hi % 2 == 1))
                ranges[key] = q
            p *= q
            if p == 0.0:
                break
        terms.append(p)
    return terms
