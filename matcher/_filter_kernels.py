"""Numba kernels of the early-drop engines: ASC (seeds 000/001) and the CACQ grouped filter (seed 003).

One loop per tuple in the calling thread: evaluate one attribute's construct, AND (ASC) or OR (grouped
filter, failing conjuncts) its bitmap into the tuple's global bitmap, stop as soon as no conjunct can
survive, and write the surviving conjuncts' labels into the output matrix.  The numpy formulation they
replace compacted the live rows after every attribute; its 0.3-0.7 ms of per-call overhead (a dozen numpy
calls per attribute) made both engines lose to the region-bitmap kernel whatever their early drop saved,
and made every probe of them cost as much as a whole thread-pool batch of the region-bitmap engine.

Binary searches follow :func:`numpy.searchsorted` exactly, NaN included (it sorts after every constant),
so the kernels return what the numpy formulation returned (the differential tests compare both with
``Predicate.evaluate``).  Imported lazily, like :mod:`matcher._eval_kernels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from matcher._eval_kernels import emit_bits as _emit

ZERO = np.uint64(0)


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
            _emit(grb, owner, out, i)
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
            _emit(completed, owner, out, i)
    return evaluations
