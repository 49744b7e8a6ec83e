"""Numba kernels of :class:`matcher.filters.dynamic.DynamicMatcher`: bucket bitsets set and cleared one box at a
time, and the per-tuple AND over them.

Layout: ``splits[k, :n]`` (``n = n_splits[k]``) cut attribute ``k`` into ``n + 1`` buckets; bucket ``r`` holds
the values with ``r`` splits below them, ``(s_{r-1}, s_r]`` (bucket 0 also holds -inf, bucket ``n`` +inf).
``maybe[k, r]`` and ``sure[k, r]`` are bitsets over box slots: the box constrains ``k`` and its interval
meets the bucket, or holds all of it; ``free[k]``: the box leaves ``k`` unconstrained (it holds every value,
NaN included).  A tuple's candidates are the AND over attributes of ``maybe | free`` of its buckets (of
``free`` alone for NaN); those also in the AND of ``sure | free`` match, the others are settled by the exact
bounds.  A box constraining ``k`` touches only its own buckets: two binary searches give the range it
meets and the range it holds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ONE = np.uint64(1)
ZERO = np.uint64(0)


@njit(cache=True, inline="always")
def _below(splits, n, k, x, equal):
    """How many of attribute ``k``'s splits are below ``x`` (or equal to it too, with ``equal``)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if splits[k, mid] < x or (equal and splits[k, mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _holds(x, lo, hi, lo_closed, hi_closed):
    return (lo < x or (lo_closed and x == lo)) and (x < hi or (hi_closed and x == hi))


@njit(cache=True)
def write_boxes(slots, lo, hi, lo_closed, hi_closed, splits, n_splits, maybe, sure, free, on):
    """Set (``on``) or clear the bits of the boxes ``slots`` (ascending), whose bounds are their rows of
    ``lo``.. (still in place when a box is cleared, so the same buckets are found again).

    The slots sharing a word are gathered first: their bits are collected per bucket in a small local array
    and written to the tables once per word, not once per box and bucket."""
    buckets = maybe.shape[1]
    met = np.empty(buckets, dtype=np.uint64)
    held = np.empty(buckets, dtype=np.uint64)
    start = 0
    while start < len(slots):
        word = slots[start] >> 6
        stop = start
        while stop < len(slots) and slots[stop] >> 6 == word:
            stop += 1
        for k in range(maybe.shape[0]):
            n = n_splits[k]
            met[: n + 1] = ZERO
            held[: n + 1] = ZERO
            unconstrained = ZERO
            for j in range(start, stop):
                slot = slots[j]
                bit = ONE << np.uint64(slot & 63)
                a, b = lo[slot, k], hi[slot, k]
                if a == -np.inf and b == np.inf:
                    unconstrained |= bit
                    continue
                below_a = _below(splits, n, k, a, False)
                # buckets met: from the one holding a to the one holding b
                for r in range(below_a, _below(splits, n, k, b, False) + 1):
                    met[r] |= bit
                # held whole: (s_{r-1}, s_r] inside the interval; never the end buckets, which hold an infinity
                for r in range(max(1, below_a + 1), min(n - 1, _below(splits, n, k, b, hi_closed[slot, k]) - 1) + 1):
                    held[r] |= bit
            if on:
                free[k, word] |= unconstrained
                for r in range(n + 1):
                    maybe[k, r, word] |= met[r]
                    sure[k, r, word] |= held[r]
            else:
                free[k, word] &= ~unconstrained
                for r in range(n + 1):
                    maybe[k, r, word] &= ~met[r]
                    sure[k, r, word] &= ~held[r]
        start = stop


@njit(cache=True, inline="always")
def _candidates(values, i, splits, n_splits, maybe, sure, free, live, acc, certain, words):
    """AND the tuple's bucket rows into ``acc``/``certain`` over the words still alive; returns how many
    words are left in ``words`` (the nonzero ones, compacted after each attribute)."""
    alive = 0
    for w in live:
        words[alive] = w
        acc[w] = ~ZERO
        certain[w] = ~ZERO
        alive += 1
    for k in range(maybe.shape[0]):
        x = values[k, i]
        nan = x != x
        r = 0 if nan else _below(splits, n_splits[k], k, x, False)
        kept = 0
        for j in range(alive):
            w = words[j]
            row = free[k, w] if nan else maybe[k, r, w] | free[k, w]
            bits = acc[w] & row
            if bits != ZERO:
                acc[w] = bits
                certain[w] &= free[k, w] if nan else sure[k, r, w] | free[k, w]
                words[kept] = w
                kept += 1
        alive = kept
        if alive == 0:
            break
    return alive


@njit(cache=True, inline="always")
def _inside(values, i, slot, lo, hi, lo_closed, hi_closed):
    for k in range(values.shape[0]):
        if lo[slot, k] == -np.inf and hi[slot, k] == np.inf:
            continue
        if not _holds(values[k, i], lo[slot, k], hi[slot, k], lo_closed[slot, k], hi_closed[slot, k]):
            return False
    return True


@njit(cache=True)
def match_csr(values, splits, n_splits, maybe, sure, free, live, lo, hi, lo_closed, hi_closed, position, n_labels):
    """Per tuple (columns of ``values``), the output positions of the labels it satisfies, as CSR
    ``indices[indptr[i]:indptr[i + 1]]``, ascending, no repeats.  ``live``: the words holding any box;
    ``position[slot]``: the output position of the slot's label."""
    n = values.shape[1]
    total = maybe.shape[2]
    acc = np.empty(total, dtype=np.uint64)
    certain = np.empty(total, dtype=np.uint64)
    words = np.empty(max(1, len(live)), dtype=np.int64)
    seen = np.full(n_labels, -1, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(max(16, n), dtype=np.int64)
    size = 0
    for i in range(n):
        start = size
        alive = _candidates(values, i, splits, n_splits, maybe, sure, free, live, acc, certain, words)
        for j in range(alive):
            w = words[j]
            pending = acc[w]
            bit = 0
            while pending != ZERO:
                if pending & ONE:
                    slot = w * 64 + bit
                    if (certain[w] >> np.uint64(bit)) & ONE or _inside(values, i, slot, lo, hi, lo_closed, hi_closed):
                        label = position[slot]
                        if seen[label] != i:
                            seen[label] = i
                            if size == len(indices):
                                grown = np.empty(2 * size, dtype=np.int64)
                                grown[:size] = indices
                                indices = grown
                            indices[size] = label
                            size += 1
                pending >>= ONE
                bit += 1
        indices[start:size].sort()
        indptr[i + 1] = size
    return indptr, indices[:size].copy()
