"""Epoch boundaries and subscription events, shared by the planner and the baselines.

An epoch is an interval between consecutive subscription events (arrivals ``at``, departures ``until``)
inside ``[0, duration)``; the epochs cover ``[0, duration)`` without gaps.  Subscription ``s`` is active in
epoch ``[start, end)`` iff ``at <= start`` and ``until`` is absent or ``>= end``: boundaries include every
``at`` and ``until``, so a subscription is either active for a whole epoch or not at all, and a tuple
emitted at ``t`` (routed by the epoch with ``start <= t < end``) reaches exactly the subscriptions with
``at <= t < until``.
"""

from __future__ import annotations

from itertools import compress, count, pairwise
from operator import is_not
from typing import NamedTuple

from topologies.model import Scenario, SubscriptionSpec


class Event(NamedTuple):
    time: float
    kind: str  # "unsubscribe" or "subscribe"
    subscription: SubscriptionSpec


def boundaries(scenario: Scenario) -> list[float]:
    """Sorted epoch boundaries: 0, every event time inside (0, duration), and duration."""
    times = {0.0, float(scenario.duration)}
    for s in scenario.subscriptions:
        for t in (s.at, s.until):
            if t is not None and 0 < t < scenario.duration:
                times.add(float(t))
    return sorted(times)


def is_active(sub: SubscriptionSpec, start: float, end: float) -> bool:
    return sub.at <= start and (sub.until is None or sub.until >= end)


def timeline(scenario: Scenario) -> list[tuple[float, float, list[Event]]]:
    """Each epoch ``(start, end, events taking effect at start)``, in time order.

    At one instant departures come first, so freed flows are narrowed before new subscriptions look for
    streams to reuse; each kind in scenario order.
    """
    bounds = boundaries(scenario)
    starting: dict[float, list[Event]] = {t: [] for t in bounds}
    for s in scenario.subscriptions:
        if s.until is not None and s.at < s.until < scenario.duration:
            starting[float(s.until)].append(Event(float(s.until), "unsubscribe", s))
    for s in scenario.subscriptions:
        if s.at < scenario.duration and (s.until is None or s.at < s.until):
            arrival = max(0.0, float(s.at))
            starting[arrival].append(Event(arrival, "subscribe", s))
    return [(start, end, starting[start]) for start, end in pairwise(bounds)]


class EpochOrder:
    """The flows (or the deliveries) of the epochs read so far, diffed by identity one epoch to the next.

    :meth:`advance` only touches the objects between the longest common head and tail of two consecutive
    epochs (a pointer comparison over those); when an object is listed twice, the epoch (and the next) is
    diffed in full.  Where an object stands in the current epoch is asked in two ways: a ``ranked``
    sequence keeps :attr:`rank`, a number per object increasing along the epoch and renumbered only where
    the epoch changed (the flows: their order is asked about for every flow laid out); otherwise
    :meth:`positions` lists the whole epoch when asked (the deliveries: only those reading a flow that
    moved need it)."""

    def __init__(self, ranked: bool) -> None:
        self.ranked = ranked
        self.reset()

    def reset(self) -> None:
        self.items: tuple = ()
        self.shifted: list[int] = []
        self.rank: dict[int, float] = {}  # ranked: id -> rank, for every object of the epoch
        self.members: set[int] = set()  # not ranked: the ids of the epoch's objects
        self._twice = False
        self._positions: dict[int, int] | None = None

    def advance(self, items: tuple) -> tuple[list[int], list[int], bool]:
        """Move to the epoch listing ``items``: the ids of the objects that went, the positions of the
        objects that came (ascending; an object's first listing), and whether an object is listed twice.
        :attr:`shifted` then holds the ids of the objects whose place among the others may have changed
        (those between the parts both epochs start and end with)."""
        prev = self.items
        known = self.rank.keys() if self.ranked else self.members
        head = tail = 0
        if prev and not self._twice:
            short = min(len(prev), len(items))
            head = next(compress(count(), map(is_not, prev, items)), short)
            tail = min(next(compress(count(), map(is_not, reversed(prev), reversed(items))), short), short - head)
        old = list(map(id, prev[head : len(prev) - tail]))
        new = list(map(id, items[head : len(items) - tail]))
        old_set, new_set = set(old), set(new)
        came = new_set - old_set
        twice = len(new_set) < len(new) or not known.isdisjoint(came)
        if twice and (head or tail):  # listed twice, once in the part both epochs share: diff in full
            head = tail = 0
            new, old_set = list(map(id, items)), set(map(id, prev))
            new_set = set(new)
            came = new_set - old_set
        gone = list(old_set - new_set)
        self.items, self._twice, self._positions = items, twice, None
        self.shifted = new
        if twice:
            first = self.positions()
            if self.ranked:
                self.rank = {ident: float(p) for ident, p in first.items()}
            else:
                self.members = set(first)
            return gone, sorted(first[ident] for ident in came), True
        fresh = list(compress(count(head), map(came.__contains__, new)))
        if self.ranked:
            for ident in gone:
                del self.rank[ident]
            self._rank(head, len(items) - tail, new)
        else:
            self.members.difference_update(gone)
            self.members.update(came)
        return gone, fresh, False

    def positions(self) -> dict[int, int]:
        """Where each object of the current epoch is first listed (by id; built when first asked)."""
        if self._positions is None:
            ids = list(map(id, self.items))
            self._positions = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))
        return self._positions

    def _rank(self, start: int, stop: int, new: list[int]) -> None:
        """Rank ``new``, the ids of ``items[start:stop]``, between the ranks of their neighbours."""
        if not new:
            return
        rank, items, m = self.rank, self.items, len(new)
        lo = rank[id(items[start - 1])] if start > 0 else None
        hi = rank[id(items[stop])] if stop < len(items) else None
        if lo is None:
            lo = (hi if hi is not None else float(m)) - m - 1
        if hi is None:
            hi = lo + m + 1
        step = (hi - lo) / (m + 1)
        keys = [lo + step * j for j in range(1, m + 1)]  # non-decreasing: increasing if all distinct
        if not (lo < keys[0] and keys[-1] < hi and len(set(keys)) == m):
            # no room left between the neighbours: rank the whole epoch afresh
            self.rank = dict(zip(map(id, items), map(float, range(len(items))), strict=True))
            return
        rank.update(zip(new, keys, strict=True))
