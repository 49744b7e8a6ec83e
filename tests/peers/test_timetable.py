"""The timetable's reading of a plan: readers shared by content, the compiled selection against the plain
one-reader reference, and a plan laid out whatever the order of its epochs' listings."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest

from network.routing import Network
from peers.local import run_local
from peers.selection import SelectorTable, select_rows
from peers.superpeer import Rows, Selector, flow_reader
from peers.timetable import Timetable
from sharing.plan import Delivery, Epoch, Flow, Plan
from tests.peers.test_local_engine import LINKS, PEERS, STREAMS, SUBS, _scenario, _true, _values, _where
from tests.peers.test_local_windows import _changing_plan


@pytest.fixture
def changing():
    scenario = _scenario(LINKS, PEERS, STREAMS, SUBS, duration=6.0)
    return scenario, _changing_plan(scenario), _values(scenario)


def _copied(plan: Plan) -> Plan:
    """The same plan with every flow and delivery a new object in every epoch (equal content)."""
    epochs = [
        replace(e, flows=tuple(replace(f) for f in e.flows), deliveries=tuple(replace(d) for d in e.deliveries))
        for e in plan.epochs
    ]
    return plan.with_epochs(tuple(epochs))


def test_readers_equal_in_content_share_one_table_entry(changing):
    scenario, plan, _ = changing
    network = Network.of(scenario)
    original, copied = Timetable(scenario, plan, network), Timetable(scenario, _copied(plan), network)
    stream = {s.id: s.stream for s in scenario.subscriptions}
    contents = {(f.stream, f.predicate, f.attrs, f.trim) for e in plan.epochs for f in e.flows}
    contents |= {(stream[d.subscription], d.predicate, d.attrs, ()) for e in plan.epochs for d in e.deliveries}
    for timetable in (original, copied):
        assert len(set(timetable._ph_reader[timetable._ph_reader >= 0].tolist())) == len(contents)


def test_a_plan_of_equal_objects_made_anew_lays_out_and_runs_as_the_plan(changing):
    # the changes are found by value: every flow and delivery made anew in every epoch changes nothing
    scenario, plan, values = changing
    network = Network.of(scenario)
    copied = _copied(plan)
    assert [c.flows for c in copied.changes] == [c.flows for c in plan.changes]
    assert [c.deliveries for c in copied.changes] == [c.deliveries for c in plan.changes]
    assert Timetable(scenario, copied, network).channels == Timetable(scenario, plan, network).channels
    shared = run_local(scenario, plan, window=1.0, values=values)
    again = run_local(scenario, copied, window=1.0, values=values)
    assert again.link_bytes == shared.link_bytes and again.link_tuples == shared.link_tuples
    assert again.access_bytes == shared.access_bytes
    assert all(np.array_equal(again.timeline[d], shared.timeline[d]) for d in shared.timeline)
    for sub in shared.delivered:
        assert np.array_equal(again.delivered[sub], shared.delivered[sub])
        assert np.array_equal(again.latencies[sub], shared.latencies[sub], equal_nan=True)


@pytest.mark.parametrize("seed", range(6))
def test_compiled_selection_equals_the_one_reader_reference(seed):
    rng = np.random.default_rng(seed)
    names = ("a", "b", "c", "d")
    values = rng.integers(0, 10, size=(len(names), 300)).astype(np.float64)
    values[rng.random(values.shape) < 0.05] = np.nan
    rows = np.flatnonzero(rng.random(300) < 0.6)
    wheres = [_where(w) for w in ("a < 5", "b >= 3 AND c < 8", "a = 2 OR d > 6", "c >= 5", "a > 1 AND a < 9 OR b = 4")]
    wheres.append(_true())
    table = SelectorTable({"s": names}, 16)
    readers = []
    for k in range(12):
        where = wheres[k % len(wheres)]
        attrs = tuple(n for n in names if rng.random() < 0.5) or ("a",)
        trim = ()
        if k % 3 == 0:  # a trim reader: entries sharing attributes, so widths fill up before the last entry
            picks = rng.choice(len(wheres), size=3, replace=False).tolist()
            trim = tuple((wheres[p], names[p % 3 : p % 3 + 2]) for p in picks)
        flow = Flow(f"F{k}", "s", None, "SP0", ("SP0",), where, attrs, trim)
        entries = [table.entry("s", p, a) for p, a in trim]
        readers.append((Selector(flow_reader(flow), 16), table.add("s", where, attrs, entries)))
    for selector, number in readers:
        positions, wire = selector.pick(Rows(names, 0, values, rows))
        compiled, compiled_wire = select_rows(table, number, names, values, rows)
        assert np.array_equal(compiled, positions)
        assert np.array_equal(compiled_wire, wire)


def _plan(scenario, *epochs) -> Plan:
    return Plan("p", scenario.name, tuple(Epoch(k * 1.0, k * 1.0 + 1.0, f, d) for k, (f, d) in enumerate(epochs)))


@pytest.fixture
def tree():
    return _scenario(LINKS, PEERS, STREAMS, SUBS, duration=4.0)


def _flows():
    f1 = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 5"), ("a", "b"))
    f2 = Flow("F2", "S", "F1", "SP1", ("SP1", "SP3"), _where("b >= 3"), ("a", "b"))
    return f1, f2


def test_a_delivery_listed_twice_is_laid_out_once(tree):
    f1, f2 = _flows()
    qb = Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",))
    once = Timetable(tree, _plan(tree, ((f1, f2), (qb,)), ((f1, f2), (qb,))), Network.of(tree))
    twice = Timetable(tree, _plan(tree, ((f1, f2), (qb,)), ((f1, f2), (qb, qb))), Network.of(tree))
    assert once.channels == twice.channels
    assert np.array_equal(once._ph_channel, twice._ph_channel)


def test_operators_counted_while_reading_equal_the_plans_own_count(changing):
    # Plan.operators walks every object of every epoch; the timetable counts the objects that came and went
    scenario, plan, _ = changing
    gapped = plan.with_epochs(tuple(e for k, e in enumerate(plan.epochs) if k % 3 != 1))
    assert any(a.end < b.start for a, b in pairwise(gapped.epochs))  # read afresh after a gap
    network = Network.of(scenario)
    for variant in (plan, _copied(plan), gapped):
        assert Timetable(scenario, variant, network).operators == variant.operators()


def test_operators_of_planned_runs_with_failures_equal_the_plans_own_count():
    from sharing import STRATEGIES, make_plan
    from topologies.loader import load_scenario

    scenario = load_scenario("topologies/failover.yaml")
    network = Network.of(scenario)
    for strategy in STRATEGIES:
        plan = make_plan(scenario, strategy, network)
        assert Timetable(scenario, plan, network).operators == plan.operators(), strategy


def test_readings_count_the_channels_live_at_each_tuple(changing):
    # the Spark engine weighs its chunks by these: per tuple, the phases of its stream's channels live at
    # its emission time, so a tuple read by more channels (more flows and deliveries) weighs more
    scenario, plan, _ = changing
    timetable = Timetable(scenario, plan, Network.of(scenario))
    times = {s.id: np.sort(np.random.default_rng(3).uniform(0, scenario.duration, 400)) for s in scenario.streams}
    readings = timetable.readings(times)
    assert set(readings) == set(times)
    for k, (stream, emitted) in enumerate(times.items()):
        live = timetable._ch_stream[timetable._ph_channel] == k
        start, end = timetable._ph_start[live], timetable._ph_end[live]
        expected = [int(((start <= t) & (t < end)).sum()) for t in emitted]
        assert readings[stream].tolist() == expected
    assert len(set(readings["S"].tolist())) > 1  # the plan's epochs change how many channels read S


@pytest.mark.parametrize("path", ["topologies/sensor-grid.yaml", "topologies/failover.yaml"])
def test_a_plan_laid_out_from_its_changes_as_from_its_epochs(path):
    # the planners give each epoch as the change they made (found from the parts they keep: a stream's
    # tree, a run of subscriptions); the layout must come out as that of the changes found anew from the
    # plan's epochs, listed whole
    from sharing import STRATEGIES, make_plan
    from topologies.loader import load_scenario

    scenario = load_scenario(path)
    network = Network.of(scenario)
    for strategy in STRATEGIES:
        plan = make_plan(scenario, strategy, network)
        plain = plan.with_epochs(plan.epochs)
        assert plain == plan and len(plain.changes) == len(plan.changes)
        made, listed = Timetable(scenario, plan, network), Timetable(scenario, plain, network)
        assert made.channels == listed.channels, strategy
        for name in ("_ph_channel", "_ph_start", "_ph_end", "_ph_reader"):
            assert np.array_equal(getattr(made, name), getattr(listed, name)), (strategy, name)
        assert made.operators == listed.operators, strategy


@pytest.mark.parametrize("path", ["topologies/sensor-grid.yaml", "topologies/failover.yaml"])
def test_a_multicast_tree_whose_flows_stay_changes_no_flow(path):
    # a subscription joining or leaving links its stream's tree has anyway changes none of its flows: the
    # epoch's change then holds its delivery alone
    from sharing import make_plan
    from topologies.loader import load_scenario

    scenario = load_scenario(path)
    plan = make_plan(scenario, "multicast", Network.of(scenario))
    kept = sum(not c.flows.gone and not c.flows.came and bool(c.deliveries.came) for c in plan.changes[1:])
    assert kept > 0
