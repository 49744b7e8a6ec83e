"""The exact order statistics of the Spark engine, without Spark: the chunks' samples, the driver's
brackets and the selection job's task function over hand-made partitions of latency cells, against a plain
sort."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from peers import spark_select
from peers.spark_select import OVERALL, _bracket, _found, _pick, _settle, cell_bits, latency_cell, sample_of


def _batches(cells: list[tuple[int, np.ndarray]]) -> list[pa.RecordBatch]:
    subs = pa.array([s for s, _ in cells], pa.int32())
    bits = pa.array([latency_cell(v.view(np.float64)) for _, v in cells], pa.binary())
    return [pa.RecordBatch.from_arrays([subs, bits], names=["sub", "bits"])]


def _bits(values: np.ndarray) -> np.ndarray:
    """Values given as latency bits, as the latencies (seconds) whose bits they are."""
    return np.asarray(values, np.int64).view(np.float64)


def _select(chunks: list[np.ndarray], tasks: list[list[tuple[int, np.ndarray]]], targets: dict[int, list[int]]):
    """What order_statistics computes: ``chunks`` the latency bits of each chunk (for its sample), ``tasks``
    the same values as the selection job's partitions (each holding whole subscriptions)."""
    per_sub = {k: sorted(r) for k, r in targets.items() if k != OVERALL}
    samples = [sample_of(_bits(c)) for c in chunks]
    brackets = {rank: _bracket(samples, rank) for rank in targets.get(OVERALL, [])}
    batches = [b for cells in tasks for b in _pick(per_sub, brackets, iter(_batches(cells)))]
    return _found(pa.Table.from_batches(batches), per_sub, brackets)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=30), min_size=1, max_size=8),
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(1, 5),
    st.data(),
)
def test_ranks_equal_a_plain_sort(per_sub, tasks, chunks, samples, data):
    spark_select.SAMPLES = samples  # few samples: wide brackets, many ties (small integers as bits)
    try:
        values = {k: np.array(v, np.int64) for k, v in enumerate(per_sub)}
        partitions = [[(k, v) for k, v in values.items() if k % tasks == t] for t in range(tasks)]
        everything = np.sort(np.concatenate(list(values.values())))
        # the chunks split the same values another way: each subscription's values spread over them
        pieces = [np.array_split(v, chunks) for v in values.values()]
        by_chunk = [np.concatenate([p[c] for p in pieces]) for c in range(chunks)]
        targets = {k: data.draw(st.sets(st.integers(0, len(v) - 1), min_size=1)) for k, v in values.items()}
        targets[OVERALL] = data.draw(st.sets(st.integers(0, len(everything) - 1), min_size=1, max_size=6))
        found = _select(by_chunk, partitions, {k: sorted(r) for k, r in targets.items()})
        for k, ranks in targets.items():
            mine = everything if k == OVERALL else np.sort(values[k])
            for r in ranks:
                assert found[(k, r)] == _bits(mine[r : r + 1])[0]
    finally:
        spark_select.SAMPLES = 4096


def test_a_chunk_sends_a_bounded_sample_and_a_task_a_bounded_bracket():
    rng = np.random.default_rng(5)
    latencies = [(k, rng.uniform(0.01, 0.05, 20_000)) for k in range(50)]  # a million values
    tasks = [latencies[:25], latencies[25:]]
    chunks = [np.concatenate([v[c::3] for _, v in latencies]) for c in range(3)]
    everything = np.sort(np.concatenate([v for _, v in latencies]).view(np.int64))
    rank = 990_000
    samples = [sample_of(c) for c in chunks]
    for (sample, step, count), chunk in zip(samples, chunks, strict=True):
        assert len(sample) <= spark_select.SAMPLES and count == len(chunk)
        np.testing.assert_array_equal(sample, np.sort(chunk.view(np.int64))[step - 1 :: step])
    lo, hi = _bracket(samples, rank)
    rows = [
        r
        for cells in tasks
        for b in _pick({}, {rank: (lo, hi)}, iter(_batches(cells)))
        for r in b.to_pylist()
        if r["sub"] == OVERALL
    ]
    assert sum(len(r["between"]) for r in rows) // 8 <= 4 * len(everything) // spark_select.SAMPLES
    assert _settle(rank, lo, hi, rows) == everything[rank]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=300), st.integers(1, 3))
def test_a_latency_cell_gives_back_its_bits(values, step):
    latencies = np.array(values, np.float64)[::step]  # a strided view, as a slice of a chunk's array may be
    cell = latency_cell(latencies)
    assert np.array_equal(cell_bits(cell), np.ascontiguousarray(latencies).view(np.int64))


def test_repeated_latencies_make_a_small_cell():
    latencies = np.tile(np.array([0.012, 0.0305, 0.25]), 10_000)
    assert len(latency_cell(latencies)) < 8 * len(latencies) // 20
