"""``bench optimum``: the least bytes of any plan, against a tree backbone's single routes (where it must be
``ideal``'s), against every strategy on random scenarios (never above any of them), and the command."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from hypothesis import HealthCheck, given, settings

from bench.optimum import least_tree_bytes, needs_per_tuple, optimum_bytes
from network.routing import Network
from peers.local import run_local
from sharing import STRATEGIES, make_plan
from tests.sharing.sharing_checker import scenarios
from topologies.expected import expected_results


def test_one_tuple_on_a_diamond_takes_the_cheapest_tree():
    # source A; B needs x and y, C needs x: A-B-C carries x twice over one link less than A-B, A-C
    directions = (("A", "B"), ("B", "A"), ("B", "C"), ("C", "B"), ("A", "C"), ("C", "A"))
    assert least_tree_bytes(directions, "A", {("B", "x"), ("B", "y"), ("C", "x")}, 16) == 16 * 2 + 8 * 3
    assert least_tree_bytes(directions, "A", {("A", "x")}, 16) == 0  # at the source: no link
    # D only behind C: the path's every link carries the header and each needed value
    chain = (("A", "B"), ("B", "A"), ("B", "C"), ("C", "B"), ("C", "D"), ("D", "C"))
    assert least_tree_bytes(chain, "A", {("D", "x"), ("D", "y"), ("B", "y")}, 10) == 3 * (10 + 16)


def _run(scenario):
    network = Network.of(scenario)
    expected = expected_results(scenario)
    least = sum(optimum_bytes(scenario, expected, network).values())
    measured = {}
    for name in STRATEGIES:
        run = run_local(scenario, make_plan(scenario, name, network))
        if not any(run.link_dropped.values()):
            measured[name] = sum(run.link_bytes.values())
    return least, measured


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_strategy_carries_less_than_the_optimum(scenario):
    least, measured = _run(scenario)
    assert all(bytes_ >= least for bytes_ in measured.values()), (least, measured)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_on_a_tree_backbone_the_optimum_is_ideal(scenario):
    # keep a spanning tree of the backbone: one route between any two super-peers
    kept, seen = [], {scenario.super_peers[0]}
    for link in sorted(scenario.links, key=lambda link: (link.a, link.b)):
        if (link.a in seen) != (link.b in seen):
            kept.append(link)
            seen |= {link.a, link.b}
    while len(seen) < len(scenario.super_peers):
        for link in scenario.links:
            if (link.a in seen) != (link.b in seen):
                kept.append(link)
                seen |= {link.a, link.b}
    tree = dataclasses.replace(scenario, links=tuple(kept))
    least, measured = _run(tree)
    assert measured["ideal"] == least


def test_needs_group_tuples_by_what_their_receivers_select():
    from topologies.loader import load_scenario

    scenario = load_scenario("topologies/figure1.yaml")
    groups = needs_per_tuple(scenario, expected_results(scenario))["stream0"]
    wanted = set().union(*(set(e.tolist()) for e in expected_results(scenario).indices.values()))
    assert sum(groups.values()) == len(wanted)  # each wanted tuple once, none nobody wants


def test_the_command_prints_every_strategy_against_the_optimum():
    done = subprocess.run(
        [sys.executable, "run.py", "bench", "optimum", "topologies/figure1.yaml", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["optimum_bytes"] == result["ideal_bytes"] == result["strategies"]["sharing-em"]["backbone_bytes"]
    assert set(result["strategies"]) == set(STRATEGIES)
    refused = subprocess.run(
        [sys.executable, "run.py", "bench", "optimum", "topologies/failover.yaml"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert refused.returncode == 2 and "static scenarios only" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
