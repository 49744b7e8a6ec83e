"""A super-peer as a live service: the operators of the plan (peers/superpeer.py) fed from MQTT topics.

It reads the uploads of its thin-peers and the backbone directions ending at it, runs, for each batch, the
operators that the batch's plan version installs at this super-peer for the batch's epoch, and publishes
what they output: child flows on to their next hop, results to the subscribers' delivery topics.  The
operator code is exactly the simulator's; only the clock and the transport differ.

**Emulated links.**  Every tuple carries its due time: when it reaches this super-peer over the emulated
link it came by.  Received tuples wait here until their due time comes within the lookahead
(``LOOKAHEAD_S`` wall seconds ahead of the clock), and are then served in passes (at most one per batch
period while they arrive ahead of time): the operators run, and each output joins the queue of the link
direction it leaves by (peers/live/links.py), which stamps it with its due time at the next node (or
drops or loses it).  Passes run in due order, so each link direction sees its tuples in the order of
their arrival, as in the simulator; the lookahead absorbs the broker's own delay, so the next node has
them before they are due.  Outputs are sent as one message per topic and pass (one part per flow and
epoch).

Tuples that did not cross a link direction (dropped at a full buffer, lost at a failure) travel on as
parts with a ``fate``: no traffic, served at once, so every copy they would have become (child flows,
deliveries) is counted as dropped or lost for its subscription.

**Record flows and pane trees** (peers/live/record_operators.py, mixed into the service): the records
and pane rows made here, held, passed on and combined.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from dataclasses import dataclass

import numpy as np

from network.emulated import processor_downs, processor_nodes, processor_specs
from network.linkrule import to_seconds, to_ticks
from network.meter import bin_width, load_bin
from network.routing import Network
from peers.live.connection import Broker, Connection, Dedup, Pressure
from peers.live.counters import Counters
from peers.live.links import CARRIED, FATES, LOOKAHEAD_S, Direction, LinkTable
from peers.live.malformed import MalformedMessage, check, integer, json_object, number
from peers.live.plans import Clock, PlanBook, PlanVersion
from peers.live.processors import LAST, Processor, operator_work
from peers.live.record_operators import RecordOperators
from peers.live.records import OperatorInputs, Schedule
from peers.live.thinpeer_service import BATCH_S
from peers.live.topics import Topics
from peers.live.wire import Batch, check_values, decode_message, encode_message
from peers.superpeer import ChannelKey, Output, flow_key, raw_key
from sharing.plan import Flow


@dataclass(frozen=True)
class Arrival:
    """A received data message: its topic (whole, and :meth:`Topics.parse`'d), its parts, when it arrived
    (emulated, and wall time)."""

    topic: str
    parts: tuple[str, ...]
    batches: list[Batch]
    arrival: float
    wall: float


@dataclass(frozen=True)
class Job:
    """A batch that operators at this super-peer read, waiting for its processor in the current pass: what
    they output (computed at once, sent on when each tuple leaves the processor), each tuple's operations,
    and the number that orders it among ties (:meth:`PlanBook.processor_number`)."""

    pv: PlanVersion
    epoch: int
    batch: Batch
    outputs: list[Output]
    work: np.ndarray
    number: int


class SuperPeerService(RecordOperators):
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
        self.lookahead_s = LOOKAHEAD_S
        self.links = LinkTable.of(scenario)
        # this super-peer's processor, when the scenario emulates them (peers/live/processors.py)
        # (an unlimited one too: it delays nothing, and counts the operations, as the simulator's does)
        cpu, _, buffer = processor_specs(scenario).get((node, node), (math.inf, 0.0, math.inf))
        downs = np.array(processor_downs(scenario).get((node, node), []), dtype=np.float64).reshape(-1, 2)
        emulated = node in processor_nodes(scenario)
        self.processor = Processor(cpu, buffer, downs, load_bin(scenario.duration)) if emulated else None
        self.costs = scenario.cpu_costs
        self.jobs: list[Job] = []  # this pass's batches waiting for the processor
        self.pending: list[Batch] = []  # received tuples waiting for their due time
        # the emulated time the current pass reaches: its limit, or the latest a tuple it served left the
        # processor (what is due by then goes out in the pass, in order)
        self.limit = -math.inf
        # record flows: each subscription's records, the input copies the operators here received, and the
        # records whose windows close past what the clock promised (:meth:`_hold`); the rows of the pane trees
        # whose roots are here, by pane class
        self.schedules: dict[str, Schedule] = {}
        self.panes: dict[tuple, tuple[Flow, Schedule]] = {}  # pane class -> a root of it, its rows
        # per pane class, the input its roots here received lately, with the version, epoch and root reading
        # it: a stop cuts a pane short, whose rows the tuples before the stop complete (:meth:`_cut_panes`)
        self.recent: dict[tuple, list[tuple[PlanVersion, int, Flow, Batch]]] = {}
        self.inputs = OperatorInputs()
        self.unripe: list[Batch] = []
        self.horizon = -math.inf  # of the latest clock whose plan version is here
        self.end = math.inf
        self.wake = asyncio.Event()
        self.closing = False
        self.outgoing: dict[str, tuple[Direction, list[Batch]]] = {}  # topic -> its direction, its next parts
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
        serving = asyncio.create_task(self._serve())
        try:
            await self.connection.run()
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    async def close(self) -> None:
        self.closing = True
        self.wake.set()
        await self.connection.close()

    async def _serve(self) -> None:
        """Serve the received tuples as they come due: once the earliest is due within the lookahead, a pass
        serves everything due within one batch period more (so passes come at most once a batch period while
        tuples arrive ahead of time, and at once for tuples that arrive late)."""
        while not self.closing:
            clock = self.clock
            if clock is None or not self.pending:
                self.wake.clear()
                await self.wake.wait()
                continue
            first = min(float(b.arrivals.min()) for b in self.pending)
            delay = clock.wall(first) - self.lookahead_s - time.time()
            if delay > 0:  # nothing due yet: wait, unless something due earlier comes in
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), delay)
                continue
            self._serve_due(clock.now() + (self.lookahead_s + self.flush_s) * clock.speed)
            await asyncio.sleep(0)  # let the messages in

    def _serve_due(self, limit: float) -> None:
        """Route every pending tuple due by emulated time ``limit``, and send what it outputs."""
        self.limit = limit
        ready, waiting = [], []
        for batch in self.pending:
            due = batch.arrivals <= limit
            if due.all():
                ready.append(batch)
            elif due.any():
                ready.append(batch.part(np.flatnonzero(due)))
                waiting.append(batch.part(np.flatnonzero(~due)))
            else:
                waiting.append(batch)
        self.pending = waiting
        for batch in ready:
            self._route(batch)
        self._flush()

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
        finally:  # what did not cross goes on at once (a malformed message must not keep it waiting)
            if self.outgoing:
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
        carried = [b for b in batches if b.fate is None]
        tuples = sum(len(b) for b in carried)
        nbytes = sum(int(b.wire_bytes.sum()) for b in carried)
        # the timeline counts a tuple when it left the sender (its due time here, less the link's latency)
        latency = self.links.specs[(message.parts[1], self.node)][1] if message.parts[0] == "link" else 0.0
        departures = np.concatenate([b.arrivals for b in carried]) - latency if carried else np.zeros(0)
        sizes = np.concatenate([b.wire_bytes for b in carried]) if carried else np.zeros(0, np.int64)
        self.counters.count_received(Topics.key(message.parts), tuples, nbytes, message.arrival, departures, sizes)
        for batch in batches:
            if batch.fate is not None:
                self._route(batch)  # no timing: its copies are accounted for at once
            elif len(batch):
                self.pending.append(batch)
                self.wake.set()

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
        if flow.aggregate is not None:  # records: the window as the index, the group's values as the columns
            groups = set(pv.scenario.subscription(flow.aggregate).query.groups)
            check(columns == groups, f"records of {flow.id} without their group values", sender)
            return
        if flow.panes is not None:  # pane rows: the last input tuple as the index, no columns
            check(not columns, f"pane rows of {flow.id} with columns", sender)
            return
        operator = installed.operators.get((self.node, flow_key(flow.id)))
        check(operator is None or operator.available <= columns, f"flow {flow.id} without its attributes", sender)

    def _on_control(self, name: str, payload: bytes) -> None:
        if name == "plan":
            version = self.book.add(payload)
            if version is None:
                return
            if version.version == 0 and version.plan.epochs:  # the first tuples must not wait for an install
                self.book.installed(0, 0)
            self._schedule_records(version)  # before the clock starts: the central evaluation takes a while
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
                version, horizon = integer(doc, "version", "coordinator"), number(doc, "horizon", "coordinator")
                end = number(doc, "end", "coordinator", optional=True)
                self.clock = Clock(t0, speed)
                if version in self.book.versions:  # a horizon the plan this node knows was made for
                    self.horizon = max(self.horizon, horizon)
                if end is not None and end != self.end:
                    self._cut_panes(end)
                self.end = math.inf if end is None else end
                self._forget_panes()
                self._ripen()
                # a pass reaches lookahead and a batch period ahead: a tuple comes at most that late, twice over
                self.links.keep(2 * (self.lookahead_s + self.flush_s) * speed + 1.0)
                if self.processor is not None:
                    self.processor.queue.keep_s = self.links.keep_s
                self.wake.set()  # tuples received before the clock may be due
        elif name == "collect":
            doc = json_object(payload, "coordinator")
            round_ = integer(doc, "round", "coordinator")
            self.connection.publish(self.topics.stats(self.node), self.stats(round_, doc.get("inputs") is True))

    def stats(self, round_: int, inputs: bool = False) -> bytes:
        """This node's counters for collect round ``round_``; with ``inputs``, also the input copies its
        record-flow and pane operators received (the coordinator asks for them once the run is over)."""
        doc = {
            "node": self.node,
            "round": round_,
            "backlog": self.connection.max_backlog,
            "outbox": self.connection.max_outbox,
            "waiting": self.max_held,
            # received, not yet due, or records waiting for the horizon: still on their way
            "holding": sum(len(b) for b in self.pending) + sum(len(b) for b in self.unripe),
            "transit_s": round(self.pressure.max_transit_s, 3),
            "reconnects": self.connection.reconnects,
            "malformed": self.connection.rejects.to_json(),
            **self.counters.to_json(),
            "link_dropped": self._per_link(self.links.dropped),
            "link_lost": self._per_link(self.links.lost),
        }
        if self.processor is not None:
            doc["processor"] = self.processor.to_json()
        if inputs and (self.schedules or self.panes):
            doc["aggregated"] = self.inputs.to_json()
        return json.dumps(doc, separators=(",", ":")).encode()

    def _per_link(self, counts: dict[Direction, int]) -> dict[str, int]:
        """``counts`` of the backbone directions, by their topic (the access ones are the subscribers')."""
        backbone = self.book.base.super_peers
        return {self.topics.key_of(self.topics.link(a, b)): n for (a, b), n in sorted(counts.items()) if b in backbone}

    def _route(self, batch: Batch) -> None:
        pv = self.book.versions[batch.version]
        if batch.channel[0] == "records":  # combined from pane rows here: down to the subscriber
            sub = batch.channel[1]
            peer = pv.subscribers[sub]
            self._send(self.topics.down(peer, sub), (self.node, peer), batch)
            return
        if batch.channel[0] == "raw":
            # an upload: split it by the epoch in force at each tuple's emission time
            epochs = pv.epoch_of(batch.times)
            for e in np.unique(epochs):
                if e < 0:
                    continue  # emitted while no subscription exists: uploaded, routed nowhere
                positions = np.flatnonzero(epochs == e)
                self._at_node(pv, int(e), raw_key(batch.stream), batch.part(positions), forward=False)
            return
        self._at_node(pv, batch.epoch, flow_key(batch.channel[1]), batch, forward=True)

    def _at_node(self, pv: PlanVersion, epoch: int, key: ChannelKey, batch: Batch, forward: bool) -> None:
        """``batch`` of channel ``key`` is here: run this node's operator on it, then pass it on."""
        installed = self.book.installed(pv.version, epoch)
        operator = installed.operators.get((self.node, key))
        if key.kind == "flow" and installed.flows[key.name].aggregate is not None:
            self._pass_records(pv, epoch, installed.flows[key.name], operator, batch)
            return
        if key.kind == "flow" and installed.flows[key.name].panes is not None:
            self._pass_panes(pv, epoch, installed.flows[key.name], operator, batch)
            return
        if operator is not None:
            outputs = operator.process(len(batch), batch.columns)
            if self.processor is not None and batch.fate is None and len(batch):
                # the operators read it as it leaves the processor (:meth:`_process`)
                work = operator_work(operator, outputs, self.costs, len(batch))
                self._aggregation_work(pv, installed.flows, operator, outputs, batch, work)
                number = self.book.processor_number(pv.version, epoch, self.node, key)
                self.jobs.append(Job(pv, epoch, batch, outputs, work, number))
            else:
                self._output(pv, epoch, batch, outputs, batch.arrivals, batch.fate)
        if forward and key.kind == "flow":
            path = installed.flows[key.name].path
            position = path.index(self.node)
            if position + 1 < len(path):
                self._send(self.topics.link(self.node, path[position + 1]), (self.node, path[position + 1]), batch)

    def _output(
        self, pv: PlanVersion, epoch: int, batch: Batch, outputs: list[Output], due: np.ndarray, fate: str | None
    ) -> None:
        """What the operators output of ``batch``, each tuple read at ``due``: child flows on from here,
        deliveries to their subscribers."""
        for out in outputs:
            if not len(out.positions):
                continue
            indices, times = batch.take(out.positions)
            kind, name = out.target.kind, out.target.name
            child = Batch(
                self.node, 0, pv.version, epoch, (kind, name), batch.stream, indices, times,
                out.columns, out.wire_bytes, due=due[out.positions], fate=fate,
            )  # fmt: skip
            if kind == "flow":
                flow = self.book.installed(pv.version, epoch).flows[name]
                if flow.aggregate is not None:  # the input of a record flow's operator
                    self._aggregate(pv, epoch, flow, child)
                elif flow.panes is not None:  # the input of a pane tree's root (a tuple operator reads no other)
                    self._fold(pv, epoch, flow, child)
                else:
                    self._at_node(pv, epoch, flow_key(name), child, forward=True)
            else:
                peer = pv.subscribers[name]
                self._send(self.topics.down(peer, name), (self.node, peer), child)

    def _process(self) -> None:
        """This pass's batches through the processor, every tuple in order of its arrival (ties as the
        simulator orders them: by the processor's channel, then tuple index), then what the operators output
        of each: due when it left the processor, or marked dropped (a full input buffer) or lost (a
        failure of this super-peer).  A child flow read here again queues anew."""
        while self.jobs:
            jobs, self.jobs = self.jobs, []
            arrivals = to_ticks(np.concatenate([job.batch.arrivals for job in jobs]))
            numbers = np.concatenate([np.full(len(job.batch), job.number, np.int64) for job in jobs])
            indices = np.concatenate([job.batch.indices for job in jobs])
            order = np.lexsort((indices, numbers, arrivals))
            wire = np.concatenate([job.batch.wire_bytes for job in jobs]).astype(np.int64)
            work = np.concatenate([job.work for job in jobs])
            due_sorted, fate_sorted = self.processor.serve(
                np.ascontiguousarray(arrivals[order]), np.ascontiguousarray(wire[order]),
                np.ascontiguousarray(work[order]),
            )  # fmt: skip
            due, fate = np.empty_like(due_sorted), np.empty_like(fate_sorted)
            due[order], fate[order] = due_sorted, fate_sorted
            left = due_sorted[fate_sorted == CARRIED]
            if len(left):  # a record its tuples complete is due no later: it goes with them
                self.limit = max(self.limit, float(to_seconds(left.max())))
            start = 0
            for job in jobs:
                stop = start + len(job.batch)
                self._processed(job, to_seconds(due[start:stop]), fate[start:stop])
                start = stop

    def _processed(self, job: Job, due: np.ndarray, fate: np.ndarray) -> None:
        """The outputs of ``job`` once its tuples left the processor (``due``) or did not (``fate``)."""
        for code, name in ((CARRIED, None), *FATES.items()):
            rows = fate == code
            if not rows.any():
                continue
            outputs = job.outputs
            if not rows.all():
                outputs = []
                for out in job.outputs:
                    keep = rows[out.positions]
                    columns = {a: v[keep] for a, v in out.columns.items()}
                    outputs.append(Output(out.target, out.positions[keep], columns, out.wire_bytes[keep]))
            self._output(job.pv, job.epoch, job.batch, outputs, due if name is None else job.batch.arrivals, name)

    def _send(self, topic: str, direction: Direction, batch: Batch) -> None:
        self.outgoing.setdefault(topic, (direction, []))[1].append(batch)

    def _flush(self) -> None:
        """One message per topic with everything buffered for it (after the processor, for what waits for
        it), each tuple through its link's queue."""
        self._process()
        # the topics of one link direction share its queue: paced together, so that what reaches it at one
        # instant is served in the simulator's order whichever topic carries it (the records of several
        # subscriptions of one thin-peer, down its access link)
        by_direction: dict[Direction, list[str]] = {}
        for topic, (direction, _) in self.outgoing.items():
            by_direction.setdefault(direction, []).append(topic)
        paced: dict[str, list[Batch]] = {}
        for direction, topics in by_direction.items():
            owned = [(topic, b) for topic in topics for b in self.outgoing[topic][1]]
            for topic, part in zip(*self._paced_owned(direction, owned), strict=True):
                paced.setdefault(topic, []).append(part)
        for topic in self.outgoing:
            parts = paced.get(topic, [])
            if not parts:
                continue
            self.seq += 1
            self.counters.count_sent(self.topics.key_of(topic))
            self.connection.publish(topic, encode_message(self.node, self.seq, parts))
        self.outgoing.clear()

    def _paced_owned(self, direction: Direction, owned: list[tuple[str, Batch]]) -> tuple[list[str], list[Batch]]:
        """:meth:`_paced` of the batches of ``owned`` (each with its topic): the parts, each with its batch's."""
        topics: list[str] = []
        parts: list[Batch] = []
        for k, part in self._paced(direction, [b for _, b in owned]):
            topics.append(owned[k][0])
            parts.append(part)
        return topics, parts

    def _paced(self, direction: Direction, batches: list[Batch]) -> list[tuple[int, Batch]]:
        """``batches`` after the queue of ``direction``: the tuples it carries, due at the far end, and those
        it dropped or lost as parts with that fate (tuples with a fate already pass as they are), each part
        with the position in ``batches`` of the batch it is of."""
        fresh_at = [k for k, b in enumerate(batches) if b.fate is None and len(b)]
        fresh = [batches[k] for k in fresh_at]
        out = [(k, b) for k, b in enumerate(batches) if b.fate is not None]
        if not fresh:
            return out
        arrivals = np.concatenate([b.arrivals for b in fresh])
        order = np.lexsort((*self._tie_keys(fresh), arrivals))  # FIFO by arrival, ties as :meth:`_tie_keys` says
        wire = np.concatenate([b.wire_bytes for b in fresh])
        due_sorted, fate_sorted = self.links.send(direction, arrivals[order], wire[order])
        due, fate = np.empty_like(due_sorted), np.empty_like(fate_sorted)
        due[order], fate[order] = due_sorted, fate_sorted
        start = 0
        for k, batch in zip(fresh_at, fresh, strict=True):
            stop = start + len(batch)
            fates = fate[start:stop]
            carried = np.flatnonzero(fates == CARRIED)
            if len(carried):
                out.append((k, batch.part(carried, due=due[start:stop][carried])))
            for code, name in FATES.items():
                stopped = np.flatnonzero(fates == code)
                if len(stopped):
                    out.append((k, batch.part(stopped, fate=name)))
            start = stop
        return out

    def _tie_keys(self, batches: list[Batch]) -> tuple[np.ndarray, ...]:
        """The keys (least significant first, for :func:`numpy.lexsort`) that order the tuples of ``batches``
        reaching a link direction at the same instant: where a plan has record or pane flows, the
        simulator's (by the number of the flow's channel, then by index: a pane row's is its last input
        tuple, so the rows of one pane come in order however the passes made them), since the records of
        windows closing together and the rows of panes closing together tie; elsewhere the order served
        here (docs/LIVE.md, "Order")."""
        if not any(self.book.aggregates(b.version) for b in batches):
            return ()
        ranks = [self._rank(b) for b in batches]
        ranked = np.repeat(np.array(ranks, dtype=np.int64), [len(b) for b in batches])
        return np.concatenate([b.indices for b in batches]), ranked

    def _rank(self, batch: Batch) -> int:
        """Where ``batch``'s tuples come among ties (:meth:`_tie_keys`): its flow's channel, or the channel of
        the delivery whose records it carries down (records of several subscriptions of one thin-peer tie
        at its access link)."""
        kind, name = batch.channel[0], batch.channel[1]
        if kind == "flow":
            return self.book.flow_number(batch.version, batch.epoch, name)
        if kind == "records":
            return self.book.delivery_number(batch.version, batch.epoch, name)
        return LAST
