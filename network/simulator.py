"""The simpy event simulator: batches of tuples moving hop by hop through FIFO link queues.

The simulator knows channels, links and operators, not plans: ``peers/`` hands it, per span of emission
time, a :class:`Layout` whose channels carry tuples over link directions and whose taps are the
super-peers' operator objects (anything with ``targets`` and ``process``, see :class:`Operator`), so the
same operator code runs here, in Spark tasks and in the MQTT services.

Time is cut into windows of emission time (``window`` seconds on the grid ``k * window``).  A window is
not cut at span bounds: the spans it overlaps are merged, a channel key present in several of them being
one channel (its route must not change), and a tap becoming a list of phases, each operator applied to
the tuples emitted in its span (consecutive spans with the same operator and feeds make one phase).  So
when one span follows another with only a few channels changed, every unchanged channel still moves one
batch per window, however short the spans.  Each channel moves one batch per window: numpy arrays of
tuple indices, values, wire sizes and per-tuple ready times; a batch is one simpy event, scheduled when
its last tuple reaches the next node.  Operators take no time.

Approximation (the only one): a link direction serves its tuples window by window, and within a window in
exact FIFO order of arrival (ties by lane, the channel's order of appearance in the window, then tuple
index).  A tuple of window ``w + 1`` that reaches a link before a tuple of window ``w`` still queues
behind it (by at most the difference of their paths' delays, since windows follow emission time).  If the
channels of a window depend on each other in a cycle of link directions (possible when streams from
different sources share links around a ring), the batches entering a link over a cycle-closing edge are
served in a later round of the same window, in the gaps the earlier rounds left on the link: such a
tuple starts at its arrival unless the link is busy then, and never delays a tuple already served (where
tuples do not contend, that is the per-tuple event simulation's time).  Counts and deliveries never depend on
any of this: only times do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np
import simpy

from network.links import LinkQueue, Parcel
from network.meter import Direction, TrafficMeter
from topologies.errors import EmulatorError


class Output(Protocol):
    target: Hashable  # one of the operator's targets
    positions: np.ndarray  # positions, in the input batch, of the tuples sent (ascending)
    columns: dict[str, np.ndarray]
    wire_bytes: np.ndarray  # bytes of each tuple sent


class Operator(Protocol):
    """What a super-peer runs on the batches of one channel arriving there (peers/superpeer.py).

    ``process`` is only called with ``count > 0``."""

    targets: tuple[Hashable, ...]

    def process(self, count: int, columns: Mapping[str, np.ndarray]) -> Sequence[Output]: ...


@dataclass(frozen=True)
class Tap:
    """An operator reading a channel at one node; what it sends to ``operator.targets[j]`` feeds the
    channel ``feeds[j]``."""

    operator: Operator
    feeds: tuple[Hashable, ...]

    @cached_property
    def route(self) -> dict[Hashable, Hashable]:
        return dict(zip(self.operator.targets, self.feeds, strict=True))


@dataclass(frozen=True)
class Channel:
    """A stream of batches crossing ``hops`` in order; ``taps[k]`` reads it at the ``k``-th node of its
    route (``k = 0`` is where it starts); ``sink`` is the subscription receiving it at the end."""

    key: Hashable
    stream: str
    hops: tuple[Direction, ...]
    taps: Mapping[int, Tap] = field(default_factory=dict)
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


@dataclass
class _Phase:
    start: float
    end: float
    tap: Tap


@dataclass
class _WindowChannel:
    """A channel over one window: its taps as phases, and per tap position the channels fed, in order."""

    key: Hashable
    stream: str
    lane: int
    hops: tuple[Direction, ...]
    sink: str | None
    attrs: tuple[str, ...]
    phases: dict[int, list[_Phase]] = field(default_factory=dict)
    feeds: dict[int, dict[Hashable, None]] = field(default_factory=dict)
    last: Channel | None = None  # the span channel merged last, and the end of its span in the window
    end: float = -np.inf


@dataclass
class _Window:
    start: float
    end: float
    channels: dict[Hashable, _WindowChannel]
    sources: dict[str, Hashable]
    index: int = 0
    round: dict[tuple[Hashable, int], int] = field(default_factory=dict)  # (channel key, hop) -> serving round


def _merge(start: float, end: float, spans: Sequence[Span]) -> _Window:
    """The window ``[start, end)`` over the ``spans`` overlapping it (in time order).

    Raises EmulatorError when a channel key changes its stream, route or sink between the spans, or a
    stream its upload channel.
    """
    window = _Window(start, end, {}, {})
    for span in spans:
        lo, hi = max(span.start, start), min(span.end, end)
        for stream, key in span.layout.sources.items():
            if window.sources.setdefault(stream, key) != key:
                raise EmulatorError(f"stream {stream} is uploaded on {window.sources[stream]!r} and on {key!r}")
        for key, channel in span.layout.channels.items():
            merged = window.channels.get(key)
            if merged is not None and merged.last is channel and merged.end == lo:
                # the same channel object as in the previous span: its taps are unchanged too
                for pos in channel.taps:
                    merged.phases[pos][-1].end = hi
                merged.end = hi
                continue
            if merged is None:
                merged = _WindowChannel(
                    key, channel.stream, len(window.channels), channel.hops, channel.sink, channel.attrs
                )
                window.channels[key] = merged
            elif (merged.stream, merged.hops, merged.sink, merged.attrs) != (
                channel.stream,
                channel.hops,
                channel.sink,
                channel.attrs,
            ):
                raise EmulatorError(f"channel {key!r} changes its stream, route or sink at {span.start:g}")
            for pos, tap in channel.taps.items():
                phases = merged.phases.setdefault(pos, [])
                if phases and phases[-1].end == lo and phases[-1].tap == tap:
                    phases[-1].end = hi
                else:
                    phases.append(_Phase(lo, hi, tap))
                    merged.feeds.setdefault(pos, {}).update(dict.fromkeys(tap.feeds))
            merged.last, merged.end = channel, hi
    return window


class _Rounds:
    """Static analysis of a window: for each (channel, hop) crossing, its link and serving round."""

    def __init__(self, window: _Window):
        self.window = window
        edges: set[tuple[Direction | None, Direction]] = set()
        self._walk(lambda prev, link, key, hop: edges.add((prev, link)))
        late = _cycle_closing_edges(edges)
        self.round: dict[tuple[Hashable, int], int] = {}
        self._walk(lambda prev, link, key, hop: None, late=late)
        self.counts: dict[Direction, list[int]] = {}
        for (key, hop), r in self.round.items():
            rounds = self.counts.setdefault(window.channels[key].hops[hop], [])
            rounds.extend([0] * (r + 1 - len(rounds)))
            rounds[r] += 1

    def _walk(self, visit, late: set | None = None) -> None:
        channels = self.window.channels
        stack = [(key, None, 0) for key in reversed(list(self.window.sources.values()))]
        seen = set()
        while stack:
            key, inbound, late_count = stack.pop()
            if key in seen:
                raise EmulatorError(f"channel {key!r} is fed twice in one window")
            seen.add(key)
            channel = channels[key]
            prev = inbound
            for pos in range(len(channel.hops) + 1):
                if pos in channel.feeds:
                    stack.extend((t, prev, late_count) for t in reversed(channel.feeds[pos]))
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

    ``spans`` are in time order and do not overlap; ``links`` maps every link direction a channel may cross
    (backbone and access) to (bandwidth bit/s, latency s).  Raises :class:`EmulatorError` if a channel
    crosses an unknown direction, a channel is fed twice in one window, or a channel key changes its
    route between spans of one window.
    """

    def __init__(
        self,
        links: Mapping[Direction, tuple[float, float]],
        feeds: Sequence[Feed],
        spans: Iterable[Span],
        meter: TrafficMeter,
        window: float,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.env = simpy.Environment()
        self.feeds = list(feeds)
        self.meter = meter
        self.progress = progress
        # windows are merged from the spans as the simulation reaches them, and each is let go once its
        # last batch has moved on, so only the windows in flight (and their operators) are in memory
        self.windows = _windows(spans, window)
        self.links = links
        self.queues = {d: LinkQueue(bandwidth, latency, []) for d, (bandwidth, latency) in sorted(links.items())}
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
        for w, window in enumerate(self.windows):
            window.index = w
            analysis = _Rounds(window)
            for direction in analysis.counts:
                if direction not in self.links:
                    raise EmulatorError(f"a channel crosses {direction[0]} -> {direction[1]}, which is not a link")
            for direction, queue in self.queues.items():
                queue.expected.append(analysis.counts.get(direction, ()))
            window.round = analysis.round
            yield self.env.timeout(max(0.0, window.end - self.env.now))
            for feed in self.feeds:
                start, stop = np.searchsorted(feed.times, [window.start, window.end], side="left").tolist()
                columns = feed.columns(start, stop)
                key = window.sources[feed.stream]
                parcel = Parcel(
                    tag=(window, key),
                    lane=window.channels[key].lane,
                    indices=np.arange(start, stop, dtype=np.int64),
                    columns=columns,
                    wire_bytes=np.full(stop - start, feed.header_bytes + 8 * len(columns), dtype=np.int64),
                    ready=feed.times[start:stop],
                )
                done += stop - start
                self._at_node(parcel, 0)
            del window, analysis  # the batches in flight keep the window while they need it
            if self.progress is not None:
                self.progress(done, total)

    def _at_node(self, parcel: Parcel, pos: int) -> None:
        """``parcel`` (tagged ``(window, channel key)``) is at the ``pos``-th node of its channel's route."""
        window, key = parcel.tag
        channel = window.channels[key]
        if pos in channel.feeds:
            for feed, pieces in self._tap(channel, pos, parcel).items():
                self._at_node(_joined(window.channels[feed], (window, feed), parcel, pieces), 0)
        if pos < len(channel.hops):
            direction = channel.hops[pos]
            parcel.tag = (window, key, pos)
            for parcels, departures, arrivals in self.queues[direction].put(
                window.index, window.round[(key, pos)], parcel
            ):
                self._served(direction, parcels, departures, arrivals)
        elif channel.sink is not None:
            latencies = parcel.ready - self._times[channel.stream][parcel.indices]
            self.meter.deliver(channel.sink, channel.attrs, (window.index, channel.lane), parcel.indices, latencies)

    def _tap(self, channel: _WindowChannel, pos: int, parcel: Parcel) -> dict[Hashable, list[tuple[int, Output]]]:
        """Each phase's operator on its share of ``parcel`` (tuples are in emission order): per channel fed,
        the outputs with the offset of their phase's share in the parcel."""
        pieces: dict[Hashable, list[tuple[int, Output]]] = {feed: [] for feed in channel.feeds[pos]}
        n = len(parcel.indices)
        if not n:
            return pieces
        phases = channel.phases[pos]
        times = self._times[channel.stream][parcel.indices]
        bounds = np.searchsorted(times, [b for phase in phases for b in (phase.start, phase.end)], side="left")
        for k, phase in enumerate(phases):
            lo, hi = int(bounds[2 * k]), int(bounds[2 * k + 1])
            if lo == hi:
                continue
            share = parcel.columns if hi - lo == n else {a: v[lo:hi] for a, v in parcel.columns.items()}
            route = phase.tap.route
            for out in phase.tap.operator.process(hi - lo, share):
                pieces[route[out.target]].append((lo, out))
        return pieces

    def _served(self, direction: Direction, parcels: list[Parcel], departures: np.ndarray, arrivals: np.ndarray):
        self.meter.cross(direction, np.concatenate([p.wire_bytes for p in parcels]), departures)
        offset = 0
        for parcel in parcels:
            n = len(parcel.indices)
            window, key, hop = parcel.tag
            moved = Parcel(
                (window, key),
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


def _joined(channel: _WindowChannel, tag: tuple, parcel: Parcel, pieces: list[tuple[int, Output]]) -> Parcel:
    """The batch ``channel`` receives: the outputs of every phase for it, in emission order.

    Raises EmulatorError when two phases send it different attributes."""
    if not pieces:
        empty = np.zeros(0, dtype=np.int64)
        return Parcel(tag, channel.lane, empty, {}, empty, np.zeros(0))
    if len(pieces) == 1:
        lo, out = pieces[0]
        positions = out.positions + lo if lo else out.positions
        columns, wire = out.columns, out.wire_bytes
    else:
        names = pieces[0][1].columns.keys()
        if any(out.columns.keys() != names for _, out in pieces):
            raise EmulatorError(f"channel {channel.key!r} receives different attributes within one window")
        positions = np.concatenate([out.positions + lo for lo, out in pieces])
        columns = {a: np.concatenate([out.columns[a] for _, out in pieces]) for a in names}
        wire = np.concatenate([out.wire_bytes for _, out in pieces])
    return Parcel(tag, channel.lane, parcel.indices[positions], columns, wire, parcel.ready[positions])


def _windows(spans: Iterable[Span], window: float) -> Iterator[_Window]:
    """Windows of ``window`` seconds on the global grid ``k * window`` from the first span's start to the
    last span's end, each merging the spans it overlaps; ``spans`` are read only as far as needed."""
    rest = iter(spans)
    ahead = next(rest, None)
    if ahead is None:
        return
    current: deque[Span] = deque()  # spans read that may overlap the window
    start = ahead.start
    while True:
        end = float((np.floor(start / window) + 1) * window)
        if end <= start:  # float rounding put the grid point on ``start``
            end = start + window
        while ahead is not None and ahead.start < end:
            current.append(ahead)
            ahead = next(rest, None)
        while current and current[0].end <= start:
            current.popleft()
        if ahead is None:
            if not current:
                return
            end = min(end, current[-1].end)
        yield _merge(start, end, [s for s in current if s.start < end and s.end > s.start])
        start = end
