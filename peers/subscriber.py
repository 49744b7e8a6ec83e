"""What an aggregate subscription's input makes: its result records.

An aggregate subscription (docs/QUERIES.md, "Windowed aggregates") is delivered its *input*, the tuples
satisfying its WHERE projected to the attributes its groups and aggregates read, exactly as a selection
is: to its thin-peer, which computes the records, or, where a record flow serves it, to the operator at
the source's super-peer, which computes them and ships them (docs/ACCOUNTING.md, "Records").  Either way
the records are computed from the copies received, in the order of emission, with the pane operator
(:func:`peers.aggregation.aggregate`).  Every engine that brings its copies home (the local engine, live
mode) does this once its run is over, and the check (network/exactness.py) compares the records with the
central evaluation's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from matcher.aggregate import AggregateQuery
from network.meter import StrategyRun
from peers.aggregation import aggregate
from topologies.model import Scenario
from topologies.workload import Values, columns_of, emission_times_of


def with_records(scenario: Scenario, run: StrategyRun, values: Values | None = None) -> StrategyRun:
    """``run`` with the records each aggregate subscription's subscriber computed from the copies it
    received (``run.delivered``; ``values`` as :data:`topologies.workload.Values`).  A subscriber whose
    deliveries lacked an attribute its records read computes none."""
    records = {}
    for sub in scenario.subscriptions:
        query = sub.query
        if not isinstance(query, AggregateQuery):
            continue
        carried = run.delivered_attrs.get(sub.id, query.select)
        if not set(query.select) <= set(carried):
            records[sub.id] = {}
            continue
        stream = scenario.stream(sub.stream)
        # copies in the order of emission (live mode keeps them in order of arrival), each copy once per
        # time it came: a tuple received twice is aggregated twice
        received = np.sort(np.asarray(run.delivered.get(sub.id, np.zeros(0, np.int64)), np.int64), kind="stable")
        times = emission_times_of(stream, received)
        found = columns_of(scenario, stream.id, received, query.select, values)
        records[sub.id] = aggregate(query, times, found, sub.at, sub.until, scenario.duration)
    return replace(run, records=records) if records else run
