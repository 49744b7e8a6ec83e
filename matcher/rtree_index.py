"""An R-tree over the boxes of a stream predicate (Kuntschke & Kemper, section 3.6), backed by ``rtree``
(libspatialindex).

Boxes are indexed in the integer cell coordinates of a :class:`matcher.predicate.CellGrid`: there every
interval is a closed range of cells, open and infinite ends included, so the R-tree's closed-box
intersection test is exact and needs no sentinels for infinite ends and no widening for open ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import rtree

# Node capacities of Kuntschke & Kemper's section 6.1 (minimum 5, maximum 10 entries); quadratic split as in its
# matching benchmark.
_CAPACITY = 10
_FILL_FACTOR = 0.5


class BoxIndex:
    """Boxes in cell coordinates, keyed by integer ids; answers "which boxes overlap this one".

    ``entries`` are ``(id, cells)`` pairs with ``cells = (lo_0, hi_0, lo_1, hi_1, ...)`` over ``n_dims``
    dimensions.  libspatialindex needs at least two dimensions, so fewer are padded with the range 0..0.
    """

    def __init__(self, n_dims: int, entries: Sequence[tuple[int, tuple[int, ...]]]):
        self._pad = (0,) * (max(2, n_dims) - n_dims)
        properties = rtree.index.Property()
        properties.dimension = n_dims + len(self._pad)
        properties.leaf_capacity = _CAPACITY
        properties.index_capacity = _CAPACITY
        properties.fill_factor = _FILL_FACTOR
        # libspatialindex rejects its default (32) unless it is below both capacities
        properties.near_minimum_overlap_factor = _CAPACITY // 2
        properties.variant = rtree.index.RT_Quadratic
        if entries:
            ids = np.array([i for i, _ in entries], dtype=np.int64)
            mins = np.array([cells[0::2] + self._pad for _, cells in entries], dtype=np.float64)
            maxs = np.array([cells[1::2] + self._pad for _, cells in entries], dtype=np.float64)
            self._tree = rtree.index.Index((ids, mins, maxs), properties=properties)
        else:
            self._tree = rtree.index.Index(properties=properties)

    def _coordinates(self, cells: tuple[int, ...]) -> tuple[int, ...]:
        return cells[0::2] + self._pad + cells[1::2] + self._pad

    def insert(self, box_id: int, cells: tuple[int, ...]) -> None:
        self._tree.insert(box_id, self._coordinates(cells))

    def overlapping(self, cells: tuple[int, ...]) -> list[int]:
        """Ids of the indexed boxes sharing at least one cell with ``cells``, in no particular order."""
        return list(self._tree.intersection(self._coordinates(cells)))
