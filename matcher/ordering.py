"""The optimal order of filters that drop tuples, by dynamic programming over subsets.

Shared by A-Greedy's offline optimum (seed 002) and ASC's best fixed order (seed 000/001): in both, the
cost of running filter ``f`` after the set ``S`` is ``cost[f] * alive[S]``, where ``alive[S]`` is the
fraction of tuples no filter of ``S`` dropped, which does not depend on the order inside ``S``.  So all
``n!`` orders are searched exactly in ``O(2^n n)``.
"""

from __future__ import annotations

import numpy as np


def best_order(alive: np.ndarray, costs: np.ndarray) -> tuple[list[int], float]:
    """The order of ``len(costs)`` filters minimising ``sum cost[f] * alive[filters before f]``.

    ``alive`` is indexed by the bit set of the filters already run (length ``2 ** n``).  Returns the order
    and its cost.
    """
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
