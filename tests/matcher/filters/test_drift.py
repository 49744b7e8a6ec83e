"""The statistics the adaptive matcher watches between probes: exact drop ratios, evaluations per tuple."""

import numpy as np

from matcher.filters.drift import DROP_COUNTED, StatisticsWindow, moved


def test_a_window_gives_the_drop_ratio_of_its_counted_rows_and_the_evaluations_per_tuple():
    window = StatisticsWindow(1_000)
    half = np.zeros((512, 3), dtype=bool)
    half[::4, 1] = True  # every 4th tuple wanted by some label: every other counted row (every 2nd is)
    assert window.add(half, evaluations=100, count=False) is None  # the first batch is always counted
    none = np.zeros((512, 3), dtype=bool)
    state = window.add(none, evaluations=100 + 3 * 1_024, count=False)  # not counted: the drop ratio stays
    assert state == (0.5, 3.0)
    assert window.tuples == 0  # the next window has started
    assert window.add(none, evaluations=10_000, count=True) is None and window.counted == DROP_COUNTED


def test_the_stream_moved_when_either_statistic_moved_by_drift():
    assert not moved((0.1, 2.0), (0.2, 2.1), 0.15)
    assert moved((0.1, 2.0), (0.3, 2.0), 0.15)  # the drop ratio, absolutely
    assert moved((0.1, 2.0), (0.1, 2.5), 0.15)  # the evaluations per tuple, relatively
    assert not moved((0.1, 5.0), (0.1, 0.0), 0.15)  # an engine that does not count evaluations
