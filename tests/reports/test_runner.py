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


def test_progress_counts_the_scenarios_tuples_once_per_strategy(tmp_path):
    import io

    from reports.progress import Status

    stream = io.StringIO()
    with Status("run", 6000 * 7, "tuple", "lines", stream=stream, of="6,000 tuples x 7 strategies") as status:
        status.update(18_900, "sharing-em: planning")
        assert status.text() == "45% of 6,000 tuples x 7 strategies; sharing-em: planning"


def test_the_kernels_are_in_numbas_cache_after_a_run():
    from network.queues import kernels_cached
    from reports.runner import warm_up

    warm_up()  # (seconds when compiled before, as make venv did)
    assert kernels_cached()


@pytest.mark.slow
def test_a_first_run_says_it_compiles_the_kernels_once(tmp_path):
    """From an empty numba cache (a fresh install that skipped make venv's warm-up): the run says what it
    compiles and how long it takes, compiles once before the worker processes fork, and the next run does not."""
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "STREAMGLOBE_PROGRESS_S": "60"}
    command = [sys.executable, "run.py", "run", FIGURE1, "--out", str(tmp_path / "out"), "--force", "--no-plots"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "run: compiling the simulator's kernels (numba), once: about 20 s" in first.stderr
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0 and "compiling" not in second.stderr
