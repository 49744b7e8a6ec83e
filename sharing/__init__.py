"""Stream sharing: the frozen Plan, the StreamGlobe planner, the baselines and the cost model.

``make_plan(scenario, strategy)`` is the one entry point every data plane uses.
"""

from __future__ import annotations

from network.routing import Network
from sharing.plan import Decision, Delivery, Epoch, Flow, Plan
from topologies.errors import InputError
from topologies.model import Scenario, SubscriptionSpec

STRATEGIES = ("data-shipping", "query-shipping", "multicast", "ideal", "sharing-hsr", "sharing-hcr", "sharing-em")


def make_plan(scenario: Scenario, strategy: str, network: Network | None = None) -> Plan:
    """The plan of ``strategy`` for ``scenario``: one epoch per interval between subscription events.

    Raises InputError for an unknown strategy name.
    """
    from sharing.baselines import BASELINES, Baseline
    from sharing.cost import CostModel
    from sharing.epochs import timeline
    from sharing.planner import plan_sharing

    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; valid strategies: {', '.join(STRATEGIES)}")
    network = network or Network.of(scenario)
    if strategy not in BASELINES:
        return plan_sharing(scenario, strategy, network, CostModel(scenario))
    baseline = Baseline(scenario, network, strategy)
    epochs = []
    position = {s.id: k for k, s in enumerate(scenario.subscriptions)}
    active_at: dict[int, SubscriptionSpec] = {}  # the active subscriptions by scenario position
    for start, end, events in timeline(scenario):
        for event in events:
            if event.kind == "unsubscribe":
                active_at.pop(position[event.subscription.id], None)
            else:
                active_at[position[event.subscription.id]] = event.subscription
        active = [active_at[k] for k in sorted(active_at)]
        flows, deliveries = baseline.epoch(active)
        epochs.append(Epoch(start, end, flows, deliveries))
    return Plan(strategy, scenario.name, tuple(epochs))


__all__ = ["STRATEGIES", "Decision", "Delivery", "Epoch", "Flow", "Plan", "make_plan"]
