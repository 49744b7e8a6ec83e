"""Live mode with plain MQTT clients: results read by ``mosquitto_sub`` as JSON, and a stream whose tuples
``mosquitto_pub`` publishes as JSON, reaching its subscribers exactly (the centralized answer over what was
published); a replay timed by its recording emitted live at the recorded times; the shipped broker.conf and
``--start-broker``."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from peers.live.broker import Mosquitto, free_port, started_broker
from peers.live.connection import Broker, reach
from peers.live.serve import ServeOptions, serve
from reports.live import live_report
from topologies.errors import InputError
from topologies.expected import expected_results
from topologies.loader import load_scenario, scenario_from_document
from topologies.workload import columns, emission_times_of

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("mosquitto_sub") is None, reason="mosquitto-clients is not installed")

INPUT = {
    "name": "external",
    "duration": 8,
    "network": {"defaults": {"latency": "2ms"}, "super_peers": ["A", "B", "C"], "links": [["A", "B"], ["B", "C"]]},
    "thin_peers": [{"id": "sensor", "attach": "A"}, {"id": "P1", "attach": "C"}, {"id": "P2", "attach": "B"}],
    "streams": [
        {
            "id": "readings",
            "source": "sensor",
            "rate": 5,
            "schema": {
                "x": {"distribution": {"uniform": [0, 100]}},
                "n": {"type": "int", "distribution": {"uniform": [0, 9]}},
                "kind": {"type": "string", "distribution": {"choice": ["ok", "warn", "fail"]}},
            },
        }
    ],
    "subscriptions": [
        {"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT x FROM readings WHERE x > 50"},
        {"id": "Q2", "peer": "P2", "at": 0, "query": "SELECT * FROM readings WHERE n IN (1, 2, 3) OR kind = 'fail'"},
    ],
}


def reader(port: int, out: Path) -> subprocess.Popen:
    """``mosquitto_sub`` printing every result message with its topic, until killed."""
    handle = out.open("w")
    return subprocess.Popen(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", "streamglobe/results/#", "-v"], stdout=handle
    )


def read_results(out: Path) -> dict[str, list[dict]]:
    """Per subscription, the result tuples mosquitto_sub printed (a message's first line carries its topic)."""
    found: dict[str, list[dict]] = {}
    sub = None
    for line in out.read_text().splitlines():
        if line.startswith("streamglobe/results/"):
            topic, _, line = line.partition(" ")
            sub = topic.rsplit("/", 1)[1]
        found.setdefault(sub, []).append(json.loads(line))
    return found


async def served_and_read(scenario, mosquitto, out: Path, speed: float) -> dict[str, list[dict]]:
    """Serve ``scenario`` with JSON results while ``mosquitto_sub`` prints them to ``out``; check the run
    was exact and return what mosquitto_sub read (:func:`read_results`)."""
    listener = reader(mosquitto.port, out)
    try:
        await asyncio.sleep(0.5)
        result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=speed, json_results=True))
        await asyncio.sleep(1.0)
    finally:
        listener.terminate()
        listener.wait()
    assert live_report(result, simulate=False)["exact"]
    return read_results(out)


async def wait_until(condition, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def test_mosquitto_sub_reads_every_result_exactly(mosquitto, tmp_path):
    scenario = load_scenario(ROOT / "topologies" / "figure1.yaml")
    printed = await served_and_read(scenario, mosquitto, tmp_path / "results.txt", speed=30)
    expected = expected_results(scenario)
    stream = scenario.stream("stream0")
    values = columns(scenario, "stream0", 0, int(stream.rate * scenario.duration))
    for sub in scenario.subscriptions:
        rows = sorted(printed[sub.id], key=lambda r: r["i"])
        want = expected.indices[sub.id]
        assert [r["i"] for r in rows] == want.tolist()  # each result once, none missing, none extra
        assert [r["t"] for r in rows] == emission_times_of(stream, want).tolist()
        attrs = sub.query.attributes(stream.attribute_names)
        assert [r["values"] for r in rows] == [{a: float(values[a][i]) for a in attrs} for i in want.tolist()]


async def test_a_stream_published_with_mosquitto_pub_reaches_its_subscribers_exactly(mosquitto, tmp_path):
    scenario = scenario_from_document(INPUT)
    rng = np.random.default_rng(5)
    kinds = rng.choice(["ok", "warn", "fail"], 40)
    drawn = zip(rng.uniform(0, 100, 40), rng.integers(0, 10, 40), kinds, strict=True)
    tuples = [{"x": round(float(x), 3), "n": int(n), "kind": str(k)} for x, n, k in drawn]
    messages = [
        json.dumps(tuples[0]),  # one object
        json.dumps(tuples[1:15]),  # an array
        "\n".join(json.dumps(t) for t in tuples[15:40]),  # one object per line
        '{"x": 3, "n": 1, "kind": "hot"}',  # malformed (not one of kind's values): dropped and counted
    ]
    listener = reader(mosquitto.port, tmp_path / "results.txt")
    options = ServeOptions(
        Broker.parse(mosquitto.url), speed=1, json_results=True, inputs=("readings",), record_dir=str(tmp_path)
    )
    task = asyncio.create_task(serve(scenario, options))
    try:
        await asyncio.sleep(2.0)  # the clock has started
        for message in messages:
            publish = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(mosquitto.port), "-t", "streamglobe/in/readings"]
            subprocess.run([*publish, "-m", message], check=True, timeout=10)
        result = await task
        await asyncio.sleep(1.0)
    finally:
        listener.terminate()
        listener.wait()
    report = live_report(result, simulate=False)
    assert report["exact"]
    assert report["live"]["inputs"] == {"readings": {"tuples": 40, "file": "input-readings.csv"}}
    assert report["live"]["malformed_messages"] == {"in/readings": {"an input client": 1}}
    entry = {s["id"]: s for s in report["strategies"]["sharing-em"]["subscriptions"]}
    # the centralized answer over what was published, computed here from the tuples themselves
    q1 = [t["x"] for t in tuples if t["x"] > 50]
    q2 = [t for t in tuples if t["n"] in (1, 2, 3) or t["kind"] == "fail"]
    assert (entry["Q1"]["expected"], entry["Q1"]["delivered"]) == (len(q1), len(q1))
    assert (entry["Q2"]["expected"], entry["Q2"]["delivered"]) == (len(q2), len(q2))
    printed = read_results(tmp_path / "results.txt")
    assert sorted(r["values"]["x"] for r in printed["Q1"]) == sorted(q1)
    assert sorted(tuple(r["values"].values()) for r in printed["Q2"]) == sorted(tuple(t.values()) for t in q2)
    assert all(isinstance(r["values"]["n"], int) for r in printed["Q2"])
    # published in this order: emitted in it (indices follow arrival, times never go back)
    assert sorted(printed["Q1"], key=lambda r: r["i"]) == sorted(printed["Q1"], key=lambda r: (r["t"], r["i"]))


TIMED = """ts,temp,hum
2024-05-01T12:00:00.500Z,20.5,40
2024-05-01T12:00:00Z,20.1,41
2024-05-01T12:00:00Z,20.2,42
2024-05-01T12:00:03Z,25,50
2024-05-01T12:00:03.001Z,26,51
2024-05-01T12:00:04.999999Z,27,52
2024-05-01T12:00:09Z,21,44
"""


async def test_a_replay_timed_by_its_recording_is_emitted_live_at_the_recorded_times(mosquitto, tmp_path):
    (tmp_path / "rec.csv").write_text(TIMED)
    doc = {
        "name": "timed",
        "duration": 5,
        "network": {"super_peers": ["A", "B", "C"], "links": [["A", "B", {"latency": "1ms"}], ["B", "C"]]},
        "thin_peers": [{"id": "P0", "attach": "A"}, {"id": "P1", "attach": "C"}, {"id": "P2", "attach": "B"}],
        "streams": [{"id": "s", "source": "P0", "replay": "rec.csv", "time": "ts"}],
        "subscriptions": [
            {"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT temp FROM s WHERE temp > 20.15"},
            {"id": "Q2", "peer": "P2", "at": 0, "query": "SELECT * FROM s WHERE hum >= 50"},
        ],
    }
    (tmp_path / "timed.yaml").write_text(json.dumps(doc))
    scenario = load_scenario(tmp_path / "timed.yaml")
    printed = await served_and_read(scenario, mosquitto, tmp_path / "results.txt", speed=5)
    # a plain reading of the file: rows in time order (stable), offsets from the first, the row at 9 s after the run
    rows = [(0.0, 20.1, 41), (0.0, 20.2, 42), (0.5, 20.5, 40), (3.0, 25.0, 50), (3.001, 26.0, 51), (4.999999, 27.0, 52)]
    q1 = [(t, {"temp": temp}) for t, temp, _ in rows if temp > 20.15]
    q2 = [(t, {"temp": temp, "hum": hum}) for t, temp, hum in rows if hum >= 50]
    for sub, want in (("Q1", q1), ("Q2", q2)):
        got = sorted(printed[sub], key=lambda r: r["i"])
        assert [(r["t"], r["values"]) for r in got] == want, sub


def test_an_input_that_is_not_a_stream_is_refused(mosquitto):
    options = ServeOptions(Broker.parse(mosquitto.url), inputs=("nothing",))
    with pytest.raises(InputError, match=r"--input nothing: not a stream of external \(its streams: readings\)"):
        asyncio.run(serve(scenario_from_document(INPUT), options))


def test_the_shipped_broker_conf_starts_mosquitto(tmp_path):
    text = (ROOT / "broker.conf").read_text()
    assert "listener 1883 127.0.0.1" in text and "set_tcp_nodelay true" in text
    port = free_port()
    broker = Mosquitto(str(tmp_path), port, text.replace("listener 1883 ", f"listener {port} ")).start()
    try:
        asyncio.run(reach(Broker("127.0.0.1", port)))
    finally:
        broker.stop()


def test_start_broker_starts_and_stops_one_and_refuses_a_port_in_use(tmp_path):
    port = free_port()
    with started_broker(Broker("127.0.0.1", port), str(tmp_path / "b")):
        asyncio.run(reach(Broker("127.0.0.1", port)))
        in_use = pytest.raises(InputError, match=f"--start-broker: port {port} is in use")
        with in_use, started_broker(Broker("127.0.0.1", port), str(tmp_path / "c")):
            pass
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))  # stopped: free again
    elsewhere = pytest.raises(InputError, match=r"--broker must be 127\.0\.0\.1")
    with elsewhere, started_broker(Broker("example.org", port), str(tmp_path / "d")):
        pass


def test_serve_starts_its_own_broker_and_publishes_json_results(tmp_path):
    port = free_port()
    cmd = [
        "python", str(ROOT / "run.py"), "serve", str(ROOT / "topologies" / "figure1.yaml"), "--speed", "60",
        "--start-broker", "--broker", f"mqtt://127.0.0.1:{port}", "--json-results", "--quiet", "--out",
        str(tmp_path / "live"),
    ]  # fmt: skip
    cmd[0] = sys.executable
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert f"started mosquitto on 127.0.0.1:{port} (stopped when the run ends)" in done.stdout
    assert json.loads((tmp_path / "live" / "report.json").read_text())["exact"]
    with socket.socket() as probe:  # the broker is gone with the run
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    missing = subprocess.run(cmd[:4], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert missing.returncode == 2
    assert missing.stderr == "error: serve: --broker mqtt://HOST:PORT is required (or --start-broker to start one)\n"
