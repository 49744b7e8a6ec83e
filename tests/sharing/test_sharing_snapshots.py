"""Epoch snapshots: the planner's incremental snapshots equal full ones object for object, and make_plan
reports its progress once per epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from sharing_checker import scenarios

from network.routing import Network
from sharing import make_plan
from sharing.planner import Planner
from topologies.loader import load_scenario

SHIPPED = Path(__file__).resolve().parents[2] / "topologies"
SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")


def _kept(plan) -> list[tuple[list[int], list[int]]]:
    """Per epoch, the positions of the flows and deliveries that are the very objects of the epoch before."""
    kept, before = [], ((), ())
    for epoch in plan.epochs:
        now = (epoch.flows, epoch.deliveries)
        ids = [{id(x) for x in items} for items in before]
        kept.append(
            tuple([k for k, x in enumerate(items) if id(x) in seen] for items, seen in zip(now, ids, strict=True))
        )
        before = now
    return kept


def _full_snapshots(scenario, strategy, network):
    """The plan with every stream snapshot afresh in every epoch, as if every stream had changed."""
    incremental = Planner.epoch

    def full(self, start, end):
        self._changed.update(dict.fromkeys(self._frozen))
        return incremental(self, start, end)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Planner, "epoch", full)
        return make_plan(scenario, strategy, network)


def _same_plans(scenario, strategy):
    network = Network.of(scenario)
    plan = make_plan(scenario, strategy, network)
    reference = _full_snapshots(scenario, strategy, network)
    assert plan == reference
    assert _kept(plan) == _kept(reference)


@pytest.mark.parametrize("strategy", SHARING)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_incremental_snapshots_equal_full_ones(strategy, scenario):
    _same_plans(scenario, strategy)


@pytest.mark.parametrize("strategy", SHARING)
@pytest.mark.parametrize("name", ["sensor-grid", "sky-survey"])
def test_incremental_snapshots_equal_full_ones_on_shipped_scenarios(name, strategy):
    _same_plans(load_scenario(SHIPPED / f"{name}.yaml"), strategy)


@pytest.mark.parametrize("strategy", ["multicast", "query-shipping", "sharing-em"])
def test_progress_is_reported_once_per_epoch(strategy):
    calls = []
    plan = make_plan(
        load_scenario(SHIPPED / "figure1.yaml"), strategy, progress=lambda done, n: calls.append((done, n))
    )
    n = len(plan.epochs)
    assert calls == [(k, n) for k in range(1, n + 1)]
