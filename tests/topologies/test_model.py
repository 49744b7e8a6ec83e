"""The scenario model: its lookups by id and the wire size of a tuple."""

from __future__ import annotations

import os
import pickle
from dataclasses import replace

import numpy as np
import pytest

from topologies.loader import load_scenario
from topologies.model import tuple_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIGURE1 = os.path.join(ROOT, "topologies", "figure1.yaml")


def test_lookups_by_id_agree_with_the_scenario_tuples():
    scenario = load_scenario(FIGURE1)
    assert list(scenario.thin_peers_by_id.values()) == list(scenario.thin_peers)
    assert list(scenario.streams_by_id.values()) == list(scenario.streams)
    assert list(scenario.subscriptions_by_id.values()) == list(scenario.subscriptions)
    assert scenario.homes == {p.id: p.attach for p in scenario.thin_peers}
    for peer in scenario.thin_peers:
        assert scenario.thin_peer(peer.id) is peer and scenario.home(peer.id) == peer.attach
    for sub in scenario.subscriptions:
        assert scenario.subscription(sub.id) is sub and scenario.stream(sub.stream).id == sub.stream
    for lookup in (scenario.thin_peer, scenario.stream, scenario.subscription, scenario.home):
        with pytest.raises(KeyError):
            lookup("nobody")


def test_a_replaced_scenario_has_its_own_lookups_and_equality_ignores_them():
    scenario = load_scenario(FIGURE1)
    assert "Q1" in scenario.subscriptions_by_id
    fewer = replace(scenario, subscriptions=scenario.subscriptions[1:])
    assert "Q1" not in fewer.subscriptions_by_id and "Q1" in scenario.subscriptions_by_id
    again = pickle.loads(pickle.dumps(scenario))
    assert again == scenario and again.subscription("Q1") == scenario.subscription("Q1")
    assert load_scenario(FIGURE1) == scenario  # one scenario's maps built, the other's not


def test_tuple_bytes_is_the_header_and_eight_bytes_a_value():
    scenario = load_scenario(FIGURE1)
    assert scenario.tuple_bytes(0) == scenario.header_bytes == 16
    assert scenario.tuple_bytes(3) == tuple_bytes(16, 3) == 40
    assert tuple_bytes(10, np.array([0, 1, 5])).tolist() == [10, 18, 50]
