"""The predicate algebra against brute force on the cell grid.

Every bound is an integer in 0..6, so along each dimension the sets involved are unions of the cells
{k} and (k, k+1), plus the two outer rays.  The grid GRID holds one point per cell (each integer, each
midpoint, -1 and 7), so two predicates agree everywhere iff they agree on the grid: implication,
equivalence and disjointness are decided exactly by pointwise evaluation.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import INF, UNBOUNDED, Box, Interval, Predicate, interval

GRID = np.array([-1.0, *(x / 2 for x in range(13)), 7.0])  # -1, 0, 0.5, 1, ..., 6, 7
DIMS = ("a", "b", "c")
COLUMNS = dict(zip(DIMS, (g.ravel() for g in np.meshgrid(GRID, GRID, GRID, indexing="ij")), strict=True))

bound = st.one_of(st.none(), st.integers(0, 6))
constraint = st.tuples(st.sampled_from(DIMS), bound, bound, st.booleans(), st.booleans())
raw_box = st.lists(constraint, max_size=3)
raw_predicate = st.lists(raw_box, max_size=4)


def build_interval(lo, hi, lo_closed, hi_closed) -> Interval:
    return interval(-INF if lo is None else lo, INF if hi is None else hi, lo_closed, hi_closed)


def build_box(raw) -> Box:
    return Box((dim, build_interval(*ends)) for dim, *ends in raw)


def build_predicate(raw) -> Predicate:
    return Predicate(build_box(b) for b in raw)


def reference_constraint(x, lo, hi, lo_closed, hi_closed):
    """Membership in one written constraint, straight from its definition (None = unbounded)."""
    above = np.ones_like(x, bool) if lo is None else (x > lo) | ((x == lo) & lo_closed)
    below = np.ones_like(x, bool) if hi is None else (x < hi) | ((x == hi) & hi_closed)
    return above & below


def reference_predicate(raw, columns=COLUMNS):
    result = np.zeros(len(columns["a"]), bool)
    for box in raw:
        inside = np.ones_like(result)
        for dim, *ends in box:
            inside &= reference_constraint(columns[dim], *ends)
        result |= inside
    return result


def interval_members(iv: Interval, x):
    return ((x > iv.lo) | ((x == iv.lo) & iv.lo_closed)) & ((x < iv.hi) | ((x == iv.hi) & iv.hi_closed))


def box_members(box: Box, columns=COLUMNS):
    inside = np.ones(len(columns["a"]), bool)
    for dim, iv in box.items():
        inside &= interval_members(iv, columns[dim])
    return inside


def members(pred: Predicate, columns=COLUMNS):
    result = np.zeros(len(columns["a"]), bool)
    for box in pred.boxes:
        result |= box_members(box, columns)
    return result


def pairwise_disjoint(boxes) -> bool:
    counts = sum((box_members(b).astype(int) for b in boxes), np.zeros(len(COLUMNS["a"]), int))
    return bool((counts <= 1).all())


# Intervals (one dimension).

raw_interval = st.tuples(bound, bound, st.booleans(), st.booleans())


@given(raw_interval)
def test_interval_normalises_infinite_ends_and_membership(raw):
    iv = build_interval(*raw)
    assert not (iv.lo == -INF and iv.lo_closed) and not (iv.hi == INF and iv.hi_closed)
    expected = reference_constraint(GRID, *raw)
    np.testing.assert_array_equal(interval_members(iv, GRID), expected)
    assert [iv.contains_value(float(x)) for x in GRID] == expected.tolist()
    assert iv.is_empty() == (not expected.any())


@given(raw_interval, raw_interval)
def test_interval_kernels_agree_with_membership(raw_a, raw_b):
    a, b = build_interval(*raw_a), build_interval(*raw_b)
    in_a, in_b = interval_members(a, GRID), interval_members(b, GRID)
    np.testing.assert_array_equal(interval_members(a.intersect(b), GRID), in_a & in_b)
    assert a.overlaps(b) == bool((in_a & in_b).any())
    if in_b.any():
        assert a.covers(b) == bool((in_a >= in_b).all())
    if not in_b.any():
        return  # minus, like covers, assumes a non-empty other (Box.subtract never passes an empty one)
    left, right = a.minus(b)
    left_members = np.zeros_like(in_a) if left is None else interval_members(left, GRID)
    right_members = np.zeros_like(in_a) if right is None else interval_members(right, GRID)
    np.testing.assert_array_equal(left_members | right_members, in_a & ~in_b)
    for piece in (left, right):
        assert piece is None or not piece.is_empty()
    # left lies wholly below b, right wholly above
    assert GRID[left_members].max(initial=-INF) < GRID[in_b].min()
    assert GRID[right_members].min(initial=INF) > GRID[in_b].max()


@given(raw_interval, raw_interval)
def test_interval_hull_is_the_smallest_enclosing_interval(raw_a, raw_b):
    a, b = build_interval(*raw_a), build_interval(*raw_b)
    union = interval_members(a, GRID) | interval_members(b, GRID)
    if interval_members(a, GRID).any() and interval_members(b, GRID).any():
        # x is in the hull iff some point of the union lies at or below x and some at or above x
        expected = np.array([(GRID[union] <= x).any() and (GRID[union] >= x).any() for x in GRID])
        np.testing.assert_array_equal(interval_members(a.hull(b), GRID), expected)


def test_interval_rejects_nan_and_helpers_build_the_expected_ends():
    with pytest.raises(ValueError, match="NaN"):
        interval(math.nan, 1.0)
    assert Interval.point(2) == Interval(2.0, 2.0, True, True)
    assert Interval.closed(1, 3) == Interval(1.0, 3.0, True, True)
    assert Interval.above(1) == Interval(1.0, INF, False, False)
    assert Interval.below(1, inclusive=True) == Interval(-INF, 1.0, False, True)
    assert interval(-INF, INF, True, True) == UNBOUNDED and UNBOUNDED.is_unbounded()


# Boxes.


@given(raw_box)
def test_box_construction_intersects_constraints_on_the_same_dimension(raw):
    box = build_box(raw)
    np.testing.assert_array_equal(box_members(box), reference_predicate([raw]))
    assert list(box.dims) == sorted(box.dims)
    assert all(not iv.is_unbounded() for _, iv in box.items())
    assert box == build_box(list(reversed(raw))) and hash(box) == hash(build_box(list(reversed(raw))))


@given(raw_box, raw_box)
def test_box_operations_agree_with_membership(raw_a, raw_b):
    a, b = build_box(raw_a), build_box(raw_b)
    in_a, in_b = box_members(a), box_members(b)
    np.testing.assert_array_equal(box_members(a.intersect(b)), in_a & in_b)
    assert a.overlaps(b) == bool((in_a & in_b).any())
    assert a.is_empty() == (not in_a.any())
    if in_b.any():
        assert a.contains(b) == bool((in_a >= in_b).all())
    if in_a.any() and in_b.any():
        hull = a.hull(b)
        assert bool((box_members(hull) >= (in_a | in_b)).all())
        for dim in DIMS:  # per dimension the hull is the interval hull (dims one box leaves open stay open)
            assert hull.get(dim) == a.get(dim).hull(b.get(dim))
    if not in_a.any():
        return
    for order in itertools.permutations(b.dims):
        pieces = a.subtract(b, order)
        assert all(not p.is_empty() for p in pieces)
        assert pairwise_disjoint(pieces)
        union = np.zeros_like(in_a)
        for piece in pieces:
            union |= box_members(piece)
        np.testing.assert_array_equal(union, in_a & ~in_b)
    if not (in_a & in_b).any():
        assert a.subtract(b) == [a]


def test_box_with_an_unbounded_interval_is_universal_and_get_defaults_to_unbounded():
    assert Box({"a": UNBOUNDED}).is_universal()
    assert Box({"a": Interval.point(1)}).get("b") == UNBOUNDED
    assert Box({"a": Interval.above(3), "b": Interval.point(1)}).as_dict() == {
        "a": Interval.above(3),
        "b": Interval.point(1),
    }


# Predicates.


@given(raw_predicate)
def test_predicate_construction_drops_only_empty_boxes(raw):
    pred = build_predicate(raw)
    np.testing.assert_array_equal(members(pred), reference_predicate(raw))
    assert pred.boxes == tuple(b for b in map(build_box, raw) if not b.is_empty())
    assert pred.is_empty() == (not pred.boxes)


@settings(max_examples=200)
@given(raw_predicate, raw_predicate)
def test_implication_and_equivalence_are_exact(raw_p, raw_q):
    p, q = build_predicate(raw_p), build_predicate(raw_q)
    in_p, in_q = reference_predicate(raw_p), reference_predicate(raw_q)
    assert p.implies(q) == bool((in_p <= in_q).all())
    assert q.implies(p) == bool((in_q <= in_p).all())
    assert p.equivalent(q) == bool((in_p == in_q).all())
    assert p.implies(p) and p.implies(p.or_(q)) and p.and_(q).implies(p)


@settings(max_examples=200)
@given(raw_predicate, raw_predicate)
def test_and_or_minus_agree_with_membership(raw_p, raw_q):
    p, q = build_predicate(raw_p), build_predicate(raw_q)
    in_p, in_q = reference_predicate(raw_p), reference_predicate(raw_q)
    union = p.or_(q)
    assert union.boxes == p.boxes + q.boxes
    np.testing.assert_array_equal(members(union), in_p | in_q)
    conjunction = p.and_(q)
    np.testing.assert_array_equal(members(conjunction), in_p & in_q)
    expected_order = [x.intersect(y) for x in p.boxes for y in q.boxes]
    assert conjunction.boxes == tuple(b for b in expected_order if not b.is_empty())
    rest = p.minus(q)
    np.testing.assert_array_equal(members(rest), in_p & ~in_q)
    assert all(any(b.contains(piece) for b in p.boxes) for piece in rest.boxes)


@settings(max_examples=200)
@given(raw_predicate)
def test_disjoint_decomposition_is_exact_and_disjoint(raw):
    pred = build_predicate(raw)
    parts = pred.disjoint()
    np.testing.assert_array_equal(members(parts), reference_predicate(raw))
    assert pairwise_disjoint(parts.boxes)
    assert all(not b.is_empty() for b in parts.boxes)
    if pred.boxes:  # the first box is kept whole
        assert parts.boxes[0] == pred.boxes[0]


@given(raw_predicate)
def test_canonical_is_an_equivalent_sorted_fixpoint_without_contained_boxes(raw):
    pred = build_predicate(raw)
    canon = pred.canonical()
    np.testing.assert_array_equal(members(canon), reference_predicate(raw))
    assert canon.canonical() == canon
    assert list(canon.boxes) == sorted(canon.boxes, key=lambda b: b.items())
    for x, y in itertools.permutations(canon.boxes, 2):
        assert not bool((box_members(y) >= box_members(x)).all())
    assert build_predicate(list(reversed(raw))).canonical() == canon


@given(raw_predicate)
def test_evaluate_agrees_with_membership(raw):
    pred = build_predicate(raw)
    expected = reference_predicate(raw)
    for i in range(0, len(expected), 97):
        point = {d: float(COLUMNS[d][i]) for d in DIMS}
        assert pred.evaluate(point) == expected[i]


def test_true_false_and_structural_equality():
    assert Predicate.TRUE.is_true() and Predicate.TRUE.boxes == (Box(),)
    assert Predicate.FALSE.is_empty() and Predicate.FALSE.implies(Predicate.TRUE)
    assert not Predicate.TRUE.implies(Predicate.FALSE)
    a, b = Box({"a": Interval.point(1)}), Box({"a": Interval.point(2)})
    assert Predicate([a, b]) != Predicate([b, a]) and Predicate([a, b]).equivalent(Predicate([b, a]))
    assert Predicate([a, b]).dims == ("a",)
