"""A plain event simulator of store-and-forward FIFO links in exact integer picoseconds, for the tests only.

It is the reference other packet engines (tests/validation/packets.py among them) are compared against, so it
favours being obviously right over being fast.

The model
---------
A *direction* is one way of a link between two named nodes: ``bandwidth`` (bit/s), ``latency`` (ps),
``buffer`` (bytes, ``None`` for unlimited) and ``down`` intervals ``[(fail, recover or None), ...]``
(disjoint, ascending, ps).

A *copy* of ``b`` bytes reaching a direction's queue at time ``a`` is served first in, first out:

* it starts on the wire at ``max(a, time the wire is free)``, holds the wire for
  ``service_ps(b, bandwidth)`` and reaches the far node ``latency`` ps after leaving the wire;
* tail drop: it is admitted iff ``b`` plus the bytes of the copies admitted before it that have not
  started on the wire by ``a`` is at most ``buffer`` (a copy starting exactly at ``a`` no longer waits);
  otherwise it is *dropped* and never takes the wire;
* failures: it is *lost* if it reaches the queue while the direction is down (``fail <= a < recover``),
  or if a failure happens after it reached the queue and no later than its arrival at the far node
  (``a < fail <= arrival``). A failure empties the queue and frees the wire from the failure time on.

A dropped or lost copy goes no further.

Forwarding is a tree of *channels* per source tuple. A channel is a route (``hops``, a list of
directions, possibly empty) carrying some keys (``wire``: key -> bytes on this channel). A root channel
(``parent == -1``) takes key ``k`` from its first node at ``emitted[k]``. A child of channel ``p`` takes a
subset of ``p``'s keys (possibly with other sizes: projections happen in the nodes) from the node where
``p``'s route is at position ``tap``: ``tap == 0`` is ``p``'s start node at ``p``'s start time, ``tap >= 1``
is the far node of ``p``'s hop ``tap - 1`` at the time ``p``'s copy arrives there. If ``p``'s copy never
gets there (dropped or lost before), the child's copy never exists and reports the parent copy's fate.

Tie rule: copies that reach the same direction's queue at the same picosecond are offered in order of
channel number, then position of the key in that channel's ``wire``. Events are kept in a heap keyed
``(time, channel, key position, position on the route)``, which processes them in exactly that order;
a child channel has a higher number than its parent, so its copy, starting at the same instant, is
offered after the parent's and in its rightful place among the other channels' copies.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, deque
from collections.abc import Hashable
from dataclasses import dataclass

Direction = tuple[str, str]


@dataclass
class Fates:
    """What became of every copy.

    ``deliveries[channel][key]`` exists for each channel with a sink and each key of its ``wire``:
    ``("delivered", arrival_ps)`` at the channel's last node, or ``("dropped", direction)`` /
    ``("lost", direction)`` naming where the copy, or the ancestor copy it depends on, stopped.
    ``dropped`` and ``lost`` count, per direction, the copies that stopped there (each copy once; the
    children that never came to exist because of it are not counted again). Directions with no such
    copy are absent.
    """

    deliveries: dict[int, dict[Hashable, tuple]]
    dropped: dict[Direction, int]
    lost: dict[Direction, int]


def service_ps(size: int, bandwidth: int) -> int:
    """Time in ps that ``size`` bytes hold a wire of ``bandwidth`` bit/s, rounded to the nearest ps
    (halves up)."""
    return (size * 8 * 10**12 + bandwidth // 2) // bandwidth


class _Queue:
    """One direction's FIFO queue and wire."""

    def __init__(self, spec: dict):
        self.bandwidth = spec["bandwidth"]
        self.latency = spec["latency"]
        self.buffer = spec["buffer"]
        self.down = list(spec.get("down", ()))
        self.wire_free = 0  # when the wire is free again
        self.waiting = deque()  # (start on the wire, bytes) of admitted copies, in order
        self.failures_applied = 0  # how many of the failures have already emptied the queue

    def is_down(self, t: int) -> bool:
        return any(fail <= t and (recover is None or t < recover) for fail, recover in self.down)

    def offer(self, a: int, size: int):
        """Offer a copy of ``size`` bytes reaching the queue at ``a``: ``"lost"``, ``"dropped"`` or the
        time it reaches the far node."""
        if self.is_down(a):
            return "lost"
        # every failure up to now has emptied the queue and freed the wire
        while self.failures_applied < len(self.down) and self.down[self.failures_applied][0] <= a:
            self.waiting.clear()
            self.wire_free = self.down[self.failures_applied][0]
            self.failures_applied += 1
        # copies that started on the wire by now (at ``a`` included) no longer wait
        while self.waiting and self.waiting[0][0] <= a:
            self.waiting.popleft()
        if size + sum(b for _, b in self.waiting) > (self.buffer if self.buffer is not None else float("inf")):
            return "dropped"
        start = max(a, self.wire_free)
        self.wire_free = start + service_ps(size, self.bandwidth)
        self.waiting.append((start, size))
        arrival = self.wire_free + self.latency
        if any(a < fail <= arrival for fail, _ in self.down):
            return "lost"  # it still held its place in the queue until the failure
        return arrival


def check_channels(network: dict, channels: list[dict]) -> None:
    """Raise ``ValueError`` unless every channel is a connected route over known directions, starting
    where its parent's route is at ``tap``, carrying only keys its parent carries."""
    for c, ch in enumerate(channels):
        hops, parent, tap = ch["hops"], ch["parent"], ch["tap"]
        for d in hops:
            if tuple(d) not in network:
                raise ValueError(f"channel {c}: unknown direction {d}")
        for (_, b), (a, _) in itertools.pairwise(hops):
            if a != b:
                raise ValueError(f"channel {c}: route is not connected at {b}/{a}")
        if parent == -1:
            continue
        if not 0 <= parent < c:
            raise ValueError(f"channel {c}: parent {parent} must be an earlier channel")
        up = channels[parent]
        if not 0 <= tap <= len(up["hops"]):
            raise ValueError(f"channel {c}: tap {tap} is not a position on channel {parent}'s route")
        if hops and up["hops"]:
            node = up["hops"][tap - 1][1] if tap else up["hops"][0][0]
            if hops[0][0] != node:
                raise ValueError(f"channel {c}: starts at {hops[0][0]}, not at {node} where it taps {parent}")
        missing = [k for k in ch["wire"] if k not in up["wire"]]
        if missing:
            raise ValueError(f"channel {c}: keys {missing[:3]} are not carried by channel {parent}")


def resolve(channels: list[dict], stops: dict, dropped: Counter, lost: Counter) -> Fates:
    """Turn the copies' own fates (``stops[(channel, key)]``) into ``Fates``: a copy that never came to
    exist takes its parent copy's fate."""

    def fate(c: int, key) -> tuple:
        if (c, key) in stops:
            return stops[(c, key)]
        parent = channels[c]["parent"]
        if parent == -1:  # a root copy always exists
            raise AssertionError(f"root copy {c}/{key!r} has no fate")
        up = fate(parent, key)
        if up[0] == "delivered":  # the parent got past the tap, so this copy must exist
            raise AssertionError(f"copy {c}/{key!r} never started although its parent arrived")
        return up

    deliveries = {
        c: {key: fate(c, key) for key in ch["wire"]} for c, ch in enumerate(channels) if ch.get("sink") is not None
    }
    return Fates(deliveries, dict(dropped), dict(lost))


def play_reference(network: dict, channels: list[dict], emitted: dict) -> Fates:
    """Play every copy of every channel through the network, event by event, and report their fates."""
    check_channels(network, channels)
    queues = {tuple(d): _Queue(spec) for d, spec in network.items()}
    keys = [list(ch["wire"]) for ch in channels]  # per channel: key position -> key
    positions = [{key: k for k, key in enumerate(ks)} for ks in keys]  # per channel: key -> key position
    children = [[] for _ in channels]  # per channel: (child, tap), children in channel order
    for c, ch in enumerate(channels):
        if ch["parent"] != -1:
            children[ch["parent"]].append((c, ch["tap"]))

    # an event: the copy of channel c's key at position k is at position `at` of its route at time t
    events = []
    for c, ch in enumerate(channels):
        if ch["parent"] == -1:
            for k, key in enumerate(keys[c]):
                heapq.heappush(events, (emitted[key], c, k, 0))

    stops = {}  # (channel, key) -> the copy's own fate
    dropped, lost = Counter(), Counter()
    while events:
        t, c, k, at = heapq.heappop(events)
        key, hops = keys[c][k], channels[c]["hops"]
        for child, tap in children[c]:
            if tap == at and key in positions[child]:
                heapq.heappush(events, (t, child, positions[child][key], 0))
        if at == len(hops):
            stops[(c, key)] = ("delivered", t)
            continue
        direction = tuple(hops[at])
        outcome = queues[direction].offer(t, channels[c]["wire"][key])
        if outcome == "dropped":
            stops[(c, key)] = ("dropped", direction)
            dropped[direction] += 1
        elif outcome == "lost":
            stops[(c, key)] = ("lost", direction)
            lost[direction] += 1
        else:
            heapq.heappush(events, (outcome, c, k, at + 1))
    return resolve(channels, stops, dropped, lost)
