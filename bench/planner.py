"""Subscriptions planned per second on a generated transit-stub backbone.

``python run.py bench planner [--json] [--super-peers 1000 --subscriptions 10000 --streams 10
--strategy sharing-em --seed 1 --waves 10]``.  Subscriptions arrive in ``--waves`` waves (one epoch
each); each asks for 1-2 boxes over 1-3 of a stream's 5 uniform attributes around one of a few hot spots
and selects 1-5 attributes.  The baseline, measured in the same run on the same events, is
query-shipping (one result stream per subscription, no sharing).
"""

from __future__ import annotations

import argparse
import json
import time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--super-peers", type=int, default=1000, help="approximate backbone size")
    parser.add_argument("--subscriptions", type=int, default=10000)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--strategy", default="sharing-em", choices=["sharing-hsr", "sharing-hcr", "sharing-em"])
    parser.add_argument("--waves", type=int, default=10, help="arrival instants (epochs)")
    parser.add_argument("--seed", type=int, default=1)


def _scenario(args: argparse.Namespace):
    import numpy as np

    from matcher import Box, Predicate, Query, Uniform, interval
    from topologies.generators import transit_stub
    from topologies.model import AttributeSpec, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec

    # transit * (1 + 3 stubs * 8 nodes) super-peers
    transit = max(1, round(args.super_peers / 25))
    super_peers, links = transit_stub(transit, 3, 8, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    attrs = ("v0", "v1", "v2", "v3", "v4")
    peers, streams, subs = [], [], []
    for k in range(args.streams):
        peers.append(ThinPeerSpec(f"src{k}", super_peers[int(rng.integers(len(super_peers)))]))
        schema = tuple(AttributeSpec(a, "float", Uniform(0, 1000)) for a in attrs)
        streams.append(StreamSpec(f"s{k}", f"src{k}", 100.0, schema))
    hot = rng.uniform(100, 900, size=(args.streams, 4, len(attrs)))
    for i in range(args.subscriptions):
        k = int(rng.integers(args.streams))
        peers.append(ThinPeerSpec(f"P{i}", super_peers[int(rng.integers(len(super_peers)))]))
        boxes = []
        for _ in range(int(rng.integers(1, 3))):
            centre = hot[k, int(rng.integers(4))]
            dims = rng.choice(len(attrs), size=int(rng.integers(1, 4)), replace=False)
            half = rng.uniform(10, 100, size=len(dims))
            boxes.append(
                Box((attrs[d], interval(centre[d] - h, centre[d] + h)) for d, h in zip(dims, half, strict=True))
            )
        select = tuple(attrs[d] for d in sorted(rng.choice(len(attrs), size=int(rng.integers(1, 6)), replace=False)))
        at = float(i * args.waves // args.subscriptions)
        subs.append(SubscriptionSpec(f"Q{i}", f"P{i}", at, None, Query(select, f"s{k}", Predicate(boxes))))
    return Scenario(
        "bench-planner", args.seed, float(args.waves), 16, super_peers, links, tuple(peers), tuple(streams), tuple(subs)
    )


def main(args: argparse.Namespace) -> int:
    from network.routing import Network
    from sharing import make_plan
    from sharing.cost import CostModel, epoch_cost

    scenario = _scenario(args)
    start = time.perf_counter()  # each run computes its own routes
    baseline = make_plan(scenario, "query-shipping", Network.of(scenario))
    baseline_s = time.perf_counter() - start
    start = time.perf_counter()
    plan = make_plan(scenario, args.strategy, Network.of(scenario))
    total_s = time.perf_counter() - start
    model = CostModel(scenario)
    shared_cost = epoch_cost(model, plan.epochs[-1].flows)
    shipped_cost = epoch_cost(model, baseline.epochs[-1].flows)
    params = {
        "super_peers": len(scenario.super_peers),
        "subscriptions": args.subscriptions,
        "streams": args.streams,
        "strategy": args.strategy,
        "waves": args.waves,
        "seed": args.seed,
    }
    result = {
        "params": params,
        "subscriptions_per_s": args.subscriptions / total_s,
        "total_s": total_s,
        "baseline_subscriptions_per_s": args.subscriptions / baseline_s,
        "flows": len(plan.epochs[-1].flows),
        "estimated_bytes_per_s": shared_cost,
        "baseline_estimated_bytes_per_s": shipped_cost,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print("planner benchmark: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    print(f"{'strategy':<16}{'total s':>10}{'subs/s':>12}{'est. B/s':>16}")
    print(
        f"{'query-shipping':<16}{baseline_s:>10.2f}{result['baseline_subscriptions_per_s']:>12.0f}{shipped_cost:>16.0f}"
    )
    print(f"{args.strategy:<16}{total_s:>10.2f}{result['subscriptions_per_s']:>12.0f}{shared_cost:>16.0f}")
    print(
        f"planning time ratio {args.strategy}/query-shipping: {total_s / baseline_s:.1f}x; "
        f"estimated traffic ratio: {shared_cost / shipped_cost:.3f}"
    )
    return 0
