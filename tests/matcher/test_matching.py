"""QC, HSR, HCR and EM against a brute-force implication check on the cell grid.

Bounds are integers in 0..3 (or infinite), open or closed, so along each dimension every predicate is
constant on the cells {k}, (k, k+1) and the two outer rays.  POINTS holds one value per cell (each
integer, each midpoint, -1 and 4); ``q => p`` holds iff it holds on every grid point.
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import matching as bench_matching
from matcher import INF, MATCHERS, Box, Interval, Predicate, interval, match_em, match_hcr, match_hsr, quick_check
from matcher.predicate import CellGrid

DIMS = ("a", "b", "c")
POINTS = np.array([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0])
COLUMNS = dict(zip(DIMS, (g.ravel() for g in np.meshgrid(POINTS, POINTS, POINTS, indexing="ij")), strict=True))

EXACT = [name for name in MATCHERS if name.startswith("EM")]
HEURISTICS = [name for name in MATCHERS if not name.startswith("EM")]
NO_EXTRA_SPACE = [name for name in MATCHERS if not name.startswith("HCR")]

end = st.one_of(st.none(), st.integers(0, 3))
raw_interval = st.tuples(end, end, st.booleans(), st.booleans())


@st.composite
def boxes(draw) -> Box:
    """A non-empty box constraining a random subset of DIMS."""
    intervals = {}
    for dim in draw(st.lists(st.sampled_from(DIMS), unique=True, max_size=3)):
        lo, hi, lo_closed, hi_closed = draw(raw_interval)
        iv = interval(-INF if lo is None else lo, INF if hi is None else hi, lo_closed, hi_closed)
        if not iv.is_empty():
            intervals[dim] = iv
    return Box(intervals)


predicates = st.lists(boxes(), max_size=4).map(Predicate)
stream_predicates = st.lists(boxes(), min_size=1, max_size=5).map(Predicate)


def members(pred: Predicate) -> np.ndarray:
    """Grid points inside ``pred``, straight from the definition of an interval."""
    result = np.zeros(len(POINTS) ** 3, bool)
    for box in pred.boxes:
        inside = np.ones_like(result)
        for dim, iv in box.items():
            x = COLUMNS[dim]
            inside &= ((x > iv.lo) | ((x == iv.lo) & iv.lo_closed)) & ((x < iv.hi) | ((x == iv.hi) & iv.hi_closed))
        result |= inside
    return result


def implies(q: Predicate, p: Predicate) -> bool:
    return bool(np.all(members(p)[members(q)]))


# --- the verdicts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXACT)
@settings(max_examples=60, deadline=None)
@given(p=predicates, q=predicates)
def test_exact_matching_verdict_is_the_implication(name, p, q):
    matched, _ = MATCHERS[name](p, q)
    assert matched == implies(q, p)


@pytest.mark.parametrize("strategy", ["bfs", "dfs", "mix"])
@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize("variant", ["rtree", "rstar"])
@settings(max_examples=30, deadline=None)
@given(p=predicates, q=predicates)
def test_indexed_exact_matching_agrees_with_brute_force(strategy, check, variant, p, q):
    matched, relaxed = match_em(p, q, strategy=strategy, quick_check=check, index=variant)
    assert matched == implies(q, p)
    assert (matched, relaxed) == match_em(p, q, strategy=strategy, quick_check=check)


@pytest.mark.parametrize("name", HEURISTICS)
@settings(max_examples=60, deadline=None)
@given(p=predicates, q=predicates)
def test_heuristics_never_report_a_false_match(name, p, q):
    matched, _ = MATCHERS[name](p, q)
    assert not matched or implies(q, p)


@settings(max_examples=60, deadline=None)
@given(p=predicates, q=predicates)
def test_predicate_implies_is_exact(p, q):
    assert q.implies(p) == implies(q, p)


@settings(max_examples=60, deadline=None)
@given(p=predicates, c=boxes())
def test_quick_check_against_each_box(p, c):
    part = members(Predicate([c]))
    states = [
        1 if np.all(members(Predicate([b]))[part]) else 0 if np.any(members(Predicate([b])) & part) else -1
        for b in p.boxes
    ]
    assert quick_check(p, c) == max(states, default=-1)


# --- the relaxed predicates ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MATCHERS))
@settings(max_examples=50, deadline=None)
@given(p=predicates, q=predicates)
def test_relaxed_predicate_is_implied_by_stream_and_query(name, p, q):
    matched, relaxed = MATCHERS[name](p, q)
    assert implies(p, relaxed)
    assert implies(q, relaxed)
    if matched:
        assert relaxed is p
    else:
        assert relaxed != p


@pytest.mark.parametrize("name", NO_EXTRA_SPACE)
@settings(max_examples=50, deadline=None)
@given(p=predicates, q=predicates)
def test_simple_and_exact_relaxation_add_nothing_beyond_stream_or_query(name, p, q):
    _, relaxed = MATCHERS[name](p, q)
    assert implies(relaxed, p.or_(q))
    # the stream's boxes come first, unchanged; the rest are whole query boxes, in query order
    assert relaxed.boxes[: len(p.boxes)] == p.boxes
    remaining = iter(q.boxes)
    assert all(any(b == c for c in remaining) for b in relaxed.boxes[len(p.boxes) :])


@pytest.mark.parametrize("name", ["HCR", "HCR+QC"])
@settings(max_examples=50, deadline=None)
@given(p=stream_predicates, q=predicates)
def test_complex_relaxation_widens_boxes_in_place(name, p, q):
    _, relaxed = MATCHERS[name](p, q)
    assert len(relaxed.boxes) == len(p.boxes)
    for before, after in zip(p.boxes, relaxed.boxes, strict=True):
        assert implies(Predicate([before]), Predicate([after]))


@settings(max_examples=50, deadline=None)
@given(p=predicates, q=predicates)
def test_simple_relaxation_without_quick_check_appends_every_query_box(p, q):
    assert match_hsr(p, q, quick_check=False) == ((True, p) if q.is_empty() else (False, p.or_(q)))


@settings(max_examples=50, deadline=None)
@given(p=predicates, q=predicates)
def test_quick_check_never_changes_the_heuristics_outcome_of_a_direct_match(p, q):
    # HCR finds direct matches itself (line 26 of Algorithm 8), so the quick check only saves time
    assert match_hcr(p, q, quick_check=True) == match_hcr(p, q, quick_check=False)


# --- HCR's choice ---------------------------------------------------------------------------------------


def test_complex_relaxation_prefers_fewer_unbounded_ends_over_less_volume():
    # the slab a in [0, 1] leaves b unbounded: widening it costs nothing, but it keeps 2(|D| - |D_c|) = 2
    # unbounded ends, so the bounded box is widened instead, though that adds far more volume
    slab = Box({"a": Interval.closed(0, 1)})
    bounded = Box({"a": Interval.closed(5, 100), "b": Interval.closed(0, 100)})
    query = Predicate([Box({"a": Interval.closed(1, 2), "b": Interval.closed(0, 1)})])
    matched, relaxed = match_hcr(Predicate([slab, bounded]), query)
    assert not matched
    assert relaxed == Predicate([slab, Box({"a": Interval.closed(1, 100), "b": Interval.closed(0, 100)})])


def test_complex_relaxation_breaks_ties_by_added_volume():
    wide = Box({"a": Interval.closed(0, 10), "b": Interval.closed(0, 10)})
    narrow = Box({"a": Interval.closed(0, 10), "b": Interval.closed(20, 21)})
    query = Predicate([Box({"a": Interval.closed(0, 10), "b": Interval.closed(11, 12)})])
    # widening `wide` adds 2 x 10, widening `narrow` adds 9 x 10
    assert match_hcr(Predicate([narrow, wide]), query)[1] == Predicate(
        [narrow, Box({"a": Interval.closed(0, 10), "b": Interval.closed(0, 12)})]
    )


def test_complex_relaxation_keeps_open_ends_of_the_hull():
    stream = Predicate([Box({"a": interval(0, 5, False, False)})])
    query = Predicate([Box({"a": interval(0, 7, True, False)})])
    assert match_hcr(stream, query) == (False, Predicate([Box({"a": interval(0, 7, True, False)})]))


# --- edge cases and the kernel ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MATCHERS))
def test_empty_stream_and_empty_query(name):
    box = Box({"a": Interval.closed(1, 2)})
    assert MATCHERS[name](Predicate.FALSE, Predicate([box])) == (False, Predicate([box]))
    stream = Predicate([box])
    assert MATCHERS[name](stream, Predicate.FALSE) == (True, stream)


@pytest.mark.parametrize("name", [n for n in MATCHERS if n != "HSR"])
def test_true_stream_matches_everything(name):
    query = Predicate([Box({"a": Interval.closed(1, 2)}), Box({"b": Interval.above(3)})])
    assert MATCHERS[name](Predicate.TRUE, query) == (True, Predicate.TRUE)


def test_unknown_split_strategy():
    with pytest.raises(ValueError, match="unknown split strategy 'zigzag'"):
        match_em(Predicate.TRUE, Predicate.TRUE, strategy="zigzag")


def test_boxes_sort_larger_first():
    unbounded_end = Box({"a": Interval.above(0)})
    big = Box({"a": Interval.closed(0, 10), "b": Interval.closed(0, 10)})
    small = Box({"a": Interval.closed(0, 1), "b": Interval.closed(0, 10)})
    point = Box({"a": Interval.point(3), "b": Interval.closed(0, 10)})
    assert sorted([point, small, big, unbounded_end], key=Box.size_key) == [unbounded_end, big, small, point]
    assert [d for d, _ in big.with_interval("c", Interval.closed(4, 5)).items_by_length()] == ["c", "a", "b"]


@settings(max_examples=100, deadline=None)
@given(p=predicates)
def test_cell_grid_round_trip(p):
    grid = CellGrid(p.boxes)
    for box in p.boxes:
        assert grid.decode(grid.encode(box)) == box


@settings(max_examples=50, deadline=None)
@given(p=predicates, q=predicates)
def test_benchmark_reference_is_exact(p, q):
    assert bench_matching.implies_by_sweep(q, p) == implies(q, p)


def test_benchmark_json(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    bench_matching.configure(parser)
    args = parser.parse_args(["--json", "--pairs-query", "4", "--pairs-stream", "3", "--dims", "3"])
    assert bench_matching.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pairs"] == 12
    assert set(out["algorithms"]) == set(MATCHERS)
    for name in EXACT:
        assert out["algorithms"][name]["matches"] == out["bruteforce_matches"]
    for name in HEURISTICS:
        assert out["algorithms"][name]["matches"] <= out["bruteforce_matches"]
