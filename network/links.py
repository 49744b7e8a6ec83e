"""One link direction as a FIFO queue, served a batch round at a time (later rounds of a window in the gaps).

A tuple of ``b`` bytes arriving at time ``a`` leaves the sender at ``d = max(a, d_prev) + 8 b / bandwidth``
(serialisation behind the tuples queued before it) and reaches the far end at ``d + latency``.  The
recurrence is vectorised: with ``S_k`` the cumulative service time and ``B`` the time the link is busy
until, ``d_k = S_k + max(B, max_{j<=k}(a_j - S_{j-1}))``, i.e. one ``cumsum`` and one
``maximum.accumulate`` per round.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np


def fifo_departures(arrivals: np.ndarray, service: np.ndarray, busy_until: float) -> np.ndarray:
    """Departure times of tuples served in the given order (``arrivals`` need not be sorted)."""
    finish = np.cumsum(service)
    waiting_start = np.maximum.accumulate(np.maximum(arrivals - (finish - service), busy_until))
    return finish + waiting_start


@dataclass
class Parcel:
    """A batch waiting at a link: tuple indices, their values, wire sizes and arrival times.

    ``lane`` breaks ties between tuples arriving at the same instant (then the tuple index does);
    ``tag`` is whatever the simulator needs to route the parcel on.
    """

    tag: Hashable
    lane: int
    indices: np.ndarray
    columns: dict[str, np.ndarray]
    wire_bytes: np.ndarray
    ready: np.ndarray


@dataclass
class LinkQueue:
    """The FIFO of one link direction, served in rounds.

    A round is a group of parcels known in advance (``expected[w]``: for window ``w``, the number of
    parcels of each round, in serving order).  A round is served once all its parcels are in and every
    earlier round has been served; the tuples of a round are merged by (arrival, lane, index) and served
    FIFO.  The first round of a window queues behind everything served before it.  A later round of the
    same window (parcels that arrive over a cycle-closing edge, see :mod:`network.simulator`) is served in
    the gaps the window's earlier rounds left on the link: a tuple starts at its arrival, or once the link
    is free for its whole service time, never moving a tuple already served.  So a later round waits only
    for the link to be free, not for the end of the window's earlier rounds.
    """

    bandwidth: float  # bit/s
    latency: float  # s
    expected: list[Sequence[int]]  # per window, appended as the simulator reaches it
    busy_until: float = 0.0
    _waiting: dict[tuple[int, int], list[Parcel]] = field(default_factory=dict)
    _cursor: tuple[int, int] = (0, 0)
    _window_busy: float = 0.0  # busy-until before the current window's first round
    _starts: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the current window's service intervals,
    _ends: np.ndarray = field(default_factory=lambda: np.zeros(0))  # sorted and disjoint

    def put(self, window: int, round_: int, parcel: Parcel) -> list[tuple[list[Parcel], np.ndarray, np.ndarray]]:
        """Queue ``parcel``; returns the rounds that became servable, each as (parcels, departures, arrivals
        at the far end) with the times split per parcel in a flat array aligned with the parcels' tuples."""
        self._waiting.setdefault((window, round_), []).append(parcel)
        served = []
        while True:
            w, r = self._cursor
            if w >= len(self.expected):
                break
            rounds = self.expected[w]
            if r >= len(rounds):
                self._cursor = (w + 1, 0)
                continue
            parcels = self._waiting.get((w, r), [])
            if len(parcels) < rounds[r]:
                break
            self._waiting.pop((w, r), None)
            if r == 0:
                self._window_busy = self.busy_until
                self._starts = self._ends = np.zeros(0)
            if parcels:
                served.append(self._serve(parcels, later=r > 0, keep=any(rounds[r + 1 :])))
            self._cursor = (w, r + 1)
        return served

    def idle(self) -> bool:
        """True when every expected round has been served."""
        w, r = self._cursor
        ahead = (
            [*self.expected[w][r:], *(n for later in self.expected[w + 1 :] for n in later)]
            if w < len(self.expected)
            else []
        )
        return not self._waiting and not any(ahead)

    def _serve(self, parcels: list[Parcel], later: bool, keep: bool) -> tuple[list[Parcel], np.ndarray, np.ndarray]:
        """Serve one round; ``later``: not the window's first; ``keep``: a later round follows, so remember
        the service intervals."""
        ready = np.concatenate([p.ready for p in parcels]) if parcels else np.zeros(0)
        wire = np.concatenate([p.wire_bytes for p in parcels]) if parcels else np.zeros(0, np.int64)
        service = wire * 8.0 / self.bandwidth
        if len(parcels) > 1 and len(ready):
            # merge by arrival; within one parcel tuples are already in (arrival, index) order
            lanes = np.concatenate([np.full(len(p.ready), p.lane) for p in parcels])
            indices = np.concatenate([p.indices for p in parcels])
            order = np.lexsort((indices, lanes, ready))
        else:
            order = np.arange(len(ready))
        if later:
            served = gap_departures(ready[order], service[order], self._window_busy, self._starts, self._ends)
        else:
            served = fifo_departures(ready[order], service[order], self.busy_until)
        departures = np.empty_like(ready)
        departures[order] = served
        if len(departures):
            self.busy_until = max(self.busy_until, float(departures.max()))
        if len(departures) and keep:
            starts = np.concatenate([self._starts, served - service[order]])
            ends = np.concatenate([self._ends, served])
            by_start = np.argsort(starts, kind="stable")
            self._starts, self._ends = starts[by_start], ends[by_start]
        return parcels, departures, departures + self.latency


def gap_departures(
    arrivals: np.ndarray, service: np.ndarray, busy_until: float, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """Departure times of tuples served in the given order, each in the first gap of the link's existing
    service intervals (``starts``/``ends``: sorted, disjoint) at or after both its arrival and the previous
    tuple's departure that holds its whole service time; nothing starts before ``busy_until``."""
    departures = fifo_departures(arrivals, service, busy_until)
    if not len(departures) or not len(starts):
        return departures
    # the common case: every tuple already falls in a gap (only the interval starting last before a
    # tuple's departure can overlap it, the intervals being disjoint)
    before = np.searchsorted(starts, departures, side="left") - 1
    if not np.any((before >= 0) & (ends[np.maximum(before, 0)] > departures - service)):
        return departures
    out = np.empty_like(departures)
    previous = busy_until
    for j, (a, s) in enumerate(zip(arrivals.tolist(), service.tolist(), strict=True)):
        t = max(a, previous)
        i = int(np.searchsorted(ends, t, side="right"))  # the first interval still busy after t
        while i < len(starts) and starts[i] < t + s:
            t = max(t, float(ends[i]))
            i += 1
        previous = out[j] = t + s
    return out
