"""SE, IE and IE+SC: the compiled per-item kernels do what their plain Python versions do, test for test."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher.evaluation import IndexEvaluator, StandardEvaluator, evaluate_reference
from matcher.rtree_index import StreamIndex, clear_cache, stream_index

GRID = (0.0, 1.0, 2.0, 3.0, 4.0)


@st.composite
def predicates(draw, dims):
    boxes = []
    for _ in range(draw(st.integers(0, 12))):
        sides = {}
        for d in dims:
            if draw(st.booleans()):
                lo, hi = sorted(draw(st.lists(st.sampled_from(GRID), min_size=2, max_size=2)))
                lo = -np.inf if draw(st.integers(0, 4)) == 0 else lo
                hi = np.inf if draw(st.integers(0, 4)) == 0 else hi
                sides[d] = interval(lo, hi, draw(st.booleans()), draw(st.booleans()))
        boxes.append(Box(sides))
    return Predicate(boxes)


def columns(seed, dims, n=300):
    pool = np.array([*GRID, 0.5, 1.5, 2.5, 3.5, -1.0, 6.0, np.nan, np.inf, -np.inf])
    rng = np.random.default_rng(seed)
    return {d: rng.choice(pool, n) for d in dims}


@pytest.mark.parametrize("variant", ["rtree", "rstar"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_kernels_equal_their_plain_versions_hit_for_hit_and_test_for_test(variant, data):
    dims = ("a", "b", "c")[: data.draw(st.integers(1, 3))]
    predicate = data.draw(predicates(dims))
    items = columns(data.draw(st.integers(0, 2**16)), dims)
    expected = evaluate_reference(predicate, items)
    pairs = [
        (StandardEvaluator(predicate), StandardEvaluator(predicate, compiled=False)),
        (IndexEvaluator(predicate, variant=variant), IndexEvaluator(predicate, variant=variant, compiled=False)),
        (
            IndexEvaluator(predicate, short_circuit=True, variant=variant),
            IndexEvaluator(predicate, short_circuit=True, variant=variant, compiled=False),
        ),
    ]
    work = {}
    for compiled, plain in pairs:
        hits, tested = compiled.evaluate_counted(items)
        plain_hits, plain_tested = plain.evaluate_counted(items)
        np.testing.assert_array_equal(hits, expected, err_msg=compiled.name)
        np.testing.assert_array_equal(plain_hits, expected, err_msg=plain.name)
        np.testing.assert_array_equal(tested, plain_tested, err_msg=compiled.name)
        work[compiled.name] = tested
    assert np.all(work["IE+SC"] <= work["IE"])  # the short-circuit only ever stops a walk early
    assert np.all(work["SE"] <= len(predicate.boxes))


def test_standard_evaluation_stops_at_the_first_box_holding_the_item():
    boxes = [Box({"x": Interval.closed(10 * k, 10 * k + 5)}) for k in range(6)]
    evaluator = StandardEvaluator(Predicate(boxes))
    hits, tested = evaluator.evaluate_counted({"x": np.array([1.0, 51.0, 7.0])})
    assert hits.tolist() == [True, True, False]
    assert tested.tolist() == [1, 6, 6]  # equal volumes: the scan keeps the boxes' order


def test_the_short_circuit_saves_tests_on_overlapping_boxes():
    rng = np.random.default_rng(4)
    boxes = []
    for _ in range(200):
        lo = rng.uniform(40, 50, 2)
        boxes.append(Box({"x": Interval.closed(lo[0], lo[0] + 10), "y": Interval.closed(lo[1], lo[1] + 10)}))
    predicate = Predicate(boxes)
    items = {"x": rng.uniform(45, 55, 2000), "y": rng.uniform(45, 55, 2000)}
    _, full = IndexEvaluator(predicate).evaluate_counted(items)
    _, short = IndexEvaluator(predicate, short_circuit=True).evaluate_counted(items)
    assert short.mean() < 0.5 * full.mean()


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant"):
        IndexEvaluator(Predicate([Box({"x": Interval.closed(0, 1)})]), variant="kd")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_matching_index_finds_every_stream_box_a_query_box_shares_a_point_with(data):
    dims = ("a", "b", "c")
    stream = data.draw(predicates(dims))
    query = data.draw(predicates(dims))
    index = StreamIndex(stream, data.draw(st.sampled_from(["rtree", "rstar"])))
    for box in query.boxes:
        found = index.overlapping(box)
        assert found == index.overlapping_plain(box)
        assert {k for k, b in enumerate(stream.boxes) if b.overlaps(box)} <= set(found)
        holding = index.overlapping(box, containing=True)
        assert holding == index.overlapping_plain(box, containing=True)
        assert {k for k, b in enumerate(stream.boxes) if b.contains(box)} <= set(holding) <= set(found)


def test_indexes_are_kept_per_stream_predicate_and_variant():
    clear_cache()
    p = Predicate([Box({"x": Interval.closed(0, 1)})])
    first = stream_index(p)
    assert stream_index(Predicate([Box({"x": Interval.closed(0, 1)})])) is first
    assert stream_index(p, "rstar") is not first
    clear_cache()
    assert stream_index(p) is not first
