"""CACQ grouped filter: exact agreement with a per-tuple reference, AND semantics on one attribute."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher.filters.grouped import ConjunctTable, GroupedFilter, pack, unpack

DIMS = ("a", "b", "c")


def reference(labelled, columns):
    """Predicate.evaluate per tuple: the plain definition."""
    n = len(columns["a"])
    rows = [{d: float(columns[d][i]) for d in DIMS} for i in range(n)]
    return np.array([[p.evaluate(row) for _, p in labelled] for row in rows], dtype=bool).reshape(n, len(labelled))


bounds = st.integers(0, 6).map(float)


@st.composite
def intervals(draw):
    kind = draw(st.sampled_from(["point", "range", "above", "below"]))
    a, b = sorted((draw(bounds), draw(bounds)))
    if kind == "point":
        return Interval.point(a)
    if kind == "above":
        return Interval.above(a, inclusive=draw(st.booleans()))
    if kind == "below":
        return Interval.below(b, inclusive=draw(st.booleans()))
    return interval(a, b, draw(st.booleans()), draw(st.booleans()))


# several intervals on one dimension in one box are intersected by Box: the AND trap in the grouped filter
boxes = st.lists(st.tuples(st.sampled_from(DIMS), intervals()), max_size=4).map(Box)
predicates = st.lists(boxes, max_size=3).map(Predicate)
workloads = st.lists(predicates, min_size=1, max_size=6).map(lambda ps: [(f"l{i}", p) for i, p in enumerate(ps)])
# NaN lies in no interval: it fails every constraint on its attribute (a missing reading)
values = st.integers(-1, 7).map(float) | st.just(float("nan"))
tuples = st.lists(st.tuples(*(values for _ in DIMS)), min_size=1, max_size=40)


def as_columns(rows):
    return {d: np.array([r[k] for r in rows], dtype=np.float64) for k, d in enumerate(DIMS)}


@settings(max_examples=150, deadline=None)
@given(workloads, tuples)
def test_grouped_filter_equals_reference(labelled, rows):
    columns = as_columns(rows)
    engine = GroupedFilter(labelled)
    expected = reference(labelled, columns)
    assert np.array_equal(engine.match(columns), expected)
    assert np.array_equal(GroupedFilter.from_arrays(engine.to_arrays()).match(columns), expected)


def test_two_bounds_of_one_conjunct_are_anded():
    # a > 2 AND a < 5: the values 1 and 7 satisfy one bound each and must not match
    labelled = [("q", Predicate([Box([("a", Interval.above(2.0)), ("a", Interval.below(5.0))])]))]
    columns = {"a": np.array([1.0, 2.0, 3.0, 5.0, 7.0])}
    assert GroupedFilter(labelled).match(columns)[:, 0].tolist() == [False, False, True, False, False]


def test_disjunction_is_one_entry_per_box_ored_per_label():
    # a != 3 arrives as two boxes; b = 1 OR (a >= 4 AND b <= 0)
    neq = Predicate([Box({"a": Interval.below(3.0)}), Box({"a": Interval.above(3.0)})])
    mixed = Predicate(
        [
            Box({"b": Interval.point(1.0)}),
            Box({"a": Interval.above(4.0, inclusive=True), "b": Interval.below(0.0, inclusive=True)}),
        ]
    )
    columns = {"a": np.array([3.0, 2.0, 4.0, 4.0, 3.0]), "b": np.array([0.0, 0.0, 0.0, 1.0, 1.0])}
    result = GroupedFilter([("neq", neq), ("mixed", mixed), ("none", Predicate.FALSE), ("all", Predicate.TRUE)]).match(
        columns
    )
    assert result[:, 0].tolist() == [False, True, True, True, False]
    assert result[:, 1].tolist() == [False, False, True, True, True]
    assert not result[:, 2].any() and result[:, 3].all()


def test_pack_unpack_round_trip():
    bits = np.random.default_rng(3).random((5, 130)) < 0.5
    assert np.array_equal(unpack(pack(bits), 130), bits)


def test_early_drop_skips_filters():
    # every tuple fails the only conjunct on the first attribute probed: one grouped filter per tuple
    labelled = [("q", Predicate([Box({"a": Interval.point(1.0), "b": Interval.point(1.0)})]))]
    engine = GroupedFilter(labelled)
    engine.match({"a": np.zeros(10), "b": np.zeros(10)})
    assert engine.evaluations_per_tuple == 1.0
    assert ConjunctTable.of(labelled).n_conjuncts == 1
