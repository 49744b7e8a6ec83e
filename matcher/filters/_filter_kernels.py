"""Numba kernels of the shared-filter engines: one loop per tuple, writing the labels it satisfies.

* the region-bitmap matcher (:class:`~matcher.filters.multi.MultiMatcher`): the region bitmaps of the
  batch evaluator (:mod:`matcher._eval_kernels` finds the boxes holding a tuple), with every label of a box
  set in the output matrix, on numba's thread pool or in the calling thread, or as CSR rows;
* Lee & Lee's attribute selection constructs (ASC) and the CACQ grouped filter (Madden et al.): evaluate
  one attribute's construct, AND (ASC) or OR (grouped filter, failing conjuncts) its bitmap into the
  tuple's global bitmap, stop as soon as no conjunct can survive.  The numpy formulation they replace
  compacted the live rows after every attribute; its per-call overhead (a dozen numpy calls per attribute)
  made both engines lose to the region-bitmap kernel whatever their early drop saved.

Binary searches follow :func:`numpy.searchsorted` exactly, NaN included (it sorts after every constant),
so the kernels return what the numpy formulation returned (the differential tests compare both with
``Predicate.evaluate``).  Imported lazily, like :mod:`matcher._eval_kernels`: numba costs about half a
second to import.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from matcher._eval_kernels import CHUNK, hits

ONE = np.uint64(1)
ZERO = np.uint64(0)


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
        if hits(values, i, bm, acc, sure, regions, True):
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
        if hits(values, i, bm, acc, sure, regions, True):
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


@njit(cache=True, inline="always")
def _search(c, start, stop, x, right):
    """``np.searchsorted(c[start:stop], x, side="right" if right else "left")``."""
    if x != x:
        return stop - start
    lo, hi = start, stop
    while lo < hi:
        mid = (lo + hi) >> 1
        if c[mid] < x or (right and c[mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo - start


@njit(cache=True)
def asc_kernel(values, first, stop, constants, coff, qrb, roff, micro, macro, hybrid, all_bits, owner, out):
    """ASC evaluation of tuples ``first..stop-1`` (columns of ``values``, one row per ASC).

    ASC ``a`` has the sorted constants ``constants[coff[a]:coff[a+1]]`` and the query-result bitmaps
    ``qrb[roff[a] + region]``; a tuple takes the ASCs in ``macro`` order, or with ``hybrid`` the region's
    micro-arrow ``micro[roff[a] + region]`` when it points to an ASC the tuple has not evaluated.  Returns
    ``(ASCs evaluated, tuples dropped)``.
    """
    n_asc = macro.shape[0]
    words = all_bits.shape[0]
    grb = np.empty(words, dtype=np.uint64)
    evaluated = np.zeros(max(n_asc, 1), dtype=np.bool_)
    evaluations = 0
    dropped = 0
    for i in range(first, stop):
        for w in range(words):
            grb[w] = all_bits[w]
        if hybrid:
            evaluated[:] = False
        alive = True
        a = macro[0] if n_asc else 0
        for step in range(n_asc):
            m = coff[a + 1] - coff[a]
            x = values[a, i]
            if x != x:
                region = 2 * m + 1  # NaN lies in no interval
            else:
                index = _search(constants, coff[a], coff[a + 1], x, False)
                region = 2 * index
                if m > 0 and constants[coff[a] + min(index, m - 1)] == x:
                    region += 1
            row = roff[a] + region
            any_bit = ZERO
            for w in range(words):
                g = grb[w] & qrb[row, w]
                grb[w] = g
                any_bit |= g
            evaluations += 1
            if any_bit == ZERO:
                alive = False
                break
            if hybrid:
                evaluated[a] = True
                arrow = micro[row]
                if arrow >= 0 and not evaluated[arrow]:
                    a = arrow
                else:
                    for j in range(n_asc):
                        if not evaluated[macro[j]]:
                            a = macro[j]
                            break
            elif step + 1 < n_asc:
                a = macro[step + 1]
        if alive:
            emit_bits(grb, owner, out, i)
        else:
            dropped += 1
    return evaluations, dropped


@njit(cache=True)
def grouped_kernel(values, order, constants, coff, bits, boff, eq_all, uses, all_bits, owner, out):
    """Grouped-filter evaluation of every tuple (columns of ``values``, one row per attribute).

    Attribute ``k`` has five sorted constant arrays, kind ``0..4`` = closed lower bounds, open lower
    bounds, closed upper bounds, open upper bounds, equality constants, at
    ``constants[coff[k, kind]:coff[k, kind+1]]`` (``coff`` has six columns), and their bitmaps from row
    ``boff[k, kind]``: for the bounds, prefix ORs (row ``j`` = conjuncts of constants ``0..j-1``, one row more
    than constants); for equality, the conjuncts passing on each constant.  A tuple collects the conjuncts
    failing on each attribute in ``order`` (on NaN: every conjunct using the attribute, ``uses[k]``) and leaves
    when all have failed.  Returns the grouped filters probed.
    """
    n = values.shape[1]
    words = all_bits.shape[0]
    completed = np.empty(words, dtype=np.uint64)
    evaluations = 0
    for i in range(n):
        for w in range(words):
            completed[w] = ZERO
        alive = True
        for k in order:
            x = values[k, i]
            c0, c1, c2, c3, c4, c5 = coff[k, 0], coff[k, 1], coff[k, 2], coff[k, 3], coff[k, 4], coff[k, 5]
            # lower bounds fail for a suffix (constant > x closed, >= x open), upper ones for a prefix
            r0 = boff[k, 0] + _search(constants, c0, c1, x, True)
            last0 = boff[k, 0] + c1 - c0
            r1 = boff[k, 1] + _search(constants, c1, c2, x, False)
            last1 = boff[k, 1] + c2 - c1
            r2 = boff[k, 2] + _search(constants, c2, c3, x, False)
            r3 = boff[k, 3] + _search(constants, c3, c4, x, True)
            hit = -1
            if c5 > c4:
                j = min(_search(constants, c4, c5, x, False), c5 - c4 - 1)
                if constants[c4 + j] == x:
                    hit = boff[k, 4] + j
            full = True
            for w in range(words):
                fail = (bits[last0, w] & ~bits[r0, w]) | (bits[last1, w] & ~bits[r1, w]) | bits[r2, w] | bits[r3, w]
                if c5 > c4:
                    fail |= eq_all[k, w] & ~(bits[hit, w] if hit >= 0 else ZERO)
                if x != x:
                    fail = uses[k, w]
                c = completed[w] | fail
                completed[w] = c
                if c != all_bits[w]:
                    full = False
            evaluations += 1
            if full:
                alive = False
                break
        if alive:
            for w in range(words):
                completed[w] = all_bits[w] & ~completed[w]
            emit_bits(completed, owner, out, i)
    return evaluations
