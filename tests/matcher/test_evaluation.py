"""Every evaluator agrees with the pointwise reference, bounds, infinities and NaN included."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher._eval_bitmap import MIN_SPLITS, any_numpy, build_bitmap
from matcher._eval_boxes import BoxTable, stack_columns
from matcher._eval_kernels import any_kernel, bitmap_tuple
from matcher.evaluation import EVALUATORS, BitmapEvaluator, StandardEvaluator, evaluate_reference

GRID = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
SPECIAL = (np.nan, np.inf, -np.inf)


@st.composite
def intervals(draw):
    lo, hi = sorted(draw(st.lists(st.sampled_from(GRID), min_size=2, max_size=2)))
    lo = -np.inf if draw(st.integers(0, 5)) == 0 else lo
    hi = np.inf if draw(st.integers(0, 5)) == 0 else hi
    return interval(lo, hi, draw(st.booleans()), draw(st.booleans()))


@st.composite
def predicates(draw, dims):
    n_boxes = draw(st.integers(0, 6))
    boxes = [Box({d: draw(intervals()) for d in dims if draw(st.booleans())}) for _ in range(n_boxes)]
    return Predicate(boxes)


def columns_for(rng, dims, n):
    """Values on the bounds, between them, outside them, and the special floats."""
    pool = np.array([*GRID, *(g + 0.5 for g in GRID), -1.0, 7.0, *SPECIAL])
    return {d: rng.choice(pool, n) for d in dims}


@pytest.mark.parametrize("name", sorted(EVALUATORS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_batch_and_item_evaluation_agree_with_reference(name, data):
    dims = ("a", "b", "c", "d")[: data.draw(st.integers(1, 4))]
    predicate = data.draw(predicates(dims))
    columns = columns_for(np.random.default_rng(data.draw(st.integers(0, 2**16))), dims, 200)
    expected = evaluate_reference(predicate, columns)
    evaluator = EVALUATORS[name](predicate)
    np.testing.assert_array_equal(evaluator.evaluate_batch(columns), expected)
    for i in range(0, 200, 37):
        assert evaluator.evaluate({d: float(columns[d][i]) for d in dims}) == expected[i]


@pytest.mark.parametrize("name", sorted(EVALUATORS))
def test_open_and_closed_ends_are_told_apart(name):
    predicate = Predicate(
        [
            Box({"x": Interval(1.0, 2.0, False, True)}),
            Box({"x": Interval(3.0, 4.0, True, False), "y": Interval.point(0)}),
        ]
    )
    columns = {"x": np.array([1.0, 1.5, 2.0, 3.0, 3.0, 4.0, np.nextafter(1.0, 2.0)]), "y": np.zeros(7)}
    columns["y"][4] = 1e-300
    got = EVALUATORS[name](predicate).evaluate_batch(columns)
    assert got.tolist() == [False, True, True, True, False, False, True]


@pytest.mark.parametrize("name", sorted(EVALUATORS))
@pytest.mark.parametrize(("predicate", "value"), [(Predicate.TRUE, True), (Predicate.FALSE, False)])
def test_true_and_false_predicates(name, predicate, value):
    evaluator = EVALUATORS[name](predicate)
    assert evaluator.evaluate_batch({"x": np.arange(5.0)}).tolist() == [value] * 5
    assert evaluator.evaluate({}) is value


def test_quantised_bitmap_verifies_exactly():
    """Far more distinct bounds than splits: the uncertain regions are settled by the exact bounds."""
    rng = np.random.default_rng(7)
    dims = ("p", "q", "r")
    boxes = []
    for _ in range(150):
        lo = rng.uniform(0, 10, 3).round(2)
        hi = lo + rng.uniform(0, 3, 3).round(2)
        boxes.append(
            Box({d: interval(lo[k], hi[k], rng.random() < 0.5, rng.random() < 0.5) for k, d in enumerate(dims)})
        )
    predicate = Predicate(boxes)
    bounds = np.array(sorted({v for b in boxes for _, iv in b.items() for v in (iv.lo, iv.hi)}))
    columns = {d: np.concatenate([rng.choice(bounds, 3000), rng.uniform(-1, 14, 3000)]) for d in dims}
    bitmap = build_bitmap(BoxTable.of([predicate]), max_splits=MIN_SPLITS)
    assert not bitmap.exact
    values = stack_columns(columns, bitmap.dims)
    expected = evaluate_reference(predicate, columns)
    assert 0 < expected.sum() < len(expected)
    np.testing.assert_array_equal(any_numpy(bitmap, values), expected)
    out = np.empty(values.shape[1], dtype=bool)
    any_kernel(values, bitmap_tuple(bitmap), out)
    np.testing.assert_array_equal(out, expected)


def test_many_dimensions_with_unbounded_ones():
    rng = np.random.default_rng(3)
    dims = tuple(f"d{k:02d}" for k in range(12))
    boxes = [
        Box({d: interval(*sorted(rng.uniform(0, 1, 2))) for d in rng.choice(dims, 4, replace=False)}) for _ in range(40)
    ]
    predicate = Predicate(boxes)
    columns = {d: rng.uniform(0, 1, 4000) for d in dims}
    expected = evaluate_reference(predicate, columns)
    assert expected.any()
    for name, make in EVALUATORS.items():
        np.testing.assert_array_equal(make(predicate).evaluate_batch(columns), expected, err_msg=name)


def test_standard_evaluation_tries_larger_boxes_first():
    small, large = Box({"x": Interval.closed(0, 1)}), Box({"x": Interval.closed(0, 10)})
    evaluator = StandardEvaluator(Predicate([small, Box({"x": Interval.above(5)}), large]))
    # one interval per box: the scan order is the order of the lower bounds 0 (large), 0 (small), 5
    assert evaluator.boxes.hi.tolist() == [10.0, 1.0, np.inf]
    hits, work = evaluator.evaluate_counted({"x": np.array([0.5, 7.0, 20.0, -1.0])})
    assert hits.tolist() == [True, True, True, False]
    assert work.tolist() == [1, 1, 3, 3]


def test_missing_attribute_and_bad_backend_are_reported():
    predicate = Predicate([Box({"x": Interval.closed(0, 1)})])
    for make in EVALUATORS.values():
        with pytest.raises(KeyError, match="'x'"):
            make(predicate).evaluate_batch({"y": np.zeros(3)})
    with pytest.raises(ValueError, match="backend"):
        BitmapEvaluator(predicate, backend="gpu")
