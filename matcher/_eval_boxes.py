"""Boxes of labelled predicates as flat numpy arrays: the shared input of every batch evaluator.

One row per box; ``owner[r]`` is the index of the label (predicate) the box belongs to.  Unconstrained
dimensions hold ``(-inf, inf)`` open, exactly as :class:`matcher.predicate.Interval` normalises them, so
a row reads back to the same :class:`Box`.  ``scan`` is the plain vectorised reference: one numpy
comparison per constrained bound per box.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from matcher.predicate import Predicate

ARRAY_KEYS = ("owner", "lo", "hi", "lo_closed", "hi_closed")


@dataclass(frozen=True, eq=False)
class BoxTable:
    """``n`` boxes over ``dims`` (sorted attribute names) as arrays of shape ``(n,)`` and ``(n, d)``."""

    dims: tuple[str, ...]
    n_labels: int
    owner: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lo_closed: np.ndarray
    hi_closed: np.ndarray

    @classmethod
    def of(cls, predicates: Sequence[Predicate]) -> BoxTable:
        """Box rows of every predicate in order; label ``j`` is ``predicates[j]``."""
        dims = tuple(sorted({d for p in predicates for d in p.dims}))
        rows = [(j, box) for j, p in enumerate(predicates) for box in p.boxes]
        n, d = len(rows), len(dims)
        lo, hi = np.full((n, d), -np.inf), np.full((n, d), np.inf)
        lo_closed, hi_closed = np.zeros((n, d), dtype=bool), np.zeros((n, d), dtype=bool)
        column = {dim: k for k, dim in enumerate(dims)}
        for r, (_, box) in enumerate(rows):
            for dim, iv in box.items():
                k = column[dim]
                lo[r, k], hi[r, k], lo_closed[r, k], hi_closed[r, k] = iv
        owner = np.array([j for j, _ in rows], dtype=np.int64)
        return cls(dims, len(predicates), owner, lo, hi, lo_closed, hi_closed)

    @classmethod
    def from_arrays(cls, dims: Sequence[str], n_labels: int, arrays: Mapping[str, np.ndarray]) -> BoxTable:
        """Rebuild from :meth:`arrays` output; raises ValueError when the shapes disagree."""
        owner = np.ascontiguousarray(arrays["owner"], dtype=np.int64)
        n, d = len(owner), len(dims)
        lo = np.ascontiguousarray(arrays["lo"], dtype=np.float64).reshape(n, d)
        hi = np.ascontiguousarray(arrays["hi"], dtype=np.float64).reshape(n, d)
        lo_closed = np.ascontiguousarray(arrays["lo_closed"], dtype=bool).reshape(n, d)
        hi_closed = np.ascontiguousarray(arrays["hi_closed"], dtype=bool).reshape(n, d)
        if n and (owner.min() < 0 or owner.max() >= n_labels):
            raise ValueError(f"box owners must lie in [0, {n_labels}), got {owner.min()}..{owner.max()}")
        return cls(tuple(dims), int(n_labels), owner, lo, hi, lo_closed, hi_closed)

    def arrays(self) -> dict[str, np.ndarray]:
        return {key: getattr(self, key) for key in ARRAY_KEYS}

    @property
    def n_boxes(self) -> int:
        return len(self.owner)

    def restricted(self, columns: np.ndarray) -> BoxTable:
        """The same boxes over the dimensions ``columns`` only (indices into ``dims``)."""
        return BoxTable(
            tuple(self.dims[k] for k in columns),
            self.n_labels,
            self.owner,
            *(np.ascontiguousarray(a[:, columns]) for a in (self.lo, self.hi, self.lo_closed, self.hi_closed)),
        )

    def constrained(self) -> np.ndarray:
        """``(n, d)`` bool: the box restricts that dimension."""
        return (self.lo != -np.inf) | (self.hi != np.inf)

    def scan(self, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``(n_boxes, N)`` bool: item ``i`` lies in box ``r`` (plain numpy, one pass per bound).

        ``values`` is the ``(d, N)`` matrix of :meth:`stack`; ``rows`` restricts to some boxes.
        """
        rows = np.arange(self.n_boxes) if rows is None else rows
        inside = np.ones((len(rows), values.shape[1]), dtype=bool)
        for out, r in enumerate(rows):
            for k in range(len(self.dims)):
                lo, hi = self.lo[r, k], self.hi[r, k]
                if lo == -np.inf and hi == np.inf:
                    continue  # unconstrained: holds every value, NaN and infinities included
                inside[out] &= values[k] >= lo if self.lo_closed[r, k] else values[k] > lo
                inside[out] &= values[k] <= hi if self.hi_closed[r, k] else values[k] < hi
        return inside

    def scan_any(self, values: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: item lies in some box (the vectorised scan, one box at a time)."""
        hit = np.zeros(values.shape[1], dtype=bool)
        for r in range(self.n_boxes):
            hit |= self.scan(values, np.array([r]))[0]
        return hit


def stack_columns(columns: Mapping[str, np.ndarray], dims: Sequence[str]) -> np.ndarray:
    """The ``(len(dims), N)`` C-contiguous float64 matrix of the named columns.

    Raises KeyError naming the attribute when a column is missing and ValueError when the columns
    differ in length.
    """
    n = _length(columns)
    values = np.empty((len(dims), n))
    for k, dim in enumerate(dims):
        if dim not in columns:
            raise KeyError(f"columns lack attribute {dim!r} used by the predicate")
        values[k] = np.asarray(columns[dim], dtype=np.float64)
    return values


def _length(columns: Mapping[str, np.ndarray]) -> int:
    """Common length of the columns (0 for no columns); raises ValueError when they differ."""
    lengths = {len(c) for c in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 0
