"""Network-aware sharing and super-peer CPU: the planners keep every limited processor's planned operations
(by the cost model's rates) within max_utilization of its cpu, choose another option or reject a
subscription naming the super-peer and its cpu when none fits, keep the limit when simulated, and plan as
before when no super-peer has a cpu."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sharing_checker import plan_problems, scenarios

from matcher import Predicate
from matcher.selectivity import selectivity
from network.routing import Network
from peers.local import run_local
from reports.report import strategy_entry
from sharing import make_plan
from sharing.cost import CostModel
from sharing.epochs import timeline
from sharing.limits import PlannedLoad
from sharing.plan import Plan
from sharing.planner import Planner
from topologies.loader import scenario_from_document
from topologies.model import Scenario

SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")
TOLERANCE = 1e-9

# A line SP0 - SP1 - SP2, the source at SP0.  Without a cpu, the planner serves Q1..Q3 from one flow
# SP0 -> SP1 -> SP2 read at SP2 (Q3 widening it), and Q4 at SP1 by splitting that flow there: the part
# beyond SP1 and Q4's delivery both read it at SP1.
LINE = """
name: cpu-line
seed: 3
duration: 30
header_bytes: 16
cpu_costs: {box: 4, projection: 2}
network:
  defaults: {bandwidth: 10Mbit, latency: 2ms}
  super_peers: [SP0, SP1, SP2]
  links: [[SP0, SP1], [SP1, SP2]]
thin_peers:
  - {id: src, attach: SP0}
  - {id: p1, attach: SP1}
  - {id: p2, attach: SP2}
  - {id: p3, attach: SP2}
streams:
  - id: s
    source: src
    rate: 100
    schema:
      a: {type: float, distribution: {uniform: [0, 100]}}
      b: {type: float, distribution: {uniform: [0, 100]}}
subscriptions:
  - {id: Q1, peer: p2, at: 0, query: "SELECT a FROM s WHERE a < 50 OR b < 10"}
  - {id: Q2, peer: p3, at: 1, query: "SELECT a FROM s WHERE a < 40"}
  - {id: Q3, peer: p2, at: 2, query: "SELECT b FROM s WHERE a > 60"}
  - {id: Q4, peer: p1, at: 3, query: "SELECT a FROM s WHERE a < 20"}
"""


def _line(cpus: dict[str, float] | None = None) -> Scenario:
    doc = yaml.safe_load(LINE)
    if cpus:
        doc["network"]["super_peers"] = [
            {"id": sp, "cpu": cpus[sp]} if sp in cpus else sp for sp in doc["network"]["super_peers"]
        ]
    return scenario_from_document(doc)


def _processor_loads(scenario: Scenario, flows, deliveries) -> tuple[dict[str, float], dict[str, float]]:
    """Plain reference, from an epoch's flows and deliveries by exact selectivities: per limited super-peer,
    the operations per second its operators cost (for every flow produced there and delivery taken there,
    ``box`` per box of its predicate per tuple of what it reads, ``projection`` per tuple it keeps when it
    carries fewer attributes than what it reads) and their variance bound (per stream read there, the mean
    times the most operations one of its tuples costs)."""
    costs = scenario.cpu_costs
    dists = {s.id: {a.name: a.distribution for a in s.attributes} for s in scenario.streams}
    rates = {s.id: s.rate for s in scenario.streams}
    by_id = {f.id: f for f in flows}

    def carried(stream: str, flow_id: str | None) -> int:
        while flow_id is not None:
            flow = by_id[flow_id]
            if not flow.trim:
                return len(flow.attrs)
            flow_id = flow.parent
        return len(dists[stream])

    def sel(stream: str, predicate: Predicate) -> float:
        return selectivity(predicate, dists[stream])

    readers: dict[tuple[str, str | None], list[tuple[str, Predicate, bool]]] = {}
    for f in flows:
        projects = carried(f.stream, f.id) < carried(f.stream, f.parent)
        readers.setdefault((f.stream, f.parent), []).append((f.origin, f.predicate, projects))
    for d in deliveries:
        stream = scenario.subscription(d.subscription).stream
        projects = len(d.attrs) < carried(stream, d.flow)
        readers.setdefault((stream, d.flow), []).append((d.home, d.predicate, projects))
    mean = dict.fromkeys(scenario.cpu, 0.0)
    variance = dict.fromkeys(scenario.cpu, 0.0)
    for (stream, host), found in readers.items():
        host_pred = Predicate.TRUE if host is None else by_id[host].predicate
        arriving = rates[stream] * (1.0 if host is None else sel(stream, host_pred))
        for node in {at for at, _, _ in found}:
            if node not in mean:
                continue
            here = [(p, proj) for at, p, proj in found if at == node]
            ops = sum(
                arriving * costs.box * len(p.boxes)
                + (rates[stream] * sel(stream, host_pred.and_(p)) * costs.projection if proj else 0.0)
                for p, proj in here
            )
            most = sum(costs.box * len(p.boxes) + (costs.projection if proj else 0) for p, proj in here)
            mean[node] += ops
            variance[node] += ops * most
    return mean, variance


def _within(scenario: Scenario, mean: dict[str, float], variance: dict[str, float]) -> list[str]:
    share, z = scenario.max_utilization, scenario.peak_sd
    found = []
    for node, cpu in scenario.cpus:
        whole = cpu * (1 + TOLERANCE) + TOLERANCE
        if mean[node] > share * whole or mean[node] + z * math.sqrt(variance[node]) > whole:
            found.append(f"{node}: {mean[node]} ops/s (variance {variance[node]}) beyond {share} x {cpu}")
    return found


def test_the_reference_counts_what_the_engines_charge():
    # Q1's flow F1 (a < 50 OR b < 10: 55 tuples/s) is read at SP2 by Q1 (exactly its result: TRUE, one box)
    # and Q2 (a < 40, one box), both projecting to a: 55 x 4 x 2 + (55 + 40) x 2 = 630 operations/s
    scenario = _line({"SP2": 1e6})
    plan = make_plan(scenario, "sharing-em")
    epoch = plan.epoch_at(1.5)
    mean, _ = _processor_loads(scenario, epoch.flows, epoch.deliveries)
    assert mean["SP2"] == pytest.approx(630.0)


@pytest.mark.parametrize("strategy", SHARING)
def test_a_processor_at_its_cpu_takes_no_more(strategy):
    loose = make_plan(_line(), strategy)
    assert loose.rejected == {}
    at = {d.subscription: d.home for d in loose.epochs[-1].deliveries}
    assert at == {"Q1": "SP2", "Q2": "SP2", "Q3": "SP2", "Q4": "SP1"}
    unlimited = _line({"SP2": 1e12})
    mean, _ = _processor_loads(unlimited, loose.epochs[-1].flows, loose.epochs[-1].deliveries)
    assert mean["SP2"] > 800  # more than 0.8 x the cpu below

    scenario = _line({"SP2": 1000.0})
    plan = make_plan(scenario, strategy)
    assert plan_problems(plan, scenario, Network.of(scenario)) == []
    for epoch in plan.epochs:
        assert _within(scenario, *_processor_loads(scenario, epoch.flows, epoch.deliveries)) == [], epoch.start
    # Q3's own query-shipping flow would add a delivery testing one box of 40 tuples/s and projecting
    # them at SP2: 630 + 40 x 4 + 40 x 2 = 870 operations/s
    assert plan.rejected == {
        "Q3": "no operators from SP0 to SP2 fit the network limits: super-peer SP2 would run 870 operations/s,"
        " above 0.8 x its cpu 1000 operations/s"
    }
    assert all(d.subscription != "Q3" for e in plan.epochs for d in e.deliveries)
    lines = PlannedLoad(scenario, Network.of(scenario), plan).lines()
    assert "  super-peer SP2 processor: 0.63 of 1000 operations/s" in lines


@pytest.mark.parametrize("strategy", SHARING)
def test_a_busy_processor_sends_an_arrival_to_another_option(strategy):
    # without a cpu Q4 taps F1 at SP1: F1's part beyond SP1 (2 boxes) and Q4's delivery (1 box, projecting)
    # read its 55 tuples/s there, 55 x 4 x 3 + 20 x 2 = 700 operations/s; SP1 may run 0.8 x 600.  Its own
    # flow from the raw stream at SP0 costs SP1 one box of 20 tuples/s and their projection: 120.
    loose = make_plan(_line({"SP2": 1000.0}), strategy)
    assert "reuses F1 at SP1" in loose.decisions[-1].summary
    scenario = _line({"SP1": 600.0, "SP2": 1000.0})
    plan = make_plan(scenario, strategy)
    assert set(plan.rejected) == {"Q3"}
    assert "raw s at SP0" in plan.decisions[-1].summary and "new flow" in plan.decisions[-1].summary
    last = plan.epochs[-1]
    mean, _ = _processor_loads(scenario, last.flows, last.deliveries)
    assert mean["SP1"] == pytest.approx(120.0)
    assert _within(scenario, *_processor_loads(scenario, last.flows, last.deliveries)) == []


@pytest.mark.parametrize("strategy", SHARING)
def test_the_simulated_processors_stay_within_the_limit(strategy):
    scenario = _line({"SP1": 600.0, "SP2": 1000.0})
    plan = make_plan(scenario, strategy)
    entry = strategy_entry(scenario, run_local(scenario, plan))
    used = {sp["id"]: sp["cpu_utilization"] for sp in entry["super_peers"] if sp["cpu"] is not None}
    assert set(used) == {"SP1", "SP2"}
    assert 0.5 < used["SP2"] <= scenario.max_utilization + 0.05  # planned 0.63 from t = 1 s on
    assert 0.1 < used["SP1"] <= scenario.max_utilization + 0.05  # planned 0.2 from t = 3 s on
    assert entry["exact"]


@st.composite
def limited(draw) -> Scenario:
    """A random small scenario (sharing_checker) with one subscription event per instant and random cpus
    on up to three super-peers that often bind."""
    scenario = draw(scenarios())
    subs = []
    for i, sub in enumerate(scenario.subscriptions):  # arrivals at even seconds, departures at odd ones
        until = draw(st.sampled_from([None, 5, 9, 13]))
        subs.append(dataclasses.replace(sub, at=2 * i, until=None if until is None else 2 * i + until))
    chosen = draw(st.lists(st.sampled_from(scenario.super_peers), unique=True, min_size=1, max_size=3))
    cpus = tuple((sp, float(draw(st.sampled_from([60, 250, 1000, 4000])))) for sp in sorted(chosen))
    return dataclasses.replace(
        scenario,
        subscriptions=tuple(subs),
        cpus=cpus,
        max_utilization=draw(st.sampled_from([0.5, 0.8, 1.0])),
        peak_sd=draw(st.sampled_from([0.0, 3.0])),
    )


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=limited())
def test_network_aware_plans_keep_every_processor_within_its_cpu(strategy, scenario):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []
    for epoch in plan.epochs:
        assert _within(scenario, *_processor_loads(scenario, epoch.flows, epoch.deliveries)) == [], epoch.start
    for sub_id, reason in plan.rejected.items():
        assert "\n" not in reason and ("link" in reason or "super-peer" in reason), sub_id
    peaks = PlannedLoad(scenario, network, plan).processors
    for node in scenario.cpu:
        most = max(_processor_loads(scenario, e.flows, e.deliveries)[0][node] for e in plan.epochs)
        assert peaks[node] == pytest.approx(most, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=limited())
def test_the_planners_bookkeeping_is_the_plans_load(strategy, scenario):
    """The planner's incremental processor loads equal the reference over the epochs it makes."""
    network = Network.of(scenario)
    planner = Planner(scenario, strategy, network, CostModel(scenario), capped=False)
    changes, loads = [], []
    for start, end, events in timeline(scenario):
        for event in events:
            if event.kind == "network":
                planner.network_event(event.state, "", event.time)
            elif event.kind == "subscribe":
                planner.subscribe(event.subscription, event.time)
            else:
                planner.unsubscribe(event.subscription, event.time)
        changes.append(planner.epoch(start, end))
        planner.loads.cpu.settle()
        loads.append(dict(planner.loads.cpu.ops))
    plan = Plan(strategy, scenario.name, (), (), planner.rejected, (), changes=tuple(changes))
    for epoch, planned in zip(plan.epochs, loads, strict=True):
        mean, _ = _processor_loads(scenario, epoch.flows, epoch.deliveries)
        assert planned == pytest.approx(mean, rel=1e-9, abs=1e-6), epoch.start


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_a_cpu_that_never_binds_leaves_the_plan_as_it_was(strategy, scenario):
    ample = tuple((sp, 1e12) for sp in scenario.super_peers)
    assert make_plan(dataclasses.replace(scenario, cpus=ample), strategy).to_json() == (
        make_plan(scenario, strategy).to_json()
    )
    # the cpus alone make the planner keep loads: the same plan as with no limits at all
    unbounded = tuple(dataclasses.replace(link, bandwidth=math.inf) for link in scenario.links)
    only_cpus = dataclasses.replace(scenario, links=unbounded, cpus=ample)
    absent = dataclasses.replace(scenario, max_utilization=math.inf)
    assert make_plan(only_cpus, strategy).to_json() == make_plan(absent, strategy).to_json()


def test_without_a_cpu_the_planner_keeps_no_processor_loads():
    scenario = _line()
    planner = Planner(scenario, "sharing-em", Network.of(scenario), CostModel(scenario), capped=False)
    assert planner.loads is not None and planner.loads.cpu is None
    assert PlannedLoad(scenario, Network.of(scenario), make_plan(scenario, "sharing-em")).processors == {}
