"""``python run.py bench cpu``: what each step of a super-peer's operators costs on this machine.

The scenario's ``cpu_costs`` (docs/SCENARIOS.md; docs/ACCOUNTING.md, "Super-peer CPU") give a super-peer's
work in operations: per tuple tested per box of a reader's predicate, per tuple a reader keeps projected,
per tuple folded into an aggregate's partial states, per record emitted.  This benchmark times the code
that does each step here, over ``--tuples`` generated tuples of three attributes, best of ``--repeat``
runs after one warm run (numba compiled, caches warm):

- **box**: the compiled selection (``peers.selection.select_batch``) of one reader of 9 small boxes against
  one of 1 (their hull holding every tuple, so that every box is tested): the difference, less the few more
  tuples the first keeps, over 8 boxes is one box test;
- **projection**: a reader keeping every tuple at one attribute of three against one keeping none: the
  difference is what a kept, projected tuple costs;
- **aggregate**: the pane operator (``peers.aggregation.aggregate``) over the tuples, COUNT, SUM, MIN and
  MAX per 10 s window and one group: per tuple folded in (the few records it emits are negligible);
- **record**: the same query grouped by an attribute with 100 values in 1 s windows, less the ungrouped
  run's time, per record emitted.

Printed: each step's nanoseconds; the baseline is the box test, so each step is also given as box tests,
next to the defaults' ratio (``CpuCosts``).  And the operations per second at which one operation of the
defaults takes as long as here: the ``cpu`` that emulates one core of this machine.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from matcher import parse_query
from matcher.parser import parse_condition
from peers.aggregation import aggregate
from peers.selection import SelectorTable, select_batch
from topologies.model import CpuCosts

NAMES = ("a", "b", "c")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tuples", type=int, default=1_000_000, help="tuples per run (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per step, the best kept (default 5)")
    parser.add_argument("--seed", type=int, default=1)


def _best(run, repeat: int) -> float:
    run()  # compiled and warm
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main(args: argparse.Namespace) -> int:
    n, repeat = args.tuples, args.repeat
    rng = np.random.default_rng(args.seed)
    values = rng.uniform(0, 100, (3, n))
    table = SelectorTable({"s": NAMES}, 16)

    # small boxes along a diagonal: their hull holds every tuple, so each box is tested (about 1 % of the
    # tuples lie in each); a nine-box reader keeps about 9 %, the one-box one 1 %, the rest of the first
    # difference being box tests
    def box(k: int) -> str:
        return f"(a >= {11 * k} AND a < {11 * k + 10} AND b >= {11 * (8 - k)} AND b < {11 * (8 - k) + 10})"

    one_box = table.add("s", parse_condition(box(0)), NAMES)
    nine_boxes = table.add("s", parse_condition(" OR ".join(box(k) for k in range(9))), NAMES)
    keeps_none = table.add("s", parse_condition("a < -1"), NAMES)
    keeps_all = table.add("s", parse_condition("a >= 0"), ("a",))
    t_one = _best(lambda: select_batch(table, [one_box], NAMES, values), repeat)
    t_nine = _best(lambda: select_batch(table, [nine_boxes], NAMES, values), repeat)
    t_none = _best(lambda: select_batch(table, [keeps_none], NAMES, values), repeat)
    t_keep = _best(lambda: select_batch(table, [keeps_all], NAMES, values), repeat)
    projection_ns = max((t_keep - t_none) / n * 1e9, 0.0)
    kept = len(select_batch(table, [nine_boxes], NAMES, values)[0][0]) - len(
        select_batch(table, [one_box], NAMES, values)[0][0]
    )
    box_ns = max(((t_nine - t_one) * 1e9 - kept * projection_ns) / 8 / n, 1e-3)
    times = np.sort(rng.uniform(0, 600, n))
    columns = {"x": rng.uniform(0, 100, n), "g": rng.integers(0, 100, n).astype(float)}
    flat = parse_query("SELECT COUNT(*), SUM(x), MIN(x), MAX(x) FROM s WINDOW 10 s")
    grouped = parse_query("SELECT g, COUNT(*), SUM(x), MIN(x), MAX(x) FROM s GROUP BY g WINDOW 1 s")
    t_flat = _best(lambda: aggregate(flat, times, columns, 0.0, None, 600.0), repeat)
    t_grouped = _best(lambda: aggregate(grouped, times, columns, 0.0, None, 600.0), repeat)
    n_records = len(aggregate(grouped, times, columns, 0.0, None, 600.0))
    aggregate_ns = t_flat / n * 1e9
    record_ns = max((t_grouped - t_flat) / max(n_records, 1) * 1e9, 0.0)
    defaults = CpuCosts()
    op_ns = box_ns / defaults.box  # one operation of the defaults, here
    steps = {
        "box": (box_ns, defaults.box),
        "projection": (projection_ns, defaults.projection),
        "aggregate": (aggregate_ns, defaults.aggregate),
        "record": (record_ns, defaults.record),
    }
    result = {
        "tuples": n,
        "repeat": repeat,
        "baseline": "box",
        "steps": {
            name: {"ns": ns, "operations_measured": ns / op_ns, "operations_default": default}
            for name, (ns, default) in steps.items()
        },
        "records": n_records,
        "cpu_of_one_core": 1e9 / op_ns,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"cpu: {n:,} tuples of 3 attributes, best of {repeat} warm runs; baseline: one box test")
    print(f"{'step':<11} {'ns':>9} {'operations here':>16} {'default':>8}")
    for name, (ns, default) in steps.items():
        print(f"{name:<11} {ns:>9.3f} {ns / op_ns:>16.2f} {default:>8}")
    print(f"one core of this machine: cpu = {1e9 / op_ns:,.0f} operations/s (one operation = {op_ns:.3f} ns)")
    return 0
