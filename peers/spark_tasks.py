"""What runs inside the Spark tasks: one chunk of the run, simulated where it is, reduced to aggregates.

A *chunk* is a stretch of consecutive windows of emission time.  The driver broadcasts the plan laid out
for the simulator (:class:`peers.local.Simulation`: the timetable's compiled arrays and the link queues'
arrays, no plan objects) once; a task then generates its chunk's tuples (``topologies.workload``, the same
values as the local engine for any range), runs the super-peers' operators on them and moves them through
the FIFO link queues with the local engine's own code, from a given state of the queues (when each link is
next free, and the tuples waiting in the buffers of links that have one).  What leaves the task is

- one **summary** row: traffic per link direction, the timeline, per subscription the tuples delivered and
  expected, the missing and extra copies (the check every engine makes, ``network.exactness``, against the
  plain evaluation of the subscription over the chunk's tuples, ``topologies.expected``), the exact latency
  sum, and the state of the queues (where they ended, and the earliest arrival at each link, which tells
  the driver whether a guessed starting state was right, see docs/SPARK.md);
- one **latency** row per subscription delivered to: its number and its latencies' IEEE bits,
  compressed, as one binary cell (:func:`peers.spark_select.latency_cell`; a positive double's bits sort
  as its value does).  They stay on the executors for
  the exact percentile selection (:mod:`peers.spark_select`); a cell per subscription rather than a row
  per copy keeps Spark's per-row costs out of it.

Rows share one schema (:data:`RECORD_SCHEMA`); a summary row has ``sub == -1`` and its summary, pickled and
compressed, as its cell.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa

from matcher.aggregate import AggregateQuery
from network.buffers import QueueState
from network.exactness import Counts, check
from network.latency import Sum, exact_sums_by_owner
from network.meter import ProcessorTally, StrategyRun
from peers.aggregation import Pane, PaneStates, panes, states_needed
from peers.local import Simulation, collector_paused
from peers.spark_select import Sample, latency_cell, sample_of
from topologies import workload
from topologies.expected import expected_in_range

RECORD_SCHEMA = "chunk int, attempt int, sub int, bits binary"
_ARROW_SCHEMA = pa.schema([("chunk", pa.int32()), ("attempt", pa.int32()), ("sub", pa.int32()), ("bits", pa.binary())])
SUMMARY_SUB = -1  # ``sub`` of a summary row
BYTES_PER_BATCH = 1 << 24  # latency bytes per Arrow batch a task yields (before their compression)


@dataclass(frozen=True)
class ChunkJob:
    """What every task reads (broadcast once per strategy): the simulation and the run's windows."""

    simulation: Simulation
    windows: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Chunk:
    """Windows ``first .. stop - 1``, counted from the queues' ``state`` (the true state, or a guess:
    ``guessed``) reached by playing windows ``warm .. first - 1`` from it first, uncounted (``warm ==
    first``: none).  ``attempt`` numbers the runs of a chunk."""

    number: int
    attempt: int
    first: int
    stop: int
    state: QueueState
    warm: int
    guessed: bool = False


@dataclass(frozen=True)
class Bins:
    """A matrix of per-bin counts (rows x ``width`` bins) kept as its ``block`` of columns from ``first``
    on, up to the last column that is not all zero: a chunk's traffic falls in a few of the run's bins, and
    the rest would only be zeros for the driver to read."""

    first: int
    width: int
    block: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> Bins:
        used = np.flatnonzero(matrix.any(axis=0))
        if not len(used):
            return cls(0, matrix.shape[1], matrix[:, :0].copy())
        return cls(int(used[0]), matrix.shape[1], matrix[:, used[0] : used[-1] + 1].copy())

    def added_to(self, total: np.ndarray) -> np.ndarray:
        """``total`` plus this matrix, as wide as the wider of the two (``total`` is reused when it is)."""
        if total.shape[1] < self.width:
            total = np.pad(total, ((0, 0), (0, self.width - total.shape[1])))
        total[:, self.first : self.first + self.block.shape[1]] += self.block
        return total


@dataclass
class ChunkSummary:
    """A chunk's aggregates.  Link arrays follow the sorted backbone directions, subscription arrays the
    scenario's subscriptions; ``received`` holds the attributes of the subscriptions delivered to here."""

    number: int
    attempt: int
    guessed: bool  # started from a guess, not from the true state
    start: QueueState  # the queues as the chunk started (after the warm-up)
    end: QueueState  # the queues after the chunk
    first_arrival: np.ndarray  # per link, the earliest arrival (ticks) in the first window using it (NEVER: none)
    link_bytes: np.ndarray
    link_tuples: np.ndarray
    timeline: Bins  # backbone direction x bin, the bytes on the wire (no columns: no backbone traffic)
    link_dropped: np.ndarray  # per backbone direction, the tuples its full buffer dropped
    link_lost: np.ndarray  # per backbone direction, the tuples lost there at a failure
    offered: Bins  # backbone direction x bin, the bytes reaching its queue (no columns: none)
    landed: Bins  # super-peer x bin, the tuples landing there (no columns: none)
    access: dict[tuple[str, str], int]
    access_tuples: dict[tuple[str, str], int]
    received: dict[str, tuple[str, ...]]
    counts: Counts  # per subscription, its part of the check (network/exactness.py)
    sums: list[Sum]
    latency_sample: Sample  # for the overall latency ranks (peers/spark_select.py)
    stream_bytes: np.ndarray  # per stream (the scenario's order), its backbone bytes and tuples
    stream_tuples: np.ndarray
    last_arrival: float  # the latest any tuple of the chunk reached the far end of a link (0: none)
    # per aggregate subscription (by number), the tuple indices of the copies of its input that landed in
    # the chunk: delivered (a count window's only: they are numbered per group over the whole input),
    # dropped and lost; and per time-window subscription the states of its delivered copies per pane and
    # group, which merge across chunks (its records are computed whole, on the driver)
    aggregated: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    panes: dict[int, PaneStates] = field(default_factory=dict)
    processors: dict[str, ProcessorTally] = field(default_factory=dict)  # per emulated processor, its part
    # per aggregate subscription a record flow serves, its records that landed in the chunk (by number):
    # delivered, their latencies, dropped and lost (few: one per window and group)
    shipped: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)


def simulate_chunk(job: ChunkJob, chunk: Chunk) -> tuple[ChunkSummary, np.ndarray, np.ndarray]:
    """Run one chunk: its summary, and per delivered copy the subscription number and latency (seconds),
    by subscription.

    A chunk run from a guess (``chunk.warm < chunk.first``) first plays the windows from ``warm`` on from
    all links free, uncounted, so that it starts from the backlogs those windows leave (docs/SPARK.md)."""
    simulation = job.simulation
    scenario = simulation.scenario
    state = chunk.state
    if chunk.warm < chunk.first:
        state = simulation.play(job.windows[chunk.warm : chunk.first], simulation.meter(), state=state).state()
    meter = simulation.meter()
    windows = job.windows[chunk.first : chunk.stop]
    queues = simulation.play(windows, meter, state=state)
    received = meter.received
    owners, indices, latencies = meter.deliveries()
    dropped, lost = meter.dropped_copies(), meter.lost_copies()
    traffic = meter.result("", "spark")  # the traffic: its deliveries were taken out above
    start, end = windows[0][0], windows[-1][1]
    found: dict[str, np.ndarray] = {}
    first_index: dict[str, int] = {}
    for stream, times in workload.run_emission_times(scenario).items():
        lo, hi = np.searchsorted(times, [start, end], side="left").tolist()
        found.update(expected_in_range(scenario, stream, lo, hi))
        first_index[stream] = lo
    none = np.zeros(0, np.int64)
    expected = [found.get(s.id, none) for s in scenario.subscriptions]
    counts = check(
        scenario,
        simulation.unreachable,
        simulation.rejected_at,
        expected,
        (owners, indices),
        dropped,
        lost,
        in_flight=queues.in_flight(),
        first=np.array([first_index[s.stream] for s in scenario.subscriptions], np.int64),
    )
    links = len(traffic.link_bytes)
    summary = ChunkSummary(
        number=chunk.number,
        attempt=chunk.attempt,
        guessed=chunk.guessed,
        start=state,
        end=queues.state(),
        first_arrival=queues.first_arrival.copy(),
        link_bytes=np.array(list(traffic.link_bytes.values()), np.int64),
        link_tuples=np.array(list(traffic.link_tuples.values()), np.int64),
        timeline=Bins.of(np.rint(_stacked(traffic.timeline, links)).astype(np.int64)),
        link_dropped=np.array(list(traffic.link_dropped.values()), np.int64),
        link_lost=np.array(list(traffic.link_lost.values()), np.int64),
        offered=Bins.of(_stacked(traffic.offered, links)),
        landed=Bins.of(_stacked(traffic.landed, len(scenario.super_peers))),
        access=traffic.access_link_bytes,
        access_tuples=traffic.access_link_tuples,
        received=received,
        counts=counts,
        sums=exact_sums_by_owner(owners, latencies, len(scenario.subscriptions)),
        latency_sample=sample_of(latencies),
        stream_bytes=np.array(list(traffic.stream_bytes.values()), np.int64),
        stream_tuples=np.array(list(traffic.stream_tuples.values()), np.int64),
        last_arrival=traffic.last_arrival,
        aggregated=_aggregated(scenario, (owners, indices), dropped, lost),
        panes=_pane_states(scenario, received, owners, indices),
        processors=traffic.processors,
        shipped=_shipped(traffic),
    )
    return summary, owners.astype(np.int32), latencies


def _shipped(traffic: StrategyRun) -> dict[str, tuple[np.ndarray, ...]]:
    """Per aggregate subscription a record flow serves, its records that landed in a chunk: delivered, their
    latencies, dropped, lost."""
    fields = (traffic.record_delivered, traffic.record_latencies, traffic.record_dropped, traffic.record_lost)
    return {sub: tuple(f[sub] for f in fields) for sub in traffic.record_delivered}


def _aggregated(scenario, *copies: tuple[np.ndarray, np.ndarray]) -> dict[int, tuple[np.ndarray, ...]]:
    """Per aggregate subscription's number, the indices of its ``copies`` (delivered, dropped, lost: each
    ``(owners, indices)``) that landed in a chunk, all of them (a copy in flight at the chunk's end lands in
    the next one alone); a time-window subscription's delivered copies none (:func:`_pane_states`)."""
    found = {}
    for k, sub in enumerate(scenario.subscriptions):
        if isinstance(sub.query, AggregateQuery):
            parts = [np.asarray(indices, np.int64)[np.asarray(owners) == k] for owners, indices in copies]
            if not sub.query.window.tuples:
                parts[0] = parts[0][:0]
            found[k] = tuple(parts)
    return found


def _pane_states(scenario, received: dict, owners: np.ndarray, indices: np.ndarray) -> dict[int, PaneStates]:
    """Per time-window aggregate subscription's number, the states per pane and group of the copies of its
    input delivered in a chunk and emitted while it was active, as its subscriber folds them in
    (:func:`peers.subscriber.with_records`); none where nothing came or what came lacks an attribute its
    records read."""
    found = {}
    for k, sub in enumerate(scenario.subscriptions):
        query = sub.query
        if not isinstance(query, AggregateQuery) or query.window.tuples:
            continue
        if not set(query.select) <= set(received.get(sub.id, query.select)):
            continue
        mine = np.sort(np.asarray(indices, np.int64)[np.asarray(owners) == k], kind="stable")
        stream = scenario.stream(sub.stream)
        times = workload.emission_times_of(stream, mine)
        active = (times >= sub.at) & (times < (np.inf if sub.until is None else sub.until))
        if not active.any():
            continue
        mine, times = mine[active], times[active]
        columns = workload.columns_of(scenario, stream.id, mine, query.select)
        found[k] = panes(Pane.of(query.window), states_needed(query), times, columns, query.groups)
    return found


def _stacked(series: dict, rows: int) -> np.ndarray:
    """Per-bin series as one matrix, a row each (no columns when there are none)."""
    return np.stack(list(series.values())) if series else np.zeros((rows, 0), np.int64)


def chunk_records(job: ChunkJob, chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """A chunk's rows of :data:`RECORD_SCHEMA`: its latency rows, then its summary row."""
    summary, owners, latencies = simulate_chunk(job, chunk)
    # a chunk where nothing reached a subscriber (no latency rows) sends its summary alone
    cuts = np.flatnonzero(np.concatenate(([True], owners[1:] != owners[:-1], [True]))) if len(owners) else np.zeros(1)
    subs, cells, size = [], [], 0
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        subs.append(int(owners[a]))
        cells.append(latency_cell(latencies[a:b]))
        size += 8 * (b - a)
        if size >= BYTES_PER_BATCH or b == len(owners):
            yield _batch(chunk, subs, cells)
            subs, cells, size = [], [], 0
    yield _batch(chunk, [SUMMARY_SUB], [packed(summary)])


def packed(summary: ChunkSummary) -> bytes:
    """A summary as its row's cell: pickled, then compressed (mostly small counts and zeros: about 20x
    smaller, for the few milliseconds it costs; the driver reads every summary)."""
    return zlib.compress(pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL), 1)


def unpacked(cell: bytes) -> ChunkSummary:
    """The summary :func:`packed` made ``cell`` of (read with the collector paused: its thousands of small
    dicts would start collections that walk all the driver holds, the plan included)."""
    with collector_paused():
        return pickle.loads(zlib.decompress(cell))


def _batch(chunk: Chunk, subs: list[int], cells: list[bytes]) -> pa.RecordBatch:
    n = len(subs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, chunk.number, np.int32)),
            pa.array(np.full(n, chunk.attempt, np.int32)),
            pa.array(subs, pa.int32()),
            pa.array(cells, pa.binary()),
        ],
        schema=_ARROW_SCHEMA,
    )


def run_chunk(broadcast, chunk: Chunk) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of one run of ``chunk`` of the job ``broadcast`` (its input: one row)."""
    return partial(_process, broadcast, chunk)


def _process(broadcast, chunk: Chunk, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # the collector off while the worker loads the job (tens of thousands of objects: on metro.yaml 0.25 s
    # with it, 0.11 s without) and runs the chunk
    with collector_paused():
        job: ChunkJob = broadcast.value
        for _ in batches:  # the run's one input row
            pass
        yield from chunk_records(job, chunk)
