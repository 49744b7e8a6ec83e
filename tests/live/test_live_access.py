"""serve --secure: the generated passwords and ACL keep an intruder out of results and links."""

from __future__ import annotations

import asyncio
import contextlib

import aiomqtt
import numpy as np
import pytest

from peers.live.access import password_line, secure_setup
from peers.live.broker import Mosquitto, free_port, mosquitto_binary
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.live.wire import Batch, encode_message
from peers.local import run_local
from sharing import make_plan
from topologies.loader import load_scenario


def test_password_line_is_mosquitto_pbkdf2_sha512():
    line = password_line("P1", "secret", salt=b"0123456789ab")
    user, rest = line.split(":", 1)
    assert user == "P1" and rest.startswith("$7$101$MDEyMzQ1Njc4OWFi$")
    assert len(rest.split("$")[-1]) == 88  # base64 of a 64-byte digest


async def test_intruder_can_neither_read_results_nor_inject_into_links(tmp_path):
    if mosquitto_binary() is None:
        pytest.skip("mosquitto is not installed")
    scenario = load_scenario("topologies/figure1.yaml")
    url = Broker("127.0.0.1", free_port())
    setup = secure_setup(scenario, str(tmp_path / "secure"), url, "streamglobe")
    with open(setup.config_path, encoding="utf-8") as fh:
        broker = Mosquitto(str(tmp_path / "secure"), url.port, fh.read()).start()
    topics = Topics()
    stolen: list[str] = []
    try:
        served = asyncio.create_task(serve(scenario, ServeOptions(url, speed=20, credentials=setup.credentials)))
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

            async def listen():
                async for message in spy.messages:
                    stolen.append(message.topic.value)

            listener = asyncio.create_task(listen())
            result = await served
            listener.cancel()
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", url.port) as anonymous:
                await anonymous.subscribe("#")
    finally:
        broker.stop()
    assert stolen == []
    assert result.report["exact"]
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.run.link_bytes == sim.link_bytes  # nothing injected was counted or forwarded
