"""Backbone generators: documented sizes, connected, seeded, well-formed links; and the units."""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import generators
from topologies.generators import MICROSECOND
from topologies.units import parse_bandwidth, parse_latency

RANDOM_MODELS = {
    "transit-stub": {"transit": 3, "stubs_per_transit": 2, "nodes_per_stub": 6},
    "waxman": {"n": 40, "alpha": 0.2, "beta": 0.5},
    "barabasi-albert": {"n": 40, "m": 2},
}


def graph_of(topology) -> nx.Graph:
    super_peers, links = topology
    graph = nx.Graph()
    graph.add_nodes_from(super_peers)
    graph.add_edges_from((link.a, link.b) for link in links)
    return graph


def check_well_formed(topology, n: int) -> None:
    super_peers, links = topology
    assert super_peers == tuple(f"SP{i}" for i in range(n))
    ends = [(int(link.a[2:]), int(link.b[2:])) for link in links]
    assert all(a < b for a, b in ends)
    assert ends == sorted(set(ends))  # sorted, no duplicates, no self-loops (a < b)
    assert all(isinstance(link.latency, Fraction) and link.latency >= 0 for link in links)
    assert all(link.bandwidth > 0 for link in links)
    assert nx.is_connected(graph_of(topology))


@pytest.mark.parametrize(
    ("rows", "cols"),
    [(1, 1), (1, 5), (3, 4), (5, 5)],
)
def test_grid_sizes_and_neighbours(rows, cols):
    topology = generators.grid(rows, cols, bandwidth=5e6, latency=Fraction(1, 1000))
    check_well_formed(topology, rows * cols)
    graph = graph_of(topology)
    assert graph.number_of_edges() == rows * (cols - 1) + cols * (rows - 1)
    names = {(r, c): f"SP{r * cols + c}" for r in range(rows) for c in range(cols)}
    expected = nx.relabel_nodes(nx.grid_2d_graph(rows, cols), names)
    assert set(map(frozenset, graph.edges)) == set(map(frozenset, expected.edges))
    assert {(link.bandwidth, link.latency) for link in topology[1]} <= {(5e6, Fraction(1, 1000))}


@pytest.mark.parametrize(("branching", "depth", "n"), [(2, 0, 1), (2, 3, 15), (3, 2, 13), (1, 4, 5)])
def test_tree_sizes_and_breadth_first_numbering(branching, depth, n):
    topology = generators.tree(branching, depth)
    check_well_formed(topology, n)
    graph = graph_of(topology)
    assert nx.is_tree(graph)
    assert max(nx.shortest_path_length(graph, "SP0").values()) == depth
    assert all(graph.degree(f"SP{i}") <= branching + 1 for i in range(n))


@pytest.mark.parametrize(("transit", "stubs", "nodes"), [(1, 0, 1), (4, 3, 8), (10, 3, 33), (2, 2, 1)])
def test_transit_stub_sizes_and_link_classes(transit, stubs, nodes):
    topology = generators.transit_stub(transit, stubs, nodes, seed=3)
    n = transit * (1 + stubs * nodes)
    check_well_formed(topology, n)
    links = {(int(link.a[2:]), int(link.b[2:])): link for link in topology[1]}
    for (a, b), link in links.items():
        if b < transit:  # inside the transit domain: 1 Gbit, 10 ms * [0.5, 1.5]
            assert link.bandwidth == 1e9 and Fraction(5, 1000) <= link.latency <= Fraction(15, 1000)
        elif a < transit:  # a gateway link
            assert link.bandwidth == 100e6 and Fraction(25, 10000) <= link.latency <= Fraction(75, 10000)
            assert (b - transit) % nodes == 0 and (b - transit) // (stubs * nodes) == a
        else:  # inside one stub domain
            assert (a - transit) // nodes == (b - transit) // nodes
            assert link.bandwidth == 100e6 and Fraction(5, 10000) <= link.latency <= Fraction(15, 10000)
        assert (link.latency / MICROSECOND).denominator == 1


def test_waxman_latency_follows_distance_and_sparse_graphs_are_patched():
    sparse = generators.waxman(60, alpha=0.01, beta=0.05, seed=1)
    check_well_formed(sparse, 60)
    dense = generators.waxman(30, alpha=1.0, beta=1.0, seed=2, max_latency=Fraction(1, 100))
    check_well_formed(dense, 30)
    assert all(MICROSECOND <= link.latency <= Fraction(1, 100) for link in dense[1])
    assert max(link.latency for link in dense[1]) >= Fraction(5, 1000)  # some pair lies far apart


def test_barabasi_albert_edge_count():
    topology = generators.barabasi_albert(50, 3, seed=4)
    check_well_formed(topology, 50)
    assert len(topology[1]) == (50 - 3) * 3


@pytest.mark.parametrize("model", sorted(RANDOM_MODELS))
def test_random_models_are_seeded(model):
    params = RANDOM_MODELS[model]
    first = generators.generate(model, seed=7, **params)
    assert generators.generate(model, seed=7, **params) == first
    assert generators.generate(model, seed=8, **params) != first


def test_generate_rejects_unknown_model_and_bad_parameters():
    with pytest.raises(ValueError, match="unknown model 'ring'"):
        generators.generate("ring", n=3)
    with pytest.raises(ValueError, match="tree needs branching >= 1"):
        generators.tree(0, 2)
    with pytest.raises(ValueError, match="stub_edge_prob must lie in"):
        generators.transit_stub(2, 1, 3, stub_edge_prob=2)


SIZED_MODELS = {
    "grid": {"rows": 3, "cols": 4},
    "tree": {"branching": 1, "depth": 6},
    "transit-stub": {"transit": 3, "stubs_per_transit": 2, "nodes_per_stub": 4, "stub_edge_prob": 1},
    "waxman": {"n": 12, "beta": 1},
    "barabasi-albert": {"n": 12, "m": 5},
}


@pytest.mark.parametrize("model", sorted(SIZED_MODELS))
def test_node_and_pair_counts_bound_what_is_generated(model):
    params = SIZED_MODELS[model]
    super_peers, links = generators.generate(model, **params)
    assert generators.node_count(model, params) == len(super_peers)
    assert len(links) <= generators.pair_count(model, params)


def test_counts_of_huge_sizes_come_at_once():
    assert generators.node_count("tree", {"branching": 1, "depth": 10**15}) == 10**15 + 1
    assert generators.node_count("tree", {"branching": 0, "depth": 10**15}) == 1
    assert generators.node_count("tree", {"branching": 10**6, "depth": 10**15}) > 10**12
    assert generators.pair_count("waxman", {"n": 50_000}) == 50_000 * 49_999 // 2
    transit_stub = {"transit": 1, "stubs_per_transit": 1, "nodes_per_stub": 40_000}
    assert generators.pair_count("transit-stub", transit_stub) == 40_000 * 39_999 // 2 + 1


def test_parameters_table_covers_every_generator_parameter():
    for model in generators.MODELS:
        for name in generators.parameters(model):
            assert name in generators.PARAMETER_KINDS
    assert generators.parameters("grid") == {"rows": True, "cols": True, "bandwidth": False, "latency": False}


@pytest.mark.parametrize(
    ("text", "bits"),
    [("100Mbit", 100e6), ("1.5Gbit", 1.5e9), ("64Kbit", 64e3), ("10 mbit/s", 10e6), (2_000_000, 2e6), (0.5, 0.5)],
)
def test_bandwidth_units(text, bits):
    assert parse_bandwidth(text) == bits


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2ms", Fraction(1, 500)),
        ("500us", Fraction(1, 2000)),
        ("0.1s", Fraction(1, 10)),
        (0.1, Fraction(1, 10)),
        (3, Fraction(3)),
        ("1e-3s", Fraction(1, 1000)),
        (0, Fraction(0)),
    ],
)
def test_latency_units_are_exact(text, seconds):
    assert parse_latency(text) == seconds


def test_latency_sums_tie_exactly():
    assert parse_latency(0.1) + parse_latency(0.2) == parse_latency(0.3)
    assert parse_latency("100ms") + parse_latency("200000us") == parse_latency("0.3s")


@pytest.mark.parametrize("bad", ["100Mbps", "Mbit", "", "1.5 Tbit", True, None, [1], -1, 0, "0Kbit", float("nan")])
def test_bad_bandwidths(bad):
    with pytest.raises(ValueError):
        parse_bandwidth(bad)


@pytest.mark.parametrize("bad", ["2 hours", "ms", "2MS", True, None, -0.001, "-1us", float("inf")])
def test_bad_latencies(bad):
    with pytest.raises(ValueError):
        parse_latency(bad)


@settings(max_examples=60, deadline=None)
@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_latency_text_round_trips_through_microseconds(value):
    assert parse_latency(f"{value}ms") * 1000 == Fraction(str(value))
    assert parse_latency(f"{value}us") * 10**6 == Fraction(str(value))
