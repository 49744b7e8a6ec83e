"""The centralized answer every strategy is checked against (docs/ACCOUNTING.md, exactness).

``expected`` is computed by a plain evaluation of each subscription's parsed WHERE over the emitted tuples:
one numpy comparison per interval end, deliberately independent of the matcher's evaluators and of every
strategy's code path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from matcher import Predicate
from matcher.aggregate import AggregateQuery
from topologies.expected_aggregates import Records, expected_records, record_closings
from topologies.model import Scenario
from topologies.outages import Reachability, in_spans
from topologies.workload import Values, columns, columns_of, emission_times, emission_times_of, tuple_count


@dataclass(frozen=True)
class AggregateInput:
    """An aggregate subscription's expected input: its tuples' emission times and the columns its records
    read (in the order of its expected indices)."""

    times: np.ndarray
    columns: dict[str, np.ndarray]


@dataclass(frozen=True)
class Expected:
    """Per subscription: the sorted tuple indices it must receive and the attributes it must get; per
    aggregate subscription also the records it must receive (docs/QUERIES.md, "Windowed aggregates") and
    its input, from which they were computed."""

    indices: dict[str, np.ndarray]
    attrs: dict[str, tuple[str, ...]]
    records: dict[str, Records] = field(default_factory=dict)
    inputs: dict[str, AggregateInput] = field(default_factory=dict)


def satisfies(predicate: Predicate, values: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Boolean mask of the tuples satisfying ``predicate`` (plain reference evaluation)."""
    mask = np.zeros(n, dtype=bool)
    for box in predicate.boxes:
        inside = np.ones(n, dtype=bool)
        for dim, iv in box.items():
            x = values[dim]
            if iv.lo != -np.inf:
                inside &= (x >= iv.lo) if iv.lo_closed else (x > iv.lo)
            if iv.hi != np.inf:
                inside &= (x <= iv.hi) if iv.hi_closed else (x < iv.hi)
        mask |= inside
    return mask


def expected_results(scenario: Scenario, values: Values | None = None) -> Expected:
    """Every subscription's answer over the whole run (``values(stream, start, stop)``: the columns of a
    range of tuples, when not the scenario's workload's: an engine run on other tuples, in tests).  Over
    the scenario's workload, the last scenario's answers are kept: every strategy of a run checks against
    them (the arrays are shared: not to be changed)."""
    if values is None:
        return _workload_results(scenario)
    return _results(scenario, values)


@lru_cache(maxsize=1)
def _workload_results(scenario: Scenario) -> Expected:
    # the aggregates' answers are :func:`aggregate_results`' (evaluated once per scenario, however many engines
    # ask), the other subscriptions' evaluated here
    aggregates = _workload_aggregate_results(scenario)
    others = _results(scenario, None, {s.id for s in scenario.subscriptions if s.id not in aggregates.indices})
    indices = {s.id: others.indices.get(s.id, aggregates.indices.get(s.id)) for s in scenario.subscriptions}
    attrs = {s.id: others.attrs.get(s.id, aggregates.attrs.get(s.id)) for s in scenario.subscriptions}
    for found in indices.values():
        found.flags.writeable = False
    return Expected(indices, attrs, aggregates.records, aggregates.inputs)


def aggregate_results(scenario: Scenario) -> Expected:
    """:func:`expected_results` of the aggregate subscriptions alone, over the scenario's workload (the Spark
    engine's driver checks their records whole, having checked every subscription's tuples chunk by chunk).
    The last scenario's are kept, as :func:`expected_results` keeps its answers: every strategy of a run
    checks against them."""
    return _workload_aggregate_results(scenario)


@lru_cache(maxsize=1)
def _workload_aggregate_results(scenario: Scenario) -> Expected:
    chosen = {sub.id for sub in scenario.subscriptions if isinstance(sub.query, AggregateQuery)}
    return _results(scenario, None, chosen)


def _results(scenario: Scenario, values: Values | None, only: set[str] | None = None) -> Expected:
    """The answers of every subscription, or of those in ``only``."""
    subscriptions = [s for s in scenario.subscriptions if only is None or s.id in only]
    indices: dict[str, np.ndarray] = {}
    for stream in {s.stream: None for s in subscriptions}:
        count = tuple_count(scenario.stream(stream), scenario.duration)
        indices.update(expected_in_range(scenario, stream, 0, count, values, only))
    attrs: dict[str, tuple[str, ...]] = {}
    records: dict[str, Records] = {}
    inputs: dict[str, AggregateInput] = {}
    for sub in subscriptions:
        stream = scenario.stream(sub.stream)
        attrs[sub.id] = sub.query.attributes(stream.attribute_names)
        if isinstance(sub.query, AggregateQuery):
            chosen = indices[sub.id]
            found = AggregateInput(
                emission_times_of(stream, chosen), columns_of(scenario, stream.id, chosen, sub.query.select, values)
            )
            inputs[sub.id] = found
            records[sub.id] = expected_records(
                sub.query, found.times, found.columns, sub.at, sub.until, scenario.duration
            )
    return Expected({sub.id: indices[sub.id] for sub in subscriptions}, attrs, records, inputs)


@dataclass(frozen=True)
class RecordSchedule:
    """What an aggregate subscription's record flow carries (docs/ACCOUNTING.md, "Records"): its expected
    records, numbered in the order the operator completes them: record ``r`` is ``keys[r]``, its window's
    last input tuple of its group is tuple ``last[r]`` of the stream, and its window closes at emission time
    ``closes[r]``; ``last`` ascends."""

    keys: list[tuple]
    last: np.ndarray
    closes: np.ndarray

    def numbers(self) -> dict[tuple, int]:
        """Each record's number, by key."""
        return {key: r for r, key in enumerate(self.keys)}


def record_schedule(scenario: Scenario, expected: Expected, sub_id: str) -> RecordSchedule:
    """The :class:`RecordSchedule` of aggregate subscription ``sub_id`` from its expected answer."""
    sub = scenario.subscription(sub_id)
    found = expected.inputs[sub_id]
    closing = list(
        record_closings(sub.query, found.times, found.columns, sub.at, sub.until, scenario.duration,
                        expected.records[sub_id].keys())
    )  # fmt: skip
    indices = expected.indices[sub_id]
    last = np.array([indices[p] for _, p, _ in closing], dtype=np.int64)
    order = np.argsort(last, kind="stable")  # ties (overlapping windows) in the order of the windows
    return RecordSchedule(
        [closing[r][0] for r in order.tolist()], last[order], np.array([closing[r][2] for r in order.tolist()])
    )


def expected_in_range(
    scenario: Scenario,
    stream_id: str,
    first: int,
    stop: int,
    values: Values | None = None,
    only: set[str] | None = None,
) -> dict[str, np.ndarray]:
    """Per subscription to ``stream_id`` (of those in ``only``, when given): the indices among tuples
    ``first..stop-1`` it must receive (the whole run's answer is the concatenation over consecutive ranges,
    which lets the Spark engine check a chunk of the run where its tuples are).  ``values``: as for
    :func:`expected_results`."""
    stream = scenario.stream(stream_id)
    times = emission_times(stream, first, stop)
    values = columns(scenario, stream_id, first, stop) if values is None else values(stream_id, first, stop)
    found = {}
    none = np.zeros(0, np.int64)
    for sub in scenario.subscriptions:
        if sub.stream != stream_id or (only is not None and sub.id not in only):
            continue
        until = np.inf if sub.until is None else sub.until
        if not len(times) or sub.at > times[-1] or until <= times[0]:
            found[sub.id] = none  # not registered while any of these tuples is emitted
            continue
        active = (times >= sub.at) & (times < until)
        mask = active & satisfies(sub.query.where, values, len(times))
        found[sub.id] = first + np.flatnonzero(mask).astype(np.int64)
    return found


def compare(delivered: np.ndarray, delivered_attrs: tuple[str, ...], expected: np.ndarray, attrs: tuple[str, ...]):
    """``(missing, extra)`` between the delivered and expected multisets of tuples.

    A tuple delivered with the wrong attributes is not the expected tuple: then every delivered tuple is extra
    and every expected one missing.
    """
    if tuple(delivered_attrs) != tuple(attrs):
        return len(expected), len(delivered)
    return multiset_difference(delivered, expected)


def differences_by_owner(
    owners: np.ndarray, delivered: np.ndarray, expected: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per owner ``k`` (subscription number), ``(missing, extra)`` between the copies ``delivered[i]`` of
    owner ``owners[i]`` and ``expected[k]`` (ascending, each tuple once, as :func:`expected_in_range`
    gives them): :func:`multiset_difference` for every owner in a few passes."""
    n = len(expected)
    matched = np.zeros(n, np.int64)
    wanted = np.array([len(e) for e in expected], np.int64)
    got = np.bincount(np.asarray(owners, np.int64), minlength=n)[:n] if len(owners) else np.zeros(n, np.int64)
    if len(delivered) and wanted.sum():
        keys = _distinct((np.asarray(owners, np.int64) << 32) | np.asarray(delivered, np.int64))
        want = np.concatenate([(np.int64(k) << 32) | e.astype(np.int64) for k, e in enumerate(expected) if len(e)])
        at = np.minimum(np.searchsorted(want, keys), len(want) - 1)
        found = keys[want[at] == keys]
        matched = np.bincount(found >> 32, minlength=n)[:n]
    return wanted - matched, got - matched


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by a sort: numpy's hashing ``unique`` is many times slower on these keys, which
    arrive nearly sorted (by owner, then tuple index)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def multiset_difference(delivered: np.ndarray, expected: np.ndarray) -> tuple[int, int]:
    """``(missing, extra)``: copies of tuples expected but not delivered, and delivered but not expected
    (sums over disjoint ranges of tuple indices add up to the whole run's)."""
    got_ids, got_counts = np.unique(delivered, return_counts=True)
    want_ids, want_counts = np.unique(expected, return_counts=True)
    all_ids = np.union1d(got_ids, want_ids)
    got = np.zeros(len(all_ids), dtype=np.int64)
    want = np.zeros(len(all_ids), dtype=np.int64)
    got[np.searchsorted(all_ids, got_ids)] = got_counts
    want[np.searchsorted(all_ids, want_ids)] = want_counts
    return int(np.maximum(want - got, 0).sum()), int(np.maximum(got - want, 0).sum())


class Unreachable:
    """Which expected tuples of each subscription were **unreachable** (docs/DYNAMICS.md): emitted while
    no path joined its stream's source super-peer and its own super-peer (or either was down).

    Recomputed from the scenario's events alone, by breadth-first search over the surviving links
    (topologies/outages.py): independent of routes, plans and engines, so it checks them."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.spans: dict[str, list[tuple[float, float]]] = {}
        if scenario.events:
            reach = Reachability(scenario)
            for sub in scenario.subscriptions:
                source = scenario.home(scenario.stream(sub.stream).source)
                spans = reach.unreachable_spans(source, scenario.home(sub.peer))
                if spans:
                    self.spans[sub.id] = spans

    def indices(self, sub_id: str, expected: np.ndarray) -> np.ndarray:
        """The entries of ``expected`` (tuple indices of the subscription's stream) that were unreachable."""
        spans = self.spans.get(sub_id)
        if not spans or not len(expected):
            return expected[:0]
        stream = self.scenario.stream(self.scenario.subscription(sub_id).stream)
        return expected[in_spans(emission_times_of(stream, expected), spans)]


def emitted_before(scenario: Scenario, sub_id: str, indices: np.ndarray, when: float) -> np.ndarray:
    """The entries of ``indices`` (tuple indices of subscription ``sub_id``'s stream) emitted before
    ``when``: what a subscription rejected at ``when`` should have received (docs/DYNAMICS.md)."""
    stream = scenario.stream(scenario.subscription(sub_id).stream)
    return indices[emission_times_of(stream, indices) < when]
