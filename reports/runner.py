"""``python run.py run``: plan and simulate every strategy, then write the report directory atomically."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace

from network.meter import StrategyRun
from network.routing import Network
from reports.expected import Expected, expected_results
from reports.report import assemble_report, console_table, links_csv, report_json, strategy_entry, summary_markdown
from sharing import STRATEGIES, make_plan
from sharing.check import plan_problems
from sharing.plan import Plan
from topologies.errors import EmulatorError, InputError
from topologies.loader import load_scenario
from topologies.model import Scenario
from topologies.workload import tuple_count

Engine = Callable[..., StrategyRun]


def choose_strategies(names: list[str] | None) -> list[str]:
    """The strategies to run, in the canonical order; unknown names are an input error."""
    if not names:
        return list(STRATEGIES)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise InputError(f"--strategy: unknown strategy {unknown[0]!r} (choose from {', '.join(STRATEGIES)})")
    return [s for s in STRATEGIES if s in names]


def engine_for(name: str, master: str | None) -> Engine:
    if name == "local":
        from peers.local import run_local

        return run_local
    from peers.spark import spark_engine

    return spark_engine(master)


class PlanCheckError(EmulatorError):
    """``--check-plans`` found a plan that is not sound (a planner bug)."""


def simulate(
    scenario: Scenario,
    strategies: list[str],
    engine: Engine,
    expected: Expected,
    *,
    show_progress: bool,
    check_plans: bool = False,
    plan_sink: Callable[[Plan], None] | None = None,
) -> tuple[dict[str, dict], dict[str, StrategyRun], dict[str, tuple[float, float]]]:
    """Plan and run each strategy, one at a time, and reduce each run to its report entry at once.

    Returns the report entries, each run without its per-tuple arrays (the timeline stays, for the plots),
    and (plan seconds, run seconds) per strategy.  Memory therefore holds one strategy's per-tuple data at a
    time: ``plan_sink`` receives each plan (to write it out) before it is dropped.  With ``check_plans`` every
    plan goes through :func:`sharing.check.plan_problems` first; an unsound one raises PlanCheckError.
    """
    from tqdm import tqdm

    network = Network.of(scenario)
    per_strategy = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    bar = tqdm(
        total=per_strategy * len(strategies),
        unit="tuple",
        unit_scale=True,
        disable=not show_progress,
        file=sys.stderr,
        leave=False,
    )
    entries: dict[str, dict] = {}
    runs: dict[str, StrategyRun] = {}
    timings: dict[str, tuple[float, float]] = {}
    for i, name in enumerate(strategies):
        bar.set_description(f"{name}: planning")
        t0 = time.perf_counter()
        plan = make_plan(scenario, name, network)
        if check_plans:
            problems = plan_problems(plan, scenario, network)
            if problems:
                raise PlanCheckError(f"--check-plans: the {name} plan is not sound: " + "; ".join(problems[:5]))
        t1 = time.perf_counter()
        bar.set_description(name)

        def progress(done: int, total: int, base: int = i * per_strategy) -> None:
            bar.n = base + done
            bar.refresh()

        run = engine(scenario, plan, progress=progress)
        timings[name] = (t1 - t0, time.perf_counter() - t1)
        if plan_sink is not None:
            plan_sink(plan)
        del plan
        entries[name] = strategy_entry(scenario, run, expected)
        runs[name] = replace(run, delivered={}, latencies={})
        del run
    bar.close()
    return entries, runs, timings


class OutputDirectory:
    """A report directory written whole or not at all: files go to a temporary sibling of ``out_dir``,
    which replaces ``out_dir`` on :meth:`commit`; :meth:`discard` (or an exception inside ``with``)
    removes it."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        parent = os.path.dirname(os.path.abspath(out_dir))
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", dir=parent)

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def commit(self) -> None:
        if os.path.exists(self.out_dir):
            old = self.tmp + ".old"
            os.replace(self.out_dir, old)
            os.replace(self.tmp, self.out_dir)
            shutil.rmtree(old)
        else:
            os.replace(self.tmp, self.out_dir)

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> OutputDirectory:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.discard()


def write_directory(out_dir: str, files: dict[str, str], writer: Callable[[str], list[str]] | None) -> None:
    """Write ``files`` (name -> text) and whatever ``writer(tmpdir)`` adds, then swap the directory in.

    Nothing half-written: everything goes to a temporary sibling first, which replaces ``out_dir`` only when
    complete.
    """
    with OutputDirectory(out_dir) as out:
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
        self.fh.write(("," if self.count else "") + "\n" + json.dumps(plan.strategy) + ":")
        plan.write_json(self.fh)
        self.count += 1

    def close(self) -> None:
        self.fh.write("\n}\n")
        self.fh.close()


def peak_memory_bytes() -> int:
    """This process's peak resident set size so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_scenario(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    scenario = load_scenario(args.scenario)
    strategies = choose_strategies(args.strategy)
    engine = engine_for(args.engine, args.spark_master)
    for warning in scenario.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    out_dir = args.out or os.path.join("out", scenario.name)
    show_progress = not args.quiet and sys.stderr.isatty()

    expected = expected_results(scenario)
    with OutputDirectory(out_dir) as out:
        plans = _PlansFile(out.path("plans.json"))
        try:
            entries, runs, timings = simulate(
                scenario,
                strategies,
                engine,
                expected,
                show_progress=show_progress,
                check_plans=getattr(args, "check_plans", False),
                plan_sink=plans.add,
            )
        finally:
            plans.close()
        report = assemble_report(scenario, entries, engine=args.engine)
        plots: list[str] = []
        for name, text in {"report.json": report_json(report), "links.csv": links_csv(report)}.items():
            with open(out.path(name), "w", encoding="utf-8") as fh:
                fh.write(text)
        plot_names = [] if args.no_plots else ["bytes.png", "timeline.png", "latency.png", "topology.png"]
        with open(out.path("summary.md"), "w", encoding="utf-8") as fh:
            fh.write(summary_markdown(report, plot_names))
        if not args.no_plots:
            from reports.plots import write_plots

            plots.extend(write_plots(out.tmp, scenario, report, runs))
        out.commit()

    print(
        f"{scenario.name}: {len(scenario.subscriptions)} subscriptions, {scenario.duration:g} s, engine {args.engine}"
    )
    print(console_table(report))
    each = ", ".join(f"{n} {p:.1f}+{r:.1f}" for n, (p, r) in timings.items())
    print(
        f"timing: {time.perf_counter() - started:.1f} s in all (plan+run s: {each});"
        f" peak memory {peak_memory_bytes() / 2**30:.2f} GiB"
    )
    print(
        f"wrote {os.path.join(out_dir, 'report.json')}, links.csv, summary.md, plans.json"
        + (", plots" if plots else "")
    )
    if not report["exact"]:
        print("error: some strategy did not deliver exactly the centralized result (see report.json)", file=sys.stderr)
        return 1
    return 0
