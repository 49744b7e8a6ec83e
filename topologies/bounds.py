"""The bounds on what a user may hand the emulator (docs/SCENARIOS.md, "Bounds"), kept in one place.

Every path that reads structure a user controls goes through one of these, whatever the entry point: a
scenario file, a ``--set`` or ``--vary`` value, a sweep file, or a Python value given to the library
(``streamglobe.build``, ``changes``, a sweep's grid).  YAML text is parsed by :func:`parse_yaml`, which
refuses nesting past :data:`MAX_DEPTH` from the parser's events (no objects built) and turns every
failure, an integer too long for Python included, into one line naming where it came from.  A Python value
is checked by :func:`check_value`: the same nesting bound, no value containing itself, only the types a
YAML document holds.  :func:`cap` reads a size cap that an environment variable may move.
"""

from __future__ import annotations

import datetime
import os
import sys

import yaml

from topologies.errors import InputError, ScenarioError, shown

MAX_DEPTH = 64  # nesting of collections: no scenario key lies deeper than 8
MAX_SWEEP_VALUES = 10_000  # values of one varied key
MAX_SWEEP_POINTS = ("STREAMGLOBE_MAX_SWEEP_POINTS", 10_000)  # points of a sweep's grid, all loaded first
MAX_GENERATED = ("STREAMGLOBE_MAX_GENERATED", 100_000)  # entries the generators of one list make together:
# 100,000 subscriptions validate in about 25 s
MAX_NODE_PAIRS = ("STREAMGLOBE_MAX_NODE_PAIRS", 2_000_000)  # pairs a generator weighs: at most ~1.3 GiB, 45 s
"""(environment variable, default) of a cap; :func:`cap` reads it."""

# libyaml's scanner and parser when PyYAML was built with them (the wheels are): 4-6x faster on large files
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN = (str, int, float, bool, type(None), bytes, datetime.date)  # scalars a safe YAML load makes
_COLLECTIONS = (dict, list, tuple, set, frozenset)


def cap(name: str, default: int) -> int:
    """A size cap: ``default``, or the environment variable ``name`` (an integer) to raise or lower it."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise ScenarioError(
            f"environment variable {name}: expected an integer, got {shown(os.environ[name])}"
        ) from None


class _StrictLoader(_SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML keeps the last one silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *defaults`: merged by construct_mapping, where explicit keys win
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:  # a list, a mapping or a !!set as a key
            raise yaml.constructor.ConstructorError(
                None, None, f"unhashable key {shown(key)}", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {shown(key)}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_bool(loader: _StrictLoader, node: yaml.ScalarNode) -> bool:
    value = loader.construct_scalar(node)
    if value.lower() not in loader.bool_values:  # SafeLoader raises KeyError on `!!bool maybe`
        raise yaml.constructor.ConstructorError(None, None, f"not a boolean: {shown(value)}", node.start_mark)
    return loader.bool_values[value.lower()]


def _construct_timestamp(loader: _StrictLoader, node: yaml.ScalarNode) -> object:
    value = loader.construct_scalar(node)
    if not loader.timestamp_regexp.match(value):  # SafeLoader raises AttributeError on `!!timestamp abc`
        raise yaml.constructor.ConstructorError(None, None, f"not a timestamp: {shown(value)}", node.start_mark)
    return loader.construct_yaml_timestamp(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


def _nested_deeper(text: str, limit: int) -> bool:
    """Whether YAML collections in ``text`` nest deeper than ``limit``, from its events (no objects built).

    Stops at the first collection past the limit, so the deep part is never scanned: PyYAML's scanner
    takes time quadratic in the nesting depth (4,000 nested ``[`` took 14 s to scan to the end).
    """
    depth = 0
    for event in yaml.parse(text, Loader=_StrictLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                return True
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return False


def parse_yaml(text: str, where: str, error: type[InputError] = ScenarioError) -> object:
    """The YAML document ``text`` holds, parsed by a safe loader that refuses duplicate keys and malformed
    tags; raises ``error`` as one line starting with ``where`` (a file, or ``--set KEY``) for a syntax
    error (with its line and column), nesting deeper than :data:`MAX_DEPTH`, or an integer of more digits
    than Python converts."""
    try:
        if _nested_deeper(text, MAX_DEPTH):
            raise error(f"{where}: YAML nested deeper than {MAX_DEPTH} levels")
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds no arbitrary objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(str(err.problem or err.context or "syntax error").split())
        raise error(f"{where}: {at}YAML error: {problem}") from err
    except yaml.YAMLError as err:
        raise error(f"{where}: YAML error: {' '.join(str(err).split())}") from err
    except ValueError as err:  # an integer of more digits than Python converts (4,300 by default)
        digits = sys.get_int_max_str_digits()
        problem = f"an integer of more than {digits:,} digits" if "digits" in str(err) else shown(str(err))
        raise error(f"{where}: YAML error: {problem}") from None
    except RecursionError:
        raise error(f"{where}: YAML nested too deeply") from None


def check_value(value: object, where: str, error: type[InputError] = ScenarioError) -> None:
    """Raises ``error`` (one line starting with ``where``) unless ``value`` is what a YAML document could
    hold: scalars, and mappings and sequences of them nested at most :data:`MAX_DEPTH` levels, none
    containing itself.  Shared parts (YAML aliases, the same Python list twice) are walked once, so the
    check takes time linear in the distinct collections, whatever the value expands to."""
    done: set[int] = set()  # collections whose every part was checked
    path: set[int] = set()  # the collections enclosing the one being checked
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            path.discard(id(node))
            done.add(id(node))
            continue
        if isinstance(node, _PLAIN):
            continue
        if not isinstance(node, _COLLECTIONS):
            raise error(f"{where}: not a value a scenario file could hold: {shown(node)} ({type(node).__name__})")
        if id(node) in done:
            continue
        if id(node) in path:
            raise error(f"{where}: a value that contains itself")
        if len(path) >= MAX_DEPTH:
            raise error(f"{where}: nested deeper than {MAX_DEPTH} levels")
        path.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in (node.values() if isinstance(node, dict) else node))
