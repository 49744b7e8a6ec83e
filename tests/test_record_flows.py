"""Records crossing links (docs/ACCOUNTING.md, "Records"): query-shipping aggregates an aggregate
subscription's input at the source's super-peer and ships its result records, each leaving when its window
has closed and its last input has reached the operator.  Exact byte counts and timing by hand, the same run
whatever the batch window (records held back across windows and chunks), and records dropped or lost on the
way accounted for as such."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from network.emulated import link_specs
from network.linkrule import TICKS, service, to_ticks
from network.routing import Network
from peers.local import run_local
from sharing import make_plan
from tests.test_aggregates import FIGURE1, FIGURE1_AGGREGATES, assert_accounted, report_of, with_aggregates
from topologies.expected import expected_results, record_schedule
from topologies.loader import load_scenario
from topologies.model import Scenario


def figure1_aggregates(**changes) -> Scenario:
    """Figure 1 with Q1 and Q2 windowed aggregates (Q3 stays a selection)."""
    return replace(with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES), **changes)


def _run(scenario: Scenario, window: float | None = None, strategy: str = "query-shipping"):
    return run_local(scenario, make_plan(scenario, strategy, Network.of(scenario)), window=window)


def test_query_shipping_carries_records_on_every_link_of_its_route():
    scenario = figure1_aggregates()
    report = report_of(scenario, ("query-shipping",))
    assert_accounted(report)
    entry = report["strategies"]["query-shipping"]
    q1, q2, q3 = entry["subscriptions"]
    assert (q1["aggregated_at"], q2["aggregated_at"], "aggregated_at" in q3) == ("SP4", "SP4", False)
    assert (q1["delivered"], q2["delivered"]) == (10, 11)
    # a record: header + 8 x (window id + values); Q1 carries 3 aggregates, Q2 4
    w1, w2, w3 = 16 + 8 * 4, 16 + 8 * 5, 16 + 8 * 2
    links = {(x["from"], x["to"]): x["bytes"] for x in entry["links"]}
    # Q1 SP4 -> SP5 -> SP1, Q2 SP4 -> SP5 -> SP6, Q3's tuples SP4 -> SP5 -> SP1 -> SP3
    assert links[("SP4", "SP5")] == 10 * w1 + 11 * w2 + q3["delivered"] * w3
    assert links[("SP5", "SP1")] == 10 * w1 + q3["delivered"] * w3
    assert links[("SP5", "SP6")] == 11 * w2
    down = {(a["from"], a["to"]): (a["tuples"], a["bytes"]) for a in entry["access_links"]}
    assert down[("SP1", "P1")] == (10, 10 * w1)
    assert down[("SP6", "P2")] == (11, 11 * w2)
    # the input reached the operator at SP4, and only there
    assert q1["input"]["delivered"] == len(expected_results(scenario).indices["Q1"]) > 10


def test_a_record_leaves_when_its_window_closes_and_its_last_input_has_arrived():
    scenario = figure1_aggregates()
    run = _run(scenario)
    links = link_specs(scenario)
    schedule = record_schedule(scenario, expected_results(scenario), "Q1")
    # Q1 alone in [0, 10): its records cross SP4 -> SP5 -> SP1 -> P1 with nothing queued before them
    wire = 16 + 8 * 4
    for r in (0, 1):
        closes = int(to_ticks(schedule.closes[r]))
        t = closes
        for hop in [("SP4", "SP5"), ("SP5", "SP1"), ("SP1", "P1")]:
            bandwidth, latency, _ = links[hop]
            t += int(service(wire, bandwidth)) + int(to_ticks(latency))
        at = int(np.searchsorted(run.record_delivered["Q1"], r))
        assert run.record_delivered["Q1"][at] == r
        assert run.record_latencies["Q1"][at] == (t - closes) / TICKS
    # a count window closes with its last tuple, which must first reach the source's super-peer
    count = "SELECT COUNT(*) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 7 TUPLES"
    scenario = with_aggregates(scenario, {"Q1": count})
    run = _run(scenario)
    schedule = record_schedule(scenario, expected_results(scenario), "Q1")
    upload = links[("P0", "SP4")]
    first = int(to_ticks(schedule.closes[0]))
    t = first + int(service(16 + 8 * 3, upload[0])) + int(to_ticks(upload[1]))
    for hop in [("SP4", "SP5"), ("SP5", "SP1"), ("SP1", "P1")]:
        bandwidth, latency, _ = links[hop]
        t += int(service(16 + 8 * 2, bandwidth)) + int(to_ticks(latency))
    assert run.record_latencies["Q1"][0] == (t - first) / TICKS


def _slow(scenario: Scenario) -> Scenario:
    """SP5 -> SP1 slower than Q3's result, with a small buffer: Q1's records queue behind Q3's tuples there."""
    slow = [replace(link, bandwidth=4e3, buffer=300.0) if {link.a, link.b} == {"SP5", "SP1"} else link
            for link in scenario.links]  # fmt: skip
    return replace(scenario, links=tuple(slow))


def _congested(scenario: Scenario) -> Scenario:
    """:func:`_slow`, and every processor limited, the source's busy with an input buffer that drops."""
    cpus = tuple((sp, 40_000.0 if sp == "SP4" else 1e6) for sp in scenario.super_peers)
    return replace(_slow(scenario), cpus=cpus, input_buffers=(("SP4", 200.0),))


def test_records_dropped_on_the_way_are_accounted_for_as_dropped():
    report = report_of(_slow(figure1_aggregates()), ("query-shipping",))
    assert_accounted(report)
    q1, q2, _ = report["strategies"]["query-shipping"]["subscriptions"]
    # Q1's records dropped behind Q3's tuples on SP5 -> SP1, its input whole at SP4; Q2's route is clear
    assert q1["dropped"] > 0 and q1["delivered"] > 0 and q1["input"]["dropped"] == 0
    assert (q2["dropped"], q2["delivered"]) == (0, 11)
    # and where the source's processor drops input, the records of those windows count as dropped too
    report = report_of(_congested(figure1_aggregates()), ("query-shipping",))
    assert_accounted(report)
    q1, q2, _ = report["strategies"]["query-shipping"]["subscriptions"]
    assert q2["input"]["dropped"] > 0 and q2["dropped"] > 0


@pytest.mark.parametrize("congested", [False, True])
def test_record_flows_run_the_same_whatever_the_batch_window(congested):
    scenario = figure1_aggregates()
    if congested:
        scenario = _congested(scenario)
    runs = [_run(scenario, window) for window in (5.0, 0.37, 1.3)]
    first = runs[0]
    assert first.record_delivered["Q1"].size and first.record_delivered["Q2"].size
    for other in runs[1:]:
        assert other.link_bytes == first.link_bytes
        assert other.access_link_bytes == first.access_link_bytes
        assert other.summary == first.summary
        assert other.processors == first.processors
        for field in ("record_delivered", "record_latencies", "record_dropped", "record_lost"):
            mine, theirs = getattr(first, field), getattr(other, field)
            assert mine.keys() == theirs.keys()
            for sub in mine:
                assert np.array_equal(mine[sub], theirs[sub]), (field, sub)
    if congested:
        assert sum(len(d) for d in first.record_dropped.values()) > 0


def test_building_records_costs_the_source_processor_its_operations():
    scenario = figure1_aggregates()
    scenario = replace(scenario, cpus=tuple((sp, 1e9) for sp in scenario.super_peers))
    costs = scenario.cpu_costs
    expected = expected_results(scenario)
    folds = len(expected.indices["Q1"]) * 3 + len(expected.indices["Q2"]) * 4
    # against Q1 and Q2 as the selections of their input, shipped as results: SP4 tests and projects the
    # same tuples either way, and now also folds each into every aggregate and builds the records
    extra = _run(scenario).processors["SP4"].ops - _without_aggregates(scenario).processors["SP4"].ops
    assert extra == folds * costs.aggregate + (10 + 11) * costs.record


def _without_aggregates(scenario: Scenario):
    """The query-shipping run of ``scenario`` with Q1 and Q2 as the selections of their input."""
    subs = tuple(replace(s, query=s.query.input) if s.id in ("Q1", "Q2") else s for s in scenario.subscriptions)
    return _run(replace(scenario, subscriptions=subs))
