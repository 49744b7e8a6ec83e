"""Hostile traffic on the broker: every malformed message is dropped and counted, never fatal; a stop cuts
the run at the barrier (exact), also while a forged load report holds the horizon; a broker that does not
listen is named at once."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import aiomqtt
import numpy as np
import pytest

from peers.live.broker import free_port
from peers.live.client import Session
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.live.wire import Batch, encode_message
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies.errors import EngineError, InputError
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"
TOPICS = Topics()


def forged(sender: str, channel: tuple[str, str], n: int = 10, **change) -> bytes:
    """A well-formed message of ``n`` tuples of stream0 (``change`` overrides Batch fields)."""
    fields = dict(
        sender=sender, seq=10**9, version=0, epoch=0, channel=channel, stream="stream0",
        indices=np.arange(n, dtype=np.int64), times=np.full(n, 1.0),
        columns={"a": np.full(n, 5.0), "b": np.full(n, 5.0), "c": np.full(n, 60.0)},
        wire_bytes=np.full(n, 44, np.int64),
    )  # fmt: skip
    fields.update(change)
    return encode_message(sender, fields["seq"], [Batch(**fields)])


# (topic, payload, the sender the report names) for every topic a node reads
GARBAGE = [
    (TOPICS.link("SP4", "SP5"), b"\x00garbage", "SP4"),
    (TOPICS.link("SP4", "SP5"), b"SGB2\xff\xff\xff\x7f{", "SP4"),  # header length past the end
    (TOPICS.link("SP4", "SP5"), forged("SP9", ("flow", "F1")), "SP4"),  # claims another sender
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "nope")), "SP4"),  # no such flow
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "F1"), epoch=99), "SP4"),  # no such epoch
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "F1"), times=np.full(10, np.nan)), "SP4"),
    (TOPICS.up("P0"), b"{}", "P0"),
    (TOPICS.up("P0"), forged("P0", ("raw", "stream0"), columns={"a": np.zeros(10)}), "P0"),  # attributes missing
    (TOPICS.up("P0"), forged("P0", ("raw", "nostream")), "P0"),
    (TOPICS.down("P1", "Q1"), b"\xde\xad", "SP1"),
    (TOPICS.down("P1", "Q1"), forged("SP1", ("delivery", "Q2")), "SP1"),  # not this topic's subscription
    (TOPICS.control("clock"), b"not json", "coordinator"),
    (TOPICS.control("collect"), b"[1, 2]", "coordinator"),
    (TOPICS.control("collect"), json.dumps({"round": True}).encode(), "coordinator"),
    (TOPICS.control("plan"), b"\x80\x81", "coordinator"),
    (TOPICS.request("cli"), b"]]", "cli"),
    (TOPICS.request("cli"), json.dumps({"op": "subscriptions"}).encode(), "cli"),  # nowhere to answer
    (TOPICS.request("cli"), json.dumps({"op": "x", "reply_to": "P1/abc"}).encode(), "cli"),  # not its reply topic
    (TOPICS.stats("SP4"), b"{", "SP4"),
    (TOPICS.stats("SP4"), json.dumps({"node": "SP4", "round": 1, "received": {"x/y": [1, 2, 3]}}).encode(), "SP4"),
    (TOPICS.alive("SP4"), b"2", "SP4"),
    (TOPICS.load("SP4"), b"busy", "SP4"),
    (TOPICS.ready("SP4"), b"-1", "SP4"),
    (TOPICS.ready("SP99"), b"0", "SP99"),
]


async def wait_for_clock(port: int, previous: str | None = None) -> str:
    """Until the coordinator of a run other than ``previous`` has started the emulated clock; its run id."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(TOPICS.control("clock"), qos=1)
        async for message in client.messages:
            doc = json.loads(message.payload)
            if doc.get("t0") is not None and doc["run"] != previous:
                return doc["run"]
    raise AssertionError("no clock")


async def test_garbage_on_every_topic_is_dropped_counted_and_the_run_stays_exact(mosquitto, caplog):
    scenario = load_scenario(FIGURE1)
    broker = Broker.parse(mosquitto.url)
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, speed=15)))
    run = await asyncio.wait_for(wait_for_clock(mosquitto.port), 30)
    # of this run, so not ignored as a previous run's leftovers, but not a clock or a plan either
    of_this_run = [
        (TOPICS.control("clock"), json.dumps({"run": run, "t0": 1.0, "speed": -1}).encode(), "coordinator"),
        (TOPICS.control("plan"), json.dumps({"run": run, "version": 7, "duration": 1.0}).encode(), "coordinator"),
    ]
    with caplog.at_level(logging.WARNING, logger="peers.live"):
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as attacker:
            for topic, payload, _ in GARBAGE + of_this_run:
                await attacker.publish(topic, payload, qos=1)
        # the coordinator still answers, and a request it cannot carry out gets an error reply
        async with Session(broker, TOPICS, "cli") as session:
            listing = await session.ask({"op": "subscriptions"})
            with pytest.raises(InputError, match="unknown request 'reboot'"):
                await session.ask({"op": "reboot"})
            with pytest.raises(InputError, match="'peer' and 'query' must be strings"):
                await session.ask({"op": "subscribe", "peer": ["P1"], "query": 7})
            with pytest.raises(InputError, match="--id: letters, digits"):  # it would be a wildcard topic
                await session.ask({"op": "subscribe", "peer": "P1", "query": "SELECT a FROM stream0", "id": "#"})
            with pytest.raises(InputError, match="query: at most 65,536 characters"):
                await session.ask({"op": "subscribe", "peer": "P1", "query": "SELECT a FROM stream0 " + " " * 70000})
        result = await asyncio.wait_for(served, 60)
    assert [s["id"] for s in listing["subscriptions"]] == ["Q1", "Q2", "Q3"]
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.run.link_bytes == sim.link_bytes  # no forged tuple was counted or forwarded
    malformed = report["live"]["malformed_messages"]
    for topic, _, sender in GARBAGE + of_this_run:
        assert malformed["/".join(TOPICS.parse(topic))][sender] >= 1, (topic, malformed)
    # topics with one reader: each message counted once
    assert malformed["link/SP4/SP5"] == {"SP4": 6}
    assert malformed["up/P0"] == {"P0": 3}
    assert malformed["down/P1/Q1"] == {"SP1": 2}
    assert malformed["ctl/request/cli"] == {"cli": 3}
    # the clock and collect broadcasts reach every node, the plan every super-peer: each counts them
    nodes = len(scenario.super_peers) + len(scenario.thin_peers)
    assert malformed["ctl/clock"] == malformed["ctl/collect"] == {"coordinator": 2 * nodes}
    assert malformed["ctl/plan"] == {"coordinator": 2 * len(scenario.super_peers)}
    # on stderr once per node and sender, not once per message
    told = [r.getMessage() for r in caplog.records if "dropped a malformed message" in r.getMessage()]
    assert len(told) == len({(m.split(":")[0], m.split(" from ")[1].split(":")[0]) for m in told})
    assert any(m.startswith("sp-SP5: dropped a malformed message on streamglobe/link/SP4/SP5 from SP4") for m in told)


async def test_a_stop_under_forever_is_cut_at_the_barrier_and_exact(mosquitto):
    scenario = load_scenario(FIGURE1)
    run = None
    for wait in (0.6, 1.3, 2.1):  # stopped between clock ticks at different phases
        stop = asyncio.Event()
        served = asyncio.create_task(
            serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=15, forever=True), stop)
        )
        run = await asyncio.wait_for(wait_for_clock(mosquitto.port, run), 30)
        await asyncio.sleep(wait)
        stop.set()
        result = await asyncio.wait_for(served, 60)
        report = live_report(result)
        assert report["exact"], [
            (s["id"], s["missing"], s["extra"]) for s in report["strategies"]["sharing-em"]["subscriptions"]
        ]
        assert 0 < result.scenario.duration < 60


async def test_a_stop_ends_the_run_while_a_forged_load_report_holds_the_horizon(mosquitto):
    scenario = load_scenario(FIGURE1)
    stop = asyncio.Event()
    served = asyncio.create_task(serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=15), stop))
    await asyncio.wait_for(wait_for_clock(mosquitto.port), 30)
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as attacker:
        await attacker.publish(TOPICS.load("SP5"), b"1", qos=1)  # well-formed: indistinguishable without --secure
    await asyncio.sleep(1.0)
    stop.set()
    started = time.monotonic()
    result = await asyncio.wait_for(served, 30)
    assert time.monotonic() - started < 15
    report = live_report(result)
    assert report["exact"]
    assert report["live"]["backpressure"]["horizon_held_s"] > 0


async def test_serve_names_a_broker_that_does_not_listen_within_seconds():
    scenario = load_scenario(FIGURE1)
    port = free_port()
    started = time.monotonic()
    with pytest.raises(EngineError, match=f"cannot reach the broker at 127.0.0.1:{port}"):
        await asyncio.wait_for(serve(scenario, ServeOptions(Broker("127.0.0.1", port))), 30)
    assert time.monotonic() - started < 8
