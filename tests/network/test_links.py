"""The queue kernels against plain per-tuple references, and a link's serving order over windows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.buffers import NEVER
from network.linkrule import TICKS, gap, to_seconds, to_ticks
from network.meter import MAX_TIMELINE_BINS, TrafficMeter, _bin_end, _tick_bin, bin_width
from network.queues import Blocks, Queues, Route, _ahead, _merge_runs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), max_size=15), max_size=8))
def test_merging_the_runs_sorts_stably(runs):
    keys = np.array([k / 4 for run in runs for k in sorted(run)], dtype=float)
    rows = np.arange(len(keys), dtype=np.int64)
    want = np.argsort(keys, kind="stable")
    got_keys, got_rows = keys.copy(), rows.copy()
    _merge_runs(got_keys, got_rows, np.empty(len(keys)), np.empty(len(keys), np.int64))
    assert got_rows.tolist() == want.tolist()
    assert got_keys.tolist() == keys[want].tolist()


def test_a_link_serves_each_window_by_arrival_then_channel_then_index():
    # 80 bit/s: a 10-byte tuple takes 1 s; latency 0.5 s; two uploads over the same link, each delivered
    routes = [Route((("A", "B"),), -1, 0, "Q0"), Route((("A", "B"),), -1, 0, "Q1")]
    meter = TrafficMeter([("A", "B")], {"Q0": (), "Q1": ()}, 1.0)
    queues = Queues({("A", "B"): (80.0, 0.5)}, routes, meter)

    def blocks(per_channel):
        """Blocks of channels 0 and 1 from ``{channel: (indices, emitted)}``."""
        first, count, indices, emitted = np.full(2, -1), np.zeros(2, np.int64), [], []
        for c in sorted(per_channel):
            first[c], count[c] = len(indices), len(per_channel[c][0])
            indices += per_channel[c][0]
            emitted += per_channel[c][1]
        n = len(indices)
        wire = np.full(n, 10, dtype=np.int64)
        return Blocks(np.array(indices), np.array(emitted, float), np.full(n, -1), wire, first, count)

    queues.serve(blocks({1: ([0, 1], [0.0, 3.0]), 0: ([7, 8], [0.0, 0.5])}))
    queues.serve(blocks({0: ([9], [1.0])}))  # busy until 4.0 from the previous window
    run = meter.result("s", "local")
    # service order: (0.0, channel 0, 7), (0.0, channel 1, 0), (0.5, channel 0, 8), (3.0, channel 1, 1)
    assert run.delivered["Q0"].tolist() == [7, 8, 9]
    assert (run.latencies["Q0"] + [0.0, 0.5, 1.0]).tolist() == [1.5, 3.5, 5.5]
    assert (run.latencies["Q1"] + [0.0, 3.0]).tolist() == [2.5, 4.5]
    assert run.link_tuples[("A", "B")] == 5 and run.link_bytes[("A", "B")] == 50
    assert run.timeline[("A", "B")].tolist() == [0, 10, 10, 10, 10, 10]  # departures 1, 2, 3, 4, 5 s


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
def test_gap_serving_equals_a_plain_first_fit(pairs, gaps, busy):
    arrivals = sorted(a for a, _ in pairs)
    service = [s for _, s in pairs]
    starts, ends, t = [], [], 0
    for space, length in gaps:  # disjoint busy intervals with gaps between them
        t += space
        starts.append(t)
        t += length
        ends.append(t)
    got, previous, cursor = [], busy, 0
    for a, s in zip(arrivals, service, strict=True):  # each copy ready at its arrival or the last departure
        begin, cursor = gap(max(a, previous), s, np.array(starts, np.int64), np.array(ends, np.int64), cursor)
        previous = begin + s
        got.append(previous)
    assert got == _plain_gaps(arrivals, service, busy, list(zip(starts, ends, strict=True)))
    for d, s in zip(got, service, strict=True):  # never overlaps the link's earlier service
        assert not any(lo < d and d - s < hi for lo, hi in zip(starts, ends, strict=True))


def test_bin_width_is_round_and_about_a_hundredth():
    assert bin_width(60) == 1.0
    assert bin_width(10) == 0.1
    assert bin_width(120) == 2.0
    assert bin_width(300) == 5.0
    assert bin_width(1000) == 10.0


def test_meter_timeline_and_access_split():
    meter = TrafficMeter([("A", "B"), ("B", "A")], {"Q": ("x",)}, 1.0)
    directions = [("A", "B"), ("P", "A")]
    # runs: (A, B) departures 0.5 and 0.7 of 10 and 20 bytes; (P, A) two of 5 bytes; (A, B) one of 30 at 2.1
    link, first, count = np.array([0, 1, 0]), np.array([0, 2, 4]), np.array([2, 2, 1])
    wire, first_wire = np.array([10, 20, 5, 5, 30]), np.array([0, 2, 4])
    departures = to_ticks(np.array([0.5, 0.7, 0.1, 0.2, 2.1]))  # the meter takes ticks
    meter.cross_runs(directions, link, first, count, first_wire, wire, departures)
    run = meter.result("s", "local")
    assert run.link_bytes == {("A", "B"): 60, ("B", "A"): 0}
    assert run.link_tuples == {("A", "B"): 3, ("B", "A"): 0}
    assert run.access_bytes == 10 and run.access_link_bytes == {("P", "A"): 10}
    assert run.timeline[("A", "B")].tolist() == [30, 0, 30]
    assert run.timeline[("B", "A")].tolist() == [0, 0, 0]
    assert run.delivered["Q"].dtype == np.int64 and len(run.delivered["Q"]) == 0
    assert run.delivered_attrs == {"Q": ("x",)}


def _one_channel(emitted: list[float]) -> Blocks:
    n = len(emitted)
    first, count = np.array([0 if n else -1]), np.array([n], np.int64)
    return Blocks(np.arange(n), np.array(emitted, float), np.full(n, -1), np.full(n, 10, np.int64), first, count)


def test_a_full_buffer_drops_at_the_tail_by_hand():
    # 80 bit/s: a 10-byte tuple takes 1 s on the wire; latency 0.5 s; the buffer holds 20 bytes, the
    # arriving tuple included, so a tuple finding one other tuple waiting is admitted and one finding two
    # is dropped (a tuple on the wire no longer waits)
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0, super_peers=["B"])
    queues = Queues({("A", "B"): (80.0, 0.5, 20.0)}, [Route((("A", "B"),), -1, 0, "Q")], meter, smallest=10)
    # window 1: 0.0 starts at once (leaves 1); 0.1 waits for 1 (leaves 2); 0.2 finds 0.1 waiting, 10 + 10
    # bytes fit (leaves 3); 0.3 finds two waiting: dropped
    queues.serve(_one_channel([0.0, 0.1, 0.2, 0.3]))
    state = queues.state()
    assert to_seconds(state.waiting(0)[0]).tolist() == [1.0, 2.0]  # not yet on the wire: the tuples starting at 1 and 2
    # window 2: 1.5 finds only the tuple starting at 2 waiting (leaves 4); 1.6 finds two: dropped; 4.5 finds
    # none waiting and the link free (leaves 5.5)
    second = _one_channel([1.5, 1.6, 4.5])
    second = Blocks(second.indices + 4, *[getattr(second, f) for f in ("emitted", "parents", "wire", "first", "count")])
    queues.serve(second)
    run = meter.result("s", "local")
    assert run.delivered["Q"].tolist() == [0, 1, 2, 4, 6]
    arrivals = [1.5, 2.5, 3.5, 4.5, 6.0]
    assert np.allclose(run.latencies["Q"] + [0.0, 0.1, 0.2, 1.5, 4.5], arrivals)
    assert run.dropped["Q"].tolist() == [3, 5]
    assert run.link_dropped == {("A", "B"): 2}
    assert run.link_tuples[("A", "B")] == 5 and run.link_bytes[("A", "B")] == 50
    assert run.offered[("A", "B")].tolist() == [40, 20, 0, 0, 10]  # what reached the queue, drops included
    assert run.timeline[("A", "B")].tolist() == [0, 10, 10, 10, 10, 10]  # departures 1, 2, 3, 4, 5.5
    assert run.landed["B"].tolist() == [0, 1, 1, 1, 1, 0, 1]  # arrivals at B

    # the same second window from the state the first left, in queues of their own: the same run
    again = TrafficMeter([("A", "B")], {"Q": ()}, 1.0, super_peers=["B"])
    fresh = Queues({("A", "B"): (80.0, 0.5, 20.0)}, [Route((("A", "B"),), -1, 0, "Q")], again, smallest=10)
    fresh.restart(again, state)
    fresh.serve(second)
    rest = again.result("s", "local")
    assert rest.delivered["Q"].tolist() == [4, 6] and rest.dropped["Q"].tolist() == [5]


def test_a_full_ring_grows_and_keeps_its_waiting_tuples_in_order():
    # a 1000-byte buffer holds up to 100 tuples of 10 bytes, more than the ring's first 64 places
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0)
    queues = Queues({("A", "B"): (80.0, 0.0, 1000.0)}, [Route((("A", "B"),), -1, 0, "Q")], meter, smallest=10)
    queues.serve(_one_channel([k / 1000 for k in range(150)]))
    run = meter.result("s", "local")
    # the first starts at once; 100 more fit the buffer behind it; the rest find it full
    assert len(run.delivered["Q"]) == 101 and run.dropped["Q"].tolist() == list(range(101, 150))
    starts, sizes = queues.state().waiting(0)
    assert len(starts) == 100 and np.all(np.diff(starts) == TICKS) and sizes.sum() == 1000


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 120),
    st.sampled_from([0.001, 0.1, 0.37, 1.0, 2.5, 5.0, 40_000.0]),
    st.sampled_from([0.0, 1e-12, 0.0125, 0.3, 7.0]),
)
def test_a_bin_ends_at_the_first_tick_whose_time_in_seconds_falls_past_it(b, bin_s, offset):
    """The meter compares ticks with a bin's end instead of dividing each: that end is exactly the first
    tick the division from seconds puts past the bin (the tick before it is still in it or before)."""
    end = _bin_end(b, offset, bin_s, MAX_TIMELINE_BINS)
    if end == NEVER:  # no tick a copy may have (below 2**62, past network.linkrule.LATE) is past the bin
        assert _tick_bin(2**62 - 1, offset, bin_s, MAX_TIMELINE_BINS) <= b
        return
    assert _tick_bin(end, offset, bin_s, MAX_TIMELINE_BINS) > b
    assert end == 0 or _tick_bin(end - 1, offset, bin_s, MAX_TIMELINE_BINS) <= b


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.sets(st.integers(0, n - 1), max_size=n),
            st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
            st.lists(st.integers(0, 50), min_size=n, max_size=n),
        )
    )
)
def test_a_links_lead_is_the_shortest_way_from_where_tuples_enter(graph):
    import networkx as nx

    n, entered, edges, latency = graph
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from((a, b, latency[a]) for a, b in edges)
    shortest = nx.multi_source_dijkstra_path_length(g, entered) if entered else {}
    want = [shortest.get(k, 0) for k in range(n)]
    assert _ahead(n, entered, edges, np.array(latency, np.int64)).tolist() == want


def test_a_link_past_a_latency_serves_what_reaches_it_before_the_window_end_plus_that_latency():
    # A -> B (0.5 s latency) then B -> C; 160 bit/s: a 10-byte tuple takes 0.5 s on each
    hops = (("A", "B"), ("B", "C"))
    links = {("A", "B"): (160.0, 0.5), ("B", "C"): (160.0, 0.0)}

    def run(windows):
        meter = TrafficMeter(list(hops), {"Q": ()}, 1.0)
        queues = Queues(links, [Route(hops, -1, 0, "Q")], meter)
        held = []
        first = 0
        for end, emitted in windows:
            reserve = queues.reserve()
            k = 0 if reserve is None else int(reserve[0])  # places for the copies held back, put there
            times = [0.0] * k + emitted
            indices = [0] * k + list(range(first, first + len(emitted)))
            first += len(emitted)
            blocks = Blocks(
                np.array(indices), np.array(times), np.full(len(times), -1), np.full(len(times), 10),
                np.array([0]), np.array([len(times)]),
            )  # fmt: skip
            horizon = NEVER if end is None else int(to_ticks(end))
            queues.serve(blocks, horizon, reserved=reserve is not None)
            held.append(0 if queues.pending is None else len(queues.pending.blocks.indices))
        return meter.result("s", "local"), held

    # emitted at 0 and 0.4: they reach B -> C at 1.0 and 1.5, the first before the window's end (1.0) plus
    # B -> C's lead (0.5 s), so only the second waits for the next window (with the window's end as the
    # horizon, both would)
    split, held = run([(1.0, [0.0, 0.4]), (None, [1.2])])
    whole, _ = run([(None, [0.0, 0.4, 1.2])])
    assert held == [1, 0]
    assert split.delivered["Q"].tolist() == whole.delivered["Q"].tolist()
    assert split.latencies["Q"].tolist() == whole.latencies["Q"].tolist()
