"""Backpressure signals: a node's queue over the high-water mark, and late messages as renewable leases."""

from __future__ import annotations

import time

import pytest

from peers.live.connection import LATE_S, Broker, Pressure
from peers.live.coordinator import Coordinator
from peers.live.malformed import MalformedMessage
from peers.live.plans import PlanBook
from peers.live.topics import Topics
from topologies.loader import load_scenario


def test_late_messages_renew_a_lease_at_most_twice_per_lease():
    sent: list[bytes] = []
    pressure = Pressure(sent.append)
    pressure.transit(LATE_S / 2)
    assert sent == []
    pressure.transit(LATE_S * 3)
    pressure.transit(LATE_S * 2)  # within half a lease of the last report: not repeated
    assert sent == [b"late"]
    pressure._renew_at = time.monotonic()  # half a lease later
    pressure.transit(LATE_S * 2)
    assert sent == [b"late", b"late"]
    pressure.queue(True)
    pressure.queue(False)
    assert sent[2:] == [b"1", b"0"]
    assert pressure.max_transit_s == LATE_S * 3


async def test_the_horizon_stands_still_while_a_lease_or_a_full_queue_holds_it():
    scenario = load_scenario("topologies/figure1.yaml")
    coordinator = Coordinator(scenario, "sharing-em", Broker("127.0.0.1", 1), Topics(), 1.0, PlanBook(scenario), 60.0)
    coordinator.t0 = time.time()
    load = coordinator.topics.load

    coordinator._publish_clock()
    free = coordinator.horizon
    await coordinator._on_message(load("SP5"), b"late", False)
    await coordinator._on_message(load("P1"), b"1", False)
    time.sleep(0.01)
    coordinator._publish_clock()
    assert coordinator.horizon == free and coordinator.max_congested == 2
    await coordinator._on_message(load("P1"), b"0", False)
    coordinator._publish_clock()
    assert coordinator.horizon == free  # the lease still holds
    coordinator.late["SP5"] = time.monotonic() - 0.001  # the lease ran out without renewal
    coordinator._publish_clock()
    assert coordinator.horizon > free
    assert coordinator.held_s > 0
    # a report from a node the scenario does not have is malformed: the connection drops and counts it
    with pytest.raises(MalformedMessage, match="'SP99' is not a node that sends load"):
        await coordinator._on_message(load("SP99"), b"1", False)
    assert coordinator.congested == set()
