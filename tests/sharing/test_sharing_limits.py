"""Network-aware sharing: the planners keep every link direction and super-peer within max_utilization of
its bandwidth or capacity (by the cost model's rates), route branches around hot links, reject what fits
nowhere, and plan as before when no limit binds."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections import deque
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sharing_checker import plan_problems, scenarios

from matcher import Predicate, Uniform, parse_query
from matcher.selectivity import selectivity
from network.routing import Network
from peers.local import run_local
from sharing import make_plan
from sharing.cost import CostModel
from sharing.limits import PlannedLoad
from sharing.plan import Plan, plan_from_wire
from sharing.planner import Planner
from topologies.errors import PlanError
from topologies.expected import compare, expected_results
from topologies.loader import load_scenario
from topologies.model import AttributeSpec, LinkSpec, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec

SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")
SHIPPED = Path(__file__).resolve().parents[2] / "topologies"
TOLERANCE = 1e-9


@st.composite
def limited(draw) -> Scenario:
    """A random small scenario (sharing_checker) with one subscription event per instant, random link
    bandwidths and super-peer capacities that often bind, and a random max_utilization."""
    scenario = draw(scenarios())
    subs = []
    for i, sub in enumerate(scenario.subscriptions):  # arrivals at even seconds, departures at odd ones
        until = draw(st.sampled_from([None, 5, 9, 13]))
        subs.append(dataclasses.replace(sub, at=2 * i, until=None if until is None else 2 * i + until))
    links = tuple(
        dataclasses.replace(link, bandwidth=draw(st.sampled_from([2e3, 5e3, 1e4, 2e4, 1e6]))) for link in scenario.links
    )
    limited_sps = draw(st.lists(st.sampled_from(scenario.super_peers), unique=True, max_size=3))
    capacities = tuple((sp, float(draw(st.sampled_from([5, 20, 60, 200])))) for sp in sorted(limited_sps))
    share = draw(st.sampled_from([0.5, 0.8, 1.0]))
    peak_sd = draw(st.sampled_from([0.0, 3.0]))
    return dataclasses.replace(
        scenario,
        links=links,
        subscriptions=tuple(subs),
        capacities=capacities,
        max_utilization=share,
        peak_sd=peak_sd,
    )


def _loads(scenario: Scenario, flows) -> tuple[dict, dict, dict, dict]:
    """Plain reference: (bits/s per link direction, their variance bound, tuples/s flows bring into each
    super-peer, tuples/s sources upload to it) of ``flows`` by exact selectivities; a tuple of a flow of
    need classes carries an attribute when it satisfies a ``trim`` entry naming it.  A second's bits on a
    link are a sum of the tuples' sizes, each at most its flow's widest tuple: their variance is at most
    the mean times that size."""
    rates = {s.id: s.rate for s in scenario.streams}
    dists = {s.id: {a.name: a.distribution for a in s.attributes} for s in scenario.streams}
    bits, spread, into = {}, {}, {}
    for f in flows:
        tuples = rates[f.stream] * selectivity(f.predicate, dists[f.stream])
        if f.trim:
            attributes = sum(
                selectivity(Predicate([b for p, attrs in f.trim if a in attrs for b in p.boxes]), dists[f.stream])
                for a in f.attrs
            )
            wire = rates[f.stream] * attributes * 8 + tuples * scenario.header_bytes
        else:
            wire = tuples * scenario.tuple_bytes(len(f.attrs))
        for hop in pairwise(f.path):
            bits[hop] = bits.get(hop, 0.0) + wire * 8
            spread[hop] = spread.get(hop, 0.0) + wire * 8 * scenario.tuple_bytes(len(f.attrs)) * 8
        for node in f.path[1:]:
            into[node] = into.get(node, 0.0) + tuples
    uploads = {}
    for s in scenario.streams:
        home = scenario.home(s.source)
        uploads[home] = uploads.get(home, 0.0) + s.rate
    return bits, spread, into, uploads


def _fits(mean: float, variance: float, share: float, whole: float, z: float, margin: float = 1.0) -> bool:
    """A load of ``mean`` per second within ``share`` of ``whole``, and its mean plus ``z`` standard
    deviations within the whole of it."""
    return mean <= share * whole * margin and mean + z * math.sqrt(variance) <= whole * margin


def _within(scenario: Scenario, network: Network, flows) -> list[str]:
    bits, spread, into, uploads = _loads(scenario, flows)
    share, z = scenario.max_utilization, scenario.peak_sd
    slack = 1 + TOLERANCE
    found = [
        f"{hop}: {load} (variance {spread[hop]}) beyond {share} x {network.link(*hop).bandwidth}"
        for hop, load in bits.items()
        if not _fits(load, spread[hop], share, network.link(*hop).bandwidth * slack + TOLERANCE, z)
    ]
    for node, capacity in scenario.capacities:
        load = uploads.get(node, 0.0) + into.get(node, 0.0)
        if into.get(node, 0.0) > 0 and not _fits(load, into[node], share, capacity * slack + TOLERANCE, z):
            found.append(f"{node}: {load} beyond {share} x {capacity}")
    return found


def _fits_somewhere(scenario: Scenario, network: Network, flows, sub: SubscriptionSpec) -> bool:
    """Whether ``sub``'s own query-shipping flow (filtered and projected at the source's super-peer) fits
    on any route from there to its home, on top of ``flows`` (breadth first over the links it fits on)."""
    stream = scenario.stream(sub.stream)
    source, home = scenario.home(stream.source), scenario.home(sub.peer)
    sel = selectivity(sub.query.where, {a.name: a.distribution for a in stream.attributes})
    tuples = stream.rate * sel
    size = scenario.tuple_bytes(len(sub.query.attributes(stream.attribute_names))) * 8
    wire = tuples * size
    bits, spread, into, uploads = _loads(scenario, flows)
    capacity = dict(scenario.capacities)
    share, z, margin = scenario.max_utilization, scenario.peak_sd, 1 - TOLERANCE
    seen, queue = {source}, deque([source])
    while queue:
        here = queue.popleft()
        if here == home:
            return True
        for there in network.neighbours(here):
            if there in seen:
                continue
            hop = (here, there)
            mean, variance = bits.get(hop, 0.0) + wire, spread.get(hop, 0.0) + wire * size
            if wire > 0 and not _fits(mean, variance, share, network.link(*hop).bandwidth, z, margin):
                continue
            load = uploads.get(there, 0.0) + into.get(there, 0.0) + tuples
            if (
                tuples > 0
                and there in capacity
                and not _fits(load, into.get(there, 0.0) + tuples, share, capacity[there], z, margin)
            ):
                continue
            seen.add(there)
            queue.append(there)
    return False


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=limited())
def test_network_aware_plans_keep_the_limits_and_reject_only_what_fits_nowhere(strategy, scenario):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []
    for epoch in plan.epochs:
        assert _within(scenario, network, epoch.flows) == [], (epoch.start, epoch.end)
    before = {e.end: e.flows for e in plan.epochs}
    for sub_id, reason in plan.rejected.items():
        sub = scenario.subscription(sub_id)
        assert "\n" not in reason and ("link" in reason or "super-peer" in reason)
        assert not _fits_somewhere(scenario, network, before.get(sub.at, ()), sub), sub_id
        assert all(d.subscription != sub_id for e in plan.epochs for d in e.deliveries)


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=limited())
def test_admitted_subscriptions_are_exact_when_simulated(strategy, scenario):
    plan = make_plan(scenario, strategy)
    run = run_local(scenario, plan)
    expected = expected_results(scenario)
    for sub in scenario.subscriptions:
        if sub.id in plan.rejected:
            assert len(run.delivered.get(sub.id, ())) == 0
        else:
            got = compare(
                run.delivered[sub.id], run.delivered_attrs[sub.id], expected.indices[sub.id], expected.attrs[sub.id]
            )
            assert got == (0, 0), sub.id


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), capacity=st.booleans())
def test_limits_that_never_bind_leave_the_plan_as_it_was(strategy, scenario, capacity):
    absent = dataclasses.replace(scenario, max_utilization=math.inf)
    ample = dataclasses.replace(
        scenario,
        links=tuple(dataclasses.replace(link, bandwidth=1e12) for link in scenario.links),
        capacities=tuple((sp, 1e9) for sp in scenario.super_peers) if capacity else (),
    )
    assert make_plan(ample, strategy).to_json() == make_plan(absent, strategy).to_json()


def _line(bandwidths: dict[tuple[str, str], float], subs, capacities=()) -> Scenario:
    """A square SP0-SP1-SP2-SP3-SP0 (SP0-SP1-SP2 the faster way) with a source at SP0, subscribers at SP2."""
    sps = ("SP0", "SP1", "SP2", "SP3")
    pairs = [("SP0", "SP1", 1), ("SP1", "SP2", 1), ("SP2", "SP3", 5), ("SP0", "SP3", 5)]
    links = tuple(LinkSpec(a, b, bandwidths.get((a, b), 1e6), Fraction(ms, 1000)) for a, b, ms in pairs)
    peers = (ThinPeerSpec("src", "SP0"), ThinPeerSpec("p2", "SP2"), ThinPeerSpec("p1", "SP1"))
    stream = StreamSpec("s", "src", 100.0, (AttributeSpec("a", "float", Uniform(0, 100)),))
    specs = tuple(
        SubscriptionSpec(i, peer, at, until, parse_query(f"SELECT a FROM s WHERE {where}"))
        for i, peer, at, until, where in subs
    )
    return Scenario("limits", 1, 30, 16, sps, links, peers, (stream,), specs, capacities=capacities)


# 100 tuples/s of 24 bytes: a subscription to half the range is 9,600 bit/s on each link it crosses
HALF = 100 * 0.5 * 24 * 8


@pytest.mark.parametrize("strategy", SHARING)
def test_a_branch_goes_around_a_hot_link(strategy):
    scenario = _line({("SP1", "SP2"): HALF * 1.5}, [("Q1", "p2", 0, None, "a < 50"), ("Q2", "p2", 1, None, "a >= 50")])
    plan = make_plan(scenario, strategy)
    assert plan.rejected == {}
    paths = {f.path for f in plan.epochs[-1].flows}
    assert ("SP0", "SP1", "SP2") in paths and ("SP0", "SP3", "SP2") in paths
    assert "routed around a hot link" in plan.decisions[-1].summary
    assert PlannedLoad(scenario, Network.of(scenario), plan).lines()[1] == "  link SP1 -> SP2: 0.6667 of 14.4 Kbit/s"


@pytest.mark.parametrize("strategy", SHARING)
def test_a_departure_frees_capacity_for_a_later_arrival(strategy):
    both = {("SP1", "SP2"): HALF * 1.5, ("SP0", "SP3"): HALF * 0.5}
    subs = [("Q1", "p2", 0, 10, "a < 50"), ("Q2", "p2", 5, None, "a >= 50"), ("Q3", "p2", 15, None, "a >= 50")]
    plan = make_plan(_line(both, subs), strategy)
    assert set(plan.rejected) == {"Q2"}
    assert plan.rejected["Q2"] == (
        "no route from SP0 to SP2 within the network limits: link SP1 -> SP2 would carry 19.2 Kbit/s,"
        " above 0.8 x its bandwidth 14.4 Kbit/s"
    )
    last = plan.epochs[-1]
    assert [d.subscription for d in last.deliveries] == ["Q3"]
    assert "new flow" in plan.decisions[-1].summary


@pytest.mark.parametrize("strategy", SHARING)
def test_widening_is_checked_along_every_link_it_widens(strategy):
    # Q1's flow runs SP0 -> SP1 -> SP2; Q2 at SP1 asks for the other half.  Widening Q1's flow at SP1 would
    # double its load on SP0 -> SP1, which has room for one half only; so Q2 gets its own flow the other
    # way round (SP0 -> SP3 -> SP2 -> SP1).
    scenario = _line({("SP0", "SP1"): HALF * 1.5}, [("Q1", "p2", 0, None, "a < 50"), ("Q2", "p1", 1, None, "a >= 50")])
    plan = make_plan(scenario, strategy)
    assert plan.rejected == {}
    assert [f.path for f in plan.epochs[-1].flows] == [("SP0", "SP1", "SP2"), ("SP0", "SP3", "SP2", "SP1")]
    loose = make_plan(dataclasses.replace(scenario, max_utilization=math.inf), strategy)
    assert loose.decisions[-1].widened  # without limits Q2 widens Q1's flow


@pytest.mark.parametrize("strategy", SHARING)
def test_a_super_peer_at_capacity_takes_no_more(strategy):
    # SP2 may take in 0.8 x 80 = 64 tuples/s: Q1's 50, not Q2's 50 more (which no route avoids)
    subs = [("Q1", "p2", 0, None, "a < 50"), ("Q2", "p2", 1, None, "a >= 50")]
    plan = make_plan(_line({}, subs, capacities=(("SP2", 80.0),)), strategy)
    assert plan.rejected == {
        "Q2": "no route from SP0 to SP2 within the network limits: super-peer SP2 would take in 100 tuples/s,"
        " above 0.8 x its capacity 80 tuples/s"
    }


def test_rejections_travel_with_the_plan_and_keep_its_rules():
    subs = [("Q1", "p2", 0, 10, "a < 50"), ("Q2", "p2", 5, None, "a >= 50")]
    scenario = _line({("SP1", "SP2"): HALF * 1.5, ("SP0", "SP3"): HALF * 0.5}, subs)
    plan = make_plan(scenario, "sharing-em")
    assert plan.to_json()["rejected"] == dict(plan.rejected)
    out = io.StringIO()
    plan.write_json(out)
    assert plan_from_wire(json.loads(out.getvalue())).rejected == plan.rejected
    assert any(line.startswith("rejected Q2: no route") for line in plan.text_lines())
    with pytest.raises(PlanError, match="no subscription"):
        Plan(plan.strategy, plan.scenario, plan.epochs, plan.decisions, {"Q9": "why"}).check(scenario)
    with pytest.raises(PlanError, match="delivery of Q1: the plan rejected it"):
        Plan(plan.strategy, plan.scenario, plan.epochs, plan.decisions, {"Q1": "why"}).check(scenario)
    spliced = plan.splice(make_plan(scenario, "sharing-hsr"), 7.0)
    assert spliced.rejected == plan.rejected


@pytest.mark.parametrize("strategy", ["query-shipping", "multicast", "ideal", "data-shipping"])
def test_baselines_ignore_the_limits(strategy):
    scenario = _line({("SP1", "SP2"): 10.0}, [("Q1", "p2", 0, None, "a < 50")])
    plan = make_plan(scenario, strategy)
    assert plan.rejected == {}
    assert [d.subscription for d in plan.epochs[-1].deliveries] == ["Q1"]


def test_a_replan_that_would_not_fit_keeps_the_tree_as_it_was():
    scenario = _line({}, [("Q1", "p2", 0, None, "a < 50"), ("Q2", "p1", 0, None, "a >= 30")])
    planner = Planner(scenario, "sharing-em", Network.of(scenario), CostModel(scenario), capped=False)
    for sub in scenario.subscriptions:
        planner.subscribe(sub, 0.0)
    assert planner.epoch(0.0, 1.0).flows.came
    bits = dict(planner.loads.bits)
    for hop in planner.loads.link_limit:  # nothing fits any more: re-placing Q1 fails
        planner.loads.link_limit[hop] = 0.0
    assert planner._replan("s") is None
    after = planner.epoch(1.0, 2.0)  # no flow or delivery changed
    assert after.flows == after.deliveries == ((), ())
    assert planner.loads.bits == pytest.approx(bits)
    assert planner.trees.bytes_per_s["s"] > 0


@pytest.mark.parametrize("strategy", SHARING)
@pytest.mark.parametrize("name", ["figure1", "sky-survey", "sensor-grid"])
def test_shipped_scenarios_plan_as_without_limits(name, strategy):
    scenario = load_scenario(SHIPPED / f"{name}.yaml")  # 100 Mbit/s links: the limits never bind
    absent = dataclasses.replace(scenario, max_utilization=math.inf)
    assert make_plan(scenario, strategy).to_json() == make_plan(absent, strategy).to_json()
