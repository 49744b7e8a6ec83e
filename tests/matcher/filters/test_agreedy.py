"""A-Greedy: the matrix view, the Greedy Invariant after correction, convergence on correlated filters."""

import itertools

import numpy as np
import pytest

from matcher import Box, Interval
from matcher.filters.agreedy import AGreedy, PipelinedFilter, optimal_order, order_cost


def correlated(n_tuples, n_filters=8, seed=1):
    """Babu's thesis, Table 4.1: 50% selectivity, groups of two filters agreeing on 80% of tuples."""
    rng = np.random.default_rng(seed)
    columns = {}
    for g in range(0, n_filters, 2):
        base = rng.random(n_tuples) < 0.5
        for f in (g, g + 1):
            columns[f"f{f}"] = np.where(rng.random(n_tuples) < np.sqrt(0.6), base, rng.random(n_tuples) < 0.5).astype(
                float
            )
    box = Box((f"f{f}", Interval.above(0.5)) for f in range(n_filters))
    drops = np.stack([columns[d] <= 0.5 for d, _ in box.items()], axis=1)
    return box, columns, drops


def plain_view(window, order):
    n = len(order)
    view = np.zeros((n, n), dtype=np.int64)
    bits = window[:, order]
    for i in range(n):
        survivors = ~bits[:, :i].any(axis=1)
        view[i, i:] = bits[survivors, i:].sum(axis=0)
    return view


def test_example_421_costs_and_optimum():
    # drop sets of the thesis's Example 4.2.1 (filters 0-based): 1 none, 2 {F3}, 4 {F2,F3,F4}, 7 {F1}, 5 {F1,F2,F4}
    drop_sets = {1: (), 2: (2,), 4: (1, 2, 3), 7: (0,), 5: (0, 1, 3)}
    stream = [1, 2, 1, 4, 7, 2, 5, 4]
    drops = np.array([[f in drop_sets[v] for f in range(4)] for v in stream])
    assert order_cost(drops, [0, 1, 2, 3]) * 8 == 20
    assert order_cost(drops, [2, 1, 3, 0]) * 8 == 18
    _, cost = optimal_order(drops)
    assert cost * 8 == pytest.approx(16)


def test_optimal_order_matches_brute_force():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(1, 6))
        drops = rng.random((100, n)) < rng.random(n)
        costs = rng.integers(1, 5, n)
        _, cost = optimal_order(drops, costs)
        assert cost == pytest.approx(min(order_cost(drops, p, costs) for p in itertools.permutations(range(n))))


@pytest.mark.parametrize("costs", [None, [1, 1, 1, 1, 5, 5, 5, 5]])
def test_view_is_maintained_and_greedy_invariant_holds_after_correction(costs):
    _, _, drops = correlated(20_000)
    reopt = AGreedy(8, costs=costs, window=300, alpha=1.0)
    dropped = drops[drops.any(axis=1)]
    for k, row in enumerate(dropped[:2_000]):
        reopt.add(row)
        if k % 97 == 0:
            window = reopt.window[: reopt.size]
            assert np.array_equal(np.triu(reopt.view), plain_view(window, reopt.order))
    rates = plain_view(reopt.window[: reopt.size], reopt.order) / np.asarray(costs or np.ones(8))[reopt.order][None, :]
    for i in range(8):
        assert rates[i, i] >= rates[i, i:].max() - 1e-12  # the Greedy Invariant on the profile window
    assert reopt.corrections > 0


@pytest.mark.parametrize("variant", ["agreedy", "sweep", "independent"])
def test_pipelined_filter_is_exact(variant):
    box, columns, drops = correlated(30_000, seed=4)
    engine = PipelinedFilter(box, variant=variant, seed=1)
    assert np.array_equal(engine.filter(columns), ~drops.any(axis=1))
    assert engine.profile_evaluations > 0


def test_agreedy_within_ten_percent_of_optimal_on_correlated_filters():
    box, columns, drops = correlated(100_000, seed=3)
    _, optimum = optimal_order(drops)
    engine = PipelinedFilter(box, variant="agreedy", seed=2)
    engine.filter(columns)
    assert engine.evaluations_per_tuple <= 1.10 * optimum
    assert order_cost(drops, engine.reoptimizer.order) <= 1.05 * optimum


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="variant"):
        AGreedy(3, variant="localswaps")
    with pytest.raises(ValueError, match="costs"):
        AGreedy(3, costs=[1, 2])
