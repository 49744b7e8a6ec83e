"""The designed scenarios (tests/validation/scenarios.py) written to files and loaded once per session."""

from __future__ import annotations

from functools import cache

import pytest

from network.routing import Network
from sharing import make_plan
from tests.validation.harness import Packets, packets
from tests.validation.scenarios import SCENARIOS
from topologies.loader import load_scenario


@pytest.fixture(scope="session")
def designed(tmp_path_factory):
    """``designed(name, strategy)``: the scenario, its plan and the plan's packets."""
    folder = tmp_path_factory.mktemp("validation")

    @cache
    def get(name: str, strategy: str):
        path = folder / f"{name}.yaml"
        path.write_text(SCENARIOS[name])
        scenario = load_scenario(str(path))
        plan = make_plan(scenario, strategy, Network.of(scenario))
        setup: Packets = packets(scenario, plan)
        return scenario, plan, setup

    return get
