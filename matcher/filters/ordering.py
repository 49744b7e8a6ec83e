"""The optimal order of filters that drop tuples, by dynamic programming over subsets.

Shared by A-Greedy's offline optimum (Babu's adaptive filter ordering) and the best fixed order and
per-window base sequence of Lee & Lee's ASC: in all of them, the cost of running filter ``f`` after the set ``S`` is
``cost[f] * alive[S]``, where ``alive[S]`` is the fraction of tuples no filter of ``S`` dropped, which does
not depend on the order inside ``S``.  So all ``n!`` orders are searched exactly in ``O(2^n n)``.
"""

from __future__ import annotations

import numpy as np


def best_order(alive: np.ndarray, costs: np.ndarray) -> tuple[list[int], float]:
    """The order of ``len(costs)`` filters minimising ``sum cost[f] * alive[filters before f]``.

    ``alive`` is indexed by the bit set of the filters already run (length ``2 ** n``).  Returns the order
    and its cost; ties go to the lowest filter index at each step (as :func:`best_order_reference`).
    """
    n = len(costs)
    alive = np.asarray(alive, dtype=np.float64)
    costs = np.asarray(costs, dtype=np.float64)
    subsets = np.arange(1 << n, dtype=np.int64)
    size = np.zeros(1 << n, dtype=np.int64)
    for f in range(n):
        size += (subsets >> f) & 1
    best = np.full(1 << n, np.inf)
    choice = np.zeros(1 << n, dtype=np.int64)
    best[0] = 0.0
    # the subsets of one size depend only on smaller ones: one vectorised step per size
    for k in range(1, n + 1):
        layer = subsets[size == k]
        candidates = np.full((len(layer), n), np.inf)
        for f in range(n):
            has = ((layer >> f) & 1).astype(bool)
            before = layer[has] ^ (1 << f)
            candidates[has, f] = best[before] + costs[f] * alive[before]
        picked = np.argmin(candidates, axis=1)
        choice[layer] = picked
        best[layer] = candidates[np.arange(len(layer)), picked]
    order, s = [], (1 << n) - 1
    while s:
        order.append(int(choice[s]))
        s ^= 1 << int(choice[s])
    return order[::-1], float(best[-1])


def best_order_reference(alive: np.ndarray, costs: np.ndarray) -> tuple[list[int], float]:
    """:func:`best_order` as the plain loop over subsets (the reference the tests compare it with)."""
    n = len(costs)
    best = np.full(1 << n, np.inf)
    choice = np.zeros(1 << n, dtype=np.int64)
    best[0] = 0.0
    for s in range(1, 1 << n):
        for f in range(n):
            if s >> f & 1:
                c = best[s ^ (1 << f)] + costs[f] * alive[s ^ (1 << f)]
                if c < best[s]:
                    best[s], choice[s] = c, f
    order, s = [], (1 << n) - 1
    while s:
        order.append(int(choice[s]))
        s ^= 1 << int(choice[s])
    return order[::-1], float(best[-1])


def alive_fractions(bitmaps: list[np.ndarray], all_bits: np.ndarray, budget: int = 1 << 22) -> np.ndarray:
    """``alive[S]``: the fraction of tuples whose AND of the bitmaps of the filters in ``S`` is non-zero.

    ``bitmaps[f]`` is uint64 ``(tuples, words)``, the result bits filter ``f`` leaves each tuple;
    ``all_bits`` the starting bitmap.  The AND of every subset is built from the subsets of the filters
    below its highest one (``n`` vectorised steps), over slices of tuples so that ``2^n x slice x words``
    stays under ``budget`` words.
    """
    n = len(bitmaps)
    tuples = len(bitmaps[0]) if n else 0
    alive = np.zeros(1 << n)
    if tuples == 0:
        return alive
    words = len(all_bits)
    step = max(1, budget // ((1 << n) * words))
    for start in range(0, tuples, step):
        stop = min(tuples, start + step)
        anded = np.empty((1 << n, stop - start, words), dtype=np.uint64)
        anded[0] = all_bits
        for f in range(n):
            anded[1 << f : 2 << f] = anded[: 1 << f] & bitmaps[f][start:stop][None]
        alive += (anded != 0).any(axis=2).sum(axis=1)
    return alive / tuples
