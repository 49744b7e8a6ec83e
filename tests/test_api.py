"""The Python API: a scenario loaded or built, planned, simulated and reported as objects, and a strategy
written by a user (a planner of fewer than 50 lines, below) run through the same engines, exactness checks
and reports as the built-in ones."""

from __future__ import annotations

import inspect
import json
import os
from collections import Counter
from itertools import pairwise
from pathlib import Path

import networkx as nx
import pytest

import streamglobe as sg
from matcher import Predicate
from tests.spark.conftest import spark  # noqa: F401 (the shared Spark session, for the Spark test)

ROOT = Path(__file__).resolve().parent.parent
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")


# --- a strategy of one's own: query-shipping over the routes of fewest hops (ties: smallest ids) ---------
def fewest_hops(scenario: sg.Scenario, network: sg.Network) -> sg.Plan:
    """Each subscription's result, filtered and projected at its stream's source, along a route of the
    fewest hops instead of the least latency."""
    graph = nx.Graph((link.a, link.b) for link in scenario.links)
    epochs = []
    for start, end, active in sg.active_subscriptions(scenario):
        flows, deliveries = [], []
        for sub in active:
            stream = scenario.stream(sub.stream)
            source, home = scenario.home(stream.source), scenario.home(sub.peer)
            attrs = sub.query.attributes(stream.attribute_names)
            path = tuple(min(nx.all_shortest_paths(graph, source, home)))
            flow = sg.Flow(f"hops.{sub.id}", sub.stream, None, source, path, sub.query.where, attrs)
            flows.append(flow)
            deliveries.append(sg.Delivery(sub.id, sub.peer, home, flow.id, Predicate.TRUE, attrs))
        epochs.append(sg.Epoch(start, end, tuple(flows), tuple(deliveries)))
    return sg.Plan("fewest-hops", scenario.name, tuple(epochs))


# -----------------------------------------------------------------------------------------------------------


@pytest.fixture
def registered():
    sg.register_strategy("fewest-hops", fewest_hops)
    yield "fewest-hops"
    sg.unregister_strategy("fewest-hops")


def test_the_user_strategy_is_short():
    assert len(inspect.getsource(fewest_hops).splitlines()) < 50


def expected_bytes(scenario: sg.Scenario, report: sg.Report) -> Counter:
    """Bytes per link direction the fewest-hops rule puts on the wire, from the checked deliveries."""
    graph = nx.Graph((link.a, link.b) for link in scenario.links)
    found: Counter = Counter()
    for sub in scenario.subscriptions:
        stream = scenario.stream(sub.stream)
        path = min(nx.all_shortest_paths(graph, scenario.home(stream.source), scenario.home(sub.peer)))
        size = scenario.tuple_bytes(len(sub.query.attributes(stream.attribute_names)))
        for hop in pairwise(path):
            found[hop] += report["query-shipping"].subscriptions[sub.id].expected * size
    return found


TRIANGLE = {  # the direct link A-B is slow: least latency goes A-C-B, fewest hops A-B
    "name": "triangle",
    "duration": 20,
    "network": {
        "defaults": {"latency": "1ms"},
        "super_peers": ["A", "B", "C"],
        "links": [["A", "B", {"latency": "10ms"}], ["A", "C"], ["C", "B"]],
    },
    "thin_peers": [{"id": "src", "attach": "A"}, {"id": "far", "attach": "B"}, {"id": "mid", "attach": "C"}],
    "streams": [{"id": "s", "source": "src", "rate": 50, "schema": {"v": {"distribution": {"uniform": [0, 10]}}}}],
    "subscriptions": [
        {"id": "Q1", "peer": "far", "at": 0, "query": "SELECT v FROM s WHERE v < 4"},
        {"id": "Q2", "peer": "mid", "at": 5, "until": 15, "query": "SELECT v FROM s WHERE v > 6"},
    ],
}


@pytest.mark.parametrize("source", [FIGURE1, TRIANGLE], ids=["figure1", "triangle"])
def test_a_registered_strategy_runs_end_to_end_in_parallel_workers(registered, tmp_path, source):
    scenario = sg.load(source) if isinstance(source, str) else sg.build(source)
    assert registered in sg.strategy_names() and sg.strategy_names()[:7] == sg.STRATEGIES
    report = sg.run(scenario, ["query-shipping", "ideal", registered], out=str(tmp_path / "r"), jobs=2)
    assert list(report.strategies) == ["query-shipping", "ideal", registered]
    mine = report[registered]
    assert mine.exact and report.exact and mine.saving_vs["query-shipping"] is not None
    # the bound is for least-latency routes: fewer hops beat it on the triangle (why `hops x ideal` can be < 1)
    assert (mine.vs_ideal["tuple_hops"] < 1.0) == (scenario.name == "triangle")
    links = {(link.source, link.target): link.bytes for link in mine.links if link.bytes}
    assert links == dict(expected_bytes(scenario, report))
    if scenario.name == "triangle":  # Q1's result goes A-B here, A-C-B by query-shipping
        assert links[("A", "B")] > 0 and report["query-shipping"].links[0].bytes == 0
    on_disk = json.loads((tmp_path / "r" / "report.json").read_text())
    assert on_disk["strategies"][registered]["backbone_bytes"] == mine.backbone_bytes
    plans = json.loads((tmp_path / "r" / "plans.json").read_text())
    assert plans[registered]["strategy"] == registered
    assert registered in (tmp_path / "r" / "report.html").read_text()


def test_plan_simulate_check_one_strategy_step_by_step(registered):
    scenario = sg.load(FIGURE1, seed=4)
    plan = sg.plan(scenario, registered)
    assert plan.strategy == registered and len(plan.epochs) == len(list(sg.active_subscriptions(scenario)))
    run = sg.simulate(scenario, plan)
    result = sg.check(scenario, run)
    assert result.exact and result.backbone_bytes == run.backbone_bytes > 0
    assert {s.id for s in result.subscriptions.values() if s.expected} == {"Q1", "Q2", "Q3"}


def test_an_inexact_user_strategy_is_caught_and_flagged(tmp_path):
    def forgetful(scenario, network):  # drops Q2's delivery: Q2 misses every tuple
        plan = sg.plan(scenario, "query-shipping")
        epochs = [
            sg.Epoch(e.start, e.end, e.flows, tuple(d for d in e.deliveries if d.subscription != "Q2"))
            for e in plan.epochs
        ]
        return sg.Plan("forgetful", scenario.name, tuple(epochs))

    sg.register_strategy("forgetful", forgetful)
    try:
        report = sg.run(sg.load(FIGURE1), ["multicast", "forgetful"], out=str(tmp_path / "r"), jobs=1)
    finally:
        sg.unregister_strategy("forgetful")
    assert not report.exact and report["multicast"].exact and not report["forgetful"].exact
    q2 = report["forgetful"].subscriptions["Q2"]
    assert q2.delivered == 0 and q2.missing == q2.expected > 0
    assert "-" + str(q2.missing) in (tmp_path / "r" / "report.html").read_text()


def test_registration_is_checked():
    with pytest.raises(sg.InputError, match="a built-in strategy"):
        sg.register_strategy("ideal", fewest_hops)
    with pytest.raises(sg.InputError, match="letters, digits"):
        sg.register_strategy("no spaces", fewest_hops)
    sg.register_strategy("twice", fewest_hops)
    try:
        with pytest.raises(sg.InputError, match="registered already"):
            sg.register_strategy("twice", fewest_hops)
        sg.register_strategy("twice", fewest_hops, replace=True)
    finally:
        sg.unregister_strategy("twice")
    sg.register_strategy("broken", lambda scenario, network: "not a plan")
    try:
        with pytest.raises(sg.EmulatorError, match="returned str, not a Plan"):
            sg.plan(sg.load(FIGURE1), "broken")
    finally:
        sg.unregister_strategy("broken")
    with pytest.raises(sg.InputError, match="unknown strategy 'broken'"):
        sg.plan(sg.load(FIGURE1), "broken")


def test_build_a_scenario_from_a_dict_and_run_it_without_files(tmp_path):
    doc = {
        "name": "tiny",
        "duration": 10,
        "network": {"super_peers": ["A", "B", "C"], "links": [["A", "B"], ["B", "C"]]},
        "thin_peers": [{"id": "src", "attach": "A"}, {"generate": {"count": 3, "attach": "spread"}}],
        "streams": [{"id": "s", "source": "src", "rate": 20, "schema": {"v": {"distribution": {"uniform": [0, 1]}}}}],
        "subscriptions": [{"generate": {"count": 4, "peers": ["P1", "P2"]}}],
    }
    scenario = sg.build(doc)
    assert scenario.path is None and len(scenario.subscriptions) == 4
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        report = sg.run(scenario, ["data-shipping", "sharing-em"])
    finally:
        os.chdir(cwd)
    assert report.exact and report["sharing-em"].saving_vs["data-shipping"] >= 0 and os.listdir(tmp_path) == []
    assert report.table().splitlines()[0].startswith("strategy ")
    with pytest.raises(sg.InputError, match=r"^<python>: subscriptions\[0\].generate.count: must be >= 1"):
        sg.build(doc, changes={"subscriptions": 0})


@pytest.mark.slow
@pytest.mark.spark
def test_a_registered_strategy_runs_on_spark_too(registered, spark, tmp_path):  # noqa: F811
    scenario = sg.load(FIGURE1)
    local = sg.run(scenario, [registered], jobs=1)
    on_spark = sg.run(scenario, ["query-shipping", registered], engine="spark", out=str(tmp_path / "s"))
    assert on_spark[registered].exact and on_spark[registered].links == local[registered].links


def test_a_planner_gets_its_own_copy_of_the_scenario():
    def vandal(scenario, network):  # a frozen dataclass yields to object.__setattr__
        object.__setattr__(scenario, "duration", 1.0)
        object.__setattr__(scenario.subscriptions[0], "peer", "P3")
        return sg.plan(scenario, "query-shipping")

    scenario = sg.load(FIGURE1)
    before = (scenario.duration, scenario.subscriptions[0].peer)
    sg.register_strategy("vandal", vandal)
    try:
        sg.plan(scenario, "vandal")
    finally:
        sg.unregister_strategy("vandal")
    assert (scenario.duration, scenario.subscriptions[0].peer) == before == (60, "P1")
    assert sg.run(scenario, ["query-shipping"], jobs=1).exact


def test_argument_errors_are_the_librarys_own():
    scenario = sg.load(FIGURE1)
    other = sg.load(FIGURE1, changes={"subscriptions[0].id": "Z1"})
    plan = sg.plan(scenario, "query-shipping")
    for call, message in [
        (lambda: sg.load(None), r"^path: expected a path"),
        (lambda: sg.load(FIGURE1, seed="3"), r"^seed: expected a whole number"),
        (lambda: sg.load(FIGURE1, changes=[("seed", 1)]), r"^changes: expected a mapping"),
        (lambda: sg.build("name: x"), r"^document: expected a mapping"),
        (lambda: sg.plan(TRIANGLE, "ideal"), r"^scenario: expected a Scenario"),
        (lambda: sg.simulate(scenario, "plan"), r"^plan: expected a Plan"),
        (lambda: sg.simulate(sg.build(TRIANGLE), plan), r"^plan: a plan of scenario 'figure1', not of 'triangle'"),
        (lambda: sg.simulate(other, plan), r"^plan: subscription 'Q1' is not one of scenario 'figure1'"),
        (lambda: sg.check(other, sg.simulate(scenario, plan)), r"^run: subscription 'Q1' is not one of"),
        (lambda: sg.run(scenario, jobs="2"), r"^jobs: expected a whole number"),
        (lambda: sg.run(scenario, [1]), r"^strategies: expected a strategy name"),
        (lambda: sg.run(scenario, ["ideal"], out=3), r"^out: expected a path"),
        (lambda: sg.sweep(FIGURE1, {"seed": []}), r"^sweep: vary.seed: expected a non-empty list"),
        (lambda: sg.sweep(FIGURE1, {}), r"^vary: nothing to vary"),
        (lambda: sg.unregister_strategy("ideal"), r"a built-in strategy, which cannot be unregistered"),
        (lambda: sg.unregister_strategy("never-registered"), r"is not registered"),
        (lambda: sg.active_subscriptions(None), r"^scenario: expected a Scenario"),
    ]:
        with pytest.raises(sg.InputError, match=message):
            call()
    report = sg.run(scenario, "ideal", jobs=1)  # one name is a list of one
    assert list(report.strategies) == ["ideal"]
    with pytest.raises(sg.InputError, match="no strategy 'sharing-em' in this report"):
        report["sharing-em"]


def _documented_planner():
    """The union-per-home planner of docs/API.md, run as the page gives it."""
    page = (ROOT / "docs" / "API.md").read_text()
    code = page[page.index("```python\nimport functools") + len("```python\n") :]
    namespace: dict = {}
    exec(code[: code.index("```")], namespace)
    return namespace["union_per_home"]


def test_the_documented_union_planner_is_exact_and_carries_the_union_of_what_is_wanted():
    """Per link direction, its tuples are those of the union of the subscriptions' answers of each group
    (stream, super-peer) whose route crosses it: computed here from the centralized answers alone."""
    from topologies.expected import expected_results

    sg.register_strategy("union-per-home", _documented_planner())
    try:
        scenario = sg.load(ROOT / "topologies" / "germany50.yaml", changes={"subscriptions": 40})
        run = sg.simulate(scenario, sg.plan(scenario, "union-per-home"))
        assert sg.check(scenario, run).exact
    finally:
        sg.unregister_strategy("union-per-home")
    expected = expected_results(scenario)
    network = sg.Network.of(scenario)
    groups: dict = {}
    for sub in scenario.subscriptions:
        key = (sub.stream, scenario.home(sub.peer))
        groups[key] = groups.get(key, set()) | set(expected.indices[sub.id].tolist())
    tuples: Counter = Counter()
    for (stream, home), indices in groups.items():
        for hop in pairwise(network.route(scenario.home(scenario.stream(stream).source), home)):
            tuples[hop] += len(indices)
    assert {d: n for d, n in run.link_tuples.items() if n} == dict(tuples)
