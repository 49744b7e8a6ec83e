"""Multi-predicate batch matching: for each tuple, every labelled predicate it satisfies.

A super-peer evaluates, per incoming batch, the predicates of all the flows and deliveries that read that
batch.  ``MultiMatcher`` compiles the labelled predicates into one table of boxes and picks a strategy by
size: a handful of boxes is cheapest as a plain numpy scan (one vectorised comparison per bound); more boxes
go to the region bitmaps of :mod:`matcher._eval_bitmap`, evaluated by the compiled numba kernels of
:mod:`matcher.filters._filter_kernels` (one binary search per dimension and a few word ANDs per tuple,
whatever the number of boxes up to the table budget).  ``python run.py bench pubsub`` measures the bitmap path
on 20,000 labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher._eval_bitmap import RegionBitmap, build_bitmap
from matcher._eval_boxes import ARRAY_KEYS, BoxTable, stack_columns
from matcher.predicate import Predicate

SCAN_MAX_BOXES = 4
"""Up to this many boxes the numpy scan beats the bitmap kernel (no stacking, no numba import)."""

PARALLEL_MIN_TUPLES = 8192
"""From this many tuples the bitmap kernel runs on numba's thread pool (chunks of 4096 tuples); below, one
chunk or two cannot gain from threads and the hand-off dominates (on small batches a parallel call cost
about ten times a serial one)."""


class MultiMatcher:
    """Labelled predicates evaluated together over columns of tuples.

    ``match(columns)`` returns a bool array of shape ``(n_tuples, n_labels)``; ``match_csr(columns)`` the
    same as CSR ``(indptr, indices)``.  ``to_arrays()`` gives plain numpy arrays from which
    ``from_arrays`` rebuilds an equal matcher in another process; pickling goes through them too.
    """

    def __init__(self, labelled: Sequence[tuple[str, Predicate]], *, scan_first: int = 0):
        labels = tuple(label for label, _ in labelled)
        self._setup(labels, BoxTable.of([p for _, p in labelled]), scan_first)

    def _setup(self, labels: tuple[str, ...], table: BoxTable, scan_first: int = 0) -> None:
        """``scan_first``: the bitmap is built only once this many tuples have been matched by the
        broadcast scan (or a batch would exceed them), so a matcher that sees a few tuples in its life never
        pays for building it."""
        self.labels = labels
        self.table = table
        self.dims = table.dims
        self.strategy = "scan" if table.n_boxes <= SCAN_MAX_BOXES else "bitmap"
        self._scan_left = scan_first if self.strategy == "bitmap" else 0
        self._bitmap: RegionBitmap | None = None
        if self.strategy == "bitmap" and not self._scan_left:
            self.prepare()

    def prepare(self) -> None:
        """Build the bitmap now, if this matcher uses one and has not built it yet."""
        if self.strategy == "bitmap" and self._bitmap is None:
            self._bitmap = build_bitmap(self.table)
            self._scan_left = 0

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "labels": np.array(self.labels, dtype=str),
            "dims": np.array(self.dims, dtype=str),
            **self.table.arrays(),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> MultiMatcher:
        """Rebuild from :meth:`to_arrays`; raises KeyError for a missing array, ValueError for bad shapes."""
        missing = [key for key in ("labels", "dims", *ARRAY_KEYS) if key not in arrays]
        if missing:
            raise KeyError(f"MultiMatcher arrays lack {', '.join(missing)}")
        labels = tuple(str(x) for x in arrays["labels"])
        dims = tuple(str(x) for x in arrays["dims"])
        self = cls.__new__(cls)
        self._setup(labels, BoxTable.from_arrays(dims, len(labels), arrays))
        return self

    def __reduce__(self):
        return (MultiMatcher.from_arrays, (self.to_arrays(),))

    def match(
        self, columns: Mapping[str, np.ndarray], *, parallel: bool | None = None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """``(n_tuples, n_labels)`` bool; raises KeyError naming a constrained attribute the columns lack.

        ``out``, when given, is a zeroed C-contiguous ``(n_tuples, n_labels)`` bool array filled and returned
        instead of a new one (the adaptive matcher passes row ranges of its batch's matrix).

        The bitmap kernel runs on numba's thread pool from ``PARALLEL_MIN_TUPLES`` tuples on, serially below;
        ``parallel`` overrides that choice (the adaptive matcher uses it to finish a batch on the pool).
        """
        if self._bitmap is None and self.strategy == "bitmap":
            values = stack_columns(columns, self.dims)
            if values.shape[1] <= self._scan_left:
                self._scan_left -= values.shape[1]
                out = np.zeros((values.shape[1], len(self.labels)), dtype=bool) if out is None else out
                return _broadcast_scan(self.table, values, out)
            self.prepare()
        if self._bitmap is None:
            values = stack_columns(columns, self.dims)
            out = np.zeros((values.shape[1], len(self.labels)), dtype=bool) if out is None else out
            inside = self.table.scan(values)
            for r, label in enumerate(self.table.owner):
                out[:, label] |= inside[r]
            return out
        values = stack_columns(columns, self._bitmap.dims)
        out = np.zeros((values.shape[1], len(self.labels)), dtype=bool) if out is None else out
        if not self._bitmap.dims:  # only TRUE and FALSE labels: the kernel needs a dimension
            out[:, np.unique(self.table.owner)] = True
            return out
        from matcher._eval_kernels import bitmap_tuple
        from matcher.filters._filter_kernels import dense_kernel, dense_kernel_serial

        if parallel is None:
            parallel = values.shape[1] >= PARALLEL_MIN_TUPLES
        kernel = dense_kernel if parallel else dense_kernel_serial
        kernel(values, bitmap_tuple(self._bitmap), self.table.owner, out)
        return out

    def match_csr(self, columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Satisfied labels per tuple: label indices ``indices[indptr[i]:indptr[i + 1]]``, ascending.

        Compact when each tuple satisfies few of many labels (no ``(n_tuples, n_labels)`` matrix).
        """
        self.prepare()
        if self._bitmap is None or not self._bitmap.dims:
            rows, labels = np.nonzero(self.match(columns))
            n = len(next(iter(columns.values()))) if columns else 0
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
            return indptr, labels.astype(np.int64)
        from matcher._eval_kernels import bitmap_tuple
        from matcher.filters._filter_kernels import csr_kernel

        values = stack_columns(columns, self._bitmap.dims)
        return csr_kernel(values, bitmap_tuple(self._bitmap), self.table.owner, len(self.labels))


def _broadcast_scan(table: BoxTable, values: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out |= `` the labels each tuple satisfies, by one broadcast comparison of every tuple with every
    box bound (``n_boxes x N x d`` booleans: for a few tuples, cheaper than building the bitmap).  A
    dimension a box leaves unconstrained holds every value, NaN and infinities included, as in
    :meth:`BoxTable.scan`."""
    if table.n_boxes == 0 or values.shape[1] == 0:
        return out
    x = values.T[None, :, :]  # (1, N, d)
    lo, hi = table.lo[:, None, :], table.hi[:, None, :]
    above = np.where(table.lo_closed[:, None, :], x >= lo, x > lo)
    below = np.where(table.hi_closed[:, None, :], x <= hi, x < hi)
    free = ~table.constrained()[:, None, :]
    inside = ((above & below) | free).all(axis=2)  # (n_boxes, N)
    owner = table.owner
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    if np.all(owner[1:] >= owner[:-1]):  # boxes grouped by label, as BoxTable.of lays them out
        out[:, owner[starts]] |= np.logical_or.reduceat(inside, starts, axis=0).T
    else:
        for r, label in enumerate(owner):
            out[:, label] |= inside[r]
    return out
