"""The shared-filter engines of :mod:`matcher.filters` on the workloads of the papers they come from.

Workloads: query sets with the counts of Lee & Lee's Table 2 (attribute selection constructs, KIPS 2007) over
their Table 1 distributions and drifts between them, CACQ's random queries (Madden et al.), and disjunctions
of boxes as in Kuntschke & Kemper (TUM-I0615).  For each workload every engine matches the same tuples in the
same batches: the region-bitmap matcher ``MultiMatcher`` (also as ``multi-serial``, its serial kernel on whole
batches, as the adaptive engine calls it), the CACQ grouped filter, ASC as the adaptive matcher configures it
(``asc``: macro order, long period), ASC with the papers' settings, macro and hybrid sequence (optimal
per-window base sequence, and the paper's greedy one as ``asc-hybrid-greedy``), ASC with the best fixed order
(found offline by exhaustive search over the whole workload), and the cost-based ``AdaptiveMultiMatcher``.
The engines take turns on every batch, so that the machine's load falls on all of them alike; only their calls
are timed, and each output is checked against a reference matched once beforehand, then dropped.  Reported per
engine: tuples/s, evaluations per tuple in the unit of its paper (box-bound comparisons, grouped filters,
ASCs), the adaptive choice's ratio to the best engine measured in this run, and the hybrid sequence's ASCs per
tuple relative to the best fixed order.  A separate table runs A-Greedy, Sweep and Independent on the
correlated filters of Babu's thesis (Table 4.1) against the optimal order.

``--record [PATH]`` also writes the results with their parameters and the machine's facts to
``bench/results/filters.json`` (or PATH) and a Markdown summary beside it (``.md``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.record import RESULTS, load_average, machine_facts, write_record

RECORD = RESULTS / "filters.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tuples", type=int, default=160_000, help="tuples per workload (default 160000)")
    parser.add_argument("--batch", type=int, default=8_192, help="tuples per match() call (default 8192)")
    parser.add_argument("--drift-every", type=int, default=40_000, help="tuples between distribution changes")
    parser.add_argument("--period", type=int, default=10_000, help="ASC re-computation period lambda")
    parser.add_argument("--threshold", type=float, default=0.0, help="ASC rearrangement threshold mu")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--adaptive-tuples", type=int, default=640_000, help="stream length for adaptive vs best (tiled workload)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="repetitions (engines take turns on every batch); tuples/s is their median",
    )
    parser.add_argument("--workload", action="append", default=None, help="run only this workload (repeatable)")
    parser.add_argument(
        "--record",
        nargs="?",
        const=str(RECORD),
        default=None,
        metavar="PATH",
        help="also write the results, parameters and machine facts to PATH (default bench/results/filters.json)"
        " and a Markdown summary beside it",
    )


# -- workloads ----------------------------------------------------------------------------------------------
def _table2_queries(rng, queries: int, p_attrs: int, predicates: int, cover_sets: int, cover_size: int):
    """A query set with the counts of Lee & Lee's Table 2 (KIPS 2007): conjunctive queries over 20 attributes
    valued 0-99.

    The minimum attribute cover set(s) are forced: queries are split into ``cover_size`` groups and each
    cover set gives group g its g-th attribute.
    """
    import numpy as np

    from matcher import Box, Interval, Predicate

    names = [f"a{i}" for i in range(20)]
    chosen = sorted(rng.choice(20, size=p_attrs, replace=False))
    attrs = [names[i] for i in chosen]
    covers = [attrs[c * cover_size : (c + 1) * cover_size] for c in range(cover_sets)]
    others = attrs[cover_sets * cover_size :]
    counts = np.full(queries, predicates // queries)
    counts[rng.choice(queries, predicates % queries, replace=False)] += 1
    labelled = []
    for q in range(queries):
        group = q % cover_size
        used = [cover[group] for cover in covers]
        budget = int(counts[q])
        items = []
        pool = [a for a in others if a not in used]
        rng.shuffle(pool)
        targets = used + pool
        for attr in targets:
            if budget <= 0:
                break
            if budget >= 2 and rng.random() < 0.3:
                lo = int(rng.integers(0, 85))
                items.append((attr, Interval.closed(lo, lo + int(rng.integers(5, 15)))))
                budget -= 2
                continue
            op = int(rng.integers(5))
            # selective constants: > and >= near the top of the domain, < and <= near the bottom
            c = float(
                rng.integers(0, 100) if op == 0 else rng.integers(60, 100) if op in (1, 3) else rng.integers(0, 40)
            )
            iv = [Interval.point(c), Interval.above(c), Interval.below(c)][min(op, 2)]
            if op == 3:
                iv = Interval.above(c, inclusive=True)
            elif op == 4:
                iv = Interval.below(c, inclusive=True)
            items.append((attr, iv))
            budget -= 1
        labelled.append((f"q{q}", Predicate([Box(items)])))
    return labelled, names


def _cacq_queries(rng, queries: int):
    """CACQ's random queries (Madden et al., section 3.2.8): each of a..e gets a predicate with probability
    1/2, its operator one of < > <= >=."""
    from matcher import Box, Interval, Predicate

    names = list("abcde")
    labelled = []
    while len(labelled) < queries:
        items = []
        for attr in names:
            if rng.random() < 0.5:
                c, op = float(rng.integers(0, 100)), int(rng.integers(4))
                items.append(
                    (attr, Interval.above(c, inclusive=op >= 2) if op % 2 else Interval.below(c, inclusive=op >= 2))
                )
        if items:
            labelled.append((f"q{len(labelled)}", Predicate([Box(items)])))
    return labelled, names


def _box_queries(rng, queries: int):
    """Disjunctive predicates as in Kuntschke & Kemper: 1-3 boxes over 2-4 of 6 real-valued dimensions in
    [0, 100)."""
    import numpy as np

    from matcher import Box, Interval, Predicate

    names = [f"x{i}" for i in range(6)]
    labelled = []
    for q in range(queries):
        boxes = []
        for _ in range(int(rng.integers(1, 4))):
            dims = rng.choice(6, size=int(rng.integers(2, 5)), replace=False)
            items = []
            for k in sorted(dims):
                lo = float(np.round(rng.uniform(0, 90), 2))
                items.append((names[k], Interval.closed(lo, lo + float(np.round(rng.uniform(5, 40), 2)))))
            boxes.append(Box(items))
        labelled.append((f"s{q}", Predicate(boxes)))
    return labelled, names


def _data(rng, names, n: int, kind: str, drift_every: int, integer: bool = True) -> dict:
    """The distributions of Lee & Lee's Table 1 (uniform, normal-like, pulse) and drifts between them."""
    import numpy as np

    def block(kind: str, size: int) -> np.ndarray:
        if kind == "uniform":
            x = rng.uniform(0, 100, (size, len(names)))
        elif kind == "normal":
            x = np.clip(rng.normal(50, 15, (size, len(names))), 0, 99.999)
        elif kind == "low":
            x = rng.uniform(0, 50, (size, len(names)))
        else:
            x = rng.uniform(50, 100, (size, len(names)))
        return np.floor(x) if integer else x

    if kind == "pulse":
        parts = [block("low", n // 2), block("high", n - n // 2)]
    elif kind in ("drift", "pulse-drift"):
        cycle = ("uniform", "normal") if kind == "drift" else ("low", "high")
        parts = [block(cycle[b % 2], min(drift_every, n - s)) for b, s in enumerate(range(0, n, drift_every))]
    else:
        parts = [block(kind, n)]
    x = np.concatenate(parts)
    return {name: np.ascontiguousarray(x[:, k]) for k, name in enumerate(names)}


def _workloads(args):
    import numpy as np

    rng = np.random.default_rng(args.seed)
    fig6 = _table2_queries(rng, 50, 10, 204, 1, 3)
    fig7 = _table2_queries(rng, 30, 7, 104, 2, 2)
    fig8 = _table2_queries(rng, 40, 20, 236, 1, 5)
    cacq20, cacq200 = _cacq_queries(rng, 20), _cacq_queries(rng, 200)
    boxes = _box_queries(rng, 100)
    n, every = args.tuples, args.drift_every
    return {
        "table2-50q/D1": (fig6, lambda: _data(rng, fig6[1], n, "uniform", every)),
        "table2-50q/D2": (fig6, lambda: _data(rng, fig6[1], n, "normal", every)),
        "table2-50q/D3": (fig6, lambda: _data(rng, fig6[1], n, "pulse", every)),
        "table2-50q/drift": (fig6, lambda: _data(rng, fig6[1], n, "drift", every)),
        "table2-30q/drift": (fig7, lambda: _data(rng, fig7[1], n, "drift", every)),
        "table2-30q/pulse-drift": (fig7, lambda: _data(rng, fig7[1], n, "pulse-drift", every)),
        "table2-40q/D2": (fig8, lambda: _data(rng, fig8[1], n, "normal", every)),
        "cacq-20q": (cacq20, lambda: _data(rng, cacq20[1], n, "uniform", every)),
        "cacq-200q": (cacq200, lambda: _data(rng, cacq200[1], n, "uniform", every)),
        "boxes-100s": (boxes, lambda: _data(rng, boxes[1], n, "uniform", every, integer=False)),
    }


# -- measurement --------------------------------------------------------------------------------------------
def _matched(engine, columns, batch: int):
    """``engine``'s output over ``columns`` in batches of ``batch`` tuples, untimed: the reference."""
    import numpy as np

    n = len(next(iter(columns.values())))
    return np.concatenate([engine.match({k: v[s : s + batch] for k, v in columns.items()}) for s in range(0, n, batch)])


def _interleaved(engines: dict, columns, batch: int, reference, seed: int) -> dict[str, tuple[float, float]]:
    """Tuples per wall and per CPU second of each engine's ``match``, the engines taking turns on every batch.

    Every batch is matched by every engine in turn, so that a change in the machine's load (another process,
    a busy core, the clock's frequency) falls on all the engines alike instead of on whichever ran during it.
    The order of the turns is drawn afresh for every batch (from ``seed``): a call depends on the call before
    it (the thread pool's call takes longer after a long serial call than after another pool call), and a
    fixed rotation gave some engines the slow predecessors more often than others.

    Only the engines' calls are timed.  Each output is compared with ``reference`` (the same rows) and then
    dropped, as a super-peer drops a batch's matrix once it has routed it.  Keeping every engine's outputs
    (32 MB per 640,000-tuple run) made the timings depend on the allocator's state: once a probe freed a
    large temporary, glibc served the later output matrices differently and the thread-pool kernel's calls
    took 15 % longer for the rest of the run.  Raises AssertionError when an output differs from the
    reference.
    """
    import numpy as np

    labels = list(engines)
    n = len(next(iter(columns.values())))
    seconds = dict.fromkeys(labels, 0.0)
    cpu_seconds = dict.fromkeys(labels, 0.0)
    turns = np.random.default_rng(seed)
    for start in range(0, n, batch):
        part = {k: v[start : start + batch] for k, v in columns.items()}
        expected = reference[start : start + batch]
        for j in turns.permutation(len(labels)):
            label = labels[j]
            began, cpu = time.perf_counter(), time.process_time()
            out = engines[label].match(part)
            seconds[label] += time.perf_counter() - began
            cpu_seconds[label] += time.process_time() - cpu
            if not np.array_equal(out, expected):
                raise AssertionError(f"{label} disagrees with the reference on rows {start}-{start + len(out)}")
    return {label: (n / seconds[label], n / max(cpu_seconds[label], 1e-9)) for label in labels}


class _Serial:
    """The region-bitmap engine on its serial kernel over whole batches, as the adaptive matcher calls ``multi``:
    listed as an engine of its own so that the adaptive engine is compared with every engine it can run."""

    def __init__(self, engine):
        self.engine, self.labels = engine, engine.labels

    def match(self, columns):
        return self.engine.match(columns, parallel=False)


def _box_bounds_per_tuple(labelled) -> float:
    return float(sum(len(box.items()) * 2 for _, p in labelled for box in p.boxes))


def _best_fixed_order(labelled, columns, args):
    """The best single fixed ASC order over the WHOLE stream (all drift phases), found offline."""
    import numpy as np

    from matcher.filters.asc import ASCMatcher, fixed_order_costs, local_search_order

    probe = ASCMatcher(labelled, ordering="macro")
    if len(probe.dims) <= 12:
        return fixed_order_costs(probe, columns)[0], "exhaustive", len(probe.dims)
    probe.relearn(np.stack([asc.region(columns[d]) for d, asc in zip(probe.dims, probe.constructs, strict=True)], 1))
    sampled = {k: v[:: max(1, len(v) // 20_000)] for k, v in columns.items()}
    return local_search_order(probe, sampled, probe.order)[0], "local search", len(probe.dims)


def _filter_workload(name, labelled, columns, args) -> dict:
    """Every engine, fresh for each of ``args.repeats`` repetitions over the same stream, taking turns per batch."""
    import numpy as np

    from matcher.filters.adaptive import AdaptiveMultiMatcher
    from matcher.filters.asc import ASCMatcher
    from matcher.filters.candidates import ASC_SETTINGS
    from matcher.filters.grouped import GroupedFilter
    from matcher.filters.multi import MultiMatcher

    best_order, search, p_attributes = _best_fixed_order(labelled, columns, args)
    asc_args = {"period": args.period, "threshold": args.threshold, "seed": args.seed}
    makers = {
        "multi": lambda: MultiMatcher(labelled),
        "multi-serial": lambda: _Serial(MultiMatcher(labelled)),
        "grouped": lambda: GroupedFilter(labelled),
        "asc": lambda: ASCMatcher(labelled, **ASC_SETTINGS),
        "asc-macro": lambda: ASCMatcher(labelled, ordering="macro", **asc_args),
        "asc-hybrid": lambda: ASCMatcher(labelled, ordering="hybrid", **asc_args),
        "asc-hybrid-greedy": lambda: ASCMatcher(labelled, ordering="hybrid", base="greedy", **asc_args),
        "asc-best-fixed": lambda: ASCMatcher(labelled, ordering="fixed", order=best_order),
        "adaptive": lambda: AdaptiveMultiMatcher(labelled),
    }
    rates: dict[str, list[float]] = {label: [] for label in makers}
    cpu_rates: dict[str, list[float]] = {label: [] for label in makers}
    rows, adaptive = {}, []
    reference = _matched(MultiMatcher(labelled), columns, args.batch)  # every timed call is checked against it
    for repetition in range(args.repeats):
        engines = {label: make() for label, make in makers.items()}
        for label, (rate, cpu_rate) in _interleaved(
            engines, columns, args.batch, reference, args.seed + repetition
        ).items():
            rates[label].append(rate)
            cpu_rates[label].append(cpu_rate)
        engine = engines["adaptive"]
        adaptive.append({"history": engine.history, "probed_tuples": engine.probed_tuples})
        if repetition == 0:
            for label, engine in engines.items():
                per_tuple = getattr(engine, "evaluations_per_tuple", float("nan"))
                unit = getattr(engine, "unit", "")
                if label.startswith("multi"):
                    per_tuple, unit = _box_bounds_per_tuple(labelled), "bounds"
                rows[label] = {"evals_per_tuple": per_tuple, "unit": unit}
    for label, row in rows.items():
        row["tuples_per_s"] = float(np.median(rates[label]))
        row["tuples_per_cpu_s"] = float(np.median(cpu_rates[label]))
        row["tuples_per_s_runs"] = rates[label]
    rows["adaptive"]["unit"] = "-> " + ",".join(sorted({h[-1][1] for h in (a["history"] for a in adaptive)}))
    # the oracle order needs the whole stream in advance: it is a yardstick, not an online engine
    online = ("multi", "multi-serial", "grouped", "asc", "asc-macro", "asc-hybrid", "asc-hybrid-greedy")
    best = max(online, key=lambda e: rows[e]["tuples_per_s"])
    best_cpu = max(online, key=lambda e: rows[e]["tuples_per_cpu_s"])
    long_run = _adaptive_on_long_stream(labelled, columns, reference, makers, {best, best_cpu}, args)
    fixed = rows["asc-best-fixed"]["evals_per_tuple"]
    return {
        "workload": name,
        "labels": len(labelled),
        "p_attributes": p_attributes,
        "match_rate": float(reference.any(axis=1).mean()),
        "engines": rows,
        "best_engine": best,
        "adaptive_vs_best": rows["adaptive"]["tuples_per_s"] / rows[best]["tuples_per_s"],
        "best_engine_cpu": best_cpu,
        "adaptive_vs_best_cpu": rows["adaptive"]["tuples_per_cpu_s"] / rows[best_cpu]["tuples_per_cpu_s"],
        "adaptive_runs": adaptive,
        "best_fixed_order": list(best_order),
        "best_fixed_search": search,
        "long_stream": long_run,
        "hybrid_vs_best_fixed": rows["asc-hybrid"]["evals_per_tuple"] / fixed,
        "macro_vs_best_fixed": rows["asc-macro"]["evals_per_tuple"] / fixed,
        "hybrid_greedy_vs_best_fixed": rows["asc-hybrid-greedy"]["evals_per_tuple"] / fixed,
    }


def _adaptive_on_long_stream(labelled, columns, reference, makers, best: set[str], args) -> dict:
    """Adaptive vs the best engine(s) on the workload tiled to ``--adaptive-tuples``, turns per batch, median.

    Probing costs a roughly fixed number of tuples per probe, so its share shrinks with the stream length:
    this is the amortised comparison.  Tiling keeps the workload's distribution (and its drift phases).
    """
    import numpy as np

    n = len(next(iter(columns.values())))
    reps = -(-args.adaptive_tuples // n)
    tiled = {k: np.tile(v, reps)[: args.adaptive_tuples] for k, v in columns.items()}
    expected = np.tile(reference, (reps, 1))[: args.adaptive_tuples]
    labels = ["adaptive", *sorted(best)]
    wall: dict[str, list[float]] = {label: [] for label in labels}
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    probed = []
    for repetition in range(args.repeats):
        engines = {label: makers[label]() for label in labels}
        turns = _interleaved(engines, tiled, args.batch, expected, args.seed + repetition)
        for label, (rate, cpu_rate) in turns.items():
            wall[label].append(rate)
            cpu[label].append(cpu_rate)
        probed.append(engines["adaptive"].probed_tuples)
    median = {label: float(np.median(wall[label])) for label in labels}
    median_cpu = {label: float(np.median(cpu[label])) for label in labels}
    return {
        "tuples": len(tiled[next(iter(tiled))]),
        "tuples_per_s": median,
        "tuples_per_cpu_s": median_cpu,
        "adaptive_vs_best": median["adaptive"] / max(median[b] for b in best),
        "adaptive_vs_best_cpu": median_cpu["adaptive"] / max(median_cpu[b] for b in best),
        "probed_tuples": probed,
    }


def _warm_up() -> None:
    """Load numba's compiled kernels once, so that no engine's first timing includes it."""
    import numpy as np

    from matcher import Box, Interval, Predicate
    from matcher.filters.asc import ASCMatcher
    from matcher.filters.grouped import GroupedFilter
    from matcher.filters.multi import MultiMatcher

    labelled = [(f"q{i}", Predicate([Box({"a": Interval.above(float(i))})])) for i in range(8)]
    for engine in (MultiMatcher(labelled), GroupedFilter(labelled), ASCMatcher(labelled, ordering="hybrid")):
        engine.match({"a": np.arange(16, dtype=float)})


def _agreedy_workload(args) -> dict:
    """Babu's thesis, Table 4.1: 8 filters, 50% selectivity, groups of 2 agreeing on 80% of tuples."""
    import numpy as np

    from matcher import Box, Interval
    from matcher.filters.agreedy import PipelinedFilter, optimal_order, order_cost

    rng = np.random.default_rng(args.seed)
    n, filters, copy = args.tuples, 8, np.sqrt(0.6)  # agreement 0.5 + 0.5 copy^2 = 0.8
    columns = {}
    for g in range(0, filters, 2):
        base = rng.random(n) < 0.5
        for f in (g, g + 1):
            columns[f"f{f}"] = np.where(rng.random(n) < copy, base, rng.random(n) < 0.5).astype(np.float64)
    box = Box((f"f{f}", Interval.above(0.5)) for f in range(filters))
    drops = np.stack([columns[dim] <= 0.5 for dim, _ in box.items()], axis=1)
    _, optimum = optimal_order(drops)
    rows = {"optimal": {"evals_per_tuple": optimum, "profile_per_tuple": 0.0, "tuples_per_s": None}}
    for variant in ("agreedy", "sweep", "independent"):
        engine = PipelinedFilter(box, variant=variant, seed=args.seed)
        began = time.perf_counter()
        passed = engine.filter(columns)
        rate = n / (time.perf_counter() - began)
        if not np.array_equal(passed, ~drops.any(axis=1)):
            raise AssertionError(f"A-Greedy variant {variant} filtered wrongly")
        rows[variant] = {
            "evals_per_tuple": engine.evaluations_per_tuple,
            "final_order_cost": order_cost(drops, engine.reoptimizer.order),
            "profile_per_tuple": engine.profile_evaluations / n,
            "tuples_per_s": rate,
        }
    return {
        "workload": "agreedy-correlated-8",
        "engines": rows,
        "agreedy_vs_optimal": rows["agreedy"]["evals_per_tuple"] / optimum,
    }


def main(args: argparse.Namespace) -> int:
    load_before = load_average()
    workloads = _workloads(args)
    chosen = args.workload or list(workloads)
    unknown = [w for w in chosen if w not in workloads and w != "agreedy"]
    from topologies.errors import InputError

    if unknown:
        raise InputError(f"--workload {unknown[0]!r}: expected one of {', '.join([*workloads, 'agreedy'])}")
    if args.repeats < 1 or args.tuples < 1 or args.batch < 1:
        raise InputError(f"--repeats {args.repeats}, --tuples {args.tuples}, --batch {args.batch}: must be positive")
    _warm_up()
    results = [_filter_workload(w, workloads[w][0][0], workloads[w][1](), args) for w in chosen if w in workloads]
    agreedy = _agreedy_workload(args) if args.workload is None or "agreedy" in chosen else None
    parameters = {
        k: getattr(args, k) for k in ("tuples", "batch", "drift_every", "period", "threshold", "seed", "repeats")
    }
    if args.record:
        path = Path(args.record)
        recorded = {**parameters, "adaptive_tuples": args.adaptive_tuples, "workload": chosen}
        write_record(path, "filters", recorded, {"workloads": results, "agreedy": agreedy}, machine_facts(load_before))
        path.with_suffix(".md").write_text(_markdown(json.loads(path.read_text()), path.name))
    if args.json:
        print(json.dumps({"parameters": parameters, "workloads": results, "agreedy": agreedy}))
        return 0
    print("parameters: " + ", ".join(f"{k}={v}" for k, v in parameters.items()))
    for r in results:
        print(
            f"\n{r['workload']}: {r['labels']} labels, {r['p_attributes']} p-attributes,"
            f" match rate {r['match_rate']:.3f}; adaptive/best({r['best_engine']}) = {r['adaptive_vs_best']:.2f} wall,"
            f" adaptive/best({r['best_engine_cpu']}) = {r['adaptive_vs_best_cpu']:.2f} CPU,"
            f" hybrid/best-fixed ASCs = {r['hybrid_vs_best_fixed']:.3f} ({r['best_fixed_search']}),"
            f" macro/best-fixed = {r['macro_vs_best_fixed']:.3f},"
            f" hybrid-greedy (the paper's macro-sequence)/best-fixed = {r['hybrid_greedy_vs_best_fixed']:.3f}"
        )
        long = r["long_stream"]
        print(
            f"  on {long['tuples']:,} tuples: adaptive/best = {long['adaptive_vs_best']:.2f} wall,"
            f" {long['adaptive_vs_best_cpu']:.2f} CPU (probed tuples {long['probed_tuples']})"
        )
        print(f"  {'engine':<16}{'tuples/s':>12}{'tuples/CPU s':>14}{'evals/tuple':>13}  unit")
        for e, row in r["engines"].items():
            print(
                f"  {e:<16}{row['tuples_per_s']:>12,.0f}{row['tuples_per_cpu_s']:>14,.0f}"
                f"{row['evals_per_tuple']:>13.3f}  {row['unit']}"
            )
    if agreedy:
        print(f"\n{agreedy['workload']}: A-Greedy / optimal filter evaluations = {agreedy['agreedy_vs_optimal']:.3f}")
        print(f"  {'ordering':<14}{'evals/tuple':>12}{'profiling':>11}{'tuples/s':>12}")
        for e, row in agreedy["engines"].items():
            rate = f"{row['tuples_per_s']:,.0f}" if row["tuples_per_s"] else "offline"
            print(f"  {e:<14}{row['evals_per_tuple']:>12.3f}{row['profile_per_tuple']:>11.3f}{rate:>12}")
    return 0


def _markdown(record: dict, name: str) -> str:
    """The record ``name`` as a page: where and how it was measured, one row per workload, A-Greedy's line."""
    machine, parameters = record["machine"], record["parameters"]
    lines = [
        f"# `bench filters`, recorded {record['recorded_utc']}",
        "",
        f"`{record['command']}` at commit `{record['commit']}`, written by the benchmark (`--record`); every"
        f" figure of the run is in `{name}` beside this page.",
        "",
        f"Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), numba {machine['numba']} with"
        f" {machine['numba_threads']} threads, numpy {machine['numpy']}, Python {machine['python']};"
        f" load average {machine['load_average_before']} before the run, {machine['load_average_after']} after.",
        "",
        "Parameters: " + ", ".join(f"{k}={v}" for k, v in parameters.items()) + ".",
        "",
        "Tuples per wall second (median of the repetitions), the engines taking turns on every batch; ASCs per"
        " tuple and the adaptive choices' ratios as the benchmark prints them.",
        "",
    ]
    engines = ["multi", "multi-serial", "grouped", "asc", "asc-macro", "asc-hybrid", "asc-best-fixed", "adaptive"]
    header = ["workload", "match rate", *engines, "best", "adaptive/best wall (CPU)", "long stream", "hybrid/fixed"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in record["workloads"]:
        long = r["long_stream"]
        rates = [f"{r['engines'][e]['tuples_per_s'] / 1e3:,.0f} k" for e in engines]
        cells = [
            r["workload"],
            f"{r['match_rate']:.3f}",
            *rates,
            r["best_engine"],
            f"{r['adaptive_vs_best']:.2f} ({r['adaptive_vs_best_cpu']:.2f})",
            f"{long['adaptive_vs_best']:.2f} ({long['adaptive_vs_best_cpu']:.2f}) over {long['tuples']:,}",
            f"{r['hybrid_vs_best_fixed']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    agreedy = record["agreedy"]
    if agreedy:
        rows = agreedy["engines"]
        lines += [
            "",
            f"A-Greedy on correlated filters: {rows['agreedy']['evals_per_tuple']:.3f} filter evaluations per tuple"
            f" against the optimal order's {rows['optimal']['evals_per_tuple']:.3f}"
            f" ({agreedy['agreedy_vs_optimal']:.3f}x); Sweep {rows['sweep']['evals_per_tuple']:.3f},"
            f" Independent {rows['independent']['evals_per_tuple']:.3f}.",
        ]
    return "\n".join(lines) + "\n"
