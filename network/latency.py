"""Delivery latency statistics that add up exactly over parts of a run.

A report gives p50, p99 and the mean of delivery latencies, per subscription and overall.  The local engine
holds every latency in one array; the Spark engine holds them spread over executors, chunk by chunk, and
its driver never sees them all.  Both must print the same numbers, so the statistics are defined by pieces
that combine exactly:

- the **mean** is the correctly rounded quotient of the exact sum by the count.  Each latency is split into
  an integer mantissa and an exponent (``x = m * 2**(e - 53)``), and the mantissas are summed per exponent
  as Python integers (:func:`exact_sum`); parts from anywhere add as integers, in any order
  (:func:`add_sums`), where a floating-point sum would depend on the order of the additions;
- a **percentile** is numpy's default (``linear``) percentile, which only needs the count and the values at
  two ranks of the sorted latencies (:func:`percentile_ranks`, :func:`percentile`).  Holding an array, those
  are two ``np.partition`` picks; on Spark, an exact selection over the executors finds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

QUANTILES = (50, 99)  # the percentiles a report gives
MANTISSA_BITS = 53
_SUM_BLOCK = 1 << 9  # mantissas below 2**53 summed 512 at a time stay below 2**63
_HALF_BITS = 26

Sum = dict[int, int]  # exponent -> the exact sum of the integer mantissas of that exponent


def exact_sum(values: np.ndarray) -> Sum:
    """The exact sum of finite ``values`` as ``{exponent: integer}``, worth ``sum(n * 2**(e - 53))``."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return {}
    fraction, exponent = np.frexp(values)
    mantissa = np.ldexp(fraction, MANTISSA_BITS).astype(np.int64)  # exact: |fraction| < 1 has 53 bits
    order = np.argsort(exponent, kind="stable")
    exponent, mantissa = exponent[order], mantissa[order]
    found, starts = np.unique(exponent, return_index=True)
    bounds = np.append(starts, len(exponent))
    total: Sum = {}
    for e, a, b in zip(found.tolist(), bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        blocks = np.add.reduceat(mantissa[a:b], np.arange(0, b - a, _SUM_BLOCK))
        total[e] = sum(blocks.tolist())
    return total


def exact_sums_by_owner(owners: np.ndarray, values: np.ndarray, n: int) -> list[Sum]:
    """:func:`exact_sum` of each owner's values: ``[exact_sum(values[owners == k]) for k in range(n)]``,
    in a few passes over the arrays however many owners there are."""
    sums: list[Sum] = [{} for _ in range(n)]
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return sums
    fraction, exponent = np.frexp(values)
    mantissa = np.ldexp(fraction, MANTISSA_BITS).astype(np.int64)
    low, span = int(exponent.min()), int(exponent.max() - exponent.min()) + 1
    key = np.asarray(owners, np.int64) * span + (exponent - low)
    order = np.argsort(key, kind="stable")
    key, mantissa = key[order], mantissa[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    # two halves of at most 27 bits each: a group's half-sums stay far below 2**63
    high = np.add.reduceat(mantissa >> _HALF_BITS, starts).tolist()
    rest = np.add.reduceat(mantissa & ((1 << _HALF_BITS) - 1), starts).tolist()
    for k, h, r in zip(key[starts].tolist(), high, rest, strict=True):
        owner, e = divmod(k, span)
        sums[owner][e + low] = (h << _HALF_BITS) + r
    return sums


def add_sums(parts: Iterable[Sum]) -> Sum:
    """The exact sum of several :func:`exact_sum` results."""
    total: Sum = {}
    for part in parts:
        for e, n in part.items():
            total[e] = total.get(e, 0) + n
    return total


def mean(total: Sum, count: int) -> float | None:
    """The correctly rounded mean of ``count`` values whose exact sum is ``total`` (``None`` for none)."""
    if count == 0:
        return None
    exact = sum((Fraction(n) * Fraction(2) ** (e - MANTISSA_BITS) for e, n in total.items()), Fraction(0))
    return float(exact / count)


def percentile_ranks(count: int, q: float) -> tuple[int, int, float]:
    """``(lower rank, upper rank, weight)`` of numpy's linear percentile ``q`` of ``count`` sorted values."""
    virtual = (count - 1) * np.float64(q / 100)  # numpy's virtual index, computed alike
    if virtual >= count - 1:
        return count - 1, count - 1, 0.0
    lower = int(np.floor(virtual))
    return lower, lower + 1, float(virtual - lower)


def percentile(count: int, q: float, value_at: Callable[[int], float]) -> float | None:
    """numpy's ``percentile(values, q)`` (method ``linear``) from the values at two ranks of the sorted values
    (``value_at(rank)``), bit for bit; ``None`` for no values."""
    if count == 0:
        return None
    lower, upper, weight = percentile_ranks(count, q)
    a, b = np.float64(value_at(lower)), np.float64(value_at(upper))
    if lower == upper:
        return float(a)
    t = np.float64(weight)
    difference = b - a
    # numpy's _lerp: from the nearer end, so that the result is monotonic in t
    return float(b - difference * (1 - t)) if t >= 0.5 else float(a + difference * t)


def ranks_needed(count: int) -> set[int]:
    """Every rank :func:`percentile` reads for the report's :data:`QUANTILES` of ``count`` values."""
    needed: set[int] = set()
    for q in QUANTILES:
        if count:
            lower, upper, _ = percentile_ranks(count, q)
            needed.update((lower, upper))
    return needed


@dataclass(frozen=True)
class LatencyStats:
    """p50, p99 and mean of a set of latencies in seconds (``None`` when there are none)."""

    count: int
    p50: float | None
    p99: float | None
    mean: float | None

    @classmethod
    def of_parts(cls, count: int, total: Sum, ranked: Mapping[int, float]) -> LatencyStats:
        """From the count, the exact sum and the values at :func:`ranks_needed` (rank -> value)."""
        p50, p99 = (percentile(count, q, ranked.__getitem__) for q in QUANTILES)
        return cls(count, p50, p99, mean(total, count))

    @classmethod
    def of(cls, values: np.ndarray, total: Sum | None = None) -> LatencyStats:
        """From all the values at hand (``total``: their :func:`exact_sum`, when already taken)."""
        values = np.asarray(values, dtype=np.float64)
        needed = sorted(ranks_needed(len(values)))
        picked = np.partition(values, needed)[needed] if needed else np.zeros(0)
        total = exact_sum(values) if total is None else total
        return cls.of_parts(len(values), total, dict(zip(needed, picked.tolist(), strict=True)))

    def as_dict(self) -> dict[str, float | None]:
        return {"p50": self.p50, "p99": self.p99, "mean": self.mean}
