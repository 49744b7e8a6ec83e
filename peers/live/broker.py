"""A Mosquitto broker process on 127.0.0.1 with a generated configuration (``serve --start-broker``, tests,
benchmarks, demos).

``Mosquitto(directory, port).start()`` writes ``mosquitto.conf`` (listener on 127.0.0.1, persistence in
``directory`` so queued QoS 1 messages survive a restart) and starts ``/usr/sbin/mosquitto`` with it.  The
repository's ``broker.conf`` is the same configuration for port 1883 without persistence, to start by hand.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

from peers.live.connection import Broker
from topologies.errors import EngineError, InputError


def mosquitto_binary() -> str | None:
    """The broker's path, or None when it is not installed."""
    found = shutil.which("mosquitto")
    if found:
        return found
    return "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def broker_config(directory: str, port: int, password_file: str | None = None, acl_file: str | None = None) -> str:
    """The text of a mosquitto.conf: anonymous access unless a password file is given (then every client's
    id is its login)."""
    lines = [
        f"listener {port} 127.0.0.1",
        f"allow_anonymous {'false' if password_file else 'true'}",
        "persistence true",
        f"persistence_location {directory.rstrip('/')}/",
        "autosave_interval 1",
        "max_queued_messages 0",  # 0: no limit; a disconnected persistent session loses nothing
        "max_inflight_messages 100",
        "set_tcp_nodelay true",  # without it Nagle + delayed ACKs add ~40 ms per hop
        "log_dest none",
        # started as root, mosquitto would switch to user "mosquitto", which cannot read our 0600 files
        f"user {getpass.getuser()}",
    ]
    if password_file:
        lines.append(f"password_file {password_file}")
        # a client's id is its login: nobody connects under another's id and takes its session over
        lines.append("use_username_as_clientid true")
    if acl_file:
        lines.append(f"acl_file {acl_file}")
    return "\n".join(lines) + "\n"


class Mosquitto:
    """A broker process.  Raises :class:`EngineError` when the binary is missing or does not start."""

    def __init__(self, directory: str, port: int | None = None, config: str | None = None):
        self.directory = directory
        self.port = port or free_port()
        self.config_path = os.path.join(directory, "mosquitto.conf")
        if config is None:
            config = broker_config(directory, self.port)
        with open(self.config_path, "w", encoding="utf-8") as fh:
            fh.write(config)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Mosquitto:
        binary = mosquitto_binary()
        if binary is None:
            raise EngineError("mosquitto is not installed (apt-get install mosquitto)")
        self.process = subprocess.Popen(
            [binary, "-c", self.config_path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineError(f"mosquitto exited: {self.process.stderr.read().decode().strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EngineError(f"mosquitto did not listen on 127.0.0.1:{self.port} within {timeout:g} s")

    def stop(self) -> None:
        """SIGTERM (Mosquitto then saves its persistence file) and wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def started_broker(broker: Broker, directory: str, config_path: str | None = None) -> Iterator[Mosquitto]:
    """A Mosquitto listening on ``broker``'s port of this machine for the duration of the block, its
    configuration and persistence in ``directory`` (``config_path``: a configuration to use instead, such
    as ``serve --secure`` writes).  Raises InputError for a broker on another host or a port in use,
    EngineError when Mosquitto is missing or does not start."""
    if broker.host not in ("127.0.0.1", "localhost"):
        raise InputError(
            f"--start-broker starts a broker on this machine: --broker must be 127.0.0.1, got {broker.host}"
        )
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Mosquitto binds: a port just freed is free
        try:
            probe.bind(("127.0.0.1", broker.port))
        except OSError:
            raise InputError(
                f"--start-broker: port {broker.port} is in use (a broker running already? leave --start-broker out)"
            ) from None
    os.makedirs(directory, exist_ok=True)
    config = None
    if config_path is not None:
        with open(config_path, encoding="utf-8") as handle:
            config = handle.read()
    with Mosquitto(os.path.abspath(directory), broker.port, config) as process:
        yield process
