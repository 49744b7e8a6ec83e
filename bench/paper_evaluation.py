"""The evaluation experiments of Kuntschke & Kemper's section 6.3, measured for ``bench paper``.

Items are uniform in [0, 100]^d; a predicate of ``n`` closed boxes covers a cube whose volume is the
selectivity, half of the boxes tiling it and half inside it (overlap 50 %), as ``bench evaluation``
generates them.  Defaults: 3 dimensions, 100 boxes, 1 % selectivity, 1,000,000 items.  SE, IE and IE+SC run
per item in compiled kernels (:mod:`matcher.evaluation`), IE and IE+SC on the R*-tree the paper used for
evaluation and again on the quadratic R-tree.  Each method is timed in CPU time on as many of the items as
its share of the time budget allows (all of them for the fast ones), the best of ``repeat`` passes, and
counts the boxes or tree rectangles each item was tested against; all methods must agree item by item
with the region-bitmap evaluator on the first items.
"""

from __future__ import annotations

import time

import numpy as np

from bench.evaluation import generate_boxes, predicate_of

METHODS = ("SE", "IE", "IE+SC", "IE (R-tree)", "IE+SC (R-tree)")
"""Plain IE and IE+SC use the R*-tree (the paper's evaluation index); "(R-tree)": the quadratic R-tree."""

DEFAULTS = {"dims": 3, "boxes_n": 100, "selectivity": 0.01, "overlap": 0.5}
SWEEPS = {
    "dims": (1, 2, 3, 4, 6, 8, 10),
    "boxes_n": (10, 50, 100, 500, 1000, 5000),
    "selectivity": (0.01, 0.1, 0.25, 0.5, 0.7, 0.75, 0.9, 1.0),
}
"""Figures 16, 17 and 18."""

CLAIM_OVERLAPS = (0.0, 0.25, 0.4)
"""The selectivity sweep again at these overlaps: the paper finds IE+SC best at every selectivity up to 40 %."""

TABLE8 = [(s, o) for s in (0.1, 0.75) for o in (0.0, 0.15, 0.25, 0.3, 0.5)]

CHECKED_ITEMS = 20_000


def evaluators(predicate) -> dict:
    from matcher.evaluation import IndexEvaluator, StandardEvaluator

    return {
        "SE": StandardEvaluator(predicate),
        "IE": IndexEvaluator(predicate, variant="rstar"),
        "IE+SC": IndexEvaluator(predicate, short_circuit=True, variant="rstar"),
        "IE (R-tree)": IndexEvaluator(predicate, variant="rtree"),
        "IE+SC (R-tree)": IndexEvaluator(predicate, short_circuit=True, variant="rtree"),
    }


def evaluate_case(case: dict, items: int, seed: int, budget_s: float, repeat: int) -> dict:
    """Throughput (items per CPU second), tests per item and timed items of every method on one predicate."""
    from matcher.evaluation import BitmapEvaluator, evaluate_reference

    rng = np.random.default_rng(seed)
    boxes = generate_boxes(rng, case["dims"], case["boxes_n"], case["selectivity"], case["overlap"])
    values = rng.uniform(0.0, 100.0, (items, case["dims"]))
    predicate = predicate_of(boxes)
    names = [f"x{k}" for k in range(case["dims"])]
    columns = {d: np.ascontiguousarray(values[:, k]) for k, d in enumerate(names)}
    truth = BitmapEvaluator(predicate).evaluate_batch(columns)
    head = {d: c[:CHECKED_ITEMS] for d, c in columns.items()}
    few = {d: c[:200] for d, c in columns.items()}
    if not np.array_equal(truth[:200], evaluate_reference(predicate, few)):
        raise AssertionError("the region-bitmap evaluator disagrees with the pointwise reference")
    methods = {}
    for name, evaluator in evaluators(predicate).items():
        hits, _ = evaluator.evaluate_counted(head)  # also compiles the kernel once, outside the timing
        if not np.array_equal(hits, truth[:CHECKED_ITEMS]):
            raise AssertionError(f"{name} disagrees with the region-bitmap evaluator")
        started = time.process_time()
        evaluator.evaluate_counted(head)
        rate = len(hits) / max(1e-9, time.process_time() - started)
        n = int(min(items, max(CHECKED_ITEMS, rate * budget_s)))
        part = {d: c[:n] for d, c in columns.items()}
        best = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            hits, work = evaluator.evaluate_counted(part)
            best = min(best, time.process_time() - started)
        methods[name] = {"items_per_s": n / max(1e-9, best), "tests_per_item": float(work.mean()), "timed_items": n}
    return {**case, "measured_selectivity": float(truth.mean()), "methods": methods}


def run(items: int, seed: int, budget_s: float, repeat: int, progress) -> dict:
    """Every evaluation experiment; ``progress(text)`` is told what runs."""
    results: dict = {"defaults": DEFAULTS, "items": items, "sweeps": {}, "overlap_claim": {}}

    def case(**changes) -> dict:
        return evaluate_case({**DEFAULTS, **changes}, items, seed, budget_s, repeat)

    for parameter, points in SWEEPS.items():
        progress(f"evaluation: {parameter} sweep (Figures 16-18)")
        results["sweeps"][parameter] = [case(**{parameter: point}) for point in points]
    for overlap in CLAIM_OVERLAPS:
        progress(f"evaluation: selectivity sweep at {overlap:.0%} overlap")
        results["overlap_claim"][str(overlap)] = [case(selectivity=s, overlap=overlap) for s in SWEEPS["selectivity"]]
    progress("evaluation: Table 8")
    results["table8"] = [case(selectivity=s, overlap=o) for s, o in TABLE8]
    return results
