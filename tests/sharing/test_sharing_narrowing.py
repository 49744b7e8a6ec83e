"""Narrowing never widens: the smallest scenario where HCR's narrowing lost tuples.

Flow F1 carries ``a <= 10 OR a BETWEEN 12 AND 22`` to SP4, where Q1 reads it and two branch flows leave
for SP5.  Q5 then taps F1 at SP3 and widens its upstream part; the part from SP3 on is split off and
narrowed to its consumers.  HCR folds those consumers into interval hulls (``a <= 5``, then ``a BETWEEN
15 AND 20``, then Q1's two boxes): ``a <= 22``, which reaches into the gap ``(10, 12)`` that the parent
never forwards.  Q4 (``a BETWEEN 10.5 AND 11.5``) then reused the split-off part and received nothing.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from matcher import Uniform, parse_query
from network.routing import Network
from peers.local import run_local
from sharing import make_plan
from sharing.check import plan_problems
from topologies.expected import compare, expected_results
from topologies.model import AttributeSpec, LinkSpec, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec


def _scenario() -> Scenario:
    sps = ("SP0", "SP1", "SP2", "SP3", "SP4", "SP5", "SP6")
    pairs = [("SP0", "SP1"), ("SP1", "SP2"), ("SP2", "SP3"), ("SP3", "SP4"), ("SP4", "SP5"), ("SP3", "SP6")]
    links = tuple(LinkSpec(a, b, 1e6, Fraction(1, 1000)) for a, b in pairs)
    peers = tuple(ThinPeerSpec(p, sp) for p, sp in [("src", "SP0"), ("p4", "SP4"), ("p5", "SP5"), ("p6", "SP6")])
    stream = StreamSpec("s", "src", 100.0, (AttributeSpec("a", "float", Uniform(0, 100)),))

    def sub(sub_id, peer, at, where):
        return SubscriptionSpec(sub_id, peer, at, None, parse_query(f"SELECT a FROM s WHERE {where}"))

    subs = (
        sub("Q1", "p4", 0, "a <= 10 OR a BETWEEN 12 AND 22"),
        sub("Q2", "p5", 0, "a <= 5"),
        sub("Q3", "p5", 0, "a BETWEEN 15 AND 20"),
        sub("Q5", "p6", 1, "a BETWEEN 18 AND 24"),
        sub("Q4", "p4", 2, "a BETWEEN 10.5 AND 11.5"),
    )
    return Scenario("hcr-narrowing", 1, 5, 16, sps, links, peers, (stream,), subs)


@pytest.mark.parametrize("strategy", ["sharing-hsr", "sharing-hcr", "sharing-em"])
def test_a_split_off_part_never_claims_more_than_its_parent_forwards(strategy):
    scenario = _scenario()
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []
    run = run_local(scenario, plan)
    expected = expected_results(scenario)
    assert len(expected.indices["Q4"]) > 0  # the case is not vacuous: Q4 has tuples to lose
    for sub_id, want in expected.indices.items():
        got = compare(run.delivered[sub_id], run.delivered_attrs[sub_id], want, expected.attrs[sub_id])
        assert got == (0, 0), sub_id


def test_the_checker_names_a_flow_wider_than_its_parent():
    """The invariant the bug broke, seen by the plan checker without simulating."""
    scenario = _scenario()
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-hcr", network)
    epochs = list(plan.epochs)
    last = epochs[-1]
    parent = last.flows[0]
    wide = parent.predicate.or_(parse_query("SELECT a FROM s WHERE a BETWEEN 50 AND 60").where)
    child = next(f for f in last.flows if f.parent == parent.id)
    forged = type(child)(child.id, child.stream, child.parent, child.origin, child.path, wide, child.attrs)
    epochs[-1] = type(last)(
        last.start, last.end, tuple(forged if f is child else f for f in last.flows), last.deliveries
    )
    broken = type(plan)(plan.strategy, plan.scenario, tuple(epochs), plan.decisions)
    problems = plan_problems(broken, scenario, network)
    assert any(f"{child.id}: its predicate reaches past its parent {parent.id}'s" in p for p in problems), problems
