"""The scenario's failures in live mode: a failed link direction or super-peer loses what is queued or on
the wire at the failure and what reaches it while down, counted per link direction and per subscription
as the local engine counts them; the rest is delivered exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import peers.live.coordinator as coordinator_module
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies import workload
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import NetworkEvent


def _static_plan(scenario, strategy, network=None):
    """The plan of the scenario without its events: routes do not move at a failure, so what crosses a failed
    element while it is down is lost (re-planning at the events is the planner's, tested with it)."""
    return make_plan(replace(scenario, events=()), strategy, network)


async def test_failures_lose_what_crosses_the_failed_link_and_super_peer_while_down(mosquitto, monkeypatch):
    monkeypatch.setattr(coordinator_module, "make_plan", _static_plan)
    scenario = load_scenario("topologies/figure1.yaml")
    events = (
        NetworkEvent(20.005, "fail", "link", ("SP5", "SP6")),
        NetworkEvent(30.005, "recover", "link", ("SP5", "SP6")),
        NetworkEvent(40.005, "fail", "super_peer", ("SP3",)),
        NetworkEvent(50.005, "recover", "super_peer", ("SP3",)),
        NetworkEvent(52.005, "fail", "super_peer", ("SP4",)),
        NetworkEvent(55.005, "recover", "super_peer", ("SP4",)),
    )
    scenario = replace(scenario, events=events)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=10))
    assert result.lost == {}
    expected = expected_results(result.scenario).indices
    times = workload.emission_times(scenario.stream("stream0"), 0, 6000)
    # by hand (every hop 2 ms, serialisation microseconds, a tuple every 10 ms): Q2's results enter
    # SP5 -> SP6 4 ms after their emission and are due 2 ms later, so the link, down over [20.005, 30.005),
    # loses those emitted at 20.00 (on the wire at the failure) to 30.00 (reaching it while down); Q3's
    # enter SP1 -> SP3 8 ms after emission, lost with SP3 from 40.00 to 49.99; while the source's super-peer
    # SP4 is down the upload loses what it would bring there, from 52.01 (52.00 left SP4 before it failed)
    # to 55.00 (on the access link until 55.002), which the static plan would have routed to Q3
    q2 = expected["Q2"][(times[expected["Q2"]] >= 20.0) & (times[expected["Q2"]] <= 30.0)]
    on_sp1_sp3 = expected["Q3"][(times[expected["Q3"]] >= 40.0) & (times[expected["Q3"]] < 50.0)]
    uploaded = expected["Q3"][(times[expected["Q3"]] > 52.005) & (times[expected["Q3"]] < 55.005)]
    q3 = np.concatenate([on_sp1_sp3, uploaded])
    assert len(q2) > 0 and len(on_sp1_sp3) > 0 and len(uploaded) > 0
    assert result.run.link_lost == {("SP5", "SP6"): len(q2), ("SP1", "SP3"): len(on_sp1_sp3)}
    assert {s: c.tolist() for s, c in result.run.lost.items()} == {"Q2": q2.tolist(), "Q3": q3.tolist()}
    for sub in scenario.subscriptions:  # everything else arrives, exactly once
        got = np.sort(result.run.delivered[sub.id])
        lost = result.run.lost.get(sub.id, np.zeros(0, np.int64))
        assert np.array_equal(np.sort(np.concatenate([got, lost])), expected[sub.id])
    # the local engine, on the same plan, counts the same
    local = run_local(scenario, _static_plan(scenario, "sharing-em"))
    assert {d: n for d, n in local.link_lost.items() if n} == result.run.link_lost
    assert {s: np.sort(c).tolist() for s, c in local.lost.items() if len(c)} == {"Q2": q2.tolist(), "Q3": q3.tolist()}
    entry = live_report(result, simulate=False)["strategies"]["sharing-em"]
    assert {s["id"]: s["lost"] for s in entry["subscriptions"]} == {"Q1": 0, "Q2": len(q2), "Q3": len(q3)}
    assert {(link["from"], link["to"]): link["lost"] for link in entry["links"] if link["lost"]} == {
        ("SP1", "SP3"): len(on_sp1_sp3),
        ("SP5", "SP6"): len(q2),
    }


async def test_a_replanned_failover_loses_and_delivers_what_the_local_engine_does(mosquitto):
    scenario = load_scenario("topologies/failover.yaml")
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=10))
    local = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.lost == {}
    assert result.run.link_tuples == local.link_tuples and result.run.link_bytes == local.link_bytes
    assert result.run.link_lost == {d: n for d, n in local.link_lost.items() if n}
    assert sum(result.run.link_lost.values()) > 0
    lost = {s: np.sort(c).tolist() for s, c in local.lost.items() if len(c)}
    assert {s: c.tolist() for s, c in result.run.lost.items()} == lost
    for sub in scenario.subscriptions:
        assert np.array_equal(np.sort(result.run.delivered[sub.id]), np.sort(local.delivered[sub.id]))
    report = live_report(result)
    assert report["exact"]
    live, simulated = report["live"]["latency"]["overall"].values()
    assert live["count"] == simulated["count"] > 0
    for q in ("p50", "p99"):  # equal while the machine keeps up; within the tolerance when it is loaded
        assert abs(live[q] - simulated[q]) <= max(0.1 * simulated[q], 0.005)
