"""Epoch boundaries and subscription events, shared by the planner and the baselines.

An epoch is an interval between consecutive subscription events (arrivals ``at``, departures ``until``)
inside ``[0, duration)``; the epochs cover ``[0, duration)`` without gaps.  Subscription ``s`` is active in
epoch ``[start, end)`` iff ``at <= start`` and ``until`` is absent or ``>= end``: boundaries include every
``at`` and ``until``, so a subscription is either active for a whole epoch or not at all, and a tuple
emitted at ``t`` (routed by the epoch with ``start <= t < end``) reaches exactly the subscriptions with
``at <= t < until``.
"""

from __future__ import annotations

from itertools import pairwise
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
