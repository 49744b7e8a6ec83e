"""The FIFO link queues of a whole run, solved window by window and link direction by link direction.

The simulator's model (docs/ARCHITECTURE.md): time is cut into windows of emission time.  A link direction
serves the tuples of window ``w`` after those of window ``w - 1``; within a window, in exact FIFO order of
arrival (ties by channel number, then tuple index); a tuple of ``b`` bytes leaves the sender at
``max(arrival, link free) + 8 b / bandwidth`` and reaches the far end ``latency`` seconds later.

**Dependency order.**  A tuple's arrival at a link is its departure from the link before on its path (plus
that link's latency), so links are solved in an order where every link comes after the links feeding it:
the *dependency graph* has an edge ``a -> b`` when some channel crosses ``b`` right after ``a`` (along its
route, or at the node where it is read from its parent).  The graph is built once for the run from the
channels' routes.  Each link direction gets a *level* (the longest chain of links feeding it), and a
window is solved link by link in (level, link) order, in one compiled pass (:func:`solve_window`).

**Cycles.**  Streams from different sources sharing links around a ring can make the graph cyclic.  The
edges closing a cycle (the back edges of a depth-first search over sorted link ids) are cut: a tuple that
crossed ``k`` of them is in *round* ``k``.  Round 0 is served as above; round ``k > 0`` at a link is served
after the window's earlier rounds there, in the gaps they left: a tuple starts at its arrival unless the
link is busy then, and never delays a tuple already served (where tuples do not contend, that is the
per-tuple event simulation's time).  So the solve is: for each round, for each level, for each link, one
merge of its channels' arrivals and one FIFO pass.  Without buffers, counts and deliveries never depend on
any of this: only times do.

**Buffers.**  A link direction with a finite buffer (bytes) drops at the tail: a tuple arriving at ``a`` is
admitted when its bytes and those of the tuples admitted before it that have not started on the wire by
``a`` fit the buffer (:func:`admit`; those tuples wait in the direction's *ring*, by start time).  A
dropped tuple's row departs at NaN, and so does every row after it (its next hops, what reads it further
on).  Rings carry over from window to window (:class:`QueueState`), so which tuples are dropped is the
same whatever the windows or chunks of the run.  A later round's tuple is admitted against the ring as
the window's earlier rounds at that link left it (like its service in their gaps, an approximation where
rounds contend; the same in every engine).

**Failures** (docs/DYNAMICS.md).  A link direction may be down over intervals ``[fail, recover)``.  A tuple
reaching its queue at ``a`` and the far end at ``d`` is lost iff one of them has ``fail <= d`` and
``recover > a``: it arrived while the direction was down (then it never takes the wire, nor a place in the
buffer), or it was queued, on the wire or on its way at the failure.  A failure empties the queue: a lost
tuple holds the wire at most until the failure and leaves the buffer by then, so the wire is free again
from the failure (or from the last departure before it, never earlier: where windows interleave, above)
and the first tuple after the recovery finds an empty queue.  A lost tuple's row departs
at NaN like a dropped one (it crosses nothing and lands nowhere; it counts in the offered load), and so
does every row after it; a flag per row tells lost from dropped for the deliveries.  Arrivals ascend
within a link's group, so one cursor walks its intervals; a link never down costs one comparison per
tuple, a run without failures no more.  In a later round, a tuple lost at a failure held no gap in the
earlier rounds' service (only the tuples that crossed did), the approximation of the rounds again.

The same segments (a channel at one hop: link, round, level, its tuples' arrivals) are what a distributed
engine partitions by link direction: the solve of one level needs only the departures of lower levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from network.buffers import QueueState, admit, enqueue
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


@dataclass(frozen=True)
class Blocks:
    """Every channel's tuples in one window: channel ``c`` holds entries ``first[c] .. first[c] +
    count[c] - 1`` (``first[c] == -1``: none) of the flat arrays, tuple indices ascending; ``parents`` are
    positions within the parent channel's run (-1 for an upload)."""

    indices: np.ndarray
    emitted: np.ndarray
    parents: np.ndarray
    wire: np.ndarray
    first: np.ndarray
    count: np.ndarray


class Queues:
    """Every link direction's FIFO over the run, for the channels ``routes`` (numbered by position, each
    parent before its children); :meth:`serve` solves one window and records it in ``meter``.

    ``links`` maps every direction a channel may cross (backbone and access) to (bandwidth bit/s, latency s)
    or (bandwidth, latency, buffer bytes: ``inf`` for none).  ``smallest`` is the fewest bytes a tuple
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
        self.down_first = np.cumsum([0] + [len(s) for s in spans]).astype(np.int64)
        self.down_start = np.array([f for s in spans for f, _ in s], dtype=np.float64)
        self.down_end = np.array([r for s in spans for _, r in s], dtype=np.float64)
        self.failures = len(self.down_start) > 0
        self.bandwidth = np.array([links[d][0] for d in self.directions], dtype=np.float64)
        self.latency = np.array([links[d][1] for d in self.directions], dtype=np.float64)
        self.buffer = np.array([(*links[d], np.inf)[2] for d in self.directions], dtype=np.float64)
        buffered = np.flatnonzero(np.isfinite(self.buffer))
        self.ring_of = np.full(len(self.directions), -1, np.int64)
        self.ring_of[buffered] = np.arange(len(buffered))
        # a ring holds the tuples admitted but not yet on the wire: at most buffer / smallest of them, and
        # it grows to that only when they come (serve widens the rings when one is full)
        bound = int(np.floor(self.buffer[buffered].max() / max(1, smallest))) + 1 if len(buffered) else 1
        self.ring_size = min(bound, 64)
        self.meter = meter
        self.routes = list(routes)
        self.busy = np.zeros(len(self.directions))
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
        back = cycle_closing_edges(edges)
        level = _levels(len(self.directions), edges - back)
        # the round of each (channel, hop): cycle-closing edges crossed up to it
        hop_round = [0] * len(hop_link)
        round_in = [0] * n
        for c, route in enumerate(self.routes):
            if route.parent >= 0:
                p = route.parent
                round_in[c] = hop_round[hop_start[p] + route.tap - 1] if route.tap >= 1 else round_in[p]
            previous, r = inbound[c], round_in[c]
            for h in range(hop_start[c], hop_start[c + 1]):
                r += (previous, hop_link[h]) in back
                hop_round[h] = r
                previous = hop_link[h]
        self.hop_round = np.array(hop_round, dtype=np.int64)
        self.rounds = max(hop_round, default=0) + 1
        # links in serving order: by level, then id; a window is solved group by group, a group being one
        # link in one round, in the order (round, level, link)
        self.rank = np.empty(len(self.directions), dtype=np.int64)
        self.rank[np.lexsort((np.arange(len(self.directions)), level))] = np.arange(len(self.directions))
        self.parent = np.array([r.parent for r in self.routes], dtype=np.int64)
        self.tap = np.array([r.tap for r in self.routes], dtype=np.int64)
        number = {s: k for k, s in enumerate(meter.subscriptions)}
        self.sink = np.array([-1 if r.sink is None else number[r.sink] for r in self.routes], dtype=np.int64)
        streams = {s: k for k, s in enumerate(meter.streams)}
        self.stream = np.array([streams.get(r.stream, -1) for r in self.routes], dtype=np.int64)
        self.hops = np.diff(self.hop_start)
        self.restart(meter, self.free())

    def free(self) -> QueueState:
        """Every link free and no tuple waiting: the state a run starts from."""
        rings = len(np.flatnonzero(self.ring_of >= 0))
        return QueueState(
            np.zeros(len(self.directions)),
            self.ring_of.copy(),
            np.zeros((rings, self.ring_size)),
            np.zeros((rings, self.ring_size)),
            np.zeros(rings, np.int64),
            np.zeros(rings, np.int64),
            np.zeros(rings),
        )

    def state(self) -> QueueState:
        """Where the queues stand now (a copy)."""
        return QueueState(
            self.busy.copy(),
            self.ring_of.copy(),
            self.ring_start.copy(),
            self.ring_bytes.copy(),
            self.ring_head.copy(),
            self.ring_count.copy(),
            self.ring_waiting.copy(),
        )

    def restart(self, meter: TrafficMeter, state: QueueState) -> None:
        """Continue the run from ``state`` (:meth:`state`, :meth:`free`, or a guess), ``meter`` counting what
        follows.  :attr:`first_arrival` then records, per link, the earliest arrival in the first window
        that uses it (``inf``: none yet): a run restarted from a guessed state gives the same times as from
        the true one when, at that link, the true one is free no later than that (every tuple's service
        starts at its arrival either way, and no tuple is left waiting in its buffer; so every departure,
        drop and arrival after it is the same; docs/SPARK.md)."""
        self.meter = meter
        self._restore(state)
        self.first_arrival = np.full(len(self.directions), np.inf)
        self._told = np.zeros(len(self.routes), dtype=np.bool_)  # the meter knows what its deliveries carry

    def _restore(self, state: QueueState) -> None:
        """Take ``state``'s busy times and rings (copies)."""
        self.busy = np.array(state.busy, dtype=np.float64)
        self.ring_start, self.ring_bytes = state.ring_start.copy(), state.ring_bytes.copy()
        self.ring_head, self.ring_count = state.ring_head.copy(), state.ring_count.copy()
        self.ring_waiting = state.ring_waiting.copy()

    def serve(self, blocks: Blocks) -> None:
        """Move the window's tuples over their links and record traffic and deliveries in the meter."""
        saved = self.state() if len(self.ring_count) else None
        while True:
            arrival_min = np.full(len(self.directions), np.inf)
            drops = np.zeros(len(self.directions), np.int64)
            losses = np.zeros(len(self.directions), np.int64)
            departures, arrivals, row_base, seg_link, seg_row, seg_count, seg_tuple, lost, full = solve_window(
                blocks.first,
                blocks.count,
                self.hop_start,
                self.hop_link,
                self.hop_round,
                self.parent,
                self.tap,
                self.rank,
                self.rounds,
                self.bandwidth,
                self.latency,
                self.busy,
                blocks.emitted,
                blocks.parents,
                blocks.wire,
                arrival_min,
                self.buffer,
                self.ring_of,
                self.ring_start,
                self.ring_bytes,
                self.ring_head,
                self.ring_count,
                self.ring_waiting,
                drops,
                self.down_first,
                self.down_start,
                self.down_end,
                losses,
            )
            if full < 0:
                break
            # a ring outgrew its places: twice as many for every ring, and the window again from the start
            assert saved is not None
            self._restore(saved.widened(2 * saved.ring_start.shape[1]))
            saved = self.state()
        fresh = np.isinf(self.first_arrival)
        self.first_arrival[fresh] = arrival_min[fresh]
        present = np.flatnonzero(blocks.count > 0)  # the segments are each present channel's hops, in order
        streams = np.repeat(self.stream[present], self.hops[present])
        self.meter.cross_runs(
            self.directions, seg_link, seg_row, seg_count, seg_tuple, blocks.wire, departures, self.latency, arrivals,
            streams,
        )  # fmt: skip
        self.meter.dropped_at(drops)
        self.meter.lost_at(losses)
        sinks = np.flatnonzero((self.sink >= 0) & (blocks.count > 0))
        if not len(sinks):
            return
        for c in sinks[~self._told[sinks]].tolist():
            self.meter.received_attrs(self.routes[c].sink, self.routes[c].attrs)
        self._told[sinks] = True
        # a delivery crosses one access link: its rows are its tuples at hop 0
        count = blocks.count[sinks]
        offsets = np.concatenate([[0], np.cumsum(count)[:-1]])
        within = np.arange(int(count.sum())) - np.repeat(offsets, count)
        rows = np.repeat(row_base[sinks], count) + within
        tuples = np.repeat(blocks.first[sinks], count) + within
        arrival = departures[rows] + np.repeat(self.latency[self.hop_link[self.hop_start[sinks]]], count)
        if self.failures:  # a copy lost at a failure arrives at -inf (a dropped one at NaN)
            arrival[lost[rows]] = -np.inf
        self.meter.deliver_many(self.sink[sinks], count, blocks.indices[tuples], arrival - blocks.emitted[tuples])


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


@njit(cache=True)
def _gap_serve(arrival, service, busy_until, starts, ends, out):
    """Serve in the given order, each tuple in the first gap of the intervals ``starts``/``ends`` (sorted
    by start, disjoint) at or after its arrival and the previous departure that holds its service; nothing
    before ``busy_until`` (tests compare it to a plain first fit).  The time each tuple is ready (its
    arrival, or the previous departure if later) never decreases, so one cursor walks the intervals once."""
    previous = busy_until
    i = 0
    for j in range(len(arrival)):
        previous, i = _gap_next(arrival[j] if arrival[j] > previous else previous, service[j], starts, ends, i)
        out[j] = previous


@njit(cache=True)
def _gap_next(t, service, starts, ends, i):
    """The departure of a tuple ready at ``t`` served in the first gap that holds ``service``, and the
    cursor for the next tuple: the intervals before ``i`` end no later than ``t`` (ends ascend, as the
    intervals are disjoint and sorted by start)."""
    while i < len(ends) and ends[i] <= t:
        i += 1
    while i < len(starts) and starts[i] < t + service:
        if ends[i] > t:
            t = ends[i]
        i += 1
    return t + service, i


@njit(cache=True)
def _lost_at(fail, begin, done):
    """A tuple caught by a failure at ``fail`` (it would have started on the wire at ``begin`` and left it at
    ``done``): when it stops waiting in the buffer and when the wire is free again.  The failure empties the
    queue, so neither is later than ``fail``."""
    return (begin if begin < fail else fail), (done if done < fail else fail)


@njit(cache=True)
def solve_window(
    ch_first,
    ch_count,
    hop_start,
    hop_link,
    hop_round,
    ch_parent,
    ch_tap,
    rank,
    rounds,
    bandwidth,
    latency,
    busy,
    emitted,
    parents,
    wire,
    arrival_min,
    buffer,
    ring_of,
    ring_start,
    ring_bytes,
    ring_head,
    ring_count,
    ring_waiting,
    drops,
    down_first,
    down_start,
    down_end,
    losses,
):
    """Departures of one window's tuples at every hop (module docstring), updating ``busy``; sets
    ``arrival_min[k]`` to the earliest arrival at link ``k`` in the window (``inf``: none).

    A *segment* is one channel at one hop: its tuples cross one link in index order, as rows ``row ..
    row + count - 1`` (hop ``h`` of channel ``c``'s ``j``-th tuple is row ``row_base[c] + h * count + j``).
    A link with a finite ``buffer`` drops at the tail (:func:`admit`, its waiting tuples in ring
    ``ring_of[k]``), counting in ``drops[k]``; a dropped tuple's row and every row after it (its next hops,
    what reads it further on) depart at NaN.  Link ``k`` is down over the intervals ``down_first[k] ..
    down_first[k + 1] - 1`` of ``down_start``/``down_end`` (disjoint, ascending; none at all: no
    failures, and no work for them): a tuple caught by one is lost (:func:`_lost_at`), counting in
    ``losses[k]``, and departs at NaN like a dropped one, as do the rows after it.  Returns the departure
    of every row, its arrival at its link's queue (NaN: dropped or lost before; what the offered load is
    made of), ``row_base``, per segment its link, first row, count and first tuple (a position in the
    window's flat arrays), per row whether it is lost rather than dropped (an empty array when no link is
    ever down), and -1; or, as soon as a ring is full, that ring's number (then the rest is unfinished and
    ``busy`` and the rings changed: the caller widens the rings and solves the window again from its saved
    state)."""
    n_links = len(bandwidth)
    n_ch = len(ch_count)
    row_base = np.full(n_ch, -1, np.int64)
    total = 0
    segments = 0
    for c in range(n_ch):
        if ch_count[c] > 0:
            row_base[c] = total
            total += ch_count[c] * (hop_start[c + 1] - hop_start[c])
            segments += hop_start[c + 1] - hop_start[c]
    seg_link = np.empty(segments, np.int64)
    seg_row = np.empty(segments, np.int64)
    seg_count = np.empty(segments, np.int64)
    seg_tuple = np.empty(segments, np.int64)
    seg_group = np.empty(segments, np.int64)
    groups = np.zeros(rounds * n_links + 1, np.int64)  # rows per group, then where each group starts
    seg_groups = np.zeros(rounds * n_links + 1, np.int64)
    start = np.full(len(emitted), -1, np.int64)  # per tuple, the row it reaches its channel's first node by
    start_link = np.full(len(emitted), -1, np.int64)  # and that row's link
    seg_before = np.empty(segments, np.int64)  # the link of the hop before (-1: the channel's first hop)
    q = 0
    for c in range(n_ch):
        n = ch_count[c]
        if n == 0:
            continue
        f = ch_first[c]
        p = ch_parent[c]
        if p >= 0:
            for j in range(n):
                if ch_tap[c] >= 1:
                    start[f + j] = row_base[p] + (ch_tap[c] - 1) * ch_count[p] + parents[f + j]
                    start_link[f + j] = hop_link[hop_start[p] + ch_tap[c] - 1]
                else:
                    start[f + j] = start[ch_first[p] + parents[f + j]]
                    start_link[f + j] = start_link[ch_first[p] + parents[f + j]]
        for h in range(hop_start[c + 1] - hop_start[c]):
            k = hop_link[hop_start[c] + h]
            g = hop_round[hop_start[c] + h] * n_links + rank[k]
            seg_link[q], seg_row[q], seg_count[q], seg_tuple[q], seg_group[q] = k, row_base[c] + h * n, n, f, g
            seg_before[q] = hop_link[hop_start[c] + h - 1] if h > 0 else -1
            groups[g + 1] += n
            seg_groups[g + 1] += 1
            q += 1
    widest = 0
    for g in range(len(groups) - 1):
        widest = max(widest, groups[g + 1])
        groups[g + 1] += groups[g]
        seg_groups[g + 1] += seg_groups[g]
    order = np.empty(segments, np.int64)  # segments by group, each group's in channel order
    fill = seg_groups[:-1].copy()
    for q in range(segments):
        order[fill[seg_group[q]]] = q
        fill[seg_group[q]] += 1
    departures = np.empty(total)
    window_busy = busy.copy()
    keys = np.empty(widest)
    rows = np.empty(widest, np.int64)
    tuples = np.empty(widest, np.int64)
    picks = np.empty(widest, np.int64)
    buffer_keys = np.empty(widest)
    buffer_picks = np.empty(widest, np.int64)
    arrivals = np.full(total, np.nan)  # per row, when it reached its link's queue (NaN: it never did)
    failures = len(down_start) > 0
    lost = np.zeros(total if failures else 0, np.bool_)  # per row: NaN because lost at a failure
    for g in range(rounds * n_links):
        if seg_groups[g] == seg_groups[g + 1]:
            continue
        m = 0
        for i in range(seg_groups[g], seg_groups[g + 1]):
            q = order[i]
            n, row0, f = seg_count[q], seg_row[q], seg_tuple[q]
            before = seg_before[q]
            for j in range(n):
                row = row0 + j
                source = -1
                if before >= 0:  # from the channel's previous hop
                    source = row - n
                    key = departures[source] + latency[before]
                elif start[f + j] >= 0:  # from where the channel is read off its parent
                    source = start[f + j]
                    key = departures[source] + latency[start_link[f + j]]
                else:
                    key = emitted[f + j]
                if np.isnan(key):  # dropped or lost before it got here
                    departures[row] = np.nan
                    if failures:
                        lost[row] = lost[source]
                    continue
                keys[m] = key
                rows[m], tuples[m], picks[m] = row, f + j, m
                m += 1
        if m == 0:
            continue
        _merge_runs(keys[:m], picks[:m], buffer_keys, buffer_picks)
        k = seg_link[order[seg_groups[g]]]
        if keys[0] < arrival_min[k]:
            arrival_min[k] = keys[0]
        ring = ring_of[k]
        r = g // n_links
        # the down interval that may catch the tuple at hand: the first ending after its arrival (arrivals
        # ascend within the group); ``down < last`` is false for a link never down
        down, last = down_first[k], down_first[k + 1]
        if down < last:
            down += np.searchsorted(down_end[down:last], keys[0], side="right")
        if r == 0:
            free = busy[k]
            for i in range(m):
                a = keys[i]
                w = wire[tuples[picks[i]]]
                arrivals[rows[picks[i]]] = a  # offered, dropped, lost or not
                if down < last:
                    while down < last and down_end[down] <= a:
                        down += 1
                    if down < last and down_start[down] <= a:  # the link is down: lost, the wire untouched
                        departures[rows[picks[i]]] = np.nan
                        lost[rows[picks[i]]] = True
                        losses[k] += 1
                        continue
                if ring >= 0 and not admit(
                    a, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting, buffer[k]
                ):
                    departures[rows[picks[i]]] = np.nan
                    drops[k] += 1
                    continue
                begin = a if a > free else free
                done = begin + w * 8.0 / bandwidth[k]
                if down < last and down_start[down] <= done + latency[k]:
                    # caught by the failure: the wire is free again from it, as is the buffer
                    begin, done = _lost_at(down_start[down], begin, done)
                    departures[rows[picks[i]]] = np.nan
                    lost[rows[picks[i]]] = True
                    losses[k] += 1
                    if done > free:
                        free = done
                else:
                    free = done
                    departures[rows[picks[i]]] = done
                if ring >= 0 and not enqueue(
                    begin, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting
                ):
                    return departures, arrivals, row_base, seg_link, seg_row, seg_count, seg_tuple, lost, ring
            busy[k] = free
            continue
        # a later round: in the gaps the window's earlier rounds left at this link
        served = 0
        for earlier in range(r):
            e = earlier * n_links + rank[k]
            served += groups[e + 1] - groups[e]
        starts = np.empty(served)
        ends = np.empty(served)
        served = 0
        for earlier in range(r):
            e = earlier * n_links + rank[k]
            for i in range(seg_groups[e], seg_groups[e + 1]):
                q = order[i]
                for j in range(seg_count[q]):
                    if np.isnan(departures[seg_row[q] + j]):
                        continue  # dropped: it never took the wire
                    ends[served] = departures[seg_row[q] + j]
                    starts[served] = ends[served] - wire[seg_tuple[q] + j] * 8.0 / bandwidth[k]
                    served += 1
        by_start = np.argsort(starts[:served], kind="mergesort")
        starts, ends = starts[:served][by_start], ends[:served][by_start]
        previous = window_busy[k]
        cursor = 0
        for i in range(m):
            a = keys[i]
            w = wire[tuples[picks[i]]]
            arrivals[rows[picks[i]]] = a
            if down < last:
                while down < last and down_end[down] <= a:
                    down += 1
                if down < last and down_start[down] <= a:
                    departures[rows[picks[i]]] = np.nan
                    lost[rows[picks[i]]] = True
                    losses[k] += 1
                    continue
            if ring >= 0 and not admit(
                a, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting, buffer[k]
            ):
                departures[rows[picks[i]]] = np.nan
                drops[k] += 1
                continue
            service = w * 8.0 / bandwidth[k]
            done, after = _gap_next(a if a > previous else previous, service, starts, ends, cursor)
            begin = done - service
            if down < last and down_start[down] <= done + latency[k]:
                # lost as in round 0; the gap cursor stays, as the next tuple may start before ``done``
                begin, done = _lost_at(down_start[down], begin, done)
                departures[rows[picks[i]]] = np.nan
                lost[rows[picks[i]]] = True
                losses[k] += 1
            else:
                cursor = after
                departures[rows[picks[i]]] = done
            if done > previous:
                previous = done
            if done > busy[k]:
                busy[k] = done
            if ring >= 0 and not enqueue(begin, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting):
                return departures, arrivals, row_base, seg_link, seg_row, seg_count, seg_tuple, lost, ring
    return departures, arrivals, row_base, seg_link, seg_row, seg_count, seg_tuple, lost, -1


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
        raise AssertionError("the dependency graph without its cycle-closing edges is acyclic")
    return np.array(level, dtype=np.int64)


def cycle_closing_edges(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The back edges of a depth-first search over the nodes (sorted, so deterministic)."""
    succ: dict[int, list[int]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    for targets in succ.values():
        targets.sort()
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    back: set[tuple[int, int]] = set()
    for root in sorted(succ):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(succ.get(root, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ.get(nxt, ()))))
    return back


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds the simulator's main kernel (a run before compiled it): if not,
    the first run compiles the kernels, tens of seconds, and caches them for every later run."""
    # numba's index of the kernel's compiled versions: empty when missing, or stale after the source changed
    return bool(solve_window._cache._cache_file._load_index())
