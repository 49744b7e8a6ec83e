"""Records of benchmark runs (``--record``): the results with their parameters and the machine they ran on.

A record is what a measurement needs to be read later: the command, the parameters, the commit, the
machine (CPUs, load before and after, library versions) and every figure.  Records live in
``bench/results/``; the docs point to them instead of copying their numbers.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the platform has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_facts(load_before: list[float] | None) -> dict:
    """The machine a run measured: CPUs, their model, the load before the run and now, the versions."""
    import numba
    import numpy

    return {
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "numba_threads": numba.get_num_threads(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": numba.__version__,
    }


def write_record(path: Path, benchmark: str, parameters: dict, results: dict, machine: dict) -> None:
    """Write the record as JSON to ``path`` (created with its directory; replaced whole)."""
    record = {
        "benchmark": benchmark,
        "recorded_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["python", "run.py", *sys.argv[1:]]),
        "commit": _commit(),
        "parameters": parameters,
        "machine": machine,
        **results,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def _commit() -> str | None:
    """The checked-out commit, with ``+changes`` when the work tree differs from it; None outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.strip() + ("+changes" if status.strip() else "")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), None)
    except OSError:
        return platform.processor() or None
