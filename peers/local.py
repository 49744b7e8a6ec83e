"""The local engine: a Plan's channels and readers (peers/timetable.py) over the FIFO link queues
(network/queues.py), window by window on simpy's clock, with the scenario's failures as the down intervals
of the link directions (docs/DYNAMICS.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import simpy

from network.buffers import NEVER, QueueState
from network.emulated import down_directions, link_specs, processor_downs, processor_nodes, processor_specs
from network.exactness import checked
from network.linkrule import to_ticks
from network.meter import StrategyRun, TrafficMeter, bin_width, load_bin
from network.queues import Queues
from network.routing import Network
from peers.subscriber import with_records
from peers.timetable import Timetable
from sharing.plan import Plan
from topologies import workload
from topologies.expected import Unreachable, expected_results
from topologies.model import Scenario
from topologies.workload import Values


def run_local(
    scenario: Scenario,
    plan: Plan,
    progress: Callable[[int, int], None] | None = None,
    *,
    window: float | None = None,
    values: Values | None = None,
) -> StrategyRun:
    """Simulate ``plan`` over ``scenario``: traffic per link direction, every copy delivered (with its
    latency), dropped or lost, and the check of them against the expected tuples (network/exactness.py).

    ``window`` is the batch length in seconds of emission time (default :func:`batch_window`; a unit of
    work only: no count and no time depends on it, see network/queues.py, "Horizon");
    ``values(stream, start, stop)`` replaces the scenario's workload (tests).  ``progress(done, total)`` is
    called after each window with the tuples emitted so far.  Raises :class:`EmulatorError` for an
    inconsistent plan (naming the flow or subscription) and for epochs that overlap or are not in order.
    """
    with collector_paused():
        simulation = Simulation(scenario, plan, window=window, values=values)
        meter = simulation.meter()
        simulation.play(simulation.windows(), meter, values=values, progress=progress)
        run = simulation.with_plan(meter.result(plan.strategy, "local"))
        return checked(scenario, with_records(scenario, run, values), expected_results(scenario, values))


class LocalEngine:
    """The local engine as the run command drives it (:class:`reports.simulate.Engine`): :func:`run_local`
    with the scenario's workload; strategies side by side in forked worker processes; the simulator's
    numba kernels run in this process and its forks, so they are compiled into numba's cache once before
    the workers start."""

    name = "local"
    forks = True
    kernels = True

    def __call__(
        self, scenario: Scenario, plan: Plan, progress: Callable[[int, int], None] | None = None
    ) -> StrategyRun:
        return run_local(scenario, plan, progress)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (on again after it, if it was on).

    Laying out a plan and playing its windows allocate tens of thousands of small objects that hold no
    cycles (phases, channel tuples, per-window arrays).  Every few hundred allocations start a collection,
    and the older generations' collections walk every object the process holds: after planning, the
    plan's flows, deliveries and predicates, hundreds of thousands of them, walked again and again for
    nothing.  Whatever cyclic garbage the block leaves is collected once it is on again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Simulation:
    """A plan laid out for the simulator: its timetable (peers/timetable.py), the link queues' arrays
    (network/queues.py) and the run's windows.  :meth:`play` runs any stretch of consecutive windows from a
    given state of the queues, which is how the Spark engine splits a run over its executors; a
    simulation pickles without the plan (the timetable keeps only its compiled arrays)."""

    def __init__(self, scenario: Scenario, plan: Plan, *, window: float | None = None, values: Values | None = None):
        self.scenario = scenario
        self.window = batch_window(scenario) if window is None else window
        network = Network.of(scenario)
        links = link_specs(scenario, network) | processor_specs(scenario)
        self.backbone = network.directions
        self.attrs = {
            s.id: s.query.attributes(scenario.stream(s.stream).attribute_names) for s in scenario.subscriptions
        }
        with collector_paused():  # the layout and the queues' arrays
            self.timetable = Timetable(scenario, plan, network, values)
            self.queues = Queues(
                links,
                self.timetable.routes(),
                self.meter(),
                smallest=scenario.tuple_bytes(1),
                down=down_directions(scenario) | processor_downs(scenario),
            )
        self.operators, self.rejected = self.timetable.operators, dict(plan.rejected)
        self.rejected_at = {
            sub: t for sub, t in plan.rejected_from().items() if t > scenario.subscription(sub).at
        }  # rejected after arriving (at a re-plan): the report checks what each received up to then
        self.replans = plan.replans
        # the expected tuples emitted while a subscription was cut off are accounted for, like the dropped and
        # lost ones (the Spark engine counts them per chunk)
        self.unreachable = Unreachable(scenario)

    def with_plan(self, run: StrategyRun) -> StrategyRun:
        """``run`` with what the report takes from the plan: operators per super-peer, rejections (and when,
        for those rejected after arriving), re-plans."""
        return replace(
            run,
            operators=dict(self.operators),
            rejected=dict(self.rejected),
            rejected_at=dict(self.rejected_at),
            replans=self.replans,
            aggregated_at=dict(self.timetable.aggregated_at),
        )

    def meter(self) -> TrafficMeter:
        """A meter for (part of) this run."""
        duration = self.scenario.duration
        streams = [s.id for s in self.scenario.streams]
        return TrafficMeter(
            self.backbone, self.attrs, bin_width(duration), self.scenario.super_peers, load_bin(duration), streams,
            processors=sorted(processor_nodes(self.scenario)),
        )  # fmt: skip

    def windows(self) -> list[tuple[float, float]]:
        """The run's windows of emission time, in order."""
        return list(_windows(self.window, float(self.scenario.duration)))

    def play(
        self,
        windows: Sequence[tuple[float, float]],
        meter: TrafficMeter,
        *,
        state: QueueState | None = None,
        values: Values | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Queues:
        """Run ``windows`` (consecutive, in order) into ``meter``, the queues starting from ``state`` (default:
        all links free, nothing waiting); returns the queues, whose :meth:`~network.queues.Queues.state`
        and ``first_arrival`` tell where the stretch ended and how it depended on ``state``."""
        scenario = self.scenario
        keep_freed_memory()
        if values is None:

            def values(stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
                return workload.columns(scenario, stream_id, start, stop)

        times = workload.run_emission_times(scenario)
        self.queues.restart(meter, self.queues.free() if state is None else state)
        env = simpy.Environment()
        env.process(_play(env, self.timetable, self.queues, windows, values, times, progress, scenario.duration))
        with collector_paused():
            env.run()
        return self.queues


def _play(env, timetable: Timetable, queues: Queues, windows, values, times, progress, duration: float):
    """The clock: at the end of each window, its tuples (all emitted by then) move through the queues."""
    total = sum(len(t) for t in times.values())
    for start, end in windows:
        yield env.timeout(max(0.0, end - env.now))
        # copies reaching a link from the window's end on wait for the next one (the run's last: none wait)
        horizon = NEVER if end >= duration else int(to_ticks(end))
        reserve = queues.reserve()  # the window's blocks leave places for the copies held back
        queues.serve(timetable.window(start, end, values, times, reserve), horizon, reserved=reserve is not None)
        if progress is not None:
            progress(sum(int(np.searchsorted(t, end, side="left")) for t in times.values()), total)


@functools.cache
def keep_freed_memory() -> None:
    """Let this process's malloc keep large freed blocks for reuse (glibc only; elsewhere nothing).

    Every window allocates arrays of hundreds of megabytes on a big run (a row per tuple-hop) and frees them
    again; glibc serves such blocks with mmap and returns them to the system on free, so every window pays
    its page faults anew (about a tenth of a data-shipping run's time).  Kept in the heap, they are reused."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 1 << 30)
    mallopt(m_trim_threshold, 1 << 31)


def _windows(window: float, duration: float) -> Iterator[tuple[float, float]]:
    """Windows of ``window`` seconds on the grid ``k * window`` over ``[0, duration)``."""
    start = 0.0
    while start < duration:
        end = float((np.floor(start / window) + 1) * window)
        if end <= start:  # float rounding put the grid point on ``start``
            end = start + window
        end = min(end, duration)
        yield start, end
        start = end


MAX_WINDOW = 5.0  # seconds
MAX_WINDOWS = 10_000  # windows over a run, at most (unless the tuple cap per batch needs more)
WINDOW_TUPLES = 1024


def batch_window(scenario: Scenario) -> float:
    """The default batch window: ``MAX_WINDOW`` seconds, or less so that a batch of the fastest stream holds
    at most ``WINDOW_TUPLES`` tuples.  Each channel moves one batch per window and hop, so longer windows
    mean fewer, larger numpy batches (on 300 super-peers and 500 subscriptions at 200 tuples/s, 5 s windows
    simulate 2-3x faster than 1 s ones, with the very same results); the cap bounds the tuples in flight
    per channel, hence memory."""
    fastest = max((s.rate for s in scenario.streams), default=0.0)
    # a run of more than MAX_WINDOWS windows (days of emulated time) gets longer ones: an empty window costs
    # as much as a full one, and a long run of rare tuples would otherwise walk millions of them
    longest = max(MAX_WINDOW, scenario.duration / MAX_WINDOWS)
    return longest if fastest <= 0 else min(longest, WINDOW_TUPLES / fastest)
