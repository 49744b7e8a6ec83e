"""Aggregate subscriptions at the sizes users bring: generated scenarios of 300 super-peers and hundreds of
subscriptions with churn (topologies/scale.py), about half of whose subscriptions are turned into windowed
aggregates over the same input (every function, grouped by the int attribute ``k`` or not, tumbling,
sliding and count windows, HAVING), seeded.  Every strategy on the local engine, its plans proven sound,
serves every subscription's records exactly the central evaluation's (docs/ACCOUNTING.md, "Records")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from matcher import AggregateQuery, parse_query
from peers.local import run_local
from reports.simulate import simulate
from sharing import STRATEGIES
from topologies.expected import expected_results
from topologies.model import Scenario
from topologies.scale import scale_scenario

pytestmark = pytest.mark.slow

FUNCTIONS = ("COUNT(*)", "SUM(z)", "AVG(z)", "MIN(x)", "MAX(y)", "VAR(z)", "STDDEV(x)", "MEDIAN(z)")
WINDOWS = (
    "WINDOW 2 s",
    "WINDOW 5 s SLIDE 1 s",
    "WINDOW 1.5 s SLIDE 0.5 s",
    "WINDOW 3 s SLIDE 4 s",
    "WINDOW 10 TUPLES",
    "WINDOW 6 TUPLES SLIDE 4 TUPLES",
)
CASES = {
    31: {"subscriptions": 400, "duration": 30, "rate": 100, "churn": 0.4},
    32: {
        "transit": 6,
        "stubs_per_transit": 6,
        "nodes_per_stub": 7,
        "streams": 4,
        "subscriptions": 300,
        "duration": 30,
        "rate": 100,
    },
}


def with_aggregates(scenario: Scenario, seed: int, share: float = 0.5) -> Scenario:
    """``scenario`` with about ``share`` of its subscriptions windowed aggregates of their own WHERE."""
    rng = np.random.default_rng(seed)
    subs = []
    for sub in scenario.subscriptions:
        if rng.random() < share:
            outputs = list(rng.choice(FUNCTIONS, size=int(rng.integers(1, 4)), replace=False))
            grouped = rng.random() < 0.5
            text = f"SELECT {'k, ' if grouped else ''}{', '.join(outputs)} FROM {sub.stream}"
            text += f" WHERE {sub.query.where.to_text()}" if sub.query.where.boxes else " WHERE FALSE"
            text += " GROUP BY k" if grouped else ""
            text += " " + str(rng.choice(WINDOWS))
            if rng.random() < 0.25:
                text += " HAVING COUNT(*) >= 3"
            sub = replace(sub, query=parse_query(text))
        subs.append(sub)
    return replace(scenario, subscriptions=tuple(subs))


@pytest.mark.parametrize("seed", CASES)
def test_every_strategy_serves_aggregates_exactly_at_size(seed):
    scenario = with_aggregates(scale_scenario(seed, **CASES[seed]), seed)
    aggregates = [s for s in scenario.subscriptions if isinstance(s.query, AggregateQuery)]
    assert len(scenario.super_peers) >= 250 and len(aggregates) >= 100
    entries, _, _ = simulate(scenario, list(STRATEGIES), run_local, show_progress=False, check_plans=True)
    for name, entry in entries.items():
        wrong = [s for s in entry["subscriptions"] if (s["missing"], s["extra"]) != (0, 0)]
        assert wrong == [], name
        for s in entry["subscriptions"]:
            if s["rejected"] is None:
                assert s["delivered"] + s["dropped"] + s["lost"] + s["unreachable"] == s["expected"], (name, s)
    expected = expected_results(scenario)
    records = sum(len(expected.records[s.id]) for s in aggregates)
    assert records > 1000  # not vacuous
    assert sum(s["expected"] for s in entries["ideal"]["subscriptions"] if s.get("unit") == "records") == records
