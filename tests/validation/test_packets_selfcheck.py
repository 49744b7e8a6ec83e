"""ns-3 (tests/validation/packets.py) against the packet reference (tests/packet_reference.py): exact equality of
every fate and every picosecond, on small hand-made cases and on small drawn ones."""

from __future__ import annotations

import random

import pytest

from tests.packet_reference import Fates, play_reference
from tests.test_packet_reference import (
    FAILING,
    FAILING_EMITTED,
    FAILING_FATES,
    FAILING_WIRE,
    FAST,
    MERGE_CHANNELS,
    MERGE_EMITTED,
    MERGE_FATES,
    MERGE_NETWORK,
    TREE_CHANNELS,
    TREE_EMITTED,
    TREE_FATES,
    TREE_NETWORK,
    link,
    root,
)
from tests.validation.packets import load_ns, play_ns3

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def ns():
    """The ns-3 bindings, loaded when a test here runs (not when the module is collected: loading takes
    seconds, and the default suite deselects these tests)."""
    try:
        if load_ns() is None:
            pytest.skip("the ns3 package is not installed")
    except ImportError as error:
        pytest.skip(str(error))
    return pytest.importorskip("ns")


def both(network, channels, emitted) -> Fates:
    """ns-3's fates, after checking they are the reference's."""
    fates = play_ns3(network, channels, emitted)
    assert fates == play_reference(network, channels, emitted)
    return fates


def test_one_link():
    network = {("A", "B"): link(bandwidth=10**9, latency=1000)}
    fates = both(network, [root([("A", "B")], {("x", 0): 100, ("x", 1): 100})], {("x", 0): 0, ("x", 1): 0})
    # 100 bytes at 1 Gbit/s: 800000 ps on the wire, 1000 ps of latency
    assert fates == Fates({0: {("x", 0): ("delivered", 801_000), ("x", 1): ("delivered", 1_601_000)}}, {}, {})


def test_a_chain_of_three_links_with_a_buffer():
    network = {("A", "B"): link(), ("B", "C"): link(bandwidth=FAST // 2, buffer=100), ("C", "D"): link()}
    wire = dict.fromkeys(range(4), 100)
    fates = both(network, [root([("A", "B"), ("B", "C"), ("C", "D")], wire)], dict.fromkeys(wire, 0))
    # at B: 101000, 201000, 301000, 401000; B->C takes 200000 ps a copy: 0 on it 101000..301000, 1 waits
    # and starts at 301000, when 2 arrives (so 2 finds the queue empty and waits), 3 finds 2 waiting
    assert fates == Fates(
        {
            0: {
                0: ("delivered", 403_000),
                1: ("delivered", 603_000),
                2: ("delivered", 803_000),
                3: ("dropped", ("B", "C")),
            }
        },
        {("B", "C"): 1},
        {},
    )


def test_two_sources_merging_on_a_shared_link_in_channel_order():
    assert both(MERGE_NETWORK, MERGE_CHANNELS, MERGE_EMITTED) == MERGE_FATES


def test_ns3s_own_order_is_the_order_events_were_scheduled():
    # the copies of channels 0 and 1 reach C at the same picosecond; ns-3 schedules each arrival when its
    # transmission starts, channel 1's (at 0) before channel 0's (at 50000), and runs them in that order
    native = play_ns3(MERGE_NETWORK, MERGE_CHANNELS, MERGE_EMITTED, settle_ties=False)
    assert native.deliveries[0] == {"b": ("dropped", ("C", "D"))}
    assert native.deliveries[1] == {"a": ("delivered", 301_000)}


def test_a_copy_starting_at_an_arrival_frees_its_place_in_ns3_too():
    network = {("A", "B"): link(buffer=100)}
    wire = dict.fromkeys(range(4), 100)
    emitted = {0: 0, 1: 0, 2: 99_999, 3: 100_000}
    fates = both(network, [root([("A", "B")], wire)], emitted)
    assert fates.deliveries[0][3] == ("delivered", 301_000)
    # natively, 3's emission (scheduled before the run) comes before the end of 0's transmission
    # (scheduled at 0), so 3 still finds 1 in the queue
    native = play_ns3(network, [root([("A", "B")], wire)], emitted, settle_ties=False)
    assert native.deliveries[0][3] == ("dropped", ("A", "B"))


def test_a_tree_with_taps():
    assert both(TREE_NETWORK, TREE_CHANNELS, TREE_EMITTED) == TREE_FATES


def test_an_overloaded_link_with_a_small_buffer_exactly_filling():
    network = {("A", "B"): link(), ("B", "C"): link(bandwidth=10**9, buffer=300)}
    wire = dict.fromkeys(range(12), 100)
    fates = both(network, [root([("A", "B"), ("B", "C")], wire)], dict.fromkeys(wire, 0))
    # at B every 100000 ps from 101000; B->C takes 800000 ps a copy and holds 3 waiting copies
    got = fates.deliveries[0]
    assert [k for k, fate in got.items() if fate[0] == "dropped"] == [4, 5, 6, 7, 9, 10, 11]
    assert [got[k][1] for k in (0, 1, 2, 3, 8)] == [902_000, 1_702_000, 2_502_000, 3_302_000, 4_102_000]


def test_a_failure():
    assert both(FAILING, [root([("A", "B")], FAILING_WIRE)], FAILING_EMITTED) == FAILING_FATES


@pytest.mark.parametrize("latency", [149_999, 150_000, 151_000])
def test_a_failure_while_propagating(latency):
    network = {("A", "B"): link(latency=latency, down=[(250_000, None)])}
    both(network, [root([("A", "B")], {0: 100, 1: 100})], {0: 0, 1: 250_000})


def test_failures_on_a_chain_with_children_and_recoveries():
    network = {
        ("A", "B"): link(buffer=300),
        ("B", "C"): link(bandwidth=FAST // 4, down=[(150_000, 160_000), (700_000, 1_300_000), (2_000_000, None)]),
        ("C", "D"): link(latency=0),
        ("B", "E"): link(),
    }
    wire = dict.fromkeys(range(30), 40)
    channels = [
        root([("A", "B"), ("B", "C")], wire, sink="c"),
        {"hops": [("C", "D")], "parent": 0, "tap": 2, "sink": "d", "wire": dict.fromkeys(range(0, 30, 2), 20)},
        {"hops": [("B", "E")], "parent": 0, "tap": 1, "sink": None, "wire": dict.fromkeys(range(1, 30, 3), 40)},
        {"hops": [], "parent": 2, "tap": 1, "sink": "e", "wire": dict.fromkeys(range(1, 30, 3), 40)},
    ]
    emitted = {k: 50_000 * (k // 3) for k in wire}
    fates = both(network, channels, emitted)
    assert fates.lost and fates.dropped  # the case exercises both


def test_both_directions_of_a_pair_with_their_own_rates_and_latencies():
    network = {
        ("A", "B"): link(bandwidth=FAST, latency=5000),
        ("B", "A"): link(bandwidth=FAST // 8, latency=5000, buffer=100),
        ("B", "C"): link(latency=1000),
        ("C", "B"): link(latency=7000),  # another latency: one link per direction
    }
    channels = [
        root([("A", "B"), ("B", "C")], {("ab", i): 50 for i in range(5)}),
        root([("C", "B"), ("B", "A")], {("ba", i): 60 for i in range(5)}),
    ]
    emitted = {(s, i): 10_000 * i for s in ("ab", "ba") for i in range(5)}
    fates = both(network, channels, emitted)
    assert fates.deliveries[0][("ab", 0)] == ("delivered", 50_000 + 5000 + 50_000 + 1000)
    assert fates.deliveries[1][("ba", 0)] == ("delivered", 60_000 + 7000 + 480_000 + 5000)


def test_sizes_ns3_cannot_serialise_exactly_are_refused():
    # 3 bytes at 128 Gbit/s: 187.5 ps; ns-3's fixed-point quotient falls just short of the half
    network = {("A", "B"): link(bandwidth=128 * 10**9)}
    with pytest.raises(ValueError, match="187 ps, the model in 188 ps"):
        play_ns3(network, [root([("A", "B")], {0: 3})], {0: 0})


def drawn_case(seed: int):
    """A small random network, with emissions on a coarse grid so that many copies tie."""
    rng = random.Random(seed)
    nodes = [f"N{i}" for i in range(rng.randint(2, 5))]
    network = {}
    for a in nodes:
        for b in nodes:
            if a != b and rng.random() < 0.6:
                down, t = [], 0
                while rng.random() < 0.3:
                    fail = t + rng.randint(1, 8) * 100_000
                    recover = None if rng.random() < 0.2 else fail + rng.choice([0, 1, 50_000, 300_000])
                    down.append((fail, recover))
                    if recover is None:
                        break
                    t = recover
                network[(a, b)] = link(
                    bandwidth=rng.choice([FAST, FAST // 2, 2 * FAST, 10**9, 3 * 10**9]),
                    latency=rng.choice([0, 1000, 50_000, 100_000]),
                    buffer=rng.choice([None, 100, 200, 250, 400]),
                    down=down,
                )
    out = {}
    for a, b in network:
        out.setdefault(a, []).append(b)

    def walk(start, length):
        hops, here = [], start
        for _ in range(length):
            if here not in out:
                break
            there = rng.choice(out[here])
            hops.append((here, there))
            here = there
        return hops

    channels, emitted = [], {}
    for c in range(rng.randint(1, 8)):
        parent = rng.randrange(-1, c) if c else -1
        if parent == -1:
            keys = [(c, i) for i in range(rng.randint(1, 6))]
            for key in keys:
                emitted[key] = rng.randint(0, 6) * 100_000
            hops = walk(rng.choice(nodes), rng.randint(0, 3))
            tap = 0
        else:
            up = channels[parent]
            keys = [k for k in up["wire"] if rng.random() < 0.7]
            tap = rng.randint(0, len(up["hops"]))
            start = up["hops"][tap - 1][1] if tap else (up["hops"][0][0] if up["hops"] else None)
            hops = walk(start, rng.randint(0, 3)) if start else []
        channels.append(
            {
                "hops": hops,
                "parent": parent,
                "tap": tap,
                "sink": rng.choice([None, "s"]),
                "wire": {k: rng.choice([2, 40, 100, 150]) for k in keys},
            }
        )
    return network, channels, emitted


@pytest.mark.parametrize("seed", range(40))
def test_drawn_cases(seed):
    both(*drawn_case(seed))
