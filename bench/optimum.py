"""The least backbone bytes any plan can carry on a small static scenario, solved exactly (MILP, HiGHS).

``python run.py bench optimum SCENARIO [--json] [--set KEY=VALUE ...]``.  ``ideal`` is the least traffic on
the least-latency routes every baseline uses; a sharing plan may take other routes and go below it
(docs/REPORT.md).  This computes the least over **every** routing, tuple by tuple: a tuple emitted at
super-peer ``s`` whose satisfied subscriptions sit at super-peers ``t`` selecting attributes ``A_t`` must
reach each ``t`` with each attribute of ``A_t`` along some path from ``s``; a link direction costs its header
once if the tuple crosses it at all and 8 bytes per attribute value crossing it.  Per set of such needs
(tuples with the same ones cost the same), that is a Steiner arborescence problem with one commodity per
(super-peer, attribute), written as a mixed-integer program and solved by scipy's HiGHS
(``scipy.optimize.milp``):

    minimise    sum_e header * x_e + 8 * sum_{e,a} y_{e,a}
    subject to  f_k is a unit flow from s to t_k           for each commodity k = (t_k, a_k)
                f_{k,e} <= y_{e,a_k} <= x_e                 x, y binary, 0 <= f <= 1

The sum over the run's tuples is the optimum of a flow-based plan (flows split per region of the
subscriptions' predicates can carry each tuple along its own tree), so every strategy's backbone bytes on
a run without drops are at least this.  Each strategy is then run on the local engine: its bytes, its
ratio to the optimum, and the optimum's ratio to ``ideal``'s are printed.  Static scenarios only (no
backbone events); link bandwidth, buffers and planner limits are ignored (the optimum of what is carried,
not of what fits).  A scenario whose programs would exceed ``--max-variables`` is refused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Iterable

import numpy as np

MAX_VARIABLES = 200_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", help="a scenario file (small: tens of super-peers and subscriptions)")
    parser.add_argument("--seed", type=int, default=None, help="the scenario's seed instead of the file's")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as for run.py run")
    parser.add_argument("--max-variables", type=int, default=MAX_VARIABLES, help="largest program solved")


def needs_per_tuple(scenario, expected) -> dict[str, Counter]:
    """Per stream, how many tuples have each set of needs: frozensets of (super-peer, attribute) pairs, one
    per attribute a satisfied subscription at that super-peer selects (tuples nobody wants: no entry)."""
    wanted: dict[str, dict[int, set]] = {s.id: {} for s in scenario.streams}
    for sub in scenario.subscriptions:
        home = scenario.home(sub.peer)
        pairs = {(home, a) for a in expected.attrs[sub.id]}
        per = wanted[sub.stream]
        for i in expected.indices[sub.id].tolist():
            per.setdefault(i, set()).update(pairs)
    return {stream: Counter(frozenset(p) for p in per.values()) for stream, per in wanted.items()}


def least_tree_bytes(
    directions: tuple[tuple[str, str], ...], source: str, needs: Iterable[tuple[str, str]], header: int
) -> int:
    """The least bytes one tuple emitted at ``source`` costs on the backbone to bring each attribute of
    ``needs`` ((super-peer, attribute) pairs) to its super-peer (the program in the module docstring)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    commodities = sorted((t, a) for t, a in needs if t != source)
    if not commodities:
        return 0
    attrs = sorted({a for _, a in commodities})
    nodes = sorted({v for e in directions for v in e})
    n_e, n_a, n_k = len(directions), len(attrs), len(commodities)
    x0, y0, f0 = 0, n_e, n_e + n_e * n_a  # variable offsets: x_e, y_{e,a}, f_{k,e}
    n_vars = f0 + n_k * n_e
    rows, cols, vals, lo, hi = [], [], [], [], []

    def constraint(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    column = {a: j for j, a in enumerate(attrs)}
    for k, (target, a) in enumerate(commodities):
        for v in nodes:  # flow out minus flow in: 1 at the source, -1 at the target
            entries = [(f0 + k * n_e + e, 1.0) for e, (u, _) in enumerate(directions) if u == v]
            entries += [(f0 + k * n_e + e, -1.0) for e, (_, w) in enumerate(directions) if w == v]
            b = 1.0 if v == source else -1.0 if v == target else 0.0
            constraint(entries, b, b)
        for e in range(n_e):  # f_{k,e} <= y_{e,a}
            constraint([(f0 + k * n_e + e, 1.0), (y0 + e * n_a + column[a], -1.0)], -np.inf, 0.0)
    for e in range(n_e):
        for j in range(n_a):  # y_{e,a} <= x_e
            constraint([(y0 + e * n_a + j, 1.0), (x0 + e, -1.0)], -np.inf, 0.0)
    cost = np.zeros(n_vars)
    cost[x0:y0] = header
    cost[y0:f0] = 8.0
    integrality = np.zeros(n_vars)
    integrality[:f0] = 1
    matrix = coo_array((vals, (rows, cols)), shape=(len(lo), n_vars)).tocsr()
    result = milp(
        cost,
        constraints=LinearConstraint(matrix, lo, hi),
        integrality=integrality,
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0},
    )
    if not result.success:
        raise RuntimeError(f"HiGHS found no optimum: {result.message}")
    return round(result.fun)  # integer costs: header and 8 per value


def optimum_bytes(scenario, expected, network) -> dict[str, int]:
    """Per stream, the least backbone bytes any plan carries over the run (module docstring)."""
    directions = tuple(network.directions)
    per_stream = needs_per_tuple(scenario, expected)
    found = {}
    for stream in scenario.streams:
        source = scenario.home(stream.source)
        found[stream.id] = sum(
            count * least_tree_bytes(directions, source, needs, scenario.header_bytes)
            for needs, count in per_stream[stream.id].items()
        )
    return found


def main(args: argparse.Namespace) -> int:
    from network.routing import Network
    from peers.local import run_local
    from reports.report import build_report
    from sharing import STRATEGIES, make_plan
    from topologies.errors import InputError
    from topologies.expected import expected_results
    from topologies.loader import load_scenario
    from topologies.overrides import parse_assignment

    changes = [] if args.seed is None else [("seed", args.seed)]
    scenario = load_scenario(args.scenario, changes + [parse_assignment(text) for text in args.set])
    if scenario.events:
        raise InputError(f"{args.scenario}: events: the optimum is computed for static scenarios only")
    network = Network.of(scenario)
    homes = {scenario.home(s.peer) for s in scenario.subscriptions}
    attrs = max((len(s.attribute_names) for s in scenario.streams), default=0)
    n_e = len(network.directions)
    largest = n_e * (1 + attrs + len(homes) * attrs)
    if largest > args.max_variables:
        raise InputError(
            f"{args.scenario}: up to {largest} variables per program (over --max-variables"
            f" {args.max_variables}): the optimum is for small scenarios"
        )
    expected = expected_results(scenario)
    started = time.perf_counter()
    optimum = optimum_bytes(scenario, expected, network)
    solve_s = time.perf_counter() - started
    runs = {name: run_local(scenario, make_plan(scenario, name, network)) for name in STRATEGIES}
    report = build_report(scenario, runs, "local")
    least = sum(optimum.values())
    rows = []
    for name, entry in report["strategies"].items():
        measured = entry["backbone_bytes"]
        rows.append((name, measured, measured / least if least else None, entry["exact"], entry["link_drops"]))
    ideal = report["strategies"]["ideal"]["backbone_bytes"]
    result = {
        "params": {"scenario": scenario.name, "super_peers": len(scenario.super_peers), "link_directions": n_e},
        "optimum_bytes": least,
        "optimum_per_stream": optimum,
        "solve_s": solve_s,
        "ideal_bytes": ideal,
        "strategies": {n: {"backbone_bytes": b, "x_optimum": r, "exact": x, "drops": d} for n, b, r, x, d in rows},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"optimum benchmark: scenario={scenario.name}, super_peers={len(scenario.super_peers)},"
        f" link_directions={n_e}, subscriptions={len(scenario.subscriptions)}"
    )
    shown = f"; ideal {ideal} B = {ideal / least:.3f}x the optimum" if least else ""
    print(f"least backbone bytes of any plan: {least} B (HiGHS, {solve_s:.1f} s){shown}")
    print(f"{'strategy':<16}{'backbone B':>14}{'x optimum':>11}{'exact':>7}{'drops':>7}")
    for name, measured, ratio, exact, drops in rows:
        shown = "n/a" if ratio is None else f"{ratio:.3f}"
        print(f"{name:<16}{measured:>14}{shown:>11}{'yes' if exact else 'NO':>7}{drops:>7}")
    below = [n for n, measured, _, _, drops in rows if measured < least and drops == 0]
    if below:
        print(f"BELOW THE OPTIMUM (a defect of the model or the engine): {', '.join(below)}")
        return 1
    return 0
