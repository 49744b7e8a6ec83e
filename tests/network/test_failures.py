"""Tuples in flight at a failure (docs/DYNAMICS.md): the compiled queue pass by hand, and against a plain
per-tuple reference of the rule over random trees of channels, with and without buffers."""

from __future__ import annotations

import heapq
from itertools import pairwise

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from network.meter import TrafficMeter
from network.queues import Blocks, Queues, Route


def _one_channel(emitted: list[float], first_index: int = 0) -> Blocks:
    n = len(emitted)
    return Blocks(
        np.arange(first_index, first_index + n),
        np.array(emitted, float),
        np.full(n, -1),
        np.full(n, 10, np.int64),
        np.array([0 if n else -1]),
        np.array([n], np.int64),
    )


def test_a_failure_loses_what_is_on_the_wire_and_queued_and_empties_the_queue_by_hand():
    # 80 bit/s: a 10-byte tuple takes 1 s on the wire; latency 0.5 s; A -> B is down over [1.7, 3)
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0, super_peers=["B"])
    route = [Route((("A", "B"),), -1, 0, "Q")]
    queues = Queues({("A", "B"): (80.0, 0.5)}, route, meter, down={("A", "B"): [(1.7, 3.0)]})
    # 0.0 is on the wire 0-1 and reaches B at 1.5: delivered; 0.5 is on the wire 1-2 at the failure: lost;
    # 1.0 waits behind it at the failure: lost; 2.0 arrives while the link is down: lost, the wire untouched
    queues.serve(_one_channel([0.0, 0.5, 1.0, 2.0]))
    assert queues.state().busy.tolist() == [1_700_000_000_000]  # ticks: free again from the failure
    # after the recovery the queue is empty: 3.0 starts at once (reaches B at 4.5), 3.5 waits for it (5.5)
    queues.serve(_one_channel([3.0, 3.5], first_index=4))
    run = meter.result("s", "local")
    assert run.delivered["Q"].tolist() == [0, 4, 5]
    assert (run.latencies["Q"] + [0.0, 3.0, 3.5]).tolist() == [1.5, 4.5, 5.5]
    assert run.lost["Q"].tolist() == [1, 2, 3] and run.dropped["Q"].tolist() == []
    assert run.link_lost == {("A", "B"): 3} and run.link_dropped == {("A", "B"): 0}
    # only what reached B crossed the link; what reached its queue is offered, lost or not
    assert run.link_tuples[("A", "B")] == 3 and run.link_bytes[("A", "B")] == 30
    assert run.offered[("A", "B")].tolist() == [20, 10, 10, 20]
    assert run.timeline[("A", "B")].tolist() == [0, 10, 0, 0, 10, 10]
    assert run.landed["B"].tolist() == [0, 1, 0, 0, 1, 1]


def test_a_tuple_reaching_the_far_end_after_the_failure_is_lost_and_frees_the_wire_when_it_left():
    # latency 1 s: 0.0 leaves A at 1 and would reach B at 2, after the failure at 1.5: lost on the way;
    # the wire was free from 1, so 0.8 starts then, and is lost too (on the wire at 1.5)
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0)
    queues = Queues(
        {("A", "B"): (80.0, 1.0)}, [Route((("A", "B"),), -1, 0, "Q")], meter, down={("A", "B"): [(1.5, 1.6)]}
    )
    queues.serve(_one_channel([0.0, 0.8, 1.6, 1.7]))
    run = meter.result("s", "local")
    assert run.lost["Q"].tolist() == [0, 1]
    # 1.6 finds the link up and free since the failure: leaves at 2.6, reaches B at 3.6; 1.7 waits for it
    assert run.delivered["Q"].tolist() == [2, 3]
    assert (run.latencies["Q"] + [1.6, 1.7]).tolist() == [3.6, 4.6]


def test_a_failure_empties_the_buffer_too_by_hand():
    # a 10-byte buffer holds one waiting tuple; A -> B is down over [0.5, 1)
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0)
    route = [Route((("A", "B"),), -1, 0, "Q")]
    queues = Queues({("A", "B"): (80.0, 0.5, 10.0)}, route, meter, smallest=10, down={("A", "B"): [(0.5, 1.0)]})
    # 0.0 is on the wire at the failure and 0.1 waits: both lost; 0.2 found 0.1 waiting: dropped (before the
    # failure); 0.6 arrives while down: lost.  After the recovery the buffer is empty: 1.0 starts at once,
    # 1.1 waits (the buffer is not full: 1.0 is on the wire), 1.2 finds 1.1 waiting: dropped
    queues.serve(_one_channel([0.0, 0.1, 0.2, 0.6, 1.0, 1.1, 1.2]))
    run = meter.result("s", "local")
    assert run.lost["Q"].tolist() == [0, 1, 3] and run.dropped["Q"].tolist() == [2, 6]
    assert run.delivered["Q"].tolist() == [4, 5]
    assert (run.latencies["Q"] + [1.0, 1.1]).tolist() == [2.5, 3.5]
    assert run.link_lost == {("A", "B"): 3} and run.link_dropped == {("A", "B"): 2}


def test_a_lost_tuple_goes_no_further_and_its_copies_are_lost_for_their_subscriptions():
    # A -> B -> C with a delivery at C (channel 1, read at C) and one at B (channel 2, read at B); B -> C is
    # down over [1.2, 2): the tuple emitted at 0 reaches B at 1, then C at 2 (lost); the one emitted at 3
    # passes; both reach B, so channel 2 delivers both
    links = {("A", "B"): (80.0, 0.0), ("B", "C"): (80.0, 0.0), ("C", "P"): (80.0, 0.0), ("B", "R"): (80.0, 0.0)}
    routes = [
        Route((("A", "B"), ("B", "C")), -1, 0),
        Route((("C", "P"),), 0, 2, "QC"),
        Route((("B", "R"),), 0, 1, "QB"),
    ]
    meter = TrafficMeter([("A", "B"), ("B", "C")], {"QC": (), "QB": ()}, 1.0)
    queues = Queues(links, routes, meter, down={("B", "C"): [(1.2, 2.0)]})
    wire = np.full(6, 10, np.int64)
    first, count = np.array([0, 2, 4]), np.array([2, 2, 2])
    blocks = Blocks(
        np.array([0, 1, 0, 1, 0, 1]), np.array([0.0, 3.0] * 3), np.array([-1, -1, 0, 1, 0, 1]), wire, first, count
    )
    queues.serve(blocks)
    run = meter.result("s", "local")
    assert run.lost["QC"].tolist() == [0] and run.lost["QB"].tolist() == []
    assert run.delivered["QC"].tolist() == [1] and run.delivered["QB"].tolist() == [0, 1]
    assert run.link_lost == {("A", "B"): 0, ("B", "C"): 1}
    assert run.link_tuples == {("A", "B"): 2, ("B", "C"): 1}


def test_without_down_intervals_nothing_is_lost():
    meter = TrafficMeter([("A", "B")], {"Q": ()}, 1.0)
    queues = Queues({("A", "B"): (80.0, 0.5)}, [Route((("A", "B"),), -1, 0, "Q")], meter, down={})
    queues.serve(_one_channel([0.0, 0.5, 1.0]))
    run = meter.result("s", "local")
    assert run.delivered["Q"].tolist() == [0, 1, 2] and run.lost["Q"].tolist() == []
    assert run.link_lost == {("A", "B"): 0}


# -- a plain per-tuple reference -------------------------------------------------------------------------

BANDWIDTH = 80.0  # bit/s: 10 bytes take 1 s, so every time below is a multiple of 1/4 s and exact


def _reference(links, routes, emitted, members, wire, down):
    """Every tuple one at a time in order of arrival (ties by channel, then index), per link direction a
    FIFO: the rule of docs/DYNAMICS.md written out plainly.  ``members[c]`` lists the tuples channel ``c``
    carries (an upload's among ``emitted``, another's among its parent's).  Returns per sink its delivered
    (index, arrival), lost and dropped indices, and per direction the tuples lost, dropped and crossed."""
    free = dict.fromkeys(links, 0.0)
    waiting: dict = {d: [] for d in links}  # (start, bytes) of the admitted tuples
    lost_at = dict.fromkeys(links, 0)
    dropped_at = dict.fromkeys(links, 0)
    crossed = dict.fromkeys(links, 0)
    result = {r.sink: {"delivered": [], "lost": [], "dropped": []} for r in routes if r.sink}
    heap = [(emitted[i], c, i, 0) for c, r in enumerate(routes) if r.parent < 0 for i in members[c]]
    heapq.heapify(heap)

    def fate(channel, index, hop, how):
        """The tuple goes no further: its copies downstream share ``how``."""
        route = routes[channel]
        if route.sink is not None:
            result[route.sink][how].append(index)
        for c, child in enumerate(routes):
            if child.parent == channel and child.tap >= hop + 1 and index in members[c]:
                fate(c, index, 0, how)

    while heap:
        a, channel, index, hop = heapq.heappop(heap)
        route = routes[channel]
        d_ = route.hops[hop]
        bandwidth, latency, buffer = links[d_]
        w = wire[channel]
        spans = down.get(d_, [])
        if any(f <= a < r for f, r in spans):
            lost_at[d_] += 1
            fate(channel, index, hop, "lost")
            continue
        if sum(b for s, b in waiting[d_] if s > a) + w > buffer:
            dropped_at[d_] += 1
            fate(channel, index, hop, "dropped")
            continue
        begin = max(a, free[d_])
        done = begin + w * 8.0 / bandwidth
        catching = [f for f, r in spans if f <= done + latency and r > a]
        if catching:
            f = min(catching)
            waiting[d_].append((min(begin, f), w))
            free[d_] = max(free[d_], min(done, f))
            lost_at[d_] += 1
            fate(channel, index, hop, "lost")
            continue
        waiting[d_].append((begin, w))
        free[d_] = done
        crossed[d_] += 1
        there = done + latency
        if route.sink is not None:
            result[route.sink]["delivered"].append((index, there))
        if hop + 1 < len(route.hops):
            heapq.heappush(heap, (there, channel, index, hop + 1))
        for c, child in enumerate(routes):
            if child.parent == channel and child.tap == hop + 1 and index in members[c]:
                heapq.heappush(heap, (there, c, index, 0))
    return result, lost_at, dropped_at, crossed


@st.composite
def _cases(draw):
    """A tree of channels over nodes 0..4 whose routes only climb (so the links' dependencies are acyclic),
    the tuples each carries, wire sizes, buffers and down intervals, all on a grid of 1/4 s."""
    nodes = 5

    def climb(start):
        length = draw(st.integers(1, nodes - 1 - start))
        path = [start, *sorted(draw(st.sets(st.integers(start + 1, nodes - 1), min_size=length, max_size=length)))]
        return tuple((f"N{a}", f"N{b}") for a, b in pairwise(path))

    routes = [Route(climb(0), -1, 0)]
    count = draw(st.integers(1, 14))
    emitted = sorted(draw(st.lists(st.integers(0, 40), min_size=count, max_size=count)))
    members = [list(range(count))]
    for _ in range(draw(st.integers(0, 4))):
        parent = draw(st.sampled_from([c for c, r in enumerate(routes) if r.sink is None]))
        tap = draw(st.integers(1, len(routes[parent].hops)))
        at = int(routes[parent].hops[tap - 1][1][1:])
        sink = f"Q{len(routes)}"
        if at < nodes - 1 and draw(st.booleans()):
            routes.append(Route(climb(at), parent, tap))
        else:  # a delivery: one access hop to a thin-peer
            routes.append(Route(((f"N{at}", f"P{len(routes)}"),), parent, tap, sink))
        members.append([i for i in members[parent] if draw(st.booleans())])
    wire = [10 * draw(st.integers(1, 3)) for _ in routes]
    directions = sorted({d for r in routes for d in r.hops})
    links, down = {}, {}
    for d in directions:
        backbone = d[1].startswith("N")  # an access link has no buffer
        buffer = float(10 * draw(st.integers(1, 4))) if backbone and draw(st.booleans()) else np.inf
        links[d] = (BANDWIDTH, draw(st.integers(0, 4)) / 4, buffer)
        cuts = sorted(draw(st.sets(st.integers(0, 80), max_size=4)))
        spans = [(cuts[k] / 4, cuts[k + 1] / 4) for k in range(0, len(cuts) - 1, 2)]
        if len(cuts) % 2:
            spans.append((cuts[-1] / 4, np.inf))
        if spans:
            down[d] = spans
    return links, routes, [e / 4 for e in emitted], members, wire, down


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_the_queue_pass_loses_what_the_plain_rule_loses(case):
    _serve_and_compare(*case)


def _serve_and_compare(links, routes, emitted, members, wire, down):
    """Serve every channel's tuples in one window and compare with :func:`_reference`."""
    sinks = {r.sink: () for r in routes if r.sink}
    backbone = [d for d in links if not d[1].startswith("P")]
    meter = TrafficMeter(backbone, sinks, 1.0)
    queues = Queues(links, routes, meter, smallest=10, down=down)
    indices, times, parents, sizes, first, count = [], [], [], [], [], []
    for c, route in enumerate(routes):
        first.append(len(indices) if members[c] else -1)
        count.append(len(members[c]))
        above = members[route.parent] if route.parent >= 0 else None
        for i in members[c]:
            indices.append(i)
            times.append(emitted[i])
            parents.append(above.index(i) if above is not None else -1)
            sizes.append(wire[c])
    blocks = Blocks(
        np.array(indices, np.int64),
        np.array(times),
        np.array(parents, np.int64),
        np.array(sizes, np.int64),
        np.array(first, np.int64),
        np.array(count, np.int64),
    )
    queues.serve(blocks)
    run = meter.result("s", "local")
    want, lost_at, dropped_at, crossed = _reference(links, routes, emitted, members, wire, down)
    for sink, fates in want.items():
        delivered = sorted(fates["delivered"])
        assert run.delivered[sink].tolist() == [i for i, _ in delivered]
        arrived = run.latencies[sink] + np.array([emitted[i] for i, _ in delivered])
        assert arrived.tolist() == [t for _, t in delivered]
        assert run.lost[sink].tolist() == sorted(fates["lost"])
        assert run.dropped[sink].tolist() == sorted(fates["dropped"])
    assert run.link_lost == {d: lost_at[d] for d in sorted(backbone)}
    assert run.link_dropped == {d: dropped_at[d] for d in sorted(backbone)}
    assert run.link_tuples == {d: crossed[d] for d in sorted(backbone)}
    return run


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-1, 2), max_size=14),
    st.lists(st.lists(st.integers(0, 280), max_size=4, unique=True), min_size=6, max_size=6),
)
def test_later_rounds_lose_what_the_plain_rule_loses(slots, cuts_per_link):
    # a ring of six, three channels each three hops around it (the link dependencies close a cycle, so
    # some hops are served in a later round); one tuple every 5 s at most, so none ever waits for another
    # and the rounds give the per-tuple times exactly
    ring = [f"N{i}" for i in range(6)]
    routes, members = [], []
    for k in range(3):
        start = 2 * k
        hops = tuple((ring[(start + h) % 6], ring[(start + h + 1) % 6]) for h in range(3))
        routes.append(Route(hops, -1, 0))
        members.append([i for i, owner in enumerate(slots) if owner == k])
    for k in range(3):
        routes.append(Route(((routes[k].hops[-1][1], f"P{k}"),), k, 3, f"Q{k}"))
        members.append(list(members[k]))
    links, down = {}, {}
    for i, cuts in enumerate(cuts_per_link):
        links[(ring[i], ring[(i + 1) % 6])] = (BANDWIDTH, 0.25, np.inf)
        cuts = sorted(cuts)
        spans = [(cuts[j] / 4, cuts[j + 1] / 4) for j in range(0, len(cuts) - 1, 2)]
        if spans:
            down[(ring[i], ring[(i + 1) % 6])] = spans
    for k in range(3):
        links[(routes[k].hops[-1][1], f"P{k}")] = (BANDWIDTH, 0.0, np.inf)
    emitted = [5.0 * i for i in range(len(slots))]
    run = _serve_and_compare(links, routes, emitted, members, [10] * 6, down)
    assert sum(len(v) for v in run.delivered.values()) + sum(len(v) for v in run.lost.values()) == sum(
        1 for owner in slots if owner >= 0
    )
