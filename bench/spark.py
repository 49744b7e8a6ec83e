"""The Spark data plane against Catalyst: one super-peer operator with many outgoing flows.

(``--scale`` measures the Spark engine itself instead, see bench/spark_scale.py.)

A super-peer reads one input stream and feeds ``--flows`` outgoing flows, each keeping the tuples inside a
few random boxes in 3-D.  The same cached DataFrame of ``--tuples`` tuples is evaluated on ``--master``
(default ``local[2]``):

- ours: the super-peer's selection as every engine runs it, the flows as entries of a
  :class:`~peers.selection.SelectorTable` run together on each Arrow batch by
  :func:`~peers.selection.select_batch` (the compiled kernel, the flows read together over a grid) in
  ``mapInArrow``, the table broadcast;
- Catalyst: every flow's predicate written as a Spark SQL expression (OR of ANDs of comparisons), in each
  of the formulations of :data:`FORMULATIONS`: tuples routed to the flows they satisfy (an array of labels,
  exploded, then counted per flow), or two conditional aggregates per flow in one pass; each either as one
  query over all flows or as queries of ``--chunk`` flows.  One query over a hundred flows is a plan whose
  generated code exceeds 64 KB: whole-stage code generation fails and the JVM does not JIT-compile such
  huge methods, unless ``-XX:-DontCompileHugeMethods`` is given, which this benchmark gives its driver
  (appended to the session's own JVM options).  The engine's sessions keep the JIT to its first tier
  (peers/spark_session.py); this benchmark gives its JVMs the whole JIT back (``-XX:TieredStopAtLevel=4``,
  the JVM's default), the naive run's included, since Catalyst's generated code runs hot in the JVM.

Both sides run warm: one uncounted pass, then ``--repeat`` timed passes, the best kept.  Every Catalyst
formulation is first timed the same way on the first ``--screen`` tuples; the fastest is then run on all of
them, and named.  The naive figure, the one query over all flows run once, cold, without the JIT flag (how
a first attempt runs), comes from a fresh process (the flag is fixed when a JVM starts) unless
``--no-naive``.  Both sides produce per flow the number of tuples kept and the sum of their ids; the
results must be identical.  A tuple-edge evaluation is one tuple checked against one flow's predicate:
``tuples * flows`` per pass.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    from sharing import STRATEGIES

    parser.add_argument("--tuples", type=int, default=2_000_000, help="tuples in the input (default 2000000)")
    parser.add_argument("--flows", type=int, default=100, help="outgoing flows of the super-peer (default 100)")
    parser.add_argument("--boxes", type=int, default=3, help="boxes per flow predicate (default 3)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--batch", type=int, default=65_536, help="tuples per Arrow batch (default 65536)")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes of each side, best kept (default 2)")
    parser.add_argument("--chunk", type=int, default=10, help="flows per query of the chunked formulations")
    parser.add_argument("--screen", type=int, default=400_000, help="tuples each Catalyst formulation is screened on")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive Catalyst figure (a fresh JVM)")
    parser.add_argument("--naive-only", action="store_true", help=argparse.SUPPRESS)  # the fresh process
    parser.add_argument("--seed", type=int, default=1)
    scale = parser.add_argument_group(
        "--scale: the Spark engine on a scenario, on local[2] and on 1 and 2 executor cores of a cluster"
    )
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
    scale.add_argument("--no-cluster", action="store_true", help="only the local[2] row, no standalone cluster")
    scale.add_argument("--chunks", type=int, default=8, help="chunks of the run (default 8, for every run)")


DIMS = ("x", "y", "z")
DOMAIN = 100.0


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


def super_peer_readers(predicates):
    """The readers of super-peer SP0 on its input, one outgoing flow per predicate, as a selector table."""
    from peers.selection import SelectorTable

    table = SelectorTable({"input": DIMS}, header_bytes=16)
    for predicate in predicates:
        table.add("input", predicate, DIMS)
    table.arrays()  # compiled once here, shipped with the table
    return table


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


def _ours(frame, broadcast):
    """Per flow ``(kept, sum of ids)`` by the super-peer's selection inside mapInArrow."""
    from functools import partial

    task = partial(_evaluate_operator, broadcast)
    result = frame.mapInArrow(task, "flow int, kept long, checksum long")
    rows = result.groupBy("flow").sum("kept", "checksum").collect()
    return {r["flow"]: (r["sum(kept)"], r["sum(checksum)"]) for r in rows}


def _evaluate_operator(broadcast, batches):
    """Runs in the tasks: the selection over each batch, then per flow ``(kept, sum of ids)`` of the
    partition."""
    import numpy as np
    import pyarrow as pa

    from peers.selection import select_batch

    table = broadcast.value
    flows = len(table)
    readers = range(flows)
    kept = np.zeros(flows, dtype=np.int64)
    checksum = np.zeros(flows, dtype=np.int64)
    for batch in batches:
        ids = batch.column("id").to_numpy()
        values = np.stack([batch.column(dim).to_numpy() for dim in DIMS])
        for j, (positions, _) in enumerate(select_batch(table, readers, DIMS, values)):
            kept[j] += len(positions)
            checksum[j] += int(ids[positions].sum())
    yield pa.RecordBatch.from_arrays(
        [pa.array(np.arange(flows, dtype=np.int32)), pa.array(kept), pa.array(checksum)],
        names=["flow", "kept", "checksum"],
    )


def _explode(frame, predicates, flows: range) -> dict:
    """Each tuple sent to the flows whose condition it satisfies (an array of labels, exploded), counted."""
    from pyspark.sql import functions as F

    labels = F.array(*[F.when(sql_condition(predicates[j]), F.lit(j)) for j in flows])
    routed = frame.select("id", F.explode(labels).alias("flow")).where(F.col("flow").isNotNull())
    rows = routed.groupBy("flow").agg(F.count("*").alias("kept"), F.sum("id").alias("checksum")).collect()
    return {r["flow"]: (r["kept"], r["checksum"]) for r in rows}


def _aggregate(frame, predicates, flows: range) -> dict:
    """Two conditional aggregates per flow (tuples kept, sum of their ids), one pass, no shuffle."""
    from pyspark.sql import functions as F

    columns = []
    for j in flows:
        condition = sql_condition(predicates[j])
        columns.append(F.sum(F.when(condition, 1).otherwise(0)).alias(f"k{j}"))
        columns.append(F.sum(F.when(condition, F.col("id")).otherwise(0)).alias(f"c{j}"))
    row = frame.select(*columns).collect()[0]
    return {j: (row[f"k{j}"], row[f"c{j}"]) for j in flows}


FORMULATIONS = {"explode": _explode, "aggregate": _aggregate}
"""Catalyst formulations; each also runs chunked.  A third, one filter per flow and a union of the counts,
lost to both on local[2] in earlier measurements and is left out."""


def _catalyst(frame, predicates, formulation: str, chunk: int) -> dict:
    """Per flow ``(kept, sum of ids)`` by ``formulation``, ``chunk`` flows per query (0: one query)."""
    run = FORMULATIONS[formulation]
    size = chunk or len(predicates)
    found: dict = {}
    for start in range(0, len(predicates), size):
        found.update(run(frame, predicates, range(start, min(len(predicates), start + size))))
    return {j: found.get(j, (0, 0)) for j in range(len(predicates))}


def _formulation_name(formulation: str, chunk: int, flows: int) -> str:
    if not chunk or chunk >= flows:
        return f"{formulation}, one query"
    return f"{formulation}, {-(-flows // chunk)} queries of {chunk} flows"


def _best_time(run, repeat: int, warm: bool = True):
    """The best wall time of ``repeat`` calls of ``run`` (after one uncounted call when ``warm``)."""
    if warm:
        run()
    best, result = float("inf"), None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


JIT_FLAG = "-XX:-DontCompileHugeMethods"
# Catalyst's generated code runs hot in the JVM: both sides get the JVM's whole JIT back (the engine's own
# sessions keep to its first tier, peers/spark_session.py), the naive run included (Spark's default)
FULL_JIT = "-XX:TieredStopAtLevel=4"


def _jit_flag_in_effect(session) -> bool:
    arguments = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return JIT_FLAG in list(arguments)


def _naive(args: argparse.Namespace) -> dict | None:
    """The one-query formulation, cold, in a fresh process without the JIT flag: ``{"seconds", "flag"}``."""
    import subprocess
    import sys

    command = [sys.executable, "run.py", "bench", "spark", "--naive-only", "--json"]
    for flag in ("tuples", "flows", "boxes", "master", "batch", "seed"):
        command += [f"--{flag}", str(getattr(args, flag))]
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"naive Catalyst run failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(args: argparse.Namespace) -> int:
    if args.scale:
        from bench.spark_scale import main as scale_main

        return scale_main(args)
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark import StorageLevel

    from peers.spark_session import jvm_started, spark_session
    from topologies.errors import InputError

    for flag in ("tuples", "flows", "repeat", "screen"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag}: must be at least 1, got {getattr(args, flag)}")
    if args.chunk < 0:
        raise InputError(f"--chunk: must be at least 0, got {args.chunk}")
    predicates = flow_predicates(args.flows, args.boxes, args.seed)
    # the flag can only reach a JVM this process has not started yet; otherwise the running session is used
    # and the flag reported absent
    fresh = not jvm_started()
    options = FULL_JIT if args.naive_only else f"{FULL_JIT} {JIT_FLAG}"
    conf = {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": FULL_JIT} if fresh else {}
    session = spark_session(args.master, conf)
    sc = session.sparkContext
    previous_batch = session.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch))
    partitions = sc.defaultParallelism * 2
    frame = _input_frame(session, args.tuples, partitions, args.seed).persist(StorageLevel.MEMORY_ONLY)
    frames = [frame]
    try:
        frame.count()  # materialise the cache: both sides read the same stored tuples
        if args.naive_only:
            seconds, _ = _best_time(lambda: _catalyst(frame, predicates, "explode", 0), 1, warm=False)
            print(json.dumps({"seconds": seconds, "flag": _jit_flag_in_effect(session)}))
            return 0
        broadcast = sc.broadcast(super_peer_readers(predicates))
        ours_s, ours = _best_time(lambda: _ours(frame, broadcast), args.repeat)
        broadcast.destroy()
        sample = frame.limit(min(args.screen, args.tuples)).persist(StorageLevel.MEMORY_ONLY)
        frames.append(sample)
        screened_tuples = sample.count()
        screened = {}
        for formulation in FORMULATIONS:
            for chunk in sorted({0, args.chunk}):
                run = lambda f=formulation, c=chunk: _catalyst(sample, predicates, f, c)  # noqa: E731
                screened[(formulation, chunk)] = _best_time(run, 1)[0]
        formulation, chunk = min(screened, key=screened.__getitem__)
        catalyst_s, catalyst = _best_time(lambda: _catalyst(frame, predicates, formulation, chunk), args.repeat)
        flag = _jit_flag_in_effect(session)
    finally:
        for cached in frames:
            cached.unpersist()
        session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous_batch)
    naive = None if args.no_naive else _naive(args)
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
        "screen": screened_tuples,
        "seed": args.seed,
        "jit_flag": flag,
        "kept_per_flow_mean": sum(k for k, _ in catalyst.values()) / args.flows,
    }
    best_name = _formulation_name(formulation, chunk, args.flows)
    result = {
        "ours": {"evals_per_s": evaluations / ours_s, "seconds": ours_s},
        "catalyst": {"evals_per_s": evaluations / catalyst_s, "seconds": catalyst_s, "formulation": best_name},
        "ratio": catalyst_s / ours_s,
        "screened": {
            _formulation_name(f, c, args.flows): {"seconds": t, "tuples_per_s": screened_tuples / t}
            for (f, c), t in screened.items()
        },
        "naive": None if naive is None else {**naive, "ratio": naive["seconds"] / ours_s},
        "identical": identical,
        "params": params,
    }
    if args.json:
        print(json.dumps(result))
        return 0 if identical else 1
    _print(result, args)
    return 0 if identical else 1


def _print(result: dict, args: argparse.Namespace) -> None:
    params = result["params"]
    print("bench spark: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()))
    print(
        f"Catalyst formulations screened warm on {params['screen']:,} tuples "
        f"(JIT flag {JIT_FLAG}: {params['jit_flag']}):"
    )
    for name, row in result["screened"].items():
        print(f"  {name:<40}{row['seconds']:>8.2f} s {row['tuples_per_s'] / 1e6:>8.2f} M tuples/s")
    print(f"\n{'engine (warm, best of ' + str(args.repeat) + ')':<44}{'seconds':>10}{'M tuple-edge evals/s':>24}")
    rows = [
        ("super-peer operator (ours)", result["ours"]),
        (f"Catalyst: {result['catalyst']['formulation']}", result["catalyst"]),
    ]
    for label, row in rows:
        print(f"{label:<44}{row['seconds']:>10.2f}{row['evals_per_s'] / 1e6:>24.1f}")
    print(
        f"ratio ours / best Catalyst: {result['ratio']:.1f}x "
        f"(goal >= 10x: {'met' if result['ratio'] >= 10 else 'not met'}); "
        f"results identical: {result['identical']}"
    )
    naive = result["naive"]
    if naive is None:
        print(
            "naive Catalyst (one query, cold, no JIT flag): " + ("skipped (--no-naive)" if args.no_naive else "failed")
        )
    else:
        print(
            f"naive Catalyst (one query of {params['flows']} flows, cold, no JIT flag, fresh JVM): "
            f"{naive['seconds']:.2f} s, ours {naive['ratio']:.1f}x faster"
        )
