"""DynamicMatcher: subscriptions added and removed one at a time give the answer of a matcher built from
scratch over the subscriptions left, of MultiMatcher, and of Predicate.evaluate tuple by tuple."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher.filters.dynamic import DynamicMatcher
from matcher.filters.multi import MultiMatcher

DIMS = ("a", "b", "c", "d")
GRID = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)


@st.composite
def predicates(draw):
    boxes = []
    for _ in range(draw(st.integers(0, 3))):
        sides = {}
        for d in DIMS:
            if draw(st.integers(0, 2)):
                lo, hi = sorted(draw(st.lists(st.sampled_from(GRID), min_size=2, max_size=2)))
                lo = -np.inf if draw(st.integers(0, 5)) == 0 else lo
                hi = np.inf if draw(st.integers(0, 5)) == 0 else hi
                sides[d] = interval(lo, hi, draw(st.booleans()), draw(st.booleans()))
        boxes.append(Box(sides))
    return Predicate(boxes)


def columns(seed, dims=DIMS, n=250):
    pool = np.array([*GRID, 0.5, 2.5, 4.5, -1.0, 7.0, np.nan, np.inf, -np.inf])
    rng = np.random.default_rng(seed)
    return {d: rng.choice(pool, n) for d in dims}


def pointwise(live, items):
    n = len(next(iter(items.values())))
    return np.array(
        [[p.evaluate({d: float(items[d][i]) for d in items}) for _, p in live] for i in range(n)], dtype=bool
    ).reshape(n, len(live))


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(predicates(), max_size=12),
    steps=st.lists(st.tuples(st.booleans(), predicates()), max_size=25),
    buckets=st.sampled_from([1, 2, 4, 32]),
    seed=st.integers(0, 2**16),
)
def test_adds_and_removes_answer_like_a_rebuild_and_like_evaluate(first, steps, buckets, seed):
    live = [(f"s{j}", p) for j, p in enumerate(first)]
    matcher = DynamicMatcher(live, buckets=buckets)
    rng = np.random.default_rng(seed)
    for j, (add, predicate) in enumerate(steps):
        if add or not live:
            live.append((f"n{j}", predicate))
            matcher.add(f"n{j}", predicate)
        else:
            label, _ = live.pop(int(rng.integers(len(live))))
            matcher.remove(label)
    items = columns(seed)
    assert matcher.labels == tuple(label for label, _ in live)
    expected = pointwise(live, items)
    np.testing.assert_array_equal(matcher.match(items), expected)
    np.testing.assert_array_equal(DynamicMatcher(live, buckets=buckets).match(items), expected)
    if live:
        np.testing.assert_array_equal(MultiMatcher(live).match(items), expected)
    indptr, indices = matcher.match_csr(items)
    for i in range(len(indptr) - 1):
        assert indices[indptr[i] : indptr[i + 1]].tolist() == np.flatnonzero(expected[i]).tolist()


def test_slots_are_reused_and_the_tables_grow_only_when_full():
    box = Predicate([Box({"a": Interval.closed(0, 1)})])
    matcher = DynamicMatcher([(f"s{j}", box) for j in range(64)])
    size = matcher.nbytes()
    for j in range(64):
        matcher.remove(f"s{j}")
        matcher.add(f"t{j}", box)
    assert matcher.nbytes() == size
    matcher.add("more", Predicate([Box({"a": Interval.closed(2, 3)})] * 200))
    assert matcher.nbytes() > size
    assert matcher.match({"a": np.array([0.5, 2.5, 9.0])}).sum(axis=1).tolist() == [64, 1, 0]


def test_an_attribute_first_seen_later_leaves_the_earlier_subscriptions_unconstrained():
    matcher = DynamicMatcher([("x", Predicate([Box({"a": Interval.above(1)})]))])
    matcher.add("y", Predicate([Box({"b": Interval.below(0)})]))
    items = {"a": np.array([2.0, 0.0, np.nan]), "b": np.array([np.nan, -1.0, -1.0])}
    assert matcher.match(items).tolist() == [[True, False], [False, True], [False, True]]
    with pytest.raises(KeyError, match="'b'"):
        matcher.match({"a": np.zeros(2)})


def test_true_false_and_empty_matchers():
    matcher = DynamicMatcher([("all", Predicate.TRUE), ("none", Predicate.FALSE)])
    assert matcher.match({"a": np.zeros(3)}).tolist() == [[True, False]] * 3
    empty = DynamicMatcher()
    assert empty.labels == () and empty.match({"a": np.zeros(2)}).shape == (2, 0)


def test_labels_are_checked():
    matcher = DynamicMatcher([("x", Predicate.TRUE)])
    with pytest.raises(ValueError, match="'x'"):
        matcher.add("x", Predicate.TRUE)
    with pytest.raises(ValueError, match="'y'"):
        DynamicMatcher([("y", Predicate.TRUE), ("y", Predicate.FALSE)])
    with pytest.raises(KeyError):
        matcher.remove("nobody")
    with pytest.raises(ValueError, match="buckets"):
        DynamicMatcher(buckets=0)


def test_it_ships_as_plain_arrays_and_pickles():
    rng = np.random.default_rng(3)
    live = [
        (f"s{j}", Predicate([Box({d: Interval.closed(*sorted(rng.uniform(0, 5, 2))) for d in "ab"})] * 2))
        for j in range(50)
    ]
    matcher = DynamicMatcher(live)
    matcher.remove("s7")
    items = columns(5, dims=("a", "b"))
    expected = matcher.match(items)
    for copy in (DynamicMatcher.from_arrays(matcher.to_arrays()), pickle.loads(pickle.dumps(matcher))):
        assert copy.labels == matcher.labels
        np.testing.assert_array_equal(copy.match(items), expected)
