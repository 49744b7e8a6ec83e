"""Super-peer processors at the sizes users bring: a generated scenario of about 300 super-peers and
hundreds of subscriptions with churn (topologies/scale.py) and a failure, whose super-peers get CPUs sized
from their own unlimited load: most near it (queues form), the busiest ones below it with small input
buffers (they drop).  Every strategy on the local engine, its plans proven sound, keeps the exactness
identity; the processors' tallies and every subscription's counts do not depend on the batch windows; and
the tallies hold together (docs/ACCOUNTING.md, "Super-peer CPU")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from peers.local import run_local
from reports.simulate import simulate
from sharing import STRATEGIES, make_plan
from topologies.model import NetworkEvent
from topologies.scale import scale_scenario

pytestmark = pytest.mark.slow

SIZES = {"subscriptions": 300, "duration": 20, "rate": 100, "churn": 0.4}


def _scenario():
    base = scale_scenario(41, **SIZES)
    # every processor emulated, none limited in effect: each super-peer's load, from the multicast plan
    unlimited = replace(base, cpus=tuple((sp, 1e15) for sp in base.super_peers))
    run = run_local(unlimited, make_plan(unlimited, "multicast"))
    rate = {sp: tally.ops / base.duration for sp, tally in run.processors.items()}
    busiest = sorted(rate, key=lambda sp: -rate[sp])[:8]
    cpus = tuple((sp, max(1000.0, (0.8 if sp in busiest else 1.5) * rate[sp])) for sp in base.super_peers)
    fail_at = base.super_peers[len(base.super_peers) // 2]
    events = (
        NetworkEvent(7.0, "fail", "super_peer", (fail_at,)),
        NetworkEvent(12.0, "recover", "super_peer", (fail_at,)),
    )
    return replace(base, cpus=cpus, input_buffers=tuple((sp, 4000.0) for sp in busiest), events=events), busiest


def test_every_strategy_stays_exact_with_processors_at_size():
    scenario, _ = _scenario()
    assert len(scenario.super_peers) >= 250 and len(scenario.subscriptions) >= 300
    entries, _, _ = simulate(scenario, list(STRATEGIES), run_local, show_progress=False, check_plans=True)
    waited = dropped = 0
    for name, entry in entries.items():
        for s in entry["subscriptions"]:
            if s["rejected"] is None:  # (the sharing strategies reject what no processor can run)
                assert (s["missing"], s["extra"]) == (0, 0), (name, s["id"])
                assert s["delivered"] + s["dropped"] + s["lost"] + s["unreachable"] == s["expected"], (name, s)
        for sp in entry["super_peers"]:
            assert sp["cpu_ops"] is not None and sp["cpu_utilization"] is not None
            if sp["processing_delay_mean"]:
                waited += 1
            dropped += sp["cpu_dropped"]
    assert waited > 100 and dropped > 0  # processors queued and dropped: not vacuous


@pytest.mark.parametrize("strategy", ["data-shipping", "sharing-em"])
def test_processor_tallies_do_not_depend_on_the_windows(strategy):
    scenario, _ = _scenario()
    plan = make_plan(scenario, strategy)
    coarse, fine = (run_local(scenario, plan, window=w) for w in (5.0, 0.37))
    assert coarse.processors.keys() == set(scenario.super_peers)
    assert coarse.processors == fine.processors  # every tally, offered operations per bin included
    assert all(a.offered.sum() >= a.ops for a in coarse.processors.values())  # offered: dropped and lost too
    for sub in scenario.subscriptions:
        s = sub.id
        assert np.array_equal(coarse.delivered[s], fine.delivered[s]) and np.array_equal(
            coarse.dropped[s], fine.dropped[s]
        )
        assert np.allclose(coarse.latencies[s], fine.latencies[s], rtol=0, atol=1e-12)
