"""The Spark engine against the local engine: the same report, number for number, and the pieces in between.

The end-to-end check runs every strategy of the shipped scenarios on both engines (Spark on local[2]) and
compares the reports and, beyond them, the raw runs: delivered tuple indices, latencies and timelines.
The pieces are checked without Spark: the operator shipped as plain arrays behaves like the original, the
driver's replay operator reproduces the real operator's outputs batch by batch, and the walk of
:func:`peers.spark_tasks.carry` agrees with a direct per-tuple evaluation of the plan.
"""

from __future__ import annotations

import glob
import pickle
from functools import cache
from itertools import pairwise

import numpy as np
import pytest

from matcher.parser import parse_condition
from network.routing import Network
from peers.local import run_local
from peers.selection import select_rows
from peers.spark import ReplaySelector, run_spark
from peers.spark_tasks import Unit, carry, portable, rebuild
from peers.superpeer import FlowOperator, Reader, Rows, Selector, delivery_key, flow_key, install
from reports.expected import expected_results
from reports.report import build_report
from sharing import STRATEGIES, make_plan
from tests.spark.conftest import LOCAL_MASTER
from topologies import workload
from topologies.loader import load_scenario

# not metro.yaml, the scale scenario (2,000,000 tuples, 5,000 subscriptions): every strategy on it takes far
# longer than this suite may; tests/topologies/test_metro.py checks the file
SHIPPED = sorted(p for p in glob.glob("topologies/*.yaml") if not p.endswith("/metro.yaml"))
# the default run (each Spark run costs seconds) takes Figure 1 with three strategies whose operators
# differ in shape (raw reads only; trimmed ideal flows; shared flow trees) and the other small scenarios
# with stream sharing; the slow suite runs every strategy on every shipped scenario
SHAPES = ("data-shipping", "ideal", "sharing-em")
DEFAULT_CASES = [("topologies/figure1.yaml", name) for name in SHAPES] + [
    (p, "sharing-em") for p in SHIPPED if not p.endswith(("figure1.yaml", "large.yaml"))
]


@cache
def _scenario_and_plans(path: str):
    scenario = load_scenario(path)
    network = Network.of(scenario)
    return scenario, {name: make_plan(scenario, name, network) for name in STRATEGIES}


def _assert_same_runs(local, spark):
    assert spark.engine == "spark"
    assert spark.link_bytes == local.link_bytes
    assert spark.link_tuples == local.link_tuples
    assert (spark.access_bytes, spark.access_link_bytes) == (local.access_bytes, local.access_link_bytes)
    assert spark.delivered_attrs == local.delivered_attrs
    assert spark.delivered.keys() == local.delivered.keys()
    for sub, indices in local.delivered.items():
        np.testing.assert_array_equal(spark.delivered[sub], indices, err_msg=sub)
        np.testing.assert_array_equal(spark.latencies[sub], local.latencies[sub])
    assert spark.timeline.keys() == local.timeline.keys()
    for direction, series in local.timeline.items():
        np.testing.assert_array_equal(spark.timeline[direction], series)


def _compare_engines(path: str, strategies=STRATEGIES) -> None:
    scenario, plans = _scenario_and_plans(path)
    plans = {name: plans[name] for name in strategies}
    local_runs = {name: run_local(scenario, plan) for name, plan in plans.items()}
    spark_runs = {name: run_spark(scenario, plan, master=LOCAL_MASTER) for name, plan in plans.items()}
    for name in plans:
        _assert_same_runs(local_runs[name], spark_runs[name])
    expected = expected_results(scenario)
    local_report = build_report(scenario, local_runs, expected, engine="local")
    spark_report = build_report(scenario, spark_runs, expected, engine="spark")
    assert spark_report["engine"] == "spark"
    assert spark_report["exact"]
    assert {**spark_report, "engine": "local"} == local_report


@pytest.mark.spark
@pytest.mark.parametrize(("path", "strategy"), DEFAULT_CASES)
def test_spark_report_equals_the_local_report(spark, path, strategy):
    _compare_engines(path, (strategy,))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED)
def test_spark_report_equals_the_local_report_for_every_strategy(spark, path):
    _compare_engines(path)


# ---- the pieces, without Spark ------------------------------------------------------------------------


def _operator(seed: int = 3) -> tuple[FlowOperator, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    columns = {a: rng.integers(0, 10, 500).astype(np.float64) for a in ("x", "y", "z")}
    readers = [
        Reader(flow_key("F0"), "flow F0", parse_condition("x < 5 OR y BETWEEN 2 AND 4"), ("x", "y")),
        Reader(flow_key("F1"), "flow F1", parse_condition("z >= 7 AND x != 3"), ("z",)),
        Reader(delivery_key(0), "delivery of Q", parse_condition("x = 1 OR z = 1 OR y > 8"), ("x", "y", "z")),
        Reader(flow_key("F2"), "flow F2", parse_condition("x > 100"), ("x",)),
    ]
    return FlowOperator("SP0", "raw stream s", ("x", "y", "z"), readers, header_bytes=16), columns


def test_a_shipped_operator_computes_what_the_original_does():
    operator, columns = _operator()
    copy = rebuild(pickle.loads(pickle.dumps(portable(operator))))
    assert copy.targets == operator.targets
    for ours, theirs in zip(copy.process(500, columns), operator.process(500, columns), strict=True):
        assert ours.target == theirs.target
        np.testing.assert_array_equal(ours.positions, theirs.positions)
        np.testing.assert_array_equal(ours.wire_bytes, theirs.wire_bytes)
        assert ours.columns.keys() == theirs.columns.keys()
        for name in theirs.columns:
            np.testing.assert_array_equal(ours.columns[name], theirs.columns[name])


@pytest.mark.parametrize("cuts", [(0, 500), (0, 1, 137, 138, 400, 500), (0, 250, 250, 500)])
def test_the_replay_selector_reproduces_the_real_selections_batch_by_batch(cuts):
    operator, columns = _operator()
    first = 1000  # global index of the first tuple
    names = tuple(columns)
    values = np.ascontiguousarray(np.stack([columns[n] for n in names]))
    for reader, output in zip(operator.readers, operator.process(500, columns), strict=True):
        replay = ReplaySelector(first + output.positions, output.wire_bytes)
        selector = Selector(reader, header_bytes=16)
        for start, stop in pairwise(cuts):
            rows = Rows(names, first, values, np.arange(start, stop, dtype=np.int64))
            expected = selector.pick(rows)
            compiled = select_rows(selector, names, first, values, rows.rows, 16)
            replayed = select_rows(replay, names, first, values, rows.rows, 16)
            np.testing.assert_array_equal(compiled[0], expected[0])
            np.testing.assert_array_equal(compiled[1], expected[1])
            np.testing.assert_array_equal(replayed[0], expected[0])
            np.testing.assert_array_equal(replayed[1], expected[1])
            # and the selector keeps what the operator sent
            sent = output.positions[(output.positions >= start) & (output.positions < stop)]
            np.testing.assert_array_equal(start + expected[0], sent)


def test_the_task_walk_delivers_exactly_the_plain_evaluation_of_each_subscription():
    scenario, plans = _scenario_and_plans("topologies/figure1.yaml")
    stream = scenario.streams[0]
    for name in ("sharing-em", "ideal", "data-shipping"):
        plan = plans[name]
        for epoch in plan.epochs:
            times = workload.emission_times(stream, 0, workload.tuple_count(stream, scenario.duration))
            start, stop = (int(i) for i in np.searchsorted(times, [epoch.start, epoch.end], side="left"))
            if start == stop:
                continue
            paths = {flow_key(f.id): f.path for f in epoch.flows}
            operators = install(scenario, epoch)
            reached = {
                operators[place].targets[j]: indices
                for place, j, indices, _ in carry(scenario, operators, paths, Unit(0, stream.id, start, stop))
            }
            values = workload.columns(scenario, stream.id, start, stop)
            for k, delivery in enumerate(epoch.deliveries):
                where = scenario.subscription(delivery.subscription).query.where
                plain = start + np.flatnonzero(_satisfies(where, values))
                np.testing.assert_array_equal(reached.get(delivery_key(k), []), plain, err_msg=f"{name} {delivery}")


def _satisfies(predicate, values) -> np.ndarray:
    """A plain per-box evaluation of a predicate over columns."""
    n = len(next(iter(values.values())))
    result = np.zeros(n, dtype=bool)
    for box in predicate.boxes:
        inside = np.ones(n, dtype=bool)
        for dim, iv in box.items():
            v = values[dim]
            inside &= (v >= iv.lo) if iv.lo_closed else (v > iv.lo)
            inside &= (v <= iv.hi) if iv.hi_closed else (v < iv.hi)
        result |= inside
    return result
