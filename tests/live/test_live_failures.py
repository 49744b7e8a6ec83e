"""Failures: a broker restart mid-run loses nothing (QoS 1, persistent sessions, outbox, dedup); super-peers
in their own processes give the same report."""

from __future__ import annotations

import asyncio

import pytest

from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.local import run_local
from sharing import make_plan
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
    assert result.report["exact"]
    assert result.run.link_bytes == sim.link_bytes and result.run.link_tuples == sim.link_tuples


@pytest.mark.slow
async def test_super_peers_in_their_own_processes(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=30, processes=True))
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.report["exact"]
    assert result.run.link_bytes == sim.link_bytes
