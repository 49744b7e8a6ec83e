"""ASC engine: exact results under every ordering, the papers' worked example, the order searches."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher.filters.asc import OPTIMAL_MAX_ASCS, ASCMatcher, fixed_order_costs, local_search_order, order_cost
from tests.matcher.filters.test_grouped import as_columns, reference, tuples, workloads


@settings(max_examples=80, deadline=None)
@given(
    workloads,
    st.lists(tuples, min_size=1, max_size=4),
    st.sampled_from(["hybrid", "macro"]),
    st.sampled_from(["optimal", "greedy"]),
    st.sampled_from([0.0, 0.3]),
)
def test_asc_equals_reference_while_relearning(labelled, batches, ordering, base, threshold):
    engine = ASCMatcher(labelled, ordering=ordering, base=base, period=16, sample=12, threshold=threshold)
    for rows in batches:
        columns = as_columns(rows)
        assert np.array_equal(engine.match(columns), reference(labelled, columns))
    copy = ASCMatcher.from_arrays(engine.to_arrays())
    assert (
        copy.base == engine.base
        and copy.macro == engine.macro
        and all(np.array_equal(x, y) for x, y in zip(copy.micro, engine.micro, strict=True))
    )
    assert np.array_equal(copy.match(columns), reference(labelled, columns))


def attribute_selection_example():
    """Lee & Lee's worked example (KIPS 2007, Fig. 2; A2's strings coded as numbers: 'C02' = 2, 'C04' = 4)."""
    q1 = Box({"A1": Interval.point(20), "A2": Interval.point(2), "A3": Interval.point(50)})
    q2 = Box({"A1": Interval.above(10), "A2": Interval.point(4)})
    q3 = Box({"A1": Interval.point(30), "A3": interval(30, 50)})
    return [(name, Predicate([b])) for name, b in (("q1", q1), ("q2", q2), ("q3", q3))]


def test_the_papers_worked_example():
    labelled = attribute_selection_example()
    engine = ASCMatcher(labelled, ordering="fixed", order=["A1", "A2", "A3"])
    a1 = engine.constructs[0]
    assert a1.constants.tolist() == [10, 20, 30]
    # qrb per region (q1 q2 q3): 000, 000, 010, 110, 010, 011, 010 (worked out by hand from the paper), then the NaN
    # region: every query uses A1, so none survives a missing A1
    bits = [[int(b) for b in row] for row in np.unpackbits(a1.qrb.view(np.uint8), axis=1, bitorder="little")[:, :3]]
    assert ["".join(map(str, b)) for b in bits] == ["000", "000", "010", "110", "010", "011", "010", "000"]
    columns = {"A1": np.array([40.0, 20.0, 10.0]), "A2": np.array([4.0, 2.0, 4.0]), "A3": np.array([50.0, 50.0, 20.0])}
    assert engine.match(columns).tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    # t3 is dropped right after ASC(A1): 3 + 3 + 1 ASCs
    assert engine.evaluations == 7


def random_conjunctive(rng, dims, n, share):
    """``n`` one-box labels, each constraining every dimension with probability ``share`` to a random closed
    interval of 0-9 (the draws in the order the tests were written with, so their workloads are unchanged)."""
    return [
        (
            f"q{i}",
            Predicate([Box({d: interval(*sorted(rng.integers(0, 10, 2))) for d in dims if rng.random() < share})]),
        )
        for i in range(n)
    ]


def test_fixed_order_search_is_exhaustive():
    rng = np.random.default_rng(5)
    labelled = random_conjunctive(rng, "abcd", 8, 0.6)
    columns = {d: rng.integers(0, 10, 500).astype(float) for d in "abcd"}
    engine = ASCMatcher(labelled, ordering="macro")
    order, cost = fixed_order_costs(engine, columns)
    brute = min(order_cost(engine, columns, p) for p in itertools.permutations(engine.dims))
    assert cost == pytest.approx(brute) and order_cost(engine, columns, order) == pytest.approx(brute)
    assert local_search_order(engine, columns, engine.dims)[1] >= brute - 1e-12
    fixed = ASCMatcher(labelled, ordering="fixed", order=order)
    fixed.match(columns)
    assert fixed.evaluations_per_tuple == pytest.approx(cost)


@pytest.mark.parametrize("ordering", ["macro", "hybrid"])
def test_optimal_base_sequence_is_the_exact_optimum_of_the_window_learned_from(ordering):
    rng = np.random.default_rng(11)
    labelled = random_conjunctive(rng, "abcde", 12, 0.5)
    columns = {d: rng.integers(0, 10, 800).astype(float) for d in "abcde"}
    optimal = ASCMatcher(labelled, ordering=ordering)
    greedy = ASCMatcher(labelled, ordering=ordering, base="greedy")
    regions = np.stack([asc.region(columns[d]) for d, asc in zip(optimal.dims, optimal.constructs, strict=True)], 1)
    optimal.relearn(regions)
    greedy.relearn(regions)
    _, best = fixed_order_costs(optimal, columns)
    assert order_cost(optimal, columns, optimal.order) == pytest.approx(best)
    assert order_cost(greedy, columns, greedy.order) >= best - 1e-12


def test_above_the_dp_limit_the_greedy_sequence_is_used(monkeypatch):
    labelled = [(f"q{k}", Predicate([Box({f"a{k}": Interval.above(float(k))})])) for k in range(OPTIMAL_MAX_ASCS + 1)]
    columns = {f"a{k}": np.arange(40, dtype=float) for k in range(OPTIMAL_MAX_ASCS + 1)}
    optimal, greedy = ASCMatcher(labelled, ordering="macro"), ASCMatcher(labelled, ordering="macro", base="greedy")
    regions = np.stack([asc.region(columns[d]) for d, asc in zip(optimal.dims, optimal.constructs, strict=True)], 1)

    def no_dp(alive, costs):
        raise AssertionError(f"subset DP run over {len(costs)} ASCs")

    monkeypatch.setattr("matcher.filters.asc.best_order", no_dp)
    optimal.relearn(regions)
    greedy.relearn(regions)
    assert optimal.macro == greedy.macro


def test_hybrid_beats_best_fixed_order_on_region_dependent_workload():
    # even queries need a0 < 50 and are tight on a1; odd ones need a0 >= 50 and are tight on a2: the attribute
    # best tested next depends on a0's region
    rng = np.random.default_rng(7)
    labelled = []
    for i in range(40):
        side = Interval.below(50.0) if i % 2 == 0 else Interval.above(50.0, inclusive=True)
        tight, loose = ("a1", "a2") if i % 2 == 0 else ("a2", "a1")
        lo = float(rng.integers(0, 95))
        labelled.append(
            (f"q{i}", Predicate([Box({"a0": side, tight: interval(lo, lo + 3), loose: Interval.below(90.0)})]))
        )
    columns = {d: np.floor(rng.uniform(0, 100, 40_000)) for d in ("a0", "a1", "a2")}
    hybrid = ASCMatcher(labelled, ordering="hybrid", period=5_000, sample=2_000)
    learn = {d: v[:10_000] for d, v in columns.items()}
    test = {d: v[10_000:] for d, v in columns.items()}
    hybrid.match(learn)
    assert any((m >= 0).any() for m in hybrid.micro)
    hybrid.evaluations = hybrid.tuples_seen = 0
    hybrid.period = 10**9  # freeze the learned sequence for the measurement
    hybrid.match(test)
    _, best_fixed = fixed_order_costs(hybrid, test)
    assert hybrid.evaluations_per_tuple < best_fixed


def test_bad_ordering_and_order_are_rejected():
    labelled = attribute_selection_example()
    with pytest.raises(ValueError, match="ordering"):
        ASCMatcher(labelled, ordering="random")
    with pytest.raises(ValueError, match="base 'exact'"):
        ASCMatcher(labelled, base="exact")
    with pytest.raises(ValueError, match="permutation"):
        ASCMatcher(labelled, ordering="fixed", order=["A1", "A2"])
