"""Changes to a scenario file's values from the command line: ``--set KEY=VALUE`` and ``--seed N``, and
the points of a parameter sweep (docs/SCENARIOS.md, docs/SWEEPS.md).

A key is a path into the YAML document as the loader's errors write it, ``network.generate.transit`` or
``subscriptions[0].generate.count``; a value is read as YAML (``100``, ``0.3``, ``1Mbit``, ``[1, 4]``).
Three short keys name what studies vary most: ``subscriptions``, ``thin_peers`` and ``streams`` stand for
the ``count`` of the generators in that list (several share the value in proportion to their counts).
The change is made to the parsed document before it is validated, so a value set this way is checked
exactly like one written in the file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence

from topologies.bounds import check_value, parse_yaml
from topologies.errors import ScenarioError, shown

_STEP = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|\[(?P<index>[0-9]{1,18})\]")
COUNT_ALIASES = ("subscriptions", "thin_peers", "streams")


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


def resolve(
    doc: object, key: str, value: object, file: str, flag: str = "--set"
) -> list[tuple[list[str | int], object]]:
    """The paths ``key`` names in ``doc`` and the value each takes.  A count alias names the ``count`` of
    the generators in its list: of the one generator, ``value`` itself; of several, ``value`` (a whole
    number) shared in proportion to their counts in the file, by largest remainders (each keeps at least
    one), so that a sweep over ``subscriptions=...`` scales a mix of generators as a whole."""
    if key not in COUNT_ALIASES or not isinstance(doc, dict):
        return [(steps(key, flag), value)]
    entries = doc.get(key)
    generators = [k for k, e in enumerate(entries or []) if isinstance(e, dict) and list(e) == ["generate"]]
    if not generators:
        raise ScenarioError(
            f"{file}: {flag} {key}: stands for the count of the generators in {key} ({key}[i].generate),"
            f" and the file has none; name the key in full, e.g. {key}[0].generate.count"
        )
    paths = [[key, k, "generate", "count"] for k in generators]
    if len(generators) == 1:
        return [(paths[0], value)]
    counts = [
        entries[k]["generate"].get("count") if isinstance(entries[k]["generate"], dict) else None for k in generators
    ]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise ScenarioError(
            f"{file}: {flag} {key}: the file's {len(generators)} generators in {key} need whole counts to share"
            f" {shown(value)} in proportion to, got {shown(counts)}"
        )
    if not isinstance(value, int) or isinstance(value, bool) or value < len(generators):
        raise ScenarioError(
            f"{file}: {flag} {key}: shared among the file's {len(generators)} generators in {key}: expected a"
            f" whole number of at least {len(generators)}, got {shown(value)}"
        )
    return list(zip(paths, _shares(value, counts), strict=True))


def _shares(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` (at least ``len(weights)``) split in proportion to ``weights`` by largest remainders (ties
    to the earlier); a share that comes out 0 takes 1 from the largest."""
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda k: (-(exact[k] - shares[k]), k))
    for k in order[: total - sum(shares)]:
        shares[k] += 1
    for k, share in enumerate(shares):
        if share == 0:
            shares[max(range(len(shares)), key=lambda j: (shares[j], -j))] -= 1
            shares[k] = 1
    return shares


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
        for path, share in resolve(doc, key, value, file, flag):
            _assign(doc, key, path, share, file, flag)
    return doc


def _assign(doc: object, key: str, path: list[str | int], value: object, file: str, flag: str) -> None:
    """Set ``value`` at ``path`` in ``doc`` (``key`` as the user wrote it, for the messages)."""
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


def _written(path: Sequence[str | int]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text
