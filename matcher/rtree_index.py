"""The index of exact matching: an R-tree over the boxes of a stream predicate (Kuntschke & Kemper, section 3.6).

A stream predicate is matched with query after query, so its index is built once, by libspatialindex
(R-tree with quadratic split, or R*-tree; node capacities 5 to 10 as in section 6.1), packed into arrays
(:mod:`matcher.packed_rtree`) and kept beside the predicate: :func:`stream_index` caches the indexes of
the predicates matched last.  A query box asks it once for the stream boxes its closure meets, through a
compiled walk of the tree (:func:`matcher._rtree_kernels.rectangle_query`); exact matching then splits the
box against those candidates only.  The rectangles are closed and infinite ends sit at a sentinel beyond
every finite bound, so the answer is a superset of the boxes that share a point with the query box: the
exact cell kernel of :mod:`matcher.predicate` settles open ends.  Nothing is deleted from or reinserted
into the tree while a query is matched (the maintenance that made the paper's R-trees useless for the
depth-first and mixed split strategies): the candidate list carries the tree's answer through the splits.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from matcher.packed_rtree import PackedTree, build
from matcher.predicate import Box, Predicate

CACHE_SIZE = 64
"""Stream predicates whose index is kept (a planner or a benchmark matches each with many queries)."""


class StreamIndex:
    """The packed R-tree (``variant``: "rtree" or "rstar") of ``predicate``'s boxes, by position."""

    def __init__(self, predicate: Predicate, variant: str = "rtree"):
        self.predicate = predicate
        self.variant = variant
        self.dims = predicate.dims
        n, d = len(predicate.boxes), len(self.dims)
        lo, hi = np.full((n, d), -np.inf), np.full((n, d), np.inf)
        column = {dim: k for k, dim in enumerate(self.dims)}
        for r, box in enumerate(predicate.boxes):
            for dim, iv in box.items():
                lo[r, column[dim]], hi[r, column[dim]] = iv.lo, iv.hi
        finite = np.abs(np.concatenate([lo.ravel(), hi.ravel()]))
        self.sentinel = 2.0 * float(finite[np.isfinite(finite)].max(initial=0.0)) + 1.0
        self.tree: PackedTree = build(
            np.clip(lo, -self.sentinel, self.sentinel), np.clip(hi, -self.sentinel, self.sentinel), variant
        )
        self._found = np.empty(n, dtype=np.int64)
        self._arrays = self.tree.arrays()

    def query_rectangle(self, box: Box) -> tuple[np.ndarray, np.ndarray]:
        """``box`` over the index's dimensions, clamped to the sentinel (its other dimensions constrain no
        stream box, so they cannot separate it from one)."""
        s = self.sentinel
        lo, hi = np.full(len(self.dims), -s), np.full(len(self.dims), s)
        for k, dim in enumerate(self.dims):
            iv = box.get(dim)
            lo[k], hi[k] = min(max(iv.lo, -s), s), min(max(iv.hi, -s), s)
        return lo, hi

    def overlapping(self, box: Box, containing: bool = False) -> list[int]:
        """Positions in ``predicate.boxes`` of the boxes whose closure meets ``box``'s (or, with
        ``containing``, holds it whole), ascending."""
        from matcher._rtree_kernels import rectangle_query

        lo, hi = self.query_rectangle(box)
        found = rectangle_query(self._arrays, lo, hi, containing, self._found)
        return sorted(self._found[:found].tolist())

    def overlapping_plain(self, box: Box, containing: bool = False) -> list[int]:
        """The same answer by the plain Python walk of the tree (the kernel's reference)."""
        return sorted(self.tree.query(*self.query_rectangle(box), containing))


_cache: OrderedDict[tuple[Predicate, str], StreamIndex] = OrderedDict()


def stream_index(predicate: Predicate, variant: str = "rtree") -> StreamIndex:
    """The index of ``predicate``, built on first use and kept for the last :data:`CACHE_SIZE` predicates."""
    key = (predicate, variant)
    found = _cache.get(key)
    if found is None:
        found = _cache[key] = StreamIndex(predicate, variant)
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return found


def clear_cache() -> None:
    """Forget every kept index (a benchmark round then pays for building them again)."""
    _cache.clear()
