"""Plan versions as every live node sees them, and the emulated clock.

The coordinator publishes each plan version (retained, on ``ctl/plan``) with the full subscription list it
was made from; a node rebuilds that version's scenario and plan once (:class:`PlanBook`, shared by the
nodes of one process) and installs an epoch's operators (peers/superpeer.py's ``install``: the compiled
selection of every engine, over one table of readers per process) the first time a batch of it arrives.
Batches name the version that routes them, so a plan change never re-routes a tuple already emitted: every
tuple is routed by the epoch in force at its emission time under the version its source stamped.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from matcher import QueryError
from peers.live.malformed import MalformedMessage, integer, json_object, number
from peers.live.panes import PaneSites, pane_sites, tree_readers
from peers.live.processors import ProcessorNumbers
from peers.live.wire import plan_from_wire, plan_to_wire, subscription_from_json, subscription_to_json
from peers.superpeer import ChannelKey, Operator, ReaderTable, install
from sharing.plan import Epoch, Flow, Plan
from topologies.errors import InputError, PlanError
from topologies.model import Scenario

_INSTALLED_EPOCHS = 256  # epochs whose operators stay installed (LRU); batches rarely straddle more


@dataclass(frozen=True)
class PlanVersion:
    version: int
    scenario: Scenario  # the base scenario with this version's duration and subscriptions
    plan: Plan
    starts: np.ndarray  # epoch starts, to split uploads by epoch
    subscribers: dict[str, str]  # subscription -> its thin-peer

    def epoch_of(self, times: np.ndarray) -> np.ndarray:
        """Index of the epoch in force at each emission time (-1 where no epoch is)."""
        k = np.searchsorted(self.starts, times, side="right") - 1
        ends = np.array([e.end for e in self.plan.epochs])
        inside = (k >= 0) & (times < ends[np.clip(k, 0, None)]) if len(ends) else np.zeros(len(times), bool)
        return np.where(inside, k, -1)


@dataclass(frozen=True)
class Installed:
    operators: dict[tuple[str, Hashable], Operator]  # (super-peer, input channel key) -> operator
    flows: dict[str, Flow]  # flow id -> the flow (its path, its stream), at every super-peer
    # root pane flow id -> the subscriptions reading its tree (peers/live/panes.py), wherever they are
    pane_readers: dict[str, tuple[str, ...]]


def plan_message(version: int, scenario: Scenario, plan: Plan, run: str = "") -> bytes:
    doc = {
        "run": run,
        "version": version,
        "duration": scenario.duration,
        "subscriptions": [subscription_to_json(s) for s in scenario.subscriptions],
        "plan": plan_to_wire(plan),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


class PlanBook:
    """Plan versions decoded from ``ctl/plan`` messages of run ``run``, and the operators of their epochs at
    super-peers ``nodes`` (None: all; a process installs only what its own super-peers run)."""

    def __init__(self, base: Scenario, run: str = "", nodes: Iterable[str] | None = None):
        self.base = base
        self.run_id = run
        self.nodes = None if nodes is None else frozenset(nodes)
        self.versions: dict[int, PlanVersion] = {}
        self._installed: OrderedDict[tuple[int, int], Installed] = OrderedDict()
        self._last: tuple[bytes, int] | None = None  # the latest plan message and its version
        # consecutive epochs share most readers: each is compiled once, for every version and epoch
        self._readers = ReaderTable(base)
        self._numbers: dict[int, ProcessorNumbers] = {}  # per version, its processors' tie order (laid out once)
        self._aggregates: dict[int, bool] = {}  # per version, whether it has record or pane flows
        self._pane_sites: dict[int, PaneSites] = {}  # per version, where its pane trees run

    @property
    def latest(self) -> PlanVersion | None:
        return self.versions[max(self.versions)] if self.versions else None

    def add(self, payload: bytes) -> PlanVersion | None:
        """The version a plan message carries; None for a message of another run (a retained leftover).

        Raises :class:`MalformedMessage` for a message that is not a plan of this scenario.
        """
        # every node of a process receives the same retained message: parse it once (megabytes on large)
        if self._last is not None and self._last[0] == payload:
            return self.versions[self._last[1]]
        doc = json_object(payload, "coordinator")
        if doc.get("run") != self.run_id:
            return None
        version = integer(doc, "version", "coordinator")
        if version not in self.versions:
            duration = number(doc, "duration", "coordinator")
            try:
                subscriptions = tuple(subscription_from_json(self.base, s) for s in doc["subscriptions"])
                scenario = replace(self.base, duration=duration, subscriptions=subscriptions)
                plan = plan_from_wire(doc["plan"]).check(scenario)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError, InputError) as err:
                raise MalformedMessage(f"not a plan of {self.base.name}: {err!r}", "coordinator") from None
            except (QueryError, PlanError) as err:
                raise MalformedMessage(f"not a plan of {self.base.name}: {err}", "coordinator") from None
            self.add_version(version, scenario, plan)
        self._last = (payload, version)
        return self.versions[version]

    def add_version(self, version: int, scenario: Scenario, plan: Plan) -> PlanVersion:
        starts = np.array([e.start for e in plan.epochs], dtype=np.float64)
        subscribers = {s.id: s.peer for s in scenario.subscriptions}
        self.versions[version] = PlanVersion(version, scenario, plan, starts, subscribers)
        return self.versions[version]

    def installed(self, version: int, epoch: int) -> Installed:
        """The operators of an epoch (a delivery's output keyed by its subscription,
        :func:`~peers.superpeer.subscription_keys`) and its flows."""
        key = (version, epoch)
        found = self._installed.get(key)
        if found is None:
            pv = self.versions[version]
            plan_epoch = pv.plan.epochs[epoch]
            local = self._local(plan_epoch)
            operators = install(pv.scenario, local, self._readers)  # outputs name their subscription
            found = Installed(operators, {f.id: f for f in plan_epoch.flows}, tree_readers(plan_epoch))
            self._installed[key] = found
            if len(self._installed) > _INSTALLED_EPOCHS:
                self._installed.popitem(last=False)
        else:
            self._installed.move_to_end(key)
        return found

    def processor_number(self, version: int, epoch: int, node: str, key: ChannelKey) -> int:
        """Where the tuples of input ``key`` (of ``epoch`` of plan version ``version``) read at ``node`` come
        among those reaching its processor at one instant: the simulator's number of that processor's
        channel (:class:`~peers.live.processors.ProcessorNumbers`, the whole plan laid out once)."""
        return self._layout(version).number(epoch, node, key)

    def flow_number(self, version: int, epoch: int, flow_id: str) -> int:
        """The simulator's number of the channel of flow ``flow_id`` (of ``epoch`` of plan version
        ``version``): where its tuples come among those reaching a link direction at one instant."""
        return self._layout(version).flow(epoch, flow_id)

    def delivery_number(self, version: int, epoch: int, sub: str) -> int:
        """The simulator's number of the channel of ``sub``'s delivery (in ``epoch`` of plan version
        ``version``): where its records come among those reaching its access link at one instant."""
        return self._layout(version).delivery(epoch, sub)

    def aggregates(self, version: int) -> bool:
        """Whether plan version ``version`` has record or pane flows (peers/live/records.py)."""
        found = self._aggregates.get(version)
        if found is None:
            found = self._aggregates[version] = any(
                f.aggregate is not None or f.panes is not None
                for e in self.versions[version].plan.epochs
                for f in e.flows
            )
        return found

    def pane_sites(self, version: int) -> PaneSites:
        """Where the pane trees of plan version ``version`` run (peers/live/panes.py; found once per process)."""
        found = self._pane_sites.get(version)
        if found is None:
            found = self._pane_sites[version] = pane_sites(self.versions[version].plan)
        return found

    def _layout(self, version: int) -> ProcessorNumbers:
        numbers = self._numbers.get(version)
        if numbers is None:
            pv = self.versions[version]
            numbers = self._numbers[version] = ProcessorNumbers(pv.scenario, pv.plan)
        return numbers

    def _local(self, epoch: Epoch) -> Epoch:
        """``epoch`` without what only other processes' super-peers run: the flows read at ``nodes``, the
        deliveries made there (all of a subscription's are made at its subscriber's super-peer, so the
        subscription keys stay the same) and the lineage of what they read (install checks it)."""
        if self.nodes is None:
            return epoch
        by_id = {f.id: f for f in epoch.flows}
        deliveries = tuple(d for d in epoch.deliveries if d.home in self.nodes)
        needed: set[str] = set()
        read_here = [f.id for f in epoch.flows if f.origin in self.nodes] + [d.flow for d in deliveries]
        for flow_id in read_here:
            while flow_id is not None and flow_id not in needed:
                needed.add(flow_id)
                flow_id = by_id[flow_id].parent
        flows = tuple(f for f in epoch.flows if f.id in needed)
        return replace(epoch, flows=flows, deliveries=deliveries)


@dataclass(frozen=True)
class Clock:
    """Emulated time: ``speed`` emulated seconds per wall second since wall time ``t0`` (time.time())."""

    t0: float
    speed: float

    def now(self) -> float:
        return (time.time() - self.t0) * self.speed

    def wall(self, emulated: float) -> float:
        return self.t0 + emulated / self.speed
