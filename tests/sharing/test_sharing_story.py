"""The figure 1 story of seed 004 and the baselines' flows exactly as SPEC section 3 describes them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sharing_checker import plan_problems

from matcher import Predicate
from matcher.parser import parse_condition, parse_query
from network.routing import Network
from sharing import make_plan
from topologies.loader import load_scenario

FIGURE1 = Path(__file__).resolve().parents[2] / "topologies" / "figure1.yaml"


def _figure1(**changes):
    """figure1 with some subscriptions replaced: ``Q3=("SELECT ...", at, until)``."""
    scenario = load_scenario(FIGURE1)
    subs = tuple(
        dataclasses.replace(s, query=parse_query(changes[s.id][0]), at=changes[s.id][1], until=changes[s.id][2])
        if s.id in changes
        else s
        for s in scenario.subscriptions
    )
    return dataclasses.replace(scenario, subscriptions=subs)


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
    # Q3 asks for Q1's attributes over a neighbouring region: widening Q1's stream beats a stream of its own
    scenario = _figure1(
        Q1=("SELECT a, b FROM stream0 WHERE a BETWEEN 20 AND 60 AND b < 50", 0, 50),
        Q3=("SELECT a, b FROM stream0 WHERE a BETWEEN 50 AND 80 AND b < 50", 20, None),
    )
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-em", network)
    assert plan_problems(plan, scenario, network) == []
    q3 = next(d for d in plan.decisions if d.subscription == "Q3")
    assert (q3.reused, q3.widened) == ("F1", ("F1",))
    during = plan.epoch_at(30)
    f1 = during.flow("F1")
    q1_or_q3 = parse_condition("(a BETWEEN 20 AND 60 AND b < 50) OR (a BETWEEN 50 AND 80 AND b < 50)")
    assert f1.predicate == q1_or_q3 and f1.origin == "SP4"
    branch = next(f for f in during.flows if f.parent == "F1" and f.path == ("SP1", "SP3"))
    assert branch.predicate == parse_condition("a BETWEEN 50 AND 80 AND b < 50")
    assert next(d for d in during.deliveries if d.subscription == "Q3").flow == branch.id
    q1_delivery = next(d for d in during.deliveries if d.subscription == "Q1")
    assert q1_delivery.predicate == scenario.subscription("Q1").query.where  # F1 now carries Q3's tuples too
    after = plan.epoch_at(55)
    assert after.flow("F1").predicate == parse_condition("a BETWEEN 50 AND 80 AND b < 50")
    leave = next(d for d in plan.decisions if d.event == "unsubscribe" and d.subscription == "Q1")
    assert "F1" in leave.narrowed and leave.added_bytes_per_s < 0


def test_shipped_figure1_keeps_q3_separate_when_widening_costs_more():
    # Q3 needs attribute c: widening F1 would make every Q1 tuple 8 bytes wider on two links, which the
    # cost model prices above Q3's own stream (see docs/PLANNER.md)
    plan = make_plan(load_scenario(FIGURE1), "sharing-em")
    q3 = next(d for d in plan.decisions if d.subscription == "Q3")
    assert q3.reused is None and q3.widened == ()


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
        (("SP4", "SP5", "SP1", "SP3"), q3.query.where, ("a", "c")),
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
    assert root.attrs == ("a", "b", "c") and to_sp6.attrs == ("a",) and to_sp3.attrs == ("a", "c")
    assert to_sp1.trim == ((q1.query.where, ("a", "b")), (q3.query.where, ("a", "c")))
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
