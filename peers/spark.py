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
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from itertools import count, pairwise

import numpy as np

from network.meter import StrategyRun
from peers.local import run_local
from peers.spark_session import parse_master, spark_session
from peers.spark_tasks import RECORD_SCHEMA, EpochWork, Job, Unit, epoch_work, run_units
from peers.superpeer import Output, install
from sharing.plan import Plan
from topologies import workload
from topologies.errors import EngineError
from topologies.model import Scenario

UNIT_TUPLES = workload.BLOCK // 2  # at most this many tuples per work unit (units never straddle a block)
PARTITION_TUPLES = 250_000  # tuples per Spark partition worth a task of their own (a task costs ~0.2 s)
PARTITIONS_PER_CORE = 4

Progress = Callable[[int, int], None]
_job_numbers = count()


class ReplayOperator:
    """Stands in for a :class:`~peers.superpeer.FlowOperator` under the driver's simulator: its outputs are
    the ones the real operator produced on Spark.

    Batches carry tuple indices instead of values (every column holds the indices), so a batch tells which
    tuples it holds; ``carried[target]`` is ``(sorted tuple indices, wire bytes)`` of everything the real
    operator sent to ``target`` during the epoch.  Raises EngineError if Spark's records name a tuple the
    input batch does not hold.
    """

    def __init__(self, targets: Sequence[Hashable], carried: Mapping[Hashable, tuple[np.ndarray, np.ndarray]]):
        self.targets = tuple(targets)
        self.carried = carried

    def process(self, count: int, columns: Mapping[str, np.ndarray]) -> list[Output]:
        outputs = []
        batch = next(iter(columns.values())) if count else np.zeros(0, dtype=np.int64)
        for target in self.targets:
            indices, wire = self.carried[target]
            if count:
                # the batch is every input tuple of one window, so its share of ``target`` lies in this range
                lo, hi = np.searchsorted(indices, [batch[0], batch[-1]], side="left")
                hi += hi < len(indices) and indices[hi] == batch[-1]
            else:
                lo = hi = 0
            sent = indices[lo:hi]
            positions = np.searchsorted(batch, sent)
            if not np.array_equal(batch[positions], sent):
                raise EngineError(f"Spark sent tuples to {target!r} that its input batch does not hold")
            outputs.append(Output(target, positions, {"tuple": sent}, wire[lo:hi]))
        return outputs


def spark_engine(master: str | None = None) -> Callable[..., StrategyRun]:
    """The engine callable ``(scenario, plan, progress=None) -> StrategyRun`` on ``master`` (default
    ``local[*]``).  Raises InputError now for a malformed master URL; the session starts on first use."""
    master = parse_master(master)

    def engine(scenario: Scenario, plan: Plan, progress: Progress | None = None) -> StrategyRun:
        return run_spark(scenario, plan, progress, master=master)

    return engine


def run_spark(
    scenario: Scenario, plan: Plan, progress: Progress | None = None, *, master: str | None = None, window=1.0
) -> StrategyRun:
    """Execute ``plan`` with the operators on Spark and the timing of the local simulator (``window`` as in
    :func:`~peers.local.run_local`).

    Raises EmulatorError for an inconsistent plan (as the local engine does), EngineError when Spark cannot
    start, a Spark job fails, or Spark's aggregates disagree with the simulated traffic.
    """
    installed, works, units = _prepare(scenario, plan)
    session = spark_session(master)
    job = Job(scenario, works, tuple(units))
    records, link_totals, delivery_totals = _execute(session, job)
    replays = {k: _replays(installed[k], works[k], records) for k in installed}
    number = {id(epoch): k for k, epoch in enumerate(plan.epochs)}

    def operators(_: Scenario, epoch) -> dict:
        return replays[number[id(epoch)]]

    def tuple_ids(stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
        ids = np.arange(start, stop, dtype=np.int64)
        return dict.fromkeys(scenario.stream(stream_id).attribute_names, ids)

    run = run_local(scenario, plan, progress, window=window, values=tuple_ids, operators=operators)
    _check_agreement(scenario, run, link_totals, delivery_totals)
    return replace(run, engine="spark")


def _prepare(scenario: Scenario, plan: Plan) -> tuple[dict[int, dict], dict[int, EpochWork], list[Unit]]:
    """Operators, shipped epochs and work units of every epoch that holds emitted tuples."""
    times = {s.id: workload.emission_times(s, 0, workload.tuple_count(s, scenario.duration)) for s in scenario.streams}
    installed: dict[int, dict] = {}
    works: dict[int, EpochWork] = {}
    units: list[Unit] = []
    channels = 0
    for k, epoch in enumerate(plan.epochs):
        start, end = max(epoch.start, 0.0), min(epoch.end, scenario.duration)
        if start >= end:
            continue
        installed[k] = install(scenario, epoch)
        works[k] = epoch_work(scenario, epoch, installed[k], channels)
        channels += len(works[k].channel_ids)
        for stream_id, stream_times in times.items():
            # the same tuples the simulator assigns to [start, end): first time >= start up to first >= end
            first, stop = (int(i) for i in np.searchsorted(stream_times, [start, end], side="left"))
            while first < stop:
                cut = min(stop, (first // UNIT_TUPLES + 1) * UNIT_TUPLES)
                units.append(Unit(k, stream_id, first, cut))
                first = cut
    return installed, works, units


def _execute(session, job: Job):
    """Run the job on Spark: the records sorted by (channel, tuple), and Spark's aggregates per link
    direction ``{(from, to): (tuples, bytes)}`` and per subscription ``{sub: (tuples, bytes)}``.

    Two actions over the persisted records: one aggregation (joined with which links and subscriptions each
    channel feeds) and one collection of the records for the driver's replay.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    empty = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if not job.units:
        return empty, {}, {}
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
        feeds = session.createDataFrame(_channel_feeds(job))
        summed = (
            records.join(F.broadcast(feeds), "channel")
            .groupBy("kind", "name", "peer")
            .agg(F.count("*").alias("tuples"), F.sum("wire").alias("bytes"))
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
    channel = table.column("channel").to_numpy()
    tuples = table.column("tuple").to_numpy()
    wire = table.column("wire").to_numpy().astype(np.int64)
    order = np.lexsort((tuples, channel))
    return (channel[order], tuples[order], wire[order]), link_totals, delivery_totals


def _partitions(job: Job, cores: int) -> int:
    """One partition per core for small jobs, up to :data:`PARTITIONS_PER_CORE` per core for big ones
    (smaller tasks balance better), never more than there are units."""
    tuples = sum(u.stop - u.start for u in job.units)
    wanted = min(cores * PARTITIONS_PER_CORE, max(cores, -(-tuples // PARTITION_TUPLES)))
    return max(1, min(len(job.units), wanted))


def _channel_feeds(job: Job):
    """What each channel's tuples count towards, as an Arrow table (a list of Python rows is slow to turn
    into a DataFrame when a plan has many epochs): ``(channel, "link", from, to)`` for every link direction
    it crosses (a delivery crosses its access link) and ``(channel, "subscription", id, "")``."""
    import pyarrow as pa

    feeds = []
    for k in sorted(job.epochs):
        work = job.epochs[k]
        for key, channel in work.channel_ids.items():
            if key in work.deliveries:
                subscription, home, peer = work.deliveries[key]
                feeds.append((channel, "link", home, peer))
                feeds.append((channel, "subscription", subscription, ""))
            else:
                feeds.extend((channel, "link", a, b) for a, b in pairwise(work.paths[key]))
    columns = list(zip(*feeds, strict=True)) if feeds else [(), (), (), ()]
    return pa.table(
        [pa.array(columns[0], pa.int32()), *(pa.array(c, pa.string()) for c in columns[1:])],
        names=["channel", "kind", "name", "peer"],
    )


def _replays(operators: Mapping, work: EpochWork, records) -> dict:
    """One :class:`ReplayOperator` per installed operator of an epoch, fed from Spark's sorted records."""
    channel, tuples, wire = records
    replays = {}
    for place, operator in operators.items():
        carried = {}
        for target in operator.targets:
            lo, hi = np.searchsorted(channel, [work.channel_ids[target], work.channel_ids[target] + 1])
            carried[target] = (tuples[lo:hi], wire[lo:hi])
        replays[place] = ReplayOperator(operator.targets, carried)
    return replays


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
