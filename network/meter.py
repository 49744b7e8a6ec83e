"""Traffic meters: what an engine measured for one strategy (SPEC section 3 accounting).

:class:`StrategyRun` is the engine-independent result every data plane returns (local simulator, Spark,
MQTT).  :class:`TrafficMeter` accumulates it: bytes and tuples per backbone link direction, access bytes,
a per-direction timeline, and the delivered tuple indices with their latencies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

Direction = tuple[str, str]


@dataclass(frozen=True)
class StrategyRun:
    """One strategy executed by one engine.

    ``link_bytes`` / ``link_tuples`` hold every backbone link direction (zeros included); ``access_bytes``
    is the thin-peer traffic (each emitted tuple uploaded once with all attributes, plus every delivered
    tuple); ``access_link_bytes`` splits it per access-link direction.  ``delivered[sub]`` lists the tuple
    indices delivered in ascending order (one entry per delivered copy) and ``latencies[sub]`` the seconds
    from emission to arrival at the thin-peer, aligned with it.  ``timeline[direction]`` is bytes per
    backbone direction per bin of ``bin_s`` seconds (all arrays of equal length, at most
    ``MAX_TIMELINE_BINS``, the last one counting every later departure; empty when the engine has no clock).
    """

    strategy: str
    engine: str
    link_bytes: dict[Direction, int]
    link_tuples: dict[Direction, int]
    access_bytes: int
    access_link_bytes: dict[Direction, int]
    delivered: dict[str, np.ndarray]
    delivered_attrs: dict[str, tuple[str, ...]]
    latencies: dict[str, np.ndarray]
    timeline: dict[Direction, np.ndarray]
    bin_s: float

    @property
    def backbone_bytes(self) -> int:
        return sum(self.link_bytes.values())

    @property
    def backbone_tuples(self) -> int:
        return sum(self.link_tuples.values())


MAX_TIMELINE_BINS = 10_000
"""Timeline bins kept per direction (about 100 cover the run, see :func:`bin_width`); the last one also
counts every later departure."""


def bin_width(duration: float) -> float:
    """A round timeline bin (1, 2 or 5 times a power of ten) giving about 100 bins over ``duration``."""
    target = max(duration, 1e-9) / 100
    exponent = math.floor(math.log10(target))
    for mantissa in (1, 2, 5, 10):
        width = mantissa * 10.0**exponent
        if width >= target * (1 - 1e-12):
            return width
    raise AssertionError("unreachable: 10 * 10**floor(log10(x)) >= x")


class TrafficMeter:
    """Accumulates one strategy's traffic; :meth:`result` freezes it into a :class:`StrategyRun`."""

    def __init__(self, backbone: Iterable[Direction], subscriptions: dict[str, tuple[str, ...]], bin_s: float):
        self.bin_s = bin_s
        self._bytes: dict[Direction, int] = {d: 0 for d in sorted(backbone)}
        self._tuples: dict[Direction, int] = dict.fromkeys(self._bytes, 0)
        self._bins: dict[Direction, np.ndarray] = {d: np.zeros(0) for d in self._bytes}
        self._access: dict[Direction, int] = {}
        self._default_attrs = dict(subscriptions)
        self._attrs: dict[str, tuple[str, ...]] = {}
        # (order key, indices, latencies) per subscription, sorted at the end so that the event order of
        # the engine never reaches the output
        self._parts: dict[str, list[tuple[tuple, np.ndarray, np.ndarray]]] = {s: [] for s in subscriptions}

    def cross_links(
        self, directions: Sequence[Direction], link: np.ndarray, wire_bytes: np.ndarray, departures: np.ndarray
    ) -> None:
        """Many tuples at once: tuple ``i`` of ``wire_bytes[i]`` bytes crossed ``directions[link[i]]``,
        finishing at ``departures[i]``."""
        if not len(link):
            return
        n = len(directions)
        weights = wire_bytes.astype(np.float64)
        sums = np.bincount(link, weights=weights, minlength=n)
        counts = np.bincount(link, minlength=n)
        backbone = np.zeros(n, dtype=bool)
        for i in np.flatnonzero(counts).tolist():
            direction = directions[i]
            if direction in self._bytes:
                backbone[i] = True
                self._bytes[direction] += int(sums[i])
                self._tuples[direction] += int(counts[i])
            else:
                self._access[direction] = self._access.get(direction, 0) + int(sums[i])
        timed = backbone[link]
        if not timed.any():
            return
        # a link that never drains (a tiny bandwidth) would grow the timeline without bound: what departs
        # after MAX_TIMELINE_BINS bins is counted in the last one
        bins = np.minimum(np.floor(departures[timed] / self.bin_s), MAX_TIMELINE_BINS - 1).astype(np.int64)
        cells, at = np.unique(link[timed] * MAX_TIMELINE_BINS + bins, return_inverse=True)
        sums = np.bincount(at, weights=weights[timed])
        owners = cells // MAX_TIMELINE_BINS
        cuts = np.flatnonzero(np.diff(owners)) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(cells)], strict=True):
            direction = directions[int(owners[lo])]
            columns = cells[lo:hi] % MAX_TIMELINE_BINS
            old = self._bins[direction]
            if len(old) <= columns[-1]:
                grown = np.zeros(int(columns[-1]) + 1)
                grown[: len(old)] = old
                self._bins[direction] = old = grown
            old[columns] += sums[lo:hi]

    def deliver(
        self, subscription: str, attrs: tuple[str, ...], order: tuple, indices: np.ndarray, latencies: np.ndarray
    ) -> None:
        """``subscription`` received ``indices`` (with ``attrs``) after ``latencies`` seconds; ``order`` sorts
        the parts of one subscription deterministically (e.g. ``(window, lane)``) before the indices are
        sorted (stably, so copies of one tuple stay in part order)."""
        self._attrs.setdefault(subscription, attrs)
        self._parts.setdefault(subscription, []).append((order, indices, latencies))

    def result(self, strategy: str, engine: str) -> StrategyRun:
        delivered, latencies = {}, {}
        for sub, parts in self._parts.items():
            parts.sort(key=lambda part: part[0])
            indices = np.concatenate([p[1] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
            times = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
            # a part may hold tuples of several disjoint time ranges (a window merges spans), so the parts'
            # order alone does not sort the indices; the stable sort keeps copies in the parts' order
            ascending = np.argsort(indices, kind="stable")
            delivered[sub], latencies[sub] = indices[ascending], times[ascending]
        length = max((len(b) for b in self._bins.values()), default=0)
        timeline = {}
        for d, b in self._bins.items():
            padded = np.zeros(length, dtype=np.int64)
            padded[: len(b)] = np.rint(b).astype(np.int64)
            timeline[d] = padded
        attrs = {sub: self._attrs.get(sub, default) for sub, default in self._default_attrs.items()}
        attrs.update(self._attrs)
        return StrategyRun(
            strategy=strategy,
            engine=engine,
            link_bytes=dict(self._bytes),
            link_tuples=dict(self._tuples),
            access_bytes=sum(self._access.values()),
            access_link_bytes=dict(sorted(self._access.items())),
            delivered=delivered,
            delivered_attrs=attrs,
            latencies=latencies,
            timeline=timeline if length else {},
            bin_s=self.bin_s,
        )
