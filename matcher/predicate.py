"""Intervals, conjunctive boxes and disjunctive predicates (seed 004, section 2.1).

An :class:`Interval` has open, closed or unbounded ends; a :class:`Box` is a conjunction of intervals
over named dimensions (a dimension it does not mention is unbounded); a :class:`Predicate` is a
disjunction of boxes.  Everything here is immutable and hashable.

The interval kernels (``covers``, ``intersect``, ``minus``) are the single implementation that the
matching algorithms (QC, HSR, HCR, EM) and the evaluators build on.
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

        This is the split step of seed 004's Compare Dimensions (Algorithm 9): ``self`` minus ``other``
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

    __slots__ = ("_hash", "_items")

    def __init__(self, intervals: Mapping[str, Interval] | Iterable[tuple[str, Interval]] = ()):
        pairs = intervals.items() if isinstance(intervals, Mapping) else intervals
        merged: dict[str, Interval] = {}
        for dim, iv in pairs:
            merged[dim] = merged[dim].intersect(iv) if dim in merged else iv
        self._items: tuple[tuple[str, Interval], ...] = tuple(
            sorted((d, iv) for d, iv in merged.items() if not iv.is_unbounded())
        )
        self._hash = hash(self._items)

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self._items)

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
        return not self.intersect(other).is_empty()

    def hull(self, other: Box) -> Box:
        dims = set(self.dims) & set(other.dims)
        return Box((d, self.get(d).hull(other.get(d))) for d in dims)

    def with_interval(self, dim: str, iv: Interval) -> Box:
        return Box([*((d, v) for d, v in self._items if d != dim), (dim, iv)])

    def subtract(self, other: Box, order: Iterable[str] | None = None) -> list[Box]:
        """``self`` minus ``other`` as disjoint boxes (Compare Dimensions, seed 004 Algorithm 9).

        Dimensions are split in ``order`` (default: ``other``'s dimensions by name).  Returns
        ``[self]`` when the two do not overlap and ``[]`` when ``other`` covers ``self``.
        """
        dims = tuple(order) if order is not None else other.dims
        if not self.overlaps(other):
            return [self]
        rest: list[Box] = []
        current = self
        for d in dims:
            mine, theirs = current.get(d), other.get(d)
            if theirs.covers(mine):
                continue
            left, right = mine.minus(theirs)
            if left is not None:
                rest.append(current.with_interval(d, left))
            if right is not None:
                rest.append(current.with_interval(d, right))
            current = current.with_interval(d, mine.intersect(theirs))
        return rest

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
    """A disjunction of boxes (seed 004's disjunctive predicate); order of boxes is kept.

    ``Predicate.TRUE`` is the single universal box, ``Predicate.FALSE`` has no boxes.  Empty boxes are
    dropped on construction.  ``==`` is structural (same boxes, same order); use :meth:`equivalent`
    for set equality and :meth:`canonical` for a normal form.
    """

    __slots__ = ("_hash", "boxes")
    TRUE: Predicate
    FALSE: Predicate

    def __init__(self, boxes: Iterable[Box] = ()):
        self.boxes: tuple[Box, ...] = tuple(b for b in boxes if not b.is_empty())
        self._hash = hash(self.boxes)

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(sorted({d for b in self.boxes for d in b.dims}))

    def is_empty(self) -> bool:
        return not self.boxes

    def is_true(self) -> bool:
        """Syntactically universal: some box constrains nothing."""
        return any(b.is_universal() for b in self.boxes)

    def or_(self, other: Predicate) -> Predicate:
        """Disjunctive add: ``other``'s boxes appended to ``self``'s."""
        return Predicate(self.boxes + other.boxes)

    def and_(self, other: Predicate) -> Predicate:
        return Predicate(a.intersect(b) for a in self.boxes for b in other.boxes)

    def implies(self, other: Predicate) -> bool:
        """Exact implication ``self => other`` (every point of self lies in some box of other)."""
        return all(not _remainder(b, other.boxes) for b in self.boxes)

    def equivalent(self, other: Predicate) -> bool:
        return self.implies(other) and other.implies(self)

    def minus(self, other: Predicate) -> Predicate:
        """The points of ``self`` outside ``other``, as disjoint pieces of ``self``'s boxes."""
        return Predicate(piece for b in self.boxes for piece in _remainder(b, other.boxes))

    def disjoint(self) -> Predicate:
        """An equivalent predicate whose boxes are pairwise disjoint (exact decomposition)."""
        done: list[Box] = []
        for b in self.boxes:
            done.extend(_remainder(b, tuple(done)))
        return Predicate(done)

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


def _remainder(box: Box, others: tuple[Box, ...]) -> list[Box]:
    """The parts of ``box`` covered by none of ``others``, as disjoint boxes (depth-first split)."""
    parts = [box]
    for other in others:
        parts = [piece for part in parts for piece in part.subtract(other)]
        if not parts:
            break
    return parts
