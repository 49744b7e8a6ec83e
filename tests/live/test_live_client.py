"""The subscription CLI while a run goes on: ``traffic`` reports the counters as they are now, and a
``subscribe`` client is told when its subscription is removed by someone else or when the run ends."""

from __future__ import annotations

import asyncio
import json
import math
import time

import aiomqtt

from peers.live.client import subscribe, traffic, traffic_lines, unsubscribe
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from topologies import workload
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"
QUERY = "SELECT a FROM stream0 WHERE a < 50"


async def _clock_started(port: int) -> None:
    """Wait until the emulator's retained ``ctl/clock`` says its clock runs (the coordinator answers)."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(Topics().control("clock"), qos=1)
        async for message in client.messages:
            if json.loads(message.payload).get("t0") is not None:
                return


async def _until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_traffic_reports_current_counters_while_tuples_flow(mosquitto):
    broker = Broker.parse(mosquitto.url)
    stop = asyncio.Event()
    served = asyncio.create_task(serve(load_scenario(FIGURE1), ServeOptions(broker, speed=2, forever=True), stop))
    try:
        await asyncio.wait_for(_clock_started(mosquitto.port), 60)
        first = await traffic(broker, Topics())
        while first["now"] < 3:
            await asyncio.sleep(0.5)
            first = await traffic(broker, Topics())
        await asyncio.sleep(1.5)
        later = await traffic(broker, Topics())
    finally:
        stop.set()
        await served
    assert first["complete"] and later["complete"] and later["now"] > first["now"]
    rows = {r["topic"]: r for r in first["links"]}
    assert rows["link/SP4/SP5"]["tuples"] > 0 and rows["up/P0"]["tuples"] > 0  # Q1 and Q2 from the start
    again = {r["topic"]: r for r in later["links"]}
    assert again["up/P0"]["tuples"] > rows["up/P0"]["tuples"]  # counted while the run goes on
    assert traffic_lines(later)[0] == f"t={later['now']:.2f}s"


async def test_a_subscriber_is_told_when_someone_else_removes_its_subscription(mosquitto):
    broker = Broker.parse(mosquitto.url)
    stop = asyncio.Event()
    served = asyncio.create_task(serve(load_scenario(FIGURE1), ServeOptions(broker, speed=2, forever=True), stop))
    info: list[str] = []
    rows: list[str] = []
    try:
        await asyncio.wait_for(_clock_started(mosquitto.port), 60)
        watching = asyncio.create_task(
            subscribe(
                broker,
                Topics(),
                "P2",
                QUERY,
                count=None,
                timeout=60,
                as_json=True,
                out=rows.append,
                info=info.append,
                sub_id="W1",
            )
        )
        await _until(lambda: bool(info) or watching.done(), 60)
        await asyncio.sleep(3.0)  # the subscription starts at the horizon, rows show when due
        started = time.monotonic()
        removed = await unsubscribe(broker, Topics(), "W1")
        printed = await asyncio.wait_for(watching, 10)
        waited = time.monotonic() - started
    finally:
        stop.set()
        await served
    assert removed["id"] == "W1" and waited < 5
    assert info[-1].startswith(f"subscription W1 was removed at t={removed['until']:.3f}s: unsubscribed by cli")
    assert printed == len(rows) > 0 and not any(line.startswith("unsubscribed W1") for line in info)


async def test_a_subscriber_is_told_when_the_run_ends(mosquitto):
    broker = Broker.parse(mosquitto.url)
    served = asyncio.create_task(serve(load_scenario(FIGURE1), ServeOptions(broker, speed=30)))
    info: list[str] = []
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    printed = await subscribe(
        broker, Topics(), "P3", QUERY, count=None, timeout=60, as_json=True, out=lambda _: None, info=info.append,
        sub_id="W2",
    )  # fmt: skip
    result = await served
    assert printed > 0 and info[-1].startswith("subscription W2 ended with the run at t=")
    assert "W2" in result.runtime_subscriptions


async def test_an_aggregate_subscriber_prints_each_window_s_records_as_it_closes(mosquitto):
    # the CLI receives the input and prints a record per closed window: each equals a plain count and sum
    # over the emitted tuples of its window, and the windows follow one another up to the run's end
    scenario = load_scenario(FIGURE1)
    broker = Broker.parse(mosquitto.url)
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, speed=30)))
    lines: list[str] = []
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    query = "SELECT COUNT(*), SUM(b), MAX(b) FROM stream0 WHERE a < 50 WINDOW 2 s"
    printed = await subscribe(
        broker, Topics(), "P3", query, count=None, timeout=60, as_json=True, out=lines.append, info=lambda _: None,
        sub_id="A1",
    )  # fmt: skip
    await served
    records = [json.loads(line) for line in lines]
    assert printed == len(records) > 5
    windows = [r["window"] for r in records]
    assert windows == list(range(windows[0], windows[0] + len(windows)))
    assert 2 * (windows[-1] + 1) == scenario.duration  # the last window closes with the run
    stream = scenario.streams[0]
    n = workload.tuple_count(stream, scenario.duration)
    times, values = workload.emission_times(stream, 0, n), workload.columns(scenario, stream.id, 0, n)
    for r in records:
        inside = (times >= 2 * r["window"]) & (times < 2 * r["window"] + 2) & (values["a"] < 50)
        assert r["group"] == {}
        assert r["values"] == {
            "COUNT(*)": inside.sum(),
            "SUM(b)": math.fsum(values["b"][inside]),
            "MAX(b)": values["b"][inside].max(),
        }
