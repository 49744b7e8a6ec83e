"""Failures and recoveries end to end (docs/DYNAMICS.md): every strategy on the local engine keeps the
exactness identity ``delivered + dropped + lost + unreachable == expected`` with nothing extra, and the
report's ``unreachable`` equals a recomputation by networkx over the surviving links."""

from __future__ import annotations

import random
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.failures import check, random_scenario, unreachable_by_networkx
from network.routing import Network
from peers.local import run_local
from reports.report import build_report, summary_markdown
from sharing import STRATEGIES, make_plan
from tests.test_end_to_end import scenarios
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import NetworkEvent, Scenario


@st.composite
def with_events(draw) -> Scenario:
    """A random small scenario (tests/test_end_to_end.py) with failures and recoveries of its links and
    super-peers drawn over its run."""
    from dataclasses import replace

    scenario = draw(scenarios())
    elements = [("link", (lk.a, lk.b)) for lk in scenario.links] + [
        ("super_peer", (sp,)) for sp in scenario.super_peers
    ]
    events = []
    for element, target in draw(st.lists(st.sampled_from(elements), min_size=1, max_size=3, unique=True)):
        at = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 2.7]))
        events.append(NetworkEvent(at, "fail", element, target))
        back = draw(st.sampled_from([None, 0.25, 0.5, 1.0]))
        if back is not None and at + back < scenario.duration:
            events.append(NetworkEvent(at + back, "recover", element, target))
    return replace(scenario, events=tuple(sorted(events, key=lambda e: e.at)))


def report_of(scenario: Scenario) -> dict:
    network = Network.of(scenario)
    runs = {name: run_local(scenario, make_plan(scenario, name, network)) for name in STRATEGIES}
    return build_report(scenario, runs, engine="local")


def assert_identity(scenario: Scenario, report: dict) -> None:
    expected = expected_results(scenario)
    recount = unreachable_by_networkx(scenario, expected.indices)
    for name, entry in report["strategies"].items():
        for sub in entry["subscriptions"]:
            accounted = sub["delivered"] + sub["dropped"] + sub["lost"] + sub["unreachable"]
            assert (sub["missing"], sub["extra"]) == (0, 0), (name, sub)
            assert accounted == sub["expected"], (name, sub)
            assert sub["unreachable"] == recount[sub["id"]], (name, sub)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_events())
def test_random_failures_keep_every_strategy_exact(scenario):
    assert_identity(scenario, report_of(scenario))


def test_drawn_scenarios_with_slow_links_keep_the_identity_and_lose_tuples_somewhere():
    rng = random.Random(7)
    lost = 0
    for k in range(6):
        found = check(random_scenario(rng, f"drawn-{k}"))
        for name, f in found.items():
            assert f["identity"] and f["unreachable_agrees"], (k, name, f)
        lost += sum(f["lost"] for f in found.values())
    assert lost > 0  # the draws do catch tuples in flight


@cache
def failover() -> tuple[Scenario, dict]:
    scenario = load_scenario("topologies/failover.yaml")
    return scenario, report_of(scenario)


def test_failover_is_exact_and_reports_every_event():
    scenario, report = failover()
    assert report["exact"]
    assert_identity(scenario, report)
    instants = sorted({float(e.at) for e in scenario.events})
    assert [e["time"] for e in report["events"]] == instants
    for event in report["events"]:
        assert set(event["strategies"]) == set(STRATEGIES)
        for done in event["strategies"].values():
            assert done["replan_s"] >= 0 and done["flows_moved"] >= 0
    assert "Failures and recoveries" in summary_markdown(report, [])
    # the scenario cuts a subscriber off for a while, and catches tuples in flight
    assert report["strategies"]["ideal"]["unreachable"] > 0


def test_on_failover_sharing_loses_no_more_than_query_shipping():
    _, report = failover()
    strategies = report["strategies"]
    assert strategies["query-shipping"]["lost"] > 0
    assert strategies["sharing-em"]["lost"] <= strategies["query-shipping"]["lost"]


@pytest.mark.parametrize("strategy", ["data-shipping", "sharing-em"])
def test_without_events_nothing_is_lost_or_unreachable(strategy):
    scenario = load_scenario("topologies/figure1.yaml")
    run = run_local(scenario, make_plan(scenario, strategy))
    assert not any(len(v) for v in run.lost.values())
    report = build_report(scenario, {strategy: run}, engine="local")
    assert report["events"] == []
    entry = report["strategies"][strategy]
    assert entry["lost"] == entry["unreachable"] == 0
    assert all(s["lost"] == s["unreachable"] == 0 for s in entry["subscriptions"])


# ---- at the sizes users bring ------------------------------------------------------------------------

SIZED_FAILURES = {
    # seed -> the generated scenario's sizes and its churn of failures (topologies/scale.py, docs/SCENARIOS.md)
    31: ({"duration": 30, "rate": 100}, "{links: {mtbf: 600, mttr: 4}, transit_super_peers: {mtbf: 60, mttr: 6}}"),
    32: (
        {"transit": 5, "stubs_per_transit": 6, "nodes_per_stub": 8, "streams": 4, "duration": 30, "rate": 100},
        "{transit_links: {mtbf: 20, mttr: 5}, stub_super_peers: {mtbf: 400, mttr: 8}}",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", SIZED_FAILURES)
def test_every_strategy_keeps_the_identity_under_churn_of_failures_at_size(seed, tmp_path):
    """A 300-super-peer (or 245) transit-stub backbone, 500 subscriptions arriving and leaving, and
    generated failures and recoveries of transit links and super-peers: every strategy's plan is sound
    and every subscription keeps the identity, on the runner that ``run.py run`` uses."""
    from reports.simulate import simulate
    from topologies.scale import render

    sizes, churn = SIZED_FAILURES[seed]
    path = tmp_path / f"sized{seed}.yaml"
    path.write_text(render(seed, **sizes) + f"events:\n  - generate: {{seed: {seed}, {churn[1:-1]}}}\n")
    scenario = load_scenario(str(path))
    assert len(scenario.events) >= 4
    entries, _, _ = simulate(scenario, list(STRATEGIES), run_local, show_progress=False, check_plans=True)
    report = {"strategies": entries}
    assert_identity(scenario, report)
    assert sum(e["lost"] for e in entries.values()) > 0
    assert sum(s["delivered"] for s in entries["ideal"]["subscriptions"]) > 0
