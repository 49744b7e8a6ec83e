"""A thin-peer as a live service: it publishes its streams in emulated real time and receives results.

A source emits tuple ``i`` of a stream when the emulated clock passes ``i / rate``, in batches (one per
``batch_s`` wall seconds, never past the coordinator's planning horizon), with the very values
``topologies.workload.columns`` gives every engine.  A subscriber records, per subscription, the tuple
indices it received and their latency (wall seconds from the tuple's scheduled emission to its arrival).
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np

from peers.live.connection import Broker, Connection, Dedup, Pressure
from peers.live.counters import Counters
from peers.live.malformed import check, integer, json_object, number
from peers.live.topics import Topics
from peers.live.wire import Batch, check_values, decode_message, encode_message
from topologies import workload
from topologies.model import Scenario

BATCH_S = 0.05  # wall seconds between a source's batches: ~20 messages/s/stream, a few ms of added latency


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
        self.attrs: dict[str, tuple[str, ...]] = {}
        self.clock_doc: dict | None = None
        self.clock_changed = asyncio.Event()
        self.emitted: dict[str, int] = {s.id: 0 for s in self.streams}
        self.seq = 0
        self.finished = not self.streams
        self.max_lag_s = 0.0  # most wall seconds a batch was queued after its last tuple's scheduled emission
        self.home = scenario.home(peer)
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
        tasks += [asyncio.create_task(self._emit(stream.id)) for stream in self.streams]
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
            tuples = sum(len(b) for b in batches)
            nbytes = sum(int(b.wire_bytes.sum()) for b in batches)
            self.counters.count_received(Topics.key(parts), tuples, nbytes, 0.0)
            t0, speed = self.clock_doc["t0"], self.clock_doc["speed"]
            self.pressure.transit(arrival - batches[0].sent)
            for batch in batches:
                self.delivered.setdefault(sub, []).append(batch.indices.copy())
                self.latencies.setdefault(sub, []).append(arrival - (t0 + batch.times / speed))
                self.attrs[sub] = tuple(batch.columns)

    async def _emit(self, stream_id: str) -> None:
        stream = self.scenario.stream(stream_id)
        topic = self.topics.up(self.peer)
        size = self.scenario.tuple_bytes(len(stream.attribute_names))
        while True:
            doc = self.clock_doc
            if doc is None or doc.get("t0") is None:
                self.clock_changed.clear()
                await self.clock_changed.wait()
                continue
            t0, speed, horizon, end = doc["t0"], doc["speed"], doc["horizon"], doc["end"]
            now = (time.time() - t0) * speed
            limit = min(now, horizon) if end is None else min(now, horizon, end)
            count = workload.tuple_count(stream, limit)
            start = self.emitted[stream_id]
            if count > start:
                times = workload.emission_times(stream, start, count)
                batch = Batch(
                    self.peer, 0, doc["version"], -1, ("raw", stream_id), stream_id,
                    np.arange(start, count, dtype=np.int64), times,
                    workload.columns(self.scenario, stream_id, start, count),
                    np.full(count - start, size, dtype=np.int64),
                )  # fmt: skip
                self.seq += 1
                self.counters.count_sent(self.topics.key_of(topic))
                self.connection.publish(topic, encode_message(self.peer, self.seq, [batch]))
                self.max_lag_s = max(self.max_lag_s, time.time() - (t0 + float(times[-1]) / speed))
                self.emitted[stream_id] = count
            if end is not None and limit >= end:
                # the last tuple before the end time is out: say so once the broker has it
                await self.connection.flush()
                self.connection.publish(self.topics.done(self.peer), json.dumps({"stream": stream_id}).encode())
                if all(self._done(s.id, end) for s in self.streams):
                    self.finished = True
                return
            await asyncio.sleep(self.batch_s)

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
