"""``bench cpu``: one JSON object with every cost step against the box-test baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from topologies.model import CpuCosts

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_bench_prints_every_step_against_the_defaults():
    out = subprocess.run(
        [sys.executable, "run.py", "bench", "cpu", "--tuples", "20000", "--repeat", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    result = json.loads(out.stdout)
    defaults = CpuCosts()
    assert result["tuples"] == 20000 and result["baseline"] == "box"
    assert set(result["steps"]) == {"box", "projection", "aggregate", "record"}
    assert {k: v["operations_default"] for k, v in result["steps"].items()} == {
        "box": defaults.box, "projection": defaults.projection, "aggregate": defaults.aggregate,
        "record": defaults.record,
    }  # fmt: skip
    assert result["steps"]["box"]["operations_measured"] == defaults.box  # the baseline, by definition
    assert result["records"] > 0 and result["cpu_of_one_core"] > 0
