"""Stream sharing: the frozen Plan, the StreamGlobe planner, the baselines and the cost model.

``make_plan(scenario, strategy)`` is the one entry point every data plane uses.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from dataclasses import replace

from network.routing import Network
from sharing.plan import Change, Decision, Delivery, Edit, Epoch, Flow, Panes, Plan, Replan
from topologies.errors import EmulatorError, InputError, shown
from topologies.model import Scenario

STRATEGIES = ("data-shipping", "query-shipping", "multicast", "ideal", "sharing-hsr", "sharing-hcr", "sharing-em")
"""Every strategy :func:`make_plan` plans, in the order reports list them: the one registry of names (the
command line offers them as its choices)."""


Planner = Callable[[Scenario, Network], Plan]
"""A strategy registered from Python: the plan of a scenario on a network (docs/API.md)."""
_REGISTERED: dict[str, Planner] = {}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def register_strategy(name: str, planner: Planner, *, replace: bool = False) -> None:
    """Make ``name`` a strategy :func:`make_plan` plans with ``planner(scenario, network)``, run by every
    engine, checked for exactness and reported like the built-in ones (after them).  Registered in this
    process, and in the worker processes it forks.

    Raises InputError for a name that is not 1-64 letters, digits, ``_`` or ``-``, that of a built-in
    strategy, or one registered already (unless ``replace``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"strategy name {shown(name)}: 1-64 letters, digits, '_' or '-'")
    if name in STRATEGIES:
        raise InputError(f"strategy name {name!r}: a built-in strategy")
    if name in _REGISTERED and not replace:
        raise InputError(f"strategy {name!r} is registered already (pass replace=True to replace it)")
    if not callable(planner):
        raise InputError(f"strategy {name!r}: the planner must be callable, got {shown(planner)}")
    _REGISTERED[name] = planner


def unregister_strategy(name: str) -> None:
    """Forget a strategy :func:`register_strategy` made.  Raises InputError for a built-in strategy (it
    cannot be forgotten) and for a name not registered (a typo would otherwise pass unnoticed)."""
    if isinstance(name, str) and name in STRATEGIES:
        raise InputError(f"strategy {name!r}: a built-in strategy, which cannot be unregistered")
    if not isinstance(name, str) or name not in _REGISTERED:
        registered = ", ".join(_REGISTERED) or "none"
        raise InputError(f"strategy {shown(name)} is not registered (registered: {registered})")
    del _REGISTERED[name]


def strategy_names() -> tuple[str, ...]:
    """Every strategy :func:`make_plan` knows: :data:`STRATEGIES`, then those registered from Python."""
    return STRATEGIES + tuple(_REGISTERED)


def check_strategy(name: str) -> str:
    """``name`` if it is one of :func:`strategy_names`; raises InputError naming it and the valid ones."""
    if not isinstance(name, str) or (name not in STRATEGIES and name not in _REGISTERED):
        raise InputError(f"unknown strategy {shown(name)}; valid strategies: {', '.join(strategy_names())}")
    return name


def make_plan(
    scenario: Scenario,
    strategy: str,
    network: Network | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """The plan of ``strategy`` for ``scenario``: one epoch per interval between subscription and backbone
    events, with a :class:`Replan` per backbone change (docs/DYNAMICS.md).

    ``progress``, when given, is called after each epoch is planned with (epochs planned, epochs), so a
    long planning run can report how far it is.  A sharing strategy whose consolidating plan turns out
    dearer than query-shipping plans the scenario a second time, byte-capped (sharing.planner); that
    pass counts again from (1, epochs).

    The plan has passed :meth:`Plan.check`.  Raises InputError for an unknown strategy name.
    """
    from sharing.baselines import BASELINES, Baseline
    from sharing.cost import CostModel
    from sharing.epochs import timeline
    from sharing.planner import plan_sharing

    check_strategy(strategy)
    network = network or Network.of(scenario)
    if strategy in _REGISTERED:
        return _registered_plan(scenario, strategy, network)
    if strategy not in BASELINES:
        return plan_sharing(scenario, strategy, network, CostModel(scenario), progress).check(scenario, network)
    baseline = Baseline(scenario, network, strategy)
    changes, replans = [], []
    steps = timeline(scenario)
    for start, end, events in steps:
        for event in events:
            if event.kind == "network":
                started = time.perf_counter()
                cut_off, restored = baseline.network_event(event.state)
                moved = baseline.moved()  # flows removed plus installed
                text = "; ".join(change.text() for change in event.changes)
                seconds = time.perf_counter() - started
                replans.append(Replan(event.time, text, seconds, moved, tuple(cut_off), tuple(restored)))
            elif event.kind == "unsubscribe":
                baseline.unsubscribe(event.subscription)
            else:
                baseline.subscribe(event.subscription)
        changes.append(Change(start, end, *baseline.epoch(start)))
        if progress is not None:
            progress(len(changes), len(steps))
    plan = Plan(strategy, scenario.name, (), replans=tuple(replans), changes=tuple(changes))
    return plan.check(scenario, network)


def _registered_plan(scenario: Scenario, strategy: str, network: Network) -> Plan:
    """A registered planner's plan, named after its strategy; EmulatorError when it returns no Plan.  The
    planner gets a copy of the scenario and the network of its own: whatever it does to them (a frozen
    dataclass yields to ``object.__setattr__``), the caller's scenario and later runs are untouched."""
    own = copy.deepcopy((scenario, network))
    plan = _REGISTERED[strategy](*own)
    if not isinstance(plan, Plan):
        raise EmulatorError(f"strategy {strategy!r}: the planner returned {type(plan).__name__}, not a Plan")
    return plan if plan.strategy == strategy else replace(plan, strategy=strategy)


__all__ = [
    "STRATEGIES",
    "Change",
    "Decision",
    "Delivery",
    "Edit",
    "Epoch",
    "Flow",
    "Panes",
    "Plan",
    "Planner",
    "Replan",
    "check_strategy",
    "make_plan",
    "register_strategy",
    "strategy_names",
    "unregister_strategy",
]
