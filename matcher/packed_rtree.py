"""libspatialindex's R-tree and R*-tree, read out into flat arrays that compiled kernels can walk.

Kuntschke & Kemper index a predicate's boxes with an R-tree (quadratic split) for matching and with an
R*-tree for evaluation, node capacities 5 to 10 (section 6.1; docs/REFERENCES.md).  ``rtree`` (libspatialindex)
builds both, but answers a query through one library call per query, whose fixed cost hides what the
tree saves.  :func:`build` therefore lets libspatialindex build the tree, box by box in insertion order as
the paper's implementation did, captures every node page it writes through a custom storage manager, and
packs the nodes into arrays: the same tree, with the same node rectangles and fan-out, now walkable by a
numba loop (:mod:`matcher._rtree_kernels`) or by the plain Python walk of this module, its reference.

A node page of libspatialindex is ``u32 type, u32 level, u32 children``, then per child ``low[d] high[d]``
(float64), ``i64 id``, ``u32 data length`` and the data, then the node's own rectangle.  Nodes of level 0 are
leaves, whose child ids are the indexed ids; other children are node pages.

The packed tree: node 0 is the root; node ``v``'s entries are ``first[v] .. first[v] + count[v] - 1``; entry
``e`` has the closed rectangle ``lo[e], hi[e]`` and ``ref[e]``, a node number (inner nodes) or an indexed id
(leaves).  Rectangles are closed and finite: callers map infinite ends to a finite sentinel first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from rtree import index

VARIANTS = {"rtree": index.RT_Quadratic, "rstar": index.RT_Star}
"""The variants the paper compares: Guttman's R-tree with quadratic split, and the R*-tree."""

MAX_ENTRIES = 10
MIN_FILL = 0.5  # minimum 5 entries per node (section 6.1)

_LEAF_PAGE, _INDEX_PAGE = 2, 1


@dataclass(frozen=True, eq=False)
class PackedTree:
    """An R-tree as arrays (see the module docstring); ``dims`` coordinates per rectangle."""

    variant: str
    first: np.ndarray
    count: np.ndarray
    leaf: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    ref: np.ndarray
    height: int

    @property
    def dims(self) -> int:
        return self.lo.shape[1]

    @property
    def n_nodes(self) -> int:
        return len(self.first)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays in the order the kernels unpack them."""
        return self.first, self.count, self.leaf, self.lo, self.hi, self.ref

    def ids(self) -> np.ndarray:
        """Every indexed id, in leaf order."""
        leaves = np.flatnonzero(self.leaf)
        return np.concatenate([self.ref[self.first[v] : self.first[v] + self.count[v]] for v in leaves] or [[]])

    def query(self, lo: np.ndarray, hi: np.ndarray, containing: bool = False) -> list[int]:
        """Ids whose rectangle meets the closed rectangle ``lo..hi`` (or holds it whole, with ``containing``),
        in the order the kernels find them: the plain reference walk (a stack: children pushed in entry
        order, the last pushed visited first)."""
        found: list[int] = []
        stack = [0] if self.n_nodes else []
        while stack:
            node = stack.pop()
            start = int(self.first[node])
            for e in range(start, start + int(self.count[node])):
                if containing:
                    meets = np.all(self.lo[e] <= lo) and np.all(hi <= self.hi[e])
                else:
                    meets = np.all(self.lo[e] <= hi) and np.all(lo <= self.hi[e])
                if meets:
                    (found if self.leaf[node] else stack).append(int(self.ref[e]))
        return found


def build(lo: np.ndarray, hi: np.ndarray, variant: str = "rtree", ids: np.ndarray | None = None) -> PackedTree:
    """The tree libspatialindex builds by inserting the closed rectangles ``lo[i]..hi[i]`` (shape ``(n, d)``,
    finite) one by one with ids ``ids`` (default ``0..n-1``), packed.  Raises ValueError for an unknown
    variant or non-finite coordinates."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown R-tree variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    lo = np.ascontiguousarray(lo, dtype=np.float64)
    hi = np.ascontiguousarray(hi, dtype=np.float64)
    n, dims = lo.shape
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise ValueError("R-tree rectangles must be finite (map infinite ends to a sentinel first)")
    ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return PackedTree(variant, empty, empty, np.zeros(0, bool), np.zeros((0, dims)), np.zeros((0, dims)), empty, 0)
    padded = max(2, dims)  # libspatialindex needs two dimensions at least
    pad = np.zeros((n, padded - dims))
    properties = index.Property()
    properties.dimension = padded
    properties.leaf_capacity = properties.index_capacity = MAX_ENTRIES
    properties.fill_factor = MIN_FILL
    properties.near_minimum_overlap_factor = MAX_ENTRIES // 2  # must stay below the capacities
    properties.variant = VARIANTS[variant]
    # every page stays in libspatialindex's buffer until close() writes the final tree out once
    properties.buffering_capacity = 1 << 30
    storage = _Pages()
    tree = index.Index(storage, properties=properties, interleaved=False)
    bounds = np.empty((n, 2 * padded))  # one row per rectangle: xmin, xmax, ymin, ymax, ...
    bounds[:, 0::2] = np.hstack([lo, pad])
    bounds[:, 1::2] = np.hstack([hi, pad])
    for box_id, row in zip(ids.tolist(), bounds.tolist(), strict=True):
        tree.insert(box_id, row)
    tree.close()
    return _pack(storage.pages, padded, dims, variant)


class _Pages(index.CustomStorage):
    """A storage manager keeping libspatialindex's pages in a dict (page id -> bytes)."""

    def __init__(self):
        super().__init__()
        self.pages: dict[int, bytes] = {}
        self._next = 0

    def create(self, returnError):  # the callbacks' names are libspatialindex's
        pass

    def destroy(self, returnError):
        pass

    def flush(self, returnError):
        pass

    def loadByteArray(self, page, returnError):
        if page in self.pages:
            return self.pages[page]
        returnError.contents.value = self.InvalidPageError
        return None

    def storeByteArray(self, page, data, returnError):
        if page == self.NewPage:
            page = self._next
            self._next += 1
        self.pages[page] = bytes(data)
        return page

    def deleteByteArray(self, page, returnError):
        self.pages.pop(page, None)

    @property
    def hasData(self):
        return bool(self.pages)


def _parse(page: bytes, padded: int, dims: int) -> tuple[int, list[tuple[int, tuple, tuple]]] | None:
    """``(level, [(child id, low, high), ...])`` of a node page, None for any other page (the header)."""
    if len(page) < 12:
        return None
    kind, level, children = struct.unpack_from("<III", page, 0)
    if kind not in (_LEAF_PAGE, _INDEX_PAGE):
        return None
    rect = struct.Struct(f"<{padded}d")
    entry = struct.Struct("<qI")
    offset, entries = 12, []
    for _ in range(children):
        low = rect.unpack_from(page, offset)[:dims]
        high = rect.unpack_from(page, offset + rect.size)[:dims]
        child, length = entry.unpack_from(page, offset + 2 * rect.size)
        offset += 2 * rect.size + entry.size + length
        entries.append((child, low, high))
    return level, entries


def _pack(pages: dict[int, bytes], padded: int, dims: int, variant: str) -> PackedTree:
    nodes = {page: parsed for page, data in pages.items() if (parsed := _parse(data, padded, dims)) is not None}
    top = max(level for level, _ in nodes.values())
    roots = [page for page, (level, _) in nodes.items() if level == top]
    if len(roots) != 1:
        raise RuntimeError(f"libspatialindex left {len(roots)} nodes at its top level {top}")
    order, number = [roots[0]], {roots[0]: 0}
    for page in order:  # breadth first: a node's children get the next numbers
        level, entries = nodes[page]
        if level:
            for child, _, _ in entries:
                number[child] = len(order)
                order.append(child)
    first = np.zeros(len(order), dtype=np.int64)
    count = np.zeros(len(order), dtype=np.int64)
    leaf = np.zeros(len(order), dtype=bool)
    lo, hi, ref = [], [], []
    for v, page in enumerate(order):
        level, entries = nodes[page]
        first[v], count[v], leaf[v] = len(ref), len(entries), level == 0
        for child, low, high in entries:
            lo.append(low)
            hi.append(high)
            ref.append(child if level == 0 else number[child])
    return PackedTree(
        variant,
        first,
        count,
        leaf,
        np.array(lo, dtype=np.float64).reshape(len(ref), dims),
        np.array(hi, dtype=np.float64).reshape(len(ref), dims),
        np.array(ref, dtype=np.int64),
        top + 1,
    )
