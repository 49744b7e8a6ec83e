"""``bench spark --scale``: the Spark engine on a scenario on ``local[2]`` (the driver's JVM runs the tasks on
2 threads), then with 1 and then 2 executor cores of a standalone cluster, against the local engine in the
same run.

The cluster (a master and one 2-core worker on 127.0.0.1, ``peers/spark_cluster.py``) is started for the
bench unless ``--cluster`` names one; ``--no-cluster`` skips its rows.  The plan is made once.  Each Spark
configuration gets a fresh session (on the cluster, capped at its cores by ``spark.cores.max``), a warm-up
run on figure1 (executors start, Python workers load numba's cached kernels), then ``--repeat`` timed runs of
``--chunks`` chunks (the same for all, so all do the same work).  The local engine runs the same plan in
this process, warm (its kernels compiled by the warm-up), as many times.  Each row keeps its fastest run
(the ratios are of those) and shows its slowest: on a machine of two cores whatever else runs there moves
single runs by tens of percent.  Printed per row: the Spark master, wall seconds,
tuple-hops per wall second, and the driver's peak memory: the Python driver's and its JVM's (on the
cluster the executors are the worker's processes, not the driver's; on ``local[2]`` they are threads of
the driver's JVM).  The ratios are 2 cluster cores over 1 and Spark on 2 cores (``local[2]``, the cluster)
over the local engine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

WARM_UP = "topologies/figure1.yaml"


def _tuple_hops(scenario, run) -> int:
    from topologies import workload

    uploads = sum(workload.tuple_count(s, scenario.duration) for s in scenario.streams)
    delivered = (
        sum(s.delivered for s in run.summary.values()) if run.summary else sum(len(v) for v in run.delivered.values())
    )
    return run.backbone_tuples + uploads + delivered


def _jvm_peak_rss(session) -> int:
    """Peak resident memory (VmHWM) of the driver's JVM, in bytes (0 when unknown)."""
    try:
        pid = session.sparkContext._gateway.proc.pid
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (AttributeError, OSError):
        pass
    return 0


def _timed(repeat: int, run: Callable[[], int]) -> tuple[float, float, int]:
    """``run()`` ``repeat`` times: the fastest and the slowest wall seconds, and what the last run returned."""
    seconds, result = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - t0)
    return min(seconds), max(seconds), result


def main(args: argparse.Namespace) -> int:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from network.routing import Network
    from peers.local import run_local
    from peers.spark import run_spark
    from peers.spark_cluster import standalone_cluster
    from peers.spark_session import spark_session, stop_session
    from sharing import check_strategy, make_plan
    from topologies.errors import InputError
    from topologies.loader import load_scenario

    check_strategy(args.strategy)
    if args.chunks < 1:
        raise InputError(f"--chunks: must be at least 1, got {args.chunks}")
    if args.repeat < 1:
        raise InputError(f"--repeat: must be at least 1, got {args.repeat}")
    scenario = load_scenario(args.scenario)
    warm = load_scenario(WARM_UP)
    plan = make_plan(scenario, args.strategy, Network.of(scenario))
    warm_plan = make_plan(warm, args.strategy, Network.of(warm))
    rows = []
    run_local(warm, warm_plan)
    local_s, local_max, hops = _timed(args.repeat, lambda: _tuple_hops(scenario, run_local(scenario, plan)))
    rows.append(
        {"engine": "local", "cores": 1, "seconds": local_s, "slowest": local_max, "tuple_hops_per_s": hops / local_s}
    )
    configurations = [("local[2]", 2, None)]
    logs = Path(tempfile.mkdtemp(prefix="bench-spark-cluster-"))
    if args.no_cluster:
        cluster = nullcontext(None)
    else:
        cluster = nullcontext(args.cluster) if args.cluster else standalone_cluster(logs, cores=2)
    with cluster as master:
        if master is not None:
            configurations += [(master, cores, cores) for cores in (1, 2)]
        for url, cores, cap in configurations:
            conf = {"spark.cores.max": str(cap), "spark.executor.cores": str(cap)} if cap else {}
            session = spark_session(url, conf)
            run_spark(warm, warm_plan, master=url, conf=conf, chunks=cores)
            seconds, slowest, counted = _timed(
                args.repeat,
                lambda url=url, conf=conf: _tuple_hops(
                    scenario, run_spark(scenario, plan, master=url, conf=conf, chunks=args.chunks)
                ),
            )
            if counted != hops:
                raise AssertionError("the Spark run counted other tuple-hops than the local one")
            rows.append(
                {
                    "engine": "spark",
                    "master": "local[2]" if cap is None else "cluster",
                    "cores": cores,
                    "seconds": seconds,
                    "slowest": slowest,
                    "tuple_hops_per_s": hops / seconds,
                    "driver_jvm_peak_bytes": _jvm_peak_rss(session),
                }
            )
            stop_session()
    python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    by_master = {(row.get("master"), row["cores"]): row["seconds"] for row in rows}
    local2 = by_master[("local[2]", 2)]
    result = {
        "params": {
            "scenario": args.scenario,
            "strategy": args.strategy,
            "chunks": args.chunks,
            "repeat": args.repeat,
            "cluster": "none (--no-cluster)"
            if args.no_cluster
            else args.cluster or "started by the bench (1 worker, 2 cores, 127.0.0.1)",
            "tuple_hops": hops,
            "cpus": os.cpu_count(),
        },
        "rows": rows,
        "spark_local_2_over_local": local_s / local2,
        "driver_python_peak_bytes": python_peak,
    }
    if not args.no_cluster:
        one, two = by_master[("cluster", 1)], by_master[("cluster", 2)]
        result["speedup_2_over_1_cores"] = one / two
        result["spark_2_cores_over_local"] = local_s / two
    if args.json:
        print(json.dumps(result))
        return 0
    print("bench spark --scale: " + ", ".join(f"{k}={v}" for k, v in result["params"].items()))
    print(
        f"{'engine':<8}{'master':>10}{'cores':>6}{'seconds':>10}{'slowest':>10}{'M tuple-hops/s':>16}"
        f"{'driver JVM peak':>18}"
    )
    for row in rows:
        jvm = row.get("driver_jvm_peak_bytes")
        peak = f"{jvm / 2**20:.0f} MiB" if jvm else "-"
        print(
            f"{row['engine']:<8}{row.get('master', '-'):>10}{row['cores']:>6}{row['seconds']:>10.1f}"
            f"{row['slowest']:>10.1f}{row['tuple_hops_per_s'] / 1e6:>16.2f}{peak:>18}"
        )
    ratios = [f"Spark on local[2] / local engine: {result['spark_local_2_over_local']:.2f}x"]
    if not args.no_cluster:
        ratios = [
            f"2 cores / 1 core: {result['speedup_2_over_1_cores']:.2f}x",
            f"Spark on 2 cores / local engine: {result['spark_2_cores_over_local']:.2f}x",
            *ratios,
        ]
    print("; ".join(ratios) + f"; driver (Python) peak {python_peak / 2**20:.0f} MiB (plan and local run included)")
    return 0
