"""The vectorised FIFO kernel and link rounds against a plain per-tuple recurrence."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.links import LinkQueue, Parcel, fifo_departures
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


def test_later_round_is_served_after_the_earlier_one_even_if_it_arrives_first():
    queue = LinkQueue(80.0, 0.0, [[1, 1]])
    assert queue.put(0, 1, _parcel(5, [1], [0.0])) == []
    served = queue.put(0, 0, _parcel(6, [2], [2.0]))
    assert [d.tolist() for _, d, _ in served] == [[3.0], [4.0]]


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
