"""Pane trees live (docs/LIVE.md, "Records"; docs/ACCOUNTING.md, "Panes"): the source's super-peer folds the
input of aggregate subscriptions sharing panes, the pane rows cross the tree's links and each reader's
super-peer combines its records from them, and a live run reports what the local engine does: the traffic
per link, the operator's input, every record delivered, dropped or lost with its latency, the pane rows
dropped before a reader's super-peer, and the processors' tallies, also on failures and on a run stopped
mid-pane.  A reader whose records live mode cannot ship (an aggregate subscribed at run time) reads the
tree's input instead, and the tree keeps serving the others."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

import peers.live.coordinator as coordinator_module
from matcher import parse_query
from peers.live.client import subscribe
from peers.live.connection import Broker
from peers.live.coordinator import Coordinator
from peers.live.plans import PlanBook
from peers.live.records import aggregated_at, input_served
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.local import run_local
from reports.live import live_report
from reports.report import build_report
from tests import test_pane_eras
from tests.live.test_live_records import assert_same_records
from tests.live.test_live_serve import _clock_started, _counts
from tests.test_aggregates import with_aggregates
from tests.test_pane_flows import Q2, _fragments, _plan, _scenario, hard_photon_cells, regions_and_sky
from topologies.expected import expected_results
from topologies.model import NetworkEvent, Scenario


def _busy(scenario: Scenario) -> Scenario:
    """Every processor limited, the source's busy (a pane row costs it 0.6 s) with an input buffer that
    drops: the rows wait behind the tuples, and the input folded into them is dropped at times."""
    cpus = tuple((sp, 40_000.0 if sp == "SP4" else 1e6) for sp in scenario.super_peers)
    return replace(scenario, cpus=cpus, input_buffers=(("SP4", 300.0),))


def _planned() -> Scenario:
    """The scenario where the planner shares panes (tests/test_pane_flows.py): Q1 and Q2 over 10 s windows of
    equivalent WHEREs, besides an aggregate with an implied WHERE and one with a MEDIAN, which keep records
    of their own."""
    scenario = with_aggregates(_scenario(), {"Q2": Q2.replace("WINDOW 20 s SLIDE 5 s", "WINDOW 10 s")})
    implied = parse_query("SELECT COUNT(*) FROM stream0 WHERE a BETWEEN 20 AND 50 WINDOW 10 s")
    median = parse_query("SELECT MEDIAN(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 10 s")
    first = scenario.subscriptions[0]
    extra = [replace(first, id="Q4", query=implied), replace(first, id="Q5", query=median)]
    return replace(scenario, subscriptions=(*scenario.subscriptions, *extra))


def _failing() -> Scenario:
    """SP5 -> SP6 down while the rows of Q2's panes cross it, and the source's super-peer down for 3 s: rows
    lost on the way, and rows whose input was lost."""
    events = (
        NetworkEvent(20.005, "fail", "link", ("SP5", "SP6")),
        NetworkEvent(30.005, "recover", "link", ("SP5", "SP6")),
        NetworkEvent(35.005, "fail", "super_peer", ("SP4",)),
        NetworkEvent(38.005, "recover", "super_peer", ("SP4",)),
    )
    return replace(_scenario(), events=events)


def _regions() -> Scenario:
    """Photon counts per sky region and over the whole sky (tests/test_pane_flows.py): one pane tree grouped by
    region, several rows closing at once, the whole sky's records rolled up from its regions' rows."""
    return regions_and_sky(("Q1", "Q2"))


def _overlapping(bandwidth: float | None = None) -> Scenario:
    """Q1 (a in [20, 60]) and Q2 (a in [40, 80]) reading fragments of figure 1 (tests/test_pane_flows.py,
    ``_fragments``), besides the selection Q3; ``bandwidth``: SP5 -> SP6 that slow."""
    q2 = "SELECT COUNT(*), MAX(c), AVG(c) FROM stream0 WHERE a BETWEEN 40 AND 80 WINDOW 10 s"
    return with_aggregates(_scenario(bandwidth), {"Q2": q2})


def _photon_cells() -> Scenario:
    """Hard photons per region over the sky and below dec 85, at two subscribers each: the planners give
    them one tree of fragments (tests/test_pane_flows.py)."""
    return hard_photon_cells(("Q1", "Q2"))


def _by_cells(scenario: Scenario):
    return _fragments(scenario)[0]


CASES = {
    # name: (scenario, strategy, the hand-made plan of tests/test_pane_flows.py to serve instead, if any)
    "hand": (_scenario, "sharing-em", _plan),
    "slow link": (lambda: _scenario(25_000.0), "sharing-em", _plan),  # SP5 -> SP6 drops pane rows
    "processors": (lambda: _busy(_scenario()), "sharing-em", _plan),
    "failing": (_failing, "sharing-em", _plan),  # on the hand-made plan: what crosses a failed element is lost
    "ideal": (_planned, "ideal", None),
    "sharing-em": (_planned, "sharing-em", None),
    "regions": (_regions, "sharing-em", None),
    "cells": (_overlapping, "sharing-em", _by_cells),  # a row per pane and cell, branches keeping their cells
    "cells, slow link": (lambda: _overlapping(25_000.0), "sharing-em", _by_cells),
    "cells planned": (_photon_cells, "sharing-em", None),
    "cells, processors": (lambda: _busy(_overlapping()), "sharing-em", _by_cells),  # telling cells costs too
    "eras": (test_pane_eras._scenario, "sharing-em", test_pane_eras._plan),  # widened mid-pane, then narrowed
    # groups added as a reader comes
    "eras planned": (lambda: test_pane_eras._late_regions(("Q1", "Q2")), "sharing-em", None),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_served_pane_trees_are_the_simulated_ones(mosquitto, monkeypatch, case):
    make, strategy, by_hand = CASES[case]
    scenario = make()
    if by_hand is not None:
        monkeypatch.setattr(coordinator_module, "make_plan", lambda scenario, *_: by_hand(scenario))
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy=strategy, speed=20))
    assert any(f.panes is not None for e in result.plan.epochs for f in e.flows)
    local = run_local(scenario, result.plan)
    report = live_report(result)
    live = report["strategies"][strategy]
    # (the hand-made plans leave the selection Q3 inexact while SP4 is down, or undelivered, in either engine)
    assert result.lost == {} and (report["exact"] or case == "failing" or by_hand is _by_cells)
    simulated = build_report(scenario, {strategy: local}, engine="local")["strategies"][strategy]
    assert _counts(live) == _counts(simulated)  # every link's bytes and tuples, every subscription's counts
    assert_same_records(result.run, local)
    assert result.run.access_link_bytes == local.access_link_bytes
    subs = {s["id"]: s for s in live["subscriptions"]}
    assert subs["Q1"]["aggregated_at"] == subs["Q2"]["aggregated_at"] == local.aggregated_at["Q1"]
    assert len(result.run.record_delivered["Q1"]) > 0
    if case == "slow link":  # pane rows dropped on SP5 -> SP6 take Q2's records
        assert (result.run.record_dropped["Q2"] < 0).any() and subs["Q2"]["dropped"] > 0
    if "processors" in case:  # the pane operator's folds and rows charged, the input it dropped accounted for
        assert subs["Q1"]["input"]["dropped"] > 0
        for sp, tally in local.processors.items():
            found = result.run.processors[sp]
            assert (found.ops, found.delay_ticks, found.jobs, found.dropped) == (
                tally.ops, tally.delay_ticks, tally.jobs, tally.dropped
            ), sp  # fmt: skip
    if case == "failing":  # rows lost on SP5 -> SP6 take Q2's records, input lost at SP4 takes both's
        assert (result.run.record_lost["Q2"] < 0).any() and subs["Q1"]["input"]["lost"] > 0
    for entry in [report["live"]["latency"]["overall"], *report["live"]["latency"]["subscriptions"].values()]:
        assert entry["live"]["count"] == entry["simulated"]["count"]
        for q in ("p50", "p99") if entry["live"]["count"] else ():
            assert entry["live"][q] == pytest.approx(entry["simulated"][q], abs=1e-9), (q, entry)


def test_a_reader_whose_records_cannot_be_shipped_reads_the_input_twins_of_the_tree(monkeypatch):
    # Q2 subscribed at run time, say: its records cannot be known before the clock starts, so it reads tuple
    # flows carrying the tree's input along the tree's paths, and Q1 keeps its records combined from panes
    scenario = _scenario()
    plan = _plan(scenario)
    assert input_served(plan, set()) is plan and input_served(plan, {"Q3"}) is plan
    served = input_served(plan, {"Q2"}).check(scenario)
    assert served.epochs[0] == plan.epochs[0]  # Q2 not there yet
    flows = {f.id: f for f in served.epochs[1].flows}
    assert [f for f in flows if f.startswith("F0") or f.startswith("F2")] == ["F0", "F0:input", "F2:input"]
    assert flows["F0:input"].panes is None and flows["F2:input"].parent == "F0:input"
    assert flows["F2:input"].path == ("SP5", "SP6") and flows["F1"].panes is not None
    assert next(d for d in served.epochs[1].deliveries if d.subscription == "Q2").flow == "F2:input"
    assert aggregated_at(plan) == {"Q1": "SP4", "Q2": "SP4"} and aggregated_at(served) == {"Q1": "SP4"}
    report = build_report(scenario, {"x": run_local(scenario, served)}, engine="local")
    assert report["exact"]
    # the plan of a run until a signal (no subscription's records are known beforehand): twins only
    monkeypatch.setattr(coordinator_module, "make_plan", lambda scenario, *_: _plan(scenario))
    coordinator = Coordinator(scenario, "sharing-em", Broker("127.0.0.1", 1), Topics(), 1.0, PlanBook(scenario), None)
    forever = coordinator.book.versions[0].plan
    assert all(f.panes is None for e in forever.epochs for f in e.flows) and aggregated_at(forever) == {}


async def test_an_aggregate_subscribed_at_run_time_reads_the_input_twins_of_a_pane_tree(mosquitto):
    # it shares the WHERE and windows of Q1 and Q2, whose pane tree the ideal plan grows to its subscriber:
    # served its input there, its client prints its records, and Q1 and Q2 keep theirs combined from panes
    scenario = _planned()
    broker = Broker.parse(mosquitto.url)
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, strategy="ideal", speed=10)))
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    rows: list[str] = []
    query = "SELECT COUNT(*), AVG(c) FROM stream0 WHERE a >= 20 AND a <= 60 WINDOW 10 s"
    client = subscribe(
        broker, Topics(), "P3", query, count=2, timeout=60, as_json=True, out=rows.append, info=lambda _: None,
        sub_id="A1",
    )  # fmt: skip
    assert await asyncio.wait_for(client, 90) == 2
    result = await served
    plan = result.plan
    assert any(f.id.endswith(":input") for e in plan.epochs for f in e.flows)
    local = run_local(result.scenario, plan)
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    simulated = build_report(result.scenario, {"ideal": local}, engine="local")["strategies"]["ideal"]
    assert _counts(report["strategies"]["ideal"]) == _counts(simulated)
    assert_same_records(result.run, local)
    subs = {s["id"]: s for s in report["strategies"]["ideal"]["subscriptions"]}
    assert subs["A1"]["aggregated_at"] is None and subs["A1"]["delivered"] >= 2
    expected = expected_results(result.scenario).records["A1"]
    assert [json.loads(row)["window"] for row in rows] == sorted(w for w, _ in expected)[:2]
    assert subs["Q1"]["aggregated_at"] == subs["Q2"]["aggregated_at"] == "SP4"


async def test_a_stopped_run_ships_the_rows_of_the_panes_it_cut_short(mosquitto, monkeypatch):
    # the pane straddling the end holds the tuples emitted before it: its rows are those of the run as it
    # ran, completed by their last input tuple before the end, as the simulator of that run has them
    monkeypatch.setattr(coordinator_module, "make_plan", lambda scenario, *_: _plan(scenario))
    scenario = _scenario()
    stop = asyncio.Event()
    served = asyncio.create_task(serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=10), stop))
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    await asyncio.sleep(0.8)
    stop.set()
    result = await served
    final = result.scenario
    assert 10.0 < final.duration < 50.0 and final.duration % 5.0 != 0.0
    local = run_local(final, result.plan)
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    simulated = build_report(final, {"sharing-em": local}, engine="local")["strategies"]["sharing-em"]
    assert _counts(report["strategies"]["sharing-em"]) == _counts(simulated)
    assert_same_records(result.run, local)
