"""Exact order statistics of the latencies the Spark engine keeps on its executors.

A report's percentiles need, per subscription and over all deliveries, the latencies at a few ranks of
the sorted values (:func:`network.latency.ranks_needed`).  The latency rows (a subscription number and the
IEEE bits of its latencies in one chunk, as one binary cell, :func:`latency_cell`) stay where the chunk
tasks made them; a positive double's bits sort as its value does, so ranks are found on the bits, exactly,
in one job:

1. each chunk task sends, with its summary, a *sample* of its latencies: every ``step``-th of them in
   sorted order (``step`` so that about :data:`SAMPLES` are sent), with their count (:func:`sample_of`);
2. from the samples the driver brackets each overall rank between two sample values ``lo < hi`` whose
   global counts it knows to within a few steps;
3. the job shuffles the latency cells by subscription; each task then holds whole subscriptions, picks
   each one's ranks with ``np.partition``, and for each overall rank counts its values up to ``lo`` and
   sends those strictly between (at most a few steps of them per chunk) and how many equal ``hi``.  The
   value at the rank is among those, exactly.

The driver receives a few rows per subscription and rank and a bounded sample per chunk, never the
latencies themselves, whatever their number.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa

from topologies.errors import EngineError

OVERALL = -1  # the key of the selection over every delivery
SAMPLES = 4096  # sample values per chunk for the overall ranks
PICK_SCHEMA = "sub int, rank long, bits long, below long, equal long, between binary"
_PICK_ARROW = pa.schema(
    [("sub", pa.int32()), ("rank", pa.int64()), ("bits", pa.int64()), ("below", pa.int64()),
     ("equal", pa.int64()), ("between", pa.binary())]
)  # fmt: skip
_LOST = "the latency selection lost a rank: the executors' rows disagree with the summaries"
_CODEC = "lz4"  # the latency cells' compression (pyarrow's: no dependency of its own)
_COUNT = struct.Struct("<q")  # a latency cell's header: how many latencies it holds

Sample = tuple[np.ndarray, int, int]  # every step-th of a chunk's sorted latency bits, the step, their count
Bracket = tuple[int | None, int | None]  # sample values lo < hi around an overall rank (None: no bound)


def latency_cell(latencies: np.ndarray) -> bytes:
    """One subscription's ``latencies`` (seconds) of one chunk as a latency row's cell: their count, then
    their IEEE bits compressed.  A run's latencies repeat a lot (the same paths, the same delays), and the
    cells are what Spark keeps and shuffles: on metro.yaml they shrink about 40x, for a fraction of a
    second of the tasks' CPU, and the selection moves megabytes where it moved a hundred."""
    bits = np.ascontiguousarray(latencies, np.float64).view(np.int64)
    return _COUNT.pack(len(bits)) + pa.Codec(_CODEC).compress(bits.tobytes(), asbytes=True)


def cell_bits(cell: bytes) -> np.ndarray:
    """The latency bits of a cell :func:`latency_cell` made."""
    (n,) = _COUNT.unpack_from(cell)
    raw = pa.Codec(_CODEC).decompress(memoryview(cell)[_COUNT.size :], 8 * n, asbytes=True)
    return np.frombuffer(raw, np.int64)


def sample_of(latencies: np.ndarray) -> Sample:
    """A chunk's sample of its ``latencies`` (seconds) for the overall ranks: every ``step``-th of their
    sorted bits, the step, and their count."""
    values = np.sort(latencies.view(np.int64))
    step = max(1, -(-len(values) // SAMPLES))
    return values[step - 1 :: step].copy(), step, len(values)


def order_statistics(rows, targets: Mapping[int, set[int]], samples: list[Sample]) -> dict[tuple[int, int], float]:
    """The latency at each wanted rank (0-based, ascending) of each key of ``targets``: a subscription
    number, or :data:`OVERALL` for all ``rows`` (a DataFrame of columns ``sub`` and ``bits``, a cell of
    latency bits per row), whose chunks sent ``samples``."""
    if not any(targets.values()):
        return {}
    per_sub = {k: sorted(r) for k, r in targets.items() if k != OVERALL and r}
    brackets = {rank: _bracket(samples, rank) for rank in sorted(targets.get(OVERALL, ()))}
    parts = max(1, rows.sparkSession.sparkContext.defaultParallelism)
    # the rows come back as Arrow (a Python object per row would cost more than the job: 4 per subscription)
    picked = rows.repartition(parts, "sub").mapInArrow(partial(_pick, per_sub, brackets), PICK_SCHEMA).toArrow()
    return _found(picked, per_sub, brackets)


def _found(
    picked: pa.Table, targets: Mapping[int, list[int]], brackets: Mapping[int, Bracket]
) -> dict[tuple[int, int], float]:
    """The latency at each rank from the rows every task :func:`_pick` sent (``picked``, of
    :data:`PICK_SCHEMA`): its ``targets`` and ``brackets``."""
    subs = picked.column("sub").to_numpy()
    ranks = picked.column("rank").to_numpy()
    bits = picked.column("bits").to_numpy()
    mine = subs != OVERALL
    keys = zip(subs[mine].tolist(), ranks[mine].tolist(), strict=True)
    found = dict(zip(keys, bits[mine].view(np.float64).tolist(), strict=True))
    if len(found) != sum(len(r) for r in targets.values()):
        raise EngineError(_LOST)
    for rank, (lo, hi) in brackets.items():
        counted = picked.take(np.flatnonzero(~mine & (ranks == rank))).to_pylist()
        found[(OVERALL, rank)] = _value(_settle(rank, lo, hi, counted))
    return found


def _value(bits: int) -> float:
    return float(np.array([bits], np.int64).view(np.float64)[0])


def _pick(
    targets: Mapping[int, list[int]], brackets: Mapping[int, Bracket], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The ranks of the subscriptions in this task, then per overall rank this task's values at or below
    ``lo``, equal to ``hi``, and those between."""
    cells: dict[int, list[bytes]] = {}
    for batch in batches:
        for sub, cell in zip(batch.column("sub").to_pylist(), batch.column("bits").to_pylist(), strict=True):
            cells.setdefault(sub, []).append(cell)
    subs, ranks, bits, everything = [], [], [], []
    for sub, parts in cells.items():
        values = np.concatenate([cell_bits(c) for c in parts])
        everything.append(values)
        wanted = targets.get(sub, [])
        if wanted and wanted[-1] >= len(values):
            raise EngineError(f"subscription number {sub} has {len(values)} latencies, rank {wanted[-1]} wanted")
        if wanted:
            subs += [sub] * len(wanted)
            ranks += wanted
            bits += np.partition(values, wanted)[wanted].tolist()
    values = np.concatenate(everything) if everything else np.zeros(0, np.int64)
    below, equal, between = [0] * len(subs), [0] * len(subs), [None] * len(subs)
    for rank, (lo, hi) in brackets.items():
        over = values > lo if lo is not None else np.ones(len(values), np.bool_)
        under = values < hi if hi is not None else np.ones(len(values), np.bool_)
        subs.append(OVERALL)
        ranks.append(rank)
        bits.append(0)
        below.append(int(len(values) - over.sum()))
        equal.append(int((values == hi).sum()) if hi is not None else 0)
        between.append(values[over & under].tobytes())
    yield pa.RecordBatch.from_arrays(
        [pa.array(subs, pa.int32()), pa.array(ranks, pa.int64()), pa.array(bits, pa.int64()),
         pa.array(below, pa.int64()), pa.array(equal, pa.int64()), pa.array(between, pa.binary())],
        schema=_PICK_ARROW,
    )  # fmt: skip


def _bracket(samples: list[Sample], rank: int) -> Bracket:
    """Sample values ``lo < hi`` with at most ``rank`` values at or below ``lo`` and more than ``rank`` at
    or below ``hi``, as close together as the samples allow.

    Chunk ``t``'s sample holds its values at sorted positions ``step - 1, 2 step - 1, ...``, so a value ``v``
    with ``c`` sample values at or below it has at least ``c step`` and fewer than ``(c + 1) step + ...``
    values at or below it there (at most the chunk's count)."""
    pool = np.unique(np.concatenate([s for s, _, _ in samples])) if samples else np.zeros(0, np.int64)

    def bounds(v: int) -> tuple[int, int]:
        low = high = 0
        for sample, step, n in samples:
            c = int(np.searchsorted(sample, v, side="right"))
            low += c * step
            high += min(n, (c + 1) * step - 1)
        return low, high

    lo = hi = None
    # the largest sample value sure to have at most ``rank`` values at or below it
    left, right = 0, len(pool) - 1
    while left <= right:
        mid = (left + right) // 2
        if bounds(int(pool[mid]))[1] <= rank:
            lo, left = int(pool[mid]), mid + 1
        else:
            right = mid - 1
    # the smallest sample value sure to have more than ``rank`` values at or below it
    left, right = 0, len(pool) - 1
    while left <= right:
        mid = (left + right) // 2
        if bounds(int(pool[mid]))[0] > rank:
            hi, right = int(pool[mid]), mid - 1
        else:
            left = mid + 1
    return lo, hi


def _settle(rank: int, lo: int | None, hi: int | None, rows) -> int:
    """The value at ``rank`` from every task's count at or below ``lo``, values strictly between ``lo`` and
    ``hi`` and count equal to ``hi``."""
    below = sum(r["below"] for r in rows)
    between = np.sort(np.concatenate([np.frombuffer(r["between"], np.int64) for r in rows] or [np.zeros(0, np.int64)]))
    equal = sum(r["equal"] for r in rows)
    at = rank - below
    if 0 <= at < len(between):
        return int(between[at])
    if hi is not None and len(between) <= at < len(between) + equal:
        return hi
    raise EngineError(_LOST)
