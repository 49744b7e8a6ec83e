"""The ``events`` list of a scenario: written failures and recoveries, checked in time order with one-line
errors; the seeded mtbf/mttr generator (deterministic, exponential, giving way to written outages);
``--set`` on its keys; ``expand`` writing the events out; the JSON Schema; and the shipped failover.yaml."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml

from network.routing import Network
from tests.topologies.test_loader_errors import BASE, error_of, write
from topologies.errors import ScenarioError
from topologies.expand import expand
from topologies.loader import load_scenario, summary
from topologies.model import NetworkEvent
from topologies.outages import Reachability, network_states
from topologies.overrides import parse_assignment
from topologies.schema import json_schema

ROOT = Path(__file__).resolve().parents[2]
FAILOVER = ROOT / "topologies" / "failover.yaml"
VALIDATOR = jsonschema.Draft202012Validator(json_schema())

# BASE's backbone is the chain SP0 - SP1 - SP2, its run 10 s long
LINK = {"at": 1, "fail": "link", "link": ["SP0", "SP1"]}
NODE = {"at": 2, "fail": "super_peer", "id": "SP1"}


def with_events(*events, **changes) -> dict:
    return {**copy.deepcopy(BASE), **changes, "events": [copy.deepcopy(e) for e in events]}


def generator(**params) -> dict:
    return {"generate": params}


def fail(element: str, target, at: float) -> dict:
    return {"at": at, "fail": element, ("link" if element == "link" else "id"): target}


def recover(element: str, target, at: float) -> dict:
    return {"at": at, "recover": element, ("link" if element == "link" else "id"): target}


ERRORS = [
    # shapes, keys and the element
    ([], "events: expected a list, got 5 (int)"),
    (["x"], "events[0]: expected a mapping, got 'x' (str)"),
    (
        [{**LINK, "colour": 1}],
        "events[0]: unknown key 'colour' (expected one of: at, fail, id, link, recover)",
    ),
    ([{"fail": "link", "link": ["SP0", "SP1"]}], "events[0]: missing required key 'at'"),
    ([{"at": 1, "link": ["SP0", "SP1"]}], "events[0]: missing required key 'fail' (or 'recover')"),
    (
        [{**LINK, "recover": "link"}],
        "events[0]: expected exactly one of 'fail' and 'recover', got both",
    ),
    (
        [{"at": 1, "fail": "router", "id": "SP1"}],
        "events[0].fail: unknown element 'router' (expected one of: link, super_peer)",
    ),
    (
        [{"at": 1, "recover": ["SP0"], "id": "SP1"}],
        "events[0].recover: unknown element ['SP0'] (expected one of: link, super_peer)",
    ),
    (
        [{"at": 1, "fail": "link", "id": "SP1"}],
        "events[0]: unknown key 'id' (expected one of: at, fail, link)",
    ),
    ([{"at": 1, "fail": "super_peer"}], "events[0]: missing required key 'id'"),
    # the target
    (
        [{**LINK, "link": "SP0-SP1"}],
        "events[0].link: expected [a, b], the two super-peers of a backbone link, got 'SP0-SP1'",
    ),
    ([{**LINK, "link": ["SP0", "SP9"]}], "events[0].link[1]: unknown super-peer 'SP9'"),
    ([{**LINK, "link": ["SP0", "SP2"]}], "events[0].link: no link SP0-SP2 in the backbone"),
    ([{**LINK, "link": ["SP1", "SP1"]}], "events[0].link: no link SP1-SP1 in the backbone"),
    ([{**NODE, "id": "SP9"}], "events[0].id: unknown super-peer 'SP9'"),
    ([{**NODE, "id": "P0"}], "events[0].id: unknown super-peer 'P0'"),
    # the time
    ([{**LINK, "at": "5s"}], "events[0].at: expected a number, got '5s' (str)"),
    ([{**LINK, "at": -1}], "events[0].at: must lie in [0, duration) = [0, 10), got -1"),
    ([{**LINK, "at": 10}], "events[0].at: must lie in [0, duration) = [0, 10), got 10"),
    ([{**LINK, "at": float("nan")}], "events[0].at: expected a finite number, got nan"),
    # the sequence, walked in time order (at one instant in the order written)
    (
        [NODE, {**NODE, "at": 3}],
        "events[1].fail: super-peer SP1 is already down at t=3 (failed by events[0] at t=2)",
    ),
    (
        [{**NODE, "at": 5}, {**NODE, "at": 2.5}],
        "events[0].fail: super-peer SP1 is already down at t=5 (failed by events[1] at t=2.5)",
    ),
    ([recover("link", ["SP0", "SP1"], 1)], "events[0].recover: link SP0-SP1 is not down at t=1"),
    ([recover("link", ["SP0", "SP1"], 1.2345678)], "events[0].recover: link SP0-SP1 is not down at t=1.2345678"),
    (
        [LINK, recover("link", ["SP1", "SP0"], 4), recover("link", ["SP0", "SP1"], 3.5)],
        "events[1].recover: link SP1-SP0 is not down at t=4",
    ),
    (
        [recover("super_peer", "SP1", 2), NODE],
        "events[0].recover: super-peer SP1 is not down at t=2",
    ),
    (
        [NODE, recover("super_peer", "SP1", 2)],
        "events[1].recover: super-peer SP1 fails at the same instant (by events[0], t=2): an outage must last",
    ),
    # the generator's parameters
    (
        [generator()],
        "events[0].generate: expected at least one element class (links, super_peers, transit_links, gateway_links,"
        " stub_links, transit_super_peers, stub_super_peers), got {}",
    ),
    (
        [generator(links={"mtbf": 5, "mttr": 1}, mtbf=3)],
        "events[0].generate: unknown key 'mtbf' (expected one of: gateway_links, links, seed, stub_links,"
        " stub_super_peers, super_peers, transit_links, transit_super_peers)",
    ),
    ([LINK, generator(links={"mtbf": 5})], "events[1].generate.links: missing required key 'mttr'"),
    (
        [generator(super_peers={"mtbf": 5, "mttr": 1, "tier": 1})],
        "events[0].generate.super_peers: unknown key 'tier' (expected one of: mtbf, mttr)",
    ),
    (
        [generator(transit_links={"mtbf": 5, "mttr": 1})],
        "events[0].generate.transit_links: tiers need a transit-stub backbone (network.generate)",
    ),
    ([generator(links={"mtbf": 0, "mttr": 1})], "events[0].generate.links.mtbf: must be positive, got 0"),
    ([generator(links={"mtbf": 5, "mttr": "1s"})], "events[0].generate.links.mttr: expected a number, got '1s'"),
    ([generator(seed=-1, links={"mtbf": 5, "mttr": 1})], "events[0].generate.seed: must be >= 0, got -1"),
    ([generator(links=[5, 1])], "events[0].generate.links: expected a mapping, got [5, 1] (list)"),
    (
        [generator(links={"mtbf": 1e-6, "mttr": 1e-6})],
        "events[0].generate.links: about 20,000,000 events over 10 s, over the cap of 1,000,000",
    ),
]


@pytest.mark.parametrize(("events", "message"), ERRORS, ids=[message[:70] for _, message in ERRORS])
def test_an_invalid_event_is_one_line_naming_file_key_and_value(tmp_path, events, message):
    doc = with_events(*events) if events else {**copy.deepcopy(BASE), "events": 5}
    path = write(tmp_path, doc)
    got = error_of(path)
    assert got.startswith(f"{path}: {message}"), got


def test_events_come_last_among_the_checks(tmp_path):
    doc = with_events({**LINK, "at": -1})
    doc["subscriptions"][0]["peer"] = "nobody"
    assert "subscriptions[0].peer" in error_of(write(tmp_path, doc))


def test_written_events_load_sorted_stably_with_links_named_either_way(tmp_path):
    events = [
        recover("link", ["SP1", "SP0"], 6),
        fail("super_peer", "SP2", 3),
        LINK,  # at 1
        fail("link", ["SP2", "SP1"], 3),
        recover("super_peer", "SP2", 6.25),
    ]
    scenario = load_scenario(write(tmp_path, with_events(*events)))
    assert scenario.events == (
        NetworkEvent(1.0, "fail", "link", ("SP0", "SP1")),
        NetworkEvent(3.0, "fail", "super_peer", ("SP2",)),  # at one instant: in the order written
        NetworkEvent(3.0, "fail", "link", ("SP2", "SP1")),
        NetworkEvent(6.0, "recover", "link", ("SP1", "SP0")),
        NetworkEvent(6.25, "recover", "super_peer", ("SP2",)),
    )
    assert all(isinstance(e.at, float) for e in scenario.events)
    assert [e.key for e in scenario.events] == [("SP0", "SP1"), ("SP2",), ("SP1", "SP2"), ("SP0", "SP1"), ("SP2",)]
    assert [e.text() for e in scenario.events][:2] == ["fail link SP0-SP1", "fail super-peer SP2"]
    assert summary(scenario).endswith(", 5 network events")
    assert scenario.generated == ()
    states = network_states(scenario)
    assert [(s.start, s.end, sorted(s.failed_links), sorted(s.failed_nodes)) for s in states] == [
        (0.0, 1.0, [], []),
        (1.0, 3.0, [("SP0", "SP1")], []),
        (3.0, 6.0, [("SP0", "SP1"), ("SP1", "SP2")], ["SP2"]),
        (6.0, 6.25, [("SP1", "SP2")], ["SP2"]),
        (6.25, 10.0, [("SP1", "SP2")], []),
    ]


def test_same_instant_events_are_walked_in_the_order_written(tmp_path):
    # recovered at 3 and failed again at 3, in that order: valid (and the element stays down)
    doc = with_events(NODE, recover("super_peer", "SP1", 3), fail("super_peer", "SP1", 3))
    assert [e.action for e in load_scenario(write(tmp_path, doc)).events] == ["fail", "recover", "fail"]
    doc = with_events(NODE, fail("super_peer", "SP1", 3), recover("super_peer", "SP1", 3))
    assert "events[1].fail: super-peer SP1 is already down at t=3" in error_of(write(tmp_path, doc))


def test_no_events_key_is_a_static_network_and_an_empty_list_too(tmp_path):
    assert load_scenario(write(tmp_path, BASE)).events == ()
    scenario = load_scenario(write(tmp_path, with_events()))
    assert scenario.events == () and "network event" not in summary(scenario)


# --- the generator ------------------------------------------------------------------------------------------

GRID = {"generate": {"model": "grid", "rows": 3, "cols": 3}}  # 9 super-peers, 12 links
CHURN = generator(links={"mtbf": 20, "mttr": 2}, super_peers={"mtbf": 40, "mttr": 3})


def churn_doc(*events, duration=100, **params) -> dict:
    doc = with_events(*events, duration=duration)
    doc["network"] = copy.deepcopy(GRID)
    if params:
        doc["events"].append(generator(**params))
    return doc


def walk_is_valid(events: tuple[NetworkEvent, ...]) -> bool:
    """Each element alternates fail, recover, fail ... in time order, never twice at one instant."""
    down: dict = {}
    last: dict = {}
    for event in events:
        if last.get(event.key) == event.at or (event.action == "fail") == down.get(event.key, False):
            return False
        down[event.key] = event.action == "fail"
        last[event.key] = event.at
    return True


def test_the_generator_is_seeded_deterministic_and_in_whole_milliseconds(tmp_path):
    path = write(tmp_path, churn_doc(**CHURN["generate"], seed=4))
    first, again = load_scenario(path), load_scenario(path)
    assert first.events == again.events and len(first.events) > 50
    assert list(first.events) == sorted(first.events, key=lambda e: e.at)
    assert walk_is_valid(first.events)
    assert all(e.at == round(e.at * 1000) / 1000 and 0 <= e.at < 100 for e in first.events)
    assert {e.element for e in first.events} == {"link", "super_peer"}
    other = load_scenario(write(tmp_path, churn_doc(**CHURN["generate"], seed=5), "other.yaml"))
    assert other.events != first.events
    # the generator's own seed wins over the scenario's; without one, the scenario's seed is used
    assert load_scenario(path, [("seed", 99)]).events == first.events
    unseeded = write(tmp_path, churn_doc(**CHURN["generate"]), "unseeded.yaml")
    assert load_scenario(unseeded, [("seed", 4)]).events == first.events
    assert load_scenario(unseeded, [("seed", 7)]).events != first.events
    # each class draws from its own stream: dropping the super-peers leaves the links' events as they were
    links_only = load_scenario(write(tmp_path, churn_doc(links=CHURN["generate"]["links"], seed=4), "links.yaml"))
    assert links_only.events == tuple(e for e in first.events if e.element == "link")
    assert first.generated == (
        f"events[0].generate: {len(first.events)} events ({sum(e.action == 'fail' for e in first.events)} failures,"
        f" {sum(e.action == 'recover' for e in first.events)} recoveries) beside 0 written, over 12 links"
        " (mtbf 20 s, mttr 2 s) and 9 super-peers (mtbf 40 s, mttr 3 s)",
    )


def test_generated_up_and_down_times_are_exponential_with_the_given_means(tmp_path):
    mtbf, mttr, duration = 30.0, 4.0, 20_000
    doc = churn_doc(duration=duration, seed=11, links={"mtbf": mtbf, "mttr": mttr})
    events = load_scenario(write(tmp_path, doc)).events
    ups, downs = [], []
    for key in {e.key for e in events}:
        times = [e.at for e in events if e.key == key]
        recovered = [0.0, *times[1::2]]
        ups += [fail - since for fail, since in zip(times[0::2], recovered, strict=False)]
        downs += [rec - fail for fail, rec in zip(times[0::2], times[1::2], strict=False)]
    ups, downs = np.array(ups), np.array(downs)
    assert len(ups) > 7000  # 12 links over 20,000 s: about 7,000 outages
    assert abs(ups.mean() / mtbf - 1) < 0.04  # the standard error is 1.2 %
    assert abs(downs.mean() / mttr - 1) < 0.04
    assert abs((ups > mtbf).mean() - math.exp(-1)) < 0.03  # exponential, not merely the right mean
    assert abs((downs > 2 * mttr).mean() - math.exp(-2)) < 0.02
    assert downs.min() >= 0.001


def test_generated_outages_give_way_to_written_ones(tmp_path):
    written = [fail("super_peer", "SP4", 20), recover("super_peer", "SP4", 60), fail("super_peer", "SP0", 90)]
    params = {"seed": 2, "super_peers": {"mtbf": 5, "mttr": 5}}
    alone = load_scenario(write(tmp_path, churn_doc(**params), "alone.yaml"))
    doc = churn_doc(**params)
    doc["events"] += written  # the generator stays at position 0: the same draws
    both = load_scenario(write(tmp_path, doc, "both.yaml"))
    assert walk_is_valid(both.events)

    def outages(events, key):
        times = [e.at for e in events if e.key == key]
        return list(zip(times[0::2], [*times[1::2], math.inf], strict=False))

    for key, (start, end) in [(("SP4",), (20, 60)), (("SP0",), (90, math.inf))]:
        kept = [o for o in outages(alone.events, key) if o[0] > end or o[1] < start]
        assert outages(both.events, key) == sorted([*kept, (start, end)])
        assert len(kept) < len(outages(alone.events, key))
    others = [e for e in alone.events if e.key not in (("SP4",), ("SP0",))]
    assert [e for e in both.events if e.key not in (("SP4",), ("SP0",))] == others
    assert both.generated[0].startswith("events[0].generate: ") and "beside 3 written" in both.generated[0]
    assert " drawn outages left out, meeting one already listed" in both.generated[0]
    # a second generator gives way to the first one's outages too
    doc["events"].append(generator(seed=3, super_peers={"mtbf": 5, "mttr": 5}))
    assert walk_is_valid(load_scenario(write(tmp_path, doc, "two.yaml")).events)


def test_on_a_transit_stub_backbone_a_tier_takes_its_elements_from_the_class_of_all(tmp_path):
    tiered = {"links": {"mtbf": 30, "mttr": 3}, "transit_links": {"mtbf": 20, "mttr": 1}}
    doc = churn_doc(seed=8, **tiered, stub_super_peers={"mtbf": 10, "mttr": 5})
    doc["network"] = {"generate": {"model": "transit-stub", "transit": 3, "stubs_per_transit": 1, "nodes_per_stub": 3}}
    doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP5"}]
    scenario = load_scenario(write(tmp_path, doc))
    transit = set(scenario.super_peers[:3])
    tiers = {"transit": [], "gateway": [], "stub": []}
    for link in scenario.links:
        tiers[("stub", "gateway", "transit")[(link.a in transit) + (link.b in transit)]].append((link.a, link.b))
    (told,) = scenario.generated
    assert told.endswith(
        f" beside 0 written, over {len(tiers['gateway']) + len(tiers['stub'])} links (mtbf 30 s, mttr 3 s) and"
        f" {len(tiers['transit'])} transit links (mtbf 20 s, mttr 1 s) and 9 stub super-peers (mtbf 10 s, mttr 5 s)"
    )
    assert {e.target for e in scenario.events if e.element == "link"} & set(tiers["transit"])
    # the transit links draw from their own stream: without their failures the others' events stay the same
    doc["events"][0]["generate"]["transit_links"]["mtbf"] = 1e9
    quiet = load_scenario(write(tmp_path, doc, "quiet.yaml")).events
    assert quiet == tuple(e for e in scenario.events if e.target not in tiers["transit"])
    assert {e.target[0] for e in scenario.events if e.element == "super_peer"} == set(scenario.super_peers) - transit
    assert walk_is_valid(scenario.events)


def test_a_recovery_due_after_the_end_is_not_emitted(tmp_path):
    doc = churn_doc(duration=10, seed=1, super_peers={"mtbf": 1, "mttr": 1000})
    events = load_scenario(write(tmp_path, doc)).events
    assert sorted(e.key for e in events) == [(f"SP{i}",) for i in range(9)]
    assert all(e.action == "fail" for e in events)


def test_overrides_reach_the_generator_and_written_events(tmp_path):
    path = write(tmp_path, churn_doc(LINK | {"link": ["SP0", "SP1"]}, seed=4, links={"mtbf": 20, "mttr": 2}))
    base = load_scenario(path)
    fewer = load_scenario(path, [parse_assignment("events[1].generate.links.mtbf=200")])
    assert len(fewer.events) < len(base.events)
    moved = load_scenario(path, [parse_assignment("events[0].at=7.5")])
    assert NetworkEvent(7.5, "fail", "link", ("SP0", "SP1")) in moved.events
    with pytest.raises(ScenarioError, match=r"events\[1\].generate.links.mttr: must be positive, got 0"):
        load_scenario(path, [parse_assignment("events[1].generate.links.mttr=0")])


# --- expand, validate, the schema ---------------------------------------------------------------------------


def test_expand_writes_the_events_out_and_the_file_loads_to_an_equal_scenario(tmp_path):
    doc = churn_doc(NODE | {"id": "SP4"}, recover("super_peer", "SP4", 50.5), seed=6, **CHURN["generate"])
    source = write(tmp_path, doc)
    scenario, text = expand(source, [("duration", 80)], into=str(tmp_path))
    (tmp_path / "explicit.yaml").write_text(text)
    again = load_scenario(str(tmp_path / "explicit.yaml"))
    assert again == scenario and again.events == scenario.events and scenario.duration == 80
    expanded = yaml.safe_load(text)
    assert all("generate" not in entry for entry in expanded["events"])
    assert {"at": 2, "fail": "super_peer", "id": "SP4"} in expanded["events"]
    assert {"at": 50.5, "recover": "super_peer", "id": "SP4"} in expanded["events"]
    VALIDATOR.validate(expanded)
    assert again.generated == ()


def test_the_schema_knows_events_and_their_generator():
    doc = with_events(LINK, NODE, recover("link", ["SP1", "SP0"], 3), CHURN)
    VALIDATOR.validate(doc)
    VALIDATOR.validate(with_events(generator(seed=1, stub_links={"mtbf": 9, "mttr": 1})))
    for bad in (
        {"at": 1, "fail": "link", "id": "SP1"},
        {"at": 1, "fail": "router", "id": "SP1"},
        {"at": -1, "fail": "super_peer", "id": "SP1"},
        {"at": 1, "fail": "link", "link": ["SP0"]},
        {"at": 1, "fail": "link", "recover": "link", "link": ["SP0", "SP1"]},
        generator(),
        generator(links={"mtbf": 5}),
        generator(links={"mtbf": 5, "mttr": 0}),
        generator(core_links={"mtbf": 5, "mttr": 1}),
    ):
        assert not VALIDATOR.is_valid(with_events(bad)), bad


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_validate_counts_the_events_and_exits_2_on_a_bad_one(tmp_path):
    path = write(tmp_path, churn_doc(LINK, seed=4, **CHURN["generate"]))
    result = cli("validate", path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    head, told = result.stdout.splitlines()
    scenario = load_scenario(path)
    assert head.endswith(f", {len(scenario.events)} network events")
    assert told.startswith(f"  events[1].generate: {len(scenario.events) - 1} events (") and "beside 1 written" in told
    bad = write(tmp_path, with_events(LINK, {**LINK, "at": 4}), "bad.yaml")
    result = cli("validate", bad, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: {bad}: events[1].fail: link SP0-SP1 is already down at t=4 (failed by events[0] at t=1)\n"
    )
    result = cli("expand", path, "--out", "explicit.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f", {len(scenario.events)} network events")
    assert load_scenario(str(tmp_path / "explicit.yaml")) == scenario


# --- the shipped scenario -------------------------------------------------------------------------------------


def test_failover_yaml_tells_its_story():
    scenario = load_scenario(FAILOVER)
    assert [e.text() for e in scenario.events] == [
        "fail super-peer T1",
        "recover super-peer T1",
        "fail link T2-S2a",
        "recover link S2a-T2",
    ]
    assert [e.at for e in scenario.events] == [20, 38, 45, 52]
    assert 8 <= len(scenario.super_peers) <= 12 and len(scenario.streams) == 3
    assert 20 <= len(scenario.subscriptions) <= 40
    network = Network.of(scenario)
    during = network.surviving([], ["T1"])
    for source in ("S0", "S0b"):  # photons and readings toward T2's side: through T1, then round by T3
        assert network.routes_from(source)["S2b"][1:4] == ("T0", "T1", "T2")
        assert during.routes_from(source)["S2b"][1:4] == ("T0", "T3", "T2")
    assert network.surviving([("S2a", "T2")], []).routes_from("S0")["S2a"][-3:] == ("T2", "S2b", "S2a")
    # before the failure every stream has subscribers whose flows cross T1, registered by then
    crossing = {
        s.stream
        for s in scenario.subscriptions
        if "T1" in network.routes_from(scenario.home(scenario.stream(s.stream).source))[scenario.home(s.peer)]
        and s.at < 20
    }
    assert crossing == {"photons", "readings", "alerts"}
    # S1 hangs on T1 alone: unreachable from every source while T1 is down, and only then
    reach = Reachability(scenario)
    assert reach.unreachable_spans("S0", "S1") == [(20.0, 38.0)]
    assert reach.unreachable_spans("S3", "S1") == [(20.0, 38.0)]
    assert reach.unreachable_spans("S0", "S2a") == []
    # overlapping interests: some subscription's condition implies another's of the same stream
    subs = scenario.subscriptions
    assert any(a.stream == b.stream and a is not b and a.query.where.implies(b.query.where) for a in subs for b in subs)
    assert any(s.at > 20 for s in subs)
