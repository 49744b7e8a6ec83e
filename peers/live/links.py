"""Link emulation for the live mode: each link direction's latency, bandwidth, buffer and failures.

The live mode computes when each tuple reaches the far end of a link direction the way the simulator does
(docs/ARCHITECTURE.md, "The engines"; network/queues.py), from emulated times stamped on the tuples rather
than from the wall clock: a tuple of ``b`` bytes reaching the queue at ``a`` leaves at ``max(a, link
free) + 8 b / bandwidth`` and arrives ``latency`` later, in FIFO order of arrival.  A direction with a
finite buffer drops at the tail.  Every step is the link rule all engines use (network/linkrule.py), in
its integer ticks.  The sender of a direction (a super-peer, or a thin-peer for its
upload) runs its :class:`LinkQueue` and stamps each tuple with its due arrival; the receiver holds it
until then (see peers/live/superpeer_service.py), so a subscriber sees the modelled latency and queueing.

Failures (docs/DYNAMICS.md): a direction is down while its link or either end is down.  A tuple that
enters the queue at ``a`` and would reach the far end at ``d`` is **lost** iff the direction is down at
some moment of ``[a, d]``; a failure empties the queue and frees the wire from the failure time.  Both
directions of a thin-peer's access link are down while its super-peer is, as in the local engine
(peers/local.py): a tuple uploaded to a failed super-peer, or delivered from one, is lost like one on a
backbone link.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numba import njit

from network.buffers import NEVER
from network.emulated import down_directions, link_specs
from network.linkrule import (
    CARRIED,
    DROPPED,
    FULL,
    LOST,
    NONE,
    cross,
    down_at,
    gap,
    processing,
    service,
    to_seconds,
    to_ticks,
)
from topologies.model import Direction, Scenario

LOOKAHEAD_S = 1.0  # wall seconds a super-peer serves a tuple before it is due: the broker's delay fits in it
__all__ = ["CARRIED", "DROPPED", "LOST", "LinkQueue", "LinkTable", "down_spans"]
FATES = {DROPPED: "dropped", LOST: "lost"}  # how a part of tuples that did not cross is marked on the wire
_NO_DOWNS = np.zeros((0, 2))


def down_spans(scenario: Scenario) -> dict[Direction, np.ndarray]:
    """Per link direction that is ever down, its down intervals ``[fail, recover)`` as rows of an array
    (``inf``: never recovered): the local engine's (:func:`network.emulated.down_directions`), backbone and
    access."""
    return {d: np.array(v, dtype=np.float64).reshape(-1, 2) for d, v in down_directions(scenario).items()}


class LinkQueue:
    """One link direction's FIFO queue, as its sender runs it over the run: :meth:`send` takes tuples in
    order of their arrival at the queue and gives each its arrival at the far end and its fate, by the
    link rule every engine uses (:func:`network.linkrule.cross`), in ticks.

    A node serves its tuples in passes (peers/live/superpeer_service.py), so a tuple may reach the queue
    after tuples that arrived later than it in emulated time (they came by another link, in an earlier
    pass).  Such a tuple is served in the first gap the wire had at or after its arrival
    (:func:`network.linkrule.gap`), never delaying a tuple already served (it is on its way): where tuples
    do not contend, that is the time of the FIFO in arrival order, which the simulator keeps exactly
    (network/queues.py, "Horizon").  The wire's busy intervals are kept for ``keep_s`` emulated seconds for that (the
    longest a tuple can come after later ones: a node's pass reaches that far ahead,
    :meth:`LinkTable.keep`).  Times cross the wire as float seconds and become ticks here, exactly for the
    first 75 minutes of emulated time (the float's 52 bits of picoseconds)."""

    keep_s = 10.0

    def __init__(
        self,
        bandwidth: float,
        latency: float,
        buffer: float = math.inf,
        downs: np.ndarray = _NO_DOWNS,
        cpu: float = -1.0,
    ):
        self.bandwidth = float(bandwidth)
        self.cpu = float(cpu)  # -1: a link; else a super-peer's processor (peers/live/processors.py)
        self.latency = int(to_ticks(float(latency)))
        self.buffer = int(buffer) if math.isfinite(buffer) else NEVER
        downs = np.asarray(downs, dtype=np.float64).reshape(-1, 2)
        self.down_start, self.down_end = to_ticks(downs[:, 0]), to_ticks(downs[:, 1])
        # the wire's busy intervals (by start; disjoint, so by end too) and the latest arrival served
        self.busy_start, self.busy_end = np.zeros(64, np.int64), np.zeros(64, np.int64)
        self.busy = np.zeros(1, np.int64)
        self.last = np.full(1, -1, np.int64)
        # the buffer's waiting tuples: one ring (network/buffers.py), widened when full
        self.ring_start, self.ring_bytes = np.zeros((1, 16), np.int64), np.zeros((1, 16), np.int64)
        self.ring_head, self.ring_count = np.zeros(1, np.int64), np.zeros(1, np.int64)
        self.ring_waiting = np.zeros(1, np.int64)

    def send(self, arrivals: np.ndarray, wire: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per tuple (``arrivals`` ascending: emulated seconds it reaches the queue; ``wire``: its bytes), when
        it reaches the far end and its fate (:data:`CARRIED`, :data:`DROPPED` at a full buffer, :data:`LOST`
        at a failure; the arrival is NaN for those)."""
        wire = np.ascontiguousarray(wire, dtype=np.int64)
        due, fate = self.send_ticks(to_ticks(np.ascontiguousarray(arrivals, dtype=np.float64)), wire, wire)
        return to_seconds(due), fate

    def send_ticks(self, arrivals: np.ndarray, wire: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`send` in ticks (``arrivals`` ascending; the due ticks :data:`~network.linkrule.NONE` for a
        tuple that did not cross); a processor serves each tuple for its ``work`` (operations), a link for
        its bytes (``work`` is not read)."""
        n = len(arrivals)
        due, fate = np.full(n, NONE, np.int64), np.zeros(n, np.int8)
        if n:
            self._forget(min(int(arrivals[0]), int(self.last[0])) - int(to_ticks(self.keep_s)))
        start = 0
        while start < n:
            rings = (self.ring_start, self.ring_bytes, self.ring_head, self.ring_count, self.ring_waiting)
            start = _pace(
                arrivals, wire, work, start, self.bandwidth, self.cpu, self.latency, self.buffer, self.down_start,
                self.down_end, self.busy_start, self.busy_end, self.busy, self.last, rings, due, fate,
            )  # fmt: skip
            if start < n:
                self._widen()
        return due, fate

    def _forget(self, before: int) -> None:
        """Drop the busy intervals that ended before ``before`` once they are half of those kept (so each
        interval is copied a bounded number of times); make room for as many again."""
        count = int(self.busy[0])
        old = int(np.searchsorted(self.busy_end[:count], before, side="left"))
        if old and 2 * old >= count:
            kept = count - old
            self.busy_start[:kept], self.busy_end[:kept] = self.busy_start[old:count], self.busy_end[old:count]
            self.busy[0] = kept
        if 2 * self.busy[0] >= len(self.busy_start):
            self._widen()

    def _widen(self) -> None:
        """Twice the places for busy intervals and for the buffer's ring (oldest first)."""
        count = int(self.busy[0])
        starts, ends = np.zeros(2 * len(self.busy_start), np.int64), np.zeros(2 * len(self.busy_start), np.int64)
        starts[:count], ends[:count] = self.busy_start[:count], self.busy_end[:count]
        self.busy_start, self.busy_end = starts, ends
        width = 2 * self.ring_start.shape[1]
        at = (self.ring_head[0] + np.arange(self.ring_count[0])) % self.ring_start.shape[1]
        waiting, sizes = self.ring_start[0, at], self.ring_bytes[0, at]
        self.ring_start, self.ring_bytes = np.zeros((1, width), np.int64), np.zeros((1, width), np.int64)
        self.ring_start[0, : len(waiting)], self.ring_bytes[0, : len(sizes)] = waiting, sizes
        self.ring_head[0] = 0


class LinkTable:
    """The :class:`LinkQueue` of every direction a node sends on, made when first used."""

    def __init__(self, specs: Mapping[Direction, tuple[float, float, float]], downs: Mapping[Direction, np.ndarray]):
        self.specs, self.downs = specs, downs
        self.queues: dict[Direction, LinkQueue] = {}
        self.dropped: dict[Direction, int] = {}
        self.lost: dict[Direction, int] = {}
        self.keep_s = LinkQueue.keep_s

    def keep(self, seconds: float) -> None:
        """Keep each wire's busy intervals ``seconds`` of emulated time (:class:`LinkQueue`)."""
        self.keep_s = seconds
        for queue in self.queues.values():
            queue.keep_s = seconds

    @staticmethod
    def of(scenario: Scenario) -> LinkTable:
        """The table of ``scenario``'s links, its kernel compiled (or loaded) now rather than on the first
        tuple, whose latency it would add to."""
        LinkQueue(1.0, 0.0, 1.0).send(np.zeros(1), np.ones(1))
        return LinkTable(link_specs(scenario), down_spans(scenario))

    def send(self, direction: Direction, arrivals: np.ndarray, wire: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`LinkQueue.send` on ``direction``, counting its drops and losses."""
        queue = self.queues.get(direction)
        if queue is None:
            queue = self.queues[direction] = LinkQueue(*self.specs[direction], self.downs.get(direction, _NO_DOWNS))
            queue.keep_s = self.keep_s
        due, fate = queue.send(arrivals, wire)
        for code, counts in ((DROPPED, self.dropped), (LOST, self.lost)):
            n = int(np.count_nonzero(fate == code))
            if n:
                counts[direction] = counts.get(direction, 0) + n
        return due, fate


@njit(cache=True)
def _pace(
    arrivals, wire, work, start, bandwidth, cpu, latency, buffer, down_start, down_end, busy_start, busy_end, busy,
    last, rings, due, fate,
):  # fmt: skip
    """Serve tuples ``start ..`` (ticks, arrivals ascending; :class:`LinkQueue`) through the link rule as
    network/queues.py's FIFO does: :func:`~network.linkrule.down_at`, :func:`~network.linkrule.service`
    (for a processor, ``cpu >= 0``: :func:`~network.linkrule.processing` of the tuple's ``work``),
    :func:`~network.linkrule.cross` with the service beginning at ``max(a, wire free)``, the buffer's ring
    only for a finite buffer.  One case the simulator never meets: a tuple that reaches the queue after a
    later one was served (in an earlier pass) begins in the first gap the wire had at its arrival
    (:func:`~network.linkrule.gap`); beginning at ``max(a, wire free)`` would hold it behind every later
    tuple however idle the wire was.  Returns where it stopped: ``len(arrivals)``, or the tuple that found
    the busy intervals or the ring full (nothing changed for it: the caller widens them and goes on)."""
    ring = 0 if buffer != NEVER else -1
    down, size, length = 0, -1, 0  # the down interval cursor; the last size served and its service time
    for i in range(start, len(arrivals)):
        a, w = arrivals[i], wire[i]
        n = busy[0]
        if n == len(busy_start):
            return i
        # (a failure empties the queue by itself: the copies it catches hold the wire and the buffer no
        # later than it, and any other finished before it)
        down, fail, recover = down_at(a, down, len(down_start), down_start, down_end)
        if cpu >= 0:
            length = processing(work[i], cpu)
        elif w != size:
            size, length = w, service(w, bandwidth)
        if a >= last[0]:  # in arrival order: FIFO behind the wire's last copy
            free = busy_end[n - 1] if n > 0 else a
            begin, at = (a if a > free else free), n
        else:
            begin, at = gap(a, length, busy_start[:n], busy_end[:n], np.searchsorted(busy_end[:n], a, side="right"))
        code, begin, done = cross(a, w, begin, length, latency, fail, recover, ring, rings, buffer)
        if code == FULL:
            return i
        if code == DROPPED or (code == LOST and fail <= a):  # it took neither the wire nor the buffer
            fate[i] = code
            continue
        if done > begin:  # it held the wire (a copy caught by a failure, up to it)
            for m in range(n, at, -1):  # keep the intervals by start
                busy_start[m], busy_end[m] = busy_start[m - 1], busy_end[m - 1]
            busy_start[at], busy_end[at] = begin, done
            busy[0] = n + 1
        if a > last[0]:
            last[0] = a
        if code == LOST:
            fate[i] = code
            continue
        due[i] = done + latency
    return len(arrivals)
