"""The Spark engine: the super-peers' operators run as Spark work, the simulator keeps the clock.

``spark_engine(master)`` returns the callable ``reports/runner.py`` runs per strategy.  For one plan:

1. the driver installs each epoch's operators exactly as the local engine does
   (:func:`peers.superpeer.install`, which also validates the plan) and cuts every epoch into work units,
   ranges of one stream's tuples;
2. one Spark job (``mapInArrow`` over the unit numbers, see :mod:`peers.spark_tasks`) generates the tuples
   inside the tasks and runs the operators on them, producing one record per tuple per flow or delivery
   channel it reaches; Spark aggregates these records into traffic per link direction and deliveries per
   subscription;
3. the driver replays the records under the local engine's simulator (:func:`peers.local.run_local` with
   :class:`ReplayOperator` s standing in for the operators, and tuple indices instead of values), which
   yields the timing (FIFO link queues, latencies, timeline) with the very code of the local engine;
4. Spark's aggregates must equal the simulator's meter, number for number, or the run fails.

So the report of ``--engine spark`` equals the local engine's except for ``"engine": "spark"``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from itertools import count, pairwise

import numpy as np

from network.meter import StrategyRun
from peers.local import run_local
from peers.spark_session import parse_master, spark_session
from peers.spark_tasks import (
    POSITION_DTYPE,
    RECORD_SCHEMA,
    VARYING_WIRE,
    WIRES_DTYPE,
    EpochWork,
    Job,
    PortableOperator,
    Unit,
    portable,
    run_units,
)
from peers.superpeer import OperatorCache, flow_key, install, subscription_keys
from sharing.plan import Flow, Plan
from topologies import workload
from topologies.errors import EngineError
from topologies.model import Scenario

UNIT_TUPLES = workload.BLOCK // 2  # at most this many tuples per work unit (units never straddle a block)
PARTITION_TUPLES = 250_000  # tuples per Spark partition worth a task of their own (a task costs ~0.2 s)
PARTITIONS_PER_CORE = 4

Progress = Callable[[int, int], None]
_job_numbers = count()


class ReplaySelector:
    """Stands in for a reader's :class:`~peers.superpeer.Selector` under the driver's simulation: what it
    keeps is what the real operator sent on Spark.

    ``indices``/``wire`` are everything the operator sent to one channel (sorted tuple indices and their
    wire bytes).  Raises EngineError if Spark's records name a tuple the input does not hold.
    """

    def __init__(self, indices: np.ndarray, wire: np.ndarray):
        self.indices, self.wire = indices, wire

    def fail(self) -> None:
        """Called when Spark's records name a tuple the input does not hold."""
        raise EngineError("Spark sent tuples to a channel that its input does not hold")


def spark_engine(master: str | None = None) -> Callable[..., StrategyRun]:
    """The engine callable ``(scenario, plan, progress=None) -> StrategyRun`` on ``master`` (default
    ``local[*]``).  Raises InputError now for a malformed master URL; the session starts on first use."""
    master = parse_master(master)

    def engine(scenario: Scenario, plan: Plan, progress: Progress | None = None) -> StrategyRun:
        return run_spark(scenario, plan, progress, master=master)

    return engine


def run_spark(
    scenario: Scenario,
    plan: Plan,
    progress: Progress | None = None,
    *,
    master: str | None = None,
    window: float | None = None,
) -> StrategyRun:
    """Execute ``plan`` with the operators on Spark and the timing of the local simulator (``window`` as in
    :func:`~peers.local.run_local`).

    Raises EmulatorError for an inconsistent plan (as the local engine does), EngineError when Spark cannot
    start, a Spark job fails, or Spark's aggregates disagree with the simulated traffic.
    """
    prepared = _prepare(scenario, plan)
    session = spark_session(master)
    carried, link_totals, delivery_totals = _execute(session, prepared)
    replays: dict[int, ReplaySelector] = {}
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def selectors(k: int, _target, item) -> ReplaySelector:
        channel = prepared.channels[k][flow_key(item.id) if isinstance(item, Flow) else id(item)]
        replay = replays.get(channel)
        if replay is None:
            replay = replays[channel] = ReplaySelector(*carried.get(channel, empty))
        return replay

    def tuple_ids(stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
        return {"tuple": np.arange(start, stop, dtype=np.float64)}

    run = run_local(scenario, plan, progress, window=window, values=tuple_ids, selectors=selectors)
    _check_agreement(scenario, run, link_totals, delivery_totals)
    return replace(run, engine="spark")


@dataclass
class _Prepared:
    """The job to broadcast; per epoch the channel of each flow (by key) and delivery (by identity); and
    per channel the links and subscription it counts towards (Spark's feeds)."""

    job: Job
    channels: dict[int, dict[Hashable, int]]
    feeds: list[tuple[int, str, str, str]]


def _prepare(scenario: Scenario, plan: Plan) -> _Prepared:
    """Operators (each distinct one once), channels and work units of every epoch that holds emitted tuples.

    A channel is one output of one distinct operator along one route: the same operator reused by many
    epochs feeds the same channels, so its carried tuples form one sorted array for the replay.
    """
    times = {s.id: workload.emission_times(s, 0, workload.tuple_count(s, scenario.duration)) for s in scenario.streams}
    cache = OperatorCache()
    numbers: dict[int, int] = {}  # id(operator) -> operator number (the cache keeps the operators alive)
    shipped: list[PortableOperator] = []
    channels: dict[tuple, int] = {}  # (operator number, reader, route) -> channel number
    feeds: list[tuple[int, str, str, str]] = []
    channel_of: dict[int, dict[Hashable, int]] = {}
    works: dict[int, EpochWork] = {}
    units: list[Unit] = []
    for k, epoch in enumerate(plan.epochs):
        start, end = max(epoch.start, 0.0), min(epoch.end, scenario.duration)
        if start >= end:
            continue
        keys = subscription_keys(epoch)
        operators = install(scenario, epoch, delivery_keys=keys, cache=cache)
        paths = {flow_key(f.id): f.path for f in epoch.flows}
        deliveries = {key: (d.subscription, d.home, d.peer) for key, d in zip(keys, epoch.deliveries, strict=True)}
        identity = {key: id(d) for key, d in zip(keys, epoch.deliveries, strict=True)}
        channel_of[k] = {}
        places = {}
        for place, operator in operators.items():
            if id(operator) not in numbers:
                numbers[id(operator)] = len(shipped)
                shipped.append(portable(operator))
            number = numbers[id(operator)]
            ids = []
            for j, target in enumerate(operator.targets):
                route = deliveries[target] if target in deliveries else paths[target]
                channel = channels.get((number, j, route))
                if channel is None:
                    channel = channels[(number, j, route)] = len(channels)
                    feeds.extend(_feeds_of(channel, target in deliveries, route))
                ids.append(channel)
                channel_of[k][identity.get(target, target)] = channel
            places[place] = (number, tuple(ids))
        works[k] = EpochWork(places, paths)
        for stream_id, stream_times in times.items():
            # the same tuples the simulator assigns to [start, end): first time >= start up to first >= end
            first, stop = (int(i) for i in np.searchsorted(stream_times, [start, end], side="left"))
            while first < stop:
                cut = min(stop, (first // UNIT_TUPLES + 1) * UNIT_TUPLES)
                units.append(Unit(k, stream_id, first, cut))
                first = cut
    return _Prepared(Job(scenario, tuple(shipped), works, tuple(units)), channel_of, feeds)


def _feeds_of(channel: int, delivery: bool, route: tuple[str, ...]) -> list[tuple[int, str, str, str]]:
    """What a channel's tuples count towards: ``(channel, "link", from, to)`` for every link direction it
    crosses (a delivery crosses its access link) and ``(channel, "subscription", id, "")``."""
    if delivery:
        subscription, home, peer = route
        return [(channel, "link", home, peer), (channel, "subscription", subscription, "")]
    return [(channel, "link", a, b) for a, b in pairwise(route)]


def _execute(session, prepared: _Prepared):
    """Run the job on Spark: per channel ``(sorted tuple indices, wire bytes)``, and Spark's aggregates per
    link direction ``{(from, to): (tuples, bytes)}`` and per subscription ``{sub: (tuples, bytes)}``.

    Two actions over the persisted records (one per unit and channel): one aggregation (joined with what
    each channel counts towards) and one collection of the records for the driver's replay.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    job = prepared.job
    if not job.units:
        return {}, {}, {}
    sc = session.sparkContext
    broadcast = sc.broadcast(job)
    records = None
    try:
        partitions = _partitions(job, sc.defaultParallelism)
        records = (
            session.range(0, len(job.units), numPartitions=partitions)
            .mapInArrow(run_units(broadcast, f"{os.getpid()}-{next(_job_numbers)}"), RECORD_SCHEMA)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        feeds = session.createDataFrame(_feeds_table(prepared.feeds))
        summed = (
            records.join(F.broadcast(feeds), "channel")
            .groupBy("kind", "name", "peer")
            .agg(F.sum("tuples").alias("tuples"), F.sum("bytes").alias("bytes"))
            .collect()
        )
        table = records.toArrow()
    except Exception as err:
        message = str(err).strip().splitlines()
        raise EngineError(f"Spark job failed: {message[-1] if message else type(err).__name__}") from err
    finally:
        if records is not None:
            records.unpersist()
        broadcast.destroy()
    link_totals = {(r.name, r.peer): (r.tuples, r.bytes) for r in summed if r.kind == "link"}
    delivery_totals = {r.name: (r.tuples, r.bytes) for r in summed if r.kind == "subscription"}
    return _carried(table), link_totals, delivery_totals


def _partitions(job: Job, cores: int) -> int:
    """One partition per core for small jobs, up to :data:`PARTITIONS_PER_CORE` per core for big ones
    (smaller tasks balance better), never more than there are units."""
    tuples = sum(u.stop - u.start for u in job.units)
    wanted = min(cores * PARTITIONS_PER_CORE, max(cores, -(-tuples // PARTITION_TUPLES)))
    return max(1, min(len(job.units), wanted))


def _feeds_table(feeds: list[tuple[int, str, str, str]]):
    """The feeds as an Arrow table (a list of Python rows is slow to turn into a DataFrame)."""
    import pyarrow as pa

    columns = list(zip(*feeds, strict=True)) if feeds else [(), (), (), ()]
    return pa.table(
        [pa.array(columns[0], pa.int32()), *(pa.array(c, pa.string()) for c in columns[1:])],
        names=["channel", "kind", "name", "peer"],
    )


def _binary_values(column, dtype: np.dtype) -> np.ndarray:
    """All cells of an Arrow binary column, concatenated in row order, as one array of ``dtype``."""
    cells = column.combine_chunks()
    offsets = np.frombuffer(cells.buffers()[1], np.int32)[cells.offset : cells.offset + len(cells) + 1]
    data = cells.buffers()[2]
    if data is None or offsets[-1] == offsets[0]:
        return np.zeros(0, dtype)
    return np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]].view(dtype)


def _carried(table) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per channel ``(sorted tuple indices, wire bytes)`` from the records, without a Python object per
    tuple: cells are put in (channel, first tuple) order, which sorts the tuples since a channel's units
    are disjoint ranges and positions inside a cell ascend."""
    channel = table.column("channel").to_numpy()
    start = table.column("start").to_numpy()
    counts = table.column("tuples").to_numpy().astype(np.int64)
    constant = table.column("wire").to_numpy()
    positions = _binary_values(table.column("positions"), POSITION_DTYPE)
    wires = np.repeat(constant.astype(np.int64), counts)
    cell_offsets = np.concatenate([[0], np.cumsum(counts)])
    varying = np.flatnonzero(constant == VARYING_WIRE)
    if len(varying):
        sizes = _binary_values(table.column("wires").take(varying), WIRES_DTYPE)
        at = 0
        for row in varying:
            wires[cell_offsets[row] : cell_offsets[row + 1]] = sizes[at : at + counts[row]]
            at += counts[row]
    indices = np.repeat(start, counts) + positions
    order = np.lexsort((start, channel))
    ordered_counts = counts[order]
    ordered_offsets = np.concatenate([[0], np.cumsum(ordered_counts)])
    gather = np.repeat(cell_offsets[order] - ordered_offsets[:-1], ordered_counts) + np.arange(ordered_offsets[-1])
    indices, wires = indices[gather], wires[gather]
    ordered_channels = channel[order]
    found, first_cells = np.unique(ordered_channels, return_index=True)
    bounds = np.append(ordered_offsets[first_cells], ordered_offsets[-1])
    return {int(c): (indices[a:b], wires[a:b]) for c, a, b in zip(found, bounds[:-1], bounds[1:], strict=True)}


def _check_agreement(scenario: Scenario, run: StrategyRun, link_totals: dict, delivery_totals: dict) -> None:
    """Spark's aggregates against the simulator's meter; raises EngineError naming the first difference."""
    for direction, sent in run.link_bytes.items():
        spark = link_totals.get(direction, (0, 0))
        if spark != (run.link_tuples[direction], sent):
            raise EngineError(
                f"{run.strategy}: Spark counted {spark[0]} tuples / {spark[1]} bytes on {direction[0]} -> "
                f"{direction[1]}, the simulator {run.link_tuples[direction]} / {sent}"
            )
    uploads = sum(
        workload.tuple_count(s, scenario.duration) * (scenario.header_bytes + 8 * len(s.attribute_names))
        for s in scenario.streams
    )
    downloads = sum(b for d, (_, b) in link_totals.items() if d not in run.link_bytes)
    if uploads + downloads != run.access_bytes:
        raise EngineError(
            f"{run.strategy}: Spark counted {uploads + downloads} access bytes, the simulator {run.access_bytes}"
        )
    for subscription, indices in run.delivered.items():
        spark = delivery_totals.get(subscription, (0, 0))[0]
        if spark != len(indices):
            raise EngineError(
                f"{run.strategy}: Spark delivered {spark} tuples to {subscription}, the simulator {len(indices)}"
            )
