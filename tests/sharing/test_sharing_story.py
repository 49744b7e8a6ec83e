"""The story of Kuntschke & Kemper's Figure 1, and the baselines' flows exactly as docs/ACCOUNTING.md defines them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sharing_checker import plan_problems

from matcher import Predicate
from matcher.parser import parse_condition
from network.routing import Network
from sharing import make_plan
from topologies.loader import load_scenario

FIGURE1 = Path(__file__).resolve().parents[2] / "topologies" / "figure1.yaml"


def test_q2_reuses_q1_stream_at_sp5():
    plan = make_plan(load_scenario(FIGURE1), "sharing-em")
    q1, q2 = plan.decisions[0], plan.decisions[1]
    assert (q1.reused, q2.subscription, q2.reused, q2.widened) == (None, "Q2", "F1", ())
    epoch = plan.epoch_at(15)
    f1, f2 = epoch.flows
    assert (f1.id, f1.origin, f1.path, f1.attrs) == ("F1", "SP4", ("SP4", "SP5", "SP1"), ("a", "b"))
    assert f1.predicate == parse_condition("a BETWEEN 20 AND 60 AND b < 50")
    assert (f2.parent, f2.origin, f2.path, f2.attrs) == ("F1", "SP5", ("SP5", "SP6"), ("a",))
    assert "reuses F1 at SP5" in q2.summary


def test_q3_widens_the_sp4_operator_branches_at_sp1_and_narrows_after_q1_leaves():
    # the shipped story: Q3 asks for Q1's attributes over an overlapping region, so widening Q1's stream
    # at SP4 beats a stream of its own (the overlap crosses SP4-SP5-SP1 once)
    scenario = load_scenario(FIGURE1)
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-em", network)
    assert plan_problems(plan, scenario, network) == []
    q1, q3 = scenario.subscription("Q1").query.where, scenario.subscription("Q3").query.where
    decision = next(d for d in plan.decisions if d.subscription == "Q3")
    assert (decision.reused, decision.widened) == ("F1", ("F1",))
    assert "taps F1 at SP1; new flow F3 SP1 -> SP3" in decision.summary
    during = plan.epoch_at(30)
    f1 = during.flow("F1")
    assert (f1.origin, f1.path, f1.attrs) == ("SP4", ("SP4", "SP5", "SP1"), ("a", "b"))
    assert f1.predicate == q1.or_(q3)  # EM appends Q3's box whole to the SP4 operator: Q1 OR Q3
    branch = during.flow("F3")
    assert (branch.parent, branch.path, branch.predicate, branch.attrs) == ("F1", ("SP1", "SP3"), q3, ("a", "b"))
    assert next(d for d in during.deliveries if d.subscription == "Q3").flow == "F3"
    q1_delivery = next(d for d in during.deliveries if d.subscription == "Q1")
    assert q1_delivery.flow == "F1" and q1_delivery.predicate == q1  # F1 now carries Q3's tuples too
    assert [f.id for f in plan.epoch_at(47).flows] == ["F1", "F3"]  # Q2 left: its branch F2 is gone
    assert plan.epoch_at(47).flow("F1").predicate.equivalent(q1.or_(q3))
    after = plan.epoch_at(55)
    assert after.flow("F1").predicate == q3 and after.flow("F1").attrs == ("a", "b")
    leave = next(d for d in plan.decisions if d.event == "unsubscribe" and d.subscription == "Q1")
    assert leave.narrowed == ("F1",) and leave.added_bytes_per_s < 0


def test_hsr_widens_f1_like_em_but_hcr_hull_costs_more_than_a_stream_of_its_own():
    scenario = load_scenario(FIGURE1)
    q1, q3 = scenario.subscription("Q1").query.where, scenario.subscription("Q3").query.where
    hsr = make_plan(scenario, "sharing-hsr")
    assert next(d for d in hsr.decisions if d.subscription == "Q3").widened == ("F1",)
    assert hsr.epoch_at(30).flow("F1").predicate == q1.or_(q3)
    # HCR would relax Q1's box to the hull a in [20, 80], b < 70: more than half again of Q1's tuples on
    # two links, dearer than Q3's own stream
    hcr = make_plan(scenario, "sharing-hcr")
    decision = next(d for d in hcr.decisions if d.subscription == "Q3")
    assert (decision.reused, decision.widened) == (None, ())
    assert hcr.epoch_at(30).flow("F1").predicate == q1


def test_baseline_flows_follow_spec():
    scenario = load_scenario(FIGURE1)
    q1, q2, q3 = (scenario.subscription(i) for i in ("Q1", "Q2", "Q3"))
    epoch = make_plan(scenario, "data-shipping").epoch_at(30)
    assert [(f.path, f.predicate, f.attrs) for f in epoch.flows] == [
        (("SP4", "SP5", "SP1"), Predicate.TRUE, ("a", "b", "c")),
        (("SP4", "SP5", "SP6"), Predicate.TRUE, ("a", "b", "c")),
        (("SP4", "SP5", "SP1", "SP3"), Predicate.TRUE, ("a", "b", "c")),
    ]
    assert [d.predicate for d in epoch.deliveries] == [q1.query.where, q2.query.where, q3.query.where]
    epoch = make_plan(scenario, "query-shipping").epoch_at(30)
    assert [(f.path, f.predicate, f.attrs) for f in epoch.flows] == [
        (("SP4", "SP5", "SP1"), q1.query.where, ("a", "b")),
        (("SP4", "SP5", "SP6"), q2.query.where, ("a",)),
        (("SP4", "SP5", "SP1", "SP3"), q3.query.where, ("a", "b")),
    ]
    assert all(d.predicate == Predicate.TRUE for d in epoch.deliveries)
    edges = [("SP4", "SP5"), ("SP5", "SP1"), ("SP5", "SP6"), ("SP1", "SP3")]
    epoch = make_plan(scenario, "multicast").epoch_at(30)
    assert [f.path for f in epoch.flows] == edges
    assert [f.parent for f in epoch.flows] == [None, "stream0:SP4>SP5", "stream0:SP4>SP5", "stream0:SP5>SP1"]
    assert all(f.predicate == Predicate.TRUE and f.attrs == ("a", "b", "c") for f in epoch.flows)
    epoch = make_plan(scenario, "ideal").epoch_at(30)
    assert [f.path for f in epoch.flows] == edges
    root, to_sp1, to_sp6, to_sp3 = epoch.flows
    assert root.predicate.equivalent(q1.query.where.or_(q2.query.where).or_(q3.query.where))
    assert root.attrs == ("a", "b") and to_sp6.attrs == ("a",) and to_sp3.attrs == ("a", "b")
    assert to_sp1.trim == ((q1.query.where, ("a", "b")), (q3.query.where, ("a", "b")))
    assert [d.flow for d in epoch.deliveries] == ["stream0:SP5>SP1", "stream0:SP5>SP6", "stream0:SP1>SP3"]


def test_checker_catches_broken_plans():
    scenario = load_scenario(FIGURE1)
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-em", network)
    epoch = plan.epoch_at(15)
    narrowed = dataclasses.replace(epoch.flows[0], predicate=parse_condition("a BETWEEN 20 AND 30"))
    lost = dataclasses.replace(epoch, flows=(narrowed, *epoch.flows[1:]))
    missing = dataclasses.replace(epoch, deliveries=epoch.deliveries[:1])
    for broken in (lost, missing):
        bad = dataclasses.replace(plan, epochs=tuple(broken if e is epoch else e for e in plan.epochs))
        assert plan_problems(bad, scenario, network)
