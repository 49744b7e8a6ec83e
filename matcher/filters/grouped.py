"""CACQ grouped filters (Madden et al., section 3.2.6): one predicate index per attribute, shared by all labels.

Every label's predicate is a disjunction of boxes; each box (conjunct) is one entry, and a label matches when
any of its conjuncts survives.  A grouped filter indexes the bounds of all conjuncts on one attribute in
sorted arrays (the greater-than and less-than "trees") and a sorted array of equality constants (the equality
"hash").  Probing with a value yields the set of conjuncts that *fail* on that attribute, as a precomputed
prefix/suffix OR of bitmaps.  The failure formulation is what keeps AND semantics when one conjunct constrains
an attribute twice (``a > 10 AND a < 50``): a "passes" mask keyed by query would OR the two bounds (the paper
does not say how it handles two predicates of one query on one attribute).  ``a != c`` reaches us as two boxes
(``a < c`` OR ``a > c``), so the inequality hash of the paper is not needed.

The kernel shared with the ASC engine lives here too: :class:`ConjunctTable` (the compiled boxes) and the
packed-bitmap helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher.predicate import Box, Predicate, interval

ARRAY_KEYS = ("owner", "lo", "hi", "lo_closed", "hi_closed")


class ConjunctTable:
    """Labelled predicates flattened to one row per box: bounds per dimension and the owning label.

    Unconstrained bounds are ``-inf``/``inf``.  Rows of one label are consecutive, in label order.
    """

    def __init__(self, labels: tuple[str, ...], dims: tuple[str, ...], arrays: Mapping[str, np.ndarray]):
        self.labels = labels
        self.dims = dims
        self.owner = np.asarray(arrays["owner"], dtype=np.int64)
        self.lo = np.asarray(arrays["lo"], dtype=np.float64).reshape(len(self.owner), len(dims))
        self.hi = np.asarray(arrays["hi"], dtype=np.float64).reshape(len(self.owner), len(dims))
        self.lo_closed = np.asarray(arrays["lo_closed"], dtype=bool).reshape(self.lo.shape)
        self.hi_closed = np.asarray(arrays["hi_closed"], dtype=bool).reshape(self.lo.shape)

    @classmethod
    def of(cls, labelled: Sequence[tuple[str, Predicate]]) -> ConjunctTable:
        labels = tuple(label for label, _ in labelled)
        dims = tuple(sorted({d for _, p in labelled for d in p.dims}))
        rows = [(j, box) for j, (_, p) in enumerate(labelled) for box in p.boxes]
        n, d = len(rows), len(dims)
        arrays = {
            "owner": np.array([j for j, _ in rows], dtype=np.int64),
            "lo": np.full((n, d), -np.inf),
            "hi": np.full((n, d), np.inf),
            "lo_closed": np.zeros((n, d), dtype=bool),
            "hi_closed": np.zeros((n, d), dtype=bool),
        }
        index = {dim: k for k, dim in enumerate(dims)}
        for r, (_, box) in enumerate(rows):
            for dim, iv in box.items():
                k = index[dim]
                arrays["lo"][r, k], arrays["hi"][r, k] = iv.lo, iv.hi
                arrays["lo_closed"][r, k], arrays["hi_closed"][r, k] = iv.lo_closed, iv.hi_closed
        return cls(labels, dims, arrays)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> ConjunctTable:
        return cls(tuple(str(x) for x in arrays["labels"]), tuple(str(x) for x in arrays["dims"]), arrays)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "labels": np.array(self.labels, dtype=object),
            "dims": np.array(self.dims, dtype=object),
            "owner": self.owner,
            "lo": self.lo,
            "hi": self.hi,
            "lo_closed": self.lo_closed,
            "hi_closed": self.hi_closed,
        }

    def labelled(self) -> tuple[tuple[str, Predicate], ...]:
        """The labelled predicates the table was compiled from (a label's boxes in their order)."""
        boxes: list[list[Box]] = [[] for _ in self.labels]
        for r, owner in enumerate(self.owner):
            box = Box(
                (dim, interval(self.lo[r, k], self.hi[r, k], self.lo_closed[r, k], self.hi_closed[r, k]))
                for k, dim in enumerate(self.dims)
                if np.isfinite(self.lo[r, k]) or np.isfinite(self.hi[r, k])
            )
            boxes[int(owner)].append(box)
        return tuple((label, Predicate(b)) for label, b in zip(self.labels, boxes, strict=True))

    @property
    def n_conjuncts(self) -> int:
        return len(self.owner)

    def uses(self, k: int) -> np.ndarray:
        """Bool per conjunct: it constrains dimension ``k`` (the query-usage bitmap of Lee & Lee's ASC)."""
        return np.isfinite(self.lo[:, k]) | np.isfinite(self.hi[:, k])

    def contains(self, k: int, values: np.ndarray) -> np.ndarray:
        """Bool ``(len(values), n_conjuncts)``: each value lies in each conjunct's interval on dimension ``k``."""
        v = values[:, None]
        lo, hi = self.lo[None, :, k], self.hi[None, :, k]
        above = np.where(self.lo_closed[None, :, k], v >= lo, v > lo)
        below = np.where(self.hi_closed[None, :, k], v <= hi, v < hi)
        return above & below


def row_count(columns: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def pack(bits: np.ndarray) -> np.ndarray:
    """Bool ``(rows, k)`` to little-endian bitmaps ``(rows, ceil(k/64))`` of uint64."""
    rows, k = bits.shape
    words = max(1, -(-k // 64))
    padded = np.zeros((rows, words * 64), dtype=bool)
    padded[:, :k] = bits
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64)


def unpack(bitmaps: np.ndarray, k: int) -> np.ndarray:
    """Inverse of :func:`pack`: bool ``(rows, k)``."""
    as_bytes = np.ascontiguousarray(bitmaps).view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, bitorder="little", count=k).astype(bool)


class _AttributeIndex:
    """The grouped filter of one attribute: failing-conjunct bitmaps for any probe value.

    Closed lower bounds fail for ``lo > v`` (a suffix of the sorted constants), open lower bounds for
    ``lo >= v``; closed upper bounds fail for ``hi < v`` (a prefix), open ones for ``hi <= v``.  Point
    intervals go to the equality array instead: they fail unless ``v`` equals their constant.
    """

    def __init__(self, table: ConjunctTable, k: int):
        lo, hi = table.lo[:, k], table.hi[:, k]
        point = (lo == hi) & table.lo_closed[:, k] & table.hi_closed[:, k]
        n = table.n_conjuncts
        self.lower = [self._sorted(lo, np.isfinite(lo) & ~point & (table.lo_closed[:, k] == c), n) for c in (1, 0)]
        self.upper = [self._sorted(hi, np.isfinite(hi) & ~point & (table.hi_closed[:, k] == c), n) for c in (1, 0)]
        self.eq_values, eq_inverse = np.unique(lo[point], return_inverse=True)
        eq_bits = np.zeros((len(self.eq_values), n), dtype=bool)
        eq_bits[eq_inverse, np.flatnonzero(point)] = True
        self.eq_pass = pack(eq_bits) if len(self.eq_values) else np.zeros((0, max(1, -(-n // 64))), np.uint64)
        self.eq_all = pack(point[None, :])[0]
        self.entries = int(np.isfinite(lo).sum() + np.isfinite(hi).sum() - point.sum())

    @staticmethod
    def _sorted(bounds: np.ndarray, chosen: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Sorted constants and cumulative-OR bitmaps: row ``i`` = conjuncts of constants ``0..i-1``."""
        rows = np.flatnonzero(chosen)
        rows = rows[np.argsort(bounds[rows], kind="stable")]
        bits = np.zeros((len(rows) + 1, n), dtype=bool)
        bits[np.arange(1, len(rows) + 1), rows] = True
        return bounds[rows], pack(np.logical_or.accumulate(bits, axis=0))


class GroupedFilter:
    """CACQ-style shared filtering with the MultiMatcher interface.

    Grouped filters are probed attribute by attribute (most entries first, the order CACQ's tickets
    favour: an operator earns as many tickets as it applies predicates); a tuple leaves the pipeline as
    soon as every conjunct has failed (its ``queriesCompleted`` bitmap is full).  ``evaluations`` counts
    grouped-filter probes, the routing steps the paper counts.
    """

    unit = "grouped filters"

    def __init__(self, labelled: Sequence[tuple[str, Predicate]]):
        self._build(ConjunctTable.of(labelled))

    def _build(self, table: ConjunctTable) -> None:
        self.table = table
        self.labels = table.labels
        self.indexes = [_AttributeIndex(table, k) for k in range(len(table.dims))]
        self.order = sorted(range(len(table.dims)), key=lambda k: (-self.indexes[k].entries, k))
        self.all_conjuncts = pack(np.ones((1, table.n_conjuncts), dtype=bool))[0]
        self._flat = self._flatten()
        self.evaluations = 0
        self.tuples_seen = 0

    def to_arrays(self) -> dict[str, np.ndarray]:
        return self.table.to_arrays()

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> GroupedFilter:
        self = cls.__new__(cls)
        self._build(ConjunctTable.from_arrays(arrays))
        return self

    def match(self, columns: Mapping[str, np.ndarray], *, out: np.ndarray | None = None) -> np.ndarray:
        """``(n_tuples, n_labels)`` bool, into ``out`` when given (zeroed, C-contiguous: see MultiMatcher.match)."""
        from matcher.filters._filter_kernels import grouped_kernel

        n = row_count(columns)
        table = self.table
        values = np.empty((len(table.dims), n))
        for k, d in enumerate(table.dims):
            values[k] = columns[d]
        out = np.zeros((n, len(self.labels)), dtype=bool) if out is None else out
        order = np.array(self.order, dtype=np.int64)
        self.evaluations += grouped_kernel(values, order, *self._flat, self.all_conjuncts, table.owner, out)
        self.tuples_seen += n
        return out

    def _flatten(self) -> tuple[np.ndarray, ...]:
        """The attribute indexes as :func:`~matcher.filters._filter_kernels.grouped_kernel` reads them."""
        words = len(self.all_conjuncts)
        constants, bitmaps, coff, boff = [], [], [], []
        size = rows = 0
        for index in self.indexes:
            starts, row_starts = [], []
            for c, b in (*index.lower, *index.upper, (index.eq_values, index.eq_pass)):
                starts.append(size)
                row_starts.append(rows)
                constants.append(np.asarray(c, dtype=np.float64))
                bitmaps.append(np.asarray(b, dtype=np.uint64).reshape(-1, words))
                size += len(c)
                rows += len(bitmaps[-1])
            coff.append([*starts, size])
            boff.append(row_starts)
        eq_all = np.stack([index.eq_all for index in self.indexes]) if self.indexes else np.zeros((0, words), np.uint64)
        used = [self.table.uses(k) for k in range(len(self.indexes))]
        uses = pack(np.stack(used)) if used else np.zeros((0, words), np.uint64)
        return (
            np.concatenate(constants or [np.zeros(0)]),
            np.array(coff, dtype=np.int64).reshape(-1, 6),
            np.concatenate(bitmaps or [np.zeros((1, words), np.uint64)]),
            np.array(boff, dtype=np.int64).reshape(-1, 5),
            eq_all,
            uses.reshape(-1, words),
        )

    @property
    def evaluations_per_tuple(self) -> float:
        return self.evaluations / self.tuples_seen if self.tuples_seen else 0.0
