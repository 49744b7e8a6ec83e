"""Aggregate subscriptions end to end (docs/QUERIES.md "Windowed aggregates", docs/ACCOUNTING.md "Records"):
every strategy serves their input (query-shipping to an operator at the source's super-peer, which ships
the records), the records are computed from it, and the report counts records against the central
evaluation, exactly, also where buffers drop and failures lose input tuples and records."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher import Aggregate, AggregateQuery, Predicate, Window, parse_query
from network.routing import Network
from peers.local import run_local
from reports.report import build_report
from sharing import STRATEGIES, make_plan
from tests.test_dynamics import with_events
from tests.test_end_to_end import ATTRS, predicates, scenarios
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import Scenario
from topologies.workload import columns, emission_times, tuple_count

FIGURE1 = "topologies/figure1.yaml"


def with_aggregates(scenario: Scenario, queries: dict[str, str]) -> Scenario:
    """``scenario`` with the queries of some subscriptions (by id) replaced."""
    subs = tuple(replace(s, query=parse_query(queries[s.id])) if s.id in queries else s for s in scenario.subscriptions)
    return replace(scenario, subscriptions=subs)


def report_of(scenario: Scenario, strategies=STRATEGIES) -> dict:
    network = Network.of(scenario)
    runs = {name: run_local(scenario, make_plan(scenario, name, network)) for name in strategies}
    return build_report(scenario, runs, engine="local")


def assert_accounted(report: dict) -> None:
    """Every record accounted for and nothing extra, for every strategy (the records' identity)."""
    for name, entry in report["strategies"].items():
        assert entry["exact"], name
        for sub in entry["subscriptions"]:
            accounted = sub["delivered"] + sub["dropped"] + sub["lost"] + sub["unreachable"]
            assert (sub["missing"], sub["extra"], accounted) == (0, 0, sub["expected"]), (name, sub)


FIGURE1_AGGREGATES = {
    "Q1": "SELECT COUNT(*), AVG(c), MAX(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 5 s",
    "Q2": "SELECT COUNT(*), SUM(c), STDDEV(c), MEDIAN(c) FROM stream0 WHERE a BETWEEN 30 AND 50 AND b < 40 "
    "WINDOW 10 s SLIDE 2.5 s",
}


def test_every_strategy_serves_aggregates_exactly_beside_a_selection():
    scenario = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    report = report_of(scenario)
    assert_accounted(report)
    expected = expected_results(scenario)
    for entry in report["strategies"].values():
        q1, q2, q3 = entry["subscriptions"]
        assert (q1["unit"], q2["unit"], "unit" in q3) == ("records", "records", False)
        # Q1 over [0, 50): windows of 5 s, every one holding tuples; Q2 over [10, 45): windows of 10 s by
        # 2.5 s lying wholly inside, [10, 20) .. [35, 45)
        assert (q1["expected"], q1["delivered"]) == (10, 10)
        assert (q2["expected"], q2["delivered"]) == (11, 11)
        assert q1["input"]["delivered"] == len(expected.indices["Q1"]) > 0
        # the subscriber's access link carries its input, or its records where query-shipping shipped them
        down = {(a["from"], a["to"]): a["tuples"] for a in entry["access_links"]}
        assert down[("SP1", "P1")] == (q1 if q1["aggregated_at"] else q1["input"])["delivered"]


def test_the_records_count_what_a_plain_count_of_the_tuples_finds():
    # COUNT(*) per group of b's tens and 4 s window, against numpy over the emitted tuples
    query = "SELECT b, COUNT(*) FROM stream0 WHERE a < 50 GROUP BY b WINDOW 4 s"
    scenario = load_scenario(FIGURE1)
    scenario = replace(scenario, streams=(replace(scenario.streams[0], attributes=_with_integer_b(scenario)),))
    scenario = with_aggregates(scenario, {"Q3": query})
    stream = scenario.streams[0]
    n = tuple_count(stream, scenario.duration)
    times, values = emission_times(stream, 0, n), columns(scenario, stream.id, 0, n)
    active = (times >= 20) & (values["a"] < 50)
    windows = np.floor(times[active] / 4).astype(int)
    wanted = {(int(w), float(b)) for w, b in zip(windows, values["b"][active], strict=True) if 20 <= 4 * w <= 56}
    run = run_local(scenario, make_plan(scenario, "sharing-em", Network.of(scenario)))
    found = run.records["Q3"]
    assert {(k, g[0]) for k, g in found} == wanted
    for (k, group), (count,) in found.items():
        inside = (windows == k) & (values["b"][active] == group[0])
        assert count == inside.sum()
    assert run.summary["Q3"].delivered == len(wanted)


def _with_integer_b(scenario: Scenario):
    from matcher import Uniform
    from topologies.model import AttributeSpec

    return tuple(
        AttributeSpec("b", "int", Uniform(0, 5, integer=True)) if a.name == "b" else a
        for a in scenario.streams[0].attributes
    )


def test_records_with_a_dropped_input_count_as_dropped():
    # figure1 with SP4 -> SP5 slower than its traffic and a small buffer: the baselines drop input tuples
    slow = replace(load_scenario(FIGURE1).links[0], bandwidth=40e3, buffer=2000.0)
    scenario = load_scenario(FIGURE1)
    assert {scenario.links[0].a, scenario.links[0].b} == {"SP4", "SP5"}
    scenario = replace(scenario, links=(slow, *scenario.links[1:]))
    count = "SELECT COUNT(*), AVG(c), MIN(c) FROM stream0 WHERE a BETWEEN 50 AND 80 WINDOW 20 TUPLES SLIDE 10 TUPLES"
    queries = {**FIGURE1_AGGREGATES, "Q3": count}
    scenario = with_aggregates(scenario, queries)
    report = report_of(scenario, ("data-shipping", "multicast", "sharing-em"))
    assert_accounted(report)
    dropped = report["strategies"]["data-shipping"]["subscriptions"]
    # Q2's windows each hold a dropped tuple; Q3's count windows from its first dropped tuple on
    assert [(s["dropped"] > 0, s["input"]["dropped"] > 0) for s in dropped] == [
        (False, False),
        (True, True),
        (True, True),
    ]
    assert dropped[0]["delivered"] > 0
    # the strategy's total counts copies of tuples, the input's for an aggregate subscription
    assert report["strategies"]["data-shipping"]["dropped"] == sum(s["input"]["dropped"] for s in dropped)


@st.composite
def aggregate_queries(draw, stream: str) -> AggregateQuery:
    groups = tuple(draw(st.lists(st.sampled_from(ATTRS), max_size=1)))
    functions = draw(
        st.lists(
            st.sampled_from(["COUNT", "SUM", "AVG", "MIN", "MAX", "VAR", "MEDIAN"]), min_size=1, max_size=3, unique=True
        )
    )
    rest = [a for a in ATTRS if a not in groups]
    aggregates = tuple(Aggregate(f) if f == "COUNT" else Aggregate(f, draw(st.sampled_from(rest))) for f in functions)
    if draw(st.booleans()):
        size = draw(st.sampled_from([3, 5]))
        window = Window(Fraction(size), Fraction(draw(st.integers(1, size))), tuples=True)
    else:
        size = draw(st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(3, 2)]))
        window = Window(size, draw(st.sampled_from([size, size / 2, Fraction(1, 4)])))
    having = Predicate.TRUE
    if draw(st.booleans()):
        having = parse_query(f"SELECT COUNT(*) FROM {stream} WINDOW 1 s HAVING COUNT(*) >= 2").having
    query = AggregateQuery((*groups, *aggregates), stream, draw(predicates()), groups, window, having)
    return parse_query(query.to_text())


@st.composite
def aggregate_scenarios(draw, base=scenarios) -> Scenario:
    scenario = draw(base())
    subs = []
    for sub in scenario.subscriptions:
        if draw(st.booleans()):
            sub = replace(sub, query=draw(aggregate_queries(sub.stream)))
        subs.append(sub)
    return replace(scenario, subscriptions=tuple(subs))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aggregate_scenarios())
def test_random_aggregate_scenarios_are_exact_for_every_strategy(scenario):
    report = report_of(scenario)
    assert_accounted(report)
    expected = expected_results(scenario)
    for entry in report["strategies"].values():
        for sub, found in zip(scenario.subscriptions, entry["subscriptions"], strict=True):
            if isinstance(sub.query, AggregateQuery) and found["rejected"] is None:
                assert found["expected"] == len(expected.records[sub.id])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aggregate_scenarios(with_events))
def test_records_with_an_input_lost_or_cut_off_are_accounted_for(scenario):
    # query-shipping's records also cross the links that fail (docs/ACCOUNTING.md, "Records")
    report = report_of(scenario, ("data-shipping", "query-shipping", "multicast", "sharing-em"))
    for name, entry in report["strategies"].items():
        for sub in entry["subscriptions"]:
            if sub["rejected"] is None:
                accounted = sub["delivered"] + sub["dropped"] + sub["lost"] + sub["unreachable"]
                assert (sub["missing"], sub["extra"], accounted) == (0, 0, sub["expected"]), (name, sub)


@pytest.mark.parametrize("name", ["photon-survey", "air-quality"])
def test_the_shipped_aggregate_scenarios_are_exact(name):
    scenario = load_scenario(f"topologies/{name}.yaml")
    report = report_of(scenario, ("query-shipping", "ideal", "sharing-em"))
    assert_accounted(report)
    records = [s for s in report["strategies"]["sharing-em"]["subscriptions"] if s.get("unit") == "records"]
    assert sum(s["delivered"] for s in records) > 0
