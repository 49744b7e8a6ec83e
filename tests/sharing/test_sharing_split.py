"""Widening a flow part-way along its path splits it: only the part upstream of the tap widens."""

from __future__ import annotations

from pathlib import Path

from sharing_checker import plan_problems

from matcher.parser import parse_condition
from network.routing import Network
from peers.local import run_local
from sharing import make_plan
from topologies.loader import load_scenario

LINE = """
name: line
seed: 3
duration: 20
network:
  defaults: {bandwidth: 100Mbit, latency: 1ms}
  super_peers: [SP0, SP1, SP2, SP3]
  links: [[SP0, SP1], [SP1, SP2], [SP2, SP3]]
thin_peers:
  - {id: src, attach: SP0}
  - {id: far, attach: SP3}
  - {id: near, attach: SP1}
streams:
  - id: s
    source: src
    rate: 50
    schema:
      a: {type: float, distribution: {uniform: [0, 100]}}
      b: {type: float, distribution: {uniform: [0, 100]}}
subscriptions:
  - {id: Far, peer: far, at: 0, query: "SELECT a, b FROM s WHERE a < 40"}
  - {id: Near, peer: near, at: 5, until: 15, query: "SELECT a, b FROM s WHERE a BETWEEN 30 AND 60"}
"""


def _scenario(tmp_path: Path):
    path = tmp_path / "line.yaml"
    path.write_text(LINE)
    return load_scenario(path)


def test_widening_at_a_middle_super_peer_splits_the_flow(tmp_path):
    scenario = _scenario(tmp_path)
    network = Network.of(scenario)
    plan = make_plan(scenario, "sharing-em", network)
    assert plan_problems(plan, scenario, network) == []
    near = next(d for d in plan.decisions if d.subscription == "Near")
    assert (near.reused, near.widened) == ("F1", ("F1",))
    assert "F2 carries F1's former stream on from SP1" in near.summary
    upstream, downstream = plan.epoch_at(10).flows
    assert (upstream.id, upstream.path) == ("F1", ("SP0", "SP1"))
    assert upstream.predicate.implies(parse_condition("a <= 60")) and parse_condition("a <= 60").implies(
        upstream.predicate
    )
    # the part beyond the tap keeps Far's stream: Near's extra tuples do not travel to SP3
    assert (downstream.id, downstream.parent, downstream.path) == ("F2", "F1", ("SP1", "SP2", "SP3"))
    assert downstream.predicate == parse_condition("a < 40")
    deliveries = {d.subscription: d.flow for d in plan.epoch_at(10).deliveries}
    assert deliveries == {"Far": "F2", "Near": "F1"}


def test_split_plan_carries_what_the_ideal_carries(tmp_path):
    # one flow per link, each holding exactly the union its downstream subscriptions need
    scenario = _scenario(tmp_path)
    shared = run_local(scenario, make_plan(scenario, "sharing-em"))
    ideal = run_local(scenario, make_plan(scenario, "ideal"))
    assert shared.link_tuples == ideal.link_tuples
    assert shared.link_bytes == ideal.link_bytes
    assert shared.delivered.keys() == ideal.delivered.keys()
    for sub, indices in ideal.delivered.items():
        assert shared.delivered[sub].tolist() == indices.tolist()
