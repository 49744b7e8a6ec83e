"""Pane flows widened and narrowed as they run (docs/ACCOUNTING.md, "Panes"; docs/PLANNER.md, "Aggregate
subscriptions"): a member arriving mid-run refines the panes, adds groups and partial states from the first
pane boundary of the new panes, the old pane holding it cut short there; a member leaving coarsens them
again.  Bytes per link against a plain reference, exact records, the plan rules and the JSON form, the
planners' eras, and a property check that every member's every window is served."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Predicate, parse_condition, parse_query
from network.routing import Network
from peers.local import run_local
from reports.report import build_report
from sharing import make_plan
from sharing.cost import CostModel
from sharing.panes import pane_classes, pane_eras
from sharing.plan import Delivery, Epoch, Flow, Panes, Plan, plan_from_wire
from tests.test_aggregates import FIGURE1, assert_accounted, with_aggregates
from tests.test_pane_flows import photon_readers
from topologies.errors import PlanError
from topologies.expected import satisfies
from topologies.loader import load_scenario
from topologies.model import Scenario
from topologies.workload import columns, emission_times_of, tuple_count

Q1 = "SELECT COUNT(*), SUM(c) FROM stream0 WHERE a BETWEEN 20 AND 60 WINDOW 10 s"
Q2 = "SELECT COUNT(*), MAX(c) FROM stream0 WHERE a >= 20 AND a <= 60 WINDOW 4 s SLIDE 2 s"
WHERE = parse_condition("a BETWEEN 20 AND 60")
SUM, MAX = ("sum", "c"), ("max", "c")
# Q1 alone: 10 s panes keeping sum(c); Q2 arrives at 13: 2 s panes keeping max(c) too, from 14 (its first
# window's start), the pane [10, 20) cut at 14; Q2 leaves at 45: 10 s panes again, from 50
E0 = Panes(Fraction(10), (), (SUM,))
E1 = Panes(Fraction(2), (), (MAX, SUM), since=Fraction(14))
E2 = Panes(Fraction(10), (), (SUM,), since=Fraction(50))
C0, C1, C2 = E0, replace(E1, earlier=(E0,)), replace(E2, earlier=(E0, E1))


def _scenario() -> Scenario:
    """Figure 1 with Q1 over [0, 50) and Q2 over [13, 45), both of one input; Q3 every tuple at Q2's
    thin-peer."""
    scenario = with_aggregates(load_scenario(FIGURE1), {"Q1": Q1, "Q2": Q2, "Q3": "SELECT a, b, c FROM stream0"})
    q1, q2, q3 = scenario.subscriptions
    subs = (replace(q1, at=0, until=50), replace(q2, at=13, until=45), replace(q3, peer="P2", at=0, until=None))
    return replace(scenario, subscriptions=subs)


def _plan(scenario: Scenario, chains=(C0, C1, C2), q2_reads: str = "F2") -> Plan:
    """The pane tree SP4 -> SP5 -> SP1 (Q1), and SP5 -> SP6 (Q2) while Q2 is registered, its panes ``chains``
    in the epochs [0, 13), [13, 45) and [45, 50); Q3's tuples SP4 -> SP5 -> SP6."""
    epochs = []
    every = Flow("F3", "stream0", None, "SP4", ("SP4", "SP5", "SP6"), Predicate.TRUE, ("a", "b", "c"))
    d1 = Delivery("Q1", "P1", "SP1", "F1", Predicate.TRUE, ("c",))
    d2 = Delivery("Q2", "P2", "SP6", q2_reads, Predicate.TRUE, ("c",))
    d3 = Delivery("Q3", "P2", "SP6", "F3", Predicate.TRUE, ("a", "b", "c"))
    for (start, end), panes in zip(((0, 13), (13, 45), (45, 50)), chains, strict=True):
        root = Flow("F0", "stream0", None, "SP4", ("SP4", "SP5"), WHERE, ("c",), panes=panes)
        to_q1 = Flow("F1", "stream0", "F0", "SP5", ("SP5", "SP1"), Predicate.TRUE, ("c",), panes=panes)
        to_q2 = Flow("F2", "stream0", "F0", "SP5", ("SP5", "SP6"), Predicate.TRUE, ("c",), panes=panes)
        q2 = start == 13
        flows = (root, to_q1, *([to_q2] if q2 else []), every)
        epochs.append(Epoch(start, end, flows, (d1, *([d2] if q2 else []), d3)))
    epochs.append(Epoch(50, 60, (every,), (d3,)))
    return Plan("eras by hand", scenario.name, tuple(epochs))


def _reference_rows(scenario: Scenario, eras: list[tuple[Fraction, Fraction]]) -> list[tuple[float, int]]:
    """Plainly, per pane row of the WHERE's tuples: the emission time of its last tuple and its era, ``eras``
    being each era's start and pane length (exact fractions: a tuple at ``t`` is in the era whose start is the
    last at or before ``t``, and in its pane ``floor(t / length)``)."""
    stream = scenario.stream("stream0")
    n = tuple_count(stream, scenario.duration)
    found = columns(scenario, "stream0", 0, n)
    chosen = np.flatnonzero(satisfies(WHERE, found, n))
    last: dict[tuple[int, int], float] = {}
    for t in emission_times_of(stream, chosen).tolist():
        k = max(i for i, (since, _) in enumerate(eras) if since <= Fraction(t))
        last[(k, math.floor(Fraction(t) / eras[k][1]))] = t
    return [(t, k) for (k, _), t in last.items()]


def test_a_widened_pane_flow_cuts_the_pane_a_newcomer_arrives_in_and_every_reader_is_exact():
    scenario = _scenario()
    plan = _plan(scenario)
    report = build_report(scenario, {"hand": run_local(scenario, plan)}, engine="local")
    assert_accounted(report)
    q1, q2, _ = report["strategies"]["hand"]["subscriptions"]
    # Q1's 10 s windows in [0, 50); Q2's 4 s windows every 2 s in [14, 44): [14, 18) .. [40, 44)
    assert (q1["delivered"], q2["delivered"]) == (5, 14)
    eras = [(Fraction(0), Fraction(10)), (Fraction(14), Fraction(2)), (Fraction(50), Fraction(10))]
    rows = _reference_rows(scenario, eras)
    wire = [16 + 8 * 3, 16 + 8 * 4, 16 + 8 * 3]  # pane, count, the states: sum; max and sum; sum

    def carried(a: float, b: float) -> int:
        return sum(wire[k] for t, k in rows if a <= t < b)

    links = {(x["from"], x["to"]): x["bytes"] for x in report["strategies"]["hand"]["links"]}
    tuples = report["strategies"]["hand"]["subscriptions"][2]["delivered"]
    every = 16 + 8 * 3
    assert links[("SP4", "SP5")] == carried(0, 50) + tuples * every
    assert links[("SP5", "SP1")] == carried(0, 50)
    assert links[("SP5", "SP6")] == carried(13, 45) + tuples * every
    # the cut pane [10, 14) is one row, and the 2 s panes from 14 to 50 are 18 more
    assert sum(1 for t, k in rows if t < 50) == 1 + 1 + 18


def test_pane_eras_rules_and_json():
    scenario = _scenario()
    network = Network.of(scenario)
    _plan(scenario).check(scenario, network)
    mid_pane = replace(E1, since=Fraction(13))  # 13 s starts no 2 s pane
    wrong = [
        ((C0, replace(mid_pane, earlier=(E0,)), C2), "does not start a pane of its own"),
        ((C0, C1, replace(E2, earlier=(E0,))), "change eras it had already reached"),  # drops [14, 50)
        ((C0, C0, C0), "do not serve it"),  # Q2 reads 10 s panes without max(c)
        ((C0, replace(E1, since=Fraction(16), earlier=(E0,)), C2), "do not serve it"),  # Q2's first window at 14
        ((replace(E1, earlier=(E0, E0)),) * 3, "eras of panes start at"),
    ]
    for chains, message in wrong:
        with pytest.raises(PlanError, match=message):
            _plan(scenario, chains).check(scenario, network)
    # a pending era may be replaced before it is reached: [0, 13) planned 2 s panes from 20, dropped at 13
    early = replace(E1, since=Fraction(20), earlier=(E0,))
    _plan(scenario, (early, C1, C2)).check(scenario, network)
    # ... also for a branch gone meanwhile: SP5 -> SP6 over [0, 5) with 2 s panes planned from 10, which the
    # tree drops at 9 (before reaching them), and back at 13 with those from 14
    plan = _plan(scenario)
    pending = replace(E1, since=Fraction(10), earlier=(E0,))
    first, *rest = plan.epochs

    def with_panes(epoch: Epoch, panes: Panes, keep: int) -> Epoch:
        return replace(epoch, flows=tuple(replace(f, panes=panes) if f.panes else f for f in epoch.flows[:keep]))

    head = [
        with_panes(replace(first, start=0, end=5), pending, 2),
        with_panes(replace(first, start=5, end=9), pending, 2),
        with_panes(replace(first, start=9, end=13), C1, 2),
    ]
    branch = replace(rest[0].flows[2], panes=pending)
    head[0] = replace(head[0], flows=(*head[0].flows, branch, first.flows[-1]))
    head[1:] = [replace(e, flows=(*e.flows, first.flows[-1])) for e in head[1:]]
    Plan("gone and back", scenario.name, (*head, *rest)).check(scenario, network)
    plan = _plan(scenario)
    out = io.StringIO()
    plan.write_json(out)
    again = plan_from_wire(json.loads(out.getvalue()))
    assert [f.panes for f in again.epochs[2].flows] == [C2, C2, None]
    assert any("PANES 10 s KEEPING sum(c) SINCE 50 s AFTER PANES 2 s KEEPING max(c),sum(c) SINCE 14 s AFTER"
               " PANES 10 s KEEPING sum(c)" in line for line in plan.text_lines())  # fmt: skip
    assert plan.pane_chains == {"F0": C2, "F1": C2, "F2": C1}


def test_the_planners_eras_follow_the_members():
    scenario = _scenario()
    members = [(s.query, s.at, s.until) for s in scenario.subscriptions[:2]]
    whole = Panes(Fraction(2), (), (MAX, SUM))
    assert pane_eras(whole, members, 60.0) == [(0.0, C0), (13.0, C1), (45.0, C2)]
    # members registered after the run: no panes, and no class to price
    assert pane_eras(whole, [(q, 70.0, 80.0) for q, _, _ in members], 60.0) == []
    late = replace(scenario, subscriptions=tuple(replace(s, at=70, until=None) for s in scenario.subscriptions))
    assert pane_classes(late, Network.of(late), frozenset({"Q1", "Q2"}), CostModel(late)) == {}


def _late_regions(ids: tuple[str, str] = ("sky", "regions")) -> Scenario:
    """Photon counts over the whole sky from the start, and per sky region from 25 s (``ids``): one pane
    flow, with no groups until the per-region panes start at 30 s."""
    per_region = "SELECT region, COUNT(*), AVG(energy), MAX(energy) FROM north GROUP BY region WINDOW 10 s"
    whole_sky = "SELECT COUNT(*), MAX(energy) FROM north WINDOW 20 s SLIDE 10 s"
    return photon_readers([(ids[0], "A0", 0, whole_sky), (ids[1], "A0", 25, per_region)])


def test_the_planners_widen_a_running_pane_flow_and_carry_fewer_bytes_than_its_whole_class():
    scenario = _late_regions()
    network = Network.of(scenario)
    classes = pane_classes(scenario, network, frozenset({"regions", "sky"}), CostModel(scenario))
    whole = classes["sky"].panes
    assert whole.groups == ("region",) and whole.length == 10
    for strategy in ("ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        chains = {f.panes for e in plan.epochs for f in e.flows if f.panes is not None}
        first = Panes(Fraction(10), (), (("max", "energy"),))
        assert chains == {first, replace(whole, since=Fraction(30), earlier=(first,))}, strategy
        report = build_report(scenario, {strategy: run_local(scenario, plan)}, engine="local")
        assert_accounted(report)
        assert all(s["delivered"] == s["expected"] > 0 for s in report["strategies"][strategy]["subscriptions"])
        # the same trees keeping the whole class's panes from the start carry more
        fixed = plan.with_epochs(tuple(
            replace(e, flows=tuple(f if f.panes is None else replace(f, panes=whole, attrs=whole.reading())
                                   for f in e.flows))
            for e in plan.epochs
        ))  # fmt: skip
        again = build_report(scenario, {strategy: run_local(scenario, fixed)}, engine="local")
        assert_accounted(again)
        assert report["strategies"][strategy]["backbone_bytes"] < again["strategies"][strategy]["backbone_bytes"]


_LENGTHS = [Fraction(1), Fraction(2), Fraction(3), Fraction(4), Fraction(6), Fraction(5, 2)]
_AGGREGATES = ["COUNT(*)", "SUM(x)", "MAX(x)", "MIN(y)", "VAR(y)"]


@st.composite
def _members(draw):
    found = []
    for _ in range(draw(st.integers(1, 5))):
        slide = draw(st.sampled_from(_LENGTHS))
        size = slide * draw(st.integers(1, 3))
        groups = draw(st.sets(st.sampled_from(["g", "h"])))
        aggs = draw(st.lists(st.sampled_from(_AGGREGATES), min_size=1, max_size=2, unique=True))
        by = f" GROUP BY {', '.join(sorted(groups))}" if groups else ""
        text = f"SELECT {', '.join(aggs)} FROM s{by} WINDOW {float(size)} s SLIDE {float(slide)} s"
        start = draw(st.integers(0, 40)) / 2
        end = start + draw(st.integers(1, 40)) / 2
        found.append((parse_query(text), start, end))
    return found


def _cuts(chain: Panes, a: Fraction, b: Fraction) -> bool:
    """Whether ``a`` and ``b`` are pane boundaries of ``chain`` (an era's start, or a multiple of its pane
    length inside it)."""
    eras = chain.eras()

    def boundary(x: Fraction) -> bool:
        k = max(i for i, e in enumerate(eras) if e.since <= x)
        return x == eras[k].since or (x / eras[k].length).denominator == 1

    return boundary(a) and boundary(b)


@settings(max_examples=300, deadline=None)
@given(_members())
def test_every_window_of_every_member_is_served_by_the_eras_over_it(members):
    duration = 40.0
    whole = Panes(Fraction(1, 2), ("g", "h"), ())
    decisions = pane_eras(whole, members, duration)
    for (_, before), (t2, after) in pairwise(decisions):
        # a change keeps the eras already reached, and at most the last era is still to come
        assert [e for e in before.eras() if e.since < t2] == [e for e in after.eras() if e.since < t2]
        assert sum(e.since >= t2 for e in after.eras()) <= 1
    final = decisions[-1][1]
    eras = final.eras()
    for query, start, end in members:
        window, states = query.window, query.partial_states()
        k = window.first_start(start)
        while k + window.size <= min(Fraction(end), Fraction(duration)):
            a, b = k, k + window.size
            assert _cuts(final, a, b), (a, b, final.text())
            for era, after in zip(eras, [*eras[1:], None], strict=True):
                if era.since < b and (after is None or after.since > a):
                    assert set(query.groups) <= set(era.groups) and states <= set(era.states), (a, b, final.text())
            k += window.slide
