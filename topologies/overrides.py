"""Changes to a scenario file's values from the command line: ``--set KEY=VALUE`` and ``--seed N``, and
the points of a parameter sweep (docs/SCENARIOS.md, docs/SWEEPS.md).

A key is a path into the YAML document as the loader's errors write it, ``network.generate.transit`` or
``subscriptions[0].generate.count``; a value is read as YAML (``100``, ``0.3``, ``1Mbit``, ``[1, 4]``).
Two short keys name what studies vary most: ``subscriptions`` and ``thin_peers`` stand for the ``count``
of the one generator in that list.  The change is made to the parsed document before it is validated,
so a value set this way is checked exactly like one written in the file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence

from topologies.bounds import check_value, parse_yaml
from topologies.errors import ScenarioError, shown

_STEP = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|\[(?P<index>[0-9]{1,18})\]")
COUNT_ALIASES = ("subscriptions", "thin_peers")


def parse_assignment(text: str, flag: str = "--set") -> tuple[str, object]:
    """``KEY=VALUE`` as ``(key, value read as YAML)``; raises ScenarioError for text without ``=``, a key
    that is not a path, or a value that is not YAML or oversteps its bounds (topologies/bounds.py)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"{flag} {shown(text)}: expected KEY=VALUE")
    steps(key, flag)
    return key, parse_yaml(raw, f"{flag} {key}") if raw.strip() else None


def steps(key: str, flag: str = "--set") -> list[str | int]:
    """The path ``a.b[0].c`` as ``["a", "b", 0, "c"]``; ScenarioError when it is not one."""
    if not isinstance(key, str):
        raise ScenarioError(f"{flag} {shown(key)}: a key is a text, e.g. network.generate.transit")
    found: list[str | int] = []
    for part in key.split("."):
        match_at = 0
        while match_at < len(part):
            match = _STEP.match(part, match_at)
            if match is None or (match.group("key") and match_at):
                raise ScenarioError(f"{flag} {shown(key)}: not a key path (e.g. network.generate.transit)")
            found.append(match.group("key") if match.group("key") else int(match.group("index")))
            match_at = match.end()
        if not part:
            raise ScenarioError(f"{flag} {shown(key)}: not a key path (e.g. network.generate.transit)")
    return found


def resolve(doc: object, key: str, file: str, flag: str = "--set") -> list[str | int]:
    """The path ``key`` names in ``doc``: a count alias becomes the path of its generator's ``count``."""
    if key in COUNT_ALIASES and isinstance(doc, dict):
        entries = doc.get(key)
        generators = [k for k, e in enumerate(entries or []) if isinstance(e, dict) and list(e) == ["generate"]]
        if len(generators) != 1:
            found = "none" if not generators else f"{len(generators)}"
            raise ScenarioError(
                f"{file}: {flag} {key}: stands for the count of the one generator in {key} ({key}[i].generate),"
                f" and the file has {found}; name the key in full, e.g. {key}[0].generate.count"
            )
        return [key, generators[0], "generate", "count"]
    return steps(key, flag)


def apply_overrides(doc: object, overrides: Sequence[tuple[str, object]], file: str, flag: str = "--set") -> object:
    """A copy of the parsed document ``doc`` with each ``(key, value)`` set, in order.  Every step but the
    last must exist; the last may add a key to a mapping (the loader then checks that it is one it
    knows).  Raises ScenarioError naming the file, the flag and the key, also for a value no scenario file
    could hold (topologies/bounds.py)."""
    if not overrides:
        return doc
    for key, value in overrides:
        check_value(value, f"{file}: {flag} {shown(key) if not isinstance(key, str) else key}")
    doc = copy.deepcopy(doc)
    for key, value in overrides:
        path = resolve(doc, key, file, flag)
        here = doc
        for depth, step in enumerate(path):
            last = depth == len(path) - 1
            where = _written(path[:depth]) or "the top level"
            if isinstance(step, int):
                if not isinstance(here, list):
                    raise ScenarioError(f"{file}: {flag} {key}: {where} is not a list")
                if step >= len(here):
                    raise ScenarioError(f"{file}: {flag} {key}: {where} has {len(here)} entries, no [{step}]")
            else:
                if not isinstance(here, dict):
                    raise ScenarioError(f"{file}: {flag} {key}: {where} is not a mapping")
                if step not in here and not last:
                    raise ScenarioError(f"{file}: {flag} {key}: {where} has no key {step!r}")
            if last:
                here[step] = value
            else:
                here = here[step]
    return doc


def _written(path: Sequence[str | int]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text
