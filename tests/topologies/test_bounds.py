"""The one bound on user-controlled structure (topologies/bounds.py): YAML text from any path and Python
values given to the library, nesting, self-containment, digits and types, each a one-line error naming
where the value came from."""

from __future__ import annotations

import sys

import pytest

from topologies.bounds import MAX_DEPTH, check_value, parse_yaml
from topologies.errors import InputError, ScenarioError
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_yaml_text_is_bounded_wherever_it_comes_from():
    assert parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") == nested(MAX_DEPTH)
    with pytest.raises(ScenarioError, match=r"^--set seed: YAML nested deeper than 64 levels$"):
        parse_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "--set seed")
    digits = sys.get_int_max_str_digits()
    with pytest.raises(ScenarioError, match=rf"^w.yaml: YAML error: an integer of more than {digits:,} digits$"):
        parse_yaml("9" * (digits + 1), "w.yaml")
    with pytest.raises(InputError, match=r"^f: line 1, column 8: YAML error: duplicate key 'a'$"):
        parse_yaml("{a: 1, a: 2}", "f")


def test_python_values_are_held_to_what_a_yaml_document_could_hold():
    check_value({"a": [1, 2.5, None, True, "x", b"y"], "b": nested(MAX_DEPTH - 1)}, "v")  # the mapping is a level too
    shared: list = ["leaf"]
    for _ in range(200):  # 2**200 leaves once expanded: walked once per distinct list
        shared = [shared, shared]
    with pytest.raises(ScenarioError, match=r"^v: nested deeper than 64 levels$"):
        check_value(shared, "v")
    loop: list = []
    loop.append(loop)
    for value, message in [
        (nested(MAX_DEPTH + 1), "nested deeper than 64 levels"),
        (nested(100_000), "nested deeper than 64 levels"),
        ({"a": loop}, "a value that contains itself"),
        ([object()], "not a value a scenario file could hold: <object object at"),
        ({"x": 1j}, r"not a value a scenario file could hold: 1j \(complex\)"),
    ]:
        with pytest.raises(ScenarioError, match=rf"^v: {message}"):
            check_value(value, "v")


def test_changes_from_python_are_checked_before_they_are_copied():
    with pytest.raises(ScenarioError, match=r"^topologies/figure1.yaml: --set seed: nested deeper than 64 levels$"):
        load_scenario(FIGURE1, [("seed", nested(100_000))])  # copy.deepcopy would blow the stack
    with pytest.raises(ScenarioError, match=r"^topologies/figure1.yaml: changes: expected \(key, value\) pairs"):
        load_scenario(FIGURE1, {"seed": 1})
    with pytest.raises(ScenarioError, match=r"^--set 5: a key is a text"):
        load_scenario(FIGURE1, [(5, 1)])
