"""The shipped scenarios: they load, match the JSON Schema, stay small, and figure1 tells the story of
Kuntschke & Kemper's Figure 1."""

from __future__ import annotations

import copy
import glob
import itertools
import os
from fractions import Fraction

import jsonschema
import networkx as nx
import pytest
import yaml

from topologies import make_large
from topologies.loader import load_scenario, summary
from topologies.schema import json_schema
from topologies.workload import tuple_count

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVERY_SHIPPED = sorted(glob.glob(os.path.join(ROOT, "topologies", "*.yaml")))
# metro.yaml, the scale scenario (2,000,000 tuples), has its own tests (test_metro.py); the others stay small
SHIPPED = [p for p in EVERY_SHIPPED if os.path.basename(p) != "metro.yaml"]
FIGURE1 = os.path.join(ROOT, "topologies", "figure1.yaml")
VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def read_yaml(path: str):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_all_twelve_scenarios_are_shipped():
    assert [os.path.basename(p) for p in EVERY_SHIPPED] == [
        "air-quality.yaml",
        "att.yaml",
        "congested.yaml",
        "failover.yaml",
        "figure1.yaml",
        "geant.yaml",
        "germany50.yaml",
        "large.yaml",
        "metro.yaml",
        "photon-survey.yaml",
        "sensor-grid.yaml",
        "sky-survey.yaml",
    ]


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json_schema())


@pytest.mark.parametrize("path", SHIPPED, ids=os.path.basename)
def test_shipped_scenario_loads_validates_and_stays_small(path):
    scenario = load_scenario(path)
    VALIDATOR.validate(read_yaml(path))
    if os.path.basename(path) == "sensor-grid.yaml":  # its weather station's replay ends at 50 s, as its header says
        assert [w.split(": ")[1] for w in scenario.warnings] == ["streams[16].replay"]
    else:
        assert scenario.warnings == ()
    tuples = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    assert 0 < tuples <= 100_000
    with open(path, encoding="utf-8") as handle:
        assert handle.readline().startswith("# ")  # documented in its header
    assert summary(scenario).startswith(f"{scenario.name}: {len(scenario.super_peers)} super-peers, ")
    assert f"{tuples} tuples" in summary(scenario)


def test_sizes_promised_by_the_headers():
    sizes = {}
    for path in SHIPPED:
        s = load_scenario(path)
        sizes[s.name] = (len(s.super_peers), len(s.streams), len(s.subscriptions))
    assert sizes["att"] == (594, 12, 300)
    assert sizes["failover"] == (10, 3, 32)
    assert sizes["figure1"] == (8, 1, 3)
    assert sizes["geant"] == (37, 8, 250)
    assert sizes["germany50"] == (50, 10, 300)
    assert sizes["large"] == (100, 4, 500)
    assert sizes["sensor-grid"] == (25, 17, 43)
    assert sizes["sky-survey"] == (33, 1, 30)
    assert sizes["photon-survey"] == (33, 3, 32)
    assert sizes["air-quality"] == (37, 10, 40)
    photons = load_scenario(os.path.join(ROOT, "topologies", "photon-survey.yaml"))
    counts = [tuple_count(s, photons.duration) for s in photons.streams]
    assert counts == [24_210, 18_031, 15_170]
    sensor = load_scenario(os.path.join(ROOT, "topologies", "sensor-grid.yaml"))
    assert tuple_count(sensor.stream("weather"), sensor.duration) == 1000  # the file ends before duration


REAL_NETWORKS = ["att.yaml", "geant.yaml", "germany50.yaml"]


@pytest.mark.parametrize("name", REAL_NETWORKS)
def test_a_real_network_scenario_is_a_short_file_of_an_import_and_generators(name):
    """What a user writes to study a real network: the import and a generator per list, about 20 lines
    besides the header comment; narrow telemetry (streams of 5 attributes, subscriptions selecting 1-3)."""
    path = os.path.join(ROOT, "topologies", name)
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) <= 22
    doc = read_yaml(path)
    assert set(doc["network"]["import"]) == {"topohub"}
    assert all(list(entry) == ["generate"] for key in ("thin_peers", "streams", "subscriptions") for entry in doc[key])
    scenario = load_scenario(path)
    assert {len(s.attributes) for s in scenario.streams} == {5}
    assert {len(s.query.select) for s in scenario.subscriptions} <= {1, 2, 3}
    assert len(scenario.positions) == len(scenario.super_peers)


def test_large_yaml_is_what_make_large_writes():
    with open(os.path.join(ROOT, "topologies", "large.yaml"), encoding="utf-8") as handle:
        assert handle.read() == make_large.render()


def routes_by_brute_force(scenario, source: str) -> dict[str, tuple[str, ...]]:
    """The route rule of docs/ACCOUNTING.md by enumeration: least latency, then fewer hops, then smallest node list."""
    graph = nx.Graph()
    for link in scenario.links:
        graph.add_edge(link.a, link.b, latency=link.latency)
    routes = {source: (source,)}
    for target in scenario.super_peers:
        if target == source:
            continue
        paths = nx.all_simple_paths(graph, source, target)

        def key(path):
            latency = sum((graph.edges[a, b]["latency"] for a, b in itertools.pairwise(path)), Fraction(0))
            return (latency, len(path), path)

        routes[target] = tuple(min(paths, key=key))
    return routes


def test_figure1_tells_the_story_of_seed_004():
    scenario = load_scenario(FIGURE1)
    assert scenario.super_peers == tuple(f"SP{i}" for i in range(8))
    assert [p.id for p in scenario.thin_peers] == ["P0", "P1", "P2", "P3"]
    (stream,) = scenario.streams
    assert (stream.id, stream.source, scenario.home("P0")) == ("stream0", "P0", "SP4")
    routes = routes_by_brute_force(scenario, "SP4")
    q1, q2, q3 = scenario.subscriptions
    assert routes[scenario.home(q1.peer)] == ("SP4", "SP5", "SP1")
    assert routes[scenario.home(q2.peer)] == ("SP4", "SP5", "SP6")
    assert routes[scenario.home(q3.peer)] == ("SP4", "SP5", "SP1", "SP3")
    assert q1.at < q2.at and q1.at < q3.at
    # Q2 is contained in Q1 (shared at SP5); Q3 needs more than Q1 (widening at SP4)
    assert q2.query.where.implies(q1.query.where) and set(q2.query.select) <= set(q1.query.select)
    assert not q3.query.where.implies(q1.query.where)
    assert any(s.until is not None and s.until < scenario.duration for s in scenario.subscriptions)


# enumerating simple paths is exponential: only the sparse backbones (a grid has millions of paths)
@pytest.mark.parametrize("name", ["figure1", "sky-survey"])
def test_routes_of_sparse_shipped_scenarios_agree_with_the_network_layer(name):
    from network.routing import Network

    scenario = load_scenario(os.path.join(ROOT, "topologies", f"{name}.yaml"))
    network = Network.of(scenario)
    for stream in scenario.streams:
        source = scenario.home(stream.source)
        assert network.routes_from(source) == routes_by_brute_force(scenario, source)


INVALID = [
    ("network", lambda d: d["network"].update(mtu=1500)),
    ("rate", lambda d: d["streams"][0].update(rate="fast")),
    ("bandwidth", lambda d: d["network"]["defaults"].update(bandwidth="100Mbps")),
    ("distribution", lambda d: d["streams"][0]["schema"]["a"].update(distribution={"poisson": [1]})),
    ("normal sigma", lambda d: d["streams"][0]["schema"]["c"].update(distribution={"normal": [1, 0]})),
    ("generate and links", lambda d: d["network"].update(generate={"model": "grid", "rows": 2, "cols": 2})),
    ("generate params", lambda d: d.update(network={"generate": {"model": "grid", "rows": 2}})),
    ("generate seed", lambda d: d.update(network={"generate": {"model": "grid", "rows": 2, "cols": 2, "seed": 1}})),
    ("missing name", lambda d: d.pop("name")),
    ("subscription key", lambda d: d["subscriptions"][0].update(when=3)),
]


@pytest.mark.parametrize(("what", "mutate"), INVALID, ids=[w for w, _ in INVALID])
def test_schema_rejects_invalid_documents(what, mutate):
    doc = read_yaml(FIGURE1)
    assert VALIDATOR.is_valid(doc)
    broken = copy.deepcopy(doc)
    mutate(broken)
    assert not VALIDATOR.is_valid(broken), what


def test_schema_accepts_a_generated_network():
    doc = read_yaml(FIGURE1)
    doc["network"] = {"generate": {"model": "transit-stub", "transit": 2, "stubs_per_transit": 1, "nodes_per_stub": 3}}
    assert VALIDATOR.is_valid(doc)


def test_the_photon_recordings_are_what_make_photons_writes(tmp_path):
    from scripts.make_photons import main

    main(tmp_path)
    for name in ("north", "south", "equator"):
        shipped = os.path.join(ROOT, "topologies", "data", f"photons-{name}.csv")
        with open(shipped, encoding="utf-8") as a, open(tmp_path / f"photons-{name}.csv", encoding="utf-8") as b:
            assert a.read() == b.read()


@pytest.mark.parametrize("name", ["photon-survey.yaml", "air-quality.yaml"])
def test_the_aggregate_scenarios_mix_every_kind_of_aggregate_subscription(name):
    """What their headers promise: aggregates of every function, grouped and not, tumbling, sliding and
    count windows, HAVING, and plain selections beside them."""
    from matcher import AggregateQuery, Predicate

    scenario = load_scenario(os.path.join(ROOT, "topologies", name))
    aggregates = [s.query for s in scenario.subscriptions if isinstance(s.query, AggregateQuery)]
    assert 0 < len(aggregates) < len(scenario.subscriptions)
    functions = {a.function for q in aggregates for a in q.aggregates}
    assert {"COUNT", "AVG", "MAX", "STDDEV", "MEDIAN"} <= functions
    assert any(q.groups for q in aggregates) and any(not q.groups for q in aggregates)
    assert any(q.window.tuples for q in aggregates) and any(not q.window.tumbling for q in aggregates)
    assert any(q.having != Predicate.TRUE for q in aggregates)
