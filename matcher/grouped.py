"""CACQ grouped filters (seed 003, section 3.2.6): one predicate index per attribute, shared by all labels.

Every label's predicate is a disjunction of boxes; each box (conjunct) is one entry, and a label matches
when any of its conjuncts survives.  A grouped filter indexes the bounds of all conjuncts on one attribute
in sorted arrays (the greater-than and less-than "trees") and a sorted array of equality constants (the
equality "hash").  Probing with a value yields the set of conjuncts that *fail* on that attribute, as a
precomputed prefix/suffix OR of bitmaps.  The failure formulation is what keeps AND semantics when one
conjunct constrains an attribute twice (``a > 10 AND a < 50``): a "passes" mask keyed by query would OR
the two bounds (the trap the CACQ digest describes).  ``a != c`` reaches us as two boxes (``a < c`` OR
``a > c``), so the inequality hash of the paper is not needed.

The kernel shared with the ASC engine lives here too: :class:`ConjunctTable` (the compiled boxes) and the
packed-bitmap helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher.predicate import Predicate

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

    @property
    def n_conjuncts(self) -> int:
        return len(self.owner)

    def uses(self, k: int) -> np.ndarray:
        """Bool per conjunct: it constrains dimension ``k`` (the query-usage bitmap of seed 001)."""
        return np.isfinite(self.lo[:, k]) | np.isfinite(self.hi[:, k])

    def contains(self, k: int, values: np.ndarray) -> np.ndarray:
        """Bool ``(len(values), n_conjuncts)``: each value lies in each conjunct's interval on dimension ``k``."""
        v = values[:, None]
        lo, hi = self.lo[None, :, k], self.hi[None, :, k]
        above = np.where(self.lo_closed[None, :, k], v >= lo, v > lo)
        below = np.where(self.hi_closed[None, :, k], v <= hi, v < hi)
        return above & below

    def label_matrix(self, alive: np.ndarray) -> np.ndarray:
        """OR the conjunct columns of ``alive`` (bool ``(n, n_conjuncts)``) into one column per label."""
        out = np.zeros((alive.shape[0], len(self.labels)), dtype=bool)
        if self.n_conjuncts == 0:
            return out
        starts = np.flatnonzero(np.r_[True, self.owner[1:] != self.owner[:-1]])
        out[:, self.owner[starts]] = np.logical_or.reduceat(alive, starts, axis=1)
        return out


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

    def failing(self, values: np.ndarray) -> np.ndarray:
        """Bitmaps ``(len(values), words)`` of the conjuncts whose constraint on this attribute fails."""
        (lc, lc_bits), (lo_, lo_bits) = self.lower
        (hc, hc_bits), (ho, ho_bits) = self.upper
        # suffix = all minus prefix: conjuncts with constant > v (closed) / >= v (open) fail
        fail = lc_bits[-1] & ~lc_bits[np.searchsorted(lc, values, side="right")]
        fail |= lo_bits[-1] & ~lo_bits[np.searchsorted(lo_, values, side="left")]
        fail |= hc_bits[np.searchsorted(hc, values, side="left")]
        fail |= ho_bits[np.searchsorted(ho, values, side="right")]
        if len(self.eq_values):
            i = np.minimum(np.searchsorted(self.eq_values, values), len(self.eq_values) - 1)
            hit = self.eq_values[i] == values
            passed = np.where(hit[:, None], self.eq_pass[i], np.uint64(0))
            fail |= self.eq_all & ~passed
        return fail


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
        self.evaluations = 0
        self.tuples_seen = 0

    def to_arrays(self) -> dict[str, np.ndarray]:
        return self.table.to_arrays()

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> GroupedFilter:
        self = cls.__new__(cls)
        self._build(ConjunctTable.from_arrays(arrays))
        return self

    def match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = row_count(columns)
        table = self.table
        completed = np.zeros((n, len(self.all_conjuncts)), dtype=np.uint64)
        live = np.arange(n)
        for k in self.order:
            if len(live) == 0:
                break
            self.evaluations += len(live)
            values = np.asarray(columns[table.dims[k]], dtype=np.float64)[live]
            completed[live] |= self.indexes[k].failing(values)
            live = live[(completed[live] != self.all_conjuncts).any(axis=1)]
        self.tuples_seen += n
        alive = ~unpack(completed, table.n_conjuncts)
        return table.label_matrix(alive)

    @property
    def evaluations_per_tuple(self) -> float:
        return self.evaluations / self.tuples_seen if self.tuples_seen else 0.0
