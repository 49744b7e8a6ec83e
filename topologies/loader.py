"""Load and validate a scenario file (docs/SCENARIOS.md) into the frozen :class:`Scenario`.

Validation happens here, once: every error is a :class:`ScenarioError` with one line
``<file>: <key path>: <problem>, got <value>``, e.g. ``a.yaml: network.links[3][1]: unknown super-peer
'SP9'``.  Nothing is auto-created and nothing is silently ignored; a contradictory WHERE is allowed but
recorded in ``Scenario.warnings``.

Optional keys and defaults: thin-peers may give ``bandwidth``/``latency`` for their access link
(default ``network.defaults``, whose own defaults are 100Mbit and 0); an attribute's ``type`` defaults to
float; ``seed`` defaults to 0, ``header_bytes`` to 16, ``subscriptions`` and ``events`` to none, each of
``cpu_costs`` to :class:`CpuCosts`' own, and a super-peer's ``capacity``, ``cpu`` and ``input_buffer`` to
``network.defaults``' (whose own default is unlimited).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from matcher import Choice, Distribution, Empirical, Normal, Query, QueryError, Uniform
from matcher.text import is_keyword
from topologies import generators, importing, stream_generator, workload_generators
from topologies.bounds import MAX_NODE_PAIRS, cap, check_value
from topologies.errors import ScenarioError, shown
from topologies.events_loader import event_entry, read_events
from topologies.model import (
    AttributeSpec,
    CpuCosts,
    LinkSpec,
    NetworkEvent,
    Scenario,
    StreamSpec,
    SubscriptionSpec,
    ThinPeerSpec,
)
from topologies.replay import ATTRIBUTE_NAME, ReplayFileError, read_replay
from topologies.units import NUMBER_PATTERN, as_float, latency_text, parse_bandwidth, parse_latency, parse_size
from topologies.yaml_files import read_yaml

PEER_ID = re.compile(r"[A-Za-z0-9_-]+")
SUPER_PEER_ID = re.compile(r"[A-Za-z0-9_.-]+")  # a real network's node names keep their dots (St.Gallen)
DEFAULT_BANDWIDTH = 100e6
DEFAULT_LATENCY = Fraction(0)
DEFAULT_HEADER_BYTES = 16
DEFAULT_MAX_UTILIZATION = 0.8
DEFAULT_PEAK_SD = 3.0
MAX_PEAK_SD = 10.0
MAX_CAPACITY = 1e12  # tuples per second
MAX_CPU = 1e15  # operations per second
MAX_CPU_COST = 10**9  # operations per tuple or record: a step costing more than a billion is a unit mistake
MAX_HEADER_BYTES = 65_535
MAX_REPLAY_BYTES = 2**30
MAX_ID_LENGTH = 100  # characters of a name or an id: ids become file names, plot labels, topic levels
RESERVED_IDS = ("coordinator", "operator")
"""Names no super-peer or thin-peer may take: the live mode's own identities (docs/LIVE.md), under which
the coordinator and the operator's CLI log in to the broker; a node so named would act as one of them."""


MAX_TUPLES = ("STREAMGLOBE_MAX_TUPLES", 50_000_000)  # tuples emitted by all streams over the run
MAX_SUPER_PEERS = ("STREAMGLOBE_MAX_SUPER_PEERS", 50_000)

LONGEST_RUN_S = 4_000_000  # seconds: the links' picosecond clock (network/linkrule.py) holds twice that and more
TOP_KEYS = {"name": True, "seed": False, "duration": True, "header_bytes": False, "network": True}
TOP_KEYS |= {"thin_peers": True, "streams": True, "subscriptions": False, "planner": False, "events": False}
TOP_KEYS |= {"cpu_costs": False}
NETWORK_KEYS = {"defaults": False, "super_peers": False, "links": False, "generate": False, "import": False}
NETWORK_KEYS |= {"propagation_km_per_s": False, "min_latency": False}
LINK_KEYS = {"bandwidth": False, "latency": False, "buffer": False, "length": False}
NODE_LIMITS = ("capacity", "cpu", "input_buffer")  # a super-peer's own, or network.defaults'
DEFAULTS_KEYS = {"bandwidth": False, "latency": False, "buffer": False} | dict.fromkeys(NODE_LIMITS, False)
SUPER_PEER_KEYS = {"id": True, "pos": False} | dict.fromkeys(NODE_LIMITS, False)
CPU_COSTS_KEYS = {f.name: False for f in fields(CpuCosts)}
MAX_LENGTH_KM = 1e6  # a link longer than 25 times round the Earth is a unit mistake
PLANNER_KEYS = {"max_utilization": False, "peak_sd": False}
THIN_PEER_KEYS = {"id": True, "attach": True, "bandwidth": False, "latency": False}
STREAM_KEYS = {"id": True, "source": True, "rate": False, "schema": False, "replay": False, "time": False}
STREAM_KEYS |= {"time_start": False}
ATTRIBUTE_KEYS = {"type": False, "distribution": True}
SUBSCRIPTION_KEYS = {"id": True, "peer": True, "at": True, "until": False, "query": True}
DISTRIBUTION_KINDS = ("uniform", "normal", "choice")


def _describe(value: object) -> str:
    return f"{shown(value)} ({type(value).__name__})"


def _step(key: object) -> str:
    """``key`` as one step of a key path: as written when it is a short printable string, else quoted."""
    return key if isinstance(key, str) and key.isprintable() and len(key) <= MAX_ID_LENGTH else shown(key)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Reader:
    """Reads one file; every check names ``self.file`` and the key path of the value it looks at."""

    def __init__(self, file: str):
        self.file = file
        self.base_dir = os.path.dirname(os.path.abspath(file))
        self.warnings: list[str] = []
        self.generated: list[str] = []  # what each workload generator made, one line each
        self.expanded: dict[str, list] = {}  # thin_peers and subscriptions as written out (run.py expand)
        self.transit: int | None = None  # a generated transit-stub backbone's transit nodes
        # an imported network's node weights (by name, per super-peer) and demand matrix, for the generators
        self.weights: Mapping[str, Mapping[str, float]] = {}
        self.demands: Mapping[tuple[str, str], float] = {}
        self.positions: dict[str, tuple[float, float]] = {}  # (lon, lat) of super-peers, by id
        self.km_per_s: float = importing.DEFAULT_PROPAGATION_KM_PER_S  # latency from a link's length
        self.min_latency = Fraction(0)
        self.notes: list[str] = []  # for the explicit file's header (run.py expand)

    def fail(self, path: str, message: str) -> NoReturn:
        raise ScenarioError(f"{self.file}: {path}: {message}" if path else f"{self.file}: {message}")

    # --- shapes -------------------------------------------------------------------------------------

    def mapping(self, value: object, path: str, keys: dict[str, bool]) -> dict[str, Any]:
        """``value`` as a mapping with only ``keys`` (name -> required)."""
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping, got {_describe(value)}")
        for key in value:
            if key not in keys:
                expected = ", ".join(sorted(keys))
                self.fail(path, f"unknown key {shown(key)} (expected one of: {expected})")
        for key, required in keys.items():
            if required and key not in value:
                self.fail(path, f"missing required key {key!r}")
        return value

    def sequence(self, value: object, path: str) -> list:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_describe(value)}")
        return value

    def identifier(self, value: object, path: str, pattern: re.Pattern = PEER_ID) -> str:
        if not isinstance(value, str):
            self.fail(path, f"expected a string id, got {_describe(value)}")
        if not pattern.fullmatch(value):
            self.fail(path, f"bad id {shown(value)} (expected {pattern.pattern})")
        if len(value) > MAX_ID_LENGTH:
            self.fail(path, f"bad id {shown(value)} (longer than {MAX_ID_LENGTH} characters)")
        if pattern is ATTRIBUTE_NAME and is_keyword(value):  # a stream or an attribute: queries name it bare
            self.fail(path, f"bad id {value!r} (a query keyword)")
        return value

    def node_id(self, value: object, path: str, pattern: re.Pattern = PEER_ID) -> str:
        """A super-peer's or thin-peer's id: an :meth:`identifier` that is none of :data:`RESERVED_IDS`."""
        node = self.identifier(value, path, pattern)
        if node in RESERVED_IDS:
            self.fail(path, f"{node!r} is reserved (the live mode's own identities: {', '.join(RESERVED_IDS)})")
        return node

    def reference(self, value: object, known: set[str] | dict[str, Any], path: str, what: str) -> str:
        """``value`` if it names one of ``known`` (ids of ``what``)."""
        if isinstance(value, bool):  # YAML 1.1 reads a bare NO (Norway's code in a real network) as false
            self.fail(path, f"unknown {what} {shown(value)} (a name such as NO, YES, ON or OFF must be quoted)")
        if not isinstance(value, str) or value not in known:
            self.fail(path, f"unknown {what} {shown(value)}")
        return value

    def number(self, value: object, path: str, *, minimum: float | None = None, positive: bool = False) -> float:
        """A finite int or float (not a bool, not a string), optionally >= ``minimum`` or > 0."""
        if not _is_number(value):
            self.fail(path, f"expected a number, got {_describe(value)}")
        number = as_float(value)
        if not math.isfinite(number):
            self.fail(path, f"expected a finite number, got {shown(value)}")
        if positive and number <= 0:
            self.fail(path, f"must be positive, got {shown(value)}")
        if minimum is not None and number < minimum:
            self.fail(path, f"must be >= {minimum:g}, got {shown(value)}")
        return number

    def integer(self, value: object, path: str, *, minimum: int = 0, maximum: int = 2**63 - 1) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(path, f"expected an integer, got {_describe(value)}")
        if value < minimum:
            self.fail(path, f"must be >= {minimum}, got {shown(value)}")
        if value > maximum:
            self.fail(path, f"must be <= {maximum:,}, got {shown(value)}")
        return value

    def unit(self, parse: Callable[[object], Any], value: object, path: str) -> Any:
        try:
            return parse(value)
        except ValueError as err:
            self.fail(path, str(err))

    def bandwidth(self, spec: dict[str, Any], path: str, default: float) -> float:
        """``spec["bandwidth"]`` in bit/s, or ``default`` when absent."""
        return self.unit(parse_bandwidth, spec["bandwidth"], f"{path}.bandwidth") if "bandwidth" in spec else default

    def latency(self, spec: dict[str, Any], path: str, default: Fraction) -> Fraction:
        """``spec["latency"]`` in exact seconds, or ``default`` when absent."""
        return self.unit(parse_latency, spec["latency"], f"{path}.latency") if "latency" in spec else default

    def buffer(self, spec: dict[str, Any], path: str, default: float | None) -> float | None:
        """``spec["buffer"]`` in bytes, or ``default`` when absent (None: unlimited)."""
        return self.unit(parse_size, spec["buffer"], f"{path}.buffer") if "buffer" in spec else default

    def capacity(self, spec: dict[str, Any], path: str, default: float | None) -> float | None:
        """``spec["capacity"]`` in tuples per second, or ``default`` when absent (None: unlimited)."""
        if "capacity" not in spec:
            return default
        capacity = self.number(spec["capacity"], f"{path}.capacity", positive=True)
        if capacity > MAX_CAPACITY:
            self.fail(f"{path}.capacity", f"must be at most {MAX_CAPACITY:g} tuples/s, got {shown(spec['capacity'])}")
        return capacity

    def cpu(self, spec: dict[str, Any], path: str, default: float | None) -> float | None:
        """``spec["cpu"]`` in operations per second, or ``default`` when absent (None: unlimited)."""
        if "cpu" not in spec:
            return default
        value = spec["cpu"]
        if isinstance(value, str) and re.fullmatch(NUMBER_PATTERN, value):  # 2e6: YAML 1.1 wants 2.0e+6
            self.fail(
                f"{path}.cpu",
                f"expected a number, got {_describe(value)}: YAML reads an exponent without a dot and a sign"
                " as text (write 2000000 or 2.0e+6 for 2 million)",
            )
        cpu = self.number(value, f"{path}.cpu", positive=True)
        if cpu > MAX_CPU:
            self.fail(f"{path}.cpu", f"must be at most {MAX_CPU:g} operations/s, got {shown(spec['cpu'])}")
        return cpu

    def input_buffer(self, spec: dict[str, Any], path: str, default: float | None) -> float | None:
        """``spec["input_buffer"]`` in bytes, or ``default`` when absent (None: unlimited)."""
        if "input_buffer" not in spec:
            return default
        return self.unit(parse_size, spec["input_buffer"], f"{path}.input_buffer")

    def node_limits(
        self, spec: dict[str, Any], path: str, defaults: Mapping[str, float | None]
    ) -> dict[str, float | None]:
        """A super-peer's limits (:data:`NODE_LIMITS`) as ``spec`` gives them, each else ``defaults``'."""
        return {
            "capacity": self.capacity(spec, path, defaults["capacity"]),
            "cpu": self.cpu(spec, path, defaults["cpu"]),
            "input_buffer": self.input_buffer(spec, path, defaults["input_buffer"]),
        }

    def cpu_costs(self, value: object) -> CpuCosts:
        """The operations each step of a super-peer's operators costs: whole numbers >= 0, each else
        :class:`CpuCosts`' default."""
        spec = self.mapping(value, "cpu_costs", CPU_COSTS_KEYS)
        return CpuCosts(**{key: self.integer(n, f"cpu_costs.{key}", maximum=MAX_CPU_COST) for key, n in spec.items()})

    def length(self, spec: dict[str, Any], path: str) -> float:
        """``spec["length"]``: km, a number >= 0."""
        length = self.number(spec["length"], f"{path}.length", minimum=0)
        if length > MAX_LENGTH_KM:
            self.fail(f"{path}.length", f"must be at most {MAX_LENGTH_KM:g} km, got {shown(spec['length'])}")
        return length

    def planner(self, value: object) -> tuple[float, float]:
        """The planner's settings: ``max_utilization``, the share of a bandwidth or capacity it plans for,
        and ``peak_sd``, the standard deviations of a second's load it keeps within the whole of it."""
        spec = self.mapping(value, "planner", PLANNER_KEYS)
        share = self.number(spec.get("max_utilization", DEFAULT_MAX_UTILIZATION), "planner.max_utilization")
        if not 0 < share <= 1:
            self.fail("planner.max_utilization", f"must lie in (0, 1], got {shown(spec['max_utilization'])}")
        peak_sd = self.number(spec.get("peak_sd", DEFAULT_PEAK_SD), "planner.peak_sd")
        if not 0 <= peak_sd <= MAX_PEAK_SD:
            self.fail("planner.peak_sd", f"must lie in [0, {MAX_PEAK_SD:g}], got {shown(spec['peak_sd'])}")
        return share, peak_sd

    def unique(self, seen: dict[str, str], value: str, path: str, what: str) -> None:
        if value in seen:
            self.fail(path, f"duplicate {what} {shown(value)} (also {seen[value]})")
        seen[value] = path

    # --- sections -----------------------------------------------------------------------------------

    def scenario(self, doc: object) -> Scenario:
        if not isinstance(doc, dict):
            self.fail("", f"expected a mapping of scenario keys at the top level, got {_describe(doc)}")
        doc = self.mapping(doc, "", TOP_KEYS)
        name = doc["name"]
        if not isinstance(name, str) or not PEER_ID.fullmatch(name):
            self.fail("name", f"expected [A-Za-z0-9_-]+, got {_describe(name)}")
        if len(name) > MAX_ID_LENGTH:
            self.fail("name", f"longer than {MAX_ID_LENGTH} characters, got {_describe(name)}")
        seed = self.integer(doc.get("seed", 0), "seed")
        duration = self.number(doc["duration"], "duration", positive=True)
        if duration > LONGEST_RUN_S:
            self.fail("duration", f"must be at most {LONGEST_RUN_S:,} s (46 days: time is counted in 64-bit "
                      f"picoseconds, docs/ACCOUNTING.md), got {shown(doc['duration'])}")  # fmt: skip
        self.duration = duration  # a timed replay's mean rate is over the run
        header_bytes = self.integer(
            doc.get("header_bytes", DEFAULT_HEADER_BYTES), "header_bytes", maximum=MAX_HEADER_BYTES
        )
        max_utilization, peak_sd = self.planner(doc.get("planner", {}))
        cpu_costs = self.cpu_costs(doc.get("cpu_costs", {}))
        bandwidth, latency, super_peers, links, limited = self.network(doc["network"], seed)
        thin_peers = self.thin_peers(doc["thin_peers"], super_peers, links, bandwidth, latency, seed)
        streams = self.streams(doc["streams"], {p.id: p.attach for p in thin_peers}, seed)
        self.tuples(streams, duration)
        subscriptions = self.subscriptions(doc.get("subscriptions", []), thin_peers, streams, duration, seed)
        self.replays_exhausted(streams, subscriptions, duration)
        events = self.events(doc, super_peers, links, duration, seed)
        return Scenario(
            name=name,
            seed=seed,
            duration=duration,
            header_bytes=header_bytes,
            super_peers=super_peers,
            links=links,
            thin_peers=thin_peers,
            streams=streams,
            subscriptions=subscriptions,
            capacities=limited["capacity"],
            max_utilization=max_utilization,
            peak_sd=peak_sd,
            events=events,
            positions=tuple((sp, self.positions[sp]) for sp in super_peers if sp in self.positions),
            path=os.path.abspath(self.file),
            warnings=tuple(self.warnings),
            generated=tuple(self.generated),
            cpus=limited["cpu"],
            input_buffers=limited["input_buffer"],
            cpu_costs=cpu_costs,
        )

    def events(
        self, doc: dict[str, Any], super_peers: tuple[str, ...], links: tuple[LinkSpec, ...], duration: float, seed: int
    ) -> tuple[NetworkEvent, ...]:
        """The backbone's failures and recoveries (topologies/events_loader.py), in time order."""
        if "events" not in doc:
            return ()
        events, told = read_events(
            self,
            doc["events"],
            super_peers=super_peers,
            links=links,
            duration=duration,
            seed=seed,
            transit=self.transit,
        )
        self.generated += told
        self.expanded["events"] = [event_entry(event) for event in events]
        return events

    def network(
        self, value: object, seed: int
    ) -> tuple[float, Fraction, tuple[str, ...], tuple[LinkSpec, ...], dict[str, tuple[tuple[str, float], ...]]]:
        """Default bandwidth and latency, super-peers, links, and for each of :data:`NODE_LIMITS` (capacity,
        cpu, input_buffer) the (id, limit) of the super-peers it limits, in super-peer order."""
        net = self.mapping(value, "network", NETWORK_KEYS)
        defaults = self.mapping(net.get("defaults", {}), "network.defaults", DEFAULTS_KEYS)
        bandwidth = self.bandwidth(defaults, "network.defaults", DEFAULT_BANDWIDTH)
        latency = self.latency(defaults, "network.defaults", DEFAULT_LATENCY)
        buffer = self.buffer(defaults, "network.defaults", None)
        default_limits = self.node_limits(defaults, "network.defaults", dict.fromkeys(NODE_LIMITS))
        self.km_per_s = self.number(
            net.get("propagation_km_per_s", importing.DEFAULT_PROPAGATION_KM_PER_S),
            "network.propagation_km_per_s",
            positive=True,
        )
        self.min_latency = (
            self.unit(parse_latency, net["min_latency"], "network.min_latency") if "min_latency" in net else Fraction(0)
        )
        sources = [key for key in ("generate", "import", "super_peers") if key in net]
        if len(sources) > 1:
            self.fail(f"network.{sources[1]}", f"not allowed together with network.{sources[0]}")
        if not sources:
            self.fail("network", "missing required key 'super_peers' (or 'generate' or 'import')")
        if "generate" in net:
            if "links" in net:
                self.fail("network.links", "not allowed together with network.generate")
            super_peers, links = self.generate(net["generate"], seed, bandwidth, latency)
            if buffer is not None:
                links = tuple(replace(link, buffer=buffer) if link.buffer is None else link for link in links)
            limits = {sp: default_limits for sp in super_peers}
        elif "import" in net:
            super_peers, links = self.imported(net, bandwidth, buffer)
            limits = {sp: default_limits for sp in super_peers}
        else:
            super_peers, limits = self.super_peers(net["super_peers"], default_limits)
            links = self.links(net.get("links", []), super_peers, bandwidth, latency, buffer)
        self.connected(super_peers, links)
        limited = {
            name: tuple((sp, own[name]) for sp, own in limits.items() if own[name] is not None) for name in NODE_LIMITS
        }
        return bandwidth, latency, super_peers, links, limited

    def imported(
        self, net: dict[str, Any], bandwidth: float, buffer: float | None
    ) -> tuple[tuple[str, ...], tuple[LinkSpec, ...]]:
        """A real network's super-peers and links (topologies/importing.py), the overrides of
        ``network.links`` applied; what it made goes to ``run.py validate`` and its explicit form to
        ``run.py expand``."""
        found = importing.read_import(self, net["import"], "network.import", MAX_ID_LENGTH, RESERVED_IDS)
        name, default = MAX_SUPER_PEERS
        limit = cap(name, default)
        if len(found.super_peers) > limit:
            self.fail(
                "network.import",
                f"{found.source}: {len(found.super_peers):,} super-peers exceed the cap of {limit:,} (set {name} to"
                " change it)",
            )
        overrides = self.link_overrides(net.get("links", []), found)
        links = importing.resolve_links(
            self, found, overrides, bandwidth=bandwidth, buffer=buffer, km_per_s=self.km_per_s, minimum=self.min_latency
        )
        self.positions = dict(found.positions)
        self.weights, self.demands = found.weights, found.demands
        notes = [f"{len(found.positions)} positioned"] if found.positions else []
        if found.dropped:
            notes.append(found.dropped)
        if found.parallel:
            notes.append(f"{found.parallel} parallel edge{'s' * (found.parallel > 1)} merged")
        if found.self_loops:
            notes.append(f"{found.self_loops} self-loop{'s' * (found.self_loops > 1)} ignored")
        if found.demands:
            notes.append(f"a demand matrix of {len(found.demands):,} pairs")
        self.generated.append(
            f"network.import: {found.source}: {len(found.super_peers)} super-peers, {len(links)} links"
            + (f" ({', '.join(notes)})" if notes else "")
            + (f"; {len(found.renamed)} ids differ from the names given:" if found.renamed else "")
        )
        shown_at_most = importing.SHOWN_RENAMES
        self.generated += [f"  {line}" for line in found.renamed[:shown_at_most]]
        if len(found.renamed) > shown_at_most:
            self.generated.append(f"  and {len(found.renamed) - shown_at_most} more (run.py expand lists them all)")
        if found.renamed:
            self.notes += [f"{found.source}: ids that differ from the names given:", *found.renamed]
        explicit = {k: net[k] for k in ("defaults", "propagation_km_per_s", "min_latency") if k in net}
        explicit["super_peers"] = [
            {"id": sp, "pos": list(self.positions[sp])} if sp in self.positions else sp for sp in found.super_peers
        ]
        explicit["links"] = [self.explicit_link(link, buffer) for link in links]
        self.expanded["network"] = explicit
        return found.super_peers, links

    def explicit_link(self, link: LinkSpec, buffer: float | None) -> list:
        """``[a, b, {latency, bandwidth[, length][, buffer]}]``, loading back to ``link`` exactly: the length
        is written unless it is the one the ends' positions give."""
        options: dict[str, Any] = {"latency": latency_text(link.latency), "bandwidth": _whole(link.bandwidth)}
        if link.length is not None and link.length != self.span(link.a, link.b):
            options["length"] = link.length
        if link.buffer != buffer:
            options["buffer"] = _whole(link.buffer)
        return [link.a, link.b, options]

    def span(self, a: str, b: str) -> float | None:
        """km between the positions of super-peers ``a`` and ``b``, or None when either has none."""
        if a in self.positions and b in self.positions:
            return importing.great_circle_km(self.positions[a], self.positions[b])
        return None

    def link_overrides(
        self, value: object, found: importing.ImportedNetwork
    ) -> dict[frozenset, tuple[str, dict[str, Any]]]:
        """``network.links`` beside an import: options overriding imported links, by unordered pair of ends
        (the key path of the options, and the options).  A pair the data does not join is an error:
        nothing is added."""
        known = set(found.super_peers)
        joined = {frozenset((edge.a, edge.b)) for edge in found.edges}
        seen: dict[frozenset, str] = {}
        overrides = {}
        for i, item in enumerate(self.sequence(value, "network.links")):
            path = f"network.links[{i}]"
            if not isinstance(item, list) or len(item) != 3:
                self.fail(path, f"expected [a, b, {{bandwidth, latency, buffer, length}}], got {shown(item)}")
            a, b = (self.reference(item[end], known, f"{path}[{end}]", "super-peer") for end in (0, 1))
            key = frozenset((a, b))
            if key not in joined:
                self.fail(path, f"{found.source} has no link {a}-{b} (links beside an import only override its links)")
            if key in seen:
                self.fail(path, f"duplicate link {a}-{b} (also {seen[key]})")
            seen[key] = path
            overrides[key] = (f"{path}[2]", self.mapping(item[2], f"{path}[2]", LINK_KEYS))
        return overrides

    def super_peers(
        self, value: object, defaults: Mapping[str, float | None]
    ) -> tuple[tuple[str, ...], dict[str, Mapping[str, float | None]]]:
        """The ids, and each one's limits (capacity, cpu, input_buffer: ``defaults``' unless its mapping
        gives its own)."""
        items = self.sequence(value, "network.super_peers")
        if not items:
            self.fail("network.super_peers", "expected at least one super-peer, got []")
        seen: dict[str, str] = {}
        limits: dict[str, Mapping[str, float | None]] = {}
        for i, sp in enumerate(items):
            path = f"network.super_peers[{i}]"
            own, pos = defaults, None
            if isinstance(sp, dict):
                spec = self.mapping(sp, path, SUPER_PEER_KEYS)
                own = self.node_limits(spec, path, defaults)
                pos = self.position(spec["pos"], f"{path}.pos") if "pos" in spec else None
                path, sp = f"{path}.id", spec["id"]
            self.unique(seen, self.node_id(sp, path, SUPER_PEER_ID), path, "super-peer")
            limits[sp] = own
            if pos is not None:
                self.positions[sp] = pos
        return tuple(limits), limits

    def position(self, value: object, path: str) -> tuple[float, float]:
        """``[lon, lat]`` in degrees."""
        if not isinstance(value, list) or len(value) != 2:
            self.fail(path, f"expected [longitude, latitude] in degrees, got {shown(value)}")
        lon, lat = (self.number(x, f"{path}[{k}]") for k, x in enumerate(value))
        if not (-180 <= lon <= 180 and -90 <= lat <= 90):
            self.fail(path, f"expected longitude in [-180, 180] and latitude in [-90, 90], got {shown(value)}")
        return lon, lat

    def links(
        self,
        value: object,
        super_peers: tuple[str, ...],
        bandwidth: float,
        latency: Fraction,
        buffer: float | None = None,
    ) -> tuple[LinkSpec, ...]:
        known = set(super_peers)
        seen: dict[tuple[str, str], str] = {}
        links = []
        for i, item in enumerate(self.sequence(value, "network.links")):
            path = f"network.links[{i}]"
            if not isinstance(item, list) or len(item) not in (2, 3):
                self.fail(path, f"expected [a, b] or [a, b, {{bandwidth, latency}}], got {shown(item)}")
            a, b = (self.reference(item[end], known, f"{path}[{end}]", "super-peer") for end in (0, 1))
            if a == b:
                self.fail(path, f"self-loop on {shown(a)}")
            key = (min(a, b), max(a, b))
            if key in seen:
                self.fail(path, f"duplicate link {a}-{b} (also {seen[key]})")
            seen[key] = path
            options = self.mapping(item[2], f"{path}[2]", LINK_KEYS) if len(item) == 3 else {}
            length = self.length(options, f"{path}[2]") if "length" in options else self.span(a, b)
            own = latency if length is None else importing.latency_of_length(length, self.km_per_s, self.min_latency)
            links.append(
                LinkSpec(
                    a,
                    b,
                    self.bandwidth(options, f"{path}[2]", bandwidth),
                    self.latency(options, f"{path}[2]", own),
                    self.buffer(options, f"{path}[2]", buffer),
                    length,
                )
            )
        return tuple(links)

    def generate(
        self, value: object, seed: int, bandwidth: float, latency: Fraction
    ) -> tuple[tuple[str, ...], tuple[LinkSpec, ...]]:
        path = "network.generate"
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping, got {_describe(value)}")
        model = value.get("model")
        if not isinstance(model, str) or model not in generators.MODELS:
            expected = ", ".join(sorted(generators.MODELS))
            self.fail(f"{path}.model", f"unknown model {shown(model)} (expected one of: {expected})")
        accepted = generators.parameters(model)
        spec = self.mapping(value, path, {"model": True} | accepted)
        params: dict[str, Any] = {"seed": seed, "bandwidth": bandwidth, "latency": latency}
        params = {k: v for k, v in params.items() if k in accepted}
        for key, raw in spec.items():
            if key == "model":
                continue
            params[key] = self.parameter(generators.PARAMETER_KINDS[key], raw, f"{path}.{key}")
        name, default = MAX_SUPER_PEERS
        limit = cap(name, default)
        count = generators.node_count(model, params)
        if count > limit:
            self.fail(path, f"{model} of {count:,} super-peers exceeds the cap of {limit:,} (set {name} to change it)")
        name, default = MAX_NODE_PAIRS
        limit = cap(name, default)
        pairs = generators.pair_count(model, params)
        if pairs > limit:
            self.fail(
                path,
                f"{model} of {count:,} super-peers weighs {pairs:,} node pairs, over the cap of {limit:,}"
                f" (set {name} to change it)",
            )
        if model == "transit-stub":
            self.transit = params["transit"]
        try:
            return generators.generate(model, **params)
        except ValueError as err:
            self.fail(path, str(err))

    def parameter(self, kind: str, value: object, path: str) -> Any:
        if kind in ("size", "seed"):
            return self.integer(value, path)
        if kind == "probability":
            probability = self.number(value, path, minimum=0)
            if probability > 1:
                self.fail(path, f"must lie in [0, 1], got {shown(value)}")
            return probability
        parse = {"bandwidth": parse_bandwidth, "latency": parse_latency, "buffer": parse_size}[kind]
        return self.unit(parse, value, path)

    def connected(self, super_peers: tuple[str, ...], links: tuple[LinkSpec, ...]) -> None:
        adjacent: dict[str, list[str]] = {sp: [] for sp in super_peers}
        for link in links:
            adjacent[link.a].append(link.b)
            adjacent[link.b].append(link.a)
        reached = {super_peers[0]}
        frontier = [super_peers[0]]
        while frontier:
            for nxt in adjacent[frontier.pop()]:
                if nxt not in reached:
                    reached.add(nxt)
                    frontier.append(nxt)
        missing = [sp for sp in super_peers if sp not in reached]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            self.fail("network.links", f"backbone is disconnected: {shown} unreachable from {super_peers[0]}")

    def thin_peers(
        self,
        value: object,
        super_peers: tuple[str, ...],
        links: tuple[LinkSpec, ...],
        bandwidth: float,
        latency: Fraction,
        seed: int,
    ) -> tuple[ThinPeerSpec, ...]:
        known = set(super_peers)
        degrees: dict[str, int] = {}
        for link in links:
            degrees[link.a] = degrees.get(link.a, 0) + 1
            degrees[link.b] = degrees.get(link.b, 0) + 1
        peers = []
        ids: dict[str, str] = {}
        written: list = []
        made = 0  # by generators, toward their cap
        for i, item in enumerate(self.sequence(value, "thin_peers")):
            if workload_generators.is_generator(item):
                path = f"thin_peers[{i}].generate"
                entries, told = workload_generators.thin_peers(
                    self, item["generate"], path, seed=seed, position=i, super_peers=super_peers,
                    degrees=degrees, transit=self.transit, weights=self.weights, made=made,
                )  # fmt: skip
                made += len(entries)
                self.generated.append(told)
                items = [(f"{path}[{k}]", entry) for k, entry in enumerate(entries)]
            else:
                items = [(f"thin_peers[{i}]", item)]
            for path, entry in items:
                written.append(entry)
                peers.append(self.thin_peer(entry, path, known, ids, bandwidth, latency))
        self.expanded["thin_peers"] = written
        return tuple(peers)

    def thin_peer(
        self, item: object, path: str, super_peers: set[str], ids: dict[str, str], bandwidth: float, latency: Fraction
    ) -> ThinPeerSpec:
        spec = self.mapping(item, path, THIN_PEER_KEYS)
        peer_id = self.node_id(spec["id"], f"{path}.id")
        if peer_id in super_peers:
            self.fail(f"{path}.id", f"{shown(peer_id)} is already a super-peer id")
        self.unique(ids, peer_id, f"{path}.id", "thin-peer")
        attach = self.reference(spec["attach"], super_peers, f"{path}.attach", "super-peer")
        return ThinPeerSpec(peer_id, attach, self.bandwidth(spec, path, bandwidth), self.latency(spec, path, latency))

    def streams(self, value: object, homes: dict[str, str], seed: int) -> tuple[StreamSpec, ...]:
        """The streams, a generator's (topologies/stream_generator.py) among them; ``homes``: each
        thin-peer's super-peer."""
        streams = []
        seen: dict[str, str] = {}
        written: list = []
        made = 0  # by generators, toward their cap
        for i, item in enumerate(self.sequence(value, "streams")):
            if workload_generators.is_generator(item):
                path = f"streams[{i}].generate"
                entries, told = stream_generator.streams(
                    self, item["generate"], path, seed=seed, position=i, homes=homes, weights=self.weights,
                    id_pattern=ATTRIBUTE_NAME, made=made,
                )  # fmt: skip
                made += len(entries)
                self.generated.append(told)
                items = [(f"{path}[{k}]", entry) for k, entry in enumerate(entries)]
            else:
                items = [(f"streams[{i}]", item)]
            for path, entry in items:
                written.append(entry)
                streams.append(self.stream(entry, path, homes, seen))
        self.expanded["streams"] = written
        return tuple(streams)

    def stream(self, item: object, path: str, thin_peers: dict[str, str], seen: dict[str, str]) -> StreamSpec:
        spec = self.mapping(item, path, STREAM_KEYS)
        stream_id = self.identifier(spec["id"], f"{path}.id", ATTRIBUTE_NAME)
        self.unique(seen, stream_id, f"{path}.id", "stream")
        source = self.reference(spec["source"], thin_peers, f"{path}.source", "thin-peer")
        if ("schema" in spec) == ("replay" in spec):
            self.fail(path, "expected exactly one of 'schema' and 'replay'")
        time = None
        if "time" in spec:
            time = spec["time"]
            if "replay" not in spec:
                self.fail(f"{path}.time", "a time column needs a replayed CSV file (replay)")
            if not isinstance(time, str) or not time:
                self.fail(f"{path}.time", f"expected the name of a column of the CSV file, got {_describe(time)}")
            if "rate" in spec:
                self.fail(f"{path}.rate", "not allowed with a time column: the timestamps give the emission times")
        elif "rate" not in spec:
            self.fail(path, "missing required key 'rate' (or 'time' for a replay timed by a column)")
        start = None
        if "time_start" in spec:
            if time is None:
                self.fail(f"{path}.time_start", "needs a time column (time)")
            start = spec["time_start"]
            if isinstance(start, bool) or not isinstance(start, str | int | float):
                self.fail(f"{path}.time_start", f"expected seconds or an ISO 8601 date-time, got {_describe(start)}")
            start = str(start)
        if "replay" in spec:
            replay, attributes = self.replay(spec["replay"], f"{path}.replay", time, start)
        else:
            replay, attributes = None, self.schema(spec["schema"], f"{path}.schema")
        if time is None:
            rate = self.number(spec["rate"], f"{path}.rate", positive=True)
        else:  # the mean over the run, for the planner's cost model: the rows emitted before the end
            rate = max(1, int(np.searchsorted(read_replay(replay, time, start).times, self.duration))) / self.duration
        return StreamSpec(stream_id, source, rate, attributes, replay, time, start)

    def tuples(self, streams: tuple[StreamSpec, ...], duration: float) -> None:
        """Refuse a run emitting more tuples than the cap (every engine holds each stream's emission times)."""
        name, default = MAX_TUPLES
        limit = cap(name, default)
        total = duration * sum(s.rate for s in streams)
        if not total <= limit:
            self.fail(
                "streams",
                f"{total:.3g} tuples over {duration:g} s (rates x duration) exceed the cap of {limit:,}"
                f" (set {name} to change it)",
            )

    def schema(self, value: object, path: str) -> tuple[AttributeSpec, ...]:
        if not isinstance(value, dict) or not value:
            self.fail(path, f"expected a non-empty mapping of attributes, got {_describe(value)}")
        attributes = []
        for name, item in value.items():
            attr_path = f"{path}.{_step(name)}"
            self.identifier(name, attr_path, ATTRIBUTE_NAME)
            spec = self.mapping(item, attr_path, ATTRIBUTE_KEYS)
            kind = spec.get("type", "float")
            if kind not in ("float", "int", "string"):
                self.fail(f"{attr_path}.type", f"expected 'float', 'int' or 'string', got {shown(kind)}")
            if kind == "string":
                dist, values = self.texts(spec["distribution"], f"{attr_path}.distribution")
                attributes.append(AttributeSpec(name, kind, dist, values))
                continue
            dist = self.distribution(spec["distribution"], f"{attr_path}.distribution", kind == "int")
            attributes.append(AttributeSpec(name, kind, dist))
        return tuple(attributes)

    def texts(self, value: object, path: str) -> tuple[Choice, tuple[str, ...]]:
        """A string attribute's ``{choice: [texts]}`` (or ``{choice: {values, weights}}``): the choice of
        their codes (positions in the list), and the texts."""
        if not isinstance(value, dict) or list(value) != ["choice"]:
            self.fail(path, f"a string attribute takes {{choice: ['a', 'b', ...]}}, got {shown(value)}")
        spec = value["choice"]
        inner = f"{path}.choice"
        values_path = f"{inner}.values" if isinstance(spec, dict) else inner
        if isinstance(spec, dict):
            spec = self.mapping(spec, inner, {"values": True, "weights": False})
        texts = self.sequence(spec["values"] if isinstance(spec, dict) else spec, values_path)
        seen: dict[str, str] = {}
        for k, text in enumerate(texts):
            if not isinstance(text, str) or not text or len(text) > MAX_ID_LENGTH or not text.isprintable():
                self.fail(
                    f"{values_path}[{k}]",
                    f"expected a printable text of 1 to {MAX_ID_LENGTH} characters, got {shown(text)}",
                )
            self.unique(seen, text, f"{values_path}[{k}]", "value")
        codes = list(range(len(texts)))
        choice = self.choice({**spec, "values": codes} if isinstance(spec, dict) else codes, inner, True)
        return choice, tuple(texts)

    def distribution(self, value: object, path: str, integer: bool) -> Distribution:
        if not isinstance(value, dict) or len(value) != 1:
            self.fail(
                path,
                "expected one of {uniform: [lo, hi]}, {normal: [mu, sigma]}, {choice: [...]},"
                f" got {shown(value)}",
            )
        ((kind, args),) = value.items()
        inner = f"{path}.{kind}"
        if kind not in DISTRIBUTION_KINDS:
            self.fail(path, f"unknown distribution {shown(kind)} (expected one of: {', '.join(DISTRIBUTION_KINDS)})")
        if kind == "choice":
            return self.choice(args, inner, integer)
        if not isinstance(args, list) or len(args) != 2:
            self.fail(inner, f"expected a list of two numbers, got {shown(args)}")
        first, second = (self.number(x, f"{inner}[{k}]") for k, x in enumerate(args))
        if kind == "uniform":
            if first >= second:
                self.fail(inner, f"needs lo < hi, got {shown(args)}")
            if not math.isfinite(second - first):
                self.fail(inner, f"range too wide to draw from (hi - lo overflows), got {shown(args)}")
            if integer and math.ceil(first) > math.floor(second):
                self.fail(inner, f"contains no integer, got {shown(args)}")
            return Uniform(first, second, integer)
        if second <= 0:
            self.fail(f"{inner}[1]", f"sigma must be positive, got {shown(args[1])}")
        if not math.isfinite(abs(first) + 40 * second):
            self.fail(inner, f"values would overflow to infinity (mu +- 40 sigma is not finite), got {shown(args)}")
        return Normal(first, second, integer)

    def choice(self, value: object, path: str, integer: bool) -> Choice:
        if isinstance(value, dict):
            spec = self.mapping(value, path, {"values": True, "weights": False})
            values_path, values = f"{path}.values", spec["values"]
        else:
            spec, values_path, values = {}, path, value
        values = self.sequence(values, values_path)
        if not values:
            self.fail(values_path, "expected at least one value, got []")
        numbers = tuple(self.number(x, f"{values_path}[{k}]") for k, x in enumerate(values))
        if integer:
            for k, x in enumerate(numbers):
                if not x.is_integer():
                    self.fail(f"{values_path}[{k}]", f"an int attribute needs integer values, got {shown(values[k])}")
        if "weights" not in spec:
            return Choice(numbers)
        weights_path = f"{path}.weights"
        raw = self.sequence(spec["weights"], weights_path)
        if len(raw) != len(numbers):
            self.fail(weights_path, f"expected {len(numbers)} weights (one per value), got {len(raw)}")
        weights = tuple(self.number(w, f"{weights_path}[{k}]", minimum=0) for k, w in enumerate(raw))
        if sum(weights) <= 0:
            self.fail(weights_path, f"weights must not all be zero, got {shown(raw)}")
        if not math.isfinite(sum(weights)):
            self.fail(weights_path, f"weights must have a finite sum, got {shown(raw)}")
        return Choice(numbers, weights)

    def replay(
        self, value: object, path: str, time: str | None = None, start: str | None = None
    ) -> tuple[str, tuple[AttributeSpec, ...]]:
        if not isinstance(value, str) or not value:
            self.fail(path, f"expected a CSV file path, got {_describe(value)}")
        if "\0" in value:  # no file has one; os.stat would raise ValueError
            self.fail(path, f"bad file name {shown(value)} (a NUL character)")
        full = os.path.normpath(os.path.join(self.base_dir, value))
        try:
            info = os.stat(full)
        except OSError:
            info = None  # reported by read_replay below
        if info is not None and not stat.S_ISREG(info.st_mode):
            self.fail(path, f"replay file {shown(value)} is not a regular file")
        if info is not None and info.st_size > MAX_REPLAY_BYTES:
            self.fail(
                path, f"replay file {shown(value)}: {info.st_size:,} bytes, over the limit of {MAX_REPLAY_BYTES:,}"
            )
        try:
            table = read_replay(full, time, start)
        except FileNotFoundError:
            self.fail(path, f"replay file not found: {shown(value)}")
        except OSError as err:
            self.fail(path, f"cannot read replay file {shown(value)}: {err.strerror}")
        except (ReplayFileError, UnicodeDecodeError) as err:
            self.fail(path, f"{value}: {err}")
        for name in table.names:
            if is_keyword(name):
                self.fail(path, f"{value}: row 1: attribute name {shown(name)} is a query keyword")
            if len(name) > MAX_ID_LENGTH:
                self.fail(
                    path, f"{value}: row 1: attribute name {shown(name)} is longer than {MAX_ID_LENGTH} characters"
                )
        if not table.names:
            self.fail(path, f"{value}: no attribute besides the time column {shown(time)}")
        return full, tuple(
            AttributeSpec(n, "string", Empirical.of(table.columns[n]), table.texts[n])
            if n in table.texts
            else AttributeSpec(n, "float", Empirical.of(table.columns[n]))
            for n in table.names
        )

    def subscriptions(
        self,
        value: object,
        thin_peers: tuple[ThinPeerSpec, ...],
        streams: tuple[StreamSpec, ...],
        duration: float,
        seed: int,
    ) -> tuple[SubscriptionSpec, ...]:
        peers = {p.id for p in thin_peers}
        by_id = {s.id: s for s in streams}
        sources = {s.id: s.source for s in streams}
        seen: dict[str, str] = {}
        subscriptions = []
        written: list = []
        made = 0  # by generators, toward their cap
        for i, item in enumerate(self.sequence(value, "subscriptions")):
            if workload_generators.is_generator(item):
                path = f"subscriptions[{i}].generate"
                entries, told = workload_generators.subscriptions(
                    self, item["generate"], path, seed=seed, position=i, duration=duration,
                    thin_peers=[p.id for p in thin_peers], sources=set(sources.values()), streams=streams,
                    homes={p.id: p.attach for p in thin_peers}, weights=self.weights, demands=self.demands,
                    made=made,
                )  # fmt: skip
                made += len(entries)
                self.generated.append(told)
                items = [(f"{path}[{k}]", entry) for k, entry in enumerate(entries)]
            else:
                items = [(f"subscriptions[{i}]", item)]
            for path, entry in items:
                written.append(entry)
                subscriptions.append(self.subscription(entry, path, peers, by_id, sources, seen, duration))
        self.expanded["subscriptions"] = written
        return tuple(subscriptions)

    def subscription(
        self,
        item: object,
        path: str,
        peers: set[str],
        streams: dict[str, StreamSpec],
        sources: dict[str, str],
        seen: dict[str, str],
        duration: float,
    ) -> SubscriptionSpec:
        spec = self.mapping(item, path, SUBSCRIPTION_KEYS)
        sub_id = self.identifier(spec["id"], f"{path}.id")
        self.unique(seen, sub_id, f"{path}.id", "subscription")
        peer = self.reference(spec["peer"], peers, f"{path}.peer", "thin-peer")
        at = self.number(spec["at"], f"{path}.at")
        if not 0 <= at < duration:
            self.fail(f"{path}.at", f"must lie in [0, duration) = [0, {duration:g}), got {shown(spec['at'])}")
        until = None
        if spec.get("until") is not None:
            until = self.number(spec["until"], f"{path}.until")
            if until <= at:
                self.fail(f"{path}.until", f"must be greater than at ({shown(spec['at'])}), got {shown(spec['until'])}")
            if until > duration:
                self.warnings.append(
                    f"{self.file}: {path}.until: {until:g} is past the end of the run (duration {duration:g});"
                    f" {sub_id} stays to the end"
                )
        query = self.query(spec["query"], f"{path}.query", streams)
        if query.where.is_empty():
            self.warnings.append(f"{self.file}: {path}.query: WHERE is always false; {sub_id} receives nothing")
        if sources[query.stream] == peer:
            self.warnings.append(
                f"{self.file}: {path}.peer: {peer} is the source of stream {query.stream}; {sub_id} receives its"
                " own tuples back and crosses no backbone link"
            )
        return SubscriptionSpec(sub_id, peer, at, until, query)

    def replays_exhausted(
        self, streams: tuple[StreamSpec, ...], subscriptions: tuple[SubscriptionSpec, ...], duration: float
    ) -> None:
        """Warn about a replayed stream whose file ends before the run does, naming the subscriptions that
        register after its last tuple (they receive nothing from it)."""
        from topologies.workload import tuple_count

        for i, stream in enumerate(streams):
            if stream.replay is None or stream.time is not None:  # a timed replay ends when its recording does
                continue
            rows = read_replay(stream.replay).rows
            due = tuple_count(replace(stream, replay=None), duration)
            if rows >= due:
                continue
            last = (rows - 1) / stream.rate  # the emission time of its last tuple
            late = [s.id for s in subscriptions if s.stream == stream.id and s.at > last]
            told = f"; {_listed(late)} register after that and receive nothing" if late else ""
            self.warnings.append(
                f"{self.file}: streams[{i}].replay: the file has {rows:,} rows, fewer than the {due:,} tuples due"
                f" at rate {stream.rate:g} over {duration:g} s: its last tuple is emitted at t={last:g} s{told}"
            )

    def query(self, value: object, path: str, streams: Mapping[str, StreamSpec]) -> Query:
        from matcher.parser import parse_query  # the parser is the matcher's; imported where it is used

        if not isinstance(value, str):
            self.fail(path, f"expected a query string, got {_describe(value)}")
        try:
            query = parse_query(value, lambda stream: streams[stream].texts if stream in streams else {})
        except QueryError as err:
            message = str(err)
            if len(err.token) > 60:  # the parser quotes the offending token whole: cut it as any echoed value
                message = message.replace(repr(err.token), shown(err.token))
            self.fail(path, f"query does not parse: {message}")
        problem = query_problem(query, streams)
        if problem is not None:
            self.fail(path, problem)
        return query


def _whole(value: float) -> int | float:
    """A whole float as an int (``10000000000``, not ``1e10``): how a written file gives a bandwidth."""
    return int(value) if float(value).is_integer() else value


def _listed(ids: list[str], shown_at_most: int = 5) -> str:
    """``Q1, Q2 and 3 more``."""
    more = len(ids) - shown_at_most
    return ", ".join(ids[:shown_at_most]) + (f" and {more} more" if more > 0 else "")


def query_problem(query: Query, streams: Mapping[str, StreamSpec], scenario: str | None = None) -> str | None:
    """Why ``query`` is not a query over ``streams`` (by id), or None: its stream is unknown, or its select
    list (an aggregate query's groups and aggregates) or its WHERE names an attribute the stream lacks.  The
    one check of a query against a scenario, for its subscriptions here and for those a live run receives;
    ``scenario`` names the scenario in the message about an unknown stream."""
    stream = streams.get(query.stream)
    if stream is None:
        return f"unknown stream {shown(query.stream)}" + ("" if scenario is None else f" in scenario {scenario}")
    schema = stream.attribute_names
    counted = tuple(a.attribute for a in getattr(query, "aggregates", ()) if a.attribute is not None)
    for name in (*(query.select or ()), *counted, *query.where.dims):
        if name not in schema:
            return f"unknown attribute {shown(name)} of stream {shown(query.stream)}"
    return None


def load_scenario(path: str | os.PathLike, overrides: Sequence[tuple[str, object]] = ()) -> Scenario:
    """Read, validate and freeze the scenario at ``path``, with the ``(key, value)`` changes of
    ``overrides`` (topologies/overrides.py) made to its document first.

    Raises ScenarioError (one line: file, key path, value) for any invalid input, including YAML
    syntax errors (with their line), missing files and invalid replay CSVs.
    """
    return read_scenario(path, overrides)[0]


def read_scenario(
    path: str | os.PathLike, overrides: Sequence[tuple[str, object]] = ()
) -> tuple[Scenario, dict[str, Any], tuple[str, ...]]:
    """:func:`load_scenario`, the document it was read from with every generator replaced by the entries it
    made and an imported network by its explicit super-peers and links (what ``run.py expand`` writes),
    and lines to keep beside it as comments (every imported node whose id is not its name)."""
    from topologies.overrides import apply_overrides

    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise ScenarioError(f"scenario: expected the path of a file, got {_describe(path)}")
    file = os.fspath(path)
    doc = apply_overrides(read_yaml(file), _changes(overrides, file), file)
    reader = _Reader(file)
    scenario = reader.scenario(doc)
    return scenario, {**doc, **reader.expanded}, tuple(reader.notes)


def scenario_from_document(
    doc: object, source: str = "<document>", overrides: Sequence[tuple[str, object]] = ()
) -> Scenario:
    """The scenario a parsed document (a dict as a scenario file holds) describes, checked exactly like a
    file; errors name ``source`` where they would name the file, and a replayed CSV path is relative to
    the working directory.  ``path`` is None."""
    from topologies.overrides import apply_overrides

    check_value(doc, source)
    reader = _Reader(source)
    reader.base_dir = os.getcwd()
    scenario = reader.scenario(apply_overrides(doc, _changes(overrides, source), source))
    return replace(scenario, path=None)


def _changes(overrides: object, file: str) -> list[tuple[str, object]]:
    """``overrides`` as a list of ``(key, value)`` pairs; ScenarioError naming ``file`` when it is not one."""
    try:
        changes = list(overrides)
        if all(isinstance(change, tuple) and len(change) == 2 for change in changes):
            return changes
    except TypeError:
        pass
    raise ScenarioError(f"{file}: changes: expected (key, value) pairs, got {shown(overrides)}")


def summary(scenario: Scenario) -> str:
    """One line for ``run.py validate``: name, sizes, duration, tuples, warnings."""
    from topologies.workload import tuple_count

    tuples = sum(tuple_count(s, scenario.duration) for s in scenario.streams)
    counts = [
        (len(scenario.super_peers), "super-peer"),
        (len(scenario.links), "link"),
        (len(scenario.thin_peers), "thin-peer"),
        (len(scenario.streams), "stream"),
        (len(scenario.subscriptions), "subscription"),
    ]
    parts = [f"{n} {noun}{'' if n == 1 else 's'}" for n, noun in counts]
    text = f"{scenario.name}: {', '.join(parts)}, {scenario.duration:g} s, {tuples} tuples"
    if scenario.events:
        n = len(scenario.events)
        text += f", {n} network event{'' if n == 1 else 's'}"
    if scenario.warnings:
        text += f", {len(scenario.warnings)} warning(s)"
    return text
