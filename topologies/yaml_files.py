"""Reading a scenario file's YAML safely (docs/SCENARIOS.md, bounds): a regular UTF-8 file of bounded size
and nesting, parsed by a safe loader that refuses duplicate keys and malformed tags, every problem one
:class:`ScenarioError` line naming the file (and the line, for a YAML error).
"""

from __future__ import annotations

import os
import stat

import yaml

from topologies.errors import ScenarioError, shown

MAX_FILE_BYTES = 16 * 2**20  # ~100,000 subscriptions; loading YAML takes about 5 s a megabyte
MAX_YAML_DEPTH = 64  # nesting of YAML collections

# libyaml's scanner and parser when PyYAML was built with them (the wheels are): 4-6x faster on large files
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; otherwise ScenarioError
    naming the path (a device, a FIFO or a directory is refused before it is opened for reading:
    ``/dev/zero`` would never end, a FIFO would block)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise ScenarioError(f"{path}: {info.st_size:,} bytes, over the limit of {limit:,}")
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: file not found") from None
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read: {err.strerror or err}") from None
    except ValueError:  # os.stat refuses a NUL character, which no file name holds
        raise ScenarioError(f"{shown(path)}: bad file name (a NUL character)") from None
    if len(data) > limit:
        raise ScenarioError(f"{path}: over the limit of {limit:,} bytes")
    return data


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


def read_yaml(path: str) -> object:
    """The parsed document of the YAML file at ``path``; ScenarioError naming the file for anything wrong."""
    data = _read_regular_file(path, MAX_FILE_BYTES)
    try:
        text = data.decode("utf-8-sig")  # a UTF-8 byte-order mark is accepted
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: cannot read: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        if _nested_deeper(text, MAX_YAML_DEPTH):
            raise ScenarioError(f"{path}: YAML nested deeper than {MAX_YAML_DEPTH} levels")
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds no arbitrary objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(str(err.problem or err.context or "syntax error").split())
        raise ScenarioError(f"{path}: {where}YAML error: {problem}") from err
    except yaml.YAMLError as err:
        raise ScenarioError(f"{path}: YAML error: {' '.join(str(err).split())}") from err
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise ScenarioError(f"{path}: YAML error: {shown(str(err))}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: YAML nested too deeply") from None
