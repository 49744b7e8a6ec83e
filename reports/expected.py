"""The centralized answer every strategy is checked against (SPEC section 5).

``expected`` is computed by a plain evaluation of each subscription's parsed WHERE over the emitted tuples:
one numpy comparison per interval end, deliberately independent of the matcher's evaluators and of every
strategy's code path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matcher import Predicate
from topologies.model import Scenario
from topologies.workload import columns, emission_times, tuple_count


@dataclass(frozen=True)
class Expected:
    """Per subscription: the sorted tuple indices it must receive and the attributes it must get."""

    indices: dict[str, np.ndarray]
    attrs: dict[str, tuple[str, ...]]


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


def expected_results(scenario: Scenario) -> Expected:
    indices: dict[str, np.ndarray] = {}
    attrs: dict[str, tuple[str, ...]] = {}
    cache: dict[str, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    for sub in scenario.subscriptions:
        stream = scenario.stream(sub.stream)
        if stream.id not in cache:
            n = tuple_count(stream, scenario.duration)
            cache[stream.id] = (emission_times(stream, 0, n), columns(scenario, stream.id, 0, n))
        times, values = cache[stream.id]
        until = np.inf if sub.until is None else sub.until
        active = (times >= sub.at) & (times < until)
        mask = active & satisfies(sub.query.where, values, len(times))
        indices[sub.id] = np.flatnonzero(mask).astype(np.int64)
        attrs[sub.id] = sub.query.attributes(stream.attribute_names)
    return Expected(indices, attrs)


def compare(delivered: np.ndarray, delivered_attrs: tuple[str, ...], expected: np.ndarray, attrs: tuple[str, ...]):
    """``(missing, extra)`` between the delivered and expected multisets of tuples.

    A tuple delivered with the wrong attributes is not the expected tuple: then every delivered tuple is extra
    and every expected one missing.
    """
    if tuple(delivered_attrs) != tuple(attrs):
        return len(expected), len(delivered)
    got_ids, got_counts = np.unique(delivered, return_counts=True)
    want_ids, want_counts = np.unique(expected, return_counts=True)
    all_ids = np.union1d(got_ids, want_ids)
    got = np.zeros(len(all_ids), dtype=np.int64)
    want = np.zeros(len(all_ids), dtype=np.int64)
    got[np.searchsorted(all_ids, got_ids)] = got_counts
    want[np.searchsorted(all_ids, want_ids)] = want_counts
    return int(np.maximum(want - got, 0).sum()), int(np.maximum(got - want, 0).sum())
