"""Traffic meters: what an engine measured for one strategy (the accounting of docs/ACCOUNTING.md).

:class:`StrategyRun` is the engine-independent result every data plane returns (local simulator, Spark,
MQTT).  :class:`TrafficMeter` accumulates it: bytes and tuples per backbone link direction, access bytes,
a per-direction timeline, the delivered tuple indices with their latencies, and the copies dropped at a
full buffer or lost at a failure on the way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from network.buffers import NEVER
from network.latency import LatencyStats
from network.linkrule import TICKS
from topologies.model import Direction


@dataclass(frozen=True)
class SubscriptionSummary:
    """One subscription's deliveries as a report gives them (``missing``/``extra``: copies expected but
    neither delivered nor dropped on the way, and delivered or dropped but not expected, docs/REPORT.md)."""

    delivered: int
    expected: int
    missing: int
    extra: int
    latency: LatencyStats
    dropped: int = 0  # copies it should have received that a full buffer dropped on the way
    lost: int = 0  # copies it should have received that were in flight at a failure (docs/DYNAMICS.md)
    unreachable: int = 0  # expected tuples emitted while no path joined it to its source (docs/DYNAMICS.md)
    missing_before_rejection: int | None = None  # rejected after arriving (at a failure): missing before then
    # an aggregate subscription's counts above are of result records (window x group); these are of the
    # input tuples its records were computed from (docs/QUERIES.md, "Windowed aggregates")
    input: SubscriptionSummary | None = None
    # where its records were computed: None at its subscriber, from the input it received; else the
    # super-peer whose operator computed them, and a record flow shipped them (docs/ACCOUNTING.md, "Records")
    aggregated_at: str | None = None


@dataclass(frozen=True, eq=False)
class ProcessorTally:
    """What one super-peer's processor did (docs/ACCOUNTING.md, "Super-peer CPU"): the operations of the
    tuples it served; per load bin the operations of the tuples reaching its queue (its offered load); the
    ticks its tuples with work spent from reaching the queue to leaving it (waiting and served), and how
    many they were; the tuples its full input buffer dropped.  Tallies of parts of a run add up."""

    ops: int = 0
    offered: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    delay_ticks: int = 0
    jobs: int = 0
    dropped: int = 0

    def plus(self, other: ProcessorTally) -> ProcessorTally:
        n = max(len(self.offered), len(other.offered))
        offered = np.zeros(n, np.int64)
        offered[: len(self.offered)] += self.offered
        offered[: len(other.offered)] += other.offered
        return ProcessorTally(
            self.ops + other.ops, offered, self.delay_ticks + other.delay_ticks, self.jobs + other.jobs,
            self.dropped + other.dropped,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        """Equal counts, and equal offered operations per bin (trailing empty bins aside)."""
        if not isinstance(other, ProcessorTally):
            return NotImplemented
        n = max(len(self.offered), len(other.offered))
        mine, theirs = np.zeros(n, np.int64), np.zeros(n, np.int64)
        mine[: len(self.offered)], theirs[: len(other.offered)] = self.offered, other.offered
        same = (self.ops, self.delay_ticks, self.jobs, self.dropped) == (
            other.ops, other.delay_ticks, other.jobs, other.dropped
        )  # fmt: skip
        return same and bool(np.array_equal(mine, theirs))

    __hash__ = None  # type: ignore[assignment]

    def delay_mean(self) -> float | None:
        """Mean seconds a tuple with work spent at the processor (None: none came)."""
        return self.delay_ticks / self.jobs / TICKS if self.jobs else None

    @classmethod
    def of_jobs(
        cls, arrivals: np.ndarray, departures: np.ndarray, work: np.ndarray, dropped: int, bin_s: float
    ) -> ProcessorTally:
        """The tally of tuples reaching a processor at ``arrivals`` (ticks) and leaving it at ``departures``
        (negative: not served, dropped or lost), each of ``work`` operations, ``dropped`` of them at its
        input buffer; offered by the bins of ``bin_s`` seconds their arrivals fall in."""
        if not len(arrivals):
            return cls(dropped=dropped)
        bins = _tick_bins(arrivals, bin_s, MAX_TIMELINE_BINS)
        offered = np.zeros(int(bins.max()) + 1, np.int64)
        np.add.at(offered, bins, work)
        served = departures >= 0
        timed = served & (work > 0)
        spent = departures[timed] - arrivals[timed]  # exact: summed as high and low 32 bits apart
        delay = (int((spent >> 32).sum()) << 32) + int((spent & 0xFFFFFFFF).sum())
        return cls(int(work[served].sum()), offered, delay, int(timed.sum()), dropped)


@dataclass(frozen=True)
class StrategyRun:
    """One strategy executed by one engine.

    ``link_bytes`` / ``link_tuples`` hold every backbone link direction (zeros included); ``access_bytes``
    is the thin-peer traffic (each emitted tuple uploaded once with all attributes, plus every delivered
    tuple); ``access_link_bytes`` splits it per access-link direction.  ``timeline[direction]`` is bytes
    per backbone direction per bin of ``bin_s`` seconds (all arrays of equal length, at most
    ``MAX_TIMELINE_BINS``, the last one counting every later departure; empty when the engine has no clock).

    ``summary`` gives per subscription the counts, the check against the expected tuples and the latency
    statistics, and ``latency`` those over all deliveries: every engine's run has them, made by the one
    check (network/exactness.py), and a report reads them alone.  An engine that brings every copy home
    (the local engine, live mode) also keeps them, as detail: ``delivered[sub]`` lists the tuple indices
    delivered (one entry per delivered copy; in ascending order on the local engine) and
    ``latencies[sub]`` the seconds from emission to arrival at the thin-peer, aligned with it; ``dropped``
    and ``lost`` below the copies dropped and lost on the way.  Spark leaves them empty: its copies stay on
    the executors.  (:meth:`TrafficMeter.result` gives a run before its check: no ``summary`` yet.)
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
    # what the network limits are measured by (docs/REPORT.md): per access-link direction the tuples that
    # crossed it; per backbone direction the tuples dropped at its tail and the bytes reaching its queue per
    # bin (its offered load); per super-peer the tuples landing there per bin (its load); per subscription
    # the indices of the copies dropped on the way (detail, as ``delivered``; the summary counts them)
    load_bin_s: float = 1.0  # the bins of ``offered`` and ``landed``
    access_link_tuples: dict[Direction, int] = field(default_factory=dict)
    link_dropped: dict[Direction, int] = field(default_factory=dict)
    offered: dict[Direction, np.ndarray] = field(default_factory=dict)
    landed: dict[str, np.ndarray] = field(default_factory=dict)
    dropped: dict[str, np.ndarray] = field(default_factory=dict)
    # from the plan: per super-peer the most operators it ran in one epoch; per subscription the planner
    # rejected, why
    operators: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    # failures (docs/DYNAMICS.md): per backbone direction the tuples lost there in flight at a failure; per
    # subscription the indices of its copies lost on the way (detail, as ``delivered``; the summary counts
    # them); the plan's re-plans, one per change of the backbone
    link_lost: dict[Direction, int] = field(default_factory=dict)
    lost: dict[str, np.ndarray] = field(default_factory=dict)
    replans: tuple = ()
    rejected_at: dict[str, float] = field(default_factory=dict)  # when the planner rejected each
    # per stream (by id) the bytes and tuples its flows put on backbone link directions; the latest time any
    # tuple reached the far end of a link it crossed (backbone or access; 0: none), where the span a report
    # observes ends when it is after the run (queues drain after the last emission)
    stream_bytes: dict[str, int] = field(default_factory=dict)
    stream_tuples: dict[str, int] = field(default_factory=dict)
    last_arrival: float = 0.0
    # per aggregate subscription, the records its subscriber computed from the input it received (detail,
    # as ``delivered``: the summary counts them; :mod:`peers.subscriber`)
    records: dict[str, dict] = field(default_factory=dict)
    # per super-peer, what its processor did (by the load bins, ``load_bin_s``)
    processors: dict[str, ProcessorTally] = field(default_factory=dict)
    # per aggregate subscription served by a record flow (docs/ACCOUNTING.md, "Records"), its records by
    # number (:class:`topologies.expected.RecordSchedule`): those that reached its thin-peer, ascending, with
    # their latencies from the window's closing (aligned), and those dropped and lost on the way
    record_delivered: dict[str, np.ndarray] = field(default_factory=dict)
    record_latencies: dict[str, np.ndarray] = field(default_factory=dict)
    record_dropped: dict[str, np.ndarray] = field(default_factory=dict)
    record_lost: dict[str, np.ndarray] = field(default_factory=dict)
    aggregated_at: dict[str, str] = field(default_factory=dict)  # and from the plan, the super-peer aggregating

    @property
    def backbone_bytes(self) -> int:
        return sum(self.link_bytes.values())

    @property
    def backbone_tuples(self) -> int:
        return sum(self.link_tuples.values())


MAX_TIMELINE_BINS = 10_000
"""Timeline bins kept per direction (about 100 cover the run, see :func:`bin_width`); the last one also
counts every later departure."""


def load_bin(duration: float) -> float:
    """The bins the peak link utilization and super-peer load are taken over: 1 s, or for a run longer
    than a few thousand seconds the round width (as :func:`bin_width`) giving about 5,000 bins."""
    return max(1.0, bin_width(duration / 50))


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

    def __init__(
        self,
        backbone: Iterable[Direction],
        subscriptions: dict[str, tuple[str, ...]],
        bin_s: float,
        super_peers: Sequence[str] = (),
        load_bin_s: float = 1.0,
        streams: Sequence[str] = (),
        processors: Sequence[str] = (),
    ):
        self.bin_s = bin_s
        self.processors = list(processors)  # the super-peers whose processor is emulated, each tallied
        self.streams = list(streams)  # numbered by position, for the backbone traffic of each
        self._stream_bytes = np.zeros(len(self.streams), np.int64)
        self._stream_tuples = np.zeros(len(self.streams), np.int64)
        self._last_arrival = np.zeros(1)
        self.load_bin_s = load_bin_s  # the bins of the offered load and the super-peers' load
        self._bytes: dict[Direction, int] = {d: 0 for d in sorted(backbone)}
        self._tuples: dict[Direction, int] = dict.fromkeys(self._bytes, 0)
        self.super_peers = list(super_peers)  # numbered by position, for the tuples landing at each
        self._directions: list[Direction] | None = None  # what :meth:`cross_runs` counts over
        self._default_attrs = dict(subscriptions)
        self._attrs: dict[str, tuple[str, ...]] = {}
        self.subscriptions = list(subscriptions)  # numbered by position, for :meth:`deliver_many`
        # (subscription numbers, indices, latencies) per call, grouped per subscription at the end
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._dropped: list[tuple[np.ndarray, np.ndarray]] = []  # (subscription numbers, indices) dropped
        self._lost: list[tuple[np.ndarray, np.ndarray]] = []  # and lost at a failure
        self._record_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # as ``_parts``, of records

    def line_of(self, directions: Sequence[Direction]) -> np.ndarray:
        """Per direction of ``directions``, its row in the backbone timelines (-1: an access link); the
        directions every call of this meter counts over, fixed by the first call (of this or
        :meth:`cross_runs`)."""
        if self._directions is None:
            self._directions = list(directions)
            n = len(self._directions)
            self._sums, self._counts, self._drops = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
            self._losses = np.zeros(n, np.int64)
            row = {d: k for k, d in enumerate(self._bytes)}
            self._row = np.array([row.get(d, -1) for d in self._directions], np.int64)
            number = {p: k for k, p in enumerate(self.super_peers)}
            # a direction (n, n) is super-peer n's processor (network/queues.py, "Processors"): no link, and
            # what it passes on lands nowhere
            self._processor = np.array(
                [number.get(d[0], -1) if d[0] == d[1] else -1 for d in self._directions], np.int64
            )
            self._end = np.array([-1 if d[0] == d[1] else number.get(d[1], -1) for d in self._directions], np.int64)
            n_sp = len(self.super_peers)
            self._ops, self._jobs = np.zeros(n_sp, np.int64), np.zeros(n_sp, np.int64)
            self._delay = np.zeros((n_sp, 2), np.int64)  # ticks as (high, low 32 bits): exact, in any order
            self._cpu_offered = np.zeros((n_sp, 0), np.int64)
            self._cpu_dropped = np.zeros(n_sp, np.int64)
            self._timeline = np.zeros((len(self._bytes), 0))
            self._offered = np.zeros((len(self._bytes), 0))
            self._landed = np.zeros((len(self.super_peers), 0), np.int64)
        elif self._directions != list(directions):
            raise ValueError("one meter counts over one list of link directions")
        return self._row

    def cross_runs(
        self,
        directions: Sequence[Direction],
        link: np.ndarray,
        first: np.ndarray,
        count: np.ndarray,
        first_wire: np.ndarray,
        wire_bytes: np.ndarray,
        departures: np.ndarray,
        latency: np.ndarray | None = None,
        arrivals: np.ndarray | None = None,
        streams: np.ndarray | None = None,
    ) -> None:
        """Runs of tuples at once: run ``r``'s ``count[r]`` tuples reached ``directions[link[r]]``,
        finishing at ``departures[first[r]:]`` (ticks, :data:`~network.linkrule.TICKS` per second; negative:
        not counted here, dropped or lost or counted in another window), of ``wire_bytes[first_wire[r]:]``
        bytes.  With ``latency`` (per direction), each tuple landing at a super-peer ``latency`` after its
        departure is counted there too (the super-peers' load), and the latest landing anywhere is kept;
        with ``arrivals`` (aligned with ``departures``, ticks; negative: never reached the link), each tuple reaching a
        backbone direction's queue is counted in its offered load, dropped there or not; with ``streams``
        (per run, a position in the meter's ``streams``), backbone traffic is summed per stream too."""
        self.line_of(directions)
        if not len(link):
            return
        # a link that never drains (a tiny bandwidth) would grow the timeline without bound: what departs
        # after MAX_TIMELINE_BINS bins is counted in the last one
        lands = self._end if latency is not None else np.full(len(self._directions), -1, np.int64)
        latency = np.zeros(len(self._directions)) if latency is None else latency
        streams = np.full(len(link), -1, np.int64) if streams is None else streams
        last, last_landed = _last_bins(
            link, first, count, departures, self._row, lands, latency, self.bin_s, self.load_bin_s, MAX_TIMELINE_BINS
        )
        self._timeline = _widened(self._timeline, last + 1)
        self._landed = _widened(self._landed, last_landed + 1)
        _accumulate(
            link,
            first,
            count,
            first_wire,
            wire_bytes,
            departures,
            self._row,
            lands,
            latency,
            self.bin_s,
            self.load_bin_s,
            MAX_TIMELINE_BINS,
            self._sums,
            self._counts,
            self._timeline,
            self._landed,
            streams,
            self._stream_bytes,
            self._stream_tuples,
            self._last_arrival,
        )
        if arrivals is not None:
            last = _last_offered(link, first, count, arrivals, self._row, self.load_bin_s, MAX_TIMELINE_BINS)
            self._offered = _widened(self._offered, last + 1)
            _offer_runs(
                link,
                first,
                count,
                first_wire,
                wire_bytes,
                arrivals,
                self._row,
                self.load_bin_s,
                MAX_TIMELINE_BINS,
                self._offered,
            )

    def processed_runs(
        self,
        directions: Sequence[Direction],
        link: np.ndarray,
        first: np.ndarray,
        count: np.ndarray,
        first_work: np.ndarray,
        work: np.ndarray,
        departures: np.ndarray,
        arrivals: np.ndarray,
    ) -> None:
        """The runs of :meth:`cross_runs` again (``work[first_work[r]:]``: each tuple's operations), for
        the processors among their directions: the operations served and offered per load bin, and the time
        each tuple with work spent there."""
        self.line_of(directions)
        if not len(link) or not (self._processor >= 0).any():
            return
        last = _last_offered(link, first, count, arrivals, self._processor, self.load_bin_s, MAX_TIMELINE_BINS)
        self._cpu_offered = _widened(self._cpu_offered, last + 1)
        _process_runs(
            link, first, count, first_work, work, departures, arrivals, self._processor, self.load_bin_s,
            MAX_TIMELINE_BINS, self._ops, self._delay, self._jobs, self._cpu_offered,
        )  # fmt: skip

    def passed(self, directions: Sequence[Direction], node: int, arrivals: np.ndarray, work: np.ndarray) -> None:
        """Tuples reached the unlimited processor of super-peer ``node`` (a position in ``super_peers``) at
        ``arrivals`` (ticks), each of ``work`` operations: it ran them at once."""
        self.line_of(directions)
        tally = ProcessorTally.of_jobs(arrivals, arrivals, work, 0, self.load_bin_s)
        self._cpu_offered = _widened(self._cpu_offered, len(tally.offered))
        self._cpu_offered[node, : len(tally.offered)] += tally.offered
        self._ops[node] += tally.ops
        self._jobs[node] += tally.jobs

    def dropped_at(self, drops: np.ndarray) -> None:
        """``drops[k]`` tuples were dropped at the tail of direction ``k`` (of the :meth:`line_of` list)."""
        self._drops += drops
        at = self._processor >= 0
        np.add.at(self._cpu_dropped, self._processor[at], drops[at])

    def lost_at(self, losses: np.ndarray) -> None:
        """``losses[k]`` tuples were lost at a failure of direction ``k`` (of the :meth:`line_of` list)."""
        self._losses += losses

    def deliver_many(self, numbers: np.ndarray, counts: np.ndarray, indices: np.ndarray, latencies: np.ndarray) -> None:
        """Subscription ``subscriptions[numbers[k]]`` received the next ``counts[k]`` of ``indices``, after
        ``latencies`` seconds (NaN: the copy was dropped on the way; ``-inf``: lost at a failure).  Copies of
        one tuple to one subscription keep the order of the calls, and within a call the order of
        ``numbers``."""
        self._parts.append((np.repeat(numbers.astype(np.int32), counts), indices, latencies))

    def deliver_records(
        self, numbers: np.ndarray, counts: np.ndarray, records: np.ndarray, latencies: np.ndarray
    ) -> None:
        """As :meth:`deliver_many`, for records (by their numbers) reaching a subscription's thin-peer."""
        self._record_parts.append((np.repeat(numbers.astype(np.int32), counts), records, latencies))

    def record_deliveries(self) -> dict[str, tuple[np.ndarray, ...]]:
        """Per subscription delivered records so far: its records delivered (ascending), their latencies,
        and those dropped and lost on the way; the meter forgets them."""
        parts, self._record_parts = self._record_parts, []
        if not parts:
            return {}
        owner = np.concatenate([p[0] for p in parts])
        numbers = np.concatenate([p[1] for p in parts]).astype(np.int64)
        times = np.concatenate([p[2] for p in parts])
        order = np.lexsort((numbers, owner))
        owner, numbers, times = owner[order], numbers[order], times[order]
        found = {}
        for k in np.unique(owner).tolist():
            mine = owner == k
            n, t = numbers[mine], times[mine]
            came = t > -np.inf
            found[self.subscriptions[k]] = (n[came], t[came], n[np.isnan(t)], n[t == -np.inf])
        return found

    def received_attrs(self, subscription: str, attrs: tuple[str, ...]) -> None:
        """What ``subscription``'s deliveries carry (the first call per subscription counts)."""
        self._attrs.setdefault(subscription, attrs)

    @property
    def received(self) -> dict[str, tuple[str, ...]]:
        """The attributes of each subscription delivered to so far (by :meth:`received_attrs`)."""
        return dict(self._attrs)

    def deliveries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every delivered copy so far as flat arrays ``(subscription number, tuple index, latency)``, by
        subscription, then tuple index (copies of a tuple in the order they came); the copies dropped or lost
        on the way are kept for :meth:`dropped_copies` and :meth:`lost_copies` instead.  The meter forgets
        them."""
        parts, self._parts = self._parts, []
        owner = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        indices = np.concatenate([p[1] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
        times = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
        del parts
        missed = ~(times > -np.inf)  # NaN (dropped) or -inf (lost)
        if missed.any():
            dropped = np.isnan(times[missed])
            self._dropped.append((owner[missed][dropped], indices[missed][dropped]))
            self._lost.append((owner[missed][~dropped], indices[missed][~dropped]))
            owner, indices, times = owner[~missed], indices[~missed], times[~missed]
        order = np.lexsort((indices, owner))
        return owner[order], indices[order], times[order]

    def dropped_copies(self) -> tuple[np.ndarray, np.ndarray]:
        """The copies dropped on the way, of the deliveries :meth:`deliveries` has returned so far, as flat
        arrays ``(subscription number, tuple index)`` by subscription, then index; the meter forgets them."""
        parts, self._dropped = self._dropped, []
        return _by_owner(parts)

    def lost_copies(self) -> tuple[np.ndarray, np.ndarray]:
        """The copies lost at a failure on the way, as :meth:`dropped_copies` gives the dropped ones."""
        parts, self._lost = self._lost, []
        return _by_owner(parts)

    def result(self, strategy: str, engine: str) -> StrategyRun:
        """The run so far: its traffic and every copy, not yet checked (no ``summary``: the engine adds it,
        :func:`network.exactness.checked`).  The meter forgets the copies."""
        owner, indices, times = self.deliveries()
        cuts = np.searchsorted(owner, np.arange(len(self.subscriptions) + 1))
        delivered, latencies = {}, {}
        for k, sub in enumerate(self.subscriptions):
            delivered[sub] = indices[cuts[k] : cuts[k + 1]].copy()
            latencies[sub] = times[cuts[k] : cuts[k + 1]].copy()
        del owner, indices, times
        owner, indices = self.dropped_copies()
        cuts = np.searchsorted(owner, np.arange(len(self.subscriptions) + 1))
        dropped = {sub: indices[cuts[k] : cuts[k + 1]].copy() for k, sub in enumerate(self.subscriptions)}
        owner, indices = self.lost_copies()
        cuts = np.searchsorted(owner, np.arange(len(self.subscriptions) + 1))
        lost = {sub: indices[cuts[k] : cuts[k + 1]].copy() for k, sub in enumerate(self.subscriptions)}
        records = self.record_deliveries()
        link_bytes, link_tuples = dict(self._bytes), dict(self._tuples)
        link_dropped = dict.fromkeys(self._bytes, 0)
        link_lost = dict.fromkeys(self._bytes, 0)
        access: dict[Direction, int] = {}
        access_tuples: dict[Direction, int] = {}
        timeline, offered, landed = {}, {}, {}
        processors: dict[str, ProcessorTally] = {}
        if self._directions is not None:
            for k in np.flatnonzero(self._counts).tolist():
                d = self._directions[k]
                if self._row[k] >= 0:
                    link_bytes[d], link_tuples[d] = int(self._sums[k]), int(self._counts[k])
                elif self._processor[k] < 0:
                    access[d], access_tuples[d] = int(self._sums[k]), int(self._counts[k])
            for k in np.flatnonzero(self._drops).tolist():
                if self._processor[k] < 0:
                    link_dropped[self._directions[k]] = int(self._drops[k])
            number = {p: k for k, p in enumerate(self.super_peers)}
            for sp in self.processors:
                p = number[sp]
                processors[sp] = ProcessorTally(
                    int(self._ops[p]), self._cpu_offered[p].copy(),
                    (int(self._delay[p, 0]) << 32) + int(self._delay[p, 1]), int(self._jobs[p]),
                    int(self._cpu_dropped[p]),
                )  # fmt: skip
            for k in np.flatnonzero(self._losses).tolist():
                if self._row[k] >= 0:  # a backbone direction (an access link is down with its super-peer)
                    link_lost[self._directions[k]] = int(self._losses[k])
            if self._timeline.shape[1]:
                rounded = np.rint(self._timeline).astype(np.int64)
                timeline = {d: rounded[k] for k, d in enumerate(self._bytes)}
            if self._offered.shape[1]:
                rounded = np.rint(self._offered).astype(np.int64)
                offered = {d: rounded[k] for k, d in enumerate(self._bytes)}
            if self._landed.shape[1]:
                landed = {p: self._landed[k] for k, p in enumerate(self.super_peers)}
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
            load_bin_s=self.load_bin_s,
            access_link_tuples=dict(sorted(access_tuples.items())),
            link_dropped=link_dropped,
            offered=offered,
            landed=landed,
            dropped=dropped,
            link_lost=link_lost,
            lost=lost,
            stream_bytes=dict(zip(self.streams, self._stream_bytes.tolist(), strict=True)),
            stream_tuples=dict(zip(self.streams, self._stream_tuples.tolist(), strict=True)),
            last_arrival=float(self._last_arrival[0]),
            processors=processors,
            record_delivered={sub: r[0] for sub, r in records.items()},
            record_latencies={sub: r[1] for sub, r in records.items()},
            record_dropped={sub: r[2] for sub, r in records.items()},
            record_lost={sub: r[3] for sub, r in records.items()},
        )


def _by_owner(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Parts of ``(subscription numbers, indices)`` as two flat arrays, by subscription, then index."""
    owner = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    indices = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    order = np.lexsort((indices, owner))
    return owner[order], indices[order]


def _widened(matrix: np.ndarray, columns: int) -> np.ndarray:
    """``matrix`` with at least ``columns`` columns (new ones zero)."""
    if columns <= matrix.shape[1]:
        return matrix
    grown = np.zeros((matrix.shape[0], columns), matrix.dtype)
    grown[:, : matrix.shape[1]] = matrix
    return grown


@njit(cache=True)
def _last_offered(link, first, count, arrivals, row, bin_s, max_bins):
    """The last bin any tuple reaches a backbone direction's queue in (-1: none).  A run's arrivals ascend
    (its tuples in index order, FIFO at the link before), those that never got there (negative) aside, so
    only its last one that did is looked at."""
    last = -1
    for r in range(len(link)):
        if row[link[r]] < 0:
            continue
        i = first[r] + count[r] - 1
        while i >= first[r] and arrivals[i] < 0:
            i -= 1
        if i >= first[r]:
            last = max(last, _bin(arrivals[i] / TICKS, bin_s, max_bins))
    return last


@njit(cache=True)
def _offer_runs(link, first, count, first_wire, wire, arrivals, row, bin_s, max_bins, offered):
    """Add the bytes of every tuple reaching a backbone direction's queue to its bin of ``offered``.  A
    run's arrivals ascend, so its bytes are summed per bin first, and a tuple's bin is computed only when
    it reaches the current bin's end (:func:`_bin_end`)."""
    for r in range(len(link)):
        line = row[link[r]]
        if line < 0:
            continue
        current, end, in_bin = -1, np.int64(-1), 0.0
        for i in range(count[r]):
            a = arrivals[first[r] + i]
            if a < 0:
                continue
            if a >= end:
                if current >= 0:
                    offered[line, current] += in_bin
                current, in_bin = _tick_bin(a, 0.0, bin_s, max_bins), 0.0
                if current >= offered.shape[1]:
                    raise IndexError("a run's arrivals do not ascend")
                end = _bin_end(current, 0.0, bin_s, max_bins)
            in_bin += wire[first_wire[r] + i]
        if current >= 0:
            offered[line, current] += in_bin


@njit(cache=True)
def _tick_bins(ticks, bin_s, max_bins):
    out = np.empty(len(ticks), np.int64)
    for i in range(len(ticks)):
        out[i] = _tick_bin(ticks[i], 0.0, bin_s, max_bins)
    return out


@njit(cache=True)
def _process_runs(link, first, count, first_work, work, departures, arrivals, processor, bin_s, max_bins, ops, delay,
                  jobs, offered):  # fmt: skip
    """Add, per processor, the operations of each tuple reaching its queue to its bin of ``offered``, those
    of each tuple it served to ``ops``, and each served tuple with work's time there to ``delay`` (ticks,
    high and low 32 bits apart: exact whatever the order) and ``jobs``."""
    for r in range(len(link)):
        p = processor[link[r]]
        if p < 0:
            continue
        for i in range(count[r]):
            a, d, w = arrivals[first[r] + i], departures[first[r] + i], work[first_work[r] + i]
            if a < 0:
                continue
            offered[p, _tick_bin(a, 0.0, bin_s, max_bins)] += w
            if d < 0:
                continue
            ops[p] += w
            if w > 0:
                spent = d - a
                delay[p, 0] += spent >> 32
                delay[p, 1] += spent & 0xFFFFFFFF
                jobs[p] += 1


@njit(cache=True, inline="always")
def _tick_bin(t, offset, bin_s, max_bins):
    """The bin of tick ``t`` (:data:`~network.linkrule.TICKS` per second) plus ``offset`` seconds, computed
    as from seconds (:func:`_bin`), so that a tick's bin is the one its time in seconds has."""
    return _bin(t / TICKS + offset, bin_s, max_bins)


@njit(cache=True)
def _bin_end(b, offset, bin_s, max_bins):
    """The first tick whose bin (:func:`_tick_bin` with ``offset``) is past ``b`` (the ticks' bins never
    descend: float division and addition are monotone), found around its estimate by doubling steps,
    then halving; a run's later ticks are then compared with it, not divided."""
    if b >= max_bins - 1:
        return NEVER
    guess = ((b + 1) * bin_s - offset) * TICKS
    if guess >= 2.0**62:  # past every tick a copy may have (network.linkrule.LATE)
        return NEVER
    g = np.int64(max(guess, 0.0))
    step = np.int64(1)
    if _tick_bin(g, offset, bin_s, max_bins) > b:
        hi, lo = g, g - 1
        while lo >= 0 and _tick_bin(lo, offset, bin_s, max_bins) > b:
            hi = lo
            step *= 2
            lo = max(hi - step, np.int64(-1))
    else:
        lo, hi = g, g + 1
        while _tick_bin(hi, offset, bin_s, max_bins) <= b:
            if hi >= 2**62:
                return NEVER
            lo = hi
            step *= 2
            hi = min(lo + step, np.int64(2**62))
    while hi - lo > 1:  # lo's bin is b or before (or lo is -1), hi's past it
        mid = lo + (hi - lo) // 2
        if _tick_bin(mid, offset, bin_s, max_bins) > b:
            hi = mid
        else:
            lo = mid
    return hi


@njit(cache=True)
def _bin(departure, bin_s, max_bins):
    return int(min(np.floor(departure / bin_s), max_bins - 1))


@njit(cache=True)
def _last_bins(link, first, count, departures, row, lands, latency, bin_s, load_bin_s, max_bins):
    """The last timeline bin any backbone departure falls in, and the last any landing at a super-peer
    does (-1: none).  A run's departures ascend (one channel served FIFO at one link), those not counted
    (negative) aside, so only its last counted one is looked at."""
    last = last_landed = -1
    for r in range(len(link)):
        k = link[r]
        if (row[k] < 0 and lands[k] < 0) or count[r] == 0:
            continue
        i = first[r] + count[r] - 1
        while i >= first[r] and departures[i] < 0:
            i -= 1
        if i < first[r]:
            continue
        if row[k] >= 0:
            last = max(last, _bin(departures[i] / TICKS, bin_s, max_bins))
        if lands[k] >= 0:
            last_landed = max(last_landed, _bin(departures[i] / TICKS + latency[k], load_bin_s, max_bins))
    return last, last_landed


@njit(cache=True)
def _accumulate(
    link,
    first,
    count,
    first_wire,
    wire,
    departures,
    row,
    lands,
    latency,
    bin_s,
    load_bin_s,
    max_bins,
    sums,
    counts,
    timeline,
    landed,
    streams,
    stream_sums,
    stream_counts,
    last_arrival,
):
    """Add the runs to the per-direction sums, the timeline, the super-peers' landings, and a backbone
    run's to its stream's sums (``streams[r] >= 0``); keep the latest landing in ``last_arrival[0]``.  A
    run's departures ascend, so its bytes are summed per bin before they are added to the timeline (whole
    numbers: the float sums are exact), and its last departure lands last; a departure that is negative
    (dropped, lost, or counted in another window) is not counted."""
    for r in range(len(link)):
        k = link[r]
        w = first_wire[r]
        line, end = row[k], lands[k]
        total = 0
        crossed = 0
        current, current_end = -1, np.int64(-1)  # the bin at hand and the first tick past it
        in_bin = 0
        landing = -1  # the bin the run's tuples land in at the far end, and how many so far (they ascend)
        landing_end = np.int64(-1)
        landing_count = 0
        for i in range(count[r]):
            t = departures[first[r] + i]
            if t < 0:
                continue
            size = wire[w + i]
            total += size
            crossed += 1
            if end >= 0:
                if t >= landing_end:
                    if landing >= 0:
                        landed[end, landing] += landing_count
                    landing, landing_count = _tick_bin(t, latency[k], load_bin_s, max_bins), 0
                    landing_end = _bin_end(landing, latency[k], load_bin_s, max_bins)
                landing_count += 1
            if line < 0:
                continue
            if t >= current_end:
                b = _tick_bin(t, 0.0, bin_s, max_bins)
                if b >= timeline.shape[1]:
                    raise IndexError("a run's departures do not ascend")
                if current >= 0:
                    timeline[line, current] += in_bin
                current, in_bin = b, 0
                current_end = _bin_end(b, 0.0, bin_s, max_bins)
            in_bin += size
        if current >= 0:
            timeline[line, current] += in_bin
        if landing >= 0:
            landed[end, landing] += landing_count
        sums[k] += total
        counts[k] += crossed
        if line >= 0 and streams[r] >= 0:
            stream_sums[streams[r]] += total
            stream_counts[streams[r]] += crossed
        if crossed:
            i = first[r] + count[r] - 1
            while departures[i] < 0:
                i -= 1
            last_arrival[0] = max(last_arrival[0], departures[i] / TICKS + latency[k])
