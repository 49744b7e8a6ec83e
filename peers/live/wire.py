"""Wire formats of the live mode: tuple batches (binary) and plans / subscriptions (JSON).

A message carries one or more batches (parts): ``MAGIC``, a 4-byte little-endian header length, a JSON
header (sender, seq, and per part its plan version, epoch, channel, stream, tuple count, attributes and,
for tuples that did not cross, their fate), then per part, in order, the arrays raw (little-endian): tuple
indices (int64), emission times (float64, emulated seconds), due times (float64, emulated seconds: when
each tuple reaches the receiver over the emulated link, peers/live/links.py), one float64 column per
attribute in the header's order, and the emulated wire size of each tuple (int64; the wire size of
docs/ACCOUNTING.md, what the traffic counters add up, not the MQTT payload size).  Several parts per
message let a super-peer send every flow crossing one link direction at once.
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from matcher import parse_condition, parse_query
from peers.live.malformed import check, integer, json_object, number, text
from sharing import plan as sharing_plan
from sharing.plan import Decision, Delivery, Epoch, Flow, Plan
from topologies.errors import InputError
from topologies.loader import query_problem
from topologies.model import Scenario, SubscriptionSpec

MAGIC = b"SGB3"
_LENGTH = struct.Struct("<I")


@dataclass
class Batch:
    """Tuples of one stream travelling on one channel (one part of a message).

    ``channel`` is ``("raw", stream)``, ``("flow", flow id)``, ``("delivery", subscription)``, ``("records",
    subscription)`` (the records a record flow brings down, or those combined from pane rows,
    peers/live/records.py) or ``("panes", subscription)`` (pane rows that did not reach the subscriber's
    super-peer, with their fate);
    ``version`` is the plan version routing it and ``epoch`` the index of its epoch in that plan (-1 for
    an upload, which the source's super-peer splits by epoch); ``(sender, seq)`` identifies the message,
    so a receiver drops the duplicates QoS 1 may bring after a reconnect.  ``due`` is when each tuple
    reaches the node holding the batch (emulated seconds; None: at its emission time).  A batch with a
    ``fate`` (``dropped``, ``lost``) carries tuples that did not cross a link direction: no traffic, only
    the bookkeeping of the copies they would have become (docs/LIVE.md).
    """

    sender: str
    seq: int
    version: int
    epoch: int
    channel: tuple[str, str]
    stream: str
    indices: np.ndarray
    times: np.ndarray
    columns: dict[str, np.ndarray]
    wire_bytes: np.ndarray
    sent: float = 0.0  # wall time (time.time()) its message was encoded
    due: np.ndarray | None = None
    fate: str | None = None

    @property
    def arrivals(self) -> np.ndarray:
        """When each tuple reaches the node holding the batch (emulated seconds)."""
        return self.times if self.due is None else self.due

    def __len__(self) -> int:
        return len(self.indices)

    def take(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.indices[positions], self.times[positions]

    def part(self, positions: np.ndarray, due: np.ndarray | None = None, fate: str | None = None) -> Batch:
        """The tuples at ``positions``; with ``due``, due then; with ``fate``, marked so."""
        indices, times = self.take(positions)
        return Batch(
            self.sender, self.seq, self.version, self.epoch, self.channel, self.stream, indices, times,
            {a: v[positions] for a, v in self.columns.items()}, self.wire_bytes[positions],
            due=self.arrivals[positions] if due is None else due, fate=fate or self.fate,
        )  # fmt: skip


def encode_message(sender: str, seq: int, batches: Sequence[Batch]) -> bytes:
    """One MQTT message carrying ``batches`` (one or more parts, e.g. every flow crossing one link direction
    in a batch period), identified by ``(sender, seq)``."""
    heads = [
        {
            "version": b.version,
            "epoch": b.epoch,
            "channel": list(b.channel),
            "stream": b.stream,
            "n": len(b.indices),
            "attrs": list(b.columns),
            **({"fate": b.fate} if b.fate is not None else {}),
        }
        for b in batches
    ]
    stamp = {"sender": sender, "seq": seq, "sent": time.time(), "parts": heads}
    header = json.dumps(stamp, separators=(",", ":")).encode()
    parts = [MAGIC, _LENGTH.pack(len(header)), header]
    for b in batches:
        parts.append(np.ascontiguousarray(b.indices, "<i8").tobytes())
        parts.append(np.ascontiguousarray(b.times, "<f8").tobytes())
        parts.append(np.ascontiguousarray(b.arrivals, "<f8").tobytes())
        parts.extend(np.ascontiguousarray(b.columns[a], "<f8").tobytes() for a in b.columns)
        parts.append(np.ascontiguousarray(b.wire_bytes, "<i8").tobytes())
    return b"".join(parts)


def decode_message(payload: bytes, publisher: str | None) -> list[Batch]:
    """The parts of a message, each carrying the message's ``(sender, seq)``.

    ``publisher`` is who published it (None: unknown, the header's sender is taken as it is).  Raises
    :class:`MalformedMessage` for a payload that is not a well-formed message of at least one part, or whose
    header names another sender than ``publisher``.
    """
    sender = publisher or "?"
    check(payload.startswith(MAGIC) and len(payload) >= len(MAGIC) + _LENGTH.size, "not a tuple batch", sender)
    (length,) = _LENGTH.unpack_from(payload, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    check(start + length <= len(payload), f"header of {length} bytes past the end of the message", sender)
    header = json_object(payload[start : start + length], sender)
    claimed = text(header, "sender", sender)
    check(publisher is None or claimed == publisher, f"claims to come from {claimed!r}", sender)
    seq, sent = integer(header, "seq", sender), number(header, "sent", sender)
    heads = header.get("parts")
    check(isinstance(heads, list) and heads and all(isinstance(h, dict) for h in heads), "no parts", sender)
    body = memoryview(payload)[start + length :]
    batches, offset = [], 0
    for h in heads:
        n = integer(h, "n", sender)
        channel, attrs = h.get("channel"), h.get("attrs")
        check(isinstance(channel, list) and len(channel) == 2 and all(isinstance(c, str) for c in channel),
              "a part's channel is not two strings", sender)  # fmt: skip
        check(isinstance(attrs, list) and all(isinstance(a, str) for a in attrs) and len(set(attrs)) == len(attrs),
              "a part's attributes are not distinct strings", sender)  # fmt: skip
        fate = h.get("fate")
        check(fate in (None, "dropped", "lost"), "a part's fate is not dropped or lost", sender)
        size = 8 * n * (4 + len(attrs))
        check(offset + size <= len(body), f"body of {len(body)} bytes too short for its parts", sender)
        arrays = [
            np.frombuffer(body[offset + 8 * n * k : offset + 8 * n * (k + 1)], "<f8") for k in range(4 + len(attrs))
        ]
        offset += size
        batches.append(
            Batch(
                sender=claimed,
                seq=seq,
                version=integer(h, "version", sender),
                epoch=integer(h, "epoch", sender, minimum=-1),
                channel=(channel[0], channel[1]),
                stream=text(h, "stream", sender),
                indices=arrays[0].view("<i8"),
                times=arrays[1],
                columns=dict(zip(attrs, arrays[3:-1], strict=True)),
                wire_bytes=arrays[-1].view("<i8"),
                sent=sent,
                due=arrays[2],
                fate=fate,
            )
        )
    check(offset == len(body), f"body of {len(body)} bytes for parts of {offset} bytes", sender)
    return batches


def check_values(batch: Batch, sender: str) -> None:
    """Raises :class:`MalformedMessage` unless ``batch``'s emission and due times are finite, no tuple due
    before its emission, and its tuple indices and wire sizes non-negative (what counters and latencies are
    made of)."""
    check(bool(np.isfinite(batch.times).all()), "emission times that are not finite", sender)
    due = batch.arrivals
    check(bool(np.isfinite(due).all() and (due >= batch.times).all()), "due times not finite or early", sender)
    check(not len(batch) or (batch.indices.min() >= 0 and batch.wire_bytes.min() >= 0), "negative numbers", sender)


def plan_from_json(doc: dict) -> Plan:
    """The inverse of :meth:`Plan.to_json` (predicates re-parsed from their canonical text)."""
    epochs = tuple(
        Epoch(
            float(e["start"]),
            float(e["end"]),
            tuple(_flow(f) for f in e["flows"]),
            tuple(
                Delivery(
                    d["subscription"], d["peer"], d["home"], d["flow"], parse_condition(d["where"]), tuple(d["attrs"])
                )
                for d in e["deliveries"]
            ),
        )
        for e in doc["epochs"]
    )
    decisions = tuple(Decision.from_json(d) for d in doc.get("decisions", ()))
    return Plan(doc["strategy"], doc["scenario"], epochs, decisions, dict(doc.get("rejected", {})))


def plan_to_wire(plan: Plan) -> dict:
    """The compact JSON form of ``plan`` (:meth:`Plan.write_json`: each distinct flow, delivery and
    predicate text once, each epoch as a change to the one before), as a document to embed in a control message."""
    out = io.StringIO()
    plan.write_json(out)
    return json.loads(out.getvalue())


def plan_from_wire(doc: dict) -> Plan:
    """The inverse of :func:`plan_to_wire`; equal flows of different epochs are one shared object."""
    return sharing_plan.plan_from_wire(doc)


def _flow(f: dict) -> Flow:
    trim = tuple((parse_condition(t["where"]), tuple(t["attrs"])) for t in f.get("trim", ()))
    return Flow(
        f["id"],
        f["stream"],
        f["parent"],
        f["origin"],
        tuple(f["path"]),
        parse_condition(f["where"]),
        tuple(f["attrs"]),
        trim,
        f.get("records_of"),
    )


def subscription_to_json(sub: SubscriptionSpec) -> dict:
    return {"id": sub.id, "peer": sub.peer, "at": sub.at, "until": sub.until, "query": sub.query.text}


def subscription_from_json(scenario: Scenario, doc: dict) -> SubscriptionSpec:
    """A run-time subscription checked against ``scenario``.

    Raises :class:`InputError` naming the peer, stream or attribute that does not exist, and
    ``matcher.QueryError`` for a query that does not parse.
    """
    streams = scenario.streams_by_id
    query = parse_query(str(doc["query"]), lambda stream: streams[stream].texts if stream in streams else {})
    peer = str(doc["peer"])
    if peer not in scenario.thin_peers_by_id:
        raise InputError(f"--peer: unknown thin-peer {peer!r} in scenario {scenario.name}")
    problem = query_problem(query, scenario.streams_by_id, scenario.name)
    if problem is not None:
        raise InputError(f"query: {problem}")
    until = doc.get("until")
    return SubscriptionSpec(str(doc["id"]), peer, float(doc["at"]), None if until is None else float(until), query)
