"""A Spark standalone cluster on this machine (a master and one worker on 127.0.0.1), started from the
pyspark package's own scripts: what the test suite and ``bench spark --scale`` run the engine on.

:func:`standalone_cluster` starts both processes on free ports, waits until the worker has registered with
the master, yields the master's URL, and stops both (their whole process groups) afterwards, also after a
failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from topologies.errors import EngineError

START_TIMEOUT_S = 180.0


def java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "w") as out:
        # own process group, so that stopping it also stops the JVM that spark-class execs
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _alive_workers(webui_port: int) -> int:
    """Workers the master lists as ALIVE (its web UI serves the state as JSON)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=5) as response:
            state = json.load(response)
    except OSError:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@contextmanager
def standalone_cluster(logs: Path, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a running master with one registered worker of ``cores`` cores and
    ``memory`` for executors; logs go to ``logs``.  Raises EngineError when either does not come up."""
    home = spark_home()
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable, SPARK_LOG_DIR=str(logs))
    env["SPARK_WORKER_DIR"] = str(logs / "work")
    spark_class = str(home / "bin" / "spark-class")
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--webui-port", str(master_ui)),
        ],
        logs / "master.log",
        env,
    )
    worker = None
    try:
        worker = _start(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                url,
                *("--host", "127.0.0.1", "--webui-port", str(worker_ui)),
                *("--cores", str(cores), "--memory", memory),
            ],
            logs / "worker.log",
            env,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_workers(master_ui) < 1:
            for name, process in (("master", master), ("worker", worker)):
                if process.poll() is not None:
                    raise EngineError(f"the Spark {name} exited: {(logs / f'{name}.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise EngineError(f"no Spark worker registered with {url} within {START_TIMEOUT_S:g} s")
            time.sleep(1)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
