"""Numba kernels of Kuntschke & Kemper's per-item evaluators and of the R-tree's rectangle query.

* :func:`se_batch`: standard evaluation (SE, Algorithm 13), one item at a time: the boxes in their
  evaluation order, each box's intervals shortest first, the first containing box ends the item.
* :func:`ie_batch`: index-based evaluation (IE, section 4.2) over a packed R-tree
  (:mod:`matcher.packed_rtree`): a depth-first walk of the nodes whose rectangle holds the item, each leaf
  hit verified against the exact box (open ends); with ``short_circuit`` (IE+SC) the first verified hit
  ends the item, without it the walk finds every containing box, as an index's containment query does.
* :func:`rectangle_query`: the ids of the rectangles meeting, or holding, a query rectangle (the exact
  matcher's index).

Each item is evaluated alone, serially, so the time per item is the algorithm's: no vectorisation across
items, no thread pool.  ``work[i]`` counts the boxes or rectangles tested for item ``i``.  The plain Python
versions they are tested against live in :mod:`matcher._eval_items` and :mod:`matcher.packed_rtree`.
Imported lazily, like every numba module of the matcher.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _holds(x, lo, hi, lo_closed, hi_closed):
    return (lo < x or (lo_closed and x == lo)) and (x < hi or (hi_closed and x == hi))


@njit(cache=True)
def se_batch(values, start, dim, lo, hi, lo_closed, hi_closed, out, work):
    """SE over the ``(d, N)`` items.  Box ``b``'s intervals are ``start[b] .. start[b + 1] - 1``: dimension
    ``dim[j]`` must lie in ``lo[j]..hi[j]`` (ends closed where flagged); a box with none holds everything."""
    n_boxes = len(start) - 1
    for i in range(values.shape[1]):
        found = False
        tested = 0
        for b in range(n_boxes):
            tested += 1
            inside = True
            for j in range(start[b], start[b + 1]):
                if not _holds(values[dim[j], i], lo[j], hi[j], lo_closed[j], hi_closed[j]):
                    inside = False
                    break
            if inside:
                found = True
                break
        out[i] = found
        work[i] = tested


@njit(cache=True, inline="always")
def _exact(x, b, lo, hi, lo_closed, hi_closed):
    """Item ``x`` (its values over the active dimensions) lies in box ``b``; an unconstrained dimension
    holds every value, NaN included."""
    for k in range(x.shape[0]):
        if lo[b, k] == -np.inf and hi[b, k] == np.inf:
            continue
        if not _holds(x[k], lo[b, k], hi[b, k], lo_closed[b, k], hi_closed[b, k]):
            return False
    return True


@njit(cache=True)
def ie_batch(values, sentinel, tree, boxes, short_circuit, out, work):
    """IE or IE+SC over the ``(d, N)`` items (their active dimensions, in the tree's order).

    ``tree`` is ``PackedTree.arrays()``; ``boxes`` the exact ``(lo, hi, lo_closed, hi_closed)`` box table,
    row = the tree's leaf ids.  The tree's rectangles are clamped to ``[-sentinel, sentinel]``, and so is
    the item for the tree tests (an unbounded end then still holds every finite and infinite value); NaN
    passes every rectangle test and is decided by the exact test.
    """
    first, count, leaf, rlo, rhi, ref = tree
    blo, bhi, blo_closed, bhi_closed = boxes
    d = values.shape[0]
    x = np.empty(d)
    clamped = np.empty(d)
    stack = np.empty(max(1, len(first)), dtype=np.int64)
    for i in range(values.shape[1]):
        for k in range(d):
            v = values[k, i]
            x[k] = v
            clamped[k] = sentinel if v > sentinel else (-sentinel if v < -sentinel else v)
        found = False
        tested = 0
        top = 0
        if len(first):
            stack[0] = 0
            top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            for e in range(first[node], first[node] + count[node]):
                tested += 1
                meets = True
                for k in range(d):
                    if clamped[k] < rlo[e, k] or clamped[k] > rhi[e, k]:
                        meets = False
                        break
                if not meets:
                    continue
                if not leaf[node]:
                    stack[top] = ref[e]
                    top += 1
                elif _exact(x, ref[e], blo, bhi, blo_closed, bhi_closed):
                    found = True
                    if short_circuit:
                        top = 0
                        break
        out[i] = found
        work[i] = tested


@njit(cache=True)
def rectangle_query(tree, qlo, qhi, containing, found):
    """Write into ``found`` the ids of the tree's rectangles meeting the closed rectangle ``qlo..qhi`` (or,
    with ``containing``, holding it whole); returns how many (``found`` must have room for every id).
    A rectangle holding the query lies in every node rectangle above it, so the containment walk descends
    only into nodes that hold the query too."""
    first, count, leaf, rlo, rhi, ref = tree
    n = 0
    if len(first) == 0:
        return 0
    stack = np.empty(len(first), dtype=np.int64)
    stack[0] = 0
    top = 1
    d = qlo.shape[0]
    while top > 0:
        top -= 1
        node = stack[top]
        for e in range(first[node], first[node] + count[node]):
            meets = True
            for k in range(d):
                if containing:
                    if qlo[k] < rlo[e, k] or qhi[k] > rhi[e, k]:
                        meets = False
                        break
                elif qhi[k] < rlo[e, k] or qlo[k] > rhi[e, k]:
                    meets = False
                    break
            if meets:
                if leaf[node]:
                    found[n] = ref[e]
                    n += 1
                else:
                    stack[top] = ref[e]
                    top += 1
    return n
