"""Re-planning at backbone failures and recoveries (docs/DYNAMICS.md): every strategy routes over what
survives, cuts off what no path joins and serves it again after a recovery; the sharing planner moves only
the flows a failure touches."""

from __future__ import annotations

import dataclasses
import heapq
from argparse import Namespace
from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sharing_checker import plan_problems, scenarios
from test_sharing_limits import _within, limited

from bench.planner import _scenario as bench_scenario
from matcher import Box, Predicate, Query, Uniform, interval
from network.routing import Network
from sharing import STRATEGIES, make_plan
from sharing.epochs import boundaries
from sharing.plan import Decision
from topologies.errors import PlanError
from topologies.model import AttributeSpec, LinkSpec, NetworkEvent, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec

SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")
TIMES = (0, 5, 10, 12, 20, 25, 30)


@st.composite
def with_events(draw, base=None) -> Scenario:
    """A random small scenario with up to three backbone elements failing, each maybe recovering later."""
    scenario = draw(base if base is not None else scenarios())
    elements = [("link", (link.a, link.b)) for link in scenario.links]
    elements += [("super_peer", (sp,)) for sp in scenario.super_peers]
    chosen = draw(st.lists(st.sampled_from(elements), unique=True, max_size=3))
    events = []
    for element, target in chosen:
        fail = draw(st.sampled_from(TIMES))
        events.append(NetworkEvent(fail, "fail", element, target))
        recover = draw(st.sampled_from([None, *(t for t in TIMES if t > fail), 35]))
        if recover is not None:
            events.append(NetworkEvent(recover, "recover", element, target))
    return dataclasses.replace(scenario, events=tuple(sorted(events, key=lambda e: e.at)))


def _down(scenario: Scenario, t: float) -> tuple[set[tuple[str, str]], set[str]]:
    """Plain reference: the links (sorted pairs) and super-peers down at ``t``, replaying the events."""
    links, nodes = set(), set()
    for event in sorted(scenario.events, key=lambda e: e.at):
        if event.at > t:
            break
        target = links if event.element == "link" else nodes
        key = tuple(sorted(event.target)) if event.element == "link" else event.target[0]
        (target.add if event.action == "fail" else target.discard)(key)
    return links, nodes


def _routes(scenario: Scenario, source: str, t: float) -> dict[str, tuple[str, ...]]:
    """Plain Dijkstra over the links up at ``t``: least latency, then fewest hops, then the smallest id
    list (docs/ACCOUNTING.md); a super-peer that is down reaches nothing."""
    links, nodes = _down(scenario, t)
    if source in nodes:
        return {}
    adjacent: dict[str, list[tuple[str, Fraction]]] = {}
    for link in scenario.links:
        if tuple(sorted((link.a, link.b))) in links or link.a in nodes or link.b in nodes:
            continue
        adjacent.setdefault(link.a, []).append((link.b, link.latency))
        adjacent.setdefault(link.b, []).append((link.a, link.latency))
    done: dict[str, tuple[str, ...]] = {}
    heap = [(Fraction(0), 0, [source])]
    while heap:
        latency, hops, path = heapq.heappop(heap)
        if path[-1] in done:
            continue
        done[path[-1]] = tuple(path)
        for there, weight in adjacent.get(path[-1], ()):
            if there not in done:
                heapq.heappush(heap, (latency + weight, hops + 1, [*path, there]))
    return done


def _uses_down(scenario: Scenario, plan) -> list[str]:
    found = []
    for epoch in plan.epochs:
        links, nodes = _down(scenario, epoch.start)
        for flow in epoch.flows:
            if nodes.intersection(flow.path) or any(tuple(sorted(h)) in links for h in pairwise(flow.path)):
                found.append(f"[{epoch.start:g}) {flow.id} {flow.path}")
        found += [f"[{epoch.start:g}) {d.subscription} at {d.home}" for d in epoch.deliveries if d.home in nodes]
    return found


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=with_events())
def test_plans_with_events_are_sound_and_never_use_a_down_element(strategy, scenario):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []
    assert _uses_down(scenario, plan) == []
    times = sorted({float(e.at) for e in scenario.events})
    assert [r.time for r in plan.replans] == times  # one per instant the backbone changes
    for replan in plan.replans:
        assert replan.flows_moved >= 0 and replan.seconds >= 0
        assert not set(replan.cut_off) & set(replan.restored)
    homes = scenario.homes
    for epoch in plan.epochs:
        delivered = {d.subscription for d in epoch.deliveries}
        for sub in scenario.subscriptions:
            active = sub.at <= epoch.start and (sub.until is None or sub.until >= epoch.end)
            source = homes[scenario.stream(sub.stream).source]
            reachable = homes[sub.peer] in _routes(scenario, source, epoch.start)
            served = active and reachable and plan.rejected_from().get(sub.id, float("inf")) > epoch.start
            assert (sub.id in delivered) == served, (epoch.start, sub.id)


@pytest.mark.parametrize("strategy", ["data-shipping", "query-shipping", "multicast", "ideal"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=with_events())
def test_baselines_route_by_the_rule_over_the_surviving_graph(strategy, scenario):
    plan = make_plan(scenario, strategy)
    homes = scenario.homes
    for epoch in plan.epochs:
        edges = set()
        for d in epoch.deliveries:
            sub = scenario.subscription(d.subscription)
            route = _routes(scenario, homes[scenario.stream(sub.stream).source], epoch.start)[d.home]
            edges.update(pairwise(route))
            if strategy in ("data-shipping", "query-shipping") and len(route) > 1:
                assert epoch.flow(d.flow).path == route, (epoch.start, d.subscription)
        if strategy in ("multicast", "ideal"):  # one flow per link of the union of routes
            assert {f.path for f in epoch.flows} == {edge for edge in edges}, epoch.start


def _line(n: int) -> Scenario:
    """SP0 - SP1 - ... - SP(n-1), and a longer way round SP0 - X - SP(n-1); one stream at SP0."""

    sps = (*(f"SP{i}" for i in range(n)), "X")
    links = tuple(LinkSpec(f"SP{i}", f"SP{i + 1}", 1e6, Fraction(1, 1000)) for i in range(n - 1))
    links += (LinkSpec("SP0", "X", 1e6, Fraction(n, 1000)), LinkSpec("X", f"SP{n - 1}", 1e6, Fraction(n, 1000)))
    peers = (ThinPeerSpec("src", "SP0"), ThinPeerSpec("far", f"SP{n - 1}"), ThinPeerSpec("mid", "SP1"))
    stream = StreamSpec("s", "src", 10.0, (AttributeSpec("a", "float", Uniform(0, 100)),))
    where = Predicate([Box([("a", interval(10, 50))])])
    subs = (
        SubscriptionSpec("Qfar", "far", 0, None, Query(("a",), "s", where)),
        SubscriptionSpec("Qmid", "mid", 0, None, Query(("a",), "s", where)),
    )
    return Scenario("line", 1, 40, 16, sps, links, peers, (stream,), subs)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cut_off_until_a_recovery_then_served_again(strategy):
    scenario = dataclasses.replace(
        _line(4),
        events=(
            NetworkEvent(10, "fail", "link", ("SP0", "SP1")),
            NetworkEvent(15, "fail", "super_peer", ("X",)),
            NetworkEvent(20, "recover", "super_peer", ("X",)),
            NetworkEvent(30, "recover", "link", ("SP1", "SP0")),
        ),
    )
    plan = make_plan(scenario, strategy)
    served = {e.start: {d.subscription for d in e.deliveries} for e in plan.epochs}
    assert served == {
        0: {"Qfar", "Qmid"},
        10: {"Qfar", "Qmid"},  # both the long way round, through X (Qmid from SP3 back along the line)
        15: set(),
        20: {"Qfar", "Qmid"},
        30: {"Qfar", "Qmid"},
    }
    assert [r.cut_off for r in plan.replans] == [(), ("Qfar", "Qmid"), (), ()]
    assert [r.restored for r in plan.replans] == [(), (), ("Qfar", "Qmid"), ()]
    assert any("X" in f.path for f in plan.epoch_at(12).flows)  # the long way round
    final = plan.epoch_at(35)
    assert all("X" not in f.path for f in final.flows)  # back on the short routes


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_cut_off_subscription_may_leave(strategy):
    scenario = _line(3)
    subs = (dataclasses.replace(scenario.subscriptions[0], until=20), scenario.subscriptions[1])
    scenario = dataclasses.replace(
        scenario,
        subscriptions=subs,
        events=(NetworkEvent(10, "fail", "super_peer", ("SP2",)), NetworkEvent(25, "recover", "super_peer", ("SP2",))),
    )
    plan = make_plan(scenario, strategy)
    assert [r.cut_off for r in plan.replans] == [("Qfar",), ()]
    assert [r.restored for r in plan.replans] == [(), ()]  # Qfar left while cut off
    assert {d.subscription for d in plan.epoch_at(30).deliveries} == {"Qmid"}


def _bench(subscriptions: int, super_peers: int, seed: int) -> Scenario:
    args = Namespace(super_peers=super_peers, subscriptions=subscriptions, streams=3, waves=4, seed=seed)
    return bench_scenario(args)


@pytest.mark.parametrize("strategy", SHARING)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_failure_moves_only_the_flows_it_touches(strategy, seed):
    scenario = _bench(300, 100, seed)
    last = make_plan(scenario, strategy).epochs[-1]
    # a link some flow crosses, the one carrying the fewest flows (a failure that touches part of a tree)
    crossing: dict[tuple[str, str], int] = {}
    for flow in last.flows:
        for hop in pairwise(flow.path):
            key = tuple(sorted(hop))
            crossing[key] = crossing.get(key, 0) + 1
    link = min(crossing, key=lambda k: (crossing[k], k))
    failing = dataclasses.replace(scenario, duration=5.0, events=(NetworkEvent(4.5, "fail", "link", link),))
    plan = make_plan(failing, strategy)
    before, after = plan.epoch_at(4), plan.epoch_at(4.5)
    # the affected flows, independently: their path crosses the link, or they hang off one that does
    by_id = {f.id: f for f in before.flows}
    affected = {f.id for f in before.flows if link in {tuple(sorted(h)) for h in pairwise(f.path)}}
    for flow in before.flows:  # parents come first
        if flow.parent in affected:
            affected.add(flow.id)
    ancestors = set()
    for flow_id in affected:
        parent = by_id[flow_id].parent
        while parent is not None and parent not in affected:
            ancestors.add(parent)
            parent = by_id[parent].parent
    decisions = [d for d in plan.decisions if d.event == "replan"]
    widened = {w for d in decisions for w in d.widened}
    after_ids = {f.id for f in after.flows}
    assert not affected & after_ids
    now = {f.id: f for f in after.flows}
    # the subscriptions placed again join the need classes of every flow serving them (docs/PLANNER.md)
    serving = set()
    for d in after.deliveries:
        if d.subscription in {r.subscription for r in decisions}:
            flow_id = d.flow
            while flow_id is not None:
                serving.add(flow_id)
                flow_id = now[flow_id].parent
    for flow in before.flows:
        if flow.id not in affected | ancestors | widened | serving:
            if flow.id not in now:  # left alone under an ancestor, which carries it on as one flow
                assert flow.parent in ancestors
                assert any(f.path[-len(flow.path) :] == flow.path for f in after.flows), flow.id
                continue
            # kept as it was, or a split put a new flow above it
            assert now[flow.id] is flow or now[flow.id].parent not in by_id, flow.id
    moved = len(set(by_id) - after_ids) + len(after_ids - set(by_id))
    (replan,) = plan.replans
    assert replan.flows_moved == moved
    subs_moved = {d.subscription for d in decisions}
    hit = {d.subscription for d in before.deliveries if d.flow in affected}
    assert subs_moved == hit
    unchanged = {id(d) for d in after.deliveries}
    for d in before.deliveries:
        if d.flow in now and now[d.flow] is by_id[d.flow] and d.subscription not in hit:
            assert id(d) in unchanged, d.subscription  # read from the same flow object: the same delivery


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=with_events(limited()))
def test_re_planned_plans_keep_the_network_limits(strategy, scenario):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []
    assert _uses_down(scenario, plan) == []
    for epoch in plan.epochs:
        assert _within(scenario, network, epoch.flows) == [], (epoch.start, epoch.end)
    rejected_from = plan.rejected_from()
    for epoch in plan.epochs:
        for d in epoch.deliveries:
            assert rejected_from.get(d.subscription, float("inf")) > epoch.start


def test_every_epoch_boundary_holds_the_event_times():
    scenario = dataclasses.replace(_line(3), events=(NetworkEvent(7, "fail", "link", ("SP0", "SP1")),))
    assert 7.0 in boundaries(scenario)


def test_the_plan_text_has_a_line_per_re_plan():
    scenario = dataclasses.replace(
        _line(3),
        events=(NetworkEvent(10, "fail", "super_peer", ("SP2",)), NetworkEvent(25, "recover", "super_peer", ("SP2",))),
    )
    lines = [line for line in make_plan(scenario, "sharing-em").text_lines() if line.startswith("re-plan")]
    assert len(lines) == 2
    assert lines[0].startswith("re-plan t=10s (fail super-peer SP2): ") and lines[0].endswith("1 cut off: Qfar")
    assert lines[1].startswith("re-plan t=25s (recover super-peer SP2): ") and lines[1].endswith("1 restored: Qfar")
    decisions = [d for d in make_plan(scenario, "sharing-em").decisions if d.event == "replan"]
    # Qmid reads Qfar's flow at SP1, where it ends (the part on to SP2 is a flow of its own): the failure
    # of SP2 leaves it alone
    assert [(d.time, d.subscription, d.summary.split(":")[0]) for d in decisions] == [
        (10.0, "Qfar", "cut off"),
        (25.0, "Qfar", "re-placed (recover super-peer SP2)"),
    ]


@pytest.mark.parametrize("strategy", ["data-shipping", "sharing-em"])
def test_the_rules_refuse_a_plan_that_uses_a_down_element(strategy):
    scenario = _line(3)
    plan = make_plan(scenario, strategy)  # planned as if nothing failed
    failing = dataclasses.replace(scenario, events=(NetworkEvent(10, "fail", "link", ("SP1", "SP2")),))
    cut = tuple(
        dataclasses.replace(e, start=s, end=t)
        for e in plan.epochs
        for s, t in ((e.start, min(e.end, 10.0)), (max(e.start, 10.0), e.end))
        if s < t
    )
    with pytest.raises(PlanError, match=r"crosses link SP1-SP2, which is down in the epoch starting at 10"):
        plan.with_epochs(cut).check(failing)
    down = dataclasses.replace(scenario, events=(NetworkEvent(10, "fail", "super_peer", ("SP0",)),))
    with pytest.raises(PlanError, match=r"SP0, which is down in the epoch starting at 10"):
        plan.with_epochs(cut).check(down)


def test_the_rules_refuse_a_delivery_after_its_rejection():
    scenario = _line(3)
    plan = make_plan(scenario, "query-shipping")
    rejected = dataclasses.replace(
        plan,
        rejected={"Qfar": "no route within the network limits"},
        decisions=(Decision(20.0, "replan", "Qfar", "rejected: no route within the network limits"),),
    )
    with pytest.raises(PlanError, match="delivery of Qfar: the plan rejected it"):
        rejected.check(scenario)
    early = [dataclasses.replace(e, end=20.0) for e in plan.epochs]
    late = [
        dataclasses.replace(e, start=20.0, deliveries=tuple(d for d in e.deliveries if d.subscription != "Qfar"))
        for e in plan.epochs
    ]
    assert rejected.with_epochs((*early, *late)).check(scenario)


def test_the_planner_benchmark_times_re_plans_at_failures(capsys):
    import json

    from bench.planner import main

    args = Namespace(
        super_peers=50, subscriptions=120, streams=3, strategy="sharing-em", waves=3, seed=2, limits=None, fail=3
    )
    assert main(Namespace(**vars(args), json=True)) == 0
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert len(failures["rows"]) == 3
    for row in failures["rows"]:
        assert row["replan_s"] > 0 and row["flows_moved"] >= 1 and row["affected"] >= row["cut_off"]
    assert failures["max_s"] == max(row["replan_s"] for row in failures["rows"])
    assert failures["median_ratio"] == failures["median_s"] / failures["from_scratch_s"]
    assert main(Namespace(**vars(args), json=False)) == 0
    text = capsys.readouterr().out
    assert "failed link" in text and "re-plan after one failure: median" in text
