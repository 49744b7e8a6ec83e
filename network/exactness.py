"""The exactness check (docs/ACCOUNTING.md, "Exactness"): what an engine did with each subscription's
copies, against the tuples it should have received, reduced to counts per subscription.

One definition for every engine: :func:`check` counts, :func:`summaries` turns a whole run's counts and
latency statistics into the :class:`~network.meter.SubscriptionSummary` a report gives.  The local
engine's and live mode's runs are checked whole (:func:`checked`, from the copies the run kept); the
Spark engine checks each chunk of a run where its tuples are, and the chunks' :class:`Counts` add up to
the run's (:meth:`Counts.plus`: every count is a sum over disjoint ranges of tuple indices).  The copies
come as flat arrays indexed by *owner*, a subscription's number in the scenario's order (:data:`Copies`),
the way the meter gives them (:meth:`network.meter.TrafficMeter.deliveries`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np

from matcher.aggregate import AggregateQuery
from network.latency import LatencyStats, exact_sums_by_owner
from network.meter import StrategyRun, SubscriptionSummary
from topologies.expected import Expected, Unreachable, differences_by_owner, emitted_before, record_schedule
from topologies.expected_aggregates import Records, records_fed, same_values
from topologies.model import Scenario, SubscriptionSpec

Copies = tuple[np.ndarray, np.ndarray]
"""``(owners, indices)``: copy ``i`` is of tuple ``indices[i]`` for subscription number ``owners[i]``."""


@dataclass(frozen=True)
class Counts:
    """Per subscription number: the copies ``delivered``, the tuples ``expected``, the ``missing`` and
    ``extra`` copies (expected but not accounted for, and accounted for but not expected), the copies
    ``dropped`` at a full buffer and ``lost`` at a failure on the way, the expected tuples ``unreachable``
    (emitted while it was cut off), and of those emitted before a rejection after arrival (at a
    re-plan), the ones missing (``missing_before``; 0 for a subscription not so rejected)."""

    delivered: np.ndarray
    expected: np.ndarray
    missing: np.ndarray
    extra: np.ndarray
    dropped: np.ndarray
    lost: np.ndarray
    unreachable: np.ndarray
    missing_before: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> Counts:
        return cls(*(np.zeros(n, np.int64) for _ in fields(cls)))

    def plus(self, other: Counts) -> Counts:
        """The counts of two disjoint parts of a run (two chunks) as one."""
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def check(
    scenario: Scenario,
    unreachable: Unreachable,
    rejected_at: Mapping[str, float],
    expected: Sequence[np.ndarray],
    delivered: Copies,
    dropped: Copies,
    lost: Copies,
    in_flight: Copies | None = None,
    first: np.ndarray | None = None,
) -> Counts:
    """The counts of a run, or of a part of it (a Spark chunk), per subscription of ``scenario``.

    ``expected[k]``: the ascending tuple indices subscription ``k`` should receive in the part checked;
    ``unreachable`` tells which of them were emitted while it was cut off, ``rejected_at`` (subscription ->
    time) which subscriptions the planner rejected after they arrived, and when.  A copy dropped or lost on
    the way, or an expected tuple emitted while the subscription was cut off, is accounted for: not
    missing (extra if it was not expected at all, or accounted for twice).

    A part of a run also gives the copies ``in_flight`` at its end (still on their way, held back at its
    horizon): accounted for here, and counted where they land, in the next part, which leaves out every
    copy of a tuple before its own first (``first[k]``: the first index of subscription ``k``'s stream in
    the part; None: no copy is left out)."""
    subscriptions = scenario.subscriptions
    n = len(subscriptions)
    cut = [unreachable.indices(s.id, e) for s, e in zip(subscriptions, expected, strict=True)]
    cut_owners = np.repeat(np.arange(n, dtype=np.int64), [len(c) for c in cut])
    copies = [delivered, dropped, lost, *([in_flight] if in_flight is not None else [])]
    owners = np.concatenate([*(np.asarray(o, np.int64) for o, _ in copies), cut_owners])
    indices = np.concatenate([*(np.asarray(i, np.int64) for _, i in copies), *cut])
    if first is not None and len(indices):
        ours = indices >= first[owners]
        owners, indices = owners[ours], indices[ours]
    missing, extra = differences_by_owner(owners, indices, expected)
    missing_before = np.zeros(n, np.int64)
    if rejected_at:  # rejected at a re-plan: what it should have received before then
        early = [
            emitted_before(scenario, s.id, e, rejected_at[s.id]) if s.id in rejected_at else e[:0]
            for s, e in zip(subscriptions, expected, strict=True)
        ]
        missing_before = differences_by_owner(owners, indices, early)[0]
    return Counts(
        delivered=_per_owner(delivered[0], n),
        expected=np.array([len(e) for e in expected], np.int64),
        missing=missing,
        extra=extra,
        dropped=_per_owner(dropped[0], n),
        lost=_per_owner(lost[0], n),
        unreachable=np.array([len(c) for c in cut], np.int64),
        missing_before=missing_before,
    )


def summaries(
    scenario: Scenario,
    counts: Counts,
    latencies: Sequence[LatencyStats],
    attrs: Mapping[str, tuple[str, ...]],
    rejected_later: Collection[str],
) -> dict[str, SubscriptionSummary]:
    """Per subscription id, a whole run's :class:`SubscriptionSummary`: its ``counts`` and its
    ``latencies`` (by subscription number), given the attributes its deliveries carried (``attrs``: a
    subscription delivered with other attributes than its query's got none of its expected tuples, and
    every copy accounted for is extra) and the subscriptions rejected after they arrived (only those have
    a ``missing_before_rejection``)."""
    found = {}
    for k, sub in enumerate(scenario.subscriptions):
        delivered, dropped, lost = int(counts.delivered[k]), int(counts.dropped[k]), int(counts.lost[k])
        unreachable, expected = int(counts.unreachable[k]), int(counts.expected[k])
        missing, extra = int(counts.missing[k]), int(counts.extra[k])
        if tuple(attrs[sub.id]) != tuple(sub.query.attributes(scenario.stream(sub.stream).attribute_names)):
            missing, extra = expected, delivered + dropped + lost + unreachable
        early = int(counts.missing_before[k]) if sub.id in rejected_later else None
        found[sub.id] = SubscriptionSummary(
            delivered, expected, missing, extra, latencies[k], dropped, lost, unreachable, early
        )
    return found


def checked(scenario: Scenario, run: StrategyRun, expected: Expected) -> StrategyRun:
    """``run``, whose engine kept every copy (``delivered``, ``latencies``, ``dropped``, ``lost``: the
    local engine, live mode), with its ``summary`` and ``latency``: the whole run checked against the
    ``expected`` tuples (:func:`topologies.expected.expected_results`)."""
    ids = [sub.id for sub in scenario.subscriptions]
    unreachable = Unreachable(scenario)
    counts = check(
        scenario,
        unreachable,
        run.rejected_at,
        [expected.indices[sub] for sub in ids],
        copies_of(run.delivered, ids),
        copies_of(run.dropped, ids),
        copies_of(run.lost, ids),
    )
    none = np.zeros(0)
    latencies = _latencies_by_owner([np.asarray(run.latencies.get(sub, none), np.float64) for sub in ids])
    attrs = {sub: run.delivered_attrs.get(sub, expected.attrs[sub]) for sub in ids}
    values = [v for v in run.latencies.values() if len(v)]
    overall = LatencyStats.of(np.concatenate(values) if values else none)
    run = replace(run, summary=summaries(scenario, counts, latencies, attrs, run.rejected_at), latency=overall)
    return records_checked(scenario, run, expected, unreachable)


def records_checked(
    scenario: Scenario, run: StrategyRun, expected: Expected, unreachable: Unreachable | None = None
) -> StrategyRun:
    """``run``, whose summary checked every subscription's tuples, with each aggregate subscription's
    summary in records (:func:`record_summary`), from the records its subscriber computed (``run.records``)
    and the copies of its input dropped and lost on the way (``run.dropped``, ``run.lost``).  ``expected``
    holds at least the aggregate subscriptions' answers."""
    aggregates = [sub for sub in scenario.subscriptions if isinstance(sub.query, AggregateQuery)]
    if not aggregates:
        return run
    unreachable = Unreachable(scenario) if unreachable is None else unreachable
    none = np.zeros(0, np.int64)
    found = dict(run.summary)
    for sub in aggregates:
        copies = (run.dropped.get(sub.id, none), run.lost.get(sub.id, none))
        found[sub.id] = record_summary(
            scenario, sub, expected, run.records.get(sub.id, {}), found[sub.id], *copies, unreachable,
            run.rejected_at.get(sub.id), _shipped(scenario, sub, expected, run),
        )  # fmt: skip
    return replace(run, summary=found)


@dataclass(frozen=True)
class Shipped:
    """What became of the records a record flow carried to an aggregate subscription (docs/ACCOUNTING.md,
    "Records"): the keys of those that reached its thin-peer, with their latencies, and of those dropped and
    lost on the way."""

    at: str  # the super-peer whose operator computed them
    delivered: list  # in the order of ``latencies``
    latencies: np.ndarray
    dropped: set
    lost: set
    # the last input tuples of the pane rows dropped and lost before the subscriber's super-peer, where its
    # records were combined from panes (docs/ACCOUNTING.md, "Panes")
    panes_dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    panes_lost: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _shipped(scenario: Scenario, sub: SubscriptionSpec, expected: Expected, run: StrategyRun) -> Shipped | None:
    """The records shipped to ``sub`` in ``run`` (None: no record flow served it: its subscriber computes
    its records from the input it received)."""
    if sub.id not in run.aggregated_at:
        return None
    none = np.zeros(0, np.int64)
    numbers = [getattr(run, f).get(sub.id, none) for f in ("record_delivered", "record_dropped", "record_lost")]
    keys = record_schedule(scenario, expected, sub.id).keys
    delivered = [keys[r] for r in numbers[0].tolist()]
    dropped, lost = ({keys[r] for r in n[n >= 0].tolist()} for n in numbers[1:])
    panes = [-1 - n[n < 0] for n in numbers[1:]]  # a pane sink's rows are numbered by their last input tuple
    latencies = np.asarray(run.record_latencies.get(sub.id, np.zeros(0)))
    return Shipped(run.aggregated_at[sub.id], delivered, latencies, dropped, lost, *panes)


def record_summary(
    scenario: Scenario,
    sub: SubscriptionSpec,
    expected: Expected,
    got: Records,
    tuples: SubscriptionSummary,
    dropped: np.ndarray,
    lost: np.ndarray,
    unreachable: Unreachable,
    rejected_at: float | None,
    shipped: Shipped | None = None,
) -> SubscriptionSummary:
    """An aggregate subscription's summary in result records (docs/ACCOUNTING.md, "Records"): the records
    its subscriber computed (``got``) against those of the central evaluation.  A record one of whose
    expected input tuples was ``dropped`` or ``lost`` on the way (tuple indices), or emitted while the
    subscription was cut off, is accounted for as such, never delivered or extra; every other record
    computed is delivered, and extra unless the central evaluation has it with equal values.  ``tuples``:
    the input's own summary, kept as ``input``, whose latencies the records' are.

    A subscription whose records a record flow ``shipped`` computed them at the flow's operator from the
    input it received there (``got``, the input's summary being what reached the operator); a record is
    then delivered only if its row reached the thin-peer, and accounted for as dropped or lost when its row
    was; the latencies are the records' own, from their windows' closing."""
    query = sub.query
    want = expected.records[sub.id]
    indices = expected.indices[sub.id]
    found = expected.inputs[sub.id]

    def fed(copies: np.ndarray) -> set:
        """The records one of ``copies`` (tuple indices) is an expected input of; in count windows, also every
        later record of its group, whose window a missing tuple has shifted."""
        which = np.isin(indices, np.asarray(copies, np.int64))
        if query.window.tuples and which.any():
            which = _from_first_in_group(which, [found.columns[g] for g in query.groups])
        return records_fed(query, found.times, found.columns, sub.at, sub.until, scenario.duration, which)

    by_drop = fed(dropped)
    by_loss = fed(lost) - by_drop
    if shipped is not None:
        arrived = set(shipped.delivered)
        got = {key: values for key, values in got.items() if key in arrived}
        # a pane row that did not reach the subscriber's super-peer takes every record whose window holds its
        # pane, of its group: those its last input tuple feeds
        by_drop |= shipped.dropped | fed(shipped.panes_dropped)
        by_loss = (by_loss | shipped.lost | fed(shipped.panes_lost)) - by_drop
    by_cut = fed(unreachable.indices(sub.id, indices)) - by_drop - by_loss
    accounted = by_drop | by_loss | by_cut
    latency = tuples.latency
    if shipped is not None:  # the records' own, of those delivered
        counted = np.array([key not in accounted for key in shipped.delivered], dtype=np.bool_)
        latency = LatencyStats.of(shipped.latencies[counted] if len(counted) else shipped.latencies)
    delivered = [key for key in got if key not in accounted]

    def received(key, values) -> bool:
        return key in got and same_values(got[key], values)

    extra = sum(1 for key in delivered if key not in want or not same_values(got[key], want[key]))
    missing = sum(1 for key, values in want.items() if key not in accounted and not received(key, values))
    early = None
    if tuples.missing_before_rejection is not None and rejected_at is not None:
        later = records_fed(
            query, found.times, found.columns, sub.at, sub.until, scenario.duration, found.times >= rejected_at
        )
        early = sum(
            1 for key, values in want.items() if key not in later and key not in accounted and not received(key, values)
        )
    return SubscriptionSummary(
        delivered=len(delivered),
        expected=len(want),
        missing=missing,
        extra=extra,
        latency=latency,
        dropped=len(by_drop & want.keys()),
        lost=len(by_loss & want.keys()),
        unreachable=len(by_cut & want.keys()),
        missing_before_rejection=early,
        input=tuples,
        aggregated_at=None if shipped is None else shipped.at,
    )


def _from_first_in_group(which: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """``which`` (a mask over tuples in emission order) extended, in each group (tuples of equal values in
    the ``groups`` columns), to every tuple after the group's first marked one."""
    if not groups:
        return np.maximum.accumulate(which)
    _, group = np.unique(np.column_stack(groups), axis=0, return_inverse=True)
    group = group.reshape(-1)
    order = np.argsort(group, kind="stable")
    marked = which[order]
    starts = np.flatnonzero(np.concatenate(([True], group[order][1:] != group[order][:-1])))
    # a running count of marks within each group's run: positive from its first mark on
    running = np.cumsum(marked) - np.repeat(
        np.cumsum(marked)[starts] - marked[starts], np.diff(np.append(starts, len(order)))
    )
    extended = np.empty_like(which)
    extended[order] = running > 0
    return extended


def _latencies_by_owner(values: Sequence[np.ndarray]) -> list[LatencyStats]:
    """``[LatencyStats.of(v) for v in values]``, the exact sums taken in a few passes over all of them
    (:func:`~network.latency.exact_sums_by_owner`) rather than one set of passes per subscription."""
    owners = np.repeat(np.arange(len(values), dtype=np.int64), [len(v) for v in values])
    sums = exact_sums_by_owner(owners, np.concatenate(values) if values else np.zeros(0), len(values))
    return [LatencyStats.of(v, total) for v, total in zip(values, sums, strict=True)]


def copies_of(per_subscription: Mapping[str, np.ndarray], ids: Sequence[str]) -> Copies:
    """Copies given per subscription id (``ids``: the scenario's, in order) as flat arrays by owner."""
    none = np.zeros(0, np.int64)
    parts = [np.asarray(per_subscription.get(sub, none), np.int64) for sub in ids]
    owners = np.repeat(np.arange(len(ids), dtype=np.int64), [len(p) for p in parts])
    return owners, np.concatenate(parts) if parts else none


def _per_owner(owners: np.ndarray, n: int) -> np.ndarray:
    """How many entries of ``owners`` each owner ``0 .. n-1`` has."""
    return np.bincount(np.asarray(owners, np.int64), minlength=n)[:n].astype(np.int64)
