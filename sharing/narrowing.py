"""What a flow must be for the consumers it has left: its predicate and path, recomputed.

After a departure a flow may keep more tuples than its consumers need.  Its predicate is folded from the
consumers' predicates with the strategy's matcher (each consumer not covered yet relaxes the fold, as it
would relax a stream predicate on arrival), and its path ends at the last super-peer where one reads it.
What its tuples carry follows the subscriptions it serves by itself (:mod:`sharing.needs`).

**Narrowing never widens.**  HCR folds the consumers' predicates into interval hulls, and a hull can
reach past the flow's old predicate, and so past its parent's: the flow would then claim tuples its
parent never forwards, and a later subscription that reuses it for those tuples would silently miss
them.  So a folded predicate replaces the old one only if the old one implies it; otherwise the flow
keeps its old predicate (still sound: it covers every consumer, and deliveries re-apply their WHERE).
"""

from __future__ import annotations

from typing import NamedTuple

from matcher import Predicate
from sharing.cost import BoxBounds, CostModel, added_boxes
from sharing.search import Matcher
from sharing.state import InstalledFlow


class Consumer(NamedTuple):
    """A child flow or a delivery reading a flow, as the flow sees it."""

    predicate: Predicate
    sel: float
    at: str  # the super-peer where it reads the flow


class FlowShape(NamedTuple):
    """A flow's predicate (and selectivity) and path."""

    predicate: Predicate
    sel: float
    path: tuple[str, ...]


class ConsumerFold:
    """Recomputes flows from their consumers, remembering each fold step across departures: narrowing
    folds a flow's consumers again after each departure below it, and all but the departed consumer's
    steps are the ones folded before."""

    def __init__(self, cost: CostModel, match: Matcher):
        self._cost = cost
        self._match = match
        # (stream, predicate, consumer predicate) -> (the relaxation, or None when the predicate covers
        # the consumer, and the selectivity it adds)
        self._steps: dict[tuple[str, Predicate, Predicate], tuple[Predicate | None, float]] = {}

    @staticmethod
    def consumers(flow: InstalledFlow) -> list[Consumer]:
        """``flow``'s child flows, then its deliveries."""
        found = [Consumer(c.predicate, c.sel, c.origin) for c in flow.children]
        found += [Consumer(s.where, s.sel, s.home) for s in flow.deliveries]
        return found

    def shape(self, flow: InstalledFlow, keep_predicate: bool = False) -> FlowShape:
        """What ``flow`` must be for its consumers (it has at least one); with ``keep_predicate``, only its
        path is recomputed (its predicate covers every consumer already: folding the consumers again is
        what costs)."""
        consumers = self.consumers(flow)
        last = max(flow.path.index(consumer.at) for consumer in consumers)
        path = flow.path[: last + 1]
        if keep_predicate:
            return FlowShape(flow.predicate, flow.sel, path)
        stream = flow.stream
        pred, sel = consumers[0].predicate, consumers[0].sel
        bounds = None  # of ``pred``, built only when a fold step is not remembered
        remembered = False  # ``pred`` is a relaxation remembered from an earlier fold
        for consumer in consumers[1:]:
            key = (stream, pred, consumer.predicate)
            step = self._steps.get(key)
            hit = step is not None
            if not hit:
                matched, relaxed = self._match(pred, consumer.predicate)
                if matched:
                    step = (None, 0.0)
                else:  # sel(pred OR fresh) by difference: far cheaper than a full decomposition
                    bounds = BoxBounds(pred) if bounds is None else bounds.widened(pred)
                    fresh = added_boxes(relaxed, pred)
                    step = (relaxed, self._cost.added_selectivity(stream, fresh, bounds.overlapping))
                self._steps[key] = step
            if step[0] is not None:
                pred, remembered = step[0], hit
                sel += step[1]
        if remembered:  # the matcher makes each relaxation a new object, and deliveries compare by identity
            pred = Predicate(pred.boxes)
        if pred != flow.predicate and not pred.implies(flow.predicate):  # narrowing never widens
            pred, sel = flow.predicate, flow.sel
        return FlowShape(pred, sel, path)
