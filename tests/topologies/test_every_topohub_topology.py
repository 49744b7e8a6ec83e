"""Every topology the topohub package ships (707 in topohub 1.5.1: SNDlib, the Topology Zoo, CAIDA, synthetic
backbones, Gabriel graphs) loads as a scenario's backbone, plans and runs a small workload with exact
delivery, and its explicit file (run.py expand) loads to the same scenario.  Slow suite: 4-8 minutes on two cores,
by their load."""

from __future__ import annotations

import pytest
import yaml

import streamglobe as sg
from topologies.expand import render
from topologies.importing import topohub_keys
from topologies.loader import read_scenario, scenario_from_document

pytestmark = pytest.mark.slow

KEYS = topohub_keys()
SCHEMA = {"x": {"distribution": {"uniform": [0, 100]}}, "y": {"type": "int", "distribution": {"uniform": [0, 9]}}}


def test_topohub_ships_the_topologies_the_docs_count():
    groups = {key.split("/")[0] for key in KEYS}
    assert len(KEYS) == 707 and groups == {"backbone", "caida", "gabriel", "sndlib", "topozoo"}


@pytest.mark.parametrize("key", KEYS)
def test_every_topology_loads_plans_and_runs(tmp_path, key):
    doc = {
        "name": "every",
        "seed": 1,
        "duration": 2,
        "network": {"import": {"topohub": key}, "defaults": {"bandwidth": "1Gbit"}},
        "thin_peers": [{"generate": {"count": 6}}],
        "streams": [{"generate": {"count": 2, "rate": 20, "sources": "spread", "schema": SCHEMA}}],
        "subscriptions": [{"generate": {"count": 6, "select": [1, 2], "overlap": 0.5}}],
    }
    path = tmp_path / "every.yaml"
    path.write_text(yaml.safe_dump(doc))
    scenario, expanded, notes = read_scenario(str(path))
    for strategy in ("query-shipping", "ideal", "sharing-em"):
        result = sg.check(scenario, sg.simulate(scenario, sg.plan(scenario, strategy)))
        assert result.exact, strategy
    explicit = yaml.safe_load(render(expanded, str(path), notes=notes))
    assert scenario_from_document(explicit) == scenario
