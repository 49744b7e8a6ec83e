"""Hostile but parseable input: every case a one-line ScenarioError naming file, key and value, at once.

Values that overflow, sizes no machine holds, nesting past any stack, files that never end: refused at the
boundary, before anything is built, with the bound named; valid YAML features (merge keys, a byte-order
mark) accepted.
"""

from __future__ import annotations

import copy
import os
import re

import pytest
import yaml

from matcher import QueryError
from matcher.parser import parse_condition, parse_query
from tests.topologies.test_loader_errors import BASE, edit, error_of, write
from topologies.loader import load_scenario


def edited(*changes) -> dict:
    """A copy of the base scenario with ``(dotted key, value)`` changes (``...`` deletes)."""
    doc = copy.deepcopy(BASE)
    for dotted, value in changes:
        edit(doc, dotted, value)
    return doc


@pytest.mark.parametrize(
    ("dotted", "value", "expected"),
    [
        ("streams[0].rate", 1e308, r"streams: inf tuples over 10 s .* exceed the cap of 50,000,000 \(set STREAMGLOBE"),
        ("streams[0].rate", 1e8, r"streams: 1e\+09 tuples over 10 s .* cap of 50,000,000"),
        ("duration", 1e308, r"duration: must be at most 4,000,000 s \(46 days"),
        ("network.defaults.bandwidth", "1e400Gbit", r"between 0.001 bit/s and 1 Pbit/s, got '1e400Gbit'"),
        ("network.defaults.bandwidth", "1e-300bit", r"between 0.001 bit/s and 1 Pbit/s, got '1e-300bit'"),
        ("network.defaults.bandwidth", 1e300, r"between 0.001 bit/s and 1 Pbit/s"),
        ("network.defaults.latency", "1e999999999us", r"latency: latency must be at most 86,400 s, got '1e999999"),
        ("network.defaults.latency", 1e300, r"latency must be at most 86,400 s"),
        ("header_bytes", 10**20, r"header_bytes: must be <= 65,535, got 100000000000000000000$"),
        ("streams[0].schema.x.distribution", {"normal": [1e308, 1e308]}, r"normal: values would overflow"),
        ("streams[0].schema.x.distribution", {"uniform": [-1.7e308, 1.7e308]}, r"uniform: range too wide"),
        (
            "streams[0].schema.n.distribution",
            {"choice": {"values": [1, 2], "weights": [1e308, 1e308]}},
            r"weights: weights must have a finite sum",
        ),
    ],
)
def test_values_past_what_the_engines_represent_are_refused(tmp_path, dotted, value, expected):
    doc = edited((dotted, value))
    message = error_of(write(tmp_path, doc))
    assert re.search(expected, message), message
    assert "s.yaml" in message


@pytest.mark.parametrize(
    ("generate", "expected"),
    [
        ({"model": "grid", "rows": 1000, "cols": 1000}, "grid of 1,000,000 super-peers exceeds the cap of 50,000"),
        ({"model": "barabasi-albert", "n": 10**7, "m": 2}, "barabasi-albert of 10,000,000 super-peers"),
        ({"model": "tree", "branching": 10, "depth": 40}, "tree of 1,111,111,111,111 super-peers"),
    ],
)
def test_generator_sizes_past_the_cap_are_refused_before_generating(tmp_path, generate, expected):
    doc = edited(("network.super_peers", ...), ("network.links", ...), ("network.generate", generate))
    assert expected in error_of(write(tmp_path, doc))


def test_the_caps_are_configurable(tmp_path, monkeypatch):
    doc = edited(("streams[0].rate", 1e8))
    monkeypatch.setenv("STREAMGLOBE_MAX_TUPLES", str(10**10))
    assert load_scenario(write(tmp_path, doc)).streams[0].rate == 1e8
    monkeypatch.setenv("STREAMGLOBE_MAX_TUPLES", "lots")
    assert "STREAMGLOBE_MAX_TUPLES: expected an integer, got 'lots'" in error_of(write(tmp_path, doc))


def test_huge_integers_deep_nesting_and_alias_bombs_are_one_short_line(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False)
    digits = error_of(write(tmp_path, text.replace("seed: 1", "seed: " + "9" * 5000)))
    assert "YAML error" in digits and len(digits) < 200
    deep = error_of(write(tmp_path, text + "extra: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert deep.endswith("YAML nested deeper than 64 levels")
    anchors = ["&a [x,x,x,x,x,x,x,x,x]"] + [f"&{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    bomb = error_of(write(tmp_path, text.replace("name: t", "name: [" + ", ".join(anchors) + "]")))
    assert bomb.startswith(f"{tmp_path / 's.yaml'}: name: expected") and len(bomb) < 400


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_only_regular_files_are_read(tmp_path, kind):
    if kind == "fifo":
        path = str(tmp_path / "pipe.yaml")
        os.mkfifo(path)
    else:
        path = str(tmp_path) if kind == "directory" else "/dev/zero"
    assert error_of(path) == f"{path}: not a regular file"


def test_replay_must_be_a_regular_readable_csv(tmp_path):
    os.mkfifo(tmp_path / "rows.csv")
    doc = edited(("streams[0].schema", ...), ("streams[0].replay", "rows.csv"))
    assert "replay file 'rows.csv' is not a regular file" in error_of(write(tmp_path, doc))
    os.remove(tmp_path / "rows.csv")
    (tmp_path / "rows.csv").write_text("x\n" + "1" * 200_000 + "\n")
    assert "rows.csv: not a readable CSV file: field larger than field limit" in error_of(write(tmp_path, doc))
    (tmp_path / "rows.csv").write_text("\ufeffx\n1\n2\n")  # a byte-order mark, as spreadsheets write
    assert load_scenario(write(tmp_path, doc)).streams[0].attribute_names == ("x",)


def test_merge_keys_and_a_byte_order_mark_are_valid_yaml(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False)
    merged = text.replace(
        "  defaults:\n    bandwidth: 100Mbit\n    latency: 2ms\n",
        "  defaults: &d\n    bandwidth: 100Mbit\n    latency: 2ms\n  x: {<<: *d}\n",
    )
    assert "x: {<<: *d}" in merged
    # the merge resolves (the unknown key `x` is then reported, not the merge)
    assert "network: unknown key 'x'" in error_of(write(tmp_path, merged))
    links = text.replace("  - - SP0\n    - SP1\n", "  - [SP0, SP1, {<<: {latency: 3ms}, bandwidth: 1Mbit}]\n")
    assert "<<" in links
    scenario = load_scenario(write(tmp_path, links))
    assert scenario.links[0].bandwidth == 1e6 and scenario.links[0].latency * 1000 == 3
    assert load_scenario(write(tmp_path, "\ufeff" + text)).name == "t"


@pytest.mark.parametrize("text", ["(" * 400 + "a > 1" + ")" * 400, "NOT " * 2000 + "a > 1"])
def test_deeply_nested_conditions_are_a_query_error(text):
    for parse in (parse_condition, lambda t: parse_query("SELECT a FROM s WHERE " + t)):
        with pytest.raises(QueryError, match="condition nests too deeply"):
            parse(text)
