"""Predicate evaluation (Kuntschke & Kemper, section 4, Algorithm 13): does an item satisfy a disjunction?

Every evaluator has ``evaluate(item) -> bool`` for one item (a mapping from attribute to value) and
``evaluate_batch(columns) -> np.ndarray`` of bool for columns (``Mapping[str, np.ndarray]`` of float64).
All are exact, open and closed ends included; a missing attribute that the predicate constrains raises
KeyError naming it.

- ``SE``: standard evaluation, a sequential scan of the boxes; the first containing box wins.
- ``IE`` / ``IE+SC``: index-based evaluation on an R-tree of the boxes, with a verification step for
  open ends; IE+SC stops the tree search at the first hit (the short-circuit of section 4.2).
- ``SE-numpy``: the vectorised scan, one numpy comparison per bound per box.
- ``bitmap-numpy`` / ``bitmap``: region bitmaps (``matcher._eval_bitmap``) evaluated with numpy or with
  the compiled numba kernel; ``bitmap`` is the fastest exact batch evaluator.

:func:`evaluate_reference` is the plain pointwise reference (``Predicate.evaluate`` per row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from matcher._eval_bitmap import any_numpy, build_bitmap
from matcher._eval_boxes import BoxTable, stack_columns
from matcher._eval_rtree import BoxRTree
from matcher.predicate import Box, Predicate


def evaluate_reference(predicate: Predicate, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Row by row ``predicate.evaluate`` (the trivially correct, slow reference)."""
    names = list(columns)
    rows = zip(*(np.asarray(columns[a], dtype=np.float64).tolist() for a in names), strict=True)
    n = len(next(iter(columns.values()))) if columns else 0
    return np.fromiter((predicate.evaluate(dict(zip(names, row, strict=True))) for row in rows), bool, count=n)


def _rows(columns: Mapping[str, np.ndarray], dims: tuple[str, ...]) -> list[dict[str, float]]:
    values = stack_columns(columns, dims)
    return [dict(zip(dims, row, strict=True)) for row in values.T.tolist()]


def _box_order(box: Box) -> tuple[int, float]:
    """Kuntschke & Kemper, section 6.1: boxes with fewer infinite ends first, then larger (finite) volume first."""
    infinite = sum((iv.lo == -np.inf) + (iv.hi == np.inf) for _, iv in box.items())
    volume = float(np.prod([iv.length for _, iv in box.items() if np.isfinite(iv.length)]))
    return infinite, -volume


class StandardEvaluator:
    """SE, Algorithm 13: iterate the boxes; within a box test the shortest intervals first."""

    name = "SE"

    def __init__(self, predicate: Predicate):
        self.predicate = predicate
        self.dims = predicate.dims
        ordered = sorted(predicate.boxes, key=_box_order)
        self._boxes = [tuple(sorted(box.items(), key=lambda item: item[1].length)) for box in ordered]

    def evaluate(self, item: Mapping[str, float]) -> bool:
        for box in self._boxes:
            for dim, (lo, hi, lo_closed, hi_closed) in box:
                x = item[dim]
                if not ((lo < x or (lo_closed and x == lo)) and (x < hi or (hi_closed and x == hi))):
                    break
            else:
                return True
        return False

    def evaluate_batch(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        rows = _rows(columns, self.dims)
        return np.fromiter((self.evaluate(row) for row in rows), bool, count=len(rows))


class IndexEvaluator:
    """IE (``short_circuit=False``) or IE+SC: R-tree containment search, then exact verification."""

    def __init__(self, predicate: Predicate, short_circuit: bool = False):
        self.predicate = predicate
        self.short_circuit = short_circuit
        self.name = "IE+SC" if short_circuit else "IE"
        self.table = BoxTable.of([predicate])
        self._all = BoxRTree(self.table)
        self._first = BoxRTree(self.table, limit=1) if short_circuit else None
        self.dims = tuple(self.table.dims[k] for k in self._all.active)
        self._lo, self._hi = self.table.lo[:, self._all.active], self.table.hi[:, self._all.active]
        self._lo_closed = self.table.lo_closed[:, self._all.active]
        self._hi_closed = self.table.hi_closed[:, self._all.active]
        self._fallback = StandardEvaluator(predicate)

    def _holds(self, r: int, values: list[float]) -> bool:
        lo, hi, lo_closed, hi_closed = self._lo[r], self._hi[r], self._lo_closed[r], self._hi_closed[r]
        return all(
            (lo[k] == -np.inf and hi[k] == np.inf)
            or ((lo[k] < x or (lo_closed[k] and x == lo[k])) and (x < hi[k] or (hi_closed[k] and x == hi[k])))
            for k, x in enumerate(values)
        )

    def _evaluate_values(self, values: list[float]) -> bool:
        if self._all.point(values) is None:
            return self._fallback.evaluate(dict(zip(self.dims, values, strict=True)))
        if self._first is not None:
            first = self._first.candidates(values)
            if not first:
                return False
            if self._holds(first[0], values):
                return True
        return any(self._holds(r, values) for r in self._all.candidates(values))

    def evaluate(self, item: Mapping[str, float]) -> bool:
        return self._evaluate_values([float(item[d]) for d in self.dims])

    def evaluate_batch(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        values = stack_columns(columns, self.dims)
        if self.short_circuit:
            rows = values.T.tolist()
            return np.fromiter((self._evaluate_values(row) for row in rows), bool, count=len(rows))
        result = np.zeros(values.shape[1], dtype=bool)
        nan_rows = np.isnan(values).any(axis=0)
        searchable = np.flatnonzero(~nan_rows)
        items, boxes = self._all.candidates_batch(values[:, searchable])
        x = values[:, searchable[items]].T
        lo, hi = self._lo[boxes], self._hi[boxes]
        above = (lo < x) | (self._lo_closed[boxes] & (x == lo))
        below = (x < hi) | (self._hi_closed[boxes] & (x == hi))
        ok = ((lo == -np.inf) & (hi == np.inf)) | (above & below)
        result[searchable[items[ok.all(axis=1)]]] = True
        for i in np.flatnonzero(nan_rows):
            result[i] = self._evaluate_values(values[:, i].tolist())
        return result


class ScanEvaluator:
    """SE-numpy: the vectorised sequential scan (one numpy pass per bound per box)."""

    name = "SE-numpy"

    def __init__(self, predicate: Predicate):
        self.predicate = predicate
        self.table = BoxTable.of([predicate])
        self.dims = self.table.dims

    def evaluate(self, item: Mapping[str, float]) -> bool:
        columns = {d: np.array([item[d]], dtype=np.float64) for d in self.dims}
        return bool(self.evaluate_batch(columns)[0]) if columns else not self.predicate.is_empty()

    def evaluate_batch(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.table.scan_any(stack_columns(columns, self.dims))


class BitmapEvaluator:
    """Region-bitmap evaluation: ``backend="numba"`` (compiled, parallel) or ``"numpy"``.

    Raises ValueError for an unknown backend.
    """

    def __init__(self, predicate: Predicate, backend: str = "numba"):
        if backend not in ("numba", "numpy"):
            raise ValueError(f"unknown bitmap backend {backend!r} (expected 'numba' or 'numpy')")
        self.predicate = predicate
        self.backend = backend
        self.name = "bitmap" if backend == "numba" else "bitmap-numpy"
        self.bitmap = build_bitmap(BoxTable.of([predicate]))
        self.dims = self.bitmap.dims

    def evaluate(self, item: Mapping[str, float]) -> bool:
        columns = {d: np.array([item[d]], dtype=np.float64) for d in self.dims}
        return bool(self.evaluate_batch(columns)[0]) if columns else not self.predicate.is_empty()

    def evaluate_batch(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        values = stack_columns(columns, self.dims)
        if not self.dims:  # TRUE or FALSE: the kernel needs a dimension to reject in
            return np.full(values.shape[1], self.bitmap.boxes.n_boxes > 0)
        if self.backend == "numpy":
            return any_numpy(self.bitmap, values)
        from matcher._eval_kernels import any_kernel, bitmap_tuple

        out = np.empty(values.shape[1], dtype=bool)
        any_kernel(values, bitmap_tuple(self.bitmap), out)
        return out


EVALUATORS: dict[str, Callable[[Predicate], object]] = {
    "SE": StandardEvaluator,
    "IE": IndexEvaluator,
    "IE+SC": lambda predicate: IndexEvaluator(predicate, short_circuit=True),
    "SE-numpy": ScanEvaluator,
    "bitmap-numpy": lambda predicate: BitmapEvaluator(predicate, backend="numpy"),
    "bitmap": BitmapEvaluator,
}
"""Every evaluator by its benchmark name; each value builds one from a predicate."""


def fastest_evaluator(predicate: Predicate) -> BitmapEvaluator:
    """The fastest exact batch evaluator (see ``python run.py bench evaluation``)."""
    return BitmapEvaluator(predicate)
