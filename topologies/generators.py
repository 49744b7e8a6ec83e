"""Backbone generators: grid, tree, transit-stub, Waxman and Barabási-Albert (``network.generate``).

Each returns ``(super_peers, links)``: ids ``SP0..SPn-1`` and undirected :class:`LinkSpec` values, the
lower-numbered end first, links sorted by their ends' numbers.  Every graph is connected; random models
draw everything from ``np.random.default_rng(seed)`` (Barabási-Albert from networkx with the seed), so
the same arguments give the same graph.  Latencies are exact fractions of a second, whole microseconds.

Node numbering:
- grid: row-major, ``SP(r * cols + c)``; links to the right and downward neighbour.
- tree: breadth first from the root ``SP0``; node ``i``'s children are numbered consecutively.
- transit-stub: transit nodes ``SP0..SP(transit-1)``, then the stub domains, those of transit node 0
  first, each stub's ``nodes_per_stub`` nodes consecutive; a stub's first node is its gateway to its
  transit node.
- waxman, barabasi-albert: the models' own node order.

Generators raise ValueError for parameters out of range.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from fractions import Fraction

import networkx as nx
import numpy as np

from topologies.model import LinkSpec

Topology = tuple[tuple[str, ...], tuple[LinkSpec, ...]]
MICROSECOND = Fraction(1, 10**6)


def node_id(index: int) -> str:
    return f"SP{index}"


def _topology(n: int, edges: dict[tuple[int, int], tuple]) -> Topology:
    """Ids and links from ``{(i, j): (bandwidth, latency)}`` or ``(bandwidth, latency, buffer)`` with
    ``i < j``."""
    links = tuple(LinkSpec(node_id(i), node_id(j), *spec) for (i, j), spec in sorted(edges.items()))
    return tuple(node_id(i) for i in range(n)), links


def _edge(i: int, j: int) -> tuple[int, int]:
    return (i, j) if i < j else (j, i)


def _whole_microseconds(seconds: float) -> Fraction:
    """``seconds`` rounded to a whole number of microseconds, at least one."""
    return max(1, round(seconds * 1e6)) * MICROSECOND


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def grid(rows: int, cols: int, *, bandwidth: float = 100e6, latency: Fraction = Fraction(0)) -> Topology:
    """A ``rows`` x ``cols`` mesh; every link has ``bandwidth`` and ``latency``."""
    _require(rows >= 1 and cols >= 1, f"grid needs rows >= 1 and cols >= 1, got {rows} x {cols}")
    edges = {}
    for r in range(rows):
        for c in range(cols):
            here = r * cols + c
            if c + 1 < cols:
                edges[(here, here + 1)] = (bandwidth, latency)
            if r + 1 < rows:
                edges[(here, here + cols)] = (bandwidth, latency)
    return _topology(rows * cols, edges)


def tree(branching: int, depth: int, *, bandwidth: float = 100e6, latency: Fraction = Fraction(0)) -> Topology:
    """A complete tree: the root, then ``depth`` levels, each node with ``branching`` children."""
    _require(branching >= 1 and depth >= 0, f"tree needs branching >= 1 and depth >= 0, got {branching}, {depth}")
    n = sum(branching**level for level in range(depth + 1))
    edges = {(parent, child): (bandwidth, latency) for child in range(1, n) for parent in [(child - 1) // branching]}
    return _topology(n, edges)


def _random_connected(nodes: list[int], edge_prob: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """A random spanning tree over ``nodes`` (each node joins a random earlier one, in random order),
    plus every other pair with probability ``edge_prob``: connected by construction."""
    order = [nodes[k] for k in rng.permutation(len(nodes))]
    edges = {_edge(order[k], order[int(rng.integers(0, k))]) for k in range(1, len(order))}
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    coins = rng.random(len(pairs))
    edges.update(pair for pair, coin in zip(pairs, coins, strict=True) if coin < edge_prob)
    return sorted(edges)


def transit_stub(
    transit: int,
    stubs_per_transit: int,
    nodes_per_stub: int,
    *,
    seed: int = 0,
    transit_edge_prob: float = 0.5,
    stub_edge_prob: float = 0.2,
    transit_bandwidth: float = 1e9,
    transit_latency: Fraction = Fraction(10, 1000),
    gateway_bandwidth: float = 100e6,
    gateway_latency: Fraction = Fraction(5, 1000),
    stub_bandwidth: float = 100e6,
    stub_latency: Fraction = Fraction(1, 1000),
    transit_buffer: float | None = None,
    gateway_buffer: float | None = None,
    stub_buffer: float | None = None,
) -> Topology:
    """A two-level GT-ITM-style internet: a transit domain whose nodes each serve stub domains.

    ``transit * (1 + stubs_per_transit * nodes_per_stub)`` super-peers.  Each domain is a random
    connected graph (spanning tree plus pairs with ``*_edge_prob``); each stub's gateway links to its
    transit node.  Transit links are fast and long, stub links slower and short; each link's latency is
    its class's value times a factor drawn uniformly from [0.5, 1.5], so routes rarely tie.  Each class may
    give its links a buffer in bytes per direction (``*_buffer``; None: the scenario's default).
    """
    _require(
        transit >= 1 and stubs_per_transit >= 0 and nodes_per_stub >= 1,
        f"transit-stub needs transit >= 1, stubs_per_transit >= 0, nodes_per_stub >= 1, "
        f"got {transit}, {stubs_per_transit}, {nodes_per_stub}",
    )
    for name, prob in (("transit_edge_prob", transit_edge_prob), ("stub_edge_prob", stub_edge_prob)):
        _require(0 <= prob <= 1, f"{name} must lie in [0, 1], got {prob}")
    rng = np.random.default_rng(seed)
    edges: dict[tuple[int, int], tuple[float, Fraction, float | None]] = {}

    def add(pairs: list[tuple[int, int]], bandwidth: float, latency: Fraction, buffer: float | None) -> None:
        factors = rng.uniform(0.5, 1.5, size=len(pairs))
        for pair, factor in zip(pairs, factors, strict=True):
            edges[pair] = (bandwidth, _whole_microseconds(float(latency) * factor), buffer)

    transit_pairs = _random_connected(list(range(transit)), transit_edge_prob, rng)
    add(transit_pairs, transit_bandwidth, transit_latency, transit_buffer)
    first = transit
    for t in range(transit):
        for _ in range(stubs_per_transit):
            stub = list(range(first, first + nodes_per_stub))
            add([(t, first)], gateway_bandwidth, gateway_latency, gateway_buffer)
            add(_random_connected(stub, stub_edge_prob, rng), stub_bandwidth, stub_latency, stub_buffer)
            first += nodes_per_stub
    return _topology(first, edges)


def waxman(
    n: int,
    alpha: float = 0.1,
    beta: float = 0.4,
    *,
    seed: int = 0,
    bandwidth: float = 100e6,
    max_latency: Fraction = Fraction(10, 1000),
) -> Topology:
    """Waxman's random geometric graph: ``n`` points uniform in the unit square, each pair linked with
    probability ``beta * exp(-d / (alpha * L))`` (``d`` their distance, ``L`` the largest distance).

    A link's latency is ``max_latency * d / L`` (whole microseconds, at least one).  If the graph is
    disconnected, each component (by smallest node) is joined to the earlier ones by its closest pair.
    """
    _require(n >= 1, f"waxman needs n >= 1, got {n}")
    _require(0 < alpha <= 1 and 0 < beta <= 1, f"waxman needs alpha and beta in (0, 1], got {alpha}, {beta}")
    rng = np.random.default_rng(seed)
    points = rng.random((n, 2))
    distance = np.hypot(*(points[:, None, :] - points[None, :, :]).transpose(2, 0, 1))
    longest = float(distance.max()) or 1.0
    upper_i, upper_j = np.triu_indices(n, k=1)
    probability = beta * np.exp(-distance[upper_i, upper_j] / (alpha * longest))
    chosen = rng.random(len(upper_i)) < probability
    pairs = [(int(i), int(j)) for i, j in zip(upper_i[chosen], upper_j[chosen], strict=True)]

    graph = nx.Graph(pairs)
    graph.add_nodes_from(range(n))
    components = sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0])
    joined = list(components[0])
    for component in components[1:]:
        sub = distance[np.ix_(component, joined)]
        # argmin takes the first minimum in row-major order: ties go to the smaller node numbers
        a, b = np.unravel_index(int(np.argmin(sub)), sub.shape)
        pairs.append(_edge(component[a], joined[b]))
        joined.extend(component)

    scale = float(max_latency) / longest
    edges = {(i, j): (bandwidth, _whole_microseconds(float(distance[i, j]) * scale)) for i, j in pairs}
    return _topology(n, edges)


def barabasi_albert(
    n: int, m: int, *, seed: int = 0, bandwidth: float = 100e6, latency: Fraction = Fraction(0)
) -> Topology:
    """Preferential attachment (networkx ``barabasi_albert_graph``): each new node links to ``m``
    existing ones; connected by construction."""
    _require(1 <= m < n, f"barabasi-albert needs 1 <= m < n, got n={n}, m={m}")
    graph = nx.barabasi_albert_graph(n, m, seed=seed)
    return _topology(n, {_edge(a, b): (bandwidth, latency) for a, b in graph.edges()})


MODELS: dict[str, Callable[..., Topology]] = {
    "grid": grid,
    "tree": tree,
    "transit-stub": transit_stub,
    "waxman": waxman,
    "barabasi-albert": barabasi_albert,
}

# How a scenario file writes each generator parameter: "size" (int >= 0), "probability" (number in
# [0, 1]), "bandwidth", "latency" and "buffer" (units as in network.defaults), "seed" (int >= 0).
PARAMETER_KINDS: dict[str, str] = {
    "rows": "size",
    "cols": "size",
    "branching": "size",
    "depth": "size",
    "transit": "size",
    "stubs_per_transit": "size",
    "nodes_per_stub": "size",
    "n": "size",
    "m": "size",
    "alpha": "probability",
    "beta": "probability",
    "transit_edge_prob": "probability",
    "stub_edge_prob": "probability",
    "seed": "seed",
    "bandwidth": "bandwidth",
    "transit_bandwidth": "bandwidth",
    "gateway_bandwidth": "bandwidth",
    "stub_bandwidth": "bandwidth",
    "latency": "latency",
    "transit_latency": "latency",
    "gateway_latency": "latency",
    "stub_latency": "latency",
    "max_latency": "latency",
    "transit_buffer": "buffer",
    "gateway_buffer": "buffer",
    "stub_buffer": "buffer",
}


def parameters(model: str) -> dict[str, bool]:
    """The keyword parameters of ``model``'s generator, each mapped to whether it is required."""
    signature = inspect.signature(MODELS[model])
    return {name: p.default is inspect.Parameter.empty for name, p in signature.parameters.items()}


def node_count(model: str, params: dict) -> int:
    """How many super-peers ``model`` would generate with ``params`` (computed without generating them;
    a tree's count stops growing past ``10**12``)."""
    if model == "grid":
        return params.get("rows", 0) * params.get("cols", 0)
    if model == "tree":
        branching, depth = params.get("branching", 1), params.get("depth", 0)
        if branching <= 1:  # a path, or the root alone: levels do not grow, the loop below would run depth times
            return depth + 1 if branching == 1 else 1
        count, level = 0, 1
        for _ in range(depth + 1):
            count += level
            level *= branching
            if count > 10**12:
                break
        return count
    if model == "transit-stub":
        transit = params.get("transit", 0)
        return transit * (1 + params.get("stubs_per_transit", 0) * params.get("nodes_per_stub", 0))
    return params.get("n", 0)


def pair_count(model: str, params: dict) -> int:
    """How many node pairs ``model`` weighs or links with ``params`` (computed without generating them).

    Time and memory grow with it, not with the node count alone: Waxman weighs every pair of nodes,
    transit-stub every pair within each domain, Barabási-Albert links each new node to ``m`` others.
    """
    n = node_count(model, params)
    if model in ("grid", "tree"):
        return 2 * n  # at most two links per node
    if model == "transit-stub":
        transit, stubs = params.get("transit", 0), params.get("stubs_per_transit", 0)
        return _pairs(transit) + transit * stubs * (_pairs(params.get("nodes_per_stub", 0)) + 1)
    if model == "waxman":
        return _pairs(n)
    m = params.get("m", 0)
    return m * max(n - m, 0)


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def generate(model: str, **params) -> Topology:
    """Call ``model``'s generator (a key of :data:`MODELS`) with ``params``.  Raises ValueError."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r} (expected one of: {', '.join(sorted(MODELS))})")
    return MODELS[model](**params)
