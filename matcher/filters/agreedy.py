"""Adaptive ordering of the pipelined conjunctive filters of one operator: A-Greedy (Babu's thesis, ch. 4).

A conjunctive box is a pipeline of filters (one interval test per attribute) that stops at the first
filter dropping a tuple.  The best order depends on the data, and with correlated filters on
*conditional* drop probabilities.  :class:`AGreedy` keeps the Greedy Invariant (GI)

    d(i|i-1) / t_f(i)  >=  alpha * d(j|i-1) / t_f(j)        for every position i < j

on a sliding **profile window** of dropped tuples, profiled with probability ``probability`` over all
filters (the remaining ones evaluated "artificially").  The **matrix view** ``V[i, j]`` counts profile
tuples not dropped by the filters at positions ``0..i-1`` that the filter at position ``j`` drops; it is
updated on every insertion and deletion (Fig. 4.5), checked for violations, and a violation at ``i`` is
corrected by re-scanning the window row by row (Fig. 4.7).  Two of the thesis's variants are options:

* ``independent``: only the first row (unconditional drop counts), order sorted by ``d/t``;
* ``sweep``: one profiled position ``j`` at a time, needing at most one extra evaluation per profile
  tuple, moving at most one filter per stage.

Filter costs ``t`` are given in deterministic units (the thesis measures times; here a unit is one
filter evaluation).  :func:`optimal_order` is the offline optimum used to judge the orders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher.filters.ordering import best_order
from matcher.predicate import Box

VARIANTS = ("agreedy", "sweep", "independent")


class AGreedy:
    """The Profiler and Re-optimizer for ``n`` filters; ``order`` lists filter indices, first evaluated first.

    Raises ValueError for an unknown variant, a non-positive window or costs of the wrong length.
    """

    def __init__(
        self,
        n: int,
        *,
        costs: Sequence[float] | None = None,
        variant: str = "agreedy",
        window: int = 1000,
        alpha: float = 0.9,
        stage_length: int | None = None,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r}: expected one of {', '.join(VARIANTS)}")
        if window <= 0:
            raise ValueError(f"window {window}: must be positive")
        self.costs = np.ones(n) if costs is None else np.asarray(costs, dtype=np.float64)
        if self.costs.shape != (n,):
            raise ValueError(f"costs: expected {n} values, got {len(self.costs)}")
        self.n, self.variant, self.alpha = n, variant, float(alpha)
        self.order = list(range(n))
        self.window = np.zeros((window, n), dtype=bool)  # drop bits by filter index, ring buffer
        self.size = self.next_slot = 0
        self.view = np.zeros((n, n), dtype=np.int64)  # by position
        self.corrections = 0
        self.stage = 1  # Sweep: the profiled position
        self.stage_length = stage_length or window
        self.stage_seen = 0

    # -- Profiler ---------------------------------------------------------------------------------------
    def add(self, drops: np.ndarray) -> None:
        """Insert one profile tuple: ``drops[f]`` is true when filter ``f`` drops it (all filters known)."""
        drops = np.asarray(drops, dtype=bool)
        if self.size == len(self.window):
            self._update(self.window[self.next_slot], -1)
        else:
            self.size += 1
        self.window[self.next_slot] = drops
        self.next_slot = (self.next_slot + 1) % len(self.window)
        self._update(drops, +1)
        self._reoptimize()

    def _update(self, drops: np.ndarray, sign: int) -> None:
        """Fig. 4.5: the columns the tuple drops at, rows up to its first dropping position."""
        by_position = drops[self.order]
        if not by_position.any():
            return
        first = int(np.argmax(by_position))
        columns = np.flatnonzero(by_position)
        self.view[: first + 1, columns[columns >= first]] += sign

    def _rates(self) -> np.ndarray:
        return self.view / self.costs[self.order][None, :]

    # -- Re-optimizer -----------------------------------------------------------------------------------
    def violation(self) -> int | None:
        """The first position where this variant's invariant fails (with ``alpha``), or None."""
        rates = self._rates()
        if self.variant == "independent":
            # first row only: d(i|0)/t_i >= alpha d(j|0)/t_j
            for i in range(self.n - 1):
                if rates[0, i] < self.alpha * rates[0, i + 1 :].max():
                    return i
            return None
        for i in range(self.stage if self.variant == "sweep" else self.n - 1):
            later = rates[i, self.stage] if self.variant == "sweep" else rates[i, i + 1 :].max()
            if rates[i, i] < self.alpha * later:
                return i
        return None

    def _reoptimize(self) -> None:
        if self.variant == "sweep":
            self.stage_seen += 1
        position = self.violation()
        if position is not None:
            self.corrections += 1
            if self.variant == "independent":
                self._sort_independent()
            elif self.variant == "sweep":
                self._move(self.stage, position)
            else:
                self._correct(position)
        if self.variant == "sweep" and (position is not None or self.stage_seen >= self.stage_length):
            # the profile tuples of a stage know only the bits its profiled position needs: start afresh
            self.stage = self.stage + 1 if self.stage + 1 < self.n else 1
            self.stage_seen = self.size = self.next_slot = 0
            self.view[:] = 0

    def _row(self, r: int) -> np.ndarray:
        """Row ``r`` of the view recomputed from the window (Fig. 4.7 step 1)."""
        bits = self.window[: self.size][:, self.order]
        survivors = ~bits[:, :r].any(axis=1)
        row = np.zeros(self.n, dtype=np.int64)
        row[r:] = bits[survivors, r:].sum(axis=0)
        return row

    def _correct(self, i: int) -> None:
        """Fig. 4.7: restore the GI from position ``i`` on, growing the range while filters move."""
        last, r = i, i
        while r <= last and r < self.n:
            self.view[r] = self._row(r)
            rates = self.view[r, r:] / self.costs[self.order[r:]]
            best = r + int(np.argmax(rates))  # first maximum: the current filter wins ties (no thrashing)
            last = max(last, best)
            if best != r:
                self.order[r], self.order[best] = self.order[best], self.order[r]
                self.view[: r + 1, [r, best]] = self.view[: r + 1, [best, r]]
            r += 1

    def _move(self, source: int, target: int) -> None:
        """Sweep: put the filter at position ``source`` at ``target``, then rebuild the view."""
        self.order.insert(target, self.order.pop(source))
        self._rebuild()

    def _sort_independent(self) -> None:
        drops = self.window[: self.size].sum(axis=0) / self.costs
        self.order = sorted(self.order, key=lambda f: (-drops[f], self.order.index(f)))
        self._rebuild()

    def _rebuild(self) -> None:
        self.view[:] = 0
        for r in range(self.n):
            self.view[r] = self._row(r)


class PipelinedFilter:
    """One conjunctive box evaluated as a pipeline of interval filters ordered by :class:`AGreedy`.

    ``filter(columns)`` returns the bool mask of tuples inside the box.  Tuples are processed in steps of
    ``step``; a dropped tuple is profiled with ``probability`` (A-Greedy and Independent evaluate all
    remaining filters, Sweep only the profiled one).  ``evaluations`` counts the executor's filter
    evaluations weighted by cost, ``profile_evaluations`` the profiler's extra ones.
    """

    def __init__(
        self,
        box: Box,
        *,
        costs: Sequence[float] | None = None,
        variant: str = "agreedy",
        window: int = 1000,
        probability: float | None = None,
        alpha: float = 0.9,
        step: int = 64,
        seed: int = 0,
    ):
        self.filters = box.items()
        self.reoptimizer = AGreedy(len(self.filters), costs=costs, variant=variant, window=window, alpha=alpha)
        self.probability = probability if probability is not None else (0.005 if variant == "independent" else 0.01)
        self.step = step
        self._rng = np.random.default_rng(seed)
        self.evaluations = self.profile_evaluations = 0.0
        self.tuples_seen = 0

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.filters[f][0] for f in self.reoptimizer.order)

    def _drops(self, f: int, columns: Mapping[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
        dim, iv = self.filters[f]
        v = np.asarray(columns[dim], dtype=np.float64)[rows]
        inside = (v > iv.lo) | ((v == iv.lo) & iv.lo_closed)
        inside &= (v < iv.hi) | ((v == iv.hi) & iv.hi_closed)
        return ~inside

    def filter(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(columns.values()))) if columns else 0
        passed = np.ones(n, dtype=bool)
        costs, reopt = self.reoptimizer.costs, self.reoptimizer
        for start in range(0, n, self.step):
            rows = np.arange(start, min(n, start + self.step))
            order = list(reopt.order)
            dropped_at = np.full(len(rows), -1)
            live = np.arange(len(rows))
            for position, f in enumerate(order):
                if len(live) == 0:
                    break
                self.evaluations += costs[f] * len(live)
                out = self._drops(f, columns, rows[live])
                dropped_at[live[out]] = position
                live = live[~out]
            passed[rows] = dropped_at < 0
            for i in np.flatnonzero((dropped_at >= 0) & (self._rng.random(len(rows)) < self.probability)):
                self._profile(order, int(dropped_at[i]), columns, rows[i : i + 1])
        self.tuples_seen += n
        return passed

    def _profile(self, order: list[int], first: int, columns, row: np.ndarray) -> None:
        reopt = self.reoptimizer
        drops = np.zeros(len(order), dtype=bool)
        drops[order[first]] = True
        if reopt.variant == "sweep":
            # only the filter at the profiled position is needed; those before `first` passed
            j = reopt.stage
            if j > first:
                drops[order[j]] = bool(self._drops(order[j], columns, row)[0])
                self.profile_evaluations += reopt.costs[order[j]]
        else:
            for f in order[first + 1 :]:
                drops[f] = bool(self._drops(f, columns, row)[0])
                self.profile_evaluations += reopt.costs[f]
        reopt.add(drops)

    @property
    def evaluations_per_tuple(self) -> float:
        return self.evaluations / self.tuples_seen if self.tuples_seen else 0.0


def order_cost(drops: np.ndarray, order: Sequence[int], costs: Sequence[float] | None = None) -> float:
    """Expected cost per tuple of a fixed order on drop bits ``(tuples, filters)`` (Eq. 4.1)."""
    costs = np.ones(drops.shape[1]) if costs is None else np.asarray(costs, dtype=np.float64)
    alive = np.ones(len(drops), dtype=bool)
    total = 0.0
    for f in order:
        total += costs[f] * alive.mean()
        alive &= ~drops[:, f]
    return float(total)


def optimal_order(drops: np.ndarray, costs: Sequence[float] | None = None) -> tuple[list[int], float]:
    """The optimal fixed order for drop bits ``(tuples, filters)`` by dynamic programming over subsets.

    The cost of placing filter ``f`` after the set ``S`` is ``t_f * P(no filter of S drops)``, which depends
    on ``S`` only, so all ``n!`` orders are searched in ``O(2^n n)``.  Raises ValueError above 20 filters.
    """
    n_tuples, n = drops.shape
    if n > 20:
        raise ValueError(f"{n} filters: exhaustive search is limited to 20")
    costs = np.ones(n) if costs is None else np.asarray(costs, dtype=np.float64)
    patterns = (drops.astype(np.int64) << np.arange(n)).sum(axis=1)
    histogram = np.bincount(patterns, minlength=1 << n).astype(np.float64)
    # within[T] = tuples whose dropping filters all lie in T (sum over subsets); survive[S] = within[~S]
    within = histogram
    for f in range(n):
        halves = within.reshape(-1, 2, 1 << f)
        halves[:, 1, :] += halves[:, 0, :]
    survive = within[((1 << n) - 1) ^ np.arange(1 << n)] / max(n_tuples, 1)
    return best_order(survive, costs)
