"""The emulator as a Python library (docs/API.md): load or build a scenario, plan it, simulate it, and get
the report as objects; register a strategy of your own and run it like the built-in ones.

```python
import streamglobe as sg

scenario = sg.load("topologies/figure1.yaml", seed=3)
report = sg.run(scenario, ["query-shipping", "sharing-em"])   # every figure report.json holds, as objects
print(report.table())
print(report["sharing-em"].backbone_bytes, report["sharing-em"].exact)
```

Every function here is a thin call of the layer that owns the work (topologies, sharing, peers, reports);
the command line (run.py) calls the same ones.  Errors are the project's own: :class:`InputError` for a
wrong input (its message is one line naming the file, key and value), :class:`EmulatorError` for the rest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence

from matcher import Box, Interval, Predicate, Query
from network.meter import StrategyRun
from network.routing import Network
from reports.objects import Latency, LinkTraffic, Report, StrategyResult, SubscriptionResult
from reports.report import assemble_report, strategy_entry
from reports.runner import RunOptions, engine_for, run_scenario
from reports.sweep import SweepOptions, SweepResult, SweepSpec, parse_values, run_sweep
from sharing import (
    STRATEGIES,
    Delivery,
    Epoch,
    Flow,
    Plan,
    make_plan,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from sharing.epochs import timeline
from topologies.errors import EmulatorError, InputError
from topologies.expected import expected_results
from topologies.loader import load_scenario, scenario_from_document
from topologies.model import Scenario, SubscriptionSpec

__all__ = [
    "STRATEGIES",
    "Box",
    "Delivery",
    "EmulatorError",
    "Epoch",
    "Flow",
    "InputError",
    "Interval",
    "Latency",
    "LinkTraffic",
    "Network",
    "Plan",
    "Predicate",
    "Query",
    "Report",
    "Scenario",
    "StrategyResult",
    "StrategyRun",
    "SubscriptionResult",
    "SweepResult",
    "active_subscriptions",
    "build",
    "check",
    "load",
    "plan",
    "register_strategy",
    "run",
    "simulate",
    "strategy_names",
    "sweep",
    "unregister_strategy",
]


def _changes(seed: int | None, changes: Mapping[str, object] | None) -> list[tuple[str, object]]:
    return ([] if seed is None else [("seed", seed)]) + list((changes or {}).items())


def load(path: str | os.PathLike, *, seed: int | None = None, changes: Mapping[str, object] | None = None) -> Scenario:
    """The scenario file at ``path``, validated (docs/SCENARIOS.md), with ``seed`` and ``changes`` made
    first: ``{"subscriptions": 200, "network.generate.transit": 6}`` as ``--set`` takes them."""
    return load_scenario(path, _changes(seed, changes))


def build(
    document: Mapping[str, object], *, seed: int | None = None, changes: Mapping[str, object] | None = None
) -> Scenario:
    """A scenario from a dict shaped like a scenario file (workload generators included), checked like a
    file; errors name ``<python>`` as the file."""
    return scenario_from_document(dict(document), "<python>", _changes(seed, changes))


def plan(scenario: Scenario, strategy: str = "sharing-em") -> Plan:
    """``strategy``'s plan for ``scenario`` (a built-in strategy or a registered one)."""
    return make_plan(scenario, strategy)


def simulate(scenario: Scenario, plan: Plan, *, engine: str = "local", spark_master: str | None = None) -> StrategyRun:
    """Run ``plan`` on ``engine`` (``local`` or ``spark``): traffic per link direction, deliveries, latencies."""
    return engine_for(engine, spark_master)(scenario, plan)


def check(scenario: Scenario, run: StrategyRun) -> StrategyResult:
    """One run's figures, every subscription's deliveries checked against the centralized answer (the
    savings against the baselines and the ratios to ``ideal`` need :func:`run`, which runs them too)."""
    expected = None if run.summary is not None else expected_results(scenario)
    entry = strategy_entry(scenario, run, expected)
    report = assemble_report(scenario, {run.strategy: entry}, run.engine)
    return Report.of(report)[run.strategy]


def run(
    scenario: Scenario,
    strategies: Sequence[str] = (),
    *,
    engine: str = "local",
    out: str | None = None,
    jobs: int | None = None,
    plots: bool = True,
    progress: bool | str = False,
    check_plans: bool = False,
    spark_master: str | None = None,
) -> Report:
    """What ``run.py run`` does: plan and simulate each strategy (none given: all, registered ones
    included), check every delivery, and return the report.  With ``out`` the report directory is
    written there (docs/REPORT.md); without, nothing is kept on disk.  ``progress`` shows the progress on
    stderr (True: a bar on a terminal, plain lines otherwise)."""
    options = dict(
        strategies=tuple(strategies), engine=engine, spark_master=spark_master, jobs=jobs,
        progress=progress, check_plans=check_plans,
    )  # fmt: skip
    if out is not None:
        return Report.of(run_scenario(scenario, RunOptions(out=out, plots=plots, **options)).report)
    with tempfile.TemporaryDirectory(prefix="streamglobe-") as tmp:
        result = run_scenario(scenario, RunOptions(out=os.path.join(tmp, "report"), plots=False, **options))
    return Report.of(result.report)


def sweep(
    path: str | os.PathLike,
    vary: Mapping[str, Sequence[object] | str],
    *,
    changes: Mapping[str, object] | None = None,
    strategies: Sequence[str] = (),
    out: str | None = None,
    jobs: int | None = None,
    engine: str = "local",
    plots: bool = True,
    progress: bool | str = False,
) -> SweepResult:
    """What ``run.py sweep`` does (docs/SWEEPS.md): the scenario file at ``path`` at every point of the
    grid ``vary`` (key -> values, or a text such as ``"1..5"``), with ``changes`` at every point; the
    result holds sweep.csv's rows, and the files are in ``out`` (default ``out/<name>-sweep/``)."""
    grid = tuple(
        (key, parse_values(key, values) if isinstance(values, str) else tuple(values)) for key, values in vary.items()
    )
    spec = SweepSpec(os.fspath(path), grid, tuple((changes or {}).items()), tuple(strategies))
    return run_sweep(spec, SweepOptions(out=out, engine=engine, jobs=jobs, plots=plots, progress=progress))


def active_subscriptions(scenario: Scenario) -> Iterator[tuple[float, float, tuple[SubscriptionSpec, ...]]]:
    """Each epoch of ``scenario`` as ``(start, end, the subscriptions active in it)``, in time order and
    the subscriptions in scenario order: what a planner of one's own plans, epoch by epoch (every
    arrival and departure starts an epoch, docs/ACCOUNTING.md, and so does every backbone failure or
    recovery, docs/DYNAMICS.md: the subscriptions active then are listed whether a path reaches them or
    not; :func:`topologies.outages.network_states` says what is down)."""
    active: dict[str, SubscriptionSpec] = {}
    order = {s.id: k for k, s in enumerate(scenario.subscriptions)}
    for start, end, events in timeline(scenario):
        for event in events:
            if event.kind == "network":
                continue
            if event.kind == "unsubscribe":
                active.pop(event.subscription.id, None)
            else:
                active[event.subscription.id] = event.subscription
        yield start, end, tuple(sorted(active.values(), key=lambda s: order[s.id]))
