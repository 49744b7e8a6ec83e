"""Attribute surplus and the gap to ideal: the chunked computation against a plain per-tuple reference
(tests/surplus_reference.py), and the split of the report's gap."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network.routing import Network
from reports import surplus as module
from reports.report import build_report, gap_markdown, summary_markdown
from reports.surplus import surplus_values
from sharing import STRATEGIES, make_plan
from tests.sharing.sharing_checker import scenarios
from tests.surplus_reference import reference_surplus
from topologies.loader import load_scenario


def test_figure1_surplus_matches_the_reference_for_every_strategy():
    scenario = load_scenario("topologies/figure1.yaml")
    network = Network.of(scenario)
    found = {}
    for name in STRATEGIES:
        plan = make_plan(scenario, name, network)
        found[name] = surplus_values(scenario, plan)
        assert found[name] == reference_surplus(scenario, plan), name
    # the bounds carry nothing nobody selects; the raw stream to every subscriber carries plenty
    assert set(found["ideal"].values()) == {0}
    assert set(found["query-shipping"].values()) == {0}
    assert found["data-shipping"]["stream0"] > found["multicast"]["stream0"] > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(STRATEGIES), st.sampled_from([7, 64]))
def test_chunked_surplus_equals_the_reference(scenario, strategy, chunk):
    plan = make_plan(scenario, strategy, Network.of(scenario))
    saved = module.CHUNK
    try:
        module.CHUNK = chunk  # chunks that cut epochs apart, and one that holds several
        assert surplus_values(scenario, plan) == reference_surplus(scenario, plan)
    finally:
        module.CHUNK = saved


def test_the_gap_to_ideal_splits_into_surplus_and_tuple_hops():
    from peers.local import run_local

    scenario = load_scenario("topologies/figure1.yaml")
    network = Network.of(scenario)
    runs, surplus = {}, {}
    for name in STRATEGIES:
        plan = make_plan(scenario, name, network)
        runs[name] = run_local(scenario, plan)
        surplus[name] = surplus_values(scenario, plan)
    from reports.report import assemble_report, strategy_entry

    report = assemble_report(scenario, {n: strategy_entry(scenario, r, surplus[n]) for n, r in runs.items()}, "local")
    ideal = report["strategies"]["ideal"]
    for name, entry in report["strategies"].items():
        gap = entry["gap_to_ideal"]
        assert gap["bytes"] == entry["backbone_bytes"] - ideal["backbone_bytes"]
        assert gap["bytes"] == gap["attribute_surplus"] + gap["tuple_hops"]
        assert gap["attribute_surplus"] == 8 * sum(surplus[name].values())
        for key in ("bytes", "attribute_surplus", "tuple_hops"):
            assert gap[key] == sum(s[key] for s in gap["streams"])
    assert report["strategies"]["ideal"]["gap_to_ideal"] == {
        "bytes": 0,
        "attribute_surplus": 0,
        "tuple_hops": 0,
        "streams": [{"id": "stream0", "bytes": 0, "attribute_surplus": 0, "tuple_hops": 0}],
    }
    data_shipping = report["strategies"]["data-shipping"]["gap_to_ideal"]
    assert data_shipping["attribute_surplus"] > 0 and data_shipping["tuple_hops"] > 0
    lines = gap_markdown(report)
    assert lines[3] == "| strategy | bytes - ideal | attribute surplus | tuple-hops part |"
    assert not any(line.startswith("| ideal |") for line in lines)
    assert "attribute surplus" in summary_markdown(report, [])


def test_no_split_without_surplus_figures():
    from peers.local import run_local

    scenario = load_scenario("topologies/figure1.yaml")
    network = Network.of(scenario)
    runs = {n: run_local(scenario, make_plan(scenario, n, network)) for n in ("ideal", "sharing-em")}
    report = build_report(scenario, runs, "local")
    assert all("gap_to_ideal" not in e for e in report["strategies"].values())
    assert gap_markdown(report) == []


def test_a_plan_over_the_budget_gets_no_surplus_and_no_split(monkeypatch):
    from peers.local import run_local
    from reports.report import assemble_report, strategy_entry

    scenario = load_scenario("topologies/figure1.yaml")
    network = Network.of(scenario)
    plans = {n: make_plan(scenario, n, network) for n in ("ideal", "sharing-em")}
    assert surplus_values(scenario, plans["ideal"]) is not None
    monkeypatch.setattr(module, "BUDGET", 2)  # figure1's trees hold more flows and deliveries than that
    assert surplus_values(scenario, plans["ideal"]) is None
    entries = {
        n: strategy_entry(scenario, run_local(scenario, p), surplus_values(scenario, p)) for n, p in plans.items()
    }
    report = assemble_report(scenario, entries, "local")
    assert all("gap_to_ideal" not in e for e in report["strategies"].values())
    assert all("attribute_surplus_bytes" not in s for e in entries.values() for s in e["streams"])
