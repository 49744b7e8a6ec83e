"""Real networks in a scenario file (``network.import``): ids, latencies, bandwidths, positions, parallel
edges and overrides by the documented rules, checked against plain recomputations; the explicit file of
``run.py expand`` loads to the same scenario; every mistake is one line naming file, key and value."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import jsonschema
import networkx as nx
import pytest
import topohub
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network.routing import Network
from topologies.errors import ScenarioError
from topologies.expand import expand
from topologies.importing import great_circle_km
from topologies.loader import load_scenario, summary
from topologies.schema import json_schema

VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def scenario_doc(network: dict, attach: str) -> dict:
    return {
        "name": "real",
        "seed": 3,
        "duration": 5,
        "network": network,
        "thin_peers": [{"id": "P0", "attach": attach}, {"id": "P1", "attach": attach}],
        "streams": [{"id": "s", "source": "P0", "rate": 10, "schema": {"x": {"distribution": {"uniform": [0, 1]}}}}],
        "subscriptions": [{"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT x FROM s WHERE x > 0.5"}],
    }


def write(tmp_path, doc, name="s.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def error_of(path: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "\n" not in str(info.value)
    return str(info.value).removeprefix(f"{path}: ")


def haversine(a, b) -> float:
    """The great-circle distance as topohub's own `dist` computes it (radius 6,372.8 km), written again."""
    lon0, lat0, lon1, lat1 = map(math.radians, (*a, *b))
    h = math.sin((lat1 - lat0) / 2) ** 2 + math.cos(lat0) * math.cos(lat1) * math.sin((lon1 - lon0) / 2) ** 2
    return 2 * 6372.8 * math.asin(math.sqrt(h))


def ns(seconds: Fraction | float) -> Fraction:
    return Fraction(round(Fraction(seconds) * 10**9), 10**9)


# --- topohub ------------------------------------------------------------------------------------------


def test_a_topohub_network_keeps_its_names_positions_and_lengths(tmp_path):
    doc = scenario_doc({"import": {"topohub": "sndlib/germany50"}, "defaults": {"bandwidth": "10Gbit"}}, "Aachen")
    scenario = load_scenario(write(tmp_path, doc))
    data = topohub.get("sndlib/germany50")
    names = [node["name"] for node in data["nodes"]]
    assert scenario.super_peers == tuple(names)
    assert len(scenario.links) == len(data["edges"]) == 88
    name_of = {node["id"]: node["name"] for node in data["nodes"]}
    for link, edge in zip(scenario.links, data["edges"], strict=True):
        assert (link.a, link.b) == (name_of[edge["source"]], name_of[edge["target"]])
        assert link.latency == ns(Fraction(repr(edge["dist"])) / 200_000)  # dist km over 200,000 km/s
        assert link.length == edge["dist"]
        assert link.bandwidth == 10e9 and link.buffer is None
    assert scenario.position == {node["name"]: tuple(node["pos"]) for node in data["nodes"]}
    assert scenario.positions[0] == ("Aachen", (6.04, 50.76))
    VALIDATOR.validate(doc)


def test_validate_says_what_the_import_made(tmp_path):
    doc = scenario_doc({"import": {"topohub": "sndlib/germany50"}}, "Aachen")
    scenario = load_scenario(write(tmp_path, doc))
    assert summary(scenario).startswith("real: 50 super-peers, 88 links, 2 thin-peers")
    assert scenario.generated == (
        "network.import: topohub sndlib/germany50: 50 super-peers, 88 links (50 positioned, a demand matrix of"
        " 662 pairs)",
    )


def test_propagation_speed_and_minimum_latency(tmp_path):
    doc = scenario_doc(
        {"import": {"topohub": "sndlib/germany50"}, "propagation_km_per_s": 100_000, "min_latency": "0.5ms"},
        "Aachen",
    )
    scenario = load_scenario(write(tmp_path, doc))
    dist = {frozenset((link.a, link.b)): link.length for link in scenario.links}
    for link in scenario.links:
        assert link.latency == max(Fraction(1, 2000), ns(Fraction(repr(dist[frozenset((link.a, link.b))])) / 100_000))
    assert any(link.latency == Fraction(1, 2000) for link in scenario.links)  # Aachen-Koeln, 61.63 km: 0.6163 ms
    assert not all(link.latency == Fraction(1, 2000) for link in scenario.links)


def test_overrides_change_imported_links_and_nothing_else(tmp_path):
    base = load_scenario(write(tmp_path, scenario_doc({"import": {"topohub": "sndlib/germany50"}}, "Aachen"), "a.yaml"))
    network = {
        "import": {"topohub": "sndlib/germany50"},
        "defaults": {"buffer": "64KB"},
        "links": [
            ["Koeln", "Aachen", {"bandwidth": "1Gbit"}],
            ["Berlin", "Leipzig", {"latency": "7ms", "buffer": 1500}],
        ],
    }
    changed = load_scenario(write(tmp_path, scenario_doc(network, "Aachen"), "b.yaml"))
    for old, new in zip(base.links, changed.links, strict=True):
        pair = frozenset((old.a, old.b))
        if pair == {"Aachen", "Koeln"}:
            assert (new.bandwidth, new.latency, new.buffer) == (1e9, old.latency, 64_000)
        elif pair == {"Berlin", "Leipzig"}:
            assert (new.bandwidth, new.latency, new.buffer) == (old.bandwidth, Fraction(7, 1000), 1500)
        else:
            assert (new.bandwidth, new.latency, new.buffer, new.length) == (
                old.bandwidth,
                old.latency,
                64_000,
                old.length,
            )


def test_routes_over_an_imported_network_are_networkx_least_latency_paths(tmp_path):
    scenario = load_scenario(write(tmp_path, scenario_doc({"import": {"topohub": "topozoo/Geant2012"}}, "AT")))
    graph = nx.Graph()
    graph.add_weighted_edges_from((link.a, link.b, link.latency) for link in scenario.links)
    network = Network.of(scenario)
    for a in scenario.super_peers[::5]:
        lengths = nx.single_source_dijkstra_path_length(graph, a)
        for b in scenario.super_peers:
            route = network.route(a, b)
            assert sum(network.link(x, y).latency for x, y in itertools.pairwise(route)) == lengths[b]


# --- files: GraphML, GML, node-link JSON --------------------------------------------------------------

ZOO_GRAPHML = """<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="d3"/>
<key attr.name="label" attr.type="string" for="node" id="d2"/>
<key attr.name="Longitude" attr.type="double" for="node" id="d1"/>
<key attr.name="Latitude" attr.type="double" for="node" id="d0"/>
<key attr.name="Population" attr.type="int" for="node" id="d4"/>
<graph edgedefault="undirected">
<node id="0"><data key="d0">40.71427</data><data key="d1">-74.00597</data><data key="d2">New York</data>
<data key="d4">8</data></node>
<node id="1"><data key="d0">41.85003</data><data key="d1">-87.65005</data><data key="d2">Chicago</data>
<data key="d4">3</data></node>
<node id="2"><data key="d0">38.89511</data><data key="d1">-77.03637</data><data key="d2">Washington DC</data>
<data key="d4">1</data></node>
<node id="3"><data key="d0">39.0</data><data key="d1">-77.5</data><data key="d2">Washington_DC</data>
<data key="d4">0</data></node>
<node id="4"><data key="d0">33.749</data><data key="d1">-84.38798</data><data key="d4">0</data></node>
<edge source="0" target="1"><data key="d3">10000000000.0</data></edge>
<edge source="0" target="1"><data key="d3">2500000000.0</data></edge>
<edge source="0" target="2"/>
<edge source="2" target="3"/>
<edge source="3" target="4"><data key="d3">1000000000.0</data></edge>
<edge source="4" target="4"/>
<edge source="4" target="1"/>
</graph>
</graphml>
"""


def test_a_topology_zoo_graphml_file(tmp_path):
    (tmp_path / "zoo.graphml").write_text(ZOO_GRAPHML)
    doc = scenario_doc({"import": {"file": "zoo.graphml"}, "defaults": {"bandwidth": "1Mbit"}}, "New_York")
    scenario = load_scenario(write(tmp_path, doc))
    # "New York" cleaned; the two Washingtons clean to one name, so both take their node ids; node 4 has none
    assert scenario.super_peers == ("New_York", "Chicago", "2", "3", "4")
    assert scenario.generated == (
        "network.import: zoo.graphml: 5 super-peers, 5 links (5 positioned, 1 parallel edge merged, 1 self-loop"
        " ignored); 4 ids differ from the names given:",
        "  'New York' -> New_York",
        "  node '2': name 'Washington DC' shared with 1 other node, id 2",
        "  node '3': name 'Washington_DC' shared with 1 other node, id 3",
        "  node '4': no name, id 4",
    )
    pos = scenario.position
    links = {frozenset((link.a, link.b)): link for link in scenario.links}
    ny_chicago = links[frozenset(("New_York", "Chicago"))]
    assert ny_chicago.bandwidth == 12.5e9  # parallel circuits add up
    km = haversine(pos["New_York"], pos["Chicago"])
    assert ny_chicago.length == pytest.approx(km, rel=1e-12)
    assert ny_chicago.latency == ns(Fraction(repr(great_circle_km(pos["New_York"], pos["Chicago"]))) / 200_000)
    assert links[frozenset(("New_York", "2"))].bandwidth == 1e6  # no LinkSpeedRaw: the default
    assert links[frozenset(("3", "4"))].bandwidth == 1e9
    assert frozenset(("4",)) not in links  # the self-loop


def test_node_weights_of_a_file_are_its_numeric_node_attributes(tmp_path):
    from topologies.importing import read_import
    from topologies.loader import _Reader

    (tmp_path / "zoo.graphml").write_text(ZOO_GRAPHML)
    reader = _Reader(str(tmp_path / "s.yaml"))
    found = read_import(reader, {"file": "zoo.graphml"}, "network.import", 100)
    assert found.weights == {"Population": {"New_York": 8.0, "Chicago": 3.0, "2": 1.0, "3": 0.0, "4": 0.0}}
    assert found.demands == {}


def test_a_node_named_as_a_live_identity_takes_its_node_id(tmp_path):
    graph = {
        "directed": False, "multigraph": False, "graph": {},
        "nodes": [{"id": "n1", "name": "coordinator"}, {"id": "n2", "name": "Rome"}, {"id": "operator"}],
        "edges": [{"source": "n1", "target": "n2", "latency": 0.001}, {"source": "n2", "target": "operator"}],
    }  # fmt: skip
    (tmp_path / "g.json").write_text(json.dumps(graph))
    network = {"import": {"file": "g.json"}}
    message = error_of(write(tmp_path, scenario_doc(network, "Rome")))
    assert message == (
        "network.import (g.json): node 'operator': 'operator' is a reserved id and the node has no other name"
    )
    graph["nodes"][2]["name"] = "Milan"
    graph["edges"][1]["latency"] = 0.001
    (tmp_path / "g.json").write_text(json.dumps(graph))
    scenario = load_scenario(write(tmp_path, scenario_doc(network, "Rome")))
    assert scenario.super_peers == ("n1", "Rome", "Milan")
    assert "  node 'n1': name 'coordinator' is reserved (docs/LIVE.md), id n1" in scenario.generated


def test_a_gml_file_repeating_an_edge_without_declaring_a_multigraph(tmp_path):
    (tmp_path / "net.gml").write_text(
        'graph [\n  node [ id 0 label "A" lon 10 lat 50 ]\n  node [ id 1 label "B" lon 11 lat 50 ]\n'
        '  node [ id 2 label "C" ]\n  edge [ source 0 target 1 ]\n  edge [ source 1 target 0 latency "3ms" ]\n'
        "  edge [ source 1 target 2 latency 0.002 ]\n]\n"
    )
    scenario = load_scenario(write(tmp_path, scenario_doc({"import": {"file": "net.gml"}}, "A")))
    assert scenario.super_peers == ("A", "B", "C")
    a_b, b_c = scenario.links
    # parallel: the smaller latency of the two (the length's, 71.5 km, against the written 3 ms), bandwidths added
    assert a_b.latency == ns(Fraction(repr(great_circle_km((10, 50), (11, 50)))) / 200_000) < Fraction(3, 1000)
    assert a_b.bandwidth == 200e6
    assert (b_c.latency, b_c.length) == (Fraction(2, 1000), None)


def test_node_link_json_old_and_new_key_and_a_directed_graph(tmp_path):
    graph = nx.DiGraph()
    graph.add_node("x", name="X", pos=[0.0, 0.0])
    graph.add_node("y", name="Y", pos=[1.0, 0.0])
    graph.add_edge("x", "y", dist=100.0, bandwidth="1Gbit")
    graph.add_edge("y", "x", dist=120.0)
    data = nx.node_link_data(graph, edges="links")
    (tmp_path / "net.json").write_text(json.dumps(data))
    scenario = load_scenario(write(tmp_path, scenario_doc({"import": {"file": "net.json"}}, "X")))
    (link,) = scenario.links
    assert (link.a, link.b, link.length, link.latency, link.bandwidth) == ("X", "Y", 100.0, Fraction(1, 2000), 1.1e9)


# --- the explicit file ----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["topohub", "graphml"])
def test_expand_writes_an_explicit_file_loading_to_the_same_scenario(tmp_path, source):
    if source == "graphml":
        (tmp_path / "zoo.graphml").write_text(ZOO_GRAPHML)
        network = {"import": {"file": "zoo.graphml"}, "links": [["Chicago", "4", {"buffer": "8KB", "length": 3}]]}
        attach = "New_York"
    else:
        network = {"import": {"topohub": "topozoo/Geant2012"}, "propagation_km_per_s": 150_000, "min_latency": "1ms"}
        attach = "AT"
    path = write(tmp_path, scenario_doc(network, attach))
    scenario, text = expand(path)
    explicit = yaml.safe_load(text)
    assert "import" not in explicit["network"]
    VALIDATOR.validate(explicit)
    (tmp_path / "explicit.yaml").write_text(text)
    again = load_scenario(str(tmp_path / "explicit.yaml"))
    assert again == scenario
    assert again.generated == ()
    if source == "graphml":
        assert "#   zoo.graphml: ids that differ from the names given:\n#   'New York' -> New_York\n" in text
        assert [link.length for link in again.links if {link.a, link.b} == {"Chicago", "4"}] == [3]


# --- names, by the rule, on any graph -------------------------------------------------------------------

NAMES = st.one_of(st.none(), st.text(alphabet="ab .-_/é", min_size=0, max_size=4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAMES, min_size=2, max_size=8))
def test_ids_follow_the_naming_rule(tmp_path, names):
    graph = nx.path_graph(len(names))
    for node, name in zip(graph.nodes, names, strict=True):
        if name is not None:
            graph.nodes[node]["name"] = name
        graph.nodes[node]["pos"] = [node * 0.1, 0.0]
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="edges")))
    doc = scenario_doc({"import": {"file": "g.json"}}, "X")
    doc["thin_peers"] = [{"generate": {"count": 2}}]
    scenario = load_scenario(write(tmp_path, doc))
    cleaned = ["".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in n or "") for n in names]
    for node, (sp, name) in enumerate(zip(scenario.super_peers, cleaned, strict=True)):
        unique = name and cleaned.count(name) == 1 and name not in {str(k) for k, m in enumerate(cleaned) if not m}
        assert sp == (name if unique else str(node))
    assert len(set(scenario.super_peers)) == len(names)


# --- mistakes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("network", "message"),
    [
        (
            {"import": {"topohub": "sndlib/germany"}},
            "network.import.topohub: topohub has no topology 'sndlib/germany' (did you mean 'sndlib/germany50' or",
        ),
        ({"import": {"topohub": "../../x"}}, "network.import.topohub: expected a topohub key such as"),
        ({"import": {"file": "net.txt"}}, "network.import.file: unknown kind of file 'net.txt' (expected one of:"),
        ({"import": {"file": "missing.graphml"}}, "network.import.file: file not found: 'missing.graphml'"),
        ({"import": {"file": "x.gml", "topohub": "a/b"}}, "network.import: expected exactly one of 'topohub' and"),
        ({"import": {"web": "x"}}, "network.import: unknown key 'web' (expected one of: file, topohub)"),
        (
            {"import": {"topohub": "sndlib/germany50"}, "super_peers": ["A"]},
            "network.super_peers: not allowed together with network.import",
        ),
        (
            {"import": {"topohub": "sndlib/germany50"}, "links": [["Aachen", "Berlin", {"bandwidth": "1Gbit"}]]},
            "network.links[0]: topohub sndlib/germany50 has no link Aachen-Berlin (links beside an import only"
            " override its links)",
        ),
        (
            {"import": {"topohub": "sndlib/germany50"}, "links": [["Aachen", "Koeln"]]},
            "network.links[0]: expected [a, b, {bandwidth, latency, buffer, length}], got ['Aachen', 'Koeln']",
        ),
        (
            {"import": {"topohub": "sndlib/germany50"}, "links": [["Aachen", "Koeln", {"latency": "x"}]]},
            "network.links[0][2].latency: bad latency 'x'",
        ),
        (
            {"import": {"topohub": "sndlib/germany50"}, "propagation_km_per_s": 0},
            "network.propagation_km_per_s: must be positive, got 0",
        ),
    ],
)
def test_mistakes_are_one_line_naming_the_key(tmp_path, network, message):
    assert error_of(write(tmp_path, scenario_doc(network, "Aachen"))).startswith(message)


def test_a_link_without_latency_length_or_positions_is_named(tmp_path):
    (tmp_path / "net.gml").write_text(
        'graph [ node [ id 0 label "A" ] node [ id 1 label "B" ] edge [ source 0 target 1 ] ]'
    )
    path = write(tmp_path, scenario_doc({"import": {"file": "net.gml"}}, "A"))
    assert error_of(path) == (
        "network.import (net.gml): link A-B has no latency, no length (dist) and its ends no positions;"
        " give it one in network.links, e.g. [A, B, {latency: 1ms}]"
    )
    fixed = scenario_doc({"import": {"file": "net.gml"}, "links": [["B", "A", {"latency": "4ms"}]]}, "A")
    assert load_scenario(write(tmp_path, fixed, "fixed.yaml")).links[0].latency == Fraction(4, 1000)


def test_a_disconnected_graph_and_a_broken_file_are_refused(tmp_path):
    (tmp_path / "two.gml").write_text(
        'graph [ node [ id 0 label "A" ] node [ id 1 label "B" ] node [ id 2 label "C" ]'
        " edge [ source 0 target 1 latency 0.001 ] ]"
    )
    assert error_of(write(tmp_path, scenario_doc({"import": {"file": "two.gml"}}, "A"))) == (
        "network.links: backbone is disconnected: C unreachable from A"
    )
    (tmp_path / "bad.graphml").write_text("<graphml><graph><node id='a'>")
    message = error_of(write(tmp_path, scenario_doc({"import": {"file": "bad.graphml"}}, "A"), "b.yaml"))
    assert message.startswith("network.import.file: bad.graphml: not a valid graphml file: ")
    (tmp_path / "pos.json").write_text(json.dumps({"nodes": [{"id": 0, "name": "A", "pos": ["x", 0]}], "edges": []}))
    assert error_of(write(tmp_path, scenario_doc({"import": {"file": "pos.json"}}, "A"), "c.yaml")) == (
        "network.import (pos.json): node A: position ['x', 0] is not two numbers (lon, lat)"
    )


@pytest.mark.parametrize(
    ("source", "note"),
    [
        ({"topohub": "gabriel/25/0"}, "positions are plane coordinates (a Gabriel graph): not kept"),
        ({"topohub": "sndlib/atlanta"}, "positions outside the ranges of longitude and latitude, taken as plane"),
    ],
)
def test_plane_coordinates_are_not_taken_for_geography(tmp_path, source, note):
    doc = scenario_doc({"import": source}, "X")
    doc["thin_peers"] = [{"generate": {"count": 2}}]
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.positions == ()
    assert note in scenario.generated[0]
    data = topohub.get(source["topohub"])
    assert [link.length for link in scenario.links] == [edge["dist"] for edge in data["edges"]]  # the data's own
