"""A replayed CSV whose time column drives emission: rows in timestamp order, gaps and bursts kept, exact
offsets; every engine's oracle and its deliveries follow those times (checked against a plain reading of
the file)."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import jsonschema
import numpy as np
import pytest
import yaml

import streamglobe as sg
from topologies.errors import ScenarioError
from topologies.loader import load_scenario
from topologies.schema import json_schema
from topologies.workload import columns, emission_times, tuple_count

RECORDING = """ts,temp,hum
2024-05-01T12:00:00.500Z,20.5,40
2024-05-01T12:00:00Z,20.1,41
2024-05-01T12:00:00Z,20.2,42
2024-05-01T12:00:03Z,25,50
2024-05-01T12:00:03.001Z,26,51
2024-05-01T12:00:04.999999Z,27,52
2024-05-01T12:00:09Z,21,44
"""


def scenario_doc(replay: str = "rec.csv", **stream) -> dict:
    return {
        "name": "timed",
        "duration": 5,
        "network": {"super_peers": ["A", "B", "C"], "links": [["A", "B", {"latency": "1ms"}], ["B", "C"]]},
        "thin_peers": [{"id": "P0", "attach": "A"}, {"id": "P1", "attach": "C"}, {"id": "P2", "attach": "B"}],
        "streams": [{"id": "s", "source": "P0", "replay": replay, "time": "ts", **stream}],
        "subscriptions": [
            {"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT temp FROM s WHERE temp > 20.15"},
            {"id": "Q2", "peer": "P2", "at": 0.25, "until": 3.0005, "query": "SELECT * FROM s"},
        ],
    }


def write(tmp_path, doc, recording=RECORDING) -> str:
    (tmp_path / "rec.csv").write_text(recording)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "t.yaml")


def test_rows_are_emitted_at_their_timestamps(tmp_path):
    scenario = load_scenario(write(tmp_path, scenario_doc()))
    jsonschema.Draft202012Validator(json_schema()).validate(scenario_doc())
    stream = scenario.stream("s")
    assert stream.attribute_names == ("temp", "hum")  # the time column is not an attribute
    assert tuple_count(stream, 5) == 6  # the row at 9 s is after the run
    # sorted by time, stably (the two rows at 12:00:00 keep their order), offsets exact to the microsecond
    assert emission_times(stream, 0, 6).tolist() == [0.0, 0.0, 0.5, 3.0, 3.001, 4.999999]
    assert columns(scenario, "s", 0, 6)["temp"].tolist() == [20.1, 20.2, 20.5, 25.0, 26.0, 27.0]
    assert stream.rate == 6 / 5  # the mean over the run, what the planner's cost model reads


def test_numbers_of_seconds_keep_their_decimals(tmp_path):
    recording = "t,x\n1714564803.001,1\n1714564800,2\n1714564800.5,3\n"
    scenario = load_scenario(write(tmp_path, scenario_doc(), recording.replace("t,x", "ts,temp")))
    assert emission_times(scenario.stream("s"), 0, 3).tolist() == [0.0, 0.5, 3.001]


@pytest.mark.parametrize(
    ("start", "times", "temps"),
    [
        ("2024-05-01T12:00:00.250Z", [0.25, 2.75, 2.751, 4.749999], [20.5, 25.0, 26.0, 27.0]),
        ("2024-05-01T11:59:59Z", [1.0, 1.0, 1.5, 4.0, 4.001], [20.1, 20.2, 20.5, 25.0, 26.0]),
    ],
)
def test_time_start_sets_the_moment_of_emission_zero(tmp_path, start, times, temps):
    scenario = load_scenario(write(tmp_path, scenario_doc(time_start=start)))
    stream = scenario.stream("s")
    count = tuple_count(stream, 5)
    assert emission_times(stream, 0, count).tolist() == times  # rows before the start are left out
    assert columns(scenario, "s", 0, count)["temp"].tolist() == temps


def plain_expected(recording: str) -> dict[str, list[float]]:
    """Q1's and Q2's answers read straight from the CSV: emission = timestamp - earliest, in [at, until)."""
    rows = list(csv.DictReader(io.StringIO(recording)))
    stamps = [datetime.fromisoformat(r["ts"]) for r in rows]
    first = min(stamps)
    timed = sorted(((s - first).total_seconds(), k, r) for k, (s, r) in enumerate(zip(stamps, rows, strict=True)))
    q1 = [float(r["temp"]) for t, _, r in timed if t < 5 and float(r["temp"]) > 20.15]
    q2 = [float(r["temp"]) for t, _, r in timed if 0.25 <= t < 3.0005]
    return {"Q1": q1, "Q2": q2}


@pytest.mark.parametrize("strategy", ["data-shipping", "query-shipping", "ideal", "sharing-em"])
def test_the_oracle_and_the_deliveries_follow_the_timestamps(tmp_path, strategy):
    scenario = load_scenario(write(tmp_path, scenario_doc()))
    run = sg.simulate(scenario, sg.plan(scenario, strategy))
    result = sg.check(scenario, run)
    assert result.exact
    want = plain_expected(RECORDING)
    for sub, temps in want.items():
        assert result.subscriptions[sub].expected == len(temps)
        got = columns(scenario, "s", 0, 6)["temp"][run.delivered[sub]].tolist()
        assert sorted(got) == sorted(temps)
    # latency is from each row's own emission time: the burst at t=0 queues on the 1 ms link behind nothing
    times = emission_times(scenario.stream("s"), 0, 6)
    assert np.all(run.latencies["Q1"] >= 0.001) and np.all(run.latencies["Q1"] < 0.01)
    assert run.last_arrival > times[-1]


@pytest.mark.parametrize(
    ("stream", "recording", "message"),
    [
        ({"rate": 5}, RECORDING, "streams[0].rate: not allowed with a time column"),
        ({"time": "when"}, RECORDING, "streams[0].replay: rec.csv: row 1: no time column 'when' (the header has:"),
        ({}, "ts,temp\n2024-05-01T12:00:00Z,1\n3,2\n", "numbers and dates mixed in the time column"),
        ({}, "ts,temp\nnoon,1\n", "row 2, column 'ts': not a time (seconds, or an ISO 8601 date-time): 'noon'"),
        ({}, "ts\n1\n", "streams[0].replay: rec.csv: no attribute besides the time column 'ts'"),
        ({"time_start": 5}, RECORDING, "time_start '5' and the time column are not of one kind"),
        ({}, "ts,temp\n0,1\n1e999999999,2\n", "row 3, column 'ts': '1e999999999' seconds, over the limit of 1e+15"),
        ({}, "ts,temp\n-1e16,1\n0,2\n", "row 2, column 'ts': '-1e16' seconds, over the limit of 1e+15"),
        ({}, "ts,temp\n0,1.7e308\n1,-1.7e308\n", "column 'temp': values from -1.7e+308 to 1.7e+308, too wide a range"),
    ],
)
def test_mistakes(tmp_path, stream, recording, message):
    path = write(tmp_path, scenario_doc(**stream), recording)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert message in str(info.value) and str(info.value).startswith(path)


def test_timestamps_up_to_the_limit_keep_their_gaps(tmp_path):
    doc = scenario_doc()
    doc["duration"] = 2
    scenario = load_scenario(write(tmp_path, doc, "ts,temp,hum\n1e15,1,2\n999999999999999.5,3,4\n"))
    assert emission_times(scenario.streams[0], 0, 2).tolist() == [0.0, 0.5]


def test_a_time_column_needs_a_replay(tmp_path):
    doc = scenario_doc()
    doc["streams"] = [{"id": "s", "source": "P0", "time": "ts", "schema": {"x": {"distribution": {"uniform": [0, 1]}}}}]
    with pytest.raises(ScenarioError, match=r"streams\[0\]\.time: a time column needs a replayed CSV file"):
        load_scenario(write(tmp_path, doc))
