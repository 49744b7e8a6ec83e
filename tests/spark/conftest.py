"""Spark fixtures: one local session for the whole test run, and a real standalone cluster on 127.0.0.1.

Starting Spark costs seconds, so every test that needs a session shares ``spark`` (session-scoped; other
packages' tests can use it too by importing this fixture).  ``standalone_master`` starts a Spark standalone
master and one worker from the pyspark package's own scripts, waits until the worker has registered, and
stops both processes when the tests using it are done, also after a failure.
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
from pathlib import Path

import pytest

LOCAL_MASTER = "local[2]"
CLUSTER_START_TIMEOUT_S = 180.0


@pytest.fixture(scope="session")
def spark():
    """The process's shared SparkSession on local[2]; skips when Java is not installed."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (make system installs it)")
    from peers.spark_session import spark_session, stop_session

    session = spark_session(LOCAL_MASTER)
    yield session
    stop_session()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spark_home() -> Path:
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


@pytest.fixture(scope="session")
def standalone_master(tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a running standalone master with one registered worker (2 cores)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (make system installs it)")
    home = _spark_home()
    logs = tmp_path_factory.mktemp("spark-cluster")
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
                "--host",
                "127.0.0.1",
                *("--webui-port", str(worker_ui), "--cores", "2", "--memory", "2g"),
            ],
            logs / "worker.log",
            env,
        )
        deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S
        while _alive_workers(master_ui) < 1:
            for name, process in (("master", master), ("worker", worker)):
                if process.poll() is not None:
                    pytest.fail(f"the Spark {name} exited: {(logs / f'{name}.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no Spark worker registered with {url} within {CLUSTER_START_TIMEOUT_S:g} s")
            time.sleep(1)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
