"""An independent recomputation of the routing and accounting rules (docs/ACCOUNTING.md), for the tests only.

Routes come from networkx (not network/routing.py), predicates are evaluated by the plain reference
evaluation of topologies/expected.py (itself tested point by point), and traffic is counted from the strategy
definitions in docs/ACCOUNTING.md, not from any Plan.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import networkx as nx
import numpy as np

from topologies.expected import satisfies
from topologies.model import Scenario
from topologies.workload import columns, emission_times, tuple_count


def spec_route(scenario: Scenario, a: str, b: str) -> tuple[str, ...]:
    """Least total latency, then fewest hops, then the lexicographically smallest list of ids."""
    graph = nx.Graph()
    for link in scenario.links:
        graph.add_edge(link.a, link.b, latency=link.latency)
    paths = list(nx.all_shortest_paths(graph, a, b, weight="latency"))
    return tuple(min(paths, key=lambda p: (len(p), p)))


def satisfied_masks(scenario: Scenario, stream_id: str, subs, n: int) -> dict[str, np.ndarray]:
    """Per subscription, which of the stream's first ``n`` tuples satisfy its WHERE (time ignored)."""
    values = columns(scenario, stream_id, 0, n)
    return {s.id: satisfies(s.query.where, values, n) for s in subs}


def reference_traffic(
    scenario: Scenario, strategy: str, shipped: dict[str, int] | None = None
) -> tuple[Counter, Counter]:
    """``(bytes, tuples)`` per directed backbone link for a deterministic strategy (docs/ACCOUNTING.md).

    Tuples are grouped by the set of subscriptions active at their emission time; within a group each
    link's count follows the strategy's definition directly.  The aggregate subscriptions in ``shipped``
    (id -> its records) are served by their records instead (docs/ACCOUNTING.md, "Records"): each crosses
    every link of its route once, at ``header + 8 x (1 + group attributes + values)`` bytes.
    """
    link_bytes: Counter = Counter()
    link_tuples: Counter = Counter()
    shipped = shipped or {}
    for sub_id, records in shipped.items():
        sub = scenario.subscription(sub_id)
        source = scenario.home(scenario.stream(sub.stream).source)
        route = spec_route(scenario, source, scenario.home(sub.peer))
        for edge in pairwise(route):
            link_tuples[edge] += records
            link_bytes[edge] += records * scenario.tuple_bytes(1 + sub.query.record_values())
    for stream in scenario.streams:
        subs = [s for s in scenario.subscriptions if s.stream == stream.id and s.id not in shipped]
        if not subs:
            continue
        source = scenario.home(stream.source)
        routes = {s.id: spec_route(scenario, source, scenario.home(s.peer)) for s in subs}
        edges = {s.id: list(zip(routes[s.id], routes[s.id][1:], strict=False)) for s in subs}
        names = stream.attribute_names
        select_bits = {s.id: sum(1 << names.index(a) for a in s.query.attributes(names)) for s in subs}
        n = tuple_count(stream, scenario.duration)
        times = emission_times(stream, 0, n)
        sat = satisfied_masks(scenario, stream.id, subs, n)
        active = {s.id: (times >= s.at) & (times < (np.inf if s.until is None else s.until)) for s in subs}
        all_width = scenario.tuple_bytes(len(names))

        def add(edge, mask, width):
            link_tuples[edge] += int(mask.sum())
            link_bytes[edge] += int(np.sum(np.where(mask, width, 0)))

        if strategy == "data-shipping":
            for s in subs:
                for e in edges[s.id]:
                    add(e, active[s.id], all_width)
        elif strategy == "query-shipping":
            for s in subs:
                width = scenario.tuple_bytes(bin(select_bits[s.id]).count("1"))
                for e in edges[s.id]:
                    add(e, active[s.id] & sat[s.id], width)
        elif strategy in ("multicast", "ideal"):
            downstream: dict[tuple[str, str], list[str]] = {}
            for s in subs:
                for e in edges[s.id]:
                    downstream.setdefault(e, []).append(s.id)
            for e, below in downstream.items():
                if strategy == "multicast":
                    add(e, np.logical_or.reduce([active[b] for b in below]), all_width)
                    continue
                bits = np.zeros(n, dtype=np.int64)
                for b in below:
                    bits |= np.where(active[b] & sat[b], select_bits[b], 0)
                width = scenario.header_bytes + 8 * np.array([bin(int(x)).count("1") for x in bits], dtype=np.int64)
                add(e, bits != 0, width)
        else:
            raise ValueError(strategy)
    return link_bytes, link_tuples


def reference_access_bytes(
    scenario: Scenario, expected_counts: dict[str, int], shipped: dict[str, int] | None = None
) -> int:
    """Uploads of every emitted tuple (all attributes) plus each subscription's exact result (an aggregate
    subscription's input, projected to the attributes its records read: ``expected_counts`` counts it; or
    its records, for one in ``shipped``, id -> its records)."""
    total = 0
    shipped = shipped or {}
    for stream in scenario.streams:
        total += tuple_count(stream, scenario.duration) * scenario.tuple_bytes(len(stream.attributes))
    for sub in scenario.subscriptions:
        if sub.id in shipped:
            total += shipped[sub.id] * scenario.tuple_bytes(1 + sub.query.record_values())
            continue
        attrs = sub.query.attributes(scenario.stream(sub.stream).attribute_names)
        total += expected_counts[sub.id] * scenario.tuple_bytes(len(attrs))
    return total


def as_counter(mapping: dict) -> Counter:
    return Counter({k: int(v) for k, v in mapping.items() if int(v)})
