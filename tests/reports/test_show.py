"""``run.py show``: a written report in the terminal, per link or per subscription, sorted; and ``run.py
plan``'s progress and summary on stderr, its stdout still the plan alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reports.runner import RunOptions, run_scenario
from reports.show import show
from topologies.errors import InputError
from topologies.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("show") / "r"
    options = RunOptions(strategies=("query-shipping", "sharing-em"), out=str(out), plots=False, jobs=1)
    return out, run_scenario(load_scenario(FIGURE1), options).report


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[2:] if not line.startswith("...")]


def test_links_sorted_by_bytes_with_access_links(written):
    out, report = written
    rows = _rows(show(str(out), "links", "sharing-em", None, False, None))
    entry = report["strategies"]["sharing-em"]
    assert len(rows) == len(entry["links"]) + len(entry["access_links"])
    assert [int(r[3]) for r in rows] == sorted((int(r[3]) for r in rows), reverse=True)
    assert rows[0][:3] == ["access", "P0", "SP4"]  # the source's upload: every tuple, every attribute
    top = show(str(out), "links", None, "query-shipping", True, 2)
    assert top.splitlines()[0].split() == ["kind", "from", "to", "query-shipping", "sharing-em"]
    assert top.splitlines()[-1].startswith("... ") and len(_rows(top)) == 2


def test_subscriptions_of_one_strategy_or_all(written):
    out, _ = written
    rows = _rows(show(str(out / "report.json"), "subscriptions", "sharing-em", "expected", True, None))
    assert [r[0] for r in rows] == ["Q2", "Q3", "Q1"] and all(r[-1] == "yes" for r in rows)
    every = _rows(show(str(out), "subscriptions", None, None, False, None))
    assert every[0] == ["Q1", "965", "965", "965"]
    for bad, message in [({"strategy": "ideal"}, "not in this report"), ({"sort": "colour"}, "not a column")]:
        with pytest.raises(InputError, match=message):
            show(str(out), "links", bad.get("strategy"), bad.get("sort"), False, None)


def test_plan_says_what_it_planned_on_stderr_only():
    run = [sys.executable, str(ROOT / "run.py"), "plan", FIGURE1, "--json"]
    result = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and json.loads(result.stdout)["strategy"] == "sharing-em"
    summary = result.stderr.splitlines()[-1]
    assert (
        summary == "plan: sharing-em on figure1: 5 epochs, 5 decisions, 10 distinct flows and 7 distinct deliveries,"
        " 0 rejected; printed as JSON"
    )
    quiet = subprocess.run([*run, "--quiet"], capture_output=True, text=True, timeout=120)
    assert quiet.stderr == "" and quiet.stdout == result.stdout
