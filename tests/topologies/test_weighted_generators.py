"""Workloads from a real network's data: thin-peers attached, stream sources and subscriptions drawn in
proportion to SNDlib demands or node weights, checked against the demands read straight from topohub;
the streams generator; a count shorthand over several generators."""

from __future__ import annotations

import collections
import json
import math

import pytest
import topohub
import yaml

from topologies.errors import ScenarioError
from topologies.expand import expand
from topologies.loader import load_scenario
from topologies.overrides import parse_assignment

SCHEMA = {"x": {"distribution": {"uniform": [0, 100]}}, "y": {"distribution": {"uniform": [0, 100]}}}


def doc(thin_peers, streams, subscriptions, network=None) -> dict:
    return {
        "name": "w",
        "seed": 5,
        "duration": 10,
        "network": network or {"import": {"topohub": "sndlib/germany50"}},
        "thin_peers": thin_peers,
        "streams": streams,
        "subscriptions": subscriptions,
    }


def write(tmp_path, content, name="s.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return str(path)


def germany_demand() -> tuple[dict[str, float], dict[frozenset, float]]:
    """Each city's demand sent plus received, and the demand between two cities either way, from topohub."""
    data = topohub.get("sndlib/germany50")
    name = {node["id"]: node["name"] for node in data["nodes"]}
    node: dict[str, float] = collections.Counter()
    pair: dict[frozenset, float] = collections.Counter()
    for a, row in data["graph"]["demands"].items():
        for b, amount in row.items():
            node[name[a]] += amount
            node[name[b]] += amount
            pair[frozenset((name[a], name[b]))] += amount
    return node, pair


def test_thin_peers_attach_in_proportion_to_the_demand(tmp_path):
    scenario = load_scenario(write(tmp_path, doc([{"generate": {"count": 20_000, "attach": "demand"}}], [], [])))
    weight, _ = germany_demand()
    total = sum(weight.values())
    found = collections.Counter(p.attach for p in scenario.thin_peers)
    for city, w in weight.items():
        share = w / total
        sigma = math.sqrt(20_000 * share * (1 - share))
        assert abs(found[city] - 20_000 * share) <= 5 * sigma + 1, city
    assert set(found) <= {c for c, w in weight.items() if w > 0}


def test_stream_generator_writes_streams_of_one_schema(tmp_path):
    streams = [{"generate": {"count": 6, "rate": [50, 150], "sources": "spread", "schema": SCHEMA, "prefix": "t"}}]
    path = write(tmp_path, doc([{"generate": {"count": 4, "attach": "spread"}}], streams, []))
    scenario = load_scenario(path)
    assert [s.id for s in scenario.streams] == [f"t{k}" for k in range(6)]
    assert [s.source for s in scenario.streams] == ["P0", "P1", "P2", "P3", "P0", "P1"]
    assert all(50 <= s.rate <= 150 and s.attribute_names == ("x", "y") for s in scenario.streams)
    assert len({s.rate for s in scenario.streams}) == 6
    assert scenario.generated[-1] == (
        "streams[0].generate: 6 streams t0..t5 at rates uniform in [50, 150] tuples/s round robin over the thin-peers"
    )
    again, text = expand(path)
    (tmp_path / "x.yaml").write_text(text)
    assert load_scenario(str(tmp_path / "x.yaml")) == again == scenario


def test_sources_and_subscriptions_by_demand(tmp_path):
    streams = [{"generate": {"count": 40, "rate": 10, "sources": "demand", "schema": SCHEMA}}]
    subscriptions = [{"generate": {"count": 3000, "popularity": "demand", "select": [1, 2]}}]
    thin_peers = [{"generate": {"count": 200, "attach": "spread"}}]
    scenario = load_scenario(write(tmp_path, doc(thin_peers, streams, subscriptions)))
    weight, pair = germany_demand()
    assert all(weight[scenario.home(s.source)] > 0 for s in scenario.streams)
    sources = {scenario.home(s.source) for s in scenario.streams}
    found = collections.Counter()
    for sub in scenario.subscriptions:
        ends = frozenset((scenario.home(scenario.stream(sub.stream).source), scenario.home(sub.peer)))
        assert pair[ends] > 0, ends  # never a pair without demand
        found[ends] += 1
    # the pair drawn most often carries more demand per source and subscriber than a typical drawn pair
    top, _ = found.most_common(1)[0]
    assert pair[top] >= sorted(pair[e] for e in found)[len(found) // 2]
    assert len(sources) > 5


def test_zipf_and_weight_popularity(tmp_path):
    streams = [{"generate": {"count": 5, "rate": 10, "sources": "spread", "schema": SCHEMA}}]
    thin_peers = [{"generate": {"count": 50, "attach": "spread"}}]
    zipf = [{"generate": {"count": 2000, "popularity": {"zipf": 1.0}}}]
    scenario = load_scenario(write(tmp_path, doc(thin_peers, streams, zipf), "z.yaml"))
    counts = collections.Counter(s.stream for s in scenario.subscriptions)
    harmonic = sum(1 / k for k in range(1, 6))
    for k in range(5):
        share = 1 / (k + 1) / harmonic
        assert abs(counts[f"s{k}"] - 2000 * share) <= 5 * math.sqrt(2000 * share * (1 - share))
    by_weight = [{"generate": {"count": 500, "popularity": {"weight": "demand"}}}]
    scenario = load_scenario(write(tmp_path, doc(thin_peers, streams, by_weight), "w.yaml"))
    weight, _ = germany_demand()
    heavy = max(scenario.streams, key=lambda s: weight[scenario.home(s.source)])
    light = min(scenario.streams, key=lambda s: weight[scenario.home(s.source)])
    counts = collections.Counter(s.stream for s in scenario.subscriptions)
    assert counts[heavy.id] > counts[light.id]


def test_without_popularity_the_draws_are_those_of_before(tmp_path):
    """A file without `popularity` keeps its workload: the stream and subscriber draws are unchanged."""
    streams = [{"generate": {"count": 3, "rate": 10, "sources": "spread", "schema": SCHEMA}}]
    thin_peers = [{"generate": {"count": 9, "attach": "spread"}}]
    base = load_scenario(write(tmp_path, doc(thin_peers, streams, [{"generate": {"count": 50}}]), "a.yaml"))
    uniform = [{"generate": {"count": 50, "popularity": "uniform"}}]
    same = load_scenario(write(tmp_path, doc(thin_peers, streams, uniform), "b.yaml"))
    assert same.subscriptions == base.subscriptions


def test_a_count_shorthand_shares_its_value_among_several_generators(tmp_path):
    streams = [{"generate": {"count": 2, "rate": 10, "sources": "spread", "schema": SCHEMA}}]
    subscriptions = [{"generate": {"count": 10, "prefix": "A"}}, {"generate": {"count": 30, "prefix": "B"}}]
    path = write(tmp_path, doc([{"generate": {"count": 5, "attach": "spread"}}], streams, subscriptions))
    for total, shares in [(100, (25, 75)), (7, (2, 5)), (2, (1, 1)), (40, (10, 30))]:
        scenario = load_scenario(path, [parse_assignment(f"subscriptions={total}")])
        counted = collections.Counter(s.id[0] for s in scenario.subscriptions)
        assert (counted["A"], counted["B"]) == shares
    with pytest.raises(ScenarioError, match=r"shared among the file's 2 generators in subscriptions: expected a whole"):
        load_scenario(path, [parse_assignment("subscriptions=1")])
    scenario = load_scenario(path, [parse_assignment("streams=4")])
    assert len(scenario.streams) == 4


@pytest.mark.parametrize(
    ("thin_peers", "streams", "subscriptions", "network", "message"),
    [
        (
            [{"generate": {"count": 3, "attach": "demand"}}],
            [],
            [],
            {"super_peers": ["A"]},
            "thin_peers[0].generate.attach: unknown node weight 'demand' (the imported network's: none: the network"
            " is not imported",
        ),
        (
            [{"generate": {"count": 3, "attach": {"weight": "Population"}}}],
            [],
            [],
            None,
            "thin_peers[0].generate.attach: unknown node weight 'Population' (the imported network's: demand)",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 10, "schema": SCHEMA}}],
            [{"generate": {"count": 3, "popularity": "demand"}}],
            {"import": {"topohub": "topozoo/Geant2012"}},
            "subscriptions[0].generate.popularity: 'demand' needs an imported network with a demand matrix",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 0, "schema": SCHEMA}}],
            [],
            None,
            "streams[0].generate.rate: must be positive, got 0",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 1, "schema": SCHEMA, "prefix": "9s"}}],
            [],
            None,
            "streams[0].generate.prefix: bad id",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 1, "schema": SCHEMA, "sources": "busiest"}}],
            [],
            None,
            "streams[0].generate.sources: unknown rule 'busiest'",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 1, "schema": SCHEMA}}],
            [{"generate": {"count": 3, "popularity": "hot"}}],
            None,
            "subscriptions[0].generate.popularity: expected uniform, demand, {zipf: exponent} or {weight: NAME}",
        ),
        (
            [{"generate": {"count": 3}}],
            [{"generate": {"count": 2, "rate": 1, "schema": SCHEMA}}],
            [{"generate": {"count": 3, "popularity": {"zipf": 1e308}}}],
            None,
            "subscriptions[0].generate.popularity.zipf: needs 0 <= exponent <= 10, got 1e+308",
        ),
        (
            [{"generate": {"count": 3}}],
            [
                {"generate": {"count": 60_000, "rate": 1e-6, "schema": SCHEMA, "prefix": "a"}},
                {"generate": {"count": 60_000, "rate": 1e-6, "schema": SCHEMA}},
            ],
            [],
            None,
            "streams[1].generate.count: 60,000 streams after the 60,000 made before it exceed the cap of 100,000"
            " generated streams (set STREAMGLOBE_MAX_GENERATED to change it)",
        ),
    ],
)
def test_mistakes(tmp_path, thin_peers, streams, subscriptions, network, message):
    path = write(tmp_path, doc(thin_peers, streams, subscriptions, network))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: {message}"), str(info.value)


def test_demand_popularity_weighs_at_most_the_node_pair_cap(tmp_path, monkeypatch):
    content = doc(
        [{"generate": {"count": 100, "attach": "spread"}}],
        [{"generate": {"count": 20, "rate": 1, "schema": SCHEMA, "sources": "spread"}}],
        [{"generate": {"count": 10, "popularity": "demand"}}],
    )
    monkeypatch.setenv("STREAMGLOBE_MAX_NODE_PAIRS", "999")  # 20 streams x 50 super-peers with subscribers
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, content))
    assert (
        "subscriptions[0].generate.popularity: 'demand' weighs 20 streams x 50 super-peers, 1,000 pairs, over the"
        in (str(info.value))
    )
    monkeypatch.setenv("STREAMGLOBE_MAX_NODE_PAIRS", "1000")
    assert len(load_scenario(write(tmp_path, content)).subscriptions) == 10


def test_when_every_thin_peer_publishes_no_stream_goes_back_to_its_source(tmp_path):
    """Under demand popularity too: a subscriber is drawn among the others at the chosen super-peer."""
    content = doc(
        [{"generate": {"count": 60, "attach": {"weight": "demand"}}}],
        [{"generate": {"count": 60, "rate": 1, "schema": SCHEMA, "sources": "spread"}}],
        [{"generate": {"count": 3000, "popularity": "demand"}}],
    )
    scenario = load_scenario(write(tmp_path, content))
    assert {s.source for s in scenario.streams} == {p.id for p in scenario.thin_peers}  # every one publishes
    source = {s.id: s.source for s in scenario.streams}
    assert all(sub.peer != source[sub.stream] for sub in scenario.subscriptions)
    alone = collections.Counter(p.attach for p in scenario.thin_peers)
    homes = {scenario.home(sub.peer) for sub in scenario.subscriptions}
    assert any(alone[h] > 1 for h in homes)  # super-peers with a source and others among them were drawn


def test_weights_near_the_largest_float_are_drawn_in_proportion(tmp_path):
    """Node weights and demands of 1e308 add up to infinity: the draws still follow them."""
    graph = {
        "directed": False, "multigraph": False,
        "graph": {"demands": {"A": {"B": 1e308, "C": 1e308}, "C": {"A": 1e308}}},
        "nodes": [{"id": "A", "w": 1e308}, {"id": "B", "w": 1e308}, {"id": "C", "w": 0.0}],
        "edges": [{"source": "A", "target": "B", "latency": 0.001}, {"source": "B", "target": "C", "latency": 0.001}],
    }  # fmt: skip
    (tmp_path / "g.json").write_text(json.dumps(graph))
    content = doc(
        [{"generate": {"count": 40, "attach": {"weight": "w"}}}],
        [{"generate": {"count": 4, "rate": 1, "schema": SCHEMA, "sources": "demand"}}],
        [{"generate": {"count": 50, "popularity": "demand"}}],
        {"import": {"file": "g.json"}},
    )
    scenario = load_scenario(write(tmp_path, content))
    assert {p.attach for p in scenario.thin_peers} == {"A", "B"}  # C weighs 0
    assert len(scenario.subscriptions) == 50
