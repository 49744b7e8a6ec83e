"""Record flows and pane trees in the live mode (docs/LIVE.md, "Records"; docs/ACCOUNTING.md, "Records" and
"Panes").

A plan may serve an aggregate subscription by a **record flow** (``Flow.aggregate``; query-shipping always,
the sharing strategies where the records weigh less than the input): an operator at the flow's origin
receives the subscription's input and ships the result records along the flow's path, down to the
subscriber.  The live super-peer runs it as the simulator does (peers/timetable.py, ``_RecordLayout``):
the records are the central evaluation's, numbered as :func:`topologies.expected.record_schedule` numbers
them, and a record starts on its way when its window has closed and its last input tuple has reached the
operator.  Every live node can compute them before the clock starts, since every stream's values are the
workload's; where it cannot (an ``--input`` stream, whose values come at run time, a run until a signal,
an aggregate subscribed at run time) the subscription is served its input instead (:func:`input_served`).

A **pane tree** (``Flow.panes``; peers/live/panes.py) is run alike: its root's operator completes each pane
row with the row's last input tuple of its group (the simulator's schedule of the rows,
:func:`pane_schedule_of`), the rows cross the tree as records do, and at each reader's super-peer the
reader's records (its own :class:`Schedule`) go down, each when its window has closed and the row carrying
its last input tuple has arrived.

This module holds what the services share: :class:`Schedule`, a subscription's records, or a pane tree's
rows, as their operator emits them (a record travels as one tuple: its window's number as its index, its
closing time as its emission, its group's values as its columns; a pane row as its last input tuple, its
pane's closing, no columns); :class:`OperatorInputs`, the input copies each operator received (the
subscription's deliveries in the run, as the simulator counts them: at the operator); and
:class:`ShippedRecords`, the records a subscriber's thin-peer received, dropped or lost, and the pane rows
that did not reach its super-peer, which the coordinator numbers by the schedule of the scenario as it ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from matcher import Predicate
from peers.live.malformed import check
from peers.live.panes import pane_readers, with_input_twins
from peers.live.wire import Batch
from peers.timetable import pane_schedule
from sharing.plan import Delivery, Flow, Plan
from topologies.errors import EmulatorError
from topologies.expected import aggregate_results, record_schedule
from topologies.model import Scenario

FATES = ("dropped", "lost")


@dataclass(frozen=True)
class Schedule:
    """The records of one aggregate subscription, by number: record ``r`` is completed by input tuple
    ``last[r]`` (ascending), its window ``windows[r]`` closes at ``closes[r]``, its group's values are
    ``groups[attribute][r]``; each weighs ``wire`` bytes (a pane tree's rows, each its own: their eras'
    differ).  A pane tree's rows alike (:func:`pane_schedule_of`)."""

    last: np.ndarray
    closes: np.ndarray
    windows: np.ndarray
    groups: dict[str, np.ndarray]
    wire: int | np.ndarray

    def wires(self, numbers: np.ndarray) -> np.ndarray:
        """The bytes of records ``numbers``."""
        if isinstance(self.wire, np.ndarray):
            return self.wire[numbers].astype(np.int64)
        return np.full(len(numbers), self.wire, np.int64)

    def completed_by(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The records that input tuples ``indices`` complete (ascending numbers), and for each the position in
        ``indices`` of the tuple completing it."""
        lo = np.searchsorted(self.last, indices, side="left")
        counts = np.searchsorted(self.last, indices, side="right") - lo
        total = int(counts.sum())
        positions = np.repeat(np.arange(len(indices)), counts)
        within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        numbers = np.repeat(lo, counts) + within
        order = np.argsort(numbers, kind="stable")
        return numbers[order], positions[order]


def schedule_of(scenario: Scenario, sub_id: str) -> Schedule:
    """The :class:`Schedule` of aggregate subscription ``sub_id`` over ``scenario``'s workload (the central
    evaluation, computed once per scenario for all its aggregate subscriptions)."""
    schedule = record_schedule(scenario, aggregate_results(scenario), sub_id)
    query = scenario.subscription(sub_id).query
    keys = schedule.keys
    groups = {name: np.array([key[1][k] for key in keys], dtype=np.float64) for k, name in enumerate(query.groups)}
    windows = np.array([key[0] for key in keys], dtype=np.int64)
    wire = scenario.tuple_bytes(1 + query.record_values())
    return Schedule(schedule.last, np.asarray(schedule.closes, dtype=np.float64), windows, groups, wire)


def pane_schedule_of(scenario: Scenario, root: Flow) -> Schedule:
    """The rows of the pane tree whose root is ``root`` over ``scenario``'s workload, as the simulator lays them
    out (peers/timetable.py, ``pane_schedule``): one per pane and group holding tuples of the root's WHERE,
    completed by its last such tuple (``last``, ascending, one row each), due when its pane closes
    (``closes``).  A row carries that tuple as its index (``windows``: what names it to the readers and to
    the check) and no columns (its partial states are not carried, as a record's values are not).  ``root``
    carries the panes of the whole plan, every era of a widened flow's (:attr:`~sharing.plan.Plan.pane_chains`)."""
    panes = root.panes
    last, closes, wire = pane_schedule(scenario, root.stream, root.predicate, panes, None)
    return Schedule(last, closes, last, {}, wire)


def record_flows(plan: Plan) -> dict[str, str]:
    """Per aggregate subscription a record flow of ``plan`` serves, the super-peer aggregating it (the origin
    of its first one, as the simulator names it)."""
    found: dict[str, str] = {}
    for epoch in plan.epochs:
        for flow in epoch.flows:
            if flow.aggregate is not None:
                found.setdefault(flow.aggregate, flow.origin)
    return found


def aggregated_at(plan: Plan) -> dict[str, str]:
    """Per aggregate subscription ``plan`` serves records in the network (by a record flow, or combined from a
    pane tree's rows), the super-peer whose operator receives its input, as the simulator names it."""
    found = record_flows(plan)
    for sub, node in pane_readers(plan).items():
        found.setdefault(sub, node)
    return found


def input_served(plan: Plan, subscriptions: set[str], wheres: Mapping[str, Predicate] | None = None) -> Plan:
    """``plan`` with the record flows of ``subscriptions`` carrying their input instead, which their deliveries
    pass down whole: their subscribers compute the records, as where a plan delivers an aggregate's input.
    Live mode serves an aggregate subscribed at run time so, whatever the strategy: its records would need
    the central evaluation of the run while it goes (and its client prints records from the input).

    A delivery of one of ``subscriptions`` that reads a pane tree (docs/ACCOUNTING.md, "Panes") reads the
    tree's input twins instead, tuple flows along the same paths carrying the root's input, and the tree
    keeps serving its other readers (:func:`~peers.live.panes.with_input_twins`); where the tree keeps
    fragments, the twins carry what its cells read and such a delivery filters by its WHERE (``wheres``:
    the subscriptions' WHEREs)."""
    if not subscriptions:
        return plan
    shipped = {f.id for e in plan.epochs for f in e.flows if f.aggregate in subscriptions}
    unshipped: dict[int, Flow] = {}  # one object per flow object, so that epochs keep sharing them
    twins: dict[tuple, Flow | Delivery] = {}

    def served(flow: Flow) -> Flow:
        if flow.id not in shipped:
            return flow
        return unshipped.setdefault(id(flow), replace(flow, aggregate=None))

    epochs = []
    for epoch in plan.epochs:
        records = replace(epoch, flows=tuple(map(served, epoch.flows))) if shipped else epoch
        epochs.append(with_input_twins(records, subscriptions, twins, wheres or {}))
    if all(a is b for a, b in zip(epochs, plan.epochs, strict=True)):
        return plan
    return plan.with_epochs(tuple(epochs))


def record_keys(groups: tuple[str, ...], batch: Batch) -> list[tuple]:
    """The keys ``(window, group values)`` of the records a batch carries (``groups``: the query's group
    attributes, in order)."""
    columns = [batch.columns[name].tolist() for name in groups]
    return [(w, tuple(c[i] for c in columns)) for i, w in enumerate(batch.indices.tolist())]


class OperatorInputs:
    """The input copies a super-peer's record-flow operators received, per subscription: those that reached
    them (tuple indices, and the latency from emission to the operator) and those dropped or lost on the way,
    as a node's counters carry them (:meth:`to_json`)."""

    def __init__(self):
        self.delivered: dict[str, list[int]] = {}
        self.latencies: dict[str, list[float]] = {}
        self.fated: dict[str, dict[str, list[int]]] = {fate: {} for fate in FATES}

    def add(self, sub: str, batch: Batch) -> None:
        if batch.fate is not None:
            self.fated[batch.fate].setdefault(sub, []).extend(batch.indices.tolist())
            return
        self.delivered.setdefault(sub, []).extend(batch.indices.tolist())
        self.latencies.setdefault(sub, []).extend((batch.arrivals - batch.times).tolist())

    def to_json(self) -> dict:
        subs = sorted({*self.delivered, *(s for copies in self.fated.values() for s in copies)})
        return {
            sub: {
                "delivered": self.delivered.get(sub, []),
                "latencies": self.latencies.get(sub, []),
                **{fate: self.fated[fate].get(sub, []) for fate in FATES},
            }
            for sub in subs
        }


def checked_inputs(doc: object, node: str) -> dict:
    """A node's ``aggregated`` counters (:meth:`OperatorInputs.to_json`) checked: per subscription lists of
    tuple indices, and as many latencies as delivered copies.  Raises :class:`MalformedMessage` otherwise."""
    check(isinstance(doc, dict), "operator inputs not an object", node)
    for entry in doc.values():
        check(isinstance(entry, dict) and set(entry) == {"delivered", "latencies", *FATES}, "operator inputs", node)
        lists = [entry[k] for k in ("delivered", *FATES)]
        check(all(isinstance(v, list) and all(type(i) is int and i >= 0 for i in v) for v in lists),
              "operator inputs not tuple indices", node)  # fmt: skip
        latencies = entry["latencies"]
        check(isinstance(latencies, list) and len(latencies) == len(entry["delivered"])
              and all(type(x) is float and x >= 0 for x in latencies), "operator input latencies", node)  # fmt: skip
    return doc


class ShippedRecords:
    """The records a thin-peer's subscriptions received by record flows or combined from pane rows: per
    subscription the batches that reached it, with each record's latency (emulated seconds from its window's
    closing to when it is seen), those dropped or lost on the way, and the pane rows dropped or lost before
    its super-peer (channel ``("panes", sub)``, by their last input tuples)."""

    def __init__(self):
        self.delivered: dict[str, list[tuple[Batch, np.ndarray]]] = {}
        self.fated: dict[str, dict[str, list[Batch]]] = {fate: {} for fate in FATES}
        self.panes: dict[str, dict[str, list[np.ndarray]]] = {fate: {} for fate in FATES}

    def add(self, sub: str, batch: Batch, now: float) -> None:
        """``batch`` of records of ``sub`` (or, with a fate, of pane rows) came at emulated time ``now``."""
        if batch.channel[0] == "panes":
            self.panes[batch.fate].setdefault(sub, []).append(batch.indices.copy())
        elif batch.fate is not None:
            self.fated[batch.fate].setdefault(sub, []).append(batch)
        else:
            self.delivered.setdefault(sub, []).append((batch, np.maximum(batch.arrivals, now) - batch.times))

    def numbered(self, sub: str, groups: tuple[str, ...], numbers: dict[tuple, int]) -> dict[str, np.ndarray]:
        """What became of ``sub``'s records, by their ``numbers`` (key -> number: the schedule of the scenario
        as it ran), as the :class:`~network.meter.StrategyRun` fields take them: those delivered (ascending)
        with their latencies, and those dropped and lost (a record the run's schedule does not hold, of a
        window a stop or an unsubscription cut off, did not count: it was never to be delivered), with the
        pane rows that did not reach the subscriber's super-peer numbered as the simulator's pane sink
        numbers them, ``-1 - t`` (``t``: the row's last input tuple).  Raises :class:`EmulatorError` for a
        record delivered that the schedule does not hold."""
        found, latencies = [], []
        for batch, latency in self.delivered.get(sub, []):
            for key, seconds in zip(record_keys(groups, batch), latency.tolist(), strict=True):
                if key not in numbers:
                    raise EmulatorError(f"{sub}: delivered a record of window {key[0]} it should not have")
                found.append(numbers[key])
                latencies.append(seconds)
        order = np.argsort(np.array(found, dtype=np.int64), kind="stable")
        out = {
            "record_delivered": np.array(found, dtype=np.int64)[order],
            "record_latencies": np.array(latencies, dtype=np.float64)[order],
        }
        for fate in FATES:
            keys = [key for batch in self.fated[fate].get(sub, []) for key in record_keys(groups, batch)]
            records = np.array([numbers[k] for k in keys if k in numbers], dtype=np.int64)
            panes = [-1 - rows for rows in self.panes[fate].get(sub, [])]
            out[f"record_{fate}"] = np.sort(np.concatenate([records, *panes]))
        return out
