"""The subset DP for the optimal filter order: vectorised against the plain loop, alive sets by brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.filters.ordering import alive_fractions, best_order, best_order_reference


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 7), st.integers(0, 2**32 - 1), st.booleans())
def test_vectorised_dp_equals_plain_loop(n, seed, ties):
    rng = np.random.default_rng(seed)
    # ties: few distinct values, so the tie-break (lowest filter index first) is exercised
    alive = rng.integers(0, 3, 1 << n) / 2 if ties else rng.random(1 << n)
    costs = rng.integers(1, 3, n).astype(float) if ties else rng.uniform(0.5, 2, n)
    order, cost = best_order(alive, costs)
    expected_order, expected_cost = best_order_reference(alive, costs)
    assert order == expected_order and cost == pytest.approx(expected_cost, abs=1e-12)
    brute = min(
        sum(costs[f] * alive[sum(1 << g for g in p[:i])] for i, f in enumerate(p))
        for p in itertools.permutations(range(n))
    )
    assert cost == pytest.approx(brute, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 2), st.integers(0, 40), st.integers(0, 2**32 - 1), st.integers(1, 300))
def test_alive_fractions_equal_brute_force(n, words, tuples, seed, budget):
    rng = np.random.default_rng(seed)
    # sparse bits so that many subsets drop many tuples
    bitmaps = [
        (
            rng.integers(0, 2**63, (tuples, words), dtype=np.uint64)
            & rng.integers(0, 2**63, (tuples, words), dtype=np.uint64)
        )
        for _ in range(n)
    ]
    all_bits = np.full(words, np.uint64(2**64 - 1))
    alive = alive_fractions(bitmaps, all_bits, budget=budget)  # small budgets: many tuple slices
    for subset in range(1 << n):
        grb = np.broadcast_to(all_bits, (tuples, words)).copy()
        for f in range(n):
            if subset >> f & 1:
                grb &= bitmaps[f]
        expected = (grb != 0).any(axis=1).mean() if tuples else 0.0
        assert alive[subset] == pytest.approx(expected)
