"""The exact order statistics of the Spark engine, without Spark: its two task functions run over
hand-made partitions of latency cells and the driver's steps in between, against a plain sort."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from peers import spark_select
from peers.spark_select import OVERALL, _bracket, _count_bracket, _pick, _settle


def _batches(cells: list[tuple[int, np.ndarray]]) -> list[pa.RecordBatch]:
    subs = pa.array([s for s, _ in cells], pa.int32())
    bits = pa.array([v.view(np.int64).tobytes() for _, v in cells], pa.binary())
    return [pa.RecordBatch.from_arrays([subs, bits], names=["sub", "bits"])]


def _select(tasks: list[list[tuple[int, np.ndarray]]], targets: dict[int, list[int]]) -> dict:
    """What order_statistics computes, with ``tasks`` as the partitions (each holding whole subscriptions)."""
    per_sub = {k: sorted(r) for k, r in targets.items() if k != OVERALL}
    found, samples = {}, []
    for cells in tasks:
        for batch in _pick(per_sub, iter(_batches(cells))):
            for row in batch.to_pylist():
                if row["sub"] == OVERALL:
                    samples.append((np.frombuffer(row["sample"], np.int64), row["rank"], row["count"]))
                else:
                    found[(row["sub"], row["rank"])] = row["bits"]
    brackets = {rank: _bracket(samples, rank) for rank in targets.get(OVERALL, [])}
    counted = [
        row for cells in tasks for batch in _count_bracket(brackets, iter(_batches(cells))) for row in batch.to_pylist()
    ]
    for rank, (lo, hi) in brackets.items():
        found[(OVERALL, rank)] = _settle(rank, lo, hi, [r for r in counted if r["rank"] == rank])
    return found


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=30), min_size=1, max_size=8),
    st.integers(1, 4),
    st.integers(1, 5),
    st.data(),
)
def test_ranks_equal_a_plain_sort(per_sub, tasks, samples, data):
    spark_select.SAMPLES = samples  # few samples: wide brackets, many ties (small integers as bits)
    try:
        values = {k: np.array(v, np.int64) for k, v in enumerate(per_sub)}
        partitions = [[(k, v) for k, v in values.items() if k % tasks == t] for t in range(tasks)]
        everything = np.sort(np.concatenate(list(values.values())))
        targets = {k: data.draw(st.sets(st.integers(0, len(v) - 1), min_size=1)) for k, v in values.items()}
        targets[OVERALL] = data.draw(st.sets(st.integers(0, len(everything) - 1), min_size=1, max_size=6))
        found = _select(partitions, {k: sorted(r) for k, r in targets.items()})
        for k, ranks in targets.items():
            mine = everything if k == OVERALL else np.sort(values[k])
            for r in ranks:
                assert found[(k, r)] == mine[r]
    finally:
        spark_select.SAMPLES = 4096


def test_a_task_sends_a_bounded_sample_and_bracket():
    rng = np.random.default_rng(5)
    latencies = [(k, rng.uniform(0.01, 0.05, 20_000)) for k in range(50)]  # a million values
    tasks = [latencies[:25], latencies[25:]]
    everything = np.sort(np.concatenate([v for _, v in latencies]).view(np.int64))
    rank = 990_000
    samples = []
    for cells in tasks:
        (row,) = [r for b in _pick({}, iter(_batches(cells))) for r in b.to_pylist() if r["sub"] == OVERALL]
        assert len(row["sample"]) <= 8 * spark_select.SAMPLES
        samples.append((np.frombuffer(row["sample"], np.int64), row["rank"], row["count"]))
    lo, hi = _bracket(samples, rank)
    rows = [
        r for cells in tasks for b in _count_bracket({rank: (lo, hi)}, iter(_batches(cells))) for r in b.to_pylist()
    ]
    assert sum(len(r["between"]) for r in rows) // 8 <= 4 * len(everything) // spark_select.SAMPLES
    assert _settle(rank, lo, hi, rows) == everything[rank]
