"""Region bitmaps: the fastest exact batch evaluator of many boxes (numba, with a numpy twin).

Per constrained dimension the sorted box bounds ``s_0 < ... < s_{m-1}`` (with ``-inf`` and ``inf`` always
among them) cut the line into elementary regions: region ``2i+1`` is the point ``{s_i}``, region ``2i`` the
open gap ``(s_{i-1}, s_i)``, and region ``2m+1`` holds NaN.  A value's region is one binary search plus
one equality test, so open and closed ends are told apart exactly.  For each region two bitsets over
the boxes are stored: ``maybe`` (the box's interval meets the region) and ``sure`` (it covers it).  An
item lies in box ``b`` iff bit ``b`` survives the AND over its dimensions' regions.

When every bound of a dimension is a split, each region is either covered or missed by each box, so
``sure == maybe`` and no verification is needed.  To keep the tables small, a dimension with more
distinct bounds than the split budget keeps only quantiles of them as splits; bits in ``maybe`` but
not in ``sure`` are then verified against the exact box bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matcher._eval_boxes import BoxTable

TABLE_BUDGET_BYTES = 32 << 20
MAX_SPLITS = 512
MIN_SPLITS = 8


@dataclass(frozen=True, eq=False)
class RegionBitmap:
    """Per active dimension ``k``: ``splits[k, :n_splits[k]]`` and bitsets ``maybe/sure[k, region, word]``.

    ``boxes`` is the box table restricted to the dimensions some box constrains (kernel order), the
    exact bounds the verification step reads.
    """

    boxes: BoxTable
    splits: np.ndarray
    n_splits: np.ndarray
    maybe: np.ndarray
    sure: np.ndarray
    exact: bool
    full: np.ndarray

    @property
    def dims(self) -> tuple[str, ...]:
        return self.boxes.dims

    @property
    def words(self) -> int:
        return self.full.shape[0]


def build_bitmap(table: BoxTable, max_splits: int = MAX_SPLITS) -> RegionBitmap:
    """Region bitsets of ``table``; dimensions with more than the split budget are quantised."""
    n = table.n_boxes
    words = max(1, -(-n // 64))
    constrained = table.constrained()
    active = np.flatnonzero(constrained.any(axis=0)) if n else np.zeros(0, dtype=np.int64)
    budget_regions = TABLE_BUDGET_BYTES // max(1, len(active) * words * 16)
    cap = int(max(MIN_SPLITS, min(max_splits, budget_regions // 2 - 3)))
    per_dim = [_splits(table, k, constrained[:, k], cap) for k in active]
    width = max((len(s) for s, _ in per_dim), default=0)
    regions = 2 * width + 2
    splits = np.full((len(active), max(width, 1)), np.inf)
    n_splits = np.zeros(len(active), dtype=np.int64)
    maybe = np.zeros((len(active), regions, words), dtype=np.uint64)
    sure = np.zeros_like(maybe)
    for row, (k, (s, _)) in enumerate(zip(active, per_dim, strict=True)):
        splits[row, : len(s)] = s
        n_splits[row] = len(s)
        meets, covers = _region_bits(table, k, s, constrained[:, k])
        maybe[row, : len(meets)] = _pack(meets, words)
        sure[row, : len(covers)] = _pack(covers, words)
    full = _pack(np.ones((1, n), dtype=bool), words)[0]
    return RegionBitmap(
        boxes=table.restricted(np.asarray(active, dtype=np.int64)),
        splits=splits,
        n_splits=n_splits,
        maybe=maybe,
        sure=sure,
        exact=all(complete for _, complete in per_dim),
        full=full,
    )


def _splits(table: BoxTable, k: int, constrained: np.ndarray, cap: int) -> tuple[np.ndarray, bool]:
    """Sorted split values of dimension ``k`` (``-inf`` and ``inf`` included) and whether all bounds are."""
    bounds = np.concatenate([table.lo[constrained, k], table.hi[constrained, k]])
    finite = np.unique(bounds[np.isfinite(bounds)])
    complete = len(finite) <= cap
    if not complete:
        finite = np.unique(finite[np.linspace(0, len(finite) - 1, cap).round().astype(np.int64)])
    return np.concatenate([[-np.inf], finite, [np.inf]]), complete


def _region_bits(table: BoxTable, k: int, s: np.ndarray, constrained: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(regions, n)`` bool matrices: box meets / covers each region of dimension ``k``."""
    lo, hi = table.lo[:, k][None, :], table.hi[:, k][None, :]
    lo_closed, hi_closed = table.lo_closed[:, k][None, :], table.hi_closed[:, k][None, :]
    m = len(s)
    meets = np.zeros((2 * m + 2, len(constrained)), dtype=bool)
    covers = np.zeros_like(meets)
    point = s[:, None]
    on_point = ((lo < point) | (lo_closed & (lo == point))) & ((point < hi) | (hi_closed & (point == hi)))
    meets[1 : 2 * m : 2] = covers[1 : 2 * m : 2] = on_point
    a, b = s[:-1, None], s[1:, None]
    meets[2 : 2 * m - 1 : 2] = (lo < b) & (hi > a)
    covers[2 : 2 * m - 1 : 2] = (lo <= a) & (hi >= b)
    # An unconstrained box holds every value, NaN and the infinities included (it is never tested).
    meets[:, ~constrained] = covers[:, ~constrained] = True
    return meets, covers


def _pack(bits: np.ndarray, words: int) -> np.ndarray:
    """``(rows, n)`` bool to ``(rows, words)`` uint64, box ``b`` at bit ``b % 64`` of word ``b // 64``."""
    padded = np.zeros((bits.shape[0], words * 64), dtype=bool)
    padded[:, : bits.shape[1]] = bits
    packed = np.packbits(padded, axis=1, bitorder="little")
    return packed.view("<u8").astype(np.uint64).reshape(bits.shape[0], words)


def regions_numpy(bitmap: RegionBitmap, row: int, x: np.ndarray) -> np.ndarray:
    """Region index of every value of ``x`` in active dimension ``row`` (vectorised twin of the kernel)."""
    m = int(bitmap.n_splits[row])
    s = bitmap.splits[row, :m]
    i = np.searchsorted(s, x, side="left")
    on_split = s[np.minimum(i, m - 1)] == x
    region = 2 * i + on_split
    region[np.isnan(x)] = 2 * m + 1
    return region


def any_numpy(bitmap: RegionBitmap, values: np.ndarray) -> np.ndarray:
    """Per item (columns of ``values``, the active dims): lies in some box.  Pure numpy."""
    n = values.shape[1]
    maybe = np.broadcast_to(bitmap.full, (n, bitmap.words)).copy()
    sure = maybe.copy()
    for row in range(len(bitmap.dims)):
        region = regions_numpy(bitmap, row, values[row])
        maybe &= bitmap.maybe[row, region]
        if not bitmap.exact:
            sure &= bitmap.sure[row, region]
    hit = maybe.any(axis=1)
    if bitmap.exact:
        return hit
    decided = sure.any(axis=1)
    pending = np.flatnonzero(hit & ~decided)
    if len(pending):
        decided[pending] = bitmap.boxes.scan(values[:, pending]).any(axis=0)
    return decided
