"""The four baselines of docs/ACCOUNTING.md: data-shipping, query-shipping, multicast and the ideal bound.

Each is a pure function of the subscriptions active in an epoch, so a flow keeps its id (derived from the
subscription, or from the tree edge) for as long as it exists.  Every delivery is exact: it applies the
subscription's WHERE unless the flow it reads already holds exactly that result (query-shipping, whose
flow for an aggregate subscription carries its result records, even when the subscriber's super-peer is
the source's).
"""

from __future__ import annotations

from itertools import chain, pairwise

from matcher import Predicate
from matcher.aggregate import AggregateQuery
from network.routing import Network
from sharing.cost import CostModel
from sharing.epochs import Listing, Slots
from sharing.outage import Outage, crosses
from sharing.panes import PaneTrees, pane_classes
from sharing.plan import Delivery, Edit, Flow
from topologies.model import Scenario, SubscriptionSpec
from topologies.outages import NetworkState

BASELINES = ("data-shipping", "query-shipping", "multicast", "ideal")


class Baseline:
    """One baseline strategy for one scenario, fed the subscription events epoch by epoch.

    What each subscription contributes is computed once, and an epoch costs what changed: each
    subscription's own flow and delivery sit at its scenario position, and a multicast-like stream's tree
    is updated (and its flows listed again) only in epochs where its subscriptions changed.  When the
    backbone changes (:meth:`network_event`) the routes are those of the surviving network: a failure
    re-routes the subscriptions whose route meets a failed element, a recovery re-routes those whose
    route changes; a subscription with no path is cut off (no flow, no delivery) until one exists.
    """

    def __init__(self, scenario: Scenario, network: Network, strategy: str):
        self.scenario, self.network, self.strategy = scenario, network, strategy
        self.outage = Outage(network)
        self._schema = {s.id: s.attribute_names for s in scenario.streams}
        self._source = {s.id: scenario.home(s.source) for s in scenario.streams}
        self._home = {s.id: scenario.home(s.peer) for s in scenario.subscriptions}
        self._select = {s.id: s.query.attributes(self._schema[s.stream]) for s in scenario.subscriptions}
        self._own: dict[str, tuple[Flow | None, Delivery]] = {}
        self._position = {s.id: k for k, s in enumerate(scenario.subscriptions)}
        self._trees: dict[str, _Tree] = {s.id: _Tree() for s in scenario.streams}  # in stream order
        self._tree_flows: dict[str, tuple[Flow, ...]] = {s.id: () for s in scenario.streams}
        self._flow_at = Slots(len(scenario.subscriptions))  # own flows, by subscription position
        self._flows = Listing()  # the trees' flows
        self._delivery_at = Slots(len(scenario.subscriptions))
        self._joined: dict[str, dict[str, SubscriptionSpec]] = {}  # per stream, since the last epoch
        self._left: dict[str, dict[str, None]] = {}
        self._route: dict[str, tuple[str, ...]] = {}  # served subscription -> its route from the source
        self.cut_off: dict[str, SubscriptionSpec] = {}  # active, but no path joins it to its source
        self._made: dict = {}  # every flow and delivery made so far, each its own key: one object per value
        # the aggregate subscriptions served by a record flow of their own (docs/ACCOUNTING.md, "Records"):
        # every one under query-shipping, whose result is records; under the ideal bound those whose records
        # the cost model expects to weigh less than their input (the others join the trees with their input)
        self._records = records_shipped(scenario, strategy)
        # under the ideal bound, those of them whose records combine from a pane flow they share (sharing.panes)
        classes = pane_classes(scenario, network, self._records, CostModel(scenario)) if strategy == "ideal" else {}
        self._panes = PaneTrees(scenario, classes)
        self._record_flows: dict[int, Flow] = {}  # by subscription position, the ideal's record flows
        self._record_part: tuple[Flow, ...] | None = ()  # them in position order (None: to be listed again)
        self._pane_part: tuple[Flow, ...] = ()  # the pane flows in ``_record_part``
        self._now = 0.0  # the start of the epoch being made (the pane flows' panes are those then)

    def subscribe(self, sub: SubscriptionSpec) -> None:
        source, home = self._source[sub.stream], self._home[sub.id]
        if not self.outage.intact and not self.outage.joins(source, home):
            self.cut_off[sub.id] = sub
            return
        self._route[sub.id] = self.network.route(source, home)
        if sub.id in self._panes.classes:
            self._delivery_at[self._position[sub.id]] = self._panes.route(sub.id, self._route[sub.id])
            self._record_part = None
        elif self._owns(sub.id):
            flow, delivery = self._own_flow(sub)
            self._flow_at[self._position[sub.id]] = flow
            self._delivery_at[self._position[sub.id]] = delivery
            if self.strategy == "ideal":
                self._record_flows[self._position[sub.id]] = flow
                self._record_part = None
        else:
            self._joined.setdefault(sub.stream, {})[sub.id] = sub

    def unsubscribe(self, sub: SubscriptionSpec) -> None:
        if self.cut_off.pop(sub.id, None) is not None:
            return
        del self._route[sub.id]
        self._flow_at[self._position[sub.id]] = self._delivery_at[self._position[sub.id]] = None
        own = self._owns(sub.id)
        if sub.id in self._panes.classes:
            self._panes.route(sub.id, None)
            self._record_part = None
        if own and self._record_flows.pop(self._position[sub.id], None) is not None:
            self._record_part = None
        if not own and self._joined.get(sub.stream, {}).pop(sub.id, None) is None:  # joined before this epoch
            self._left.setdefault(sub.stream, {})[sub.id] = None

    def network_event(self, state: NetworkState) -> tuple[list[str], list[str]]:
        """Move to the backbone ``state``: the subscriptions cut off and those served again, each in
        scenario order.  A failure looks only at the routes that meet what failed; a recovery at every
        route (any may get shorter) and at every subscription cut off."""
        change = self.outage.switch(state)
        self.network = self.outage.network
        subs = self.scenario.subscriptions_by_id
        if change.recovered:
            candidates = [*self._route, *self.cut_off]
        else:
            failed_links, failed_nodes = change.failed_links, change.failed_nodes
            candidates = [k for k, route in self._route.items() if crosses(route, failed_links, failed_nodes)]
        cut, restored = [], []
        for sub_id in sorted(candidates, key=self._position.__getitem__):
            sub = subs[sub_id]
            source, home = self._source[sub.stream], self._home[sub_id]
            was_cut = sub_id in self.cut_off
            if not self.outage.joins(source, home):
                if not was_cut:
                    self.unsubscribe(sub)
                    self.cut_off[sub_id] = sub
                    cut.append(sub_id)
                continue
            if not was_cut and self.network.route(source, home) == self._route[sub_id]:
                continue  # its route is still the rule's
            self.unsubscribe(sub)
            self._own.pop(sub_id, None)
            self.subscribe(sub)
            if was_cut:
                restored.append(sub_id)
        return cut, restored

    def served(self, sub_id: str) -> tuple[Flow | None, Delivery] | None:
        """A subscription's own flow (None at the source's super-peer, but a record flow's) and delivery,
        as it is served now; None when it is cut off (or not active)."""
        return self._own.get(sub_id) if sub_id in self._route else None

    def moved(self) -> int:
        """How many flows were removed or installed since the last epoch (:meth:`epoch`): after a change of
        the backbone, the flows it moved."""
        if self.strategy in ("data-shipping", "query-shipping"):
            pending = self._flow_at.pending()
            before = {old for old, _ in pending if old is not None}
            return len(before.symmetric_difference(new for _, new in pending if new is not None))
        self._settle()
        now = chain(chain.from_iterable(self._tree_flows.values()), self._records_listed())
        return len(set(self._flows.items).symmetric_difference(now))

    def epoch(self, now: float) -> tuple[Edit, Edit]:
        """How the flows (parents first) and the deliveries (in scenario order) of the active subscriptions
        changed since the last epoch: from the subscriptions' slots, or from the streams' trees (each a
        part, :class:`sharing.epochs.Listing`) and the record flows (one more part)."""
        if self.strategy in ("data-shipping", "query-shipping"):
            return self._flow_at.edit(), self._delivery_at.edit()
        self._now = now
        self._settle()
        parts = (*self._tree_flows.values(), self._records_listed())
        return self._flows.change(tuple(chain.from_iterable(parts)), parts), self._delivery_at.edit()

    def _owns(self, sub_id: str) -> bool:
        """Whether the subscription has a flow of its own (every one under data- and query-shipping)."""
        return self.strategy in ("data-shipping", "query-shipping") or sub_id in self._records

    def _records_listed(self) -> tuple[Flow, ...]:
        """The ideal's record flows, in scenario order, then its pane flows (the very tuple while none came
        or went)."""
        panes = self._panes.flows(self._now)
        if self._record_part is None or panes is not self._pane_part:
            own = tuple(self._record_flows[p] for p in sorted(self._record_flows))
            self._record_part, self._pane_part = own + panes, panes
        return self._record_part

    def _settle(self) -> None:
        """Bring the trees of the streams whose subscriptions changed up to date."""
        for stream, tree in self._trees.items():
            if stream in self._joined or stream in self._left:
                joined, left = self._joined.pop(stream, {}), self._left.pop(stream, {})
                if self._update(stream, tree, list(joined.values()), list(left)):
                    self._tree_flows[stream] = tuple(tree.flows())  # else the very tuple: the same part

    def _own_flow(self, sub: SubscriptionSpec) -> tuple[Flow | None, Delivery]:
        """The subscription's own flow (none when it is at the source's super-peer) and delivery."""
        if sub.id not in self._own:
            home, source, select = self._home[sub.id], self._source[sub.stream], self._select[sub.id]
            where = sub.query.where
            if sub.id in self._records:
                # its result is records, aggregated at the source's super-peer (docs/ACCOUNTING.md, "Records")
                path = self._route[sub.id]
                flow = self._alike(Flow(f"records.{sub.id}", sub.stream, None, source, path, where, select, (), sub.id))
                delivery = Delivery(sub.id, sub.peer, home, flow.id, Predicate.TRUE, select)
                self._own[sub.id] = (flow, self._alike(delivery))
            elif home == source:  # nothing crosses the backbone: filter the raw stream where it enters
                self._own[sub.id] = (None, self._alike(Delivery(sub.id, sub.peer, home, None, where, select)))
            elif self.strategy == "query-shipping":
                path = self._route[sub.id]
                flow = self._alike(Flow(f"result.{sub.id}", sub.stream, None, source, path, where, select))
                delivery = Delivery(sub.id, sub.peer, home, flow.id, Predicate.TRUE, select)
                self._own[sub.id] = (flow, self._alike(delivery))
            else:
                path = self._route[sub.id]
                raw = Flow(f"raw.{sub.id}", sub.stream, None, source, path, Predicate.TRUE, self._schema[sub.stream])
                flow = self._alike(raw)
                self._own[sub.id] = (flow, self._alike(Delivery(sub.id, sub.peer, home, flow.id, where, select)))
        return self._own[sub.id]

    def _update(self, stream: str, tree: _Tree, joined: list[SubscriptionSpec], left: list[str]) -> bool:
        """Bring ``tree`` from the epoch before to this one: one flow per link of the union of routes from
        the stream's source super-peer (a tree, see network.routing), parents first (by depth, then edge);
        the ideal bound gets per-edge filters and trims, recomputed on every link whose subscriptions
        changed.  Whether a flow came, went or was replaced (a subscription joining links the tree has
        already changes none)."""
        trimmed = self.strategy == "ideal"
        changed: set[tuple[str, str]] = set()
        flows_changed = False
        for sub_id in left:
            del tree.members[sub_id]
            for edge in tree.routes.pop(sub_id):
                below = tree.below[edge]
                del below[sub_id]
                changed.add(edge)
                if not below:
                    del tree.below[edge], tree.flow[edge]
                    tree.order = None
                    flows_changed = True
        for sub in joined:
            route = self._route[sub.id]
            edges = list(pairwise(route))
            tree.members[sub.id] = sub
            tree.routes[sub.id] = edges
            for depth, edge in enumerate(edges):
                if edge not in tree.below:
                    tree.below[edge] = {}
                    tree.depth[edge] = depth
                    tree.order = None
                tree.below[edge][sub.id] = self._position[sub.id]
                changed.add(edge)
            into = f"{stream}:{edges[-1][0]}>{edges[-1][1]}" if edges else None
            self._delivery_at[self._position[sub.id]] = self._alike(
                Delivery(sub.id, sub.peer, self._home[sub.id], into, sub.query.where, self._select[sub.id])
            )
        for edge in changed:
            if edge in tree.below and (trimmed or edge not in tree.flow):
                parent = f"{stream}:{tree.parent_edge(edge)[0]}>{edge[0]}" if tree.depth[edge] else None
                ids = sorted(tree.below[edge], key=tree.below[edge].__getitem__)
                flow = self._edge_flow(stream, edge, parent, [tree.members[k] for k in ids], trimmed)
                tree.flow[edge] = self._alike(flow)
                flows_changed = True
        return flows_changed

    def _alike(self, made):
        """The flow or delivery made before that equals ``made``, else ``made``: a plan lists equal ones as
        one object, so an epoch's change holds what changed in value (:func:`sharing.plan.Plan`)."""
        return self._made.setdefault(made, made)

    def _edge_flow(
        self, stream: str, edge: tuple[str, str], parent: str | None, below: list[SubscriptionSpec], trimmed: bool
    ) -> Flow:
        flow_id = f"{stream}:{edge[0]}>{edge[1]}"
        schema = self._schema[stream]
        if not trimmed:
            return Flow(flow_id, stream, parent, edge[0], edge, Predicate.TRUE, schema)
        predicate = Predicate.any_of(s.query.where for s in below)
        wanted = {a for s in below for a in self._select[s.id]}
        attrs = tuple(a for a in schema if a in wanted)
        trim = tuple((s.query.where, self._select[s.id]) for s in below)
        return Flow(flow_id, stream, parent, edge[0], edge, predicate, attrs, trim)


def records_shipped(scenario: Scenario, strategy: str, cost: CostModel | None = None) -> frozenset[str]:
    """The aggregate subscriptions ``strategy`` serves with a record flow from the source's super-peer
    (docs/ACCOUNTING.md, "Records"): under query-shipping every one (its result is its records); under the
    ideal bound and the sharing strategies those whose records the cost model expects to weigh fewer bytes
    than their input (:meth:`~sharing.cost.CostModel.ships_records`, by ``cost`` when given); none under
    the others, whose subscribers aggregate the input they receive."""
    aggregates = [s for s in scenario.subscriptions if isinstance(s.query, AggregateQuery)]
    if strategy == "query-shipping":
        return frozenset(s.id for s in aggregates)
    if not aggregates or strategy in ("data-shipping", "multicast"):
        return frozenset()
    cost = cost or CostModel(scenario)
    schema = {s.id: s.attribute_names for s in scenario.streams}
    return frozenset(s.id for s in aggregates if cost.ships_records(s.query, len(s.query.attributes(schema[s.stream]))))


class _Tree:
    """One stream's distribution tree in a multicast-like baseline: per edge the subscriptions whose route
    crosses it (with their scenario positions), its depth and its flow; per member its route's edges."""

    def __init__(self):
        self.members: dict[str, SubscriptionSpec] = {}
        self.routes: dict[str, list[tuple[str, str]]] = {}
        self.below: dict[tuple[str, str], dict[str, int]] = {}
        self.depth: dict[tuple[str, str], int] = {}
        self.flow: dict[tuple[str, str], Flow] = {}
        self.order: list[tuple[str, str]] | None = None  # edges by (depth, edge); None when stale
        self._into: dict[str, tuple[str, str]] = {}

    def parent_edge(self, edge: tuple[str, str]) -> tuple[str, str]:
        """The edge entering ``edge``'s first node (the routes from one source form a tree)."""
        self._sort()
        return self._into[edge[0]]

    def flows(self) -> list[Flow]:
        return [self.flow[e] for e in self._sort()]

    def _sort(self) -> list[tuple[str, str]]:
        if self.order is None:
            self.order = sorted(self.below, key=lambda e: (self.depth[e], e))
            self._into = {e[1]: e for e in self.order}
        return self.order
