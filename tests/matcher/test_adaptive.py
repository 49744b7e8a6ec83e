"""Cost-based choice: every engine returns the same sets on random workloads and drifting data."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, MultiMatcher, Predicate
from matcher.adaptive import AdaptiveMultiMatcher
from matcher.asc import ASCMatcher
from matcher.grouped import GroupedFilter
from tests.matcher.test_grouped import DIMS, reference, workloads


@settings(max_examples=40, deadline=None)
@given(workloads, st.integers(0, 2**31 - 1))
def test_all_engines_agree_on_drifting_data(labelled, seed):
    rng = np.random.default_rng(seed)
    engines = [
        MultiMatcher(labelled),
        GroupedFilter(labelled),
        ASCMatcher(labelled, ordering="hybrid", period=40, sample=30),
        ASCMatcher(labelled, ordering="macro", period=40, sample=30, threshold=0.2),
        AdaptiveMultiMatcher(labelled, period=50, probe=16),
    ]
    for phase in range(4):
        # the distribution drifts: low values, then high, then wide, then boundary values only
        lo, hi = [(-1, 3), (3, 8), (-1, 8), (0, 1)][phase]
        columns = {d: rng.integers(lo, hi, int(rng.integers(1, 60))).astype(float) for d in DIMS}
        n = min(len(v) for v in columns.values())
        columns = {d: v[:n] for d, v in columns.items()}
        expected = reference(labelled, columns)
        for engine in engines:
            assert np.array_equal(engine.match(columns), expected), type(engine).__name__


def test_choice_is_recorded_and_rebuilt_from_arrays():
    labelled = [(f"q{i}", Predicate([Box({"a": Interval.above(float(i))})])) for i in range(5)]
    engine = AdaptiveMultiMatcher(labelled, period=100, probe=10)
    columns = {"a": np.arange(300, dtype=float) % 7}
    engine.match(columns)
    assert engine.history and engine.history[0][0] == 0
    assert set(engine.cost) == {"multi", "grouped", "asc"}
    copy = AdaptiveMultiMatcher.from_arrays(engine.to_arrays())
    assert copy.choice == engine.choice and copy.labels == engine.labels
    assert np.array_equal(copy.match(columns), engine.match(columns))


def test_unknown_engine_is_rejected():
    with pytest.raises(ValueError, match="engines"):
        AdaptiveMultiMatcher([], engines=("rtree",))
