"""The aggregation operator against the central records (topologies/expected_aggregates.py), and the
algebra that lets panes be shared: states of any cut of the input merge to the whole's, in any
association; finer groups roll up to coarser ones; finer panes serve a window as well as its own."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.aggregate import FUNCTIONS, Aggregate, AggregateQuery, Window
from matcher.predicate import Box, Interval, Predicate
from peers import aggregation
from peers.aggregation import Pane, aggregate, merge, panes, records, roll_up, states_needed
from topologies.expected_aggregates import expected_records, same_records

ADVERSARIAL = [1e16, -1e16, 1.0, -1.0, 0.1, 0.3, 1e-300, -1e-300, 5e-324, 1e308, -1e308, 1.7e308, 2.0**53 + 2, -0.0]
NON_FINITE = [math.nan, math.inf, -math.inf]
LENGTHS = [Fraction(1, 10), Fraction(1, 4), Fraction(3, 4), Fraction(1), Fraction(2), Fraction(5, 2)]
# window boundaries in [0, 6] and the floats either side of them: where a float time's window is decided exactly
BOUNDARIES = {k / 10 for k in range(61)} | {k / 4 for k in range(25)}
TIMES = sorted({t for b in BOUNDARIES for t in (b, float(np.nextafter(b, -1)), float(np.nextafter(b, 7)))})

values = st.one_of(
    st.sampled_from(ADVERSARIAL),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(-4, 4).map(float),
)
with_non_finite = st.one_of(values, st.sampled_from(NON_FINITE))


@st.composite
def inputs(draw, max_size: int = 40):
    """``(times, columns)``: ascending times over [0, 6] (many on window boundaries), groups ``g`` and
    ``h`` of small integers, ``x`` finite and adversarial, ``y`` with NaN and infinities."""
    n = draw(st.integers(0, max_size))
    times = np.sort(
        np.array(draw(st.lists(st.one_of(st.sampled_from(TIMES), st.floats(0, 6)), min_size=n, max_size=n)))
    )
    columns = {
        "g": np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), float),
        "h": np.array(draw(st.lists(st.integers(-1, 0), min_size=n, max_size=n)), float),
        "x": np.array(draw(st.lists(values, min_size=n, max_size=n)), float),
        "y": np.array(draw(st.lists(with_non_finite, min_size=n, max_size=n)), float),
    }
    return times, columns


@st.composite
def windows(draw, tuples: bool | None = None):
    if tuples if tuples is not None else draw(st.booleans()):
        return Window(Fraction(draw(st.integers(1, 4))), Fraction(draw(st.integers(1, 4))), True)
    return Window(draw(st.sampled_from(LENGTHS)), draw(st.sampled_from(LENGTHS)))


@st.composite
def queries(draw, window=None, groups=None):
    """A query over ``window`` (a window or a strategy of them; any when None), grouped by ``groups`` (some
    of ``g``, ``h`` when None), over functions of ``x`` and ``y``, maybe with HAVING on a group, a selected
    aggregate or one named only there."""
    if groups is None:
        groups = tuple(draw(st.permutations(["g", "h"]))[: draw(st.integers(0, 2))])
    pool = [Aggregate("COUNT"), *(Aggregate(f, a) for f in FUNCTIONS for a in ("x", "y"))]
    chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6, unique=True))
    outputs = [*groups[: draw(st.integers(0, len(groups)))], *chosen]
    having = Predicate.TRUE
    if draw(st.booleans()):
        column = draw(st.sampled_from([*groups, *(a.to_text() for a in pool)]))
        bound = draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 1e16]))
        iv = draw(
            st.sampled_from([Interval.above(bound), Interval.below(bound, inclusive=True), Interval.point(bound)])
        )
        having = Predicate([Box({column: iv})])
    if window is None or isinstance(window, st.SearchStrategy):
        window = draw(windows() if window is None else window)
    return AggregateQuery(tuple(outputs), "s", Predicate.TRUE, groups, window, having)


@st.composite
def activities(draw):
    """``(at, until, duration)``: until None (to the run's end) or later than at.  Floats such as 0.1 (just
    above 1/10) and 0.7 (just below 7/10) make a window starting or ending there exactly not received."""
    at = draw(st.sampled_from([0.0, 0.1, 0.3, 0.7, 1.0, 1.25]))
    until = draw(st.one_of(st.none(), st.sampled_from([0.6, 0.7, 1.5, 2.2, 2.75, 5.1])))
    duration = draw(st.sampled_from([3.0, 6.0, 0.7 + 5.6, 100.0]))
    return at, (until if until is not None and until > at else None), duration


def active(times, columns, at, until):
    keep = (times >= at) & (times < (math.inf if until is None else until))
    return times[keep], {k: v[keep] for k, v in columns.items()}


def part(times, columns, cut):
    return times[cut], {k: v[cut] for k, v in columns.items()}


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(queries(), inputs(), activities())
def test_aggregate_equals_the_central_records(q, data, activity):
    times, columns = active(*data, *activity[:2])
    want = expected_records(q, times, columns, *activity)
    assert same_records(aggregate(q, times, columns, *activity), want)


@SETTINGS
@given(queries(window=Window(Fraction(1), Fraction(1))), st.lists(values, min_size=1, max_size=30))
def test_one_window_of_adversarial_values_equals_the_central_records(q, xs):
    # everything in one pane and group: sums cancel across magnitudes, where float summation fails
    n = len(xs)
    columns = {"g": np.zeros(n), "h": np.zeros(n), "x": np.array(xs), "y": np.array(xs[::-1])}
    times = np.full(n, 0.5)
    assert same_records(
        aggregate(q, times, columns, 0.0, None, 1.0), expected_records(q, times, columns, 0.0, None, 1.0)
    )


EVERY = tuple(Aggregate(f, a) for f in FUNCTIONS for a in ("x", "y"))


@SETTINGS
@given(st.lists(st.sampled_from(ADVERSARIAL), min_size=1, max_size=8))
def test_few_adversarial_values_equal_the_central_records(xs):
    # drawn from the adversarial values alone, so that huge middle values, cancelling pairs and ties meet
    q = AggregateQuery(EVERY, "s", Predicate.TRUE, (), Window(Fraction(1), Fraction(1)))
    n = len(xs)
    columns = {"g": np.zeros(n), "h": np.zeros(n), "x": np.array(xs), "y": np.array(xs[::-1])}
    times = np.full(n, 0.5)
    assert same_records(
        aggregate(q, times, columns, 0.0, None, 1.0), expected_records(q, times, columns, 0.0, None, 1.0)
    )


@SETTINGS
@given(queries(), inputs(), st.data())
def test_states_of_a_cut_input_merge_to_the_states_of_the_whole(q, data, draw):
    times, columns = data
    pane = Pane.of(q.window)
    needs = states_needed(q)
    whole = panes(pane, needs, times, columns, q.groups)
    first, second = sorted(draw.draw(st.lists(st.integers(0, len(times)), min_size=2, max_size=2)))
    cuts = [slice(0, first), slice(first, second), slice(second, len(times))]
    parts, before = [], {}
    for cut in cuts:  # count panes number each part's tuples after the earlier parts' ones
        made = panes(pane, needs, *part(times, columns, cut), q.groups, before)
        parts.append(made)
        before = merge(*parts).group_counts()
    a, b, c = parts
    assert merge(merge(a, b), c) == whole
    assert merge(a, merge(b, c)) == whole
    assert merge(a, b, c) == whole
    if not pane.tuples:  # time panes take the tuples in any order and any partition
        chosen = np.array(draw.draw(st.lists(st.booleans(), min_size=len(times), max_size=len(times))), bool)
        rest = panes(pane, needs, *part(times, columns, ~chosen), q.groups)
        assert merge(rest, panes(pane, needs, *part(times, columns, chosen), q.groups)) == whole
        assert rest != whole or not chosen.any()


@SETTINGS
@given(queries(window=windows(tuples=False), groups=("g", "h")), inputs(), activities(), st.data())
def test_rolled_up_states_give_the_coarser_querys_records(q, data, activity, draw):
    times, columns = active(*data, *activity[:2])
    keep = tuple(draw.draw(st.permutations(["g", "h"]))[: draw.draw(st.integers(0, 2))])
    coarse = draw.draw(queries(window=q.window, groups=keep))
    needs = states_needed(q) | states_needed(coarse)
    fine = panes(Pane.of(q.window), needs, times, columns, ("g", "h"))
    assert same_records(
        records(coarse, roll_up(fine, keep), *activity), expected_records(coarse, times, columns, *activity)
    )


@SETTINGS
@given(queries(), inputs(), activities(), st.data())
def test_panes_cut_for_several_windows_serve_each(q, data, activity, draw):
    other = draw.draw(windows(tuples=q.window.tuples))
    times, columns = active(*data, *activity[:2])
    shared = panes(Pane.of(q.window, other), states_needed(q), times, columns, q.groups)
    assert same_records(records(q, shared, *activity), expected_records(q, times, columns, *activity))


@settings(max_examples=100, deadline=None)
@given(queries(), inputs(), activities())
def test_inputs_longer_than_a_block_are_summed_a_block_at_a_time(q, data, activity):
    times, columns = active(*data, *activity[:2])
    want = expected_records(q, times, columns, *activity)
    block = aggregation.BLOCK
    try:
        aggregation.BLOCK = 3
        assert same_records(aggregate(q, times, columns, *activity), want)
    finally:
        aggregation.BLOCK = block


def test_pane_length_is_the_gcd_of_sizes_and_slides():
    assert Pane.of(Window(Fraction(3, 4), Fraction(1, 10))) == Pane(Fraction(1, 20))
    assert Pane.of(Window(Fraction(10), Fraction(5)), Window(Fraction(4), Fraction(4))) == Pane(Fraction(1))
    assert Pane.of(Window(Fraction(6), Fraction(4), True)) == Pane(Fraction(2), True)
    with pytest.raises(ValueError, match="one kind"):
        Pane.of(Window(Fraction(1), Fraction(1)), Window(Fraction(1), Fraction(1), True))


def test_float_arithmetic_would_fail_these_records():
    q = AggregateQuery(
        (Aggregate("SUM", "x"), Aggregate("AVG", "x"), Aggregate("VAR", "x")),
        "s",
        Predicate.TRUE,
        (),
        Window(Fraction(1), Fraction(1)),
    )
    times = np.array([0.1, 0.2, 0.3])
    found = aggregate(q, times, {"x": np.array([1e16, 1.0, -1e16])}, 0.0, None, 1.0)
    assert found == {(0, ()): (1.0, 1 / 3, (6 * 10**32 + 2) / 9)}
    median = AggregateQuery((Aggregate("MEDIAN", "x"),), "s", Predicate.TRUE, (), q.window)
    found = aggregate(median, times[:2], {"x": np.array([1e308, 1.7e308])}, 0.0, None, 1.0)
    assert found == {(0, ()): (1.35e308,)}  # (a + b) / 2 in floats: inf


def test_tuples_outside_the_activity_are_not_input():
    q = AggregateQuery((Aggregate("COUNT"),), "s", Predicate.TRUE, (), Window(Fraction(2), Fraction(2), True))
    times = np.array([0.5, 1.0, 1.5, 2.0, 2.5])
    found = aggregate(q, times, {}, 1.0, 2.5, 10.0)
    assert found == {(0, ()): (2.0,)}  # 1.0 and 1.5; 2.0 alone is an incomplete window


def test_states_that_cannot_serve_a_query_are_refused():
    q = AggregateQuery((Aggregate("AVG", "x"),), "s", Predicate.TRUE, ("g",), Window(Fraction(1), Fraction(1, 2)))
    times, columns = np.array([0.1, 0.7]), {"g": np.array([0.0, 1.0]), "x": np.array([1.0, 2.0])}
    coarse = panes(Pane(Fraction(1)), states_needed(q), times, columns, ("g",))
    with pytest.raises(ValueError, match="do not divide"):
        records(q, coarse, 0.0, None, 2.0)
    lacking = panes(Pane(Fraction(1, 2)), {("min", "x")}, times, columns, ("g",))
    with pytest.raises(ValueError, match="lack"):
        records(q, lacking, 0.0, None, 2.0)
    ungrouped = panes(Pane(Fraction(1, 2)), states_needed(q), times, columns, ())
    with pytest.raises(ValueError, match="grouped by"):
        records(q, ungrouped, 0.0, None, 2.0)
    with pytest.raises(ValueError, match="cannot merge"):
        merge(coarse, ungrouped)
    with pytest.raises(ValueError, match="do not roll up"):
        roll_up(panes(Pane(Fraction(1), True), states_needed(q), times, columns, ("g",)), ())
    with pytest.raises(ValueError, match="unknown states"):
        panes(Pane(Fraction(1)), {("mode", "x")}, times, columns, ("g",))
