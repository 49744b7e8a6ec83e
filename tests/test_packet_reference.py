"""Hand-computed exact picoseconds for the packet reference (tests/packet_reference.py).

Most links run at 8 Gbit/s, where a byte holds the wire for exactly 1000 ps (100 bytes: 100000 ps).
"""

from __future__ import annotations

import pytest

from tests.packet_reference import Fates, play_reference, service_ps

FAST = 8 * 10**9  # bit/s: 1000 ps a byte


def link(bandwidth=FAST, latency=1000, buffer=None, down=()):
    return {"bandwidth": bandwidth, "latency": latency, "buffer": buffer, "down": list(down)}


def root(hops, wire, sink="s"):
    return {"hops": hops, "parent": -1, "tap": 0, "sink": sink, "wire": wire}


def test_service_time_is_rounded_to_the_nearest_picosecond_halves_up():
    assert service_ps(100, 10**9) == 800_000
    assert service_ps(100, FAST) == 100_000
    assert service_ps(1, 3) == 2_666_666_666_667  # 2666666666666.67
    assert service_ps(2, 3) == 5_333_333_333_333  # 5333333333333.33
    assert service_ps(1, 128 * 10**9) == 63  # 62.5
    assert service_ps(3, 65_536) == 366_210_938  # 366210937.5


def test_one_link_serves_copies_first_in_first_out_in_wire_order():
    network = {("A", "B"): link()}
    # both emitted at 0: the key placed first in the wire goes first, whatever the keys' own order
    wire = {("s", 1): 50, ("s", 0): 100}
    fates = play_reference(network, [root([("A", "B")], wire)], {("s", 0): 0, ("s", 1): 0})
    assert fates == Fates({0: {("s", 1): ("delivered", 51_000), ("s", 0): ("delivered", 151_000)}}, {}, {})


def test_a_chain_stores_and_forwards():
    network = {("A", "B"): link(), ("B", "C"): link(bandwidth=FAST // 2, latency=2000)}
    fates = play_reference(network, [root([("A", "B"), ("B", "C")], {"k": 100})], {"k": 7})
    # A->B: 7..100007, at B 101007; B->C: 2000 ps a byte, 101007..301007, at C 303007
    assert fates.deliveries == {0: {"k": ("delivered", 303_007)}}


def test_a_buffer_exactly_full_admits_and_one_byte_over_drops():
    network = {("A", "B"): link(buffer=200)}
    wire = {0: 100, 1: 100, 2: 100, 3: 1}
    fates = play_reference(network, [root([("A", "B")], wire)], dict.fromkeys(wire, 0))
    # 0 takes the wire; 1 and 2 wait with exactly 200 bytes; 3 would make 201
    assert fates.deliveries[0] == {
        0: ("delivered", 101_000),
        1: ("delivered", 201_000),
        2: ("delivered", 301_000),
        3: ("dropped", ("A", "B")),
    }
    assert fates.dropped == {("A", "B"): 1}
    assert fates.lost == {}


def test_a_copy_larger_than_the_buffer_is_dropped_even_on_an_idle_wire():
    fates = play_reference({("A", "B"): link(buffer=99)}, [root([("A", "B")], {0: 100})], {0: 0})
    assert fates.deliveries[0] == {0: ("dropped", ("A", "B"))}


def test_a_copy_starting_on_the_wire_at_an_arrival_no_longer_waits():
    network = {("A", "B"): link(buffer=100)}
    wire = {0: 100, 1: 100, 2: 100, 3: 100}
    emitted = {0: 0, 1: 0, 2: 99_999, 3: 100_000}
    fates = play_reference(network, [root([("A", "B")], wire)], emitted)
    # 1 waits until 100000: 2 finds it waiting, 3 finds it starting and takes its place in the queue
    assert fates.deliveries[0] == {
        0: ("delivered", 101_000),
        1: ("delivered", 201_000),
        2: ("dropped", ("A", "B")),
        3: ("delivered", 301_000),
    }


# channel 0 from B and channel 1 from A reach C at 151000 while z (channel 2) holds C->D until 200000;
# C->D has room for one waiting copy. Channel 1's copy left first (at 0; channel 0's at 50000).
MERGE_NETWORK = {
    ("A", "C"): link(latency=51_000),
    ("B", "C"): link(),
    ("C", "D"): link(buffer=100),
}
MERGE_CHANNELS = [
    root([("B", "C"), ("C", "D")], {"b": 100}, sink="d"),
    root([("A", "C"), ("C", "D")], {"a": 100}, sink="d"),
    root([("C", "D")], {"z": 100}, sink="d"),
]
MERGE_EMITTED = {"b": 50_000, "a": 0, "z": 100_000}
MERGE_FATES = Fates(
    {0: {"b": ("delivered", 301_000)}, 1: {"a": ("dropped", ("C", "D"))}, 2: {"z": ("delivered", 201_000)}},
    {("C", "D"): 1},
    {},
)


def test_simultaneous_arrivals_at_a_queue_go_in_channel_order():
    assert play_reference(MERGE_NETWORK, MERGE_CHANNELS, MERGE_EMITTED) == MERGE_FATES


FAILING = {("A", "B"): link(down=[(250_000, 400_000)])}
FAILING_WIRE = dict.fromkeys(range(7), 100)
FAILING_EMITTED = {0: 0, 1: 0, 2: 0, 3: 0, 4: 300_000, 5: 400_000, 6: 400_000}
FAILING_FATES = Fates(
    {
        0: {
            0: ("delivered", 101_000),
            1: ("delivered", 201_000),
            2: ("lost", ("A", "B")),  # on the wire at the failure
            3: ("lost", ("A", "B")),  # waiting at the failure
            4: ("lost", ("A", "B")),  # reaches the queue while the link is down
            5: ("delivered", 501_000),  # the failure freed the wire: starts at the recovery
            6: ("delivered", 601_000),
        }
    },
    {},
    {("A", "B"): 3},
)


def test_a_failure_loses_the_copies_on_the_wire_waiting_or_arriving_and_frees_the_wire():
    assert play_reference(FAILING, [root([("A", "B")], FAILING_WIRE)], FAILING_EMITTED) == FAILING_FATES


@pytest.mark.parametrize(
    ("latency", "fate"),
    [(149_999, ("delivered", 249_999)), (150_000, ("lost", ("A", "B"))), (151_000, ("lost", ("A", "B")))],
)
def test_a_failure_loses_a_copy_propagating_until_it_arrives(latency, fate):
    # the copy leaves the wire at 100000; the failure at 250000 never recovers
    network = {("A", "B"): link(latency=latency, down=[(250_000, None)])}
    fates = play_reference(network, [root([("A", "B")], {0: 100, 1: 100})], {0: 0, 1: 250_000})
    assert fates.deliveries[0] == {0: fate, 1: ("lost", ("A", "B"))}


# channel 0 (no sink) A->B->C carries k0 (40 bytes) and k1 (100); B->C has room for 50 bytes, so k1 is
# dropped there. Children: 1 taps at B, 2 at C (no hops), 3 at A at the start, 4 taps 2 at C.
TREE_NETWORK = {
    ("A", "B"): link(),
    ("B", "C"): link(buffer=50),
    ("B", "D"): link(),
    ("A", "E"): link(),
    ("C", "F"): link(),
}
TREE_CHANNELS = [
    root([("A", "B"), ("B", "C")], {"k0": 40, "k1": 100}, sink=None),
    {"hops": [("B", "D")], "parent": 0, "tap": 1, "sink": "d", "wire": {"k0": 10, "k1": 10}},
    {"hops": [], "parent": 0, "tap": 2, "sink": "c", "wire": {"k0": 40, "k1": 100}},
    {"hops": [("A", "E")], "parent": 0, "tap": 0, "sink": "e", "wire": {"k1": 20}},
    {"hops": [("C", "F")], "parent": 2, "tap": 0, "sink": "f", "wire": {"k0": 40, "k1": 100}},
]
TREE_EMITTED = {"k0": 0, "k1": 0}
TREE_FATES = Fates(
    {
        # A->B: k0 0..40000 at B 41000, k1 40000..140000 at B 141000
        1: {"k0": ("delivered", 52_000), "k1": ("delivered", 152_000)},  # projected to 10 bytes at B
        2: {"k0": ("delivered", 82_000), "k1": ("dropped", ("B", "C"))},  # B->C 41000..81000, at C 82000
        3: {"k1": ("delivered", 21_000)},  # leaves A at its emission
        4: {"k0": ("delivered", 123_000), "k1": ("dropped", ("B", "C"))},  # inherited through channel 2
    },
    {("B", "C"): 1},  # the copy that stopped, not its would-be children
    {},
)


def test_taps_start_children_where_and_when_the_parent_gets_and_inherit_its_fate():
    assert play_reference(TREE_NETWORK, TREE_CHANNELS, TREE_EMITTED) == TREE_FATES


def test_a_child_of_a_lost_copy_reports_the_loss():
    network = {("A", "B"): link(), ("B", "C"): link(down=[(0, None)]), ("C", "D"): link()}
    channels = [
        root([("A", "B"), ("B", "C")], {"k": 10}, sink=None),
        {"hops": [("C", "D")], "parent": 0, "tap": 2, "sink": "d", "wire": {"k": 10}},
    ]
    assert play_reference(network, channels, {"k": 0}) == Fates({1: {"k": ("lost", ("B", "C"))}}, {}, {("B", "C"): 1})


def test_a_child_carries_only_its_parents_keys():
    channels = [root([], {"a": 10}), {"hops": [], "parent": 0, "tap": 0, "sink": "s", "wire": {"b": 10}}]
    with pytest.raises(ValueError, match="not carried"):
        play_reference({}, channels, {"a": 0})
