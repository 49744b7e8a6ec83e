"""Workload generators: seeded thin-peers and subscriptions that load like written-out ones, their one-line
errors, ``--set`` changes, and ``expand`` writing the file that loads to the same scenario."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml

from topologies.errors import ScenarioError
from topologies.expand import expand
from topologies.loader import load_scenario
from topologies.overrides import parse_assignment
from topologies.schema import json_schema

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "topologies" / "studies" / "large-shape.yaml"

BASE = {
    "name": "gen",
    "seed": 3,
    "duration": 50,
    "network": {"generate": {"model": "transit-stub", "transit": 3, "stubs_per_transit": 2, "nodes_per_stub": 4}},
    "thin_peers": [{"id": "src", "attach": "SP5"}, {"generate": {"count": 40, "attach": "stub"}}],
    "streams": [
        {
            "id": "s",
            "source": "src",
            "rate": 10,
            "schema": {
                "x": {"distribution": {"uniform": [0, 100]}},
                "y": {"distribution": {"uniform": [0, 100]}},
                "z": {"distribution": {"normal": [50, 10]}},
                "k": {"type": "int", "distribution": {"choice": [0, 1, 2, 3]}},
            },
        }
    ],
    "subscriptions": [{"generate": {"count": 60}}],
}


def write(tmp_path: Path, doc: dict, name: str = "gen.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def with_subscriptions(**generate) -> dict:
    return {**BASE, "subscriptions": [{"generate": {"count": 60, **generate}}]}


def test_generated_entries_load_like_written_ones_and_depend_on_the_seed_only(tmp_path):
    path = write(tmp_path, BASE)
    first, again = load_scenario(path), load_scenario(path)
    assert first == again and len(first.thin_peers) == 41 and len(first.subscriptions) == 60
    assert [p.id for p in first.thin_peers[1:4]] == ["P0", "P1", "P2"]
    assert all(int(p.attach[2:]) >= 3 for p in first.thin_peers[1:])  # stub nodes: after the 3 transit nodes
    assert all(s.peer != "src" for s in first.subscriptions)  # by default sources do not subscribe
    assert [s.id for s in first.subscriptions] == [f"Q{k}" for k in range(60)]
    ats = [s.at for s in first.subscriptions]
    assert ats == sorted(ats) and ats[0] >= 0 and ats[-1] < 40  # Poisson over the first 80 % of the run
    assert first.generated == (
        "thin_peers[1].generate: 40 thin-peers P0..P39 attached to random stub-domain super-peers",
        "subscriptions[0].generate: 60 subscriptions Q0..Q59 on 1 stream from 40 peers, hot-spots interests,"
        " overlap 0, Poisson arrivals over [0, 40) s",
    )
    other = load_scenario(path, [("seed", 4)])
    assert [s.query.text for s in other.subscriptions] != [s.query.text for s in first.subscriptions]
    assert [p.attach for p in other.thin_peers] != [p.attach for p in first.thin_peers]


@pytest.mark.parametrize(
    ("attach", "check"),
    [
        (["SP1", "SP2"], lambda homes: set(homes) == {"SP1", "SP2"}),
        ("spread", lambda homes: homes[:27] == [f"SP{k}" for k in range(27)] and homes[27] == "SP0"),
        ("random", lambda homes: len(set(homes)) > 5),
        ("degree", lambda homes: len(set(homes)) > 3),
    ],
)
def test_attach_rules(tmp_path, attach, check):
    doc = {**BASE, "thin_peers": [BASE["thin_peers"][0], {"generate": {"count": 40, "attach": attach}}]}
    homes = [p.attach for p in load_scenario(write(tmp_path, doc)).thin_peers[1:]]
    assert check(homes), homes


def test_overlap_one_makes_each_later_subscription_refine_an_earlier_one(tmp_path):
    scenario = load_scenario(write(tmp_path, with_subscriptions(overlap=1, predicate={"cut": 0.5})))
    wheres = [s.query.where for s in scenario.subscriptions]
    assert all(any(later.implies(earlier) for earlier in wheres[:k]) for k, later in enumerate(wheres) if k)
    independent = load_scenario(write(tmp_path, with_subscriptions(overlap=0), "free.yaml"))
    wheres = [s.query.where for s in independent.subscriptions]
    assert sum(any(w.implies(e) for e in wheres[:k]) for k, w in enumerate(wheres) if k) < len(wheres) // 2


def test_predicate_shape_select_width_and_interest_models(tmp_path):
    generate = {"predicate": {"attributes": ["x"], "width": 0.1, "cut": 1, "disjunction": 1}, "select": 2}
    scenario = load_scenario(write(tmp_path, with_subscriptions(**generate)))
    for sub in scenario.subscriptions:
        assert len(sub.query.select) == 2
        assert sub.query.where.boxes
        for box in sub.query.where.boxes:
            assert box.get("x").length <= 10 + 1e-9
        assert " OR " in sub.query.text and any(cut in sub.query.text for cut in ("y >", "z >", "k IN"))
    for interests in ({"model": "uniform"}, {"model": "zipf", "regions": 3, "exponent": 2}):
        loaded = load_scenario(write(tmp_path, with_subscriptions(interests=interests), "i.yaml"))
        assert len(loaded.subscriptions) == 60
    zipf = load_scenario(write(tmp_path, with_subscriptions(interests={"model": "zipf", "regions": 3}), "z.yaml"))
    centres = {tuple(round((b.get(d).lo + b.get(d).hi) / 2) for d in ("x", "y")) for s in zipf.subscriptions
               for b in s.query.where.boxes}  # fmt: skip
    assert len(centres) < 30  # boxes of varying size around three regions' centres


def test_arrivals_in_waves_and_holding_times(tmp_path):
    generate = {
        "arrivals": {"process": "waves", "waves": 2, "over": [0, 40], "spread": 1},
        "holding": {"leave": 0.5, "uniform": [5, 8]},
    }
    scenario = load_scenario(write(tmp_path, with_subscriptions(**generate)))
    ats = np.array([s.at for s in scenario.subscriptions])
    assert np.all((np.abs(ats - 10) < 5) | (np.abs(ats - 30) < 5))
    leaving = [s for s in scenario.subscriptions if s.until is not None]
    assert 15 < len(leaving) < 45 and all(5 - 1e-3 <= s.until - s.at <= 8 + 1e-3 for s in leaving)
    assert scenario.warnings == ()
    late = load_scenario(write(tmp_path, with_subscriptions(holding={"fixed": 45}), "late.yaml"))
    assert all(s.until is None or s.until < 50 for s in late.subscriptions)  # none past the end: it stays


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": 0}, "subscriptions[0].generate.count: must be >= 1, got 0"),
        ({"overlap": 1.5}, "subscriptions[0].generate.overlap: must lie in [0, 1], got 1.5"),
        ({"interests": {"model": "gauss"}}, "subscriptions[0].generate.interests.model: unknown model 'gauss'"),
        ({"interests": {"model": "zipf", "spots": 3}}, "subscriptions[0].generate.interests: unknown key 'spots'"),
        ({"peers": ["nobody"]}, "subscriptions[0].generate.peers[0]: unknown thin-peer 'nobody'"),
        ({"arrivals": {"process": "poisson", "over": [0, 80]}}, "subscriptions[0].generate.arrivals.over: needs 0"),
        ({"holding": {"exponential": 5, "fixed": 3}}, "subscriptions[0].generate.holding: expected exactly one of"),
        ({"predicate": {"width": 2}}, "subscriptions[0].generate.predicate.width: fractions of a range"),
        ({"select": [3, 1]}, "subscriptions[0].generate.select: needs lo <= hi, got [3, 1]"),
        ({"colour": 1}, "subscriptions[0].generate: unknown key 'colour'"),
        # accepted once and quietly made useless or warned on stderr: refused now
        (
            {"interests": {"model": "hot-spots", "spread": 1e308}},
            "subscriptions[0].generate.interests.spread: a fraction of the range: needs 0 <= spread <= 1, got 1e+308",
        ),
        (
            {"interests": {"model": "zipf", "exponent": 1e308}},
            "subscriptions[0].generate.interests.exponent: needs 0 <= exponent <= 10, got 1e+308",
        ),
        (
            {"arrivals": {"process": "waves", "spread": 60}},
            "subscriptions[0].generate.arrivals.spread: seconds: needs 0 <= spread <= 50 (the run's duration)",
        ),
        (
            {"predicate": {"attributes": ["x", "x"]}},
            "subscriptions[0].generate.predicate.attributes: 'x' twice (a box has one side per attribute)",
        ),
        ({"select": 100}, "subscriptions[0].generate.select: the widest stream it subscribes to has 4 attributes"),
    ],
)
def test_a_bad_parameter_is_one_line_naming_its_key(tmp_path, change, message):
    path = write(tmp_path, with_subscriptions(**change))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: {message}"), str(info.value)
    assert "\n" not in str(info.value)


def test_a_source_subscribes_to_its_own_stream_only_when_listed(tmp_path):
    """When every thin-peer publishes, a stream's subscribers are the others; a source alone is an error."""
    doc = {**BASE, "thin_peers": [{"id": "src", "attach": "SP5"}, {"id": "P0", "attach": "SP6"}]}
    doc["streams"] = [BASE["streams"][0], {**BASE["streams"][0], "id": "t", "source": "P0"}]
    scenario = load_scenario(write(tmp_path, doc))
    assert {s.peer for s in scenario.subscriptions if s.stream == "s"} == {"P0"}
    assert {s.peer for s in scenario.subscriptions if s.stream == "t"} == {"src"}
    listed = {**doc, "subscriptions": [{"generate": {"count": 60, "peers": ["src"], "streams": ["s"]}}]}
    assert {s.peer for s in load_scenario(write(tmp_path, listed, "listed.yaml")).subscriptions} == {"src"}
    alone = {**BASE, "thin_peers": [{"id": "src", "attach": "SP5"}]}
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, alone, "alone.yaml"))
    assert str(info.value).endswith(
        "subscriptions[0].generate: no thin-peer but src, the source of stream s, to subscribe (list it under"
        " peers to subscribe a source to its own stream)"
    )


def test_a_generated_entry_is_checked_like_a_written_one(tmp_path):
    doc = {**BASE, "thin_peers": [*BASE["thin_peers"], {"generate": {"count": 2, "prefix": "P"}}]}
    with pytest.raises(ScenarioError, match=r"thin_peers\[2\].generate\[0\].id: duplicate thin-peer 'P0'"):
        load_scenario(write(tmp_path, doc))
    doc = {**BASE, "thin_peers": [BASE["thin_peers"][0], {"generate": {"count": 2, "attach": "stub"}}]}
    doc["network"] = {"super_peers": ["A", "B"], "links": [["A", "B"]]}
    doc["thin_peers"][0] = {"id": "src", "attach": "A"}
    with pytest.raises(ScenarioError, match=r"thin_peers\[1\].generate.attach: 'stub' needs a transit-stub"):
        load_scenario(write(tmp_path, doc))


def test_overrides_change_values_before_they_are_checked(tmp_path):
    path = write(tmp_path, BASE)
    scenario = load_scenario(path, [parse_assignment("subscriptions=7"), parse_assignment("duration=20")])
    assert len(scenario.subscriptions) == 7 and scenario.duration == 20
    scenario = load_scenario(path, [parse_assignment("subscriptions[0].generate.predicate={cut: 1}")])
    assert all(" z >" in s.query.text or " k IN" in s.query.text for s in scenario.subscriptions)
    for text, message in [
        ("streams[3].rate=1", "streams has 1 entries, no [3]"),
        ("network.nothing.x=1", "network has no key 'nothing'"),
        ("thin_peers[0].id.x=1", "thin_peers[0].id is not a mapping"),
        ("duration=-1", "duration: must be positive, got -1"),
    ]:
        with pytest.raises(ScenarioError) as info:
            load_scenario(path, [parse_assignment(text)])
        assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)
    written = {**BASE, "subscriptions": []}
    with pytest.raises(
        ScenarioError, match=r"--set subscriptions: stands for the count of the generators in subscriptions"
    ):
        load_scenario(write(tmp_path, written, "none.yaml"), [("subscriptions", 5)])
    with pytest.raises(ScenarioError, match="expected KEY=VALUE"):
        parse_assignment("seed")


@pytest.mark.parametrize("name", ["figure1.yaml", "sky-survey.yaml", "sensor-grid.yaml", "studies/large-shape.yaml"])
def test_expand_writes_the_file_that_loads_to_the_same_scenario(tmp_path, name):
    source = str(ROOT / "topologies" / name)
    scenario, text = expand(source, [("seed", 5)], into=str(tmp_path))
    (tmp_path / "explicit.yaml").write_text(text)
    again = load_scenario(str(tmp_path / "explicit.yaml"))
    assert (again.thin_peers, again.subscriptions, again.links, again.seed) == (
        scenario.thin_peers,
        scenario.subscriptions,
        scenario.links,
        5,
    )
    assert "generate: {count" not in text and text.startswith("# Written by `python run.py expand")
    jsonschema.Draft202012Validator(json_schema()).validate(yaml.safe_load(text))


def test_the_schema_knows_the_generators():
    validator = jsonschema.Draft202012Validator(json_schema())
    validator.validate(yaml.safe_load(STUDY.read_text()))
    validator.validate(BASE)
    bad = {**BASE, "subscriptions": [{"generate": {"count": 5, "arrivals": {"process": "burst"}}}]}
    assert list(validator.iter_errors(bad))
    bad = {**BASE, "thin_peers": [{"generate": {"count": 5, "attach": "everywhere"}}]}
    assert list(validator.iter_errors(bad))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_validate_says_what_was_made_and_expand_writes_the_file_or_nothing(tmp_path):
    path = write(tmp_path, BASE)
    result = cli("validate", path, "--set", "subscriptions=12", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("gen: 27 super-peers, ") and ", 12 subscriptions, " in lines[0]
    assert lines[1].startswith("  thin_peers[1].generate: 40 thin-peers P0..P39")
    assert lines[2].startswith("  subscriptions[0].generate: 12 subscriptions Q0..Q11")
    result = cli("expand", path, "--seed", "9", "--out", "explicit.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert load_scenario(str(tmp_path / "explicit.yaml")) == load_scenario(path, [("seed", 9)])
    again = cli("expand", path, "--out", "explicit.yaml", cwd=tmp_path)
    assert again.returncode == 2 and "exists (pass --force" in again.stderr
    bad = cli("expand", path, "--set", "subscriptions[0].generate.overlap=3", "--out", "bad.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and not os.path.exists(tmp_path / "bad.yaml")
    assert "subscriptions[0].generate.overlap: must lie in [0, 1], got 3" in bad.stderr
