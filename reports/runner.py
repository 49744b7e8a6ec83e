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

from network.meter import StrategyRun
from network.routing import Network
from reports.expected import expected_results
from reports.report import build_report, console_table, links_csv, report_json, summary_markdown
from sharing import STRATEGIES, make_plan
from sharing.plan import Plan
from topologies.errors import InputError
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


def simulate(
    scenario: Scenario, strategies: list[str], engine: Engine, *, show_progress: bool
) -> tuple[dict[str, StrategyRun], dict[str, Plan], dict[str, tuple[float, float]]]:
    """Plan and run each strategy; returns runs, plans and (plan seconds, run seconds) per strategy."""
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
    runs: dict[str, StrategyRun] = {}
    plans: dict[str, Plan] = {}
    timings: dict[str, tuple[float, float]] = {}
    for i, name in enumerate(strategies):
        bar.set_description(name)
        t0 = time.perf_counter()
        plans[name] = make_plan(scenario, name, network)
        t1 = time.perf_counter()

        def progress(done: int, total: int, base: int = i * per_strategy) -> None:
            bar.n = base + done
            bar.refresh()

        runs[name] = engine(scenario, plans[name], progress=progress)
        timings[name] = (t1 - t0, time.perf_counter() - t1)
    bar.close()
    return runs, plans, timings


def write_directory(out_dir: str, files: dict[str, str], writer: Callable[[str], list[str]] | None) -> None:
    """Write ``files`` (name -> text) and whatever ``writer(tmpdir)`` adds, then swap the directory in.

    Nothing half-written: everything goes to a temporary sibling first, which replaces ``out_dir`` only when
    complete.
    """
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", dir=parent)
    try:
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        if writer is not None:
            writer(tmp)
        if os.path.exists(out_dir):
            old = tmp + ".old"
            os.replace(out_dir, old)
            os.replace(tmp, out_dir)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run_scenario(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    strategies = choose_strategies(args.strategy)
    engine = engine_for(args.engine, args.spark_master)
    for warning in scenario.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    out_dir = args.out or os.path.join("out", scenario.name)
    show_progress = not args.quiet and sys.stderr.isatty()

    runs, plans, timings = simulate(scenario, strategies, engine, show_progress=show_progress)
    expected = expected_results(scenario)
    report = build_report(scenario, runs, expected, engine=args.engine)

    plots: list[str] = []

    def write_plots(tmp: str) -> list[str]:
        from reports.plots import write_plots as draw

        plots.extend(draw(tmp, scenario, report, runs))
        return plots

    files = {
        "report.json": report_json(report),
        "links.csv": links_csv(report),
        "plans.json": json.dumps({n: p.to_json() for n, p in plans.items()}, indent=1) + "\n",
    }
    plot_names = [] if args.no_plots else ["bytes.png", "timeline.png", "latency.png", "topology.png"]
    files["summary.md"] = summary_markdown(report, plot_names)
    write_directory(out_dir, files, None if args.no_plots else write_plots)

    print(
        f"{scenario.name}: {len(scenario.subscriptions)} subscriptions, {scenario.duration:g} s, engine {args.engine}"
    )
    print(console_table(report))
    slowest = max(timings, key=lambda n: sum(timings[n]))
    print(f"timing: slowest strategy {slowest} (plan {timings[slowest][0]:.2f} s, run {timings[slowest][1]:.2f} s)")
    print(f"wrote {os.path.join(out_dir, 'report.json')}, links.csv, summary.md" + (", plots" if plots else ""))
    if not report["exact"]:
        print("error: some strategy did not deliver exactly the centralized result (see report.json)", file=sys.stderr)
        return 1
    return 0
