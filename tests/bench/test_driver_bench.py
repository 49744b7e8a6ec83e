"""``bench driver`` end to end on a small scenario: both runs exact, peaks measured, ratios printed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_driver_bench_measures_both_runs_and_their_ratio():
    command = [sys.executable, "run.py", "bench", "driver", "--scenario", "topologies/figure1.yaml", "--factor", "2"]
    done = subprocess.run(
        [*command, "--strategy", "sharing-em", "--master", "local[2]", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    small, full = result["rows"]
    assert (small["tuples"], full["tuples"]) == (3000, 6000)
    assert small["exact"] and full["exact"] and full["backbone_tuples"] > small["backbone_tuples"]
    assert all(r["driver_python_peak_mib"] > 50 and r["driver_jvm_peak_mib"] > 50 for r in (small, full))
    assert result["jvm_full_over_small"] == full["driver_jvm_peak_mib"] / small["driver_jvm_peak_mib"]
