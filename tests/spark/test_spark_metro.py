"""The Spark engine past what its driver could hold: metro.yaml (1,000 super-peers, 5,000 subscriptions,
2,000,000 tuples) with the driver's JVM capped at 512 MB, on local[2] and on a standalone cluster.

The multicast plan's channels carry about 670 million tuple-hops and deliver millions of copies; an
engine that brought per-tuple records or latencies to the driver would not fit there.  The CLI runs the
whole job, and the report must be exact (every subscription got exactly its expected tuples), equal
between the two masters, and equal to the local engine's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.spark.conftest import LOCAL_MASTER

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCENARIO = "topologies/metro.yaml"
STRATEGY = "multicast"
SMALL_DRIVER = "spark.driver.memory=512m"


def _run(out, *engine: str) -> dict:
    command = [sys.executable, "run.py", "run", SCENARIO, "--strategy", STRATEGY, *engine, "--out", str(out)]
    done = subprocess.run(
        [*command, "--no-plots", "--quiet"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def local_report(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("metro-local"), "--engine", "local")


def _assert_exact_and_local(report: dict, local: dict) -> None:
    entry = report["strategies"][STRATEGY]
    subscriptions = entry["subscriptions"]
    assert len(subscriptions) == 5000
    assert sum(s["expected"] for s in subscriptions) > 1_000_000
    assert all(s["missing"] == 0 and s["extra"] == 0 for s in subscriptions)
    assert report["engine"] == "spark"
    assert {**report, "engine": "local"} == local


def test_metro_on_local_spark_with_a_512_mb_driver(local_report, tmp_path):
    report = _run(tmp_path, "--engine", "spark", "--spark-master", LOCAL_MASTER, "--spark-conf", SMALL_DRIVER)
    _assert_exact_and_local(report, local_report)


def test_metro_on_a_standalone_cluster_with_a_512_mb_driver(local_report, standalone_master, tmp_path):
    report = _run(tmp_path, "--engine", "spark", "--spark-master", standalone_master, "--spark-conf", SMALL_DRIVER)
    _assert_exact_and_local(report, local_report)
