"""Starting a run: a coordinator that gives up on the super-peers ends ``serve`` with its error (it used to
leave ``serve`` waiting for a clock that never started), a process parses a plan message once, and a run
ignores what an earlier run on the same broker left retained."""

from __future__ import annotations

import asyncio

import pytest

from peers.live import plans
from peers.live.connection import Broker
from peers.live.plans import plan_message
from peers.live.serve import ServeOptions, serve
from reports.live import live_report
from sharing import make_plan
from topologies.errors import EngineError
from topologies.loader import load_scenario


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
