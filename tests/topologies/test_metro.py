"""topologies/metro.yaml, the scale scenario: the sizes its header promises, and its header's command writes it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from itertools import takewhile
from pathlib import Path

import pytest

from topologies.loader import load_scenario
from topologies.workload import tuple_count

ROOT = Path(__file__).resolve().parents[2]
METRO = ROOT / "topologies" / "metro.yaml"


def header() -> str:
    with METRO.open(encoding="utf-8") as handle:
        return "".join(takewhile(lambda line: line.startswith("#"), handle))


@pytest.fixture(scope="module")
def metro():
    return load_scenario(str(METRO))


def test_metro_has_the_sizes_its_header_promises(metro):
    assert metro.name == "metro"
    assert metro.warnings == ()
    assert (len(metro.super_peers), len(metro.links), len(metro.thin_peers)) == (1000, 1823, 2010)
    assert (len(metro.streams), len(metro.subscriptions)) == (10, 5000)
    leaving = [s for s in metro.subscriptions if s.until is not None]
    assert len(leaving) == 1730
    assert sum(s.until < metro.duration for s in leaving) == 1473
    assert [tuple_count(s, metro.duration) for s in metro.streams] == [200_000] * 10
    text = " ".join(line.removeprefix("#").strip() for line in header().splitlines())
    assert text.startswith("metro: 1000 super-peers (generated transit-stub), 10 streams, 5000 subscriptions ")
    assert "1730 carry an until (1473 of them before the run ends)" in text
    assert text.endswith("= 2000000 tuples.")


def test_the_header_command_writes_the_file_byte_for_byte(tmp_path):
    (command,) = [line[4:] for line in header().splitlines() if line.startswith("#   python ")]
    program, *args = shlex.split(command)
    assert (program, args[:2], args[-2:]) == ("python", ["-m", "topologies.scale"], ["--out", "topologies/metro.yaml"])
    # run verbatim from a scratch directory standing in for the repository root, so --out lands there
    (tmp_path / "topologies").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, check=True)
    assert (tmp_path / "topologies" / "metro.yaml").read_bytes() == METRO.read_bytes()
