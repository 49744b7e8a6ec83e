"""The four baselines of SPEC section 3: data-shipping, query-shipping, multicast and the ideal bound.

Each is a pure function of the subscriptions active in an epoch, so a flow keeps its id (derived from the
subscription, or from the tree edge) for as long as it exists.  Every delivery is exact: it applies the
subscription's WHERE unless the flow it reads already holds exactly that result (query-shipping).
"""

from __future__ import annotations

from itertools import pairwise

from matcher import Predicate
from network.routing import Network
from sharing.plan import Delivery, Flow
from topologies.model import Scenario, SubscriptionSpec

BASELINES = ("data-shipping", "query-shipping", "multicast", "ideal")


class Baseline:
    """One baseline strategy for one scenario; what each subscription contributes is computed once."""

    def __init__(self, scenario: Scenario, network: Network, strategy: str):
        self.scenario, self.network, self.strategy = scenario, network, strategy
        self._schema = {s.id: s.attribute_names for s in scenario.streams}
        self._source = {s.id: scenario.home(s.source) for s in scenario.streams}
        homes = {p.id: p.attach for p in scenario.thin_peers}
        self._home = {s.id: homes[s.peer] for s in scenario.subscriptions}
        self._select = {s.id: s.query.attributes(self._schema[s.stream]) for s in scenario.subscriptions}
        self._own: dict[str, tuple[Flow | None, Delivery]] = {}
        self._edge_flows: dict[tuple, Flow] = {}

    def epoch(self, active: list[SubscriptionSpec]) -> tuple[tuple[Flow, ...], tuple[Delivery, ...]]:
        """Flows (parents first) and deliveries for the ``active`` subscriptions (in scenario order)."""
        if self.strategy in ("data-shipping", "query-shipping"):
            own = [self._own_flow(sub) for sub in active]
            return tuple(f for f, _ in own if f is not None), tuple(d for _, d in own)
        return self._tree(active)

    def _own_flow(self, sub: SubscriptionSpec) -> tuple[Flow | None, Delivery]:
        """The subscription's own flow (none when it is at the source's super-peer) and delivery."""
        if sub.id not in self._own:
            home, source, select = self._home[sub.id], self._source[sub.stream], self._select[sub.id]
            where = sub.query.where
            if home == source:  # nothing crosses the backbone: filter the raw stream where it enters
                self._own[sub.id] = (None, Delivery(sub.id, sub.peer, home, None, where, select))
            elif self.strategy == "query-shipping":
                path = self.network.route(source, home)
                flow = Flow(f"result.{sub.id}", sub.stream, None, source, path, where, select)
                self._own[sub.id] = (flow, Delivery(sub.id, sub.peer, home, flow.id, Predicate.TRUE, select))
            else:
                path = self.network.route(source, home)
                flow = Flow(f"raw.{sub.id}", sub.stream, None, source, path, Predicate.TRUE, self._schema[sub.stream])
                self._own[sub.id] = (flow, Delivery(sub.id, sub.peer, home, flow.id, where, select))
        return self._own[sub.id]

    def _tree(self, active: list[SubscriptionSpec]) -> tuple[tuple[Flow, ...], tuple[Delivery, ...]]:
        """One flow per link of the union of routes from each stream's source super-peer (a tree, see
        network.routing), parents first; the ideal bound gets per-edge filters and trims."""
        trimmed = self.strategy == "ideal"
        flows: list[Flow] = []
        deliveries: list[Delivery] = []
        for stream in self.scenario.streams:
            subs = [s for s in active if s.stream == stream.id]
            if not subs:
                continue
            source = self._source[stream.id]
            downstream: dict[tuple[str, str], list[SubscriptionSpec]] = {}
            depth: dict[tuple[str, str], int] = {}
            for sub in subs:
                for i, edge in enumerate(pairwise(self.network.route(source, self._home[sub.id]))):
                    downstream.setdefault(edge, []).append(sub)
                    depth[edge] = i
            into: dict[str, str] = {}  # super-peer -> id of the flow entering it
            for edge in sorted(downstream, key=lambda e: (depth[e], e)):
                parent = into.get(edge[0])
                below = tuple(s.id for s in downstream[edge]) if trimmed else ()
                key = (stream.id, edge, parent, below)
                if key not in self._edge_flows:  # the same edge with the same subscribers below: same flow
                    self._edge_flows[key] = self._edge_flow(stream.id, edge, parent, downstream[edge], trimmed)
                flows.append(self._edge_flows[key])
                into[edge[1]] = flows[-1].id
            for sub in subs:
                home = self._home[sub.id]
                where, select = sub.query.where, self._select[sub.id]
                deliveries.append(Delivery(sub.id, sub.peer, home, into.get(home), where, select))
        order = {s.id: i for i, s in enumerate(active)}
        deliveries.sort(key=lambda d: order[d.subscription])
        return tuple(flows), tuple(deliveries)

    def _edge_flow(
        self, stream: str, edge: tuple[str, str], parent: str | None, below: list[SubscriptionSpec], trimmed: bool
    ) -> Flow:
        flow_id = f"{stream}:{edge[0]}>{edge[1]}"
        schema = self._schema[stream]
        if not trimmed:
            return Flow(flow_id, stream, parent, edge[0], edge, Predicate.TRUE, schema)
        predicate = Predicate([b for s in below for b in s.query.where.boxes])  # the OR, box by box
        wanted = {a for s in below for a in self._select[s.id]}
        attrs = tuple(a for a in schema if a in wanted)
        trim = tuple((s.query.where, self._select[s.id]) for s in below)
        return Flow(flow_id, stream, parent, edge[0], edge, predicate, attrs, trim)
