"""The local simulation engine on a many-epoch scenario: plan and run time per strategy.

``python run.py bench engine [--json] [--scenario topologies/large.yaml] [--strategy NAME ...] [--window
SECONDS]`` (default window: the engine's own, :func:`peers.local.batch_window`). For each strategy: the
seconds to make the plan and to simulate it with :func:`peers.local.run_local`, the check of every delivery
against the expected tuples included (CPU time of this process and wall time), and the tuple-hops simulated
per CPU second (a tuple crossing one link direction, backbone or access, is one tuple-hop). The baseline,
always measured first in the same process, is data-shipping (every subscription gets the raw stream on its
own route); each row's ratio is its run CPU time over the baseline's. A strategy whose plan the engine
rejects is listed with the error instead of times.
"""

from __future__ import annotations

import argparse
import json
import time

BASELINE = "data-shipping"
WARM_UP = "topologies/figure1.yaml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default="topologies/large.yaml", help="scenario file")
    from sharing import STRATEGIES

    parser.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGIES,
        metavar="STRATEGY",
        help="strategy, one of %(choices)s (repeatable; default all)",
    )
    parser.add_argument(
        "--window", type=float, default=None, help="batch window in seconds of emission time (default: the engine's)"
    )


def _measure(scenario, network, strategy: str, window: float | None) -> dict:
    from network.meter import StrategyRun
    from peers.local import run_local
    from sharing import make_plan
    from topologies.errors import EmulatorError

    cpu, wall = time.process_time(), time.perf_counter()
    plan = make_plan(scenario, strategy, network)
    plan_cpu, plan_wall = time.process_time() - cpu, time.perf_counter() - wall
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        run: StrategyRun = run_local(scenario, plan, window=window)
    except EmulatorError as err:
        return {"strategy": strategy, "epochs": len(plan.epochs), "error": str(err)}
    run_cpu, run_wall = time.process_time() - cpu, time.perf_counter() - wall
    hops = run.backbone_tuples + _access_hops(scenario, run)
    return {
        "strategy": strategy,
        "epochs": len(plan.epochs),
        "plan_cpu_s": plan_cpu,
        "plan_wall_s": plan_wall,
        "run_cpu_s": run_cpu,
        "run_wall_s": run_wall,
        "tuple_hops": hops,
        "tuple_hops_per_cpu_s": hops / max(run_cpu, 1e-9),
    }


def _access_hops(scenario, run) -> int:
    """Every emitted tuple's upload plus every delivered copy."""
    from topologies import workload

    uploads = sum(workload.tuple_count(s, scenario.duration) for s in scenario.streams)
    return uploads + sum(len(v) for v in run.delivered.values())


def main(args: argparse.Namespace) -> int:
    from network.routing import Network
    from sharing import STRATEGIES, check_strategy
    from topologies.errors import InputError
    from topologies.loader import load_scenario

    chosen = [check_strategy(s) for s in args.strategy or STRATEGIES]
    if args.window is not None and not args.window > 0:
        raise InputError(f"--window: must be positive, got {args.window:g}")
    scenario = load_scenario(args.scenario)
    if args.window is None:
        from peers.local import batch_window

        args.window = batch_window(scenario)
    network = Network.of(scenario)
    # warm-up on the smallest shipped scenario: imports and numba's compiled kernels, not a second full run
    small = load_scenario(WARM_UP)
    _measure(small, Network.of(small), BASELINE, None)
    rows = [_measure(scenario, network, BASELINE, args.window)]
    rows += [_measure(scenario, network, s, args.window) for s in chosen if s != BASELINE]
    base = rows[0].get("run_cpu_s")
    for row in rows:
        if "run_cpu_s" in row and base:
            row["ratio_to_baseline"] = row["run_cpu_s"] / base
    params = {"scenario": args.scenario, "window": args.window, "baseline": BASELINE}
    if args.json:
        print(json.dumps({"params": params, "strategies": rows}))
        return 0
    print("engine benchmark: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    print(
        f"{'strategy':<16}{'epochs':>7}{'plan cpu s':>12}{'run cpu s':>11}{'run wall s':>12}"
        f"{'tuple-hops':>12}{'hops/cpu s':>12}{'ratio':>8}"
    )
    for row in rows:
        if "error" in row:
            print(f"{row['strategy']:<16}{row['epochs']:>7}  engine rejected the plan: {row['error']}")
            continue
        print(
            f"{row['strategy']:<16}{row['epochs']:>7}{row['plan_cpu_s']:>12.2f}{row['run_cpu_s']:>11.2f}"
            f"{row['run_wall_s']:>12.2f}{row['tuple_hops']:>12}{row['tuple_hops_per_cpu_s']:>12.0f}"
            f"{row.get('ratio_to_baseline', float('nan')):>8.2f}"
        )
    total = sum(r.get("run_cpu_s", 0.0) + r.get("plan_cpu_s", 0.0) for r in rows)
    print(f"total plan + run CPU: {total:.1f} s (ratio: run CPU over {BASELINE}'s, measured first in this process)")
    return 0
