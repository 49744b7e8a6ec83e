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
