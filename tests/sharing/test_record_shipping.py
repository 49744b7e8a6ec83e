"""Record flows in plans (docs/PLANNER.md, "Aggregate subscriptions"): which aggregate subscriptions the
strategies serve with their records, the cost model's estimate of a record flow, and the rules a plan with
record flows keeps."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from matcher import Uniform, parse_query
from network.routing import Network
from sharing import make_plan
from sharing.baselines import records_shipped
from sharing.cost import CostModel, _distinct
from sharing.plan import Delivery, Epoch, Flow, Plan
from sharing.records import RecordShipping
from tests.test_aggregates import FIGURE1, FIGURE1_AGGREGATES, assert_accounted, report_of, with_aggregates
from topologies.errors import PlanError
from topologies.loader import load_scenario
from topologies.model import AttributeSpec

PHOTONS = "topologies/photon-survey.yaml"


def test_the_distinct_groups_expected_among_m_tuples():
    # four equally likely values: 4 (1 - (3/4)^m); two attributes of two values: as four; none: one group
    assert _distinct(3.0, [Uniform(1, 4, integer=True)]) == pytest.approx(4 * (1 - 0.75**3))
    assert _distinct(3.0, [Uniform(0, 1, integer=True)] * 2) == pytest.approx(4 * (1 - 0.75**3))
    assert _distinct(5.0, []) == pytest.approx(1.0)
    # a continuous attribute, or one without a distribution: every tuple its own group
    assert _distinct(7.5, [Uniform(0, 1)]) == 7.5
    assert _distinct(7.5, [Uniform(0, 3, integer=True), None]) == 7.5


def test_the_estimated_records_follow_the_windows_and_groups():
    scenario = load_scenario(FIGURE1)  # stream0 at 100 tuples/s, a, b, c uniform on [0, 100]
    stream = scenario.streams[0]
    cost = CostModel(replace(scenario, streams=(replace(stream, attributes=_integer_b(stream)),)))
    count = parse_query("SELECT COUNT(*) FROM stream0 WHERE a < 50 WINDOW 10 TUPLES SLIDE 5 TUPLES")
    assert cost.records_per_s(count) == pytest.approx(100 * 0.5 / 5)
    plain = parse_query("SELECT COUNT(*) FROM stream0 WHERE a < 50 WINDOW 2 s SLIDE 0.5 s")
    assert cost.records_per_s(plain) == pytest.approx((1 - 0.0**100) / 0.5)
    grouped = parse_query("SELECT b, COUNT(*) FROM stream0 WHERE a < 50 GROUP BY b WINDOW 0.1 s")
    assert cost.records_per_s(grouped) == pytest.approx(5 * (1 - 0.8**5) / 0.1)
    # a record of COUNT(*) per window weighs 16 + 8 x 2 bytes against 16 + 8 bytes an input tuple (no
    # attribute read): 0.5 of them a second against 50
    assert cost.ships_records(plain, 0)
    tiny = parse_query("SELECT a, COUNT(*) FROM stream0 GROUP BY a WINDOW 1 s SLIDE 0.01 s")
    assert not cost.ships_records(tiny, 1)  # every tuple its own group, in a hundred windows


def _integer_b(stream):
    return tuple(
        AttributeSpec("b", "int", Uniform(0, 4, integer=True)) if a.name == "b" else a for a in stream.attributes
    )


def test_the_strategies_ship_the_records_the_cost_model_finds_lighter():
    scenario = load_scenario(PHOTONS)
    aggregates = {s.id for s in scenario.subscriptions if hasattr(s.query, "window")}
    assert records_shipped(scenario, "query-shipping") == aggregates
    assert records_shipped(scenario, "data-shipping") == records_shipped(scenario, "multicast") == frozenset()
    shipped = records_shipped(scenario, "sharing-em")
    assert shipped == records_shipped(scenario, "ideal") and len(shipped) == len(aggregates) > 20
    network = Network.of(scenario)
    for strategy in ("ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        for epoch in plan.epochs:
            records = {f.aggregate: f for f in epoch.flows if f.aggregate is not None}
            for delivery in epoch.deliveries:
                if delivery.subscription in shipped:
                    flow = records[delivery.subscription]
                    sub = scenario.subscription(delivery.subscription)
                    source = scenario.home(scenario.stream(sub.stream).source)
                    assert flow.path == network.route(source, delivery.home)
                    assert (flow.origin, delivery.flow, flow.parent) == (source, flow.id, None)


def test_sharing_em_ships_what_the_ideal_does_on_the_photon_survey():
    scenario = load_scenario(PHOTONS)
    report = report_of(scenario, ("query-shipping", "ideal", "sharing-em"))
    assert_accounted(report)
    entries = report["strategies"]
    ideal = entries["ideal"]["backbone_bytes"]
    assert entries["sharing-em"]["backbone_bytes"] <= 1.05 * ideal
    assert ideal <= entries["query-shipping"]["backbone_bytes"]
    # the aggregate subscriptions' records were computed at the sources' super-peers
    shipped = [s for s in entries["sharing-em"]["subscriptions"] if s.get("aggregated_at")]
    assert len(shipped) == len(records_shipped(scenario, "sharing-em"))


def test_a_record_flow_is_the_subscriptions_alone(tmp_path):
    scenario = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    network = Network.of(scenario)
    plan = make_plan(scenario, "query-shipping", network)
    epoch = next(e for e in plan.epochs if len(e.flows) == 3)
    q1 = next(f for f in epoch.flows if f.aggregate == "Q1")
    where = q1.predicate

    def broken(flows, deliveries) -> Plan:
        return Plan("p", scenario.name, (Epoch(0.0, scenario.duration, tuple(flows), tuple(deliveries)),))

    cases = [
        (
            [replace(q1, path=(*q1.path, "SP3"))],
            [Delivery("Q3", "P3", "SP3", q1.id, where, ("a", "b"))],
            "delivery of Q3: reads records.Q1, the records of Q1",
        ),
        ([q1], [Delivery("Q1", "P1", "SP1", q1.id, where, q1.attrs)], "delivery of Q1: filters the records"),
        ([replace(q1, predicate=where.__class__.TRUE)], [], "flow records.Q1: aggregates other tuples"),
        ([replace(q1, aggregate="Q3")], [], "carries the records of 'Q3', no aggregate"),
        ([q1, Flow("F", "stream0", q1.id, "SP5", ("SP5", "SP1"), where, q1.attrs)], [], "flow F: reads records.Q1"),
    ]
    for flows, deliveries, message in cases:
        with pytest.raises(PlanError, match=message):
            broken(flows, deliveries).check(scenario, network)
    # a record flow reads back from the plan's JSON as the same flow
    from sharing.plan import plan_from_wire

    path = tmp_path / "plan.json"
    with path.open("w") as out:
        plan.write_json(out)
    assert plan_from_wire(json.loads(path.read_text())) == plan


def test_record_flows_come_and_go_with_their_subscriptions():
    scenario = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    shipping = RecordShipping(scenario, Network.of(scenario), frozenset({"Q1", "Q2"}))
    q1, q2 = scenario.subscription("Q1"), scenario.subscription("Q2")
    assert shipping.subscribe(q2).flow == "records.Q2"
    assert shipping.subscribe(q1).flow == "records.Q1"
    first = shipping.part(0.0)
    assert [f.id for f in first] == ["records.Q1", "records.Q2"]  # in scenario order
    assert shipping.part(0.0) is first  # nothing changed: the very part
    shipping.unsubscribe(q1)
    assert [f.id for f in shipping.part(0.0)] == ["records.Q2"]


@pytest.mark.parametrize("bandwidth", [90.0, 400.0])
def test_a_record_flow_is_admitted_within_the_network_limits(bandwidth):
    # Q1's records (COUNT, AVG, MAX every 5 s: 0.2 records/s of 48 bytes, 77 bit/s) cross SP5 -> SP1
    base = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    links = tuple(replace(link, bandwidth=bandwidth) if {link.a, link.b} == {"SP5", "SP1"} else link
                  for link in base.links)  # fmt: skip
    scenario = replace(base, links=links, max_utilization=0.8, peak_sd=0.0)
    plan = make_plan(scenario, "sharing-em", Network.of(scenario))
    if bandwidth < 77 / 0.8:
        assert plan.rejected["Q1"].startswith("no route from SP4 to SP1 within the network limits: link SP5 -> SP1")
        assert all(d.subscription != "Q1" for e in plan.epochs for d in e.deliveries)
    else:
        assert "Q1" not in plan.rejected
        assert any(f.aggregate == "Q1" for e in plan.epochs for f in e.flows)
        from sharing.limits import PlannedLoad

        # the planned load counts the records: 0.2 x 48 x 8 bit/s on SP5 -> SP1 (Q3's tuples come later)
        load = PlannedLoad(scenario, Network.of(scenario), plan)
        assert load.links[("SP5", "SP1")] >= 0.2 * 48 * 8


def test_a_record_flows_operator_is_planned_within_its_processor():
    # Q1's operator at SP4 tests every tuple (100/s) against its one box, keeps 40 % projected to c and
    # folds each into three aggregates, and builds 0.2 records a second
    base = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    costs = base.cpu_costs
    q1 = base.subscription("Q1").query
    ops = 100 * (costs.box + 0.4 * (costs.projection + 3 * costs.aggregate)) + 0.2 * costs.record
    from sharing.limits import CpuLoads

    assert CpuLoads(replace(base, cpus=(("SP4", 1e9),))).operator("SP4", "stream0", q1, 0.4, 0.2)[0] == (
        pytest.approx(ops)
    )
    for cpu, admitted in ((ops / 0.8 * 0.9, False), (ops / 0.8 * 1.5, True)):
        scenario = replace(base, cpus=(("SP4", cpu),), peak_sd=0.0, subscriptions=base.subscriptions[:1])
        plan = make_plan(scenario, "sharing-em", Network.of(scenario))
        assert ("Q1" not in plan.rejected) == admitted
        if not admitted:
            assert "super-peer SP4 would run" in plan.rejected["Q1"]
