"""A scenario as plain frozen data (docs/SCENARIOS.md): what the loader returns and every layer reads.

Nothing here runs anything; the simulator, Spark and MQTT planes each build their runtime from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

from matcher import Distribution, Query

Direction = tuple[str, str]  # one way of a link: (from, to) node ids

ATTRIBUTE_BYTES = 8
"""Wire bytes of one attribute value: every value travels as a float64."""


def tuple_bytes(header_bytes, n_attributes):
    """Wire size in bytes of a tuple carrying ``n_attributes`` attribute values: the scenario's header and
    :data:`ATTRIBUTE_BYTES` per value.  The one definition of what a tuple weighs on a link, in the
    planner's estimates and in every engine's counts; ``n_attributes`` may be an int or a numpy array of
    counts, and the local engine's numba kernel compiles this very function."""
    return header_bytes + ATTRIBUTE_BYTES * n_attributes


@dataclass(frozen=True)
class LinkSpec:
    """An undirected backbone link; traffic on it is counted per direction."""

    a: str
    b: str
    bandwidth: float  # bit/s
    latency: Fraction  # seconds, exact so that route ties are decided exactly
    buffer: float | None = None  # bytes each direction holds waiting for the wire (None: unlimited)
    length: float | None = None  # km, where known: the data's, or between its ends' positions (byte-km)


@dataclass(frozen=True)
class AttributeSpec:
    name: str
    type: str  # "float", "int" or "string"
    distribution: Distribution | None  # for a replayed stream, the empirical distribution of its column
    # a string attribute's values: it holds (and travels as) the position of its value in this list, its code
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamSpec:
    id: str
    source: str  # thin-peer id
    rate: float  # tuples per second; tuple i is emitted at i / rate (a timed replay: its mean rate)
    attributes: tuple[AttributeSpec, ...]  # in declaration (or CSV header) order
    replay: str | None = None  # absolute path of the CSV replayed, if any
    time: str | None = None  # the replayed CSV's time column, whose timestamps give the emission times
    time_start: str | None = None  # the timestamp emission time 0 stands for (None: the earliest row's)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def texts(self) -> dict[str, tuple[str, ...]]:
        """Each string attribute's values, by name (what a query's quoted texts are read against)."""
        return {a.name: a.values for a in self.attributes if a.type == "string"}


@dataclass(frozen=True)
class ThinPeerSpec:
    """A thin-peer and its access link to its super-peer (bandwidth/latency default to network.defaults)."""

    id: str
    attach: str  # super-peer id
    bandwidth: float = 100e6  # bit/s
    latency: Fraction = Fraction(0)  # seconds


@dataclass(frozen=True)
class SubscriptionSpec:
    id: str
    peer: str  # thin-peer id
    at: float
    until: float | None  # None: stays until the end
    query: Query

    @property
    def stream(self) -> str:
        return self.query.stream


@dataclass(frozen=True)
class NetworkEvent:
    """A backbone element failing or recovering at time ``at`` (docs/DYNAMICS.md).

    ``element`` is ``"link"`` (``target`` its two super-peers, as the scenario wrote them) or
    ``"super_peer"`` (``target`` the one id).  From ``at`` on a failed link carries nothing and a failed
    super-peer neither forwards, filters nor delivers, until the matching recovery.
    """

    at: float
    action: str  # "fail" or "recover"
    element: str  # "link" or "super_peer"
    target: tuple[str, ...]  # (a, b) for a link, (id,) for a super-peer

    @property
    def key(self) -> tuple[str, ...]:
        """The element, whatever the order a link's ends were written in: (a, b) sorted, or (id,)."""
        return tuple(sorted(self.target)) if self.element == "link" else self.target

    def text(self) -> str:
        """One readable line, e.g. ``fail link SP1-SP2`` or ``recover super-peer SP3``."""
        what = "link" if self.element == "link" else "super-peer"
        return f"{self.action} {what} {'-'.join(self.target)}"


@dataclass(frozen=True)
class CpuCosts:
    """Operations a super-peer's processor spends on the tuples reaching its operators (docs/SCENARIOS.md,
    ``cpu_costs``; docs/ACCOUNTING.md, "Super-peer CPU"): per tuple tested per box of a reader's predicate
    (``box``), per tuple a reader projects to fewer attributes than it receives (``projection``), per tuple
    folded into an aggregate's partial states (``aggregate``), and per record emitted (``record``).

    The defaults here are the one place these numbers are given; a scenario's ``cpu_costs`` overrides any.
    They are relative weights measured on this emulator's own operators (``python run.py bench cpu``: one
    box test taken as 4 operations, the compiled selection's projection about 5-7, the pane operator's
    fold of a tuple into four aggregates about 40-90, its emission of a record, built in Python, about
    20,000-34,000), rounded.
    """

    box: int = 4
    projection: int = 6
    aggregate: int = 60
    record: int = 25000


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    duration: float
    header_bytes: int
    super_peers: tuple[str, ...]
    links: tuple[LinkSpec, ...]
    thin_peers: tuple[ThinPeerSpec, ...]
    streams: tuple[StreamSpec, ...]
    subscriptions: tuple[SubscriptionSpec, ...]
    # network limits (docs/SCENARIOS.md): tuples per second a super-peer takes in, (id, capacity) for the
    # limited ones; the share of a bandwidth or capacity the network-aware planner may plan for
    capacities: tuple[tuple[str, float], ...] = ()
    max_utilization: float = 0.8
    # how many standard deviations of a second's load above its mean the planner keeps within the
    # bandwidth or capacity (docs/PLANNER.md, "Bursts"); 0: the mean alone
    peak_sd: float = 3.0
    # failures and recoveries of backbone elements, in time order (docs/DYNAMICS.md); none: a static network
    events: tuple[NetworkEvent, ...] = ()
    path: str | None = field(default=None, compare=False)  # the file it was loaded from
    warnings: tuple[str, ...] = field(default=(), compare=False)  # e.g. contradictory queries
    generated: tuple[str, ...] = field(default=(), compare=False)  # what each workload generator made
    # (lon, lat) in degrees of the super-peers that have a position (a real network's), in super-peer order
    positions: tuple[tuple[str, tuple[float, float]], ...] = ()
    # super-peer CPU (docs/SCENARIOS.md, "Network limits"): operations per second a super-peer's processor
    # runs, (id, cpu) for the limited ones, and bytes of tuples it holds waiting for its processor, (id,
    # input_buffer) for the limited ones, both in super-peer order; the operations each step of its
    # operators costs
    cpus: tuple[tuple[str, float], ...] = ()
    input_buffers: tuple[tuple[str, float], ...] = ()
    cpu_costs: CpuCosts = CpuCosts()

    # The lookups by id every layer needs, built once per scenario on first use (a frozen dataclass keeps
    # them in its instance dictionary: `dataclasses.replace` starts a new scenario with none).

    @cached_property
    def thin_peers_by_id(self) -> Mapping[str, ThinPeerSpec]:
        return {p.id: p for p in self.thin_peers}

    @cached_property
    def streams_by_id(self) -> Mapping[str, StreamSpec]:
        return {s.id: s for s in self.streams}

    @cached_property
    def subscriptions_by_id(self) -> Mapping[str, SubscriptionSpec]:
        return {s.id: s for s in self.subscriptions}

    @cached_property
    def homes(self) -> Mapping[str, str]:
        """Each thin-peer's super-peer (the one it is attached to), by thin-peer id."""
        return {p.id: p.attach for p in self.thin_peers}

    @cached_property
    def position(self) -> Mapping[str, tuple[float, float]]:
        """(lon, lat) of each super-peer that has a position, by id."""
        return dict(self.positions)

    @cached_property
    def capacity(self) -> Mapping[str, float]:
        """Tuples per second each limited super-peer takes in, by id (unlimited ones are absent)."""
        return dict(self.capacities)

    @cached_property
    def cpu(self) -> Mapping[str, float]:
        """Operations per second each limited super-peer's processor runs, by id (unlimited ones are absent)."""
        return dict(self.cpus)

    @cached_property
    def input_buffer(self) -> Mapping[str, float]:
        """Bytes of tuples each limited super-peer holds waiting for its processor, by id (unlimited ones are
        absent)."""
        return dict(self.input_buffers)

    def thin_peer(self, peer_id: str) -> ThinPeerSpec:
        """Raises KeyError for an unknown id (as :meth:`stream`, :meth:`subscription` and :meth:`home`)."""
        return self.thin_peers_by_id[peer_id]

    def stream(self, stream_id: str) -> StreamSpec:
        return self.streams_by_id[stream_id]

    def subscription(self, sub_id: str) -> SubscriptionSpec:
        return self.subscriptions_by_id[sub_id]

    def home(self, peer_id: str) -> str:
        """The super-peer a thin-peer is attached to."""
        return self.homes[peer_id]

    def tuple_bytes(self, n_attributes: int) -> int:
        """Wire size of one tuple of this scenario carrying ``n_attributes`` attributes (:func:`tuple_bytes`,
        docs/ACCOUNTING.md)."""
        return tuple_bytes(self.header_bytes, n_attributes)
