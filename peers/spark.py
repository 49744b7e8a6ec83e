"""The Spark engine: the run cut into chunks of time, each simulated on an executor; the driver only adds up.

``spark_engine(master)`` returns the engine ``reports/simulate.py`` runs per strategy.  For one plan
(docs/SPARK.md tells the design and why):

1. the driver lays the plan out for the simulator (:class:`peers.local.Simulation`, which validates it as
   the local engine does), broadcasts it, and cuts the run's windows into chunks of about equal work;
2. each run of a chunk is one Spark job of one task (:mod:`peers.spark_tasks`), as many at once as the
   executors have cores.  The first chunk not yet settled runs from the true state of the queues as soon
   as it is known (the first from all links free); a core left over runs a later chunk from a guess (the
   backlogs a couple of seconds before it leave, played from all links free).  A chunk's result is exact
   when, link by link, the guess is the true start or neither is still busy (nor holding tuples in its
   buffer) at the chunk's first arrival there.  The driver walks the chunks in order, carrying the true
   state from one to the next, and checks that; a chunk whose guess fails (a backlog across its start) is
   simulated again from the true state.  So the result is the local engine's, number for number: the same
   code, the same windows, the same queue states;
3. the driver adds up the chunks' summaries (traffic per link direction, timeline bins, per subscription
   counts, the check against the expected tuples, exact latency sums), and finds the latency percentiles by
   an exact selection over the latencies, which stay on the executors.

So ``--engine spark`` reports what the local engine reports, and the driver never holds per-tuple data:
its memory is the plan's and the aggregates', whatever the number of tuples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from itertools import count

import numpy as np

from network.buffers import QueueState
from network.exactness import Counts, records_checked, summaries
from network.latency import LatencyStats, Sum, add_sums, ranks_needed
from network.linkrule import TICKS
from network.meter import ProcessorTally, StrategyRun
from peers.aggregation import PaneStates, merge, records
from peers.local import Simulation, collector_paused
from peers.spark_select import OVERALL, Sample, order_statistics
from peers.spark_session import failure_line, parse_master, spark_session
from peers.spark_tasks import RECORD_SCHEMA, SUMMARY_SUB, Chunk, ChunkJob, ChunkSummary, run_chunk, unpacked
from peers.subscriber import with_records
from sharing.plan import Plan
from topologies import workload
from topologies.errors import EngineError
from topologies.expected import aggregate_results
from topologies.model import Scenario

CHUNKS_PER_CORE = 4  # smaller chunks balance better; each chunk boundary may cost a recomputation
TUPLE_WEIGHT = 64  # a tuple's own cost (its values, its check, its deliveries) in channel readings
WARM_UP_S = 2.0  # a chunk run from a guess first plays this much emission time before it, uncounted
CALM = 0.25  # no guesses while a link is still busy this share of the warm-up after a chunk's start
SIMULATION_STAGES = ("chunks", "summaries", "ranks")  # what run_simulation times (its ``stages``)
STAGES = ("layout", *SIMULATION_STAGES)  # what run_spark times

Progress = Callable[[int, int], None]
_job_numbers = count()


class SparkEngine:
    """The Spark engine on one master: an engine callable ``(scenario, plan, progress=None) ->
    StrategyRun``, whose :meth:`simulate` also runs a plan already laid out (the run command lays plans out
    in another process while Spark simulates the ones before, :func:`reports.simulate.simulate_pipelined`).

    What the run command asks of an engine (:class:`reports.simulate.Engine`): its report label; it spreads
    each strategy over the executors itself, one strategy at a time (no forked workers); its executors
    compile the kernels they run."""

    name = "spark"
    forks = False
    kernels = False

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None):
        self.master = parse_master(master)
        self.conf = conf

    def start(self) -> None:
        """Start the Spark session now (once, before threads submit jobs to it)."""
        spark_session(self.master, self.conf)

    def __call__(self, scenario: Scenario, plan: Plan, progress: Progress | None = None) -> StrategyRun:
        return self.simulate(Simulation(scenario, plan), plan.strategy, progress)

    def simulate(self, simulation: Simulation, strategy: str, progress: Progress | None = None) -> StrategyRun:
        return run_simulation(simulation, strategy, progress, master=self.master, conf=self.conf)


def spark_engine(master: str | None = None, conf: dict[str, str] | None = None) -> SparkEngine:
    """The engine on ``master`` (default ``local[*]``) with the extra Spark configuration ``conf``.  Raises
    InputError now for a malformed master URL; the session starts on first use."""
    return SparkEngine(master, conf)


def run_spark(
    scenario: Scenario,
    plan: Plan,
    progress: Progress | None = None,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    window: float | None = None,
    chunks: int | None = None,
    stages: dict[str, float] | None = None,
) -> StrategyRun:
    """Execute ``plan`` on Spark (``window`` as in :func:`~peers.local.run_local`; ``chunks``: how many
    stretches of the run to simulate apart, default :data:`CHUNKS_PER_CORE` per core; ``stages``, when
    given, receives the seconds each stage took: ``layout`` and those of :func:`run_simulation`).

    Raises EmulatorError for an inconsistent plan (as the local engine does), EngineError when Spark cannot
    start or a Spark job fails.
    """
    t0 = time.perf_counter()
    simulation = Simulation(scenario, plan, window=window)
    if stages is not None:
        stages["layout"] = time.perf_counter() - t0
    return run_simulation(simulation, plan.strategy, progress, master=master, conf=conf, chunks=chunks, stages=stages)


def run_simulation(
    simulation: Simulation,
    strategy: str,
    progress: Progress | None = None,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    chunks: int | None = None,
    stages: dict[str, float] | None = None,
) -> StrategyRun:
    """:func:`run_spark` of a plan laid out as ``simulation`` (its strategy named ``strategy``).  Safe to
    call from several threads at once: each strategy's jobs run in their own job group.  ``stages``, when
    given, receives the seconds of ``chunks`` (the jobs simulating chunks, reruns included), ``summaries``
    (reading and adding them up) and ``ranks`` (the latency selection)."""
    scenario = simulation.scenario
    windows = simulation.windows()
    session = spark_session(master, conf)
    sc = session.sparkContext
    cores = sc.defaultParallelism
    wanted = chunks if chunks is not None else cores * CHUNKS_PER_CORE
    times = workload.run_emission_times(scenario)
    warm = _warm_up_windows(windows)
    cuts = _cut(simulation, windows, max(1, wanted), times, warm)
    with collector_paused():  # pickling the job walks the plan's objects: collections would walk them again
        broadcast = sc.broadcast(ChunkJob(simulation, tuple(windows)))
    group = f"streamglobe-{next(_job_numbers)}"
    chunk_group = f"{group}-chunks"  # the chunk runs' jobs, apart from the selection's
    frames: dict[tuple[int, int], object] = {}  # per run (chunk, attempt), its records, kept on the executors
    total = sum(len(t) for t in times.values())
    emitted = [sum(int(np.searchsorted(t, windows[b - 1][1], side="left")) for t in times.values()) for _, b in cuts]
    # a run more than the cores under way: one waits, ready, for the first core to free (a job takes a few
    # tenths of a second to start)
    slots = cores + 1
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix=group)

    def simulate(chunk: Chunk) -> ChunkSummary:
        # one job per run, in the strategy's job group and tagged with the run (a driver thread's own
        # properties)
        sc.setJobGroup(chunk_group, f"simulate {strategy}: chunk {chunk.number}")
        sc.addJobTag(_tag(group, chunk))
        try:
            frame, cell = _launch(session, broadcast, chunk)
        finally:
            sc.removeJobTag(_tag(group, chunk))
            sc.setLocalProperty("spark.jobGroup.id", None)
        frames[(chunk.number, chunk.attempt)] = frame
        return unpacked(cell)

    def settled(run: ChunkSummary) -> None:
        if progress is not None:
            progress(emitted[run.number], total)

    def discarded(run: ChunkSummary) -> None:
        frames.pop((run.number, run.attempt)).unpersist()

    try:
        t0 = time.perf_counter()
        runs = chain(
            lambda chunk: pool.submit(simulate, chunk),
            windows,
            cuts,
            simulation.queues.free(),
            warm,
            slots=slots,
            settled=settled,
            discarded=discarded,
            cancel=lambda chunk: sc.cancelJobsWithTag(_tag(group, chunk)),
        )
        sc.cancelJobGroup(chunk_group)  # runs no longer needed (a chunk settled by another run)
        sc.setJobGroup(group, f"latency ranks of {strategy}")
        t1 = time.perf_counter()
        totals = _Totals(simulation)
        for summary in runs:
            totals.add(summary)
        t2 = time.perf_counter()
        ranked = order_statistics(_latency_rows(frames, runs), totals.targets(), totals.samples)
        if stages is not None:
            stages.update(chunks=t1 - t0, summaries=t2 - t1, ranks=time.perf_counter() - t2)
        return simulation.with_plan(totals.run(strategy, ranked))
    except EngineError:
        raise
    except Exception as err:
        if type(err).__module__.startswith(("pyspark", "py4j")):
            raise EngineError(f"Spark job failed: {failure_line(err)}") from err
        raise
    finally:
        sc.cancelJobGroup(chunk_group)  # runs still in flight (after an error) end now
        pool.shutdown(wait=True)
        sc.setLocalProperty("spark.jobGroup.id", None)
        for frame in frames.values():
            frame.unpersist(blocking=True)  # nothing left in flight when a session stops
        broadcast.destroy(blocking=True)


def _cut(
    simulation: Simulation,
    windows: list[tuple[float, float]],
    wanted: int,
    times: dict[str, np.ndarray] | None = None,
    warm: int = 0,
) -> list[tuple[int, int]]:
    """Consecutive ranges of ``windows`` of about equal work, ``wanted`` of them or one per window
    (``times``: the run's emission times, :func:`topologies.workload.run_emission_times`, when the caller
    has them already; ``warm``: the windows a run from a guess plays before its chunk, see
    :func:`cut_windows`).

    A window's work is its tuples, each weighing :data:`TUPLE_WEIGHT` plus the channels reading it
    (:meth:`~peers.timetable.Timetable.readings`): a late stretch of a run whose subscriptions arrive over
    it costs several times an early one of as many tuples, and chunks of equal tuples would leave the
    cores idle at the end, waiting for the late ones."""
    ends = np.array([end for _, end in windows])
    times = workload.run_emission_times(simulation.scenario) if times is None else times
    work = np.zeros(len(windows), np.int64)
    for stream, readings in simulation.timetable.readings(times).items():
        weight = np.concatenate(([0], np.cumsum(readings + TUPLE_WEIGHT)))
        work += weight[np.searchsorted(times[stream], ends, side="left")]
    return cut_windows(work, wanted, warm)


def cut_windows(emitted: np.ndarray, wanted: int, warm: int = 0) -> list[tuple[int, int]]:
    """Consecutive ranges of windows covering them all, as many as ``wanted`` (or one per window, when there
    are fewer), whose largest work is as small as it can be (``emitted[w]``: the work of the windows up to
    ``w``, e.g. the tuples emitted by its end).

    A chunk after the first also does the work of the ``warm`` windows before it: it is likely run from a
    guess, which plays them first (:func:`chain`).  Counting that keeps the first chunk, which never has a
    warm-up, from ending a warm-up's work ahead of the others, a gap the last chunks leave as idle cores.

    A later start never makes a chunk cost more.  So filling each chunk up to a budget is optimal for that
    budget, and the least budget that needs no more than ``wanted`` chunks is found by bisection; and
    splitting a chunk costs neither piece more than it, so the costliest are then split, each where its
    pieces cost the most alike, until there are ``wanted``."""
    n = len(emitted)
    ends = np.concatenate(([0], np.asarray(emitted, np.int64)))

    def since(first):  # where the work of a chunk from ``first`` is counted from: its warm-up's first window
        return ends[np.where(first > 0, np.maximum(0, first - warm), 0)]  # (the first chunk has none)

    def fill(budget: int) -> list[tuple[int, int]] | None:
        cuts, first = [], 0
        while first < n:
            if len(cuts) == wanted:
                return None
            stop = int(np.searchsorted(ends, int(since(first)) + budget, side="right")) - 1
            cuts.append((first, min(max(stop, first + 1), n)))
            first = cuts[-1][1]
        return cuts

    low, high = 0, int(ends[-1])  # one chunk of every window costs the total: always possible
    while low < high:
        middle = (low + high) // 2
        if fill(middle) is None:
            low = middle + 1
        else:
            high = middle
    cuts = fill(low) or []
    while len(cuts) < min(wanted, n):
        k = max((k for k, (a, b) in enumerate(cuts) if b - a > 1), key=lambda k: ends[cuts[k][1]] - since(cuts[k][0]))
        a, b = cuts[k]
        middle = np.arange(a + 1, b)
        worse = np.maximum(ends[middle] - since(a), ends[b] - since(middle))
        m = int(middle[np.argmin(worse)])
        cuts[k : k + 1] = [(a, m), (m, b)]
    return cuts


def chain(
    start: Callable[[Chunk], Future],
    windows: list[tuple[float, float]],
    cuts: list[tuple[int, int]],
    free: QueueState,
    warm: int = 0,
    *,
    slots: int = 1,
    settled: Callable[[ChunkSummary], None] | None = None,
    discarded: Callable[[ChunkSummary], None] | None = None,
    cancel: Callable[[Chunk], None] | None = None,
) -> list[ChunkSummary]:
    """Simulate the chunks ``cuts`` until each one's run started from the true state of the queues: per
    chunk, in order, the run that holds.  ``start(chunk)`` starts a run and returns its future (a
    :class:`ChunkSummary`); at most ``slots`` are under way at once.

    The driver walks the chunks in order, carrying the true state from one to the next (:func:`_holds`).
    The first chunk not yet settled is run from the true state, which is exact, as soon as that state is
    known, unless a run of it is under way already.  A slot left over runs the next chunk never run yet
    from a guess: all links free ``warm`` windows before it, played uncounted up to its start (the
    backlogs those windows build up are the guess).  A guess is only worth its slot when the backlogs
    drain within the warm-up.  So while the true state is *busy* (some link still busy :data:`CALM` of
    the warm-up's time after the start of the first chunk not settled: a backlog that is likely older
    than a warm-up), no guess is started, the guesses under way are cancelled (``cancel(chunk)``, when
    given; the future of a run cancelled may end in an error, or still in its run, which then counts),
    and a guess of that chunk still under way gets a run from the true state beside it.  A network whose
    backlogs outlive the warm-up (a link loaded beyond its bandwidth for long) is so settled one chunk at
    a time from the true state: exact, but no longer parallel; the other slots are left to other work
    (the next strategy's chunks).  Which runs are started only decides how fast: a run is settled only
    when it holds.

    ``settled(run)`` is called with each chunk's chosen run as it is settled, ``discarded(run)`` with every
    other run as it is found not to hold (or not needed).
    """
    n = len(cuts)
    horizon = warm * (windows[0][1] - windows[0][0]) if windows else 0.0
    done: list[list[ChunkSummary]] = [[] for _ in cuts]
    attempts = [0] * n
    running: dict[Future, Chunk] = {}
    cancelled: set[Future] = set()  # under way, but no longer taking a slot
    truth, chosen, fresh = free, [], 0  # fresh: the first chunk never run

    def launch(k: int, state: QueueState, warm_from: int, guessed: bool) -> None:
        first, stop = cuts[k]
        chunk = Chunk(k, attempts[k], first, stop, state, warm_from, guessed)
        attempts[k] += 1
        running[start(chunk)] = chunk

    try:
        while True:
            k = len(chosen)
            while k < n:  # settle what holds, in order
                found = next((run for run in done[k] if _holds(run, truth)), None)
                if found is None:
                    break
                for run in done[k]:
                    if run is not found and discarded is not None:
                        discarded(run)
                chosen.append(found)
                truth = truth.then(found.end, found.first_arrival)
                if settled is not None:
                    settled(found)
                k += 1
            if k == n:
                return chosen
            for run in done[k]:  # runs of the first unsettled chunk that do not hold
                if discarded is not None:
                    discarded(run)
            done[k] = []
            calm = int(truth.busy.max(initial=0)) / TICKS <= windows[cuts[k][0]][0] + horizon * CALM
            if not calm and cancel is not None:
                for future, chunk in running.items():
                    if chunk.guessed and future not in cancelled:
                        cancel(chunk)
                        cancelled.add(future)
            while len(running) - len(cancelled) < slots:
                runs_of_k = [c for f, c in running.items() if c.number == k and f not in cancelled]
                if not runs_of_k or (not calm and all(c.guessed for c in runs_of_k)):
                    launch(k, truth, cuts[k][0], False)
                    fresh = max(fresh, k + 1)
                elif calm and fresh < n:
                    launch(fresh, free, max(0, cuts[fresh][0] - warm), True)
                    fresh += 1
                else:
                    break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                chunk = running.pop(future)
                if future in cancelled:
                    cancelled.discard(future)
                    if future.cancelled() or future.exception() is not None:
                        continue
                run = future.result()
                if chunk.number < len(chosen):  # settled by another run of it meanwhile
                    if discarded is not None:
                        discarded(run)
                else:
                    done[chunk.number].append(run)
    finally:
        for future in running:
            future.cancel()


def _warm_up_windows(windows: list[tuple[float, float]]) -> int:
    """How many windows make :data:`WARM_UP_S` of emission time (at least one)."""
    length = windows[0][1] - windows[0][0] if windows else 1.0
    return max(1, int(np.ceil(WARM_UP_S / length)))


def _holds(run: ChunkSummary, truth: QueueState) -> bool:
    """Whether ``run`` is the chunk's run from the queues' state ``truth``: link by link, it started from
    the same state, or both states were free, buffers empty, by the run's first arrival there (then every
    tuple's admission and service are the same either way; docs/SPARK.md)."""
    return run.start.agrees(truth, run.first_arrival)


def _tag(group: str, chunk: Chunk) -> str:
    """The job tag of a run of ``chunk`` (cancelling it cancels that run alone)."""
    return f"{group}-{chunk.number}-{chunk.attempt}"


def _launch(session, broadcast, chunk: Chunk) -> tuple[object, bytes]:
    """The records of ``chunk``'s run (one task), computed now and kept on the executors, and its summary
    cell, compressed (:func:`peers.spark_tasks.unpacked` reads it): one job."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    frame = (
        session.range(0, 1, numPartitions=1)
        .mapInArrow(run_chunk(broadcast, chunk), RECORD_SCHEMA)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        (row,) = frame.where(F.col("sub") == SUMMARY_SUB).select("bits").collect()
    except BaseException:
        frame.unpersist()  # cancelled, or failed: nothing of it is kept
        raise
    return frame, row["bits"]


def _latency_rows(frames: dict[tuple[int, int], object], runs: list[ChunkSummary]):
    """The latency rows of the chosen run of every chunk (``frames``: the records of each run)."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [frames[(run.number, run.attempt)].where(F.col("sub") != SUMMARY_SUB) for run in runs]
    return reduce(lambda a, b: a.unionByName(b), parts).select("sub", "bits")


class _Totals:
    """The run's aggregates, chunk by chunk (in order: the first delivery's attributes count)."""

    def __init__(self, simulation: Simulation):
        self.scenario = simulation.scenario
        self.subscriptions = [s.id for s in self.scenario.subscriptions]
        self.default_attrs = simulation.attrs
        self.backbone = sorted(simulation.backbone)
        meter = simulation.meter()
        self.bin_s, self.load_bin_s = meter.bin_s, meter.load_bin_s
        n, subs = len(self.backbone), len(self.subscriptions)
        self.link_bytes, self.link_tuples = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.timeline = np.zeros((n, 0), np.int64)
        self.offered = np.zeros((n, 0), np.int64)
        self.super_peers = list(self.scenario.super_peers)
        self.landed = np.zeros((len(self.super_peers), 0), np.int64)
        self.link_dropped = np.zeros(n, np.int64)
        self.link_lost = np.zeros(n, np.int64)
        self.streams = list(meter.streams)
        self.stream_bytes, self.stream_tuples = (
            np.zeros(len(self.streams), np.int64),
            np.zeros(len(self.streams), np.int64),
        )
        self.last_arrival = 0.0
        self.access: dict[tuple[str, str], int] = {}
        self.access_tuples: dict[tuple[str, str], int] = {}
        self.received: dict[str, tuple[str, ...]] = {}
        self.counts = Counts.zeros(subs)
        self.rejected_at = simulation.rejected_at
        self.sums: list[Sum] = [{} for _ in range(subs)]
        self.samples: list[Sample] = []
        self.aggregated: dict[int, list[tuple[np.ndarray, ...]]] = {}
        self.panes: dict[int, list[PaneStates]] = {}
        self.shipped: dict[str, list[tuple[np.ndarray, ...]]] = {}
        self.aggregated_at = dict(simulation.timetable.aggregated_at)
        self.processors: dict[str, ProcessorTally] = {}

    def add(self, summary: ChunkSummary) -> None:
        self.link_bytes += summary.link_bytes
        self.link_tuples += summary.link_tuples
        self.timeline = summary.timeline.added_to(self.timeline)
        self.offered = summary.offered.added_to(self.offered)
        self.landed = summary.landed.added_to(self.landed)
        self.link_dropped += summary.link_dropped
        self.link_lost += summary.link_lost
        self.stream_bytes += summary.stream_bytes
        self.stream_tuples += summary.stream_tuples
        self.last_arrival = max(self.last_arrival, summary.last_arrival)
        for direction, sent in summary.access.items():
            self.access[direction] = self.access.get(direction, 0) + sent
        for direction, sent in summary.access_tuples.items():
            self.access_tuples[direction] = self.access_tuples.get(direction, 0) + sent
        for k, parts in summary.aggregated.items():
            self.aggregated.setdefault(k, []).append(parts)
        for k, states in summary.panes.items():
            self.panes.setdefault(k, []).append(states)
        for sub, parts in summary.shipped.items():
            self.shipped.setdefault(sub, []).append(parts)
        for sp, tally in summary.processors.items():
            self.processors[sp] = self.processors[sp].plus(tally) if sp in self.processors else tally
        for sub, attrs in summary.received.items():
            self.received.setdefault(sub, attrs)
        self.counts = self.counts.plus(summary.counts)
        self.sums = [add_sums(pair) for pair in zip(self.sums, summary.sums, strict=True)]
        self.samples.append(summary.latency_sample)

    def targets(self) -> dict[int, set[int]]:
        """The ranks each percentile needs, per subscription number and :data:`OVERALL`."""
        delivered = self.counts.delivered
        found = {k: ranks_needed(int(n)) for k, n in enumerate(delivered.tolist()) if n}
        if delivered.sum():
            found[OVERALL] = ranks_needed(int(delivered.sum()))
        return found

    def run(self, strategy: str, ranked: dict[tuple[int, int], float]) -> StrategyRun:
        attrs = dict(self.default_attrs)
        attrs.update(self.received)
        latencies = [
            LatencyStats.of_parts(n, self.sums[k], {r: ranked[(k, r)] for r in ranks_needed(n)})
            for k, n in enumerate(self.counts.delivered.tolist())
        ]
        summary = summaries(self.scenario, self.counts, latencies, attrs, self.rejected_at)
        total = int(self.counts.delivered.sum())
        overall = LatencyStats.of_parts(
            total, add_sums(self.sums), {r: ranked[(OVERALL, r)] for r in ranks_needed(total)}
        )
        run = StrategyRun(
            strategy=strategy,
            engine="spark",
            link_bytes=dict(zip(self.backbone, self.link_bytes.tolist(), strict=True)),
            link_tuples=dict(zip(self.backbone, self.link_tuples.tolist(), strict=True)),
            access_bytes=sum(self.access.values()),
            access_link_bytes=dict(sorted(self.access.items())),
            delivered={},
            delivered_attrs=attrs,
            latencies={},
            timeline={d: self.timeline[k] for k, d in enumerate(self.backbone)} if self.timeline.shape[1] else {},
            bin_s=self.bin_s,
            load_bin_s=self.load_bin_s,
            summary=summary,
            latency=overall,
            access_link_tuples=dict(sorted(self.access_tuples.items())),
            link_dropped=dict(zip(self.backbone, self.link_dropped.tolist(), strict=True)),
            link_lost=dict(zip(self.backbone, self.link_lost.tolist(), strict=True)),
            offered={d: self.offered[k] for k, d in enumerate(self.backbone)} if self.offered.shape[1] else {},
            landed={p: self.landed[k] for k, p in enumerate(self.super_peers)} if self.landed.shape[1] else {},
            stream_bytes=dict(zip(self.streams, self.stream_bytes.tolist(), strict=True)),
            stream_tuples=dict(zip(self.streams, self.stream_tuples.tolist(), strict=True)),
            last_arrival=self.last_arrival,
            processors=dict(sorted(self.processors.items())),
            aggregated_at=dict(self.aggregated_at),
            **self._records_shipped(),
        )
        return self.with_records(run) if self.aggregated else run

    def _records_shipped(self) -> dict[str, dict[str, np.ndarray]]:
        """The records the chunks delivered, dropped and lost, as the :class:`StrategyRun` fields."""
        fields = ("record_delivered", "record_latencies", "record_dropped", "record_lost")
        found: dict[str, dict[str, np.ndarray]] = {f: {} for f in fields}
        for sub, parts in self.shipped.items():
            delivered, latencies = (np.concatenate(p) for p in list(zip(*parts, strict=True))[:2])
            order = np.argsort(delivered, kind="stable")
            found["record_delivered"][sub], found["record_latencies"][sub] = delivered[order], latencies[order]
            for f, k in (("record_dropped", 2), ("record_lost", 3)):
                found[f][sub] = np.sort(np.concatenate([p[k] for p in parts]))
        return found

    def with_records(self, run: StrategyRun) -> StrategyRun:
        """``run`` with its aggregate subscriptions' records, computed and checked here, whole: a window's
        input may land in several chunks (peers/subscriber.py, network/exactness.py).  A time window's from
        the chunks' states per pane and group, merged; a count window's from its copies."""
        subscriptions = self.scenario.subscriptions
        copies = [{}, {}, {}]  # delivered, dropped, lost: per aggregate subscription's id, tuple indices
        for k, parts in self.aggregated.items():
            for kind, found in enumerate(zip(*parts, strict=True)):
                copies[kind][subscriptions[k].id] = np.concatenate(found)
        detail = with_records(self.scenario, replace(run, delivered=copies[0], dropped=copies[1], lost=copies[2]))
        found = dict(detail.records)
        for k, parts in self.panes.items():
            sub = subscriptions[k]
            found[sub.id] = records(sub.query, merge(*parts), sub.at, sub.until, self.scenario.duration)
        detail = replace(detail, records=found)
        checked = records_checked(self.scenario, detail, aggregate_results(self.scenario))
        return replace(checked, delivered={}, dropped={}, lost={})
