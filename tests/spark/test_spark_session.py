"""Session management and the CLI's errors: master URLs, unreachable masters, one shared session."""

from __future__ import annotations

import subprocess
import sys

import pytest

from peers.spark_cluster import free_port
from peers.spark_session import DEFAULT_MASTER, parse_master, spark_session
from tests.spark.conftest import LOCAL_MASTER
from topologies.errors import EngineError, InputError


@pytest.mark.parametrize(
    "url", ["local", "local[1]", "local[*]", "local[2,3]", "spark://127.0.0.1:7077", "spark://h-1.x:1"]
)
def test_well_formed_master_urls_are_accepted_as_given(url):
    assert parse_master(url) == url


def test_no_master_means_the_default():
    assert parse_master(None) == DEFAULT_MASTER == "local[*]"


@pytest.mark.parametrize(
    "url",
    ["", "local[0]", "local[]", "local[x]", "spark://", "spark://host", "spark://host:0", "spark://h:99999", "yarn"],
)
def test_malformed_master_urls_are_input_errors_naming_the_flag(url):
    with pytest.raises(
        InputError, match=r"^--spark-master: .* is not local, local\[N\], local\[\*\] or spark://host:port$"
    ):
        parse_master(url)


@pytest.mark.spark
def test_one_session_per_process_and_an_unreachable_master_leaves_it_running(spark):
    assert spark_session(LOCAL_MASTER) is spark
    port = free_port()
    with pytest.raises(EngineError, match=rf"^Spark master spark://127.0.0.1:{port} is not reachable"):
        spark_session(f"spark://127.0.0.1:{port}")
    assert spark_session(LOCAL_MASTER) is spark
    assert spark.range(5).count() == 5
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.pythonExec == sys.executable


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], capture_output=True, text=True, timeout=300, check=False)


def test_cli_rejects_a_malformed_master_with_exit_2_and_one_line(tmp_path):
    done = _cli(
        "run",
        "topologies/figure1.yaml",
        "--engine",
        "spark",
        "--spark-master",
        "spark:/x",
        "--out",
        str(tmp_path / "o"),
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --spark-master: 'spark:/x' is not local, local[N], local[*] or spark://host:port"
    ]


def test_cli_reports_an_unreachable_master_with_exit_1_and_one_line(tmp_path):
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    done = _cli(
        "run",
        "topologies/figure1.yaml",
        "--engine",
        "spark",
        "--spark-master",
        url,
        "--out",
        str(tmp_path / "o"),
        "--quiet",
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: Spark master {url} is not reachable"), done.stderr
    assert not (tmp_path / "o").exists()


def test_extra_java_options_are_added_to_the_sessions_own():
    from peers.spark_session import FIRST_TIER_JIT, _java_options

    quiet = "-Dlog4j2.configurationFile=file:/x"
    assert _java_options(quiet, None, "driver") == f"{quiet} {FIRST_TIER_JIT}"
    conf = {"spark.driver.extraJavaOptions": " -XX:-DontCompileHugeMethods -XX:TieredStopAtLevel=4 "}
    # the caller's options come last, so that its own JIT tier wins
    expected = f"{quiet} {FIRST_TIER_JIT} -XX:-DontCompileHugeMethods -XX:TieredStopAtLevel=4"
    assert _java_options(quiet, conf, "driver") == expected
    assert _java_options(quiet, conf, "executor") == f"{quiet} {FIRST_TIER_JIT}"


STOP_AND_START_AGAIN = """
import os
from peers.spark_session import jvm_started, spark_session, stop_session
first = spark_session("local[1]")
pid = first.sparkContext._gateway.proc.pid
stop_session(jvm=True)
try:
    os.kill(pid, 0)
    alive = True
except ProcessLookupError:
    alive = False
stopped = jvm_started()
second = spark_session("local[1]")
print(pid != second.sparkContext._gateway.proc.pid, alive, stopped, second.range(5).count())
"""


@pytest.mark.spark
@pytest.mark.slow  # a JVM of its own, about 15 s: the default run keeps near 15 minutes
def test_stopping_the_jvm_too_lets_the_next_session_start_one_of_its_own():
    """A benchmark comparing masters measures each one's driver JVM apart: the first JVM is gone, and the
    next session runs in another one (in a process of its own: the test session's JVM stays)."""
    done = subprocess.run(
        [sys.executable, "-c", STOP_AND_START_AGAIN], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "False", "5"]
