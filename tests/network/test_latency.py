"""Latency statistics that add up exactly: the exact sums against Fractions, the grouped sums against
one sum per owner, and the percentiles against numpy's."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.exactness import _latencies_by_owner
from network.latency import LatencyStats, add_sums, exact_sum, exact_sums_by_owner, mean

LATENCIES = st.lists(st.floats(min_value=1e-9, max_value=1e4, allow_nan=False), max_size=60)


def _worth(total) -> Fraction:
    return sum((Fraction(n) * Fraction(2) ** (e - 53) for e, n in total.items()), Fraction(0))


@settings(max_examples=200, deadline=None)
@given(LATENCIES, LATENCIES)
def test_exact_sums_are_the_exact_sums_in_any_order(a, b):
    assert _worth(exact_sum(np.array(a))) == sum(map(Fraction, a), Fraction(0))
    assert _worth(add_sums([exact_sum(np.array(a)), exact_sum(np.array(b))])) == sum(map(Fraction, a + b), Fraction(0))
    if a:
        assert mean(exact_sum(np.array(a)), len(a)) == float(sum(map(Fraction, a), Fraction(0)) / len(a))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.floats(min_value=1e-9, max_value=1e4)), max_size=80))
def test_sums_by_owner_equal_one_exact_sum_per_owner(pairs):
    owners = np.array([o for o, _ in pairs], np.int32)
    values = np.array([v for _, v in pairs], np.float64)
    got = exact_sums_by_owner(owners, values, 7)
    assert got == [exact_sum(values[owners == k]) for k in range(7)]


def test_sums_by_owner_of_many_values_stay_exact():
    rng = np.random.default_rng(3)
    values = rng.uniform(0.5, 1.0, 200_000)  # one exponent: a group's mantissas far beyond one int64 block
    owners = rng.integers(0, 3, len(values)).astype(np.int32)
    for k, total in enumerate(exact_sums_by_owner(owners, values, 3)):
        assert _worth(total) == sum(map(Fraction, values[owners == k].tolist()), Fraction(0))


@settings(max_examples=200, deadline=None)
@given(LATENCIES)
def test_statistics_are_numpys_percentiles_and_the_rounded_mean(values):
    stats = LatencyStats.of(np.array(values))
    assert stats.count == len(values)
    if not values:
        assert stats.p50 is stats.p99 is stats.mean is None
        return
    assert stats.p50 == float(np.percentile(values, 50))
    assert stats.p99 == float(np.percentile(values, 99))
    assert stats.mean == float(sum(map(Fraction, values), Fraction(0)) / len(values))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(0, 1e4, allow_nan=False, allow_subnormal=True), max_size=40).map(np.array), max_size=12)
)
def test_a_runs_latencies_by_subscription_are_each_ones_own_statistics(values):
    """The check takes every subscription's exact sum in one set of passes: the statistics are those of
    each subscription's latencies alone."""
    arrays = [np.asarray(v, np.float64) for v in values]
    assert _latencies_by_owner(arrays) == [LatencyStats.of(v) for v in arrays]
