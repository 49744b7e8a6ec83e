"""An R-tree over the boxes of a :class:`BoxTable` (libspatialindex via ``rtree``), exact by verification.

The R-tree only knows closed, finite rectangles.  Infinite ends become a finite sentinel beyond every
finite bound, and query points are clamped into the sentinel range; clamping keeps every comparison
with a finite bound unchanged, so the index returns a superset of the containing boxes (closed ends
where the box is open) and the verification step makes the answer exact.  NaN coordinates cannot be
searched and are evaluated by a plain scan.
"""

from __future__ import annotations

import math

import numpy as np
from rtree import core, index

from matcher._eval_boxes import BoxTable

NODE_CAPACITY = 10  # Kuntschke & Kemper, section 6.1: minimum 5, maximum 10 entries per node


class BoxRTree:
    """Bulk-loaded R-tree of ``table``'s boxes over the dimensions some box constrains.

    ``limit=1`` makes libspatialindex stop the search at the first hit (IE+SC); ``0`` returns all hits.
    """

    def __init__(self, table: BoxTable, limit: int = 0):
        self.table = table
        self.active = np.flatnonzero(table.constrained().any(axis=0)) if table.n_boxes else np.zeros(0, np.int64)
        finite = np.abs(np.concatenate([table.lo.ravel(), table.hi.ravel()]))
        finite = finite[np.isfinite(finite)]
        self.sentinel = 2.0 * float(finite.max(initial=0.0)) + 1.0
        # libspatialindex needs at least two dimensions: pad with a constant zero coordinate.
        self.padded = max(2, len(self.active))
        mins, maxs = self._rectangles()
        props = index.Property()
        props.dimension = self.padded
        props.leaf_capacity = props.index_capacity = NODE_CAPACITY
        ids = np.arange(table.n_boxes, dtype=np.int64)
        self.tree = index.Index((ids, mins, maxs), properties=props) if table.n_boxes else None
        if self.tree is not None and limit:
            # rtree 1.4's result_limit/result_offset properties call each other's setter; go direct.
            core.rt.Index_SetResultSetLimit(self.tree.handle, limit)

    def _rectangles(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.table.n_boxes
        mins, maxs = np.zeros((n, self.padded)), np.zeros((n, self.padded))
        d = len(self.active)
        mins[:, :d] = np.maximum(self.table.lo[:, self.active], -self.sentinel)
        maxs[:, :d] = np.minimum(self.table.hi[:, self.active], self.sentinel)
        return mins, maxs

    def point(self, values: np.ndarray) -> tuple[float, ...] | None:
        """Interleaved query rectangle for one item (its active-dimension values); None if it has NaN."""
        coords = [min(max(float(v), -self.sentinel), self.sentinel) for v in values]
        if any(math.isnan(c) for c in coords):
            return None
        coords.extend([0.0] * (self.padded - len(coords)))
        return (*coords, *coords)

    def candidates(self, values: np.ndarray) -> list[int]:
        """Ids of boxes whose closed bounding rectangle holds the item (up to the limit)."""
        if self.tree is None:
            return []
        return list(self.tree.intersection(self.point(values)))

    def candidates_batch(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the ``(d_active, N)`` NaN-free values: ``(item, box)`` candidate pairs, all of them."""
        n = values.shape[1]
        if self.tree is None or n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        points = np.zeros((n, self.padded))
        points[:, : len(self.active)] = np.clip(values.T, -self.sentinel, self.sentinel)
        ids, counts = self.tree.intersection_v(points, points)
        items = np.repeat(np.arange(n, dtype=np.int64), counts.astype(np.int64))
        return items, ids.astype(np.int64)
