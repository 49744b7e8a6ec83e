"""The in-network operators a super-peer installs for one epoch of a Plan.

Every engine filters and projects with one compiled selection (:mod:`peers.selection`): the readers of an
input (each child flow and delivery reading it at a super-peer: a predicate, the attributes it projects
to, a flow's ``trim`` entries) are entries of a :class:`~peers.selection.SelectorTable`, and
:func:`~peers.selection.select_window` keeps, per reader, the tuples it selects and what each weighs.  The
local engine and Spark lay a whole plan out for it (peers/timetable.py); the live mode installs an epoch's
:class:`Operator` per super-peer and input with :func:`install`, whose :meth:`Operator.process` runs the
same kernel on each batch (:func:`~peers.selection.select_batch`).  :class:`Selector` is the plain
one-reader version of what a reader keeps and what its tuples weigh, which tests compare the compiled
selection to.

A :class:`ChannelKey` names what a batch belongs to: the raw stream, a flow, or a subscription's ``n``-th
delivery of the epoch (a key that does not shift when another delivery comes or goes).  :func:`install`
adds each reader to a :class:`ReaderTable` once, by its flow or delivery object and then by content, so the
epochs of a plan share the entries of the readers they have in common.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from matcher import Predicate
from peers.selection import SelectorTable, in_boxes, select_batch
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

    It keeps the tuples satisfying ``predicate``; its tuples weigh ``len(attrs)`` attributes, or for a
    ``trim`` flow the union of the attributes of the ``trim`` entries each tuple satisfies.  The live mode
    forwards ``attrs``, or every input column when ``full_values`` (a ``trim`` flow: its readers further
    down test attributes a tuple does not carry, which the model decides where the tuple enters the tree and
    marks in its header, docs/ACCOUNTING.md; the values stand in for the marks).
    """

    target: ChannelKey
    predicate: Predicate
    attrs: tuple[str, ...]
    full_values: bool = False
    trim: tuple[tuple[Predicate, tuple[str, ...]], ...] = ()


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

    The reader's filter and wire widths (predicate, attributes, ``trim`` widths), a numpy scan per box set:
    the plain reference for the compiled selection every engine runs (:mod:`peers.selection`), which tests
    compare it to.
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


class ReaderTable:
    """The readers of the plans of a run over ``scenario``'s streams, as entries of one
    :class:`~peers.selection.SelectorTable` (:attr:`table`): :meth:`reader` makes the reader of a flow or
    delivery object and adds it to the table on first use, and gives both after that (found by the object,
    kept so that its id stays its own, or else by content)."""

    def __init__(self, scenario: Scenario):
        self.names = {s.id: s.attribute_names for s in scenario.streams}
        self.table = SelectorTable(self.names, scenario.header_bytes)
        self._by_item: dict[tuple[int, ChannelKey], tuple[Flow | Delivery, Reader, int]] = {}
        self._by_content: dict[tuple, int] = {}  # (stream, predicate, attributes, trim entries) -> entry
        self._entries: dict[tuple, int] = {}  # (stream, predicate, attributes) -> trim entry

    def reader(self, stream: str, item: Flow | Delivery, key: ChannelKey) -> tuple[Reader, int]:
        """The reader of ``item`` (a flow, or a delivery whose output is keyed ``key``), which reads
        ``stream``, and its entry."""
        hit = self._by_item.get((id(item), key))
        if hit is None:
            reader = flow_reader(item) if isinstance(item, Flow) else delivery_reader(key, item)
            trim = tuple(self._entry(stream, p, names) for p, names in reader.trim)
            content = (stream, reader.predicate, reader.attrs, trim)
            number = self._by_content.get(content)
            if number is None:
                number = self._by_content[content] = self.table.add(stream, reader.predicate, reader.attrs, trim)
            hit = self._by_item[(id(item), key)] = (item, reader, number)
        return hit[1], hit[2]

    def _entry(self, stream: str, predicate: Predicate, names: tuple[str, ...]) -> int:
        number = self._entries.get((stream, predicate, names))
        if number is None:
            number = self._entries[(stream, predicate, names)] = self.table.entry(stream, predicate, names)
        return number


class Operator:
    """Filter + project for every reader of one input (of ``stream``, carrying the attributes
    ``available``) at one super-peer: the readers' entries ``numbers`` of ``readers``' table, run together
    on each batch by :func:`~peers.selection.select_batch`."""

    def __init__(
        self,
        stream: str,
        available: Sequence[str],
        readers: Sequence[Reader],
        numbers: Sequence[int],
        table: ReaderTable,
    ):
        self.stream = stream
        self.available = frozenset(available)
        self.readers = tuple(readers)
        self.numbers = tuple(numbers)
        self._table = table

    def process(self, count: int, columns: Mapping[str, np.ndarray]) -> list[Output]:
        """The outputs, one per reader in order, for a batch of ``count`` tuples with these ``columns``."""
        names = self._table.names[self.stream]
        values = np.full((len(names), count), np.nan)
        for k, name in enumerate(names):
            if name in columns:
                values[k] = columns[name]
        outputs = []
        picked = select_batch(self._table.table, self.numbers, names, values)
        for reader, (positions, wire) in zip(self.readers, picked, strict=True):
            kept = columns if reader.full_values else {a: columns[a] for a in reader.attrs}
            outputs.append(Output(reader.target, positions, {a: v[positions] for a, v in kept.items()}, wire))
        return outputs


def install(scenario: Scenario, epoch: Epoch, table: ReaderTable) -> dict[tuple[str, ChannelKey], Operator]:
    """The operators of every super-peer for ``epoch``: ``{(super-peer, input channel key): operator}``, their
    readers entries of ``table``.

    A delivery's output is keyed by :func:`subscription_keys`.  The epoch is one of a plan that passed
    :meth:`~sharing.plan.Plan.check`: it is installed, not checked again.
    """
    readers: dict[tuple[str, ChannelKey], list[tuple[Reader, int]]] = {}
    carried: dict[ChannelKey, tuple[tuple[str, ...], str]] = {}  # input -> its attributes, its stream
    for stream in scenario.streams:
        carried[raw_key(stream.id)] = (stream.attribute_names, stream.id)

    for flow in epoch.flows:
        source = raw_key(flow.stream) if flow.parent is None else flow_key(flow.parent)
        key = flow_key(flow.id)
        carried[key] = (carried[source][0] if flow.trim else flow.attrs, flow.stream)
        readers.setdefault((flow.origin, source), []).append(table.reader(flow.stream, flow, key))

    for key, delivery in zip(subscription_keys(epoch), epoch.deliveries, strict=True):
        stream = scenario.subscription(delivery.subscription).stream
        source = raw_key(stream) if delivery.flow is None else flow_key(delivery.flow)
        readers.setdefault((delivery.home, source), []).append(table.reader(stream, delivery, key))

    operators = {}
    for (node, source), pairs in readers.items():
        available, stream = carried[source]
        operators[(node, source)] = Operator(stream, available, [r for r, _ in pairs], [n for _, n in pairs], table)
    return operators


def flow_reader(flow: Flow) -> Reader:
    full = bool(flow.trim)
    return Reader(flow_key(flow.id), flow.predicate, flow.attrs, full, flow.trim)


def delivery_reader(key: ChannelKey, delivery: Delivery) -> Reader:
    return Reader(key, delivery.predicate, delivery.attrs)
