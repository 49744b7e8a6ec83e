"""The Spark engine against the local engine: the same report, number for number.

Every strategy of the shipped scenarios runs on both engines (Spark on local[2]); beyond the reports
(counts, missing and extra copies, latency percentiles and means per subscription and overall), the
timelines, access traffic and delivered attributes must be equal.  The stitching of chunks is checked
without Spark in tests/peers/test_chunked_runs.py; here large.yaml's data-shipping plan has backlogs across
chunk boundaries, figure1 runs as many chunks as it has windows, and a backlogged link fails.
"""

from __future__ import annotations

import glob
import json
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
import yaml

from network.latency import LatencyStats
from network.routing import Network
from peers.local import run_local
from peers.spark import run_spark
from reports.report import build_report
from sharing import STRATEGIES, make_plan
from tests.spark.conftest import LOCAL_MASTER
from topologies import workload
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import NetworkEvent

# not metro.yaml, the scale scenario (2,000,000 tuples, 5,000 subscriptions): it runs in the slow suite
# (tests/spark/test_spark_metro.py)
SHIPPED = sorted(p for p in glob.glob("topologies/*.yaml") if not p.endswith("/metro.yaml"))
# the default run (each Spark run costs seconds) takes Figure 1 with three strategies whose plans differ in
# shape (raw reads only; trimmed ideal flows; shared flow trees), the other small scenarios with stream
# sharing, and large.yaml's data-shipping (chunks run again); the slow suite runs every strategy everywhere
SHAPES = ("data-shipping", "ideal", "sharing-em")
DEFAULT_CASES = [
    *[("topologies/figure1.yaml", name) for name in SHAPES],
    *[(p, "sharing-em") for p in SHIPPED if not p.endswith(("figure1.yaml", "large.yaml"))],
    ("topologies/large.yaml", "data-shipping"),
]


@cache
def _scenario_and_plans(path: str):
    scenario = load_scenario(path)
    network = Network.of(scenario)
    return scenario, {name: make_plan(scenario, name, network) for name in STRATEGIES}


def assert_same_runs(scenario, local, spark) -> None:
    """The Spark run reports what the local one does (and holds no per-tuple data)."""
    assert_same_traffic(local, spark)
    local_report = build_report(scenario, {local.strategy: local}, engine="local")
    spark_report = build_report(scenario, {spark.strategy: spark}, engine="spark")
    assert {**spark_report, "engine": "local"} == local_report


def assert_same_traffic(local, spark) -> None:
    """The Spark run measured the traffic the local one did, everywhere."""
    assert spark.engine == "spark"
    assert spark.delivered == {} and spark.latencies == {}
    assert spark.link_bytes == local.link_bytes
    assert spark.link_tuples == local.link_tuples
    assert (spark.access_bytes, spark.access_link_bytes) == (local.access_bytes, local.access_link_bytes)
    assert spark.delivered_attrs == local.delivered_attrs
    assert spark.timeline.keys() == local.timeline.keys()
    for direction, series in local.timeline.items():
        np.testing.assert_array_equal(spark.timeline[direction], series)
    assert spark.link_dropped == local.link_dropped
    assert spark.access_link_tuples == local.access_link_tuples
    assert (spark.operators, spark.rejected) == (local.operators, local.rejected)
    for name in ("offered", "landed"):
        assert getattr(spark, name).keys() == getattr(local, name).keys()
        for key, series in getattr(local, name).items():
            np.testing.assert_array_equal(getattr(spark, name)[key], series, err_msg=f"{name} {key}")


def _compare_engines(path: str, strategies=STRATEGIES, chunks: int | None = None) -> None:
    scenario, plans = _scenario_and_plans(path)
    for name in strategies:
        local = run_local(scenario, plans[name])
        assert sum(len(v) for v in local.delivered.values()) > 0  # not vacuous
        assert_same_runs(scenario, local, run_spark(scenario, plans[name], master=LOCAL_MASTER, chunks=chunks))


@pytest.mark.spark
@pytest.mark.parametrize(("path", "strategy"), DEFAULT_CASES)
def test_spark_report_equals_the_local_report(spark, path, strategy):
    _compare_engines(path, (strategy,))


@pytest.mark.spark
def test_one_chunk_per_window_changes_nothing(spark):
    _compare_engines("topologies/figure1.yaml", ("sharing-em",), chunks=1000)


@pytest.mark.spark
def test_spark_equals_local_where_full_buffers_drop_tuples(spark, tmp_path):
    # figure1 with SP4 -> SP5 slower than its traffic and a small buffer: data-shipping and multicast drop
    # there for most of the run, so the chunks' queue states (buffers included) must be carried exactly
    with open("topologies/figure1.yaml", encoding="utf-8") as file:
        text = file.read().replace("name: figure1", "name: buffered")
    path = tmp_path / "buffered.yaml"
    path.write_text(text.replace("    - [SP4, SP5]\n", "    - [SP4, SP5, {bandwidth: 20Kbit, buffer: 2KB}]\n"))
    scenario, plans = _scenario_and_plans(str(path))
    for name in ("data-shipping", "multicast"):
        local = run_local(scenario, plans[name])
        assert sum(local.link_dropped.values()) > 0  # not vacuous
        assert_same_runs(scenario, local, run_spark(scenario, plans[name], master=LOCAL_MASTER, chunks=5))


@pytest.mark.spark
def test_spark_equals_local_where_processors_delay_and_drop(spark, tmp_path):
    # figure1 with every super-peer's processor limited and the source's overloaded with a small input
    # buffer: processors queue across chunk boundaries and drop (docs/ACCOUNTING.md, "Super-peer CPU")
    with open("topologies/figure1.yaml", encoding="utf-8") as file:
        text = file.read().replace("name: figure1", "name: processors")
    text = text.replace(
        "  defaults: {bandwidth: 100Mbit, latency: 2ms}", "  defaults: {bandwidth: 100Mbit, latency: 2ms, cpu: 2000}"
    )
    text = text.replace(
        "  super_peers: [SP0, SP1, SP2, SP3, SP4, SP5, SP6, SP7]",
        "  super_peers: [SP0, SP1, SP2, SP3, {id: SP4, cpu: 350, input_buffer: 200}, SP5, SP6, SP7]",
    )
    path = tmp_path / "processors.yaml"
    path.write_text(text)
    scenario, plans = _scenario_and_plans(str(path))
    assert scenario.cpu["SP4"] == 350
    for name in ("data-shipping", "multicast"):  # the baselines: they ignore the limits (sharing avoids them)
        local = run_local(scenario, plans[name])
        assert local.processors["SP4"].jobs > 0 and local.processors["SP4"].delay_ticks > 0  # not vacuous
        spark = run_spark(scenario, plans[name], master=LOCAL_MASTER, chunks=7)
        assert_same_runs(scenario, local, spark)
        assert spark.processors.keys() == local.processors.keys()
        for sp, tally in local.processors.items():
            other = spark.processors[sp]
            assert (other.ops, other.delay_ticks, other.jobs, other.dropped) == (
                tally.ops,
                tally.delay_ticks,
                tally.jobs,
                tally.dropped,
            )
            n = max(len(other.offered), len(tally.offered))
            assert np.array_equal(np.pad(other.offered, (0, n - len(other.offered))),
                                  np.pad(tally.offered, (0, n - len(tally.offered))))  # fmt: skip
    assert local.processors["SP4"].dropped > 0  # multicast overloads the source's processor


@pytest.mark.spark
def test_spark_equals_local_for_aggregates_whose_input_is_dropped(spark):
    # figure1's Q1/Q2 as time-window aggregates (the chunks send states per pane and group) and Q3 as count
    # windows (its copies), SP4 -> SP5 slower than its traffic with a small buffer: records are dropped
    from tests.test_aggregates import FIGURE1_AGGREGATES, with_aggregates

    base = load_scenario("topologies/figure1.yaml")
    slow = replace(base.links[0], bandwidth=40e3, buffer=2000.0)
    count = "SELECT COUNT(*), AVG(c), MIN(c) FROM stream0 WHERE a BETWEEN 50 AND 80 WINDOW 20 TUPLES SLIDE 10 TUPLES"
    scenario = with_aggregates(replace(base, links=(slow, *base.links[1:])), {**FIGURE1_AGGREGATES, "Q3": count})
    network = Network.of(scenario)
    for name in ("data-shipping", "sharing-em"):
        plan = make_plan(scenario, name, network)
        local = run_local(scenario, plan)
        assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER, chunks=6))
        if name == "data-shipping":  # not vacuous: records of both kinds of window dropped
            assert local.summary["Q2"].dropped > 0 and local.summary["Q3"].dropped > 0


@pytest.mark.spark
def test_spark_equals_local_for_records_shipped_and_dropped(spark):
    # query-shipping's records on figure1 (docs/ACCOUNTING.md, "Records"), dropped behind Q3's tuples on a slow
    # link and for inputs the source's busy processor dropped, held back across chunks of 1 s windows
    from tests.test_record_flows import _congested, figure1_aggregates

    scenario = _congested(figure1_aggregates())
    plan = make_plan(scenario, "query-shipping", Network.of(scenario))
    local = run_local(scenario, plan, window=1.0)
    assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER, chunks=6, window=1.0))
    assert local.summary["Q1"].dropped > 0 and local.summary["Q1"].delivered > 0


@pytest.mark.spark
def test_spark_equals_local_for_pane_flows(spark):
    # a pane tree's rows (docs/ACCOUNTING.md, "Panes"), some dropped behind a selection's tuples on a slow
    # link, and its readers' records combined at their super-peers, held back across chunks of 1 s windows
    from tests.test_pane_flows import _plan, _scenario

    scenario = _scenario(25_000.0)
    plan = _plan(scenario)
    local = run_local(scenario, plan, window=1.0)
    assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER, chunks=6, window=1.0))
    assert local.summary["Q2"].dropped > 0 and local.summary["Q1"].delivered > 0
    # fragments: a row per cell of overlapping WHEREs, each branch keeping its reader's cells
    from tests.test_aggregates import with_aggregates
    from tests.test_pane_flows import _fragments

    q2 = "SELECT COUNT(*), MAX(c) FROM stream0 WHERE a BETWEEN 40 AND 80 WINDOW 10 s"
    scenario = with_aggregates(scenario, {"Q2": q2})
    plan, _ = _fragments(scenario)
    local = run_local(scenario, plan, window=1.0)
    assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER, chunks=6, window=1.0))
    assert local.summary["Q2"].delivered > 0
    # eras: the tree widened as Q2 arrives mid-pane, narrowed as it leaves (docs/ACCOUNTING.md, "Eras")
    from tests import test_pane_eras

    scenario = test_pane_eras._scenario()
    plan = test_pane_eras._plan(scenario)
    local = run_local(scenario, plan, window=1.0)
    assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER, chunks=6, window=1.0))
    assert local.summary["Q2"].delivered == 14


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED)
def test_spark_report_equals_the_local_report_for_every_strategy(spark, path):
    _compare_engines(path)


def _without_replan_times(doc: dict) -> dict:
    """A report.json or plans.json document with every re-plan's wall time (``replan_s``, measured where the
    plan was made) set to None: what the README says differs between two runs besides ``engine``."""
    doc = json.loads(json.dumps(doc))
    for event in doc.get("events", ()):
        for done in event["strategies"].values():
            done["replan_s"] = None
    for entry in doc["strategies"].values() if "strategies" in doc else doc.values():
        for replan in entry.get("replans", ()):
            replan["replan_s"] = None
    return doc


@pytest.mark.parametrize("path", ["topologies/figure1.yaml", "topologies/failover.yaml"])
def test_the_run_command_on_spark_pipelines_plans_and_reports_what_the_local_engine_does(spark, tmp_path, path):
    # a forked planner lays the plans out while Spark simulates, two strategies at a time: same report,
    # same plans.json as the local engine's run, strategy for strategy, but for the re-plans' wall times
    from reports.runner import RunOptions, run_scenario

    scenario = load_scenario(path)
    reports, plans = {}, {}
    for engine in ("local", "spark"):
        options = RunOptions(
            engine=engine,
            spark_master=LOCAL_MASTER if engine == "spark" else None,
            out=str(tmp_path / engine),
            plots=False,
            progress=False,
        )
        reports[engine] = run_scenario(scenario, options).report
        plans[engine] = json.loads((tmp_path / engine / "plans.json").read_text())
    assert reports["spark"]["engine"] == "spark"
    assert bool(scenario.events) == any(r["replan_s"] > 0 for p in plans["local"].values() for r in p["replans"])
    assert _without_replan_times({**reports["spark"], "engine": "local"}) == _without_replan_times(reports["local"])
    assert _without_replan_times(plans["spark"]) == _without_replan_times(plans["local"])
    if not scenario.events:
        assert (tmp_path / "spark" / "plans.json").read_bytes() == (tmp_path / "local" / "plans.json").read_bytes()
    assert not [p for p in (tmp_path / "spark").iterdir() if p.name.startswith(".")]  # no layouts left behind


# on the routes of figure1's plans made without them (SP4-SP5 carries every stream)
FAILURES = (
    NetworkEvent(12.0, "fail", "link", ("SP4", "SP5")),
    NetworkEvent(19.5, "recover", "link", ("SP5", "SP4")),
    NetworkEvent(33.0, "fail", "super_peer", ("SP1",)),
    NetworkEvent(41.0, "recover", "super_peer", ("SP1",)),
    NetworkEvent(38.0, "fail", "link", ("SP5", "SP6")),
)


@pytest.mark.spark
def test_spark_equals_local_where_failures_lose_tuples(spark, tmp_path):
    # figure1 with SP4 -> SP5 slower than its traffic (a backlog the failure of SP4-SP5 empties) and
    # failures on the routes of the plans made without them: the same tuples lost, per subscription and
    # per link direction, and everything else as the local run
    with open("topologies/figure1.yaml", encoding="utf-8") as file:
        text = file.read().replace("name: figure1", "name: overloaded")
    path = tmp_path / "overloaded.yaml"
    path.write_text(text.replace("    - [SP4, SP5]\n", "    - [SP4, SP5, {bandwidth: 20Kbit}]\n"))
    static, plans = _scenario_and_plans(str(path))
    scenario = replace(static, events=FAILURES)
    expected = expected_results(static)
    for name in ("data-shipping", "sharing-em"):
        local = run_local(scenario, plans[name])
        spark = run_spark(scenario, plans[name], master=LOCAL_MASTER, chunks=5)
        assert sum(local.link_lost.values()) > 0  # not vacuous
        assert spark.link_lost == local.link_lost
        for sub in scenario.subscriptions:
            found = spark.summary[sub.id]
            assert (found.delivered, found.dropped, found.lost) == (
                len(local.delivered[sub.id]),
                len(local.dropped[sub.id]),
                len(local.lost[sub.id]),
            )
            # cut off while SP1 is down (Q1 at SP1, Q3 behind it): unreachable, and lost too by the static plan
            wanted = expected.indices[sub.id] / static.stream(sub.stream).rate
            cut = int(((wanted >= 33) & (wanted < 41)).sum()) if sub.id in ("Q1", "Q3") else 0
            assert (found.missing, found.extra, found.unreachable) == (0, cut, cut)
            assert found.latency == LatencyStats.of(local.latencies[sub.id])
        assert spark.latency == LatencyStats.of(np.concatenate(list(local.latencies.values())))
        assert_same_traffic(local, spark)


@pytest.mark.spark
def test_progress_counts_the_tuples_of_the_chunks_settled(spark):
    # runs of chunks end in whatever order the executors finish them; the progress counts the tuples of the
    # chunks settled, which are settled in order, up to every tuple of the run
    scenario, plans = _scenario_and_plans("topologies/large.yaml")
    calls = []
    run_spark(scenario, plans["data-shipping"], lambda done, total: calls.append((done, total)), master=LOCAL_MASTER)
    total = sum(len(t) for t in workload.run_emission_times(scenario).values())
    assert len(calls) == 2 * 4  # a call per chunk (4 per core)
    assert [t for _, t in calls] == [total] * len(calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(set(done)) == len(done) and done[-1] == total


@pytest.mark.spark
def test_spark_equals_local_on_a_replay_timed_by_its_recording(spark, tmp_path):
    # the rows' own timestamps drive emission: bursts of several tuples at one instant and gaps of seconds,
    # so chunks cut through bursts and some windows stay empty
    stamps = [0, 0, 0, 0.25, 2, 2, 2.5, 6, 6, 6.001, 9.5, 9.5]
    rows = ["ts,a,b"] + [
        f"{t + 10 * r},{(7 * k + r) % 100},{(3 * k) % 100}" for r in range(3) for k, t in enumerate(stamps)
    ]
    (tmp_path / "rec.csv").write_text("\n".join(rows) + "\n")
    with open("topologies/figure1.yaml", encoding="utf-8") as file:
        doc = yaml.safe_load(file)
    doc["name"], doc["duration"] = "timed", 30
    doc["streams"] = [{"id": "stream0", "source": "P0", "replay": "rec.csv", "time": "ts"}]
    doc["subscriptions"] = [{**s, "until": None} for s in doc["subscriptions"]]
    (tmp_path / "timed.yaml").write_text(yaml.safe_dump(doc))
    _compare_engines(str(tmp_path / "timed.yaml"), ("data-shipping", "sharing-em"), chunks=4)
