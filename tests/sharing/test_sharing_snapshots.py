"""Epoch snapshots: the planner's incremental snapshots hold the very objects a fresh walk of its state
finds, and make_plan reports its progress once per epoch."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from sharing_checker import scenarios

from matcher import Uniform, parse_query
from network.routing import Network
from sharing import STRATEGIES, make_plan
from sharing.planner import Planner
from topologies.loader import load_scenario
from topologies.model import AttributeSpec, LinkSpec, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec

SHIPPED = Path(__file__).resolve().parents[2] / "topologies"
SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")


def _full_snapshot(planner: Planner) -> tuple[list, list]:
    """The snapshot walked afresh: every stream's tree depth-first, every subscription's delivery checked."""
    flows = []
    for stream in planner.scenario.streams:
        pending = list(reversed(planner.trees.roots[stream.id].children))
        while pending:
            flow = pending.pop()
            flows.append(planner.snapshots.freeze(flow))
            pending.extend(reversed(flow.children))
    subs = [planner.subs[s.id] for s in planner.scenario.subscriptions if s.id in planner.subs]
    return flows, [planner.snapshots.delivery(sub) for sub in subs]


def _check_every_snapshot(scenario: Scenario, strategy: str) -> int:
    """Plan, checking that each epoch, the epoch before as the planner's change makes it, holds the very
    objects a fresh walk finds (a stale snapshot would hold an older object, a missed delivery check would
    make the walk build a new one)."""
    incremental = Planner.epoch
    checked = []
    lists: dict[str, list] = {"flows": [], "deliveries": []}

    def epoch(self, start, end):
        change = incremental(self, start, end)
        lists["flows"] = change.flows.applied(lists["flows"])
        lists["deliveries"] = change.deliveries.applied(lists["deliveries"])
        flows, deliveries = _full_snapshot(self)
        assert [id(f) for f in lists["flows"]] == [id(f) for f in flows]
        assert [id(d) for d in lists["deliveries"]] == [id(d) for d in deliveries]
        checked.append(change)
        return change

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Planner, "epoch", epoch)
        make_plan(scenario, strategy, Network.of(scenario))
    return len(checked)


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_incremental_snapshots_hold_what_a_fresh_walk_finds(strategy, scenario):
    assert _check_every_snapshot(scenario, strategy) > 0


@pytest.mark.parametrize("strategy", SHARING)
@pytest.mark.parametrize("name", ["figure1", "sensor-grid", "sky-survey"])
def test_incremental_snapshots_hold_what_a_fresh_walk_finds_on_shipped_scenarios(name, strategy):
    assert _check_every_snapshot(load_scenario(SHIPPED / f"{name}.yaml"), strategy) > 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_progress_is_reported_once_per_epoch(strategy):
    calls = []
    plan = make_plan(load_scenario(SHIPPED / "figure1.yaml"), strategy, progress=lambda *call: calls.append(call))
    n = len(plan.epochs)
    assert calls == [(k, n) for k in range(1, n + 1)]


def test_progress_counts_again_in_a_byte_capped_pass():
    # the direct link SP1-SP0 has no room for the result (29 * 0.18 tuples/s of 24 bytes: 1002 bit/s, above
    # 0.5 x 2 Kbit/s), so it goes round by SP2: dearer than query-shipping, which the run then plans again,
    # byte-capped
    links = (
        LinkSpec("SP0", "SP1", 2e3, Fraction(1, 1000)),
        LinkSpec("SP0", "SP2", 5e3, Fraction(1, 1000)),
        LinkSpec("SP1", "SP2", 5e3, Fraction(1, 1000)),
    )
    peers = (ThinPeerSpec("src", "SP1"), ThinPeerSpec("sink", "SP0"))
    stream = StreamSpec("s", "src", 29.0, (AttributeSpec("a", "float", Uniform(0, 100)),))
    sub = SubscriptionSpec("Q", "sink", 0, None, parse_query("SELECT a FROM s WHERE a <= 18"))
    scenario = Scenario("detour", 1, 10, 16, ("SP0", "SP1", "SP2"), links, peers, (stream,), (sub,))
    scenario = dataclasses.replace(scenario, max_utilization=0.5)
    calls = []
    plan = make_plan(scenario, "sharing-em", progress=lambda *c: calls.append(c))
    assert plan.epochs[0].flows[0].path == ("SP1", "SP2", "SP0")
    n = len(plan.epochs)
    assert calls == [(k, n) for k in range(1, n + 1)] * 2


def _reissued(plan) -> list[str]:
    """The subscriptions whose delivery is, from one epoch to the next, a new object equal to the old."""
    found = []
    for before, after in zip(plan.epochs, plan.epochs[1:], strict=False):
        kept = {d.subscription: d for d in before.deliveries}
        found += [
            d.subscription
            for d in after.deliveries
            if kept.get(d.subscription, d) is not d and kept[d.subscription] == d
        ]
    return found


@pytest.mark.parametrize("strategy", SHARING)
@pytest.mark.parametrize("name", ["sensor-grid", "sky-survey"])
def test_a_delivery_a_host_change_leaves_alike_stays_the_same_object(name, strategy):
    # the data planes lay out again, on a channel of its own, every delivery object they have not seen
    scenario = load_scenario(SHIPPED / f"{name}.yaml")
    assert _reissued(make_plan(scenario, strategy, Network.of(scenario))) == []
