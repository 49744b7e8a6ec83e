"""The Spark engine at size: a generated scenario of 172 super-peers and 300 subscriptions with churn
(topologies/scale.py), hundreds of epochs, gives the local engine's deliveries and traffic exactly.

The strategies differ in the shape of their operators: raw reads only (data-shipping), trimmed per-link
flows (ideal) and shared flow trees split and narrowed as subscriptions come and go (sharing-hcr).
"""

from __future__ import annotations

from functools import cache

import pytest

from network.routing import Network
from peers.local import run_local
from peers.spark import run_spark
from sharing import make_plan
from tests.spark.conftest import LOCAL_MASTER
from tests.spark.test_spark_engine import assert_same_runs
from topologies.expected import compare, expected_results
from topologies.scale import scale_scenario

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = 31
SIZES = {
    "transit": 4,
    "stubs_per_transit": 6,
    "nodes_per_stub": 7,
    "streams": 3,
    "subscriber_peers": 250,
    "subscriptions": 300,
    "duration": 20,
    "rate": 100,
}
STRATEGIES = ("data-shipping", "ideal", "sharing-hcr")


@cache
def _scenario_and_network():
    scenario = scale_scenario(SEED, **SIZES)
    return scenario, Network.of(scenario)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_spark_equals_the_local_engine_at_size(spark, strategy):
    scenario, network = _scenario_and_network()
    plan = make_plan(scenario, strategy, network)
    local = run_local(scenario, plan)
    expected = expected_results(scenario)
    assert sum(len(want) for want in expected.indices.values()) > 0  # not vacuous
    for sub_id, want in expected.indices.items():  # the reference is itself exact
        assert compare(local.delivered[sub_id], local.delivered_attrs[sub_id], want, expected.attrs[sub_id]) == (0, 0)
    assert_same_runs(scenario, local, run_spark(scenario, plan, master=LOCAL_MASTER))
