"""The simpy event simulator: batches of tuples moving hop by hop through FIFO link queues.

The simulator knows channels, links and operators, not plans: ``peers/`` hands it, per span of emission
time, a :class:`Layout` whose channels carry tuples over link directions and whose taps are the
super-peers' operator objects (anything with ``targets`` and ``process``, see :class:`Operator`), so the
same operator code runs here, in Spark tasks and in the MQTT services.

Time is cut into windows of emission time (at most ``window`` seconds, never crossing a span boundary).
Each channel moves one batch per window: numpy arrays of tuple indices, values, wire sizes and per-tuple
ready times; a batch is one simpy event, scheduled when its last tuple reaches the next node.  Operators
take no time.

Approximation (the only one): a link direction serves its tuples window by window, and within a window in
exact FIFO order of arrival (ties by lane, then tuple index).  A tuple of window ``w + 1`` that reaches a
link before a tuple of window ``w`` still queues behind it.  If the channels of a layout depend on each
other in a cycle of link directions (possible when streams from different sources share links around a
ring), the batches entering a link over a cycle-closing edge are served in a later round of the same
window, behind the others.  Counts and deliveries never depend on any of this: only times do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import simpy

from network.links import LinkQueue, Parcel
from network.meter import Direction, TrafficMeter
from topologies.errors import EmulatorError


class Output(Protocol):
    target: Hashable  # the channel fed
    positions: np.ndarray  # positions, in the input batch, of the tuples sent
    columns: dict[str, np.ndarray]
    wire_bytes: np.ndarray  # bytes of each tuple sent


class Operator(Protocol):
    """What a super-peer runs on the batches of one channel arriving there (peers/superpeer.py)."""

    targets: tuple[Hashable, ...]

    def process(self, count: int, columns: Mapping[str, np.ndarray]) -> Sequence[Output]: ...


@dataclass(frozen=True)
class Channel:
    """A stream of batches crossing ``hops`` in order; ``taps[k]`` reads it at the ``k``-th node of its
    route (``k = 0`` is where it starts); ``sink`` is the subscription receiving it at the end."""

    key: Hashable
    stream: str
    lane: int  # tie-break among tuples reaching a link at the same instant
    hops: tuple[Direction, ...]
    taps: Mapping[int, Operator] = field(default_factory=dict)
    sink: str | None = None
    attrs: tuple[str, ...] = ()  # what the sink receives


@dataclass(frozen=True)
class Layout:
    """Everything installed for a span of emission time: the channels and, per stream, its upload channel."""

    channels: Mapping[Hashable, Channel]
    sources: Mapping[str, Hashable]


@dataclass(frozen=True)
class Feed:
    """A stream's tuples: emission times of all of them and a way to get the values of a range."""

    stream: str
    times: np.ndarray
    columns: Callable[[int, int], dict[str, np.ndarray]]
    header_bytes: int


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    layout: Layout


class _Rounds:
    """Static analysis of a layout: for each (channel, hop) crossing, its link and serving round."""

    def __init__(self, layout: Layout):
        self.layout = layout
        edges: set[tuple[Direction | None, Direction]] = set()
        self._walk(lambda prev, link, key, hop: edges.add((prev, link)))
        late = _cycle_closing_edges(edges)
        self.round: dict[tuple[Hashable, int], int] = {}
        self._walk(lambda prev, link, key, hop: None, late=late)
        self.counts: dict[Direction, list[int]] = {}
        for (key, hop), r in self.round.items():
            rounds = self.counts.setdefault(layout.channels[key].hops[hop], [])
            rounds.extend([0] * (r + 1 - len(rounds)))
            rounds[r] += 1

    def _walk(self, visit, late: set | None = None) -> None:
        channels = self.layout.channels
        stack = [(key, None, 0) for key in reversed(list(self.layout.sources.values()))]
        seen = set()
        while stack:
            key, inbound, late_count = stack.pop()
            if key in seen:
                raise EmulatorError(f"channel {key!r} is fed twice in one layout")
            seen.add(key)
            channel = channels[key]
            prev = inbound
            for pos in range(len(channel.hops) + 1):
                if pos in channel.taps:
                    stack.extend((t, prev, late_count) for t in reversed(channel.taps[pos].targets))
                if pos < len(channel.hops):
                    link = channel.hops[pos]
                    visit(prev, link, key, pos)
                    if late is not None:
                        late_count += (prev, link) in late
                        self.round[(key, pos)] = late_count
                    prev = link


def _cycle_closing_edges(edges: set[tuple[Direction | None, Direction]]) -> set[tuple[Direction, Direction]]:
    """The back edges of a depth-first search over link directions (sorted, so deterministic)."""
    succ: dict[Direction, list[Direction]] = {}
    for a, b in edges:
        if a is not None:
            succ.setdefault(a, []).append(b)
    for targets in succ.values():
        targets.sort()
    state: dict[Direction, int] = {}  # 1 on the stack, 2 done
    back: set[tuple[Direction, Direction]] = set()
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


class Simulator:
    """Runs the spans of a plan over the links and records everything in a :class:`TrafficMeter`.

    ``links`` maps every link direction a channel may cross (backbone and access) to (bandwidth bit/s,
    latency s).  Raises :class:`EmulatorError` if a channel crosses an unknown direction.
    """

    def __init__(
        self,
        links: Mapping[Direction, tuple[float, float]],
        feeds: Sequence[Feed],
        spans: Sequence[Span],
        meter: TrafficMeter,
        window: float,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.env = simpy.Environment()
        self.feeds = list(feeds)
        self.meter = meter
        self.progress = progress
        self.windows = _windows(spans, window)
        analyses: dict[int, _Rounds] = {}
        for _, _, layout in self.windows:
            analyses.setdefault(id(layout), _Rounds(layout))
        self.rounds = [analyses[id(layout)] for _, _, layout in self.windows]
        for analysis in analyses.values():
            for direction in analysis.counts:
                if direction not in links:
                    raise EmulatorError(f"a channel crosses {direction[0]} -> {direction[1]}, which is not a link")
        self.queues = {
            d: LinkQueue(bandwidth, latency, [r.counts.get(d, []) for r in self.rounds])
            for d, (bandwidth, latency) in sorted(links.items())
        }
        starts = [ws for ws, _, _ in self.windows]
        stops = [we for _, we, _ in self.windows]
        self._ranges = [
            (f, np.searchsorted(f.times, starts, side="left"), np.searchsorted(f.times, stops, side="left"))
            for f in self.feeds
        ]
        self._times = {f.stream: f.times for f in self.feeds}

    def run(self) -> TrafficMeter:
        self.env.process(self._emit())
        self.env.run()
        stuck = [d for d, q in self.queues.items() if not q.idle()]
        if stuck:
            raise EmulatorError(f"simulation stalled with tuples queued at {stuck[0][0]} -> {stuck[0][1]}")
        return self.meter

    def _emit(self):
        total = sum(len(f.times) for f in self.feeds)
        done = 0
        for w, (_, we, layout) in enumerate(self.windows):
            yield self.env.timeout(max(0.0, we - self.env.now))
            for feed, starts, stops in self._ranges:
                start, stop = int(starts[w]), int(stops[w])
                columns = feed.columns(start, stop)
                key = layout.sources[feed.stream]
                parcel = Parcel(
                    tag=(w, key),
                    lane=layout.channels[key].lane,
                    indices=np.arange(start, stop, dtype=np.int64),
                    columns=columns,
                    wire_bytes=np.full(stop - start, feed.header_bytes + 8 * len(columns), dtype=np.int64),
                    ready=feed.times[start:stop],
                )
                done += stop - start
                self._at_node(parcel, 0)
            if self.progress is not None:
                self.progress(done, total)

    def _at_node(self, parcel: Parcel, pos: int) -> None:
        """``parcel`` (tagged ``(window, channel key)``) is at the ``pos``-th node of its channel's route."""
        w, key = parcel.tag
        layout = self.windows[w][2]
        channel = layout.channels[key]
        operator = channel.taps.get(pos)
        if operator is not None:
            for out in operator.process(len(parcel.indices), parcel.columns):
                child = layout.channels[out.target]
                sent = Parcel(
                    (w, out.target),
                    child.lane,
                    parcel.indices[out.positions],
                    out.columns,
                    out.wire_bytes,
                    parcel.ready[out.positions],
                )
                self._at_node(sent, 0)
        if pos < len(channel.hops):
            direction = channel.hops[pos]
            parcel.tag = (w, key, pos)
            for parcels, departures, arrivals in self.queues[direction].put(
                w, self.rounds[w].round[(key, pos)], parcel
            ):
                self._served(direction, parcels, departures, arrivals)
        elif channel.sink is not None:
            latencies = parcel.ready - self._times[channel.stream][parcel.indices]
            self.meter.deliver(channel.sink, channel.attrs, (w, channel.lane), parcel.indices, latencies)

    def _served(self, direction: Direction, parcels: list[Parcel], departures: np.ndarray, arrivals: np.ndarray):
        self.meter.cross(direction, np.concatenate([p.wire_bytes for p in parcels]), departures)
        offset = 0
        for parcel in parcels:
            n = len(parcel.indices)
            w, key, hop = parcel.tag
            moved = Parcel(
                (w, key),
                parcel.lane,
                parcel.indices,
                parcel.columns,
                parcel.wire_bytes,
                arrivals[offset : offset + n],
            )
            offset += n
            # the batch is one event, due when its last tuple reaches the next node
            due = float(moved.ready[-1]) if n else self.env.now
            event = self.env.timeout(max(0.0, due - self.env.now))
            event.callbacks.append(lambda _event, moved=moved, pos=hop + 1: self._at_node(moved, pos))


def _windows(spans: Sequence[Span], window: float) -> list[tuple[float, float, Layout]]:
    """Windows of at most ``window`` seconds on the global grid ``k * window``, split at span bounds."""
    out = []
    for span in spans:
        start = span.start
        while start < span.end:
            grid = (np.floor(start / window) + 1) * window
            end = min(span.end, float(grid))
            if end <= start:  # float rounding put the grid point on ``start``
                end = min(span.end, start + window)
            out.append((start, end, span.layout))
            start = end
    return out
