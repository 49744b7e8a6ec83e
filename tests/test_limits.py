"""The network limits (docs/REPORT.md, docs/SCENARIOS.md) recomputed independently of the engine's code.

Link utilization, super-peer load and exactness with drops come from the report's own per-link counts and
the formulas; on a chain with one thin buffered link, a plain per-tuple drop-tail simulation written here
gives every departure, drop and offered byte, and the engine must agree with it.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from network.routing import Network
from peers.local import run_local
from reports.report import strategy_entry
from sharing import make_plan
from topologies.loader import load_scenario
from topologies.workload import emission_times, tuple_count

CONGESTED = "topologies/congested.yaml"
CHAIN = """
name: chain
seed: 3
duration: 10
network:
  defaults: {bandwidth: 100Mbit, latency: 2ms, capacity: 500}
  super_peers: [SP0, SP1, SP2]
  links:
    - [SP0, SP1]
    - [SP1, SP2, {bandwidth: 20Kbit, latency: 10ms, buffer: 1KB}]
thin_peers:
  - {id: P0, attach: SP0}
  - {id: P1, attach: SP2}
streams:
  - id: s
    source: P0
    rate: 100
    schema:
      a: {distribution: {uniform: [0, 1]}}
      b: {distribution: {uniform: [0, 1]}}
      c: {distribution: {uniform: [0, 1]}}
subscriptions:
  - {id: Q1, peer: P1, at: 0, query: "SELECT * FROM s"}
"""


@cache
def _entry(path: str, strategy: str):
    scenario = load_scenario(path)
    run = run_local(scenario, make_plan(scenario, strategy, Network.of(scenario)))
    return scenario, run, strategy_entry(scenario, run)


@pytest.mark.parametrize("strategy", ["data-shipping", "multicast", "query-shipping", "sharing-em"])
def test_utilization_load_and_exactness_follow_from_the_counts(strategy):
    scenario, run, entry = _entry(CONGESTED, strategy)
    network = Network.of(scenario)
    for link in entry["links"]:
        bandwidth = network.link(link["from"], link["to"]).bandwidth
        assert link["bandwidth"] == bandwidth
        observed = max(scenario.duration, run.last_arrival)  # the queues drain after the run
        assert link["utilization"] == link["bytes"] * 8 / (bandwidth * observed) <= 1
        assert link["peak_utilization"] == max(link["peak_offered"], link["utilization"])
    assert entry["links_over_capacity"] == sum(1 for link in entry["links"] if link["peak_utilization"] > 1)
    assert entry["peak_utilization"] == max(link["peak_utilization"] for link in entry["links"])
    uploads = dict.fromkeys(scenario.super_peers, 0)
    for stream in scenario.streams:
        uploads[scenario.home(stream.source)] += tuple_count(stream, scenario.duration)
    for sp in entry["super_peers"]:
        into = sum(link["tuples"] for link in entry["links"] if link["to"] == sp["id"])
        out = sum(link["tuples"] for link in entry["links"] if link["from"] == sp["id"])
        down = sum(s["delivered"] for s, spec in zip(entry["subscriptions"], scenario.subscriptions, strict=True)
                   if scenario.home(spec.peer) == sp["id"])  # fmt: skip
        assert sp["tuples_in"] == into + uploads[sp["id"]] == int(run.landed[sp["id"]].sum())  # as metered
        assert sp["tuples_out"] == out + down
        capacity = scenario.capacity[sp["id"]]
        assert sp["load"] == sp["tuples_in"] / (capacity * scenario.duration)
    for sub in entry["subscriptions"]:
        assert sub["delivered"] + sub["dropped"] == sub["expected"]
        assert sub["missing"] == sub["extra"] == 0 and sub["rejected"] is None
    assert entry["exact"]


def test_the_baselines_saturate_the_congested_scenario_and_sharing_stays_below():
    for strategy in ("data-shipping", "multicast"):
        entry = _entry(CONGESTED, strategy)[2]
        assert entry["peak_utilization"] > 1 and entry["links_over_capacity"] >= 1
        assert entry["link_drops"] > 0 and entry["dropped"] > 0
        assert entry["latency_s"]["p99"] > 1.0  # seconds in the full buffer
    entry = _entry(CONGESTED, "sharing-em")[2]
    assert entry["peak_utilization"] < 1 and entry["link_drops"] == 0


def _drop_tail(emitted: np.ndarray, size: int, hops: list[tuple[int, float, float]]):
    """One FIFO channel through ``hops`` (bandwidth bit/s, latency s, buffer bytes or inf), tuple by tuple,
    in whole picoseconds as Python integers (exact; docs/ACCOUNTING.md, "The link model"): per tuple its
    arrival at the end (None: dropped), and per hop the arrival times of the tuples reaching it and how many
    it dropped."""
    at = [round(t * 10**12) for t in emitted.tolist()]
    arrivals, drops = [], []
    for bandwidth, latency, buffer in hops:
        arrivals.append(list(at))
        service = (size * 8 * 10**12 + bandwidth // 2) // bandwidth
        free, starts, dropped = 0, [], 0
        out: list[int | None] = [None] * len(at)
        for i, a in enumerate(at):
            if a is None:
                continue
            waiting = size * sum(1 for s in starts if s > a)  # admitted, not yet on the wire
            if waiting + size > buffer:
                dropped += 1
                continue
            start = max(a, free)
            free = start + service
            starts.append(start)
            out[i] = free + round(latency * 10**12)
        drops.append(dropped)
        at = out
    return at, arrivals, drops


def test_a_thin_buffered_link_matches_a_plain_drop_tail_simulation(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN, encoding="utf-8")
    scenario, run, entry = _entry(str(path), "data-shipping")
    stream = scenario.streams[0]
    emitted = emission_times(stream, 0, tuple_count(stream, scenario.duration))
    size = scenario.tuple_bytes(3)
    hops = [
        (100_000_000, 0.002, np.inf),
        (100_000_000, 0.002, np.inf),
        (20_000, 0.010, 1000),
        (100_000_000, 0.002, np.inf),
    ]
    ticks, arrivals, drops = _drop_tail(emitted, size, hops)  # upload, SP0 -> SP1, SP1 -> SP2, delivery
    got = np.array([t is not None for t in ticks])
    assert drops[2] > 0 and drops[:2] == [0, 0] and drops[3] == 0  # not vacuous: the thin link drops
    thin = next(link for link in entry["links"] if (link["from"], link["to"]) == ("SP1", "SP2"))
    assert thin["dropped"] == drops[2]
    reached = [[t for t in hop if t is not None] for hop in arrivals]
    assert thin["tuples"] == len(reached[3]) and thin["bytes"] == thin["tuples"] * size
    offered = np.bincount([t // 10**12 for t in reached[2]]) * size
    assert thin["peak_utilization"] == round(offered.max() * 8 / 20e3, 6)
    assert run.offered[("SP1", "SP2")].tolist() == offered.tolist()
    sub = entry["subscriptions"][0]
    assert sub["delivered"] == int(got.sum()) and sub["dropped"] == int((~got).sum())
    assert run.delivered["Q1"].tolist() == np.flatnonzero(got).tolist()
    emitted_ticks = [round(t * 10**12) for t in emitted.tolist()]
    latencies = [(t - e) / 10**12 for t, e in zip(ticks, emitted_ticks, strict=True) if t is not None]
    assert run.latencies["Q1"].tolist() == latencies
    into_sp2 = np.bincount([t // 10**12 for t in reached[3]])
    sp2 = next(sp for sp in entry["super_peers"] if sp["id"] == "SP2")
    assert sp2["peak_load"] == round(into_sp2.max() / 500, 6)


def test_a_rejected_subscription_is_reported_with_its_reason_and_refused_not_wrong():
    from dataclasses import replace

    scenario = load_scenario("topologies/figure1.yaml")
    plan = make_plan(scenario, "query-shipping", Network.of(scenario))
    refused = tuple(
        replace(epoch, deliveries=tuple(d for d in epoch.deliveries if d.subscription != "Q2")) for epoch in plan.epochs
    )
    plan = replace(plan.with_epochs(refused), rejected={"Q2": "SP5 -> SP6 would exceed 80 % of its bandwidth"})
    entry = strategy_entry(scenario, run_local(scenario, plan))
    q2 = next(s for s in entry["subscriptions"] if s["id"] == "Q2")
    assert q2["rejected"] == "SP5 -> SP6 would exceed 80 % of its bandwidth"
    assert q2["delivered"] == 0 and q2["missing"] == q2["expected"] > 0
    assert entry["rejected"] == 1 and entry["exact"]
    assert all(s["rejected"] is None for s in entry["subscriptions"] if s["id"] != "Q2")
