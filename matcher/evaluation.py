"""Predicate evaluation (Kuntschke & Kemper, section 4, Algorithm 13): does an item satisfy a disjunction?

Every evaluator has ``evaluate(item) -> bool`` for one item (a mapping from attribute to value) and
``evaluate_batch(columns) -> np.ndarray`` of bool for columns (``Mapping[str, np.ndarray]`` of float64).
All are exact, open and closed ends included; a missing attribute that the predicate constrains raises
KeyError naming it.

- ``SE``: standard evaluation, a sequential scan of the boxes per item; the first containing box wins.
- ``IE`` / ``IE+SC``: index-based evaluation per item on an R*-tree of the boxes (the paper's evaluation
  index; ``variant="rtree"`` for the quadratic R-tree), with a verification step for open ends; IE finds
  every containing box, IE+SC stops at the first (the short-circuit of section 4.2).
- ``SE-plain``, ``IE-plain``, ``IE+SC-plain``: the same three algorithms in plain Python over the same data
  (the references the compiled ones are tested against, and the cost of running them in Python).
- ``SE-numpy``: the vectorised scan, one numpy comparison per bound per box.
- ``bitmap-numpy`` / ``bitmap``: region bitmaps (``matcher._eval_bitmap``) evaluated with numpy or with
  the compiled numba kernel; ``bitmap`` is the fastest exact batch evaluator.

SE, IE and IE+SC run per item in numba kernels (:mod:`matcher._rtree_kernels`), one item after another
without vectorisation or threads, so that their relative costs are the algorithms' (section 6.3 compares
them); ``evaluate_counted`` also returns the boxes or rectangles each item tested.

:func:`evaluate_reference` is the plain pointwise reference (``Predicate.evaluate`` per row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from matcher._eval_bitmap import any_numpy, build_bitmap
from matcher._eval_boxes import BoxTable, stack_columns
from matcher._eval_items import IETree, SEBoxes, ie_plain, se_plain
from matcher.predicate import Predicate


def evaluate_reference(predicate: Predicate, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Row by row ``predicate.evaluate`` (the trivially correct, slow reference)."""
    names = list(columns)
    rows = zip(*(np.asarray(columns[a], dtype=np.float64).tolist() for a in names), strict=True)
    n = len(next(iter(columns.values()))) if columns else 0
    return np.fromiter((predicate.evaluate(dict(zip(names, row, strict=True))) for row in rows), bool, count=n)


class _PerItem:
    """Shared shell of SE, IE and IE+SC: ``dims`` and ``_run(values) -> (hits, work)`` over a ``(d, N)`` matrix."""

    dims: tuple[str, ...]

    def _run(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def evaluate(self, item: Mapping[str, float]) -> bool:
        values = np.array([float(item[d]) for d in self.dims], dtype=np.float64).reshape(len(self.dims), 1)
        return bool(self._run(values)[0][0])

    def evaluate_batch(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._run(stack_columns(columns, self.dims))[0]

    def evaluate_counted(self, columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(hits, work)``: per item, whether it satisfies the predicate and how many boxes (SE) or tree
        rectangles (IE) it was tested against."""
        return self._run(stack_columns(columns, self.dims))


class StandardEvaluator(_PerItem):
    """SE, Algorithm 13: iterate the boxes; within a box test the shortest intervals first.

    ``compiled=False`` runs the same scan in plain Python (``SE-plain``).
    """

    def __init__(self, predicate: Predicate, compiled: bool = True):
        self.predicate = predicate
        self.compiled = compiled
        self.name = "SE" if compiled else "SE-plain"
        self.boxes = SEBoxes.of(predicate)
        self.dims = self.boxes.dims

    def _run(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = values.shape[1]
        out, work = np.empty(n, dtype=bool), np.empty(n, dtype=np.int64)
        if self.compiled:
            from matcher._rtree_kernels import se_batch

            se_batch(values, *self.boxes.arrays(), out, work)
        else:
            for i, row in enumerate(values.T.tolist()):
                out[i], work[i] = se_plain(self.boxes, row)
        return out, work


class IndexEvaluator(_PerItem):
    """IE (``short_circuit=False``) or IE+SC on a packed R*-tree (``variant="rstar"``) or quadratic R-tree
    (``"rtree"``) of the boxes, each leaf hit verified exactly.  ``compiled=False``: the plain Python walk.

    Raises ValueError for an unknown variant.
    """

    def __init__(
        self, predicate: Predicate, short_circuit: bool = False, variant: str = "rstar", compiled: bool = True
    ):
        self.predicate = predicate
        self.short_circuit = short_circuit
        self.compiled = compiled
        self.name = ("IE+SC" if short_circuit else "IE") + ("" if compiled else "-plain")
        self.index = IETree.of(predicate, variant)
        self.dims = self.index.dims

    def _run(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = values.shape[1]
        out, work = np.empty(n, dtype=bool), np.empty(n, dtype=np.int64)
        if self.compiled:
            from matcher._rtree_kernels import ie_batch

            arrays = (self.index.tree.arrays(), self.index.box_arrays())
            ie_batch(values, self.index.sentinel, *arrays, self.short_circuit, out, work)
        else:
            for i, row in enumerate(values.T.tolist()):
                out[i], work[i] = ie_plain(self.index, row, self.short_circuit)
        return out, work


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
    "SE-plain": lambda predicate: StandardEvaluator(predicate, compiled=False),
    "IE-plain": lambda predicate: IndexEvaluator(predicate, compiled=False),
    "IE+SC-plain": lambda predicate: IndexEvaluator(predicate, short_circuit=True, compiled=False),
    "SE-numpy": ScanEvaluator,
    "bitmap-numpy": lambda predicate: BitmapEvaluator(predicate, backend="numpy"),
    "bitmap": BitmapEvaluator,
}
"""Every evaluator by its benchmark name; each value builds one from a predicate."""


def fastest_evaluator(predicate: Predicate) -> BitmapEvaluator:
    """The fastest exact batch evaluator (see ``python run.py bench evaluation``)."""
    return BitmapEvaluator(predicate)
