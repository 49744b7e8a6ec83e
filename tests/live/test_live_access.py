"""serve --secure: the generated passwords and ACL keep an intruder out of results and links."""

from __future__ import annotations

import asyncio
import contextlib
import json

import aiomqtt
import numpy as np
import pytest

from peers.live.access import SecureSetup, acl_text, password_line, secure_setup
from peers.live.broker import Mosquitto, free_port, mosquitto_binary
from peers.live.client import Session
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.live.wire import Batch, encode_message
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies.errors import InputError
from topologies.loader import load_scenario


def secure_broker(scenario, tmp_path) -> tuple[Broker, SecureSetup, Mosquitto]:
    """A Mosquitto on a free port with ``serve --secure``'s passwords and ACL for ``scenario``, started."""
    if mosquitto_binary() is None:
        pytest.skip("mosquitto is not installed")
    url = Broker("127.0.0.1", free_port())
    setup = secure_setup(scenario, str(tmp_path / "secure"), url, "streamglobe")
    with open(setup.config_path, encoding="utf-8") as fh:
        broker = Mosquitto(str(tmp_path / "secure"), url.port, fh.read()).start()
    return url, setup, broker


def test_password_line_is_mosquitto_pbkdf2_sha512():
    line = password_line("P1", "secret", salt=b"0123456789ab")
    user, rest = line.split(":", 1)
    assert user == "P1" and rest.startswith("$7$101$MDEyMzQ1Njc4OWFi$")
    assert len(rest.split("$")[-1]) == 88  # base64 of a 64-byte digest


async def test_intruder_can_neither_read_results_nor_inject_into_links(tmp_path):
    scenario = load_scenario("topologies/figure1.yaml")
    url, setup, broker = secure_broker(scenario, tmp_path)
    topics = Topics()
    stolen: list[str] = []
    own: list[str] = []  # P2's own JSON results (Q2's), which its login may read
    try:
        options = ServeOptions(url, speed=20, credentials=setup.credentials, json_results=True)
        served = asyncio.create_task(serve(scenario, options))
        # P2 is a legitimate thin-peer, but neither P1 (who receives Q1's results) nor a super-peer
        spy_login = {"username": "P2", "password": setup.credentials["P2"]}
        forged = Batch(
            "SP4", 10**9, 0, 0, ("flow", "F1"), "stream0", np.arange(1000, dtype=np.int64),
            np.full(1000, 30.0), {"a": np.full(1000, 30.0), "b": np.full(1000, 1.0)}, np.full(1000, 32, np.int64),
        )  # fmt: skip
        for topic in (topics.link("SP4", "SP5"), topics.up("P0")):
            # a denied publish is dropped by the broker (or the intruder disconnected): either way no effect
            with contextlib.suppress(aiomqtt.MqttError):
                async with aiomqtt.Client("127.0.0.1", url.port, **spy_login) as injector:
                    await injector.publish(topic, encode_message("SP4", 10**9, [forged]), qos=1)
        async with aiomqtt.Client("127.0.0.1", url.port, **spy_login) as spy:
            await spy.subscribe(topics.downs("P1"), qos=1)
            await spy.subscribe(topics.link("SP4", "SP5"), qos=1)
            await spy.subscribe(topics.results("P1", "#"), qos=1)
            await spy.subscribe(topics.results("P2", "#"), qos=1)

            async def listen():
                async for message in spy.messages:
                    (own if message.topic.matches(topics.results("P2", "#")) else stolen).append(message.topic.value)

            listener = asyncio.create_task(listen())
            result = await served
            listener.cancel()
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", url.port) as anonymous:
                await anonymous.subscribe("#")
    finally:
        broker.stop()
    assert stolen == []
    assert own and set(own) == {topics.results("P2", "Q2")}
    assert live_report(result)["exact"]
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.run.link_bytes == sim.link_bytes  # nothing injected was counted or forwarded


async def test_a_thin_peer_acts_only_on_its_own_subscriptions(tmp_path):
    """P2 holds valid credentials: it may subscribe for itself and see and end only its own subscriptions;
    what it sends for others, or on topics only the coordinator writes, changes nothing."""
    scenario = load_scenario("topologies/figure1.yaml")
    url, setup, broker = secure_broker(scenario, tmp_path)
    topics = Topics()
    as_p2 = url.as_user("P2", setup.credentials["P2"])
    try:
        served = asyncio.create_task(serve(scenario, ServeOptions(url, speed=8, credentials=setup.credentials)))
        await asyncio.sleep(2.0)
        async with Session(as_p2, topics, "P2") as session:
            with pytest.raises(InputError, match="P2 may subscribe only for itself, not for 'P1'"):
                await session.ask({"op": "subscribe", "peer": "P1", "query": "SELECT a FROM stream0"})
            with pytest.raises(InputError, match="P2 has no active subscription 'Q1'"):
                await session.ask({"op": "unsubscribe", "id": "Q1"})
            own = await session.ask({"op": "subscribe", "peer": "P2", "query": "SELECT a FROM stream0", "id": "M2"})
            listing = await session.ask({"op": "subscriptions"})
            traffic = await session.ask({"op": "traffic"})
        # in P1's name (the ACL lets P2's login write only its own request topic), and as the coordinator: the
        # broker drops these (or disconnects P2)
        ending = {"op": "unsubscribe", "id": "Q1", "reply_to": "P1/x"}
        forbidden = [(topics.request("P1"), json.dumps(ending).encode())]
        forbidden += [(topics.control(name), b"forged") for name in ("plan", "clock", "collect")]
        for topic, payload in [*forbidden, (topics.request("P2"), b"garbage")]:  # its own: dropped, counted
            with contextlib.suppress(aiomqtt.MqttError):
                async with aiomqtt.Client("127.0.0.1", url.port, username="P2", password=setup.credentials["P2"]) as c:
                    await c.publish(topic, payload, qos=1)
        async with Session(url.as_user("operator", setup.credentials["operator"]), topics, "cli") as session:
            everything = await session.ask({"op": "subscriptions"})
        result = await served
    finally:
        broker.stop()
    assert own["id"] == "M2"
    assert [s["id"] for s in listing["subscriptions"]] == ["Q2", "M2"]  # P2's own only
    assert {row["topic"].split("/")[1] for row in traffic["links"]} <= {"P2"}
    assert [s["id"] for s in everything["subscriptions"]] == ["Q1", "Q2", "Q3", "M2"]
    final = {s.id: s for s in result.scenario.subscriptions}
    assert final["Q1"] == scenario.subscription("Q1")  # never ended by anyone but its owner
    report = live_report(result)
    assert report["exact"]
    assert report["live"]["malformed_messages"] == {"ctl/request/P2": {"P2": 1}}


def test_the_acl_gives_json_results_and_input_to_their_own_logins():
    scenario = load_scenario("topologies/figure1.yaml")
    blocks = {b.splitlines()[0]: set(b.splitlines()[1:]) for b in acl_text(scenario, Topics()).split("\n\n")}
    source = scenario.streams[0].source
    assert "topic write streamglobe/results/P2/#" in blocks["user tp@P2"]  # the node publishes them
    assert "topic read streamglobe/results/P2/#" in blocks["user P2"]  # a client under P2's login reads them
    assert "topic read streamglobe/results/+/#" in blocks["user operator"]
    assert f"topic read streamglobe/in/{scenario.streams[0].id}" in blocks[f"user tp@{source}"]
    assert f"topic write streamglobe/in/{scenario.streams[0].id}" in blocks[f"user {source}"]
    others = [p.id for p in scenario.thin_peers if p.id != source]
    assert all(not any("/in/" in line for line in blocks[f"user {p}"]) for p in others)
    assert all(
        not any("results" in line and "write" in line for line in blocks[f"user {p.id}"]) for p in scenario.thin_peers
    )
