"""Predicate matching (Kuntschke & Kemper, section 3 and appendix A; docs/REFERENCES.md): QC, HSR, HCR and EM.

Matching a query predicate ``q`` with a stream predicate ``p`` returns ``(True, p)`` when the algorithm
finds ``q => p``, else ``(False, relaxed)`` with ``q => relaxed`` and ``p => relaxed``:

- HSR (Algorithm 7) appends the query's boxes that the quick check does not match (all of them without it);
- HCR (Algorithm 8) widens, for every unmatched query box, the stream box needing the least relaxation;
- EM (Algorithms 4, 9-12) splits each query box against the stream boxes and appends it when a piece is
  left over, so it reports a match exactly when ``q => p``.

As in the paper, query boxes are matched in order against the stream predicate as relaxed so far.  The
stream boxes are compared largest first and each box's dimensions shortest interval first (section 6.1);
the relaxed predicate keeps ``p``'s boxes in their order, with appended boxes at the end.  All of it runs
on the exact integer kernel of :mod:`matcher.predicate` (:class:`~matcher.predicate.CellGrid`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from functools import partial

from matcher.predicate import (
    INF,
    UNBOUNDED,
    Box,
    CellGrid,
    Constraint,
    Interval,
    Predicate,
    cover_state,
    covered_depth_first,
    split_cells,
    uncovered_breadth_first,
)
from matcher.rtree_index import StreamIndex, stream_index

MatchResult = tuple[bool, Predicate]


class _Stream:
    """The stream predicate while a query is matched with it.

    ``boxes`` are in output order (a box keeps its slot when HCR relaxes it, added boxes get new slots);
    ``constraints`` are the same boxes for the kernel, in comparison order (largest first).
    """

    def __init__(self, p: Predicate, grid: CellGrid):
        self.grid = grid
        self.boxes: list[Box] = list(p.boxes)
        self.changed = False
        entries = sorted((b.size_key(), slot) for slot, b in enumerate(self.boxes))
        self.order: list[tuple[tuple[int, float], int]] = entries
        self.constraint_of = {slot: self._constraint(b) for slot, b in enumerate(self.boxes)}
        self.constraints: list[Constraint] = [self.constraint_of[slot] for _, slot in entries]

    def _constraint(self, box: Box) -> Constraint:
        return self.grid.constraint_of(box.items_by_length())

    def _place(self, slot: int) -> None:
        box = self.boxes[slot]
        entry = (box.size_key(), slot)
        at = bisect.bisect(self.order, entry)
        self.order.insert(at, entry)
        self.constraint_of[slot] = self._constraint(box)
        self.constraints.insert(at, self.constraint_of[slot])

    def add(self, box: Box) -> int:
        """Disjunctively add ``box``; returns its slot."""
        self.changed = True
        self.boxes.append(box)
        slot = len(self.boxes) - 1
        self._place(slot)
        return slot

    def replace(self, slot: int, box: Box) -> None:
        """Put the relaxed ``box`` in place of the box in ``slot``."""
        self.changed = True
        at = self.order.index((self.boxes[slot].size_key(), slot))
        del self.order[at]
        del self.constraints[at]
        self.boxes[slot] = box
        self._place(slot)

    def slots(self) -> list[int]:
        """Slots in comparison order."""
        return [slot for _, slot in self.order]

    def in_order(self, slots: list[int]) -> list[Constraint]:
        """The constraints of some ``slots``, in comparison order."""
        rank = {slot: k for k, (_, slot) in enumerate(self.order)}
        return [self.constraint_of[slot] for slot in sorted(slots, key=rank.__getitem__)]

    def result(self, p: Predicate) -> MatchResult:
        return (False, Predicate.from_nonempty(self.boxes)) if self.changed else (True, p)


def _quick_check(constraints: list[Constraint], part: tuple[int, ...]) -> int:
    """Algorithm 6 on the kernel: 1 if some box covers ``part``, else 0 if one overlaps it, else -1."""
    overlap = -1
    for constraint in constraints:
        state = cover_state(constraint, part)
        if state == 1:
            return 1
        if state == 0:
            overlap = 0
    return overlap


def quick_check(p: Predicate, c: Box) -> int:
    """Quick check (Algorithm 6): 1 if ``c`` implies one box of ``p``, 0 if it overlaps one, else -1."""
    grid = CellGrid((*p.boxes, c))
    stream = _Stream(p, grid)
    return _quick_check(stream.constraints, grid.encode(c))


def match_hsr(p: Predicate, q: Predicate, quick_check: bool = True) -> MatchResult:
    """Heuristics with simple relaxation (Algorithm 7) of query ``q`` with stream ``p``.

    Without the quick check every query box is appended, so only an empty ``q`` matches.
    """
    if not quick_check:
        return (True, p) if q.is_empty() else (False, p.or_(q))
    grid = CellGrid(p.boxes + q.boxes)
    stream = _Stream(p, grid)
    for box in q.boxes:
        if _quick_check(stream.constraints, grid.encode(box)) != 1:
            stream.add(box)
    return stream.result(p)


def match_hcr(p: Predicate, q: Predicate, quick_check: bool = True) -> MatchResult:
    """Heuristics with complex relaxation (Algorithm 8) of query ``q`` with stream ``p``.

    For a query box implying no stream box, every stream box is widened (interval hull, dimension by
    dimension) until it contains the query box; the widened box with the fewest unbounded ends, then the
    least added volume ``e``, replaces its original.  ``|D|`` is the number of dimensions of ``p`` and
    ``q`` together.  The appendix leaves an empty ``p`` aside; here the query box is then appended.
    """
    grid = CellGrid(p.boxes + q.boxes)
    stream = _Stream(p, grid)
    space = len(set(p.dims) | set(q.dims))
    ordered = {slot: b.items_by_length() for slot, b in enumerate(stream.boxes)}
    for query_box in q.boxes:
        if quick_check and _quick_check(stream.constraints, grid.encode(query_box)) == 1:
            continue
        if not stream.boxes:
            ordered[stream.add(query_box)] = query_box.items_by_length()
            continue
        best = _least_relaxation(stream, ordered, dict(query_box.items()), space)
        if best is not None:
            slot, relaxed = best
            stream.replace(slot, relaxed)
            ordered[slot] = relaxed.items_by_length()
    return stream.result(p)


def _extent(iv: Interval) -> float:
    """An interval's factor in HCR's volume ``v``: its length when finite and non-zero, else 1."""
    length = iv.hi - iv.lo
    return length if 0.0 < length < INF else 1.0


def _least_relaxation(
    stream: _Stream,
    ordered: dict[int, tuple[tuple[str, Interval], ...]],
    query: dict[str, Interval],
    space: int,
) -> tuple[int, Box] | None:
    """Lines 6-31 of Algorithm 8 for a non-empty stream: None when some stream box already contains the
    query box, else the slot to relax and its relaxed box."""
    best_unbounded, best_extension, best = INF, INF, None
    for slot in stream.slots():
        items = ordered[slot]
        unbounded = 2 * (space - len(items))
        extension = 0.0
        intervals = [iv for _, iv in items]
        extents: list[float] | None = None
        for k, (dim, iv) in enumerate(items):
            wanted = query.get(dim, UNBOUNDED)
            unbounded += (iv.lo == -INF or wanted.lo == -INF) + (iv.hi == INF or wanted.hi == INF)
            if iv.covers(wanted):
                continue
            if extents is None:
                extents = [_extent(other) for other in intervals]
            grow = (iv.lo - wanted.lo if wanted.lo < iv.lo else 0.0) + (wanted.hi - iv.hi if wanted.hi > iv.hi else 0.0)
            extension += grow * math.prod(extents[:k]) * math.prod(extents[k + 1 :])
            intervals[k] = iv.hull(wanted)
            extents[k] = _extent(intervals[k])
        if extents is None:
            return None
        if unbounded < best_unbounded or (unbounded == best_unbounded and extension < best_extension):
            best_unbounded, best_extension, best = unbounded, extension, (slot, items, intervals)
    slot, items, intervals = best
    return slot, Box(zip((d for d, _ in items), intervals, strict=True))


def _covered_breadth_first(part: tuple[int, ...], constraints: list[Constraint]) -> bool:
    return not uncovered_breadth_first(part, constraints)


def _covered_mixed(part: tuple[int, ...], constraints: list[Constraint]) -> bool:
    """Mixed split strategy (Algorithm 12): the pieces cut from one part (siblings) are split against the
    next stream box together, and each piece's leftovers form the next group."""
    last = len(constraints) - 1
    if last < 0:
        return False
    stack = [([part], 0)]
    while stack:
        group, i = stack.pop()
        constraint = constraints[i]
        for piece in group:
            pieces = split_cells(piece, constraint)
            if pieces:
                if i == last:
                    return False
                stack.append((pieces, i + 1))
    return True


_STRATEGIES: dict[str, Callable[[tuple[int, ...], list[Constraint]], bool]] = {
    "bfs": _covered_breadth_first,
    "dfs": covered_depth_first,
    "mix": _covered_mixed,
}


def match_em(
    p: Predicate, q: Predicate, strategy: str = "dfs", quick_check: bool = True, index: str | None = None
) -> MatchResult:
    """Exact matching (Algorithms 4, 10-12) of query ``q`` with stream ``p``: matched iff ``q => p``.

    ``strategy`` is the split strategy: "bfs", "dfs" or "mix".  A query box with a piece outside ``p`` is
    appended whole (section 3.5: one more box rather than its pieces).  With ``index`` ("rtree" or "rstar"),
    the R-tree of ``p``'s boxes (section 3.6, :mod:`matcher.rtree_index`, built once per stream predicate)
    gives each query box the stream boxes it overlaps, the only ones that can cover any of its pieces; the
    quick check and the splitting see only those.  Raises ValueError for an unknown strategy or variant.
    """
    try:
        covered = _STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown split strategy {strategy!r} (expected one of {', '.join(_STRATEGIES)})") from None
    if index is not None:
        return _match_em_indexed(p, q, covered, quick_check, stream_index(p, index))
    grid = CellGrid(p.boxes + q.boxes)
    stream = _Stream(p, grid)
    for box in q.boxes:
        part = grid.encode(box)
        if quick_check:
            state = _quick_check(stream.constraints, part)
            if state == 1:
                continue
            if state == -1:
                stream.add(box)
                continue
        if not covered(part, stream.constraints):
            stream.add(box)
    return stream.result(p)


def _match_em_indexed(
    p: Predicate,
    q: Predicate,
    covered: Callable[[tuple[int, ...], list[Constraint]], bool],
    quick_check: bool,
    tree: StreamIndex,
) -> MatchResult:
    """:func:`match_em` over the candidates the index gives each query box.

    The quick check asks the tree for the stream boxes whose rectangle holds the query box's (a containment
    query prunes every node that does not hold it) and tests those exactly; only when none covers it does
    the box meet the stream boxes it overlaps, and only those enter the cell grid, so a query
    box costs in proportion to the stream boxes near it, not to all of them.  The boxes appended so far (at
    most ``q``'s) are checked directly.  The result equals the unindexed one.
    """
    added: list[Box] = []
    for box in q.boxes:
        if quick_check and any(
            c.contains(box) for c in [*(p.boxes[s] for s in tree.overlapping(box, containing=True)), *added]
        ):
            continue
        slots = tree.overlapping(box)
        slots += [len(p.boxes) + j for j, b in enumerate(added) if b.overlaps(box)]
        boxes = [p.boxes[s] if s < len(p.boxes) else added[s - len(p.boxes)] for s in slots]
        ranked = sorted(zip((b.size_key() for b in boxes), slots, boxes, strict=True))
        grid = CellGrid((box, *boxes))
        part = grid.encode(box)
        constraints = [grid.constraint_of(b.items_by_length()) for _, _, b in ranked]
        # No quick check over the candidates: none holds the box (the containment query said so), and the
        # split strategies themselves append a box that overlaps none of them.
        if not covered(part, constraints):
            added.append(box)
    return (False, Predicate.from_nonempty(p.boxes + tuple(added))) if added else (True, p)


Matcher = Callable[[Predicate, Predicate], MatchResult]

MATCHERS: dict[str, Matcher] = {
    "HSR": partial(match_hsr, quick_check=False),
    "HSR+QC": partial(match_hsr, quick_check=True),
    "HCR": partial(match_hcr, quick_check=False),
    "HCR+QC": partial(match_hcr, quick_check=True),
    "EM-BFS": partial(match_em, strategy="bfs", quick_check=False),
    "EM-BFS+QC": partial(match_em, strategy="bfs", quick_check=True),
    # the paper's EM+QC+I: the indexed quick check, then splitting against the overlapping boxes only
    "EM-BFS+I": partial(match_em, strategy="bfs", quick_check=True, index="rtree"),
    "EM-DFS": partial(match_em, strategy="dfs", quick_check=False),
    "EM-DFS+QC": partial(match_em, strategy="dfs", quick_check=True),
    "EM-DFS+I": partial(match_em, strategy="dfs", quick_check=True, index="rtree"),
    "EM-MIX": partial(match_em, strategy="mix", quick_check=False),
    "EM-MIX+QC": partial(match_em, strategy="mix", quick_check=True),
    "EM-MIX+I": partial(match_em, strategy="mix", quick_check=True, index="rtree"),
}
"""Every matcher by its benchmark name, each called as ``matcher(stream_predicate, query_predicate)``."""
