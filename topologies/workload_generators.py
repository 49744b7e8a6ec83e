"""Workload generators: thin-peers and subscriptions drawn from rules, seeded (docs/SCENARIOS.md).

A ``thin_peers`` or ``subscriptions`` list may hold, beside written-out entries, entries of the form
``{generate: {...}}``.  The loader reads each generator's parameters here (one-line errors naming the
file, the key path and the value), and the generator returns plain entries, exactly as a user would
have written them, which the loader then checks like every other entry.  So a generated scenario is
validated the same way, and ``run.py expand`` can write the explicit file that loads to the same
:class:`Scenario`.

Every draw comes from ``np.random.default_rng([seed, kind, position])``: ``seed`` the generator's own or
the scenario's, ``kind`` 1 for thin-peers and 2 for subscriptions, ``position`` the entry's index in its
list; the same file and seed always give the same entries, whatever else the file holds.

Subscriptions: each one picks a stream and a subscriber, then a box over a few attributes (its
*dimensions*) whose centre comes from an *interest model* (hot spots, uniform, or Zipf-popular regions)
and whose side is a fraction of each attribute's range; with probability ``overlap`` it refines an earlier
subscription of the stream instead (a sub-box of that one's box, with its cut: its predicate implies the
earlier one's, the situation stream sharing reuses); optionally a cut on another attribute and an OR of a
second box; a SELECT of a given width; arrival times from a Poisson process or in waves; and a holding
time after which it leaves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from matcher import Choice, Distribution, Empirical, Normal, Uniform
from matcher.text import name_to_text
from topologies.bounds import MAX_GENERATED as GENERATED_CAP
from topologies.bounds import MAX_NODE_PAIRS, cap
from topologies.errors import shown
from topologies.model import StreamSpec

THIN_PEER_KIND, SUBSCRIPTION_KIND = 1, 2
ATTACH_RULES = ("random", "stub", "degree", "spread", "demand")
POPULARITY_RULES = ("uniform", "demand")
INTEREST_MODELS = ("hot-spots", "uniform", "zipf")
ARRIVAL_PROCESSES = ("poisson", "waves")
HOLDING_FORMS = ("exponential", "uniform", "fixed")

THIN_PEER_GENERATOR_KEYS = {"count": True, "prefix": False, "attach": False, "seed": False}
THIN_PEER_GENERATOR_KEYS |= {"bandwidth": False, "latency": False}
SUBSCRIPTION_GENERATOR_KEYS = {"count": True, "prefix": False, "seed": False, "peers": False, "streams": False}
SUBSCRIPTION_GENERATOR_KEYS |= {"interests": False, "overlap": False, "predicate": False, "select": False}
SUBSCRIPTION_GENERATOR_KEYS |= {"arrivals": False, "holding": False, "popularity": False}
INTEREST_KEYS = {
    "hot-spots": {"model": True, "spots": False, "spread": False},
    "uniform": {"model": True},
    "zipf": {"model": True, "regions": False, "exponent": False},
}
PREDICATE_KEYS = {"attributes": False, "width": False, "cut": False, "disjunction": False}
ARRIVAL_KEYS = {
    "poisson": {"process": True, "over": False},
    "waves": {"process": True, "over": False, "waves": False, "spread": False},
}
HOLDING_KEYS = {"leave": False, "exponential": False, "uniform": False, "fixed": False}
MAX_EXPONENT = 10  # of a Zipf interest model or popularity: 100,000 ranks ** 10 stays far inside a float
MAX_GENERATED = GENERATED_CAP[1]  # entries the generators of one list may make together, unless the cap is moved


class Reader(Protocol):
    """What a generator needs of the loader's reader (topologies/loader.py): its checks, each failing with
    one line naming the file, the key path and the value."""

    def fail(self, path: str, message: str): ...
    def mapping(self, value: object, path: str, keys: dict[str, bool]) -> dict[str, Any]: ...
    def sequence(self, value: object, path: str) -> list: ...
    def number(self, value: object, path: str, *, minimum: float | None = None, positive: bool = False) -> float: ...
    def integer(self, value: object, path: str, *, minimum: int = 0, maximum: int = 2**63 - 1) -> int: ...
    def identifier(self, value: object, path: str, pattern: re.Pattern = ...) -> str: ...
    def reference(self, value: object, known, path: str, what: str) -> str: ...


def is_generator(item: object) -> bool:
    """Whether a list entry is a generator (a mapping whose one key is ``generate``)."""
    return isinstance(item, dict) and list(item) == ["generate"]


def _probability(reader: Reader, spec: dict, key: str, path: str, default: float) -> float:
    if key not in spec:
        return default
    value = reader.number(spec[key], f"{path}.{key}", minimum=0)
    if value > 1:
        reader.fail(f"{path}.{key}", f"must lie in [0, 1], got {shown(spec[key])}")
    return value


def _range(reader: Reader, value: object, path: str, *, minimum: float, integer: bool = False) -> tuple[float, float]:
    """A number (a range of one value) or ``[lo, hi]`` with ``minimum <= lo <= hi``."""
    check = reader.integer if integer else reader.number
    if isinstance(value, list):
        if len(value) != 2:
            reader.fail(path, f"expected a number or [lo, hi], got {shown(value)}")
        lo, hi = (check(v, f"{path}[{k}]", minimum=minimum) for k, v in enumerate(value))
        if lo > hi:
            reader.fail(path, f"needs lo <= hi, got {shown(value)}")
        return lo, hi
    one = check(value, path, minimum=minimum)
    return one, one


def _interval_in(reader: Reader, value: object, path: str, lo: float, hi: float) -> tuple[float, float]:
    """``[a, b]`` with ``lo <= a < b <= hi``."""
    if not isinstance(value, list) or len(value) != 2:
        reader.fail(path, f"expected [start, end] in seconds, got {shown(value)}")
    a, b = (reader.number(v, f"{path}[{k}]") for k, v in enumerate(value))
    if not lo <= a < b <= hi:
        reader.fail(path, f"needs {lo:g} <= start < end <= {hi:g} (the run's duration), got {shown(value)}")
    return a, b


def _prefix(reader: Reader, spec: dict, path: str, default: str) -> str:
    prefix = spec.get("prefix", default)
    if not isinstance(prefix, str) or not prefix:
        reader.fail(f"{path}.prefix", f"expected a non-empty string, got {shown(prefix)}")
    reader.identifier(prefix + "0", f"{path}.prefix")
    return prefix


def _count(reader: Reader, spec: dict, path: str, list_name: str, made: int) -> int:
    """The generator's ``count``: at least 1, and at most what the cap on ``list_name``'s generated
    entries leaves after the ``made`` entries of the generators before it (a typo of three zeros is an
    error, not a stall)."""
    count = reader.integer(spec["count"], f"{path}.count", minimum=1)
    name, default = GENERATED_CAP
    limit = cap(name, default)
    if made + count > limit:
        before = f" after the {made:,} made before it" if made else ""
        reader.fail(
            f"{path}.count",
            f"{count:,} {list_name}{before} exceed the cap of {limit:,} generated {list_name}"
            f" (set {name} to change it)",
        )
    return count


def node_weights(
    reader: Reader, rule: object, path: str, weights: Mapping[str, Mapping[str, float]]
) -> tuple[str, Mapping[str, float]]:
    """The node weight ``rule`` names (``demand``, or ``{weight: NAME}``) among an imported network's
    ``weights`` (topologies/importing.py), with its name."""
    if isinstance(rule, dict):
        rule = reader.mapping(rule, path, {"weight": True})["weight"]
    if not isinstance(rule, str) or rule not in weights:
        known = (
            ", ".join(weights)
            or "none: the network is not imported, or its data has no demands or numeric node attributes"
        )
        reader.fail(path, f"unknown node weight {shown(rule)} (the imported network's: {known})")
    return ("demand" if rule == "demand" else f"{rule} weight"), weights[rule]


def _chances(reader: Reader, weights: Sequence[float], path: str, name: str) -> np.ndarray:
    """``weights`` (finite, >= 0) scaled to probabilities; an error when they are all zero."""
    array = _scaled(np.asarray(weights, dtype=np.float64))
    if not (array.size and array.max() > 0):
        reader.fail(path, f"every candidate's {name} is zero: nothing to draw in proportion to")
    return array / array.sum()


def _scaled(array: np.ndarray) -> np.ndarray:
    """``array`` (values >= 0) over its largest value, so that its sum is finite; when a value is infinite
    (weights near the largest float, added up), the infinite ones, equally."""
    top = float(array.max()) if array.size else 0.0
    if math.isinf(top):
        return np.isinf(array).astype(np.float64)
    return array / top if top > 0 else array


def _span(prefix: str, count: int) -> str:
    return f"{prefix}0" if count == 1 else f"{prefix}0..{prefix}{count - 1}"


# --- thin-peers ---------------------------------------------------------------------------------------


def thin_peers(
    reader: Reader,
    value: object,
    path: str,
    *,
    seed: int,
    position: int,
    super_peers: tuple[str, ...],
    degrees: dict[str, int],
    transit: int | None,
    weights: Mapping[str, Mapping[str, float]] = MappingProxyType({}),
    made: int = 0,
) -> tuple[list[dict], str]:
    """The thin-peer entries ``{id, attach[, bandwidth, latency]}`` of the generator ``value`` at ``path``
    (``thin_peers[i].generate``), and one line saying what it made.

    ``attach`` rules: ``random`` (uniform over every super-peer), ``stub`` (uniform over the stub-domain
    nodes of a transit-stub backbone, whose ``transit`` first nodes are the transit domain), ``degree``
    (probability proportional to a super-peer's number of links), ``spread`` (round robin over the
    super-peers in order), ``demand`` or ``{weight: NAME}`` (probability proportional to an imported
    network's node weight, ``weights``: its nodes' total demand, or a node attribute), or a list of
    super-peer ids (uniform over them).  ``made``: the thin-peers the list's generators before this one made
    (they count toward the cap, :func:`_count`)."""
    spec = reader.mapping(value, path, THIN_PEER_GENERATOR_KEYS)
    count = _count(reader, spec, path, "thin-peers", made)
    prefix = _prefix(reader, spec, path, "P")
    seed = reader.integer(spec["seed"], f"{path}.seed") if "seed" in spec else seed
    rule = spec.get("attach", "random")
    rng = np.random.default_rng([seed, THIN_PEER_KIND, position])
    if isinstance(rule, list):
        if not rule:
            reader.fail(f"{path}.attach", "expected at least one super-peer, got []")
        known = set(super_peers)
        chosen = [reader.reference(sp, known, f"{path}.attach[{k}]", "super-peer") for k, sp in enumerate(rule)]
        homes = [chosen[int(k)] for k in rng.integers(0, len(chosen), count)]
        told = f"uniformly over {len(chosen)} listed super-peers"
    elif rule == "random":
        homes = [super_peers[int(k)] for k in rng.integers(0, len(super_peers), count)]
        told = "to random super-peers"
    elif rule == "stub":
        if transit is None or transit >= len(super_peers):
            reader.fail(f"{path}.attach", "'stub' needs a transit-stub backbone with stub domains (network.generate)")
        homes = [super_peers[int(k)] for k in rng.integers(transit, len(super_peers), count)]
        told = "to random stub-domain super-peers"
    elif rule == "degree":
        weights = np.array([degrees.get(sp, 0) for sp in super_peers], dtype=np.float64) + 1e-12
        homes = [super_peers[int(k)] for k in rng.choice(len(super_peers), size=count, p=weights / weights.sum())]
        told = "to super-peers in proportion to their degree"
    elif rule == "spread":
        homes = [super_peers[k % len(super_peers)] for k in range(count)]
        told = "round robin over the super-peers"
    elif rule == "demand" or isinstance(rule, dict):
        name, weight = node_weights(reader, rule, f"{path}.attach", weights)
        chances = _chances(reader, [weight.get(sp, 0.0) for sp in super_peers], f"{path}.attach", name)
        homes = [super_peers[int(k)] for k in rng.choice(len(super_peers), size=count, p=chances)]
        told = f"to super-peers in proportion to their {name}"
    else:
        reader.fail(
            f"{path}.attach",
            f"unknown rule {shown(rule)} (expected one of: {', '.join(ATTACH_RULES)}, or a list of super-peers)",
        )
    extra = {key: spec[key] for key in ("bandwidth", "latency") if key in spec}
    entries = [{"id": f"{prefix}{k}", "attach": home, **extra} for k, home in enumerate(homes)]
    return entries, f"{path}: {count} thin-peer{'s' * (count > 1)} {_span(prefix, count)} attached {told}"


# --- subscriptions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dimension:
    """One attribute a box constrains: its name, its range and how its values print."""

    name: str
    lo: float
    hi: float
    values: tuple[float, ...] | None  # a choice attribute's values (constrained with IN)
    integer: bool
    labels: tuple[str, ...] = ()  # a string attribute's texts, by code (its values are codes)

    @staticmethod
    def of(name: str, distribution: Distribution, integer: bool, labels: tuple[str, ...] = ()) -> _Dimension:
        if isinstance(distribution, Choice):
            values = tuple(sorted(set(distribution.values)))
            return _Dimension(name, values[0], values[-1], values, integer, labels)
        if labels:  # a replayed text column: its codes are its values
            return _Dimension(name, 0.0, len(labels) - 1.0, tuple(map(float, range(len(labels)))), True, labels)
        if isinstance(distribution, Uniform):
            lo, hi = distribution.lo, distribution.hi
        elif isinstance(distribution, Normal):
            lo, hi = distribution.mu - 2 * distribution.sigma, distribution.mu + 2 * distribution.sigma
        elif isinstance(distribution, Empirical):
            lo, hi = float(distribution.values[0]), float(distribution.values[-1])
        else:  # a distribution the loader does not make
            raise TypeError(f"no range for {distribution!r}")
        return _Dimension(name, lo, hi, None, integer)

    def text(self, x: float) -> str:
        """``x`` (a fraction of the range) as a bound: whole numbers for int attributes, else about four
        significant digits of the range."""
        value = self.lo + x * (self.hi - self.lo)
        if self.integer:
            return str(round(value))
        width = self.hi - self.lo
        decimals = max(0, 3 - math.floor(math.log10(width))) if width > 0 else 3
        text = f"{value:.{decimals}f}"
        return "0" if float(text) == 0 else text

    def constraint(self, lo: float, hi: float) -> str:
        """The condition for the fractions ``[lo, hi]`` of the range: BETWEEN, or IN for a choice
        attribute (its values within the fractions; at least one)."""
        if self.values is None:
            return f"{name_to_text(self.name)} BETWEEN {self.text(lo)} AND {self.text(hi)}"
        n = len(self.values)
        first = min(int(lo * n), n - 1)
        last = max(first + 1, min(n, math.ceil(hi * n)))
        chosen = self.values[first:last]
        return f"{name_to_text(self.name)} IN ({', '.join(self.value_text(v) for v in chosen)})"

    def cut(self, rng: np.random.Generator) -> str:
        """A cut on this attribute: ``> c`` in the middle half of its range, or IN about half its values."""
        if self.values is None:
            return f"{name_to_text(self.name)} > {self.text(float(rng.uniform(0.25, 0.75)))}"
        n = len(self.values)
        size = max(1, n // 2) if n > 1 else 1
        chosen = sorted(rng.choice(n, size=size, replace=False).tolist())
        return f"{name_to_text(self.name)} IN ({', '.join(self.value_text(self.values[k]) for k in chosen)})"

    def value_text(self, v: float) -> str:
        """A value as a query writes it: a string attribute's quoted text, else the number."""
        if self.labels:
            return "'" + self.labels[int(v)].replace("'", "''") + "'"
        return _value_text(v)


def _value_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


@dataclass(frozen=True)
class _Box:
    """A box as fractions of its dimensions' ranges: ``(lo, hi)`` per dimension."""

    sides: tuple[tuple[float, float], ...]

    def text(self, dims: list[_Dimension]) -> str:
        return " AND ".join(d.constraint(lo, hi) for d, (lo, hi) in zip(dims, self.sides, strict=True))

    def inside(self, rng: np.random.Generator) -> _Box:
        """A box inside this one: each side 50-100 % as long, placed uniformly within."""
        sides = []
        for lo, hi in self.sides:
            length = (hi - lo) * float(rng.uniform(0.5, 1.0))
            start = lo + float(rng.uniform(0, (hi - lo) - length))
            sides.append((start, start + length))
        return _Box(tuple(sides))


@dataclass(frozen=True)
class _Interests:
    """Where boxes are centred, per stream: ``model`` with its parameters."""

    model: str
    spots: int = 5
    spread: float = 0.05
    regions: int = 50
    exponent: float = 1.0

    def centres(self, rng: np.random.Generator, dims: int) -> tuple[np.ndarray, np.ndarray | None]:
        """A stream's interest points (fractions of the ranges) and their popularity (None: uniform)."""
        if self.model == "hot-spots":
            return rng.uniform(0.1, 0.9, size=(self.spots, dims)), None
        if self.model == "zipf":
            popularity = 1.0 / np.arange(1, self.regions + 1) ** self.exponent
            return rng.uniform(0.0, 1.0, size=(self.regions, dims)), popularity / popularity.sum()
        return np.zeros((0, dims)), None

    def centre(self, rng: np.random.Generator, points: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        dims = points.shape[1]
        if self.model == "uniform":
            return rng.uniform(0.0, 1.0, size=dims)
        k = int(rng.choice(len(points), p=weights)) if weights is not None else int(rng.integers(0, len(points)))
        if self.model == "zipf":
            return points[k]
        return np.clip(points[k] + rng.normal(0.0, self.spread, size=dims), 0.0, 1.0)


def _interests(reader: Reader, value: object, path: str) -> _Interests:
    if not isinstance(value, dict) or value.get("model") not in INTEREST_MODELS:
        model = value.get("model") if isinstance(value, dict) else value
        reader.fail(f"{path}.model", f"unknown model {shown(model)} (expected one of: {', '.join(INTEREST_MODELS)})")
    spec = reader.mapping(value, path, INTEREST_KEYS[value["model"]])
    found = _Interests(spec["model"])
    if "spots" in spec:
        found = replace(found, spots=reader.integer(spec["spots"], f"{path}.spots", minimum=1, maximum=10_000))
    if "spread" in spec:
        spread = reader.number(spec["spread"], f"{path}.spread", minimum=0)
        if spread > 1:
            reader.fail(
                f"{path}.spread", f"a fraction of the range: needs 0 <= spread <= 1, got {shown(spec['spread'])}"
            )
        found = replace(found, spread=spread)
    if "regions" in spec:
        found = replace(found, regions=reader.integer(spec["regions"], f"{path}.regions", minimum=1, maximum=100_000))
    if "exponent" in spec:
        exponent = reader.number(spec["exponent"], f"{path}.exponent", minimum=0)
        if exponent > MAX_EXPONENT:  # past it region 1 takes everything anyway, and r^exponent overflows
            reader.fail(f"{path}.exponent", f"needs 0 <= exponent <= {MAX_EXPONENT}, got {shown(spec['exponent'])}")
        found = replace(found, exponent=exponent)
    return found


def _dimensions(reader: Reader, stream: StreamSpec, names: list[str] | None, path: str) -> list[_Dimension]:
    """The box dimensions of ``stream``: ``names`` (those the stream has), or by default its first two
    attributes that are not a choice (or its first ones, when all are)."""
    by_name = {a.name: a for a in stream.attributes}
    if names is not None:
        missing = [n for n in names if n not in by_name]
        if len(missing) == len(names):
            reader.fail(path, f"stream {stream.id!r} has none of the attributes {shown(names)}")
        chosen = [by_name[n] for n in names if n in by_name]
    else:
        ranged = [a for a in stream.attributes if not isinstance(a.distribution, Choice) and a.type != "string"]
        chosen = (ranged or list(stream.attributes))[:2]
    return [_Dimension.of(a.name, a.distribution, a.type == "int", a.values) for a in chosen]


def subscriptions(
    reader: Reader,
    value: object,
    path: str,
    *,
    seed: int,
    position: int,
    duration: float,
    thin_peers: list[str],
    sources: set[str],
    streams: tuple[StreamSpec, ...],
    homes: Mapping[str, str] = MappingProxyType({}),
    weights: Mapping[str, Mapping[str, float]] = MappingProxyType({}),
    demands: Mapping[tuple[str, str], float] = MappingProxyType({}),
    made: int = 0,
) -> tuple[list[dict], str]:
    """The subscription entries ``{id, peer, at[, until], query}`` of the generator ``value`` at ``path``
    (``subscriptions[i].generate``), in arrival order, and one line saying what it made.  ``homes`` (each
    thin-peer's super-peer) and an imported network's node ``weights`` and ``demands`` serve ``popularity``;
    ``made`` as for :func:`thin_peers`."""
    spec = reader.mapping(value, path, SUBSCRIPTION_GENERATOR_KEYS)
    count = _count(reader, spec, path, "subscriptions", made)
    prefix = _prefix(reader, spec, path, "Q")
    seed = reader.integer(spec["seed"], f"{path}.seed") if "seed" in spec else seed
    if "peers" in spec:
        items = reader.sequence(spec["peers"], f"{path}.peers")
        if not items:
            reader.fail(f"{path}.peers", "expected at least one thin-peer, got []")
        peers = [reader.reference(p, set(thin_peers), f"{path}.peers[{k}]", "thin-peer") for k, p in enumerate(items)]
    else:
        peers = [p for p in thin_peers if p not in sources]
    if "streams" in spec:
        items = reader.sequence(spec["streams"], f"{path}.streams")
        if not items:
            reader.fail(f"{path}.streams", "expected at least one stream, got []")
        by_id = {s.id: s for s in streams}
        chosen_streams = [
            by_id[reader.reference(s, by_id, f"{path}.streams[{k}]", "stream")] for k, s in enumerate(items)
        ]
    else:
        chosen_streams = list(streams)
        if not chosen_streams:
            reader.fail(path, "no stream to subscribe to (streams is empty)")
    interests = _interests(reader, spec.get("interests", {"model": "hot-spots"}), f"{path}.interests")
    overlap = _probability(reader, spec, "overlap", path, 0.0)
    if not thin_peers:
        reader.fail(path, "no thin-peer to subscribe (thin_peers is empty)")
    subscribers = _subscribers(reader, peers, thin_peers, chosen_streams, path)
    shape = reader.mapping(spec.get("predicate", {}), f"{path}.predicate", PREDICATE_KEYS)
    names = None
    if "attributes" in shape:
        names = [str(n) for n in reader.sequence(shape["attributes"], f"{path}.predicate.attributes")]
        if not names:
            reader.fail(f"{path}.predicate.attributes", "expected at least one attribute, got []")
        twice = next((n for k, n in enumerate(names) if n in names[:k]), None)
        if twice is not None:
            reader.fail(f"{path}.predicate.attributes", f"{shown(twice)} twice (a box has one side per attribute)")
    width = _range(reader, shape.get("width", [0.04, 0.24]), f"{path}.predicate.width", minimum=0)
    if width[1] > 1 or width[1] <= 0:
        reader.fail(
            f"{path}.predicate.width", f"fractions of a range: needs 0 < width <= 1, got {shown(shape['width'])}"
        )
    cut = _probability(reader, shape, "cut", f"{path}.predicate", 0.0)
    disjunction = _probability(reader, shape, "disjunction", f"{path}.predicate", 0.0)
    select = _range(reader, spec.get("select", [1, 1_000]), f"{path}.select", minimum=1, integer=True)
    widest = max(len(s.attributes) for s in chosen_streams)
    if "select" in spec and select[1] > widest:
        reader.fail(
            f"{path}.select", f"the widest stream it subscribes to has {widest} attributes, got {shown(spec['select'])}"
        )
    arrivals = spec.get("arrivals", {"process": "poisson"})
    times, arrivals_told = _arrivals(reader, arrivals, f"{path}.arrivals", duration, count)
    leave, holding, holding_told = _holding(reader, spec.get("holding"), f"{path}.holding")
    popularity = _popularity(
        reader,
        spec.get("popularity", "uniform"),
        f"{path}.popularity",
        chosen_streams,
        subscribers,
        homes,
        weights,
        demands,
    )

    rng = np.random.default_rng([seed, SUBSCRIPTION_KIND, position])
    dims = {s.id: _dimensions(reader, s, names, f"{path}.predicate.attributes") for s in chosen_streams}
    points = {s.id: interests.centres(rng, len(dims[s.id])) for s in chosen_streams}
    arrival_times = times(rng)
    earlier: dict[str, list[tuple[_Box, str | None]]] = {s.id: [] for s in chosen_streams}
    entries, leaving = [], 0
    for k in range(count):
        if popularity is None:  # uniform: the draws of every file written before popularity existed
            stream, subscriber = chosen_streams[int(rng.integers(0, len(chosen_streams)))], None
        else:
            pick, subscriber = popularity.draw(rng)
            stream = chosen_streams[pick]
        box_dims = dims[stream.id]
        refine = earlier[stream.id] and rng.random() < overlap
        if refine:
            base, base_cut = earlier[stream.id][int(rng.integers(0, len(earlier[stream.id])))]
            box, cut_text, second = base.inside(rng), base_cut, None
        else:
            box = _fresh_box(rng, interests, points[stream.id], width)
            others = [a for a in stream.attributes if a.name not in {d.name for d in box_dims}]
            cut_text = None
            if others and rng.random() < cut:
                other = others[int(rng.integers(0, len(others)))]
                cut_text = _Dimension.of(other.name, other.distribution, other.type == "int", other.values).cut(rng)
            second = _fresh_box(rng, interests, points[stream.id], width) if rng.random() < disjunction else None
        earlier[stream.id].append((box, cut_text))
        condition = box.text(box_dims) + (f" AND {cut_text}" if cut_text else "")
        if second is not None:
            condition = f"({condition}) OR ({second.text(box_dims)})"
        query = f"SELECT {_select(rng, stream, select)} FROM {name_to_text(stream.id)} WHERE {condition}"
        if subscriber is None:
            candidates = subscribers[stream.id]
            subscriber = candidates[int(rng.integers(0, len(candidates)))]
        entry: dict[str, Any] = {"id": f"{prefix}{k}", "peer": subscriber}
        entry["at"] = arrival_times[k]
        if holding is not None and rng.random() < leave:
            until = round(arrival_times[k] + max(holding(rng), 0.001), 3)
            if until < duration:
                entry["until"] = max(until, round(arrival_times[k] + 0.001, 3))
                leaving += 1
        entry["query"] = query
        entries.append(entry)
    told = (
        f"{path}: {count} subscription{'s' * (count > 1)} {_span(prefix, count)} on {len(chosen_streams)} "
        f"stream{'s' * (len(chosen_streams) > 1)} from {_peer_count(subscribers)}, "
        f"{interests.model} interests, overlap {overlap:g}, {arrivals_told}"
        + ("" if popularity is None else f", {popularity.told}")
        + (f", {leaving} leaving again ({holding_told})" if holding is not None else "")
    )
    return entries, told


def _subscribers(
    reader: Reader, peers: list[str], thin_peers: list[str], streams: list[StreamSpec], path: str
) -> dict[str, list[str]]:
    """Who may subscribe to each stream: ``peers`` (listed, or every thin-peer that publishes nothing);
    when every thin-peer publishes, every thin-peer but the stream's own source (which would only get its
    tuples back).  Fails naming a stream whose source is the only thin-peer."""
    if peers:
        return {s.id: peers for s in streams}
    found = {s.id: [p for p in thin_peers if p != s.source] for s in streams}
    alone = next((s for s in streams if not found[s.id]), None)
    if alone is not None:
        reader.fail(
            path,
            f"no thin-peer but {alone.source}, the source of stream {alone.id}, to subscribe"
            " (list it under peers to subscribe a source to its own stream)",
        )
    return found


def _peer_count(subscribers: dict[str, list[str]]) -> str:
    peers = {p for chosen in subscribers.values() for p in chosen}
    return f"{len(peers)} peer{'s' * (len(peers) > 1)}"


@dataclass(frozen=True)
class _Popularity:
    """How a subscription picks its stream, and maybe its subscriber: streams by ``chances``; then, when
    ``homes`` is given (a stream's chances over the subscribers' super-peers), a super-peer by those and a
    subscriber uniformly among the peers there (``at_home``) that may subscribe to the stream (all but
    ``unlike[stream]``, its own source when every thin-peer publishes)."""

    chances: np.ndarray
    told: str
    homes: np.ndarray | None = None  # streams x super-peers: probabilities of each row
    at_home: tuple[tuple[str, ...], ...] = ()  # per column of ``homes``, its subscribers
    unlike: tuple[tuple[int, int] | None, ...] = ()  # per stream, where in ``at_home`` its own source is

    def draw(self, rng: np.random.Generator) -> tuple[int, str | None]:
        pick = int(rng.choice(len(self.chances), p=self.chances))
        if self.homes is None:
            return pick, None
        column = int(rng.choice(len(self.at_home), p=self.homes[pick]))
        there = self.at_home[column]
        if self.unlike and self.unlike[pick] is not None and self.unlike[pick][0] == column:
            k = int(rng.integers(0, len(there) - 1))  # among the others (the column weighs them only)
            return pick, there[k + (k >= self.unlike[pick][1])]
        return pick, there[int(rng.integers(0, len(there)))]


def _popularity(
    reader: Reader,
    value: object,
    path: str,
    streams: list[StreamSpec],
    subscribers: dict[str, list[str]],
    homes: Mapping[str, str],
    weights: Mapping[str, Mapping[str, float]],
    demands: Mapping[tuple[str, str], float],
) -> _Popularity | None:
    """The ``popularity`` rule: ``uniform`` (None: each stream and each subscriber equally likely),
    ``{zipf: s}`` (the k-th listed stream with weight 1 / k^s), ``{weight: NAME}`` (a stream in proportion
    to an imported node weight of its source's super-peer), or ``demand`` (a stream and a subscriber
    together, in proportion to the demand between the source's super-peer and the subscriber's, either
    way: an SNDlib matrix lists most pairs once)."""
    if value == "uniform":
        return None
    if value == "demand":
        if not demands:
            reader.fail(path, "'demand' needs an imported network with a demand matrix (topohub's sndlib/...)")
        peers = list(dict.fromkeys(p for chosen in subscribers.values() for p in chosen))
        at_home: dict[str, list[str]] = {}
        for peer in peers:
            at_home.setdefault(homes[peer], []).append(peer)
        columns = list(at_home)
        limit_name, default = MAX_NODE_PAIRS
        limit = cap(limit_name, default)
        if len(streams) * len(columns) > limit:
            reader.fail(
                path,
                f"'demand' weighs {len(streams):,} streams x {len(columns):,} super-peers,"
                f" {len(streams) * len(columns):,} pairs, over the cap of {limit:,} (set {limit_name} to change it)",
            )
        where = {p: (c, k) for c, h in enumerate(columns) for k, p in enumerate(at_home[h])}
        # a stream's own source is among the peers only when every thin-peer publishes: it may not take it
        unlike = tuple(where.get(s.source) if len(subscribers[s.id]) < len(peers) else None for s in streams)
        table = np.array(
            [
                [(demands.get((homes[s.source], h), 0.0) + demands.get((h, homes[s.source]), 0.0))
                 * (len(at_home[h]) - (unlike[i] is not None and unlike[i][0] == c))
                 for c, h in enumerate(columns)]
                for i, s in enumerate(streams)
            ],
            dtype=np.float64,
        )  # fmt: skip
        table = _scaled(table)
        per_stream = table.sum(axis=1)
        chances = _chances(reader, per_stream, path, "demand towards the subscribers")
        rows = np.divide(table, per_stream[:, None], out=np.zeros_like(table), where=per_stream[:, None] > 0)
        return _Popularity(
            chances, "streams and subscribers by demand", rows, tuple(tuple(at_home[h]) for h in columns), unlike
        )
    if isinstance(value, dict) and list(value) == ["zipf"]:
        exponent = reader.number(value["zipf"], f"{path}.zipf", minimum=0)
        if exponent > MAX_EXPONENT:  # past it the first stream takes everything anyway
            reader.fail(f"{path}.zipf", f"needs 0 <= exponent <= {MAX_EXPONENT}, got {shown(value['zipf'])}")
        ranks = np.arange(1, len(streams) + 1, dtype=np.float64)
        return _Popularity(_chances(reader, ranks**-exponent, path, "rank"), f"Zipf({exponent:g}) stream popularity")
    if isinstance(value, dict) and list(value) == ["weight"]:
        name, weight = node_weights(reader, value, path, weights)
        found = [weight.get(homes[s.source], 0.0) for s in streams]
        return _Popularity(_chances(reader, found, path, name), f"streams by their source's {name}")
    reader.fail(path, f"expected uniform, demand, {{zipf: exponent}} or {{weight: NAME}}, got {shown(value)}")


def _fresh_box(rng: np.random.Generator, interests: _Interests, points, width: tuple[float, float]) -> _Box:
    centre = interests.centre(rng, *points)
    sides = []
    for c in centre.tolist():
        half = float(rng.uniform(*width)) / 2 if width[0] < width[1] else width[0] / 2
        sides.append((max(0.0, c - half), min(1.0, c + half)))
    return _Box(tuple(sides))


def _select(rng: np.random.Generator, stream: StreamSpec, width: tuple[float, float]) -> str:
    """A SELECT list of a width drawn from ``width`` (capped at the stream's attributes); ``*`` for all."""
    n = len(stream.attributes)
    lo, hi = min(int(width[0]), n), min(int(width[1]), n)
    size = int(rng.integers(lo, hi + 1))
    if size == n:
        return "*"
    chosen = sorted(rng.choice(n, size=size, replace=False).tolist())
    return ", ".join(name_to_text(stream.attributes[k].name) for k in chosen)


def _arrivals(reader: Reader, value: object, path: str, duration: float, count: int):
    """``(times(rng) -> count sorted arrival times, words)`` of the arrival process at ``path``.

    ``poisson``: a Poisson process over ``over`` (default the first 80 % of the run) holding ``count``
    arrivals, that is ``count`` sorted uniform times; ``waves``: ``waves`` bursts (default 3) centred
    evenly over ``over``, each arrival normal around a burst's centre with ``spread`` seconds (default a
    tenth of the gap between bursts), clipped to ``over``.  Times are rounded to milliseconds."""
    if not isinstance(value, dict) or value.get("process") not in ARRIVAL_PROCESSES:
        process = value.get("process") if isinstance(value, dict) else value
        reader.fail(
            f"{path}.process", f"unknown process {shown(process)} (expected one of: {', '.join(ARRIVAL_PROCESSES)})"
        )
    spec = reader.mapping(value, path, ARRIVAL_KEYS[value["process"]])
    start, end = (0.0, 0.8 * duration)
    if "over" in spec:
        start, end = _interval_in(reader, spec["over"], f"{path}.over", 0.0, duration)
    last = math.nextafter(min(end, duration), -math.inf)

    def clipped(times: np.ndarray) -> list[float]:
        rounded = np.minimum(np.round(np.sort(times), 3), last)
        return [float(t) for t in np.maximum(rounded, start)]

    if spec["process"] == "poisson":
        return (lambda rng: clipped(rng.uniform(start, end, count))), f"Poisson arrivals over [{start:g}, {end:g}) s"
    waves = reader.integer(spec.get("waves", 3), f"{path}.waves", minimum=1, maximum=10_000)
    gap = (end - start) / waves
    spread = reader.number(spec["spread"], f"{path}.spread", minimum=0) if "spread" in spec else gap / 10
    if spread > duration:
        reader.fail(
            f"{path}.spread", f"seconds: needs 0 <= spread <= {duration:g} (the run's duration), got {shown(spread)}"
        )
    centres = start + gap * (np.arange(waves) + 0.5)

    def times(rng: np.random.Generator) -> list[float]:
        around = centres[rng.integers(0, waves, count)] + rng.normal(0.0, spread, count)
        return clipped(np.clip(around, start, end))

    return times, f"{waves} waves of arrivals over [{start:g}, {end:g}) s"


def _holding(reader: Reader, value: object, path: str):
    """``(leave, draw(rng) -> seconds or None, words)``: with probability ``leave`` (default 1) a
    subscription leaves after a holding time, ``{exponential: mean}``, ``{uniform: [lo, hi]}`` or
    ``{fixed: seconds}``; one leaving after the end of the run stays to the end."""
    if value is None:
        return 0.0, None, ""
    spec = reader.mapping(value, path, HOLDING_KEYS)
    forms = [f for f in HOLDING_FORMS if f in spec]
    if len(forms) != 1:
        reader.fail(path, f"expected exactly one of {', '.join(HOLDING_FORMS)}, got {shown(value)}")
    leave = _probability(reader, spec, "leave", path, 1.0)
    form = forms[0]
    if form == "exponential":
        mean = reader.number(spec[form], f"{path}.exponential", positive=True)
        return leave, (lambda rng: float(rng.exponential(mean))), f"holding times exponential, mean {mean:g} s"
    if form == "uniform":
        lo, hi = _range(reader, spec[form], f"{path}.uniform", minimum=0)
        return leave, (lambda rng: float(rng.uniform(lo, hi))), f"holding times uniform in [{lo:g}, {hi:g}] s"
    fixed = reader.number(spec[form], f"{path}.fixed", positive=True)
    return leave, (lambda rng: fixed), f"holding time {fixed:g} s"
