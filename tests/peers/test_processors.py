"""Super-peer processors (docs/ACCOUNTING.md, "Super-peer CPU"): what the operators at a super-peer with a
``cpu`` read waits there first in, first out, for the operations they spend on it, and a bounded
``input_buffer`` drops at the tail.  Checked against a plain per-tuple FIFO written here."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from matcher import Query
from matcher.parser import parse_condition
from network.linkrule import TICKS, processing, service, to_ticks
from peers.local import run_local
from reports.report import observe, super_peer_entries
from sharing.plan import Delivery, Epoch, Plan
from topologies.model import (
    AttributeSpec,
    CpuCosts,
    LinkSpec,
    Scenario,
    StreamSpec,
    SubscriptionSpec,
    ThinPeerSpec,
)

HEADER = 16
RATE = 20.0
UPLOAD = HEADER + 8 * 3  # bytes of a tuple of three attributes
ACCESS_BW, ACCESS_LATENCY = 1e6, Fraction(1, 1000)
WHERE = "a < 3 OR b > 6"  # two boxes


def _scenario(cpu: float | None, buffer: float | None, costs: CpuCosts | None = None) -> Scenario:
    return Scenario(
        name="processor",
        seed=3,
        duration=6.0,
        header_bytes=HEADER,
        super_peers=("SP0", "SP1"),
        links=(LinkSpec("SP0", "SP1", 1e6, Fraction(1, 100)),),
        thin_peers=(
            ThinPeerSpec("P0", "SP0", ACCESS_BW, ACCESS_LATENCY),
            ThinPeerSpec("PA", "SP0", 1e9, Fraction(0)),
        ),
        streams=(StreamSpec("S", "P0", RATE, tuple(AttributeSpec(a, "float", None) for a in "abc")),),
        subscriptions=(SubscriptionSpec("QA", "PA", 0.0, None, Query(("a",), "S", parse_condition(WHERE))),),
        cpus=() if cpu is None else (("SP0", cpu),),
        input_buffers=() if buffer is None else (("SP0", buffer),),
        cpu_costs=costs or CpuCosts(),
    )


def _values(scenario: Scenario):
    n = int(scenario.duration * RATE) + 2
    rng = np.random.default_rng(5)
    table = {a: rng.integers(0, 10, n).astype(float) for a in "abc"}
    return lambda stream, start, stop: {a: v[start:stop].copy() for a, v in table.items()}


def _plan(scenario: Scenario) -> Plan:
    # the subscriber sits at the source's super-peer: its delivery is the one operator there
    delivery = Delivery("QA", "PA", "SP0", None, parse_condition(WHERE), ("a",))
    return Plan("hand", scenario.name, (Epoch(0.0, scenario.duration, (), (delivery,)),))


def _reference(scenario: Scenario, values, cpu: float, buffer: float):
    """Plain FIFO with tail drop at SP0's processor: per tuple whether it was served and when it left; the
    operations served; the ticks spent by the served."""
    n = int(np.ceil(scenario.duration * RATE - 1e-9))
    cols = values("S", 0, n)
    kept = (cols["a"] < 3) | (cols["b"] > 6)
    costs = scenario.cpu_costs
    work = 2 * costs.box + np.where(kept, costs.projection, 0)
    arrival = to_ticks(np.arange(n) / RATE) + service(UPLOAD, ACCESS_BW) + to_ticks(float(ACCESS_LATENCY))
    free, waiting = 0, []  # the admitted copies not yet served: (start tick, bytes)
    left, ops, spent = {}, 0, 0
    for i in range(n):
        a = int(arrival[i])
        waiting = [(s, w) for s, w in waiting if s > a]
        if sum(w for _, w in waiting) + UPLOAD > buffer:
            continue  # dropped at the tail
        start = max(a, free)
        free = start + int(processing(int(work[i]), cpu))
        waiting.append((start, UPLOAD))
        left[i] = free
        ops += int(work[i])
        spent += free - a
    return kept, left, ops, spent, arrival


@pytest.mark.parametrize("window", [0.3, 10.0])
@pytest.mark.parametrize(("cpu", "buffer"), [(150.0, np.inf), (150.0, 3 * UPLOAD), (173.0, 2 * UPLOAD)])
def test_processor_queue_and_tail_drop_equal_a_plain_fifo(window, cpu, buffer):
    scenario = _scenario(cpu, None if buffer == np.inf else buffer)
    values = _values(scenario)
    run = run_local(scenario, _plan(scenario), window=window, values=values)
    kept, left, ops, spent, arrival = _reference(scenario, values, cpu, buffer)
    served = np.array(sorted(left))
    want = served[kept[served]]
    assert run.delivered["QA"].tolist() == want.tolist()
    # the delivery leaves the processor for the thin-peer over a link of 1 Gbit/s and no latency
    tail = service(HEADER + 8, 1e9)
    latency = (np.array([left[i] for i in want]) + tail - to_ticks(want / RATE)) / TICKS
    assert np.allclose(run.latencies["QA"], latency, rtol=0, atol=1e-9)
    tally = run.processors["SP0"]
    assert (tally.ops, tally.delay_ticks, tally.jobs) == (ops, spent, len(left))
    assert tally.dropped == len(arrival) - len(left)
    dropped_kept = np.setdiff1d(np.flatnonzero(kept), served)
    assert run.dropped["QA"].tolist() == dropped_kept.tolist()
    if buffer != np.inf:
        assert tally.dropped > 0  # the case drops
    assert set(run.processors) == {"SP0", "SP1"} and run.processors["SP1"].ops == 0  # no operator there


def test_a_super_peer_without_cpu_or_buffer_has_no_processor_and_changes_nothing():
    values = _values(_scenario(None, None))
    plain = run_local(_scenario(None, None), _plan(_scenario(None, None)), window=0.5, values=values)
    fast = run_local(_scenario(1e15, None), _plan(_scenario(1e15, None)), window=0.5, values=values)
    assert plain.processors == {}
    assert plain.delivered["QA"].tolist() == fast.delivered["QA"].tolist()
    assert np.allclose(plain.latencies["QA"], fast.latencies["QA"], rtol=0, atol=1e-12)
    n = len(values("S", 0, 120)["a"])
    costs = CpuCosts()
    assert fast.processors["SP0"].ops == 2 * costs.box * n + costs.projection * len(fast.delivered["QA"])


def test_costs_come_from_the_scenario():
    costs = CpuCosts(box=10, projection=0, aggregate=0, record=0)
    scenario = _scenario(1e15, None, costs)
    run = run_local(scenario, _plan(scenario), window=1.0, values=_values(scenario))
    assert run.processors["SP0"].ops == 20 * int(scenario.duration * RATE)


def test_report_gives_each_processor_its_utilization_and_delay():
    scenario = _scenario(150.0, 3 * UPLOAD)
    run = run_local(scenario, _plan(scenario), window=1.0, values=_values(scenario))
    entry = {"links": [], "super_peers": super_peer_entries(scenario, run, [], [])}
    observe(entry, 8.0)
    sp0, sp1 = entry["super_peers"]
    tally = run.processors["SP0"]
    assert sp0["cpu"] == 150 and sp0["cpu_ops"] == tally.ops and sp0["cpu_dropped"] == tally.dropped > 0
    assert sp0["cpu_utilization"] == tally.ops / (150.0 * 8.0)
    assert sp0["peak_cpu_utilization"] == max(
        int(tally.offered.max()) / (150.0 * run.load_bin_s), sp0["cpu_utilization"]
    )
    assert sp0["peak_cpu_utilization"] > 1  # offered more than it can run: its input buffer drops
    assert sp0["processing_delay_mean"] == tally.delay_ticks / tally.jobs / TICKS > 0
    assert sp1["cpu"] is None and sp1["cpu_ops"] == 0 and sp1["cpu_utilization"] is None
    assert sp1["processing_delay_mean"] is None  # nothing came
    plain = _scenario(None, None)
    run = run_local(plain, _plan(plain), window=1.0, values=_values(plain))
    entry = {"links": [], "super_peers": super_peer_entries(plain, run, [], [])}
    observe(entry, 8.0)
    assert all(sp["cpu_ops"] is None and sp["cpu_utilization"] is None for sp in entry["super_peers"])


def test_a_processor_is_down_with_its_super_peer():
    from topologies.model import NetworkEvent

    scenario = replace(
        _scenario(150.0, None),
        events=(
            NetworkEvent(2.0, "fail", "super_peer", ("SP0",)),
            NetworkEvent(3.0, "recover", "super_peer", ("SP0",)),
        ),
    )
    run = run_local(scenario, _plan(scenario), window=0.5, values=_values(scenario))
    kept = run.delivered["QA"]
    assert len(run.lost["QA"]) > 0  # queued at the processor when it failed
    assert not np.isin(run.lost["QA"], kept).any()
