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
from collections.abc import Callable, Mapping, Sequence

import numpy as np

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


def overlap_probability(box: Box, other: Box, dists: Mapping[str, Distribution]) -> float:
    """``box_probability(box.intersect(other), dists)`` without building the intersection: the same
    product, dimension by dimension in name order."""
    a, b = box.items(), other.items()
    i = j = 0
    p = 1.0
    while i < len(a) or j < len(b):
        if j == len(b) or (i < len(a) and a[i][0] < b[j][0]):
            dim, iv = a[i]
            i += 1
        elif i == len(a) or b[j][0] < a[i][0]:
            dim, iv = b[j]
            j += 1
        else:
            dim, iv = a[i][0], a[i][1].intersect(b[j][1])
            i += 1
            j += 1
        p *= dists[dim].prob(iv)
        if p == 0.0:
            break
    return p


def outside_probabilities(
    box: Box,
    others: Sequence[Box],
    dists: Mapping[str, Distribution],
    overlap: Callable[[Box, Box], float] | None = None,
) -> list[float]:
    """The probabilities of disjoint pieces making up ``box`` minus the union of ``others``: they add up to
    P(a tuple lies in ``box`` and in none of ``others``).  Every dimension ``box`` and ``others`` constrain
    has a distribution in ``dists`` (else KeyError).  ``overlap(box, other)``, when given, is
    :func:`overlap_probability` over ``dists`` (e.g. remembered across calls).
    """
    # Overlaps of zero probability (boxes touching at a bound of a continuous attribute) change no
    # probability, so they are not cut at all; the others go largest overlap first, which leaves the
    # fewest pieces to cut against the rest.
    weighted = []
    for k, other in enumerate(others):
        weight = overlap_probability(box, other, dists) if overlap is None else overlap(box, other)
        if weight > 0.0:
            weighted.append((-weight, k, other))
    if not weighted:
        return [box_probability(box, dists)]
    weighted.sort()
    if weighted[0][2].contains(box):
        return []
    grid = CellGrid((box, *(other for *_, other in weighted)))
    constraints = [grid.constraint(other) for *_, other in weighted]
    if len(constraints) >= KERNEL_FROM:
        return _kernel_pieces(grid, grid.encode(box), constraints, dists)
    pieces = uncovered_breadth_first(grid.encode(box), constraints)
    if not pieces:
        return []
    # a piece's probability from its cell ranges, each range's probability computed once
    ranges: dict[tuple[str, int, int], float] = {}
    terms = []
    for piece in pieces:
        p = 1.0
        for k, dim in enumerate(grid.dims):
            lo, hi = piece[2 * k], piece[2 * k + 1]
            if lo == 0 and hi == grid.top:
                continue
            key = (dim, lo, hi)
            q = ranges.get(key)
            if q is None:
                q = ranges[key] = dists[dim].prob(_range_interval(grid, lo, hi))
            p *= q
            if p == 0.0:
                break
        terms.append(p)
    return terms


# From this many boxes to cut against, the compiled kernel does the cutting (numba's import and the
# kernel's load cost about a second once per process, which small scenarios never pay).
KERNEL_FROM = 8


def _kernel_pieces(
    grid: CellGrid, part: tuple[int, ...], constraints: list, dists: Mapping[str, Distribution]
) -> list[float]:
    """:func:`outside_probabilities`' pieces cut by :func:`matcher._cut_kernels.uncovered_cells` and their
    probabilities multiplied per dimension in the same order as the plain loop, so each is the same float."""
    from matcher._cut_kernels import uncovered_cells

    flat = [entry for constraint in constraints for entry in constraint]
    starts = np.zeros(len(constraints) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in constraints], out=starts[1:])
    rows = np.array(flat, dtype=np.int64).reshape(-1, 3)
    pieces = uncovered_cells(
        np.array(part, dtype=np.int64), rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy(), starts
    )
    if len(pieces) == 0:
        return []
    top = grid.top
    p = np.ones(len(pieces))
    for k, dim in enumerate(grid.dims):
        lo, hi = pieces[:, 2 * k], pieces[:, 2 * k + 1]
        partial = (lo != 0) | (hi != top)
        if not partial.any():
            continue
        ranges, which = np.unique(lo[partial] * (top + 1) + hi[partial], return_inverse=True)
        dist = dists[dim]
        probs = np.array([dist.prob(_range_interval(grid, *divmod(int(r), top + 1))) for r in ranges])
        column = np.ones(len(pieces))
        column[partial] = probs[which]
        p *= column
    return p.tolist()


def _range_interval(grid: CellGrid, lo: int, hi: int) -> Interval:
    """The interval of cells ``lo..hi`` of ``grid`` (an odd cell is a bound itself: that end is closed)."""
    lower = -math.inf if lo == 0 else grid.values[(lo - 1) // 2]
    upper = math.inf if hi == grid.top else grid.values[hi // 2]
    return Interval(lower, upper, lo % 2 == 1, hi % 2 == 1)


class UniformSpace:
    """Attributes that are all uniform on an interval, where :meth:`outside_probabilities` runs as one
    compiled kernel (:func:`matcher._cut_kernels.uniform_outside`) with the same result, float for float,
    as :func:`outside_probabilities`.  Boxes become float rows, kept per box."""

    def __init__(self, dists: Mapping[str, Uniform]):
        self.dims = tuple(sorted(dists))
        self._column = {d: k for k, d in enumerate(self.dims)}
        self.low = np.array([dists[d].lo for d in self.dims], dtype=np.float64)
        self.high = np.array([dists[d].hi for d in self.dims], dtype=np.float64)
        self._rows: dict[Box, np.ndarray] = {}
        self.width = 4 * len(self.dims)
        self.none = np.empty((0, self.width))  # no rows

    @staticmethod
    def of(dists: Mapping[str, Distribution]) -> UniformSpace | None:
        """The space of ``dists`` when each is a continuous uniform of positive width, else None."""
        if not dists or not all(type(d) is Uniform and not d.integer and d.hi > d.lo for d in dists.values()):
            return None
        return UniformSpace(dists)

    def row(self, box: Box) -> np.ndarray:
        """``box`` as the kernel's row (every dimension it constrains is one of :attr:`dims`)."""
        row = self._rows.get(box)
        if row is None:
            n = len(self.dims)
            row = np.empty(4 * n)
            row[:n], row[n : 2 * n], row[2 * n :] = -math.inf, math.inf, 0.0
            for d, iv in box.items():
                k = self._column[d]
                row[k], row[n + k], row[2 * n + k], row[3 * n + k] = iv.lo, iv.hi, iv.lo_closed, iv.hi_closed
            self._rows[box] = row
        return row

    def outside_probabilities(self, box: Box, others: Sequence[Box]) -> list[float]:
        """:func:`outside_probabilities` of ``box`` and ``others`` over these attributes."""
        before = np.stack([self.row(b) for b in others]) if others else self.none
        return self._outside(box, before, (), False).tolist()

    def outside_partials(self, box: Box, before: np.ndarray, ahead: Sequence[Box]) -> np.ndarray:
        """Floats whose ``math.fsum`` is that of :meth:`outside_probabilities` of ``box`` and the boxes of
        rows ``before`` then ``ahead``: the partials of their exact sum (the kernel adds the pieces)."""
        return self._outside(box, before, ahead, True)

    def _outside(self, box: Box, before: np.ndarray, ahead: Sequence[Box], summed: bool) -> np.ndarray:
        from matcher._cut_kernels import uniform_outside

        rows = np.stack([self.row(b) for b in ahead]) if ahead else self.none
        return uniform_outside(self.row(box), before, rows, self.low, self.high, summed)
