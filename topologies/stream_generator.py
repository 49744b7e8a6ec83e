"""The streams generator: many streams of one schema from a rule (docs/SCENARIOS.md, "Workload generators").

A ``streams`` list may hold ``{generate: {count, schema, rate[, sources, prefix, seed]}}`` beside written
streams.  As the thin-peer and subscription generators (topologies/workload_generators.py), it returns
plain entries ``{id, source, rate, schema}``, exactly as a user would write them, which the loader then
checks like any other; ``run.py expand`` writes them out.  Draws come from
``np.random.default_rng([seed, 3, position])``.

Every stream gets the same ``schema`` (a stream's schema mapping, or a replayed CSV's ``replay``); its
``rate`` is a number, or ``[lo, hi]`` drawn uniformly (to a thousandth of a tuple per second); its source is
a thin-peer drawn by ``sources``: ``random`` (uniform), ``spread`` (round robin over the thin-peers), a
list of thin-peers (uniform over them), ``demand`` or ``{weight: NAME}`` (a super-peer in proportion to an
imported network's node weight among those with thin-peers, then one of its thin-peers uniformly).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from topologies.errors import shown
from topologies.workload_generators import Reader, _chances, _count, _range, _span, node_weights

STREAM_KIND = 3
STREAM_GENERATOR_KEYS = {"count": True, "prefix": False, "seed": False, "sources": False, "rate": True}
STREAM_GENERATOR_KEYS |= {"schema": False, "replay": False}
SOURCE_RULES = ("random", "spread", "demand")


def streams(
    reader: Reader,
    value: object,
    path: str,
    *,
    seed: int,
    position: int,
    homes: Mapping[str, str],
    weights: Mapping[str, Mapping[str, float]],
    id_pattern,
    made: int = 0,
) -> tuple[list[dict], str]:
    """The stream entries of the generator ``value`` at ``path`` (``streams[i].generate``), and one line
    saying what it made.  ``homes``: each thin-peer's super-peer, in the file's order; ``id_pattern``: what
    a stream id must match (it is named bare in queries); ``made``: the streams the list's generators before
    this one made (they count toward the cap on generated entries)."""
    spec = reader.mapping(value, path, STREAM_GENERATOR_KEYS)
    count = _count(reader, spec, path, "streams", made)
    prefix = spec.get("prefix", "s")
    if not isinstance(prefix, str) or not prefix:
        reader.fail(f"{path}.prefix", f"expected a non-empty string, got {shown(prefix)}")
    reader.identifier(prefix + "0", f"{path}.prefix", id_pattern)
    seed = reader.integer(spec["seed"], f"{path}.seed") if "seed" in spec else seed
    if ("schema" in spec) == ("replay" in spec):
        reader.fail(path, "expected exactly one of 'schema' and 'replay'")
    lo, hi = _range(reader, spec["rate"], f"{path}.rate", minimum=0)
    if lo <= 0:
        reader.fail(f"{path}.rate", f"must be positive, got {shown(spec['rate'])}")
    peers = list(homes)
    if not peers:
        reader.fail(path, "no thin-peer to publish (thin_peers is empty)")
    rng = np.random.default_rng([seed, STREAM_KIND, position])
    rule = spec.get("sources", "random")
    if isinstance(rule, list):
        if not rule:
            reader.fail(f"{path}.sources", "expected at least one thin-peer, got []")
        listed = [reader.reference(p, homes, f"{path}.sources[{k}]", "thin-peer") for k, p in enumerate(rule)]
        sources = [listed[int(k)] for k in rng.integers(0, len(listed), count)]
        told = f"from {len(listed)} listed thin-peers"
    elif rule == "random":
        sources = [peers[int(k)] for k in rng.integers(0, len(peers), count)]
        told = "from random thin-peers"
    elif rule == "spread":
        sources = [peers[k % len(peers)] for k in range(count)]
        told = "round robin over the thin-peers"
    elif rule == "demand" or isinstance(rule, dict):
        name, weight = node_weights(reader, rule, f"{path}.sources", weights)
        at_home: dict[str, list[str]] = {}
        for peer, home in homes.items():
            at_home.setdefault(home, []).append(peer)
        places = list(at_home)
        chances = _chances(reader, [weight.get(sp, 0.0) for sp in places], f"{path}.sources", name)
        sources = []
        for k in rng.choice(len(places), size=count, p=chances):
            there = at_home[places[int(k)]]
            sources.append(there[int(rng.integers(0, len(there)))])
        told = f"from thin-peers whose super-peers are drawn by their {name}"
    else:
        reader.fail(
            f"{path}.sources",
            f"unknown rule {shown(rule)} (expected one of: {', '.join(SOURCE_RULES)}, {{weight: NAME}},"
            " or a list of thin-peers)",
        )
    rates = [lo] * count if lo == hi else [round(float(r), 3) or lo for r in rng.uniform(lo, hi, count)]
    body: dict[str, Any] = {"schema": spec["schema"]} if "schema" in spec else {"replay": spec["replay"]}
    entries = [
        {"id": f"{prefix}{k}", "source": source, "rate": rate, **copy.deepcopy(body)}
        for k, (source, rate) in enumerate(zip(sources, rates, strict=True))
    ]
    shown_rate = f"{lo:g} tuples/s" if lo == hi else f"rates uniform in [{lo:g}, {hi:g}] tuples/s"
    return entries, f"{path}: {count} stream{'s' * (count > 1)} {_span(prefix, count)} at {shown_rate} {told}"
