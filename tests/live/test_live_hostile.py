"""Hostile traffic on the broker: every malformed message is dropped and counted, never fatal; a stop cuts
the run at the barrier (exact), also while a forged load report holds the horizon; a broker that does not
listen is named at once.  Under ``--secure``, a thin-peer holding a valid login acts only as itself:
generated attacks (writes to every control topic as every node, sessions under others' client ids,
guessed logins, requests reaching for others' subscriptions) change nothing, and its answers show only
what is its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time

import aiomqtt
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peers.live.broker import free_port
from peers.live.client import Session
from peers.live.connection import Broker
from peers.live.serve import ServeOptions, serve
from peers.live.topics import Topics
from peers.live.wire import Batch, encode_message
from peers.local import run_local
from reports.live import live_report
from sharing import make_plan
from topologies.errors import EngineError, InputError
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"
TOPICS = Topics()


def forged(sender: str, channel: tuple[str, str], n: int = 10, **change) -> bytes:
    """A well-formed message of ``n`` tuples of stream0 (``change`` overrides Batch fields)."""
    fields = dict(
        sender=sender, seq=10**9, version=0, epoch=0, channel=channel, stream="stream0",
        indices=np.arange(n, dtype=np.int64), times=np.full(n, 1.0),
        columns={"a": np.full(n, 5.0), "b": np.full(n, 5.0), "c": np.full(n, 60.0)},
        wire_bytes=np.full(n, 44, np.int64),
    )  # fmt: skip
    fields.update(change)
    return encode_message(sender, fields["seq"], [Batch(**fields)])


# (topic, payload, the sender the report names) for every topic a node reads
GARBAGE = [
    (TOPICS.link("SP4", "SP5"), b"\x00garbage", "SP4"),
    (TOPICS.link("SP4", "SP5"), b"SGB2\xff\xff\xff\x7f{", "SP4"),  # header length past the end
    (TOPICS.link("SP4", "SP5"), forged("SP9", ("flow", "F1")), "SP4"),  # claims another sender
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "nope")), "SP4"),  # no such flow
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "F1"), epoch=99), "SP4"),  # no such epoch
    (TOPICS.link("SP4", "SP5"), forged("SP4", ("flow", "F1"), times=np.full(10, np.nan)), "SP4"),
    (TOPICS.up("P0"), b"{}", "P0"),
    (TOPICS.up("P0"), forged("P0", ("raw", "stream0"), columns={"a": np.zeros(10)}), "P0"),  # attributes missing
    (TOPICS.up("P0"), forged("P0", ("raw", "nostream")), "P0"),
    (TOPICS.down("P1", "Q1"), b"\xde\xad", "SP1"),
    (TOPICS.down("P1", "Q1"), forged("SP1", ("delivery", "Q2")), "SP1"),  # not this topic's subscription
    (TOPICS.control("clock"), b"not json", "coordinator"),
    (TOPICS.control("collect"), b"[1, 2]", "coordinator"),
    (TOPICS.control("collect"), json.dumps({"round": True}).encode(), "coordinator"),
    (TOPICS.control("plan"), b"\x80\x81", "coordinator"),
    (TOPICS.request("cli"), b"]]", "cli"),
    (TOPICS.request("cli"), json.dumps({"op": "subscriptions"}).encode(), "cli"),  # nowhere to answer
    (TOPICS.request("cli"), json.dumps({"op": "x", "reply_to": "P1/abc"}).encode(), "cli"),  # not its reply topic
    (TOPICS.stats("SP4"), b"{", "SP4"),
    (TOPICS.stats("SP4"), json.dumps({"node": "SP4", "round": 1, "received": {"x/y": [1, 2, 3]}}).encode(), "SP4"),
    (TOPICS.alive("SP4"), b"2", "SP4"),
    (TOPICS.load("SP4"), b"busy", "SP4"),
    (TOPICS.ready("SP4"), b"-1", "SP4"),
    (TOPICS.ready("SP99"), b"0", "SP99"),
]


async def wait_for_clock(port: int, previous: str | None = None) -> str:
    """Until the coordinator of a run other than ``previous`` has started the emulated clock; its run id."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(TOPICS.control("clock"), qos=1)
        async for message in client.messages:
            doc = json.loads(message.payload)
            if doc.get("t0") is not None and doc["run"] != previous:
                return doc["run"]
    raise AssertionError("no clock")


async def test_garbage_on_every_topic_is_dropped_counted_and_the_run_stays_exact(mosquitto, caplog):
    scenario = load_scenario(FIGURE1)
    broker = Broker.parse(mosquitto.url)
    served = asyncio.create_task(serve(scenario, ServeOptions(broker, speed=15)))
    run = await asyncio.wait_for(wait_for_clock(mosquitto.port), 30)
    # of this run, so not ignored as a previous run's leftovers, but not a clock or a plan either
    of_this_run = [
        (TOPICS.control("clock"), json.dumps({"run": run, "t0": 1.0, "speed": -1}).encode(), "coordinator"),
        (TOPICS.control("plan"), json.dumps({"run": run, "version": 7, "duration": 1.0}).encode(), "coordinator"),
    ]
    with caplog.at_level(logging.WARNING, logger="peers.live"):
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as attacker:
            for topic, payload, _ in GARBAGE + of_this_run:
                await attacker.publish(topic, payload, qos=1)
        # the coordinator still answers, and a request it cannot carry out gets an error reply
        async with Session(broker, TOPICS, "cli") as session:
            listing = await session.ask({"op": "subscriptions"})
            with pytest.raises(InputError, match="unknown request 'reboot'"):
                await session.ask({"op": "reboot"})
            with pytest.raises(InputError, match="'peer' and 'query' must be strings"):
                await session.ask({"op": "subscribe", "peer": ["P1"], "query": 7})
            with pytest.raises(InputError, match="--id: letters, digits"):  # it would be a wildcard topic
                await session.ask({"op": "subscribe", "peer": "P1", "query": "SELECT a FROM stream0", "id": "#"})
            with pytest.raises(InputError, match="query: at most 65,536 characters"):
                await session.ask({"op": "subscribe", "peer": "P1", "query": "SELECT a FROM stream0 " + " " * 70000})
        result = await asyncio.wait_for(served, 60)
    assert [s["id"] for s in listing["subscriptions"]] == ["Q1", "Q2", "Q3"]
    report = live_report(result)
    assert report["exact"] and result.lost == {}
    sim = run_local(scenario, make_plan(scenario, "sharing-em"))
    assert result.run.link_bytes == sim.link_bytes  # no forged tuple was counted or forwarded
    malformed = report["live"]["malformed_messages"]
    for topic, _, sender in GARBAGE + of_this_run:
        assert malformed["/".join(TOPICS.parse(topic))][sender] >= 1, (topic, malformed)
    # topics with one reader: each message counted once
    assert malformed["link/SP4/SP5"] == {"SP4": 6}
    assert malformed["up/P0"] == {"P0": 3}
    assert malformed["down/P1/Q1"] == {"SP1": 2}
    assert malformed["ctl/request/cli"] == {"cli": 3}
    # the clock and collect broadcasts reach every node, the plan every super-peer: each counts them
    nodes = len(scenario.super_peers) + len(scenario.thin_peers)
    assert malformed["ctl/clock"] == malformed["ctl/collect"] == {"coordinator": 2 * nodes}
    assert malformed["ctl/plan"] == {"coordinator": 2 * len(scenario.super_peers)}
    # on stderr once per node and sender, not once per message
    told = [r.getMessage() for r in caplog.records if "dropped a malformed message" in r.getMessage()]
    assert len(told) == len({(m.split(":")[0], m.split(" from ")[1].split(":")[0]) for m in told})
    assert any(m.startswith("sp-SP5: dropped a malformed message on streamglobe/link/SP4/SP5 from SP4") for m in told)


async def test_a_stop_under_forever_is_cut_at_the_barrier_and_exact(mosquitto):
    scenario = load_scenario(FIGURE1)
    run = None
    for wait in (0.6, 1.3, 2.1):  # stopped between clock ticks at different phases
        stop = asyncio.Event()
        served = asyncio.create_task(
            serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=15, forever=True), stop)
        )
        run = await asyncio.wait_for(wait_for_clock(mosquitto.port, run), 30)
        await asyncio.sleep(wait)
        stop.set()
        result = await asyncio.wait_for(served, 60)
        report = live_report(result)
        assert report["exact"], [
            (s["id"], s["missing"], s["extra"]) for s in report["strategies"]["sharing-em"]["subscriptions"]
        ]
        assert 0 < result.scenario.duration < 60


async def test_a_stop_ends_the_run_while_a_forged_load_report_holds_the_horizon(mosquitto):
    scenario = load_scenario(FIGURE1)
    stop = asyncio.Event()
    served = asyncio.create_task(serve(scenario, ServeOptions(Broker.parse(mosquitto.url), speed=15), stop))
    await asyncio.wait_for(wait_for_clock(mosquitto.port), 30)
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as attacker:
        await attacker.publish(TOPICS.load("SP5"), b"1", qos=1)  # well-formed: indistinguishable without --secure
    await asyncio.sleep(1.0)
    stop.set()
    started = time.monotonic()
    result = await asyncio.wait_for(served, 30)
    assert time.monotonic() - started < 15
    report = live_report(result)
    assert report["exact"]
    assert report["live"]["backpressure"]["horizon_held_s"] > 0


async def test_serve_names_a_broker_that_does_not_listen_within_seconds():
    scenario = load_scenario(FIGURE1)
    port = free_port()
    started = time.monotonic()
    with pytest.raises(EngineError, match=f"cannot reach the broker at 127.0.0.1:{port}"):
        await asyncio.wait_for(serve(scenario, ServeOptions(Broker("127.0.0.1", port))), 30)
    assert time.monotonic() - started < 8


# --- under --secure: a thin-peer's CLI login, valid, attacking -------------------------------------------

OWN_QUERIES = [
    "SELECT a FROM stream0 WHERE a < 30",
    "SELECT b FROM stream0 WHERE b BETWEEN 10 AND 20",
    "SELECT * FROM stream0",
]
CONTROL = ["load", "ready", "alive", "stats", "done", "plan", "clock", "collect", "request", "reply"]
TARGETS = ["SP1", "SP4", "SP5", "P0", "P1", "P2", "coordinator", "operator", "cli"]
IDENTITIES = ["coordinator", "sp-SP5", "sp@SP5", "tp-P1", "tp@P1", "P1", "operator", "cli-x", "P2"]


def _marked(draw) -> bytes:
    """A payload that is malformed wherever it lands, so a delivery would show in the malformed counts."""
    return draw(st.sampled_from([b"\x00forged", b'{"forged": true}', b"[1, 2]"]))


@st.composite
def attacks(draw) -> list[tuple]:
    """What a thin-peer holding its own valid CLI login tries: writes to every control topic as every
    node, sessions under other identities' client ids, logins it has no password for, and requests that
    reach for others' subscriptions (each family at least once, in a drawn order)."""
    found = [
        ("publish", TOPICS.load("SP5"), b"1", draw(st.sampled_from(IDENTITIES))),  # would hold the clock forever
        ("publish", TOPICS.load("P2"), b"late", "P2"),
        ("hold", draw(st.sampled_from(IDENTITIES))),
        ("login", draw(st.sampled_from(["coordinator", "sp@SP5", "tp@P2", "operator", "P1"]))),
        ("ask", {"op": "subscribe", "peer": "P2", "query": draw(st.sampled_from(OWN_QUERIES)), "id": "M1"}),
        ("ask", {"op": "unsubscribe", "id": draw(st.sampled_from(["Q1", "Q3"]))}),
        ("ask", {"op": "unsubscribe", "id": draw(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True))}),
        ("ask", {"op": "subscriptions"}),
    ]
    for _ in range(draw(st.integers(6, 14))):
        kind = draw(st.sampled_from(["publish", "publish", "hold", "login", "ask"]))
        if kind == "publish":
            topic = TOPICS.control(f"{draw(st.sampled_from(CONTROL))}/{draw(st.sampled_from(TARGETS))}")
            topic = draw(st.sampled_from([topic, TOPICS.link("SP4", "SP5"), TOPICS.up("P0"), TOPICS.down("P1", "Q1")]))
            found.append(("publish", topic, _marked(draw), draw(st.sampled_from(IDENTITIES))))
        elif kind == "hold":
            found.append(("hold", draw(st.sampled_from(IDENTITIES))))
        elif kind == "login":
            found.append(("login", draw(st.sampled_from(["coordinator", "sp@SP4", "tp@P0", "operator", "P0"]))))
        else:
            request = draw(
                st.sampled_from(
                    [
                        {"op": "subscribe", "peer": draw(st.sampled_from(["P1", "P3"])), "query": OWN_QUERIES[0]},
                        {
                            "op": "subscribe",
                            "peer": "P2",
                            "query": OWN_QUERIES[1],
                            "id": draw(st.sampled_from(["Q1", "Q3", "Q2"])),
                        },
                        {"op": "unsubscribe", "id": draw(st.sampled_from(["Q1", "Q3", "Q9", "M1", "nobody"]))},
                        {"op": "subscriptions"},
                        {"op": "traffic"},
                    ]
                )
            )
            found.append(("ask", request))
    return draw(st.permutations(found))


@contextlib.asynccontextmanager
async def _client(port: int, **login):
    """An aiomqtt client on 127.0.0.1 whose connection the broker may drop (a denied write): its error is
    read, so asyncio does not log it as never retrieved."""
    async with aiomqtt.Client("127.0.0.1", port, **login) as client:
        client._disconnected.add_done_callback(lambda f: f.cancelled() or f.exception())
        yield client


async def _attacked_run(directory, plan: list[tuple]) -> tuple:
    """figure1 served under --secure while P2, with its own valid CLI login, carries out ``plan``; the
    result and the answers P2 got (request, answer or refusal)."""
    from tests.live.test_live_access import secure_broker

    scenario = load_scenario(FIGURE1)
    url, setup, broker = secure_broker(scenario, directory)
    login = {"username": "P2", "password": setup.credentials["P2"]}
    answers: list[tuple[dict, str]] = []
    try:
        served = asyncio.create_task(serve(scenario, ServeOptions(url, speed=6, credentials=setup.credentials)))
        await asyncio.sleep(3.0)  # the clock started
        for attack in plan:
            if attack[0] == "publish":  # the broker drops what the ACL denies (or disconnects P2)
                with contextlib.suppress(aiomqtt.MqttError):
                    async with _client(url.port, identifier=attack[3], **login) as client:
                        await client.publish(attack[1], attack[2], qos=1)
            elif attack[0] == "hold":  # a session under another's client id, were ids not bound to logins
                with contextlib.suppress(aiomqtt.MqttError):
                    async with _client(url.port, identifier=attack[1], **login):
                        await asyncio.sleep(0.3)
            elif attack[0] == "login":
                with pytest.raises(aiomqtt.MqttError):
                    async with aiomqtt.Client("127.0.0.1", url.port, username=attack[1], password="guessed"):
                        pass
            else:
                async with Session(url.as_user(**login), TOPICS, "P2") as session:
                    try:
                        answers.append((attack[1], json.dumps(await session.ask(attack[1]))))
                    except InputError as err:
                        answers.append((attack[1], f"refused: {err}"))
        result = await asyncio.wait_for(served, 120)  # a forged load report delivered would hold it forever
    finally:
        broker.stop()
    return scenario, result, answers


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=attacks())
def test_a_thin_peer_with_a_valid_login_acts_only_as_itself(tmp_path_factory, plan):
    scenario, result, answers = asyncio.run(_attacked_run(tmp_path_factory.mktemp("secure"), plan))
    report = live_report(result)
    # the run stays exact, and live equals simulated for the scenario as it ran (P2's own subscriptions too)
    assert report["exact"] and result.lost == {}
    assert result.run.link_bytes == run_local(result.scenario, result.plan).link_bytes
    # no node lost its session to a client under its id, and nothing P2 may not write was delivered: each
    # forged payload is malformed wherever it would land, and only P2's own request topic counted any
    assert result.reconnects == 0
    assert set(report["live"]["malformed_messages"]) <= {"ctl/request/P2"}
    # P2's answers name none of the others' subscriptions, nor any condition of a flow serving another peer
    own = {s.query.where.to_text() for s in result.scenario.subscriptions if s.peer == "P2"}
    theirs = {s.id for s in scenario.subscriptions if s.peer != "P2"}
    conditions = {s.query.text for s in scenario.subscriptions if s.peer != "P2"}
    for epoch in result.plan.epochs:
        served = {d.subscription: d.peer for d in epoch.deliveries}
        for flow in epoch.flows:
            feeds = {served[d.subscription] for d in epoch.deliveries if _feeds(epoch, flow.id, d.flow)}
            if feeds - {"P2"}:
                conditions.add(flow.predicate.to_text())
    for request, answer in answers:
        visible = answer.replace(repr(request.get("id")), "")  # the id it asked about, echoed back
        assert not [c for c in conditions - own if c in visible], (request, answer)
        assert not [s for s in theirs if re.search(rf"\b{s}\b", visible)], (request, answer)
    # "not yours" and "not there" are one answer (P2's own: those of the run, and those it made and ended
    # before they started, which the scenario as it ran leaves out)
    made = {request["id"] for request, answer in answers if request["op"] == "subscribe" and '"ok": true' in answer}
    refusals = {
        answer.replace(repr(request["id"]), "<id>")
        for request, answer in answers
        if request["op"] == "unsubscribe"
        and request["id"] not in {s.id for s in result.scenario.subscriptions if s.peer == "P2"} | made
    }
    assert refusals == {"refused: unsubscribe: P2 has no active subscription <id>"}


def _feeds(epoch, flow_id: str, start: str | None) -> bool:
    """Whether the flow ``flow_id`` of ``epoch`` is ``start`` or one of its ancestors."""
    while start is not None:
        if start == flow_id:
            return True
        start = epoch.flow(start).parent
    return False
