"""The link rule: what one link direction does with one tuple copy, in exact integer time.

Every engine moves tuples over the emulated links with these functions and nothing else: the local queue
solver (network/queues.py, which Spark's chunks run too) and the live mode's link queues
(peers/live/links.py).  docs/ACCOUNTING.md states the model in words.

**Time is counted in ticks** of one picosecond (:data:`TICKS` per second), as 64-bit integers: emission
times, latencies, down intervals, the wire's clock, buffer start times.  A sum or comparison of ticks is
exact, so no rounding can decide whether two events coincide: a tuple that starts on the wire at the very
tick another arrives is the same tick in every engine, on every machine, however the run is cut into
windows.  Seconds become ticks once, rounded to the nearest tick (:func:`to_ticks`), when a run starts; a
tuple's service time is ``8 b / bandwidth`` rounded to the nearest tick (:func:`service`), the
same for every copy of its size.  64-bit ticks reach 106 days; a run lasts at most 46
(``topologies.loader.LONGEST_RUN_S``) and no copy leaves a wire later than :data:`LATE`, so no sum of
ticks overflows.

**The rule** (:func:`cross`), for a copy of ``w`` bytes reaching the queue at tick ``a`` whose service
would begin at ``begin`` (``max(a, wire free)`` for a FIFO; in the live mode, a copy that reaches a
queue after later ones were sent is served in a gap, :func:`gap`):

1. lost if the direction is down at ``a`` (it never takes the wire nor a place in the buffer);
2. dropped if the buffer cannot hold it (tail drop, :func:`network.buffers.admit`);
3. otherwise it holds the wire ``[begin, begin + service)`` and reaches the far end ``latency`` later,
   unless the direction fails before it gets there: then it is lost, and the failure frees the wire and
   the buffer (it holds neither past the failure);
4. an admitted copy waits in the buffer until ``begin`` (:func:`network.buffers.enqueue`).

**Ties.** Copies reaching one queue at the same tick are served by channel number, then tuple index (the
callers order them so); a copy starting on the wire at tick ``a`` no longer waits in the buffer for a copy
arriving at ``a``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from network.buffers import NEVER, admit, enqueue

TICKS = 10**12  # ticks per second: picoseconds
NONE = np.int64(-1)  # no time: the copy was dropped or lost before it got here (times are never negative)
# A copy is never later than LATE on the wire (a link of a thousandth of a bit per second would otherwise run
# the clock past its end): beyond any run (topologies.loader.LONGEST_RUN_S), and a sum of two such times and a
# latency (at most a day) still fits the clock.
LATE = NEVER // 2 - 10**17
CARRIED, DROPPED, LOST, FULL = 0, 1, 2, 3  # a copy's fate at a link (FULL: the buffer's ring needs more places)


def to_ticks(seconds: np.ndarray | float) -> np.ndarray:
    """Seconds as ticks, each rounded to the nearest (``inf`` becomes :data:`NEVER`)."""
    s = np.asarray(seconds, dtype=np.float64)
    return _ticks(s.ravel()).reshape(s.shape)


def to_seconds(ticks: np.ndarray) -> np.ndarray:
    """Ticks as seconds (:data:`NONE` and any other negative tick, a copy that got nowhere, become NaN)."""
    t = np.asarray(ticks, dtype=np.int64)
    return _seconds(t.ravel()).reshape(t.shape)


@njit(cache=True)
def _ticks(seconds):
    out = np.empty(len(seconds), np.int64)
    for i in range(len(seconds)):
        out[i] = NEVER if seconds[i] == np.inf else np.int64(np.rint(seconds[i] * TICKS))
    return out


@njit(cache=True)
def _seconds(ticks):
    out = np.empty(len(ticks))
    for i in range(len(ticks)):
        out[i] = ticks[i] / TICKS if ticks[i] >= 0 else np.nan
    return out


@njit(cache=True, inline="always")
def service(w, bandwidth):
    """Ticks a copy of ``w`` bytes holds a wire of ``bandwidth`` bit/s: ``8 w / bandwidth`` seconds, rounded to
    the nearest tick (halves up; exactly, in integers, for a whole number of bits per second and any copy
    below a megabyte), and no more than :data:`LATE`."""
    bits = np.int64(w) * 8
    if bandwidth == np.floor(bandwidth) and bandwidth < 2.0**62 and bits <= NEVER // TICKS:
        whole = np.int64(bandwidth)
        return min((bits * TICKS + whole // 2) // whole, LATE)
    ticks = np.rint(bits * (TICKS / bandwidth))
    return LATE if ticks >= LATE else np.int64(ticks)


@njit(cache=True, inline="always")
def processing(ops, cpu):
    """Ticks a super-peer's processor of ``cpu`` operations per second (``inf``: unlimited, no time) takes
    over ``ops`` operations: ``ops / cpu`` seconds rounded to the nearest tick (halves up; exactly, in
    integers, for a whole number of operations per second), no more than :data:`LATE`."""
    if ops <= 0 or cpu == np.inf:
        return np.int64(0)
    if cpu == np.floor(cpu) and cpu < 2.0**62 and ops <= NEVER // TICKS:
        whole = np.int64(cpu)
        return min((np.int64(ops) * TICKS + whole // 2) // whole, LATE)
    ticks = np.rint(ops * (TICKS / cpu))
    return LATE if ticks >= LATE else np.int64(ticks)


@njit(cache=True, inline="always")
def gap(t, length, starts, ends, i):
    """The first start ``>= t`` of a gap of ``length`` ticks between the busy intervals ``starts``/``ends``
    (disjoint, by start), and the cursor for the next copy: the intervals before ``i`` end no later than
    ``t``; a copy served late never delays one already served."""
    while i < len(ends) and ends[i] <= t:
        i += 1
    while i < len(starts) and starts[i] < t + length:
        if ends[i] > t:
            t = ends[i]
        i += 1
    return t, i


@njit(cache=True, inline="always")
def cross(a, w, begin, length, latency, fail, recover, ring, rings, buffer):
    """The rule (module docstring) for a copy of ``w`` bytes reaching the queue at ``a``, whose service of
    ``length`` ticks would begin at ``begin``; ``(fail, recover)`` is the direction's first down interval
    ending after ``a`` (:data:`NEVER` twice: none), ``ring`` its buffer's ring in ``rings`` (-1: no
    buffer).  Returns ``(fate, begin, done)``: the copy holds the buffer until ``begin`` and the wire until
    ``done`` (both no later than a failure that catches it; unused when it never took a place), and
    reaches the far end at ``done + latency`` when carried.  :data:`FULL`: the ring has no place left,
    nothing changed (the caller widens the rings and starts over)."""
    ring_start, ring_bytes, ring_head, ring_count, ring_waiting = rings
    if fail <= a and a < recover:
        return LOST, a, a
    if ring >= 0 and not admit(a, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting, buffer):
        return DROPPED, a, a
    done = min(begin + length, LATE)
    fate = CARRIED
    if fail <= done + latency:  # queued, on the wire or on its way at the failure: it empties the queue
        fate = LOST
        begin = min(begin, fail)
        done = min(done, fail)
    if ring >= 0 and not enqueue(begin, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting):
        return FULL, begin, done
    return fate, begin, done


@njit(cache=True, inline="always")
def down_at(a, cursor, last, down_start, down_end):
    """The down interval that may catch a copy reaching the queue at ``a``: the first of ``cursor ..
    last - 1`` ending after ``a`` (arrivals ascend, so the cursor only moves on); returns it as
    ``(cursor, fail, recover)``, :data:`NEVER` twice when there is none."""
    while cursor < last and down_end[cursor] <= a:
        cursor += 1
    if cursor < last:
        return cursor, down_start[cursor], down_end[cursor]
    return cursor, NEVER, NEVER
