"""Numba kernels over a :class:`matcher._eval_bitmap.RegionBitmap` (compiled once, cached on disk).

:func:`hits` finds the boxes holding one item; :func:`any_kernel` is the batch evaluator's (does any box
hold it), and the shared-filter engines' region-bitmap matcher builds its label kernels on :func:`hits`
(:mod:`matcher.filters._filter_kernels`).

Imported lazily: numba costs about half a second to import, which only batch evaluation should pay.
Bit arithmetic stays in uint64 throughout (mixing uint64 and int64 would make numba promote to float).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNK = 4096  # items per task of numba's thread pool
ONE = np.uint64(1)
ZERO = np.uint64(0)


@njit(cache=True, inline="always")
def _region(splits, m, row, x):
    """Elementary region of ``x``: ``2i+1`` on split ``i``, ``2i`` in the gap below it, ``2m+1`` for NaN."""
    if x != x:
        return 2 * m + 1
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if splits[row, mid] < x:
            lo = mid + 1
        else:
            hi = mid
    if lo < m and splits[row, lo] == x:
        return 2 * lo + 1
    return 2 * lo


@njit(cache=True, inline="always")
def _inside(values, i, b, lo, hi, lo_closed, hi_closed):
    """Exact test of item ``i`` against box ``b`` (the verification step of quantised dimensions)."""
    for k in range(values.shape[0]):
        x = values[k, i]
        if lo[b, k] == -np.inf and hi[b, k] == np.inf:
            continue
        if not (lo[b, k] < x or (lo_closed[b, k] and x == lo[b, k])):
            return False
        if not (x < hi[b, k] or (hi_closed[b, k] and x == hi[b, k])):
            return False
    return True


@njit(cache=True, inline="always")
def hits(values, i, bm, acc, sure, regions, complete):
    """Leave in ``acc`` the boxes containing item ``i``; returns whether there is one.

    With ``complete`` false it stops at the first box found (short-circuit), so ``acc`` may be partial.
    """
    splits, n_splits, maybe_bits, sure_bits, exact, full, lo, hi, lo_closed, hi_closed = bm
    words = acc.shape[0]
    for w in range(words):
        acc[w] = full[w]
    for row in range(values.shape[0]):
        region = _region(splits, n_splits[row], row, values[row, i])
        regions[row] = region
        alive = ZERO
        for w in range(words):
            a = acc[w] & maybe_bits[row, region, w]
            acc[w] = a
            alive |= a
        if alive == ZERO:
            return False
    if exact:
        return True
    found = False
    for w in range(words):
        s = full[w]
        for row in range(values.shape[0]):
            s &= sure_bits[row, regions[row], w]
        sure[w] = s
        if s != ZERO:
            found = True
            if not complete:
                return True
    for w in range(words):
        pending = acc[w] & ~sure[w]
        bit = 0
        while pending != ZERO:
            if pending & ONE and _inside(values, i, w * 64 + bit, lo, hi, lo_closed, hi_closed):
                sure[w] |= ONE << np.uint64(bit)
                found = True
                if not complete:
                    return True
            pending >>= ONE
            bit += 1
        acc[w] = sure[w]
    return found


@njit(cache=True, parallel=True)
def any_kernel(values, bm, out):
    """``out[i]``: item ``i`` lies in some box (parallel over chunks of items)."""
    n = values.shape[1]
    words = bm[5].shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        acc = np.empty(words, dtype=np.uint64)
        sure = np.empty(words, dtype=np.uint64)
        regions = np.empty(values.shape[0], dtype=np.int64)
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            out[i] = hits(values, i, bm, acc, sure, regions, False)


def bitmap_tuple(bitmap) -> tuple:
    """The bitmap's arrays in the order the kernels unpack them."""
    return (
        bitmap.splits,
        bitmap.n_splits,
        bitmap.maybe,
        bitmap.sure,
        bitmap.exact,
        bitmap.full,
        bitmap.boxes.lo,
        bitmap.boxes.hi,
        bitmap.boxes.lo_closed,
        bitmap.boxes.hi_closed,
    )
