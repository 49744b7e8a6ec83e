"""The central records of aggregate subscriptions, by hand: windows cut exactly, groups, HAVING, the
values exact and rounded once, the rules for NaN and infinities, and which records a lost tuple fed."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.aggregate import Aggregate, AggregateQuery, Window
from matcher.predicate import Box, Interval, Predicate
from topologies.expected_aggregates import expected_records, records_fed, same_records, same_values

NAN, INF = math.nan, math.inf
EVERY = ("COUNT", "SUM", "AVG", "MIN", "MAX", "VAR", "STDDEV", "MEDIAN")


def query(outputs, size, slide=None, *, groups=(), having=Predicate.TRUE, tuples=False) -> AggregateQuery:
    window = Window(Fraction(size), Fraction(size if slide is None else slide), tuples)
    return AggregateQuery(tuple(outputs), "s", Predicate.TRUE, tuple(groups), window, having)


def every(attribute: str = "x") -> tuple[Aggregate, ...]:
    return tuple(Aggregate(f, attribute) for f in EVERY)


def having(column: str, iv: Interval) -> Predicate:
    return Predicate([Box({column: iv})])


def run(q, times, at=0.0, until=None, duration=10.0, **columns):
    return expected_records(
        q,
        np.asarray(times, np.float64),
        {k: np.asarray(v, np.float64) for k, v in columns.items()},
        at,
        until,
        duration,
    )


def one(q, values, **columns):
    """The one record of ``values`` (attribute ``x``) all in the first window of ``q``."""
    found = run(q, [0.0] * len(values), x=values, **columns)
    assert list(found) == [(0, ())]
    return found[0, ()]


def test_a_tumbling_window_counts_and_sums_its_tuples():
    q = query([Aggregate("COUNT"), Aggregate("SUM", "x")], 1)
    found = run(q, [0, 0.5, 1, 1.5, 2.5], duration=3, x=[1, 2, 3, 4, 5])
    assert found == {(0, ()): (2.0, 3.0), (1, ()): (2.0, 7.0), (2, ()): (1.0, 5.0)}


def test_sliding_windows_share_tuples_and_end_inside_the_run():
    q = query([Aggregate("SUM", "x")], 2, 1)
    found = run(q, [0.5, 1.5, 2.5, 3.5], duration=4, x=[1, 2, 3, 4])
    assert found == {(0, ()): (3.0,), (1, ()): (5.0,), (2, ()): (7.0,)}  # [3, 5) would pass the run's end


def test_hopping_windows_with_gaps_leave_tuples_out():
    q = query([Aggregate("COUNT")], Fraction(1, 2), 2)
    found = run(q, [0.25, 1, 2.25, 2.5, 4.4], duration=5)
    assert found == {(0, ()): (1.0,), (1, ()): (1.0,), (2, ()): (1.0,)}  # 1 and 2.5 lie in no window


def test_window_ends_are_compared_exactly_with_the_floats_times():
    # 0.3, 0.6 and 0.7 are floats just below 3/10, 6/10 and 7/10: they lie in the window before
    q = query([Aggregate("COUNT")], Fraction(1, 10))
    found = run(q, np.arange(10) / 10, duration=1.0)
    assert found == {(k, ()): (float(c),) for k, c in {0: 1, 1: 1, 2: 2, 4: 1, 5: 2, 6: 1, 8: 1, 9: 1}.items()}


def test_a_subscription_receives_the_windows_wholly_inside_its_activity_and_the_run():
    q = query([Aggregate("SUM", "x")], 1, Fraction(1, 2))
    times, x = [0.8, 1.2, 1.7, 2.2, 2.9, 3.1], [1, 2, 4, 8, 16, 32]
    found = run(q, times, at=0.7, until=3.2, x=x)
    assert found == {(2, ()): (6.0,), (3, ()): (12.0,), (4, ()): (24.0,)}  # [1, 2), [1.5, 2.5), [2, 3)
    assert run(q, times, at=0.7, duration=2.5, x=x) == {(2, ()): (6.0,), (3, ()): (12.0,)}
    # 0.1 is a float just above 1/10 and 0.7 one just below 7/10: [1/10, 2/10) and [6/10, 7/10) are not wholly inside
    tenths = query([Aggregate("COUNT")], Fraction(1, 10))
    assert set(run(tenths, [0.15, 0.25, 0.65], at=0.1, until=0.7)) == {(2, ())}


def test_groups_emit_only_where_they_have_tuples():
    q = query(["g", Aggregate("COUNT"), Aggregate("MAX", "x")], 1, groups=["g"])
    found = run(q, [0.1, 0.2, 0.3, 1.5, 2.5], duration=3, g=[1, 2, 1, 2, 2], x=[5, 6, 7, 8, 9])
    assert found == {
        (0, (1.0,)): (2.0, 7.0),
        (0, (2.0,)): (1.0, 6.0),
        (1, (2.0,)): (1.0, 8.0),
        (2, (2.0,)): (1.0, 9.0),
    }


def test_count_windows_are_per_group_and_an_incomplete_last_one_emits_nothing():
    g, x = [0, 1, 0, 0, 1, 0, 0], [1, 10, 2, 3, 20, 4, 5]
    times = np.arange(7.0)
    tumbling = query([Aggregate("SUM", "x")], 2, groups=["g"], tuples=True)
    assert run(tumbling, times, g=g, x=x) == {(0, (0.0,)): (3.0,), (1, (0.0,)): (7.0,), (0, (1.0,)): (30.0,)}
    sliding = query([Aggregate("SUM", "x")], 3, 1, groups=["g"], tuples=True)
    assert run(sliding, times, g=g, x=x) == {(0, (0.0,)): (6.0,), (1, (0.0,)): (9.0,), (2, (0.0,)): (12.0,)}
    hopping = query([Aggregate("SUM", "x")], 1, 2, groups=["g"], tuples=True)
    assert run(hopping, times, g=g, x=x) == {
        (0, (0.0,)): (1.0,),
        (1, (0.0,)): (3.0,),
        (2, (0.0,)): (5.0,),
        (0, (1.0,)): (10.0,),
    }


def test_having_removes_records_and_may_name_an_aggregate_not_selected():
    times, g, x = [0.1, 0.2, 0.3, 0.4], [1, 1, 2, 2], [1, 2, 3, 9]
    avg = query(["g", Aggregate("AVG", "x")], 1, groups=["g"], having=having("AVG(x)", Interval.above(2)))
    assert run(avg, times, g=g, x=x) == {(0, (2.0,)): (6.0,)}  # the group is in the key, not the values
    hidden = query([Aggregate("COUNT")], 1, groups=["g"], having=having("MIN(x)", Interval.below(2)))
    assert hidden.aggregates == (Aggregate("COUNT"), Aggregate("MIN", "x"))
    assert run(hidden, times, g=g, x=x) == {(0, (1.0,)): (2.0,)}
    by_group = query([Aggregate("SUM", "x")], 1, groups=["g"], having=having("g", Interval.point(2)))
    assert run(by_group, times, g=g, x=x) == {(0, (2.0,)): (12.0,)}


def test_median_is_the_middle_value_or_the_exact_midpoint():
    q = query([Aggregate("MEDIAN", "x")], 1)
    assert one(q, [3, 1, 2]) == (2.0,)
    assert one(q, [10, 1, 3, 2]) == (2.5,)
    assert one(q, [1e308, 1.7e308]) == (1.35e308,)  # (a + b) / 2 in floats would overflow


def test_sums_are_exact_and_rounded_once():
    q = query([Aggregate(f, "x") for f in ("SUM", "AVG")], 1)
    assert one(q, [1e16, 1.0, -1e16]) == (1.0, 1 / 3)  # summed in floats: 0.0
    assert one(q, [0.1] * 10) == (1.0, 0.1)  # summed in floats: 0.9999999999999999
    assert one(q, [1e16, 1.0, 18.0])[1] == 3333333333333339.5  # fsum / 3 rounds twice: ...340.0
    assert one(q, [1e308, 1e308]) == (INF, 1e308)  # the sum rounds to inf, the mean does not


def test_variance_is_exact():
    q = query([Aggregate("VAR", "x"), Aggregate("STDDEV", "x")], 1)
    assert one(q, [1e8 + 1, 1e8 + 2, 1e8 + 3]) == (2 / 3, math.sqrt(2 / 3))  # E[x²] - E[x]² in floats: 0.0
    assert one(q, [1e16, 1.0, -1e16]) == ((6 * 10**32 + 2) / 9, math.sqrt((6 * 10**32 + 2) / 9))
    assert one(q, [1.7e308, -1.7e308]) == (INF, INF)


def test_nan_or_both_infinities_make_every_aggregate_but_count_nan():
    q = query((*every(), Aggregate("COUNT")), 1)
    for values in ([1, NAN, 3], [1, INF, -INF], [NAN, NAN]):
        assert same_values(one(q, values), (len(values), *[NAN] * 7, len(values)))


def test_one_infinity_makes_sums_infinite_and_spreads_nan():
    q = query(every(), 1)
    assert same_values(one(q, [1, INF, 3]), (3, INF, INF, 1, INF, NAN, NAN, 3))
    assert same_values(one(q, [-INF, 2, 4, 6]), (4, -INF, -INF, -INF, 6, NAN, NAN, 3))
    assert one(q, [-INF, -INF, 2, 5])[-1] == -INF  # the midpoint of -inf and 2


def test_nan_in_one_attribute_leaves_the_others_alone():
    q = query([Aggregate("SUM", "x"), Aggregate("SUM", "y")], 1)
    assert same_values(one(q, [1, 2], y=[NAN, 1]), (3.0, NAN))


def test_having_drops_a_record_whose_value_is_nan_and_keeps_an_infinite_one_beyond_its_bound():
    q = query([Aggregate("SUM", "x")], 1, groups=["g"], having=having("SUM(x)", Interval.above(0)))
    assert run(q, [0.1, 0.2, 0.3], g=[1, 2, 3], x=[NAN, 4, INF]) == {(0, (2.0,)): (4.0,), (0, (3.0,)): (INF,)}


def test_records_fed_are_the_windows_holding_a_chosen_tuple():
    q = query([Aggregate("COUNT")], 2, 1, groups=["g"])
    times, g = [0.5, 1.5, 2.5, 3.5], [1, 1, 2, 1]
    fed = records_fed(q, np.array(times), {"g": np.array(g, float)}, 0.0, None, 4.0, np.array([1]))
    assert fed == {(0, (1.0,)), (1, (1.0,))}
    mask = np.array([False, False, True, True])
    assert records_fed(q, np.array(times), {"g": np.array(g, float)}, 0.0, None, 4.0, mask) == {
        (1, (2.0,)),
        (2, (2.0,)),
        (2, (1.0,)),
    }
    assert records_fed(q, np.array(times), {"g": np.array(g, float)}, 0.0, None, 4.0, np.array([])) == set()
    counted = query([Aggregate("COUNT")], 2, 1, groups=["g"], tuples=True)
    # group 1's tuples are 0, 1, 3 (positions 0, 1, 2): the third is in its window 1 only
    assert records_fed(counted, np.array(times), {"g": np.array(g, float)}, 0.0, None, 4.0, np.array([3])) == {
        (1, (1.0,))
    }


def test_same_values_takes_nan_as_equal_to_itself():
    assert same_values((1.0, NAN), (1.0, NAN))
    assert not same_values((1.0, NAN), (1.0, 2.0))
    assert same_records({(0, ()): (NAN,)}, {(0, ()): (NAN,)})
    assert not same_records({(0, ()): (NAN,)}, {(1, ()): (NAN,)})


def test_bad_inputs_are_refused():
    q = query([Aggregate("COUNT")], 1, groups=["g"])
    with pytest.raises(ValueError, match="not ascending"):
        run(q, [1, 0], g=[0, 0])
    with pytest.raises(ValueError, match="NaN"):
        run(q, [0, 1], g=[0, NAN])
    with pytest.raises(ValueError, match="outside"):
        run(q, [0, 1], at=0.5, g=[0, 0])


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e150, max_value=1e150)
adversarial = st.sampled_from([1e16, -1e16, 1.0, 0.1, 1e-300, 5e-324, -2.5, 2.0**53 + 2])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(finite, adversarial), min_size=1, max_size=12))
def test_values_are_the_exact_rational_results_rounded_once(values):
    exact = [Fraction(v) for v in values]
    n = len(values)
    mean = sum(exact) / n
    variance = sum((v - mean) ** 2 for v in exact) / n
    ordered = sorted(exact)
    middle = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    want = (n, math.fsum(values), float(mean), min(values), max(values), float(variance), float(middle))
    got = one(query((*every()[:5], Aggregate("VAR", "x"), Aggregate("MEDIAN", "x")), 1), values)
    assert got == want
