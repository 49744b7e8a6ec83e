"""A thin-peer as a live service: it publishes its streams in emulated real time and receives results.

A source emits tuple ``i`` of a stream at emulated time ``i / rate``, with the very values
``topologies.workload.columns`` gives every engine.  It publishes its tuples in batches (one per ``batch_s``
wall seconds), ahead of their emission (the super-peers' lookahead and two batch periods, never past the
coordinator's planning horizon), each stamped with when it reaches the super-peer over the emulated access link
(peers/live/links.py): the super-peer holds it until then.  What the upload loses while the source's
super-peer is down goes as a part with the fate ``lost`` (no traffic: docs/DYNAMICS.md).

A subscriber records, per subscription, the tuple indices it received and their latency: emulated
seconds from the tuple's emission to when it is seen, its due time over the emulated links, or its
arrival when the message came later than that.  Tuples dropped or lost on the way arrive as parts with a
``fate`` and are recorded as such.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np

from peers.live.connection import Broker, Connection, Dedup, Pressure
from peers.live.counters import Counters
from peers.live.links import CARRIED, FATES, LOOKAHEAD_S, LinkTable
from peers.live.malformed import check, integer, json_object, number
from peers.live.topics import Topics
from peers.live.wire import Batch, check_values, decode_message, encode_message
from topologies import workload
from topologies.model import Scenario

BATCH_S = 0.05  # wall seconds between a source's batches: ~20 messages/s/stream


class ThinPeerService:
    """Thin-peer ``peer`` of ``scenario``; ``run()`` until ``close()``.

    The clock, the horizon and the end time come from the coordinator's retained ``ctl/clock`` message.
    """

    def __init__(
        self, peer: str, scenario: Scenario, broker: Broker, topics: Topics, batch_s: float = BATCH_S, run: str = ""
    ):
        self.peer = peer
        self.run_id = run  # the coordinator's clock messages name it (a retained clock of another run is ignored)
        self.scenario = scenario
        self.topics = topics
        self.batch_s = batch_s
        self.streams = tuple(s for s in scenario.streams if s.source == peer)
        self.counters = Counters(1.0)
        self.dedup = Dedup()
        self.delivered: dict[str, list[np.ndarray]] = {}
        self.latencies: dict[str, list[np.ndarray]] = {}
        self.fated: dict[str, dict[str, list[np.ndarray]]] = {"dropped": {}, "lost": {}}  # fate -> sub -> indices
        self.attrs: dict[str, tuple[str, ...]] = {}
        self.clock_doc: dict | None = None
        self.clock_changed = asyncio.Event()
        self.emitted: dict[str, int] = {s.id: 0 for s in self.streams}
        self.seq = 0
        self.finished = not self.streams
        self.max_lag_s = 0.0  # most wall seconds a batch was queued after its last tuple's scheduled emission
        self.home = scenario.home(peer)
        self.links = LinkTable.of(scenario)
        self.connection = Connection(
            broker,
            f"tp-{peer}",
            # the clock first: its retained message arrives before any delivery, which needs it
            [topics.control("clock"), topics.downs(peer), topics.control("collect")],
            self._on_message,
        )
        # results arriving late (the process's event loop behind): the coordinator holds the horizon
        self.pressure = Pressure(lambda state: self.connection.publish(topics.load(peer), state))

    async def run(self) -> None:
        tasks = [asyncio.create_task(self.connection.run())]
        if self.streams:
            tasks.append(asyncio.create_task(self._emit()))
        await asyncio.gather(*tasks)

    async def close(self) -> None:
        await self.connection.close()

    async def _on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        parts = self.topics.parse(topic)
        if parts[:2] == ("ctl", "clock"):
            doc = json_object(payload, "coordinator")
            if doc.get("run") == self.run_id:
                self.clock_doc = _clock(doc)
                self.clock_changed.set()
        elif parts[:2] == ("ctl", "collect"):
            round_ = integer(json_object(payload, "coordinator"), "round", "coordinator")
            doc = {"node": self.peer, "round": round_, "finished": self.finished}
            doc.update(self.counters.to_json())
            doc["reconnects"] = self.connection.reconnects
            doc["malformed"] = self.connection.rejects.to_json()
            self.connection.publish(self.topics.stats(self.peer), json.dumps(doc).encode())
        elif parts[:1] == ("down",) and len(parts) == 3:
            batches = decode_message(payload, self.home)
            sub = parts[2]
            check(all(b.channel == ("delivery", sub) for b in batches), f"not a delivery of {sub}", self.home)
            for batch in batches:
                check_values(batch, self.home)
            check(self.clock_doc is not None and self.clock_doc["t0"] is not None, "before the clock", self.home)
            if not self.dedup.first_time(batches[0].sender, batches[0].seq):
                self.counters.duplicates += 1
                return
            arrival = time.time()
            carried = [b for b in batches if b.fate is None]
            tuples = sum(len(b) for b in carried)
            nbytes = sum(int(b.wire_bytes.sum()) for b in carried)
            self.counters.count_received(Topics.key(parts), tuples, nbytes, 0.0)
            t0, speed = self.clock_doc["t0"], self.clock_doc["speed"]
            self.pressure.transit(arrival - batches[0].sent)
            now = (arrival - t0) * speed
            for batch in batches:
                if batch.fate is not None:
                    self.fated[batch.fate].setdefault(sub, []).append(batch.indices.copy())
                    continue
                self.delivered.setdefault(sub, []).append(batch.indices.copy())
                self.latencies.setdefault(sub, []).append(np.maximum(batch.arrivals, now) - batch.times)
                self.attrs[sub] = tuple(batch.columns)

    async def _emit(self) -> None:
        """Publish every stream of this thin-peer, one message per batch period with a part per stream, its
        tuples through the access link's queue in order of emission."""
        topic = self.topics.up(self.peer)
        direction = (self.peer, self.home)
        while True:
            doc = self.clock_doc
            if doc is None or doc.get("t0") is None:
                self.clock_changed.clear()
                await self.clock_changed.wait()
                continue
            t0, speed, horizon, end = doc["t0"], doc["speed"], doc["horizon"], doc["end"]
            now = (time.time() - t0) * speed
            limit = min(now + (LOOKAHEAD_S + 2 * self.batch_s) * speed, horizon)
            limit = limit if end is None else min(limit, end)
            batches = []
            for stream in self.streams:
                start, count = self.emitted[stream.id], workload.tuple_count(stream, limit)
                if count <= start:
                    continue
                self.emitted[stream.id] = count
                size = self.scenario.tuple_bytes(len(stream.attribute_names))
                batches.append(
                    Batch(
                        self.peer, 0, doc["version"], -1, ("raw", stream.id), stream.id,
                        np.arange(start, count, dtype=np.int64), workload.emission_times(stream, start, count),
                        workload.columns(self.scenario, stream.id, start, count),
                        np.full(count - start, size, dtype=np.int64),
                    )
                )  # fmt: skip
            if batches:
                batches = self._paced(direction, batches)
                self.seq += 1
                self.counters.count_sent(self.topics.key_of(topic))
                self.connection.publish(topic, encode_message(self.peer, self.seq, batches))
                latest = max(float(b.times[-1]) for b in batches)
                self.max_lag_s = max(self.max_lag_s, time.time() - (t0 + latest / speed))
            if end is not None and limit >= end:
                # the last tuple before the end time is out: say so once the broker has it
                await self.connection.flush()
                for stream in self.streams:
                    self.connection.publish(self.topics.done(self.peer), json.dumps({"stream": stream.id}).encode())
                self.finished = all(self._done(s.id, end) for s in self.streams)
                return
            await asyncio.sleep(self.batch_s)

    def _paced(self, direction: tuple[str, str], batches: list[Batch]) -> list[Batch]:
        """``batches`` through the access link, every stream's tuples in order of emission: the tuples it
        carries, due at the super-peer, and those it lost (while the super-peer was down) as parts with
        that fate (an access link has no buffer)."""
        times = np.concatenate([b.times for b in batches])
        order = np.argsort(times, kind="stable")
        wire = np.concatenate([b.wire_bytes for b in batches])
        due_sorted, fate_sorted = self.links.send(direction, times[order], wire[order])
        due, fate = np.empty_like(due_sorted), np.empty_like(fate_sorted)
        due[order], fate[order] = due_sorted, fate_sorted
        out, start = [], 0
        for batch in batches:
            stop = start + len(batch)
            for code in (CARRIED, *FATES):
                positions = np.flatnonzero(fate[start:stop] == code)
                if len(positions):
                    part = Batch(
                        batch.sender, 0, batch.version, batch.epoch, batch.channel, batch.stream,
                        batch.indices[positions], batch.times[positions],
                        {a: v[positions] for a, v in batch.columns.items()}, batch.wire_bytes[positions],
                        due=due[start:stop][positions] if code == CARRIED else None, fate=FATES.get(code),
                    )  # fmt: skip
                    out.append(part)
            start = stop
        return out

    def _done(self, stream_id: str, end: float) -> bool:
        return self.emitted[stream_id] >= workload.tuple_count(self.scenario.stream(stream_id), end)


def _clock(doc: dict) -> dict:
    """A ``ctl/clock`` document checked: ``t0`` (None before the clock starts), ``speed``, ``version``,
    ``horizon``, ``end`` (None: open-ended).  Raises :class:`MalformedMessage` for anything else."""
    sender = "coordinator"
    t0 = number(doc, "t0", sender, optional=True)
    if t0 is None:
        return {"t0": None}
    speed = number(doc, "speed", sender)
    check(speed > 0, "a clock of speed <= 0", sender)
    return {
        "t0": t0,
        "speed": speed,
        "version": integer(doc, "version", sender),
        "horizon": number(doc, "horizon", sender),
        "end": number(doc, "end", sender, optional=True),
    }
