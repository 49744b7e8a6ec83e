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
``fate`` and are recorded as such.  With ``json_results`` it also republishes each result as JSON lines on
``results/<peer>/<subscription>``, for plain MQTT clients.  A subscription that a record flow serves
receives records (channel ``("records", sub)``, peers/live/records.py), kept apart from tuples, each with
its latency from its window's closing; one whose records are combined from pane rows is also told of the
rows that did not reach its super-peer (channel ``("panes", sub)``, parts with a fate only).

An **input** stream (``serve --input``) is not generated: its tuples are JSON objects that any MQTT client
publishes on ``in/<stream>``, one per object, each emitted at the emulated time it arrives (never before
the previous one); they wait for the planning horizon as generated tuples do, and are kept (:attr:`inputs`)
so that the run's report can check every delivery against them.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import numpy as np

from peers.live.connection import Broker, Connection, Dedup, Pressure
from peers.live.counters import Counters
from peers.live.links import CARRIED, FATES, LOOKAHEAD_S, LinkTable
from peers.live.malformed import MalformedMessage, check, integer, json_object, number
from peers.live.records import ShippedRecords
from peers.live.topics import Topics
from peers.live.wire import Batch, check_values, decode_message, encode_message
from topologies import workload
from topologies.errors import shown
from topologies.model import Scenario

BATCH_S = 0.05  # wall seconds between a source's batches: ~20 messages/s/stream


class ThinPeerService:
    """Thin-peer ``peer`` of ``scenario``; ``run()`` until ``close()``.

    The clock, the horizon and the end time come from the coordinator's retained ``ctl/clock`` message.
    """

    def __init__(
        self,
        peer: str,
        scenario: Scenario,
        broker: Broker,
        topics: Topics,
        batch_s: float = BATCH_S,
        run: str = "",
        json_results: bool = False,
        inputs: frozenset[str] = frozenset(),
    ):
        self.peer = peer
        self.run_id = run  # the coordinator's clock messages name it (a retained clock of another run is ignored)
        self.scenario = scenario
        self.topics = topics
        self.batch_s = batch_s
        self.streams = tuple(s for s in scenario.streams if s.source == peer)
        self.json_results = json_results
        # input streams: per stream the tuples received and not yet published (emission times, rows), and
        # every tuple published, in index order (emission times, and a column per attribute)
        self.inputs = {s.id: Recording(s.attribute_names) for s in self.streams if s.id in inputs}
        self.late_inputs = 0  # input tuples that arrived after the end of the run
        self.counters = Counters(1.0)
        self.dedup = Dedup()
        self.delivered: dict[str, list[np.ndarray]] = {}
        self.latencies: dict[str, list[np.ndarray]] = {}
        self.fated: dict[str, dict[str, list[np.ndarray]]] = {"dropped": {}, "lost": {}}  # fate -> sub -> indices
        self.records = ShippedRecords()
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
            [topics.control("clock"), topics.downs(peer), topics.control("collect"), *map(topics.input, self.inputs)],
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
        elif parts[:1] == ("in",) and len(parts) == 2 and parts[1] in self.inputs:
            self._take_input(parts[1], payload)
        elif parts[:1] == ("down",) and len(parts) == 3:
            batches = decode_message(payload, self.home)
            sub = parts[2]
            channels = (("delivery", sub), ("records", sub), ("panes", sub))
            check(all(b.channel in channels for b in batches), f"not a delivery of {sub}", self.home)
            check(all(b.fate is not None for b in batches if b.channel[0] == "panes"), "pane rows delivered", self.home)
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
                if batch.channel[0] in ("records", "panes"):
                    self.records.add(sub, batch, now)
                    continue
                if batch.fate is not None:
                    self.fated[batch.fate].setdefault(sub, []).append(batch.indices.copy())
                    continue
                self.delivered.setdefault(sub, []).append(batch.indices.copy())
                self.latencies.setdefault(sub, []).append(np.maximum(batch.arrivals, now) - batch.times)
                self.attrs[sub] = tuple(batch.columns)
                if self.json_results and len(batch):
                    self._publish_results(sub, batch)

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
                recording = self.inputs.get(stream.id)
                start = self.emitted[stream.id]
                if recording is not None:
                    times, values = recording.publish(limit)
                    count = start + len(times)
                else:
                    count = workload.tuple_count(stream, limit)
                    if count > start:
                        times = workload.emission_times(stream, start, count)
                        values = workload.columns(self.scenario, stream.id, start, count)
                if count <= start:
                    continue
                self.emitted[stream.id] = count
                size = self.scenario.tuple_bytes(len(stream.attribute_names))
                batches.append(
                    Batch(
                        self.peer, 0, doc["version"], -1, ("raw", stream.id), stream.id,
                        np.arange(start, count, dtype=np.int64), times, values,
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
        if stream_id in self.inputs:
            return not self.inputs[stream_id].waiting_before(end)
        return self.emitted[stream_id] >= workload.tuple_count(self.scenario.stream(stream_id), end)

    def _now(self) -> float:
        """The emulated time now (0 before the clock starts)."""
        doc = self.clock_doc
        if doc is None or doc.get("t0") is None:
            return 0.0
        return max(0.0, (time.time() - doc["t0"]) * doc["speed"])

    def _take_input(self, stream_id: str, payload: bytes) -> None:
        """Tuples of an input stream, as a client published them (checked whole first: a message with one bad
        tuple is dropped and counted, none of it taken); each is emitted now."""
        stream = self.scenario.stream(stream_id)
        rows = input_rows(payload, stream)
        now = self._now()
        end = None if self.clock_doc is None else self.clock_doc.get("end")
        if end is not None and now >= end:
            self.late_inputs += len(rows)
            return
        self.inputs[stream_id].take(now, rows)

    def _publish_results(self, sub: str, batch: Batch) -> None:
        """A result batch as JSON lines on ``results/<peer>/<sub>``: each tuple's index ``i`` in its stream,
        its emission time ``t`` (emulated seconds) and its ``values`` (whole numbers for an ``int``
        attribute; apart, so that no attribute name can clash with ``i`` or ``t``)."""
        stream = self.scenario.streams_by_id.get(batch.stream)
        kinds = {a.name: a for a in stream.attributes} if stream is not None else {}
        names = list(batch.columns)
        columns = [_json_column(kinds.get(n), batch.columns[n]) for n in names]
        lines = [
            json.dumps({"i": i, "t": t, "values": dict(zip(names, row, strict=True))})
            for i, t, *row in zip(batch.indices.tolist(), batch.times.tolist(), *columns, strict=True)
        ]
        self.connection.publish(self.topics.results(self.peer, sub), "\n".join(lines).encode())


def _json_column(attribute, values: np.ndarray) -> list:
    """A column as JSON shows it: whole numbers for an ``int`` attribute, a ``string`` one's texts."""
    if attribute is not None and attribute.type == "int":
        return values.astype(np.int64).tolist()
    if attribute is not None and attribute.type == "string":
        return [attribute.values[int(v)] for v in values.tolist()]
    return values.tolist()


class Recording:
    """An input stream's tuples: those waiting to be published (emission times and rows, in arrival order)
    and those published, numbered in that order."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.waiting: list[tuple[float, list[float]]] = []
        self.last = 0.0  # the latest emission time given: time never goes back within a stream
        self.times: list[float] = []
        self.columns: dict[str, list[float]] = {n: [] for n in names}

    def take(self, now: float, rows: list[list[float]]) -> None:
        self.last = max(self.last, now)
        self.waiting += [(self.last, row) for row in rows]

    def waiting_before(self, end: float) -> bool:
        return any(t < end for t, _ in self.waiting)

    def publish(self, limit: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The tuples waiting with an emission time before ``limit`` (the horizon), now published."""
        cut = next((k for k, (t, _) in enumerate(self.waiting) if t >= limit), len(self.waiting))
        taken, self.waiting = self.waiting[:cut], self.waiting[cut:]
        times = np.array([t for t, _ in taken], dtype=np.float64)
        values = {n: np.array([row[k] for _, row in taken], dtype=np.float64) for k, n in enumerate(self.names)}
        self.times += times.tolist()
        for n in self.names:
            self.columns[n] += values[n].tolist()
        return times, values


MAX_INPUT_TUPLES = 100_000  # per message: a bigger one is refused (a client should send several)


def input_rows(payload: bytes, stream) -> list[list[float]]:
    """The tuples of an input message: a JSON object, an array of objects, or objects one per line, each with
    exactly the stream's attributes: finite numbers (whole for an ``int`` attribute), a ``string``
    attribute's one of its values (as its code), in schema order.
    Raises :class:`MalformedMessage` for anything else."""
    sender = "an input client"
    try:
        text = payload.decode("utf-8")
        try:
            found = json.loads(text)
            objects = found if isinstance(found, list) else [found]
        except ValueError:
            objects = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedMessage("not JSON (an object, an array of objects, or one object per line)", sender) from None
    check(0 < len(objects) <= MAX_INPUT_TUPLES, f"expected 1 to {MAX_INPUT_TUPLES:,} tuples", sender)
    names = stream.attribute_names
    codes = {a.name: {text: float(k) for k, text in enumerate(a.values)} for a in stream.attributes}
    rows = []
    for item in objects:
        check(isinstance(item, dict) and set(item) == set(names), f"expected objects with exactly {names}", sender)
        row = []
        for attribute in stream.attributes:
            value = item[attribute.name]
            if attribute.type == "string":  # a text among the attribute's values, sent as its code
                known = isinstance(value, str) and value in codes[attribute.name]
                check(known, f"{attribute.name}: not one of its values: {shown(value)}", sender)
                row.append(codes[attribute.name][value])
                continue
            ok = _finite(value)
            integral = attribute.type != "int" or (ok and float(value).is_integer())
            check(ok and integral, f"{attribute.name}: not a {attribute.type}: {shown(value)}", sender)
            row.append(float(value))
        rows.append(row)
    return rows


def _finite(value: object) -> bool:
    """Whether ``value`` is a number a float holds finitely (JSON's integers have no bound)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


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
