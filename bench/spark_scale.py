"""``bench spark --scale``: the Spark engine on a scenario on ``local[2]`` (the driver's JVM runs the tasks on
2 threads) and with 1 and 2 executor cores of a standalone cluster, against the local engine in the same
run.

The cluster (a master and one 2-core worker on 127.0.0.1, ``peers/spark_cluster.py``) is started for the
bench unless ``--cluster`` names one; ``--no-cluster`` skips its rows.  The plan is made once.  The
configurations take turns, ``--repeat`` rounds of them, so that whatever else the machine does in the
meantime falls on all of them alike (on two cores it moves single runs by tens of percent).  Each Spark run
gets a fresh session and a fresh driver JVM (on the cluster capped at its cores by ``spark.cores.max``), a
warm-up run on figure1 (executors start, Python workers load numba's cached kernels), then the timed run
of ``--chunks`` chunks (the same for all, so all do the same work).  The local engine runs the same plan in
this process, warm (its kernels compiled by the warm-up).

Each row keeps its fastest run (the ratios are of those) and shows its slowest.  With the cluster rows,
each round also measures what the machine itself gives two processes: a CPU-bound loop of plain Python
run alone, then twice at once, three times in turns (:func:`machine_round`).  On a virtual machine two
cores need not be twice one (the host may share a physical core between them, or be busy), and the
engine's ratio of 2 cores over 1 is bounded by that one, measured the same hour.  Printed per row: the
Spark master, wall seconds (the run's check of its deliveries included: the local engine's over them all at
the end, Spark's on its executors, network/exactness.py), the Spark run's stages (``peers.spark.run_spark``:
the driver's layout of the plan, the chunk jobs, reading the summaries, the latency selection), the seconds
of the run's entry in the report (``reports.report.strategy_entry``, from the run's summary), tuple-hops per
wall second, and the
peak memory of the driver's JVM (on the cluster the executors are the worker's processes; on ``local[2]``
they are threads of the driver's JVM); then the Python driver's peak.  The ratios are 2 cluster cores over
1 (the whole run, and the chunk jobs alone: on one machine the driver's serial stages share its cores with
the executors) and Spark on 2 cores (``local[2]``, the cluster) over the local engine, for ``local[2]``
also with each side's report entry added (the same output on both sides).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

WARM_UP = "topologies/figure1.yaml"
SPIN = 20_000_000  # iterations of the calibration loop: about 2 s of one core
_SPIN_CODE = (
    "import time\nt = time.perf_counter()\nx = 0\n"
    "for i in range({n}):\n    x += i * i % 7\nprint(time.perf_counter() - t)"
)


def machine_round(iterations: int = SPIN, tries: int = 3) -> tuple[float, float]:
    """Seconds of a CPU-bound loop of plain Python in one process alone, and the slower of two running it at
    once, each the best of ``tries`` taken in turns: two cores give ``2 * alone / pair`` times one core's
    throughput."""

    def spin(k: int) -> list[float]:
        code = _SPIN_CODE.format(n=iterations)
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(k)]
        return [float(p.communicate()[0]) for p in procs]

    turns = [(spin(1)[0], max(spin(2))) for _ in range(tries)]
    return min(a for a, _ in turns), min(p for _, p in turns)


def _tuple_hops(scenario, run) -> int:
    from topologies import workload

    uploads = sum(workload.tuple_count(s, scenario.duration) for s in scenario.streams)
    return run.backbone_tuples + uploads + sum(s.delivered for s in run.summary.values())


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


def main(args: argparse.Namespace) -> int:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from network.routing import Network
    from peers.local import run_local
    from peers.spark import STAGES, run_spark
    from peers.spark_cluster import standalone_cluster
    from peers.spark_session import spark_session, stop_session
    from reports.report import strategy_entry
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
    run_local(warm, warm_plan)
    logs = Path(tempfile.mkdtemp(prefix="bench-spark-cluster-"))
    if args.no_cluster:
        cluster = nullcontext(None)
    else:
        cluster = nullcontext(args.cluster) if args.cluster else standalone_cluster(logs, cores=2)
    runs: dict[tuple[str, int], list[tuple[float, dict[str, float], float]]] = {}
    peaks: dict[tuple[str, int], int] = {}
    hops = None
    with cluster as master:
        # (row, cores, master URL (None: the local engine, in this process), Spark configuration)
        configurations = [("local", 1, None, {}), ("local[2]", 2, "local[2]", {})]
        if master is not None:
            capped = [{"spark.cores.max": str(n), "spark.executor.cores": str(n)} for n in (1, 2)]
            configurations += [("cluster", 1, master, capped[0]), ("cluster", 2, master, capped[1])]
        machine: list[tuple[float, float]] = []
        for _ in range(args.repeat):  # round after round, so that the machine's drift hits every row alike
            if master is not None:
                machine.append(machine_round())
            for name, cores, url, conf in configurations:
                stages: dict[str, float] = {}
                if url is None:
                    t0 = time.perf_counter()
                    run = run_local(scenario, plan)
                    seconds = time.perf_counter() - t0
                    counted = _tuple_hops(scenario, run)
                    hops = counted if hops is None else hops
                else:
                    session = spark_session(url, conf)
                    run_spark(warm, warm_plan, master=url, conf=conf, chunks=cores)
                    t0 = time.perf_counter()
                    run = run_spark(scenario, plan, master=url, conf=conf, chunks=args.chunks, stages=stages)
                    seconds = time.perf_counter() - t0
                    counted = _tuple_hops(scenario, run)
                    peaks[(name, cores)] = max(peaks.get((name, cores), 0), _jvm_peak_rss(session))
                    stop_session(jvm=True)  # each configuration's driver JVM measured apart
                if counted != hops:
                    raise AssertionError(f"the {name} run counted other tuple-hops than the local engine's")
                t0 = time.perf_counter()
                strategy_entry(scenario, run)  # the report's entry
                entry = time.perf_counter() - t0
                del run
                runs.setdefault((name, cores), []).append((seconds, stages, entry))
    rows = []
    for (name, cores), done in runs.items():
        seconds, stages, entry = min(done, key=lambda run: run[0])
        row = {
            "engine": "local" if name == "local" else "spark",
            "master": name,
            "cores": cores,
            "seconds": seconds,
            "slowest": max(run[0] for run in done),
            "tuple_hops_per_s": hops / seconds,
            "stages": stages,
            "report_s": entry,
        }
        if (name, cores) in peaks:
            row["driver_jvm_peak_bytes"] = peaks[(name, cores)]
        rows.append(row)
    python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    by_master = {(row["master"], row["cores"]): row["seconds"] for row in rows}
    local_s, local2 = by_master[("local", 1)], by_master[("local[2]", 2)]
    reported = {(row["master"], row["cores"]): row["seconds"] + row["report_s"] for row in rows}
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
        "spark_local_2_over_local_reported": reported[("local", 1)] / reported[("local[2]", 2)],
        "driver_python_peak_bytes": python_peak,
    }
    if not args.no_cluster:
        one, two = by_master[("cluster", 1)], by_master[("cluster", 2)]
        result["speedup_2_over_1_cores"] = one / two
        result["spark_2_cores_over_local"] = local_s / two
        jobs = {row["cores"]: row["stages"]["chunks"] for row in rows if row["master"] == "cluster"}
        result["chunk_jobs_2_over_1_cores"] = jobs[1] / jobs[2]
        alone, pair = min(a for a, _ in machine), min(p for _, p in machine)
        result["machine"] = {"alone_s": alone, "pair_s": pair, "two_over_one": 2 * alone / pair, "rounds": machine}
    if args.json:
        print(json.dumps(result))
        return 0
    print("bench spark --scale: " + ", ".join(f"{k}={v}" for k, v in result["params"].items()))
    print(
        f"{'engine':<8}{'master':>10}{'cores':>6}{'seconds':>10}{'slowest':>10}"
        f"{'layout/chunks/summaries/ranks s':>33}{'report s':>10}{'M tuple-hops/s':>16}{'driver JVM peak':>18}"
    )
    for row in rows:
        jvm = row.get("driver_jvm_peak_bytes")
        peak = f"{jvm / 2**20:.0f} MiB" if jvm else "-"
        split = "/".join(f"{row['stages'][k]:.1f}" for k in STAGES) if row["stages"] else "-"
        print(
            f"{row['engine']:<8}{row['master']:>10}{row['cores']:>6}{row['seconds']:>10.1f}"
            f"{row['slowest']:>10.1f}{split:>33}{row['report_s']:>10.1f}"
            f"{row['tuple_hops_per_s'] / 1e6:>16.2f}{peak:>18}"
        )
    ratios = [
        f"Spark on local[2] / local engine: {result['spark_local_2_over_local']:.2f}x"
        f" ({result['spark_local_2_over_local_reported']:.2f}x with the report's entry)"
    ]
    if not args.no_cluster:
        ratios = [
            f"2 cores / 1 core: {result['speedup_2_over_1_cores']:.2f}x"
            f" (the chunk jobs alone: {result['chunk_jobs_2_over_1_cores']:.2f}x)",
            f"two CPU-bound processes / one on this machine: {result['machine']['two_over_one']:.2f}x"
            f" (loop alone {result['machine']['alone_s']:.2f} s, two at once {result['machine']['pair_s']:.2f} s)",
            f"Spark on 2 cores / local engine: {result['spark_2_cores_over_local']:.2f}x",
            *ratios,
        ]
    print("; ".join(ratios) + f"; driver (Python) peak {python_peak / 2**20:.0f} MiB (plan and local run included)")
    return 0
