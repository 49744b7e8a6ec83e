"""Traffic meters: what an engine measured for one strategy (the accounting of docs/ACCOUNTING.md).

:class:`StrategyRun` is the engine-independent result every data plane returns (local simulator, Spark,
MQTT).  :class:`TrafficMeter` accumulates it: bytes and tuples per backbone link direction, access bytes,
a per-direction timeline, and the delivered tuple indices with their latencies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from network.latency import LatencyStats

Direction = tuple[str, str]


@dataclass(frozen=True)
class SubscriptionSummary:
    """One subscription's deliveries as a report gives them (``missing``/``extra``: copies expected but not
    delivered, and delivered but not expected, docs/REPORT.md)."""

    delivered: int
    expected: int
    missing: int
    extra: int
    latency: LatencyStats


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

    An engine that does not bring every delivery home (Spark) leaves ``delivered`` and ``latencies`` empty
    and gives ``summary`` instead: per subscription the counts, the check against the expected tuples and
    the latency statistics, with ``latency`` over all deliveries.
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
    summary: dict[str, SubscriptionSummary] | None = None
    latency: LatencyStats | None = None

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
        self._directions: list[Direction] | None = None  # what :meth:`cross_runs` counts over
        self._default_attrs = dict(subscriptions)
        self._attrs: dict[str, tuple[str, ...]] = {}
        self.subscriptions = list(subscriptions)  # numbered by position, for :meth:`deliver_many`
        # (subscription numbers, indices, latencies) per call, grouped per subscription at the end
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def cross_runs(
        self,
        directions: Sequence[Direction],
        link: np.ndarray,
        first: np.ndarray,
        count: np.ndarray,
        first_wire: np.ndarray,
        wire_bytes: np.ndarray,
        departures: np.ndarray,
    ) -> None:
        """Runs of tuples at once: run ``r``'s ``count[r]`` tuples crossed ``directions[link[r]]``, finishing
        at ``departures[first[r]:]``, of ``wire_bytes[first_wire[r]:]`` bytes (every call of one meter with
        the same ``directions``)."""
        if self._directions is None:
            self._directions = list(directions)
            n = len(self._directions)
            self._sums, self._counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
            row = {d: k for k, d in enumerate(self._bytes)}
            self._row = np.array([row.get(d, -1) for d in self._directions], np.int64)
            self._timeline = np.zeros((len(self._bytes), 0))
        elif self._directions != directions:
            raise ValueError("one meter counts over one list of link directions")
        if not len(link):
            return
        # a link that never drains (a tiny bandwidth) would grow the timeline without bound: what departs
        # after MAX_TIMELINE_BINS bins is counted in the last one
        needed = _last_bin(link, first, count, departures, self._row, self.bin_s, MAX_TIMELINE_BINS) + 1
        if needed > self._timeline.shape[1]:
            grown = np.zeros((len(self._bytes), needed))
            grown[:, : self._timeline.shape[1]] = self._timeline
            self._timeline = grown
        _accumulate(
            link,
            first,
            count,
            first_wire,
            wire_bytes,
            departures,
            self._row,
            self.bin_s,
            MAX_TIMELINE_BINS,
            self._sums,
            self._counts,
            self._timeline,
        )

    def deliver_many(self, numbers: np.ndarray, counts: np.ndarray, indices: np.ndarray, latencies: np.ndarray) -> None:
        """Subscription ``subscriptions[numbers[k]]`` received the next ``counts[k]`` of ``indices``, after
        ``latencies`` seconds.  Copies of one tuple to one subscription keep the order of the calls, and
        within a call the order of ``numbers``."""
        self._parts.append((np.repeat(numbers.astype(np.int32), counts), indices, latencies))

    def received_attrs(self, subscription: str, attrs: tuple[str, ...]) -> None:
        """What ``subscription``'s deliveries carry (the first call per subscription counts)."""
        self._attrs.setdefault(subscription, attrs)

    @property
    def received(self) -> dict[str, tuple[str, ...]]:
        """The attributes of each subscription delivered to so far (by :meth:`received_attrs`)."""
        return dict(self._attrs)

    def deliveries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every delivered copy so far as flat arrays ``(subscription number, tuple index, latency)``, by
        subscription, then tuple index (copies of a tuple in the order they came); the meter forgets them."""
        parts, self._parts = self._parts, []
        owner = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        indices = np.concatenate([p[1] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
        times = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
        del parts
        order = np.lexsort((indices, owner))
        return owner[order], indices[order], times[order]

    def result(self, strategy: str, engine: str) -> StrategyRun:
        owner, indices, times = self.deliveries()
        cuts = np.searchsorted(owner, np.arange(len(self.subscriptions) + 1))
        delivered, latencies = {}, {}
        for k, sub in enumerate(self.subscriptions):
            delivered[sub] = indices[cuts[k] : cuts[k + 1]].copy()
            latencies[sub] = times[cuts[k] : cuts[k + 1]].copy()
        link_bytes, link_tuples = dict(self._bytes), dict(self._tuples)
        access: dict[Direction, int] = {}
        timeline = {}
        if self._directions is not None:
            for k in np.flatnonzero(self._counts).tolist():
                d = self._directions[k]
                if self._row[k] >= 0:
                    link_bytes[d], link_tuples[d] = int(self._sums[k]), int(self._counts[k])
                else:
                    access[d] = int(self._sums[k])
            if self._timeline.shape[1]:
                rounded = np.rint(self._timeline).astype(np.int64)
                timeline = {d: rounded[k] for k, d in enumerate(self._bytes)}
        attrs = {sub: self._attrs.get(sub, default) for sub, default in self._default_attrs.items()}
        attrs.update(self._attrs)
        return StrategyRun(
            strategy=strategy,
            engine=engine,
            link_bytes=link_bytes,
            link_tuples=link_tuples,
            access_bytes=sum(access.values()),
            access_link_bytes=dict(sorted(access.items())),
            delivered=delivered,
            delivered_attrs=attrs,
            latencies=latencies,
            timeline=timeline,
            bin_s=self.bin_s,
        )


@njit(cache=True)
def _bin(departure, bin_s, max_bins):
    return int(min(np.floor(departure / bin_s), max_bins - 1))


@njit(cache=True)
def _last_bin(link, first, count, departures, row, bin_s, max_bins):
    """The last timeline bin any backbone departure falls in (-1: none).  A run's departures ascend (one
    channel served FIFO at one link), so only its last one is looked at."""
    last = -1
    for r in range(len(link)):
        if row[link[r]] < 0 or count[r] == 0:
            continue
        b = _bin(departures[first[r] + count[r] - 1], bin_s, max_bins)
        if b > last:
            last = b
    return last


@njit(cache=True)
def _accumulate(link, first, count, first_wire, wire, departures, row, bin_s, max_bins, sums, counts, timeline):
    """Add the runs to the per-direction sums and timeline.  A run's departures ascend, so its bytes are
    summed per bin before they are added to the timeline (whole numbers: the float sums are exact)."""
    for r in range(len(link)):
        k = link[r]
        counts[k] += count[r]
        w = first_wire[r]
        line = row[k]
        total = 0
        if line < 0:
            for i in range(count[r]):
                total += wire[w + i]
            sums[k] += total
            continue
        current = -1
        in_bin = 0
        for i in range(count[r]):
            size = wire[w + i]
            total += size
            b = _bin(departures[first[r] + i], bin_s, max_bins)
            if b != current:
                if b >= timeline.shape[1]:
                    raise IndexError("a run's departures do not ascend")
                if current >= 0:
                    timeline[line, current] += in_bin
                current, in_bin = b, 0
            in_bin += size
        if current >= 0:
            timeline[line, current] += in_bin
        sums[k] += total
