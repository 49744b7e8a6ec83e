"""A real Spark standalone cluster (master + one worker on 127.0.0.1): the CLI's report equals the local one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCENARIO = "topologies/sensor-grid.yaml"  # replays a CSV file, which the executors must find too


def _run(tmp_path, *engine: str) -> dict:
    out = tmp_path / "-".join(engine).replace("/", "_").replace(":", "_")
    done = subprocess.run(
        [sys.executable, "run.py", "run", SCENARIO, *engine, "--out", str(out), "--no-plots", "--quiet"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_a_standalone_cluster_produces_the_local_report(standalone_master, tmp_path):
    local = _run(tmp_path, "--engine", "local")
    cluster = _run(tmp_path, "--engine", "spark", "--spark-master", standalone_master)
    assert cluster["engine"] == "spark"
    assert {**cluster, "engine": "local"} == local


def test_bench_scale_measures_every_row_and_the_machine_on_a_cluster(standalone_master):
    bench = ["bench", "spark", "--scale", "--scenario", "topologies/figure1.yaml", "--chunks", "2", "--repeat", "1"]
    done = subprocess.run(
        [sys.executable, "run.py", *bench, "--cluster", standalone_master, "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    rows = {(row["master"], row["cores"]): row for row in result["rows"]}
    assert set(rows) == {("local", 1), ("local[2]", 2), ("cluster", 1), ("cluster", 2)}
    assert all(row["tuple_hops_per_s"] > 0 for row in rows.values())
    assert result["speedup_2_over_1_cores"] == rows[("cluster", 1)]["seconds"] / rows[("cluster", 2)]["seconds"]
    machine = result["machine"]
    assert len(machine["rounds"]) == 1 and machine["two_over_one"] == 2 * machine["alone_s"] / machine["pair_s"]
    assert machine["pair_s"] > 0 and machine["alone_s"] > 0
