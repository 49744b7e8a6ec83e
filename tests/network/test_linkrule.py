"""The link rule every engine uses (network/linkrule.py): exact ticks, service times, and each fate."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.linkrule import CARRIED, DROPPED, LATE, LOST, NEVER, TICKS, cross, service, to_seconds, to_ticks


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 100_000), st.integers(1, 10**13))
def test_a_whole_bandwidth_serves_in_exactly_rounded_ticks(size, bandwidth):
    exact = Fraction(size * 8 * TICKS, bandwidth)
    want = math.floor(exact + Fraction(1, 2))  # the nearest tick, halves up
    assert service(size, float(bandwidth)) == min(want, LATE)


def test_a_fractional_or_tiny_bandwidth_is_served_and_never_past_late():
    assert service(32, 2.5) == 256 * TICKS * 2 // 5  # 102.4 s
    assert service(1_000_000, 0.001) == LATE  # eight billion seconds: held at LATE, no overflow
    assert service(32, 1e15) == 0  # a quarter of a picosecond


def test_seconds_become_the_nearest_tick_and_back():
    assert to_ticks([0.1, 1.5, np.inf]).tolist() == [10**11, 15 * 10**11, NEVER]
    assert to_ticks(1e-13).tolist() == 0 and to_ticks(6e-13).tolist() == 1
    assert np.isnan(to_seconds(np.array([-1]))).all() and to_seconds(np.array([TICKS])).tolist() == [1.0]


def _rings(places=4):
    return (
        np.zeros((1, places), np.int64),
        np.zeros((1, places), np.int64),
        np.zeros(1, np.int64),
        np.zeros(1, np.int64),
        np.zeros(1, np.int64),
    )


def test_each_fate_by_hand():
    rings = _rings()
    # a 32-byte copy at tick 100 on an idle wire: carried, 1,000 ticks of service, latency 50
    assert cross(100, 32, 100, 1000, 50, NEVER, NEVER, 0, rings, 64) == (CARRIED, 100, 1100)
    # the next one at 200 waits for the wire until 1100: 32 + 32 bytes fit 64
    assert cross(200, 32, 1100, 1000, 50, NEVER, NEVER, 0, rings, 64) == (CARRIED, 1100, 2100)
    # at 300 the first is on the wire, the second waits: 32 + 32 fit, admitted to start at 2100
    assert cross(300, 32, 2100, 1000, 50, NEVER, NEVER, 0, rings, 64) == (CARRIED, 2100, 3100)
    # at 400 two copies wait (they start at 1100 and 2100): 32 + 32 + 32 > 64, dropped
    assert cross(400, 32, 3100, 1000, 50, NEVER, NEVER, 0, rings, 64)[0] == DROPPED
    # at 1100 exactly, the copy starting then no longer waits: admitted
    assert cross(1100, 32, 3100, 1000, 50, NEVER, NEVER, 0, rings, 64) == (CARRIED, 3100, 4100)
    # a failure at 3000 catches the copy due at 5100 + 50: lost, holding wire and buffer up to the failure
    assert cross(1200, 32, 4100, 1000, 50, 3000, 5000, 0, rings, 128) == (LOST, 3000, 3000)
    # arriving while down: lost, nothing taken
    assert cross(3500, 32, 3500, 1000, 50, 3000, 5000, 0, rings, 128) == (LOST, 3500, 3500)
    # a failure after the copy reached the far end does not touch it
    assert cross(6000, 32, 6000, 1000, 50, 7051, NEVER, -1, rings, 0) == (CARRIED, 6000, 7000)
    assert cross(6000, 32, 6000, 1000, 50, 7050, NEVER, -1, rings, 0)[0] == LOST  # on its way at the failure
