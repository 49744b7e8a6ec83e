"""The planner's epochs, made incrementally as changes to the epoch before.

An epoch costs what changed since the epoch before plus copying references: each installed flow keeps its
frozen snapshot and the frozen flows of its tree (``subtree``), and each subscription its delivery. Whatever
changes a flow drops its snapshot (:meth:`Snapshots.flow_changed`), whatever changes which flows a tree
holds drops the cached trees up to the root (:meth:`Snapshots.tree_changed`), and whatever may change the
flow or predicate a subscription reads marks it to be looked at again (:meth:`Snapshots.recheck`).  A flow
or delivery nothing changed is the very object of the snapshot before, and one equal to one frozen before is
that object, which is how :class:`~sharing.epochs.Listing` finds each epoch's change of the flows at the
cost of what changed; the deliveries' change comes from the subscriptions looked at
(:class:`~sharing.epochs.Slots`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from matcher import Predicate
from sharing.epochs import Listing, Slots
from sharing.plan import Change, Delivery, Flow
from sharing.state import ActiveSubscription, AttributeMasks, InstalledFlow, holds_exactly
from topologies.model import Scenario


class Snapshots:
    """The frozen flows and deliveries of the planner's state, kept from one epoch to the next."""

    def __init__(self, scenario: Scenario, masks: AttributeMasks):
        self._masks = masks
        self._delivered = Slots(len(scenario.subscriptions))  # deliveries by subscription position
        self._recheck: dict[ActiveSubscription, None] = {}  # whose delivery may have changed since the last epoch
        self._flows = Listing()
        self._made: dict = {}  # every flow and delivery frozen so far, each its own key: one object per value

    def flow_changed(self, flow: InstalledFlow) -> None:
        """``flow`` changed: its next snapshot is a new object, and its deliveries may change with it."""
        flow.frozen = None
        self.tree_changed(flow)
        self.recheck(flow.deliveries)

    @staticmethod
    def tree_changed(flow: InstalledFlow | None) -> None:
        """A flow of ``flow``'s tree changed, or the flows it holds: drop the trees cached up to the root."""
        while flow is not None:
            flow.subtree = None
            flow = flow.parent

    def recheck(self, subs: Iterable[ActiveSubscription]) -> None:
        """The flow or the predicate ``subs`` read may have changed."""
        self._recheck.update(dict.fromkeys(subs))

    def forget(self, sub: ActiveSubscription) -> None:
        """``sub`` departed: it has no delivery from the next epoch on."""
        self._delivered[sub.position] = None
        self._recheck.pop(sub, None)

    def deliver(self, position: int, delivery: Delivery | None) -> None:
        """The subscription at ``position`` is served by ``delivery`` (None: not at all), a flow outside the
        trees (a record flow, :mod:`sharing.records`)."""
        self._delivered[position] = delivery

    def epoch(self, roots: Iterable[InstalledFlow], start: float, end: float, beside: tuple[Flow, ...] = ()) -> Change:
        """The epoch ``[start, end)`` as a change to the epoch before: the installed flows (the trees of
        ``roots``, each depth-first, parents before children; a tree a part), the flows ``beside`` them (one
        more part) and the deliveries (in scenario order, from the subscriptions whose delivery changed)."""
        for sub in self._recheck:
            self._delivered[sub.position] = self.delivery(sub)
        self._recheck.clear()
        flows = (*map(self._subtree, roots), beside)
        return Change(start, end, self._flows.change(tuple(chain.from_iterable(flows)), flows), self._delivered.edit())

    def _subtree(self, flow: InstalledFlow) -> tuple[Flow, ...]:
        """The frozen flows of ``flow``'s tree (``flow`` first but for the raw stream), depth-first."""
        if flow.subtree is None:
            below = chain.from_iterable(self._subtree(child) for child in flow.children)
            flow.subtree = tuple(below) if flow.id is None else (self.freeze(flow), *below)
        return flow.subtree

    def delivery(self, sub: ActiveSubscription) -> Delivery:
        """``sub``'s delivery: the one of the snapshot before while it reads the same flow and predicate, or
        while what it would be anew is equal to it (a host widened or narrowed for others)."""
        host = sub.flow
        cached = sub.delivery
        if cached is None or cached.flow != host.id or sub.delivery_of is not host.predicate:
            exact = host.id is not None and holds_exactly(host.predicate, host.sel, sub.where, sub.sel)
            predicate = Predicate.TRUE if exact else sub.where
            names = self._masks.names(sub.stream, sub.select)
            fresh = Delivery(sub.spec.id, sub.spec.peer, sub.home, host.id, predicate, names)
            sub.delivery = self._made.setdefault(fresh, fresh)  # equal to one made before: that object
            sub.delivery_of = host.predicate
        return sub.delivery

    def freeze(self, flow: InstalledFlow) -> Flow:
        """``flow``'s snapshot: the one of the epoch before unless ``flow`` changed since.  Its ``trim``
        entries are its need classes (:mod:`sharing.needs`), one per distinct class, with the attributes
        sharing it, in schema order."""
        if flow.frozen is None:
            schema = self._masks.schema(flow.stream)
            classes: dict[Predicate, list[str]] = {}
            for bit in sorted(flow.unions):
                classes.setdefault(flow.unions[bit].predicate(), []).append(schema[bit])
            frozen = Flow(
                flow.id,
                flow.stream,
                flow.parent.id,
                flow.origin,
                flow.path,
                flow.predicate,
                self._masks.names(flow.stream, flow.attrs),
                tuple((predicate, tuple(names)) for predicate, names in classes.items()),
            )
            flow.frozen = self._made.setdefault(frozen, frozen)  # equal to one frozen before: that object
        return flow.frozen
