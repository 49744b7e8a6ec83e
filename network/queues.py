"""The FIFO link queues of a whole run, solved window by window and link direction by link direction.

The simulator's model (docs/ACCOUNTING.md, "The link model"): each link direction serves its copies first
in, first out, by the link rule (network/linkrule.py), in integer ticks.  Copies reaching one queue on the
same tick are served by channel number, then tuple index.  Time is cut into windows of emission time; a
window is a unit of work, never of semantics: the results are the same whatever the windows.

**Dependency order.**  A tuple's arrival at a link is its departure from the link before on its path (plus
that link's latency), so links are solved in an order where every link comes after the links feeding it:
the *dependency graph* has an edge ``a -> b`` when some channel crosses ``b`` right after ``a`` (along its
route, or at the node where it is read from its parent).  The graph is built once for the run from the
channels' routes, and a window is solved group by group in one compiled pass (:func:`solve_window`): a
group is one link direction (its channels' arrivals merged, then one FIFO pass), or the links of a cycle.

**Cycles.**  Streams from different sources sharing links around a ring make the graph cyclic: a copy
crossing one link of a strongly connected component may come back to another.  Such a component's links
form one group, solved event by event: every copy whose arrival is known waits in one heap keyed (arrival,
channel, tuple), the earliest is served at its link, and its departure makes the arrivals that follow from
it known.  So each link of the cycle serves its copies in the order of their arrivals, exactly as a link
outside any cycle does.

**Horizon.**  A window's tuples are emitted before its end, and so are all tuples before them; a later
window's tuples are emitted from its end on, and reach a link no earlier than that end plus the least time
from an emission to that link (:func:`_ahead`: the latencies along the shortest way there in the dependency
graph; a copy leaves a link no earlier than it arrived).  So at each link a window serves the copies
arriving before that time (the link's *horizon*) and holds back the rest (:data:`DEFER`), with everything
downstream of them (a copy held back at one link reaches the next no earlier than the next one's horizon,
whose shortest way is at most through the first).  They are served in the next window, in arrival order
among its own copies (:class:`Pending`, carried from window to window in
:class:`~network.buffers.QueueState`), each channel's first (the timetable leaves places for them at the
start of its blocks, :meth:`Queues.reserve`, so the window's tuples are not copied around them).  The last
window of the run holds back nothing.  Every link thus serves every copy in the order of arrival over the
whole run, whatever the windows.

**Buffers.**  A link direction with a finite buffer drops at the tail (the link rule; the copies waiting
are kept in the direction's *ring*, by start time).  A dropped copy's row departs at :data:`NONE`, and so
does every row after it (its next hops, what reads it further on).  Rings carry over from window to window
(:class:`~network.buffers.QueueState`).

**Failures** (docs/DYNAMICS.md).  A link direction may be down over intervals ``[fail, recover)``; the link
rule loses a copy reaching the queue while the direction is down, or queued, on the wire or on its way at
a failure, and the failure empties the queue.  A lost copy's row departs at :data:`NONE` like a dropped
one, and so does every row after it; a flag per row tells lost from dropped for the deliveries.  Arrivals
ascend at each link, so one cursor walks its intervals; a link never down costs one comparison per tuple.

**Processors** (docs/ACCOUNTING.md, "Super-peer CPU").  A super-peer's limited processor (one with a cpu or
an input buffer) is one more FIFO server, the direction ``(n, n)``: the tuples reaching the operators at
``n`` queue there first in, first out, and a copy is served for its ``work`` (operations, per entry of
:class:`Blocks`) at the processor's operations per second, where a link serves a copy for its bytes at its
bandwidth.  Everything else is a link's: the
input buffer holds bytes (tail drop), the processor is down while its super-peer is, and it has no
latency.  The timetable routes what the operators at ``n`` read through it (peers/timetable.py).  An
unlimited processor is a channel without hops: it delays nothing, and the queues tell the meter the work of
each tuple reaching it, at the time it reaches its super-peer.

The same segments (a channel at one hop: link, group, its tuples' arrivals) are what a distributed engine
partitions by link direction: the solve of one group needs only the departures of the groups before it.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from numba import njit

from network.buffers import NEVER, QueueState
from network.linkrule import (
    CARRIED,
    DROPPED,
    FULL,
    NONE,
    TICKS,
    cross,
    down_at,
    processing,
    service,
    to_ticks,
)
from network.meter import Direction, TrafficMeter
from topologies.errors import EmulatorError


@dataclass(frozen=True)
class Route:
    """A channel as the queues see it: the link directions it crosses, and where its tuples come from
    (``parent == -1``: emitted at the first node; else read at position ``tap`` of channel ``parent``'s
    route).  ``sink`` is the subscription receiving it at the end (``attrs``: what it receives)."""

    hops: tuple[Direction, ...]
    parent: int
    tap: int
    sink: str | None = None
    attrs: tuple[str, ...] = ()
    stream: str | None = None  # whose tuples it carries (the meter sums backbone traffic per stream)
    processor: str | None = None  # the super-peer whose processor it is (module docstring, "Processors")
    records: bool = False  # it carries records (docs/ACCOUNTING.md, "Records"): a sink receives records


@dataclass(frozen=True)
class Blocks:
    """Every channel's tuples in one window: channel ``c`` holds entries ``first[c] .. first[c] +
    count[c] - 1`` (``first[c] == -1``: none) of the flat arrays, tuple indices ascending; ``parents`` are
    positions within the parent channel's run (-1 for an upload).  ``work`` gives per entry the operations
    it costs the processor it queues at (a channel crossing a super-peer's processor, module docstring,
    "Processors"; None: no entry costs any)."""

    indices: np.ndarray
    emitted: np.ndarray
    parents: np.ndarray
    wire: np.ndarray
    first: np.ndarray
    count: np.ndarray
    work: np.ndarray | None = None

    def costs(self) -> np.ndarray:
        """``work``, zeros when None."""
        return np.zeros(len(self.indices), np.int64) if self.work is None else self.work


DEFER = np.int64(-3)  # a row held back to the next window: its arrival is at or past the window's horizon
_NO_WORK = np.zeros(0, np.int64)  # the work of a window without processors: none is read


@dataclass(frozen=True)
class Pending:
    """The copies in flight at a window's horizon (module docstring, "Horizon"): the tuples (as
    :class:`Blocks`, each channel's in index order) with a row held back, and their ancestors along the
    channels they are read off; per row of their layout the departure found so far (:data:`DEFER`: held
    back, solved in the next window) and whether it was lost."""

    blocks: Blocks
    departures: np.ndarray
    lost: np.ndarray

    def same(self, other: Pending | None) -> bool:
        """Whether both hold the same copies with the same departures."""
        if other is None:
            return False
        a, b = self.blocks, other.blocks
        return all(
            np.array_equal(x, y)
            for x, y in (
                (a.first, b.first), (a.count, b.count), (a.indices, b.indices), (a.emitted, b.emitted),
                (a.parents, b.parents), (a.wire, b.wire), (a.costs(), b.costs()),
                (self.departures, other.departures), (self.lost, other.lost),
            )
        )  # fmt: skip


def _row_bases(count, hops):
    """Per channel, where its rows start in a window's layout (-1: no tuples)."""
    sizes = count * hops
    bases = np.cumsum(sizes) - sizes
    return np.where(count > 0, bases, -1)


@njit(cache=True)
def _put(p_first, p_count, p_indices, p_emitted, p_parents, p_wire, p_work, first, indices, emitted, parents, wire,
         work):  # fmt: skip
    """The pending copies (``p_``) into the places a window's blocks left for them at each channel's start
    (their parents are already numbered among the parent channel's pending ones, which come first)."""
    for c in range(len(p_count)):
        for j in range(p_count[c]):
            e, q = p_first[c] + j, first[c] + j
            indices[q], emitted[q], parents[q], wire[q] = p_indices[e], p_emitted[e], p_parents[e], p_wire[e]
            if len(work):
                work[q] = p_work[e]


@njit(cache=True, inline="always")
def _earlier(window, c, h, j):
    """Where the row of channel ``c``'s ``j``-th tuple at hop ``h`` was solved in an earlier window: its
    place in ``window.pending_departures``, or -1 (this window solves it)."""
    held = window.pending_count[c]
    if j >= held:
        return -1
    at = window.pending_base[c] + h * held + j
    return -1 if window.pending_departures[at] == DEFER else at


@njit(cache=True)
def _uncount_earlier(departures, window, seg, hop_start):
    """Mark the rows an earlier window solved (and counted) as not counted in this one (:data:`NONE`), once
    what is held back has been read off them: the rows of the copies held back before that this window did
    not solve."""
    for c in range(len(window.pending_count)):
        held, n = window.pending_count[c], window.count[c]
        for h in range(hop_start[c + 1] - hop_start[c] if held else 0):
            for j in range(held):
                if _earlier(window, c, h, j) >= 0:
                    departures[seg.row_base[c] + h * n + j] = NONE


@njit(cache=True)
def _deferred(departures):
    """The rows held back (:data:`DEFER`: at the horizon, or read off a copy held back), ascending."""
    n = 0
    for i in range(len(departures)):
        n += departures[i] == DEFER
    rows = np.empty(n, np.int64)
    k = 0
    for i in range(len(departures)):
        if departures[i] == DEFER:
            rows[k] = i
            k += 1
    return rows


@njit(cache=True)
def _carried(held_rows, first, count, parents, hop_start, ch_parent, row_base, waiting, waiting_low):
    """Per tuple of a solved window, whether it stays in flight: a row of it held back (``held_rows``), it
    is ``waiting`` (a tuple of a channel without hops that its super-peer has not received yet), or a tuple
    read off it stays (channels are numbered parents first, so one backward pass over the channels closes
    over ancestors; ``waiting_low``: per channel its first waiting position, ``count`` for none); and per
    channel the lowest position kept (``count``: none).  Only the kept tuples' channels, from their lowest
    kept position on, are walked: a window holds back few."""
    keep = waiting.copy()
    low = waiting_low.copy()
    present = np.flatnonzero(count > 0)
    bases = row_base[present]
    for row in held_rows:
        c = present[np.searchsorted(bases, row, side="right") - 1]
        j = (row - row_base[c]) % count[c]
        keep[first[c] + j] = True
        low[c] = min(low[c], j)
    for c in range(len(count) - 1, -1, -1):
        p = ch_parent[c]
        if p < 0 or low[c] == count[c]:
            continue
        for j in range(low[c], count[c]):
            if keep[first[c] + j]:
                keep[first[p] + parents[first[c] + j]] = True
                low[p] = min(low[p], parents[first[c] + j])
    return keep, low


@njit(cache=True)
def _kept(keep, low, first, count, parents, hop_start, ch_parent, row_base, departures, lost):
    """The tuples ``keep`` marks (none of channel ``c`` before position ``low[c]``), as the arrays of a
    :class:`Pending`: per channel in index order, parents renumbered among the kept ones, and their rows'
    departures and lost flags."""
    n_ch = len(count)
    # per tuple from its channel's lowest kept one on, its place among the kept (at ``at[c] + j - low[c]``)
    at = np.zeros(n_ch, np.int64)
    span = 0
    for c in range(n_ch):
        at[c] = span
        span += count[c] - low[c]
    position = np.full(span, -1, np.int64)
    k_count = np.zeros(n_ch, np.int64)
    k_first = np.full(n_ch, -1, np.int64)
    total = 0
    rows = 0
    for c in range(n_ch):
        for j in range(low[c], count[c]):
            if keep[first[c] + j]:
                position[at[c] + j - low[c]] = k_count[c]
                k_count[c] += 1
        if k_count[c] > 0:
            k_first[c] = total
            total += k_count[c]
            rows += k_count[c] * (hop_start[c + 1] - hop_start[c])
    take = np.empty(total, np.int64)
    k_parents = np.empty(total, np.int64)
    k_departures = np.empty(rows, np.int64)
    k_lost = np.zeros(rows if len(lost) > 0 else 0, np.bool_)
    base = 0
    for c in range(n_ch):
        kc = k_count[c]
        if kc == 0:
            continue
        hops = hop_start[c + 1] - hop_start[c]
        n = count[c]
        for j in range(low[c], n):
            e = first[c] + j
            if not keep[e]:
                continue
            q = position[at[c] + j - low[c]]
            take[k_first[c] + q] = e
            p = ch_parent[c]
            k_parents[k_first[c] + q] = position[at[p] + parents[e] - low[p]] if parents[e] >= 0 else -1
            for h in range(hops):
                k_departures[base + h * kc + q] = departures[row_base[c] + h * n + j]
                if len(lost) > 0:
                    k_lost[base + h * kc + q] = lost[row_base[c] + h * n + j]
        base += kc * hops
    return k_first, k_count, take, k_parents, k_departures, k_lost


class Queues:
    """Every link direction's FIFO over the run, for the channels ``routes`` (numbered by position, each
    parent before its children); :meth:`serve` solves one window and records it in ``meter``.

    ``links`` maps every direction a channel may cross (backbone and access) to (bandwidth bit/s, latency s)
    or (bandwidth, latency, buffer bytes: ``inf`` for none); a direction ``(n, n)`` is super-peer ``n``'s
    processor, mapped to (operations per second, 0, input buffer bytes).  ``smallest`` is the fewest bytes a tuple
    weighs on the wire (it bounds the tuples a buffer holds).  ``down`` gives the directions that fail,
    each with its down intervals ``[fail, recover)``, disjoint and ascending (``inf``: never recovered).
    Raises EmulatorError naming the direction when a channel crosses one that is not a link.
    """

    def __init__(
        self,
        links: Mapping[Direction, tuple[float, ...]],
        routes: Sequence[Route],
        meter: TrafficMeter,
        smallest: int = 8,
        down: Mapping[Direction, Sequence[tuple[float, float]]] | None = None,
    ):
        self.directions = sorted(links)
        ids = {d: i for i, d in enumerate(self.directions)}
        spans = [list((down or {}).get(d, ())) for d in self.directions]
        self.failures = any(spans)
        latency = np.array([links[d][1] for d in self.directions], dtype=np.float64)
        buffer = np.array([(*links[d], np.inf)[2] for d in self.directions], dtype=np.float64)
        self.latency = latency  # seconds, for the meter
        buffered = np.flatnonzero(np.isfinite(buffer))
        ring_of = np.full(len(self.directions), -1, np.int64)
        ring_of[buffered] = np.arange(len(buffered))
        self.links = Links(
            np.array([links[d][0] for d in self.directions], dtype=np.float64),
            to_ticks(latency),
            np.array([int(b) if np.isfinite(b) else NEVER for b in buffer], dtype=np.int64),
            ring_of,
            np.cumsum([0] + [len(s) for s in spans]).astype(np.int64),
            to_ticks(np.array([f for s in spans for f, _ in s], dtype=np.float64)),
            to_ticks(np.array([r for s in spans for _, r in s], dtype=np.float64)),
            np.zeros(len(self.directions), np.int64),  # set below, once the dependency graph is known
            np.array([links[d][0] if d[0] == d[1] else -1.0 for d in self.directions], dtype=np.float64),
        )
        # a ring holds the tuples admitted but not yet on the wire: at most buffer / smallest of them, and
        # it grows to that only when they come (serve widens the rings when one is full)
        bound = int(np.floor(buffer[buffered].max() / max(1, smallest))) + 1 if len(buffered) else 1
        self.ring_size = min(bound, 64)
        self.meter = meter
        self.routes = list(routes)
        self.busy = np.zeros(len(self.directions), np.int64)
        n = len(self.routes)
        # plain lists while building: indexing numpy arrays one scalar at a time costs more than the work
        hop_start = [0]
        hop_link: list[int] = []
        inbound = [-1] * n  # the link a channel's tuples reach its first node over
        edges: set[tuple[int, int]] = set()
        for c, route in enumerate(self.routes):
            try:
                links_c = [ids[d] for d in route.hops]
            except KeyError as err:
                a, b = err.args[0]
                raise EmulatorError(f"a channel crosses {a} -> {b}, which is not a link") from None
            if route.parent >= 0:
                p = route.parent
                inbound[c] = hop_link[hop_start[p] + route.tap - 1] if route.tap >= 1 else inbound[p]
            previous = inbound[c]
            for b in links_c:
                if previous >= 0:
                    edges.add((previous, b))
                previous = b
            hop_link.extend(links_c)
            hop_start.append(len(hop_link))
        self.hop_start = np.array(hop_start, dtype=np.int64)
        self.hop_link = np.array(hop_link, dtype=np.int64)
        entered = {hop_link[hop_start[c]] for c in range(n) if inbound[c] < 0 and hop_start[c] < hop_start[c + 1]}
        self.links.ahead[:] = _ahead(len(self.directions), entered, edges, self.links.latency)
        group, cyclic = serving_groups(len(self.directions), edges)
        self.layout = Layout(
            self.hop_start,
            self.hop_link,
            np.array([r.parent for r in self.routes], dtype=np.int64),
            np.array([r.tap for r in self.routes], dtype=np.int64),
            group,
            cyclic,
        )
        number = {s: k for k, s in enumerate(meter.subscriptions)}
        self.sink = np.array([-1 if r.sink is None else number[r.sink] for r in self.routes], dtype=np.int64)
        # the unlimited processors' channels (no hop: they only count what their super-peer's operators spend)
        node = {sp: k for k, sp in enumerate(meter.super_peers)}
        passing = [(c, node[r.processor]) for c, r in enumerate(self.routes) if r.processor is not None and not r.hops]
        self.passing = np.array([c for c, _ in passing], dtype=np.int64)
        self.passing_node = np.array([k for _, k in passing], dtype=np.int64)
        streams = {s: k for k, s in enumerate(meter.streams)}
        self.stream = np.array([streams.get(r.stream, -1) for r in self.routes], dtype=np.int64)
        self.hops = np.diff(self.hop_start)
        self.records = np.array([r.records for r in self.routes], dtype=np.bool_)
        self.record_channels = np.flatnonzero(self.records)
        # the channels without hops that deliver: an aggregation operator's input (docs/ACCOUNTING.md, "Records")
        self.operators = np.flatnonzero((self.sink >= 0) & (self.hops == 0))
        self.restart(meter, self.free())

    def free(self) -> QueueState:
        """Every link free and no tuple waiting: the state a run starts from."""
        rings = len(np.flatnonzero(self.links.ring_of >= 0))
        return QueueState(
            np.zeros(len(self.directions), np.int64),
            self.links.ring_of.copy(),
            np.zeros((rings, self.ring_size), np.int64),
            np.zeros((rings, self.ring_size), np.int64),
            np.zeros(rings, np.int64),
            np.zeros(rings, np.int64),
            np.zeros(rings, np.int64),
        )

    def state(self) -> QueueState:
        """Where the queues stand now (a copy)."""
        return QueueState(
            self.busy.copy(),
            self.links.ring_of.copy(),
            self.ring_start.copy(),
            self.ring_bytes.copy(),
            self.ring_head.copy(),
            self.ring_count.copy(),
            self.ring_waiting.copy(),
            self.pending,  # never changed in place: a window makes a new one
        )

    def restart(self, meter: TrafficMeter, state: QueueState) -> None:
        """Continue the run from ``state`` (:meth:`state`, :meth:`free`, or a guess), ``meter`` counting what
        follows.  :attr:`first_arrival` then records, per link, the earliest arrival in the first window
        that uses it (:data:`NEVER`: none yet): a run restarted from a guessed state gives the same times as from
        the true one when, at that link, the true one is free no later than that (every tuple's service
        starts at its arrival either way, and no tuple is left waiting in its buffer; so every departure,
        drop and arrival after it is the same; docs/SPARK.md)."""
        self.meter = meter
        self._restore(state)
        self.pending = state.pending
        self.first_arrival = np.full(len(self.directions), NEVER, np.int64)
        self._told = np.zeros(len(self.routes), dtype=np.bool_)  # the meter knows what its deliveries carry

    def _restore(self, state: QueueState) -> None:
        """Take ``state``'s busy times and rings (copies)."""
        self.busy = np.array(state.busy, dtype=np.int64)
        self.ring_start, self.ring_bytes = state.ring_start.copy(), state.ring_bytes.copy()
        self.ring_head, self.ring_count = state.ring_head.copy(), state.ring_count.copy()
        self.ring_waiting = state.ring_waiting.copy()

    def serve(self, blocks: Blocks, horizon: int = NEVER, reserved: bool = False) -> None:
        """Move the window's tuples, and the copies held back from the windows before, over their links up
        to ``horizon`` (ticks: the window's end; :data:`NEVER` for the run's last), and record traffic and
        deliveries in the meter; the copies reaching a link from the horizon on are held back for the next
        window (module docstring, "Horizon").  ``reserved``: each channel's block starts with places for the
        copies held back (:meth:`reserve`), which are put there; required when copies are held back
        (ValueError otherwise)."""
        saved = self.state() if len(self.ring_count) else None
        blocks, window = self._window(blocks, horizon, reserved)
        while True:
            tally = Tally(
                np.zeros(len(self.directions), np.int64),
                np.zeros(len(self.directions), np.int64),
                np.full(len(self.directions), NEVER, np.int64),
                np.zeros(1, np.int64),
            )
            rings = (self.ring_start, self.ring_bytes, self.ring_head, self.ring_count, self.ring_waiting)
            solved = solve_window(window, self.layout, self.links, self.busy, rings, tally)
            departures, arrivals, seg, lost, full = solved
            if full < 0:
                break
            # a ring outgrew its places: twice as many for every ring, and the window again from the start
            assert saved is not None
            self._restore(saved.widened(2 * saved.ring_start.shape[1]))
            saved = self.state()
        self.pending = self._held_back(blocks, seg, departures, lost) if tally.held[0] else None
        arrival_min = tally.arrival_min
        fresh = self.first_arrival == NEVER
        self.first_arrival[fresh] = arrival_min[fresh]
        present = np.flatnonzero(blocks.count > 0)  # the segments are each present channel's hops, in order
        streams = np.repeat(self.stream[present], self.hops[present])
        # where the copies of the channels without hops that deliver (an aggregation operator's input) reached
        # their super-peer: read before the rows solved earlier are marked counted
        reached = self._reached(blocks, window, seg, departures, lost) if len(self.operators) else None
        # the rows solved in an earlier window were counted then (their arrivals were not set again), those
        # held back (DEFER) are counted in a later one
        _uncount_earlier(departures, window, seg, self.hop_start)
        if len(self.passing):
            self._passed(blocks, seg, departures)
        runs = (seg.link, seg.row, seg.count, seg.tuple, blocks.wire, departures, arrivals)
        if len(self.record_channels) and self.records[seg.channel].any():
            runs = _in_arrival_order(self.records[seg.channel], *runs)
        link, row, count, first_wire, wire, departed, arrived = runs
        self.meter.cross_runs(
            self.directions, link, row, count, first_wire, wire, departed, self.latency, arrived, streams
        )  # fmt: skip
        if blocks.work is not None and (self.links.cpu >= 0).any():
            self.meter.processed_runs(
                self.directions, seg.link, seg.row, seg.count, seg.tuple, blocks.work, departures, arrivals
            )
        self.meter.dropped_at(tally.drops)
        self.meter.lost_at(tally.losses)
        if reached is not None:
            self.meter.deliver_many(*reached)
        sinks = np.flatnonzero((self.sink >= 0) & (blocks.count > 0))
        if not len(sinks):
            return
        for c in sinks[~self._told[sinks]].tolist():
            self.meter.received_attrs(self.routes[c].sink, self.routes[c].attrs)
        self._told[sinks] = True
        sinks = sinks[self.hops[sinks] > 0]
        records = self.records[sinks]
        if records.any():
            self._deliver(blocks, window, seg, departures, lost, sinks[records], self.meter.deliver_records)
        self._deliver(blocks, window, seg, departures, lost, sinks[~records], self.meter.deliver_many)

    def _deliver(self, blocks: Blocks, window: Window, seg: Segments, departures, lost, sinks, deliver) -> None:
        """Tell the meter (``deliver``) what the delivery channels ``sinks`` brought their thin-peers."""
        if not len(sinks):
            return
        # a delivery crosses one access link: its rows are its tuples at hop 0
        count = blocks.count[sinks]
        offsets = np.concatenate([[0], np.cumsum(count)[:-1]])
        within = np.arange(int(count.sum())) - np.repeat(offsets, count)
        rows = np.repeat(seg.row_base[sinks], count) + within
        tuples = np.repeat(blocks.first[sinks], count) + within
        owners = self.sink[sinks]
        departed = departures[rows]
        arrival = departed + np.repeat(self.links.latency[self.hop_link[self.hop_start[sinks]]], count)
        # delivered (or dropped, or lost) in this window; a delivery channel has one hop, so a copy of it held
        # back before was held back there and is solved now
        now = departed != DEFER
        if not now.all():
            owners, count = np.repeat(owners, count)[now], np.ones(int(now.sum()), np.int64)
            rows, tuples, departed, arrival = rows[now], tuples[now], departed[now], arrival[now]
        latency = np.where(departed >= 0, (arrival - window.emitted[tuples]) / TICKS, np.nan)
        if self.failures:  # a copy lost at a failure arrives at -inf (a dropped one at NaN)
            latency[lost[rows]] = -np.inf
        deliver(owners, count, blocks.indices[tuples], latency)

    def _reached(self, blocks: Blocks, window: Window, seg: Segments, departures, lost):
        """What the operator channels (no hops, delivering an aggregation operator's input at its super-peer)
        received in the window, as :meth:`~network.meter.TrafficMeter.deliver_many` takes it: each copy by
        the row it reached the super-peer by, when this window solved that row (a copy whose row an earlier
        window solved was received then, and is here only as what a record held back is read off)."""
        count = blocks.count[self.operators]
        present = self.operators[count > 0]
        if not len(present):
            return None
        t = np.concatenate([np.arange(blocks.first[c], blocks.first[c] + blocks.count[c]) for c in present.tolist()])
        owners = np.repeat(self.sink[present], blocks.count[present])
        start = seg.start[t]
        solved = start >= 0
        if window.pending_count.any():  # a carried copy's row may have been solved before
            j = t - np.repeat(blocks.first[present], blocks.count[present])
            held = j < np.repeat(window.pending_count[present], blocks.count[present])
            for i in np.flatnonzero(held & solved).tolist():
                solved[i] = not self._solved_before(window, int(start[i]), seg)
        t, owners, start = t[solved], owners[solved], start[solved]
        departed = departures[start]
        now = departed != DEFER
        t, owners, start, departed = t[now], owners[now], start[now], departed[now]
        arrival = departed + self.links.latency[seg.start_link[t]]
        latency = np.where(departed >= 0, (arrival - window.emitted[t]) / TICKS, np.nan)
        if self.failures:
            latency[lost[start]] = -np.inf
        panes = self.records[np.repeat(present, blocks.count[present])][solved][now]
        if panes.any():  # a pane sink tells of the pane rows that did not come (docs/ACCOUNTING.md, "Panes")
            missed = panes & ~(latency > -np.inf)
            self.meter.deliver_records(owners[missed], np.ones(int(missed.sum()), np.int64), blocks.indices[t][missed],
                                       latency[missed])  # fmt: skip
            t, owners, latency = t[~panes], owners[~panes], latency[~panes]
        return owners, np.ones(len(t), np.int64), blocks.indices[t], latency

    @staticmethod
    def _solved_before(window: Window, row: int, seg: Segments) -> bool:
        """Whether an earlier window solved ``row`` (one of a copy held back before)."""
        present = np.flatnonzero(seg.row_base >= 0)  # channels without tuples in the window have none
        c = int(present[np.searchsorted(seg.row_base[present], row, side="right") - 1])
        n = window.count[c]
        h, j = divmod(row - int(seg.row_base[c]), int(n))
        return _earlier(window, c, h, j) >= 0

    def _passed(self, blocks: Blocks, seg: Segments, departures: np.ndarray) -> None:
        """Tell the meter what reached each unlimited processor in the window (by the row its tuple reached
        the super-peer by: counted in the window that solved that row, as every row is)."""
        count = blocks.count[self.passing]
        for c, node, n in zip(self.passing.tolist(), self.passing_node.tolist(), count.tolist(), strict=True):
            if n == 0:
                continue
            t = np.arange(blocks.first[c], blocks.first[c] + n)
            start = seg.start[t]
            came = start >= 0
            came[came] = departures[start[came]] >= 0
            arrival = departures[start[came]] + self.links.latency[seg.start_link[t[came]]]
            self.meter.passed(self.directions, node, arrival, blocks.work[t[came]])

    def reserve(self) -> np.ndarray | None:
        """Per channel, the copies held back from the last window (None: none), for which the next window's
        blocks may leave places (:meth:`peers.timetable.Timetable.window`)."""
        return None if self.pending is None else self.pending.blocks.count

    def _window(self, blocks: Blocks, horizon: int, reserved: bool) -> tuple[Blocks, Window]:
        """The window's tuples with the copies held back before (each channel's first), and the window as
        the kernel takes it."""
        n_ch = len(blocks.count)
        held, base = np.zeros(n_ch, np.int64), np.zeros(n_ch, np.int64)
        departures, lost = np.zeros(0, np.int64), np.zeros(0, np.bool_)
        if blocks.work is None and self.pending is not None and self.pending.blocks.work is not None:
            blocks = replace(blocks, work=blocks.costs())
        if self.pending is not None:
            p = self.pending.blocks
            if not reserved:
                raise ValueError("copies are held back: the window's blocks must leave places for them (reserve)")
            work = _NO_WORK if blocks.work is None else blocks.work
            _put(p.first, p.count, p.indices, p.emitted, p.parents, p.wire, p.costs() if len(work) else _NO_WORK,
                 blocks.first, blocks.indices, blocks.emitted, blocks.parents, blocks.wire, work)  # fmt: skip
            held = p.count
            base = np.maximum(_row_bases(p.count, self.hops), 0)
            departures, lost = self.pending.departures, self.pending.lost
        window = Window(
            blocks.first, blocks.count, to_ticks(blocks.emitted), blocks.parents, np.asarray(blocks.wire, np.int64),
            _NO_WORK if blocks.work is None else np.asarray(blocks.work, np.int64), horizon, held, base, departures,
            lost,
        )  # fmt: skip
        return blocks, window

    def _held_back(self, blocks: Blocks, seg: Segments, departures: np.ndarray, lost: np.ndarray) -> Pending:
        """The copies a solved window held back, with what they are read off (:class:`Pending`)."""
        held = _deferred(departures)
        waiting = np.zeros(len(blocks.parents), np.bool_)
        waiting_low = blocks.count.copy()
        zero_hop = np.concatenate([self.passing, self.operators])  # what they pass or deliver, on arrival
        for c in zero_hop[blocks.count[zero_hop] > 0].tolist():
            t = np.arange(blocks.first[c], blocks.first[c] + blocks.count[c])
            start = seg.start[t]
            waiting[t[start >= 0]] = departures[start[start >= 0]] == DEFER  # counted when it arrives
            found = np.flatnonzero(waiting[t])
            if len(found):
                waiting_low[c] = found[0]
        keep, low = _carried(held, blocks.first, blocks.count, blocks.parents, self.hop_start, self.layout.parent,
                             seg.row_base, waiting, waiting_low)  # fmt: skip
        first, count, take, parents, held, held_lost = _kept(
            keep, low, blocks.first, blocks.count, blocks.parents, self.hop_start, self.layout.parent, seg.row_base,
            departures, lost,
        )  # fmt: skip
        work = None if blocks.work is None else blocks.work[take]
        kept = Blocks(blocks.indices[take], blocks.emitted[take], parents, blocks.wire[take], first, count, work)
        return Pending(kept, held, held_lost)

    def in_flight(self) -> tuple[np.ndarray, np.ndarray]:
        """The copies on their way to a subscription that the last window held back: subscription numbers
        (the meter's) and tuple indices."""
        if self.pending is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        p = self.pending.blocks
        sinks = np.flatnonzero((self.sink >= 0) & (p.count > 0) & ~self.records)
        if not len(sinks):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        owners = np.repeat(self.sink[sinks], p.count[sinks])
        at = np.concatenate([np.arange(f, f + n) for f, n in zip(p.first[sinks], p.count[sinks], strict=True)])
        on_way = np.ones(len(at), np.bool_)
        if len(self.operators):  # an operator's input kept only as what a record is read off has arrived
            rows = _row_bases(p.count, self.hops)
            ends = np.cumsum(p.count[sinks])
            for k in np.flatnonzero(self.hops[sinks] == 0).tolist():
                for i in range(ends[k] - p.count[sinks[k]], ends[k]):
                    on_way[i] = self._pending_row_departure(p, rows, int(sinks[k]), int(at[i])) == DEFER
        return owners[on_way], p.indices[at[on_way]]

    def _pending_row_departure(self, p: Blocks, rows: np.ndarray, c: int, entry: int) -> int:
        """The departure recorded for the row by which the held-back copy ``entry`` of channel ``c`` (without
        hops) reached its super-peer."""
        while self.layout.parent[c] >= 0:
            parent, tap = int(self.layout.parent[c]), int(self.layout.tap[c])
            entry = int(p.first[parent] + p.parents[entry])
            if tap >= 1:
                j = entry - int(p.first[parent])
                return int(self.pending.departures[rows[parent] + (tap - 1) * p.count[parent] + j])
            c = parent
        raise AssertionError("an operator's input is read off the upload, which has a hop")


def _in_arrival_order(records, link, row, count, first_wire, wire, departures, arrivals):
    """The runs of a window's segments as the meter counts them (each run's tuples in order of arrival), the
    record channels' put so: a record leaves when its window closes and its last input has arrived, which
    need not follow the records' order in their channel, while a channel of tuples keeps their order on every
    link.  The record segments' rows are appended to ``departures``, ``arrivals`` and ``wire`` in that order
    (records are few), the runs pointing there."""
    link, row, count, first_wire = link.copy(), row.copy(), count.copy(), first_wire.copy()
    mine = np.flatnonzero(records)
    taken = np.concatenate([np.arange(row[q], row[q] + count[q]) for q in mine.tolist()])
    wires = np.concatenate([np.arange(first_wire[q], first_wire[q] + count[q]) for q in mine.tolist()])
    segment = np.repeat(np.arange(len(mine)), count[mine])
    order = np.lexsort((np.arange(len(taken)), arrivals[taken], segment))  # stable: ties in channel order
    starts = np.concatenate([[0], np.cumsum(count[mine])[:-1]])
    row[mine], first_wire[mine] = len(departures) + starts, len(wire) + starts
    return (
        link, row, count, first_wire, np.concatenate([wire, wire[wires[order]]]),
        np.concatenate([departures, departures[taken[order]]]), np.concatenate([arrivals, arrivals[taken[order]]]),
    )  # fmt: skip


class Links(NamedTuple):
    """The link directions as the kernels take them (by number): bandwidth (bit/s), latency (ticks),
    buffer (bytes; :data:`NEVER`: none) and its ring (-1: none), and the down intervals of direction ``k``,
    ``down_first[k] .. down_first[k + 1] - 1`` of ``down_start``/``down_end`` (ticks, disjoint,
    ascending).  ``cpu[k]``: -1 for a link; for a super-peer's processor (module docstring, "Processors")
    its operations per second (``inf``: unlimited), a copy's service then taking its work, not its bytes."""

    bandwidth: np.ndarray
    latency: np.ndarray
    buffer: np.ndarray
    ring_of: np.ndarray
    down_first: np.ndarray
    down_start: np.ndarray
    down_end: np.ndarray
    ahead: np.ndarray
    cpu: np.ndarray


class Layout(NamedTuple):
    """The channels' routes as the kernels take them: channel ``c`` crosses links ``hop_link[hop_start[c] ..
    hop_start[c + 1] - 1]``; it is read off channel ``parent[c]`` at position ``tap[c]`` (-1: emitted).
    Links are solved group by group in serving order (:func:`serving_groups`): link ``k`` in group
    ``group[k]``, a group being one link, or the links of a cycle of dependencies (``cyclic[g]``)."""

    hop_start: np.ndarray
    hop_link: np.ndarray
    parent: np.ndarray
    tap: np.ndarray
    group: np.ndarray
    cyclic: np.ndarray


class Window(NamedTuple):
    """One window's tuples as the kernel takes them (:class:`Blocks`, times in ticks, bytes as integers) and
    its horizon (ticks: arrivals from it on are held back); ``work``: per tuple the operations it costs a
    processor it queues at.  Each channel's first ``pending_count[c]``
    tuples are copies held back before (:class:`Pending`): the departures found for their rows then, hop
    ``h`` of the ``j``-th at ``pending_departures[pending_base[c] + h * pending_count[c] + j]``
    (:data:`DEFER`: this window solves it), and whether they were lost (empty: no link is ever down)."""

    first: np.ndarray
    count: np.ndarray
    emitted: np.ndarray
    parents: np.ndarray
    wire: np.ndarray
    work: np.ndarray
    horizon: int
    pending_count: np.ndarray
    pending_base: np.ndarray
    pending_departures: np.ndarray
    pending_lost: np.ndarray


class Tally(NamedTuple):
    """What a window's solve counts per link direction: copies dropped, copies lost, the earliest arrival
    (ticks; :data:`NEVER`: none); and how many copies it held back at the horizon."""

    drops: np.ndarray
    losses: np.ndarray
    arrival_min: np.ndarray
    held: np.ndarray  # one number: the copies held back at the horizon


@njit(cache=True)
def _merge_runs(keys, rows, buffer_keys, buffer_rows):
    """Sort ``rows`` by ``keys`` (both in place), stably, merging the ascending runs they already hold."""
    n = len(keys)
    starts = [0]
    for i in range(1, n):
        if keys[i] < keys[i - 1]:
            starts.append(i)
    if len(starts) == 1:
        return
    starts.append(n)
    src_k, src_r, dst_k, dst_r = keys, rows, buffer_keys[:n], buffer_rows[:n]
    in_place = True
    while len(starts) > 2:
        merged = [0]
        for q in range(0, len(starts) - 1, 2):
            lo, mid = starts[q], starts[q + 1]
            hi = starts[q + 2] if q + 2 < len(starts) else mid
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                if src_k[j] < src_k[i]:  # ties take the left run: stable
                    dst_k[o], dst_r[o] = src_k[j], src_r[j]
                    j += 1
                else:
                    dst_k[o], dst_r[o] = src_k[i], src_r[i]
                    i += 1
                o += 1
            while i < mid:
                dst_k[o], dst_r[o] = src_k[i], src_r[i]
                i += 1
                o += 1
            while j < hi:
                dst_k[o], dst_r[o] = src_k[j], src_r[j]
                j += 1
                o += 1
            merged.append(hi)
        starts = merged
        src_k, src_r, dst_k, dst_r = dst_k, dst_r, src_k, src_r
        in_place = not in_place
    if not in_place:
        keys[:] = src_k
        rows[:] = src_r


class Picked(NamedTuple):
    """The copies reaching one link in a window: arrival ticks ascending (``keys``), and per copy in the
    order they were gathered its row and tuple; ``picks[i]`` is where the ``i``-th arrival was gathered."""

    keys: np.ndarray
    rows: np.ndarray
    tuples: np.ndarray
    picks: np.ndarray


class Rows(NamedTuple):
    """What a window's solve gives every row: its departure and its arrival at its link's queue (ticks;
    :data:`NONE`: dropped or lost before or there), and whether it was lost rather than dropped (empty
    when no link is ever down)."""

    departures: np.ndarray
    arrivals: np.ndarray
    lost: np.ndarray


class Segments(NamedTuple):
    """A window's rows: a *segment* is one channel at one hop, its tuples crossing one link in index order
    as rows ``row .. row + count - 1`` (hop ``h`` of channel ``c``'s ``j``-th tuple is row ``row_base[c] +
    h * count + j``).  Segments are numbered channel by channel; ``order`` lists them by group (serving
    order, :class:`Layout`), each group's in channel order, ``seg_groups``/``groups`` where each group's
    segments and rows start; ``before`` is the link of the hop before (-1: the channel's first), ``start`` per tuple
    the row it reaches its channel's first node by (-1: emitted there) and ``start_link`` that row's link."""

    row_base: np.ndarray
    link: np.ndarray
    row: np.ndarray
    count: np.ndarray
    tuple: np.ndarray
    channel: np.ndarray
    before: np.ndarray
    order: np.ndarray
    groups: np.ndarray
    seg_groups: np.ndarray
    start: np.ndarray
    start_link: np.ndarray
    rows: int
    widest: int


@njit(cache=True)
def _segments(window, layout, n_links):
    """The window's segments and rows (:class:`Segments`)."""
    hop_start, hop_link = layout.hop_start, layout.hop_link
    n_ch = len(window.count)
    n_groups = len(layout.cyclic)
    row_base = np.full(n_ch, -1, np.int64)
    total = 0
    segments = 0
    for c in range(n_ch):
        if window.count[c] > 0:
            row_base[c] = total
            total += window.count[c] * (hop_start[c + 1] - hop_start[c])
            segments += hop_start[c + 1] - hop_start[c]
    seg_link = np.empty(segments, np.int64)
    seg_row = np.empty(segments, np.int64)
    seg_count = np.empty(segments, np.int64)
    seg_tuple = np.empty(segments, np.int64)
    seg_channel = np.empty(segments, np.int64)
    seg_group = np.empty(segments, np.int64)
    seg_before = np.empty(segments, np.int64)
    groups = np.zeros(n_groups + 1, np.int64)  # rows per group, then where each group starts
    seg_groups = np.zeros(n_groups + 1, np.int64)
    start = np.full(len(window.emitted), -1, np.int64)
    start_link = np.full(len(window.emitted), -1, np.int64)
    q = 0
    for c in range(n_ch):
        n = window.count[c]
        if n == 0:
            continue
        f = window.first[c]
        p = layout.parent[c]
        tap = layout.tap[c]
        if p >= 0:
            for j in range(n):
                if tap >= 1:
                    start[f + j] = row_base[p] + (tap - 1) * window.count[p] + window.parents[f + j]
                    start_link[f + j] = hop_link[hop_start[p] + tap - 1]
                else:
                    start[f + j] = start[window.first[p] + window.parents[f + j]]
                    start_link[f + j] = start_link[window.first[p] + window.parents[f + j]]
        for h in range(hop_start[c + 1] - hop_start[c]):
            k = hop_link[hop_start[c] + h]
            g = layout.group[k]
            seg_link[q], seg_row[q], seg_count[q], seg_tuple[q], seg_group[q] = k, row_base[c] + h * n, n, f, g
            seg_channel[q] = c
            seg_before[q] = hop_link[hop_start[c] + h - 1] if h > 0 else -1
            groups[g + 1] += n
            seg_groups[g + 1] += 1
            q += 1
    widest = 0
    for g in range(len(groups) - 1):
        widest = max(widest, groups[g + 1])
        groups[g + 1] += groups[g]
        seg_groups[g + 1] += seg_groups[g]
    order = np.empty(segments, np.int64)
    fill = seg_groups[:-1].copy()
    for q in range(segments):
        order[fill[seg_group[q]]] = q
        fill[seg_group[q]] += 1
    return Segments(
        row_base, seg_link, seg_row, seg_count, seg_tuple, seg_channel, seg_before, order, groups, seg_groups, start,
        start_link, total, widest,
    )  # fmt: skip


@njit(cache=True)
def _arrivals(g, seg, window, latency, departures, lost, keys, rows, tuples):
    """Group ``g``'s copies that reach its link, as ``keys`` (arrival ticks), ``rows`` and ``tuples`` (in
    channel order, each channel's ascending).  A row solved in an earlier window takes its departure from
    then; a copy dropped or lost before departs at :data:`NONE` here too (its ``lost`` flag follows), one
    held back before at :data:`DEFER`.  Returns how many reach it."""
    failures = len(lost) > 0
    m = 0
    for i in range(seg.seg_groups[g], seg.seg_groups[g + 1]):
        q = seg.order[i]
        n, row0, f, before, c = seg.count[q], seg.row[q], seg.tuple[q], seg.before[q], seg.channel[q]
        h = (row0 - seg.row_base[c]) // n
        for j in range(n):
            row = row0 + j
            earlier = _earlier(window, c, h, j)
            if earlier >= 0:  # solved in an earlier window
                departures[row] = window.pending_departures[earlier]
                if failures:
                    lost[row] = window.pending_lost[earlier]
                continue
            if before >= 0:  # from the channel's previous hop
                source = row - n
                link = before
            elif seg.start[f + j] >= 0:  # from where the channel is read off its parent
                source = seg.start[f + j]
                link = seg.start_link[f + j]
            else:
                source = -1
            if source < 0:
                key = window.emitted[f + j]
            elif departures[source] >= 0:  # no earlier than its emission (a record's: when its window closes)
                key = max(departures[source] + latency[link], window.emitted[f + j])
            else:  # dropped, lost or held back before it got here
                departures[row] = departures[source]
                if failures:
                    lost[row] = lost[source]
                continue
            keys[m], rows[m], tuples[m] = key, row, f + j
            m += 1
    return m


@njit(cache=True)
def _serve_in_order(k, m, picked, window, links, busy, rings, tally, out):
    """A link outside any cycle: its ``m`` copies (:class:`Picked`) through the link rule, FIFO, into ``out``
    (:class:`Rows`); returns -1, or the ring that is full."""
    ring = links.ring_of[k]
    if ring < 0:  # no buffer: the rule's buffer steps are compiled out of the loop
        return _fifo(k, m, picked, window, links, busy, rings, tally, out, -1)
    return _fifo(k, m, picked, window, links, busy, rings, tally, out, ring)


@njit(cache=True, inline="always")
def _fifo(k, m, picked, window, links, busy, rings, tally, out, ring):
    """:func:`_serve_in_order`'s loop, for link ``k`` with buffer ring ``ring`` (-1: none)."""
    keys, rows, tuples, picks = picked
    departures, arrivals, lost = out
    down, last = links.down_first[k], links.down_first[k + 1]
    latency, bandwidth, buffer, cpu = links.latency[k], links.bandwidth[k], links.buffer[k], links.cpu[k]
    free = busy[k]
    size, length = -1, 0  # the last size served and its service time (a link's copies mostly weigh alike)
    for i in range(m):
        a, row = keys[i], rows[picks[i]]
        w = window.wire[tuples[picks[i]]]
        arrivals[row] = a  # offered, dropped, lost or not
        down, fail, recover = down_at(a, down, last, links.down_start, links.down_end)
        if cpu >= 0:
            length = processing(window.work[tuples[picks[i]]], cpu)
        elif w != size:
            size, length = w, service(w, bandwidth)
        fate, _, done = cross(a, w, a if a > free else free, length, latency, fail, recover, ring, rings, buffer)
        if fate == FULL:
            return ring
        if fate == CARRIED:
            departures[row] = done
        else:
            departures[row] = NONE
            if fate == DROPPED:
                tally.drops[k] += 1
                continue
            lost[row] = True
            tally.losses[k] += 1
            if fail <= a:
                continue  # lost on arrival: it never took the wire
        if done > free:
            free = done
    busy[k] = free
    return -1


@njit(cache=True)
def _serve_cycle(g, seg, window, links, busy, rings, tally, out):
    """Group ``g``, the links of a cycle of dependencies (a copy crossing one of them may come back to
    another): its copies in the order of their arrivals over all of them, one event at a time, each through
    the link rule at its link, FIFO (module docstring, "Cycles"); returns -1, or the ring that is full."""
    departures, arrivals, lost = out
    failures = len(lost) > 0
    # the group's rows, numbered locally in segment order: row, channel, position, tuple, link
    size = seg.groups[g + 1] - seg.groups[g]
    row_of = np.empty(size, np.int64)
    channel_of = np.empty(size, np.int64)
    position_of = np.empty(size, np.int64)
    tuple_of = np.empty(size, np.int64)
    link_of = np.empty(size, np.int64)
    source_of = np.full(size, -1, np.int64)  # the row it comes from (-1: emitted)
    source_link = np.full(size, -1, np.int64)
    earlier_of = np.full(size, -1, np.int64)  # where an earlier window solved it (-1: this one solves it)
    segments = seg.seg_groups[g + 1] - seg.seg_groups[g]
    seg_first_row = np.empty(segments, np.int64)  # where each of the group's segments starts (global, local)
    seg_local = np.empty(segments, np.int64)
    i = 0
    for s_i in range(segments):
        q = seg.order[seg.seg_groups[g] + s_i]
        n, f, before, c = seg.count[q], seg.tuple[q], seg.before[q], seg.channel[q]
        h = (seg.row[q] - seg.row_base[c]) // n
        seg_first_row[s_i], seg_local[s_i] = seg.row[q], i
        for j in range(n):
            row = seg.row[q] + j
            earlier_of[i] = _earlier(window, c, h, j)
            row_of[i], channel_of[i], position_of[i] = row, seg.channel[q], j
            tuple_of[i], link_of[i] = f + j, seg.link[q]
            if before >= 0:
                source_of[i], source_link[i] = row - n, before
            elif seg.start[f + j] >= 0:
                source_of[i], source_link[i] = seg.start[f + j], seg.start_link[f + j]
            i += 1
    by_row = np.argsort(seg_first_row)
    first_rows = seg_first_row[by_row]
    # per row, the group's rows that come from it (a copy's next hop, or what is read off it, in the group)
    internal = np.full(size, -1, np.int64)  # local number of the source when it is in the group
    for i in range(size):
        src = source_of[i]
        if src < 0:
            continue
        at = np.searchsorted(first_rows, src, side="right") - 1
        if at < 0:
            continue
        s_i = by_row[at]
        q = seg.order[seg.seg_groups[g] + s_i]
        if src < seg_first_row[s_i] + seg.count[q]:
            internal[i] = seg_local[s_i] + src - seg_first_row[s_i]
    fanout = np.zeros(size + 1, np.int64)
    for i in range(size):
        if internal[i] >= 0:
            fanout[internal[i] + 1] += 1
    for i in range(size):
        fanout[i + 1] += fanout[i]
    next_of = np.empty(fanout[size], np.int64)
    fill = fanout[:size].copy()
    for i in range(size):
        if internal[i] >= 0:
            next_of[fill[internal[i]]] = i
            fill[internal[i]] += 1
    heap = [(np.int64(0), np.int64(0), np.int64(0), np.int64(0))]
    heap.pop()
    stack = np.empty(size, np.int64)  # rows settled without an event (their departure is known or NONE)
    top = 0
    for i in range(size):
        row = row_of[i]
        if earlier_of[i] >= 0:
            departures[row] = window.pending_departures[earlier_of[i]]
            if failures:
                lost[row] = window.pending_lost[earlier_of[i]]
            stack[top] = i
            top += 1
        elif internal[i] >= 0:
            continue  # its event comes when its source is settled
        elif source_of[i] < 0:
            heapq.heappush(heap, (window.emitted[tuple_of[i]], channel_of[i], position_of[i], i))
        elif departures[source_of[i]] >= 0:
            key = max(departures[source_of[i]] + links.latency[source_link[i]], window.emitted[tuple_of[i]])
            heapq.heappush(heap, (key, channel_of[i], position_of[i], i))
        else:
            departures[row] = departures[source_of[i]]
            if failures:
                lost[row] = lost[source_of[i]]
            stack[top] = i
            top += 1
    cursor = links.down_first[:-1].copy()
    while True:
        while top > 0:  # what comes from the rows settled: an event, or the same fate
            top -= 1
            i = stack[top]
            row = row_of[i]
            for d in next_of[fanout[i] : fanout[i + 1]]:
                if earlier_of[d] >= 0:
                    continue
                if departures[row] >= 0:
                    key = max(departures[row] + links.latency[link_of[i]], window.emitted[tuple_of[d]])
                    heapq.heappush(heap, (key, channel_of[d], position_of[d], d))
                else:
                    departures[row_of[d]] = departures[row]
                    if failures:
                        lost[row_of[d]] = lost[row]
                    stack[top] = d
                    top += 1
        if len(heap) == 0:
            return -1
        a, _, _, i = heapq.heappop(heap)
        row, k = row_of[i], link_of[i]
        stack[top] = i
        top += 1
        if a >= _horizon(window.horizon, links.ahead[k]):
            departures[row] = DEFER
            tally.held[0] += 1
            continue
        arrivals[row] = a
        if a < tally.arrival_min[k]:
            tally.arrival_min[k] = a
        w = window.wire[tuple_of[i]]
        cursor[k], fail, recover = down_at(a, cursor[k], links.down_first[k + 1], links.down_start, links.down_end)
        free = busy[k]
        if links.cpu[k] >= 0:
            length = processing(window.work[tuple_of[i]], links.cpu[k])
        else:
            length = service(w, links.bandwidth[k])
        fate, _, done = cross(
            a, w, a if a > free else free, length, links.latency[k], fail, recover, links.ring_of[k], rings,
            links.buffer[k],
        )  # fmt: skip
        if fate == FULL:
            return links.ring_of[k]
        if fate == CARRIED:
            departures[row] = done
        else:
            departures[row] = NONE
            if fate == DROPPED:
                tally.drops[k] += 1
                continue
            lost[row] = True
            tally.losses[k] += 1
            if fail <= a:
                continue
        if done > free:
            busy[k] = done


@njit(cache=True, inline="always")
def _horizon(horizon, ahead):
    """A link's horizon: the window's end plus the least time any tuple takes from its emission to that
    link (:data:`NEVER` stays)."""
    return horizon if horizon == NEVER else horizon + ahead


@njit(cache=True)
def solve_window(window, layout, links, busy, rings, tally):
    """Departures of one window's tuples at every hop (module docstring), updating ``busy`` and the
    ``rings``, counting in ``tally``.

    Returns ``(departures, arrivals, segments, lost, full)``: per row (:class:`Segments`) its departure
    and its arrival at its link's queue (ticks; :data:`NONE`: dropped or lost before, or there), the
    segments, per row whether it is lost rather than dropped (an empty array when no link is ever down),
    and -1; or, as soon as a ring is full, that ring's number (then the rest is unfinished and ``busy`` and
    the rings changed: the caller widens the rings and solves the window again from its saved state)."""
    n_links = len(links.bandwidth)
    seg = _segments(window, layout, n_links)
    departures = np.empty(seg.rows, np.int64)
    arrivals = np.full(seg.rows, NONE, np.int64)
    lost = np.zeros(seg.rows if len(links.down_start) > 0 else 0, np.bool_)
    keys = np.empty(seg.widest, np.int64)
    rows = np.empty(seg.widest, np.int64)
    tuples = np.empty(seg.widest, np.int64)
    picks = np.empty(seg.widest, np.int64)
    buffer_keys = np.empty(seg.widest, np.int64)
    buffer_picks = np.empty(seg.widest, np.int64)
    for g in range(len(layout.cyclic)):
        if seg.seg_groups[g] == seg.seg_groups[g + 1]:
            continue
        if layout.cyclic[g]:
            full = _serve_cycle(g, seg, window, links, busy, rings, tally, Rows(departures, arrivals, lost))
            if full >= 0:
                return departures, arrivals, seg, lost, full
            continue
        m = _arrivals(g, seg, window, links.latency, departures, lost, keys, rows, tuples)
        if m == 0:
            continue
        for i in range(m):
            picks[i] = i
        _merge_runs(keys[:m], picks[:m], buffer_keys, buffer_picks)
        # the copies reaching the link from the horizon on wait for the next window: an earlier one may
        # still come from a later window's tuples (none arrives before the horizon)
        k = seg.link[seg.order[seg.seg_groups[g]]]
        held = m
        m = np.searchsorted(keys[:m], _horizon(window.horizon, links.ahead[k]), side="left")
        for i in range(m, held):
            departures[rows[picks[i]]] = DEFER
        tally.held[0] += held - m
        if m == 0:
            continue
        if keys[0] < tally.arrival_min[k]:
            tally.arrival_min[k] = keys[0]
        picked = Picked(keys, rows, tuples, picks)
        full = _serve_in_order(k, m, picked, window, links, busy, rings, tally, Rows(departures, arrivals, lost))
        if full >= 0:
            return departures, arrivals, seg, lost, full
    return departures, arrivals, seg, lost, -1


def _ahead(n: int, entered: set[int], edges: set[tuple[int, int]], latency: np.ndarray) -> np.ndarray:
    """Per link, the least ticks from a tuple's emission to its arrival there: 0 at a link where tuples
    enter (``entered``), else the shortest path to it over the dependency ``edges``, each edge ``a -> b``
    weighing ``a``'s latency (a copy leaves a link no earlier than it arrived); 0 where none comes."""
    successors: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        successors[a].append(b)
    best = [NEVER] * n
    heap = [(0, k) for k in sorted(entered)]
    while heap:
        d, k = heapq.heappop(heap)
        if best[k] <= d:
            continue
        best[k] = d
        step = int(latency[k])
        for b in successors[k]:
            if d + step < best[b]:
                heapq.heappush(heap, (d + step, b))
    return np.array([0 if d == NEVER else d for d in best], np.int64)


def serving_groups(n: int, edges: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The order links are solved in: per link its group, and per group whether it is a cycle.

    ``edges`` are the dependencies between links (``a -> b``: some copy crosses ``b`` right after ``a``).
    The links of a strongly connected component with more than one link (or a link depending on itself)
    form one group, solved event by event; every other link is a group of its own.  Groups come in order
    of level (the longest chain of groups feeding one), then of their smallest link, so every group comes
    after those feeding it."""
    successors: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        successors[a].append(b)
    for targets in successors:
        targets.sort()
    component = _components(n, successors)
    count = max(component, default=-1) + 1
    sizes = np.bincount(np.array(component, dtype=np.int64), minlength=count) if n else np.zeros(0, np.int64)
    cyclic_component = sizes > 1
    between: set[tuple[int, int]] = set()
    for a, b in edges:
        if component[a] == component[b]:
            if a == b:
                cyclic_component[component[a]] = True
        else:
            between.add((component[a], component[b]))
    level = _levels(count, between)
    smallest = np.full(count, n, np.int64)
    for k in range(n):
        smallest[component[k]] = min(smallest[component[k]], k)
    order = np.lexsort((smallest, level))  # components in serving order
    rank = np.empty(count, np.int64)
    rank[order] = np.arange(count)
    group = rank[np.array(component, dtype=np.int64)] if n else np.zeros(0, np.int64)
    return group.astype(np.int64), cyclic_component[order].astype(np.bool_)


def _components(n: int, successors: list[list[int]]) -> list[int]:
    """Tarjan's strongly connected components of the graph (iteratively): the component of each node."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    component = [-1] * n
    stack: list[int] = []
    counter = found = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            if child < len(successors[node]):
                work.append((node, child + 1))
                nxt = successors[node][child]
                if index[nxt] < 0:
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = found
                    if member == node:
                        break
                found += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def _levels(n: int, edges: set[tuple[int, int]]) -> np.ndarray:
    """Per node of an acyclic graph, the length of the longest path reaching it."""
    successors: dict[int, list[int]] = {}
    indegree = [0] * n
    for a, b in edges:
        successors.setdefault(a, []).append(b)
        indegree[b] += 1
    level = [0] * n
    ready = [a for a in range(n) if indegree[a] == 0]
    while ready:
        a = ready.pop()
        for b in successors.get(a, ()):
            level[b] = max(level[b], level[a] + 1)
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    if any(indegree):
        raise AssertionError("the graph of components is acyclic")
    return np.array(level, dtype=np.int64)


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds the simulator's main kernel (a run before compiled it): if not,
    the first run compiles the kernels, tens of seconds, and caches them for every later run."""
    # numba's index of the kernel's compiled versions: empty when missing, or stale after the source changed
    return bool(solve_window._cache._cache_file._load_index())
