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
from network.routing import Network
from peers.local import run_local
from reports.simulate import simulate
from sharing import STRATEGIES, make_plan
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
COMMON_WINDOWS = ("WINDOW 2 s", "WINDOW 2 s", "WINDOW 4 s SLIDE 2 s", "WINDOW 10 TUPLES")
COMMON_FUNCTIONS = ("COUNT(*)", "SUM(z)", "AVG(z)", "MAX(z)")
"""Windows and functions of aggregates that fold a common input: panes of 2 s keeping few states serve
the time windows."""
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


def with_aggregates(scenario: Scenario, seed: int, share: float = 0.5, common: int = 0) -> Scenario:
    """``scenario`` with about ``share`` of its subscriptions windowed aggregates of their own WHERE, or with
    ``common`` > 0, of one of the first ``common`` WHEREs of their stream (so they can share panes)."""
    rng = np.random.default_rng(seed)
    subs = []
    wheres: dict[str, list] = {}
    for sub in scenario.subscriptions:
        if rng.random() < share:
            if common:
                found = wheres.setdefault(sub.stream, [])
                if len(found) < common:
                    found.append(sub.query.where)
                sub = replace(sub, query=replace(sub.query, where=found[int(rng.integers(len(found)))]))
            functions = COMMON_FUNCTIONS if common else FUNCTIONS
            outputs = list(rng.choice(functions, size=int(rng.integers(1, 4)), replace=False))
            grouped = rng.random() < 0.5
            text = f"SELECT {'k, ' if grouped else ''}{', '.join(outputs)} FROM {sub.stream}"
            text += f" WHERE {sub.query.where.to_text()}" if sub.query.where.boxes else " WHERE FALSE"
            text += " GROUP BY k" if grouped else ""
            text += " " + str(rng.choice(WINDOWS if not common else COMMON_WINDOWS))
            if rng.random() < (0.1 if common else 0.25):
                text += " HAVING COUNT(*) >= 3"
            sub = replace(sub, query=parse_query(text))
        subs.append(sub)
    return replace(scenario, subscriptions=tuple(subs))


@pytest.mark.parametrize("seed", CASES)
def test_every_strategy_serves_aggregates_exactly_at_size(seed):
    scenario = with_aggregates(scale_scenario(seed, **CASES[seed]), seed)
    _exact_at_size(scenario)


def test_aggregates_sharing_panes_are_exact_at_size():
    # few WHEREs per stream, so that aggregates fold one input and the planners give them pane trees
    # (docs/ACCOUNTING.md, "Panes"), with churn
    scenario = with_aggregates(scale_scenario(33, **CASES[31]), 33, share=0.6, common=3)
    network = Network.of(scenario)
    for strategy in ("ideal", "sharing-em"):
        plan = make_plan(scenario, strategy, network)
        panes = {f.id for e in plan.epochs for f in e.flows if f.panes is not None and f.parent is None}
        assert len(panes) >= 3, strategy
    _exact_at_size(scenario)


def _exact_at_size(scenario: Scenario) -> None:
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
