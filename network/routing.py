"""The backbone graph and its routes (docs/ACCOUNTING.md).

The route between two super-peers is the path of least total latency; ties go to fewer hops, then to
the lexicographically smallest list of node ids.  Latencies are exact fractions, so ties are real ties.
With these keys a shortest-path tree is consistent: the route to a node through ``X`` starts with the
route to ``X``, so the union of routes from one source is a tree.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from fractions import Fraction
from functools import cached_property
from itertools import pairwise

from topologies.model import LinkSpec, Scenario


class Network:
    """Adjacency, link lookup and routes of a scenario's backbone."""

    def __init__(self, super_peers: tuple[str, ...], links: tuple[LinkSpec, ...]):
        self.super_peers = super_peers
        self._specs = links
        self._links: dict[tuple[str, str], LinkSpec] = {}
        self._adjacent: dict[str, list[str]] = {sp: [] for sp in super_peers}
        for link in links:
            self._links[(link.a, link.b)] = link
            self._links[(link.b, link.a)] = link
            self._adjacent[link.a].append(link.b)
            self._adjacent[link.b].append(link.a)
        for neighbours in self._adjacent.values():
            neighbours.sort()
        # latencies scaled to integers by their common denominator: the same order, without Fraction arithmetic
        scale = math.lcm(*(link.latency.denominator for link in links)) if links else 1
        self._weight = {pair: int(link.latency * scale) for pair, link in self._links.items()}
        self._trees: dict[str, dict[str, tuple[str, ...]]] = {}

    @classmethod
    def of(cls, scenario: Scenario) -> Network:
        return cls(scenario.super_peers, scenario.links)

    def surviving(self, failed_links: Iterable[tuple[str, str]], failed_nodes: Iterable[str]) -> Network:
        """The backbone without the ``failed_links`` (each as its pair of ends, either order) and the
        ``failed_nodes`` with every link they end (docs/DYNAMICS.md): routes over it follow the same rule
        over what survives.  A failed super-peer stays listed, with no links, so it reaches nothing."""
        down = {frozenset(pair) for pair in failed_links}
        nodes = set(failed_nodes)
        if not down and not nodes:
            return self
        links = tuple(
            link
            for link in self._specs
            if frozenset((link.a, link.b)) not in down and link.a not in nodes and link.b not in nodes
        )
        return Network(self.super_peers, links)

    def neighbours(self, node: str) -> list[str]:
        return self._adjacent[node]

    def link(self, a: str, b: str) -> LinkSpec:
        return self._links[(a, b)]

    @cached_property
    def directions(self) -> tuple[tuple[str, str], ...]:
        """Every link direction, sorted."""
        return tuple(sorted(self._links))

    def routes_from(self, source: str) -> dict[str, tuple[str, ...]]:
        """The route from ``source`` to every reachable super-peer (cached)."""
        if source not in self._trees:
            self._trees[source] = self._shortest_paths(source)
        return self._trees[source]

    def route(self, a: str, b: str) -> tuple[str, ...]:
        return self.routes_from(a)[b]

    def latency(self, path: tuple[str, ...]) -> Fraction:
        return sum((self.link(x, y).latency for x, y in pairwise(path)), Fraction(0))

    def _shortest_paths(self, source: str) -> dict[str, tuple[str, ...]]:
        # Dijkstra on the key (latency, hops, path): keys are totally ordered and extending a path
        # preserves their order, so the first pop of a node is its route.
        best: dict[str, tuple[str, ...]] = {}
        heap: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, (source,))]
        while heap:
            latency, hops, path = heapq.heappop(heap)
            node = path[-1]
            if node in best:
                continue
            best[node] = path
            for nxt in self._adjacent[node]:
                if nxt not in best:
                    heapq.heappush(heap, (latency + self._weight[(node, nxt)], hops + 1, (*path, nxt)))
        return best
