"""Failures: a broker restart mid-run loses nothing (QoS 1, persistent sessions, outbox, dedup); super-peers
in their own processes give the same report; a killed super-peer process is planned around."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import aiomqtt
import numpy as np
import pytest

from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies import workload
from topologies.expected import expected_results
from topologies.loader import load_scenario


@pytest.mark.slow
async def test_broker_restart_mid_run_loses_nothing(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    served = asyncio.create_task(serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=6)))
    await asyncio.sleep(4.0)
    await asyncio.to_thread(mosquitto.stop)  # SIGTERM: mosquitto saves queued messages
    await asyncio.sleep(1.5)
    await asyncio.to_thread(mosquitto.start)
    result = await served
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.reconnects > 0
    assert result.lost == {}
    assert live_report(result)["exact"]
    assert result.run.link_bytes == sim.link_bytes and result.run.link_tuples == sim.link_tuples


@pytest.mark.slow
async def test_super_peers_in_their_own_processes(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    # three processes: SP0 SP3 SP6, SP1 SP4 SP7, SP2 SP5
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=30, processes=3))
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert live_report(result)["exact"]
    assert result.run.link_bytes == sim.link_bytes


def _node_process(port: int, node: str) -> int:
    """The pid of the ``peers.live.node`` process serving ``node`` on the broker at ``port`` (ours)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().decode().split("\0")
        except OSError:
            continue
        if "peers.live.node" in argv and f"mqtt://127.0.0.1:{port}" in argv and node in argv:
            return int(entry)
    raise AssertionError(f"no node process for {node}")


async def _emulated_time(port: int, t: float) -> None:
    """Wait until the emulator's clock (its retained ``ctl/clock``) has reached emulated time ``t``."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(Topics().control("clock"), qos=1)
        async for message in client.messages:
            doc = json.loads(message.payload)
            if doc.get("t0") is not None:
                await asyncio.sleep(max(0.0, doc["t0"] + t / doc["speed"] - time.time()))
                return


@pytest.mark.slow
async def test_killed_relay_is_planned_around_and_what_it_cut_off_is_reported(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    options = ServeOptions(Broker.parse(mosquitto.url), speed=10, processes=len(scenario.super_peers))
    served = asyncio.create_task(serve(scenario, options))
    await _emulated_time(mosquitto.port, 25.0)  # Q1, Q2 and Q3 are active
    os.kill(_node_process(mosquitto.port, "SP5"), signal.SIGKILL)
    result = await served
    [failure] = result.failures
    at = failure.at
    # without SP5, SP1 and SP3 (Q1's and Q3's subscribers) are cut off from the source at SP4; SP6 (Q2) is
    # reached over SP4 -> SP7 -> SP6
    assert failure.node == "SP5" and failure.lost == ("Q1", "Q3")
    assert failure.replanned == ("Q2",)
    assert result.dead == ["SP5"]
    assert result.scenario.subscription("Q1").until == at and result.scenario.subscription("Q3").until == at
    assert result.run.link_tuples[("SP4", "SP7")] > 0 and result.run.link_tuples[("SP7", "SP6")] > 0
    # what crossed into SP5 before it died counts: its counters as it last reported them (every second)
    unfailed = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert 0 < result.run.link_tuples[("SP4", "SP5")] < unfailed.link_tuples[("SP4", "SP5")]
    # every Q2 tuple emitted from the re-plan on arrives, exactly once; what it lost was on its way via SP5
    expected = expected_results(result.scenario).indices["Q2"]
    stream = scenario.stream("stream0")
    times = workload.emission_times(stream, 0, workload.tuple_count(stream, scenario.duration))
    after = expected[times[expected] >= at]
    got = np.sort(result.run.delivered["Q2"])
    assert np.array_equal(got[times[got] >= at], after)
    entry = {s["id"]: s for s in live_report(result)["strategies"]["sharing-em"]["subscriptions"]}
    assert entry["Q2"]["extra"] == 0
    assert entry["Q2"]["missing"] == len(expected) - len(np.intersect1d(got, expected))
