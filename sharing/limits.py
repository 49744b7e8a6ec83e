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
infinite, or every bandwidth infinite and no capacity) has no :class:`NetworkLoads` at all: the planner
then runs exactly as it did before limits existed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import TYPE_CHECKING

from network.emulated import link_specs
from network.routing import Network
from sharing.plan import Flow, Plan
from sharing.state import RELATIVE_SLACK, InstalledFlow
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

    @classmethod
    def of(cls, scenario: Scenario, network: Network) -> NetworkLoads | None:
        """The loads of ``scenario``'s network, or None when nothing in it is limited."""
        if not math.isfinite(scenario.max_utilization):
            return None
        if not scenario.capacities and all(math.isinf(link.bandwidth) for link in scenario.links):
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
        if sign < 0:
            bits, tuples = -bits, -tuples
        spread = bits * self.width(n_attributes)
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


class Admission:
    """The network limits' say on one arriving subscription's options (:class:`sharing.search.Option`):
    :meth:`reaches` rules a tap out before it is priced, calling the object admits or reroutes an option.

    ``rates`` are the branch's (bits/s, tuples/s), ``unit`` and ``bytes_per_hop`` its tuple-hops and
    bytes per second per hop (the cost model's), ``select`` the attributes the subscription selects
    (a bit mask over its stream's schema)."""

    def __init__(
        self,
        loads: NetworkLoads,
        stream: str,
        home: str,
        rates: tuple[float, float],
        unit: float,
        bytes_per_hop: float,
        select: int,
    ):
        self.loads, self.stream, self.home = loads, stream, home
        self.bits, self.tuples = rates
        self.unit, self.bytes_per_hop = unit, bytes_per_hop
        self.select = select
        self.width = loads.width(select.bit_count())
        self._toward: dict[str, str | None] | None = None

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

    def __call__(self, option: Option, best: Option | None) -> Option | None:
        """``option`` if it keeps every link direction and super-peer it adds load to within its limits;
        the same with its branch on the path of fewest hops that fits when the route between tap and home
        does not (only while it can still beat ``best``); else None.

        A widened flow adds load along every link it widens (the part upstream of a split) and on the
        super-peers those links lead to; the branch adds its rates along its path."""
        loads = self.loads
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


def _si(value: float) -> str:
    """``value`` with an SI prefix: 1.5e6 -> '1.5 M'."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}"
    return f"{value:.4g} "


class PlannedLoad:
    """The peak over a plan's epochs of each link direction's and super-peer's planned load (cost model
    rates), as a share of its bandwidth or capacity: what ``run.py plan`` prints."""

    def __init__(self, scenario: Scenario, network: Network, plan: Plan):
        from sharing.cost import CostModel

        self.scenario = scenario
        self._cost = CostModel(scenario)
        self._loads = NetworkLoads(scenario, network)
        self.links: dict[Direction, float] = {}  # peak bits/s
        self.nodes: dict[str, float] = {}  # peak tuples/s
        counted: dict[int, Flow] = {}
        for epoch in plan.epochs:
            now = {id(f): f for f in epoch.flows}
            for key in counted.keys() - now.keys():
                self._add(counted.pop(key), -1)
            added = [now[key] for key in now.keys() - counted.keys()]
            for flow in added:
                counted[id(flow)] = flow
                self._add(flow, +1)
            self._peaks(f.path for f in added)  # a load only rises where a flow came

    def _add(self, flow: Flow, sign: int) -> None:
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
        return out
