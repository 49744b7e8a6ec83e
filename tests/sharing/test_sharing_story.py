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
    scenario = load_scenario(FIGURE1)
    q1, q2 = (scenario.subscription(i).query.where for i in ("Q1", "Q2"))
    plan = make_plan(scenario, "sharing-em")
    first, second = plan.decisions[0], plan.decisions[1]
    assert (first.reused, second.subscription, second.reused, second.widened) == (None, "Q2", "F1", ())
    assert "reuses F1 at SP5; F2 carries F1's former stream on from SP5; new flow F3 SP5 -> SP6" in second.summary
    # consumers read a flow where it ends: Q2's branch splits F1 at SP5, the tree of links SP4-SP5, SP5-SP1
    # (on to Q1) and SP5-SP6 (to Q2)
    f1, f2, f3 = plan.epoch_at(15).flows
    assert (f1.id, f1.origin, f1.path, f1.attrs) == ("F1", "SP4", ("SP4", "SP5"), ("a", "b"))
    assert f1.predicate == q1
    assert (f2.id, f2.parent, f2.path, f2.predicate, f2.attrs) == ("F2", "F1", ("SP5", "SP1"), q1, ("a", "b"))
    assert (f3.id, f3.parent, f3.path, f3.predicate, f3.attrs) == ("F3", "F1", ("SP5", "SP6"), q2, ("a",))
    # need classes: on SP4-SP5 a tuple takes `a` for Q1 or Q2, `b` for Q1 alone; Q2's branch carries `a`
    assert f1.trim == ((q1.or_(q2), ("a",)), (q1, ("b",)))
    assert f2.trim == ((q1, ("a", "b")),) and f3.trim == ((q2, ("a",)),)


def test_q3_widens_the_sp4_operator_branches_at_sp1_and_narrows_after_q1_leaves():
    # the shipped story: Q3 asks for Q1's attributes over an overlapping region, so widening Q1's stream
    # at SP4 beats a stream of its own (the overlap crosses SP4-SP5-SP1 once)
    scenario = load_scenario(FIGURE1)
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-em", network)
    assert plan_problems(plan, scenario, network) == []
    q1, q2, q3 = (scenario.subscription(i).query.where for i in ("Q1", "Q2", "Q3"))
    decision = next(d for d in plan.decisions if d.subscription == "Q3")
    assert (decision.reused, decision.widened) == ("F2", ("F2", "F1"))
    assert "taps F2 at SP1; new flow F4 SP1 -> SP3" in decision.summary
    during = plan.epoch_at(30)
    f1, f2 = during.flow("F1"), during.flow("F2")
    assert (f1.path, f2.path) == (("SP4", "SP5"), ("SP5", "SP1"))
    assert f1.predicate == f2.predicate == q1.or_(q3)  # EM appends Q3's box whole: Q1 OR Q3
    assert f1.trim == ((q1.or_(q2).or_(q3), ("a",)), (q1.or_(q3), ("b",)))
    branch = during.flow("F4")
    assert (branch.parent, branch.path, branch.predicate, branch.attrs) == ("F2", ("SP1", "SP3"), q3, ("a", "b"))
    assert next(d for d in during.deliveries if d.subscription == "Q3").flow == "F4"
    q1_delivery = next(d for d in during.deliveries if d.subscription == "Q1")
    assert q1_delivery.flow == "F2" and q1_delivery.predicate == q1  # F2 now carries Q3's tuples too
    # Q2 left: its branch F3 is gone, and F1 feeding F2 alone, they are one flow again
    assert [f.id for f in plan.epoch_at(47).flows] == ["F1", "F4"]
    assert plan.epoch_at(47).flow("F1").path == ("SP4", "SP5", "SP1")
    assert plan.epoch_at(47).flow("F1").predicate.equivalent(q1.or_(q3))
    leave_q2 = next(d for d in plan.decisions if d.event == "unsubscribe" and d.subscription == "Q2")
    assert leave_q2.narrowed == ("F3", "F2", "F1")
    after = plan.epoch_at(55)
    (only,) = after.flows
    assert (only.id, only.path, only.predicate, only.attrs) == ("F1", ("SP4", "SP5", "SP1", "SP3"), q3, ("a", "b"))
    leave = next(d for d in plan.decisions if d.event == "unsubscribe" and d.subscription == "Q1")
    assert leave.narrowed == ("F4", "F1") and leave.added_bytes_per_s < 0


def test_hsr_widens_like_em_and_hcr_to_the_hull():
    scenario = load_scenario(FIGURE1)
    q1, q3 = scenario.subscription("Q1").query.where, scenario.subscription("Q3").query.where
    hsr = make_plan(scenario, "sharing-hsr")
    assert next(d for d in hsr.decisions if d.subscription == "Q3").widened == ("F2", "F1")
    assert hsr.epoch_at(30).flow("F1").predicate == q1.or_(q3)
    # HCR relaxes Q1's box to the hull a in [20, 80], b < 70: the tuples of the hull outside Q1 and Q3
    # cross SP4-SP5-SP1 too, each with its header alone (no subscription selects anything of them)
    hcr = make_plan(scenario, "sharing-hcr")
    decision = next(d for d in hcr.decisions if d.subscription == "Q3")
    assert decision.widened == ("F2", "F1")
    assert hcr.epoch_at(30).flow("F1").predicate == parse_condition("a BETWEEN 20 AND 80 AND b < 70")
    em = next(d for d in make_plan(scenario, "sharing-em").decisions if d.subscription == "Q3")
    assert decision.added_bytes_per_s > em.added_bytes_per_s


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
        bad = plan.with_epochs(tuple(broken if e is epoch else e for e in plan.epochs))
        assert plan_problems(bad, scenario, network)
