"""The one SparkSession of this process: created lazily, quiet, pointed at the project's interpreter.

Starting Spark costs seconds (a JVM and its Python workers), so every caller shares one session per process:
:func:`spark_session` creates it on first use and returns it afterwards; asking for another master stops the
old session first.  Executors run the same interpreter as the driver (``PYSPARK_PYTHON``) and find this
repository's packages through ``spark.executorEnv.PYTHONPATH``, which is all a standalone cluster on this
machine needs to run our operators.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
import warnings
import zlib

from topologies.errors import EngineError, InputError

DEFAULT_MASTER = "local[*]"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONNECT_TIMEOUT_S = 5.0

_LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_STANDALONE_MASTER = re.compile(r"spark://([A-Za-z0-9.\-]+):([0-9]{1,5})")
# a line that starts by naming an exception class (``java.lang.OutOfMemoryError: ...``, ``ValueError``,
# ``Caused by: org.apache.spark.SparkException: ...``, py4j's ``: ...``), not a stack frame (``at ...``)
_EXCEPTION_LINE = re.compile(r"(?:Caused by: |: )?(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Exception|Error)\b")

# Spark's own log4j2 defaults print INFO lines on startup; this keeps the console to errors only.  The
# explicit org.apache.spark logger matters: a shell-launched driver announces "Setting default log level"
# whenever its logger's level differs from the root's.  CodeGenerator is silenced because a plan too large
# to compile (e.g. a hundred OR-of-AND filters) logs a page-long ERROR and then, by design
# (spark.sql.codegen.fallback), runs interpreted; the query still succeeds.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.codegen.name = org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
logger.codegen.level = off
"""

_session = None
_session_key: tuple | None = None  # (master, extra configuration) of the running session
_jvm_started = False  # the driver's JVM outlives a stopped session: its options are fixed from then on
_CONF_KEY = re.compile(r"spark\.[A-Za-z0-9_.\-]+")


def parse_master(url: str | None) -> str:
    """The master URL to use: ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` or ``spark://host:port``.

    ``None`` means :data:`DEFAULT_MASTER`.  Raises InputError naming ``--spark-master`` for anything else.
    """
    if url is None:
        return DEFAULT_MASTER
    if _LOCAL_MASTER.fullmatch(url):
        return url
    found = _STANDALONE_MASTER.fullmatch(url)
    if found and 0 < int(found.group(2)) < 65536:
        return url
    raise InputError(f"--spark-master: {url!r} is not local, local[N], local[*] or spark://host:port")


def parse_conf(pairs: list[str] | None) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as a dict; raises InputError naming the malformed one."""
    found: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not _CONF_KEY.fullmatch(key) or not value:
            raise InputError(f"--spark-conf: {pair!r} is not KEY=VALUE with a spark.* key")
        found[key] = value
    return found


def _check_reachable(master: str) -> None:
    """Fail fast on a standalone master nobody listens on (Spark itself retries for a minute)."""
    found = _STANDALONE_MASTER.fullmatch(master)
    if not found:
        return
    host, port = found.group(1), int(found.group(2))
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        raise EngineError(f"Spark master {master} is not reachable: {err}") from err


def _log_config_path() -> str:
    path = os.path.join(
        tempfile.gettempdir(), f"streamglobe-spark-log4j2-{os.getuid()}-{zlib.crc32(_LOG4J2.encode()):08x}.properties"
    )
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, suffix=".tmp") as fh:
            fh.write(_LOG4J2)
        os.replace(fh.name, path)
    return path


def _executor_pythonpath() -> str:
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (REPO_ROOT, inherited) if p)


_JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# The engine's JVMs hand bytes between the Python workers, which do the work, and Spark.  A fresh JVM (the
# driver's, and every application's executors on a cluster) spends seconds of CPU with the JIT's second
# tier compiling Spark's own code, CPU that the Python workers need when the executors have every core:
# on metro.yaml the JVMs' CPU per run falls from about 9 s to 3.5 s with the first tier alone.  A caller's
# ``-XX:TieredStopAtLevel=4`` (the JVM's default), which comes after it, brings the second tier back.
FIRST_TIER_JIT = "-XX:TieredStopAtLevel=1"


def _java_options(log_option: str, conf: dict[str, str] | None, role: str) -> str:
    """The JVM options of the driver or the executors: the quiet log configuration and the first tier of the
    JIT, then the caller's own ``spark.<role>.extraJavaOptions`` (appended: replacing them would bring
    Spark's INFO lines back; a later option wins over an earlier one)."""
    extra = (conf or {}).get(f"spark.{role}.extraJavaOptions", "").strip()
    return " ".join(option for option in (log_option, FIRST_TIER_JIT, extra) if option)


def failure_line(err: BaseException) -> str:
    """One line telling what went wrong in a Spark or py4j error: the first line of its text that names an
    exception (a Java stack trace ends in frames like ``at java.base/java.lang.Thread.run``, which say
    nothing), else its first line, else the error's class name."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for line in lines:
        if _EXCEPTION_LINE.match(line):
            return line.removeprefix(": ")
    return lines[0] if lines else type(err).__name__


def spark_session(master: str | None = None, conf: dict[str, str] | None = None):
    """The process's SparkSession on ``master`` (validated by :func:`parse_master`) with the extra
    configuration ``conf``, created on first use (a different master or configuration stops the old one).
    ``extraJavaOptions`` in ``conf`` are added to the session's own.  Settings of the driver's JVM
    (``spark.driver.memory``, its ``extraJavaOptions``) only take effect in a process that has not started
    Spark yet.

    Raises InputError for a malformed master URL and EngineError when Java or Spark cannot start or the
    standalone master cannot be reached.
    """
    global _session, _session_key
    master = parse_master(master)
    key = (master, tuple(sorted((conf or {}).items())))
    if _session is not None and _session_key == key:
        return _session
    _check_reachable(master)
    stop_session()
    # pyspark warns on every Arrow call that it was not tested with pandas 3; our tasks use Arrow, not pandas
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log_option = f"-Dlog4j2.configurationFile=file:{_log_config_path()}"
    try:
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master(master)
            .appName("streamglobe-emulator")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.extraJavaOptions", _java_options(log_option, conf, "driver"))
            .config("spark.executor.extraJavaOptions", _java_options(log_option, conf, "executor"))
            .config("spark.pyspark.python", sys.executable)
            .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            .config("spark.executorEnv.PYTHONPATH", _executor_pythonpath())
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", "4")
        )
        if master.startswith("local") and "spark.driver.memory" not in (conf or {}):
            session = session.config("spark.driver.memory", local_driver_memory())
        for name, value in (conf or {}).items():
            if name not in _JAVA_OPTIONS:
                session = session.config(name, value)
        session = session.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
    except Exception as err:
        raise EngineError(f"Spark could not start on {master}: {failure_line(err)}") from err
    _session, _session_key = session, key
    global _jvm_started
    _jvm_started = True
    return session


def local_driver_memory() -> str:
    """``spark.driver.memory`` for a ``local`` master when the caller gives none: a quarter of the
    machine's memory, between 1 and 8 GiB.  On a local master the executors are threads of the driver's
    JVM, so its heap holds every running task's data (Spark's own default, 1 GiB, is sized for a driver
    that only coordinates; two strategies of a 2,000,000-tuple scenario at once outgrow it)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "1g"
    return f"{max(1, min(8, total // 4 // 2**30))}g"


def jvm_started() -> bool:
    """Whether this process has started Spark's JVM (whose options, ``extraJavaOptions`` included, a later
    session can no longer change)."""
    return _jvm_started


def stop_session(jvm: bool = False) -> None:
    """Stop the process's session, if any (the next :func:`spark_session` starts a new one).  With ``jvm``
    also Spark's JVM, which otherwise outlives its sessions: the next session then starts a JVM of its own,
    with its own options and memory (a benchmark comparing masters measures each one's driver apart)."""
    global _session, _session_key, _jvm_started
    if _session is not None:
        _session.stop()
    _session, _session_key = None, None
    if jvm:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
            process = getattr(gateway, "proc", None)
            if process is not None:
                # the context is stopped; a JVM let to shut down by itself now prints the failures of
                # its connections to a cluster's executors closing under it
                process.kill()
                process.wait()
        SparkContext._gateway, SparkContext._jvm = None, None
        _jvm_started = False
