"""The scenario's failures in live mode: a failed link direction or super-peer loses what is queued or on
the wire at the failure and what reaches it while down, counted per link direction and per subscription;
the rest is delivered exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import peers.live.coordinator as coordinator_module
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
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
    # SP4 is down, from 52.01 to 55.00, the source sends nothing (unreachable: not lost), and the tuple
    # emitted at 52.00 left SP4 before it failed
    q2 = expected["Q2"][(times[expected["Q2"]] >= 20.0) & (times[expected["Q2"]] <= 30.0)]
    q3 = expected["Q3"][(times[expected["Q3"]] >= 40.0) & (times[expected["Q3"]] < 50.0)]
    unreachable = expected["Q3"][(times[expected["Q3"]] > 52.005) & (times[expected["Q3"]] < 55.005)]
    assert len(q2) > 0 and len(q3) > 0 and len(unreachable) > 0
    assert result.run.link_lost == {("SP5", "SP6"): len(q2), ("SP1", "SP3"): len(q3)}
    assert {s: c.tolist() for s, c in result.run.lost.items()} == {"Q2": q2.tolist(), "Q3": q3.tolist()}
    for sub in scenario.subscriptions:  # everything else arrives, exactly once
        got = np.sort(result.run.delivered[sub.id])
        lost = result.run.lost.get(sub.id, np.zeros(0, np.int64))
        cut_off = unreachable if sub.id == "Q3" else np.zeros(0, np.int64)
        assert np.array_equal(np.sort(np.concatenate([got, lost, cut_off])), expected[sub.id])
    live = live_report(result, simulate=False)["live"]["lost"]
    assert live["subscriptions"] == {"Q2": len(q2), "Q3": len(q3)}
    assert live["links"] == [
        {"from": "SP1", "to": "SP3", "lost": len(q3)},
        {"from": "SP5", "to": "SP6", "lost": len(q2)},
    ]
