"""The Spark data plane against Catalyst: one super-peer operator with many outgoing flows.

(``--scale`` measures the Spark engine itself instead, see bench/spark_scale.py.)

A super-peer reads one input stream and feeds ``--flows`` outgoing flows, each keeping the tuples inside a
few random boxes in 3-D.  The same cached DataFrame of ``--tuples`` tuples is evaluated twice on
``--master`` (default ``local[2]``):

- ours: the super-peer's :class:`~peers.superpeer.FlowOperator` (one shared ``MultiMatcher`` over every
  flow, then filter and project per flow) in ``mapInArrow``, rebuilt per Python worker from broadcast
  plain arrays (index structures such as R-trees do not pickle);
- catalyst: every flow's predicate written as a Spark SQL expression (OR of ANDs of comparisons), counted
  and checksummed in one aggregation.

Both produce per flow the number of tuples kept and the sum of their ids; the results must be identical.
A tuple-edge evaluation is one tuple checked against one flow's predicate: ``tuples * flows`` per pass.
Ours keeps the best of ``--repeat`` passes (the first also starts the Python workers and compiles the
matcher's kernels); Catalyst runs once, because one pass takes minutes and its warm-up (code generation)
is part of every query anyway.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass


def configure(parser: argparse.ArgumentParser) -> None:
    from sharing import STRATEGIES

    parser.add_argument("--tuples", type=int, default=2_000_000, help="tuples in the input (default 2000000)")
    parser.add_argument("--flows", type=int, default=100, help="outgoing flows of the super-peer (default 100)")
    parser.add_argument("--boxes", type=int, default=3, help="boxes per flow predicate (default 3)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--batch", type=int, default=65_536, help="tuples per Arrow batch (default 65536)")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes of ours, best kept (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    scale = parser.add_argument_group("--scale: the Spark engine on a scenario, 1 and 2 executor cores")
    scale.add_argument("--scale", action="store_true", help="measure the engine's scaling instead")
    scale.add_argument("--scenario", default="topologies/metro.yaml", help="scenario (default metro.yaml)")
    scale.add_argument(
        "--strategy",
        default="multicast",
        choices=STRATEGIES,
        metavar="STRATEGY",
        help="strategy to simulate, one of %(choices)s (default multicast)",
    )
    scale.add_argument("--cluster", default=None, help="standalone master URL (default: start one on 127.0.0.1)")
    scale.add_argument("--chunks", type=int, default=8, help="chunks of the run (default 8, for both runs)")


DIMS = ("x", "y", "z")
DOMAIN = 100.0


@dataclass(frozen=True)
class PortableOperator:
    """A :class:`~peers.superpeer.FlowOperator` with its matcher replaced by the matcher's class and plain
    arrays (``MultiMatcher.to_arrays``), for a broadcast."""

    state: dict
    matcher_class: type
    matcher_arrays: dict


def portable(operator) -> PortableOperator:
    state = dict(vars(operator))
    matcher = state.pop("matcher")
    return PortableOperator(state, type(matcher), matcher.to_arrays())


def rebuild(shipped: PortableOperator):
    from peers.superpeer import FlowOperator

    operator = FlowOperator.__new__(FlowOperator)
    vars(operator).update(shipped.state)
    operator.matcher = shipped.matcher_class.from_arrays(shipped.matcher_arrays)
    return operator


def flow_predicates(flows: int, boxes: int, seed: int):
    """``flows`` predicates, each an OR of ``boxes`` random closed boxes in 3-D (sides 5-30% of the domain)."""
    import numpy as np

    from matcher import Box, Interval, Predicate

    rng = np.random.default_rng([seed, flows, boxes])
    predicates = []
    for _ in range(flows):
        parts = []
        for _ in range(boxes):
            sides = {}
            for dim in DIMS:
                width = float(rng.uniform(0.05, 0.30)) * DOMAIN
                lo = float(rng.uniform(0, DOMAIN - width))
                sides[dim] = Interval.closed(round(lo, 3), round(lo + width, 3))
            parts.append(Box(sides))
        predicates.append(Predicate(parts))
    return predicates


def super_peer_operator(predicates):
    """The operator of super-peer SP0 on its input: one reader (outgoing flow) per predicate."""
    from peers.superpeer import FlowOperator, Reader, flow_key

    readers = [Reader(flow_key(f"F{j}"), f"flow F{j}", p, DIMS) for j, p in enumerate(predicates)]
    return FlowOperator("SP0", "bench input", DIMS, readers, header_bytes=16)


def sql_condition(predicate):
    """``predicate`` as a Spark SQL column: OR over boxes of AND over interval bounds."""
    from functools import reduce

    from pyspark.sql import functions as F

    def bound(dim, iv):
        col = F.col(dim)
        parts = []
        if iv.lo != float("-inf"):
            parts.append(col >= iv.lo if iv.lo_closed else col > iv.lo)
        if iv.hi != float("inf"):
            parts.append(col <= iv.hi if iv.hi_closed else col < iv.hi)
        return parts

    boxes = [
        reduce(lambda a, b: a & b, [c for dim, iv in box.items() for c in bound(dim, iv)], F.lit(True))
        for box in predicate.boxes
    ]
    return reduce(lambda a, b: a | b, boxes, F.lit(False))


def _input_frame(session, tuples: int, partitions: int, seed: int):
    """``id, x, y, z``: uniform values in [0, 100), generated in the tasks from (seed, first id of a batch)."""
    import numpy as np
    import pyarrow as pa

    def generate(batches):
        for batch in batches:
            ids = batch.column("id").to_numpy()
            rng = np.random.default_rng([seed, int(ids[0]) if len(ids) else 0])
            values = [pa.array(rng.uniform(0, DOMAIN, len(ids))) for _ in DIMS]
            yield pa.RecordBatch.from_arrays([pa.array(ids), *values], names=["id", *DIMS])

    schema = "id long, " + ", ".join(f"{d} double" for d in DIMS)
    return session.range(0, tuples, numPartitions=partitions).mapInArrow(generate, schema)


def _ours(frame, broadcast, job_id: str):
    """Per flow ``(kept, sum of ids)`` by the super-peer operator inside mapInArrow."""
    from functools import partial

    task = partial(_evaluate_operator, broadcast, job_id)
    result = frame.mapInArrow(task, "flow int, kept long, checksum long")
    rows = result.groupBy("flow").sum("kept", "checksum").collect()
    return {r["flow"]: (r["sum(kept)"], r["sum(checksum)"]) for r in rows}


_operator_cache: dict = {}  # per Python worker: job id -> the rebuilt operator


def _evaluate_operator(broadcast, job_id: str, batches):
    """Runs in the tasks (a partial of this module-level function, so ``_operator_cache`` lives per
    worker): the operator over each batch, then per flow ``(kept, sum of ids)`` of the partition."""
    import numpy as np
    import pyarrow as pa

    if job_id not in _operator_cache:
        _operator_cache.clear()
        _operator_cache[job_id] = rebuild(broadcast.value)
    operator = _operator_cache[job_id]
    flows = len(operator.readers)
    kept = np.zeros(flows, dtype=np.int64)
    checksum = np.zeros(flows, dtype=np.int64)
    for batch in batches:
        ids = batch.column("id").to_numpy()
        columns = {dim: batch.column(dim).to_numpy() for dim in DIMS}
        for j, out in enumerate(operator.process(len(ids), columns)):
            kept[j] += len(out.positions)
            checksum[j] += int(ids[out.positions].sum())
    yield pa.RecordBatch.from_arrays(
        [pa.array(np.arange(flows, dtype=np.int32)), pa.array(kept), pa.array(checksum)],
        names=["flow", "kept", "checksum"],
    )


def _catalyst(frame, predicates):
    """Per flow ``(kept, sum of ids)`` in Spark SQL: each tuple is sent to the flows whose condition it
    satisfies (an array of labels, exploded), then counted per flow.  Of the formulations tried (one
    aggregate per flow; a union of per-flow filters; this one), this was the fastest on local[2]."""
    from pyspark.sql import functions as F

    labels = F.array(*[F.when(sql_condition(p), F.lit(j)) for j, p in enumerate(predicates)])
    routed = frame.select("id", F.explode(labels).alias("flow")).where(F.col("flow").isNotNull())
    rows = routed.groupBy("flow").agg(F.count("*").alias("kept"), F.sum("id").alias("checksum")).collect()
    found = {r["flow"]: (r["kept"], r["checksum"]) for r in rows}
    return {j: found.get(j, (0, 0)) for j in range(len(predicates))}


def _best_time(run, repeat: int):
    best, result = float("inf"), None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(args: argparse.Namespace) -> int:
    if args.scale:
        from bench.spark_scale import main as scale_main

        return scale_main(args)
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark import StorageLevel

    from peers.spark_session import spark_session

    predicates = flow_predicates(args.flows, args.boxes, args.seed)
    operator = super_peer_operator(predicates)
    session = spark_session(args.master)
    sc = session.sparkContext
    previous_batch = session.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch))
    partitions = sc.defaultParallelism * 2
    frame = _input_frame(session, args.tuples, partitions, args.seed).persist(StorageLevel.MEMORY_ONLY)
    broadcast = sc.broadcast(portable(operator))
    try:
        frame.count()  # materialise the cache: both sides read the same stored tuples
        ours_s, ours = _best_time(lambda: _ours(frame, broadcast, f"bench-{args.seed}"), args.repeat)
        catalyst_s, catalyst = _best_time(lambda: _catalyst(frame, predicates), 1)
    finally:
        frame.unpersist()
        broadcast.destroy()
        session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous_batch)
    evaluations = args.tuples * args.flows
    identical = {j: ours.get(j, (0, 0)) for j in range(args.flows)} == catalyst
    params = {
        "tuples": args.tuples,
        "flows": args.flows,
        "boxes_per_flow": args.boxes,
        "dims": len(DIMS),
        "master": args.master,
        "partitions": partitions,
        "batch": args.batch,
        "repeat": args.repeat,
        "seed": args.seed,
        "kept_per_flow_mean": sum(k for k, _ in catalyst.values()) / args.flows,
    }
    result = {
        "ours": {"evals_per_s": evaluations / ours_s, "seconds": ours_s},
        "catalyst": {"evals_per_s": evaluations / catalyst_s, "seconds": catalyst_s},
        "ratio": catalyst_s / ours_s,
        "identical": identical,
        "params": params,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print("bench spark: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()))
    print(f"{'engine':<28}{'seconds':>10}{'M tuple-edge evals/s':>24}{'M tuples/s':>14}")
    for label, seconds in (("super-peer operator (ours)", ours_s), ("Spark SQL / Catalyst", catalyst_s)):
        rate = evaluations / seconds / 1e6
        print(f"{label:<28}{seconds:>10.2f}{rate:>24.1f}{args.tuples / seconds / 1e6:>14.2f}")
    print(f"ratio ours / catalyst: {result['ratio']:.1f}x; results identical: {identical}")
    return 0 if identical else 1
