"""Stream sharing: the frozen Plan, the StreamGlobe planner, the baselines and the cost model.

``make_plan(scenario, strategy)`` is the one entry point every data plane uses.
"""

from __future__ import annotations

from collections.abc import Callable

from network.routing import Network
from sharing.plan import Decision, Delivery, Epoch, Flow, Plan
from topologies.errors import InputError
from topologies.model import Scenario

STRATEGIES = ("data-shipping", "query-shipping", "multicast", "ideal", "sharing-hsr", "sharing-hcr", "sharing-em")
"""Every strategy :func:`make_plan` plans, in the order reports list them: the one registry of names (the
command line offers them as its choices)."""


def check_strategy(name: str) -> str:
    """``name`` if it is one of :data:`STRATEGIES`; raises InputError naming it and the valid ones."""
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}")
    return name


def make_plan(
    scenario: Scenario,
    strategy: str,
    network: Network | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """The plan of ``strategy`` for ``scenario``: one epoch per interval between subscription events.

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
    if strategy not in BASELINES:
        return plan_sharing(scenario, strategy, network, CostModel(scenario), progress).check(scenario, network)
    baseline = Baseline(scenario, network, strategy)
    epochs = []
    steps = timeline(scenario)
    for start, end, events in steps:
        for event in events:
            if event.kind == "unsubscribe":
                baseline.unsubscribe(event.subscription)
            else:
                baseline.subscribe(event.subscription)
        flows, deliveries = baseline.epoch()
        epochs.append(Epoch(start, end, flows, deliveries))
        if progress is not None:
            progress(len(epochs), len(steps))
    return Plan(strategy, scenario.name, tuple(epochs)).check(scenario, network)


__all__ = ["STRATEGIES", "Decision", "Delivery", "Epoch", "Flow", "Plan", "check_strategy", "make_plan"]
