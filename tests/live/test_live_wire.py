"""Wire formats: batches and plans survive the round trip exactly."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from peers.live.topics import Topics
from peers.live.wire import Batch, decode_message, encode_message, plan_from_json, plan_from_wire, plan_to_wire
from sharing import STRATEGIES, make_plan
from topologies.errors import EngineError
from topologies.loader import load_scenario


def test_message_round_trip_keeps_every_part_and_array_bit_for_bit():
    rng = np.random.default_rng(3)
    first = Batch(
        "SP1", 0, 2, 3, ("flow", "F4"), "stream0", np.arange(5, 10, dtype=np.int64), rng.random(5),
        {"a": rng.normal(size=5), "c": np.array([np.inf, -0.0, 1e300, np.nan, 2.5])}, np.full(5, 32, np.int64),
    )  # fmt: skip
    second = Batch(
        "SP1", 0, 2, 4, ("flow", "F9"), "stream1", np.array([3], np.int64), np.array([0.25]),
        {"z": np.array([-1.5])}, np.array([24], np.int64),
    )  # fmt: skip
    parts = decode_message(encode_message("SP1", 7, [first, second]))
    assert [(b.sender, b.seq, b.version, b.epoch, b.channel, b.stream) for b in parts] == [
        ("SP1", 7, 2, 3, ("flow", "F4"), "stream0"), ("SP1", 7, 2, 4, ("flow", "F9"), "stream1"),
    ]  # fmt: skip
    for back, batch in zip(parts, [first, second], strict=True):
        assert list(back.columns) == list(batch.columns)
        for got, want in [
            (back.indices, batch.indices),
            (back.times, batch.times),
            (back.wire_bytes, batch.wire_bytes),
        ]:
            assert got.tobytes() == want.tobytes()
        for a in batch.columns:
            assert back.columns[a].tobytes() == batch.columns[a].tobytes()


def test_empty_and_malformed_messages():
    empty = Batch("P0", 1, 0, -1, ("raw", "s"), "s", np.zeros(0, np.int64), np.zeros(0), {}, np.zeros(0, np.int64))
    assert [len(b) for b in decode_message(encode_message("P0", 1, [empty, empty]))] == [0, 0]
    with pytest.raises(EngineError, match="not a tuple batch"):
        decode_message(b"hello")
    with pytest.raises(EngineError, match="malformed"):
        decode_message(encode_message("P0", 1, [empty])[:-1] + b"x")
    with pytest.raises(EngineError, match="no parts"):
        decode_message(encode_message("P0", 1, []))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plan_json_round_trip(strategy):
    scenario = load_scenario("topologies/figure1.yaml")
    plan = make_plan(scenario, strategy)
    assert plan_from_json(plan.to_json()) == plan


def test_topic_layout_parses_back():
    topics = Topics("sg")
    assert topics.parse(topics.link("SP4", "SP5")) == ("link", "SP4", "SP5")
    assert topics.parse(topics.down("P1", "Q1")) == ("down", "P1", "Q1")
    assert topics.parse(topics.up("P0")) == ("up", "P0")
    assert topics.parse("other/link/a/b") == ()


@pytest.mark.parametrize("strategy", ["sharing-em", "ideal", "multicast"])
def test_compact_plan_round_trip_shares_equal_flows(strategy):
    scenario = load_scenario("topologies/figure1.yaml")
    plan = make_plan(scenario, strategy)
    doc = json.loads(json.dumps(plan_to_wire(plan)))
    back = plan_from_wire(doc)
    assert back == plan
    assert len(doc["flow_table"]) == len({f for e in plan.epochs for f in e.flows})
    # a flow unchanged between two epochs is one object after decoding
    for a, b in itertools.pairwise(back.epochs):
        for f in a.flows:
            if f in b.flows:
                assert next(g for g in b.flows if g == f) is f
