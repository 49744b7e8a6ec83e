"""Predicate evaluation throughput, Kuntschke & Kemper section 6.3 (Figures 16-18, Table 8).

Items are uniform in [0, 100]^d.  A predicate of ``n`` closed boxes covers a cube whose volume is the
selectivity: ``n * (1 - overlap)`` boxes tile it disjointly (k-d splits), the others lie inside it with
normally distributed centres, so the exact selectivity is the cube's volume.  SE, IE and IE+SC are called
from Python once per item (each call one run of their compiled per-item kernel) and are timed on a sample
(``--sample`` items); the batch methods on all items (``IE-batch``: IE's kernel over the whole batch).
Every method's matches are counted on the sample, and must agree.  ``bench paper`` times SE, IE and IE+SC
inside their kernels, without the per-call cost.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

PER_ITEM = ("SE", "IE", "IE+SC")
BATCH = ("IE-batch", "SE-numpy", "bitmap-numpy", "bitmap")
SWEEPS = {
    "dims": ("dims", [1, 2, 3, 4, 6, 8, 10]),
    "size": ("boxes_n", [10, 50, 100, 500, 1000, 5000]),
    "selectivity": ("selectivity", [0.01, 0.1, 0.25, 0.5, 0.75, 1.0]),
    "overlap": ("overlap", [0.0, 0.15, 0.25, 0.3, 0.5]),
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dims", type=int, default=3)
    parser.add_argument("--boxes-n", type=int, default=100, help="subpredicates in the predicate")
    parser.add_argument("--selectivity", type=float, default=0.01)
    parser.add_argument("--overlap", type=float, default=0.5)
    parser.add_argument("--items", default="1000000", help="number of uniform items, or a .npy file (N, d)")
    parser.add_argument("--items-file", default=None, help="a .npy file of items (N, d), same as --items FILE")
    parser.add_argument("--boxes", default=None, help="a .npy file (n, 2, d) of closed lower/upper corners")
    parser.add_argument("--sample", type=int, default=20000, help="items for the per-item methods")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sweep", choices=[*SWEEPS, "table8"], default=None)


def generate_boxes(rng: np.random.Generator, dims: int, n: int, selectivity: float, overlap: float) -> np.ndarray:
    """``(n, 2, dims)`` closed boxes whose union is a cube of volume ``selectivity`` of [0, 100]^dims."""
    side = 100.0 * selectivity ** (1.0 / dims)
    low = rng.uniform(0.0, 100.0 - side, dims)
    cover = max(1, min(n, round(n * (1.0 - overlap))))
    pieces = [(low, low + side)]
    while len(pieces) < cover:
        k_big = max(range(len(pieces)), key=lambda i: (np.prod(pieces[i][1] - pieces[i][0]), -i))
        lo, hi = pieces.pop(k_big)
        k = int(np.argmax(hi - lo))
        cut = lo[k] + (hi[k] - lo[k]) * rng.uniform(0.2, 0.8)
        upper, lower = hi.copy(), lo.copy()
        upper[k], lower[k] = cut, cut
        pieces += [(lo, upper), (lower, hi)]
    for _ in range(n - cover):
        centre = np.clip(rng.normal(low + side / 2, side / 6), low, low + side)
        half = rng.uniform(0.0, side / 4, dims)
        pieces.append((np.maximum(centre - half, low), np.minimum(centre + half, low + side)))
    return np.array([[lo, hi] for lo, hi in pieces])


def predicate_of(boxes: np.ndarray):
    from matcher import Box, Interval, Predicate

    dims = [f"x{k}" for k in range(boxes.shape[2])]
    return Predicate(
        Box({d: Interval.closed(float(lo[k]), float(hi[k])) for k, d in enumerate(dims)}) for lo, hi in boxes
    )


def _load(path: str, ndim: int, what: str) -> np.ndarray:
    from topologies.errors import InputError

    try:
        array = np.load(path)
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read {what}: {err}") from err
    if array.ndim != ndim or not np.issubdtype(array.dtype, np.number):
        raise InputError(f"{path}: {what} must be a numeric array with {ndim} axes, got shape {array.shape}")
    return array.astype(np.float64)


def measure(predicate, items: np.ndarray, sample: int) -> dict:
    """Throughput and sample matches of every evaluator on ``items`` (N, d)."""
    from matcher.evaluation import EVALUATORS

    dims = [f"x{k}" for k in range(items.shape[1])]
    every = {d: np.ascontiguousarray(items[:, k]) for k, d in enumerate(dims)}
    few = {d: c[:sample] for d, c in every.items()}
    methods = {}
    for name in (*PER_ITEM, *BATCH):
        started = time.perf_counter()
        evaluator = EVALUATORS["IE" if name == "IE-batch" else name](predicate)
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        if name in PER_ITEM:
            rows = [dict(zip(dims, row, strict=True)) for row in items[:sample].tolist()]
            evaluator.evaluate(rows[0])  # compiles (or loads) the kernel outside the timing
            started = time.perf_counter()
            matches = sum(evaluator.evaluate(row) for row in rows)
        else:
            matches = int(evaluator.evaluate_batch(few).sum())
        first_s = time.perf_counter() - started
        row = {"matches": matches, "build_s": build_s}
        if name in PER_ITEM:
            row |= {"items_per_s": len(few[dims[0]]) / first_s, "timed_items": len(few[dims[0]])}
        else:
            started = time.perf_counter()
            row["matches_all"] = int(evaluator.evaluate_batch(every).sum())
            seconds = time.perf_counter() - started
            row |= {"items_per_s": len(items) / seconds, "timed_items": len(items), "first_call_s": first_s}
        methods[name] = row
    return methods


def _table(params: dict, methods: dict) -> str:
    base = methods["SE"]["items_per_s"]
    lines = [f"{'method':<14}{'items/s':>14}{'vs SE':>10}{'timed items':>13}{'matches':>9}"]
    for name, row in methods.items():
        lines.append(
            f"{name:<14}{row['items_per_s']:>14,.0f}{row['items_per_s'] / base:>9.1f}x"
            f"{row['timed_items']:>13,}{row['matches']:>9}"
        )
    agree = len({row["matches"] for row in methods.values()}) == 1
    lines.append(f"matches on the first {params['sample']} items agree across methods: {agree}")
    return "\n".join(lines)


def _case(args: argparse.Namespace, **changes) -> tuple[dict, dict]:
    params = {
        "dims": args.dims,
        "boxes_n": args.boxes_n,
        "selectivity": args.selectivity,
        "overlap": args.overlap,
        "seed": args.seed,
    } | changes
    rng = np.random.default_rng(params["seed"])
    boxes = _load(args.boxes, 3, "boxes") if args.boxes else None
    if boxes is None:
        boxes = generate_boxes(rng, params["dims"], params["boxes_n"], params["selectivity"], params["overlap"])
    items_path = args.items_file or (args.items if not str(args.items).isdigit() else None)
    uniform = rng.uniform(0.0, 100.0, (int(args.items), boxes.shape[2])) if not items_path else None
    items = _load(items_path, 2, "items") if items_path else uniform
    if items.shape[1] != boxes.shape[2]:
        from topologies.errors import InputError

        raise InputError(f"items have {items.shape[1]} dimensions, boxes {boxes.shape[2]}")
    params |= {
        "dims": boxes.shape[2],
        "boxes_n": len(boxes),
        "items": len(items),
        "sample": min(args.sample, len(items)),
    }
    return params, measure(predicate_of(boxes), items, params["sample"])


def main(args: argparse.Namespace) -> int:
    if args.sweep is None:
        params, methods = _case(args)
        if args.json:
            print(json.dumps({"params": params, "methods": methods}))
        else:
            print("parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()))
            print(_table(params, methods))
        return 0
    if args.sweep == "table8":
        cases = [{"selectivity": s, "overlap": o} for s in (0.1, 0.75) for o in (0.0, 0.15, 0.25, 0.3, 0.5)]
    else:
        key, values = SWEEPS[args.sweep]
        cases = [{key: v} for v in values]
    results = [_case(args, **case) for case in cases]
    if args.json:
        print(json.dumps({"sweep": args.sweep, "cases": [{"params": p, "methods": m} for p, m in results]}))
        return 0
    names = list(results[0][1])
    print(f"sweep {args.sweep}: throughput relative to SE (SE = 100), items/s of SE in the last column")
    print(f"{'case':<28}" + "".join(f"{n:>14}" for n in names) + f"{'SE items/s':>14}")
    for params, methods in results:
        case = ", ".join(f"{k}={params[k]}" for k in cases[0])
        base = methods["SE"]["items_per_s"]
        cells = "".join(f"{100 * methods[n]['items_per_s'] / base:>14.0f}" for n in names)
        print(f"{case:<28}{cells}{base:>14,.0f}")
    return 0
