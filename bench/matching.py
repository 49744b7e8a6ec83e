"""Predicate matching benchmark (Kuntschke & Kemper, section 6.2): time per pair and matches found, per algorithm.

Default: 60 query x 20 stream predicates (1200 pairs), 6 dimensions, 2 boxes per query predicate and 20 per
stream predicate; every bound is one of 21 values evenly spread over 0..100, drawn normally (queries) or
uniformly (streams), every interval finite and closed.  ``--sweep`` repeats it over one parameter (Figures
9-15), ``--count`` is the matches-without-relaxation test (3 possibly unbounded dimensions, 3 vs 30
boxes) and ``--selectivity`` the Table 7 chain.  Times are printed as a ratio to HCR measured in the same
run; ``bruteforce_matches`` counts the pairs whose implication truly holds, decided by a plain cell sweep
independent of the matcher's kernel.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

INF = float("inf")

SWEEPS = {
    "dims": ("dims", (2, 4, 6, 8, 10)),
    "query": ("query_size", (1, 2, 3, 4, 5)),
    "stream": ("stream_size", (10, 20, 30, 40, 50)),
    "large": ("stream_size", (10, 50, 100, 200, 500)),
}
"""Sweep name -> (parameter varied, default points)."""


def configure(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--sweep", choices=sorted(SWEEPS), help="vary one parameter (Figures 9-15)")
    mode.add_argument("--count", action="store_true", help="matches found without relaxation, 3 unbounded dims")
    mode.add_argument("--selectivity", action="store_true", help="Table 7: selectivity of a chain of relaxations")
    parser.add_argument("--points", default=None, help="comma-separated sweep values (default: the paper's)")
    parser.add_argument("--algorithms", default=None, help="comma-separated MATCHERS keys (default: all)")
    parser.add_argument("--pairs-query", type=int, default=60, help="number of query predicates")
    parser.add_argument("--pairs-stream", type=int, default=20, help="number of stream predicates")
    parser.add_argument("--dims", type=int, default=6, help="dimensions of the data space")
    parser.add_argument("--query-size", type=int, default=2, help="boxes per query predicate")
    parser.add_argument("--stream-size", type=int, default=20, help="boxes per stream predicate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="timing rounds per algorithm (best is kept)")


def main(args: argparse.Namespace) -> int:
    from matcher.matching import MATCHERS
    from topologies.errors import InputError

    names = list(MATCHERS) if args.algorithms is None else [a.strip() for a in args.algorithms.split(",")]
    unknown = [n for n in names if n not in MATCHERS]
    if unknown:
        raise InputError(f"--algorithms: unknown matcher {unknown[0]!r} (known: {', '.join(MATCHERS)})")
    for flag in ("pairs_query", "pairs_stream", "dims", "query_size", "stream_size", "repeat"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')}: must be at least 1, got {getattr(args, flag)}")
    if args.selectivity:
        return _selectivity(args)
    if args.count:
        setting = {**_setting(args), "dims": 3, "query_size": 3, "stream_size": 30, "unbounded": True}
        return _single(args, setting, names)
    if args.sweep:
        return _sweep(args, names)
    return _single(args, _setting(args), names)


def _setting(args: argparse.Namespace) -> dict:
    return {
        "pairs_query": args.pairs_query,
        "pairs_stream": args.pairs_stream,
        "dims": args.dims,
        "query_size": args.query_size,
        "stream_size": args.stream_size,
        "distinct_values": 21,
        "unbounded": False,
        "seed": args.seed,
    }


# --- workload ---------------------------------------------------------------------------------------------


def random_predicates(rng, count: int, size: int, dims: int, distinct: int, normal: bool, unbounded: bool) -> list:
    """``count`` predicates of ``size`` boxes over dimensions d00, d01, ...; each interval is closed with
    two distinct bounds among ``distinct`` values evenly spread over 0..100, their positions drawn normally
    around the middle (sigma: a sixth of the values) or uniformly.  With ``unbounded``, each box constrains
    a uniformly chosen non-empty subset of the dimensions and leaves the others unbounded."""
    import numpy as np

    from matcher.predicate import Box, Interval, Predicate

    values = np.linspace(0.0, 100.0, distinct)
    names = [f"d{k:02d}" for k in range(dims)]

    def positions() -> tuple[int, int]:
        while True:
            if normal:
                drawn = np.clip(np.rint(rng.normal((distinct - 1) / 2, distinct / 6, 2)), 0, distinct - 1)
            else:
                drawn = rng.integers(0, distinct, 2)
            lo, hi = sorted(int(x) for x in drawn)
            if lo != hi:
                return lo, hi

    def box() -> Box:
        chosen = names
        if unbounded:
            mask = int(rng.integers(1, 2**dims))
            chosen = [n for k, n in enumerate(names) if mask >> k & 1]
        intervals = {}
        for name in chosen:
            lo, hi = positions()
            intervals[name] = Interval.closed(float(values[lo]), float(values[hi]))
        return Box(intervals)

    return [Predicate([box() for _ in range(size)]) for _ in range(count)]


def make_pairs(setting: dict) -> list:
    """(stream, query) pairs: every query predicate with every stream predicate."""
    import numpy as np

    rng = np.random.default_rng(setting["seed"])
    common = (setting["dims"], setting["distinct_values"])
    queries = random_predicates(rng, setting["pairs_query"], setting["query_size"], *common, True, setting["unbounded"])
    streams = random_predicates(
        rng, setting["pairs_stream"], setting["stream_size"], *common, False, setting["unbounded"]
    )
    return [(p, q) for q in queries for p in streams]


# --- the independent reference --------------------------------------------------------------------------


def implies_by_sweep(q, p) -> bool:
    """``q => p`` decided without the matcher's kernel: a sweep over the dimensions of each box of ``q``.

    The bounds of ``p``'s boxes cut a dimension into points and open gaps on which every box is either
    present or absent; for each such cell (tested at one representative value) the boxes present are
    carried to the next dimension, and a cell with none left is a point of ``q`` outside ``p``.
    """
    dims = sorted(set(q.dims) | set(p.dims))
    return all(_covered({d: box.get(d) for d in dims}, list(p.boxes), dims, 0) for box in q.boxes)


def _covered(region: dict, candidates: list, dims: list, k: int) -> bool:
    if any(all(c.get(d).covers(region[d]) for d in dims[k:]) for c in candidates):
        return True
    if k == len(dims):
        return False
    dim, span = dims[k], region[dims[k]]
    for rep in _representatives(span, [c.get(dim) for c in candidates]):
        present = [c for c in candidates if c.get(dim).contains_value(rep)]
        if not present or not _covered(region, present, dims, k + 1):
            return False
    return True


def _representatives(span, intervals: list) -> list[float]:
    """One value per cell of ``span`` cut by the ends of ``intervals``."""
    import math

    cuts = sorted({x for iv in [span, *intervals] for x in (iv.lo, iv.hi) if math.isfinite(x)})
    if not cuts:
        candidates = [0.0]
    else:
        candidates = [cuts[0] - 1.0, cuts[-1] + 1.0, *cuts]
        candidates += [(a + b) / 2 for a, b in itertools.pairwise(cuts)]
    return [x for x in sorted(candidates) if span.contains_value(x)]


# --- measurements ----------------------------------------------------------------------------------------


def _measure(pairs: list, names: list[str], repeat: int) -> dict:
    """Per algorithm: CPU milliseconds per pair (best of ``repeat`` rounds; CPU time rather than wall time
    because the machine may be shared) and the pairs it reports as matching without relaxation."""
    from matcher.matching import MATCHERS

    results = {}
    for name in names:
        matcher = MATCHERS[name]
        best = INF
        for _ in range(repeat):
            start = time.process_time()
            verdicts = [matcher(p, q)[0] for p, q in pairs]
            best = min(best, time.process_time() - start)
        results[name] = {"ms_per_pair": 1000.0 * best / len(pairs), "matches": sum(verdicts)}
    return results


def _single(args: argparse.Namespace, setting: dict, names: list[str]) -> int:
    pairs = make_pairs(setting)
    truth = sum(implies_by_sweep(q, p) for p, q in pairs)
    results = _measure(pairs, names, args.repeat)
    if args.json:
        print(json.dumps({"pairs": len(pairs), "bruteforce_matches": truth, "setting": setting, "algorithms": results}))
        return 0
    print(_describe(setting))
    print(f"pairs: {len(pairs)}   pairs where the query truly implies the stream: {truth}")
    _print_table(results)
    return 0


def _sweep(args: argparse.Namespace, names: list[str]) -> int:
    from topologies.errors import InputError

    parameter, points = SWEEPS[args.sweep]
    if args.points:
        try:
            points = tuple(int(x) for x in args.points.split(","))
        except ValueError:
            raise InputError(f"--points: expected comma-separated integers, got {args.points!r}") from None
    if args.sweep == "large" and args.algorithms is None:
        # Kuntschke & Kemper's Figure 15 leaves EM-BFS out: its pieces outgrow memory beyond ~30 stream boxes
        names = [n for n in names if not n.startswith("EM-BFS")]
    rows = []
    for point in points:
        setting = {**_setting(args), parameter: point}
        rows.append({parameter: point, "algorithms": _measure(make_pairs(setting), names, args.repeat)})
    if args.json:
        print(json.dumps({"sweep": args.sweep, "parameter": parameter, "setting": _setting(args), "points": rows}))
        return 0
    print(_describe(_setting(args)) + f"   sweep: {parameter}")
    print(f"CPU ms per pair (ratio to HCR) for {parameter} =")
    print(f"{'algorithm':>10} " + " ".join(f"{point:>16}" for point in points))
    for n in names:
        cells = []
        for row in rows:
            ms = row["algorithms"][n]["ms_per_pair"]
            cells.append(f"{ms:8.3f} ({_ratio(ms, row['algorithms'].get('HCR'))})".rjust(16))
        print(f"{n:>10} " + " ".join(cells))
    return 0


TABLE7_ALGORITHMS = ("HSR", "HSR+QC", "HCR", "EM-DFS+QC")


def selectivity_chain(seed: int, dims: int, stream_size: int, query_size: int) -> dict:
    """Table 7: one stream predicate (4 distinct bound values) matched in turn with 4 query predicates
    (6 distinct values), each result feeding the next match; exact selectivity over uniform data.

    Returns the stream predicate's selectivity and, per algorithm, the selectivities of ``p_A .. p_D`` and
    their numbers of boxes."""
    import numpy as np

    from matcher.matching import MATCHERS
    from matcher.selectivity import volume

    rng = np.random.default_rng(seed)
    stream = random_predicates(rng, 1, stream_size, dims, 4, False, False)[0]
    queries = random_predicates(rng, 4, query_size, dims, 6, True, False)
    bounds = {f"d{k:02d}": (0.0, 100.0) for k in range(dims)}
    chains, boxes = {}, {}
    for name in TABLE7_ALGORITHMS:
        current, chain, sizes = stream, [], []
        for q in queries:
            current = MATCHERS[name](current, q)[1]
            chain.append(volume(current, bounds))
            sizes.append(len(current.boxes))
        chains[name], boxes[name] = chain, sizes
    return {"stream_selectivity": volume(stream, bounds), "selectivity": chains, "boxes": boxes}


def _selectivity(args: argparse.Namespace) -> int:
    result = selectivity_chain(args.seed, args.dims, args.stream_size, args.query_size)
    chains, boxes, base = result["selectivity"], result["boxes"], result["stream_selectivity"]
    dims, algorithms = args.dims, TABLE7_ALGORITHMS
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"dims={dims} stream boxes={args.stream_size} query boxes={args.query_size} seed={args.seed}")
    print(f"selectivity over uniform [0, 100]^{dims} (%, exact); stream predicate alone: {100 * base:.2f}")
    print(f"{'algorithm':>10} " + " ".join(f"{'p' + c:>14}" for c in "ABCD"))
    for name in algorithms:
        cells = [f"{100 * s:8.2f} ({n:>3})" for s, n in zip(chains[name], boxes[name], strict=True)]
        print(f"{name:>10} " + " ".join(c.rjust(14) for c in cells))
    print("(in parentheses: boxes in the relaxed predicate)")
    return 0


def _describe(setting: dict) -> str:
    return (
        f"query predicates={setting['pairs_query']} stream predicates={setting['pairs_stream']} "
        f"dims={setting['dims']} query boxes={setting['query_size']} stream boxes={setting['stream_size']} "
        f"values={setting['distinct_values']} unbounded={setting['unbounded']} seed={setting['seed']}"
    )


def _ratio(ms: float, hcr: dict | None) -> str:
    if not hcr or hcr["ms_per_pair"] == 0:
        return "  -  "
    return f"{ms / hcr['ms_per_pair']:5.2f}"


def _print_table(results: dict) -> None:
    print(f"{'algorithm':>10} {'CPU ms/pair':>12} {'x HCR':>7} {'matches':>8}")
    for name, row in results.items():
        ratio = _ratio(row["ms_per_pair"], results.get("HCR"))
        print(f"{name:>10} {row['ms_per_pair']:12.4f} {ratio:>7} {row['matches']:>8}")
