"""Routes follow the rule of docs/ACCOUNTING.md exactly: least latency, then fewer hops, then the smallest list
of ids."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from network.routing import Network
from topologies.model import LinkSpec


def _network(edges: list[tuple[str, str, Fraction]]) -> Network:
    nodes = tuple(sorted({n for a, b, _ in edges for n in (a, b)}))
    return Network(nodes, tuple(LinkSpec(a, b, 1e6, lat) for a, b, lat in edges))


def _brute_force(edges, a: str, b: str) -> tuple[str, ...]:
    graph = nx.Graph()
    latency = {}
    for x, y, lat in edges:
        graph.add_edge(x, y)
        latency[(x, y)] = latency[(y, x)] = lat
    paths = [tuple(p) for p in nx.all_simple_paths(graph, a, b)] if a != b else [(a,)]
    return min(paths, key=lambda p: (sum((latency[h] for h in pairwise(p)), Fraction(0)), len(p), p))


def test_least_latency_beats_fewer_hops():
    net = _network([("A", "B", Fraction(1, 1000)), ("B", "C", Fraction(1, 1000)), ("A", "C", Fraction(3, 1000))])
    assert net.route("A", "C") == ("A", "B", "C")
    assert net.latency(net.route("A", "C")) == Fraction(2, 1000)


def test_exact_tie_goes_to_fewer_hops():
    # 0.1 + 0.2 == 0.3 exactly (in floats 0.1 + 0.2 > 0.3)
    net = _network([("A", "B", Fraction(1, 10)), ("B", "D", Fraction(2, 10)), ("A", "D", Fraction(3, 10))])
    assert net.route("A", "D") == ("A", "D")


def test_exact_tie_with_equal_hops_goes_to_smallest_ids():
    # floats would prefer A-C-D: 0.15 + 0.15 == 0.3 < 0.1 + 0.2; exactly both are 3/10
    net = _network(
        [
            ("A", "B", Fraction(1, 10)),
            ("B", "D", Fraction(2, 10)),
            ("A", "C", Fraction(15, 100)),
            ("C", "D", Fraction(15, 100)),
        ]
    )
    assert net.route("A", "D") == ("A", "B", "D")
    assert net.route("D", "A") == ("D", "B", "A")


def test_directions_and_links():
    net = _network([("A", "B", Fraction(1)), ("B", "C", Fraction(2))])
    assert net.directions == (("A", "B"), ("B", "A"), ("B", "C"), ("C", "B"))
    assert net.link("C", "B").latency == Fraction(2)
    assert net.route("A", "A") == ("A",)


@st.composite
def _graphs(draw):
    n = draw(st.integers(2, 6))
    nodes = [f"N{i}" for i in range(n)]
    edges = {}
    for i in range(1, n):  # a random spanning tree keeps the graph connected
        j = draw(st.integers(0, i - 1))
        edges[(nodes[j], nodes[i])] = None
    for _ in range(draw(st.integers(0, 6))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if i != j and (nodes[j], nodes[i]) not in edges:
            edges[(nodes[i], nodes[j])] = None
    # few distinct latencies in tenths: many exact ties
    return [(a, b, Fraction(draw(st.integers(0, 3)), 10)) for a, b in edges]


@settings(max_examples=150, deadline=None)
@given(_graphs())
def test_routes_equal_brute_force_over_all_simple_paths(edges):
    net = _network(edges)
    for a in net.super_peers:
        routes = net.routes_from(a)
        for b in net.super_peers:
            assert routes[b] == _brute_force(edges, a, b)
            # consistent tree: the route to b through x starts with the route to x
            for k in range(1, len(routes[b])):
                assert routes[routes[b][k]] == routes[b][: k + 1]
