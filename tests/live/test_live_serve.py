"""End to end over a real Mosquitto: the live report equals the simulated one, the subscribe CLI gets
exactly the matching tuples, raw subscribers see traffic only on the plan's link topics."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import aiomqtt
import numpy as np
import pytest

from peers.live.client import subscribe
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.local import run_local
from reports.live import live_report
from reports.report import build_report
from sharing import make_plan
from topologies import workload
from topologies.expected import expected_results
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"
COMPARED = ("links", "subscriptions", "backbone_bytes", "backbone_tuples", "access_bytes")


def _counts(entry: dict) -> dict:
    """A strategy's report entry without latencies and utilizations (live messages cross a real broker, not
    modelled links, and the span a report observes ends with the last arrival: only the counts compare)."""
    subscriptions = [{k: v for k, v in s.items() if k != "latency_s"} for s in entry["subscriptions"]]
    timed = ("utilization", "peak_utilization", "peak_offered")
    links = [{k: v for k, v in link.items() if k not in timed} for link in entry["links"]]
    found = {"subscriptions": subscriptions, "links": links}
    return {k: found.get(k, entry[k]) for k in COMPARED}


def simulated(scenario, strategy="sharing-em"):
    run = run_local(scenario, make_plan(scenario, strategy))
    report = build_report(scenario, {strategy: run}, engine="local")
    return report["strategies"][strategy], run


@pytest.mark.parametrize("strategy", ["sharing-em", "multicast"])
async def test_served_figure1_reports_exactly_the_simulated_traffic(mosquitto, strategy):
    scenario = load_scenario(FIGURE1)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy=strategy, speed=40))
    report = live_report(result)
    live = report["strategies"][strategy]
    sim, run = simulated(scenario, strategy)
    assert report["engine"] == "mqtt"
    assert report["exact"]
    assert _counts(live) == _counts(sim)
    assert result.lost == {}
    assert live["backbone_bytes"] > 0
    # delivery for delivery: the same tuple indices (the order of arrival may differ)
    for sub in scenario.subscriptions:
        assert np.array_equal(np.sort(result.run.delivered[sub.id]), np.sort(run.delivered[sub.id]))


# figure1 with processors (docs/ACCOUNTING.md, "Super-peer CPU"): every super-peer runs 2000 operations/s
# with a 1 KB input buffer, the source's SP4 fewer with 200 B: under sharing-em the tuples wait there (and the
# planner rejects Q3, which SP4 could not run), under multicast SP4 is overrun and drops
# (the utilizations divide by the span a report observes, which for a live run ends at the last delivery:
# as for links, only what does not depend on it compares)
CPU_FIELDS = ("cpu", "cpu_ops", "peak_cpu_offered", "processing_delay_mean", "cpu_dropped")


def with_processors(sp4_cpu: float, everywhere: bool = True):
    """figure1 with SP4's cpu and input buffer, and (``everywhere``) every other super-peer's; else the
    others' processors are unlimited: they only count."""
    defaults = [("network.defaults.cpu", 2000), ("network.defaults.input_buffer", "1KB")] if everywhere else []
    sp4 = ("network.super_peers[4]", {"id": "SP4", "cpu": sp4_cpu, "input_buffer": "200B"})
    return load_scenario(FIGURE1, [*defaults, sp4])


@pytest.mark.parametrize(
    ("strategy", "sp4_cpu", "everywhere"),
    [("sharing-em", 700, True), ("multicast", 350, True), ("multicast", 350, False)],
)
async def test_served_processors_are_the_simulated_ones(mosquitto, strategy, sp4_cpu, everywhere):
    scenario = with_processors(sp4_cpu, everywhere)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy=strategy, speed=20))
    report = live_report(result)
    live = report["strategies"][strategy]
    sim, run = simulated(scenario, strategy)
    assert report["exact"] and result.lost == {}
    assert _counts(live) == _counts(sim)
    for sub in scenario.subscriptions:
        assert np.array_equal(np.sort(result.run.delivered[sub.id]), np.sort(run.delivered[sub.id]))
        assert np.array_equal(result.run.dropped.get(sub.id, []), np.sort(run.dropped.get(sub.id, [])))
    # every processor's tally, and what the report makes of it, is the simulator's
    assert set(result.run.processors) == set(run.processors) == set(scenario.super_peers)
    for sp, tally in run.processors.items():
        found = result.run.processors[sp]
        assert (found.ops, found.delay_ticks, found.jobs, found.dropped) == (
            tally.ops, tally.delay_ticks, tally.jobs, tally.dropped
        ), sp  # fmt: skip
        assert np.array_equal(found.offered, tally.offered), sp
    cpu = [{k: sp[k] for k in ("id", *CPU_FIELDS)} for sp in live["super_peers"]]
    assert cpu == [{k: sp[k] for k in ("id", *CPU_FIELDS)} for sp in sim["super_peers"]]
    for sp in live["super_peers"]:
        if sp["cpu"] is None:  # unlimited: it counts, and has no utilization
            assert sp["cpu_utilization"] is None and sp["cpu_ops"] is not None
        else:
            assert sp["cpu_utilization"] == sp["cpu_ops"] / (sp["cpu"] * report["observed_s"])
    assert sum(sp["cpu_ops"] for sp in live["super_peers"] if sp["id"] != "SP4") > 0
    sp4 = next(sp for sp in live["super_peers"] if sp["id"] == "SP4")
    assert sp4["cpu_ops"] > 0 and sp4["processing_delay_mean"] > 0.005  # the tuples wait there
    if strategy == "multicast":  # overrun: its input buffer drops, and the subscriptions miss those copies
        assert sp4["cpu_dropped"] > 0 and all(len(result.run.dropped[s.id]) > 0 for s in scenario.subscriptions)
    else:
        assert live["subscriptions"][2]["rejected"] == sim["subscriptions"][2]["rejected"] is not None
    # the latencies, which the processors lengthen, are the simulated ones
    compared = report["live"]["latency"]
    assert compared["overall"]["live"]["count"] > 0
    for entry in [compared["overall"], *compared["subscriptions"].values()]:
        assert entry["live"]["count"] == entry["simulated"]["count"]
        for q in ("p50", "p99") if entry["live"]["count"] else ():
            assert entry["live"][q] == pytest.approx(entry["simulated"][q], abs=1e-9), (q, entry)


async def test_served_aggregates_report_exactly_the_simulated_records(mosquitto):
    # figure1 with two of its subscriptions windowed aggregates: the same records, counts and traffic live
    from tests.test_aggregates import FIGURE1_AGGREGATES, with_aggregates

    scenario = with_aggregates(load_scenario(FIGURE1), FIGURE1_AGGREGATES)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy="sharing-em", speed=40))
    report = live_report(result)
    sim, run = simulated(scenario)
    assert report["exact"]
    assert _counts(report["strategies"]["sharing-em"]) == _counts(sim)
    assert result.run.records == run.records and len(run.records["Q2"]) > 0


async def test_subscribe_cli_prints_exactly_the_matching_tuples(mosquitto):
    scenario = load_scenario(FIGURE1)
    broker = Broker.parse(mosquitto.url)
    query = "SELECT c, a FROM stream0 WHERE a < 15 AND (c > 55 OR b BETWEEN 10 AND 20)"
    rows, info = [], []
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, speed=20)))
    await asyncio.sleep(1.0)
    printed = await subscribe(
        broker, Topics(), "P2", query, count=25, timeout=20, as_json=True, out=rows.append, info=info.append,
        sub_id="CLI1",
    )  # fmt: skip
    result = await served
    assert printed == 25 and len(rows) == 25
    assert "reuses" in info[0] or "new flow" in info[0]
    spec = result.scenario.subscription("CLI1")
    assert spec.until is not None and spec.at < spec.until
    # the report's centralized check over [at, until): nothing missing, nothing extra
    entry = next(s for s in live_report(result)["strategies"]["sharing-em"]["subscriptions"] if s["id"] == "CLI1")
    assert entry["missing"] == 0 and entry["extra"] == 0 and entry["delivered"] >= 25
    # the printed rows are the first 25 matching tuples, with the selected attributes in schema order
    wanted = expected_results(result.scenario).indices["CLI1"][:25]
    values = workload.columns(scenario, "stream0", 0, int(wanted[-1]) + 1)
    expected_rows = [{"a": float(values["a"][i]), "c": float(values["c"][i])} for i in wanted]
    assert [json.loads(r) for r in rows] == expected_rows
    assert all(list(json.loads(r)) == ["a", "c"] for r in rows)


@pytest.mark.skipif(shutil.which("mosquitto_sub") is None, reason="mosquitto-clients is not installed")
async def test_raw_subscriber_sees_traffic_only_on_the_plans_link_topics(mosquitto):
    scenario = load_scenario(FIGURE1)
    watcher = subprocess.Popen(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(mosquitto.port), "-t", "streamglobe/link/#", "-F", "%t"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        await asyncio.sleep(0.3)
        await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=40))
        await asyncio.sleep(0.3)
    finally:
        watcher.terminate()
    seen = set(watcher.communicate()[0].split())
    _, run = simulated(scenario)
    used = {f"streamglobe/link/{a}/{b}" for (a, b), n in run.link_tuples.items() if n}
    assert seen == used
    assert "streamglobe/link/SP4/SP5" in seen and "streamglobe/link/SP4/SP7" not in seen


async def _cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "run.py", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, out.decode(), err.decode()


async def _clock_started(port: int) -> None:
    """Wait until the emulator's retained ``ctl/clock`` says its clock runs (the coordinator answers)."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(Topics().control("clock"), qos=1)
        async for message in client.messages:
            if json.loads(message.payload).get("t0") is not None:
                return


async def test_the_command_line_serves_writes_the_report_and_answers_the_client_commands(mosquitto, tmp_path):
    out = tmp_path / "live"
    served = asyncio.create_task(_cli("serve", FIGURE1, "--broker", mosquitto.url, "--speed", "4", "--out", str(out)))
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    code, listing, error = await _cli("subscriptions", "--broker", mosquitto.url, "--json")
    assert code == 0, error
    assert [s["id"] for s in json.loads(listing)] == ["Q1", "Q2", "Q3"]
    code, table, _ = await _cli("subscriptions", "--broker", mosquitto.url)
    assert code == 0 and table.startswith("Q1 at P1 from 0 until 50: SELECT") and "  delivery at SP1 -> P1" in table
    code, traffic, _ = await _cli("traffic", "--broker", mosquitto.url)
    assert code == 0 and traffic.startswith("t=") and traffic.splitlines()[1].split() == [
        "topic", "messages", "tuples", "bytes",
    ]  # fmt: skip
    code, stdout, stderr = await served
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0] == f"serving figure1 on {mosquitto.url} (strategy sharing-em, speed 4)"
    assert lines[1].startswith("figure1: backbone ") and "exact True, lost messages 0" in lines[1]
    assert lines[-1] == f"wrote {out / 'report.json'}" and os.listdir(out) == ["report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["engine"] == "mqtt" and report["exact"] and report["live"]["speed"] == 4
