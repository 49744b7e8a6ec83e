"""Windows that merge many short epochs: counts, deliveries and FIFO latencies stay those of the plan.

The plans here cut the run into epochs of 0.1-0.3 s, far shorter than the batch windows, with channels
that stay, change their predicate, their attributes, their parent, or shift position, so the simulator
merges several epochs into each window and splits taps into phases.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from peers.local import run_local
from sharing.plan import Delivery, Epoch, Flow, Plan
from tests.peers.test_local_engine import (
    LINKS,
    PEERS,
    STREAMS,
    SUBS,
    _reference_counts,
    _reference_latencies,
    _scenario,
    _true,
    _values,
    _where,
)


def _cuts(duration: float, step: float) -> list[tuple[float, float]]:
    bounds = np.round(np.arange(0.0, duration + step / 2, step), 6).tolist()
    return list(pairwise(bounds))


def _changing_plan(scenario) -> Plan:
    """Epochs of 0.2 s whose flows and deliveries change in every way a planner may change them."""
    f1 = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 5"), ("a", "b"))
    f1_wide = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 7"), ("a", "b"))
    f1_more = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 7"), ("a", "b", "c"))
    f2 = Flow("F2", "S", "F1", "SP1", ("SP1", "SP3"), _where("b >= 3"), ("a", "b"))
    f2_raw = Flow("F2", "S", None, "SP0", ("SP0", "SP1", "SP3"), _where("b >= 3"), ("a", "b"))
    trim = ((_where("c >= 5"), ("c",)), (_where("a = 2"), ("a",)))
    f4 = Flow("F4", "S", None, "SP0", ("SP0", "SP1", "SP3"), _where("c >= 5 OR a = 2"), ("a", "c"), trim)
    f6 = Flow("F6", "T", None, "SP0", ("SP0", "SP1", "SP3"), _where("x > 2"), ("x", "y"))
    qa = Delivery("QA", "PA", "SP2", "F1", _where("a < 5"), ("a", "b"))
    qb = Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",))
    qc = Delivery("QC", "PC", "SP0", None, _true(), ("a", "b", "c"))
    qt = Delivery("QT", "PB", "SP3", "F6", _where("x > 2"), ("y",))
    qb4 = Delivery("QB", "PB", "SP3", "F4", _where("c >= 5"), ("c",))
    layouts = [
        ((f1, f2, f6), (qa, qb, qc, qt)),
        ((f1, f2, f6), (qa, qb, qc, qt)),
        ((f1, f2, f6), (qb, qc, qt)),  # QA leaves: every later delivery shifts position
        ((f1_wide, f2, f6), (qa, qb, qc, qt)),  # QA back, F1 widened (same attributes)
        ((f1_more, f2, f6), (qa, qb, qc, qt)),  # F1 carries one more attribute
        ((f1, f2_raw, f6), (qa, qb, qc, qt)),  # F2 now reads the raw stream
        ((f1, f4, f6), (qa, qb4, qt)),  # a trim flow, QB moves to it, QC leaves
        ((f6,), (qt,)),
    ]
    epochs = []
    for k, (start, end) in enumerate(_cuts(scenario.duration - 0.4, 0.2)):
        flows, deliveries = layouts[(k // 2) % len(layouts)]
        epochs.append(Epoch(start, end, flows, deliveries))
    return Plan("changing", scenario.name, tuple(epochs))


@pytest.fixture
def changing():
    scenario = _scenario(LINKS, PEERS, STREAMS, SUBS, duration=6.0)
    return scenario, _changing_plan(scenario), _values(scenario)


@pytest.mark.parametrize("window", [0.15, 1.0, 3.0, 100.0])
def test_merged_epochs_count_and_deliver_as_the_plain_recomputation(changing, window):
    scenario, plan, values = changing
    run = run_local(scenario, plan, window=window, values=values)
    link_bytes, link_tuples, access, delivered = _reference_counts(scenario, plan, values)
    assert run.link_bytes == {d: link_bytes.get(d, 0) for d in run.link_bytes}
    assert run.link_tuples == {d: link_tuples.get(d, 0) for d in run.link_tuples}
    assert run.access_bytes == access
    assert {s: v.tolist() for s, v in run.delivered.items()} == delivered
    assert all(len(run.latencies[s]) == len(v) and np.all(run.latencies[s] > 0) for s, v in delivered.items())
    assert sum(int(t.sum()) for t in run.timeline.values()) == run.backbone_bytes


def test_one_window_over_identical_epochs_keeps_per_tuple_fifo_latencies():
    # the same flows re-issued in 30 short epochs: merged into one window, the batched FIFO must equal the
    # per-tuple event simulation exactly, as with a single epoch
    scenario = _scenario(LINKS, PEERS, STREAMS, SUBS, duration=3.0)
    f1 = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 5"), ("a", "b"))
    f2 = Flow("F2", "S", "F1", "SP1", ("SP1", "SP3"), _where("b >= 3"), ("a", "b"))
    f6 = Flow("F6", "T", None, "SP0", ("SP0", "SP1", "SP3"), _where("x > 2"), ("x", "y"))
    deliveries = (
        Delivery("QA", "PA", "SP2", "F1", _where("a < 5"), ("a", "b")),
        Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",)),
        Delivery("QT", "PB", "SP3", "F6", _where("x > 2"), ("y",)),
    )
    epochs = tuple(Epoch(s, e, (f1, f2, f6), deliveries) for s, e in _cuts(scenario.duration, 0.1))
    plan = Plan("split", scenario.name, epochs)
    values = _values(scenario)
    run = run_local(scenario, plan, window=scenario.duration, values=values)
    expected = _reference_latencies(scenario, plan, values)
    for sub, by_index in expected.items():
        assert run.delivered[sub].tolist() == sorted(by_index)
        want = np.array([by_index[i] for i in run.delivered[sub].tolist()])
        assert np.allclose(run.latencies[sub], want, rtol=0, atol=1e-9)


def test_a_run_of_days_gets_longer_windows_not_millions_of_them():
    from dataclasses import replace

    from peers.local import MAX_WINDOW, MAX_WINDOWS, batch_window
    from topologies.loader import load_scenario

    scenario = load_scenario("topologies/figure1.yaml")
    sparse = replace(scenario, streams=tuple(replace(s, rate=1e-299) for s in scenario.streams))
    assert batch_window(replace(sparse, duration=60.0)) == MAX_WINDOW
    assert batch_window(replace(sparse, duration=1e300)) == 1e300 / MAX_WINDOWS
    # a fast stream still bounds a batch's tuples, however long the run
    assert batch_window(replace(scenario, duration=1e9)) == min(1e9 / MAX_WINDOWS, 1024 / scenario.streams[0].rate)
