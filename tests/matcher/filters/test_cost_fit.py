"""The cost model of the adaptive choice, on made-up probe times."""

import pytest

from matcher.filters.cost_fit import predict, probe_overhead

US, NS = 1e-6, 1e-9


def seconds(rows, per_call=10 * US, per_tuple=20 * NS):
    return per_call + rows * per_tuple


def test_two_slice_sizes_fit_the_cost_per_call_and_per_tuple_at_the_live_size():
    timings = {"asc": {16: [seconds(16), seconds(16) * 1.5], 64: [seconds(64)]}}  # the least time per size
    predicted, fits = predict(timings, {}, batch=64, whole="multi-batch", short_slices=1.25)
    assert fits["asc"] == pytest.approx((10 * US, 20 * NS))
    assert predicted == pytest.approx({"asc": 20 * NS + 10 * US / 64})  # no longer calls than the slices
    predicted, _ = predict(timings, {}, batch=1_000, whole="multi-batch", short_slices=1.25)
    assert predicted == pytest.approx({"asc": 1.25 * (20 * NS + 10 * US / 1_000)})  # read at 1,000-row calls


def test_a_single_slice_scales_the_engines_last_fit():
    fits = {"grouped": (10 * US, 20 * NS)}
    timings = {"grouped": {16: [2 * seconds(16)]}}  # twice as slow as the fit says
    predicted, new = predict(timings, fits, batch=64, whole="multi-batch", short_slices=1.25)
    # read at the live size, and scaled up as every prediction from slices shorter than the live calls
    assert not new and predicted == pytest.approx({"grouped": 1.25 * 2 * (20 * NS + 10 * US / 64)})
    predicted, _ = predict(timings, {}, batch=64, whole="multi-batch", short_slices=1.25)
    assert predicted == pytest.approx({"grouped": 1.25 * 2 * seconds(16) / 16})  # no fit yet: its time per tuple


def test_the_whole_batch_engine_is_predicted_by_its_median_batch():
    timings = {"multi-batch": {8_192: [1e-3, 9e-3, 2e-3]}, "multi": {}}  # an engine not timed is left out
    predicted, fits = predict(timings, {}, batch=8_192, whole="multi-batch", short_slices=1.25)
    assert predicted == pytest.approx({"multi-batch": 2e-3 / 8_192}) and not fits


def test_probe_overhead_is_the_other_engines_time_beyond_the_choices():
    timings = {"multi": {64: [2 * US]}, "asc": {64: [5 * US, 1 * US]}, "grouped": {100: [3 * US]}}
    # the choice would have taken 2 us per 64 rows, 3.125 us per 100 rows; a cheaper call counts as 0
    assert probe_overhead(timings, "multi", 2 * US / 64) == pytest.approx(3 * US + 0 + 0)
