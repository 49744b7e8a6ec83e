"""Starting a run: a coordinator that gives up on the super-peers ends ``serve`` with its error (it used to
leave ``serve`` waiting for a clock that never started), a process parses a plan message once, and a run
ignores what an earlier run on the same broker left retained; a node process that exits before the clock
starts stops ``serve`` at once, with one error line and a report."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from peers.live import plans
from peers.live.connection import Broker
from peers.live.plans import plan_message
from peers.live.serve import CREDENTIALS_ENV, ServeOptions, serve
from reports.live import live_report
from sharing import make_plan
from topologies.errors import EngineError
from topologies.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")


async def test_serve_fails_at_once_when_the_super_peers_never_load_the_plan(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    options = ServeOptions(Broker.parse(mosquitto.url), speed=20, ready_timeout_s=0.0)
    with pytest.raises(EngineError, match="super-peers without the plan after 0 s"):
        await asyncio.wait_for(serve(scenario, options), timeout=20)


def test_plan_book_parses_a_repeated_plan_message_once(monkeypatch):
    scenario = load_scenario("topologies/figure1.yaml")
    message = plan_message(0, scenario, make_plan(scenario, "sharing-em"))
    parsed = []
    decode = plans.json_object
    monkeypatch.setattr(plans, "json_object", lambda payload, who: parsed.append(len(payload)) or decode(payload, who))
    book = plans.PlanBook(scenario)
    first = book.add(message)
    # the other nodes of the process receive their own copy of the retained message
    assert book.add(bytes(bytearray(message))) is first
    assert parsed == [len(message)]
    assert first.plan == make_plan(scenario, "sharing-em")
    assert first.scenario.subscriptions == scenario.subscriptions


async def test_a_second_run_on_the_same_broker_ignores_the_first_runs_retained_clock_and_plan(mosquitto):
    scenario = load_scenario("topologies/figure1.yaml")
    options = ServeOptions(Broker.parse(mosquitto.url), speed=40)
    first = await serve(scenario, options)
    # the broker still holds the first run's retained clock (started, horizon past the end) and plan
    second = await serve(scenario, options)
    reports = [live_report(first), live_report(second)]
    assert reports[0]["exact"] and reports[1]["exact"]
    assert second.lost == {}
    for key in ("backbone_bytes", "access_bytes"):
        assert reports[1]["strategies"]["sharing-em"][key] == reports[0]["strategies"]["sharing-em"][key]


def test_a_node_process_that_exits_before_the_clock_stops_serve_at_once_with_a_report(mosquitto, tmp_path):
    # the node processes read their logins from the environment: unreadable there, they exit at start
    env = {**os.environ, CREDENTIALS_ENV: "{"}
    out = tmp_path / "live"
    command = [sys.executable, str(ROOT / "run.py"), "serve", str(ROOT / "topologies" / "figure1.yaml")]
    command += ["--broker", mosquitto.url, "--processes", "2", "--out", str(out), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    served = [line for line in result.stderr.splitlines() if "before the clock started" in line]
    assert len(served) == 1 and served[0].startswith("error: the process of super-peers ")
    assert served[0].endswith(
        f"exited (exit code 1) before the clock started; the run stopped with nothing emitted (report in {out})"
    )
    report = json.loads((out / "report.json").read_text())
    exited = report["live"]["exited_before_start"]
    assert exited and set(exited.values()) == {1} and set(exited) <= set(load_scenario(FIGURE1).super_peers)
    assert report["live"]["startup_s"] is None and report["strategies"]["sharing-em"]["backbone_bytes"] == 0
