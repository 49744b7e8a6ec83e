"""docs/LIVE.md's description of the messages holds: its standard-library decoder reads real tuple messages
(encoded by the nodes' own code, and captured off the broker during a live run) exactly as the nodes
decode them, and the control messages carry the fields it lists."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiomqtt
import numpy as np

from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.live.wire import Batch, decode_message, encode_message
from reports.live import live_report
from topologies import workload
from topologies.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
LIVE = (ROOT / "docs" / "LIVE.md").read_text(encoding="utf-8")
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")


def documented_decoder():
    (code,) = re.findall(r"```python\n(# decode a tuple message.*?)```", LIVE, re.DOTALL)
    namespace: dict = {}
    exec(compile(code, "docs/LIVE.md", "exec"), namespace)
    return namespace["decode"]


def same(payload: bytes, decode) -> dict:
    """The documented decoder's reading of ``payload`` equals the nodes' own; returns its header."""
    header, parts = decode(payload)
    batches = decode_message(payload, None)
    assert header["sender"] == batches[0].sender and header["seq"] == batches[0].seq
    assert len(parts) == len(batches)
    for part, batch in zip(parts, batches, strict=True):
        assert (part["version"], part["epoch"], tuple(part["channel"]), part["stream"]) == (
            batch.version,
            batch.epoch,
            batch.channel,
            batch.stream,
        )
        assert part["indices"] == batch.indices.tolist() and part["times"] == batch.times.tolist()
        assert part["wire_bytes"] == batch.wire_bytes.tolist()
        assert {a: v for a, v in part["columns"].items()} == {a: v.tolist() for a, v in batch.columns.items()}
    return header


def test_the_documented_decoder_reads_a_message_of_several_parts():
    scenario = load_scenario(FIGURE1)
    values = workload.columns(scenario, "stream0", 100, 140)
    times = workload.emission_times(scenario.stream("stream0"), 100, 140)
    parts = [
        Batch("SP4", 0, 1, 2, ("flow", "F1"), "stream0", np.arange(100, 120), times[:20],
              {"a": values["a"][:20], "b": values["b"][:20]}, np.full(20, 32)),
        Batch("SP4", 0, 1, 2, ("flow", "F2"), "stream0", np.arange(120, 140), times[20:],
              {"a": values["a"][20:]}, np.full(20, 24)),
        Batch("SP4", 0, 1, 2, ("delivery", "Q9"), "stream0", np.zeros(0, np.int64), np.zeros(0), {"c": np.zeros(0)},
              np.zeros(0, np.int64)),
    ]  # fmt: skip
    header = same(encode_message("SP4", 7, parts), documented_decoder())
    assert set(header) == {"sender", "seq", "sent", "parts"}
    assert [set(p) for p in header["parts"]] == [{"version", "epoch", "channel", "stream", "n", "attrs"}] * 3
    for key in ("sender", "seq", "sent", "version", "epoch", "channel", "stream", "n", "attrs"):
        assert f'"{key}"' in LIVE


async def test_the_documented_decoder_reads_every_message_of_a_live_run(mosquitto):
    decode = documented_decoder()
    scenario = load_scenario(FIGURE1)
    captured: list[tuple[str, bytes]] = []
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as watcher:
        await watcher.subscribe("streamglobe/#", qos=1)

        async def capture():
            async for message in watcher.messages:
                captured.append((str(message.topic), bytes(message.payload)))

        listening = asyncio.create_task(capture())
        result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=30))
        await asyncio.sleep(0.5)
        listening.cancel()
    topics = Topics()
    link_bytes: dict[str, int] = {}
    seen, clocks, plans = set(), [], []
    for topic, payload in captured:
        parts = topics.parse(topic)
        if parts[:1] in (("up",), ("link",), ("down",)):
            header = same(payload, decode)
            if (header["sender"], header["seq"]) in seen:
                continue  # a QoS 1 duplicate, which receivers drop
            seen.add((header["sender"], header["seq"]))
            if parts[0] == "link":
                key = "/".join(parts)
                link_bytes[key] = link_bytes.get(key, 0) + sum(sum(p["wire_bytes"]) for p in decode(payload)[1])
        elif parts[:2] == ("ctl", "clock"):
            clocks.append(json.loads(payload))
        elif parts[:2] == ("ctl", "plan"):
            plans.append(json.loads(payload))
    assert len(seen) > 50
    report = live_report(result)["strategies"]["sharing-em"]
    assert link_bytes == {f"link/{x['from']}/{x['to']}": x["bytes"] for x in report["links"] if x["bytes"]}
    (documented_clock,) = re.findall(r"\| `ctl/clock` \(retained\) \| `(\{.*?\})`", LIVE)
    assert all(set(c) == set(json.loads(documented_clock)) for c in clocks if c.get("t0") is not None)
    assert plans and all(set(p) == {"run", "version", "duration", "subscriptions", "plan"} for p in plans)
