"""Network limits as the network-aware planner sees them: each link direction's and each super-peer's
planned load, by the cost model's rates, against ``max_utilization`` times its bandwidth or capacity.

A flow of stream ``X`` with selectivity ``s`` puts ``rate(X) * s`` tuples per second on each link direction
of its path and makes each super-peer of its path after the first take those tuples in; its bits per
second are its bytes per second times 8, each tuple its header and the attributes it carries (the wire
size every engine counts, :func:`topologies.model.tuple_bytes`): for a flow of need classes
(:mod:`sharing.needs`) ``rate(X) * (header_bytes * s + 8 * a)``, ``a`` the sum of the selectivities of its
classes, for a flow whose tuples all carry ``n`` attributes ``a = n * s``.  A super-peer also takes in
every tuple its attached sources upload.

The planner never takes an option that adds load to a link direction or a super-peer and leaves it above
its limit (:meth:`NetworkLoads.excess`); what already stands above a limit (a source uploading more than
its super-peer may take in) is left as it is.  A scenario without finite limits (``max_utilization``
infinite, or every bandwidth infinite, no capacity and no cpu) has no :class:`NetworkLoads` at all: the
planner then runs exactly as it did before limits existed.

Processors.  A super-peer with a ``cpu`` runs its operators on a processor (docs/ACCOUNTING.md, "Super-peer
CPU"): every tuple of a flow (or of the raw stream) reaching the super-peer where operators read it costs
``box`` per box of each reader's predicate, plus ``projection`` per reader keeping it and carrying fewer
attributes than the flow.  The readers of a flow are its children and its deliveries, all at the
super-peer where it ends (the raw stream's at its source's), so a flow of stream ``X`` and selectivity
``s`` costs the processor there ``rate(X) * (s * box * B + projection * K)`` operations per second, ``B``
its readers' boxes (a delivery holding its flow's result exactly tests the one box of TRUE), ``K`` the sum
of the selectivities of the projecting readers.  A tuple costs at most ``W = box * B + projection * P``
(``P`` projecting readers), so the variance of a second's operations is at most the mean times ``W``, and
the ``peak_sd`` rule applies as it does to a link.  :class:`CpuLoads` keeps these per flow (only for the
limited super-peers, and only when some super-peer has a ``cpu``); an option is admitted only if every
processor it adds operations to stays within ``max_utilization x`` its cpu (and its bursts within the
cpu).  Where a branch is routed does not matter: the super-peers it passes through forward its tuples
without reading them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, NamedTuple

from matcher import Predicate
from network.emulated import link_specs
from network.routing import Network
from sharing.plan import Delivery, Flow, Plan
from sharing.state import RELATIVE_SLACK, InstalledFlow, holds_exactly
from topologies.model import Direction, Scenario, tuple_bytes

if TYPE_CHECKING:  # sharing.search imports this module
    from sharing.search import Option

_NOTHING: Mapping = {}


class NetworkLoads:
    """The planned bits per second of every link direction and tuples per second of every super-peer, and
    a bound of their variance from one second to the next (module docstring, "Bursts")."""

    def __init__(self, scenario: Scenario, network: Network):
        share = scenario.max_utilization
        self.max_utilization = share
        self.peak_sd = scenario.peak_sd
        self.network = network
        self._header = scenario.header_bytes
        self._rates = {s.id: float(s.rate) for s in scenario.streams}
        links = link_specs(scenario, network)  # the links as the engines emulate them
        self.bandwidth = {d: links[d][0] for d in network.directions}
        self.link_limit = {d: share * bw for d, bw in self.bandwidth.items()}
        self.capacity = dict(scenario.capacities)
        self.node_limit = {sp: share * capacity for sp, capacity in scenario.capacities}
        self.bits = dict.fromkeys(network.directions, 0.0)
        self.spread = dict.fromkeys(network.directions, 0.0)  # variance bound of the bits per second
        self.tuples = dict.fromkeys(scenario.super_peers, 0.0)
        self.arriving = dict.fromkeys(scenario.super_peers, 0.0)  # the part of ``tuples`` flows bring
        for s in scenario.streams:  # every tuple is uploaded to the source's super-peer, read or not
            self.tuples[scenario.home(s.source)] += float(s.rate)
        self.cpu = CpuLoads(scenario) if scenario.cpus else None  # the processors, when some are limited

    @classmethod
    def of(cls, scenario: Scenario, network: Network) -> NetworkLoads | None:
        """The loads of ``scenario``'s network, or None when nothing in it is limited."""
        if not math.isfinite(scenario.max_utilization):
            return None
        if not scenario.capacities and not scenario.cpus and all(math.isinf(link.bandwidth) for link in scenario.links):
            return None
        return cls(scenario, network)

    def rates(self, stream: str, sel: float, attribute_sel: float) -> tuple[float, float]:
        """(bits/s per link direction, tuples/s per receiving super-peer) of a flow of selectivity ``sel``
        whose tuples carry ``attribute_sel / sel`` attributes on average (module docstring)."""
        rate = self._rates[stream]
        return rate * (self._header * sel + 8 * attribute_sel) * 8, rate * sel

    def width(self, n_attributes: int) -> float:
        """The bits of a tuple carrying ``n_attributes``: what one tuple of a flow adds at most to a
        second's load (its variance bound is its mean times that)."""
        return tuple_bytes(self._header, n_attributes) * 8.0

    def add(
        self, stream: str, sel: float, attribute_sel: float, n_attributes: int, path: tuple[str, ...], sign: int
    ) -> None:
        """Count a flow along ``path`` in (+1) or out (-1); its tuples carry at most ``n_attributes``."""
        bits, tuples = self.rates(stream, sel, attribute_sel)
        self.add_rates(bits, tuples, self.width(n_attributes), path, sign)

    def add_rates(self, bits: float, tuples: float, width: float, path: tuple[str, ...], sign: int) -> None:
        """Count ``bits`` per second and ``tuples`` per second (each at most ``width`` bits) along ``path``
        in (+1) or out (-1)."""
        if sign < 0:
            bits, tuples = -bits, -tuples
        spread = bits * width
        for hop in pairwise(path):
            self.bits[hop] += bits
            self.spread[hop] += spread
        for node in path[1:]:
            self.tuples[node] += tuples
            self.arriving[node] += tuples

    def _link_fits(self, hop: Direction, bits: float, spread: float) -> bool:
        """Whether ``hop`` keeps its limits with ``bits`` more per second, ``spread`` more variance."""
        mean = self.bits[hop] + bits
        if mean > self.link_limit[hop]:
            return False
        return (
            not self.peak_sd
            or mean + self.peak_sd * math.sqrt(max(0.0, self.spread[hop] + spread)) <= (self.bandwidth[hop])
        )

    def _node_fits(self, node: str, tuples: float) -> bool:
        """Whether ``node`` keeps its limits taking ``tuples`` more per second from flows (a count of
        tuples each passing a filter or not: its variance is at most its mean)."""
        limit = self.node_limit.get(node)
        if limit is None:
            return True
        mean = self.tuples[node] + tuples
        if mean > limit:
            return False
        return (
            not self.peak_sd
            or mean + self.peak_sd * math.sqrt(max(0.0, self.arriving[node] + tuples)) <= (self.capacity[node])
        )

    def excess(
        self, links: Mapping[Direction, float], spread: Mapping[Direction, float], nodes: Mapping[str, float]
    ) -> str | None:
        """None when adding ``links`` (bits/s by direction, with ``spread`` more variance) and ``nodes``
        (tuples/s by super-peer) keeps every element that gains load within its limits; else the first
        that would break one, in words."""
        for hop, bits in links.items():
            if bits > 0 and not self._link_fits(hop, bits, spread.get(hop, 0.0)):
                return self._link_words(hop, bits, spread.get(hop, 0.0))
        for node, tuples in nodes.items():
            if tuples > 0 and not self._node_fits(node, tuples):
                return self._node_words(node, tuples)
        return None

    def path_excess(
        self,
        path: tuple[str, ...],
        bits: float,
        tuples: float,
        width: float,
        links: Mapping[Direction, float] = _NOTHING,
        spread: Mapping[Direction, float] = _NOTHING,
        nodes: Mapping[str, float] = _NOTHING,
    ) -> str | None:
        """:meth:`excess` of one flow's rates along ``path`` (at most ``width`` bits a tuple), on top of
        ``links``, ``spread`` and ``nodes``."""
        if bits > 0:
            for hop in pairwise(path):
                more, wider = links.get(hop, 0.0) + bits, spread.get(hop, 0.0) + bits * width
                if not self._link_fits(hop, more, wider):
                    return self._link_words(hop, more, wider)
        if tuples > 0:
            for node in path[1:]:
                more = nodes.get(node, 0.0) + tuples
                if not self._node_fits(node, more):
                    return self._node_words(node, more)
        return None

    def detour(
        self,
        start: str,
        end: str,
        bits: float,
        tuples: float,
        width: float,
        max_hops: float,
        links: Mapping[Direction, float],
        spread: Mapping[Direction, float],
        nodes: Mapping[str, float],
    ) -> tuple[str, ...] | None:
        """The path of fewest hops (at most ``max_hops``) from ``start`` to ``end`` on which a flow of
        ``bits`` and ``tuples`` per second (at most ``width`` bits a tuple) fits, on top of the planned
        loads plus ``links``, ``spread`` and ``nodes``; None when there is none.  Breadth first over
        sorted neighbours: ties go the same way every time."""
        before: dict[str, str | None] = {start: None}
        frontier = [start]
        hops = 0
        while frontier and hops < max_hops:
            hops += 1
            reached = []
            for here in frontier:
                for there in self.network.neighbours(here):
                    if there in before:
                        continue
                    hop = (here, there)
                    more = links.get(hop, 0.0) + bits
                    if bits > 0 and not self._link_fits(hop, more, spread.get(hop, 0.0) + bits * width):
                        continue
                    if tuples > 0 and not self._node_fits(there, nodes.get(there, 0.0) + tuples):
                        continue
                    before[there] = here
                    if there == end:
                        path = [there]
                        while before[path[-1]] is not None:
                            path.append(before[path[-1]])
                        return tuple(reversed(path))
                    reached.append(there)
            frontier = reached
        return None

    def toward(self, end: str, bits: float, tuples: float, width: float) -> dict[str, str | None]:
        """For every super-peer from which a flow of ``bits`` and ``tuples`` per second (at most ``width``
        bits a tuple) fits on some path to ``end`` (on top of the planned loads), the next super-peer on
        such a path of fewest hops (``end`` itself maps to None).  Breadth first backwards from ``end``
        over sorted neighbours; a super-peer over its capacity may start such a path but not be passed
        through."""

        def receives(node: str) -> bool:
            return tuples <= 0 or self._node_fits(node, tuples)

        following: dict[str, str | None] = {end: None}
        frontier = [end] if receives(end) else []
        spread = bits * width
        while frontier:
            reached = []
            for there in frontier:
                for here in self.network.neighbours(there):
                    if here in following or (bits > 0 and not self._link_fits((here, there), bits, spread)):
                        continue
                    following[here] = there
                    if receives(here):
                        reached.append(here)
            frontier = reached
        return following

    def _link_words(self, hop: Direction, bits: float, spread: float) -> str:
        a, b = hop
        mean = self.bits[hop] + bits
        if mean > self.link_limit[hop]:
            return (
                f"link {a} -> {b} would carry {_si(mean)}bit/s,"
                f" above {self.max_utilization:g} x its bandwidth {_si(self.bandwidth[hop])}bit/s"
            )
        peak = mean + self.peak_sd * math.sqrt(max(0.0, self.spread[hop] + spread))
        return (
            f"link {a} -> {b} would carry {_si(mean)}bit/s, peaking at {_si(peak)}bit/s"
            f" (mean + {self.peak_sd:g} sd), above its bandwidth {_si(self.bandwidth[hop])}bit/s"
        )

    def _node_words(self, node: str, tuples: float) -> str:
        mean = self.tuples[node] + tuples
        if mean > self.node_limit[node]:
            return (
                f"super-peer {node} would take in {mean:.6g} tuples/s,"
                f" above {self.max_utilization:g} x its capacity {self.capacity[node]:g} tuples/s"
            )
        peak = mean + self.peak_sd * math.sqrt(max(0.0, self.arriving[node] + tuples))
        return (
            f"super-peer {node} would take in {mean:.6g} tuples/s, peaking at {peak:.6g}"
            f" (mean + {self.peak_sd:g} sd), above its capacity {self.capacity[node]:g} tuples/s"
        )


class _Host(NamedTuple):
    """What the operators reading one flow (its children and deliveries, all at the super-peer where it
    ends) cost the processor there, and the parts it is made of: their boxes, the selectivities of the
    tuples the projecting ones keep, how many project, and the boxes its exact deliveries (predicate
    TRUE, one box) would add if the flow stopped holding their result exactly."""

    node: str
    boxes: float
    keep: float
    projecting: int
    extra: float
    mean: float
    spread: float


class CpuLoads:
    """The planned operations per second of every limited super-peer's processor (module docstring,
    "Processors"), kept per flow whose readers run there: a flow's record changes when the flow, its
    children or its deliveries do (:meth:`touch`, settled lazily by :meth:`settle`)."""

    def __init__(self, scenario: Scenario):
        share = scenario.max_utilization
        self.max_utilization, self.peak_sd = share, scenario.peak_sd
        costs = scenario.cpu_costs
        self.box, self.projection = float(costs.box), float(costs.projection)
        self._costs = costs
        self.cpu = dict(scenario.cpus)
        self.limit = {sp: share * cpu for sp, cpu in scenario.cpus}
        self.ops = dict.fromkeys(self.cpu, 0.0)  # planned operations per second
        self.spread = dict.fromkeys(self.cpu, 0.0)  # their variance bound
        self._rates = {s.id: float(s.rate) for s in scenario.streams}
        self._width = {s.id: len(s.attributes) for s in scenario.streams}
        self._hosts: dict[InstalledFlow, _Host] = {}
        self._dirty: dict[InstalledFlow, None] = {}

    # -- the records ------------------------------------------------------------------------------------
    def touch(self, flow: InstalledFlow) -> None:
        """``flow`` changed (its predicate, selectivity, path, need classes, children or deliveries): its
        record, and its parent's (which it is a reader of), are computed again at the next :meth:`settle`."""
        self._dirty[flow] = None
        if flow.parent is not None:
            self._dirty[flow.parent] = None

    def forget(self, flow: InstalledFlow) -> None:
        """``flow`` is gone: take its readers' load out."""
        self._dirty.pop(flow, None)
        old = self._hosts.pop(flow, None)
        if old is not None:
            self._take(old, -1)

    def settle(self) -> None:
        """Bring the records of the flows touched since the last call up to date."""
        for flow in self._dirty:
            self._refresh(flow)
        self._dirty.clear()

    def _refresh(self, host: InstalledFlow) -> None:
        old = self._hosts.pop(host, None)
        if old is not None:
            self._take(old, -1)
        node = host.end
        if node not in self.cpu or not (host.children or host.deliveries):
            return
        carried = self._carried(host)
        boxes = keep = extra = 0.0
        projecting = 0
        for child in host.children:
            boxes += len(child.predicate.boxes)
            if self._carried(child) < carried:
                keep += child.sel
                projecting += 1
        for sub in host.deliveries:
            n = len(sub.where.boxes)
            if host.id is not None and holds_exactly(host.predicate, host.sel, sub.where, sub.sel):
                boxes += 1
                extra += n - 1
            else:
                boxes += n
            if sub.select.bit_count() < carried:
                keep += sub.sel
                projecting += 1
        record = self._record(host.stream, node, host.sel, boxes, keep, projecting, extra)
        self._hosts[host] = record
        self._take(record, +1)

    def _record(
        self, stream: str, node: str, sel: float, boxes: float, keep: float, projecting: int, extra: float = 0.0
    ) -> _Host:
        """A flow's record: its readers at ``node`` test ``boxes`` boxes of each of its tuples
        (``rate * sel`` per second), ``projecting`` of them project the tuples they keep (``rate * keep``
        per second).  A tuple costs at most ``box * boxes + projection * projecting``: the variance bound
        is the mean times that."""
        mean = self._rates[stream] * (sel * self.box * boxes + self.projection * keep)
        return _Host(
            node, boxes, keep, projecting, extra, mean, mean * (self.box * boxes + self.projection * projecting)
        )

    def _take(self, record: _Host, sign: int) -> None:
        self.ops[record.node] += sign * record.mean
        self.spread[record.node] += sign * record.spread

    def operator(self, node: str, stream: str, query, sel: float, records: float) -> tuple[float, float]:
        """(operations per second, variance bound) of a record flow's operator at ``node`` (sharing.records):
        it tests every tuple of the stream against the boxes of ``query``'s WHERE, projects the ``sel`` it
        keeps when its input is narrower than the stream, folds each into every aggregate, and builds
        ``records`` records per second (a tuple may complete one: the most a tuple costs)."""
        costs = self._costs
        kept = (self.projection if len(query.select) < self._width[stream] else 0.0) + costs.aggregate * len(
            query.aggregates
        )
        boxes = self.box * len(query.where.boxes)
        mean = self._rates[stream] * (boxes + sel * kept) + records * costs.record
        return mean, mean * (boxes + kept + costs.record)

    def operator_excess(self, node: str, mean: float, spread: float) -> str | None:
        """None when ``node`` (limited or not) has room for an operator of ``mean`` operations per second
        (``spread`` its variance bound); else why not, in words."""
        if node not in self.cpu or self._fits(node, mean, spread):
            return None
        return self._words(node, mean, spread)

    def add_operator(self, node: str, mean: float, spread: float, sign: int) -> None:
        """Count an operator's load at ``node`` in (+1) or out (-1) (nothing where ``node`` is unlimited)."""
        if node in self.cpu:
            self.ops[node] += sign * mean
            self.spread[node] += sign * spread

    def _carried(self, flow: InstalledFlow, select: int = 0) -> int:
        """The attributes of the channel of ``flow`` as the engines lay it out (peers/timetable.py): the
        raw stream's and a flow of need classes' (``trim``) every attribute, another flow's its own (none);
        ``select``: after a subscription selecting that many attributes joined its classes."""
        if flow.id is None or flow.unions or select:
            return self._width[flow.stream]
        return flow.attrs.bit_count()

    def reading_fits(self, flow: InstalledFlow, predicate: Predicate) -> bool:
        """Whether ``flow`` may read its parent with ``predicate`` instead of its own predicate (a departure
        narrowing it, or merging it with its one child): the processor where it reads (its origin) gains
        no box tests, or stays within its limits with them."""
        more = len(predicate.boxes) - len(flow.predicate.boxes)
        parent = flow.parent
        node = parent.end
        if more <= 0 or node not in self.cpu:
            return True
        self.settle()
        old = self._hosts.get(parent)
        was = old or _Host(node, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
        after = self._record(flow.stream, node, parent.sel, was.boxes + more, was.keep, was.projecting)
        return self._fits(node, after.mean - was.mean, after.spread - was.spread)

    # -- what an option adds ----------------------------------------------------------------------------
    def option_excess(
        self, host: InstalledFlow, tap: str, changes: Sequence, where: Predicate, sel: float, select: int, home: str
    ) -> str | None:
        """None when serving a subscription (``where``, selectivity ``sel``, ``select`` attributes, at
        ``home``) by tapping ``host`` at ``tap`` after ``changes`` (:class:`sharing.search.FlowChange` s,
        ``host``'s first) keeps every limited processor that gains load within its limits; else the first
        that would break one, in words.  The branch's route does not matter: only the super-peers where
        operators read count."""
        added: dict[str, list[float]] = {}

        def move(node: str, before: _Host | None, after: _Host) -> None:
            if node in self.cpu:
                d = added.setdefault(node, [0.0, 0.0])
                d[0] += after.mean - (before.mean if before else 0.0)
                d[1] += after.spread - (before.spread if before else 0.0)

        stream, n_where = host.stream, len(where.boxes)
        # the subscription's reader of ``host`` at ``tap``: its branch, or its delivery when tap is home
        if tap != home:
            carried_branch = self._width[stream] if select else 0
            projects = carried_branch < self._carried(host, select)
            boxes, keep, projecting = float(n_where), sel if projects else 0.0, int(projects)
            projects = select < carried_branch
            move(home, None, self._record(stream, home, sel, 1.0, sel if projects else 0.0, int(projects)))
        else:
            host_pred, host_sel = (changes[0].predicate, changes[0].sel) if changes else (host.predicate, host.sel)
            exact = host.id is not None and holds_exactly(host_pred, host_sel, where, sel)
            projects = select < self._carried(host, select)
            boxes, keep, projecting = 1.0 if exact else float(n_where), sel if projects else 0.0, int(projects)
        below = None  # the change of the flow under the one at hand on the chain
        for k, change in enumerate(changes):
            flow = change.flow
            widened = change.predicate is not flow.predicate
            if below is not None:  # the flow below is a reader of this one: its boxes and projection change
                boxes, keep, projecting = self._reader_change(below, select)
            if k == 0 and change.cut < flow.hops:  # split at the tap: the part below reads the part above
                part_projects = self._carried(flow) < self._carried(flow, select)
                after = self._record(
                    stream,
                    tap,
                    change.sel,
                    len(flow.predicate.boxes) + boxes,
                    keep + (flow.sel if part_projects else 0.0),
                    projecting + part_projects,
                )
                move(tap, None, after)
            else:
                self._shift(flow, change.sel, boxes, keep, projecting, widened, move)
            below = change
        if below is None:  # the raw stream (or a flow) tapped as it is
            self._shift(host, host.sel, boxes, keep, projecting, False, move)
        else:
            boxes, keep, projecting = self._reader_change(below, select)
            parent = below.flow.parent
            self._shift(parent, parent.sel, boxes, keep, projecting, False, move)
        for node, (mean, spread) in added.items():
            if mean > 0 and not self._fits(node, mean, spread):
                return self._words(node, mean, spread)
        return None

    def _reader_change(self, change, select: int) -> tuple[float, float, int]:
        """What ``change`` makes of its flow as a reader of its parent: (boxes, kept selectivity of
        projecting readers, projecting readers) added."""
        flow = change.flow
        before = self._carried(flow) < self._carried(flow.parent)
        after = self._carried(flow, select) < self._carried(flow.parent, select)
        boxes = float(len(change.predicate.boxes) - len(flow.predicate.boxes))
        keep = (change.sel if after else 0.0) - (flow.sel if before else 0.0)
        return boxes, keep, int(after) - int(before)

    def _shift(
        self, host: InstalledFlow, sel: float, boxes: float, keep: float, projecting: int, widened: bool, move
    ) -> None:
        """``host``'s record with selectivity ``sel`` and ``boxes``, ``keep``, ``projecting`` more (and its
        exact deliveries' ``extra`` boxes when ``widened``: they filter from then on), handed to ``move``."""
        node = host.end
        if node not in self.cpu:
            return
        old = self._hosts.get(host)
        was = old or _Host(node, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
        boxes += was.boxes + (was.extra if widened else 0.0)
        move(node, old, self._record(host.stream, node, sel, boxes, was.keep + keep, was.projecting + projecting))

    def _fits(self, node: str, mean: float, spread: float) -> bool:
        """Whether ``node``'s processor keeps its limits running ``mean`` more operations per second, with
        ``spread`` more variance."""
        total = self.ops[node] + mean
        if total > self.limit[node]:
            return False
        return (
            not self.peak_sd
            or total + self.peak_sd * math.sqrt(max(0.0, self.spread[node] + spread)) <= (self.cpu[node])
        )

    def _words(self, node: str, mean: float, spread: float) -> str:
        total = self.ops[node] + mean
        if total > self.limit[node]:
            return (
                f"super-peer {node} would run {total:.6g} operations/s,"
                f" above {self.max_utilization:g} x its cpu {self.cpu[node]:g} operations/s"
            )
        peak = total + self.peak_sd * math.sqrt(max(0.0, self.spread[node] + spread))
        return (
            f"super-peer {node} would run {total:.6g} operations/s, peaking at {peak:.6g}"
            f" (mean + {self.peak_sd:g} sd), above its cpu {self.cpu[node]:g} operations/s"
        )


class Admission:
    """The network limits' say on one arriving subscription's options (:class:`sharing.search.Option`):
    :meth:`reaches` rules a tap out before it is priced, calling the object admits or reroutes an option.

    ``rates`` are the branch's (bits/s, tuples/s), ``unit`` and ``bytes_per_hop`` its tuple-hops and
    bytes per second per hop (the cost model's), ``select`` the attributes the subscription selects
    (a bit mask over its stream's schema), ``where`` and ``sel`` its WHERE and selectivity."""

    def __init__(
        self,
        loads: NetworkLoads,
        stream: str,
        home: str,
        rates: tuple[float, float],
        unit: float,
        bytes_per_hop: float,
        select: int,
        where: Predicate,
        sel: float,
    ):
        self.loads, self.stream, self.home = loads, stream, home
        self.bits, self.tuples = rates
        self.unit, self.bytes_per_hop = unit, bytes_per_hop
        self.select = select
        self.where, self.sel = where, sel
        self.width = loads.width(select.bit_count())
        self._toward: dict[str, str | None] | None = None
        if loads.cpu is not None:
            loads.cpu.settle()

    def _following(self) -> dict[str, str | None]:
        if self._toward is None:
            self._toward = self.loads.toward(self.home, self.bits, self.tuples, self.width)
        return self._toward

    def reaches(self, tap: str, back: tuple[str, ...]) -> bool:
        """Whether a branch from ``tap`` fits on some path to the subscriber's super-peer (before any
        change an option makes): else no option tapping there fits.  ``back`` is the route from the
        subscriber's super-peer to ``tap``: when the branch fits on it reversed, no search is needed."""
        if tap == self.home:
            return True
        if self._toward is None and self.loads.path_excess(back[::-1], self.bits, self.tuples, self.width) is None:
            return True
        return tap in self._following()

    def may_grow(self, flow: InstalledFlow, cut: int, sel: float) -> bool:
        """Whether ``flow`` may take ``sel`` more selectivity (tuples carrying the subscription's
        attributes) on its first ``cut`` hops: a lower bound of what tapping it ``cut`` hops from its
        origin adds there."""
        bits, tuples = self.loads.rates(self.stream, sel, sel * self.select.bit_count())
        return self.loads.path_excess(flow.path[: cut + 1], bits, tuples, self.width) is None

    def cpu_excess(self, option: Option) -> str | None:
        """None when ``option``'s operators keep every limited processor within its limits (or none is
        limited); else the first that would break one, in words."""
        cpu = self.loads.cpu
        if cpu is None:
            return None
        return cpu.option_excess(
            option.flow, option.tap, option.changes, self.where, self.sel, self.select.bit_count(), self.home
        )

    def __call__(self, option: Option, best: Option | None) -> Option | None:
        """``option`` if it keeps every link direction and super-peer it adds load to within its limits;
        the same with its branch on the path of fewest hops that fits when the route between tap and home
        does not (only while it can still beat ``best``); else None.

        A widened flow adds load along every link it widens (the part upstream of a split) and on the
        super-peers those links lead to; the branch adds its rates along its path.  The operators an option
        adds or changes add operations where they read (:meth:`CpuLoads.option_excess`), wherever the
        branch goes."""
        loads = self.loads
        if loads.cpu is not None and self.cpu_excess(option) is not None:
            return None
        links: dict[Direction, float] = {}
        spread: dict[Direction, float] = {}
        nodes: dict[str, float] = {}
        for change in option.changes:
            flow = change.flow
            before_bits, _ = loads.rates(self.stream, flow.sel, flow.attribute_sel())
            bits, tuples = loads.rates(self.stream, change.sel - flow.sel, sum(change.gains))
            if bits <= 0 and tuples <= 0:
                continue
            wider = (before_bits + bits) * loads.width((flow.attrs | self.select).bit_count())
            wider -= before_bits * loads.width(flow.attrs.bit_count())
            widened = flow.path[: change.cut + 1]
            for hop in pairwise(widened):
                links[hop] = links.get(hop, 0.0) + bits
                spread[hop] = spread.get(hop, 0.0) + wider
            for node in widened[1:]:
                nodes[node] = nodes.get(node, 0.0) + tuples
        if (links or nodes) and loads.excess(links, spread, nodes) is not None:
            return None
        tap = option.tap
        if tap == self.home:
            return option
        bits, tuples, width = self.bits, self.tuples, self.width
        if loads.path_excess(loads.network.route(tap, self.home), bits, tuples, width, links, spread, nodes) is None:
            return option
        hops = option.rank.branch_hops
        max_hops = math.inf
        if best is not None and self.bytes_per_hop > 0:
            slack = best.rank.bytes_per_s * (1 + RELATIVE_SLACK) - option.rank.bytes_per_s
            max_hops = hops + slack / self.bytes_per_hop
        following = self._following()
        if tap not in following:
            return None
        path = [tap]
        while path[-1] != self.home and len(path) - 1 < max_hops:
            path.append(following[path[-1]])
        if path[-1] != self.home:
            return None
        route = tuple(path)
        if (links or nodes) and loads.path_excess(route, bits, tuples, width, links, spread, nodes) is not None:
            # the option's own changes load this path: look again, around them too
            route = loads.detour(tap, self.home, bits, tuples, width, max_hops, links, spread, nodes)
            if route is None:
                return None
        extra = len(route) - 1 - hops
        rank = option.rank._replace(
            bytes_per_s=option.rank.bytes_per_s + self.bytes_per_hop * extra, branch_hops=len(route) - 1
        )
        return option._replace(rank=rank, tuple_hops=option.tuple_hops + self.unit * extra, route=route)


class _PlannedProcessors:
    """The planned operations per second of each limited super-peer's processor over a plan's epochs, from
    the plan's frozen flows and deliveries (what the engines charge, module docstring "Processors"): per
    flow or raw stream read at a limited super-peer, the load its readers there put on it, recomputed where
    an epoch changed what reads it."""

    def __init__(self, scenario: Scenario, cost):
        self.cpu = dict(scenario.cpus)
        costs = scenario.cpu_costs
        self._box, self._projection = float(costs.box), float(costs.projection)
        self._cost = cost
        self._scenario = scenario
        self._sources = {s.id: scenario.home(s.source) for s in scenario.streams}
        self._width = {s.id: len(s.attributes) for s in scenario.streams}
        self.flows: dict[tuple[str, str], Flow] = {}  # (stream, id) -> the flow in force
        self.children: dict[tuple[str, str | None], dict[int, Flow]] = {}  # host -> the flows reading it
        self.readers: dict[tuple[str, str | None], dict[int, Delivery]] = {}  # host -> the deliveries reading it
        self.hosts: dict[tuple[str, str | None], tuple[str, float]] = {}  # host -> (super-peer, operations/s)
        self.ops = dict.fromkeys(self.cpu, 0.0)
        self.peaks = dict.fromkeys(self.cpu, 0.0)

    def epoch(self, gone: Iterable[Flow], came: Iterable[Flow], left: Iterable[Delivery], new: Iterable[Delivery]):
        """Apply an epoch's change (flows and deliveries that went and came) and raise the peaks."""
        touched: dict[tuple[str, str | None], None] = {}
        for flows, sign in ((gone, -1), (came, +1)):
            for flow in flows:
                key, host = (flow.stream, flow.id), (flow.stream, flow.parent)
                siblings = self.children.setdefault(host, {})
                if sign > 0:
                    self.flows[key] = flow
                    siblings[id(flow)] = flow
                else:
                    if self.flows.get(key) is flow:
                        del self.flows[key]
                    siblings.pop(id(flow), None)
                touched[key] = touched[host] = None
        for deliveries, sign in ((left, -1), (new, +1)):
            for d in deliveries:
                host = (self._scenario.subscription(d.subscription).stream, d.flow)
                readers = self.readers.setdefault(host, {})
                if sign > 0:
                    readers[id(d)] = d
                else:
                    readers.pop(id(d), None)
                touched[host] = None
        raised = set()
        for host in touched:
            node, ops = self.hosts.pop(host, (None, 0.0))
            if node is not None:
                self.ops[node] -= ops
            load = self._load(host)
            if load is not None:
                self.hosts[host] = load
                self.ops[load[0]] += load[1]
                raised.add(load[0])
        for node in raised:  # once the whole change is in: a load moving between two flows is no peak
            self.peaks[node] = max(self.peaks[node], self.ops[node])

    def _carried(self, stream: str, flow_id: str | None) -> int:
        """The attributes of a flow's channel as the engines lay it out: a flow of need classes carries its
        parent's, another its own, the raw stream every one."""
        while flow_id is not None:
            flow = self.flows[(stream, flow_id)]
            if not flow.trim:
                return len(flow.attrs)
            flow_id = flow.parent
        return self._width[stream]

    def _load(self, host: tuple[str, str | None]) -> tuple[str, float] | None:
        stream, flow_id = host
        if flow_id is None:
            node, sel = self._sources[stream], 1.0
        else:
            flow = self.flows.get(host)
            if flow is None:
                return None
            node, sel = flow.path[-1], self._cost.selectivity(stream, flow.predicate)
        children, deliveries = self.children.get(host, {}), self.readers.get(host, {})
        if node not in self.cpu or not (children or deliveries):
            return None
        carried = self._carried(stream, flow_id)
        boxes = keep = 0.0
        for child in children.values():
            boxes += len(child.predicate.boxes)
            if (len(child.attrs) if not child.trim else carried) < carried:
                keep += min(sel, self._cost.selectivity(stream, child.predicate))
        for d in deliveries.values():
            boxes += len(d.predicate.boxes)
            if len(d.attrs) < carried:
                keep += min(sel, self._cost.selectivity(stream, d.predicate))
        return node, self._cost.rate(stream) * (sel * self._box * boxes + self._projection * keep)


def _si(value: float) -> str:
    """``value`` with an SI prefix: 1.5e6 -> '1.5 M'."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}"
    return f"{value:.4g} "


def record_rates(cost, query) -> tuple[float, float, float]:
    """A record flow's load (bits per second on each link, records per second landing at each super-peer,
    bits a record) under the cost model ``cost`` (docs/PLANNER.md, "Aggregate subscriptions")."""
    records = cost.records_per_s(query)
    width = cost.tuple_bytes(1 + query.record_values()) * 8.0
    return records * width, records, width


class PlannedLoad:
    """The peak over a plan's epochs of each link direction's and super-peer's planned load (cost model
    rates), as a share of its bandwidth or capacity, and of each limited processor's planned operations as
    a share of its cpu: what ``run.py plan`` prints."""

    def __init__(self, scenario: Scenario, network: Network, plan: Plan):
        from sharing.cost import CostModel

        self.scenario = scenario
        self._cost = CostModel(scenario)
        self._loads = NetworkLoads(scenario, network)
        self.links: dict[Direction, float] = {}  # peak bits/s
        self.nodes: dict[str, float] = {}  # peak tuples/s
        processors = _PlannedProcessors(scenario, self._cost) if scenario.cpus else None
        counted: dict[int, Flow] = {}
        delivered: dict[int, Delivery] = {}
        for epoch in plan.epochs:
            now = {id(f): f for f in epoch.flows}
            gone = [counted.pop(key) for key in counted.keys() - now.keys()]
            for flow in gone:
                self._add(flow, -1)
            added = [now[key] for key in now.keys() - counted.keys()]
            for flow in added:
                counted[id(flow)] = flow
                self._add(flow, +1)
            self._peaks(f.path for f in added)  # a load only rises where a flow came
            if processors is not None:
                here = {id(d): d for d in epoch.deliveries}
                left = [delivered.pop(key) for key in delivered.keys() - here.keys()]
                new = [here[key] for key in here.keys() - delivered.keys()]
                delivered.update((id(d), d) for d in new)
                processors.epoch(gone, added, left, new)
        self.processors: dict[str, float] = {} if processors is None else processors.peaks  # peak operations/s

    def _add(self, flow: Flow, sign: int) -> None:
        if flow.aggregate is not None:  # a record flow (sharing.records)
            self._loads.add_rates(*record_rates(self._cost, self.scenario.subscription(flow.aggregate).query),
                                  flow.path, sign)  # fmt: skip
            return
        sel = self._cost.selectivity(flow.stream, flow.predicate)
        self._loads.add(flow.stream, sel, self._cost.attribute_sel(flow, sel), len(flow.attrs), flow.path, sign)

    def _peaks(self, paths: Iterable[tuple[str, ...]]) -> None:
        loads = self._loads
        for path in paths:
            for hop in pairwise(path):
                self.links[hop] = max(self.links.get(hop, 0.0), loads.bits[hop])
            for node in path[1:]:
                self.nodes[node] = max(self.nodes.get(node, 0.0), loads.tuples[node])

    def lines(self) -> list[str]:
        """One line per loaded link direction, then per limited super-peer, the busiest first."""
        loads = self._loads
        out = [f"planned utilization (peak over epochs, cost model rates; limit {loads.max_utilization:g}):"]
        for hop, bits in sorted(self.links.items(), key=lambda kv: (-kv[1] / loads.bandwidth[kv[0]], kv[0])):
            share = bits / loads.bandwidth[hop]
            out.append(f"  link {hop[0]} -> {hop[1]}: {share:.4g} of {_si(loads.bandwidth[hop])}bit/s")
        for node in sorted(loads.capacity):
            peak = max(self.nodes.get(node, 0.0), loads.tuples[node])
            out.append(f"  super-peer {node}: {peak / loads.capacity[node]:.4g} of {loads.capacity[node]:g} tuples/s")
        for node, cpu in sorted(self.scenario.cpu.items()):
            share = self.processors.get(node, 0.0) / cpu
            out.append(f"  super-peer {node} processor: {share:.4g} of {cpu:g} operations/s")
        return out
