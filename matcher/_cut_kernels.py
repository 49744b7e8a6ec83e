"""Numba kernel of the Compare Dimensions split over many boxes (:func:`uncovered_cells`).

The same cuts as :func:`matcher.predicate.uncovered_breadth_first` over
:func:`matcher.predicate.split_cells`, on integer arrays: a piece is cut against every constraint in turn
and the pieces left after the last one are returned.  The kernel walks the pieces depth first, so it
returns the same pieces in another order; the selectivity kernel adds their probabilities with
``math.fsum``, which does not depend on the order.  Used where a box is cut against many others (the
planner's need classes near a popular stream's source); imported lazily, like every numba module of the
matcher.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def uncovered_cells(part, dim, lo, hi, start):
    """The pieces of cell tuple ``part`` outside every constraint, as rows of an int64 array.

    Constraint ``c`` is ``dim[j], lo[j], hi[j]`` for ``j`` in ``start[c] .. start[c + 1] - 1``: cell range
    ``lo[j]..hi[j]`` on the coordinates ``dim[j], dim[j] + 1`` of a piece, compared in that order.
    """
    width = part.shape[0]
    n = start.shape[0] - 1
    # a piece at level c is cut against constraint c; each cut leaves at most width pieces (2 per dimension)
    stack = np.empty((n * width + 1, width), dtype=np.int64)
    level = np.empty(n * width + 1, dtype=np.int64)
    out = np.empty((16, width), dtype=np.int64)
    found = 0
    stack[0] = part
    level[0] = 0
    top = 1
    current = np.empty(width, dtype=np.int64)
    while top > 0:
        top -= 1
        c = level[top]
        current[:] = stack[top]
        if c == n:
            if found == out.shape[0]:
                grown = np.empty((2 * found, width), dtype=np.int64)
                grown[:found] = out
                out = grown
            out[found] = current
            found += 1
            continue
        disjoint = False
        for j in range(start[c], start[c + 1]):
            d = dim[j]
            if lo[j] > current[d + 1] or current[d] > hi[j]:
                disjoint = True
                break
        if disjoint:
            stack[top] = current
            level[top] = c + 1
            top += 1
            continue
        for j in range(start[c], start[c + 1]):
            d = dim[j]
            part_lo = current[d]
            part_hi = current[d + 1]
            if lo[j] <= part_lo and part_hi <= hi[j]:
                continue
            if part_lo < lo[j]:
                stack[top] = current
                stack[top, d + 1] = lo[j] - 1
                level[top] = c + 1
                top += 1
                part_lo = lo[j]
            if hi[j] < part_hi:
                stack[top] = current
                stack[top, d] = hi[j] + 1
                stack[top, d + 1] = part_hi
                level[top] = c + 1
                top += 1
                part_hi = hi[j]
            current[d] = part_lo
            current[d + 1] = part_hi
        # what is left of ``current`` lies inside constraint c: covered, dropped
    return out[:found]


# Boxes over uniform attributes as float rows: over ``D`` dimensions (the stream's, by name), row
# ``[lo_0..lo_{D-1}, hi_0.., lo_closed_0.., hi_closed_0..]`` (closed flags 0 or 1; an unconstrained
# dimension is ``(-inf, inf)``, open).  :func:`uniform_outside` is
# :func:`matcher.selectivity.outside_probabilities` over such rows when every dimension is uniform on
# ``[low[d], high[d]]`` (``low < high``), float for float: the same weights, the same order of cuts, the
# same pieces and the same products.


@njit(cache=True, inline="always")
def _uniform_prob(lo, hi, low, high):
    """``Uniform(low, high).prob`` of a non-empty interval (its ends' closedness changes nothing)."""
    width = min(hi, high) - max(lo, low)
    return max(0.0, width) / (high - low)


@njit(cache=True, inline="always")
def _empty(lo, hi, lo_closed, hi_closed):
    return lo > hi or (lo == hi and not (lo_closed and hi_closed))


@njit(cache=True, inline="always")
def _constrains(lo, hi):
    return not (lo == -np.inf and hi == np.inf)


@njit(cache=True)
def _add_exactly(partials, count, x):
    """Shewchuk's exact summation, as ``math.fsum`` keeps it: ``partials[:count]`` are non-overlapping
    floats whose sum is exactly the sum so far; returns their new count with ``x`` added."""
    i = 0
    for j in range(count):
        y = partials[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            partials[i] = lo
            i += 1
        x = hi
    partials[i] = x
    return i + 1


@njit(cache=True, inline="always")
def _side(row, d, n_dims):
    """Dimension ``d`` of a box row (``lo``, ``hi``, then the closed flags of each end): ``(lo, hi,
    lo_closed, hi_closed)``."""
    return row[d], row[n_dims + d], row[2 * n_dims + d] > 0, row[3 * n_dims + d] > 0


@njit(cache=True, inline="always")
def _misses(piece, box, n_dims):
    """Whether box row ``box`` and ``piece`` are disjoint, exact about closed ends (only the dimensions
    ``box`` constrains can separate them)."""
    for d in range(n_dims):
        c_lo, c_hi, c_loc, c_hic = _side(box, d, n_dims)
        if not _constrains(c_lo, c_hi):
            continue
        p_lo, p_hi, p_loc, p_hic = _side(piece, d, n_dims)
        if c_lo > p_hi or (c_lo == p_hi and not (c_loc and p_hic)):
            return True
        if p_lo > c_hi or (p_lo == c_hi and not (p_loc and c_hic)):
            return True
    return False


@njit(cache=True, inline="always")
def _other(before, ahead, k):
    """Row ``k`` of ``before`` followed by ``ahead``."""
    return before[k] if k < before.shape[0] else ahead[k - before.shape[0]]


@njit(cache=True)
def uniform_outside(box, before, ahead, low, high, summed):
    """The probabilities of the disjoint pieces of box row ``box`` outside the boxes of the rows of
    ``before`` and then ``ahead`` (two arrays, so that a long ``before`` is never copied).  With ``summed``,
    instead, the partials of their exact sum: ``math.fsum`` of them is ``math.fsum`` of the pieces, float
    for float, without a Python float per piece."""
    n_dims = low.shape[0]
    n = before.shape[0] + ahead.shape[0]
    weights = np.zeros(n)
    for k in range(n):
        other = _other(before, ahead, k)
        apart = False  # most rows miss the box: plain comparisons find it before any division
        for d in range(n_dims):
            if other[d] > box[n_dims + d] or other[n_dims + d] < box[d]:
                apart = True
                break
        if apart:
            continue
        p = 1.0
        for d in range(n_dims):
            a_lo, a_hi, a_loc, a_hic = box[d], box[n_dims + d], box[2 * n_dims + d], box[3 * n_dims + d]
            b_lo, b_hi, b_loc, b_hic = other[d], other[n_dims + d], other[2 * n_dims + d], other[3 * n_dims + d]
            if not _constrains(a_lo, a_hi) and not _constrains(b_lo, b_hi):
                continue
            # Interval.intersect
            if a_lo > b_lo:
                lo, loc = a_lo, a_loc
            elif a_lo < b_lo:
                lo, loc = b_lo, b_loc
            else:
                lo, loc = a_lo, min(a_loc, b_loc)
            if a_hi < b_hi:
                hi, hic = a_hi, a_hic
            elif a_hi > b_hi:
                hi, hic = b_hi, b_hic
            else:
                hi, hic = a_hi, min(a_hic, b_hic)
            if _empty(lo, hi, loc > 0, hic > 0):
                p = 0.0
            else:
                p *= _uniform_prob(lo, hi, low[d], high[d])
            if p == 0.0:
                break
        weights[k] = p
    # the boxes it overlaps (a positive weight), largest overlap first, ties in their given order: a stable
    # sort of the few that meet it rather than of every row
    positive = np.flatnonzero(weights > 0.0)
    order = positive[np.argsort(-weights[positive], kind="mergesort")]
    kept = order.shape[0]
    out = np.empty(64)  # with ``summed``: the partials (a sum of doubles never needs 40)
    if kept == 0:
        p = 1.0
        for d in range(n_dims):
            if _constrains(box[d], box[n_dims + d]):
                p *= _uniform_prob(box[d], box[n_dims + d], low[d], high[d])
                if p == 0.0:
                    break
        out[0] = p
        return out[:1]
    width = 4 * n_dims
    # a piece at level c goes past the kept boxes from the c-th on that miss it; the first it meets cuts off
    # at most 2 pieces per dimension, pushed for the boxes after it, and covers the rest
    stack = np.empty((kept * 2 * n_dims + 1, width))
    level = np.empty(kept * 2 * n_dims + 1, dtype=np.int64)
    stack[0] = box
    level[0] = 0
    top = 1
    found = 0
    piece = np.empty(width)
    while top > 0:
        top -= 1
        c = level[top]
        piece[:] = stack[top]
        while c < kept:
            other = _other(before, ahead, order[c])
            c += 1
            if _misses(piece, other, n_dims):
                continue
            for d in range(n_dims):
                c_lo, c_hi, c_loc, c_hic = _side(other, d, n_dims)
                if not _constrains(c_lo, c_hi):
                    continue
                p_lo, p_hi, p_loc, p_hic = _side(piece, d, n_dims)
                lo_inside = c_lo < p_lo or (c_lo == p_lo and (c_loc or not p_loc))
                hi_inside = p_hi < c_hi or (p_hi == c_hi and (c_hic or not p_hic))
                if not lo_inside:  # the piece reaches below the box: cut that part off
                    stack[top] = piece
                    stack[top, n_dims + d] = c_lo
                    stack[top, 3 * n_dims + d] = 0.0 if c_loc else 1.0
                    level[top] = c
                    top += 1
                    piece[d] = c_lo
                    piece[2 * n_dims + d] = 1.0 if c_loc else 0.0
                if not hi_inside:  # and above
                    stack[top] = piece
                    stack[top, d] = c_hi
                    stack[top, 2 * n_dims + d] = 0.0 if c_hic else 1.0
                    stack[top, n_dims + d] = p_hi
                    stack[top, 3 * n_dims + d] = 1.0 if p_hic else 0.0
                    level[top] = c
                    top += 1
                    piece[n_dims + d] = c_hi
                    piece[3 * n_dims + d] = 1.0 if c_hic else 0.0
            c = -1  # what is left of the piece lies inside the box: covered, dropped
            break
        if c == -1:
            continue
        p = 1.0
        for d in range(n_dims):
            if _constrains(piece[d], piece[n_dims + d]):
                p *= _uniform_prob(piece[d], piece[n_dims + d], low[d], high[d])
                if p == 0.0:
                    break
        if summed:
            found = _add_exactly(out, found, p)
            continue
        if found == out.shape[0]:
            grown = np.empty(2 * found)
            grown[:found] = out
            out = grown
        out[found] = p
        found += 1
    return out[:found]
