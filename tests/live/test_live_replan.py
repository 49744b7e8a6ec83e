"""Re-planning around a failed super-peer (no broker needed: the coordinator's planning is plain code)."""

from __future__ import annotations

import pytest

from peers.live.connection import Broker
from peers.live.coordinator import Coordinator
from peers.live.plans import PlanBook
from peers.live.topics import Topics
from sharing import make_plan
from topologies.errors import InputError
from topologies.loader import load_scenario


def coordinator_at(scenario, horizon: float) -> Coordinator:
    coordinator = Coordinator(scenario, "sharing-em", Broker("127.0.0.1", 1), Topics(), 1.0, PlanBook(scenario), 60.0)
    coordinator.horizon = horizon
    return coordinator


def test_splice_keeps_the_old_epochs_before_the_cut_and_the_new_ones_after():
    scenario = load_scenario("topologies/figure1.yaml")
    before, after = make_plan(scenario, "sharing-em"), make_plan(scenario, "multicast")
    plan = before.splice(after, 25.0)
    assert [e.end for e in plan.epochs if e.start < 25.0][-1] == 25.0
    for t in (0.0, 12.5, 24.999):
        assert plan.epoch_at(t).flows == before.epoch_at(t).flows
    for t in (25.0, 30.0, 59.9):
        assert plan.epoch_at(t).flows == after.epoch_at(t).flows
        assert plan.epoch_at(t).deliveries == after.epoch_at(t).deliveries
    assert before.splice(before, 25.0).epochs[-1] == before.epochs[-1]


def test_failed_relay_cuts_off_sp1_and_sp3_and_reroutes_q2_over_sp7():
    scenario = load_scenario("topologies/figure1.yaml")
    coordinator = coordinator_at(scenario, 25.0)
    failure = coordinator.fail("SP5")
    assert (failure.node, failure.at, failure.version) == ("SP5", 25.0, 1)
    assert failure.lost == ("Q1", "Q3") and failure.replanned == ("Q2",)
    subs = {s.id: s for s in coordinator.subscriptions}
    assert subs["Q1"].until == 25.0 and subs["Q3"].until == 25.0 and subs["Q2"].until == 45.0
    plan = coordinator.book.versions[1].plan
    old = coordinator.book.versions[0].plan
    assert plan.epoch_at(24.0).flows == old.epoch_at(24.0).flows and plan.epoch_at(24.0).end == 25.0
    later = plan.epoch_at(30.0)
    assert [d.subscription for d in later.deliveries] == ["Q2"]
    assert all("SP5" not in f.path for f in later.flows)
    assert any(f.path == ("SP4", "SP7", "SP6") for f in later.flows)
    # nobody attached to SP1 can be reached any more
    with pytest.raises(InputError, match=r"no route from stream0.s source to P1 \(super-peers down: SP5\)"):
        coordinator.subscribe("P1", "SELECT a FROM stream0 WHERE a < 5")


def test_failed_leaf_loses_only_its_own_subscriber():
    scenario = load_scenario("topologies/figure1.yaml")
    coordinator = coordinator_at(scenario, 30.0)
    failure = coordinator.fail("SP3")
    assert failure.lost == ("Q3",) and failure.replanned == ("Q1", "Q2")
    later = coordinator.book.versions[1].plan.epoch_at(31.0)
    assert sorted(d.subscription for d in later.deliveries) == ["Q1", "Q2"]
    assert all("SP3" not in f.path for f in later.flows)
    # SP3 was only Q3's leaf: Q1 and Q2 keep the routes they had
    unfailed = make_plan(scenario, "sharing-em").epoch_at(31.0)
    assert {f.path for f in later.flows} == {f.path for f in unfailed.flows if "SP3" not in f.path}
