"""``bench spark`` on a small input: its Catalyst expressions mean what the predicates mean, and both
sides report identical per-flow results."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from bench import spark as bench_spark
from peers.selection import select_batch


def test_flow_predicates_are_deterministic_and_shaped_as_asked():
    first = bench_spark.flow_predicates(7, 3, seed=5)
    assert first == bench_spark.flow_predicates(7, 3, seed=5)
    assert len(first) == 7 and all(len(p.boxes) == 3 and p.dims == ("x", "y", "z") for p in first)


@pytest.mark.spark
def test_sql_conditions_select_exactly_the_tuples_the_predicates_accept(spark):
    from matcher.parser import parse_condition

    rng = np.random.default_rng(2)
    rows = rng.integers(0, 6, size=(300, 3)).astype(float)
    frame = spark.createDataFrame(
        [(i, *map(float, r)) for i, r in enumerate(rows)], "id long, x double, y double, z double"
    )
    for text in ["x < 3 OR (y BETWEEN 1 AND 2 AND z != 4)", "x >= 5", "NOT (x > 1 AND y <= 3)", "x = 2 AND x = 3"]:
        predicate = parse_condition(text)
        got = sorted(r.id for r in frame.where(bench_spark.sql_condition(predicate)).select("id").collect())
        table = bench_spark.super_peer_readers([predicate])
        ((positions, _),) = select_batch(table, [0], bench_spark.DIMS, rows.T)
        assert got == positions.tolist(), text


@pytest.mark.spark
@pytest.mark.slow  # about 20 s: the default run keeps near 15 minutes
def test_bench_json_reports_identical_results_and_rates(spark, capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    bench_spark.configure(parser)
    argv = ["--json", "--tuples", "6000", "--flows", "6", "--repeat", "1", "--batch", "2048", "--screen", "2000"]
    args = parser.parse_args([*argv, "--chunk", "4", "--no-naive"])
    assert bench_spark.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["identical"] is True and result["naive"] is None
    assert result["ours"]["evals_per_s"] > 0 and result["catalyst"]["evals_per_s"] > 0
    assert result["params"]["tuples"] == 6000 and result["params"]["flows"] == 6 and result["params"]["screen"] == 2000
    assert set(result["screened"]) == {
        "explode, one query",
        "explode, 2 queries of 4 flows",
        "aggregate, one query",
        "aggregate, 2 queries of 4 flows",
    }
    assert result["catalyst"]["formulation"] == min(result["screened"], key=lambda n: result["screened"][n]["seconds"])
    # the shared session started without the flag; the JVM's options are fixed
    assert result["params"]["jit_flag"] is False


@pytest.mark.spark
@pytest.mark.parametrize("formulation", sorted(bench_spark.FORMULATIONS))
@pytest.mark.parametrize("chunk", [0, 1, 3])
def test_every_catalyst_formulation_gives_the_operators_results(spark, formulation, chunk):
    from pyspark import StorageLevel

    predicates = bench_spark.flow_predicates(5, 2, seed=4)
    frame = bench_spark._input_frame(spark, 3000, 2, seed=4).persist(StorageLevel.MEMORY_ONLY)
    try:
        got = bench_spark._catalyst(frame, predicates, formulation, chunk)
        rows = frame.orderBy("id").collect()
    finally:
        frame.unpersist()
    values = np.array([[r[d] for r in rows] for d in bench_spark.DIMS])
    picked = select_batch(bench_spark.super_peer_readers(predicates), range(len(predicates)), bench_spark.DIMS, values)
    ids = np.array([r["id"] for r in rows])
    assert got == {j: (len(positions), int(ids[positions].sum())) for j, (positions, _) in enumerate(picked)}
