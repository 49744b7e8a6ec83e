"""Defensive decoding: what a live node does with a message that is not what its topic carries.

A live node reads from a broker that others publish to (without ``--secure``, anyone at all), so every
payload is decoded as untrusted: a message that does not decode, names something that does not exist or
claims a sender its topic does not belong to raises :class:`MalformedMessage`.  The node's connection drops
it and counts it per topic and sender (:class:`Rejects`); the first one from each sender is also logged.
It is never fatal, and it never reaches a counter: the traffic of the run stays exactly what the real
nodes sent.
"""

from __future__ import annotations

import json
import logging
import math

from topologies.errors import EngineError

MAX_TOPICS = 256  # distinct topics counted one by one (wildcard subscriptions let a sender invent topics)
MAX_SENDERS = 256  # distinct senders per topic counted one by one, and senders named on stderr
OTHER = "(others)"  # where the counts beyond those caps go
_log = logging.getLogger("peers.live")


class MalformedMessage(EngineError):
    """A received message that is not what its topic carries; ``sender`` is who published it (as the topic
    layout says: under ``--secure`` the broker's ACL guarantees it, otherwise it is only what the topic
    claims)."""

    def __init__(self, reason: str, sender: str):
        super().__init__(reason)
        self.sender = sender


class Rejects:
    """The malformed messages a node dropped, per topic and sender."""

    def __init__(self, node: str):
        self.node = node
        self.counts: dict[str, dict[str, int]] = {}
        self._told: set[str] = set()

    def add(self, topic: str, err: MalformedMessage) -> None:
        if topic not in self.counts and len(self.counts) >= MAX_TOPICS:
            topic = OTHER
        senders = self.counts.setdefault(topic, {})
        sender = err.sender if err.sender in senders or len(senders) < MAX_SENDERS else OTHER
        senders[sender] = senders.get(sender, 0) + 1
        if len(self._told) < MAX_SENDERS and err.sender not in self._told:
            self._told.add(err.sender)
            _log.warning(
                "%s: dropped a malformed message on %s from %s: %s (further ones from %s are only counted)",
                self.node, _shown(topic), _shown(err.sender), _shown(str(err)), _shown(err.sender),
            )  # fmt: skip

    @property
    def total(self) -> int:
        return sum(n for senders in self.counts.values() for n in senders.values())

    def to_json(self) -> dict[str, dict[str, int]]:
        return {topic: dict(sorted(senders.items())) for topic, senders in sorted(self.counts.items())}


def merge_counts(into: dict[str, dict[str, int]], counts: dict[str, dict[str, int]]) -> None:
    """Add per-topic, per-sender ``counts`` (a :meth:`Rejects.to_json`) to ``into``."""
    for topic, senders in counts.items():
        target = into.setdefault(topic, {})
        for sender, n in senders.items():
            target[sender] = target.get(sender, 0) + n


def _shown(text: str, limit: int = 120) -> str:
    text = text.encode("unicode_escape", "replace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- checked access to decoded JSON ---------------------------------------------------------------------


def json_object(payload: bytes, sender: str) -> dict:
    """``payload`` as a JSON object.  Raises :class:`MalformedMessage` for anything else."""
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested past the stack, huge integers
        raise MalformedMessage(f"not JSON: {err}", sender) from None
    if not isinstance(doc, dict):
        raise MalformedMessage(f"not a JSON object but {type(doc).__name__}", sender)
    return doc


def integer(doc: dict, key: str, sender: str, *, minimum: int = 0) -> int:
    """``doc[key]`` as an integer of at least ``minimum`` (booleans are not integers)."""
    value = doc.get(key)
    if type(value) is not int or value < minimum:
        raise MalformedMessage(f"{key!r} must be an integer >= {minimum}, got {_shown(repr(value), 40)}", sender)
    return value


def number(doc: dict, key: str, sender: str, *, optional: bool = False) -> float | None:
    """``doc[key]`` as a finite float (None when ``optional`` and the key is missing or null)."""
    value = doc.get(key)
    if value is None and optional:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise MalformedMessage(f"{key!r} must be a finite number, got {_shown(repr(value), 40)}", sender)
    return float(value)


def text(doc: dict, key: str, sender: str, *, optional: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise MalformedMessage(f"{key!r} must be a string, got {_shown(repr(value), 40)}", sender)
    return value


def check(condition: bool, reason: str, sender: str) -> None:
    """Raises :class:`MalformedMessage` with ``reason`` unless ``condition``."""
    if not condition:
        raise MalformedMessage(reason, sender)
