"""Numba kernels over a :class:`matcher._eval_bitmap.RegionBitmap` (compiled once, cached on disk).

Imported lazily: numba costs about half a second to import, which only batch evaluation should pay.
Bit arithmetic stays in uint64 throughout (mixing uint64 and int64 would make numba promote to float).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNK = 4096
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
def _hits(values, i, bm, acc, sure, regions, complete):
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
            out[i] = _hits(values, i, bm, acc, sure, regions, False)


@njit(cache=True, inline="always")
def emit_bits(bits, owner, out, i):
    """Set ``out[i, owner[b]]`` for every set bit ``b`` of the bitmap ``bits`` (words of 64 boxes or conjuncts)."""
    for w in range(bits.shape[0]):
        word = bits[w]
        bit = 0
        while word != ZERO:
            if word & ONE:
                out[i, owner[w * 64 + bit]] = True
            word >>= ONE
            bit += 1


@njit(cache=True, inline="always")
def _dense_rows(values, bm, owner, out, first, stop, acc, sure, regions):
    """Items ``first..stop-1`` of :func:`dense_kernel`."""
    for i in range(first, stop):
        if _hits(values, i, bm, acc, sure, regions, True):
            emit_bits(acc, owner, out, i)


@njit(cache=True, parallel=True)
def dense_kernel(values, bm, owner, out):
    """``out[i, owner[b]]`` set for every box ``b`` containing item ``i`` (parallel over chunks of items)."""
    n = values.shape[1]
    words = bm[5].shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        acc = np.empty(words, dtype=np.uint64)
        sure = np.empty(words, dtype=np.uint64)
        regions = np.empty(values.shape[0], dtype=np.int64)
        _dense_rows(values, bm, owner, out, c * CHUNK, min(n, (c + 1) * CHUNK), acc, sure, regions)


@njit(cache=True)
def dense_kernel_serial(values, bm, owner, out):
    """:func:`dense_kernel` in the calling thread: no thread-pool hand-off, which dominates small batches."""
    words = bm[5].shape[0]
    acc = np.empty(words, dtype=np.uint64)
    sure = np.empty(words, dtype=np.uint64)
    regions = np.empty(values.shape[0], dtype=np.int64)
    _dense_rows(values, bm, owner, out, 0, values.shape[1], acc, sure, regions)


@njit(cache=True)
def csr_kernel(values, bm, owner, n_labels):
    """Satisfied labels per item as CSR: ``indices[indptr[i]:indptr[i+1]]`` ascending, no repeats."""
    n = values.shape[1]
    words = bm[5].shape[0]
    acc = np.empty(words, dtype=np.uint64)
    sure = np.empty(words, dtype=np.uint64)
    regions = np.empty(values.shape[0], dtype=np.int64)
    seen = np.full(n_labels, -1, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(max(16, n), dtype=np.int64)
    size = 0
    for i in range(n):
        start = size
        if _hits(values, i, bm, acc, sure, regions, True):
            for w in range(words):
                word = acc[w]
                bit = 0
                while word != ZERO:
                    if word & ONE:
                        label = owner[w * 64 + bit]
                        if seen[label] != i:
                            seen[label] = i
                            if size == len(indices):
                                grown = np.empty(2 * size, dtype=np.int64)
                                grown[:size] = indices
                                indices = grown
                            indices[size] = label
                            size += 1
                    word >>= ONE
                    bit += 1
            indices[start:size].sort()
        indptr[i + 1] = size
    return indptr, indices[:size].copy()


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
