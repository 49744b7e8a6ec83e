"""A process installs only its own super-peers' operators, and they are the ones a full install builds."""

from __future__ import annotations

import pytest

from peers.live.plans import PlanBook
from sharing import make_plan
from topologies.loader import load_scenario


@pytest.mark.parametrize(("path", "strategy", "epochs"), [
    ("topologies/figure1.yaml", "sharing-em", None),
    ("topologies/figure1.yaml", "multicast", None),
    ("topologies/large.yaml", "sharing-em", range(0, 465, 93)),
])  # fmt: skip
def test_a_process_installs_exactly_its_own_super_peers_operators(path, strategy, epochs):
    scenario = load_scenario(path)
    plan = make_plan(scenario, strategy)
    full = PlanBook(scenario)
    full.add_version(0, scenario, plan)
    groups = [scenario.super_peers[k::3] for k in range(3)]
    books = [PlanBook(scenario, nodes=nodes) for nodes in groups]
    for book in books:
        book.add_version(0, scenario, plan)
    checked = 0
    for e in epochs if epochs is not None else range(len(plan.epochs)):
        if e >= len(plan.epochs):
            continue
        everything = full.installed(0, e)
        for nodes, book in zip(groups, books, strict=True):
            mine = book.installed(0, e)
            wanted = {key: op for key, op in everything.operators.items() if key[0] in nodes}
            got = {key: op for key, op in mine.operators.items() if key[0] in nodes}
            assert got.keys() == wanted.keys()
            for key, op in wanted.items():
                assert (got[key].stream, got[key].available, got[key].readers) == (op.stream, op.available, op.readers)
            assert mine.flows == everything.flows
            checked += len(wanted)
    assert checked > 0
