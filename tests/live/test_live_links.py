"""Live link emulation: each link direction's queue follows the simulator's rule (FIFO service at the
bandwidth, latency, tail drop at the buffer, failures), and a live run over a slow, buffered link shows
the simulated latencies and drops the same tuples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from peers.live.connection import Broker
from peers.live.links import CARRIED, DROPPED, LOST, LinkQueue
from peers.live.serve import ServeOptions, serve
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies.loader import load_scenario

SLOW_LINK = """\
name: slow-link
seed: 3
duration: 12
header_bytes: 16
network:
  defaults: {bandwidth: 10Mbit, latency: 2ms}
  super_peers: [SP0, SP1, SP2]
  links:
    - [SP0, SP1]
    - [SP1, SP2, {bandwidth: 24Kbit, latency: 30ms%s}]
thin_peers:
  - {id: P0, attach: SP0}
  - {id: P1, attach: SP2}
  - {id: P2, attach: SP1}
streams:
  - id: s
    source: P0
    rate: 100
    schema:
      a: {type: float, distribution: {uniform: [0, 100]}}
      b: {type: float, distribution: {uniform: [0, 100]}}
subscriptions:
  - {id: Q1, peer: P1, at: 0, query: "SELECT a, b FROM s WHERE a < 60"}
  - {id: Q2, peer: P2, at: 2, until: 9, query: "SELECT a FROM s WHERE a > 50"}
"""


def test_a_queue_serves_in_fifo_order_at_its_bandwidth_and_delays_by_its_latency():
    queue = LinkQueue(8000.0, 0.5)  # 1 byte per ms
    due, fate = queue.send(np.array([0.0, 0.001, 0.010]), np.array([4.0, 4.0, 2.0]))
    # 0 -> leaves at 4 ms; 1 ms -> waits, leaves at 8 ms; 10 ms -> the wire is free, leaves at 12 ms
    assert np.allclose(due, [0.504, 0.508, 0.512]) and (fate == CARRIED).all()
    due, _ = queue.send(np.array([0.011]), np.array([1.0]))  # the queue carries over between calls
    assert np.allclose(due, [0.513])


def test_a_tuple_served_after_later_ones_takes_the_first_gap_at_its_arrival():
    queue = LinkQueue(8000.0, 0.0)  # 1 byte per ms
    queue.send(np.array([0.0, 0.010]), np.array([4.0, 4.0]))  # busy 0-4 ms and 10-14 ms
    due, _ = queue.send(np.array([0.002, 0.005, 0.008]), np.array([2.0, 4.0, 2.0]))
    # 2 ms: the wire is free at 4 ms, leaves at 6 ms; 5 ms: fits 6-10 ms exactly; 8 ms: no gap before 14 ms
    assert np.allclose(due, [0.006, 0.010, 0.016])


def test_a_full_buffer_drops_at_the_tail():
    queue = LinkQueue(8000.0, 0.0, buffer=8.0)  # 1 byte per ms; 8 bytes may wait for the wire
    due, fate = queue.send(np.zeros(4), np.full(4, 4.0))
    # the first starts at once; the next two wait (8 bytes); the fourth finds the buffer full
    assert fate.tolist() == [CARRIED, CARRIED, CARRIED, DROPPED]
    assert np.allclose(due[:3], [0.004, 0.008, 0.012]) and np.isnan(due[3])
    due, fate = queue.send(np.array([0.0045]), np.array([4.0]))  # the second has started: room again
    assert fate.tolist() == [CARRIED] and np.allclose(due, [0.016])


def test_a_failure_loses_what_is_queued_on_the_wire_or_arrives_while_down():
    queue = LinkQueue(8000.0, 0.002, downs=np.array([[0.010, 0.020], [0.030, math.inf]]))
    arrivals = np.array([0.0, 0.002, 0.004, 0.012, 0.021, 0.022, 0.029])
    due, fate = queue.send(arrivals, np.full(len(arrivals), 4.0))
    # 0 -> 6 ms; 2 ms -> 10 ms at the far end, when the link fails: lost; 4 ms -> queued at the failure:
    # lost; 12 ms -> down; 21 ms -> the wire is free again: 27 ms; 22 ms -> 31 ms, after the second failure
    assert fate.tolist() == [CARRIED, LOST, LOST, LOST, CARRIED, LOST, LOST]
    assert np.allclose(due[[0, 4]], [0.006, 0.027])


def _slow_link(tmp_path, buffer: str = ""):
    path = tmp_path / "slow-link.yaml"
    path.write_text(SLOW_LINK % buffer)
    return load_scenario(str(path))


# Q1's results load the slow link to 64 %: queues form where matches come in runs; multicast carries the
# raw stream (160 %), which the buffer of two tuples cuts down to what the link can carry
@pytest.mark.parametrize(("strategy", "buffer"), [("sharing-em", ""), ("multicast", ", buffer: 64B")])
async def test_live_latencies_and_drops_are_the_simulated_ones(mosquitto, tmp_path, strategy, buffer):
    scenario = _slow_link(tmp_path, buffer)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy=strategy, speed=2))
    sim = run_local(scenario, make_plan(scenario, strategy))
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    assert result.run.link_tuples == sim.link_tuples and result.run.link_bytes == sim.link_bytes
    assert result.run.link_dropped == {d: n for d, n in sim.link_dropped.items() if n}
    for sub in scenario.subscriptions:
        assert np.array_equal(result.run.dropped.get(sub.id, []), np.sort(sim.dropped.get(sub.id, [])))
    if buffer:
        assert result.run.link_dropped[("SP1", "SP2")] > 0 and len(result.run.dropped["Q1"]) > 0
    for d, bins in sim.timeline.items():  # bytes per bin of departure: the queues' times are the simulator's
        found = result.run.timeline.get(d, np.zeros(0, np.int64))
        n = max(len(bins), len(found))
        assert np.array_equal(np.pad(found, (0, n - len(found))), np.pad(bins, (0, n - len(bins)))), d
    compared = report["live"]["latency"]
    for entry in [compared["overall"], *compared["subscriptions"].values()]:
        live, simulated = entry["live"], entry["simulated"]
        assert live["count"] == simulated["count"] > 0
        for q in ("p50", "p99"):
            assert abs(live[q] - simulated[q]) <= max(0.1 * simulated[q], 0.005), (q, entry)
    # the slow link's latency and queueing are what the subscriber sees: tens of milliseconds
    assert compared["subscriptions"]["Q1"]["live"]["p50"] > 0.04


def test_a_processor_serves_each_tuple_for_its_operations_and_counts_what_it_did():
    from network.linkrule import TICKS
    from peers.live.processors import Processor

    processor = Processor(1000.0, 80.0, np.zeros((0, 2)), 1.0)  # 1 ms per operation; 80 bytes may wait
    ms = TICKS // 1000
    arrivals = np.array([0, 0, 1, 2, 1500], np.int64) * ms
    due, fate = processor.serve(arrivals, np.full(5, 40, np.int64), np.array([4, 4, 4, 0, 2], np.int64))
    # 0 -> 4 ms; 0 -> waits, 8 ms; 1 ms -> waits (80 bytes); 2 ms -> the buffer is full; 1.5 s -> at once
    assert fate.tolist() == [CARRIED, CARRIED, CARRIED, DROPPED, CARRIED]
    assert due[[0, 1, 2, 4]].tolist() == [4 * ms, 8 * ms, 12 * ms, 1502 * ms]
    tally = processor.tally
    assert (tally.ops, tally.jobs, tally.dropped) == (14, 4, 1)
    assert tally.delay_ticks == (4 + 8 + 11 + 2) * ms
    assert tally.offered.tolist() == [12, 2]  # by arrival, the dropped tuple's operations too


def test_a_processors_ties_are_ordered_by_the_simulators_channel_numbers():
    from network.routing import Network
    from peers.live.processors import ProcessorNumbers
    from peers.superpeer import flow_key, raw_key
    from peers.timetable import Timetable

    scenario = load_scenario("topologies/figure1.yaml", [("network.defaults.cpu", 2000)])
    plan = make_plan(scenario, "sharing-em")
    channels = Timetable(scenario, plan, Network.of(scenario)).channels
    numbers = ProcessorNumbers(scenario, plan)
    processors = {(c.parent, c.route[0]): c.number for c in channels if c.route == (c.route[0], c.route[0])}
    uploads = {c.stream: c.number for c in channels if c.parent == -1}
    assert numbers.number(0, "SP4", raw_key("stream0")) == processors[(uploads["stream0"], "SP4")]
    found = 0
    for k, epoch in enumerate(plan.epochs):
        for flow in epoch.flows:
            if flow.parent is None:
                continue
            number = numbers.number(k, flow.origin, flow_key(flow.parent))
            parent = channels[number].parent  # the processor reads the parent flow's channel there
            assert channels[number].route == (flow.origin, flow.origin) and channels[parent].route[0] != flow.origin
            found += 1
    assert found > 0
