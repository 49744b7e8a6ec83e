"""Intervals, conjunctive boxes and disjunctive predicates (Kuntschke & Kemper, section 2.1; docs/REFERENCES.md).

An :class:`Interval` has open, closed or unbounded ends; a :class:`Box` is a conjunction of intervals
over named dimensions (a dimension it does not mention is unbounded); a :class:`Predicate` is a
disjunction of boxes.  Everything here is immutable and hashable.

Box algebra runs on one exact kernel at the end of this module: :class:`CellGrid` turns boxes into
tuples of integer cell ranges (open, closed and infinite ends included), :func:`split_cells` is Kuntschke & Kemper's
Compare Dimensions split and :func:`covered_depth_first` / :func:`uncovered_breadth_first` exhaust it.
``Box.subtract``, ``Predicate.implies/minus/disjoint`` and the matchers of :mod:`matcher.matching` (QC,
HSR, HCR, EM) all use it; HCR's widening uses the interval kernels (``covers``, ``hull``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

INF = math.inf


class Interval(NamedTuple):
    """A set of reals between ``lo`` and ``hi``; infinite ends are always open.

    Build one with :func:`interval` (which normalises infinite ends) or the helpers
    :meth:`point`, :meth:`closed`, :meth:`above`, :meth:`below`.
    """

    lo: float = -INF
    hi: float = INF
    lo_closed: bool = False
    hi_closed: bool = False

    @staticmethod
    def point(value: float) -> Interval:
        return interval(value, value, True, True)

    @staticmethod
    def closed(lo: float, hi: float) -> Interval:
        return interval(lo, hi, True, True)

    @staticmethod
    def above(value: float, *, inclusive: bool = False) -> Interval:
        return interval(value, INF, inclusive, False)

    @staticmethod
    def below(value: float, *, inclusive: bool = False) -> Interval:
        return interval(-INF, value, False, inclusive)

    def is_empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_closed and self.hi_closed))

    def is_unbounded(self) -> bool:
        """True when both ends are infinite (the interval does not constrain anything)."""
        return self.lo == -INF and self.hi == INF

    def contains_value(self, x: float) -> bool:
        return (self.lo < x or (self.lo_closed and x == self.lo)) and (x < self.hi or (self.hi_closed and x == self.hi))

    def covers(self, other: Interval) -> bool:
        """``other`` is a subset of ``self`` (``other`` assumed non-empty)."""
        return (self.lo < other.lo or (self.lo == other.lo and (self.lo_closed or not other.lo_closed))) and (
            self.hi > other.hi or (self.hi == other.hi and (self.hi_closed or not other.hi_closed))
        )

    def intersect(self, other: Interval) -> Interval:
        if self.lo > other.lo:
            lo, lo_closed = self.lo, self.lo_closed
        elif self.lo < other.lo:
            lo, lo_closed = other.lo, other.lo_closed
        else:
            lo, lo_closed = self.lo, self.lo_closed and other.lo_closed
        if self.hi < other.hi:
            hi, hi_closed = self.hi, self.hi_closed
        elif self.hi > other.hi:
            hi, hi_closed = other.hi, other.hi_closed
        else:
            hi, hi_closed = self.hi, self.hi_closed and other.hi_closed
        return Interval(lo, hi, lo_closed, hi_closed)

    def overlaps(self, other: Interval) -> bool:
        return not self.intersect(other).is_empty()

    def hull(self, other: Interval) -> Interval:
        """The smallest interval containing both (HCR's relaxation of one dimension)."""
        if self.lo < other.lo:
            lo, lo_closed = self.lo, self.lo_closed
        elif self.lo > other.lo:
            lo, lo_closed = other.lo, other.lo_closed
        else:
            lo, lo_closed = self.lo, self.lo_closed or other.lo_closed
        if self.hi > other.hi:
            hi, hi_closed = self.hi, self.hi_closed
        elif self.hi < other.hi:
            hi, hi_closed = other.hi, other.hi_closed
        else:
            hi, hi_closed = self.hi, self.hi_closed or other.hi_closed
        return Interval(lo, hi, lo_closed, hi_closed)

    def minus(self, other: Interval) -> tuple[Interval | None, Interval | None]:
        """The parts of ``self`` below and above ``other`` (each None when empty).

        This is the split step of Kuntschke & Kemper's Compare Dimensions (Algorithm 9): ``self`` minus ``other``
        is the union of the two returned pieces, which are disjoint from ``other`` and each other.
        """
        left = self.intersect(Interval(-INF, other.lo, False, not other.lo_closed))
        right = self.intersect(Interval(other.hi, INF, not other.hi_closed, False))
        return (None if left.is_empty() else left), (None if right.is_empty() else right)

    @property
    def length(self) -> float:
        return self.hi - self.lo


UNBOUNDED = Interval()


def interval(lo: float = -INF, hi: float = INF, lo_closed: bool = True, hi_closed: bool = True) -> Interval:
    """An interval with infinite ends forced open, so equal sets compare equal."""
    lo, hi = float(lo), float(hi)
    if math.isnan(lo) or math.isnan(hi):
        raise ValueError("interval bounds must not be NaN")
    return Interval(lo, hi, bool(lo_closed) and lo != -INF, bool(hi_closed) and hi != INF)


class Box:
    """A conjunction of intervals over named dimensions; unmentioned dimensions are unbounded.

    Only constraining intervals are stored, sorted by dimension name, so two boxes describing the same
    set of constraints compare equal.  A box with an empty interval is empty (contradiction).
    """

    __slots__ = ("_hash", "_items", "_profile")

    def __init__(self, intervals: Mapping[str, Interval] | Iterable[tuple[str, Interval]] = ()):
        pairs = intervals.items() if isinstance(intervals, Mapping) else intervals
        merged: dict[str, Interval] = {}
        for dim, iv in pairs:
            merged[dim] = merged[dim].intersect(iv) if dim in merged else iv
        self._items: tuple[tuple[str, Interval], ...] = tuple(
            sorted((d, iv) for d, iv in merged.items() if not iv.is_unbounded())
        )
        self._hash = hash(self._items)
        self._profile: tuple[tuple[int, float], tuple[tuple[str, Interval], ...]] | None = None

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self._items)

    def size_key(self) -> tuple[int, float]:
        """Sort key putting larger boxes first (Kuntschke & Kemper, section 6.1).

        A box is smaller than another when it has fewer unbounded ends, or as many and less volume over
        its finite dimensions.  Counting finite ends instead of unbounded ones needs no data space: over
        any space of ``n`` dimensions a box has ``2n - finite ends`` unbounded ends.
        """
        return (self._profile or self._compute_profile())[0]

    def items_by_length(self) -> tuple[tuple[str, Interval], ...]:
        """The constraining intervals by increasing length, ties by name (Kuntschke & Kemper, section 6.1): a short
        interval is the likeliest to be disjoint from another box's, ending a comparison early."""
        return (self._profile or self._compute_profile())[1]

    def _compute_profile(self) -> tuple[tuple[int, float], tuple[tuple[str, Interval], ...]]:
        # cached because the matchers sort the same stream boxes for every query they are matched with
        finite_ends = 0
        volume = 1.0
        for _, iv in self._items:
            finite_ends += (iv.lo != -INF) + (iv.hi != INF)
            if iv.lo != -INF and iv.hi != INF:
                volume *= iv.hi - iv.lo
        by_length = tuple(item for _, item in sorted(((iv.hi - iv.lo, d), (d, iv)) for d, iv in self._items))
        self._profile = ((finite_ends, -volume), by_length)
        return self._profile

    def items(self) -> tuple[tuple[str, Interval], ...]:
        return self._items

    def get(self, dim: str) -> Interval:
        for d, iv in self._items:
            if d == dim:
                return iv
        return UNBOUNDED

    def as_dict(self) -> dict[str, Interval]:
        return dict(self._items)

    def is_empty(self) -> bool:
        return any(iv.is_empty() for _, iv in self._items)

    def is_universal(self) -> bool:
        return not self._items

    def contains(self, other: Box) -> bool:
        """``other`` implies ``self`` (conjunctive implication; ``other`` assumed non-empty)."""
        return all(iv.covers(other.get(d)) for d, iv in self._items)

    def intersect(self, other: Box) -> Box:
        return Box(self._items + other._items)

    def overlaps(self, other: Box) -> bool:
        # ``not self.intersect(other).is_empty()`` without building the intersection: only the dimensions
        # both constrain can be disjoint (each box alone is non-empty or has an empty interval of its own)
        if self.is_empty() or other.is_empty():
            return False
        theirs = other._items
        j, n = 0, len(theirs)
        for d, iv in self._items:
            while j < n and theirs[j][0] < d:
                j += 1
            if j < n and theirs[j][0] == d and not iv.overlaps(theirs[j][1]):
                return False
        return True

    def hull(self, other: Box) -> Box:
        dims = set(self.dims) & set(other.dims)
        return Box((d, self.get(d).hull(other.get(d))) for d in dims)

    def with_interval(self, dim: str, iv: Interval) -> Box:
        return Box([*((d, v) for d, v in self._items if d != dim), (dim, iv)])

    def subtract(self, other: Box, order: Iterable[str] | None = None) -> list[Box]:
        """``self`` minus ``other`` as disjoint boxes (Compare Dimensions, Kuntschke & Kemper's Algorithm 9).

        Dimensions are split in ``order`` (default: ``other``'s dimensions by name).  Returns
        ``[self]`` when the two do not overlap and ``[]`` when ``other`` covers ``self``.
        """
        if not self.overlaps(other):
            return [self]
        grid = CellGrid((self, other))
        part = grid.encode(self)
        pieces = split_cells(part, grid.constraint(other, order))
        return [grid.decode(piece) for piece in pieces]

    def contains_point(self, values: Mapping[str, float]) -> bool:
        return all(iv.contains_value(values[d]) for d, iv in self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and self._items == other._items

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Box({self.to_text()!r})"

    def to_text(self) -> str:
        from matcher.text import box_to_text

        return box_to_text(self)


class Predicate:
    """A disjunction of boxes (Kuntschke & Kemper's disjunctive predicate); order of boxes is kept.

    ``Predicate.TRUE`` is the single universal box, ``Predicate.FALSE`` has no boxes.  Empty boxes are
    dropped on construction.  ``==`` is structural (same boxes, same order); use :meth:`equivalent`
    for set equality and :meth:`canonical` for a normal form.
    """

    __slots__ = ("_dims", "_hash", "boxes")
    TRUE: Predicate
    FALSE: Predicate

    def __init__(self, boxes: Iterable[Box] = ()):
        self.boxes: tuple[Box, ...] = tuple(b for b in boxes if not b.is_empty())
        self._hash = hash(self.boxes)

    @classmethod
    def any_of(cls, predicates: Iterable[Predicate]) -> Predicate:
        """The OR of ``predicates``, box by box (FALSE for none)."""
        return cls(b for p in predicates for b in p.boxes)

    @classmethod
    def from_nonempty(cls, boxes: Iterable[Box]) -> Predicate:
        """A predicate of boxes known to be non-empty (boxes of predicates, hulls of such boxes), taken as
        they are: relaxing a stream predicate of hundreds of boxes would otherwise re-check every one."""
        self = cls.__new__(cls)
        self.boxes = tuple(boxes)
        self._hash = hash(self.boxes)
        return self

    @property
    def dims(self) -> tuple[str, ...]:
        try:
            return self._dims
        except AttributeError:  # computed once: operators and matchers ask for it on every build
            self._dims = tuple(sorted({d for b in self.boxes for d in b.dims}))
            return self._dims

    def is_empty(self) -> bool:
        return not self.boxes

    def is_true(self) -> bool:
        """Syntactically universal: some box constrains nothing."""
        return any(b.is_universal() for b in self.boxes)

    def or_(self, other: Predicate) -> Predicate:
        """Disjunctive add: ``other``'s boxes appended to ``self``'s."""
        return Predicate.from_nonempty(self.boxes + other.boxes)

    def and_(self, other: Predicate) -> Predicate:
        return Predicate(a.intersect(b) for a in self.boxes for b in other.boxes)

    def implies(self, other: Predicate) -> bool:
        """Exact implication ``self => other`` (every point of self lies in some box of other).

        The exact-matching kernel of Kuntschke & Kemper (depth-first split, Algorithm 11) without the relaxation.
        """
        if not self.boxes:
            return True
        grid = CellGrid(self.boxes + other.boxes)
        ordered = sorted(other.boxes, key=Box.size_key)
        constraints = [grid.constraint_of(b.items_by_length()) for b in ordered]
        return all(covered_depth_first(grid.encode(b), constraints) for b in self.boxes)

    def equivalent(self, other: Predicate) -> bool:
        return self.implies(other) and other.implies(self)

    def minus(self, other: Predicate) -> Predicate:
        """The points of ``self`` outside ``other``, as disjoint pieces of ``self``'s boxes."""
        grid = CellGrid(self.boxes + other.boxes)
        constraints = [grid.constraint(b) for b in other.boxes]
        return Predicate(
            grid.decode(piece) for b in self.boxes for piece in uncovered_breadth_first(grid.encode(b), constraints)
        )

    def disjoint(self) -> Predicate:
        """An equivalent predicate whose boxes are pairwise disjoint (exact decomposition)."""
        grid = CellGrid(self.boxes)
        done: list[tuple[int, ...]] = []
        constraints: list[Constraint] = []
        for b in self.boxes:
            pieces = uncovered_breadth_first(grid.encode(b), constraints)
            done.extend(pieces)
            constraints.extend(grid.constraint_of_cells(piece) for piece in pieces)
        return Predicate(grid.decode(piece) for piece in done)

    def canonical(self) -> Predicate:
        """Equivalent normal form: duplicates and boxes inside another single box removed, sorted."""
        unique = sorted(set(self.boxes), key=lambda b: b.items())
        kept = [b for i, b in enumerate(unique) if not any(j != i and o.contains(b) for j, o in enumerate(unique))]
        return Predicate(kept)

    def evaluate(self, values: Mapping[str, float]) -> bool:
        return any(b.contains_point(values) for b in self.boxes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Predicate) and self.boxes == other.boxes

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Predicate({self.to_text()!r})"

    def to_text(self) -> str:
        from matcher.text import predicate_to_text

        return predicate_to_text(self)


Predicate.TRUE = Predicate([Box()])
Predicate.FALSE = Predicate([])


# --- The exact box kernel shared by Box.subtract, Predicate.implies/minus/disjoint and QC/HSR/HCR/EM ---------

Constraint = tuple[tuple[int, int, int], ...]
"""A box as the kernels read it: ``(j, lo, hi)`` per constraining dimension, in comparison order, where
``j`` is the offset of the dimension's range in a cell tuple and ``lo..hi`` its closed range of cells."""


class CellGrid:
    """Exact integer coordinates for a set of boxes.

    The distinct finite bounds ``v_0 < ... < v_{k-1}`` of the boxes cut every dimension into the cells
    ``(-inf, v_0), {v_0}, (v_0, v_1), {v_1}, ..., {v_{k-1}}, (v_{k-1}, inf)``, numbered ``0 .. 2k``.  Any
    interval whose ends are among the ``v_r`` (open, closed or infinite) is a contiguous, closed range of
    cells, so a box becomes the flat tuple ``(lo_0, hi_0, lo_1, hi_1, ...)`` over :attr:`dims` and containment,
    overlap and splitting become integer comparisons: open and closed ends are dealt with here, once, and
    the inner loops of the matching algorithms stay small.
    """

    __slots__ = ("_offset", "_rank", "dims", "full", "top", "values")

    def __init__(self, boxes: Iterable[Box]):
        intervals = [item for b in boxes for item in b.items()]
        self.dims: tuple[str, ...] = tuple(sorted({d for d, _ in intervals}))
        finite = {iv.lo for _, iv in intervals} | {iv.hi for _, iv in intervals}
        finite.discard(-INF)
        finite.discard(INF)
        self.values: tuple[float, ...] = tuple(sorted(finite))
        self._rank = {v: r for r, v in enumerate(self.values)}
        self._offset = {d: 2 * k for k, d in enumerate(self.dims)}
        self.top = 2 * len(self.values)
        self.full: tuple[int, ...] = (0, self.top) * len(self.dims)

    def cells(self, iv: Interval) -> tuple[int, int]:
        """The closed range of cells making up ``iv`` (``lo > hi`` when ``iv`` is empty)."""
        lo = 0 if iv.lo == -INF else 2 * self._rank[iv.lo] + (1 if iv.lo_closed else 2)
        hi = self.top if iv.hi == INF else 2 * self._rank[iv.hi] + (1 if iv.hi_closed else 0)
        return lo, hi

    def encode(self, box: Box) -> tuple[int, ...]:
        """``box`` as a cell tuple over :attr:`dims` (raises KeyError for a dimension or bound not in the grid)."""
        cells = list(self.full)
        offset = self._offset
        for d, iv in box.items():
            j = offset[d]
            cells[j], cells[j + 1] = self.cells(iv)
        return tuple(cells)

    def decode(self, cells: tuple[int, ...]) -> Box:
        """The box a cell tuple stands for; an odd cell number is a bound itself, so the end is closed."""
        values, top = self.values, self.top
        intervals = []
        for k, d in enumerate(self.dims):
            lo, hi = cells[2 * k], cells[2 * k + 1]
            lower = -INF if lo == 0 else values[(lo - 1) // 2]
            upper = INF if hi == top else values[hi // 2]
            intervals.append((d, Interval(lower, upper, lo % 2 == 1, hi % 2 == 1)))
        return Box(intervals)

    def constraint(self, box: Box, order: Iterable[str] | None = None) -> Constraint:
        """``box``'s constraining ranges, compared in ``order`` (then any other dimension, by name)."""
        if order is None:
            return self.constraint_of(box.items())
        intervals = dict(box.items())
        order = tuple(order)
        ranked = (*order, *(d for d in intervals if d not in order))
        return self.constraint_of([(d, intervals[d]) for d in ranked if d in intervals])

    def constraint_of(self, items: Iterable[tuple[str, Interval]]) -> Constraint:
        """The constraint of constraining ``(dimension, interval)`` pairs, compared in their order."""
        offset, rank, top = self._offset, self._rank, self.top
        # the body of cells(), inlined: this runs for every box of every matched pair
        return tuple(
            (
                offset[d],
                0 if iv.lo == -INF else 2 * rank[iv.lo] + (1 if iv.lo_closed else 2),
                top if iv.hi == INF else 2 * rank[iv.hi] + (1 if iv.hi_closed else 0),
            )
            for d, iv in items
        )

    def constraint_of_cells(self, cells: tuple[int, ...]) -> Constraint:
        """The constraining ranges of a cell tuple, by dimension name."""
        top = self.top
        return tuple((j, cells[j], cells[j + 1]) for j in range(0, len(cells), 2) if cells[j] or cells[j + 1] != top)


def split_cells(part: tuple[int, ...], constraint: Constraint) -> list[tuple[int, ...]]:
    """Compare Dimensions (Kuntschke & Kemper's Algorithm 9): the pieces of ``part`` outside ``constraint``.

    Returns ``[part]`` itself when the two are disjoint, ``[]`` when ``constraint`` covers ``part``, else
    the disjoint pieces cut off dimension by dimension in ``constraint``'s order (below, then above).
    """
    pieces = []
    current = part
    for j, lo, hi in constraint:
        part_lo = current[j]
        part_hi = current[j + 1]
        if lo > part_hi or part_lo > hi:
            return [part]
        if lo <= part_lo and part_hi <= hi:
            continue
        head = current[:j]
        tail = current[j + 2 :]
        if part_lo < lo:
            pieces.append((*head, part_lo, lo - 1, *tail))
            part_lo = lo
        if hi < part_hi:
            pieces.append((*head, hi + 1, part_hi, *tail))
            part_hi = hi
        current = (*head, part_lo, part_hi, *tail)
    return pieces


def cover_state(constraint: Constraint, part: tuple[int, ...]) -> int:
    """1 when ``constraint`` covers ``part``, 0 when they only overlap, -1 when they are disjoint."""
    state = 1
    for j, lo, hi in constraint:
        part_lo = part[j]
        part_hi = part[j + 1]
        if lo > part_hi or part_lo > hi:
            return -1
        if part_lo < lo or hi < part_hi:
            state = 0
    return state


def covered_depth_first(part: tuple[int, ...], constraints: list[Constraint]) -> bool:
    """Whether the union of ``constraints`` covers ``part`` (depth-first split strategy, Algorithm 11).

    Each unmatched piece is split against the next box before its siblings are looked at, so the first
    piece left over after the last box proves the mismatch and nothing else is split.
    """
    last = len(constraints) - 1
    if last < 0:
        return False
    stack = [(part, 0)]
    while stack:
        piece, i = stack.pop()
        while True:
            pieces = split_cells(piece, constraints[i])
            if not pieces:
                break
            if i == last:
                return False
            i += 1
            if len(pieces) == 1:
                piece = pieces[0]
                continue
            stack.extend((p, i) for p in reversed(pieces[1:]))
            piece = pieces[0]
    return True


def uncovered_breadth_first(part: tuple[int, ...], constraints: list[Constraint]) -> list[tuple[int, ...]]:
    """The pieces of ``part`` outside every constraint (breadth-first split strategy, Algorithm 10)."""
    pieces = [part]
    for constraint in constraints:
        pieces = [rest for piece in pieces for rest in split_cells(piece, constraint)]
        if not pieces:
            break
    return pieces
