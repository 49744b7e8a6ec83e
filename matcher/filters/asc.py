"""Lee & Lee's attribute selection constructs (ASC) with their adaptive two-level ordering.

One ASC per p-attribute (Lee & Lee, KIPS 2007, Definition 1): the sorted distinct constants of all conjuncts on that
attribute split its domain into ``2m+1`` regions (``(-inf,c1), [c1], (c1,c2), ..., [cm], (cm,inf)``), and
each region stores the precomputed query-result bitmap (one bit per conjunct: can a value of this region
satisfy the conjunct's constraint on this attribute; 1 when the conjunct does not use it).  A tuple is
evaluated by AND-ing the bitmaps of the regions its values fall in into the global result bitmap, and is
dropped as soon as that bitmap is zero (Lee & Lee, JIIS 2012, section 3.2).  Disjunctive predicates get one bit per
conjunct (box); a label matches when any of its bits survives.

The order of the ASCs is learned at run time (Lee & Lee's two-level ordering, JIIS 2012, sections 4-5):

* the **macro-sequence** (``base``): ``"optimal"`` (default) is the order with the fewest ASC
  evaluations on the monitor sample of the period just seen, found exactly by the subset DP of
  :mod:`matcher.filters.ordering` up to ``OPTIMAL_MAX_ASCS`` ASCs; ``"greedy"`` (and above that limit) is the
  paper's: first the minimal cover set, greedily by conditional selectivity over the conjuncts not yet
  covered, then the remaining ASCs by tuple dropping ratio (ties: lowest individual selectivity).  The
  greedy sequence lands a few per cent above the optimum on the KIPS paper's Table 2 query sets;
* the **hybrid sequence**: the macro-sequence plus **micro-arrows** from single regions to the ASC after
  which the sample tuples landing there cost the fewest evaluations (candidates from the region's
  candidate-arrow bitmap), kept only when cheaper than the macro-arrow on the same tuples.  A per-tuple
  evaluated-ASC bitmap (the paper's GEB) makes a micro-arrow to an already evaluated ASC fall back to the
  macro order.

Statistics come from a monitor sample of about ``sample`` tuples per period of ``period`` tuples (lambda); at
the end of each period the sequence is rebuilt when the tuple dropping ratio or the cost (ASCs per tuple)
moved by at least ``threshold`` (mu) relative to their values after the last rebuild.  The paper's drop-ratio
trigger alone cannot see a drift that keeps the overall drop rate (the drop ratio of a complete sequence does
not depend on its order), hence the cost term.  ``threshold=0`` rebuilds every period, as in the paper's main
experiments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher.filters.grouped import ConjunctTable, pack, row_count
from matcher.filters.ordering import alive_fractions, best_order
from matcher.predicate import Predicate

ORDERINGS = ("hybrid", "macro", "fixed")
BASES = ("optimal", "greedy")
OPTIMAL_MAX_ASCS = 12  # the subset DP builds 2^n AND bitmaps per sampled tuple: 4,096 at 12 ASCs
MIN_GROUP = 16  # tuples a region must receive in the monitor sample before it gets a micro-arrow


class _Construct:
    """The ASC of one attribute: region constants, query-usage bitmap, query-result bitmaps."""

    def __init__(self, table: ConjunctTable, k: int):
        lo, hi = table.lo[:, k], table.hi[:, k]
        self.constants = np.unique(np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]]))
        c = self.constants
        # one representative value per region decides its bits: the truth of every constraint is constant inside
        ends = ([np.nextafter(c[0], -np.inf)], [np.nextafter(c[-1], np.inf)]) if len(c) else ([0.0], [])
        gaps = np.concatenate([ends[0], (c[:-1] + c[1:]) / 2, ends[1]])
        representatives = np.empty(2 * len(c) + 1)
        representatives[0::2] = gaps[: len(c) + 1]
        representatives[1::2] = c
        self.uses = table.uses(k)
        bits = table.contains(k, representatives) | ~self.uses[None, :]
        # one more region for NaN, which lies in no interval: only the conjuncts not using the attribute survive
        self.qrb = pack(np.concatenate([bits, ~self.uses[None, :]]))
        self.qub = pack(self.uses[None, :])[0]

    @property
    def n_regions(self) -> int:
        return 2 * len(self.constants) + 2

    def region(self, values: np.ndarray) -> np.ndarray:
        """Region index per value: ``2i`` below constant ``i``, ``2i+1`` on it, ``2m+1`` for NaN."""
        c = self.constants
        i = np.searchsorted(c, values, side="left")
        hit = c[np.minimum(i, len(c) - 1)] == values if len(c) else np.zeros(len(values), dtype=bool)
        return np.where(np.isnan(values), 2 * len(c) + 1, 2 * i + hit)


def _popcount(bitmaps: np.ndarray) -> np.ndarray:
    return np.bitwise_count(bitmaps).sum(axis=-1, dtype=np.int64)


class ASCMatcher:
    """Shared filtering by ASCs, with the MultiMatcher interface and run-time ordering.

    ``ordering`` is ``"hybrid"`` (macro-sequence plus micro-arrows), ``"macro"`` or ``"fixed"`` (the
    attribute ``order`` given, never changed); ``base`` is how the macro-sequence is built, ``"optimal"``
    or ``"greedy"`` (see the module docstring).  ``evaluations`` counts ASCs evaluated by the executor (the
    papers' cost); ``monitor_evaluations`` counts the monitor's extra evaluations.

    Raises ValueError for an unknown ordering or base, or a fixed order that is not a permutation of ``dims``.
    """

    unit = "ASCs"

    def __init__(
        self,
        labelled: Sequence[tuple[str, Predicate]],
        *,
        ordering: str = "hybrid",
        base: str = "optimal",
        order: Sequence[str] | None = None,
        period: int = 10_000,
        threshold: float = 0.0,
        sample: int = 2_000,
        seed: int = 0,
    ):
        self._build(ConjunctTable.of(labelled), ordering, base, order, period, threshold, sample, seed)

    def _build(self, table, ordering, base, order, period, threshold, sample, seed) -> None:
        if ordering not in ORDERINGS:
            raise ValueError(f"ordering {ordering!r}: expected one of {', '.join(ORDERINGS)}")
        if base not in BASES:
            raise ValueError(f"base {base!r}: expected one of {', '.join(BASES)}")
        self.base = base
        self.table = table
        self.labels = table.labels
        self.dims = table.dims
        self.constructs = [_Construct(table, k) for k in range(len(table.dims))]
        self.ordering, self.period, self.threshold, self.sample = ordering, int(period), float(threshold), int(sample)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)
        self.all_bits = pack(np.ones((1, table.n_conjuncts), dtype=bool))[0]
        covering = np.zeros(table.n_conjuncts, dtype=bool)
        for asc in self.constructs:
            covering |= asc.uses
        self.coverable = pack(covering[None, :])[0]
        if order is not None:
            if sorted(order) != sorted(self.dims):
                raise ValueError(f"fixed order {list(order)}: must be a permutation of {list(self.dims)}")
            self.macro = [self.dims.index(d) for d in order]
        else:
            self.macro = sorted(range(len(self.dims)), key=lambda a: (-int(self.constructs[a].uses.sum()), a))
        self.micro = [np.full(asc.n_regions, -1, dtype=np.int64) for asc in self.constructs]
        self._routes: tuple[np.ndarray, np.ndarray, bool] | None = None  # rebuilt whenever the sequence changes
        # the constructs flattened for the kernel: constants and query-result bitmaps, with per-ASC offsets
        self._flat = (
            np.concatenate([asc.constants for asc in self.constructs] or [np.zeros(0)]).astype(np.float64),
            np.cumsum([0] + [len(asc.constants) for asc in self.constructs], dtype=np.int64),
            np.concatenate([asc.qrb for asc in self.constructs] or [np.zeros((0, 1), np.uint64)]),
            np.cumsum([0] + [asc.n_regions for asc in self.constructs], dtype=np.int64),
        )
        uses = np.stack([asc.qub for asc in self.constructs]) if self.constructs else np.zeros((0, 1), np.uint64)
        self._candidates = [(asc.qrb[:, None, :] & uses[None]).any(axis=2) for asc in self.constructs]
        self._asc_index = np.arange(len(self.constructs), dtype=np.int64)
        self.evaluations = self.monitor_evaluations = self.tuples_seen = self.rebuilds = 0
        self._period_tuples = self._period_evaluations = self._period_dropped = 0
        self._monitor: list[np.ndarray] = []  # sampled tuples' values, one row per ASC
        self._reference: tuple[float, float] | None = None
        if self.constructs:
            self._kernel_routes()

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = self.table.to_arrays()
        arrays["asc_macro"] = np.array(self.macro, dtype=np.int64)
        arrays["asc_micro"] = np.concatenate(self.micro) if self.micro else np.zeros(0, np.int64)
        arrays["asc_settings"] = np.array(
            [self.ordering, self.base, self.period, self.threshold, self.sample, self.seed], dtype=object
        )
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> ASCMatcher:
        self = cls.__new__(cls)
        ordering, base, period, threshold, sample, seed = arrays["asc_settings"]
        table = ConjunctTable.from_arrays(arrays)
        self._build(table, str(ordering), str(base), None, period, threshold, sample, seed)
        self.macro = [int(a) for a in arrays["asc_macro"]]
        offsets = np.cumsum([a.n_regions for a in self.constructs])[:-1]
        self.micro = np.split(np.asarray(arrays["asc_micro"]), offsets) if self.constructs else []
        self._routes = None
        if self.constructs:
            self._kernel_routes()
        return self

    @property
    def order(self) -> tuple[str, ...]:
        """The macro-sequence, as attribute names."""
        return tuple(self.dims[a] for a in self.macro)

    @property
    def evaluations_per_tuple(self) -> float:
        return self.evaluations / self.tuples_seen if self.tuples_seen else 0.0

    def match(self, columns: Mapping[str, np.ndarray], *, out: np.ndarray | None = None) -> np.ndarray:
        """``(n_tuples, n_labels)`` bool, into ``out`` when given (zeroed, C-contiguous: see MultiMatcher.match)."""
        from matcher.filters._filter_kernels import asc_kernel

        n = row_count(columns)
        values = np.empty((len(self.dims), n))
        for a, d in enumerate(self.dims):
            values[a] = columns[d]
        out = np.zeros((n, len(self.labels)), dtype=bool) if out is None else out
        if not self.constructs:  # no constrained attribute: only TRUE labels
            out[:, np.unique(self.table.owner)] = True
            self.tuples_seen += n
            return out
        constants, coff, qrb, roff = self._flat
        start = 0
        while start < n:
            micro, macro, hybrid = self._kernel_routes()
            stop = n if self.ordering == "fixed" else min(n, start + self.period - self._period_tuples)
            evaluations, dropped = asc_kernel(
                values, start, stop, constants, coff, qrb, roff, micro, macro, hybrid, self.all_bits,
                self.table.owner, out,
            )  # fmt: skip
            self.evaluations += evaluations
            self._period_evaluations += evaluations
            if self.ordering != "fixed":
                self._observe(values, start, stop, dropped)
            start = stop
        self.tuples_seen += n
        return out

    def _kernel_routes(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """The current sequence as the kernel reads it: flat micro-arrows, macro order, any arrow at all."""
        if self._routes is None:
            hybrid = any((arrows >= 0).any() for arrows in self.micro)
            self._routes = (np.concatenate(self.micro), np.array(self.macro, dtype=np.int64), hybrid)
        return self._routes

    def _next(self, a: int, region: np.ndarray, evaluated: np.ndarray, macro: np.ndarray) -> np.ndarray:
        """The next ASC: the region's micro-arrow if its target is unevaluated, else the macro order."""
        pending = ((evaluated[:, None] >> macro[None, :]) & 1) == 0
        fallback = macro[np.argmax(pending, axis=1)]
        arrow = self.micro[a][region]
        usable = (arrow >= 0) & (((evaluated >> np.maximum(arrow, 0)) & 1) == 0)
        return np.where(usable, arrow, fallback)

    def _observe(self, values: np.ndarray, start: int, stop: int, dropped: int) -> None:
        """Monitor: sample tuples for the statistics; at the end of a period maybe rebuild the sequence."""
        self._period_tuples += stop - start
        self._period_dropped += dropped
        take = start + np.flatnonzero(self._rng.random(stop - start) < self.sample / self.period)
        if len(take):
            # the sampled values are kept; their regions are looked up once per period, at the relearn (per
            # call, the lookup's numpy calls cost more than the kernel on small batches, whatever the sample's size)
            self._monitor.append(values[:, take])
            self.monitor_evaluations += len(take) * len(self.constructs)
        if self._period_tuples < self.period:
            return
        drop = self._period_dropped / self._period_tuples
        cost = self._period_evaluations / self._period_tuples
        if self.threshold == 0 or self.rebuilds == 0:
            self._relearn_from_monitor()
        elif self._reference is None:
            # the first full period under a newly adopted sequence gives its reference figures
            self._reference = (drop, cost)
        elif _moved(self._reference, (drop, cost), self.threshold):
            self._relearn_from_monitor()
            self._reference = None
        self._period_tuples = self._period_evaluations = self._period_dropped = 0
        self._monitor = []

    def _relearn_from_monitor(self) -> None:
        if self._monitor and self.constructs:
            sampled = np.concatenate(self._monitor, axis=1)
            self.relearn(np.stack([asc.region(sampled[a]) for a, asc in enumerate(self.constructs)], 1))

    def relearn(self, regions: np.ndarray) -> None:
        """Rebuild the macro-sequence (and micro-arrows for ``hybrid``) from monitored region indices.

        ``regions`` is int ``(tuples, n_asc)``: the region each sampled tuple falls in, per ASC.
        """
        self.rebuilds += 1
        bitmaps = [asc.qrb[regions[:, a]] for a, asc in enumerate(self.constructs)]
        if self.base == "optimal" and len(self.constructs) <= OPTIMAL_MAX_ASCS:
            self.macro = best_order(alive_fractions(bitmaps, self.all_bits), np.ones(len(bitmaps)))[0]
        else:
            self.macro = self._macro_sequence(bitmaps)
        self.micro = [np.full(asc.n_regions, -1, dtype=np.int64) for asc in self.constructs]
        if self.ordering == "hybrid":
            self._micro_arrows(regions, bitmaps)
        self._routes = None
        self._kernel_routes()

    def _macro_sequence(self, bitmaps: list[np.ndarray]) -> list[int]:
        remaining = list(range(len(bitmaps)))
        single = {a: float(_popcount(bitmaps[a]).sum()) for a in remaining}
        grb = np.broadcast_to(self.all_bits, bitmaps[0].shape).copy()
        covered = np.zeros_like(self.all_bits)
        sequence: list[int] = []
        while remaining:
            uncovered = self.coverable & ~covered
            if uncovered.any():
                # phase 1: lowest conditional selectivity over the conjuncts not yet covered
                best = min(remaining, key=lambda a: (float(_popcount(grb & bitmaps[a] & uncovered).sum()), a))
            else:
                # phase 2: highest tuple dropping ratio, ties by lowest individual selectivity
                best = min(remaining, key=lambda a: (-int(((grb & bitmaps[a]) == 0).all(axis=1).sum()), single[a], a))
            grb &= bitmaps[best]
            covered |= self.constructs[best].qub
            sequence.append(best)
            remaining.remove(best)
        return sequence

    def _micro_arrows(self, regions: np.ndarray, bitmaps: list[np.ndarray]) -> None:
        """Micro-arrows, one region at a time in routing order, scored on the sample tuples that reach it."""
        n, n_asc = regions.shape
        stacked = np.stack(bitmaps)
        macro = np.array(self.macro, dtype=np.int64)
        done_mask = (1 << n_asc) - 1
        grb = np.broadcast_to(self.all_bits, bitmaps[0].shape).copy()
        evaluated = np.zeros(n, dtype=np.int64)
        at = np.full(n, macro[0])
        live = np.arange(n)
        width = max(asc.n_regions for asc in self.constructs)
        for _ in range(n_asc):
            current = at[live]
            for a in np.unique(current):
                sel = live[current == a]
                grb[sel] &= bitmaps[a][sel]
                evaluated[sel] |= 1 << int(a)
            live = live[(grb[live] != 0).any(axis=1) & (evaluated[live] != done_mask)]
            if len(live) == 0:
                break
            last, region = at[live], regions[live, at[live]]
            key = last * width + region
            keys, counts = np.unique(key, return_counts=True)
            for k in keys[counts >= MIN_GROUP]:
                a, r = divmod(int(k), width)
                if self.micro[a][r] < 0:
                    self.micro[a][r] = self._best_arrow(a, r, live[key == k], grb, evaluated, stacked, macro)
            for a in np.unique(at[live]):
                sel = live[at[live] == a]
                at[sel] = self._next(int(a), regions[sel, a], evaluated[sel], macro)

    def _best_arrow(self, a, r, group, grb, evaluated, stacked, macro) -> int:
        """The candidate ASC after which ``group`` costs fewest evaluations, or -1 when none beats the macro-arrow.

        A route's cost is counted exactly on the sample tuples of ``group``: the candidate, then the macro
        order over the ASCs still unevaluated, each tuple stopping when dropped.  Scoring by the immediate
        drops alone (the greedy rule) picked arrows that cost more later (a few per cent more ASCs per tuple
        than the optimal macro order on the ``table2-50q`` workloads of ``bench filters``).
        """
        group_evaluated = evaluated[group]
        evaluated_by_any = int(np.bitwise_or.reduce(group_evaluated))
        # the paper's candidate-arrow bitmap: unevaluated ASCs used by a conjunct the region leaves alive
        targets = np.flatnonzero(self._candidates[a][r] & ((evaluated_by_any >> self._asc_index) & 1 == 0))
        if len(targets) == 0:
            return -1
        # route 0 is the macro-arrow; route i > 0 evaluates targets[i - 1] first, then the macro order
        routes = np.concatenate([grb[group][None], grb[group][None] & stacked[targets][:, group]])
        done = np.concatenate([group_evaluated[None], group_evaluated[None] | (1 << targets)[:, None]])
        cost = np.concatenate([[0], np.full(len(targets), len(group))])
        alive = (routes != 0).any(axis=2)
        for b in macro:
            pending = alive & (((done >> int(b)) & 1) == 0)
            cost += pending.sum(axis=1)
            routes = np.where(pending[:, :, None], routes & stacked[b, group][None], routes)
            alive = (routes != 0).any(axis=2)
        best = int(np.argmin(cost))  # the first minimum: the macro-arrow on a tie
        return int(targets[best - 1]) if best > 0 else -1


def _moved(reference: tuple[float, float], now: tuple[float, float], threshold: float) -> bool:
    return any(abs(x - r) / r >= threshold if r > 0 else x > 0 for r, x in zip(reference, now, strict=True))


def fixed_order_costs(matcher: ASCMatcher, columns: Mapping[str, np.ndarray]) -> tuple[tuple[str, ...], float]:
    """The best fixed ASC order for ``columns`` and its ASCs per tuple, by exhaustive search.

    Whether a tuple is still alive after a set of ASCs does not depend on their order, so the cost of an
    order is the sum, over its prefixes, of the fraction of tuples alive after the prefix; a dynamic
    program over subsets finds the optimum of all ``n!`` orders exactly in ``O(2^n)`` set evaluations.
    Raises ValueError above 16 ASCs (use :func:`local_search_order`).
    """
    n_asc = len(matcher.constructs)
    if n_asc > 16:
        raise ValueError(f"{n_asc} ASCs: exhaustive search is limited to 16")
    alive = alive_fractions(_sample_bitmaps(matcher, columns), matcher.all_bits)
    order, cost = best_order(alive, np.ones(n_asc))
    return tuple(matcher.dims[a] for a in order), cost


def order_cost(matcher: ASCMatcher, columns: Mapping[str, np.ndarray], order: Sequence[str]) -> float:
    """ASCs per tuple that the fixed ``order`` evaluates on ``columns`` (immediate drop)."""
    bitmaps = _sample_bitmaps(matcher, columns)
    n = len(bitmaps[0]) if bitmaps else 0
    grb = np.broadcast_to(matcher.all_bits, (n, len(matcher.all_bits))).copy()
    total = 0.0
    for d in order:
        alive = (grb != 0).any(axis=1)
        total += alive.sum() / max(n, 1)
        grb &= bitmaps[matcher.dims.index(d)]
    return total


def local_search_order(
    matcher: ASCMatcher, columns: Mapping[str, np.ndarray], start: Sequence[str]
) -> tuple[tuple[str, ...], float]:
    """The best order reachable from ``start`` by moving one ASC at a time (for too many ASCs to search)."""
    order, cost = tuple(start), order_cost(matcher, columns, start)
    improved = True
    while improved:
        improved = False
        for i in range(len(order)):
            for j in range(len(order)):
                if i == j:
                    continue
                moved = list(order)
                moved.insert(j, moved.pop(i))
                c = order_cost(matcher, columns, moved)
                if c < cost - 1e-12:
                    order, cost, improved = tuple(moved), c, True
    return order, cost


def _sample_bitmaps(matcher: ASCMatcher, columns: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    return [
        asc.qrb[asc.region(np.asarray(columns[matcher.dims[a]], dtype=np.float64))]
        for a, asc in enumerate(matcher.constructs)
    ]
