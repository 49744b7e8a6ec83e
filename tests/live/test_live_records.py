"""Record flows live (docs/LIVE.md, "Records"): query-shipping aggregates an aggregate subscription's input at
the source's super-peer and ships the records, and a live run reports what the local engine does: the
operator's input, every record delivered, dropped or lost with its latency, the traffic and the processors'
tallies; a stopped run and an unsubscription ship only the records of the windows that still close in time;
an aggregate subscribed at run time, over an --input stream or in a run until a signal is served its input."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import numpy as np
import pytest

import peers.live.coordinator as coordinator_module
from peers.live.client import subscribe, unsubscribe
from peers.live.connection import Broker
from peers.live.coordinator import Coordinator
from peers.live.plans import PlanBook
from peers.live.records import record_flows
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.local import run_local
from reports.live import live_report
from reports.report import build_report
from tests.live.test_live_events import _static_plan
from tests.live.test_live_serve import _clock_started, _counts
from tests.test_aggregates import with_aggregates
from tests.test_record_flows import _congested, figure1_aggregates
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import NetworkEvent

STRATEGY = "query-shipping"
RECORD_FIELDS = ("record_delivered", "record_dropped", "record_lost")


def _grouped():
    """figure1 with a group attribute ``g``, Q1's subscriber at the source's super-peer (its records cross no
    backbone link), Q1 a count window and Q2 a sliding time window with HAVING, both grouped, and the
    source's processor busy with a small input buffer."""
    scenario = load_scenario(
        "topologies/figure1.yaml",
        [("streams[0].schema.g", {"type": "int", "distribution": {"uniform": [0, 3]}}),
         ("thin_peers[1]", {"id": "P1", "attach": "SP4"})],
    )  # fmt: skip
    scenario = with_aggregates(scenario, {
        "Q1": "SELECT g, COUNT(*), AVG(c) FROM stream0 WHERE a BETWEEN 20 AND 60 GROUP BY g WINDOW 7 TUPLES SLIDE 3"
        " TUPLES",
        "Q2": "SELECT g, MAX(c) FROM stream0 WHERE a < 50 GROUP BY g WINDOW 4 s SLIDE 1 s HAVING MAX(c) > 60",
    })  # fmt: skip
    cpus = tuple((sp, 40_000.0 if sp == "SP4" else 1e6) for sp in scenario.super_peers)
    return replace(scenario, cpus=cpus, input_buffers=(("SP4", 300.0),))


def _failing():
    """figure1's aggregates with SP5 -> SP6 down while Q2's records of four windows cross it, and the source's
    super-peer down for 3 s (served on the plan without the events: what crosses a failed element is lost)."""
    events = (
        NetworkEvent(20.005, "fail", "link", ("SP5", "SP6")),
        NetworkEvent(30.005, "recover", "link", ("SP5", "SP6")),
        NetworkEvent(35.005, "fail", "super_peer", ("SP4",)),
        NetworkEvent(38.005, "recover", "super_peer", ("SP4",)),
    )
    return replace(figure1_aggregates(), events=events)


def assert_same_records(live, local) -> None:
    """The operator's input and the records of every aggregate subscription, live and simulated, are the same
    copies and records with the same latencies."""
    assert live.aggregated_at == local.aggregated_at and local.aggregated_at
    for sub in local.aggregated_at:
        assert np.array_equal(np.sort(live.delivered[sub]), np.sort(local.delivered[sub])), sub
        assert np.sort(live.latencies[sub]) == pytest.approx(np.sort(local.latencies[sub]), abs=1e-9), sub
        for fate in ("dropped", "lost"):
            mine, theirs = (np.sort(getattr(r, fate).get(sub, np.zeros(0, np.int64))) for r in (live, local))
            assert np.array_equal(mine, theirs), (sub, fate)
        for name in RECORD_FIELDS:
            mine, theirs = (getattr(r, name).get(sub, np.zeros(0, np.int64)) for r in (live, local))
            assert np.array_equal(mine, theirs), (sub, name)
        mine, theirs = (r.record_latencies.get(sub, np.zeros(0)) for r in (live, local))
        assert mine == pytest.approx(theirs, abs=1e-9), sub


def _report(scenario, run) -> dict:
    return build_report(scenario, {STRATEGY: run}, engine="local")["strategies"][STRATEGY]


@pytest.mark.parametrize("case", ["figure1", "congested", "grouped", "failing"])
async def test_served_record_flows_are_the_simulated_ones(mosquitto, monkeypatch, case):
    scenario = {"figure1": figure1_aggregates, "congested": lambda: _congested(figure1_aggregates()),
                "grouped": _grouped, "failing": _failing}[case]()  # fmt: skip
    if case == "failing":  # the routes stay: what crosses a failed element while it is down is lost
        monkeypatch.setattr(coordinator_module, "make_plan", _static_plan)
    result = await serve(scenario, ServeOptions(Broker.parse(mosquitto.url), strategy=STRATEGY, speed=20))
    local = run_local(scenario, result.plan)
    report = live_report(result)
    live = report["strategies"][STRATEGY]
    # (the plan without its events leaves the selection Q3 inexact while SP4 is down, in either engine)
    assert result.lost == {} and (report["exact"] or case == "failing")
    assert _counts(live) == _counts(_report(scenario, local))
    assert_same_records(result.run, local)
    q1, q2 = live["subscriptions"][:2]
    assert q1["aggregated_at"] == q2["aggregated_at"] == "SP4"
    # the access links carry the records that reached the thin-peers, and nothing else
    assert result.run.access_link_bytes == local.access_link_bytes
    for sub, peer in (("Q1", "P1"), ("Q2", "P2")):
        wire = scenario.tuple_bytes(1 + scenario.subscription(sub).query.record_values())
        shipped = len(result.run.record_delivered[sub])
        assert result.run.access_link_bytes[(scenario.home(peer), peer)] == shipped * wire and shipped > 0
    if case in ("congested", "grouped"):  # the processors did what the simulator's do, records built and all
        for sp, tally in local.processors.items():
            found = result.run.processors[sp]
            assert (found.ops, found.delay_ticks, found.jobs, found.dropped) == (
                tally.ops, tally.delay_ticks, tally.jobs, tally.dropped
            ), sp  # fmt: skip
    if case == "congested":  # records dropped at the slow link, and for inputs the busy processor dropped
        assert len(result.run.record_dropped["Q1"]) > 0 and q2["input"]["dropped"] > 0
    if case == "failing":
        assert len(result.run.record_lost["Q2"]) > 0 and q1["input"]["lost"] > 0
    # and every latency the local engine simulates
    for entry in [report["live"]["latency"]["overall"], *report["live"]["latency"]["subscriptions"].values()]:
        assert entry["live"]["count"] == entry["simulated"]["count"]
        for q in ("p50", "p99") if entry["live"]["count"] else ():
            assert entry["live"][q] == pytest.approx(entry["simulated"][q], abs=1e-9), (q, entry)


async def test_a_stop_and_an_unsubscription_cut_off_the_windows_closing_after_them(mosquitto):
    # and an aggregate subscribed at run time is served its input, its client printing the records
    scenario = figure1_aggregates()
    broker = Broker.parse(mosquitto.url)
    stop = asyncio.Event()
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, strategy=STRATEGY, speed=10), stop))
    await asyncio.wait_for(_clock_started(mosquitto.port), 60)
    rows: list[str] = []
    client = asyncio.create_task(subscribe(
        broker, Topics(), "P3", "SELECT COUNT(*) FROM stream0 WHERE a < 10 WINDOW 2 s", count=2, timeout=30,
        as_json=True, out=rows.append, info=lambda _: None, sub_id="A1",
    ))  # fmt: skip
    await asyncio.sleep(0.8)  # Q1 ends at the horizon (t = 20-25 s): windows closing later never ship
    await unsubscribe(broker, Topics(), "Q1")
    assert await client == 2
    stop.set()  # and the run at its horizon
    result = await served
    final = result.scenario
    assert final.subscription("Q1").until < 50.0 and final.duration < 60.0
    local = run_local(final, result.plan)
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    assert _counts(report["strategies"][STRATEGY]) == _counts(_report(final, local))
    assert_same_records(result.run, local)
    # the windows that closed by then, and none later
    expected = expected_results(final).records
    assert len(result.run.record_delivered["Q1"]) == len(expected["Q1"]) < 10
    assert len(result.run.record_delivered["Q2"]) == len(expected["Q2"]) <= 11
    a1 = next(s for s in report["strategies"][STRATEGY]["subscriptions"] if s["id"] == "A1")
    assert a1["aggregated_at"] is None and a1["delivered"] >= 2 and a1["input"]["delivered"] > 0
    assert [json.loads(row)["window"] for row in rows] == sorted(w for w, _ in expected["A1"])[:2]


def _coordinator(scenario, **options) -> Coordinator:
    end = options.pop("end", 60.0)
    return Coordinator(scenario, STRATEGY, Broker("127.0.0.1", 1), Topics(), 1.0, PlanBook(scenario), end, **options)


def test_aggregates_whose_records_no_node_knows_beforehand_are_served_their_input():
    # records are the central evaluation's: a run until a signal has no end to evaluate up to, an --input
    # stream's values come at run time; their aggregates get their input, delivered whole
    scenario = figure1_aggregates()
    assert record_flows(_coordinator(scenario).book.versions[0].plan) == {"Q1": "SP4", "Q2": "SP4"}
    for options in ({"end": None}, {"inputs": frozenset({"stream0"})}):
        plan = _coordinator(scenario, **options).book.versions[0].plan
        assert record_flows(plan) == {}
        flow = plan.epoch_at(20.0).flow("records.Q1")
        assert flow.aggregate is None and flow.path == ("SP4", "SP5", "SP1")


def test_an_aggregate_subscribed_at_run_time_is_served_its_input():
    coordinator = _coordinator(figure1_aggregates())
    coordinator.horizon = 12.0
    coordinator.subscribe("P3", "SELECT COUNT(*) FROM stream0 WHERE a < 10 WINDOW 5 s")
    coordinator.horizon = 30.0
    coordinator.unsubscribe("Q2")  # a re-plan serves it its input too
    for version in (1, 2):
        plan = coordinator.book.versions[version].plan
        assert record_flows(plan) == {"Q1": "SP4", "Q2": "SP4"}
        flow = plan.epoch_at(20.0).flow("records.L1")  # its input, to its subscriber, delivered whole
        assert flow.aggregate is None and flow.path == ("SP4", "SP5", "SP1", "SP3")
