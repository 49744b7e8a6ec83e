"""The vectorised FIFO kernel and link rounds against a plain per-tuple recurrence."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.links import LinkQueue, Parcel, fifo_departures, gap_departures
from network.meter import TrafficMeter, bin_width


def _plain_fifo(arrivals, service, busy_until):
    out, busy = [], busy_until
    for a, s in zip(arrivals, service, strict=True):
        busy = max(a, busy) + s
        out.append(busy)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 9)), min_size=0, max_size=40),
    st.integers(0, 60),
)
def test_fifo_kernel_equals_plain_recurrence(pairs, busy):
    arrivals = np.array([a / 10 for a, _ in pairs], dtype=float)
    service = np.array([s / 7 for _, s in pairs], dtype=float)
    got = fifo_departures(arrivals, service, busy / 10)
    assert np.allclose(got, _plain_fifo(arrivals, service, busy / 10), rtol=0, atol=1e-9)


def _parcel(lane, indices, ready, size=10):
    indices = np.asarray(indices, dtype=np.int64)
    return Parcel(lane, lane, indices, {}, np.full(len(indices), size, dtype=np.int64), np.asarray(ready, float))


def test_rounds_wait_for_all_parcels_and_merge_by_arrival_lane_index():
    # 80 bit/s: a 10-byte tuple takes 1 s; latency 0.5 s
    queue = LinkQueue(80.0, 0.5, [[2], [1]])
    assert queue.put(0, 0, _parcel(1, [0, 1], [0.0, 3.0])) == []
    [(parcels, departures, arrivals)] = queue.put(0, 0, _parcel(0, [7, 8], [0.0, 0.5]))
    # service order: (0.0, lane 0, 7), (0.0, lane 1, 0), (0.5, lane 0, 8), (3.0, lane 1, 1)
    assert [p.lane for p in parcels] == [1, 0]
    assert departures.tolist() == [2.0, 4.0, 1.0, 3.0]
    assert arrivals.tolist() == [2.5, 4.5, 1.5, 3.5]
    assert not queue.idle()
    [(_, departures, _)] = queue.put(1, 0, _parcel(0, [9], [1.0]))
    assert departures.tolist() == [5.0]  # busy until 4.0 from the previous window
    assert queue.idle()


def test_later_round_waits_for_the_earlier_one_but_is_served_in_its_gaps():
    # 1 s per tuple; round 0 holds the link over [2, 3] and [3.5, 4.5]
    queue = LinkQueue(80.0, 0.0, [[1, 1], [1]])
    assert queue.put(0, 1, _parcel(5, [1, 2, 3, 4], [0.0, 0.5, 2.4, 2.6])) == []
    served = queue.put(0, 0, _parcel(6, [7, 8], [2.0, 3.5]))
    # round 1: 0.0 -> [0, 1]; 0.5 -> [1, 2]; 2.4 needs 1 s, the gap [3, 3.5] is too short -> [4.5, 5.5]; then
    # 2.6 -> [5.5, 6.5]
    assert [d.tolist() for _, d, _ in served] == [[3.0, 4.5], [1.0, 2.0, 5.5, 6.5]]
    [(_, departures, _)] = queue.put(1, 0, _parcel(0, [9], [5.0]))
    assert departures.tolist() == [7.5]  # the next window queues behind everything served before it


def _plain_gaps(arrivals, service, busy_until, intervals):
    out, previous = [], busy_until
    for a, s in zip(arrivals, service, strict=True):
        t = max(a, previous)
        clash = [hi for lo, hi in intervals if lo < t + s and t < hi]
        while clash:  # start again after the first interval in the way
            t = min(clash)
            clash = [hi for lo, hi in intervals if lo < t + s and t < hi]
        previous = t + s
        out.append(previous)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 9)), min_size=0, max_size=30),
    st.lists(st.tuples(st.integers(0, 8), st.integers(1, 9)), min_size=0, max_size=12),
    st.integers(0, 20),
)
def test_gap_departures_equal_a_plain_first_fit(pairs, gaps, busy):
    arrivals = np.sort(np.array([a / 10 for a, _ in pairs], dtype=float))
    service = np.array([s / 7 for _, s in pairs], dtype=float)
    starts, ends, t = [], [], 0.0
    for gap, length in gaps:  # disjoint busy intervals with gaps between them
        t += gap / 5
        starts.append(t)
        t += length / 6
        ends.append(t)
    got = gap_departures(arrivals, service, busy / 10, np.array(starts), np.array(ends))
    want = _plain_gaps(arrivals, service, busy / 10, list(zip(starts, ends, strict=True)))
    assert np.allclose(got, want, rtol=0, atol=1e-9)
    for d, s in zip(got, service, strict=True):  # never overlaps the link's earlier service
        assert not any(lo < d - 1e-9 and d - s + 1e-9 < hi for lo, hi in zip(starts, ends, strict=True))


def test_bin_width_is_round_and_about_a_hundredth():
    assert bin_width(60) == 1.0
    assert bin_width(10) == 0.1
    assert bin_width(120) == 2.0
    assert bin_width(300) == 5.0
    assert bin_width(1000) == 10.0


def test_meter_timeline_and_access_split():
    meter = TrafficMeter([("A", "B"), ("B", "A")], {"Q": ("x",)}, 1.0)
    meter.cross(("A", "B"), np.array([10, 20, 30]), np.array([0.5, 0.7, 2.1]))
    meter.cross(("P", "A"), np.array([5, 5]), np.array([0.1, 0.2]))
    run = meter.result("s", "local")
    assert run.link_bytes == {("A", "B"): 60, ("B", "A"): 0}
    assert run.link_tuples == {("A", "B"): 3, ("B", "A"): 0}
    assert run.access_bytes == 10 and run.access_link_bytes == {("P", "A"): 10}
    assert run.timeline[("A", "B")].tolist() == [30, 0, 30]
    assert run.timeline[("B", "A")].tolist() == [0, 0, 0]
    assert run.delivered["Q"].dtype == np.int64 and len(run.delivered["Q"]) == 0
    assert run.delivered_attrs == {"Q": ("x",)}
