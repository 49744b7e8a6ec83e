"""The per-item evaluators' data (Kuntschke & Kemper, section 4) and their plain reference walks.

:class:`SEBoxes` lays a predicate's boxes out for standard evaluation: boxes with fewer infinite ends
first, then larger volume first, each box's constraining intervals shortest first (section 6.1).
:class:`IETree` is the index of index-based evaluation: a packed libspatialindex R-tree or R*-tree
(:mod:`matcher.packed_rtree`) over the boxes' active dimensions, infinite ends mapped to a finite sentinel,
with the exact box table beside it for the verification of open ends.

``se_plain`` and ``ie_plain`` are the plain Python versions of the compiled kernels of
:mod:`matcher._rtree_kernels`: the same data, the same order of tests, the same counts of boxes or
rectangles tested; the tests hold the kernels to them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matcher._eval_boxes import BoxTable
from matcher.packed_rtree import PackedTree, build
from matcher.predicate import Box, Predicate


def box_order(box: Box) -> tuple[int, float]:
    """Section 6.1: boxes with fewer infinite ends first, then larger (finite) volume first."""
    infinite = sum((iv.lo == -np.inf) + (iv.hi == np.inf) for _, iv in box.items())
    volume = float(np.prod([iv.length for _, iv in box.items() if np.isfinite(iv.length)]))
    return infinite, -volume


@dataclass(frozen=True, eq=False)
class SEBoxes:
    """Box ``b``'s intervals are ``start[b] .. start[b + 1] - 1``: column ``dim[j]`` of the item matrix
    (``dims``) within ``lo[j]..hi[j]``, ends closed where ``lo_closed``/``hi_closed``."""

    dims: tuple[str, ...]
    start: np.ndarray
    dim: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lo_closed: np.ndarray
    hi_closed: np.ndarray

    @classmethod
    def of(cls, predicate: Predicate) -> SEBoxes:
        dims = predicate.dims
        column = {d: k for k, d in enumerate(dims)}
        rows = []
        start = [0]
        for box in sorted(predicate.boxes, key=box_order):
            for d, iv in sorted(box.items(), key=lambda item: item[1].length):
                rows.append((column[d], *iv))
            start.append(len(rows))
        dim, lo, hi, lo_closed, hi_closed = (list(x) for x in zip(*rows, strict=True)) if rows else ([],) * 5
        return cls(
            dims,
            np.array(start, dtype=np.int64),
            np.array(dim, dtype=np.int64),
            np.array(lo, dtype=np.float64),
            np.array(hi, dtype=np.float64),
            np.array(lo_closed, dtype=bool),
            np.array(hi_closed, dtype=bool),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.start, self.dim, self.lo, self.hi, self.lo_closed, self.hi_closed


def se_plain(boxes: SEBoxes, x: list[float]) -> tuple[bool, int]:
    """SE for one item (its values over ``boxes.dims``): ``(inside some box, boxes tested)``."""
    for b in range(len(boxes.start) - 1):
        for j in range(boxes.start[b], boxes.start[b + 1]):
            v, lo, hi = x[boxes.dim[j]], boxes.lo[j], boxes.hi[j]
            if not ((lo < v or (boxes.lo_closed[j] and v == lo)) and (v < hi or (boxes.hi_closed[j] and v == hi))):
                break
        else:
            return True, b + 1
    return False, len(boxes.start) - 1


@dataclass(frozen=True, eq=False)
class IETree:
    """The R-tree (``variant``) over ``boxes`` (the box table restricted to its active dimensions)."""

    boxes: BoxTable
    tree: PackedTree
    sentinel: float

    @classmethod
    def of(cls, predicate: Predicate, variant: str = "rstar") -> IETree:
        table = BoxTable.of([predicate])
        active = np.flatnonzero(table.constrained().any(axis=0)) if table.n_boxes else np.zeros(0, np.int64)
        boxes = table.restricted(np.asarray(active, dtype=np.int64))
        finite = np.abs(np.concatenate([boxes.lo.ravel(), boxes.hi.ravel()]))
        sentinel = 2.0 * float(finite[np.isfinite(finite)].max(initial=0.0)) + 1.0
        lo = np.clip(boxes.lo, -sentinel, sentinel)
        hi = np.clip(boxes.hi, -sentinel, sentinel)
        return cls(boxes, build(lo, hi, variant), sentinel)

    @property
    def dims(self) -> tuple[str, ...]:
        return self.boxes.dims

    def box_arrays(self) -> tuple[np.ndarray, ...]:
        return self.boxes.lo, self.boxes.hi, self.boxes.lo_closed, self.boxes.hi_closed


def ie_plain(index: IETree, x: list[float], short_circuit: bool) -> tuple[bool, int]:
    """IE (all containing boxes) or IE+SC (the first) for one item: ``(inside some box, rectangles tested)``."""
    s = index.sentinel
    point = np.array([min(max(v, -s), s) if v == v else v for v in x])
    found, tested = False, 0
    if index.tree.n_nodes == 0:
        return False, 0
    lo, hi, lo_closed, hi_closed = index.box_arrays()
    tree = index.tree
    stack = [0]
    while stack:
        node = stack.pop()
        start = int(tree.first[node])
        for e in range(start, start + int(tree.count[node])):
            tested += 1
            if np.any(point < tree.lo[e]) or np.any(point > tree.hi[e]):
                continue
            if not tree.leaf[node]:
                stack.append(int(tree.ref[e]))
                continue
            b = int(tree.ref[e])
            if all(
                (lo[b, k] == -np.inf and hi[b, k] == np.inf)
                or (
                    (lo[b, k] < v or (lo_closed[b, k] and v == lo[b, k]))
                    and (v < hi[b, k] or (hi_closed[b, k] and v == hi[b, k]))
                )
                for k, v in enumerate(x)
            ):
                found = True
                if short_circuit:
                    return True, tested
    return found, tested
