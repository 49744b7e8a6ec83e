"""The StreamGlobe stream-sharing planner (Kuntschke & Kemper, TUM-I0615, section 1): reuse and widen
in-network streams, one subscription event at a time.

State (:mod:`sharing.trees`): per source stream, a tree of installed flows rooted at the raw stream
(available at the source's super-peer).  Each flow is (predicate, attributes, path); it is available at
every super-peer of its path.

An arrival takes the least option an :class:`~sharing.search.OptionSearch` finds: reuse a flow, or widen
it (and the ancestors that no longer cover it, splitting each where its new consumer attaches), then a
branch flow to the subscriber's super-peer.  Deliveries always apply the subscription's own WHERE and
SELECT (HCR's false drops are filtered there), except that a delivery from a flow holding exactly its
result needs no filter.

A departure removes the delivery, removes flows nobody reads and narrows the flows whose consumers no
longer need their width (:mod:`sharing.narrowing`), bottom-up.

Options are ranked by the estimated tuple-hops per second they add, not bytes: pricing the attributes a
flow carries today makes the planner open parallel narrow flows next to a stream it could have widened,
which later overlapping subscriptions cannot share (docs/PLANNER.md measures both).  Bytes bound the plan
instead: the planner plans the scenario consolidating (options unbounded in bytes) and keeps that plan
unless the cost model expects it to carry more bytes over the run than query-shipping; then it plans
byte-capped: every option is capped so that a stream's flows never cost more estimated bytes per second
than query-shipping its subscriptions (reusing the raw stream at the source, the subscription's own
query-shipping flow, is always allowed).  Narrowing can leave a tree dearer than shipping each remaining
result separately (a widened stream's consumers may sit off the direct routes, or their union widens every
attribute); the planner then re-plans the stream in arrival order (capped: each cap counts only the
subscriptions placed so far).

A backbone failure or recovery (docs/DYNAMICS.md) re-plans only what it touches: the flows crossing a
failed element and those hanging off them go, with the subscriptions they served, which are placed again
in arrival order over the surviving network (:class:`sharing.outage.Outage`); a subscription with no path
is cut off until a recovery gives it one.  Every other flow keeps its object (docs/PLANNER.md).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Container
from itertools import count

from network.routing import Network
from sharing.baselines import records_shipped
from sharing.cost import CostModel
from sharing.epochs import timeline
from sharing.limits import Admission, NetworkLoads, record_rates
from sharing.narrowing import ConsumerFold
from sharing.outage import Outage, crosses
from sharing.panes import pane_classes
from sharing.plan import Change, Decision, Plan, Replan
from sharing.records import RecordShipping
from sharing.search import Option, OptionSearch, strategy_matcher
from sharing.snapshots import Snapshots
from sharing.state import RELATIVE_SLACK, ActiveSubscription, AttributeMasks, InstalledFlow
from sharing.trees import FlowTrees
from topologies.model import Scenario, SubscriptionSpec
from topologies.outages import NetworkState

Progress = Callable[[int, int], None]  # (epochs planned, epochs): see sharing.make_plan


class Planner:
    """Incremental planner for one scenario and one sharing strategy, byte-capped or not."""

    def __init__(self, scenario: Scenario, strategy: str, network: Network, cost: CostModel, capped: bool):
        self.scenario = scenario
        self.strategy = strategy
        self.network = network  # the surviving backbone (docs/DYNAMICS.md); ``outage`` knows the whole one
        self.outage = Outage(network)
        self.cost = cost
        self.capped = capped
        self.masks = AttributeMasks(scenario)
        self.matcher = strategy_matcher(strategy)
        self.snapshots = Snapshots(scenario, self.masks)
        self.loads = NetworkLoads.of(scenario, network)  # None: nothing limited, the planner of old
        self.trees = FlowTrees(scenario, cost, self.snapshots, self.loads)
        self.rejected: dict[str, str] = {}  # subscription -> why no option fits the network limits
        self.cut_off: dict[str, ActiveSubscription] = {}  # active, but no path joins it to its source
        self._placed_down: dict[str, None] = {}  # placed while an element was down, in placement order
        self.fold = ConsumerFold(cost, self.matcher.match)
        self.subs: dict[str, ActiveSubscription] = {}
        self._arrivals = count()
        self._homes = scenario.homes
        self._position = {s.id: k for k, s in enumerate(scenario.subscriptions)}
        self._shipping = dict.fromkeys(self.trees.roots, 0.0)  # stream -> bytes/s of query-shipping its subs
        # subscription -> what it added to that total: routes change with the backbone, so it is taken out
        # as it was put in
        self._shipped: dict[str, float] = {}
        self._hop_order: dict[str, list[tuple[int, str]]] = {}
        # the aggregate subscriptions served by record flows of their own, outside the trees (sharing.records)
        # (those whose records combine from a pane flow they share, sharing.panes)
        shipped = records_shipped(scenario, strategy, cost)
        self.records = RecordShipping(scenario, network, shipped, pane_classes(scenario, network, shipped, cost))

    # -- the bound: query-shipping ---------------------------------------------------------------------
    def _shipping_cost(self, sub: ActiveSubscription) -> float:
        """Bytes per second of ``sub``'s query-shipping flow: the raw stream tapped at the source."""
        hops = len(self.network.route(self.trees.roots[sub.stream].origin, sub.home)) - 1
        return self.cost.flow_cost(sub.stream, sub.sel, sub.select.bit_count(), hops)

    def _ship(self, sub: ActiveSubscription, sign: int) -> None:
        """Count ``sub``'s query-shipping flow in (+1, over the current routes) or out (-1, what it added)
        of the stream's shipping total."""
        if sign > 0:
            added = self._shipped[sub.spec.id] = self._shipping_cost(sub)
        else:
            added = self._shipped.pop(sub.spec.id)
        self._shipping[sub.stream] += sign * added

    def _dearer_than_shipping(self, stream: str) -> bool:
        """The bound the planner keeps: the stream's flows cost no more bytes than query-shipping."""
        mine, shipping = self.trees.bytes_per_s[stream], self._shipping[stream]
        return mine > shipping * (1 + RELATIVE_SLACK) + 1e-9

    @property
    def bytes_per_s(self) -> float:
        """The estimated backbone bytes per second of every installed flow."""
        return sum(self.trees.bytes_per_s.values())

    @property
    def shipping_bytes_per_s(self) -> float:
        """The same for query-shipping the active subscriptions."""
        return sum(self._shipping.values())

    # -- arrivals --------------------------------------------------------------------------------------
    def subscribe(self, spec: SubscriptionSpec, time: float) -> Decision:
        if spec.id in self.records.shipped:
            return self._ship_records(spec, time)
        stream = spec.stream
        where = spec.query.where
        masks = self.masks
        sub = ActiveSubscription(
            spec,
            self._homes[spec.peer],
            where,
            self.cost.selectivity(stream, where),
            masks.mask(stream, spec.query.attributes(masks.schema(stream))),
            next(self._arrivals),
            self._position[spec.id],
        )
        if not self._reachable(sub):
            self.cut_off[spec.id] = sub
            return Decision(time, "subscribe", spec.id, f"cut off: {self._no_path(sub)}")
        before = self.trees.bytes_per_s[stream]
        placed = self._place(sub, time, "subscribe")
        if isinstance(placed, Decision):
            return placed
        option, (widened, split, branch) = placed
        text = self._describe(sub, option, widened, split, branch)
        replaced = ()
        if self._dearer_than_shipping(stream):
            said, replaced = self._replanned(stream)
            text += said
        return Decision(
            time,
            "subscribe",
            spec.id,
            text,
            option.flow.id,
            tuple(widened),
            replaced,
            self.trees.bytes_per_s[stream] - before,
        )

    def _ship_records(self, spec: SubscriptionSpec, time: float) -> Decision:
        """Serve aggregate subscription ``spec`` with a record flow of its own (:mod:`sharing.records`)."""
        delivery = self.records.subscribe(spec)
        if delivery is None:
            origin = self.trees.roots[spec.stream].origin
            home = self._homes[spec.peer]
            return Decision(time, "subscribe", spec.id, f"cut off: no path from {origin} to {home}")
        flow = self.records.flow(spec.id)
        binding = self._record_load(spec, flow.path, +1)
        if binding is not None:
            self.records.unsubscribe(spec)
            reason = self.rejected[spec.id] = (
                f"no route from {flow.origin} to {flow.path[-1]} within the network limits: {binding}"
            )
            return Decision(time, "subscribe", spec.id, f"rejected: {reason}")
        self.snapshots.deliver(self._position[spec.id], delivery)
        added = self.cost.record_cost(spec.query, len(flow.path) - 1)
        text = (
            f"ships its records: new record flow {flow.id} {' -> '.join(flow.path)}, aggregated at {flow.origin}"
            f" (+{added:.6g} B/s)"
        )
        shared = self.records.panes.classes.get(spec.id)
        if shared is not None:
            text = (
                f"combines its records from pane flow {shared.id} ({shared.panes.text()}) along"
                f" {' -> '.join(flow.path)}, aggregated at {flow.origin}"
            )
            added = 0.0
        return Decision(time, "subscribe", spec.id, text, None, (), (), added)

    def _record_load(self, spec: SubscriptionSpec, path: tuple[str, ...], sign: int) -> str | None:
        """Count a record flow's load along ``path`` and its operator's at ``path[0]`` in (+1: when they fit
        the network limits; else the element they would break, in words) or out (-1)."""
        if self.loads is None:
            return None
        bits, records, width = record_rates(self.cost, spec.query)
        shared = self.records.panes.classes.get(spec.id)
        if shared is not None:  # counted as if the pane flow were its own along its route: never less than it is
            panes = shared.panes
            records = self.cost.pane_rows_per_s(shared.stream, shared.where, panes.groups, float(panes.length))
            width = self.cost.tuple_bytes(panes.values()) * 8.0
            bits = records * width
        cpu = self.loads.cpu
        work = None
        if cpu is not None:
            sel = self.cost.selectivity(spec.stream, spec.query.where)
            work = cpu.operator(path[0], spec.stream, spec.query, sel, records)
        if sign > 0:
            binding = None if work is None else cpu.operator_excess(path[0], *work)
            binding = binding or self.loads.path_excess(path, bits, records, width)
            if binding is not None:
                return binding
        self.loads.add_rates(bits, records, width, path, sign)
        if work is not None:
            cpu.add_operator(path[0], *work, sign)
        return None

    def _place(
        self, sub: ActiveSubscription, time: float, event: str
    ) -> Decision | tuple[Option, tuple[list[str], list[InstalledFlow], InstalledFlow | None]]:
        """Serve ``sub`` (a path joins it to its source) by the least option: the option and what
        :meth:`_apply` made, or the decision rejecting it when nothing fits the network limits."""
        spec = sub.spec
        self.subs[spec.id] = sub
        self._ship(sub, +1)
        option = self._best_option(sub)
        if option is None:  # nothing fits the network limits
            del self.subs[spec.id]
            self._ship(sub, -1)
            reason = self.rejected[spec.id] = self._rejection(sub)
            return Decision(time, event, spec.id, f"rejected: {reason}")
        return option, self._apply(sub, option)

    def _reachable(self, sub: ActiveSubscription) -> bool:
        """Whether a path over the surviving backbone joins ``sub``'s super-peer to its source's."""
        return self.outage.intact or self.outage.joins(self.trees.roots[sub.stream].origin, sub.home)

    def _no_path(self, sub: ActiveSubscription) -> str:
        origin = self.trees.roots[sub.stream].origin
        down = [sp for sp in (origin, sub.home) if sp in self.outage.state.failed_nodes]
        if down:
            return f"super-peer {' and '.join(dict.fromkeys(down))} is down"
        return f"no path from {origin} to {sub.home} over the surviving backbone"

    def _hops_from(self, home: str) -> list[tuple[int, str]]:
        """Every super-peer as (route hops to ``home``, id), nearest first (cached per home).  Route hop
        counts are symmetric: the least latency and, among those routes, the fewest hops do not depend on
        the direction."""
        order = self._hop_order.get(home)
        if order is None:
            order = sorted((len(path) - 1, node) for node, path in self.network.routes_from(home).items())
            self._hop_order[home] = order
        return order

    def _best_option(self, sub: ActiveSubscription) -> Option | None:
        """The least option, or None when the network has limits and no option fits them."""
        stream = sub.stream
        # the stream's flows may not cost more bytes than query-shipping its subscriptions; reusing the
        # raw stream (the subscription's own query-shipping flow) is always allowed
        cap = (
            max(self._shipping_cost(sub), self._shipping[stream] - self.trees.bytes_per_s[stream])
            if self.capped
            else float("inf")
        )
        root = self.trees.roots[stream]
        source_hops = len(self.network.route(root.origin, sub.home)) - 1
        search = OptionSearch(sub, self.cost, self.matcher)
        admit = None
        if self.loads is not None:
            n = sub.select.bit_count()
            rates = self.loads.rates(stream, sub.sel, sub.sel * n)
            per_hop = self.cost.flow_cost(stream, sub.sel, n, 1)
            unit = self.cost.tuple_hops(stream, sub.sel, 1)
            admit = Admission(self.loads, stream, sub.home, rates, unit, per_hop, sub.select, sub.where, sub.sel)
        routes = None if admit is None else self.network.routes_from(sub.home)
        return search.best(
            root, self.trees.available[stream], self._hops_from(sub.home), source_hops, cap, admit, routes
        )

    # -- the network limits ----------------------------------------------------------------------------
    def _rejection(self, sub: ActiveSubscription) -> str:
        """Why ``sub`` fits nowhere, in one line: its query-shipping flow (the raw stream tapped at the
        source) needs more than a processor it runs on has room for, wherever it goes, or it breaks a limit
        on the route from the source (and every other route and option broke one too)."""
        root = self.trees.roots[sub.stream]
        origin = root.origin
        if self.loads.cpu is not None:
            self.loads.cpu.settle()
            busy = self.loads.cpu.option_excess(root, origin, (), sub.where, sub.sel, sub.select.bit_count(), sub.home)
            if busy is not None:
                return f"no operators from {origin} to {sub.home} fit the network limits: {busy}"
        n = sub.select.bit_count()
        bits, tuples = self.loads.rates(sub.stream, sub.sel, sub.sel * n)
        binding = self.loads.path_excess(self.network.route(origin, sub.home), bits, tuples, self.loads.width(n))
        return f"no route from {origin} to {sub.home} within the network limits: {binding}"

    def _apply(
        self, sub: ActiveSubscription, option: Option
    ) -> tuple[list[str], list[InstalledFlow], InstalledFlow | None]:
        """Make ``option``'s changes, serve ``sub`` through every flow from the raw stream down to its
        tap, then add its branch; the flows widened, the parts split off and the branch."""
        widened, split = [], []
        changes = {}
        for change in option.changes:
            node = change.flow
            changes[id(node)] = change
            if change.cut < node.hops:  # its consumers read it at its end: the part beyond the tap goes on
                split.append(self.trees.split(node, change.cut))
            if change.predicate is not node.predicate:
                if change.predicate != node.predicate:
                    widened.append(node.id)
                self.trees.reshape(node, change.predicate, change.sel, node.path)
                self.snapshots.flow_changed(node)  # and deliveries compare predicates by identity
        none = (0.0,) * sub.select.bit_count()
        node = option.flow
        while node.id is not None:  # above the last change the classes hold the query already
            change = changes.get(id(node))
            self.trees.serve(node, sub, none if change is None else change.gains)
            node = node.parent
        branch = None
        host = option.flow
        if option.tap != sub.home:
            path = option.route or self.network.route(option.tap, sub.home)
            branch = self.trees.install(host, path, sub.where, sub.sel)
            self.trees.serve(branch, sub)
            host = branch
        host.deliveries.append(sub)
        self.trees.readers_changed(host)
        sub.flow = host
        self.snapshots.recheck((sub,))
        if not self.outage.intact:
            self._placed_down[sub.spec.id] = None
        return widened, split, branch

    def _describe(
        self,
        sub: ActiveSubscription,
        option: Option,
        widened: list[str],
        split: list[InstalledFlow],
        branch: InstalledFlow | None,
    ) -> str:
        stream = sub.stream
        host = option.flow
        source = f"{host.id}" if host.id is not None else f"raw {stream}"
        parts = []
        if widened:
            parts.append(
                f"widens {', '.join(widened)} (now WHERE {host.predicate.to_text()}"
                f" SELECT {','.join(self.masks.names(stream, host.attrs))})"
            )
        parts.append(f"{'taps' if widened else 'reuses'} {source} at {option.tap}")
        parts += [f"{p.id} carries {p.parent.id}'s former stream on from {p.origin}" for p in split]
        if branch is not None:
            around = " (routed around a hot link)" if option.route is not None else ""
            parts.append(f"new flow {branch.id} {' -> '.join(branch.path)}{around}")
        else:
            parts.append("delivers there")
        return "; ".join(parts) + f" (+{option.bytes_per_s:.6g} B/s, +{option.tuple_hops:.6g} tuple-hops/s)"

    # -- departures ------------------------------------------------------------------------------------
    def unsubscribe(self, spec: SubscriptionSpec, time: float) -> Decision:
        if spec.id in self.rejected:
            return Decision(time, "unsubscribe", spec.id, "was rejected: no flow changed")
        if spec.id in self.records.shipped:
            flow = self.records.flow(spec.id)
            self.records.unsubscribe(spec)
            if flow is None:
                return Decision(time, "unsubscribe", spec.id, "was cut off: no flow changed")
            self._record_load(spec, flow.path, -1)
            self.snapshots.deliver(self._position[spec.id], None)
            shared = self.records.panes.classes.get(spec.id)
            left = f"left pane flow {shared.id}" if shared is not None else f"removed {flow.id}"
            return Decision(time, "unsubscribe", spec.id, left)
        if self.cut_off.pop(spec.id, None) is not None:
            return Decision(time, "unsubscribe", spec.id, "was cut off: no flow changed")
        stream = spec.stream
        before = self.trees.bytes_per_s[stream]
        removed, narrowed = self._detach(self.subs.pop(spec.id))
        summary = (
            "; ".join(
                [f"removed {', '.join(removed)}"] * bool(removed) + [f"narrowed {', '.join(narrowed)}"] * bool(narrowed)
            )
            or "no flow changed"
        )
        changed = removed + narrowed
        if self._dearer_than_shipping(stream):
            said, replaced = self._replanned(stream)
            summary += said
            changed += replaced
        added = self.trees.bytes_per_s[stream] - before
        return Decision(time, "unsubscribe", spec.id, summary + f" ({added:+.6g} B/s)", None, (), tuple(changed), added)

    def _detach(self, sub: ActiveSubscription, keep_predicate: bool = False) -> tuple[list[str], list[str]]:
        """Take ``sub`` (no longer in :attr:`subs`) off its flow and the need classes of every flow above,
        as a departure does: the flows removed and narrowed (:meth:`_trim`)."""
        self._placed_down.pop(sub.spec.id, None)
        self.snapshots.forget(sub)
        self._ship(sub, -1)
        node = sub.flow
        node.deliveries.remove(sub)
        self.trees.readers_changed(node)
        sub.flow = None
        self._unserve(node, sub)
        return self._trim(node, keep_predicate=keep_predicate)

    def _unserve(self, node: InstalledFlow, sub: ActiveSubscription, skip: Container[int] = ()) -> None:
        """Take ``sub`` off the need classes of ``node`` and every flow above it (but those in ``skip``,
        by object id)."""
        while node.id is not None:
            if id(node) not in skip:
                self.trees.unserve(node, sub)
            node = node.parent

    def _trim(
        self, node: InstalledFlow, gone: set[int] | None = None, keep_predicate: bool = False
    ) -> tuple[list[str], list[str]]:
        """Walk up from ``node``, which lost a consumer: remove the flows nobody reads and make a flow
        that feeds one other alone one flow with it (adding the object ids of the flows gone to
        ``gone``), narrow the others (``keep_predicate``: to their consumers' path only), until one stays
        as it was.  The flows removed and narrowed."""
        removed, narrowed = [], []
        while node.id is not None:
            parent = node.parent
            if not node.children and not node.deliveries:
                self.trees.uninstall(node)
                removed.append(node.id)
                if gone is not None:
                    gone.add(id(node))
            elif not node.deliveries and len(node.children) == 1 and self._merges(node, node.children[0]):
                child = node.children[0]
                self.trees.absorb(node, child)
                removed.append(child.id)
                narrowed.append(node.id)
                if gone is not None:
                    gone.add(id(child))
            elif self._narrow(node, keep_predicate):
                narrowed.append(node.id)
            else:
                break
            node = parent
        return removed, narrowed

    def _narrow(self, flow: InstalledFlow, keep_predicate: bool = False) -> bool:
        """Recompute ``flow`` from its consumers (``keep_predicate``: its attributes and path only); True
        if anything changed."""
        shape = self.fold.shape(flow, keep_predicate)
        if not keep_predicate and not self._reads_within(flow, shape):
            shape = self.fold.shape(flow, keep_predicate=True)
        if (shape.predicate, shape.path) == (flow.predicate, flow.path):
            return False
        self.trees.reshape(flow, shape.predicate, shape.sel, shape.path)
        self.snapshots.flow_changed(flow)
        return True

    def _merges(self, flow: InstalledFlow, child: InstalledFlow) -> bool:
        """Whether ``flow``, feeding ``child`` alone, may become one flow with it: their paths joined visit
        no super-peer twice (a branch tapped past a busy super-peer may run back through it), and the
        processors keep their limits (:meth:`_reads_within`)."""
        return set(flow.path).isdisjoint(child.path[1:]) and self._reads_within(flow, child)

    def _reads_within(self, flow: InstalledFlow, shape) -> bool:
        """Whether ``flow`` may take ``shape``'s predicate (a narrowing, or its one child's when merged with
        it): narrower, but maybe of more boxes, which the processor at its origin tests on every tuple it
        reads; with limited processors, only if that one keeps its limits."""
        cpu = None if self.loads is None else self.loads.cpu
        return cpu is None or cpu.reading_fits(flow, shape.predicate)

    def _replanned(self, stream: str) -> tuple[str, tuple[str, ...]]:
        """Re-plan ``stream`` (:meth:`_replan`): what to add to the decision's summary, the flows replaced."""
        replaced = self._replan(stream)
        if replaced is None:
            return f"; kept {stream}'s tree (re-planned, it would not fit the network limits)", ()
        return f"; re-planned {stream} (tree dearer than query-shipping), replacing {', '.join(replaced)}", tuple(
            replaced
        )

    def _replan(self, stream: str) -> list[str] | None:
        """Drop ``stream``'s tree and plan its active subscriptions again in arrival order.  Capped, each
        option's cap counts only the subscriptions placed so far, so the tree stays within
        query-shipping's bytes after every subscription; otherwise each adds at most its own
        query-shipping tuple-hops.  When one of them would then fit nowhere within the network limits,
        the old tree is put back as it was, and the answer is None."""
        subs = sorted((s for s in self.subs.values() if s.stream == stream), key=lambda s: s.arrival)
        kept = self.trees.kept(stream) if self.loads is not None else None
        hosts = [(sub, sub.flow) for sub in subs]
        replaced = self.trees.clear(stream)
        for sub in subs:
            self._ship(sub, -1)
        for k, sub in enumerate(subs):
            self._ship(sub, +1)
            option = self._best_option(sub)
            if option is None:
                for later in subs[k + 1 :]:
                    self._ship(later, +1)
                self.trees.restore(stream, kept)
                for s, host in hosts:
                    s.flow = host
                self.snapshots.recheck(subs)
                return None
            self._apply(sub, option)
        return replaced

    # -- the backbone changes (docs/DYNAMICS.md) -------------------------------------------------------
    def network_event(self, state: NetworkState, text: str, time: float) -> tuple[list[Decision], Replan]:
        """Move to the backbone ``state`` (the scenario's events there, ``text``) re-planning only what it
        touches: at a failure, the subscriptions served over a failed element leave as departures do and
        are placed again over what survives, in arrival order; at a recovery, the subscriptions cut off
        that have a path again are placed, and those placed while an element was down are placed again.
        A subscription with no path is cut off; one that fits nowhere within the network limits is
        rejected.  The decisions (one per subscription placed, cut off or rejected) and the re-plan."""
        started = _time.perf_counter()
        moves = self.trees.moves
        change = self.outage.switch(state)
        self.network = self.outage.network
        self._hop_order.clear()
        if self.loads is not None:
            self.loads.network = self.network
        moving = self._fail(change.failed_links, change.failed_nodes) if change.failed else {}
        was_cut = set()
        if change.recovered:
            for sub_id in list(self._placed_down):
                if sub_id not in moving:
                    moving[sub_id] = sub = self.subs.pop(sub_id)
                    self._detach(sub, keep_predicate=True)
            for sub_id, sub in list(self.cut_off.items()):
                if self._reachable(sub):
                    moving[sub_id] = self.cut_off.pop(sub_id)
                    was_cut.add(sub_id)
        decisions, cut_off, restored = [], [], []
        for sub in sorted(moving.values(), key=lambda s: s.arrival):
            sub_id = sub.spec.id
            if not self._reachable(sub):
                self.cut_off[sub_id] = sub
                cut_off.append(sub_id)
                decisions.append(Decision(time, "replan", sub_id, f"cut off: {self._no_path(sub)}"))
                continue
            placed = self._place(sub, time, "replan")
            if isinstance(placed, Decision):
                decisions.append(placed)
                continue
            if sub_id in was_cut:
                restored.append(sub_id)
            option, (widened, split, branch) = placed
            summary = f"re-placed ({text}): {self._describe(sub, option, widened, split, branch)}"
            decisions.append(Decision(time, "replan", sub_id, summary, option.flow.id, tuple(widened)))
        before = {sub_id: self.records.flow(sub_id) for sub_id in self.records.active}
        cut, back, deliveries = self.records.network_event(state)
        for sub_id, delivery in deliveries.items():
            was, now = before[sub_id], self.records.flow(sub_id)
            if was is now:
                continue
            spec = self.scenario.subscription(sub_id)
            if was is not None:
                self._record_load(spec, was.path, -1)
            binding = None if now is None else self._record_load(spec, now.path, +1)
            if binding is not None:  # re-routed where it does not fit: rejected from now on
                self.records.unsubscribe(spec)
                delivery = None
                reason = self.rejected[sub_id] = (
                    f"no route from {now.origin} to {now.path[-1]} within the network limits: {binding}"
                )
                decisions.append(Decision(time, "replan", sub_id, f"rejected: {reason}"))
            self.snapshots.deliver(self._position[sub_id], delivery)
        for sub_id in cut:
            decisions.append(Decision(time, "replan", sub_id, "cut off: its record flow has no path"))
        cut_off += cut
        restored += back
        moves -= self.records.moved()
        seconds = _time.perf_counter() - started
        return decisions, Replan(time, text, seconds, self.trees.moves - moves, tuple(cut_off), tuple(restored))

    def _fail(self, links: frozenset[tuple[str, str]], nodes: frozenset[str]) -> dict[str, ActiveSubscription]:
        """Remove the flows whose path crosses one of the failed ``links`` or ``nodes``, and those hanging
        off them, with the subscriptions they served (and those reading a raw stream whose source's
        super-peer failed), as departures: the flows above them are narrowed or removed.  The
        subscriptions taken off, by id."""
        hit: dict[int, InstalledFlow] = {}
        failed_roots = []
        ends = sorted({a for link in links for a in link})
        for at in self.trees.available.values():
            for node in nodes:
                for flow in at.get(node, ()):
                    if flow.id is None:
                        failed_roots.append(flow)
                    else:
                        hit[id(flow)] = flow
            for end in ends:
                for flow in at.get(end, ()):
                    if flow.id is not None and crosses(flow.path, links, nodes):
                        hit[id(flow)] = flow
        pending = list(hit.values())
        while pending:  # and every flow hanging off them
            for child in pending.pop().children:
                if id(child) not in hit:
                    hit[id(child)] = child
                    pending.append(child)
        moving: dict[str, ActiveSubscription] = {}
        for flow in [*failed_roots, *hit.values()]:
            for sub in flow.deliveries:
                moving[sub.spec.id] = sub
        for sub_id, sub in moving.items():
            del self.subs[sub_id]
            self._placed_down.pop(sub_id, None)
            self.snapshots.forget(sub)
            self._ship(sub, -1)
            self._unserve(sub.flow, sub, skip=hit)  # the flows hit go whole
            sub.flow = None
        for root in failed_roots:
            root.deliveries.clear()
            self.trees.readers_changed(root)
        tops = [flow for flow in hit.values() if id(flow.parent) not in hit]
        for flow in hit.values():
            flow.deliveries.clear()
            self.trees.uninstall(flow)
        above = {id(flow.parent): flow.parent for flow in tops if flow.parent.id is not None}
        gone: set[int] = set()
        for node in sorted(above.values(), key=_depth, reverse=True):  # deepest first: each walk stops early
            if id(node) not in gone:
                self._trim(node, gone, keep_predicate=True)
        return moving

    # -- snapshots -------------------------------------------------------------------------------------
    def epoch(self, start: float, end: float) -> Change:
        """The epoch ``[start, end)`` as a change to the epoch before: the installed flows (by stream, each
        tree depth-first, parents before children) and the deliveries (in scenario order) that left and
        came."""
        roots = (self.trees.roots[s.id] for s in self.scenario.streams)
        return self.snapshots.epoch(roots, start, end, self.records.part(start))


def _depth(flow: InstalledFlow) -> int:
    depth = 0
    while flow.parent is not None:
        flow, depth = flow.parent, depth + 1
    return depth


def plan_sharing(
    scenario: Scenario, strategy: str, network: Network, cost: CostModel, progress: Progress | None = None
) -> Plan:
    """Plan the scenario consolidating (module docstring); if the cost model expects that plan to carry
    more bytes over the whole run than query-shipping, plan it byte-capped instead.  ``progress`` (epochs
    done, epochs) is called after each snapshot; the byte-capped pass counts again from the start."""
    plan, run_bytes, shipping_bytes = _plan_once(scenario, strategy, network, cost, False, progress)
    if run_bytes > shipping_bytes * (1 + RELATIVE_SLACK):
        plan, *_ = _plan_once(scenario, strategy, network, cost, True, progress)
    return plan


def _plan_once(
    scenario: Scenario, strategy: str, network: Network, cost: CostModel, capped: bool, progress: Progress | None
) -> tuple[Plan, float, float]:
    """One planner over the scenario's subscription events (one epoch per interval between them), its
    estimated backbone bytes over the run and query-shipping's."""
    planner = Planner(scenario, strategy, network, cost, capped)
    changes, decisions, replans = [], [], []
    run_bytes = shipping_bytes = 0.0
    steps = timeline(scenario)
    for start, end, events in steps:
        for event in events:
            if event.kind == "network":
                text = "; ".join(change.text() for change in event.changes)
                said, replan = planner.network_event(event.state, text, event.time)
                decisions += said
                replans.append(replan)
            elif event.kind == "subscribe":
                decisions.append(planner.subscribe(event.subscription, event.time))
            else:
                decisions.append(planner.unsubscribe(event.subscription, event.time))
        changes.append(planner.epoch(start, end))
        run_bytes += planner.bytes_per_s * (end - start)
        shipping_bytes += planner.shipping_bytes_per_s * (end - start)
        if progress is not None:
            progress(len(changes), len(steps))
    plan = Plan(strategy, scenario.name, (), tuple(decisions), planner.rejected, tuple(replans), changes=tuple(changes))
    return plan, run_bytes, shipping_bytes
