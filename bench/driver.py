"""``python run.py bench driver``: the Spark engine's driver memory as a run grows tenfold.

The Spark engine's driver keeps the plan's layout and the aggregates (per link, per subscription, per
bin), never per-tuple data, so its memory should not follow the number of tuples.  The bench runs the
same strategy of ``--scenario`` twice, each time a fresh ``run.py run --engine spark`` process with the
driver's JVM capped (``--driver-memory``): once with every stream's rate divided by ``--factor`` (the same
network, subscriptions and plan, ``factor`` times fewer tuples) and once as it is.  It samples the peak
resident memory (VmHWM) of the driver's Python process and of its JVM every quarter second.  The master
is a standalone cluster started on 127.0.0.1 (one worker, 2 cores) unless ``--master`` names another, so
the executors live outside the driver (on ``local[N]`` they share the driver's JVM, whose memory then
grows with what they keep).  Printed: per run the tuples, wall seconds and both peaks; then the ratios,
full over small (the baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def configure(parser: argparse.ArgumentParser) -> None:
    from sharing import STRATEGIES

    parser.add_argument("--scenario", default="topologies/metro.yaml", help="scenario (default metro.yaml)")
    parser.add_argument("--strategy", default="multicast", choices=STRATEGIES, help="strategy (default multicast)")
    parser.add_argument("--factor", type=int, default=10, help="the small run has this many times fewer tuples")
    parser.add_argument("--driver-memory", default="512m", help="spark.driver.memory of both runs (default 512m)")
    parser.add_argument("--master", default=None, help="Spark master (default: a standalone cluster started here)")


def _peak_kib(pid: int) -> int:
    """VmHWM of ``pid`` in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _jvm_of(pid: int) -> int | None:
    """The driver's JVM: a child process of ``pid`` running java."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for child in map(int, children):
        try:
            if b"java" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


def _run(scenario: str, strategy: str, master: str, memory: str, out: str) -> dict:
    """One ``run.py run`` on Spark, watched: wall seconds and the peaks of the driver and its JVM."""
    command = [sys.executable, str(ROOT / "run.py"), "run", scenario, "--engine", "spark", "--strategy", strategy]
    command += ["--spark-master", master, "--spark-conf", f"spark.driver.memory={memory}", "--out", out]
    command += ["--no-plots", "--quiet"]
    started = time.perf_counter()
    errors = Path(out + ".stderr")
    with open(errors, "w", encoding="utf-8") as log:  # a file, not a pipe: a full pipe would stall the run
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    python = jvm = 0
    jvm_pid = None
    while process.poll() is None:
        python = max(python, _peak_kib(process.pid))
        jvm_pid = jvm_pid or _jvm_of(process.pid)
        if jvm_pid is not None:
            jvm = max(jvm, _peak_kib(jvm_pid))
        time.sleep(0.25)
    if process.returncode != 0:
        raise RuntimeError(f"run.py run failed ({process.returncode}): {errors.read_text()[-2000:]}")
    report = json.loads((Path(out) / "report.json").read_text())
    entry = report["strategies"][strategy]
    return {
        "seconds": time.perf_counter() - started,
        "backbone_tuples": entry["backbone_tuples"],
        "delivered": sum(s["delivered"] for s in entry["subscriptions"]),
        "exact": report["exact"],
        "driver_python_peak_mib": python / 1024,
        "driver_jvm_peak_mib": jvm / 1024,
    }


def _smaller(path: str, factor: int, into: Path) -> str:
    """``path`` with every stream's rate divided by ``factor`` (replay streams keep theirs), written into
    ``into``."""
    import yaml

    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    for stream in doc.get("streams", []):
        if "rate" in stream and "replay" not in stream:
            stream["rate"] = stream["rate"] / factor
    target = into / f"small-{Path(path).name}"
    target.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return str(target)


def main(args: argparse.Namespace) -> int:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from peers.spark_cluster import standalone_cluster
    from topologies import workload
    from topologies.errors import InputError
    from topologies.loader import load_scenario

    if args.factor < 2:
        raise InputError(f"--factor: must be at least 2, got {args.factor}")
    scenario = os.path.abspath(args.scenario)
    work = Path(tempfile.mkdtemp(prefix="bench-driver-"))
    small = _smaller(scenario, args.factor, work)
    rows = []
    cluster = nullcontext(args.master) if args.master else standalone_cluster(work / "cluster", cores=2)
    with cluster as master:
        for name, path in (("small", small), ("full", scenario)):
            loaded = load_scenario(path)
            tuples = sum(workload.tuple_count(s, loaded.duration) for s in loaded.streams)
            row = {"run": name, "tuples": tuples}
            row.update(_run(path, args.strategy, master, args.driver_memory, str(work / name)))
            rows.append(row)
    small_row, full_row = rows
    result = {
        "params": {
            "scenario": args.scenario,
            "strategy": args.strategy,
            "factor": args.factor,
            "driver_memory": args.driver_memory,
            "master": args.master or "a standalone cluster started by the bench (1 worker, 2 cores, 127.0.0.1)",
        },
        "rows": rows,
        "python_full_over_small": full_row["driver_python_peak_mib"] / small_row["driver_python_peak_mib"],
        "jvm_full_over_small": full_row["driver_jvm_peak_mib"] / small_row["driver_jvm_peak_mib"],
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print("bench driver: " + ", ".join(f"{k}={v}" for k, v in result["params"].items()))
    print(f"{'run':<6}{'tuples':>12}{'backbone tuples':>17}{'seconds':>9}{'Python peak':>13}{'JVM peak':>11}  exact")
    for row in rows:
        print(
            f"{row['run']:<6}{row['tuples']:>12,}{row['backbone_tuples']:>17,}{row['seconds']:>9.1f}"
            f"{row['driver_python_peak_mib']:>9.0f} MiB{row['driver_jvm_peak_mib']:>7.0f} MiB  {row['exact']}"
        )
    print(
        f"driver peak, full run over the {args.factor}x smaller one: Python {result['python_full_over_small']:.2f}x, "
        f"JVM {result['jvm_full_over_small']:.2f}x"
    )
    return 0
