"""Every strategy's plan satisfies the plan invariants, on random small scenarios and the shipped ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from sharing_checker import plan_problems, scenarios

from network.routing import Network
from sharing import STRATEGIES, make_plan
from sharing.cost import CostModel, epoch_cost
from topologies.errors import InputError
from topologies.loader import load_scenario

SHIPPED = Path(__file__).resolve().parents[2] / "topologies"
SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_random_plans_are_sound(strategy, scenario):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    assert plan_problems(plan, scenario, network) == []


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_sharing_never_costs_more_than_query_shipping(strategy, scenario):
    network = Network.of(scenario)
    model = CostModel(scenario)
    shared = make_plan(scenario, strategy, network)
    shipped = make_plan(scenario, "query-shipping", network)
    # over the run: the planner keeps the consolidating plan only within this bound, else it plans
    # byte-capped, which stays within query-shipping in every epoch
    mine = sum(epoch_cost(model, e.flows) * (e.end - e.start) for e in shared.epochs)
    theirs = sum(epoch_cost(model, e.flows) * (e.end - e.start) for e in shipped.epochs)
    assert mine <= theirs * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", ["figure1", "sky-survey"])
def test_shipped_scenarios_plan_soundly(name, strategy):
    scenario = load_scenario(SHIPPED / f"{name}.yaml")
    network = Network.of(scenario)
    assert plan_problems(make_plan(scenario, strategy, network), scenario, network) == []


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_large_scenario_plans_soundly(strategy):
    scenario = load_scenario(SHIPPED / "large.yaml")
    network = Network.of(scenario)
    assert plan_problems(make_plan(scenario, strategy, network), scenario, network) == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plans_are_deterministic(strategy):
    scenario = load_scenario(SHIPPED / "sky-survey.yaml")
    assert make_plan(scenario, strategy).to_json() == make_plan(scenario, strategy).to_json()


def test_unknown_strategy_names_the_valid_ones():
    scenario = load_scenario(SHIPPED / "figure1.yaml")
    with pytest.raises(InputError, match=r"'sharing-xx'.*data-shipping.*sharing-em"):
        make_plan(scenario, "sharing-xx")
