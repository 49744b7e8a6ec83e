"""The in-network operators a super-peer installs for one epoch of a Plan.

For each incoming flow (or raw stream) a super-peer runs ONE :class:`FlowOperator`: a single matcher
(``matcher.filters.policy.matcher_for``: ``MultiMatcher``, or the cost-based ``AdaptiveMultiMatcher`` from
``ADAPTIVE_MIN_BOXES`` boxes on) over every child flow and delivery reading that input there (and the
``trim`` entries of flows of need classes), then, per reader, filter and project.  The class is plain numpy
over column batches, no clock: Spark tasks and the MQTT services call :meth:`FlowOperator.process`.  The
local engine compiles the same readers (predicate, attributes, ``trim`` entries) into the entries of
:class:`peers.selection.SelectorTable`; :class:`Selector` is the plain one-reader version of what each
keeps and what its tuples weigh, which tests compare the compiled selection to.

A :class:`ChannelKey` names what a batch belongs to: the raw stream, a flow, or a subscription's ``n``-th
delivery of the epoch (a key that does not shift when another delivery comes or goes).  :func:`install`
takes a cache so that an operator whose readers did not change from one epoch to the next is the same
object (its matcher is built once): operators are immutable once built, so sharing them is safe (an
adaptive matcher learns which engine to run, which never changes an output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import NamedTuple

import numpy as np
from numba import njit

from matcher import Predicate
from matcher.filters.policy import matcher_for
from peers.selection import in_boxes
from sharing.plan import Delivery, Epoch, Flow
from topologies.model import Scenario, tuple_bytes


class ChannelKey(NamedTuple):
    """What a batch belongs to: ``kind`` "raw" (``name`` the stream), "flow" (the flow id) or "delivery"
    (the subscription, and ``n`` which of its deliveries of the epoch).  The channel of a batch on the
    wire is ``(kind, name)``."""

    kind: str
    name: str
    n: int = 0


def raw_key(stream: str) -> ChannelKey:
    return ChannelKey("raw", stream)


def flow_key(flow_id: str) -> ChannelKey:
    return ChannelKey("flow", flow_id)


def subscription_keys(epoch: Epoch) -> list[ChannelKey]:
    """Per delivery of ``epoch``, a key that stays the same across epochs: the ``n``-th delivery of its
    subscription in the epoch."""
    seen: dict[str, int] = {}
    keys = []
    for delivery in epoch.deliveries:
        n = seen.get(delivery.subscription, 0)
        seen[delivery.subscription] = n + 1
        keys.append(ChannelKey("delivery", delivery.subscription, n))
    return keys


class Output(NamedTuple):
    """The tuples an operator sends on one channel: their positions in the input batch, their values
    (projected) and their size on the wire."""

    target: ChannelKey
    positions: np.ndarray
    columns: dict[str, np.ndarray]
    wire_bytes: np.ndarray


@dataclass(frozen=True)
class Reader:
    """One consumer of an input at a super-peer: a child flow or a delivery.

    It keeps the tuples satisfying ``predicate``; it forwards ``attrs``, or every input column when
    ``full_values`` (a ``trim`` flow: a tuple's need classes are decided where it enters the tree, so its
    children are evaluated on full tuples), and its tuples
    weigh ``len(attrs)`` attributes, or for a trim flow the union of the attributes of the ``trim`` entries
    each tuple satisfies.
    """

    target: ChannelKey
    name: str  # for error messages: "flow F3", "delivery of Q1"
    predicate: Predicate
    attrs: tuple[str, ...]
    full_values: bool = False
    trim: tuple[tuple[Predicate, tuple[str, ...]], ...] = ()

    def __hash__(self) -> int:
        # computed once: an operator's signature hashes all its readers every epoch it is installed
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.target, self.name, self.predicate, self.attrs, self.full_values, self.trim))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # string hashes differ between processes: never ship the cached one
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


class FlowOperator:
    """Filter + project for every reader of one input at one super-peer.

    ``available`` is the attributes the input batches carry (every reader finds what it needs there: the
    plan passed :meth:`~sharing.plan.Plan.check`).
    """

    def __init__(self, node: str, source: str, available: Sequence[str], readers: Sequence[Reader], header_bytes: int):
        self.node, self.source = node, source
        self.readers = tuple(readers)
        self.targets = tuple(r.target for r in self.readers)
        self.header_bytes = header_bytes
        self.available = frozenset(available)
        labelled: list[tuple[str, Predicate]] = []
        self._label_of: list[int] = []  # per reader: its column in the matcher's output
        self._trim: list[tuple[np.ndarray, np.ndarray] | None] = []  # per reader: (label columns, entry x attr)
        for j, reader in enumerate(self.readers):
            self._label_of.append(len(labelled))
            labelled.append((f"r{j}", reader.predicate))
            if reader.trim:
                first = len(labelled)
                labelled.extend((f"r{j}t{k}", p) for k, (p, _) in enumerate(reader.trim))
                union = sorted({a for _, attrs in reader.trim for a in attrs})
                carries = np.array([[a in attrs for a in union] for _, attrs in reader.trim], dtype=np.int64)
                self._trim.append((np.arange(first, len(labelled)), carries))
            else:
                self._trim.append(None)
        self.matcher = matcher_for(labelled)

    def process(self, count: int, columns: Mapping[str, np.ndarray]) -> list[Output]:
        """The outputs, one per reader in order, for a batch of ``count`` tuples with these ``columns``."""
        satisfied = self.matcher.match(columns) if count else np.zeros((0, len(self.matcher.labels)), dtype=bool)
        outputs = []
        for j, reader in enumerate(self.readers):
            positions = np.flatnonzero(satisfied[:, self._label_of[j]])
            kept = columns if reader.full_values else {a: columns[a] for a in reader.attrs}
            values = {a: v[positions] for a, v in kept.items()}
            trim = self._trim[j]
            if trim is None:
                width = np.full(len(positions), len(reader.attrs), dtype=np.int64)
            else:
                labels, carries = trim
                width = ((satisfied[np.ix_(positions, labels)].astype(np.int64) @ carries) > 0).sum(axis=1)
            outputs.append(Output(reader.target, positions, values, tuple_bytes(self.header_bytes, width)))
        return outputs


@dataclass(frozen=True)
class Rows:
    """Tuples of one stream in one window, as :meth:`Selector.pick` takes them: the window's values
    (``values[k]`` is attribute ``names[k]`` of tuples ``first, first + 1, ...``) and the rows asked about
    (ascending positions in the window)."""

    names: tuple[str, ...]
    first: int
    values: np.ndarray  # (attributes, tuples of the window), float64, C-contiguous
    rows: np.ndarray  # int64


class Selector:
    """One reader on its own: which tuples it keeps and what they weigh.

    The same filter and projection as the reader's column of :class:`FlowOperator` (predicate, attributes,
    ``trim`` widths), without a shared matcher: the plain reference for the local engine's compiled
    selection (:mod:`peers.selection`), which tests compare it to.
    """

    def __init__(self, reader: Reader, header_bytes: int):
        self.reader = reader
        self.width = tuple_bytes(header_bytes, len(reader.attrs))
        self.header_bytes = header_bytes
        self._keep = _scan(reader.predicate)
        self._trim = None
        if reader.trim:
            union = sorted({a for _, attrs in reader.trim for a in attrs})
            carries = np.array([[a in attrs for a in union] for _, attrs in reader.trim], dtype=np.int64)
            self._trim = ([_scan(p) for p, _ in reader.trim], carries)

    def pick(self, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """Positions (ascending, into ``rows.rows``) of the tuples kept, and the wire bytes of each."""
        positions = np.flatnonzero(self._keep.holds(rows.names, rows.values, rows.rows))
        if self._trim is None:
            return positions, np.full(len(positions), self.width, dtype=np.int64)
        scans, carries = self._trim
        kept = rows.rows[positions]
        satisfied = np.stack([s.holds(rows.names, rows.values, kept) for s in scans], axis=1).astype(np.int64)
        width = ((satisfied @ carries) > 0).sum(axis=1)
        return positions, tuple_bytes(self.header_bytes, width)


class _BoxScan:
    """A predicate's boxes as arrays for :func:`_boxes_hold`: per box and constraint, the attribute
    constrained (``codes``, into ``names``), its bounds and whether they are closed (a box constraining
    fewer attributes is padded with code -1)."""

    def __init__(self, predicate: Predicate):
        self.everything = predicate.is_true()
        items = [box.items() for box in predicate.boxes]
        width = max(1, max(map(len, items), default=0))
        code: dict[str, int] = {}
        codes: list[int] = []
        flat: list[float] = []
        padding = (-np.inf, np.inf, False, False)
        for box in items:
            for d, iv in box:
                codes.append(code.setdefault(d, len(code)))
                flat.extend(iv)
            if len(box) < width:
                codes.extend([-1] * (width - len(box)))
                flat.extend(padding * (width - len(box)))
        self.names = tuple(code)
        self.codes = np.array(codes, dtype=np.int64).reshape(-1, width)
        bounds = np.array(flat, dtype=np.float64).reshape(-1, width, 4)
        self.lo, self.hi = np.ascontiguousarray(bounds[:, :, 0]), np.ascontiguousarray(bounds[:, :, 1])
        self.lo_closed, self.hi_closed = bounds[:, :, 2] > 0, bounds[:, :, 3] > 0
        self._positions: dict[tuple[str, ...], np.ndarray] = {}

    def positions(self, index: Mapping[str, int], missing: int | None = None) -> np.ndarray:
        """The codes as positions in ``index``; padding stays -1, an attribute not in ``index`` gets
        ``missing`` (``None``: raises KeyError)."""
        found = (index[d] if missing is None else index.get(d, missing) for d in self.names)
        lookup = np.array([*found, -1], dtype=np.int64)
        return lookup[self.codes]

    def holds(self, names: tuple[str, ...], values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self.everything:
            return np.ones(len(rows), dtype=np.bool_)
        positions = self._positions.get(names)
        if positions is None:
            positions = self._positions[names] = self.positions({name: k for k, name in enumerate(names)})
        return _boxes_hold(values, rows, positions, self.lo, self.hi, self.lo_closed, self.hi_closed)


@lru_cache(maxsize=1 << 16)
def _scan(predicate: Predicate) -> _BoxScan:
    # one per predicate: a widened flow and the deliveries of one subscription share theirs across epochs
    return _BoxScan(predicate)


@njit(cache=True)
def _boxes_hold(values, rows, positions, lo, hi, lo_closed, hi_closed):
    """Per row, whether its values lie in some box (NaN lies in none: every comparison with it is false)."""
    flat = values.ravel()  # C-contiguous: attribute a of tuple r at a * stride + r
    stride, n_attrs = values.shape[1], values.shape[0]
    out = np.zeros(len(rows), dtype=np.bool_)
    for i in range(len(rows)):
        out[i] = in_boxes(flat, 0, stride, rows[i], 0, len(positions), positions, lo, hi, lo_closed, hi_closed, n_attrs)
    return out


class OperatorCache:
    """What :func:`install` reuses over the epochs of one plan: operators by (node, input, carried
    attributes, readers, header bytes), and the reader made of each flow or delivery object (keyed by
    identity; the object is kept, so its id cannot be reused while cached)."""

    def __init__(self) -> None:
        self.operators: dict[tuple, FlowOperator] = {}
        self._previous: dict[tuple, FlowOperator] = {}
        self._readers: dict[tuple[int, ChannelKey], tuple[Flow | Delivery, Reader]] = {}

    def operator(self, signature: tuple, make: Callable[[], FlowOperator]) -> FlowOperator:
        """The operator with this signature: the one built before, or a new one from ``make()``."""
        operator = self.operators.get(signature)
        if operator is None:
            operator = self._previous.pop(signature, None)
            self.operators[signature] = operator = make() if operator is None else operator
        return operator

    def advance(self) -> None:
        """Forget the operators not used since the previous call (those of two epochs ago), so a caller
        installing epoch after epoch keeps two epochs' operators, not the whole run's."""
        self._previous, self.operators = self.operators, {}

    def reader(self, item: Flow | Delivery, key: ChannelKey, make: Callable[[], Reader]) -> Reader:
        hit = self._readers.get((id(item), key))
        if hit is None:
            hit = self._readers[(id(item), key)] = (item, make())
        return hit[1]


def install(
    scenario: Scenario,
    epoch: Epoch,
    *,
    cache: OperatorCache | None = None,
) -> dict[tuple[str, ChannelKey], FlowOperator]:
    """The operators of every super-peer for ``epoch``: ``{(super-peer, input channel key): operator}``.

    A delivery's output is keyed by :func:`subscription_keys`.  With ``cache``, an
    operator with the same node, input, carried attributes and readers as one built before is reused.  The
    epoch is one of a plan that passed :meth:`~sharing.plan.Plan.check`: it is installed, not checked
    again.
    """
    flows: dict[str, Flow] = {}
    readers: dict[tuple[str, ChannelKey], list[Reader]] = {}
    carried: dict[ChannelKey, tuple[str, ...]] = {}
    for stream in scenario.streams:
        carried[raw_key(stream.id)] = stream.attribute_names

    def attach(node: str, source: ChannelKey, reader: Reader) -> None:
        readers.setdefault((node, source), []).append(reader)

    for flow in epoch.flows:
        source = raw_key(flow.stream) if flow.parent is None else flow_key(flow.parent)
        flows[flow.id] = flow
        carried[flow_key(flow.id)] = carried[source] if flow.trim else flow.attrs
        attach(flow.origin, source, _reader(cache, flow, flow_key(flow.id), partial(flow_reader, flow)))

    for key, delivery in zip(subscription_keys(epoch), epoch.deliveries, strict=True):
        reader = _reader(cache, delivery, key, partial(delivery_reader, key, delivery))
        stream = scenario.subscription(delivery.subscription).stream
        attach(delivery.home, raw_key(stream) if delivery.flow is None else flow_key(delivery.flow), reader)

    operators = {}
    for (node, source), rs in readers.items():
        signature = operator_signature(node, source, carried[source], rs, scenario.header_bytes)
        make = partial(make_operator, signature)
        operators[(node, source)] = make() if cache is None else cache.operator(signature, make)
    return operators


def operator_signature(
    node: str, source: ChannelKey, carried: tuple[str, ...], readers: Sequence[Reader], header_bytes: int
) -> tuple:
    """What identifies the operator for ``readers`` of input ``source`` at ``node``: equal signatures,
    interchangeable operators."""
    return (node, source, carried, tuple(readers), header_bytes)


def make_operator(signature: tuple) -> FlowOperator:
    node, source, carried, readers, header_bytes = signature
    return FlowOperator(node, _describe(source), carried, readers, header_bytes)


def _reader(cache: OperatorCache | None, item: Flow | Delivery, key: ChannelKey, make: Callable[[], Reader]) -> Reader:
    return make() if cache is None else cache.reader(item, key, make)


def flow_reader(flow: Flow) -> Reader:
    full = bool(flow.trim)
    return Reader(flow_key(flow.id), f"flow {flow.id}", flow.predicate, flow.attrs, full, flow.trim)


def delivery_reader(key: ChannelKey, delivery: Delivery) -> Reader:
    return Reader(key, f"delivery of {delivery.subscription}", delivery.predicate, delivery.attrs)


def _describe(source: ChannelKey) -> str:
    return f"raw stream {source.name}" if source.kind == "raw" else f"flow {source.name}"
