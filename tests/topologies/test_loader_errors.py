"""Every validation rule of the loader: the exact one-line message naming file, key path and value."""

from __future__ import annotations

import copy
from fractions import Fraction

import jsonschema
import pytest
import yaml

from matcher import Choice, Empirical, Normal, QueryError, Uniform
from matcher.parser import parse_condition, parse_query
from matcher.text import KEYWORDS
from topologies.errors import InputError, ScenarioError
from topologies.loader import load_scenario
from topologies.schema import json_schema

BASE = {
    "name": "t",
    "seed": 1,
    "duration": 10,
    "network": {
        "defaults": {"bandwidth": "100Mbit", "latency": "2ms"},
        "super_peers": ["SP0", "SP1", "SP2"],
        "links": [["SP0", "SP1"], ["SP1", "SP2", {"latency": "5ms"}]],
    },
    "thin_peers": [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP2"}],
    "streams": [
        {
            "id": "s",
            "source": "P0",
            "rate": 10,
            "schema": {
                "x": {"type": "float", "distribution": {"uniform": [0, 1]}},
                "n": {"type": "int", "distribution": {"choice": [1, 2]}},
            },
        }
    ],
    "subscriptions": [{"id": "Q1", "peer": "P1", "at": 0, "until": 5, "query": "SELECT x FROM s WHERE x > 0.5"}],
}


def write(tmp_path, doc, name="s.yaml"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def error_of(path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, InputError)
    return message


def edit(doc, dotted: str, value):
    """Set (with ``...``: delete; one past a list's end: append) the value at ``a.b[0].c`` in ``doc``."""
    keys = [int(k) if k.isdigit() else k for k in dotted.replace("[", ".").replace("]", "").split(".")]
    target = doc
    for key in keys[:-1]:
        target = target[key]
    if value is ...:
        del target[keys[-1]]
    elif isinstance(target, list) and keys[-1] == len(target):
        target.append(value)
    else:
        target[keys[-1]] = value
    return doc


SCHEMA = "streams[0].schema"
CASES = [
    # unknown keys, at every level
    (
        "colour",
        1,
        "unknown key 'colour' (expected one of: cpu_costs, duration, events, header_bytes, name, network, planner, "
        "seed, streams, subscriptions, thin_peers)",
    ),
    (
        "network.mtu",
        1,
        "network: unknown key 'mtu' (expected one of: defaults, generate, import, links, min_latency,"
        " propagation_km_per_s, super_peers)",
    ),
    (
        "network.defaults.jitter",
        1,
        "network.defaults: unknown key 'jitter' (expected one of: bandwidth, buffer, capacity, cpu, input_buffer, "
        "latency)",
    ),
    (
        "network.links[1][2].jitter",
        1,
        "network.links[1][2]: unknown key 'jitter' (expected one of: bandwidth, buffer, latency, length)",
    ),
    ("thin_peers[0].name", "x", "thin_peers[0]: unknown key 'name' (expected one of: attach, bandwidth, id, latency)"),
    (
        "streams[0].rat",
        3,
        "streams[0]: unknown key 'rat' (expected one of: id, rate, replay, schema, source, time, time_start)",
    ),
    (f"{SCHEMA}.x.unit", "m", f"{SCHEMA}.x: unknown key 'unit' (expected one of: distribution, type)"),
    (
        f"{SCHEMA}.n.distribution.choice",
        {"values": [1], "p": [1]},
        f"{SCHEMA}.n.distribution.choice: unknown key 'p' (expected one of: values, weights)",
    ),
    ("subscriptions[0].when", 1, "subscriptions[0]: unknown key 'when' (expected one of: at, id, peer, query, until)"),
    # missing required keys
    ("name", ..., "missing required key 'name'"),
    ("streams[0].rate", ..., "streams[0]: missing required key 'rate' (or 'time' for a replay timed by a column)"),
    ("subscriptions[0].query", ..., "subscriptions[0]: missing required key 'query'"),
    ("network.super_peers", ..., "network: missing required key 'super_peers' (or 'generate' or 'import')"),
    (f"{SCHEMA}.x.distribution", ..., f"{SCHEMA}.x: missing required key 'distribution'"),
    # unknown references
    ("network.links[1][1]", "SP9", "network.links[1][1]: unknown super-peer 'SP9'"),
    ("thin_peers[1].attach", "SP7", "thin_peers[1].attach: unknown super-peer 'SP7'"),
    ("streams[0].source", "P9", "streams[0].source: unknown thin-peer 'P9'"),
    ("subscriptions[0].peer", "P9", "subscriptions[0].peer: unknown thin-peer 'P9'"),
    ("subscriptions[0].query", "SELECT x FROM t", "subscriptions[0].query: unknown stream 't'"),
    ("subscriptions[0].query", "SELECT y FROM s", "subscriptions[0].query: unknown attribute 'y' of stream 's'"),
    (
        "subscriptions[0].query",
        "SELECT * FROM s WHERE z < 1",
        "subscriptions[0].query: unknown attribute 'z' of stream 's'",
    ),
    # duplicate ids
    (
        "network.super_peers",
        ["SP0", "SP1", "SP2", "SP1"],
        "network.super_peers[3]: duplicate super-peer 'SP1' (also network.super_peers[1])",
    ),
    ("thin_peers[1].id", "P0", "thin_peers[1].id: duplicate thin-peer 'P0' (also thin_peers[0].id)"),
    ("thin_peers[1].id", "SP2", "thin_peers[1].id: 'SP2' is already a super-peer id"),
    (
        "streams[1]",
        {"id": "s", "source": "P0", "rate": 1, "schema": {"x": {"distribution": {"uniform": [0, 1]}}}},
        "streams[1].id: duplicate stream 's' (also streams[0].id)",
    ),
    (
        "subscriptions[1]",
        {"id": "Q1", "peer": "P0", "at": 1, "query": "SELECT x FROM s"},
        "subscriptions[1].id: duplicate subscription 'Q1' (also subscriptions[0].id)",
    ),
    # backbone shape
    ("network.links[2]", ["SP2", "SP2"], "network.links[2]: self-loop on 'SP2'"),
    ("network.links[2]", ["SP1", "SP0"], "network.links[2]: duplicate link SP1-SP0 (also network.links[0])"),
    ("network.links[1]", "SP1-SP2", "network.links[1]: expected [a, b] or [a, b, {bandwidth, latency}], got 'SP1-SP2'"),
    (
        "network.super_peers",
        ["SP0", "SP1", "SP2", "SP3", "SP4"],
        "network.links: backbone is disconnected: SP3, SP4 unreachable from SP0",
    ),
    ("network.super_peers", [], "network.super_peers: expected at least one super-peer, got []"),
    # ranges
    ("streams[0].rate", 0, "streams[0].rate: must be positive, got 0"),
    ("streams[0].rate", -2.5, "streams[0].rate: must be positive, got -2.5"),
    ("duration", 0, "duration: must be positive, got 0"),
    (
        "duration",
        4_000_001,
        "duration: must be at most 4,000,000 s (46 days: time is counted in 64-bit picoseconds, "
        "docs/ACCOUNTING.md), got 4000001",
    ),
    ("network.defaults.bandwidth", -5, "network.defaults.bandwidth: bandwidth must be positive, got -5"),
    (
        "network.links[1][2].bandwidth",
        "0Mbit",
        "network.links[1][2].bandwidth: bandwidth must be positive, got '0Mbit'",
    ),
    ("network.links[1][2].latency", "-1ms", "network.links[1][2].latency: latency must not be negative, got '-1ms'"),
    ("thin_peers[0].latency", -0.5, "thin_peers[0].latency: latency must not be negative, got -0.5"),
    ("subscriptions[0].until", 0, "subscriptions[0].until: must be greater than at (0), got 0"),
    ("subscriptions[0].at", 10, "subscriptions[0].at: must lie in [0, duration) = [0, 10), got 10"),
    ("subscriptions[0].at", -1, "subscriptions[0].at: must lie in [0, duration) = [0, 10), got -1"),
    ("seed", -3, "seed: must be >= 0, got -3"),
    ("streams[0].rate", float("inf"), "streams[0].rate: expected a finite number, got inf"),
    # wrong types
    ("streams[0].rate", "10", "streams[0].rate: expected a number, got '10' (str)"),
    ("seed", True, "seed: expected an integer, got True (bool)"),
    ("header_bytes", 16.0, "header_bytes: expected an integer, got 16.0 (float)"),
    ("duration", True, "duration: expected a number, got True (bool)"),
    ("subscriptions[0].at", "now", "subscriptions[0].at: expected a number, got 'now' (str)"),
    ("thin_peers", {"P0": "SP0"}, "thin_peers: expected a list, got {'P0': 'SP0'} (dict)"),
    ("thin_peers[0].id", 7, "thin_peers[0].id: expected a string id, got 7 (int)"),
    ("name", "my scenario", "name: expected [A-Za-z0-9_-]+, got 'my scenario' (str)"),
    ("subscriptions[0].query", 42, "subscriptions[0].query: expected a query string, got 42 (int)"),
    (f"{SCHEMA}.x.type", "double", f"{SCHEMA}.x.type: expected 'float', 'int' or 'string', got 'double'"),
    (f"{SCHEMA}.select", {"distribution": {"uniform": [0, 1]}}, f"{SCHEMA}.select: bad id 'select' (a query keyword)"),
    # units
    (
        "network.defaults.bandwidth",
        "100Mbps",
        "network.defaults.bandwidth: bad bandwidth '100Mbps' (expected bit/s or a number with Kbit, Mbit or Gbit)",
    ),
    (
        "network.defaults.latency",
        "2 hours",
        "network.defaults.latency: bad latency '2 hours' (expected seconds or a number with s, ms or us)",
    ),
    (
        "thin_peers[0].bandwidth",
        [1],
        "thin_peers[0].bandwidth: bad bandwidth [1] (expected a number or a string such as '100Mbit')",
    ),
    # distributions
    (f"{SCHEMA}.x.distribution", {"uniform": [1, 1]}, f"{SCHEMA}.x.distribution.uniform: needs lo < hi, got [1, 1]"),
    (f"{SCHEMA}.x.distribution", {"uniform": [2, 1]}, f"{SCHEMA}.x.distribution.uniform: needs lo < hi, got [2, 1]"),
    (
        f"{SCHEMA}.x.distribution",
        {"uniform": [0]},
        f"{SCHEMA}.x.distribution.uniform: expected a list of two numbers, got [0]",
    ),
    (
        f"{SCHEMA}.x.distribution",
        {"normal": [0, 0]},
        f"{SCHEMA}.x.distribution.normal[1]: sigma must be positive, got 0",
    ),
    (
        f"{SCHEMA}.x.distribution",
        {"normal": [0, "a"]},
        f"{SCHEMA}.x.distribution.normal[1]: expected a number, got 'a' (str)",
    ),
    (
        f"{SCHEMA}.x.distribution",
        {"choice": []},
        f"{SCHEMA}.x.distribution.choice: expected at least one value, got []",
    ),
    (
        f"{SCHEMA}.x.distribution",
        {"poisson": [1]},
        f"{SCHEMA}.x.distribution: unknown distribution 'poisson' (expected one of: uniform, normal, choice)",
    ),
    (
        f"{SCHEMA}.x.distribution",
        {"uniform": [0, 1], "normal": [0, 1]},
        f"{SCHEMA}.x.distribution: expected one of {{uniform: [lo, hi]}}, {{normal: [mu, sigma]}}, {{choice: [...]}}, "
        "got {'uniform': [0, 1], 'normal': [0, 1]}",
    ),
    (
        f"{SCHEMA}.n.distribution",
        {"choice": [1, 2.5]},
        f"{SCHEMA}.n.distribution.choice[1]: an int attribute needs integer values, got 2.5",
    ),
    (
        f"{SCHEMA}.n.distribution",
        {"uniform": [0.2, 0.8]},
        f"{SCHEMA}.n.distribution.uniform: contains no integer, got [0.2, 0.8]",
    ),
    (
        f"{SCHEMA}.n.distribution",
        {"choice": {"values": [1, 2], "weights": [1]}},
        f"{SCHEMA}.n.distribution.choice.weights: expected 2 weights (one per value), got 1",
    ),
    (
        f"{SCHEMA}.n.distribution",
        {"choice": {"values": [1, 2], "weights": [0, 0]}},
        f"{SCHEMA}.n.distribution.choice.weights: weights must not all be zero, got [0, 0]",
    ),
    ("streams[0].schema", {}, "streams[0].schema: expected a non-empty mapping of attributes, got {} (dict)"),
    ("streams[0].replay", "data.csv", "streams[0]: expected exactly one of 'schema' and 'replay'"),
    # network limits
    (
        "network.links[1][2].capacity",
        5,
        "network.links[1][2]: unknown key 'capacity' (expected one of: bandwidth, buffer, latency, length)",
    ),
    (
        "network.defaults.buffer",
        "64 parsecs",
        "network.defaults.buffer: bad size '64 parsecs' (expected bytes or a number with B, KB, MB, GB, KiB, MiB"
        " or GiB)",
    ),
    (
        "network.links[1][2].buffer",
        0,
        "network.links[1][2].buffer: size must be at least 1 byte and at most 1 GB, got 0",
    ),
    ("network.defaults.buffer", 0.5, "network.defaults.buffer: size must be at least 1 byte and at most 1 GB, got 0.5"),
    (
        "network.defaults.buffer",
        "1e-9KB",
        "network.defaults.buffer: size must be at least 1 byte and at most 1 GB, got '1e-9KB'",
    ),
    (
        "network.links[1][2].buffer",
        "2GB",
        "network.links[1][2].buffer: size must be at least 1 byte and at most 1 GB, got '2GB'",
    ),
    ("network.defaults.capacity", "fast", "network.defaults.capacity: expected a number, got 'fast' (str)"),
    (
        "network.super_peers[1]",
        {"id": "SP1", "capacity": 0},
        "network.super_peers[1].capacity: must be positive, got 0",
    ),
    ("network.super_peers[1]", {"capacity": 10}, "network.super_peers[1]: missing required key 'id'"),
    (
        "network.super_peers[1]",
        {"id": "SP1", "cores": 1},
        "network.super_peers[1]: unknown key 'cores' (expected one of: capacity, cpu, id, input_buffer, pos)",
    ),
    (
        "network.super_peers[2]",
        {"id": "SP0"},
        "network.super_peers[2].id: duplicate super-peer 'SP0' (also network.super_peers[0])",
    ),
    (
        "planner",
        {"max_utilisation": 0.5},
        "planner: unknown key 'max_utilisation' (expected one of: max_utilization, peak_sd)",
    ),
    ("planner", {"max_utilization": 0}, "planner.max_utilization: must lie in (0, 1], got 0"),
    ("planner", {"max_utilization": 1.2}, "planner.max_utilization: must lie in (0, 1], got 1.2"),
    ("planner", [0.8], "planner: expected a mapping, got [0.8] (list)"),
    # generators
    (
        "network.generate",
        {"model": "grid", "rows": 2, "cols": 2},
        "network.super_peers: not allowed together with network.generate",
    ),
]


@pytest.mark.parametrize(("key", "value", "message"), CASES, ids=[f"{k}={v!r}"[:60] for k, v, _ in CASES])
def test_invalid_scenario_names_file_key_and_value(tmp_path, key, value, message):
    path = write(tmp_path, edit(copy.deepcopy(BASE), key, value))
    assert error_of(path) == f"{path}: {message}"


GENERATED = {"defaults": {"latency": "1ms"}, "generate": {"model": "grid", "rows": 2, "cols": 2}}
GENERATE_CASES = [
    (
        {"model": "ring", "n": 3},
        "network.generate.model: unknown model 'ring' (expected one of: barabasi-albert, "
        "grid, transit-stub, tree, waxman)",
    ),
    ({"model": "grid", "rows": 2}, "network.generate: missing required key 'cols'"),
    (
        {"model": "grid", "rows": 2, "cols": 2, "seed": 3},
        "network.generate: unknown key 'seed' (expected one of: bandwidth, cols, latency, model, rows)",
    ),
    ({"model": "grid", "rows": "2", "cols": 2}, "network.generate.rows: expected an integer, got '2' (str)"),
    ({"model": "grid", "rows": 0, "cols": 2}, "network.generate: grid needs rows >= 1 and cols >= 1, got 0 x 2"),
    ({"model": "waxman", "n": 5, "alpha": 1.5}, "network.generate.alpha: must lie in [0, 1], got 1.5"),
    ({"model": "barabasi-albert", "n": 3, "m": 3}, "network.generate: barabasi-albert needs 1 <= m < n, got n=3, m=3"),
    (
        {"model": "transit-stub", "transit": 2, "stubs_per_transit": 1, "nodes_per_stub": 2, "stub_latency": "fast"},
        "network.generate.stub_latency: bad latency 'fast' (expected seconds or a number with s, ms or us)",
    ),
]


def test_network_limits_are_read_with_their_defaults(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["network"]["defaults"] |= {"buffer": "64KB", "capacity": 20000}
    doc["network"]["super_peers"][1] = {"id": "SP1", "capacity": 5000}
    doc["network"]["links"][1][2]["buffer"] = "16KiB"
    doc["planner"] = {"max_utilization": 0.5}
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.super_peers == ("SP0", "SP1", "SP2")
    assert scenario.capacity == {"SP0": 20000, "SP1": 5000, "SP2": 20000}
    assert [link.buffer for link in scenario.links] == [64000, 16384]
    assert scenario.max_utilization == 0.5
    jsonschema.validate(doc, json_schema())
    plain = load_scenario(write(tmp_path, BASE, "plain.yaml"))  # without them: unlimited, and the default share
    assert plain.capacity == {} and [link.buffer for link in plain.links] == [None, None]
    assert plain.max_utilization == 0.8


def test_a_transit_stub_network_takes_a_buffer_per_tier_and_the_default_elsewhere(tmp_path):
    doc = copy.deepcopy(BASE)
    generate = {"model": "transit-stub", "transit": 2, "stubs_per_transit": 1, "nodes_per_stub": 2}
    doc["network"] = {"defaults": {"buffer": 1000, "capacity": 50}, "generate": generate | {"gateway_buffer": "4KB"}}
    doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP1"}]
    scenario = load_scenario(write(tmp_path, doc))
    gateways = {("SP0", "SP2"), ("SP1", "SP4")}  # transit node t to the first node of its stub
    assert {(link.a, link.b): link.buffer for link in scenario.links if (link.a, link.b) in gateways} == {
        g: 4000 for g in gateways
    }
    assert all(link.buffer == 1000 for link in scenario.links if (link.a, link.b) not in gateways)
    assert set(scenario.capacity.values()) == {50} and len(scenario.capacity) == len(scenario.super_peers)
    jsonschema.validate(doc, json_schema())


@pytest.mark.parametrize(("generate", "message"), GENERATE_CASES)
def test_invalid_generate_section(tmp_path, generate, message):
    doc = copy.deepcopy(BASE)
    doc["network"] = {"generate": generate}
    doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP1"}]
    path = write(tmp_path, doc)
    assert error_of(path) == f"{path}: {message}"


def test_query_that_does_not_parse_carries_the_parser_position(tmp_path):
    text = "SELECT x FROM s WHERE x >"
    with pytest.raises(QueryError) as parse_error:
        parse_query(text)
    path = write(tmp_path, edit(copy.deepcopy(BASE), "subscriptions[0].query", text))
    message = error_of(path)
    assert message == f"{path}: subscriptions[0].query: query does not parse: {parse_error.value}"
    assert f"position {parse_error.value.position}" in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nseed: [1, 2\nduration: 3\n", "line 3, column 9: YAML error: did not find expected ',' or ']'"),
        ("name: x\n  seed: 1\n", "line 2, column 7: YAML error: mapping values are not allowed in this context"),
        ("name: x\nseed: 1\nname: y\n", "line 3, column 1: YAML error: duplicate key 'name'"),
        ("- a\n- b\n", "expected a mapping of scenario keys at the top level, got ['a', 'b'] (list)"),
        ("", "expected a mapping of scenario keys at the top level, got None (NoneType)"),
    ],
)
def test_yaml_syntax_and_top_level_errors(tmp_path, text, message):
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: {message}"


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    assert error_of(path) == f"{path}: file not found"


REPLAY_STREAM = {"id": "r", "source": "P0", "rate": 5, "replay": "data/r.csv"}


@pytest.mark.parametrize(
    ("csv", "message"),
    [
        (None, "replay file not found: 'data/r.csv'"),
        ("", "data/r.csv: empty file (expected a header row of attribute names)"),
        ("a,b\n", "data/r.csv: no data rows after the header"),
        ("a,b\n1,2\n3,nan\n", "data/r.csv: row 3, column 'b': not a finite number: 'nan'"),
        ("a,a\n1,2\n", "data/r.csv: row 1: duplicate attribute name 'a'"),
        ("a,b c\n1,2\n", "data/r.csv: row 1: bad attribute name 'b c' (expected letters, digits, _)"),
        ("a,b\n1,2\n3\n", "data/r.csv: row 3: 1 cells, expected 2"),
        ("a,where\n1,2\n", "data/r.csv: row 1: attribute name 'where' is a query keyword"),
    ],
)
def test_bad_replay_file(tmp_path, csv, message):
    if csv is not None:
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "r.csv").write_text(csv)
    doc = copy.deepcopy(BASE)
    doc["streams"].append(REPLAY_STREAM)
    path = write(tmp_path, doc)
    assert error_of(path) == f"{path}: streams[1].replay: {message}"


@pytest.mark.parametrize("spelled", [w for k in sorted(KEYWORDS) for w in (k, k.lower(), k.title())])
def test_a_reserved_word_names_no_attribute_and_no_stream(tmp_path, spelled):
    """The query language's one list of reserved words: the parser does not read one as a name, and the
    loader and the JSON Schema refuse one as an attribute (schema key or replay header) or a stream."""
    with pytest.raises(QueryError):
        parse_condition(f"{spelled} > 1")
    validator = jsonschema.Draft202012Validator(json_schema())
    assert validator.is_valid(BASE)

    doc = copy.deepcopy(BASE)
    doc["streams"][0]["schema"][spelled] = {"distribution": {"uniform": [0, 1]}}
    path = write(tmp_path, doc)
    assert error_of(path) == f"{path}: {SCHEMA}.{spelled}: bad id {spelled!r} (a query keyword)"
    assert not validator.is_valid(doc)

    doc = copy.deepcopy(BASE)
    doc["streams"][0]["id"] = spelled
    path = write(tmp_path, doc)
    assert error_of(path) == f"{path}: streams[0].id: bad id {spelled!r} (a query keyword)"
    assert not validator.is_valid(doc)

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "r.csv").write_text(f"a,{spelled}\n1,2\n")
    doc = copy.deepcopy(BASE)
    doc["streams"].append(REPLAY_STREAM)
    path = write(tmp_path, doc)
    message = f"data/r.csv: row 1: attribute name {spelled!r} is a query keyword"
    assert error_of(path) == f"{path}: streams[1].replay: {message}"


def test_replay_stream_takes_schema_and_distributions_from_the_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "r.csv").write_text("temp,wind\n3.5,1\n-1,2\n2,4\n")
    doc = copy.deepcopy(BASE)
    doc["streams"].append(REPLAY_STREAM)
    doc["subscriptions"].append({"id": "Q2", "peer": "P1", "at": 0, "query": "SELECT wind FROM r WHERE temp > 0"})
    scenario = load_scenario(write(tmp_path, doc))
    stream = scenario.stream("r")
    assert stream.replay == str(tmp_path / "data" / "r.csv")
    assert stream.attribute_names == ("temp", "wind")
    assert [a.type for a in stream.attributes] == ["float", "float"]
    temp = stream.attributes[0].distribution
    assert isinstance(temp, Empirical) and temp.values.tolist() == [-1.0, 2.0, 3.5]


def test_contradictory_query_is_a_warning_not_an_error(tmp_path):
    doc = edit(copy.deepcopy(BASE), "subscriptions[0].query", "SELECT x FROM s WHERE x > 1 AND x < 0")
    path = write(tmp_path, doc)
    scenario = load_scenario(path)
    assert scenario.subscriptions[0].query.where.is_empty()
    assert scenario.warnings == (f"{path}: subscriptions[0].query: WHERE is always false; Q1 receives nothing",)


def test_valid_scenario_values_and_defaults(tmp_path):
    doc = copy.deepcopy(BASE)
    del doc["seed"]
    doc["network"]["links"][0].append({"latency": 0.1, "bandwidth": "1.5Gbit"})
    doc["thin_peers"][1]["bandwidth"] = "64Kbit"
    doc["thin_peers"][1]["latency"] = "500us"
    doc["streams"][0]["schema"]["k"] = {"type": "int", "distribution": {"uniform": [0.5, 3]}}
    doc["streams"][0]["schema"]["w"] = {"distribution": {"choice": {"values": [1, 2], "weights": [3, 1]}}}
    doc["streams"][0]["schema"]["m"] = {"type": "int", "distribution": {"normal": [5, 2]}}
    del doc["subscriptions"][0]["until"]
    scenario = load_scenario(write(tmp_path, doc))
    assert (scenario.seed, scenario.header_bytes, scenario.duration) == (0, 16, 10.0)
    first, second = scenario.links
    assert (first.bandwidth, first.latency) == (1.5e9, Fraction(1, 10))
    assert (second.bandwidth, second.latency) == (100e6, Fraction(5, 1000))
    assert scenario.thin_peer("P0").bandwidth == 100e6 and scenario.thin_peer("P0").latency == Fraction(2, 1000)
    assert scenario.thin_peer("P1").bandwidth == 64e3 and scenario.thin_peer("P1").latency == Fraction(1, 2000)
    dists = {a.name: (a.type, a.distribution) for a in scenario.stream("s").attributes}
    assert list(dists) == ["x", "n", "k", "w", "m"]
    assert dists["x"] == ("float", Uniform(0.0, 1.0))
    assert dists["n"] == ("int", Choice((1.0, 2.0)))
    assert dists["k"] == ("int", Uniform(0.5, 3.0, integer=True))
    assert dists["w"] == ("float", Choice((1.0, 2.0), (3.0, 1.0)))
    assert dists["m"] == ("int", Normal(5.0, 2.0, integer=True))
    assert scenario.subscriptions[0].until is None
    assert scenario.subscriptions[0].query.select == ("x",)


def test_links_key_is_optional_for_a_single_super_peer(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["network"] = {"super_peers": ["SP0"]}
    doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP0"}]
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.super_peers == ("SP0",) and scenario.links == ()
