"""The metrics researchers publish (docs/REPORT.md), recomputed from the scenario and the report's counts:
the span a report observes and utilization over it, network usage and byte-km, and the per-stream
backbone traffic against a plain recomputation of query-shipping's routes."""

from __future__ import annotations

import math
from functools import cache
from itertools import pairwise

import pytest

from network.routing import Network
from peers.local import run_local
from reports.report import build_report
from sharing import make_plan
from topologies.expected import expected_results
from topologies.loader import load_scenario

CONGESTED = "topologies/congested.yaml"
GERMANY = "topologies/germany50.yaml"


@cache
def report_of(path: str, strategies: tuple[str, ...], subscriptions: int | None = None) -> tuple:
    scenario = load_scenario(path, [] if subscriptions is None else [("subscriptions", subscriptions)])
    network = Network.of(scenario)
    runs = {name: run_local(scenario, make_plan(scenario, name, network)) for name in strategies}
    return scenario, runs, build_report(scenario, runs, "local")


def test_utilization_is_over_the_span_the_queues_drain_in():
    """On congested.yaml the baselines queue seconds behind a thin link: the span runs past the emissions,
    and no mean utilization exceeds 1 or its peak."""
    scenario, runs, report = report_of(CONGESTED, ("data-shipping", "multicast", "query-shipping", "sharing-em"))
    last = max(run.last_arrival for run in runs.values())
    assert last > scenario.duration + 1  # seconds of backlog drain after the last emission
    assert report["observed_s"] == last
    for entry in report["strategies"].values():
        for link in entry["links"]:
            assert link["utilization"] == link["bytes"] * 8 / (link["bandwidth"] * report["observed_s"])
            assert link["utilization"] <= 1
            assert link["utilization"] <= link["peak_utilization"]
    hottest = max(
        (link for entry in report["strategies"].values() for link in entry["links"]),
        key=lambda link: link["utilization"],
    )
    assert hottest["utilization"] > 0.9  # the thin link is busy the whole span, not "224 %"


def test_network_usage_byte_km_and_precision():
    scenario, _, report = report_of(GERMANY, ("query-shipping", "sharing-em"), 40)
    network = Network.of(scenario)
    for entry in report["strategies"].values():
        usage = km = 0.0
        for link in entry["links"]:
            spec = network.link(link["from"], link["to"])
            assert link["latency"] == float(spec.latency) and link["length_km"] == spec.length
            usage += link["bytes"] * float(spec.latency)
            km += link["bytes"] * spec.length
        assert entry["network_usage"] == pytest.approx(usage, rel=1e-12)
        assert entry["byte_km"] == pytest.approx(km, rel=1e-12)
        busy = [link for link in entry["links"] if link["bytes"]]
        # 10 Gbit/s links carrying kilobits per second: tiny, and kept to full precision (never 0)
        assert busy and all(0 < link["utilization"] < 1e-4 for link in busy)
    assert report["positions"]["Aachen"] == [6.04, 50.76]


def test_figure1_has_no_byte_km():
    _, _, report = report_of("topologies/figure1.yaml", ("query-shipping",))
    assert report["strategies"]["query-shipping"]["byte_km"] is None
    assert "positions" not in report


def test_per_stream_backbone_traffic_is_query_shippings_routes_recomputed():
    """query-shipping sends each subscription's result along its route: per stream, the expected tuples
    times the tuple's wire size times the route's hops, summed over its subscriptions."""
    scenario, _, report = report_of(GERMANY, ("query-shipping", "sharing-em"), 40)
    expected = expected_results(scenario)
    network = Network.of(scenario)
    want = {s.id: [0, 0] for s in scenario.streams}
    for sub in scenario.subscriptions:
        stream = scenario.stream(sub.stream)
        route = network.route(scenario.home(stream.source), scenario.home(sub.peer))
        hops = len(list(pairwise(route)))
        n = len(expected.indices[sub.id])
        want[stream.id][0] += n * hops * scenario.tuple_bytes(len(sub.query.attributes(stream.attribute_names)))
        want[stream.id][1] += n * hops
    entry = report["strategies"]["query-shipping"]
    assert {s["id"]: [s["backbone_bytes"], s["backbone_tuples"]] for s in entry["streams"]} == want
    for entry in report["strategies"].values():
        assert [s["id"] for s in entry["streams"]] == [s.id for s in scenario.streams]
        assert sum(s["backbone_bytes"] for s in entry["streams"]) == entry["backbone_bytes"]
        assert sum(s["backbone_tuples"] for s in entry["streams"]) == entry["backbone_tuples"]
    assert not math.isclose(report["strategies"]["sharing-em"]["backbone_bytes"], 0)
