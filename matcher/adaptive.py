"""Cost-based choice between the shared-filtering engines of one input stream.

A super-peer keeps one matcher per incoming stream.  Which engine is cheapest depends on the workload:
the R-tree/box evaluator (:class:`MultiMatcher`) likes few tight boxes, the CACQ grouped filter and the
ASC engine like many subscriptions over small domains with early drops.  :class:`AdaptiveMultiMatcher`
measures, on probe slices of the live input, each engine's seconds per tuple, runs the cheapest on
everything else, and re-probes every ``period`` tuples so that a drifting workload can change the
choice.  Engines measured much slower than the current choice are re-probed less often (back-off up to
``max_backoff`` periods) so that probing a slow engine does not eat the gain.  Every engine returns
exactly the same bool matrix, so switching never changes a result.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from matcher.asc import ASCMatcher
from matcher.grouped import ConjunctTable, GroupedFilter, row_count
from matcher.multi import MultiMatcher
from matcher.predicate import Box, Predicate, interval

ENGINES = ("multi", "grouped", "asc")
SWITCH_MARGIN = 0.05  # a challenger must be this much cheaper to replace the current engine (no flapping)


def _make(name: str, labelled: Sequence[tuple[str, Predicate]]):
    if name == "multi":
        return MultiMatcher(labelled)
    if name == "grouped":
        return GroupedFilter(labelled)
    return ASCMatcher(labelled, ordering="hybrid")


class AdaptiveMultiMatcher:
    """The MultiMatcher interface over the engine its measured statistics say is cheapest.

    ``choice`` is the engine in use, ``history`` the ``(tuples seen, engine)`` switches, ``cost`` the last
    measured seconds per tuple of each engine.  Raises ValueError for an unknown engine name.
    """

    def __init__(
        self,
        labelled: Sequence[tuple[str, Predicate]],
        *,
        engines: Sequence[str] = ENGINES,
        period: int = 100_000,
        probe: int = 2_048,
        max_backoff: int = 8,
    ):
        unknown = [e for e in engines if e not in ENGINES]
        if unknown or not engines:
            raise ValueError(f"engines {list(engines)}: expected names from {', '.join(ENGINES)}")
        self._setup(tuple(labelled), tuple(engines), period, probe, max_backoff)

    def _setup(self, labelled, engines, period, probe, max_backoff) -> None:
        self._labelled = labelled
        self.labels = tuple(label for label, _ in labelled)
        self.engines = {name: _make(name, labelled) for name in engines}
        self.period, self.probe, self.max_backoff = int(period), int(probe), int(max_backoff)
        self.cost: dict[str, float] = {}
        self.choice = engines[0]
        self.history: list[tuple[int, str]] = []
        self.tuples_seen = 0
        self._due = dict.fromkeys(engines, 0)  # tuples_seen at which each engine is next probed
        self._skips = dict.fromkeys(engines, 1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = ConjunctTable.of(self._labelled).to_arrays()
        arrays["adaptive_settings"] = np.array(
            [",".join(self.engines), self.period, self.probe, self.max_backoff, self.choice], dtype=object
        )
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AdaptiveMultiMatcher:
        table = ConjunctTable.from_arrays(arrays)
        engines, period, probe, max_backoff, choice = arrays["adaptive_settings"]
        self = cls.__new__(cls)
        self._setup(_labelled(table), tuple(str(engines).split(",")), period, probe, max_backoff)
        self.choice = str(choice)
        return self

    def match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = row_count(columns)
        out = np.zeros((n, len(self.labels)), dtype=bool)
        start = 0
        while start < n:
            due = [e for e in self.engines if self._due[e] <= self.tuples_seen]
            if due:
                stop = min(n, start + self.probe)
                out[start:stop] = self._probe(due, _slice(columns, start, stop), stop - start)
            else:
                stop = min(n, start + min(self._due.values()) - self.tuples_seen)
                out[start:stop] = self.engines[self.choice].match(_slice(columns, start, stop))
            self.tuples_seen += stop - start
            start = stop
        return out

    def _probe(self, due: list[str], columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        result = None
        for name in due:
            began = time.perf_counter()
            result = self.engines[name].match(columns)
            self.cost[name] = (time.perf_counter() - began) / max(n, 1)
        best = min(self.cost, key=lambda e: (self.cost[e], e))
        current = self.cost.get(self.choice, np.inf)
        if not self.history or (best != self.choice and self.cost[best] < (1 - SWITCH_MARGIN) * current):
            self.history.append((self.tuples_seen, best))
            self.choice = best
        for name in due:
            # a slow engine is probed less often: its probes cost ratio x the chosen engine's time
            ratio = self.cost[name] / max(self.cost[self.choice], 1e-12)
            self._skips[name] = 1 if ratio < 1.5 else min(self.max_backoff, self._skips[name] * 2)
            self._due[name] = self.tuples_seen + n + self.period * self._skips[name]
        return result


def _slice(columns: Mapping[str, np.ndarray], start: int, stop: int) -> dict[str, np.ndarray]:
    return {name: values[start:stop] for name, values in columns.items()}


def _labelled(table: ConjunctTable) -> tuple[tuple[str, Predicate], ...]:
    """The labelled predicates a conjunct table was compiled from."""
    boxes: list[list[Box]] = [[] for _ in table.labels]
    for r, owner in enumerate(table.owner):
        box = Box(
            (dim, interval(table.lo[r, k], table.hi[r, k], table.lo_closed[r, k], table.hi_closed[r, k]))
            for k, dim in enumerate(table.dims)
            if np.isfinite(table.lo[r, k]) or np.isfinite(table.hi[r, k])
        )
        boxes[int(owner)].append(box)
    return tuple((label, Predicate(b)) for label, b in zip(table.labels, boxes, strict=True))
