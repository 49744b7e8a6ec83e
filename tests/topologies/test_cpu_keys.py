"""The scenario keys of super-peer CPU (docs/SCENARIOS.md, "Network limits"): ``cpu`` and ``input_buffer``
in ``network.defaults`` and per super-peer, and the top-level ``cpu_costs``; their defaults and overrides,
the units of ``input_buffer``, the one-line error naming key path and value for every mistake, the JSON
Schema agreeing with the loader, and ``run.py expand`` writing a file that loads back to the same scenario."""

from __future__ import annotations

import copy
import dataclasses
import pathlib

import jsonschema
import pytest
import yaml

from topologies.errors import InputError, ScenarioError
from topologies.expand import expand
from topologies.loader import MAX_CPU, load_scenario
from topologies.model import CpuCosts
from topologies.schema import json_schema

VALIDATOR = jsonschema.Draft202012Validator(json_schema())
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "SCENARIOS.md"

BASE = {
    "name": "cpu",
    "seed": 1,
    "duration": 10,
    "network": {
        "defaults": {"bandwidth": "100Mbit", "latency": "2ms"},
        "super_peers": ["SP0", "SP1", "SP2"],
        "links": [["SP0", "SP1"], ["SP1", "SP2", {"latency": "5ms"}]],
    },
    "thin_peers": [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP2"}],
    "streams": [
        {"id": "s", "source": "P0", "rate": 10, "schema": {"x": {"type": "float", "distribution": {"uniform": [0, 1]}}}}
    ],
    "subscriptions": [{"id": "Q1", "peer": "P1", "at": 0, "query": "SELECT x FROM s WHERE x > 0.5"}],
}


def write(tmp_path, doc, name="s.yaml") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def error_of(path: str) -> str:
    """The loader's message for the file ``path``, without the file: one line, an InputError."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, InputError)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def with_limits(defaults: dict | None = None, sp1: dict | None = None, cpu_costs: object = None) -> dict:
    """BASE with ``defaults`` added to network.defaults, SP1 written as ``{id: SP1, **sp1}``, and
    ``cpu_costs`` (when given)."""
    doc = copy.deepcopy(BASE)
    doc["network"]["defaults"] |= defaults or {}
    if sp1 is not None:
        doc["network"]["super_peers"][1] = {"id": "SP1", **sp1}
    if cpu_costs is not None:
        doc["cpu_costs"] = cpu_costs
    return doc


# --- defaults and overrides -----------------------------------------------------------------------------


def test_without_the_keys_a_scenario_is_as_before(tmp_path):
    scenario = load_scenario(write(tmp_path, BASE))
    assert scenario.cpus == () and scenario.input_buffers == ()
    assert scenario.cpu == {} and scenario.input_buffer == {}
    assert scenario.cpu_costs == CpuCosts()
    assert scenario.capacities == ()
    VALIDATOR.validate(BASE)


def test_network_defaults_apply_to_every_super_peer_and_a_mapping_overrides_them(tmp_path):
    doc = with_limits(
        {"cpu": 10_000_000, "input_buffer": "64KB", "capacity": 20000},
        {"cpu": 2e6, "input_buffer": "16KiB"},
    )
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.cpus == (("SP0", 1e7), ("SP1", 2e6), ("SP2", 1e7))
    assert scenario.cpu == {"SP0": 1e7, "SP1": 2e6, "SP2": 1e7}
    assert scenario.input_buffers == (("SP0", 64000), ("SP1", 16384), ("SP2", 64000))
    assert scenario.input_buffer == {"SP0": 64000, "SP1": 16384, "SP2": 64000}
    assert scenario.capacity == {"SP0": 20000, "SP1": 20000, "SP2": 20000}  # untouched by the new keys
    assert [link.buffer for link in scenario.links] == [None, None]  # a link's buffer is not the input buffer
    VALIDATOR.validate(doc)


def test_only_the_super_peers_given_a_limit_are_limited(tmp_path):
    doc = with_limits(sp1={"cpu": 5e5, "capacity": 100})
    doc["network"]["super_peers"][2] = {"id": "SP2", "input_buffer": 1500}
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.cpus == (("SP1", 5e5),)
    assert scenario.input_buffers == (("SP2", 1500),)
    assert scenario.capacities == (("SP1", 100),)
    assert "SP0" not in scenario.cpu and "SP0" not in scenario.input_buffer
    VALIDATOR.validate(doc)


def test_a_mapping_without_the_keys_takes_the_defaults(tmp_path):
    doc = with_limits({"cpu": 1000, "input_buffer": 2000}, {"pos": [8.5, 47.4]})
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.cpu == dict.fromkeys(("SP0", "SP1", "SP2"), 1000)
    assert scenario.input_buffer == dict.fromkeys(("SP0", "SP1", "SP2"), 2000)


def test_a_generated_backbone_takes_the_defaults_on_every_super_peer(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["network"] = {
        "defaults": {"cpu": 3e6, "input_buffer": "8KB"},
        "generate": {"model": "grid", "rows": 2, "cols": 3},
    }
    doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP5"}]
    scenario = load_scenario(write(tmp_path, doc))
    assert scenario.cpus == tuple((sp, 3e6) for sp in scenario.super_peers)
    assert scenario.input_buffers == tuple((sp, 8000) for sp in scenario.super_peers)
    VALIDATOR.validate(doc)


@pytest.mark.parametrize(
    ("written", "size"),
    [
        (1500, 1500),
        (1500.7, 1500),
        ("1500B", 1500),
        ("64KB", 64_000),
        ("1.5KB", 1500),
        ("16KiB", 16_384),
        ("2MB", 2_000_000),
        ("1MiB", 2**20),
        ("1GB", 10**9),
        (" 64 kb ", 64_000),
    ],
)
def test_input_buffer_reads_sizes_as_a_link_buffer_does(tmp_path, written, size):
    scenario = load_scenario(write(tmp_path, with_limits({"input_buffer": written}, {"input_buffer": written})))
    assert scenario.input_buffer == dict.fromkeys(("SP0", "SP1", "SP2"), size)
    link = with_limits({"buffer": written})
    assert [x.buffer for x in load_scenario(write(tmp_path, link, "link.yaml")).links] == [size, size]


def test_cpu_takes_an_exponent_yaml_reads_as_a_number_and_the_bound_itself(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False).replace(
        "super_peers:\n  - SP0\n  - SP1",
        f"super_peers:\n  - SP0\n  - {{id: SP1, cpu: 2.0e+6}}\n  - {{id: SPX, cpu: {MAX_CPU:.1e}}}",
    )
    text = text.replace("  links:\n", "  links:\n  - [SP0, SPX]\n")
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.cpu == {"SP1": 2e6, "SPX": MAX_CPU}


def test_cpu_costs_default_and_override_key_by_key(tmp_path):
    defaults = CpuCosts()
    assert dataclasses.is_dataclass(defaults) and [f.name for f in dataclasses.fields(CpuCosts)] == [
        "box",
        "projection",
        "aggregate",
        "record",
    ]
    assert all(isinstance(getattr(defaults, f.name), int) for f in dataclasses.fields(CpuCosts))
    assert load_scenario(write(tmp_path, with_limits(cpu_costs={}))).cpu_costs == defaults
    one = load_scenario(write(tmp_path, with_limits(cpu_costs={"box": 1}), "one.yaml")).cpu_costs
    assert one == dataclasses.replace(defaults, box=1)
    every = {"box": 0, "projection": 3, "aggregate": 0, "record": 100}
    scenario = load_scenario(write(tmp_path, with_limits(cpu_costs=every), "every.yaml"))
    assert scenario.cpu_costs == CpuCosts(**every)
    assert scenario != load_scenario(write(tmp_path, BASE, "plain.yaml"))  # the costs are part of the scenario
    VALIDATOR.validate(with_limits(cpu_costs=every))


def test_cpu_costs_can_be_set_from_the_command_line(tmp_path):
    path = write(tmp_path, BASE)
    changes = [("cpu_costs", {"record": 7}), ("cpu_costs.box", 1), ("network.defaults.cpu", 5000)]
    scenario = load_scenario(path, changes)
    assert scenario.cpu_costs == dataclasses.replace(CpuCosts(), record=7, box=1)
    assert scenario.cpu == dict.fromkeys(("SP0", "SP1", "SP2"), 5000)


def test_the_docs_give_the_cpu_costs_defaults_of_the_model():
    """docs/SCENARIOS.md states the defaults as numbers: changing CpuCosts means changing them there too."""
    text = " ".join(DOCS.read_text().split())  # wrapped lines joined
    d = CpuCosts()
    assert f"defaults {d.box}, {d.projection}, {d.aggregate} and {d.record}" in text
    assert f"(default {d.box})" in text and f"receives ({d.projection})" in text
    assert f"partial states ({d.aggregate})" in text and f"record emitted ({d.record})" in text


# --- errors ---------------------------------------------------------------------------------------------

ERRORS = [
    # network.defaults.cpu
    ({"cpu": "fast"}, None, None, "network.defaults.cpu: expected a number, got 'fast' (str)"),
    ({"cpu": 0}, None, None, "network.defaults.cpu: must be positive, got 0"),
    ({"cpu": -5}, None, None, "network.defaults.cpu: must be positive, got -5"),
    ({"cpu": True}, None, None, "network.defaults.cpu: expected a number, got True (bool)"),
    ({"cpu": float("inf")}, None, None, "network.defaults.cpu: expected a finite number, got inf"),
    ({"cpu": 2e15}, None, None, "network.defaults.cpu: must be at most 1e+15 operations/s, got 2000000000000000.0"),
    ({"cpu": [1]}, None, None, "network.defaults.cpu: expected a number, got [1] (list)"),
    (
        {"cpu": "2e6"},
        None,
        None,
        "network.defaults.cpu: expected a number, got '2e6' (str): YAML reads an exponent without a dot and a"
        " sign as text (write 2000000 or 2.0e+6 for 2 million)",
    ),
    # a super-peer's cpu
    (None, {"cpu": 0}, None, "network.super_peers[1].cpu: must be positive, got 0"),
    (None, {"cpu": "1GHz"}, None, "network.super_peers[1].cpu: expected a number, got '1GHz' (str)"),
    (None, {"cpu": 1e16}, None, "network.super_peers[1].cpu: must be at most 1e+15 operations/s, got 1e+16"),
    (None, {"cpu": None}, None, "network.super_peers[1].cpu: expected a number, got None (NoneType)"),
    # input_buffer
    (
        {"input_buffer": "64 parsecs"},
        None,
        None,
        "network.defaults.input_buffer: bad size '64 parsecs' (expected bytes or a number with B, KB, MB, GB, KiB,"
        " MiB or GiB)",
    ),
    (
        {"input_buffer": 0},
        None,
        None,
        "network.defaults.input_buffer: size must be at least 1 byte and at most 1 GB, got 0",
    ),
    (
        {"input_buffer": 0.5},
        None,
        None,
        "network.defaults.input_buffer: size must be at least 1 byte and at most 1 GB, got 0.5",
    ),
    (
        None,
        {"input_buffer": "2GB"},
        None,
        "network.super_peers[1].input_buffer: size must be at least 1 byte and at most 1 GB, got '2GB'",
    ),
    (
        None,
        {"input_buffer": -1},
        None,
        "network.super_peers[1].input_buffer: size must be at least 1 byte and at most 1 GB, got -1",
    ),
    # unknown keys beside them
    (
        {"cpus": 1},
        None,
        None,
        "network.defaults: unknown key 'cpus' (expected one of: bandwidth, buffer, capacity, cpu, input_buffer,"
        " latency)",
    ),
    (
        None,
        {"cpu_costs": {}},
        None,
        "network.super_peers[1]: unknown key 'cpu_costs' (expected one of: capacity, cpu, id, input_buffer, pos)",
    ),
    # cpu_costs
    (None, None, {"box": 2.5}, "cpu_costs.box: expected an integer, got 2.5 (float)"),
    (None, None, {"box": True}, "cpu_costs.box: expected an integer, got True (bool)"),
    (None, None, {"aggregate": "8"}, "cpu_costs.aggregate: expected an integer, got '8' (str)"),
    (None, None, {"record": -1}, "cpu_costs.record: must be >= 0, got -1"),
    (None, None, {"record": 10**10}, "cpu_costs.record: must be <= 1,000,000,000, got 10000000000"),
    (
        None,
        None,
        {"boxes": 1},
        "cpu_costs: unknown key 'boxes' (expected one of: aggregate, box, projection, record)",
    ),
    (None, None, [4, 2], "cpu_costs: expected a mapping, got [4, 2] (list)"),
    (None, None, 4, "cpu_costs: expected a mapping, got 4 (int)"),
]


@pytest.mark.parametrize(
    ("defaults", "sp1", "cpu_costs", "message"), ERRORS, ids=[m.split(",")[0][:60] for *_, m in ERRORS]
)
def test_every_mistake_is_one_line_naming_the_key_path_and_the_value(tmp_path, defaults, sp1, cpu_costs, message):
    doc = with_limits(defaults, sp1, cpu_costs)
    assert error_of(write(tmp_path, doc)) == message
    size_text = "size must be" in message and message.endswith("'")  # the schema checks a size's text form only
    assert VALIDATOR.is_valid(doc) is size_text  # else the schema refuses it too


def test_a_whole_float_is_no_cost(tmp_path):
    """2.0 is refused as ``seed`` refuses it (JSON Schema's "integer" admits it: the loader is the stricter)."""
    path = write(tmp_path, with_limits(cpu_costs={"projection": 2.0}))
    assert error_of(path) == "cpu_costs.projection: expected an integer, got 2.0 (float)"


def test_an_empty_cpu_costs_key_is_a_mistake_not_the_defaults(tmp_path):
    path = write(tmp_path, yaml.safe_dump(BASE, sort_keys=False) + "cpu_costs:\n")
    assert error_of(path) == "cpu_costs: expected a mapping, got None (NoneType)"


def test_a_link_takes_neither_cpu_nor_input_buffer(tmp_path):
    for key in ("cpu", "input_buffer"):
        doc = copy.deepcopy(BASE)
        doc["network"]["links"][1][2][key] = 1000
        assert error_of(write(tmp_path, doc)) == (
            f"network.links[1][2]: unknown key '{key}' (expected one of: bandwidth, buffer, latency, length)"
        )
        assert not VALIDATOR.is_valid(doc)


def test_an_unknown_top_level_key_lists_cpu_costs(tmp_path):
    doc = copy.deepcopy(BASE) | {"cpu_cost": {"box": 1}}
    assert error_of(write(tmp_path, doc)) == (
        "unknown key 'cpu_cost' (expected one of: cpu_costs, duration, events, header_bytes, name, network, planner,"
        " seed, streams, subscriptions, thin_peers)"
    )


# --- the JSON Schema ------------------------------------------------------------------------------------


def test_the_schema_describes_the_keys_as_the_loader_reads_them():
    schema = json_schema()
    defaults = schema["properties"]["network"]["properties"]["defaults"]["properties"]
    mapping = schema["properties"]["network"]["properties"]["super_peers"]["items"]["oneOf"][1]["properties"]
    for properties in (defaults, mapping):
        assert properties["cpu"]["maximum"] == MAX_CPU and properties["cpu"]["exclusiveMinimum"] == 0
        assert "operations per second" in properties["cpu"]["description"]
        assert "bytes" in properties["input_buffer"]["description"]
    costs = schema["properties"]["cpu_costs"]
    assert set(costs["properties"]) == {f.name for f in dataclasses.fields(CpuCosts)}
    assert costs["additionalProperties"] is False
    for name, spec in costs["properties"].items():
        assert spec["type"] == "integer" and spec["minimum"] == 0
        assert f"(default {getattr(CpuCosts(), name)})" in spec["description"]


def test_the_schema_accepts_every_written_form_the_loader_accepts(tmp_path):
    doc = with_limits(
        {"cpu": 1e9, "input_buffer": "1MiB"},
        {"cpu": 1, "input_buffer": 1, "capacity": 10, "pos": [0, 0]},
        {"box": 0, "projection": 0, "aggregate": 0, "record": 0},
    )
    VALIDATOR.validate(doc)
    load_scenario(write(tmp_path, doc))


# --- the explicit file ----------------------------------------------------------------------------------


def test_expand_writes_the_keys_so_the_file_loads_back_equal(tmp_path):
    doc = with_limits({"cpu": 1e7, "input_buffer": "64KB"}, {"cpu": 2e6, "input_buffer": 100}, {"record": 12})
    scenario, text = expand(write(tmp_path, doc))
    explicit = yaml.safe_load(text)
    VALIDATOR.validate(explicit)
    again = load_scenario(write(tmp_path, text, "explicit.yaml"))
    assert again == scenario
    assert (again.cpus, again.input_buffers, again.cpu_costs) == (
        scenario.cpus,
        scenario.input_buffers,
        scenario.cpu_costs,
    )
    assert again.cpu_costs.record == 12


def test_expand_of_an_imported_network_keeps_the_defaults(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["network"] = {"import": {"topohub": "topozoo/Geant2012"}, "defaults": {"cpu": 4e6, "input_buffer": "32KB"}}
    doc["thin_peers"] = [{"id": "P0", "attach": "AT"}, {"id": "P1", "attach": "AT"}]
    doc["cpu_costs"] = {"box": 5}
    scenario, text = expand(write(tmp_path, doc))
    assert scenario.cpus == tuple((sp, 4e6) for sp in scenario.super_peers)
    assert scenario.input_buffers == tuple((sp, 32000) for sp in scenario.super_peers)
    explicit = yaml.safe_load(text)
    assert "import" not in explicit["network"]
    VALIDATOR.validate(explicit)
    again = load_scenario(write(tmp_path, text, "explicit.yaml"))
    assert again == scenario and again.cpu_costs.box == 5
