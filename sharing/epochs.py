"""Epoch boundaries and subscription events, shared by the planner and the baselines, and the lists of
consecutive epochs as changes: found by the producers (:class:`Listing`), applied by the readers
(:class:`Sequence`).

An epoch is an interval between consecutive subscription events (arrivals ``at``, departures ``until``)
inside ``[0, duration)``; the epochs cover ``[0, duration)`` without gaps.  Subscription ``s`` is active in
epoch ``[start, end)`` iff ``at <= start`` and ``until`` is absent or ``>= end``: boundaries include every
``at`` and ``until``, so a subscription is either active for a whole epoch or not at all, and a tuple
emitted at ``t`` (routed by the epoch with ``start <= t < end``) reaches exactly the subscriptions with
``at <= t < until``.
"""

from __future__ import annotations

from itertools import compress, count, islice, pairwise
from operator import is_not, itemgetter
from typing import NamedTuple

from sharing.plan import Edit
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


class Listing:
    """One list of the epochs a producer makes (their flows, or their deliveries), turned into changes.

    :meth:`change` gives how the next epoch's list differs from the one before as an
    :class:`~sharing.plan.Edit`.  The producer lists an object it did not make anew as the very object of
    the epoch before, and may give a list as the *parts* it is the concatenation of (a stream's tree, a
    flow's subtree): a part that is the very tuple of the epoch before holds the very same objects.  The
    head and tail both lists share are then skipped a pointer comparison per part, then per object; a long
    middle between them is walked side by side the same way, each run of objects both list in the same
    order skipped, so a change costs about what it changes; a short middle, or one with many changes, is
    diffed by sets.  A middle whose kept objects changed order leaves and comes whole (its kept objects as
    moved).  The identities are the producer's knowledge of what it changed: the
    :class:`~sharing.plan.Plan` carries only the edits."""

    WALK_FROM = 48  # a middle (between the common head and tail) longer than this is walked, not diffed by sets
    MAX_CHANGES = 64  # a walk meeting more changes than this gives way to the diff by sets

    def __init__(self) -> None:
        self.items: tuple = ()
        self.parts: tuple[tuple, ...] | None = None
        self._known: set[int] = set()  # the ids of the objects of :attr:`items`, while each is listed once
        self._twice = False

    def change(self, items: tuple, parts: tuple[tuple, ...] | None = None) -> Edit:
        """How ``items`` (the concatenation of ``parts``, when given) differs from the list before."""
        prev = self.items
        sure_head, sure_tail = same_ends(self.parts, parts)
        self.items, self.parts = items, parts
        short = min(len(prev), len(items))
        # each scan starts past the objects the parts tell are the same and stops where the other end's
        # are (an iterator of a tuple, either way, is put there: its state is its position)
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
        found = None
        if not self._twice and len(items) - tail - head > self.WALK_FROM:
            found = self._walk(prev, items, head, tail)
        if found is None and not self._twice:
            found = self._by_sets(prev, items, head, tail)
        if found is None:  # the middle leaves and comes whole
            gone, came = range(head, len(prev) - tail), range(head, len(items) - tail)
            middle = list(map(id, items[head : len(items) - tail]))
            self._known.difference_update(map(id, prev[head : len(prev) - tail]))
            self._twice = len(set(middle)) < len(middle) or not self._known.isdisjoint(middle)
            self._known.update(middle)
            if self._twice:
                self._known = set(map(id, items))
        else:
            gone, came = found
            self._known.difference_update(map(id, map(prev.__getitem__, gone)))
        came_items = list(map(items.__getitem__, came))
        if found is not None:
            self._known.update(map(id, came_items))
        return Edit(tuple(gone), tuple(zip(came, came_items, strict=True)))

    def _by_sets(self, prev: tuple, items: tuple, head: int, tail: int) -> tuple[list[int], list[int]] | None:
        """What :meth:`_walk` finds, by set differences over the middle between the ``head`` and ``tail``
        objects both lists share; None when the objects kept are not in the order ``prev`` had them or an
        object is listed twice."""
        old = list(map(id, prev[head : len(prev) - tail]))
        new = list(map(id, items[head : len(items) - tail]))
        old_set, new_set = set(old), set(new)
        if len(new_set) < len(new) or not self._known.isdisjoint(new_set - old_set):
            return None
        if [i for i in old if i in new_set] != [i for i in new if i in old_set]:
            return None
        gone = [head + k for k, i in enumerate(old) if i not in new_set]
        return gone, [head + k for k, i in enumerate(new) if i not in old_set]

    def _walk(self, prev: tuple, items: tuple, head: int, tail: int) -> tuple[list[int], list[int]] | None:
        """The positions of the objects of ``prev`` gone from ``items`` and of the new objects of ``items``,
        found by walking both side by side from ``head`` up to the ``tail`` objects both end with; None when
        the objects kept are not in the order ``prev`` had them, when an object is listed twice, or past
        :attr:`MAX_CHANGES` changes."""
        known = self._known
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
                gone.append(i)
                i += 1
            else:
                fresh.append(j)
                j += 1
        if j < m:
            if not known.isdisjoint(map(id, items[j:m])):  # a kept object out of order, or listed twice
                return None
            fresh.extend(range(j, m))
        gone.extend(range(i, n))
        if len({id(items[p]) for p in fresh}) < len(fresh):  # a new object listed twice
            return None
        return gone, fresh


class Sequence:
    """The flows (or the deliveries) of the epochs read so far, kept by applying each epoch's
    :class:`~sharing.plan.Edit` to the list before.

    An object that leaves and comes in one edit (the very object) moved: it is kept.  :meth:`apply` gives
    what went and what came; :attr:`shifted` then holds the ids of the objects whose place among the others
    may have changed (those that came or moved).  Where an object stands is asked in two ways: a ``ranked``
    sequence keeps :attr:`rank`, a number per object increasing along the list and renumbered only where
    it changed (the flows: their order is asked about for every flow laid out); otherwise :meth:`positions`
    lists the whole list when asked (the deliveries: only those reading a flow that moved need it)."""

    REBUILD_FROM = 8  # an edit touching more places than this rebuilds the list rather than edit it in place

    def __init__(self, ranked: bool) -> None:
        self.ranked = ranked
        self.items: list = []
        self.shifted: list[int] = []
        self.rank: dict[int, float] = {}  # ranked: id -> rank, for every object of the list
        self.members: set[int] = set()  # not ranked: the ids of the list's objects
        self._twice = False
        self._positions: dict[int, int] | None = None

    def apply(self, edit: Edit) -> tuple[list[int], list[int], bool]:
        """Move to the next list: the ids of the objects that went, the positions of the objects that came
        (ascending; an object's first listing), and whether an object is listed twice."""
        items = self.items
        known = self.rank.keys() if self.ranked else self.members
        left = set(map(id, map(items.__getitem__, edit.gone)))
        places = list(map(itemgetter(0), edit.came))
        came_ids = list(map(id, map(itemgetter(1), edit.came)))
        if len(edit.gone) + len(edit.came) > self.REBUILD_FROM:
            self.items = items = edit.applied(items)
        else:
            for p in reversed(edit.gone):
                del items[p]
            for p, item in edit.came:
                items.insert(p, item)
        self._positions = None
        self.shifted = came_ids
        if left:
            fresh_ids = [ident for ident in came_ids if ident not in left]
            fresh = [p for p, ident in zip(places, came_ids, strict=True) if ident not in left]
        else:
            fresh_ids, fresh = came_ids, places
        twice = self._twice or len(set(came_ids)) < len(came_ids) or not known.isdisjoint(fresh_ids)
        if twice:  # listed twice, now or before: by the whole list, each object at its first listing
            old = set(known)
            first = self.positions()
            self._twice = len(first) < len(items)
            if self.ranked:
                self.rank = {ident: float(p) for ident, p in first.items()}
            else:
                self.members = set(first)
            return list(old - first.keys()), sorted(first[ident] for ident in first.keys() - old), self._twice
        gone = list(left.difference(came_ids))
        if self.ranked:
            for ident in gone:
                del self.rank[ident]
            first = 0  # rank each run of consecutive objects that came between its neighbours
            for k in range(1, len(places) + 1):
                if k == len(places) or places[k] != places[k - 1] + 1:
                    self._rank(places[first], places[k - 1] + 1, came_ids[first:k])
                    first = k
        else:
            self.members.difference_update(gone)
            self.members.update(fresh_ids)
        return gone, fresh, False

    def whole(self) -> tuple[list[int], list[int], bool]:
        """:meth:`apply`'s answer for a reader that starts afresh at the current list: nothing went, every
        object came (at its first listing), and whether one is listed twice."""
        first = self.positions()
        return [], sorted(first.values()), len(first) < len(self.items)

    def positions(self) -> dict[int, int]:
        """Where each object of the list is first listed (by id; built when first asked)."""
        if self._positions is None:
            ids = list(map(id, self.items))
            self._positions = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))
        return self._positions

    def _rank(self, start: int, stop: int, new: list[int]) -> None:
        """Rank ``new``, the ids of ``items[start:stop]``, between the ranks of their neighbours."""
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
            # no room left between the neighbours: rank the whole list afresh
            self.rank = dict(zip(map(id, items), map(float, range(len(items))), strict=True))
            return
        rank.update(zip(new, keys, strict=True))


def same_ends(before: tuple[tuple, ...] | None, parts: tuple[tuple, ...] | None) -> tuple[int, int]:
    """How many objects two lists given as ``before`` and ``parts`` surely share at their head and at their
    tail: those of the parts both start (end) with that are the very same tuples (0, 0 when either is not
    given in parts)."""
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
    position order.  :meth:`edit` gives how the listing changed since the last from the slots set since,
    at the cost of their runs of :attr:`PART` positions: an epoch's few changed subscriptions cost those,
    not the whole list."""

    PART = 64

    def __init__(self, size: int):
        self._slots: list = [None] * size
        self._counts = [0] * -(-size // self.PART)  # per run of PART positions, the objects it listed last
        self._was: dict[int, object] = {}  # position -> what it held at the last listing, for those set since

    def __getitem__(self, position: int):
        return self._slots[position]

    def __setitem__(self, position: int, item) -> None:
        """Put ``item`` (None: nothing) at ``position``."""
        if self._slots[position] is not item:
            self._was.setdefault(position, self._slots[position])
            self._slots[position] = item

    def pending(self) -> list[tuple]:
        """For each slot whose object changed since the last listing, in position order: what it held then
        and what it holds now (None: nothing)."""
        return [(old, self._slots[p]) for p, old in sorted(self._was.items()) if old is not self._slots[p]]

    def edit(self) -> Edit:
        """How the listing changed since the last (the first: since none), from the slots set since."""
        was, self._was = self._was, {}
        changed = sorted(p for p, old in was.items() if old is not self._slots[p])
        gone: list[int] = []
        came: list[tuple] = []
        counts, part = self._counts, self.PART
        before = after = 0  # the objects listed ahead of the run being read, at the last listing and now
        done = k = 0  # the runs read or skipped; the changed slots read
        while k < len(changed):
            run = changed[k] // part
            ahead = sum(counts[done:run])  # unchanged runs: as many objects then as now
            before, after = before + ahead, after + ahead
            listed = after
            for p in range(run * part, min((run + 1) * part, len(self._slots))):
                item = self._slots[p]
                old = item
                if k < len(changed) and changed[k] == p:
                    old = was[p]
                    if old is not None:
                        gone.append(before)
                    if item is not None:
                        came.append((after, item))
                    k += 1
                before += old is not None
                after += item is not None
            counts[run] = after - listed
            done = run + 1
        return Edit(tuple(gone), tuple(came))
