"""Real networks in a scenario file: ``network.import`` (docs/SCENARIOS.md, "Real networks").

A backbone is read from one of:

- ``{topohub: KEY}``: a topology the ``topohub`` package ships (Internet Topology Zoo, SNDlib, CAIDA,
  synthetic backbones and Gabriel graphs as networkx node-link data, node positions as (lon, lat), edge
  ``dist`` in km, SNDlib demand matrices), e.g. ``sndlib/germany50`` or ``topozoo/Geant2012``;
- ``{file: PATH}``: a GraphML (``.graphml``) or GML (``.gml``) file, as the Topology Zoo distributes them, or
  networkx node-link JSON (``.json``); the path is relative to the scenario file.

The graph becomes plain super-peer ids and :class:`LinkSpec` values by fixed rules, so the same data always
gives the same scenario, and ``run.py expand`` can write it out as an explicit file:

- **ids**: a node's name (topohub: ``name``; a file: ``label``, else ``name``) with every character outside
  ``[A-Za-z0-9_.-]`` replaced by ``_``; a node whose name is missing, longer than an id may be, or shared
  with another node after cleaning takes its node id instead (cleaned the same way).
- **latency**: the edge's own ``latency`` attribute (scenario units: seconds, or a string with s, ms, us),
  else its length over ``propagation_km_per_s``: the edge's ``dist`` in km where the data gives one,
  else the great-circle distance between its ends' positions; at least ``min_latency``; rounded to whole
  nanoseconds (latencies stay exact fractions, and an exact decimal can be written back).  A link with
  none of these is an error naming it, unless an override in ``network.links`` gives its latency.
- **bandwidth**: the edge's ``bandwidth`` attribute (scenario units) or Topology Zoo's ``LinkSpeedRaw``
  (bit/s), else ``network.defaults.bandwidth``.
- **parallel edges** (a multigraph, or a directed graph's two directions) become one link: the latency
  and length of the fastest of them (the one a route takes) and the sum of their bandwidths (parallel
  circuits add up); **self-loops** are ignored; a disconnected graph is refused by the loader as any
  backbone is.
- **positions**: ``pos`` = ``[lon, lat]`` (topohub), or ``Longitude``/``Latitude`` (Topology Zoo), or
  ``lon``/``lat``; they travel with the scenario to the topology plot and report.html.  Plane coordinates
  (topohub's Gabriel graphs, or any position outside the ranges of degrees) are not geography: none is
  kept, and ``validate`` says so.
- **node weights** for the workload generators: ``demand``, each node's total SNDlib demand (sent plus
  received) where the data has a demand matrix, and every numeric node attribute by its name.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import networkx as nx

from topologies.errors import shown
from topologies.model import LinkSpec
from topologies.units import parse_bandwidth, parse_latency

SOURCE_KEYS = {"topohub": False, "file": False}
FILE_KINDS = (".graphml", ".gml", ".json")
TOPOHUB_KEY = re.compile(r"[A-Za-z0-9_-]+(/[A-Za-z0-9_.-]+)*")
OUTSIDE_ID = re.compile(r"[^A-Za-z0-9_.-]")
EARTH_RADIUS_KM = 6372.8  # topohub computes its `dist` with this radius: lengths from positions agree with it
DEFAULT_PROPAGATION_KM_PER_S = 200_000  # light in fibre, about two thirds of c
NANOSECONDS = 10**9
MAX_IMPORT_BYTES = 2**28  # a graph file; the largest topohub topology (3,815 nodes) is 3 MB of JSON
DEMAND = "demand"
SHOWN_RENAMES = 20  # renamed nodes listed one per line by `run.py validate`


class Reader(Protocol):
    """What the importer needs of the loader's reader (topologies/loader.py)."""

    file: str
    base_dir: str

    def fail(self, path: str, message: str): ...
    def mapping(self, value: object, path: str, keys: dict[str, bool]) -> dict[str, Any]: ...
    def bandwidth(self, spec: dict[str, Any], path: str, default: float) -> float: ...
    def latency(self, spec: dict[str, Any], path: str, default: Fraction) -> Fraction: ...
    def buffer(self, spec: dict[str, Any], path: str, default: float | None) -> float | None: ...
    def length(self, spec: dict[str, Any], path: str) -> float: ...


@dataclass(frozen=True)
class Circuit:
    """One edge of the data between two nodes: what it says of latency (its own, or a length in km) and of
    bandwidth, each None when it says nothing."""

    latency: Fraction | None
    length: float | None  # km
    bandwidth: float | None  # bit/s

    def delay(self, km_per_s: float, minimum: Fraction) -> Fraction | None:
        """Its latency: its own, else its length's, else None."""
        if self.latency is not None:
            return self.latency
        return None if self.length is None else latency_of_length(self.length, km_per_s, minimum)


@dataclass(frozen=True)
class Edge:
    """The link between two super-peers, before the scenario's overrides: every edge the data has between
    them (parallel edges, or a directed graph's two directions), in the data's order."""

    a: str
    b: str
    circuits: tuple[Circuit, ...]

    def bandwidth(self, default: float) -> float:
        """The sum over its circuits of each one's own bandwidth, else ``default``: parallel circuits add up."""
        return sum(default if c.bandwidth is None else c.bandwidth for c in self.circuits)

    def fastest(self, km_per_s: float, minimum: Fraction) -> Circuit | None:
        """The circuit of least latency (the first of equals), the one a route takes; None when no circuit
        has a latency or a length."""
        timed = [(d, k) for k, c in enumerate(self.circuits) if (d := c.delay(km_per_s, minimum)) is not None]
        return self.circuits[min(timed)[1]] if timed else None


@dataclass(frozen=True)
class ImportedNetwork:
    """A real network read from its source, ids and links by the rules of this module."""

    source: str  # e.g. "topohub sndlib/germany50" or "net.graphml"
    super_peers: tuple[str, ...]
    edges: tuple[Edge, ...]
    positions: Mapping[str, tuple[float, float]]  # (lon, lat) of the super-peers that have one
    weights: Mapping[str, Mapping[str, float]]  # a weight's name -> per super-peer ("demand", node attributes)
    demands: Mapping[tuple[str, str], float]  # (from, to) -> SNDlib demand, where the data has a matrix
    renamed: tuple[str, ...] = ()  # one line per node whose id is not its name as given
    dropped: str | None = None  # why the data's positions were not kept, if they were not
    self_loops: int = 0
    parallel: int = 0  # edges merged into another


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Haversine distance in km between two (lon, lat) positions in degrees."""
    (lon0, lat0), (lon1, lat1) = a, b
    d_lat, d_lon = math.radians(lat1 - lat0), math.radians(lon1 - lon0)
    h = (
        math.sin(d_lat / 2) ** 2
        + math.cos(math.radians(lat0)) * math.cos(math.radians(lat1)) * math.sin(d_lon / 2) ** 2
    )
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def latency_of_length(length_km: float, km_per_s: float, minimum: Fraction = Fraction(0)) -> Fraction:
    """``length_km / km_per_s`` seconds, at least ``minimum``, rounded to whole nanoseconds (exact: a length
    written as a decimal gives the same latency on every machine)."""
    exact = Fraction(repr(float(length_km))) / Fraction(repr(float(km_per_s)))
    return max(minimum, Fraction(round(exact * NANOSECONDS), NANOSECONDS))


def clean_name(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_.-]`` replaced by ``_``."""
    return OUTSIDE_ID.sub("_", name)


def read_import(
    reader: Reader, value: object, path: str, max_id_length: int, reserved: tuple[str, ...] = ()
) -> ImportedNetwork:
    """The network ``network.import`` names (``value`` at ``path``); a node named one of ``reserved`` takes
    its node id instead, as a node whose name is shared does.  Every problem is one line naming the file,
    the key path and what is wrong (via ``reader.fail``)."""
    spec = reader.mapping(value, path, SOURCE_KEYS)
    if len(spec) != 1:
        reader.fail(path, f"expected exactly one of 'topohub' and 'file', got {shown(value)}")
    if "topohub" in spec:
        graph = _topohub(reader, spec["topohub"], f"{path}.topohub")
        source, names_from = f"topohub {spec['topohub']}", ("name",)
    else:
        graph = _file(reader, spec["file"], f"{path}.file")
        source, names_from = spec["file"], ("label", "name")
    where = f"{path} ({source})"
    ids, renamed = _ids(reader, graph, names_from, where, max_id_length, reserved)
    planar = "topohub" in spec and str(spec["topohub"]).startswith("gabriel/")
    positions, dropped = _positions(reader, graph, ids, where, planar)
    edges, self_loops, parallel = _edges(reader, graph, ids, positions, where)
    demands = _demands(graph, ids)
    weights = _weights(graph, ids)
    if demands:
        total = dict.fromkeys(ids.values(), 0.0)
        for (a, b), amount in demands.items():
            total[a] += amount
            total[b] += amount
        weights = {DEMAND: total, **weights}
    return ImportedNetwork(
        source, tuple(ids.values()), edges, positions, weights, demands, renamed, dropped, self_loops, parallel
    )


def _topohub(reader: Reader, key: object, path: str) -> nx.Graph:
    if not isinstance(key, str) or not TOPOHUB_KEY.fullmatch(key) or ".." in key:
        reader.fail(path, f"expected a topohub key such as 'sndlib/germany50' or 'topozoo/Geant2012', got {shown(key)}")
    import topohub  # imported where it is used: a scenario without an import never pays for it

    try:
        data = topohub.get(key)
    except KeyError:
        hint = _close_topohub_keys(key)
        reader.fail(path, f"topohub has no topology {key!r}" + (f" (did you mean {hint}?)" if hint else ""))
    return _node_link(reader, data, path)


def topohub_keys() -> list[str]:
    """Every topology key the installed ``topohub`` package ships, sorted (``gabriel/25/0``, ...)."""
    import importlib.resources

    import topohub

    root = importlib.resources.files(topohub) / "data"
    keys = []
    stack = [(root, "")]
    while stack:
        here, prefix = stack.pop()
        for entry in here.iterdir():
            if entry.is_dir():
                stack.append((entry, f"{prefix}{entry.name}/"))
            elif entry.name.endswith(".json"):
                keys.append(prefix + entry.name.removesuffix(".json"))
    return sorted(keys)


def _close_topohub_keys(key: str) -> str:
    import difflib

    keys = topohub_keys()
    by_name = {k.rsplit("/", 1)[-1].lower(): k for k in keys}
    found = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    found += [by_name[n] for n in difflib.get_close_matches(key.rsplit("/", 1)[-1].lower(), by_name, n=3)]
    return " or ".join(repr(k) for k in dict.fromkeys(found[:3]))


def _node_link(reader: Reader, data: object, path: str) -> nx.Graph:
    """A graph from networkx node-link data (``edges`` or, as older networkx wrote it, ``links``)."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        reader.fail(path, "expected networkx node-link data: a JSON object with 'nodes' and 'edges' (or 'links')")
    edges = "edges" if "edges" in data else "links"
    try:
        return nx.node_link_graph(data, edges=edges)
    except (nx.NetworkXError, KeyError, TypeError, ValueError) as err:
        reader.fail(path, f"not networkx node-link data: {_problem(err)}")


def _problem(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _file(reader: Reader, value: object, path: str) -> nx.Graph:
    if not isinstance(value, str) or not value or "\0" in value:
        reader.fail(path, f"expected a file path, got {shown(value)}")
    kind = os.path.splitext(value)[1].lower()
    if kind not in FILE_KINDS:
        reader.fail(path, f"unknown kind of file {shown(value)} (expected one of: {', '.join(FILE_KINDS)})")
    full = os.path.normpath(os.path.join(reader.base_dir, value))
    try:
        info = os.stat(full)
    except OSError:
        reader.fail(path, f"file not found: {shown(value)}")
    if not stat.S_ISREG(info.st_mode):
        reader.fail(path, f"{shown(value)} is not a regular file")
    if info.st_size > MAX_IMPORT_BYTES:
        reader.fail(path, f"{shown(value)}: {info.st_size:,} bytes, over the limit of {MAX_IMPORT_BYTES:,}")
    try:
        if kind == ".json":
            with open(full, encoding="utf-8") as handle:
                return _node_link(reader, json.load(handle), path)
        if kind == ".graphml":
            return nx.read_graphml(full)
        return _gml(full)
    except OSError as err:
        reader.fail(path, f"cannot read {shown(value)}: {err.strerror}")
    except (ValueError, nx.NetworkXError, SyntaxError, KeyError, TypeError) as err:  # includes JSON and XML errors
        reader.fail(path, f"{value}: not a valid {kind[1:]} file: {_problem(err)}")


def _gml(full: str) -> nx.Graph:
    """A GML file's graph, nodes keyed by their ``id`` (``label`` stays an attribute).  networkx refuses a
    GML graph that repeats an edge unless it declares ``multigraph 1``; the Topology Zoo's do repeat
    edges (parallel circuits), so such a file is read again as a multigraph."""
    with open(full, encoding="utf-8") as handle:
        text = handle.read()
    try:
        return nx.parse_gml(text, label=None)
    except nx.NetworkXError as err:
        if "is duplicated" not in str(err):
            raise
        return nx.parse_gml(re.sub(r"\bgraph\s*\[", "graph [ multigraph 1", text, count=1), label=None)


def _text_id(node: object) -> str:
    return node if isinstance(node, str) else str(node)


def _ids(
    reader: Reader,
    graph: nx.Graph,
    names_from: tuple[str, ...],
    where: str,
    max_length: int,
    reserved: tuple[str, ...] = (),
) -> tuple[dict[object, str], tuple[str, ...]]:
    """Each node's super-peer id, in the graph's node order, and a line per node whose id is not its name
    as given."""
    names: dict[object, str | None] = {}
    for node, data in graph.nodes(data=True):
        name = next((data[k] for k in names_from if data.get(k) not in (None, "")), None)
        cleaned = None if name is None else clean_name(str(name))
        names[node] = cleaned if cleaned and len(cleaned) <= max_length and cleaned not in reserved else None
    by_id = {node for node, name in names.items() if name is None}
    while True:  # a name shared with another node's name or fallback id: both take their node ids
        chosen = {node: clean_name(_text_id(node)) if node in by_id else names[node] for node in names}
        counts: dict[str, int] = {}
        for name in chosen.values():
            counts[name] = counts.get(name, 0) + 1
        shared = {node for node, name in chosen.items() if counts[name] > 1 and node not in by_id}
        if not shared:
            break
        by_id |= shared
    for node, name in chosen.items():
        if counts[name] > 1 or not name or len(name) > max_length:
            reader.fail(where, f"node ids {shown(_text_id(node))} cannot be told apart once cleaned ({name!r})")
        if name in reserved:
            reader.fail(
                where, f"node {shown(_text_id(node))}: {name!r} is a reserved id and the node has no other name"
            )
    given_names = {}
    for node, data in graph.nodes(data=True):
        given = next((data[k] for k in names_from if data.get(k) not in (None, "")), None)
        given_names[node] = None if given is None else str(given)
    cleaned_counts: dict[str, int] = {}
    for name in names.values():
        if name is not None:
            cleaned_counts[name] = cleaned_counts.get(name, 0) + 1
    renamed = []
    for node, given in given_names.items():
        if given is None:
            renamed.append(f"node {_text_id(node)!r}: no name, id {chosen[node]}")
        elif clean_name(given) in reserved:
            renamed.append(f"node {_text_id(node)!r}: name {given!r} is reserved (docs/LIVE.md), id {chosen[node]}")
        elif names[node] is None:
            renamed.append(
                f"node {_text_id(node)!r}: name {given!r} is longer than {max_length} characters, id {chosen[node]}"
            )
        elif node in by_id:
            others = cleaned_counts[names[node]] - 1
            whom = f"{others} other node{'s' * (others > 1)}" if others else "another node's id"
            renamed.append(f"node {_text_id(node)!r}: name {given!r} shared with {whom}, id {chosen[node]}")
        elif chosen[node] != given:
            renamed.append(f"{given!r} -> {chosen[node]}")
    return chosen, tuple(renamed)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _positions(
    reader: Reader, graph: nx.Graph, ids: Mapping[object, str], where: str, planar: bool
) -> tuple[dict[str, tuple[float, float]], str | None]:
    """The nodes' (lon, lat), and why none is kept when they are not geography: ``planar`` data (topohub's
    Gabriel graphs), or a position outside the ranges of degrees (SNDlib's synthetic networks give plane
    coordinates in the same field).  A position that is not two numbers is an error."""
    found = {}
    for node, data in graph.nodes(data=True):
        pos = data.get("pos")
        if pos is None:
            pos = next(
                ([data[x], data[y]] for x, y in (("Longitude", "Latitude"), ("lon", "lat"), ("longitude", "latitude"))
                 if x in data and y in data),
                None,
            )  # fmt: skip
            if pos is None:
                continue
        pair = [_number(v) for v in pos] if isinstance(pos, list | tuple) else []
        if len(pair) != 2 or None in pair or not all(math.isfinite(v) for v in pair):
            reader.fail(where, f"node {ids[node]}: position {shown(pos)} is not two numbers (lon, lat)")
        found[ids[node]] = (pair[0], pair[1])
    if found and planar:
        return {}, "positions are plane coordinates (a Gabriel graph): not kept"
    if not all(-180 <= lon <= 180 and -90 <= lat <= 90 for lon, lat in found.values()):
        return {}, "positions outside the ranges of longitude and latitude, taken as plane coordinates: not kept"
    return found, None


def _edges(
    reader: Reader,
    graph: nx.Graph,
    ids: Mapping[object, str],
    positions: Mapping[str, tuple[float, float]],
    where: str,
) -> tuple[tuple[Edge, ...], int, int]:
    """One :class:`Edge` per pair of adjacent nodes, in the order the data first joins them; the self-loops
    ignored and the parallel edges merged, counted."""
    merged: dict[frozenset, Edge] = {}
    self_loops = parallel = 0
    for u, v, data in graph.edges(data=True):
        a, b = ids[u], ids[v]
        if a == b:
            self_loops += 1
            continue
        name = f"{where}: edge {a}-{b}"
        latency = None
        if data.get("latency") is not None:
            try:
                latency = parse_latency(data["latency"])
            except ValueError as err:
                reader.fail(name, f"latency: {err}")
        length = None
        if data.get("dist") is not None:
            length = _number(data["dist"])
            if length is None or not 0 <= length < math.inf:
                reader.fail(name, f"dist: expected a length in km, got {shown(data['dist'])}")
        elif a in positions and b in positions:
            length = great_circle_km(positions[a], positions[b])
        bandwidth = None
        for key in ("bandwidth", "LinkSpeedRaw"):
            if data.get(key) is not None:
                try:
                    bandwidth = parse_bandwidth(data[key])
                except ValueError as err:
                    reader.fail(name, f"{key}: {err}")
                break
        key = frozenset((a, b))
        if key in merged:
            parallel += 1
            first = merged[key]
            merged[key] = Edge(first.a, first.b, (*first.circuits, Circuit(latency, length, bandwidth)))
        else:
            merged[key] = Edge(a, b, (Circuit(latency, length, bandwidth),))
    return tuple(merged.values()), self_loops, parallel


def resolve_links(
    reader: Reader,
    imported: ImportedNetwork,
    overrides: Mapping[frozenset, tuple[str, dict[str, Any]]],
    *,
    bandwidth: float,
    buffer: float | None,
    km_per_s: float,
    minimum: Fraction,
) -> tuple[LinkSpec, ...]:
    """The imported edges as links.  An override of ``network.links`` (by unordered pair of ends: the key
    path of its options and the options) wins, then the data, then the defaults."""
    links = []
    for edge in imported.edges:
        path, options = overrides.get(frozenset((edge.a, edge.b)), ("", {}))
        link_bandwidth = reader.bandwidth(options, path, edge.bandwidth(bandwidth))
        fastest = edge.fastest(km_per_s, minimum)
        length = reader.length(options, path) if "length" in options else fastest and fastest.length
        if "latency" in options:
            latency = reader.latency(options, path, Fraction(0))
        elif "length" in options:
            latency = latency_of_length(length, km_per_s, minimum)
        elif fastest is not None:
            latency = fastest.delay(km_per_s, minimum)
        else:
            reader.fail(
                f"network.import ({imported.source})",
                f"link {edge.a}-{edge.b} has no latency, no length (dist) and its ends no positions;"
                f" give it one in network.links, e.g. [{edge.a}, {edge.b}, {{latency: 1ms}}]",
            )
        link_buffer = reader.buffer(options, path, buffer)
        links.append(LinkSpec(edge.a, edge.b, link_bandwidth, latency, link_buffer, length))
    return tuple(links)


def _demands(graph: nx.Graph, ids: Mapping[object, str]) -> dict[tuple[str, str], float]:
    """The demand matrix (``graph['demands']``, as topohub gives SNDlib's), by super-peer ids; entries
    naming unknown nodes or holding no positive number are left out."""
    raw = graph.graph.get("demands")
    if not isinstance(raw, dict):
        return {}
    by_text = {_text_id(node): sp for node, sp in ids.items()}
    found: dict[tuple[str, str], float] = {}
    for a, row in raw.items():
        if not isinstance(row, dict) or _text_id(a) not in by_text:
            continue
        for b, amount in row.items():
            value = _number(amount)
            if _text_id(b) in by_text and value is not None and value > 0 and math.isfinite(value):
                key = (by_text[_text_id(a)], by_text[_text_id(b)])
                if key[0] != key[1]:
                    found[key] = found.get(key, 0.0) + value
    return found


def _weights(graph: nx.Graph, ids: Mapping[object, str]) -> dict[str, dict[str, float]]:
    """Every node attribute that is a finite number >= 0 on every node, by its name (bools, ids and
    coordinates left out)."""
    skip = {"id", "pos", "Longitude", "Latitude", "lon", "lat", "longitude", "latitude"}
    names = None
    for _, data in graph.nodes(data=True):
        own = {k for k, v in data.items() if k not in skip and _number(v) is not None and not isinstance(v, str)}
        names = own if names is None else names & own
    found = {}
    for name in sorted(names or ()):
        values = {ids[node]: float(data[name]) for node, data in graph.nodes(data=True)}
        if all(math.isfinite(v) and v >= 0 for v in values.values()):
            found[name] = values
    return found
