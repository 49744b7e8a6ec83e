"""A super-peer as a live service: the operators of the plan (peers/superpeer.py) fed from MQTT topics.

It reads the uploads of its thin-peers and the backbone directions ending at it, runs, for each batch, the
operators that the batch's plan version installs at this super-peer for the batch's epoch, and publishes
what they output: child flows on to their next hop, results to the subscribers' delivery topics.  The
operator code is exactly the simulator's; only the clock and the transport differ.

Outputs are buffered per topic and sent as one message (one part per flow and epoch) once the incoming
queue is empty, or at the latest ``flush_s`` wall seconds after the oldest buffered output: an input's
outputs towards one link direction always travel together, and under load so do those of many inputs.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import numpy as np

from network.meter import bin_width
from network.routing import Network
from peers.live.connection import Broker, Connection, Dedup, Pressure
from peers.live.counters import Counters
from peers.live.malformed import MalformedMessage, check, integer, json_object, number
from peers.live.plans import Clock, PlanBook, PlanVersion
from peers.live.thinpeer_service import BATCH_S
from peers.live.topics import Topics
from peers.live.wire import Batch, check_values, decode_message, encode_message
from peers.superpeer import ChannelKey, flow_key, raw_key


@dataclass(frozen=True)
class Arrival:
    """A received data message: its topic (whole, and :meth:`Topics.parse`'d), its parts, when it arrived
    (emulated, and wall time)."""

    topic: str
    parts: tuple[str, ...]
    batches: list[Batch]
    arrival: float
    wall: float


class SuperPeerService:
    """Super-peer ``node`` of ``book.base``; ``run()`` until ``close()``."""

    def __init__(
        self,
        node: str,
        book: PlanBook,
        broker: Broker,
        topics: Topics,
        network: Network | None = None,
        flush_s: float = BATCH_S,
    ):
        scenario = book.base
        self.node = node
        self.book = book
        self.topics = topics
        network = network or Network.of(scenario)
        neighbours = sorted({b for a, b in network.directions if a == node})
        self.thin_peers = tuple(p.id for p in scenario.thin_peers if p.attach == node)
        inputs = [topics.link(n, node) for n in neighbours] + [topics.up(p) for p in self.thin_peers]
        inputs += [topics.control("plan"), topics.control("clock"), topics.control("collect")]
        self.counters = Counters(bin_width(scenario.duration))
        self.dedup = Dedup()
        self.clock: Clock | None = None
        self.seq = 0
        self.held: dict[int, list[Arrival]] = {}  # messages waiting for this plan version
        self.max_held = 0
        self.flush_s = flush_s
        self.outgoing: dict[str, list[Batch]] = {}  # topic -> parts of its next message
        self.oldest = 0.0  # time.monotonic() when the oldest buffered part was queued
        self.connection = Connection(
            broker,
            f"sp-{node}",
            inputs,
            self._on_message,
            will=(topics.alive(node), b"0"),
            on_connect=self._on_connect,
            on_pressure=lambda over: self.pressure.queue(over),
        )
        self.pressure = Pressure(lambda state: self.connection.publish(topics.load(node), state))

    async def run(self) -> None:
        await self.connection.run()

    async def close(self) -> None:
        await self.connection.close()

    async def _on_connect(self) -> None:
        self.connection.publish(self.topics.alive(self.node), b"1", retain=True)

    async def _on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        parts = self.topics.parse(topic)
        if not parts:
            return
        try:
            if parts[0] == "ctl":
                self._on_control(parts[1], payload)
            else:
                self._on_data(topic, parts, payload)
        finally:  # a dropped malformed message must not keep buffered outputs waiting
            if self.outgoing and (self.connection.waiting == 0 or time.monotonic() - self.oldest >= self.flush_s):
                self._flush()
        # yield to the event loop so control messages and the outbox keep moving under load
        await asyncio.sleep(0)

    def _on_data(self, topic: str, parts: tuple[str, ...], payload: bytes) -> None:
        batches = decode_message(payload, self.topics.writer(parts))
        arrival = self.clock.now() if self.clock is not None else 0.0
        self._accept(Arrival(topic, parts, batches, arrival, time.time()))

    def _accept(self, message: Arrival) -> None:
        """Count and route a received message, unless it is a duplicate, once every plan version it names
        is here (until then it waits).  Raises :class:`MalformedMessage` for a part this super-peer cannot
        have been sent."""
        missing = [b.version for b in message.batches if b.version not in self.book.versions]
        if missing:
            self.held.setdefault(max(missing), []).append(message)
            self.max_held = max(self.max_held, sum(len(m.batches) for w in self.held.values() for m in w))
            return
        for batch in message.batches:
            self._check(message.parts, batch)
        batches = message.batches
        # after the checks: a malformed message must not make its (sender, seq) look delivered
        if not self.dedup.first_time(batches[0].sender, batches[0].seq):
            self.counters.duplicates += 1
            return
        self.pressure.transit(message.wall - batches[0].sent)
        tuples = sum(len(b) for b in batches)
        nbytes = sum(int(b.wire_bytes.sum()) for b in batches)
        self.counters.count_received(Topics.key(message.parts), tuples, nbytes, message.arrival)
        for batch in batches:
            self._route(batch)

    def _check(self, parts: tuple[str, ...], batch: Batch) -> None:
        """Raises :class:`MalformedMessage` unless ``batch`` is a part the plan version it names can send
        here on this topic: an upload of a stream the uploading thin-peer publishes, with its attributes, or
        a flow of that epoch arriving from the super-peer before this one on its path, carrying what the
        operator here reads; with finite emission times and non-negative indices and sizes."""
        sender = parts[1]
        check_values(batch, sender)
        pv = self.book.versions[batch.version]
        columns = set(batch.columns)
        if parts[0] == "up":
            stream = pv.scenario.streams_by_id.get(batch.stream)
            check(stream is not None and stream.source == sender, f"an upload of stream {batch.stream!r}", sender)
            check(batch.channel == ("raw", stream.id), f"an upload on channel {batch.channel!r}", sender)
            check(columns == set(stream.attribute_names), f"an upload of {stream.id} without its attributes", sender)
            return
        check(batch.channel[0] == "flow" and 0 <= batch.epoch < len(pv.plan.epochs), "not a flow of the plan", sender)
        installed = self.book.installed(batch.version, batch.epoch)
        flow = installed.flows.get(batch.channel[1])
        check(flow is not None and flow.stream == batch.stream, f"no flow {batch.channel[1]!r} of that epoch", sender)
        position = flow.path.index(self.node) if self.node in flow.path else 0
        check(position > 0 and flow.path[position - 1] == sender, f"flow {flow.id} does not come this way", sender)
        operator = installed.operators.get((self.node, flow_key(flow.id)))
        check(operator is None or operator.available <= columns, f"flow {flow.id} without its attributes", sender)

    def _on_control(self, name: str, payload: bytes) -> None:
        if name == "plan":
            version = self.book.add(payload)
            if version is None:
                return
            self.connection.publish(self.topics.ready(self.node), str(version.version).encode())
            for message in self.held.pop(version.version, []):
                try:
                    self._accept(message)
                except MalformedMessage as err:  # its sender's fault, not the plan's
                    self.connection.rejects.add(message.topic, err)
        elif name == "clock":
            doc = json_object(payload, "coordinator")
            if doc.get("run") == self.book.run_id and doc.get("t0") is not None:
                t0, speed = number(doc, "t0", "coordinator"), number(doc, "speed", "coordinator")
                check(speed > 0, "a clock of speed <= 0", "coordinator")
                self.clock = Clock(t0, speed)
        elif name == "collect":
            round_ = integer(json_object(payload, "coordinator"), "round", "coordinator")
            self.connection.publish(self.topics.stats(self.node), self.stats(round_))

    def stats(self, round_: int) -> bytes:
        doc = {
            "node": self.node,
            "round": round_,
            "backlog": self.connection.max_backlog,
            "outbox": self.connection.max_outbox,
            "waiting": self.max_held,
            "transit_s": round(self.pressure.max_transit_s, 3),
            "reconnects": self.connection.reconnects,
            "malformed": self.connection.rejects.to_json(),
            **self.counters.to_json(),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    def _route(self, batch: Batch) -> None:
        pv = self.book.versions[batch.version]
        if batch.channel[0] == "raw":
            # an upload: split it by the epoch in force at each tuple's emission time
            epochs = pv.epoch_of(batch.times)
            for e in np.unique(epochs):
                if e < 0:
                    continue  # emitted while no subscription exists: uploaded, routed nowhere
                positions = np.flatnonzero(epochs == e)
                self._at_node(pv, int(e), raw_key(batch.stream), _part(batch, positions), forward=False)
            return
        self._at_node(pv, batch.epoch, flow_key(batch.channel[1]), batch, forward=True)

    def _at_node(self, pv: PlanVersion, epoch: int, key: ChannelKey, batch: Batch, forward: bool) -> None:
        """``batch`` of channel ``key`` is here: run this node's operator on it, then pass it on."""
        installed = self.book.installed(pv.version, epoch)
        operator = installed.operators.get((self.node, key))
        if operator is not None:
            for out in operator.process(len(batch), batch.columns):
                if not len(out.positions):
                    continue
                indices, times = batch.take(out.positions)
                kind, name = out.target.kind, out.target.name
                child = Batch(
                    self.node, 0, pv.version, epoch, (kind, name), batch.stream, indices, times,
                    out.columns, out.wire_bytes,
                )  # fmt: skip
                if kind == "flow":
                    self._at_node(pv, epoch, flow_key(name), child, forward=True)
                else:
                    self._send(self.topics.down(pv.subscribers[name], name), child)
        if forward and key.kind == "flow":
            path = installed.flows[key.name].path
            position = path.index(self.node)
            if position + 1 < len(path):
                self._send(self.topics.link(self.node, path[position + 1]), batch)

    def _send(self, topic: str, batch: Batch) -> None:
        if not self.outgoing:
            self.oldest = time.monotonic()
        self.outgoing.setdefault(topic, []).append(batch)

    def _flush(self) -> None:
        """One message per topic with everything buffered for it."""
        for topic, batches in self.outgoing.items():
            self.seq += 1
            self.counters.count_sent(self.topics.key_of(topic))
            self.connection.publish(topic, encode_message(self.node, self.seq, batches))
        self.outgoing.clear()


def _part(batch: Batch, positions: np.ndarray) -> Batch:
    indices, times = batch.take(positions)
    return Batch(
        batch.sender, batch.seq, batch.version, batch.epoch, batch.channel, batch.stream, indices, times,
        {a: v[positions] for a, v in batch.columns.items()}, batch.wire_bytes[positions],
    )  # fmt: skip
