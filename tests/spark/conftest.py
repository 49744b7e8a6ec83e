"""Spark fixtures: one local session for the whole test run, and a real standalone cluster on 127.0.0.1.

Starting Spark costs seconds, so every test that needs a session shares ``spark`` (session-scoped; other
packages' tests can use it too by importing this fixture).  ``standalone_master`` starts a Spark standalone
master and one worker from the pyspark package's own scripts, waits until the worker has registered, and
stops both processes when the tests using it are done, also after a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from peers.spark_cluster import java_available, standalone_cluster
from topologies.errors import EngineError

LOCAL_MASTER = "local[2]"


@pytest.fixture(scope="session")
def spark():
    """The process's shared SparkSession on local[2]; skips when Java is not installed."""
    if not java_available():
        pytest.skip("Spark needs Java (make system installs it)")
    from peers.spark_session import spark_session, stop_session

    session = spark_session(LOCAL_MASTER)
    yield session
    stop_session()


@pytest.fixture(scope="session")
def standalone_master(tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a running standalone master with one registered worker (2 cores)."""
    if not java_available():
        pytest.skip("Spark needs Java (make system installs it)")
    try:
        with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as url:
            yield url
    except EngineError as err:
        pytest.fail(str(err))
