"""The scale generator (topologies/scale.py): deterministic, honours its sizes, validated like a user file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from topologies.loader import load_scenario
from topologies.scale import render, scale_scenario, super_peer_count

SMALL = {"transit": 2, "stubs_per_transit": 2, "nodes_per_stub": 2, "subscriptions": 20, "subscriber_peers": 8}
REPO = Path(__file__).resolve().parents[2]


def test_the_same_arguments_give_the_same_text_and_scenario():
    assert render(3, **SMALL) == render(3, **SMALL)
    assert scale_scenario(3, **SMALL) == scale_scenario(3, **SMALL)


def test_another_seed_gives_another_scenario():
    assert render(4, **SMALL) != render(3, **SMALL)
    assert scale_scenario(4, **SMALL) != scale_scenario(3, **SMALL)


@pytest.mark.parametrize(
    ("transit", "stubs_per_transit", "nodes_per_stub", "streams", "subscriber_peers", "subscriptions"),
    [(2, 2, 2, 3, 8, 20), (3, 1, 4, 1, 5, 7), (1, 3, 2, 2, 1, 0)],
)
def test_every_size_is_honoured(transit, stubs_per_transit, nodes_per_stub, streams, subscriber_peers, subscriptions):
    scenario = scale_scenario(
        7,
        transit=transit,
        stubs_per_transit=stubs_per_transit,
        nodes_per_stub=nodes_per_stub,
        streams=streams,
        subscriber_peers=subscriber_peers,
        subscriptions=subscriptions,
    )
    n = transit * (1 + stubs_per_transit * nodes_per_stub)
    assert super_peer_count(transit, stubs_per_transit, nodes_per_stub) == n
    assert scenario.super_peers == tuple(f"SP{i}" for i in range(n))
    assert [s.id for s in scenario.streams] == [f"feed{s}" for s in range(streams)]
    sources = [f"src{s}" for s in range(streams)]
    assert [p.id for p in scenario.thin_peers] == sources + [f"U{p}" for p in range(subscriber_peers)]
    assert [s.id for s in scenario.subscriptions] == [f"Q{i}" for i in range(subscriptions)]
    assert {s.peer for s in scenario.subscriptions} <= {f"U{p}" for p in range(subscriber_peers)}


def test_churn_sets_some_ends_and_none_without_it():
    churned = scale_scenario(3, **SMALL, churn=0.5).subscriptions
    assert 0 < sum(s.until is not None for s in churned) < len(churned)
    assert all(s.until > s.at for s in churned if s.until is not None)
    assert all(s.until is None for s in scale_scenario(3, **SMALL, churn=0).subscriptions)
    assert all(s.until is not None for s in scale_scenario(3, **SMALL, churn=1).subscriptions)


@pytest.mark.parametrize(
    "bad",
    [
        {"streams": 0},
        {"subscriber_peers": 0},
        {"subscriptions": -1},
        {"hot_spots": 0},
        {"rate": 0},
        {"duration": -5},
        {"churn": 1.5},
        {"cut": -0.1},
        {"disjunction": 2},
        {"transit": 0},
        {"stubs_per_transit": -1},
        {"nodes_per_stub": 0},
    ],
)
def test_a_size_out_of_range_raises_value_error_naming_it(bad):
    (name,) = bad
    with pytest.raises(ValueError, match=name):
        render(1, **{**SMALL, **bad})


def test_the_command_line_writes_the_same_scenario(tmp_path):
    out = tmp_path / "scale.yaml"
    sizes = ["--transit", "2", "--stubs-per-transit", "2", "--nodes-per-stub", "2"]
    sizes += ["--subscriptions", "20", "--subscriber-peers", "8", "--churn", "0.5"]
    done = subprocess.run(
        [sys.executable, "-m", "topologies.scale", "--seed", "3", *sizes, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"wrote {out}\n"
    assert out.read_text(encoding="utf-8") == render(3, **SMALL, churn=0.5)
    assert load_scenario(str(out)) == scale_scenario(3, **SMALL, churn=0.5)
