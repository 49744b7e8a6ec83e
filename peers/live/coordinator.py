"""The coordinator: owns the plan, the emulated clock and the planning horizon; answers the CLI.

Plan changes take effect at emulated times the sources have not reached yet: the coordinator promises,
with each ``ctl/clock`` message, a horizon ``H`` (sources emit only tuples emitted before ``H``), and a
run-time subscription or departure takes effect at the largest horizon already promised.  That is the
barrier that lets every tuple be routed by the epoch in force at its emission time.  It is also the
backpressure: while a super-peer or thin-peer reports congestion (``ctl/load``: its incoming queue over the
high-water mark, or its messages arriving more than a few seconds late) the horizon stands still, so
sources pause until it has caught up and every queue stays bounded.

At the end it sets the end time, waits until the sources are done and nothing is in flight (every data
topic received as many messages as were sent, twice in a row), and turns the nodes' counters into a
``StrategyRun``.

A super-peer whose process died (its last will, confirmed by ``gone``) is taken out of the backbone: the
subscriptions it made unreachable end at the horizon (reported in ``failures``), the others are planned
again on the remaining network from the horizon on (earlier epochs stay as they were).

A plan's record flows and pane trees (aggregate subscriptions whose records, or partial states, travel
instead of their input, peers/live/records.py) run only where every node can compute the records before the
clock starts: an aggregate subscribed at run time, one over an ``--input`` stream and every one in a run
until a signal (``--forever``) is served its input instead, delivered whole (off a pane tree's input twins,
where it reads one): its subscriber computes the records (:func:`~peers.live.records.input_served`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from network.emulated import processor_nodes
from network.exactness import checked
from network.meter import ProcessorTally, StrategyRun, bin_width, load_bin
from network.routing import Network
from peers.live.access import OPERATOR
from peers.live.connection import LEASE_S, Broker, Connection, raise_failed
from peers.live.malformed import check, integer, json_object, number, text
from peers.live.plans import PlanBook, plan_message
from peers.live.processors import tally_of
from peers.live.records import aggregated_at, checked_inputs, input_served
from peers.live.thinpeer_service import ThinPeerService
from peers.live.topics import Topics
from peers.live.wire import subscription_from_json
from peers.subscriber import with_records
from sharing import make_plan
from sharing.plan import Epoch, Plan
from topologies import workload
from topologies.errors import EmulatorError, EngineError, InputError, shown
from topologies.expected import Expected, expected_results, record_schedule
from topologies.loader import PEER_ID
from topologies.model import Scenario, SubscriptionSpec

TICK_S = 0.1  # wall seconds between horizon updates
LEAD_S = 1.5  # wall seconds of emission the horizon runs ahead of the clock (sources publish ahead)
MAX_QUERY_CHARS = 65536  # a run-time query is planned in the coordinator's event loop: keep it a query
GONE_WAIT_S = 2.0  # how long a last will waits for ``gone`` to confirm that the process really exited
TRAFFIC_WAIT_S = 2.0  # how long a traffic request waits for every node's fresh counters
COUNTERS_S = 1.0  # wall seconds between the counters asked of every node while the run goes: what a node
# killed outright had received (its last counters) is missing at most this much
SHARED = "shares flows with other subscriptions, whose conditions are not shown"  # a thin-peer's view


@dataclass(frozen=True)
class Failure:
    """A dead super-peer taken out of the plan at emulated time ``at``: the subscriptions that could not be
    re-routed (subscriber or source behind it, or cut off) and those planned again around it."""

    node: str
    at: float
    lost: tuple[str, ...]
    replanned: tuple[str, ...]
    version: int

    def to_json(self) -> dict:
        return {
            "node": self.node,
            "at": self.at,
            "lost_subscriptions": list(self.lost),
            "replanned_subscriptions": list(self.replanned),
            "plan_version": self.version,
        }


class Coordinator:
    def __init__(
        self,
        scenario: Scenario,
        strategy: str,
        broker: Broker,
        topics: Topics,
        speed: float,
        book: PlanBook,
        end: float | None,
        gone: Callable[[str], bool] | None = None,
        run: str = "",
        secure: bool = False,
        inputs: frozenset[str] = frozenset(),
    ):
        """``inputs``: the streams clients publish (``serve --input``), whose values come at run time."""
        self.scenario = scenario
        self.inputs = inputs
        self.run_id = run  # stamped on clock and plan messages: nodes ignore a previous run's retained ones
        self.strategy = strategy
        self.topics = topics
        self.speed = speed
        self.book = book
        self.network = Network.of(scenario)
        self.thin_peer_ids = scenario.thin_peers_by_id.keys()
        self.directions = frozenset(self.network.directions)  # the whole backbone's, failed nodes included
        self.secure = secure  # requests are authorised by identity (the broker authenticates it)
        self.end = end
        self.t0 = float("inf")  # emulated time 0 is set once every super-peer is connected (see run)
        self.alive: set[str] = set()
        self.horizon = 0.0
        self.subscriptions: tuple[SubscriptionSpec, ...] = scenario.subscriptions
        self.runtime_ids: list[str] = []
        self.version = 0
        self.stats: dict[str, dict] = {}
        self.aggregated: dict[str, dict] = {}  # super-peer -> the input copies its record-flow operators received
        self.round = 0
        self.dead: list[str] = []
        self.ready: dict[str, int] = {}  # super-peer -> latest plan version it decoded
        self.gone = gone  # True when a super-peer's process has exited (None: nodes cannot die alone)
        self.failures: list[Failure] = []
        self.lost_ids: set[str] = set()  # subscriptions cut off by a failure: never planned again
        self._checks: set[asyncio.Future] = set()  # pending confirmations of last wills, traffic replies
        self.watchers: dict[str, str] = {}  # run-time subscription -> the reply topic of the client that made it
        self.congested: set[str] = set()  # nodes whose incoming queue is over the high-water mark
        self.late: dict[str, float] = {}  # node -> time.monotonic() until which its ``late`` report holds
        self.held_s = 0.0  # wall seconds the horizon stood still for them
        self.max_congested = 0  # most nodes congested (or late) at once
        self.connection = Connection(
            broker,
            "coordinator",
            [
                topics.request("+"),
                topics.control("stats/+"),
                topics.control("alive/+"),
                topics.control("ready/+"),
                topics.control("load/+"),
            ],
            self._on_message,
        )
        scenario, plan = self._plan(self.subscriptions)
        self._publish(0, scenario, plan)
        # replaces a previous run's retained clock: nobody emits before this run's clock starts
        reset = {"run": run, "t0": None}
        self.connection.publish(self.topics.control("clock"), json.dumps(reset).encode(), retain=True)

    # ---- clock and plan ---------------------------------------------------------------------------------

    def now(self) -> float:
        return (time.time() - self.t0) * self.speed if self.t0 != float("inf") else -float("inf")

    def _replan(self, version: int, at: float | None = None) -> Plan:
        """Plan the subscriptions again; from emulated time ``at`` on only (earlier epochs are kept from
        the version in force: tuples emitted before ``at`` may still be on their way)."""
        scenario, plan = self._plan(self.subscriptions, at)
        self._publish(version, scenario, plan)
        return plan

    def _plan(self, subscriptions: tuple[SubscriptionSpec, ...], at: float | None = None) -> tuple[Scenario, Plan]:
        """The scenario with ``subscriptions``, and its plan from ``at`` on (:meth:`_replan`); the aggregates
        whose records no node can know before the clock starts are served their input (module docstring)."""
        scenario = replace(self.scenario, subscriptions=subscriptions)
        planned = tuple(s for s in subscriptions if s.id not in self.lost_ids)
        plan = make_plan(replace(self.scenario, subscriptions=planned), self.strategy, self.network)
        unknown = {s.id for s in subscriptions if not self._shippable(s)}
        plan = input_served(plan, unknown, {s.id: s.query.where for s in subscriptions}).check(scenario, self.network)
        if at is not None:
            plan = self.book.versions[self.version].plan.splice(plan, at).check(scenario)  # every link of the scenario
        return scenario, plan

    def _shippable(self, sub: SubscriptionSpec) -> bool:
        """Whether a record flow may serve ``sub`` (module docstring): its records are the central
        evaluation's, which every node computes before the clock starts, so it is one of the scenario's
        subscriptions, over a stream of the workload, in a run with an end."""
        return sub.id in self.scenario.subscriptions_by_id and sub.stream not in self.inputs and self.end is not None

    def _publish(self, version: int, scenario: Scenario, plan: Plan) -> None:
        """Make ``plan`` (of ``scenario``) version ``version`` and publish it."""
        self.version = version
        self.book.add_version(version, scenario, plan)
        self.connection.publish(
            self.topics.control("plan"), plan_message(version, scenario, plan, self.run_id), retain=True
        )

    def _publish_clock(self) -> None:
        now = time.monotonic()
        late = {n for n, until in self.late.items() if until > now}
        self.max_congested = max(self.max_congested, len(self.congested | late))
        if self.congested or late:
            self.held_s += TICK_S
            return
        self.horizon = max(self.horizon, self.now() + LEAD_S * self.speed)
        self._send_clock()

    def _send_clock(self) -> None:
        doc = {
            "run": self.run_id,
            "t0": self.t0,
            "speed": self.speed,
            "version": self.version,
            "horizon": self.horizon,
            "end": self.end,
        }
        self.connection.publish(self.topics.control("clock"), json.dumps(doc).encode(), retain=True)

    def stop(self, at_most: float) -> float:
        """End the run at the barrier: the largest horizon promised (no source emitted past it, so every
        tuple emitted before the end is routed and counted, and the sources reach it within the lead of
        the clock), at most ``at_most``; 0 when the clock never started.  Sent at once, also while
        congestion holds the horizon; returns the end."""
        if self.t0 == float("inf"):
            self.end = 0.0
            return self.end
        self.end = min(max(self.horizon, 0.0), at_most)
        self._send_clock()
        return self.end

    async def run(self, timeout: float = 60.0) -> None:
        """Start the clock once every super-peer is subscribed (nothing published before is lost), then
        advance the horizon.  Raises :class:`EngineError` when ``timeout`` wall seconds pass without one
        more super-peer reporting the plan loaded (a loaded machine may take minutes to start them all),
        or when the coordinator's broker connection fails."""
        connection = asyncio.create_task(self.connection.run())
        try:
            deadline, count = time.monotonic() + timeout, 0
            while count < len(self.scenario.super_peers):
                if time.monotonic() > deadline:
                    missing = sorted(n for n in self.scenario.super_peers if self.ready.get(n, -1) < 0)
                    shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
                    raise EngineError(f"super-peers without the plan after {timeout:g} s without progress: {shown}")
                await asyncio.sleep(0.02)
                raise_failed([connection], "the coordinator's broker connection")
                ready = sum(self.ready.get(n, -1) >= 0 for n in self.scenario.super_peers)
                if ready > count:
                    deadline, count = time.monotonic() + timeout, ready
            self.t0 = time.time() + 0.2
            self._publish_clock()
            counted = time.monotonic()
            while True:
                await asyncio.sleep(TICK_S)
                raise_failed([connection], "the coordinator's broker connection")
                self._publish_clock()
                if time.monotonic() - counted >= COUNTERS_S and (self.end is None or self.now() < self.end):
                    counted = time.monotonic()
                    self._ask_counters()
        finally:
            connection.cancel()

    # ---- run-time subscriptions ----------------------------------------------------------------------------

    def subscribe(self, peer: str, query: str, sub_id: str | None = None, viewer: str | None = None) -> dict:
        """Register a subscription from the current horizon on; returns the planner's decision (as ``viewer``
        may see it, :meth:`_describe`).

        Raises :class:`InputError` for an unknown peer/stream/attribute, a duplicate id or a run that ends
        before the subscription could start, ``QueryError`` for a query that does not parse.
        """
        at = max(self.horizon, self.now())
        if sub_id is None:
            sub_id = f"L{len(self.runtime_ids) + 1}"
        if not PEER_ID.fullmatch(sub_id) or len(sub_id) > 64:  # it names the subscription's delivery topic
            raise InputError(f"--id: letters, digits, '_' and '-' (at most 64), got {sub_id[:70]!r}")
        if any(s.id == sub_id for s in self.subscriptions):  # whoever holds it: the answer names nobody
            raise InputError(f"--id: {sub_id!r} is taken (choose another, or leave --id out for a fresh one)")
        if self.end is not None and at >= self.end:
            raise InputError(f"the run ends at t={self.end:g}s; too late to subscribe")
        spec = subscription_from_json(self.scenario, {"id": sub_id, "peer": peer, "at": at, "query": query})
        if not self._reachable(spec):
            failed = ", ".join(self.failed_nodes)
            raise InputError(f"--peer: no route from {spec.stream}'s source to {peer} (super-peers down: {failed})")
        self.subscriptions = (*self.subscriptions, spec)
        self.runtime_ids.append(sub_id)
        plan = self._replan(self.version + 1, at)
        stream = self.scenario.stream(spec.stream)
        types = {a.name: a.type for a in stream.attributes}
        texts = {name: list(values) for name, values in stream.texts.items()}
        return {"id": sub_id, "at": at, "types": types, "texts": texts, **self._describe(plan, spec.id, at, viewer)}

    def unsubscribe(self, sub_id: str) -> dict:
        """End a subscription at the current horizon.  Raises :class:`InputError` for an unknown id."""
        at = max(self.horizon, self.now())
        found = [s for s in self.subscriptions if s.id == sub_id and (s.until is None or s.until > at)]
        if not found:
            raise InputError(f"unsubscribe: no active subscription {sub_id!r}")
        old = found[0]
        if at <= old.at:
            self.subscriptions = tuple(s for s in self.subscriptions if s.id != sub_id)
        else:
            self.subscriptions = tuple(replace(s, until=at) if s.id == sub_id else s for s in self.subscriptions)
        plan = self._replan(self.version + 1, at)
        decision = next((d for d in plan.decisions if d.subscription == sub_id and d.event == "unsubscribe"), None)
        return {"id": sub_id, "until": at, "summary": decision.summary if decision else "never started"}

    # ---- failures ------------------------------------------------------------------------------------------

    def fail(self, node: str) -> Failure:
        """Take super-peer ``node`` out of the backbone from the current horizon on and re-plan around it.

        A subscription is lost when its subscriber's or its source's super-peer is down or no route joins
        them any more; it ends at the horizon (one that had not started yet is dropped).
        """
        at = max(self.horizon, self.now())
        alive = tuple(n for n in self.network.super_peers if n != node)
        links = tuple(link for link in self.scenario.links if link.a in alive and link.b in alive)
        self.network = Network(alive, links)
        self.congested.discard(node)
        self.late.pop(node, None)
        lost, replanned, kept = [], [], []
        for s in self.subscriptions:
            active = s.until is None or s.until > at
            if s.id in self.lost_ids or not active or self._reachable(s):
                kept.append(s)
                if active and s.id not in self.lost_ids:
                    replanned.append(s.id)
                continue
            lost.append(s.id)
            self.lost_ids.add(s.id)
            self.notify(s.id, "removed", at, f"super-peer {node} failed and no route reaches it any more")
            if s.at < at:
                kept.append(replace(s, until=at))
        self.subscriptions = tuple(kept)
        self._replan(self.version + 1, at)
        failure = Failure(node, at, tuple(lost), tuple(replanned), self.version)
        self.failures.append(failure)
        return failure

    @property
    def failed_nodes(self) -> list[str]:
        return [f.node for f in self.failures]

    def _reachable(self, sub: SubscriptionSpec) -> bool:
        home = self.scenario.home(sub.peer)
        source_home = self.scenario.home(self.scenario.stream(sub.stream).source)
        alive = self.network.super_peers
        return home in alive and source_home in alive and home in self.network.routes_from(source_home)

    async def _confirm_failure(self, node: str) -> None:
        """A last will arrived: re-plan once ``gone`` confirms the process exited (the broker also sends
        wills when it shuts down, and those nodes come back)."""
        deadline = time.monotonic() + GONE_WAIT_S
        while time.monotonic() < deadline:
            if node not in self.dead or node not in self.network.super_peers:
                return
            if self.gone(node):
                self.fail(node)
                return
            await asyncio.sleep(0.05)

    def _describe(self, plan: Plan, sub_id: str, at: float, viewer: str | None = None) -> dict:
        """How ``plan`` serves subscription ``sub_id`` at time ``at``: the planner's decision and the operators
        its results pass, from its delivery up.  For a ``viewer`` (a thin-peer under ``--secure``) every flow
        that also serves another thin-peer shows only its id, origin and path (its condition and attributes
        are other subscriptions' too), and so does the decision unless it touched the viewer's flows only."""
        decision = next((d for d in plan.decisions if d.subscription == sub_id and d.event == "subscribe"), None)
        epoch = plan.epoch_at(at)
        operators = []
        others: set[str] = set()  # flows that also serve another thin-peer than the viewer
        if epoch is not None:
            if viewer is not None:
                others = {flow for flow, peers in _served(epoch).items() if peers - {viewer}}
            delivery = next((d for d in epoch.deliveries if d.subscription == sub_id), None)
            flow_id = delivery.flow if delivery else None
            while flow_id is not None:
                flow = epoch.flow(flow_id)
                found = flow.to_json()
                if flow.id in others:
                    found = {key: found[key] for key in ("id", "stream", "parent", "origin", "path")} | {"shared": True}
                operators.append(found)
                flow_id = flow.parent
            if delivery is not None:
                operators.insert(0, {"delivery": delivery.to_json()})
        touched = set(decision.widened) | {decision.reused} | {op.get("id") for op in operators} if decision else set()
        private = viewer is None or not touched & others
        return {
            "summary": (decision.summary if private else SHARED) if decision else "",
            "reused": decision.reused if decision else None,
            "widened": list(decision.widened) if decision else [],
            "operators": operators,
        }

    def listing(self, viewer: str | None = None) -> list[dict]:
        """Every subscription with its plan (:meth:`_describe`); for a ``viewer``, its own only, as it may
        see them."""
        latest = self.book.versions[self.version].plan
        out = []
        for s in self.subscriptions:
            if viewer is not None and s.peer != viewer:
                continue
            described = self._describe(latest, s.id, max(s.at, self.now()), viewer)
            out.append({"id": s.id, "peer": s.peer, "at": s.at, "until": s.until, "query": s.query.text, **described})
        return out

    # ---- messages ------------------------------------------------------------------------------------------

    async def _on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        parts = self.topics.parse(topic)
        if parts[:1] != ("ctl",) or len(parts) != 3:
            return
        kind, node = parts[1], parts[2]
        if kind == "request":
            self._on_request(node, payload)
            return
        known = node in self.scenario.super_peers or (kind in ("stats", "load") and node in self.thin_peer_ids)
        check(known, f"{node!r} is not a node that sends {kind}", node)
        if kind == "stats":
            self.stats[node] = self._checked_stats(node, json_object(payload, node))
            if "aggregated" in self.stats[node]:  # (only the rounds that ask for them carry them)
                self.aggregated[node] = self.stats[node]["aggregated"]
        elif kind == "alive":
            check(payload in (b"0", b"1"), "liveness other than 0 or 1", node)
            # the broker also sends last wills when it shuts down: a node that comes back is alive again
            if payload == b"0" and node not in self.dead:
                self.dead.append(node)
                if self.gone is not None and not retained:
                    self._checks.add(asyncio.ensure_future(self._confirm_failure(node)))
            elif payload == b"1":
                self.alive.add(node)
                if node in self.dead:
                    self.dead.remove(node)
        elif kind == "load":
            check(payload in (b"0", b"1", b"late"), "a load other than 0, 1 or late", node)
            if node not in self.network.super_peers and node not in self.thin_peer_ids:
                return  # a failed super-peer's last words
            if payload == b"late":
                self.late[node] = time.monotonic() + LEASE_S
            elif payload == b"1":
                self.congested.add(node)
            else:
                self.congested.discard(node)
        elif kind == "ready":
            check(payload.isdigit() and len(payload) < 10, "a plan version that is not a number", node)
            self.ready[node] = int(payload)

    def _on_request(self, identity: str, payload: bytes) -> None:
        """A CLI request from ``identity`` (its request topic's last level): answered on its reply topic,
        with an error reply when it cannot be carried out.  A request without a reply topic of that identity
        cannot be answered: it is dropped as malformed."""
        request = json_object(payload, identity)
        reply_to = text(request, "reply_to", identity)
        check(
            Topics.identity_of(reply_to) == identity and len(reply_to) <= 200 and not set(reply_to) & set("+#\0"),
            f"reply topic {reply_to[:40]!r} not of {identity}",
            identity,
        )
        if request.get("op") == "traffic":  # answered once the nodes sent fresh counters
            task = asyncio.ensure_future(self._traffic_reply(identity, reply_to))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)
            return
        self._reply(reply_to, self._answer(identity, request, reply_to))

    def _reply(self, reply_to: str, answer: dict) -> None:
        self.connection.publish(self.topics.reply(reply_to), json.dumps(answer).encode())

    async def _traffic_reply(self, identity: str, reply_to: str) -> None:
        """Ask every node still up for its counters and answer with them, at the latest after
        :data:`TRAFFIC_WAIT_S` (``complete`` says whether every node answered in time)."""
        nodes = [*self.network.super_peers, *self.thin_peer_ids]
        complete = await self.collect(nodes, TRAFFIC_WAIT_S)
        self._reply(reply_to, {**self._answer(identity, {"op": "traffic"}, reply_to), "complete": complete})

    def notify(self, sub_id: str, event: str, at: float, reason: str) -> None:
        """Tell the client that made run-time subscription ``sub_id`` (on its reply topic) that it ended:
        ``event`` is ``removed`` (someone else ended it, or a failure cut it off) or ``ended`` (the run
        ended); the client stops waiting for tuples.  Nothing when no client of this run made it."""
        watcher = self.watchers.pop(sub_id, None)
        if watcher is not None:
            self._reply(watcher, {"ok": True, "event": event, "id": sub_id, "until": at, "reason": reason})

    def notify_end(self) -> None:
        """The run is over: tell every client still watching a subscription."""
        for sub_id in list(self.watchers):
            self.notify(sub_id, "ended", float(self.end or 0.0), "the run ended")

    def _answer(self, identity: str, request: dict, reply_to: str = "") -> dict:
        """The answer to a request of ``identity``; under ``--secure`` a thin-peer may subscribe only for
        itself, list, watch and end only its own subscriptions and see only the parts of the plan that are
        its own, and another's subscription is answered as one that does not exist (the operator may do
        and see all)."""
        from matcher import QueryError

        op = request.get("op")
        fenced = self.secure and identity != OPERATOR
        viewer = identity if fenced else None
        try:
            if op == "subscribe":
                peer, query, sub_id = request.get("peer"), request.get("query"), request.get("id")
                if not isinstance(peer, str) or not isinstance(query, str) or not isinstance(sub_id, str | None):
                    raise InputError("subscribe: 'peer' and 'query' must be strings, 'id' a string or null")
                if len(query) > MAX_QUERY_CHARS:
                    raise InputError(f"query: at most {MAX_QUERY_CHARS:,} characters, got {len(query):,}")
                if fenced and peer != identity:
                    raise InputError(f"--peer: {identity} may subscribe only for itself, not for {shown(peer)}")
                answer = self.subscribe(peer, query, sub_id, viewer)
                self.watchers[answer["id"]] = reply_to
                return {"ok": True, **answer}
            if op == "unsubscribe":
                sub_id = request.get("id")
                if not isinstance(sub_id, str):
                    raise InputError("unsubscribe: 'id' must be a string")
                if fenced and not self._active_of(identity, sub_id):  # not its own, or not there: one answer
                    raise InputError(f"unsubscribe: {identity} has no active subscription {shown(sub_id)}")
                answer = self.unsubscribe(sub_id)
                if self.watchers.get(sub_id) == reply_to:  # the client ending its own: it knows
                    self.watchers.pop(sub_id)
                else:
                    self.notify(sub_id, "removed", answer["until"], f"unsubscribed by {identity}")
                return {"ok": True, **answer}
            if op == "subscriptions":
                return {"ok": True, "subscriptions": self.listing(viewer), "version": self.version}
            if op == "traffic":
                rows = [r for r in self.traffic() if not fenced or _concerns(r["topic"], identity)]
                now = self.now()
                return {"ok": True, "now": now if now != -float("inf") else None, "links": rows}
            return {"ok": False, "error": f"unknown request {str(op)[:40]!r}"}
        except (InputError, QueryError) as err:
            return {"ok": False, "error": str(err)}

    def _active_of(self, peer: str, sub_id: str) -> bool:
        """Whether ``sub_id`` is an active subscription of thin-peer ``peer`` now."""
        at = max(self.horizon, self.now())
        return any(s.id == sub_id and s.peer == peer and (s.until is None or s.until > at) for s in self.subscriptions)

    def _checked_stats(self, node: str, doc: dict) -> dict:
        """A node's counters (``ctl/stats/<node>``) checked: every topic one of this scenario's data topics,
        every count a non-negative integer.  Raises :class:`MalformedMessage` otherwise."""
        check(doc.get("node") == node, f"counters of {str(doc.get('node'))[:40]!r}", node)
        integer(doc, "round", node)
        received, sent, bins = doc.get("received"), doc.get("sent"), doc.get("bins", {})
        malformed = doc.get("malformed", {})
        dropped, lost = doc.get("link_dropped", {}), doc.get("link_lost", {})
        groups = (received, sent, bins, malformed, dropped, lost)
        check(all(isinstance(d, dict) for d in groups), "counters not objects", node)
        topics = (*received, *sent, *bins, *dropped, *lost)
        check(all(map(self._data_topic, topics)), "counters of a topic that is not data", node)
        check(all(_counts([v], 1) for v in (*dropped.values(), *lost.values())), "drop counts not counts", node)
        check(all(_counts(v, 3) for v in received.values()), "received counts not [messages, tuples, bytes]", node)
        check(all(_counts([v], 1) for v in sent.values()), "sent counts not a count", node)
        check(all(_counts(v, None) for v in bins.values()), "timeline bins not counts", node)
        check(all(isinstance(v, dict) and _counts(list(v.values()), None) for v in malformed.values()),
              "malformed-message counts not counts", node)  # fmt: skip
        for key in ("duplicates", "reconnects", "backlog", "outbox", "waiting", "holding"):
            if key in doc:
                integer(doc, key, node)
        if "processor" in doc:
            processor = doc["processor"]
            fields = ("ops", "delay_ticks", "jobs", "dropped")
            check(isinstance(processor, dict) and _counts([processor.get(k) for k in fields], 4)
                  and _counts(processor.get("offered"), None), "processor counts not counts", node)  # fmt: skip
        if "transit_s" in doc:
            number(doc, "transit_s", node)
        if "aggregated" in doc:
            checked_inputs(doc["aggregated"], node)
        return doc

    def _data_topic(self, key: object) -> bool:
        """``key`` names a data topic of this scenario (``link/<a>/<b>``, ``up/<peer>``, ``down/<peer>/<sub>``)."""
        topic = Topics.data(key) if isinstance(key, str) else None
        if topic is None:
            return False
        if topic.kind == "link":
            return (topic.node, topic.other) in self.directions
        return topic.node in self.thin_peer_ids

    def traffic(self) -> list[dict]:
        """Per data topic, the latest counters the nodes reported (receiver side)."""
        rows = []
        for node in sorted(self.stats):
            for topic, (messages, tuples, nbytes) in self.stats[node]["received"].items():
                rows.append({"topic": topic, "at": node, "messages": messages, "tuples": tuples, "bytes": nbytes})
        return sorted(rows, key=lambda r: r["topic"])

    def _ask_counters(self, inputs: bool = False) -> None:
        """Ask every node for its counters (a new round of ``ctl/collect``; with ``inputs``, also the input
        copies of its record-flow operators); they arrive in :attr:`stats`."""
        self.round += 1
        doc = {"round": self.round, **({"inputs": True} if inputs else {})}
        self.connection.publish(self.topics.control("collect"), json.dumps(doc).encode())

    async def collect(self, nodes: list[str], timeout: float, inputs: bool = False) -> bool:
        """Ask every node for its counters (with ``inputs``, also the input copies of its record-flow
        operators); True when all of ``nodes`` answered within ``timeout``."""
        self._ask_counters(inputs)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.stats.get(n, {}).get("round") == self.round for n in nodes):
                return True
            await asyncio.sleep(0.02)
        return False

    def in_flight(self) -> dict[str, int]:
        """Messages sent but not (yet) received, per data topic."""
        sent: dict[str, int] = {}
        received: dict[str, int] = {}
        for doc in self.stats.values():
            for topic, n in doc["sent"].items():
                sent[topic] = sent.get(topic, 0) + n
            for topic, counts in doc["received"].items():
                received[topic] = received.get(topic, 0) + counts[0]
        return {t: sent[t] - received.get(t, 0) for t in sorted(sent) if sent[t] != received.get(t, 0)}

    async def drain(
        self, nodes: list[str], sources: list[ThinPeerService], patience: float, stop: asyncio.Event
    ) -> dict[str, int]:
        """After the end time: wait for the sources, then until nothing is in flight (or ``patience`` wall
        seconds pass without progress); returns what is still missing per topic.  When ``stop`` is set
        while congestion holds the horizon short of the end, the run ends at the horizon instead."""
        if self.t0 == float("inf"):
            return {}  # the clock never started: nothing was emitted
        while not all(s.finished for s in sources):
            if stop.is_set() and self.end > self.horizon:
                self.stop(self.end)
            await asyncio.sleep(0.05)
        previous, last_progress = None, time.monotonic()
        while True:
            await self.collect([n for n in nodes if n not in self.dead], timeout=patience, inputs=True)
            counters = {n: (self.stats.get(n, {}).get("received"), self.stats.get(n, {}).get("holding")) for n in nodes}
            snapshot = json.dumps(counters, sort_keys=True)
            missing = self.in_flight()
            # tuples a super-peer holds until they are due over their emulated link are still on their way
            holding = any(self.stats.get(n, {}).get("holding", 0) for n in nodes if n not in self.dead)
            # what was sent to a dead super-peer is lost already: waiting for it would only add patience
            if snapshot == previous and not holding and all(self._reader(t) in self.dead for t in missing):
                return missing
            if snapshot != previous:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > patience:
                return missing
            previous = snapshot
            await asyncio.sleep(0.05)

    def _reader(self, key: str) -> str:
        """The node that receives a data topic (``link/<from>/<to>``, ``up/<peer>``, ``down/<peer>/<sub>``)."""
        return Topics.data(key).receiver(self.scenario.homes)

    def result(self, scenario: Scenario, thin_peers: list[ThinPeerService]) -> StrategyRun:
        """The traffic that crossed each emulated link, as the receivers counted it, and the deliveries,
        checked against the tuples ``scenario`` (the scenario as it ran, its inputs as recorded) should have
        given each subscription (network/exactness.py)."""
        directions = sorted(Network.of(self.scenario).directions)  # the whole backbone, failed nodes included
        link_bytes = dict.fromkeys(directions, 0)
        link_tuples = dict.fromkeys(directions, 0)
        access: dict[tuple[str, str], int] = {}
        bin_s = bin_width(scenario.duration)
        bins: dict[tuple[str, str], np.ndarray] = {}
        link_fated: dict[str, dict[tuple[str, str], int]] = {"link_dropped": {}, "link_lost": {}}
        for doc in self.stats.values():
            for name, counts in link_fated.items():
                for key, n in doc.get(name, {}).items():
                    d = Topics.data(key).direction(scenario.homes)
                    counts[d] = counts.get(d, 0) + n
            for key, (_, tuples, nbytes) in doc["received"].items():
                topic = Topics.data(key)
                d = topic.direction(scenario.homes)
                if topic.kind == "link":
                    link_bytes[d] += nbytes
                    link_tuples[d] += tuples
                    bins[d] = np.asarray(doc["bins"][key], dtype=np.int64)
                else:
                    access[d] = access.get(d, 0) + nbytes
        if any(s.until is not None and s.until <= s.at for s in scenario.subscriptions):
            raise EmulatorError("a subscription ends before it starts")
        delivered, latencies, attrs = {}, {}, {}
        fated: dict[str, dict[str, np.ndarray]] = {"dropped": {}, "lost": {}}
        plan = self.book.versions[self.version].plan
        aggregated = {sub: at for sub, at in aggregated_at(plan).items() if sub in scenario.subscriptions_by_id}
        operators = self._operator_inputs()
        for s in scenario.subscriptions:
            attrs[s.id] = s.query.attributes(scenario.stream(s.stream).attribute_names)
            # its copies: those delivered to the operators computing its records (a record flow's, a pane
            # tree's root), and those delivered to its thin-peer (where a plan serves it its input)
            at_operator = operators.get(s.id, {})
            tp = next(t for t in thin_peers if t.peer == s.peer)
            parts = [np.array(at_operator.get("delivered", []), dtype=np.int64), *tp.delivered.get(s.id, [])]
            delivered[s.id] = np.concatenate(parts)
            for fate, copies in fated.items():
                both = [np.array(at_operator.get(fate, []), dtype=np.int64), *tp.fated[fate].get(s.id, [])]
                if sum(map(len, both)):
                    copies[s.id] = np.sort(np.concatenate(both))
            lat = [np.array(at_operator.get("latencies", []), dtype=np.float64), *tp.latencies.get(s.id, [])]
            latencies[s.id] = np.concatenate(lat)
            attrs[s.id] = tp.attrs.get(s.id, attrs[s.id])
        expected = expected_results(scenario)
        shipped, shipped_last = self._shipped(scenario, expected, aggregated, thin_peers)
        arrivals = {s.id: s.at for s in scenario.subscriptions}
        length = max((len(b) for b in bins.values()), default=0)
        timeline = {}
        for d in directions:
            padded = np.zeros(length, dtype=np.int64)
            b = bins.get(d, np.zeros(0, np.int64))
            padded[: len(b)] = b
            timeline[d] = padded
        # the span a report observes ends at the last delivery, or record (the receivers count no per-hop
        # arrival times)
        last = max(
            (float((workload.emission_times_of(scenario.stream(s.stream), delivered[s.id]) + latencies[s.id]).max())
             for s in scenario.subscriptions if len(delivered[s.id])),
            default=0.0,
        )  # fmt: skip
        last = max(last, shipped_last)
        run = StrategyRun(
            strategy=self.strategy,
            engine="mqtt",
            link_bytes=link_bytes,
            link_tuples=link_tuples,
            access_bytes=sum(access.values()),
            access_link_bytes=dict(sorted(access.items())),
            delivered=delivered,
            delivered_attrs=attrs,
            latencies=latencies,
            timeline=timeline if length else {},
            bin_s=bin_s,
            link_dropped=dict(sorted(link_fated["link_dropped"].items())),
            dropped=fated["dropped"],
            link_lost=dict(sorted(link_fated["link_lost"].items())),
            lost=fated["lost"],
            last_arrival=last,
            load_bin_s=load_bin(self.scenario.duration),  # the bins the super-peers counted their processors by
            processors=self._processors(),
            # the subscriptions the plan that ran rejected (a super-peer's cpu, say), as the simulator's run has
            rejected=dict(plan.rejected),
            rejected_at={sub: t for sub, t in plan.rejected_from().items() if sub in arrivals and t > arrivals[sub]},
            aggregated_at=aggregated,
            **shipped,
        )
        return checked(scenario, with_records(scenario, run), expected)

    def _operator_inputs(self) -> dict[str, dict[str, list]]:
        """Per subscription a record flow or a pane tree serves, the input copies its operator received, as the
        super-peers reported them last (:class:`~peers.live.records.OperatorInputs`)."""
        found: dict[str, dict[str, list]] = {}
        for node in sorted(self.aggregated):
            for sub, entry in self.aggregated[node].items():
                into = found.setdefault(sub, {})
                for key, values in entry.items():
                    into.setdefault(key, []).extend(values)
        return found

    @staticmethod
    def _shipped(
        scenario: Scenario, expected: Expected, aggregated: dict[str, str], thin_peers: list[ThinPeerService]
    ) -> tuple[dict[str, dict[str, np.ndarray]], float]:
        """The records the record flows shipped or the readers of pane trees combined, by their numbers in the
        scenario as it ran (and the pane rows lost on their way, by theirs), as the :class:`StrategyRun` fields
        take them; and the latest emulated time one reached its thin-peer."""
        fields: dict[str, dict[str, np.ndarray]] = {
            f: {} for f in ("record_delivered", "record_latencies", "record_dropped", "record_lost")
        }
        last = 0.0
        for sub_id in aggregated:
            sub = scenario.subscription(sub_id)
            received = next(t for t in thin_peers if t.peer == sub.peer).records
            schedule = record_schedule(scenario, expected, sub_id)
            for name, values in received.numbered(sub_id, sub.query.groups, schedule.numbers()).items():
                fields[name][sub_id] = values
            arrived = schedule.closes[fields["record_delivered"][sub_id]] + fields["record_latencies"][sub_id]
            last = max(last, float(arrived.max(initial=0.0)))
        return fields, last

    def _processors(self) -> dict[str, ProcessorTally]:
        """Per super-peer with a processor (every one, when the scenario emulates them), what it did as it
        reported last (nothing, for one that never did), the offered load over the same bins for all."""
        docs = {n: self.stats.get(n, {}).get("processor") for n in sorted(processor_nodes(self.scenario))}
        empty = {"ops": 0, "offered": [], "delay_ticks": 0, "jobs": 0, "dropped": 0}
        length = max((len(doc["offered"]) for doc in docs.values() if doc), default=0)
        return {n: tally_of(doc or empty, length) for n, doc in docs.items()}


def _counts(values: object, length: int | None) -> bool:
    """``values`` is a list of non-negative integers (of ``length`` items, when given)."""
    return (
        isinstance(values, list)
        and (length is None or len(values) == length)
        and all(type(v) is int and v >= 0 for v in values)
    )


def _concerns(key: str, peer: str) -> bool:
    """The data topic ``key`` names is thin-peer ``peer``'s own upload or one of its deliveries."""
    topic = Topics.data(key)
    return topic is not None and topic.kind in ("up", "down") and topic.node == peer


def _served(epoch: Epoch) -> dict[str, set[str]]:
    """Per flow of ``epoch``, the thin-peers whose deliveries it feeds, itself or through the flows below it."""
    parents = {flow.id: flow.parent for flow in epoch.flows}
    served: dict[str, set[str]] = {}
    for delivery in epoch.deliveries:
        flow_id = delivery.flow
        while flow_id is not None:
            served.setdefault(flow_id, set()).add(delivery.peer)
            flow_id = parents[flow_id]
    return served
