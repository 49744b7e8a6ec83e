"""MultiMatcher: agrees with per-label reference evaluation, CSR equals dense, rebuilds anywhere."""

import multiprocessing
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate, interval
from matcher.evaluation import evaluate_reference
from matcher.filters.multi import PARALLEL_MIN_TUPLES, SCAN_MAX_BOXES, MultiMatcher


def random_labelled(rng, n_labels, dims, float_bounds=False):
    labelled = []
    for j in range(n_labels):
        boxes = []
        for _ in range(rng.integers(0, 4)):
            chosen = rng.choice(dims, rng.integers(0, min(len(dims), 4) + 1), replace=False)
            ivs = {}
            for d in chosen:
                lo, hi = sorted(rng.uniform(0, 10, 2) if float_bounds else rng.integers(0, 6, 2).astype(float))
                lo = -np.inf if rng.random() < 0.15 else lo
                hi = np.inf if rng.random() < 0.15 else hi
                ivs[d] = interval(lo, hi, rng.random() < 0.5, rng.random() < 0.5)
            boxes.append(Box(ivs))
        labelled.append((f"L{j}", Predicate(boxes)))
    return labelled


def columns_for(rng, dims, n):
    pool = np.array([*range(7), *(k + 0.5 for k in range(-1, 7)), np.nan, np.inf, -np.inf], dtype=float)
    return {d: rng.choice(pool, n) for d in dims}


def reference(labelled, columns):
    n = len(next(iter(columns.values())))
    return np.stack([evaluate_reference(p, columns) for _, p in labelled], axis=1).reshape(n, len(labelled))


def check_csr(matcher, columns, dense):
    indptr, indices = matcher.match_csr(columns)
    assert indptr[0] == 0 and indptr[-1] == len(indices) == dense.sum()
    for i in range(dense.shape[0]):
        assert indices[indptr[i] : indptr[i + 1]].tolist() == np.flatnonzero(dense[i]).tolist()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n_labels=st.integers(1, 40), n_dims=st.integers(1, 20))
def test_match_agrees_with_reference(seed, n_labels, n_dims):
    rng = np.random.default_rng(seed)
    dims = [f"a{k}" for k in range(n_dims)]
    labelled = random_labelled(rng, n_labels, dims)
    columns = columns_for(rng, dims, 150)
    matcher = MultiMatcher(labelled)
    dense = matcher.match(columns)
    np.testing.assert_array_equal(dense, reference(labelled, columns))
    check_csr(matcher, columns, dense)


@pytest.mark.parametrize(("n_labels", "float_bounds"), [(1, False), (3, False), (300, False), (400, True)])
def test_both_strategies_and_quantised_tables(n_labels, float_bounds):
    rng = np.random.default_rng(n_labels)
    dims = ["x", "y", "z"]
    labelled = random_labelled(rng, n_labels, dims, float_bounds)
    matcher = MultiMatcher(labelled)
    n_boxes = sum(len(p.boxes) for _, p in labelled)
    assert matcher.strategy == ("scan" if n_boxes <= SCAN_MAX_BOXES else "bitmap")
    if float_bounds:
        assert not matcher._bitmap.exact
        columns = {d: rng.uniform(-1, 11, 800) for d in dims}
    else:
        columns = columns_for(rng, dims, 800)
    dense = matcher.match(columns)
    np.testing.assert_array_equal(dense, reference(labelled, columns))
    check_csr(matcher, columns, dense)


@pytest.mark.parametrize("n_tuples", [1, PARALLEL_MIN_TUPLES - 1, PARALLEL_MIN_TUPLES, 2 * PARALLEL_MIN_TUPLES + 7])
@pytest.mark.parametrize("float_bounds", [False, True])
def test_serial_and_parallel_kernels_agree_with_reference_around_the_threshold(n_tuples, float_bounds):
    rng = np.random.default_rng(n_tuples)
    dims = ["x", "y", "z"]
    labelled = random_labelled(rng, 70, dims, float_bounds)
    matcher = MultiMatcher(labelled)
    assert matcher.strategy == "bitmap"
    columns = {d: rng.uniform(-1, 11, n_tuples) for d in dims} if float_bounds else columns_for(rng, dims, n_tuples)
    np.testing.assert_array_equal(matcher.match(columns), reference(labelled, columns))


def test_true_false_and_empty_matchers():
    columns = {"x": np.array([0.0, 1.0, np.nan])}
    only_flags = MultiMatcher([("t", Predicate.TRUE), ("f", Predicate.FALSE)] * 3)
    assert only_flags.match(columns).tolist() == [[True, False] * 3] * 3
    assert MultiMatcher([]).match(columns).shape == (3, 0)
    box = Box({"x": Interval.closed(0, 0)})
    many = MultiMatcher(
        [("t", Predicate.TRUE), ("f", Predicate.FALSE)] + [(f"b{k}", Predicate([box])) for k in range(8)]
    )
    assert many.strategy == "bitmap"
    assert many.match(columns).tolist() == [[True, False, *[v] * 8] for v in (True, False, False)]


def _match_in_child(arrays, columns):
    return MultiMatcher.from_arrays(arrays).match(columns)


@pytest.mark.parametrize("n_labels", [2, 200])
def test_rebuild_from_arrays_in_a_fresh_process(n_labels):
    rng = np.random.default_rng(11)
    dims = [f"a{k}" for k in range(5)]
    labelled = random_labelled(rng, n_labels, dims)
    columns = columns_for(rng, dims, 500)
    matcher = MultiMatcher(labelled)
    arrays = matcher.to_arrays()
    assert all(a.dtype != object for a in arrays.values())
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        remote = pool.apply(_match_in_child, (arrays, columns))
    np.testing.assert_array_equal(remote, matcher.match(columns))
    clone = pickle.loads(pickle.dumps(matcher))
    assert clone.labels == matcher.labels and clone.dims == matcher.dims
    np.testing.assert_array_equal(clone.match(columns), matcher.match(columns))


def test_bad_input_is_reported():
    matcher = MultiMatcher([("q", Predicate([Box({"x": Interval.closed(0, 1)})]))])
    with pytest.raises(KeyError, match="'x'"):
        matcher.match({"y": np.zeros(2)})
    with pytest.raises(KeyError, match="owner"):
        MultiMatcher.from_arrays({k: v for k, v in matcher.to_arrays().items() if k != "owner"})


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_labels=st.integers(1, 40),
    n_dims=st.integers(1, 8),
    sizes=st.lists(st.integers(0, 90), min_size=1, max_size=6),
)
def test_scan_first_then_bitmap_agrees_with_reference(seed, n_labels, n_dims, sizes):
    # the broadcast scan serves the first tuples, the bitmap the rest: every batch as the reference says
    rng = np.random.default_rng(seed)
    dims = [f"a{k}" for k in range(n_dims)]
    labelled = random_labelled(rng, n_labels, dims)
    matcher = MultiMatcher(labelled, scan_first=100)
    seen = 0
    for n in sizes:
        columns = columns_for(rng, dims, n)
        np.testing.assert_array_equal(matcher.match(columns), reference(labelled, columns))
        seen += n
        if matcher.strategy == "bitmap":
            # built exactly when a batch would take the scanned tuples past 100
            assert (matcher._bitmap is None) == (seen <= 100)


def test_scan_first_serves_a_few_tuples_without_building_the_bitmap():
    rng = np.random.default_rng(7)
    labelled = [(f"L{j}", Predicate([Box({"a0": interval(j, j + 3, True, False)})])) for j in range(50)]
    matcher = MultiMatcher(labelled, scan_first=64)
    columns = columns_for(rng, ["a0"], 64)
    np.testing.assert_array_equal(matcher.match(columns), reference(labelled, columns))
    assert matcher.strategy == "bitmap" and matcher._bitmap is None
    columns = columns_for(rng, ["a0"], 1)
    np.testing.assert_array_equal(matcher.match(columns), reference(labelled, columns))
    assert matcher._bitmap is not None
