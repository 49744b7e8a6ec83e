"""Wire formats: batches and plans survive the round trip exactly."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peers.live.malformed import MalformedMessage
from peers.live.thinpeer_service import input_rows
from peers.live.topics import Topics
from peers.live.wire import (
    MAGIC,
    Batch,
    check_values,
    decode_message,
    encode_message,
    plan_from_json,
    plan_from_wire,
    plan_to_wire,
    subscription_from_json,
)
from sharing import STRATEGIES, make_plan
from topologies.errors import EngineError, InputError
from topologies.loader import load_scenario, scenario_from_document


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
    parts = decode_message(encode_message("SP1", 7, [first, second]), "SP1")
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


def test_due_times_and_fates_survive_the_round_trip():
    due = Batch(
        "SP1", 0, 0, 0, ("flow", "F1"), "s", np.array([4], np.int64), np.array([0.5]), {"a": np.array([1.0])},
        np.array([24], np.int64), due=np.array([0.625]),
    )  # fmt: skip
    lost = Batch(
        "SP1", 0, 0, 0, ("flow", "F1"), "s", np.array([5], np.int64), np.array([0.75]), {"a": np.array([2.0])},
        np.array([24], np.int64), fate="lost",
    )  # fmt: skip
    back = decode_message(encode_message("SP1", 3, [due, lost]), "SP1")
    assert back[0].arrivals.tolist() == [0.625] and back[0].fate is None
    assert back[1].arrivals.tolist() == [0.75] and back[1].fate == "lost"  # no due time given: its emission
    early = Batch(**{**due.__dict__, "due": np.array([0.25])})
    with pytest.raises(MalformedMessage, match="due times"):
        check_values(decode_message(encode_message("SP1", 4, [early]), "SP1")[0], "SP1")


def test_empty_and_malformed_messages():
    empty = Batch("P0", 1, 0, -1, ("raw", "s"), "s", np.zeros(0, np.int64), np.zeros(0), {}, np.zeros(0, np.int64))
    assert [len(b) for b in decode_message(encode_message("P0", 1, [empty, empty]), "P0")] == [0, 0]
    with pytest.raises(EngineError, match="not a tuple batch"):
        decode_message(b"hello", "P0")
    with pytest.raises(MalformedMessage, match="not JSON"):
        decode_message(encode_message("P0", 1, [empty])[:-1] + b"x", "P0")
    with pytest.raises(EngineError, match="no parts"):
        decode_message(encode_message("P0", 1, []), "P0")


def _with_header(header: dict, body: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return MAGIC + len(text).to_bytes(4, "little") + text + body


PART = {"version": 0, "epoch": 0, "channel": ["flow", "F1"], "stream": "s", "n": 1, "attrs": ["a"]}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [PART]}, bytes(40)), None),
        (
            _with_header({"sender": "SP9", "seq": 1, "sent": 0.0, "parts": [PART]}, bytes(40)),
            "claims to come from 'SP9'",
        ),
        (
            _with_header({"sender": "SP1", "seq": -1, "sent": 0.0, "parts": [PART]}, bytes(40)),
            "'seq' must be an integer",
        ),
        (
            _with_header({"sender": "SP1", "seq": 1, "sent": "now", "parts": [PART]}, bytes(40)),
            "'sent' must be a finite",
        ),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": {}}, bytes(40)), "no parts"),
        (
            _with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [{**PART, "n": -1}]}),
            "'n' must be an integer",
        ),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [{**PART, "n": True}]}, bytes(40)), "'n'"),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [{**PART, "attrs": ["a", "a"]}]}), "distinct"),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [{**PART, "channel": "F1"}]}), "channel"),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [PART]}, bytes(32)), "too short"),
        (_with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [PART]}, bytes(48)), "for parts of 40 bytes"),
        (
            _with_header({"sender": "SP1", "seq": 1, "sent": 0.0, "parts": [{**PART, "version": 1.5}]}, bytes(40)),
            "version",
        ),
        (MAGIC + (10**6).to_bytes(4, "little") + b"{}", "past the end"),
        (MAGIC + (2).to_bytes(4, "little") + b"[]", "not a JSON object"),
        (MAGIC + (9).to_bytes(4, "little") + b"[" * 9, "not JSON"),
    ],
)
def test_a_malformed_message_is_refused_with_its_reason(payload, reason):
    if reason is None:
        assert len(decode_message(payload, "SP1")[0]) == 1
        return
    with pytest.raises(MalformedMessage, match=reason) as caught:
        decode_message(payload, "SP1")
    assert caught.value.sender == "SP1"


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


def test_data_topics_by_their_counter_names():
    topics, homes = Topics("sg"), {"P0": "SP4", "P1": "SP1"}
    link, up, down = (topics.key_of(t) for t in (topics.link("SP4", "SP5"), topics.up("P0"), topics.down("P1", "Q1")))
    assert (link, up, down) == ("link/SP4/SP5", "up/P0", "down/P1/Q1")
    assert Topics.data(link).direction(homes) == ("SP4", "SP5") and Topics.data(link).receiver(homes) == "SP5"
    assert Topics.data(up).direction(homes) == ("P0", "SP4") and Topics.data(up).receiver(homes) == "SP4"
    assert Topics.data(down).direction(homes) == ("SP1", "P1") and Topics.data(down).receiver(homes) == "P1"
    for other in ("ctl/plan", "link/SP4", "link/SP4/SP5/x", "up/P0/Q1", "down/P1", "down/P1/", "up/", ""):
        assert Topics.data(other) is None, other
    assert topics.key_of("elsewhere/up/P0") == ""
    client = Topics.client_id("P2", "beef")
    assert Topics.identity_of(client) == "P2" and topics.parse(topics.reply(client)) == ("ctl", "reply", "P2", "beef")


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


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT a FROM nowhere", "query: unknown stream 'nowhere' in scenario figure1"),
        ("SELECT z FROM stream0", "query: unknown attribute 'z' of stream 'stream0'"),
        ("SELECT a FROM stream0 WHERE b > 1 OR q < 2", "query: unknown attribute 'q' of stream 'stream0'"),
    ],
)
def test_a_run_time_subscription_is_checked_against_the_scenario_as_the_loader_checks(query, message):
    scenario = load_scenario("topologies/figure1.yaml")
    with pytest.raises(InputError) as info:
        subscription_from_json(scenario, {"id": "L1", "peer": "P1", "at": 0.0, "query": query})
    assert str(info.value) == message
    spec = subscription_from_json(scenario, {"id": "L1", "peer": "P1", "at": 0.0, "query": "SELECT a FROM stream0"})
    assert spec.query.stream == "stream0" and spec.until is None


INPUT_STREAM = {
    "name": "input",
    "duration": 1,
    "network": {"super_peers": ["A"]},
    "thin_peers": [{"id": "sensor", "attach": "A"}],
    "streams": [
        {
            "id": "readings",
            "source": "sensor",
            "rate": 1,
            "schema": {
                "x": {"distribution": {"uniform": [0, 100]}},
                "n": {"type": "int", "distribution": {"uniform": [0, 9]}},
                "kind": {"type": "string", "distribution": {"choice": ["ok", "fail"]}},
            },
        }
    ],
}
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.floats()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["x", "n", "kind", "y"]), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, lines=st.booleans())
def test_an_input_message_gives_its_tuples_or_is_malformed(value, lines):
    """What a plain client publishes on ``in/<stream>``: tuples of exactly the stream's attributes, each a
    finite number (whole for an ``int``) or one of a string attribute's values, or one MalformedMessage;
    numbers no float holds (JSON's integers have no bound) included."""
    stream = scenario_from_document(INPUT_STREAM).streams[0]
    items = value if isinstance(value, list) else [value]
    payload = "\n".join(json.dumps(v) for v in items) if lines else json.dumps(value)
    try:
        rows = input_rows(payload.encode(), stream)
    except MalformedMessage as err:
        assert "\n" not in str(err) and len(str(err)) < 300
        return
    assert all(len(row) == 3 and all(np.isfinite(row)) for row in rows)
    assert all(row[1].is_integer() and row[2] in (0.0, 1.0) for row in rows)


def test_an_input_tuple_of_a_huge_integer_is_a_float_or_malformed():
    stream = scenario_from_document(INPUT_STREAM).streams[0]
    assert input_rows(b'{"x": 100000000000000000000000000000, "n": 2, "kind": "ok"}', stream) == [[1e29, 2.0, 0.0]]
    with pytest.raises(MalformedMessage, match="x: not a float: <an integer of about 400 digits>"):
        input_rows(('{"x": 1' + "0" * 400 + ', "n": 2, "kind": "ok"}').encode(), stream)
