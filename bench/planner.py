"""Subscriptions planned per second on a generated transit-stub backbone.

``python run.py bench planner [--json] [--super-peers 1000 --subscriptions 10000 --streams 10
--strategy sharing-em --seed 1 --waves 10] [--limits [BITS]]``.  Subscriptions arrive in ``--waves``
waves (one epoch each); each asks for 1-2 boxes over 1-3 of a stream's 5 uniform attributes around one of
a few hot spots and selects 1-5 attributes.  The baseline, measured in the same run on the same events, is
query-shipping (one result stream per subscription, no sharing).

``--limits`` measures network-aware planning: the strategy plans the scenario once without limits
(``max_utilization`` infinite: the planner tracks no load) and once with every link's bandwidth set to
BITS bits per second (default 60 Kbit/s, where links near the sources bind) at the default
``max_utilization``, and the ratio of the two times is printed with how many subscriptions were rejected.
Times are wall clock and CPU seconds of this process (the machine may be shared).

``--fail N`` measures re-planning at failures (docs/DYNAMICS.md): N links that carry flows at the end of
the plan are drawn (seeded), and the scenario is planned again with each failing in turn after the last
arrival (link k fails at ``waves + 2k`` and recovers a second later, so each failure meets the whole
plan).  Per failure it prints the planner's wall seconds re-planning, the subscriptions it placed again
or cut off, the flows moved and those cut off; then the median and maximum and their ratio to planning
the whole scenario from scratch (the strategy's time above, same run).
"""

from __future__ import annotations

import argparse
import json
import math
import time

DEFAULT_LIMIT = 60e3


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--super-peers", type=int, default=1000, help="approximate backbone size")
    parser.add_argument("--subscriptions", type=int, default=10000)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--strategy", default="sharing-em", choices=["sharing-hsr", "sharing-hcr", "sharing-em"])
    parser.add_argument("--waves", type=int, default=10, help="arrival instants (epochs)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--limits",
        type=float,
        nargs="?",
        const=DEFAULT_LIMIT,
        default=None,
        metavar="BITS",
        help=f"also plan with every link's bandwidth BITS bit/s (default {DEFAULT_LIMIT:g}) against no limits",
    )
    parser.add_argument(
        "--fail",
        type=int,
        default=0,
        metavar="N",
        help="then fail N random links carrying flows, one at a time, and time each re-plan",
    )


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


def _timed(plan):
    """``plan()``, its wall clock and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = plan()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from network.routing import Network
    from sharing import make_plan
    from sharing.cost import CostModel, epoch_cost

    scenario = _scenario(args)
    # each run computes its own routes
    baseline, baseline_s, _ = _timed(lambda: make_plan(scenario, "query-shipping", Network.of(scenario)))
    # with --limits, the strategy's own run is the one without limits: the planner then tracks no load
    plain = replace(scenario, max_utilization=math.inf) if args.limits is not None else scenario
    plan, total_s, total_cpu = _timed(lambda: make_plan(plain, args.strategy, Network.of(plain)))
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
    rows = [
        ("query-shipping", baseline_s, None, shipped_cost, None),
        (args.strategy, total_s, total_cpu, shared_cost, None),
    ]
    if args.limits is not None:
        params["limits_bit_per_s"] = args.limits
        links = tuple(replace(link, bandwidth=args.limits) for link in scenario.links)
        bound = replace(scenario, links=links)
        limited, bound_s, bound_cpu = _timed(lambda: make_plan(bound, args.strategy, Network.of(bound)))
        result.update(
            limits_s=bound_s,
            limits_cpu_s=bound_cpu,
            no_limits_cpu_s=total_cpu,
            rejected=len(limited.rejected),
            around_hot_links=sum("around a hot link" in d.summary for d in limited.decisions),
        )
        rows[-1] = (f"{args.strategy}, no limits", total_s, total_cpu, shared_cost, None)
        rows.append(
            (
                f"{args.strategy}, limits",
                bound_s,
                bound_cpu,
                epoch_cost(model, limited.epochs[-1].flows),
                len(limited.rejected),
            )
        )
    failures = _failures(args, plain, plan, total_s) if args.fail > 0 else None
    if failures is not None:
        result["failures"] = failures
    if args.json:
        print(json.dumps(result))
        return 0
    print("planner benchmark: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    print(f"{'strategy':<28}{'total s':>10}{'CPU s':>10}{'subs/s':>12}{'est. B/s':>16}{'rejected':>10}")
    for name, wall, cpu, cost, rejected in rows:
        cpu_text = "" if cpu is None else f"{cpu:.2f}"
        rejected_text = "" if rejected is None else f"{rejected}"
        print(
            f"{name:<28}{wall:>10.2f}{cpu_text:>10}{args.subscriptions / wall:>12.0f}{cost:>16.0f}{rejected_text:>10}"
        )
    print(
        f"planning time ratio {args.strategy}/query-shipping: {total_s / baseline_s:.1f}x; "
        f"estimated traffic ratio: {shared_cost / shipped_cost:.3f}"
    )
    if failures is not None:
        _print_failures(failures)
    if args.limits is not None:
        print(
            f"with limits / without: {bound_s / total_s:.2f}x wall,"
            f" {result['limits_cpu_s'] / result['no_limits_cpu_s']:.2f}x CPU;"
            f" {result['rejected']} rejected, {result['around_hot_links']} branches routed around a hot link"
        )
    return 0


def _failures(args: argparse.Namespace, scenario, plan, scratch_s: float) -> dict:
    """Plan ``scenario`` again with ``args.fail`` links that carry flows in ``plan``'s last epoch failing
    one at a time (module docstring); the re-plans, and their ratio to ``scratch_s``."""
    import statistics
    from dataclasses import replace
    from itertools import pairwise

    import numpy as np

    from network.routing import Network
    from sharing import make_plan
    from topologies.model import NetworkEvent

    carrying = sorted({tuple(sorted(hop)) for flow in plan.epochs[-1].flows for hop in pairwise(flow.path)})
    rng = np.random.default_rng(args.seed)
    picked = [carrying[k] for k in rng.choice(len(carrying), size=min(args.fail, len(carrying)), replace=False)]
    events = []
    for k, link in enumerate(picked):
        events.append(NetworkEvent(args.waves + 2 * k, "fail", "link", link))
        events.append(NetworkEvent(args.waves + 2 * k + 1, "recover", "link", link))
    failing = replace(scenario, duration=float(args.waves + 2 * len(picked)), events=tuple(events))
    replanned = make_plan(failing, args.strategy, Network.of(failing))
    placed: dict[float, int] = {}
    for d in replanned.decisions:
        if d.event == "replan":
            placed[d.time] = placed.get(d.time, 0) + 1
    rows = []
    for link, failure, recovery in zip(picked, replanned.replans[0::2], replanned.replans[1::2], strict=True):
        rows.append(
            {
                "link": list(link),
                "replan_s": failure.seconds,
                "affected": placed.get(failure.time, 0),
                "flows_moved": failure.flows_moved,
                "cut_off": len(failure.cut_off),
                "recovery_s": recovery.seconds,
                "recovery_placed": placed.get(recovery.time, 0),
            }
        )
    seconds = [row["replan_s"] for row in rows]
    median, most = statistics.median(seconds), max(seconds)
    return {
        "rows": rows,
        "median_s": median,
        "max_s": most,
        "from_scratch_s": scratch_s,
        "median_ratio": median / scratch_s,
        "max_ratio": most / scratch_s,
    }


def _print_failures(failures: dict) -> None:
    header = ("re-plan s", 11), ("affected", 10), ("moved", 8), ("cut off", 9), ("recovery s", 12), ("placed", 8)
    print(f"{'failed link':<22}" + "".join(f"{name:>{width}}" for name, width in header))
    for row in failures["rows"]:
        link = "-".join(row["link"])
        print(
            f"{link:<22}{row['replan_s']:>11.3f}{row['affected']:>10}{row['flows_moved']:>8}{row['cut_off']:>9}"
            f"{row['recovery_s']:>12.3f}{row['recovery_placed']:>8}"
        )
    print(
        f"re-plan after one failure: median {failures['median_s']:.3f} s, max {failures['max_s']:.3f} s;"
        f" planning from scratch {failures['from_scratch_s']:.2f} s"
        f" (ratio median {failures['median_ratio']:.2e}, max {failures['max_ratio']:.2e})"
    )
