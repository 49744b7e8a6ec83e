"""A real network's geography reaches the report: the topology plot draws the super-peers at their
longitudes and latitudes, and report.html maps the backbone."""

from __future__ import annotations

import dataclasses
import re

import networkx as nx
import pytest
import yaml

from reports.plots import topology_layout
from reports.runner import RunOptions, run_scenario
from topologies.loader import load_scenario

DOC = {
    "name": "germany",
    "seed": 2,
    "duration": 4,
    "network": {"import": {"topohub": "sndlib/germany50"}, "defaults": {"bandwidth": "1Gbit"}},
    "thin_peers": [{"id": "P0", "attach": "Aachen"}, {"id": "P1", "attach": "Muenchen"}],
    "streams": [{"id": "s", "source": "P0", "rate": 20, "schema": {"x": {"distribution": {"uniform": [0, 1]}}}}],
    "subscriptions": [{"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT x FROM s WHERE x > 0.5"}],
}


@pytest.fixture(scope="module")
def germany(tmp_path_factory):
    where = tmp_path_factory.mktemp("germany")
    (where / "g.yaml").write_text(yaml.safe_dump(DOC))
    scenario = load_scenario(str(where / "g.yaml"))
    run_scenario(scenario, RunOptions(strategies=("query-shipping",), out=str(where / "out"), jobs=1))
    return scenario, where / "out"


def test_the_topology_plot_draws_the_super_peers_where_they_are(germany):
    scenario, _ = germany
    graph = nx.Graph([(link.a, link.b) for link in scenario.links])
    layout, geographic = topology_layout(scenario, graph)
    assert geographic and layout == scenario.position
    some = scenario.positions[:3]
    partly = dataclasses.replace(scenario, positions=some)
    layout, geographic = topology_layout(partly, graph)
    assert not geographic
    assert all(tuple(layout[sp]) == pos for sp, pos in some)  # held in place, the others laid out around them


def test_report_html_maps_the_backbone_at_its_longitudes_and_latitudes(germany):
    scenario, out = germany
    page = (out / "report.html").read_text()
    svg = page[page.index('<svg id="map"') : page.index("</svg>")]
    circles = re.findall(r'<circle cx="([0-9.]+)" cy="([0-9.]+)"[^>]*><title>([^ <]+) ', svg)
    assert [name for _, _, name in circles] == list(scenario.super_peers)
    at = {name: (float(x), float(y)) for x, y, name in circles}
    by_lon = sorted(scenario.super_peers, key=lambda sp: scenario.position[sp][0])
    by_lat = sorted(scenario.super_peers, key=lambda sp: -scenario.position[sp][1])
    assert [at[sp][0] for sp in by_lon] == sorted(at[sp][0] for sp in by_lon)  # west to east, left to right
    assert [at[sp][1] for sp in by_lat] == sorted(at[sp][1] for sp in by_lat)  # north to south, top to bottom
    assert svg.count("<line ") == len(scenario.links)
    assert "Aachen - Koeln: 0.308 ms, 62 km," in svg
