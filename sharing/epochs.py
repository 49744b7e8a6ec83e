"""Epoch boundaries and subscription events, shared by the planner and the baselines.

An epoch is an interval between consecutive subscription events (arrivals ``at``, departures ``until``)
inside ``[0, duration)``; the epochs cover ``[0, duration)`` without gaps.  Subscription ``s`` is active in
epoch ``[start, end)`` iff ``at <= start`` and ``until`` is absent or ``>= end``: boundaries include every
``at`` and ``until``, so a subscription is either active for a whole epoch or not at all, and a tuple
emitted at ``t`` (routed by the epoch with ``start <= t < end``) reaches exactly the subscriptions with
``at <= t < until``.
"""

from __future__ import annotations

from itertools import compress, count, islice, pairwise
from operator import is_not
from typing import NamedTuple

from topologies.model import NetworkEvent, Scenario, SubscriptionSpec
from topologies.outages import NetworkState, event_times, network_states


class Event(NamedTuple):
    time: float
    kind: str  # "network", "unsubscribe" or "subscribe"
    subscription: SubscriptionSpec | None  # None for "network"
    state: NetworkState | None = None  # "network": the backbone from now on
    changes: tuple[NetworkEvent, ...] = ()  # "network": the scenario's events at this instant


def boundaries(scenario: Scenario) -> list[float]:
    """Sorted epoch boundaries: 0, every subscription and backbone event time inside (0, duration), and
    duration."""
    times = {0.0, float(scenario.duration)}
    times.update(t for t in event_times(scenario) if 0 < t < scenario.duration)
    for s in scenario.subscriptions:
        for t in (s.at, s.until):
            if t is not None and 0 < t < scenario.duration:
                times.add(float(t))
    return sorted(times)


def is_active(sub: SubscriptionSpec, start: float, end: float) -> bool:
    return sub.at <= start and (sub.until is None or sub.until >= end)


def timeline(scenario: Scenario) -> list[tuple[float, float, list[Event]]]:
    """Each epoch ``(start, end, events taking effect at start)``, in time order.

    At one instant a change of the backbone comes first (one "network" event carrying the new state and
    the scenario's events at that instant, docs/DYNAMICS.md), then departures, so freed flows are
    narrowed before new subscriptions look for streams to reuse; each kind in scenario order.
    """
    bounds = boundaries(scenario)
    starting: dict[float, list[Event]] = {t: [] for t in bounds}
    if scenario.events:
        for k, state in enumerate(network_states(scenario)):
            if k == 0 and state.intact:
                continue
            changes = tuple(e for e in scenario.events if float(e.at) == state.start)
            starting[state.start].append(Event(state.start, "network", None, state, changes))
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

    :meth:`advance` skips the longest head and tail two consecutive epochs share by a pointer comparison per
    object, from where the epochs' *parts* (when the planner gives them, :class:`Slots`) tell the objects are
    the same: a part that is the very tuple of the epoch before holds the very same objects, so the parts both
    epochs start and end with are skipped by a pointer comparison per part.  A long middle between them is
    walked side by side the same way, each run of objects both list in the same order skipped, so it costs about
    its changes while the objects kept stay in their order (a planner's epochs: objects put in and taken out,
    the deliveries in subscription order).  A short middle, or one whose kept objects changed order or that
    lists an object twice, is diffed by sets (when an object is listed twice, the epoch and the next in full).
    Where an object stands in the current epoch is asked in two ways: a ``ranked`` sequence keeps :attr:`rank`,
    a number per object increasing along the epoch and renumbered only where the epoch changed (the flows: their
    order is asked about for every flow laid out); otherwise :meth:`positions` lists the whole epoch when asked
    (the deliveries: only those reading a flow that moved need it)."""

    WALK_FROM = 48  # a middle (between the common head and tail) longer than this is walked, not diffed by sets
    MAX_CHANGES = 64  # a walk meeting more changes than this gives way to the diff by sets

    def __init__(self, ranked: bool) -> None:
        self.ranked = ranked
        self.reset()

    def reset(self) -> None:
        self.items: tuple = ()
        self.parts: tuple[tuple, ...] | None = None
        self.shifted: list[int] = []
        self.rank: dict[int, float] = {}  # ranked: id -> rank, for every object of the epoch
        self.members: set[int] = set()  # not ranked: the ids of the epoch's objects
        self._twice = False
        self._positions: dict[int, int] | None = None

    def advance(self, items: tuple, parts: tuple[tuple, ...] | None = None) -> tuple[list[int], list[int], bool]:
        """Move to the epoch listing ``items`` (the concatenation of ``parts``, when given): the ids of the
        objects that went, the positions of the objects that came (ascending; an object's first listing),
        and whether an object is listed twice.  :attr:`shifted` then holds the ids of the objects whose
        place among the others may have changed (the new ones when the kept ones kept their order; else
        those between the parts both epochs start and end with)."""
        known = self.rank.keys() if self.ranked else self.members
        prev = self.items
        head = tail = 0
        sure_head, sure_tail = same_ends(self.parts, parts)
        self.parts = parts
        if prev and not self._twice:
            short = min(len(prev), len(items))
            # each scan starts past the objects the parts tell are the same and stops where the other end's
            # are (an iterator of a tuple, either way, is put there: its state is its position); a part
            # listed anew with the same objects is so scanned once, not on to the end and back
            head = min(sure_head, short)
            tail = min(sure_tail, short - head)
            room = short - head - tail
            ahead = iter(prev), iter(items)
            for at in ahead:
                at.__setstate__(head)
            head += next(compress(count(), map(is_not, islice(ahead[0], room), ahead[1])), room)
            room = short - head - tail
            back = reversed(prev), reversed(items)
            for at, seq in zip(back, (prev, items), strict=True):
                at.__setstate__(len(seq) - 1 - tail)
            tail += next(compress(count(), map(is_not, islice(back[0], room), back[1])), room)
            walked = self._walk(prev, items, known, head, tail) if len(items) - tail - head > self.WALK_FROM else None
            if walked is not None:
                return self._walked(items, *walked)
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

    def _walked(self, items: tuple, gone: list[int], fresh: list[int]) -> tuple[list[int], list[int], bool]:
        """Move to ``items``, whose changes :meth:`_walk` found."""
        self.items, self._positions = items, None
        self.shifted = [id(items[p]) for p in fresh]
        if self.ranked:
            for ident in gone:
                del self.rank[ident]
            first = 0  # rank each run of consecutive new objects between its neighbours
            for k in range(1, len(fresh) + 1):
                if k == len(fresh) or fresh[k] != fresh[k - 1] + 1:
                    self._rank(fresh[first], fresh[k - 1] + 1, self.shifted[first:k])
                    first = k
        else:
            self.members.difference_update(gone)
            self.members.update(self.shifted)
        return gone, fresh, False

    def _walk(self, prev: tuple, items: tuple, known, head: int, tail: int) -> tuple[list[int], list[int]] | None:
        """The ids of the objects of ``prev`` gone from ``items`` and the positions of the new objects of
        ``items``, found by walking both side by side from ``head`` up to the ``tail`` objects both end with
        (``known``: the ids of ``prev``, each listed once); None when the objects kept are not in the order
        ``prev`` had them, when an object is listed twice, or past :attr:`MAX_CHANGES` changes."""
        gone: list[int] = []
        fresh: list[int] = []
        i = j = head
        n, m = len(prev) - tail, len(items) - tail
        # each run of objects alike is skipped by one pointer comparison per object; the two iterators are
        # put at i and j (a tuple iterator's state is its position) rather than made anew from the start
        at_prev, at_items = iter(prev), iter(items)
        while True:
            at_prev.__setstate__(i)
            at_items.__setstate__(j)
            alike = next(compress(count(), map(is_not, islice(at_prev, n - i), islice(at_items, m - j))), None)
            if alike is None:  # one of the two ran out
                step = min(n - i, m - j)
                i, j = i + step, j + step
                break
            i, j = i + alike, j + alike
            if len(gone) + len(fresh) >= self.MAX_CHANGES:
                return None
            if id(items[j]) in known:  # an object kept: the one it stands in place of went (or moved)
                gone.append(id(prev[i]))
                i += 1
            else:
                fresh.append(j)
                j += 1
        if j < m:
            rest = list(map(id, items[j:m]))
            if not known.isdisjoint(rest):  # a kept object out of order, or listed twice
                return None
            fresh.extend(range(j, m))
        gone.extend(map(id, prev[i:n]))
        if len({id(items[p]) for p in fresh}) < len(fresh):  # a new object listed twice
            return None
        return gone, fresh

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


def same_ends(before: tuple[tuple, ...] | None, parts: tuple[tuple, ...] | None) -> tuple[int, int]:
    """How many objects two epochs listed as ``before`` and ``parts`` surely share at their head and at
    their tail: those of the parts both start (end) with that are the very same tuples (0, 0 when either is
    not given in parts)."""
    if before is None or parts is None:
        return 0, 0
    head = tail = 0
    for a, b in zip(before, parts, strict=False):
        if a is not b:
            break
        head += len(a)
    for a, b in zip(reversed(before), reversed(parts), strict=False):
        if a is not b:
            break
        tail += len(a)
    return head, tail


class Slots:
    """Objects by position (a subscription's, in scenario order), a slot empty or holding one, listed in
    position order as *parts* of :attr:`PART` positions each.  A part no slot of which changed since the
    last listing is the very tuple listed then, which tells :meth:`EpochOrder.advance` that it holds the
    same objects: an epoch's few changed subscriptions cost their parts, not the whole list."""

    PART = 64

    def __init__(self, size: int):
        self._slots: list = [None] * size
        self._parts: list[tuple] = [()] * -(-size // self.PART)
        self._stale: set[int] = set()

    def __getitem__(self, position: int):
        return self._slots[position]

    def __setitem__(self, position: int, item) -> None:
        """Put ``item`` (None: nothing) at ``position``."""
        if self._slots[position] is not item:
            self._slots[position] = item
            self._stale.add(position // self.PART)

    def parts(self) -> tuple[tuple, ...]:
        """The objects in position order, a part per :attr:`PART` positions (the empty slots left out)."""
        for k in self._stale:
            self._parts[k] = tuple(filter(None, self._slots[k * self.PART : (k + 1) * self.PART]))
        self._stale.clear()
        return tuple(self._parts)
