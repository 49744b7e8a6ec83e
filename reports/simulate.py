"""Running the strategies of a scenario: plan each, simulate it, reduce the run to its report entry.

Three ways, the same results: :func:`simulate` one strategy after the other in this process;
:func:`simulate_parallel` several at a time, each in a forked worker process (an engine that ``forks``:
the local one); and :func:`simulate_pipelined`, where a forked planner lays the plans out one after the
other while the engine (Spark) simulates the ones before it, two strategies at a time, so that neither the
driver's planning nor a strategy whose chunks must run one after the other leaves the executors idle.
Which way is the engine's to say (:class:`Engine`), never its name's.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from network.meter import StrategyRun
from network.routing import Network
from reports.progress import Status
from reports.report import strategy_entry
from reports.surplus import surplus_values
from sharing import make_plan
from sharing.check import plan_problems
from sharing.plan import Plan
from topologies.errors import EmulatorError
from topologies.model import Scenario
from topologies.workload import tuple_count

if TYPE_CHECKING:
    from peers.local import Simulation


RunPlan = Callable[..., StrategyRun]
"""What running strategies one way needs of an engine: to run a plan, ``(scenario, plan, progress=None) ->
StrategyRun`` (any :class:`Engine`, or a plain function such as :func:`peers.local.run_local`)."""


class Engine(Protocol):
    """What running strategies asks of an engine (:func:`reports.runner.engine_for` makes one): it runs a
    plan, ``(scenario, plan, progress=None) -> StrategyRun``, and says how it is driven.  ``name``: the
    report's engine; ``forks``: strategies run side by side, ``--jobs`` at a time, each in a forked worker
    process (:func:`simulate_parallel`), else one at a time, each spread by the engine itself, while a
    forked planner lays the next ones out (:func:`simulate_pipelined`, for a :class:`PipelinedEngine`);
    ``kernels``: it runs the simulator's numba kernels in this process and its forks, which are then
    compiled once before any work."""

    name: str
    forks: bool
    kernels: bool

    def __call__(
        self, scenario: Scenario, plan: Plan, progress: Callable[[int, int], None] | None = None
    ) -> StrategyRun: ...


class PipelinedEngine(Engine, Protocol):
    """An engine that does not fork (``forks`` false): it starts once (:meth:`start`), then simulates
    plans laid out elsewhere (:meth:`simulate`, a :class:`peers.local.Simulation`), from several threads
    at once."""

    def start(self) -> None: ...

    def simulate(
        self, simulation: Simulation, strategy: str, progress: Callable[[int, int], None] | None = None
    ) -> StrategyRun: ...


Results = tuple[dict[str, dict], dict[str, StrategyRun], dict[str, tuple[float, float]]]


class PlanCheckError(EmulatorError):
    """``--check-plans`` found a plan that is not sound (a planner bug)."""


def simulate(
    scenario: Scenario,
    strategies: list[str],
    engine: RunPlan,
    *,
    show_progress: bool | str,
    check_plans: bool = False,
    plan_sink: Callable[[Plan], None] | None = None,
    status: Status | None = None,
    decisions: dict[str, list[dict]] | None = None,
) -> Results:
    """Plan and run each strategy, one at a time, and reduce each run to its report entry at once.

    Returns the report entries, each run without its per-tuple arrays (the timeline stays, for the plots),
    and (plan seconds, run seconds) per strategy.  Memory therefore holds one strategy's per-tuple data at a
    time: ``plan_sink`` receives each plan (to write it out) before it is dropped.  With ``check_plans`` every
    plan goes through :func:`sharing.check.plan_problems` first; an unsound one raises PlanCheckError.
    ``decisions``, when given, receives each strategy's planner decisions (as plans.json writes them), and
    ``status`` shows the progress (else one is made from ``show_progress``).
    """
    network = Network.of(scenario)
    per_strategy = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    entries: dict[str, dict] = {}
    runs: dict[str, StrategyRun] = {}
    timings: dict[str, tuple[float, float]] = {}
    with ProgressBar(per_strategy, strategies, show_progress, status) as bar:
        for name in strategies:
            plan, entries[name], runs[name], timings[name] = _strategy(
                scenario, network, name, engine, check_plans, partial(bar.update, name)
            )
            bar.update(name, "done", per_strategy)
            if decisions is not None:
                decisions[name] = [d.to_json() for d in plan.decisions]
            if plan_sink is not None:
                plan_sink(plan)
            del plan
    return entries, runs, timings


def _strategy(
    scenario: Scenario,
    network: Network,
    name: str,
    engine: RunPlan,
    check_plans: bool,
    report: Callable[[str, int], None],
) -> tuple[Plan, dict, StrategyRun, tuple[float, float]]:
    """Plan and run one strategy: its plan, report entry, run without per-tuple arrays, and timings."""
    t0 = time.perf_counter()
    plan = plan_checked(scenario, network, name, check_plans, report)
    t1 = time.perf_counter()
    report("running", 0)
    run = engine(scenario, plan, progress=lambda done, total: report("running", done))
    timings = (t1 - t0, time.perf_counter() - t1)
    entry = strategy_entry(scenario, run, surplus_values(scenario, plan))
    return plan, entry, replace(run, delivered={}, latencies={}), timings


def plan_checked(
    scenario: Scenario, network: Network, name: str, check_plans: bool, report: Callable[[str, int], None]
) -> Plan:
    """Strategy ``name``'s plan, reporting the planning progress; with ``check_plans``, PlanCheckError
    for a plan :func:`sharing.check.plan_problems` finds unsound."""
    report("planning", 0)
    plan = make_plan(scenario, name, network, progress=partial(_planning, report))
    if check_plans:
        problems = plan_problems(plan, scenario, network)
        if problems:
            raise PlanCheckError(f"--check-plans: the {name} plan is not sound: " + "; ".join(problems[:5]))
    return plan


def _planning(report: Callable[[str, int], None], done: int, total: int) -> None:
    """Planning progress as the phase's name (``planning 40%``), at each whole percent of the epochs."""
    if total and done * 100 // total != (done - 1) * 100 // total:
        report(f"planning {done * 100 // total}%", 0)


def simulate_parallel(
    scenario: Scenario,
    strategies: list[str],
    jobs: int,
    plan_dir: str,
    *,
    show_progress: bool | str,
    check_plans: bool = False,
    engine: RunPlan | None = None,
    status: Status | None = None,
    decisions: dict[str, list[dict]] | None = None,
) -> Results:
    """:func:`simulate` on the local engine (or ``engine``) with up to ``jobs`` strategies at a time, each in
    its own worker process (forked, so the scenario is shared, not copied); each
    plan is written to ``plan_dir/<strategy>.json``.  The results are those of :func:`simulate`: each
    strategy is planned and simulated exactly as it would be alone.  A worker's error is raised here; a
    worker that dies (killed, out of memory) is an EmulatorError naming its strategy; the others are then
    stopped."""
    import multiprocessing
    from queue import Empty

    from peers.local import run_local

    per_strategy = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    context = multiprocessing.get_context("fork")
    messages = context.Queue()
    job = {
        "scenario": scenario,
        "engine": run_local if engine is None else engine,
        "check": check_plans,
        "out": plan_dir,
        "queue": messages,
    }
    results: dict[str, tuple[dict, StrategyRun, tuple[float, float]]] = {}
    waiting, running = list(strategies), {}
    try:
        with ProgressBar(per_strategy, strategies, show_progress, status) as bar:
            while waiting or running:
                while waiting and len(running) < jobs:
                    name = waiting.pop(0)
                    running[name] = context.Process(target=_worker, args=(job, name), name=name, daemon=True)
                    running[name].start()
                gone = [n for n, process in running.items() if not process.is_alive()]
                while True:  # every message sent so far, including those of the workers seen gone
                    try:
                        kind, name, *payload = messages.get(timeout=0 if gone else 0.2)
                    except Empty:
                        break
                    if kind == "progress":
                        bar.update(name, *payload)
                    elif kind == "error":
                        raise payload[0]
                    else:
                        results[name] = payload[0]
                        if decisions is not None:
                            decisions[name] = payload[1]
                        bar.update(name, "done", per_strategy)
                        running.pop(name).join()
                        if not gone:
                            break  # start the next strategy now, not after the others fall silent
                    gone = gone or [n for n, process in running.items() if not process.is_alive()]
                for name in gone:
                    if name in running and name not in results:
                        code = running[name].exitcode
                        raise EmulatorError(f"the worker process running {name} died (exit code {code})")
    finally:
        for process in running.values():
            process.terminate()
            process.join()
    return (
        {n: results[n][0] for n in strategies},
        {n: results[n][1] for n in strategies},
        {n: results[n][2] for n in strategies},
    )


def _worker(job: dict, name: str) -> None:
    """One strategy of :func:`simulate_parallel`, in a forked worker: everything it reports goes to the
    parent's queue (progress, then the result or the error)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    scenario, queue = job["scenario"], job["queue"]
    try:
        plan, entry, run, timings = _strategy(
            scenario,
            Network.of(scenario),
            name,
            job["engine"],
            job["check"],
            lambda phase, done: queue.put(("progress", name, phase, done)),
        )
        with open(os.path.join(job["out"], f"{name}.json"), "w", encoding="utf-8") as fh:
            plan.write_json(fh)
        queue.put(("result", name, (entry, run, timings), [d.to_json() for d in plan.decisions]))
    except Exception as error:  # sent to the parent, which raises it
        queue.put(("error", name, _picklable(name, error)))
    queue.close()
    queue.join_thread()


class ProgressBar:
    """Progress over every strategy's emitted tuples, naming the strategies at work and their phase, on a
    :class:`reports.progress.Status` (the run's own, or one made here from ``show``)."""

    def __init__(self, per_strategy: int, strategies: list[str], show: bool | str, status: Status | None = None):
        self.per_strategy = per_strategy
        self.done = dict.fromkeys(strategies, 0)
        self.phases: dict[str, str] = {}
        self.finished = 0
        self.own = status is None
        self.status = status or Status("run", per_strategy * len(strategies), "tuple", show)

    def update(self, name: str, phase: str, done: int) -> None:
        """``name`` is at ``phase`` (planning, running, done) with ``done`` of its tuples simulated."""
        if phase == "done":
            self.phases.pop(name, None)
            done = self.per_strategy
            self.finished += 1
            self.status.note(f"{name} done ({self.finished}/{len(self.done)} strategies)")
        else:
            self.phases[name] = phase
        self.done[name] = done
        detail = ", ".join(f"{n}: {p}" for n, p in self.phases.items())
        self.status.update(sum(self.done.values()), detail)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.own:
            self.status.close()


PIPELINED_STREAMS = 2  # strategies a pipelined engine (Spark) simulates at once


def simulate_pipelined(
    scenario: Scenario,
    strategies: list[str],
    engine: PipelinedEngine,
    plan_dir: str,
    *,
    show_progress: bool | str,
    check_plans: bool = False,
    status: Status | None = None,
    decisions: dict[str, list[dict]] | None = None,
) -> Results:
    """:func:`simulate` on an engine that does not fork (the Spark engine), pipelined.

    A forked planner process plans every strategy in turn, writes its plan to ``plan_dir/<strategy>.json``
    and its layout (:class:`peers.local.Simulation`, which validates the plan) next to it; this process
    hands each layout to the engine as soon as it is ready, :data:`PIPELINED_STREAMS` strategies at a time
    (threads submitting their jobs to the one Spark session).  The planner is forked before the engine
    starts, and only the layouts cross over.  The results are those of :func:`simulate`."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
    from queue import Empty

    per_strategy = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    context = multiprocessing.get_context("fork")
    messages = context.Queue()
    planner = context.Process(
        target=_planner, args=(scenario, strategies, check_plans, plan_dir, messages), name="planner", daemon=True
    )
    planner.start()
    results: dict[str, tuple[dict, StrategyRun, tuple[float, float]]] = {}
    lock = threading.Lock()

    def run(bar: ProgressBar, name: str, path: str, plan_s: float, surplus: dict) -> tuple[str, tuple]:
        with open(path, "rb") as fh:
            simulation = pickle.load(fh)
        os.remove(path)

        def progress(done: int, total: int) -> None:
            with lock:
                bar.update(name, "running", done)

        t0 = time.perf_counter()
        done = engine.simulate(simulation, name, progress)
        entry = strategy_entry(scenario, done, surplus)
        return name, (entry, replace(done, delivered={}, latencies={}), (plan_s, time.perf_counter() - t0))

    try:
        with (
            ProgressBar(per_strategy, strategies, show_progress, status) as bar,
            ThreadPoolExecutor(PIPELINED_STREAMS) as pool,
        ):
            engine.start()  # here, not by two threads at once
            running: set = set()
            planned = 0
            while len(results) < len(strategies):
                try:
                    kind, name, *payload = messages.get(timeout=0.2)
                except Empty:
                    kind = None
                if kind == "progress":
                    with lock:
                        bar.update(name, *payload)
                elif kind == "error":
                    raise payload[0]
                elif kind == "ready":
                    planned += 1
                    path, plan_s, made, surplus = payload
                    if decisions is not None:
                        decisions[name] = made
                    running.add(pool.submit(run, bar, name, path, plan_s, surplus))
                if running:
                    finished, running = wait(running, timeout=0, return_when=FIRST_COMPLETED)
                    for future in finished:
                        name, result = future.result()
                        results[name] = result
                        with lock:
                            bar.update(name, "done", per_strategy)
                if kind is None and planned < len(strategies) and not planner.is_alive():
                    raise EmulatorError(f"the planner process died (exit code {planner.exitcode})")
    finally:
        planner.terminate()
        planner.join()
    return (
        {n: results[n][0] for n in strategies},
        {n: results[n][1] for n in strategies},
        {n: results[n][2] for n in strategies},
    )


def _planner(scenario: Scenario, strategies: list[str], check_plans: bool, plan_dir: str, queue) -> None:
    """:func:`simulate_pipelined`'s planner, in a forked process: each strategy's plan and layout, in order."""
    import signal

    from peers.local import Simulation

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the planner
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    network = Network.of(scenario)
    name = ""
    try:
        for name in strategies:
            t0 = time.perf_counter()
            report = partial(_report, queue, name)
            plan = plan_checked(scenario, network, name, check_plans, report)
            with open(os.path.join(plan_dir, f"{name}.json"), "w", encoding="utf-8") as fh:
                plan.write_json(fh)
            path = os.path.join(plan_dir, f"{name}.simulation")
            with open(path, "wb") as fh:
                pickle.dump(Simulation(scenario, plan), fh, protocol=pickle.HIGHEST_PROTOCOL)
            made = [d.to_json() for d in plan.decisions]
            plan_s = time.perf_counter() - t0
            surplus = surplus_values(scenario, plan)  # from the plan and the tuples, in chunks, beside Spark's work
            del plan
            queue.put(("ready", name, path, plan_s, made, surplus))
    except Exception as error:  # sent to the parent, which raises it
        queue.put(("error", name, _picklable(name, error)))
    queue.close()
    queue.join_thread()


def _report(queue, name: str, phase: str, done: int) -> None:
    queue.put(("progress", name, phase, done))


def _picklable(name: str, error: Exception) -> Exception:
    """``error``, or its text in an EmulatorError if it does not pickle (it crosses a process boundary)."""
    try:
        pickle.dumps(error)
    except Exception:
        return EmulatorError(f"{name}: {type(error).__name__}: {error}")
    return error
