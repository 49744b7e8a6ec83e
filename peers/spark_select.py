"""Exact order statistics of the latencies the Spark engine keeps on its executors.

A report's percentiles need, per subscription and over all deliveries, the latencies at a few ranks of
the sorted values (:func:`network.latency.ranks_needed`).  The latency rows (subscription number, the
latency's IEEE bits) stay where the chunk tasks made them; a positive double's bits sort as its value does,
so ranks are found on the bits, exactly:

- **per subscription**, the rows are grouped by subscription (one shuffle of the rows) and each group
  picks its ranks with ``np.partition``;
- **over every delivery**, a radix selection: four passes over the rows each count, per wanted rank, the
  rows under the prefix found so far by their next 16 bits; the driver adds the counts of all tasks
  (65,536 numbers per pass and prefix, whatever the number of rows) and keeps the digit where the running
  count reaches the rank.

The driver receives a few rows per subscription and rank, never the latencies themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa

from topologies.errors import EngineError

OVERALL = -1  # the key of the selection over every delivery
DIGIT_BITS = 16
_DIGITS = 1 << DIGIT_BITS
RANK_SCHEMA = "sub int, rank long, bits long"
COUNT_SCHEMA = "prefix long, counts binary"


def order_statistics(rows, targets: Mapping[int, set[int]]) -> dict[tuple[int, int], float]:
    """The latency at each wanted rank (0-based, ascending) of each key of ``targets``: a subscription
    number, or :data:`OVERALL` for all ``rows`` (a DataFrame with columns ``sub`` and ``bits``)."""
    found: dict[tuple[int, int], float] = {}
    per_sub = {k: sorted(r) for k, r in targets.items() if k != OVERALL and r}
    if per_sub:

        def pick(table: pa.Table) -> pa.Table:  # a function with type hints: Spark reads its kind from them
            return _pick(per_sub, table)

        picked = rows.groupBy("sub").applyInArrow(pick, RANK_SCHEMA).collect()
        for row in picked:
            found[(row["sub"], row["rank"])] = _value(row["bits"])
        if len(picked) != sum(len(r) for r in per_sub.values()):
            raise EngineError("the latency selection lost a rank: the executors' rows disagree with the summaries")
    if targets.get(OVERALL):
        for rank, bits in _radix_select(rows.select("bits"), sorted(targets[OVERALL])).items():
            found[(OVERALL, rank)] = _value(bits)
    return found


def _value(bits: int) -> float:
    return float(np.array([bits], np.int64).view(np.float64)[0])


def _pick(targets: Mapping[int, list[int]], table: pa.Table) -> pa.Table:
    """One subscription's rows: its latencies (as bits) at its wanted ranks."""
    sub = table.column("sub")[0].as_py()
    ranks = targets.get(sub, [])
    bits = table.column("bits").to_numpy()
    if ranks and ranks[-1] >= len(bits):
        raise EngineError(f"subscription number {sub} has {len(bits)} latency rows, rank {ranks[-1]} wanted")
    picked = np.partition(bits, ranks)[ranks] if ranks else np.zeros(0, np.int64)
    return pa.table(
        {
            "sub": pa.array([sub] * len(ranks), pa.int32()),
            "rank": pa.array(ranks, pa.int64()),
            "bits": pa.array(picked, pa.int64()),
        }
    )


def _radix_select(bits_frame, ranks: list[int]) -> dict[int, int]:
    """The bits at each of ``ranks`` over every row of ``bits_frame`` (its one column ``bits``)."""
    state = {rank: (0, rank) for rank in ranks}  # rank -> (prefix found so far, rank within it)
    for shift in range(64 - DIGIT_BITS, -1, -DIGIT_BITS):
        prefixes = sorted({prefix for prefix, _ in state.values()})
        totals = {p: np.zeros(_DIGITS, np.int64) for p in prefixes}
        rows = bits_frame.mapInArrow(partial(_count_digits, shift, tuple(prefixes)), COUNT_SCHEMA).collect()
        for row in rows:
            totals[row["prefix"]] += np.frombuffer(row["counts"], np.int64)
        for rank, (prefix, left) in list(state.items()):
            running = np.cumsum(totals[prefix])
            digit = int(np.searchsorted(running, left, side="right"))
            if digit >= _DIGITS:
                raise EngineError("the latency selection lost a rank: the executors' rows disagree with the summaries")
            below = int(running[digit - 1]) if digit else 0
            state[rank] = ((prefix << DIGIT_BITS) | digit, left - below)
    return {rank: prefix for rank, (prefix, _) in state.items()}


def _count_digits(shift: int, prefixes: tuple[int, ...], batches: Iterator[pa.RecordBatch]):
    """Per prefix, how many rows under it have each value of the 16 bits at ``shift`` (one row per prefix
    and task)."""
    counts = {p: np.zeros(_DIGITS, np.int64) for p in prefixes}
    for batch in batches:
        bits = batch.column("bits").to_numpy()
        digits = (bits >> shift) & (_DIGITS - 1)
        above = bits >> (shift + DIGIT_BITS) if shift + DIGIT_BITS < 64 else np.zeros(len(bits), np.int64)
        for p in prefixes:
            counts[p] += np.bincount(digits[above == p], minlength=_DIGITS)
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(counts), pa.int64()), pa.array([c.tobytes() for c in counts.values()], pa.binary())],
        names=["prefix", "counts"],
    )
