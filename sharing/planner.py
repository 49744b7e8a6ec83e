"""The StreamGlobe stream-sharing planner (seed 004 section 1): reuse and widen in-network streams.

State: per source stream, a tree of installed flows rooted at the raw stream (available at the source's
super-peer).  Each flow is (predicate, attributes, path); it is available at every super-peer of its path.

A new subscription ``S`` (stream ``X``, WHERE ``q``, SELECT attributes ``A``) at super-peer ``home`` looks
at every flow ``F`` of ``X`` at every super-peer ``v`` of ``F``'s path (but its origin, where tapping ``F``
is tapping its parent):

* reuse: the strategy's matcher says ``q => F.predicate`` and ``F`` carries the attributes ``S`` needs
  (``A``, plus ``q``'s attributes unless ``F`` holds exactly ``q``'s result);
* widen: relax ``F.predicate`` with the strategy's matching algorithm (HSR, HCR or EM), add the missing
  attributes, and propagate upward: each ancestor that no longer covers its widened child (by the same
  matcher's verdict) is relaxed in turn, up to the raw stream, which covers everything.  A widened flow
  is split where its new consumer attaches: only the part upstream of ``v`` (of the child's origin, for
  an ancestor) widens; downstream, the old flow goes on unchanged as a child of the widened part, so
  consumers further down do not receive the widening.

Then a branch flow ``v -> home`` with predicate ``q`` and attributes ``A`` (none when ``v == home``).

Options are ranked by the estimated tuple-hops per second they add (sharing.cost: rate times
selectivity times hops): ties go to the shorter branch, then the smaller super-peer id, then the older
flow.  Tuples, not bytes: pricing the attributes a flow carries today makes the planner open parallel
narrow flows next to a stream it could have widened, which later overlapping subscriptions cannot share
(docs/PLANNER.md measures both).  Bytes bound the plan instead: the planner plans the scenario
consolidating (options unbounded in bytes) and keeps that plan unless the cost model expects it to carry
more bytes over the run than query-shipping; then it plans byte-capped: every option is capped so that
a stream's flows never cost more estimated bytes per second than query-shipping its subscriptions
(reusing the raw stream at the source, the subscription's own query-shipping flow, is always allowed).
Candidates are visited nearest first and the search stops once the branch alone adds
more tuple-hops than the best option found.

Deliveries always apply the subscription's own WHERE and SELECT (HCR's false drops are filtered there),
except that a delivery from a flow holding exactly its result needs no filter.

A departure removes the delivery, removes flows nobody reads and narrows the flows whose consumers no
longer need their width: predicate, attributes and path are recomputed bottom-up from the remaining
consumers, the predicate by folding the consumers' predicates with the strategy's matcher.  Narrowing
can leave a tree dearer than shipping each remaining result separately (a widened stream's consumers
may sit off the direct routes, or their union widens every attribute); the planner then re-plans the
stream in arrival order (capped: each cap counts only the subscriptions placed so far).

EM runs with the DFS split strategy: seed 004 (sections 3.5 and 6.2) finds DFS detects mismatches
earliest, which is the common case when a new query is matched against many installed streams, with the
least space, and index support does not pay off for the per-flow predicates the planner matches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, count

from matcher import Box, Predicate
from network.routing import Network
from sharing.cost import BoxBounds, CostModel, added_boxes
from sharing.epochs import timeline
from sharing.plan import Decision, Delivery, Epoch, Flow, Plan
from topologies.model import Scenario, SubscriptionSpec

Matcher = Callable[[Predicate, Predicate], tuple[bool, Predicate]]
Progress = Callable[[int, int], None]  # (epochs planned, epochs): see sharing.make_plan
_RELATIVE_SLACK = 1e-9  # float slack when comparing estimated costs and selectivities


def strategy_matcher(strategy: str) -> Matcher:
    """The matching function ``(stream predicate, query predicate) -> (matched, relaxed)`` of a strategy."""
    from matcher import matching

    if strategy == "sharing-hsr":
        return matching.match_hsr
    if strategy == "sharing-hcr":
        return matching.match_hcr
    return lambda p, q: matching.match_em(p, q, strategy="dfs")


@dataclass(eq=False)
class _Flow:
    """A mutable installed flow; ``id`` None is the raw stream (its ``sel`` is 1, its cost 0)."""

    id: str | None
    stream: str
    parent: _Flow | None
    origin: str
    path: tuple[str, ...]
    predicate: Predicate
    sel: float
    attrs: int  # bit mask over the stream's schema
    full_needs: int  # attributes the consumers would need if none could skip its filter
    seq: int  # creation order, the last tie-breaker
    children: list[_Flow] = field(default_factory=list)
    deliveries: list[_Sub] = field(default_factory=list)
    frozen: Flow | None = None
    subtree: tuple[Flow, ...] | None = None  # the frozen flows of this flow's tree, see Planner.epoch
    bounds: BoxBounds | None = None  # of ``predicate``, refreshed lazily when the predicate changes
    where_dims: tuple[Predicate, int] | None = None  # a predicate and the mask of its dimensions, lazily

    @property
    def hops(self) -> int:
        return len(self.path) - 1


@dataclass(eq=False)
class _Sub:
    spec: SubscriptionSpec
    home: str
    where: Predicate
    sel: float
    select: int  # bit mask of SELECT attributes
    where_attrs: int  # bit mask of the attributes WHERE mentions
    arrival: int  # arrival order, for re-planning a stream
    position: int  # in the scenario's subscriptions: the order of an epoch's deliveries
    flow: _Flow | None = None
    delivery: Delivery | None = None  # last snapshot, valid while read from the same flow and predicate
    delivery_of: Predicate | None = None


@dataclass
class _Option:
    key: tuple  # (added tuple-hops/s, branch hops, tap super-peer, flow seq): smaller is better
    bytes: float  # added bytes/s
    flow: _Flow
    tap: str
    # (flow, predicate, sel, attrs, full_needs, hops of the part that changes: the rest is split off)
    changes: list[tuple[_Flow, Predicate, float, int, int, int]]


class Planner:
    """Incremental planner for one scenario and one sharing strategy.

    Snapshots are incremental too, so that an epoch costs what changed plus copying references: each
    flow keeps its frozen snapshot and the frozen flows of its tree (``subtree``), and each subscription
    slot its delivery, from the epoch before.  Whatever changes a flow drops its snapshot with
    :meth:`_refreeze`, whatever changes which flows a tree holds drops the cached trees with
    :meth:`_reshape`, and whatever may change the flow or predicate a subscription reads marks it for
    :meth:`epoch` to look at again (``_recheck``).
    """

    def __init__(self, scenario: Scenario, strategy: str, network: Network, cost: CostModel, capped: bool):
        self.scenario = scenario
        self.strategy = strategy
        self.network = network
        self.cost = cost
        self.match = strategy_matcher(strategy)
        self.capped = capped
        self._ids = count(1)
        self._seq = count()
        self._arrivals = count()
        self._schema = {s.id: s.attribute_names for s in scenario.streams}
        self._homes = {p.id: p.attach for p in scenario.thin_peers}
        self._roots: dict[str, _Flow] = {}
        self._at: dict[str, dict[str, list[_Flow]]] = {}  # stream -> super-peer -> flows available there
        self._subs: dict[str, _Sub] = {}
        self._total: dict[str, float] = {}  # stream -> estimated bytes/s of its flows
        self._shipping: dict[str, float] = {}  # stream -> what query-shipping its active subs would cost
        self._tuples: dict[str, float] = {}  # stream -> estimated tuple-hops/s of its flows
        self._shipping_tuples: dict[str, float] = {}  # stream -> the same for query-shipping
        self._hop_order: dict[str, list[tuple[int, str]]] = {}
        self._verdicts: dict[tuple[int, Predicate], tuple[bool, Predicate]] = {}
        self._widenings: dict[tuple[int, Predicate], tuple[Predicate, float]] = {}
        self._nearby: dict[tuple[int, Box], list[Box]] = {}
        self._outside: dict[int, float] = {}  # flow seq -> lower bound of sel(query outside it), per search
        self._terms: dict[int, tuple[float, float]] = {}  # flow seq -> its _tuple_terms, per search
        # (stream, predicate, consumer predicate) -> (the relaxation, or None when it covers the consumer,
        # and the selectivity it adds): narrowing folds a flow's consumers again after each departure below
        # it, and all but the departed consumer's steps are the ones folded before
        self._folds: dict[tuple[str, Predicate, Predicate], tuple[Predicate | None, float]] = {}
        self._position = {s.id: k for k, s in enumerate(scenario.subscriptions)}
        self._delivered: list[Delivery | None] = [None] * len(scenario.subscriptions)  # by position
        self._recheck: dict[_Sub, None] = {}  # whose delivery may have changed since the last snapshot
        for s in scenario.streams:
            source = scenario.home(s.source)
            everything = (1 << len(s.attributes)) - 1
            root = _Flow(None, s.id, None, source, (source,), Predicate.TRUE, 1.0, everything, everything, -1)
            self._roots[s.id] = root
            self._at[s.id] = {source: [root]}
            self._total[s.id] = self._tuples[s.id] = 0.0
            self._shipping[s.id] = self._shipping_tuples[s.id] = 0.0

    # -- attribute masks -------------------------------------------------------------------------------
    def _mask(self, stream: str, names) -> int:
        schema = self._schema[stream]
        wanted = set(names)
        return sum(1 << i for i, a in enumerate(schema) if a in wanted)

    def _names(self, stream: str, mask: int) -> tuple[str, ...]:
        return tuple(a for i, a in enumerate(self._schema[stream]) if mask >> i & 1)

    def _flow_cost(self, stream: str, sel: float, attrs: int, hops: int) -> float:
        """Estimated bytes per second."""
        return self.cost.flow_cost(stream, sel, attrs.bit_count(), hops)

    def _tuple_hops(self, stream: str, sel: float, hops: int) -> float:
        """Estimated tuples per second crossing links: what options are ranked by."""
        return self.cost.rate(stream) * sel * hops

    def _holds_exactly(self, pred: Predicate, sel: float, target: Predicate, target_sel: float) -> bool:
        """``pred`` (known to cover ``target``) equals it, so a consumer of ``target`` needs no filter.
        A larger selectivity settles it without the (costlier) exact implication test."""
        if sel > target_sel * (1 + _RELATIVE_SLACK) + 1e-300:
            return False
        return pred.implies(target)

    # -- arrivals --------------------------------------------------------------------------------------
    def subscribe(self, spec: SubscriptionSpec, time: float) -> Decision:
        stream = spec.stream
        where = spec.query.where
        sub = _Sub(
            spec,
            self._homes[spec.peer],
            where,
            self.cost.selectivity(stream, where),
            self._mask(stream, spec.query.attributes(self._schema[stream])),
            self._mask(stream, where.dims),
            next(self._arrivals),
            self._position[spec.id],
        )
        self._subs[spec.id] = sub
        self._ship(sub, +1)
        before = self._total[stream]
        option = self._best_option(sub)
        widened, split, branch = self._apply(sub, option)
        text = self._describe(sub, option, widened, split, branch)
        replaced = ()
        if self._dearer_than_shipping(stream):
            replaced = tuple(self._replan(stream))
            text += f"; re-planned {stream} (tree dearer than query-shipping), replacing {', '.join(replaced)}"
        return Decision(
            time,
            "subscribe",
            spec.id,
            text,
            option.flow.id,
            tuple(widened),
            replaced,
            self._total[stream] - before,
        )

    def _shipping_cost(self, sub: _Sub) -> float:
        """Bytes per second of ``sub``'s query-shipping flow: the raw stream tapped at the source."""
        source = self._roots[sub.spec.stream].origin
        return self._flow_cost(sub.spec.stream, sub.sel, sub.select, len(self.network.route(source, sub.home)) - 1)

    def _ship(self, sub: _Sub, sign: int) -> None:
        """Count ``sub``'s query-shipping flow in (+1) or out (-1) of the stream's shipping totals."""
        stream = sub.spec.stream
        hops = len(self.network.route(self._roots[stream].origin, sub.home)) - 1
        self._shipping[stream] += sign * self._shipping_cost(sub)
        self._shipping_tuples[stream] += sign * self._tuple_hops(stream, sub.sel, hops)

    def _count(self, flow: _Flow, sign: int) -> None:
        """Count ``flow`` as it is now in (+1) or out (-1) of its stream's totals."""
        stream = flow.stream
        self._total[stream] += sign * self._flow_cost(stream, flow.sel, flow.attrs, flow.hops)
        self._tuples[stream] += sign * self._tuple_hops(stream, flow.sel, flow.hops)

    def _dearer_than_shipping(self, stream: str) -> bool:
        """The bound the planner keeps: bytes when capped, tuple-hops otherwise."""
        if self.capped:
            mine, shipping = self._total[stream], self._shipping[stream]
        else:
            mine, shipping = self._tuples[stream], self._shipping_tuples[stream]
        return mine > shipping * (1 + _RELATIVE_SLACK) + 1e-9

    @property
    def bytes_per_s(self) -> float:
        """The estimated backbone bytes per second of every installed flow."""
        return sum(self._total.values())

    @property
    def shipping_bytes_per_s(self) -> float:
        """The same for query-shipping the active subscriptions."""
        return sum(self._shipping.values())

    def _hops_from(self, home: str) -> list[tuple[int, str]]:
        """Every super-peer as (route hops to ``home``, id), nearest first (cached per home).  Route hop
        counts are symmetric: the least latency and, among those routes, the fewest hops do not depend on
        the direction."""
        order = self._hop_order.get(home)
        if order is None:
            order = sorted((len(path) - 1, node) for node, path in self.network.routes_from(home).items())
            self._hop_order[home] = order
        return order

    def _best_option(self, sub: _Sub) -> _Option:
        stream = sub.spec.stream
        unit = self._tuple_hops(stream, sub.sel, 1)  # a branch's tuple-hops per hop
        # the stream's flows may not cost more bytes than query-shipping its subscriptions; reusing the
        # raw stream (the subscription's own query-shipping flow) is always allowed
        cap = (
            max(self._shipping_cost(sub), self._shipping[stream] - self._total[stream]) if self.capped else float("inf")
        )
        available = self._at[stream]
        # flows do not change during one search: verdicts and widenings of an ancestor shared by many
        # candidates are computed once
        self._verdicts.clear()
        self._widenings.clear()
        self._nearby.clear()
        self._outside.clear()
        self._terms.clear()
        # the raw stream first: its query-shipping cost bounds every other candidate from the start
        root = self._roots[stream]
        hops = len(self.network.route(root.origin, sub.home)) - 1
        best = self._evaluate(sub, root, root.origin, hops, None)
        for hops, node in self._hops_from(sub.home):
            flows = available.get(node)
            if not flows:
                continue
            if (unit * hops, hops) > best.key[:2]:
                break
            for flow in flows:
                if flow is root or node == flow.origin:  # tapping a flow at its origin is tapping its parent there
                    continue
                # the tuple-hops of every tap along a flow follow from two numbers: skip the hopeless
                cut = flow.path.index(node)
                limit = best.key[0] * (1 + _RELATIVE_SLACK)
                if unit * hops + self._least_change(sub, flow, cut) > limit:
                    continue
                per_hop, fixed = self._tuple_terms(sub, flow)
                if unit * hops + per_hop * cut + fixed > limit:
                    continue
                option = self._evaluate(sub, flow, node, hops, best)
                if option is not None and option.key < best.key and option.bytes <= cap * (1 + _RELATIVE_SLACK):
                    best = option
        return best

    def _tuple_terms(self, sub: _Sub, flow: _Flow) -> tuple[float, float]:
        """The tuple-hops/s tapping ``flow`` adds besides the branch, as (per hop between ``flow``'s origin
        and the tap, fixed): only relaxed flows add tuples, and which flows relax (``flow`` and the chain
        of ancestors that no longer cover their widened child) does not depend on the tap, nor does
        where an ancestor is cut (at its child's origin).  Remembered for the current search."""
        terms = self._terms.get(flow.seq)
        if terms is None:
            per_hop = fixed = 0.0
            node, at, uncovered = flow, None, sub.where
            while node.id is not None:
                matched, relaxed = self._verdict(node, uncovered)
                if matched:
                    break
                uncovered, sel = self._widening(node, relaxed)
                if at is None:
                    per_hop = self._tuple_hops(flow.stream, sel - node.sel, 1)
                else:
                    fixed += self._tuple_hops(flow.stream, sel - node.sel, node.path.index(at) or node.hops)
                node, at = node.parent, node.origin
            terms = self._terms[flow.seq] = (per_hop, fixed)
        return terms

    def _evaluate(self, sub: _Sub, flow: _Flow, tap: str, hops: int, best: _Option | None):
        """The option of tapping ``flow`` at ``tap``, or None when it cannot beat ``best``.

        A flow that must change is split where its new consumer attaches (``tap`` for ``flow``, the
        child's origin for an ancestor): only the part upstream of that super-peer is widened; the part
        downstream, when consumers sit there, stays as it was, as a child flow filtering by the old
        predicate (so the upstream part also carries that predicate's attributes).
        """
        stream = sub.spec.stream
        limit = best.key[0] * (1 + _RELATIVE_SLACK) if best is not None else float("inf")
        total = self._tuple_hops(stream, sub.sel, hops)  # the branch
        added = self._flow_cost(stream, sub.sel, sub.select, hops)
        changes: list[tuple[_Flow, Predicate, float, int, int, int]] = []
        # The consumer added to ``node`` (first the branch flow or the delivery, then the widened child):
        # its predicate and selectivity, the part of it ``node`` may not cover yet (``node`` covered the
        # child before it was widened), the attributes it needs and would need if it had to filter.
        child_pred, child_sel, uncovered = sub.where, sub.sel, sub.where
        child_attrs, child_full = sub.select, sub.select | sub.where_attrs
        if tap != sub.home:  # a branch flow always filters by its predicate: it needs WHERE's attributes
            child_attrs = child_full
        node, at = flow, tap
        if flow.id is not None and total + self._least_change(sub, flow, flow.path.index(tap)) > limit:
            return None
        while node.id is not None:
            cut = node.path.index(at) or node.hops  # a child at its parent's origin: widen the parent whole
            matched, relaxed = self._verdict(node, uncovered)
            if matched:
                pred, sel, fresh = node.predicate, node.sel, Predicate.FALSE
                need = child_attrs
                if not self._holds_exactly(pred, sel, child_pred, child_sel):
                    need |= child_full
                attrs, full = node.attrs | need, node.full_needs | child_full
            else:
                pred = relaxed
                fresh, sel = self._widening(node, relaxed)
                # a relaxed predicate no longer holds any consumer's exact result: all need their filters
                full = node.full_needs | child_full
                attrs = full
            if matched and attrs == node.attrs:
                if full != node.full_needs:
                    changes.append((node, pred, sel, attrs, full, node.hops))
                break
            if cut < node.hops:  # the downstream part keeps filtering by the old predicate
                kept = node.attrs | self._dims_mask(node, node.predicate, Predicate.FALSE)
                attrs, full = attrs | kept, full | kept
            # linear in hops: the downstream part costs what it cost before
            total += self._tuple_hops(stream, sel - node.sel, cut)
            added += self._flow_cost(stream, sel, attrs, cut) - self._flow_cost(stream, node.sel, node.attrs, cut)
            if total > limit:
                return None
            changes.append((node, pred, sel, attrs, full, cut))
            child_pred, child_sel, uncovered = pred, sel, fresh
            child_full = attrs | self._dims_mask(node, pred, fresh)
            child_attrs = child_full  # flows filter by their predicate even when it equals the parent's
            node, at = node.parent, node.origin
        return _Option((total, hops, tap, flow.seq), added, flow, tap, changes)

    def _least_change(self, sub: _Sub, flow: _Flow, cut: int) -> float:
        """A lower bound of the tuple-hops per second that serving ``sub`` from ``flow`` tapped ``cut`` hops
        downstream of its origin adds to ``flow``'s own.

        Any relaxation covers the query and the flow, so the selectivity grows at least by the
        probability of the query outside the flow, which is at least ``sel(box) - sum sel(box AND b)``
        over the flow's boxes ``b`` near a query box (Bonferroni), or ``sel(box)`` for a box missing the
        flow's hull.  The bound does not depend on ``cut``: it is computed once per search.
        """
        outside = self._outside.get(flow.seq)
        if outside is None:
            outside = 0.0
            bounds = self._bounds(flow)
            for box in sub.where.boxes:
                if bounds.may_overlap(box):
                    bound = self.cost.outside_lower_bound(flow.stream, box, self._near(flow, box))
                else:
                    bound = self.cost.box_probability(flow.stream, box)
                outside = max(outside, bound)
            if outside <= _RELATIVE_SLACK * flow.sel:
                outside = 0.0
            self._outside[flow.seq] = outside
        return self._tuple_hops(flow.stream, outside, cut)

    def _near(self, flow: _Flow, box) -> list:
        """The boxes of ``flow``'s predicate that may overlap ``box``, remembered for the current search."""
        key = (flow.seq, box)
        near = self._nearby.get(key)
        if near is None:
            near = self._bounds(flow).overlapping(box)
            self._nearby[key] = near
        return near

    def _verdict(self, flow: _Flow, uncovered: Predicate) -> tuple[bool, Predicate]:
        """The strategy's matcher on ``(flow.predicate, uncovered)``, remembered for the current search.

        EM and HSR only ever compare the query's boxes with the stream boxes overlapping them (a box
        disjoint from a query box neither covers nor overlaps any piece of it) and append what they add,
        so they run on the overlapping boxes alone and the appended boxes go after the whole predicate:
        the same verdict and relaxation as on the whole predicate.  HCR may relax any stream box, so it
        sees the whole predicate (its predicates never grow beyond their first consumer's box count).
        """
        key = (flow.seq, uncovered)
        cached = self._verdicts.get(key)
        if cached is not None:
            return cached
        if self.strategy == "sharing-hcr":
            verdict = self.match(flow.predicate, uncovered)
        else:
            near = Predicate({b: None for box in uncovered.boxes for b in self._near(flow, box)})
            matched, relaxed = self.match(near, uncovered)
            if matched:
                verdict = (True, flow.predicate)
            else:
                verdict = (False, Predicate(flow.predicate.boxes + relaxed.boxes[len(near.boxes) :]))
        self._verdicts[key] = verdict
        return verdict

    def _widening(self, flow: _Flow, relaxed: Predicate) -> tuple[Predicate, float]:
        """The boxes ``relaxed`` adds to ``flow``'s predicate and its exact selectivity, by increment."""
        key = (flow.seq, relaxed)
        cached = self._widenings.get(key)
        if cached is None:
            fresh = added_boxes(relaxed, flow.predicate)
            near = partial(self._near, flow)
            cached = (fresh, flow.sel + self.cost.added_selectivity(flow.stream, fresh, near))
            self._widenings[key] = cached
        return cached

    def _dims_mask(self, flow: _Flow, pred: Predicate, fresh: Predicate) -> int:
        """The attributes ``pred`` (``flow``'s predicate, or its relaxation adding ``fresh``) constrains."""
        if flow.where_dims is None or flow.where_dims[0] is not flow.predicate:
            flow.where_dims = (flow.predicate, self._mask(flow.stream, flow.predicate.dims))
        if pred is flow.predicate:
            return flow.where_dims[1]
        if pred.boxes[: len(flow.predicate.boxes)] == flow.predicate.boxes:  # appended: the union
            return flow.where_dims[1] | self._mask(flow.stream, fresh.dims)
        return self._mask(flow.stream, pred.dims)  # HCR's hulls may drop a dimension

    @staticmethod
    def _bounds(flow: _Flow) -> BoxBounds:
        if flow.bounds is None:
            flow.bounds = BoxBounds(flow.predicate)
        elif flow.bounds.predicate is not flow.predicate:
            flow.bounds = flow.bounds.widened(flow.predicate)
        return flow.bounds

    def _apply(self, sub: _Sub, option: _Option) -> tuple[list[str], list[_Flow], _Flow | None]:
        stream = sub.spec.stream
        widened, split = [], []
        for node, pred, sel, attrs, full, cut in option.changes:
            if (pred, attrs) != (node.predicate, node.attrs):
                widened.append(node.id)
                if cut < node.hops:
                    split.append(self._split(node, cut))
                self._refreeze(node)
            elif pred is not node.predicate:  # an equal predicate, but deliveries compare them by identity
                self._recheck.update(dict.fromkeys(node.deliveries))
            self._count(node, -1)
            node.predicate, node.sel, node.attrs, node.full_needs = pred, sel, attrs, full
            self._count(node, +1)
        branch = None
        host = option.flow
        if option.tap != sub.home:
            path = self.network.route(option.tap, sub.home)
            branch = self._install(stream, host, path, sub.where, sub.sel, sub.select, sub.select | sub.where_attrs)
            host = branch
        host.deliveries.append(sub)
        sub.flow = host
        self._recheck[sub] = None
        for part in split:  # its consumers are a part of the old flow's: it may narrow
            self._narrow(part)
        return widened, split, branch

    def _split(self, flow: _Flow, cut: int) -> _Flow:
        """Cut ``flow`` after ``cut`` hops; the rest becomes a child flow with the same predicate and
        attributes that takes over the consumers downstream of the cut.  The total cost is unchanged."""
        stream = flow.stream
        tail = flow.path[cut:]
        downstream = set(tail[1:])
        part = _Flow(
            f"F{next(self._ids)}",
            stream,
            flow,
            tail[0],
            tail,
            flow.predicate,
            flow.sel,
            flow.attrs,
            flow.full_needs,  # an upper bound until _apply narrows the part to its consumers
            next(self._seq),
        )
        part.children = [c for c in flow.children if c.origin in downstream]
        part.deliveries = [s for s in flow.deliveries if s.home in downstream]
        flow.children = [c for c in flow.children if c.origin not in downstream] + [part]
        flow.deliveries = [s for s in flow.deliveries if s.home not in downstream]
        for child in part.children:
            child.parent = part
            self._refreeze(child)  # its snapshot names its parent
        for s in part.deliveries:
            s.flow = part
            self._recheck[s] = None
        self._reshape(flow)
        flow.path = flow.path[: cut + 1]
        at = self._at[stream]
        at[tail[0]].append(part)
        for node in tail[1:]:
            flows = at[node]
            flows[flows.index(flow)] = part
        return part

    def _install(self, stream, parent, path, pred, sel, attrs, full) -> _Flow:
        flow = _Flow(f"F{next(self._ids)}", stream, parent, path[0], path, pred, sel, attrs, full, next(self._seq))
        parent.children.append(flow)
        self._reshape(parent)
        for node in path:
            self._at[stream].setdefault(node, []).append(flow)
        self._count(flow, +1)
        return flow

    def _describe(
        self, sub: _Sub, option: _Option, widened: list[str], split: list[_Flow], branch: _Flow | None
    ) -> str:
        stream = sub.spec.stream
        host = option.flow
        source = f"{host.id}" if host.id is not None else f"raw {stream}"
        if widened:
            parts = [
                f"widens {', '.join(widened)} (now WHERE {host.predicate.to_text()}"
                f" SELECT {','.join(self._names(stream, host.attrs))})"
            ]
            parts += [f"{p.id} keeps {p.parent.id}'s former stream from {p.origin}" for p in split]
            verb = "taps"
        else:
            parts = []
            verb = "reuses"
        parts.append(f"{verb} {source} at {option.tap}")
        if branch is not None:
            parts.append(f"new flow {branch.id} {' -> '.join(branch.path)}")
        else:
            parts.append("delivers there")
        return "; ".join(parts) + f" (+{option.bytes:.6g} B/s, +{option.key[0]:.6g} tuple-hops/s)"

    # -- departures ------------------------------------------------------------------------------------
    def unsubscribe(self, spec: SubscriptionSpec, time: float) -> Decision:
        sub = self._subs.pop(spec.id)
        stream = spec.stream
        self._delivered[sub.position] = None
        self._recheck.pop(sub, None)
        self._ship(sub, -1)
        before = self._total[stream]
        node = sub.flow
        node.deliveries.remove(sub)
        removed, narrowed = [], []
        while node.id is not None:
            parent = node.parent
            if not node.children and not node.deliveries:
                self._uninstall(node)
                removed.append(node.id)
            elif self._narrow(node):
                narrowed.append(node.id)
            else:
                break
            node = parent
        summary = (
            "; ".join(
                [f"removed {', '.join(removed)}"] * bool(removed) + [f"narrowed {', '.join(narrowed)}"] * bool(narrowed)
            )
            or "no flow changed"
        )
        changed = removed + narrowed
        if self._dearer_than_shipping(stream):
            replaced = self._replan(stream)
            changed += replaced
            summary += f"; re-planned {stream} (tree dearer than query-shipping), replacing {', '.join(replaced)}"
        added = self._total[stream] - before
        return Decision(time, "unsubscribe", spec.id, summary + f" ({added:+.6g} B/s)", None, (), tuple(changed), added)

    def _uninstall(self, flow: _Flow) -> None:
        stream = flow.stream
        flow.parent.children.remove(flow)
        self._reshape(flow.parent)
        for node in flow.path:
            self._at[stream][node].remove(flow)
        self._count(flow, -1)

    def _narrow(self, flow: _Flow) -> bool:
        """Recompute ``flow`` from its consumers; True if anything changed."""
        stream = flow.stream
        consumers = [
            (c.predicate, c.sel, needs, needs, c.origin)  # a flow filters by its predicate: needs its attributes
            for c in flow.children
            for needs in [c.attrs | self._mask(stream, c.predicate.dims)]
        ]
        consumers += [(s.where, s.sel, s.select, s.select | s.where_attrs, s.home) for s in flow.deliveries]
        pred, sel = consumers[0][:2]
        bounds = None  # of ``pred``, built only when a fold step is not remembered
        remembered = False  # ``pred`` is a relaxation remembered from an earlier fold
        for other, *_ in consumers[1:]:
            key = (stream, pred, other)
            step = self._folds.get(key)
            hit = step is not None
            if not hit:
                matched, relaxed = self.match(pred, other)
                if matched:
                    step = (None, 0.0)
                else:  # sel(pred OR fresh) by difference: far cheaper than a full decomposition
                    bounds = BoxBounds(pred) if bounds is None else bounds.widened(pred)
                    fresh = added_boxes(relaxed, pred)
                    step = (relaxed, self.cost.added_selectivity(stream, fresh, bounds.overlapping))
                self._folds[key] = step
            if step[0] is not None:
                pred, remembered = step[0], hit
                sel += step[1]
        if remembered:  # the matcher makes each relaxation a new object, and deliveries compare by identity
            pred = Predicate(pred.boxes)
        if pred != flow.predicate and not pred.implies(flow.predicate):
            # HCR folds the consumers into interval hulls, which may reach past the flow's predicate (and
            # so past its parent's): the flow would then claim tuples it never receives, and a later
            # subscription matched against that claim would miss them.  Narrowing never widens.
            pred, sel = flow.predicate, flow.sel
        attrs = full = 0
        for c_pred, c_sel, c_attrs, c_full, _ in consumers:
            full |= c_full
            attrs |= c_attrs if self._holds_exactly(pred, sel, c_pred, c_sel) else c_full
        last = max(flow.path.index(where) for *_, where in consumers)
        path = flow.path[: last + 1]
        if (pred, attrs, path) == (flow.predicate, flow.attrs, flow.path):
            flow.full_needs = full
            return False
        self._count(flow, -1)
        for node in flow.path[last + 1 :]:
            self._at[stream][node].remove(flow)
        flow.predicate, flow.sel, flow.attrs, flow.full_needs, flow.path = pred, sel, attrs, full, path
        self._refreeze(flow)
        self._count(flow, +1)
        return True

    def _replan(self, stream: str) -> list[str]:
        """Drop ``stream``'s tree and plan its active subscriptions again in arrival order.  Capped, each
        option's cap counts only the subscriptions placed so far, so the tree stays within
        query-shipping's bytes after every subscription; otherwise each adds at most its own
        query-shipping tuple-hops."""
        replaced = self._clear(stream)
        subs = sorted((s for s in self._subs.values() if s.spec.stream == stream), key=lambda s: s.arrival)
        for sub in subs:
            self._ship(sub, -1)
        for sub in subs:
            self._ship(sub, +1)
            self._apply(sub, self._best_option(sub))
        return replaced

    def _clear(self, stream: str) -> list[str]:
        """Uninstall every flow of ``stream``; their ids in creation order."""
        root = self._roots[stream]
        replaced = []
        pending = [root]
        while pending:
            flow = pending.pop()
            pending.extend(flow.children)
            if flow.id is not None:
                replaced.append(flow.id)
        root.children.clear()
        self._reshape(root)
        root.deliveries.clear()
        self._at[stream] = {root.origin: [root]}
        self._total[stream] = self._tuples[stream] = 0.0
        return sorted(replaced, key=lambda i: int(i[1:]))

    # -- snapshots -------------------------------------------------------------------------------------
    def epoch(self, start: float, end: float) -> Epoch:
        """The installed flows (by stream, each tree depth-first, parents before children) and the
        deliveries (in scenario order).  A flow or delivery nothing changed is the very object of the
        snapshot before, which is what lets the data planes diff epochs by identity."""
        for sub in self._recheck:
            self._delivered[sub.position] = self._delivery(sub)
        self._recheck.clear()
        flows = chain.from_iterable(self._subtree(self._roots[s.id]) for s in self.scenario.streams)
        return Epoch(start, end, tuple(flows), tuple(filter(None, self._delivered)))

    def _subtree(self, flow: _Flow) -> tuple[Flow, ...]:
        """The frozen flows of ``flow``'s tree (``flow`` first but for the raw stream), depth-first."""
        if flow.subtree is None:
            below = chain.from_iterable(self._subtree(child) for child in flow.children)
            flow.subtree = tuple(below) if flow.id is None else (self._freeze(flow), *below)
        return flow.subtree

    def _refreeze(self, flow: _Flow) -> None:
        """``flow`` changed: its next snapshot is a new object, and its deliveries may change with it."""
        flow.frozen = None
        self._reshape(flow)
        self._recheck.update(dict.fromkeys(flow.deliveries))

    @staticmethod
    def _reshape(flow: _Flow | None) -> None:
        """A flow of ``flow``'s tree changed, or the flows it holds: drop the trees cached up to the root."""
        while flow is not None:
            flow.subtree = None
            flow = flow.parent

    def _delivery(self, sub: _Sub) -> Delivery:
        """``sub``'s delivery: the one of the snapshot before while it reads the same flow and predicate."""
        host = sub.flow
        cached = sub.delivery
        if cached is None or cached.flow != host.id or sub.delivery_of is not host.predicate:
            exact = host.id is not None and self._holds_exactly(host.predicate, host.sel, sub.where, sub.sel)
            predicate = Predicate.TRUE if exact else sub.where
            names = self._names(sub.spec.stream, sub.select)
            sub.delivery = Delivery(sub.spec.id, sub.spec.peer, sub.home, host.id, predicate, names)
            sub.delivery_of = host.predicate
        return sub.delivery

    def _freeze(self, flow: _Flow) -> Flow:
        if flow.frozen is None:
            flow.frozen = Flow(
                flow.id,
                flow.stream,
                flow.parent.id,
                flow.origin,
                flow.path,
                flow.predicate,
                self._names(flow.stream, flow.attrs),
            )
        return flow.frozen


def plan_sharing(
    scenario: Scenario, strategy: str, network: Network, cost: CostModel, progress: Progress | None = None
) -> Plan:
    """Plan the scenario consolidating (module docstring); if the cost model expects that plan to carry
    more bytes over the whole run than query-shipping, plan it byte-capped instead.  ``progress`` (epochs
    done, epochs) is called after each snapshot; the byte-capped pass counts again from the start."""
    plan, run_bytes, shipping_bytes = _plan_once(scenario, strategy, network, cost, False, progress)
    if run_bytes > shipping_bytes * (1 + _RELATIVE_SLACK):
        plan, *_ = _plan_once(scenario, strategy, network, cost, True, progress)
    return plan


def _plan_once(
    scenario: Scenario, strategy: str, network: Network, cost: CostModel, capped: bool, progress: Progress | None
) -> tuple[Plan, float, float]:
    """One planner over the scenario's subscription events (one epoch per interval between them), its
    estimated backbone bytes over the run and query-shipping's."""
    planner = Planner(scenario, strategy, network, cost, capped)
    epochs, decisions = [], []
    run_bytes = shipping_bytes = 0.0
    steps = timeline(scenario)
    for start, end, events in steps:
        for event in events:
            if event.kind == "subscribe":
                decisions.append(planner.subscribe(event.subscription, event.time))
            else:
                decisions.append(planner.unsubscribe(event.subscription, event.time))
        epochs.append(planner.epoch(start, end))
        run_bytes += planner.bytes_per_s * (end - start)
        shipping_bytes += planner.shipping_bytes_per_s * (end - start)
        if progress is not None:
            progress(len(epochs), len(steps))
    return Plan(strategy, scenario.name, tuple(epochs), tuple(decisions)), run_bytes, shipping_bytes
