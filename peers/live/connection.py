"""One node's MQTT connection: reconnect with backoff, an outbox that survives broker restarts, dedup.

Every live node (super-peer, thin-peer, coordinator, CLI) talks to the broker through a
:class:`Connection`.  It uses a persistent session (fixed client id, ``clean_session=False``) and QoS 1, so
the broker keeps a node's subscriptions and queued messages while it is away; published messages stay in
the outbox until the broker acknowledged them and are sent again after a reconnect.  At-least-once can
then deliver a message twice, which receivers drop by its ``(sender, seq)`` (:class:`Dedup`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

import aiomqtt

from peers.live.malformed import MalformedMessage, Rejects
from topologies.errors import EngineError, InputError

Handler = Callable[[str, bytes, bool], Awaitable[None]]
_CHUNK = 64  # publishes awaited together: enough to fill the broker's in-flight window
HIGH_WATER = 200  # incoming messages waiting: the node reports congestion (backpressure, see Coordinator)
LOW_WATER = 20  # ... and the all-clear once its queue is back down to this
LATE_S = 1.0  # wall seconds from a message's sender to its handler beyond which the receiver is congested too
LEASE_S = 1.0  # how long the coordinator holds the horizon for one ``late`` report
_log = logging.getLogger("peers.live")


@dataclass(frozen=True)
class Broker:
    """Where the broker listens and who we are to it."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @staticmethod
    def parse(url: str) -> Broker:
        """``mqtt://HOST:PORT`` (user and password may be given as ``mqtt://USER:PASS@HOST:PORT``).

        Raises :class:`InputError` naming the URL when it is not of that form.
        """
        parsed = urlparse(url)
        if parsed.scheme != "mqtt" or not parsed.hostname:
            raise InputError(f"--broker: expected mqtt://HOST:PORT, got {url!r}")
        try:
            port = parsed.port or 1883
        except ValueError:
            raise InputError(f"--broker: bad port in {url!r}") from None
        return Broker(parsed.hostname, port, parsed.username, parsed.password)

    def as_user(self, username: str | None, password: str | None) -> Broker:
        return Broker(self.host, self.port, username, password)


async def reach(broker: Broker, timeout: float = 5.0) -> None:
    """Connect once and leave.  Raises :class:`EngineError` naming the broker when it does not answer
    within ``timeout`` seconds or refuses the login."""
    client = aiomqtt.Client(
        broker.host, broker.port, username=broker.username, password=broker.password,
        identifier=f"probe-{secrets.token_hex(4)}", timeout=timeout,
    )  # fmt: skip
    try:
        async with asyncio.timeout(timeout):
            async with client:
                pass
    except (aiomqtt.MqttError, OSError, TimeoutError) as err:
        reason = str(err) or f"no answer within {timeout:g} s"
        raise EngineError(f"cannot reach the broker at {broker.host}:{broker.port}: {reason}") from None


def raise_failed(tasks: Iterable[asyncio.Task], what: str) -> None:
    """Raises :class:`EngineError` naming ``what`` when one of ``tasks`` stopped with an error."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise EngineError(f"{what} failed: {task.exception()}") from task.exception()


class Dedup:
    """Remembers the ``(sender, seq)`` of messages already processed."""

    def __init__(self):
        self._seen: dict[str, set[int]] = {}
        self.duplicates = 0

    def first_time(self, sender: str, seq: int) -> bool:
        seen = self._seen.setdefault(sender, set())
        if seq in seen:
            self.duplicates += 1
            return False
        seen.add(seq)
        return True


class Pressure:
    """A node's congestion, sent through ``publish`` (its ``ctl/load`` topic): ``1``/``0`` when its incoming
    queue passes the high-water mark / is back down (:meth:`queue`), and ``late`` (a lease the coordinator
    keeps for ``LEASE_S``) while the messages it handles spent more than ``LATE_S`` wall seconds between
    their sender and its handler (:meth:`transit`).  The transit time also sees a backlog held by the broker
    and the socket buffers, which the queue length misses (paho reads one packet per wake-up); a lease
    rather than a flag, because a node that receives nothing any more could never clear one."""

    def __init__(self, publish: Callable[[bytes], None]):
        self.publish = publish
        self.max_transit_s = 0.0
        self._renew_at = 0.0

    def queue(self, over: bool) -> None:
        self.publish(b"1" if over else b"0")

    def transit(self, seconds: float) -> None:
        self.max_transit_s = max(self.max_transit_s, seconds)
        now = time.monotonic()
        if seconds > LATE_S and now >= self._renew_at:
            self._renew_at = now + LEASE_S / 2
            self.publish(b"late")


class Connection:
    """A node's session with the broker; :meth:`run` until :meth:`close`.

    ``subscriptions`` are topic filters (QoS 1); ``handler(topic, payload, retained)`` is awaited for each
    message in arrival order (a :class:`MalformedMessage` it raises drops the message into ``rejects``);
    ``on_connect`` runs after every (re)connection, before messages flow;
    ``on_pressure(True)`` is called when more than ``HIGH_WATER`` messages wait to be handled,
    ``on_pressure(False)`` when they are back down to ``LOW_WATER``; without ``reconnect`` (the CLI's short
    sessions) a lost connection ends :meth:`run` with an EngineError instead of a new attempt: under
    ``--secure`` a login holds one connection at a time, and two CLIs of one login would otherwise take
    it from each other in turn.
    """

    def __init__(
        self,
        broker: Broker,
        client_id: str,
        subscriptions: Sequence[str],
        handler: Handler,
        *,
        will: tuple[str, bytes] | None = None,
        on_connect: Callable[[], Awaitable[None]] | None = None,
        persistent: bool = True,
        on_pressure: Callable[[bool], None] | None = None,
        reconnect: bool = True,
    ):
        self.broker = broker
        self.client_id = client_id
        self.subscriptions = list(subscriptions)
        self.handler = handler
        self.will = will
        self.on_connect = on_connect
        self.persistent = persistent
        self.reconnect = reconnect
        self.connected = asyncio.Event()
        self.reconnects = 0
        self.max_backlog = 0  # most messages seen waiting in the incoming queue
        self.waiting = 0  # messages waiting behind the one being handled (0: the handler may flush now)
        self.max_outbox = 0  # most messages seen waiting for the broker's acknowledgement
        self.on_pressure = on_pressure
        self.congested = False
        self.rejects = Rejects(client_id)
        self._outbox: deque[tuple[str, bytes, bool]] = deque()
        self._pending = asyncio.Event()
        self._closing = False
        self._stop = asyncio.Event()

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        """Queue a QoS 1 message; it is sent, in order, as soon as the broker is reachable."""
        self._outbox.append((topic, payload, retain))
        self.max_outbox = max(self.max_outbox, len(self._outbox))
        self._pending.set()

    @property
    def outbox_size(self) -> int:
        return len(self._outbox)

    async def flush(self) -> None:
        """Wait until every queued message is acknowledged by the broker."""
        while self._outbox:
            await asyncio.sleep(0.01)

    async def flush_or_give_up(self, timeout: float) -> bool:
        """:meth:`flush`, but for at most ``timeout`` seconds; True when the outbox is empty."""
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Leave the session cleanly (queued messages not yet sent are dropped: :meth:`flush` first)."""
        self._closing = True
        self._stop.set()

    async def run(self) -> None:
        backoff = 0.05
        fresh = self.persistent  # first drop what a previous run's session under this id left queued
        while not self._closing:
            try:
                if fresh:
                    await self._clear_session()
                    fresh = False
                await self._session()
            except aiomqtt.MqttError as err:
                if self._closing:
                    break
                if not self.reconnect:
                    broker = f"{self.broker.host}:{self.broker.port}"
                    state = "lost the connection to" if self.connected.is_set() else "cannot connect to"
                    raise EngineError(f"{state} the broker at {broker}: {err}") from None
                if self.connected.is_set():
                    self.reconnects += 1
                self.connected.clear()
                _log.info("%s: broker unreachable (%s), retrying in %.2f s", self.client_id, err, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
        self.connected.clear()

    async def _clear_session(self) -> None:
        """Connect once with a clean session: the broker discards the queued messages and subscriptions a
        crashed earlier run left under this client id (a persistent session would replay them)."""
        client = aiomqtt.Client(
            self.broker.host, self.broker.port, username=self.broker.username, password=self.broker.password,
            identifier=self.client_id, clean_session=True, timeout=10,
        )  # fmt: skip
        async with client:
            pass

    async def _session(self) -> None:
        will = aiomqtt.Will(self.will[0], self.will[1], qos=1, retain=True) if self.will else None
        client = aiomqtt.Client(
            self.broker.host,
            self.broker.port,
            username=self.broker.username,
            password=self.broker.password,
            identifier=self.client_id,
            clean_session=not self.persistent,
            will=will,
            keepalive=30,  # generous: a node busy installing a large epoch must not look dead
            timeout=10,
            # paho leaves Nagle on: a small publish would wait for the broker's delayed ACK (~40 ms a hop)
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        )
        client.pending_calls_threshold = 2 * _CHUNK  # we keep up to _CHUNK publishes in flight on purpose
        async with client:
            # aiomqtt leaves a lost connection's error in this future when the connection ends unasked (a
            # broker restart): read it, or asyncio logs "Future exception was never retrieved" on stderr
            client._disconnected.add_done_callback(_read_error)
            for topic in self.subscriptions:
                await client.subscribe(topic, qos=1)
            if self.on_connect is not None:
                await self.on_connect()
            self.connected.set()
            tasks = [
                asyncio.create_task(self._receive(client)),
                asyncio.create_task(self._send(client)),
                asyncio.create_task(self._stop.wait()),
            ]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            for task in done:
                task.result()  # a lost connection raises MqttError here: reconnect

    async def _receive(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            self.waiting = waiting = len(client.messages)
            self.max_backlog = max(self.max_backlog, waiting)
            over = waiting > (LOW_WATER if self.congested else HIGH_WATER)
            if self.on_pressure is not None and self.congested != over:
                self.congested = not self.congested
                self.on_pressure(self.congested)
            payload = message.payload if isinstance(message.payload, bytes) else str(message.payload).encode()
            try:
                await self.handler(message.topic.value, payload, message.retain)
            except MalformedMessage as err:
                self.rejects.add(message.topic.value, err)
        raise aiomqtt.MqttError("message stream ended")

    async def _send(self, client: aiomqtt.Client) -> None:
        while True:
            if not self._outbox:
                self._pending.clear()
                await self._pending.wait()
                continue
            chunk = [self._outbox[k] for k in range(min(_CHUNK, len(self._outbox)))]
            results = await asyncio.gather(
                *(client.publish(t, p, qos=1, retain=r, timeout=math.inf) for t, p, r in chunk), return_exceptions=True
            )
            # acknowledged messages leave the outbox; the first failure keeps it and everything after it
            for result in results:
                if isinstance(result, BaseException):
                    raise aiomqtt.MqttError(f"publish failed: {result}")
                self._outbox.popleft()


def _read_error(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
