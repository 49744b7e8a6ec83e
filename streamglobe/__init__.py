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
Every argument is checked before any work, so a wrong one (a path that is not one, a count given as text,
a plan of another scenario) is an :class:`InputError` naming the argument, never a ``TypeError`` from deep
inside.
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
from reports.sweep import SweepOptions, SweepResult, SweepSpec, grid_values, run_sweep
from sharing import (
    STRATEGIES,
    Delivery,
    Epoch,
    Flow,
    Panes,
    Plan,
    make_plan,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from sharing.epochs import timeline
from topologies.errors import EmulatorError, InputError, shown
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
    "Panes",
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


def _what(value: object) -> str:
    return f"{shown(value)} ({type(value).__name__})"


def _scenario(value: object) -> Scenario:
    if not isinstance(value, Scenario):
        raise InputError(f"scenario: expected a Scenario (from sg.load or sg.build), got {_what(value)}")
    return value


def _path(value: object, name: str) -> str:
    if not isinstance(value, str | os.PathLike) or not isinstance(os.fspath(value), str):
        raise InputError(f"{name}: expected a path (a str or os.PathLike), got {_what(value)}")
    return os.fspath(value)


def _mapping(value: object, name: str) -> dict[str, object]:
    """``value`` (None: empty) as a dict of text keys."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InputError(f"{name}: expected a mapping of keys (texts) to values, got {_what(value)}")
    return dict(value)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name}: expected True or False, got {_what(value)}")
    return value


def _count(value: object, name: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise InputError(f"{name}: expected a whole number or None, got {_what(value)}")
    return value


def _text(value: object, name: str, optional: bool = False) -> str | None:
    if not isinstance(value, str) and not (optional and value is None):
        raise InputError(f"{name}: expected a text{' or None' * optional}, got {_what(value)}")
    return value


def _names(value: object, name: str) -> tuple[str, ...]:
    """Strategy names: one name, or a list or tuple of them."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{name}: expected a strategy name or a list of them, got {_what(value)}")
    return tuple(value)


def _progress(value: object) -> bool | str:
    if isinstance(value, bool) or (isinstance(value, str) and value in ("bar", "lines", "off")):
        return value
    raise InputError(f"progress: expected True, False, 'bar', 'lines' or 'off', got {_what(value)}")


def _changes(seed: object, changes: object) -> list[tuple[str, object]]:
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise InputError(f"seed: expected a whole number or None, got {_what(seed)}")
    return ([] if seed is None else [("seed", seed)]) + list(_mapping(changes, "changes").items())


def load(path: str | os.PathLike, *, seed: int | None = None, changes: Mapping[str, object] | None = None) -> Scenario:
    """The scenario file at ``path``, validated (docs/SCENARIOS.md), with ``seed`` and ``changes`` made
    first: ``{"subscriptions": 200, "network.generate.transit": 6}`` as ``--set`` takes them."""
    return load_scenario(_path(path, "path"), _changes(seed, changes))


def build(
    document: Mapping[str, object], *, seed: int | None = None, changes: Mapping[str, object] | None = None
) -> Scenario:
    """A scenario from a dict shaped like a scenario file (workload generators included), checked like a
    file; errors name ``<python>`` as the file."""
    if not isinstance(document, Mapping):
        raise InputError(f"document: expected a mapping shaped like a scenario file, got {_what(document)}")
    return scenario_from_document(dict(document), "<python>", _changes(seed, changes))


def plan(scenario: Scenario, strategy: str = "sharing-em") -> Plan:
    """``strategy``'s plan for ``scenario`` (a built-in strategy or a registered one)."""
    return make_plan(_scenario(scenario), _text(strategy, "strategy"))


def simulate(scenario: Scenario, plan: Plan, *, engine: str = "local", spark_master: str | None = None) -> StrategyRun:
    """Run ``plan`` on ``engine`` (``local`` or ``spark``): traffic per link direction, every subscription's
    deliveries checked against the centralized answer, latencies.  Raises InputError for a plan of another
    scenario."""
    _scenario(scenario)
    if not isinstance(plan, Plan):
        raise InputError(f"plan: expected a Plan (from sg.plan), got {_what(plan)}")
    if plan.scenario != scenario.name:
        raise InputError(f"plan: a plan of scenario {shown(plan.scenario)}, not of {scenario.name!r}")
    _of_scenario(scenario, "plan", {d.subscription for e in plan.epochs for d in e.deliveries}, _plan_links(plan))
    run_engine = engine_for(_text(engine, "engine"), _text(spark_master, "spark_master", optional=True))
    return run_engine(scenario, plan)


def _plan_links(plan: Plan) -> set[tuple[str, str]]:
    return {hop for e in plan.epochs for f in e.flows for hop in zip(f.path, f.path[1:], strict=False)}


def _of_scenario(scenario: Scenario, name: str, subscriptions: set[str], directions: set[tuple[str, str]]) -> None:
    """InputError naming ``name`` unless its subscriptions and link directions are ``scenario``'s (a plan or
    a run of a scenario of the same name but other contents)."""
    unknown = sorted(subscriptions - {s.id for s in scenario.subscriptions})
    if unknown:
        raise InputError(f"{name}: subscription {shown(unknown[0])} is not one of scenario {scenario.name!r}")
    links = set(Network.of(scenario).directions)
    foreign = sorted(directions - links)
    if foreign:
        raise InputError(f"{name}: link {'-'.join(foreign[0])} is not one of scenario {scenario.name!r}")


def check(scenario: Scenario, run: StrategyRun) -> StrategyResult:
    """One run's figures, every subscription's deliveries as the run's check found them against the
    centralized answer (the savings against the baselines and the ratios to ``ideal`` need :func:`run`,
    which runs them too).  Raises InputError for a run of another scenario."""
    _scenario(scenario)
    if not isinstance(run, StrategyRun):
        raise InputError(f"run: expected a StrategyRun (from sg.simulate), got {_what(run)}")
    _of_scenario(scenario, "run", set(run.summary), set(run.link_bytes))
    entry = strategy_entry(scenario, run)
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
    _scenario(scenario)
    options = dict(
        strategies=_names(strategies, "strategies"), engine=_text(engine, "engine"),
        spark_master=_text(spark_master, "spark_master", optional=True), jobs=_count(jobs, "jobs"),
        progress=_progress(progress), check_plans=_flag(check_plans, "check_plans"),
    )  # fmt: skip
    _flag(plots, "plots")
    if out is not None:
        out = _path(out, "out")
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
    path = _path(path, "path")
    grid = tuple((key, grid_values(key, values, "sweep")) for key, values in _mapping(vary, "vary").items())
    if not grid:
        raise InputError("vary: nothing to vary (give at least one key and its values)")
    spec = SweepSpec(path, grid, tuple(_mapping(changes, "changes").items()), _names(strategies, "strategies"))
    options = SweepOptions(
        out=None if out is None else _path(out, "out"), engine=_text(engine, "engine"), jobs=_count(jobs, "jobs"),
        plots=_flag(plots, "plots"), progress=_progress(progress),
    )  # fmt: skip
    return run_sweep(spec, options)


def active_subscriptions(scenario: Scenario) -> Iterator[tuple[float, float, tuple[SubscriptionSpec, ...]]]:
    """Each epoch of ``scenario`` as ``(start, end, the subscriptions active in it)``, in time order and
    the subscriptions in scenario order: what a planner of one's own plans, epoch by epoch (every
    arrival and departure starts an epoch, docs/ACCOUNTING.md, and so does every backbone failure or
    recovery, docs/DYNAMICS.md: the subscriptions active then are listed whether a path reaches them or
    not; :func:`topologies.outages.network_states` says what is down).  InputError at once, not at the
    first step, for an argument that is not a Scenario."""
    return _active(_scenario(scenario))


def _active(scenario: Scenario) -> Iterator[tuple[float, float, tuple[SubscriptionSpec, ...]]]:
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
