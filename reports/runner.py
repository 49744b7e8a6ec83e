"""``python run.py run``: plan and simulate every strategy, then write the report directory atomically.

:func:`run_scenario` is the command as a library call: a loaded scenario and :class:`RunOptions` in, a
:class:`RunResult` out (the report, what was written, the timings); ``run.py`` prints it (:func:`run_lines`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from network.queues import kernels_cached
from reports.progress import Status, progress_mode
from reports.report import (
    assemble_report,
    console_table,
    links_csv,
    report_json,
    strategy_entry,
    summary_markdown,
    timeline_csv,
)
from reports.simulate import Engine, simulate, simulate_parallel, simulate_pipelined
from sharing import check_strategy, strategy_names
from sharing.plan import Plan
from topologies.errors import InputError
from topologies.model import Scenario
from topologies.workload import tuple_count

ENGINES = ("local", "spark")


def choose_strategies(names: tuple[str, ...] | list[str] | None) -> list[str]:
    """The strategies to run (none given: all, the built-in ones then those registered from Python), in that
    order; unknown names are an input error."""
    for name in names or ():
        check_strategy(name)
    return [s for s in strategy_names() if not names or s in names]


def choose_jobs(jobs: int | None, engine: Engine, strategies: list[str]) -> int:
    """How many strategies run at a time: ``--jobs``, by default one per CPU (at most one per strategy) on
    an engine that forks a worker per strategy (the local one); another runs one strategy at a time (Spark
    spreads each over its executors)."""
    if jobs is None:
        return max(1, min(len(strategies), os.cpu_count() or 1)) if engine.forks else 1
    if jobs < 1:
        raise InputError(f"--jobs: must be at least 1, got {jobs}")
    if jobs > 1 and not engine.forks:
        raise InputError(f"--jobs {jobs}: the {engine.name} engine runs one strategy at a time (use --jobs 1)")
    return min(jobs, len(strategies))


def engine_for(name: str, master: str | None, conf: list[str] | None = None) -> Engine:
    """The engine ``name`` (one of :data:`ENGINES`) runs; raises InputError for another name, and for a
    malformed Spark master URL or setting."""
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}; valid engines: {', '.join(ENGINES)}")
    if name == "local":
        from peers.local import LocalEngine

        return LocalEngine()
    from peers.spark import spark_engine
    from peers.spark_session import parse_conf

    return spark_engine(master, parse_conf(conf))


PLOTS = ("bytes.png", "timeline.png", "latency.png", "topology.png", "utilization.png", "load.png", "streams.png")
REPORT_FILES = frozenset(
    {"report.json", "report.html", "links.csv", "timeline.csv", "summary.md", "plans.json", *PLOTS}
)
"""Every file a report of ours writes: an existing directory holding only these (and :data:`LIVE_ENTRIES`)
is a previous report, which a new run replaces; any other file is the user's."""
LIVE_ENTRIES = frozenset({"live", "live-broker"})
"""What ``serve`` keeps under a report directory by default (its report, the ``--secure`` broker files)."""


class OutputDirectory:
    """A report directory written whole, never at the expense of anything the tool did not create.

    Files go to a temporary directory first (:meth:`path`).  :meth:`commit` then renames it to ``out_dir``
    when that does not exist, or moves each file into ``out_dir`` when it is an empty directory or a
    previous report of ours (only :data:`REPORT_FILES`), removing the report files of ours the new run did
    not write; a directory holding anything else is refused unless ``force`` (then only the report's files
    are written into it, and nothing else there is touched).  :meth:`discard` (or an exception inside
    ``with``) removes the temporary directory.  Raises InputError at construction, before any work, for an
    output path that cannot be used.
    """

    def __init__(self, out_dir: str, force: bool = False):
        self.out_dir = out_dir
        self.existing = self.check(out_dir, force)
        self.force = force
        target = os.path.abspath(out_dir)
        where = target if self.existing else os.path.dirname(target)
        missing = []  # the directories created here, removed again if the output cannot be written
        parent = where
        while not os.path.lexists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        try:
            os.makedirs(where, exist_ok=True)
            prefix = ".report." if self.existing else f".{os.path.basename(target)}."
            self.tmp = tempfile.mkdtemp(prefix=prefix, dir=where)
        except OSError as err:
            for directory in missing:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            raise InputError(f"--out {out_dir}: cannot write there ({err.strerror or err})") from None

    @staticmethod
    def check(out_dir: str, force: bool = False) -> bool:
        """Whether ``out_dir`` exists (as a directory the report may go into); InputError if it cannot be
        used: not a directory, or holding files that are not a report of ours (without ``force``)."""
        if not os.path.lexists(out_dir):
            return False
        if not os.path.isdir(out_dir):
            raise InputError(f"--out {out_dir}: exists and is not a directory")
        try:
            names = os.listdir(out_dir)
            foreign = sorted(n for n in names if n not in REPORT_FILES | LIVE_ENTRIES and not n.startswith(".report."))
        except OSError as err:
            raise InputError(f"--out {out_dir}: cannot read it ({err.strerror or err})") from None
        if foreign and not force:
            raise InputError(
                f"--out {out_dir}: directory holds {foreign[0]!r}, which is not part of a report"
                " (choose an empty or new directory, or pass --force to write the report's files beside it)"
            )
        return True

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def commit(self) -> None:
        if not self.existing:
            try:
                os.replace(self.tmp, self.out_dir)
                return
            except OSError:  # created meanwhile (another run into the same --out): join it as an existing one
                if not os.path.isdir(self.out_dir):
                    raise
                self.existing = self.check(self.out_dir, self.force)
        written = set(os.listdir(self.tmp))
        for name in sorted(written):
            os.replace(os.path.join(self.tmp, name), os.path.join(self.out_dir, name))
        os.rmdir(self.tmp)
        if not self.force:  # a previous report of ours: its files this run did not write are stale
            for name in REPORT_FILES - written:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.out_dir, name))

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> OutputDirectory:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.discard()


def write_directory(
    out_dir: str, files: dict[str, str], writer: Callable[[str], list[str]] | None, force: bool = False
) -> None:
    """Write ``files`` (name -> text) and whatever ``writer(tmpdir)`` adds into ``out_dir`` through an
    :class:`OutputDirectory`: nothing half-written, nothing of the user's touched."""
    with OutputDirectory(out_dir, force) as out:
        for name, text in files.items():
            with open(out.path(name), "w", encoding="utf-8") as fh:
                fh.write(text)
        if writer is not None:
            writer(out.tmp)
        out.commit()


class _PlansFile:
    """``plans.json``: one compact plan document per strategy (:meth:`Plan.write_json`), written as each
    strategy finishes."""

    def __init__(self, path: str):
        self.fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.fh.write("{")
        self.count = 0

    def add(self, plan: Plan) -> None:
        self._name(plan.strategy)
        plan.write_json(self.fh)

    def add_file(self, strategy: str, path: str) -> None:
        """Append the plan document ``path`` (written by :meth:`Plan.write_json`) and remove it."""
        self._name(strategy)
        with open(path, encoding="utf-8") as part:
            shutil.copyfileobj(part, self.fh)
        os.remove(path)

    def _name(self, strategy: str) -> None:
        self.fh.write(("," if self.count else "") + "\n" + json.dumps(strategy) + ":")
        self.count += 1

    def close(self) -> None:
        self.fh.write("\n}\n")
        self.fh.close()


def peak_memory_bytes(children: bool = False) -> int:
    """This process's peak resident set size so far (``children``: the largest of its finished child
    processes')."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss * 1024


COMPILE_NOTE = "about 20 s on 2 cores, cached for every later run (make venv compiles them)"
WARM_UP = {  # a run of a second touching every compiled path of the simulator: buffers, failures, sharing
    "name": "warm-up",
    "duration": 2,
    "network": {
        "defaults": {"latency": "1ms"},
        "super_peers": ["A", "B", "C"],
        "links": [["A", "B", {"bandwidth": "64Kbit", "buffer": "1KB"}], ["B", "C"], ["A", "C", {"latency": "3ms"}]],
    },
    "thin_peers": [{"id": "P0", "attach": "A"}, {"id": "P1", "attach": "C"}, {"id": "P2", "attach": "B"}],
    "streams": [{"id": "s", "source": "P0", "rate": 200, "schema": {"x": {"distribution": {"uniform": [0, 1]}}}}],
    "subscriptions": [
        {"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT x FROM s WHERE x < 0.5"},
        {"id": "Q2", "peer": "P2", "at": 0.5, "until": 1.5, "query": "SELECT * FROM s WHERE x < 0.3"},
    ],
    "events": [{"at": 1, "fail": "link", "link": ["B", "C"]}],
}


def warm_up() -> float:
    """Compile the simulator's kernels into numba's on-disk cache (what the first run would otherwise do,
    and every worker process of it at once) by running a tiny scenario; returns the seconds it took."""
    from peers.local import run_local
    from sharing import make_plan
    from topologies.loader import scenario_from_document

    started = time.perf_counter()
    scenario = scenario_from_document(WARM_UP, "<warm-up>")
    for name in ("data-shipping", "sharing-em"):
        run = run_local(scenario, make_plan(scenario, name))
        assemble_report(scenario, {name: strategy_entry(scenario, run)}, "local")
    return time.perf_counter() - started


def _tuples_of(per_strategy: int, strategies: list[str]) -> str:
    """What a run's progress counts, as a user counts it: the scenario's tuples, once per strategy."""
    n = len(strategies)
    return f"{per_strategy:,} tuples" + (f" x {n} strategies" if n > 1 else "")


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_scenario` runs a scenario and where it writes the report.

    Checked at construction, before any work: raises InputError for an unknown strategy or engine, a
    ``jobs`` below 1 or above 1 on the Spark engine, a malformed Spark master URL or setting."""

    strategies: tuple[str, ...] = ()  # none: every strategy (run in the canonical order either way)
    engine: str = "local"  # or "spark"
    spark_master: str | None = None  # default local[*]
    spark_conf: tuple[str, ...] = ()  # KEY=VALUE Spark settings
    out: str | None = None  # the report directory; default out/<scenario name>/
    plots: bool = True
    force: bool = False  # write the report's files into a directory holding other files (left alone)
    progress: bool | str = False  # on stderr: True a bar on a terminal, else plain lines (or "bar", "lines", "off")
    jobs: int | None = None  # strategies simulated at a time (local engine); default one per CPU
    check_plans: bool = False  # check every plan's soundness first; an unsound one raises PlanCheckError

    def __post_init__(self) -> None:
        strategies = choose_strategies(self.strategies)
        choose_jobs(self.jobs, engine_for(self.engine, self.spark_master, list(self.spark_conf)), strategies)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run_scenario` did."""

    report: dict  # report.json's content
    out_dir: str  # where the report was written
    strategies: list[str]  # in the order run and reported
    jobs: int  # strategies simulated at a time
    timings: dict[str, tuple[float, float]]  # per strategy: seconds planning and running
    plots: list[str]  # the PNG files written (none without plots)

    @property
    def exact(self) -> bool:
        """Every strategy delivered exactly the centralized result to every subscription."""
        return self.report["exact"]


def run_scenario(scenario: Scenario, options: RunOptions) -> RunResult:
    """Plan and simulate each strategy of ``options`` on ``scenario`` and write the report directory
    (report.json, report.html, links.csv, timeline.csv, summary.md, plans.json and the plots) whole, or
    nothing.

    Raises InputError for an output directory that cannot be used (before any work), PlanCheckError for an
    unsound plan (with ``check_plans``), EngineError when the Spark engine fails."""
    strategies = choose_strategies(options.strategies)
    engine = engine_for(options.engine, options.spark_master, list(options.spark_conf))
    jobs = choose_jobs(options.jobs, engine, strategies)
    out_dir = options.out or os.path.join("out", scenario.name)  # the loader keeps names to 100 characters
    mode = progress_mode(options.progress)
    check_plans = options.check_plans
    per_strategy = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    decisions: dict[str, list[dict]] = {}

    with (
        OutputDirectory(out_dir, options.force) as out,
        Status("run", per_strategy * len(strategies), "tuple", mode, of=_tuples_of(per_strategy, strategies)) as status,
    ):
        if engine.kernels and not kernels_cached():
            # once per installation (make venv does it): else each worker process would compile them at once
            status.phase(f"compiling the simulator's kernels (numba), once: {COMPILE_NOTE}")
            warm_up()
        plans = _PlansFile(out.path("plans.json"))
        common = {"show_progress": mode, "check_plans": check_plans, "status": status, "decisions": decisions}
        try:
            if jobs > 1 or (not engine.forks and len(strategies) > 1):
                parts = tempfile.mkdtemp(prefix=".plans.", dir=out.tmp)
                if engine.forks:
                    entries, runs, timings = simulate_parallel(
                        scenario, strategies, jobs, parts, engine=engine, **common
                    )
                else:
                    entries, runs, timings = simulate_pipelined(scenario, strategies, engine, parts, **common)
                status.phase("writing plans.json")
                for name in strategies:
                    plans.add_file(name, os.path.join(parts, f"{name}.json"))
                os.rmdir(parts)
            else:
                entries, runs, timings = simulate(scenario, strategies, engine, plan_sink=plans.add, **common)
        finally:
            plans.close()
        report = assemble_report(scenario, entries, engine=engine.name)
        status.phase("writing report.json, links.csv, timeline.csv, summary.md")
        texts = {"report.json": report_json(report), "links.csv": links_csv(report), "timeline.csv": timeline_csv(runs)}
        for name, text in texts.items():
            with open(out.path(name), "w", encoding="utf-8") as fh:
                fh.write(text)
        plot_names = list(PLOTS) if options.plots else []
        with open(out.path("summary.md"), "w", encoding="utf-8") as fh:
            fh.write(summary_markdown(report, plot_names))
        plots: list[str] = []
        if options.plots:
            from reports.plots import write_plots

            status.phase("drawing the plots")
            plots.extend(write_plots(out.tmp, scenario, report, runs))
        status.phase("writing report.html")
        from reports.html import report_html

        with open(out.path("report.html"), "w", encoding="utf-8") as fh:
            fh.write(report_html(report, scenario, out.tmp, plots, decisions))
        out.commit()
    return RunResult(report, out_dir, strategies, jobs, timings, plots)


def run_lines(scenario: Scenario, options: RunOptions, result: RunResult, seconds: float) -> list[str]:
    """What ``run`` prints when it is done (``seconds``: wall seconds since it started): the comparison
    table, the timings and peak memory, what was written."""
    each = ", ".join(f"{n} {p:.1f}+{r:.1f}" for n, (p, r) in result.timings.items())
    workers = f", {result.jobs} strategies at a time" if result.jobs > 1 else ""
    subscriptions = len(scenario.subscriptions)
    return [
        f"{scenario.name}: {subscriptions} subscriptions, {scenario.duration:g} s, engine {options.engine}",
        console_table(result.report),
        f"timing: {seconds:.1f} s in all (plan+run s: {each}{workers});"
        f" peak memory {peak_memory_bytes() / 2**30:.2f} GiB"
        + (f" (largest worker process {peak_memory_bytes(children=True) / 2**30:.2f} GiB)" if result.jobs > 1 else ""),
        f"wrote {os.path.join(result.out_dir, 'report.html')}, report.json, links.csv, timeline.csv, summary.md,"
        " plans.json" + (", plots" if result.plots else ""),
    ]
