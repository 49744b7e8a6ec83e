"""The frozen Plan every data plane executes (local simulator, Spark, MQTT).

A plan is a sequence of epochs, one per interval between plan changes (subscription arrivals and
departures).  In an epoch, each source stream feeds a tree of :class:`Flow` s: a flow is produced at one
super-peer by an operator (filter by ``predicate``, project to ``attrs``) reading its parent flow, and is
then carried along ``path``.  A :class:`Delivery` hands a subscription its exact result, taken from a flow
available at the subscriber's super-peer.  A tuple is routed by the epoch in force at its *emission* time,
which is what makes every engine's counts identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise

from matcher import Predicate


@dataclass(frozen=True)
class Flow:
    """One stream instance in the network during an epoch.

    Produced at ``origin`` from ``parent`` (a flow available at ``origin``; ``None`` is the raw source
    stream, available at the source's super-peer), keeping the tuples that satisfy ``predicate`` and
    projecting them to ``attrs``.  It then crosses the links ``(path[i], path[i+1])`` and is available at
    every super-peer of ``path`` (``path[0] == origin``; a single-node path crosses no link).

    ``trim`` serves the ``ideal`` bound only: when non-empty, a tuple carries just the union of the
    attribute lists of the ``(predicate, attrs)`` pairs it satisfies, instead of ``attrs``.
    """

    id: str
    stream: str
    parent: str | None
    origin: str
    path: tuple[str, ...]
    predicate: Predicate
    attrs: tuple[str, ...]
    trim: tuple[tuple[Predicate, tuple[str, ...]], ...] = ()

    @property
    def hops(self) -> tuple[tuple[str, str], ...]:
        return tuple(pairwise(self.path))

    def to_json(self) -> dict:
        out = {
            "id": self.id,
            "stream": self.stream,
            "parent": self.parent,
            "origin": self.origin,
            "path": list(self.path),
            "where": self.predicate.to_text(),
            "attrs": list(self.attrs),
        }
        if self.trim:
            out["trim"] = [{"where": p.to_text(), "attrs": list(a)} for p, a in self.trim]
        return out


@dataclass(frozen=True)
class Delivery:
    """Subscription ``subscription`` receives, at thin-peer ``peer``, the tuples of ``flow`` (read at the
    peer's super-peer ``home``; ``None`` is the raw stream, then ``home`` is the source's super-peer) that
    satisfy ``predicate`` (the subscription's own WHERE, so results are exact), projected to ``attrs``."""

    subscription: str
    peer: str
    home: str
    flow: str | None
    predicate: Predicate
    attrs: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            "subscription": self.subscription,
            "peer": self.peer,
            "home": self.home,
            "flow": self.flow,
            "where": self.predicate.to_text(),
            "attrs": list(self.attrs),
        }


@dataclass(frozen=True)
class Epoch:
    """The installed flows and deliveries for tuples emitted in ``[start, end)``.

    ``flows`` lists parents before children.
    """

    start: float
    end: float
    flows: tuple[Flow, ...]
    deliveries: tuple[Delivery, ...]

    def flow(self, flow_id: str) -> Flow:
        return next(f for f in self.flows if f.id == flow_id)

    def to_json(self) -> dict:
        return {
            "start": self.start,
            "end": self.end,
            "flows": [f.to_json() for f in self.flows],
            "deliveries": [d.to_json() for d in self.deliveries],
        }


@dataclass(frozen=True)
class Decision:
    """What the planner did at one event, in words and in structure (for ``run.py plan``)."""

    time: float
    event: str  # "subscribe" or "unsubscribe"
    subscription: str
    summary: str  # one readable line
    reused: str | None = None  # flow id reused, if any
    widened: tuple[str, ...] = ()  # flow ids whose predicate or attributes were widened
    narrowed: tuple[str, ...] = ()  # flow ids narrowed or removed (on departure, or replaced by a re-plan)
    added_bytes_per_s: float = 0.0  # the cost model's estimate for this decision

    def to_json(self) -> dict:
        return {
            "time": self.time,
            "event": self.event,
            "subscription": self.subscription,
            "summary": self.summary,
            "reused": self.reused,
            "widened": list(self.widened),
            "narrowed": list(self.narrowed),
            "added_bytes_per_s": self.added_bytes_per_s,
        }


@dataclass(frozen=True)
class Plan:
    strategy: str
    scenario: str
    epochs: tuple[Epoch, ...]
    decisions: tuple[Decision, ...] = field(default=())

    def epoch_at(self, t: float) -> Epoch | None:
        """The epoch in force for a tuple emitted at time ``t`` (None outside every epoch)."""
        for epoch in self.epochs:
            if epoch.start <= t < epoch.end:
                return epoch
        return None

    def to_json(self) -> dict:
        return {
            "strategy": self.strategy,
            "scenario": self.scenario,
            "epochs": [e.to_json() for e in self.epochs],
            "decisions": [d.to_json() for d in self.decisions],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def to_text(self) -> str:
        """A readable account: each decision, then the flows of each epoch."""
        lines = [f"plan {self.scenario} / {self.strategy}"]
        for d in self.decisions:
            lines.append(f"  t={d.time:g}s {d.event} {d.subscription}: {d.summary}")
        for e in self.epochs:
            lines.append(f"epoch [{e.start:g}, {e.end:g}): {len(e.flows)} flows, {len(e.deliveries)} deliveries")
            for f in e.flows:
                src = f.parent or f"{f.stream}(raw)"
                route = " -> ".join(f.path)
                attrs = ",".join(f.attrs)
                where = f.predicate.to_text()
                lines.append(f"    {f.id} <- {src} at {f.origin}: WHERE {where} SELECT {attrs}; {route}")
            for d in e.deliveries:
                src = d.flow or "raw"
                lines.append(f"    {d.subscription} <- {src} at {d.home} -> {d.peer}")
        return "\n".join(lines)
