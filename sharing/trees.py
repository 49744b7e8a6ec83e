"""Every stream's tree of installed flows, where each flow is available, and what the flows cost.

A tree is rooted at the raw stream, available at its source's super-peer; a flow is available at every
super-peer of its path.  :class:`FlowTrees` installs, splits, reshapes and removes flows and adds or takes
subscriptions off their need classes (:mod:`sharing.needs`), keeping each stream's estimated bytes and
tuple-hops per second (:mod:`sharing.cost`) and telling the snapshots what changed
(:mod:`sharing.snapshots`); which flows to install or change is the planner's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from typing import NamedTuple

from matcher import Predicate
from sharing.cost import CostModel
from sharing.limits import NetworkLoads
from sharing.needs import NeedUnion
from sharing.snapshots import Snapshots
from sharing.state import ActiveSubscription, InstalledFlow, bits_of
from topologies.model import Scenario


class FlowTrees:
    """The installed flows of one scenario's streams."""

    def __init__(self, scenario: Scenario, cost: CostModel, snapshots: Snapshots, loads: NetworkLoads | None = None):
        self._cost = cost
        self._snapshots = snapshots
        self.loads = loads  # each link direction's and super-peer's load, when the network has limits
        self._cpu = None if loads is None else loads.cpu  # the limited processors' loads, when some are
        self._ids = count(1)
        self._seq = count()
        self.moves = 0  # flows installed (split parts too) and uninstalled so far: what re-plans count
        self.roots: dict[str, InstalledFlow] = {}
        self.available: dict[str, dict[str, list[InstalledFlow]]] = {}  # stream -> super-peer -> flows there
        self.bytes_per_s: dict[str, float] = {}  # stream -> estimated bytes/s of its flows
        self.tuple_hops: dict[str, float] = {}  # stream -> estimated tuple-hops/s of its flows
        for s in scenario.streams:
            source = scenario.home(s.source)
            everything = (1 << len(s.attributes)) - 1
            root = InstalledFlow(None, s.id, None, source, (source,), Predicate.TRUE, 1.0, everything, -1)
            self.roots[s.id] = root
            self.available[s.id] = {source: [root]}
            self.bytes_per_s[s.id] = self.tuple_hops[s.id] = 0.0

    def _count(self, flow: InstalledFlow, sign: int) -> None:
        """Count ``flow`` as it is now in (+1) or out (-1) of its stream's totals."""
        stream = flow.stream
        attribute_sel = flow.attribute_sel()
        self.bytes_per_s[stream] += sign * self._cost.bundle_cost(stream, flow.sel, attribute_sel, flow.hops)
        self.tuple_hops[stream] += sign * self._cost.tuple_hops(stream, flow.sel, flow.hops)
        if self.loads is not None:
            self.loads.add(stream, flow.sel, attribute_sel, flow.attrs.bit_count(), flow.path, sign)
            if self._cpu is not None:
                self._cpu.touch(flow)

    def readers_changed(self, flow: InstalledFlow) -> None:
        """``flow``'s deliveries changed (the planner adds and removes them): what its readers cost the
        processor where it ends changes."""
        if self._cpu is not None:
            self._cpu.touch(flow)

    def install(self, parent: InstalledFlow, path: tuple[str, ...], predicate: Predicate, sel: float) -> InstalledFlow:
        """A new flow reading ``parent`` at ``path[0]`` (its end) and carried along ``path``; it serves no
        subscription yet (:meth:`serve`)."""
        stream = parent.stream
        flow = InstalledFlow(f"F{next(self._ids)}", stream, parent, path[0], path, predicate, sel, 0, next(self._seq))
        parent.children.append(flow)
        self.moves += 1
        self._snapshots.tree_changed(parent)
        for node in path:
            self.available[stream].setdefault(node, []).append(flow)
        self._count(flow, +1)
        return flow

    def serve(self, flow: InstalledFlow, sub: ActiveSubscription, gains: Sequence[float] | None = None) -> None:
        """``sub`` is served through ``flow``: its WHERE joins the need class of each attribute it selects,
        each growing by ``gains`` (in attribute order; computed here when None)."""
        self._count(flow, -1)
        flow.below[sub] = None
        changed = False
        for k, bit in enumerate(bits_of(sub.select)):
            union = flow.unions.get(bit)
            if union is None:
                union = flow.unions[bit] = NeedUnion()
            gain = union.gain(self._cost, flow.stream, sub.where) if gains is None else gains[k]
            changed |= union.add(sub.where, gain)
        if sub.select & ~flow.attrs:
            flow.attrs |= sub.select
            changed = True
        self._count(flow, +1)
        if changed:
            self._snapshots.flow_changed(flow)

    def unserve(self, flow: InstalledFlow, sub: ActiveSubscription) -> None:
        """``sub`` is no longer served through ``flow``: the inverse of :meth:`serve`."""
        self._count(flow, -1)
        del flow.below[sub]
        changed = False
        for bit in bits_of(sub.select):
            union = flow.unions[bit]
            changed |= union.remove(self._cost, flow.stream, sub.where)
            if not union:
                del flow.unions[bit]
                flow.attrs &= ~(1 << bit)
        self._count(flow, +1)
        if changed:
            self._snapshots.flow_changed(flow)

    def uninstall(self, flow: InstalledFlow) -> None:
        """Remove ``flow``, which nothing reads any more."""
        stream = flow.stream
        flow.parent.children.remove(flow)
        self.moves += 1
        self._snapshots.tree_changed(flow.parent)
        for node in flow.path:
            self.available[stream][node].remove(flow)
        self._count(flow, -1)
        if self._cpu is not None:
            self._cpu.forget(flow)

    def reshape(self, flow: InstalledFlow, predicate: Predicate, sel: float, path: tuple[str, ...]) -> None:
        """Give ``flow`` a new predicate and path; the path may only be cut short.  The caller tells the
        snapshots what the change means for them."""
        self._count(flow, -1)
        for node in flow.path[len(path) :]:
            self.available[flow.stream][node].remove(flow)
        flow.predicate, flow.sel, flow.path = predicate, sel, path
        self._count(flow, +1)

    def split(self, flow: InstalledFlow, cut: int) -> InstalledFlow:
        """Cut ``flow`` after ``cut`` hops; the rest becomes a child flow with the same predicate and need
        classes that takes over its consumers (they all read it at its end).  The total cost is
        unchanged."""
        stream = flow.stream
        tail = flow.path[cut:]
        part = InstalledFlow(
            f"F{next(self._ids)}",
            stream,
            flow,
            tail[0],
            tail,
            flow.predicate,
            flow.sel,
            flow.attrs,
            next(self._seq),
        )
        part.children, part.deliveries = flow.children, flow.deliveries
        part.below = dict(flow.below)
        part.unions = {bit: union.copy() for bit, union in flow.unions.items()}
        flow.children, flow.deliveries = [part], []
        self.moves += 1
        for child in part.children:
            child.parent = part
            self._snapshots.flow_changed(child)  # its snapshot names its parent
        for s in part.deliveries:
            s.flow = part
        self._snapshots.recheck(part.deliveries)
        self._snapshots.flow_changed(flow)
        flow.path = flow.path[: cut + 1]
        at = self.available[stream]
        at[tail[0]].append(part)
        for node in tail[1:]:
            flows = at[node]
            flows[flows.index(flow)] = part
        if self._cpu is not None:  # the readers now read ``part``, and ``part`` reads ``flow`` at the cut
            self._cpu.touch(part)
        return part

    def absorb(self, flow: InstalledFlow, child: InstalledFlow) -> None:
        """``flow`` feeds ``child`` alone: make them one flow, ``flow`` carried on along ``child``'s path
        with ``child``'s predicate (which implies its own) and need classes (the same subscriptions are
        below both), reading nothing else; ``child`` goes."""
        stream = flow.stream
        self._count(flow, -1)
        self._count(child, -1)
        at = self.available[stream]
        at[child.origin].remove(child)
        for node in child.path[1:]:
            flows = at[node]
            flows[flows.index(child)] = flow
        flow.path = flow.path + child.path[1:]
        flow.predicate, flow.sel, flow.bounds = child.predicate, child.sel, child.bounds
        flow.attrs, flow.below, flow.unions = child.attrs, child.below, child.unions
        flow.children, flow.deliveries = child.children, child.deliveries
        for grandchild in flow.children:
            grandchild.parent = flow
            self._snapshots.flow_changed(grandchild)  # its snapshot names its parent
        for s in flow.deliveries:
            s.flow = flow
        self._snapshots.flow_changed(flow)
        self.moves += 1
        self._count(flow, +1)
        if self._cpu is not None:
            self._cpu.forget(child)  # its lists are ``flow``'s now

    def clear(self, stream: str) -> list[str]:
        """Uninstall every flow of ``stream``; their ids in creation order.  The flows themselves are left
        as they were (:meth:`kept` and :meth:`restore` put them back)."""
        root = self.roots[stream]
        replaced = []
        for flow in self._flows(root):
            replaced.append(flow.id)
            if self.loads is not None:
                self.loads.add(stream, flow.sel, flow.attribute_sel(), flow.attrs.bit_count(), flow.path, -1)
            if self._cpu is not None:
                self._cpu.forget(flow)
        if self._cpu is not None:
            self._cpu.touch(root)
        root.children = []
        self._snapshots.tree_changed(root)
        root.deliveries = []
        self.available[stream] = {root.origin: [root]}
        self.bytes_per_s[stream] = self.tuple_hops[stream] = 0.0
        return sorted(replaced, key=lambda i: int(i[1:]))

    @staticmethod
    def _flows(root: InstalledFlow) -> list[InstalledFlow]:
        """The installed flows of ``root``'s tree (not the raw stream)."""
        found = []
        pending = list(root.children)
        while pending:
            flow = pending.pop()
            pending.extend(flow.children)
            found.append(flow)
        return found

    def kept(self, stream: str) -> KeptTree:
        """What :meth:`restore` needs to put ``stream``'s tree back as it is now after a :meth:`clear`."""
        root = self.roots[stream]
        available = {node: list(flows) for node, flows in self.available[stream].items()}
        return KeptTree(root.children, root.deliveries, available, self.bytes_per_s[stream], self.tuple_hops[stream])

    def restore(self, stream: str, kept: KeptTree) -> None:
        """Drop ``stream``'s flows and put back the tree :meth:`kept` saw, the same flow objects."""
        self.clear(stream)
        root = self.roots[stream]
        root.children, root.deliveries = kept.children, kept.deliveries
        self.available[stream] = kept.available
        self.bytes_per_s[stream], self.tuple_hops[stream] = kept.bytes_per_s, kept.tuple_hops
        if self.loads is not None:
            for flow in self._flows(root):
                self.loads.add(stream, flow.sel, flow.attribute_sel(), flow.attrs.bit_count(), flow.path, +1)
                if self._cpu is not None:
                    self._cpu.touch(flow)
        if self._cpu is not None:
            self._cpu.touch(root)
        self._snapshots.tree_changed(root)


class KeptTree(NamedTuple):
    """A stream's tree as :meth:`FlowTrees.kept` saw it."""

    children: list[InstalledFlow]
    deliveries: list
    available: dict[str, list[InstalledFlow]]
    bytes_per_s: float
    tuple_hops: float
