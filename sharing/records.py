"""The record flows of a sharing plan: aggregate subscriptions whose records travel instead of their input.

An aggregate subscription's records often weigh a tiny fraction of its input (one record per window and
group against every tuple of its WHERE).  The sharing strategies serve such a subscription as
query-shipping does (docs/ACCOUNTING.md, "Records"): a record flow of its own, aggregated at the source's
super-peer and carried along the route to the subscriber's, when the cost model expects its records to
weigh fewer bytes than its input (:func:`sharing.baselines.records_shipped`); the others join the flow
trees with their input, as any selection.  A record flow is nobody else's to share, so it stays out of
the trees, their bytes and the bound the planner keeps against query-shipping (docs/PLANNER.md).  Those whose
records combine from panes they share with others (:mod:`sharing.panes`) read a pane tree along the same
routes instead.

:class:`RecordShipping` keeps them with query-shipping's own baseline (the same flows, routes, re-routes
and cut-offs at failures), and lists them as one more part of each epoch's flows.
"""

from __future__ import annotations

from network.routing import Network
from sharing.baselines import Baseline
from sharing.panes import PaneClass, PaneTrees
from sharing.plan import Delivery, Flow
from topologies.model import Scenario, SubscriptionSpec
from topologies.outages import NetworkState


class RecordShipping:
    """The record flows of the aggregate subscriptions ``shipped`` (ids) of ``scenario``, over the epochs."""

    def __init__(
        self, scenario: Scenario, network: Network, shipped: frozenset[str], classes: dict[str, PaneClass] | None = None
    ):
        self.shipped = shipped
        # those of them whose records combine from a pane flow they share (sharing.panes), along the routes
        # query-shipping takes
        self.panes = PaneTrees(scenario, classes or {})
        self._baseline = Baseline(scenario, network, "query-shipping")
        self._position = {s.id: k for k, s in enumerate(scenario.subscriptions)}
        self._flows: dict[int, Flow] = {}  # by subscription position
        self._part: tuple[Flow, ...] | None = ()
        self._pane_part: tuple[Flow, ...] = ()  # the pane flows in ``_part``
        self._active: dict[str, None] = {}  # the subscriptions served or cut off, in arrival order

    def subscribe(self, spec: SubscriptionSpec) -> Delivery | None:
        """Serve ``spec``: its delivery, or None when no path joins it to its source (cut off)."""
        self._baseline.subscribe(spec)
        self._active[spec.id] = None
        return self._listed(spec.id)

    def unsubscribe(self, spec: SubscriptionSpec) -> None:
        self._baseline.unsubscribe(spec)
        del self._active[spec.id]
        if spec.id in self.panes.classes:
            self.panes.route(spec.id, None)
        if self._flows.pop(self._position[spec.id], None) is not None:
            self._part = None

    def network_event(self, state: NetworkState) -> tuple[list[str], list[str], dict[str, Delivery | None]]:
        """Move to the backbone ``state``: the subscriptions cut off, those served again, and the delivery of
        each one whose flow changed (None: cut off)."""
        cut, restored = self._baseline.network_event(state)
        return cut, restored, {sub_id: self._listed(sub_id) for sub_id in self._active}

    @property
    def active(self) -> list[str]:
        """The subscriptions served or cut off, in arrival order."""
        return list(self._active)

    def flow(self, sub_id: str) -> Flow | None:
        """``sub_id``'s record flow now (None: cut off)."""
        served = self._baseline.served(sub_id)
        return None if served is None else served[0]

    def moved(self) -> int:
        """The record flows removed or installed since the last epoch."""
        return self._baseline.moved()

    def part(self, now: float) -> tuple[Flow, ...]:
        """The record flows, in scenario order, then the pane flows at instant ``now`` (the very tuple while
        none came, went or changed)."""
        self._baseline.epoch(now)  # what changed is read here: the next epoch's moves count from now
        panes = self.panes.flows(now)
        if self._part is None or panes is not self._pane_part:
            self._part = tuple(self._flows[p] for p in sorted(self._flows)) + panes
            self._pane_part = panes
        return self._part

    def _listed(self, sub_id: str) -> Delivery | None:
        """Take ``sub_id``'s flow as the baseline has it now; its delivery (None: cut off)."""
        position = self._position[sub_id]
        served = self._baseline.served(sub_id)
        flow = None if served is None else served[0]
        if sub_id in self.panes.classes:  # its route is the record flow's: its delivery reads the pane tree
            return self.panes.route(sub_id, None if flow is None else flow.path)
        if self._flows.get(position) is not flow:
            if flow is None:
                del self._flows[position]
            else:
                self._flows[position] = flow
            self._part = None
        return None if served is None else served[1]
