"""Pane flows (docs/ACCOUNTING.md, "Panes"; docs/PLANNER.md, "Aggregate subscriptions"): aggregate
subscriptions with equivalent WHEREs and the same groups read one flow of partial states per pane and
group, folded once at the source's super-peer, and combine their records at their own super-peers.  Exact
bytes by hand, pane rows dropped on the way accounted for as the records they feed, the same run whatever
the batch window, the plan rules, which subscriptions the planner groups, and the ideal bound sharing."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Predicate, parse_condition, parse_query
from matcher.aggregate import pane_length
from network.emulated import link_specs
from network.linkrule import TICKS, service, to_ticks
from network.routing import Network
from peers.aggregation import pane_rows
from peers.local import run_local
from reports.report import build_report
from sharing import make_plan
from sharing.cost import CostModel
from sharing.panes import pane_classes
from sharing.plan import Delivery, Epoch, Flow, Panes, Plan, plan_from_wire
from tests.test_aggregates import FIGURE1, assert_accounted, with_aggregates
from topologies.errors import PlanError
from topologies.loader import load_scenario
from topologies.model import Scenario

Q1 = "SELECT COUNT(*), AVG(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 10 s"
Q2 = "SELECT COUNT(*), MAX(c), AVG(c) FROM stream0 WHERE a >= 20 AND a <= 60 WINDOW 20 s SLIDE 5 s"
WHERE = parse_condition("a BETWEEN 20 AND 60")
PANES = Panes(Fraction(5), (), (("max", "c"), ("sum", "c")))


def _scenario(bandwidth: float | None = None) -> Scenario:
    """Figure 1 with Q1 and Q2 aggregates of one input (Q2 over [10, 45)), and Q3 every tuple of the
    stream at Q2's thin-peer; ``bandwidth``: SP5 -> SP6 that slow, with a small buffer."""
    scenario = with_aggregates(load_scenario(FIGURE1), {"Q1": Q1, "Q2": Q2, "Q3": "SELECT a, b, c FROM stream0"})
    subs = list(scenario.subscriptions)
    subs[2] = replace(subs[2], peer="P2", at=0, until=None)
    scenario = replace(scenario, subscriptions=tuple(subs))
    if bandwidth is not None:
        slow = [replace(link, bandwidth=bandwidth, buffer=300.0) if {link.a, link.b} == {"SP5", "SP6"} else link
                for link in scenario.links]  # fmt: skip
        scenario = replace(scenario, links=tuple(slow))
    return scenario


def _plan(scenario: Scenario, panes: Panes = PANES, where=WHERE, q2: Delivery | None = None) -> Plan:
    """A pane tree SP4 -> SP5, then SP5 -> SP1 (Q1) and SP5 -> SP6 (Q2, while it is registered); Q3's
    tuples SP4 -> SP5 -> SP6."""
    root = Flow("F0", "stream0", None, "SP4", ("SP4", "SP5"), where, ("c",), panes=panes)
    to_q1 = Flow("F1", "stream0", "F0", "SP5", ("SP5", "SP1"), Predicate.TRUE, ("c",), panes=panes)
    to_q2 = Flow("F2", "stream0", "F0", "SP5", ("SP5", "SP6"), Predicate.TRUE, ("c",), panes=panes)
    every = Flow("F3", "stream0", None, "SP4", ("SP4", "SP5", "SP6"), Predicate.TRUE, ("a", "b", "c"))
    d1 = Delivery("Q1", "P1", "SP1", "F1", Predicate.TRUE, ("c",))
    d2 = q2 or Delivery("Q2", "P2", "SP6", "F2", Predicate.TRUE, ("c",))
    d3 = Delivery("Q3", "P2", "SP6", "F3", Predicate.TRUE, ("a", "b", "c"))
    epochs = (
        Epoch(0, 10, (root, to_q1, every), (d1, d3)),
        Epoch(10, 45, (root, to_q1, to_q2, every), (d1, d2, d3)),
        Epoch(45, 50, (root, to_q1, every), (d1, d3)),
        Epoch(50, 60, (every,), (d3,)),
    )
    return Plan("panes by hand", scenario.name, epochs)


def _report(scenario: Scenario, plan: Plan, window: float | None = None) -> dict:
    return build_report(scenario, {"hand": run_local(scenario, plan, window=window)}, engine="local")


def test_a_pane_tree_carries_one_row_per_pane_on_each_link_and_every_reader_is_exact():
    scenario = _scenario()
    report = _report(scenario, _plan(scenario))
    assert_accounted(report)
    entry = report["strategies"]["hand"]
    q1, q2, _ = entry["subscriptions"]
    assert (q1["delivered"], q2["delivered"]) == (5, 4)  # Q1's 10 s windows in [0, 50); Q2's [10, 30) .. [25, 45)
    assert (q1["aggregated_at"], q2["aggregated_at"]) == ("SP4", "SP4")
    # a pane row: header + 8 x (pane, count, max(c), sum(c)); every 5 s pane holds tuples of the WHERE
    row = 16 + 8 * 4
    every = 16 + 8 * 3
    links = {(x["from"], x["to"]): x["bytes"] for x in entry["links"]}
    tuples = report["strategies"]["hand"]["subscriptions"][2]["delivered"]
    assert links[("SP4", "SP5")] == 10 * row + tuples * every  # panes of [0, 50)
    assert links[("SP5", "SP1")] == 10 * row
    assert links[("SP5", "SP6")] == 7 * row + tuples * every  # panes of [10, 45)
    down = {(a["from"], a["to"]): (a["tuples"], a["bytes"]) for a in entry["access_links"]}
    # the records cross the access links, as a record flow's do: Q1's 3 values, Q2's 4, besides the window
    assert down[("SP1", "P1")] == (5, 5 * (16 + 8 * 3))
    assert down[("SP6", "P2")][0] == 4 + tuples


def test_pane_rows_dropped_on_the_way_take_the_records_they_feed():
    scenario = _scenario(25_000.0)
    runs = [run_local(scenario, _plan(scenario), window=w) for w in (None, 0.37, 1.3)]
    report = build_report(scenario, {"hand": runs[0]}, engine="local")
    assert_accounted(report)
    q1, q2, q3 = report["strategies"]["hand"]["subscriptions"]
    assert q3["dropped"] > 0 and q2["dropped"] == 4 and q2["delivered"] == 0 and q1["delivered"] == 5
    # the meter heard of the pane rows that did not reach SP6, by their last input tuple
    assert (runs[0].record_dropped["Q2"] < 0).any()
    for run in runs[1:]:
        for field in ("record_delivered", "record_latencies", "record_dropped"):
            for sub in ("Q1", "Q2"):
                assert np.array_equal(getattr(run, field)[sub], getattr(runs[0], field)[sub]), (field, sub)


def test_pane_flow_rules():
    scenario = _scenario()
    network = Network.of(scenario)
    _plan(scenario).check(scenario, network)
    wrong = [
        (dict(where=parse_condition("a BETWEEN 20 AND 70")), "do not serve it"),  # implied, not equivalent
        (dict(panes=replace(PANES, length=Fraction(3))), "do not serve it"),  # no whole run of panes
        (dict(panes=replace(PANES, states=(("sum", "c"),))), "do not serve it"),  # MAX lacks its state
        (dict(panes=replace(PANES, states=(("max", "b"), ("sum", "c")))), "projects to"),
        (dict(q2=Delivery("Q2", "P2", "SP6", "F2", parse_condition("a > 1"), ("c",))), "do not serve it"),
    ]
    for change, message in wrong:
        with pytest.raises(PlanError, match=message):
            _plan(scenario, **change).check(scenario, network)
    # a tuple flow cannot read pane rows
    plan = _plan(scenario)
    epoch = plan.epochs[1]
    bad = Flow("F4", "stream0", "F0", "SP5", ("SP5", "SP6"), Predicate.TRUE, ("c",))
    broken = Plan("bad", scenario.name, (replace(epoch, flows=(*epoch.flows, bad)),))
    with pytest.raises(PlanError, match="carries pane rows"):
        broken.check(scenario, network)


def test_a_plan_with_pane_flows_goes_to_json_and_back(tmp_path):
    scenario = _scenario()
    plan = _plan(scenario)
    path = tmp_path / "plan.json"
    with open(path, "w") as out:
        plan.write_json(out)
    again = plan_from_wire(json.loads(path.read_text()))
    assert [f.panes for f in again.epochs[1].flows] == [PANES, PANES, PANES, None]
    assert any("PANES 5 s KEEPING max(c),sum(c)" in line for line in plan.text_lines())


def test_the_planner_groups_equivalent_wheres_and_the_ideal_shares_panes():
    # Q1 and Q2 (now over 10 s windows) share their input's panes (WHEREs written differently, one a
    # BETWEEN), which weigh less than their records on SP4 -> SP5; one with an implied WHERE and a MEDIAN
    # keep records of their own
    scenario = with_aggregates(_scenario(), {"Q2": Q2.replace("WINDOW 20 s SLIDE 5 s", "WINDOW 10 s")})
    implied = parse_query("SELECT COUNT(*) FROM stream0 WHERE a BETWEEN 20 AND 50 WINDOW 10 s")
    median = parse_query("SELECT MEDIAN(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 10 s")
    first = scenario.subscriptions[0]
    extra = [replace(first, id="Q4", query=implied), replace(first, id="Q5", query=median)]
    scenario = replace(scenario, subscriptions=(*scenario.subscriptions, *extra))
    network = Network.of(scenario)
    shipped = frozenset({"Q1", "Q2", "Q4", "Q5"})
    classes = pane_classes(scenario, network, shipped, CostModel(scenario))
    assert set(classes) == {"Q1", "Q2"}
    chosen = classes["Q1"]
    assert chosen.panes == replace(PANES, length=Fraction(10)) and chosen.members == ("Q1", "Q2")
    # with Q2's 5 s slide the panes are 5 s, twice the rows Q1's records are: records weigh less
    assert pane_classes(_scenario(), Network.of(_scenario()), frozenset({"Q1", "Q2"}), CostModel(scenario)) == {}
    for strategy in ("ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        assert any(f.panes is not None for e in plan.epochs for f in e.flows), strategy
        report = build_report(scenario, {strategy: run_local(scenario, plan)}, engine="local")
        assert_accounted(report)


def test_pane_length_is_the_gcd_of_sizes_and_slides():
    queries = [with_aggregates(_scenario(), {"Q1": q}).subscriptions[0].query for q in (
        "SELECT COUNT(*) FROM stream0 WINDOW 10 s", "SELECT COUNT(*) FROM stream0 WINDOW 7.5 s SLIDE 2.5 s",
        "SELECT COUNT(*) FROM stream0 WINDOW 20 s")]  # fmt: skip
    assert pane_length(q.window for q in queries) == Fraction(5, 2)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 30, allow_nan=False), st.integers(0, 3)), max_size=60),
    st.sampled_from([Fraction(1), Fraction(5, 2), Fraction(1, 10), Fraction(7)]),
)
def test_pane_rows_are_the_last_tuple_of_each_pane_and_group(points, length):
    points.sort(key=lambda p: p[0])
    times = np.array([t for t, _ in points], dtype=np.float64)
    groups = np.array([g for _, g in points], dtype=np.float64)
    last, panes = pane_rows(length, times, [groups])
    # plainly: per (pane, group), the greatest position, with the pane found by exact fractions
    want: dict[tuple[int, float], int] = {}
    for i, (t, g) in enumerate(points):
        want[(int(Fraction(t) // length), float(g))] = i
    assert sorted(want.values()) == last.tolist()
    assert [k[0] for k, _ in sorted(want.items(), key=lambda kv: kv[1])] == panes.tolist()


def photon_readers(readers: list[tuple[str, str, float, str]]) -> Scenario:
    """photon-survey's network and streams with only ``readers``, each ``(id, thin-peer, at, query)``,
    registered to the end, and no failures."""
    scenario = load_scenario("topologies/photon-survey.yaml")
    first = scenario.subscriptions[0]
    subs = tuple(
        replace(first, id=sub_id, peer=peer, at=at, until=None, query=parse_query(query))
        for sub_id, peer, at, query in readers
    )
    return replace(scenario, subscriptions=subs, events=())


def regions_and_sky(ids: tuple[str, str] = ("regions", "sky")) -> Scenario:
    """Photon counts per sky region and over the whole sky, at one subscriber."""
    per_region = "SELECT region, COUNT(*), AVG(energy), MAX(energy) FROM north GROUP BY region WINDOW 10 s"
    whole_sky = "SELECT COUNT(*), MAX(energy) FROM north WINDOW 20 s SLIDE 10 s"
    return photon_readers([(ids[0], "A0", 0, per_region), (ids[1], "A0", 5, whole_sky)])


def hard_photon_cells(ids: tuple[str, str] = ("h1", "h2")) -> Scenario:
    """Hard photons per region over the whole sky (``ids``) and below dec 85 (``l1``, ``l2``), at two
    subscribers each."""
    query = "SELECT region, COUNT(*) FROM north WHERE {} GROUP BY region WINDOW 10 s"
    readers = [(ids[0], "A0", "energy >= 1"), (ids[1], "A5", "energy >= 1"), ("l1", "A0", "energy >= 1 AND dec < 85"),
               ("l2", "A5", "energy >= 1 AND dec < 85")]  # fmt: skip
    return photon_readers([(sub_id, peer, 0, query.format(where)) for sub_id, peer, where in readers])


def test_coarser_groups_roll_up_from_a_pane_flow_grouped_finer():
    # photon counts per sky region and over the whole sky, at one subscriber: one pane flow grouped by
    # region serves both, the whole sky's records rolled up from its regions' partial states
    scenario = regions_and_sky()
    network = Network.of(scenario)
    classes = pane_classes(scenario, network, frozenset({"regions", "sky"}), CostModel(scenario))
    chosen = classes["sky"]
    assert chosen.members == ("regions", "sky") and chosen.panes.groups == ("region",)
    assert chosen.panes.length == 10 and chosen.panes.states == (("max", "energy"), ("sum", "energy"))
    for strategy in ("ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        assert {f.panes for e in plan.epochs for f in e.flows} == {chosen.panes}, strategy
        report = build_report(scenario, {strategy: run_local(scenario, plan)}, engine="local")
        assert_accounted(report)
        sky = report["strategies"][strategy]["subscriptions"][1]
        assert sky["delivered"] == sky["expected"] > 3


def _fragments(scenario: Scenario, keep_all: bool = False) -> tuple[Plan, Panes]:
    """Q1 (a in [20, 60]) and Q2 (a in [40, 80]) of figure 1 reading fragments: a row per pane and cell (a
    in [20, 40), [40, 60], (60, 80]) from SP4 to SP5, where each branch keeps the cells of its reader's
    WHERE (``keep_all``: both branches every cell)."""
    w1, w2 = parse_condition("a BETWEEN 20 AND 60"), parse_condition("a BETWEEN 40 AND 80")
    panes = Panes(Fraction(10), (), (("max", "c"), ("sum", "c")), (w1, w2))
    root = Flow("F0", "stream0", None, "SP4", ("SP4", "SP5"), w1.or_(w2), ("c",), panes=panes)
    keep = [Predicate.TRUE, Predicate.TRUE] if keep_all else [w1, w2]
    to_q1 = Flow("F1", "stream0", "F0", "SP5", ("SP5", "SP1"), keep[0], ("c",), panes=panes)
    to_q2 = Flow("F2", "stream0", "F0", "SP5", ("SP5", "SP6"), keep[1], ("c",), panes=panes)
    d1 = Delivery("Q1", "P1", "SP1", "F1", Predicate.TRUE, ("c",))
    d2 = Delivery("Q2", "P2", "SP6", "F2", Predicate.TRUE, ("c",))
    epochs = (Epoch(0, 10, (root, to_q1), (d1,)), Epoch(10, 45, (root, to_q1, to_q2), (d1, d2)),
              Epoch(45, 50, (root, to_q1), (d1,)))  # fmt: skip
    return Plan("fragments by hand", scenario.name, epochs), panes


def test_fragments_carry_a_row_per_cell_and_each_reader_combines_the_cells_of_its_where():
    queries = {"Q1": "SELECT COUNT(*), AVG(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 10 s",
               "Q2": "SELECT COUNT(*), MAX(c) FROM stream0 WHERE a BETWEEN 40 AND 80 WINDOW 10 s"}  # fmt: skip
    scenario = with_aggregates(load_scenario(FIGURE1), queries)
    scenario = replace(scenario, subscriptions=scenario.subscriptions[:2])
    plan, panes = _fragments(scenario)
    report = _report(scenario, plan)
    assert_accounted(report)
    entry = report["strategies"]["hand"]
    q1, q2 = entry["subscriptions"]
    assert (q1["delivered"], q2["delivered"]) == (5, 3)
    row = 16 + 8 * panes.values()  # pane, cell, count, max(c), sum(c)
    assert panes.values() == 5
    links = {(x["from"], x["to"]): x["bytes"] for x in entry["links"]}
    # three cells hold tuples in every 10 s pane: all three cross SP4 -> SP5, two down each branch
    assert links[("SP4", "SP5")] == 5 * 3 * row
    assert links[("SP5", "SP1")] == 5 * 2 * row
    assert links[("SP5", "SP6")] == 3 * 2 * row  # over [10, 45): panes 1..3 (pane 4 ends after the branch)
    # a branch keeping every cell carries the third too; the readers' records are the same
    every, _ = _fragments(scenario, keep_all=True)
    again = _report(scenario, every)
    assert_accounted(again)
    links = {(x["from"], x["to"]): x["bytes"] for x in again["strategies"]["hand"]["links"]}
    assert links[("SP5", "SP1")] == 5 * 3 * row
    # a reader whose WHERE is no cell, or a branch dropping its reader's cell, breaks the rules
    w3 = parse_condition("a BETWEEN 20 AND 40")
    bad = Plan("bad", scenario.name, tuple(
        replace(e, flows=tuple(replace(f, predicate=w3) if f.id == "F1" else f for f in e.flows)) for e in plan.epochs
    ))  # fmt: skip
    with pytest.raises(PlanError, match="do not serve it"):
        bad.check(scenario, Network.of(scenario))


def test_the_planners_share_fragments_of_overlapping_wheres():
    # hard photons per region, over the whole sky and below dec 85, at two subscribers each: the WHEREs
    # overlap without being equivalent, and the cells they cut differ by a few photons, so one flow of
    # fragments (a row per pane, region and cell) weighs less than a pane flow per WHERE
    scenario = hard_photon_cells()
    network = Network.of(scenario)
    classes = pane_classes(scenario, network, frozenset(s.id for s in scenario.subscriptions), CostModel(scenario))
    chosen = classes["h1"]
    assert chosen.members == ("h1", "h2", "l1", "l2") and len(chosen.panes.cells) == 2
    runs = {}
    for strategy in ("query-shipping", "ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        if strategy != "query-shipping":
            assert {f.panes for e in plan.epochs for f in e.flows} == {chosen.panes}, strategy
        runs[strategy] = run_local(scenario, plan)
    report = build_report(scenario, runs, engine="local")
    assert_accounted(report)
    backbone = {name: entry["backbone_bytes"] for name, entry in report["strategies"].items()}
    assert backbone["ideal"] == backbone["sharing-em"] < backbone["query-shipping"]


def test_a_reader_at_the_source_super_peer_combines_the_rows_where_they_are_made():
    # Q2's thin-peer is the publisher's, at SP4: it reads the tree's root, which crosses no link before it,
    # and each record leaves down the access link as its window closes (its last pane row is there then)
    scenario = _scenario(25_000.0)
    subs = list(scenario.subscriptions)
    subs[1] = replace(subs[1], peer="P0")
    scenario = replace(scenario, subscriptions=tuple(subs))
    plan = _plan(scenario, q2=Delivery("Q2", "P0", "SP4", "F0", Predicate.TRUE, ("c",)))
    plan = Plan("hand", scenario.name, tuple(
        replace(e, flows=tuple(f for f in e.flows if f.id != "F2")) for e in plan.epochs
    ))  # fmt: skip
    runs = [run_local(scenario, plan, window=w) for w in (None, 0.37, 1.3)]
    report = build_report(scenario, {"hand": runs[0]}, engine="local")
    assert_accounted(report)
    q2 = report["strategies"]["hand"]["subscriptions"][1]
    assert (q2["delivered"], q2["aggregated_at"]) == (4, "SP4")
    latencies = runs[0].record_latencies["Q2"]
    bandwidth, latency, _ = link_specs(scenario)[("SP4", "P0")]
    alone = (int(service(16 + 8 * 4, bandwidth)) + int(to_ticks(latency))) / TICKS  # window, COUNT, MAX, AVG
    assert latencies.tolist() == [alone] * 4
    for run in runs[1:]:
        assert np.array_equal(run.record_latencies["Q2"], latencies)
