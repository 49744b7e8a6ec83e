"""The run command as a library call: typed options checked before any work, the report written whole."""

from __future__ import annotations

import json
import os

import pytest

from reports.runner import RunOptions, run_lines, run_scenario
from topologies.errors import InputError
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategies": ("ideal", "teleport")}, "unknown strategy 'teleport'; valid strategies: data-shipping, "),
        ({"engine": "abacus"}, "unknown engine 'abacus'; valid engines: local, spark"),
        ({"jobs": 0}, "--jobs: must be at least 1, got 0"),
        ({"jobs": 2, "engine": "spark"}, "--jobs 2: the spark engine runs one strategy at a time"),
        ({"engine": "spark", "spark_conf": ("spark.x",)}, "--spark-conf: 'spark.x' is not KEY=VALUE"),
    ],
)
def test_options_are_checked_when_made(options, message):
    with pytest.raises(InputError) as info:
        RunOptions(**options)
    assert str(info.value).startswith(message)


def test_run_scenario_writes_the_report_and_returns_it(tmp_path):
    scenario = load_scenario(FIGURE1)
    out = tmp_path / "report"
    options = RunOptions(strategies=("ideal", "multicast"), out=str(out), plots=False, jobs=1)
    result = run_scenario(scenario, options)
    assert result.exact and result.strategies == ["multicast", "ideal"] and result.jobs == 1
    assert sorted(os.listdir(out)) == [
        "links.csv", "plans.json", "report.html", "report.json", "summary.md", "timeline.csv",
    ]  # fmt: skip
    assert json.loads((out / "report.json").read_text()) == result.report
    assert list(result.report["strategies"]) == list(result.timings) == ["multicast", "ideal"]
    lines = run_lines(scenario, options, result, 1.0)
    assert lines[0] == "figure1: 3 subscriptions, 60 s, engine local" and lines[-1].startswith(f"wrote {out}")
    assert result.plots == [] and "plots" not in lines[-1]
